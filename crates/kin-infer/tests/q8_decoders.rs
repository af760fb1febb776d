//! Whole decoders in the q8 activation mode (docs/numerics.md): a quantized GGUF file's
//! logits are identical on every exact tier, at 1, 2 and 7 threads, in one pass, in chunks
//! and token by token, and for a sequence decoded alone or in a `decode_batch` beside others;
//! they stay close to the f32 mode's (the activation rounding only); the mode is reported and
//! refused where it cannot apply.

mod support;

use kin_infer::backend::create_compute_with;
use kin_infer::gpu::GpuCompute;
use kin_infer::kernels::Tier;
use kin_infer::models::decoders::{load_decoder, BatchScratch, Decoder, LogitsRows};
use kin_infer::{Activations, Generator, GeneratorOptions, Numerics};
use std::path::PathBuf;
use support::decoder::{bits, chunked_logits, full_logits, gguf, prompt, QUANTIZED_GGUF};

fn load(path: &std::path::Path, be: &dyn GpuCompute) -> Box<dyn Decoder> {
    load_decoder(path, be).unwrap_or_else(|e| panic!("load {}: {e}", path.display()))
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn q8_logits_are_the_same_on_every_tier_thread_count_and_chunking() {
    for name in QUANTIZED_GGUF {
        let path = gguf(&format!("{name}.gguf"));
        let mut first: Option<Vec<u32>> = None;
        for tier in Tier::available_exact() {
            let be = create_compute_with(Some(tier), Activations::Q8).unwrap();
            let m = load(&path, be.as_ref());
            assert_eq!(be.numerics(), Numerics::Q8, "{name}: runs q8");
            let ids = prompt(17, m.spec().vocab_size);
            let want = bits(&full_logits(m.as_ref(), be.as_ref(), &ids));
            for split in [&[4][..], &[9, 3], &[]] {
                let got = bits(&chunked_logits(m.as_ref(), be.as_ref(), &ids, split));
                assert_eq!(got, want, "{name} tier {}: chunks {split:?}", tier.name());
            }
            for threads in [2, 7] {
                let got =
                    pool(threads).install(|| bits(&full_logits(m.as_ref(), be.as_ref(), &ids)));
                assert_eq!(got, want, "{name} tier {}: {threads} threads", tier.name());
            }
            match &first {
                None => first = Some(want),
                Some(f) => assert_eq!(&want, f, "{name}: tier {} differs", tier.name()),
            }
        }
    }
}

/// Each sequence of a batched decode step has the bits of its own step alone.
#[test]
fn q8_decode_batch_rows_equal_each_sequence_alone() {
    let be = create_compute_with(None, Activations::Q8).unwrap();
    let m = load(&gguf("llama_gqa.q4_0.gguf"), be.as_ref());
    let vocab = m.spec().vocab_size;
    let prompts: Vec<Vec<u32>> = [5usize, 9, 2].iter().map(|&n| prompt(n, vocab)).collect();
    let next = [7u32, 3, 11];
    let mut alone = Vec::new();
    for (p, &id) in prompts.iter().zip(&next) {
        let mut c = m.new_cache(16).unwrap();
        m.forward(be.as_ref(), p, &mut c, LogitsRows::Last).unwrap();
        alone.push(bits(
            m.forward(be.as_ref(), &[id], &mut c, LogitsRows::Last)
                .unwrap(),
        ));
    }
    let mut caches: Vec<_> = prompts
        .iter()
        .map(|p| {
            let mut c = m.new_cache(16).unwrap();
            m.forward(be.as_ref(), p, &mut c, LogitsRows::Last).unwrap();
            c
        })
        .collect();
    let mut refs: Vec<_> = caches.iter_mut().collect();
    let mut scratch = BatchScratch::default();
    let rows = m
        .decode_batch(be.as_ref(), &next, &mut refs, &mut scratch)
        .unwrap();
    for (i, want) in alone.iter().enumerate() {
        assert_eq!(&bits(&rows[i * vocab..(i + 1) * vocab]), want, "slot {i}");
    }
}

/// q8 differs from f32 by the activation rounding only: the logits stay within a few
/// percent of their range, and most positions keep their greedy token.
#[test]
fn q8_logits_stay_close_to_the_f32_modes() {
    for name in QUANTIZED_GGUF {
        let path = gguf(&format!("{name}.gguf"));
        let q8 = create_compute_with(None, Activations::Q8).unwrap();
        let f32 = create_compute_with(None, Activations::F32).unwrap();
        let (mq, mf) = (load(&path, q8.as_ref()), load(&path, f32.as_ref()));
        assert_eq!(f32.numerics(), Numerics::F32);
        let vocab = mq.spec().vocab_size;
        let ids = prompt(17, vocab);
        let a = full_logits(mq.as_ref(), q8.as_ref(), &ids);
        let b = full_logits(mf.as_ref(), f32.as_ref(), &ids);
        assert_ne!(bits(&a), bits(&b), "{name}: q8 is its own arithmetic");
        // Relative RMS distance: the activation rounding (8 bits per block) is noise a few
        // percent of the logits' size, like the weights' own 4- and 8-bit rounding.
        let rms = |v: &mut dyn Iterator<Item = f64>| {
            let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x * x, n + 1));
            (s / n as f64).sqrt()
        };
        let dist = rms(&mut a.iter().zip(&b).map(|(x, y)| (x - y) as f64));
        let size = rms(&mut b.iter().map(|&y| y as f64));
        // The same distance that quantizing the weights made (the file against its F32
        // original, both with f32 activations): the activation rounding is of that class.
        let orig = gguf(&format!("{}.f32.gguf", name.split('.').next().unwrap()));
        let c = full_logits(load(&orig, f32.as_ref()).as_ref(), f32.as_ref(), &ids);
        let weights = rms(&mut b.iter().zip(&c).map(|(x, y)| (x - y) as f64));
        eprintln!(
            "{name}: rms(q8 - f32) / rms = {:.4}, rms(quantized - F32 original) / rms = {:.4}",
            dist / size,
            weights / size
        );
        assert!(
            dist <= 0.06 * size && dist <= 2.0 * weights,
            "{name}: rms(q8 - f32) {dist}, weights' own {weights}, rms {size}"
        );
        let argmax = |r: &[f32]| (0..r.len()).max_by(|&i, &j| r[i].total_cmp(&r[j])).unwrap();
        let same = (0..ids.len())
            .filter(|&p| {
                argmax(&a[p * vocab..(p + 1) * vocab]) == argmax(&b[p * vocab..(p + 1) * vocab])
            })
            .count();
        assert!(
            same * 10 >= ids.len() * 8,
            "{name}: greedy tokens agree at {same}/{}",
            ids.len()
        );
    }
}

#[test]
fn the_mode_is_resolved_reported_and_refused_where_it_cannot_apply() {
    let load = |path: PathBuf, activations| {
        Generator::load(
            &path,
            &GeneratorOptions {
                activations,
                ..Default::default()
            },
        )
    };
    let q = gguf("llama_gqa.q4_0.gguf");
    assert_eq!(
        load(q.clone(), Some(Activations::Q8)).unwrap().numerics(),
        Numerics::Q8
    );
    // auto is f32 until the q8 kernels are the faster ones (kin_infer_core::activations).
    assert_eq!(
        load(q.clone(), Some(Activations::Auto)).unwrap().numerics(),
        Numerics::F32
    );
    assert_eq!(
        load(q.clone(), Some(Activations::F32)).unwrap().numerics(),
        Numerics::F32
    );
    assert_eq!(
        load(gguf("llama_gqa.f32.gguf"), Some(Activations::Auto))
            .unwrap()
            .numerics(),
        Numerics::F32
    );
    let err = load(gguf("llama_gqa.f32.gguf"), Some(Activations::Q8))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("activations q8") && err.contains("no ggml-quantized weight"),
        "{err}"
    );
    assert_eq!(Numerics::Q8.version(), kin_infer::Q8_NUMERICS_VERSION);
}
