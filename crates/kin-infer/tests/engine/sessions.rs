//! The session API: one loaded [`Generator`] (immutable, shared) serves several sessions from
//! several threads at once, each with its own KV cache and scratch, and every session gets
//! exactly the bits it gets alone. Errors carry a kind a server maps to a status code.

use kin_infer::generate::argmax;
use kin_infer::models::decoders::LogitsRows;
use kin_infer::{ErrorKind, Generator, GeneratorOptions};
use std::path::Path;

fn generator(name: &str, threads: usize) -> Generator {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/decoder_fixtures")
        .join(name);
    Generator::load(
        &dir,
        &GeneratorOptions {
            threads: Some(threads),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

/// Prefill `prompt`, then `steps` greedy tokens; the bits of every step's logits.
fn run(g: &Generator, prompt: &[u32], steps: usize) -> Vec<Vec<u32>> {
    let mut s = g.session(prompt.len() + steps).unwrap();
    let mut out = Vec::new();
    let mut logits = s.forward(prompt, LogitsRows::Last).unwrap().to_vec();
    for _ in 0..steps {
        out.push(logits.iter().map(|v| v.to_bits()).collect());
        let next = argmax(&logits);
        logits = s.forward(&[next], LogitsRows::Last).unwrap().to_vec();
    }
    out
}

#[test]
fn sessions_on_one_model_from_many_threads_match_each_alone() {
    for name in ["llama_gqa", "gpt2_small", "gemma2_sw", "phi_partial"] {
        let g = generator(name, 2);
        let vocab = g.spec().vocab_size as u32;
        let prompts: Vec<Vec<u32>> = (0..4u32)
            .map(|p| (0..5 + p).map(|i| (i * 7 + p * 13 + 1) % vocab).collect())
            .collect();
        let alone: Vec<_> = prompts.iter().map(|p| run(&g, p, 6)).collect();
        let together: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = prompts
                .iter()
                .map(|p| {
                    let g = &g;
                    scope.spawn(move || run(g, p, 6))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(alone, together, "{name}: concurrent sessions changed bits");
    }
}

#[test]
fn session_errors_have_kinds() {
    let g = generator("llama_gqa", 1);
    let ctx = g.spec().max_sequence_length;
    let vocab = g.spec().vocab_size as u32;
    let mut s = g.session(4).unwrap();
    let e = s.forward(&[1, vocab], LogitsRows::Last).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TokenOutOfVocabulary, "{e}");
    let e = s.forward(&[1, 2, 3, 4, 5], LogitsRows::Last).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    assert!(e.to_string().contains("capacity"), "{e}");
    assert_eq!(s.len(), 0, "a failed forward leaves the session unchanged");
    let e = s.forward(&[], LogitsRows::Last).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = g.session(ctx + 1).err().expect("a cache past the context");
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    let e = g.session(0).err().expect("an empty cache");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    // The generation loop's own checks carry the same kind.
    let params = kin_infer::generate::SamplingParams {
        max_new_tokens: ctx + 1,
        ..Default::default()
    };
    let e = g
        .generate(&[1, 2], &params, None, |_| {
            std::ops::ControlFlow::Continue(())
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    let long: Vec<u32> = vec![1; ctx + 1];
    let e = g
        .generate(&long, &Default::default(), None, |_| {
            std::ops::ControlFlow::Continue(())
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    let e = Generator::load(
        Path::new("/nonexistent/model"),
        &GeneratorOptions::default(),
    )
    .err()
    .expect("no such directory");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

/// A model by fixture name: a decoder directory, or a GGUF file under tests/fixtures/gguf.
fn model_path(name: &str) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests");
    if name.ends_with(".gguf") {
        root.join("fixtures/gguf/decoders").join(name)
    } else {
        root.join("decoder_fixtures").join(name)
    }
}

const BATCH_MODELS: [&str; 9] = [
    "llama_gqa",
    "gpt2_small",
    "gemma2_sw",
    "phi_partial",
    "phi3_longrope",
    "qwen2_bias",
    "llama_rope_dynamic",
    "llama_gqa.q4_0.gguf",
    "qwen2_bias.q8_0.gguf",
];

#[test]
fn a_batched_decode_step_gives_each_sequence_its_own_bits() {
    use kin_infer::backend::create_compute;
    use kin_infer::models::decoders::{load_decoder, BatchScratch};
    for name in BATCH_MODELS {
        let be = create_compute(None).unwrap();
        let m = load_decoder(&model_path(name), be.as_ref()).unwrap();
        let (vocab, ctx) = (m.spec().vocab_size, m.spec().max_sequence_length);
        // Sequences at different positions (prompts of 1..=7 tokens), one cache each, and a
        // twin cache per sequence stepped alone.
        let prompts: Vec<Vec<u32>> = (1..=7u32)
            .map(|n| {
                (0..n)
                    .map(|i| (i * 11 + n * 5 + 2) % vocab as u32)
                    .collect()
            })
            .collect();
        let cap = ctx.min(24);
        let mut batch: Vec<_> = prompts.iter().map(|_| m.new_cache(cap).unwrap()).collect();
        let mut alone: Vec<_> = prompts.iter().map(|_| m.new_cache(cap).unwrap()).collect();
        let mut next = Vec::new();
        for (p, (b, a)) in prompts.iter().zip(batch.iter_mut().zip(alone.iter_mut())) {
            let lb = m
                .forward(be.as_ref(), p, b, LogitsRows::Last)
                .unwrap()
                .to_vec();
            m.forward(be.as_ref(), p, a, LogitsRows::Last).unwrap();
            next.push(argmax(&lb));
        }
        let mut scratch = BatchScratch::default();
        for step in 0..8 {
            let mut refs: Vec<_> = batch.iter_mut().collect();
            let got = m
                .decode_batch(be.as_ref(), &next, &mut refs, &mut scratch)
                .unwrap()
                .to_vec();
            for (r, a) in alone.iter_mut().enumerate() {
                let want = m
                    .forward(be.as_ref(), &[next[r]], a, LogitsRows::Last)
                    .unwrap();
                let row = &got[r * vocab..(r + 1) * vocab];
                assert!(
                    row.iter()
                        .zip(want)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{name}: step {step}, sequence {r}: batched logits differ from alone"
                );
            }
            next = got.chunks_exact(vocab).map(argmax).collect();
        }
        // A sequence whose cache is full fails the whole step and changes no cache.
        let mut full = m.new_cache(1).unwrap();
        m.forward(be.as_ref(), &[1], &mut full, LogitsRows::Last)
            .unwrap();
        let lens: Vec<usize> = batch.iter().map(|c| c.len()).collect();
        let mut refs: Vec<_> = batch.iter_mut().collect();
        refs.push(&mut full);
        let mut ids = next.clone();
        ids.push(1);
        assert!(m
            .decode_batch(be.as_ref(), &ids, &mut refs, &mut scratch)
            .is_err());
        assert_eq!(
            batch.iter().map(|c| c.len()).collect::<Vec<_>>(),
            lens,
            "{name}"
        );
    }
}

#[test]
fn steppers_decoded_together_generate_what_each_generates_alone() {
    use kin_infer::generate::{SamplingParams, Stepper};
    use kin_infer::models::decoders::BatchScratch;
    for name in ["llama_gqa", "gemma_tied", "llama_gqa.q4_1.gguf"] {
        let g = Generator::load(
            &model_path(name),
            &GeneratorOptions {
                threads: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        let vocab = g.spec().vocab_size as u32;
        let reqs: Vec<(Vec<u32>, SamplingParams)> = (0..5u32)
            .map(|i| {
                let prompt = (0..2 + i * 3).map(|k| (k * 13 + i + 3) % vocab).collect();
                let params = SamplingParams {
                    temperature: if i % 2 == 0 { 0.0 } else { 0.9 },
                    top_p: 0.95,
                    seed: u64::from(i),
                    max_new_tokens: 4 + 5 * i as usize,
                    eos_token_ids: vec![2],
                    ..Default::default()
                };
                (prompt, params)
            })
            .collect();
        let alone: Vec<Vec<u32>> = reqs
            .iter()
            .map(|(p, s)| {
                g.generate(p, s, None, |_| std::ops::ControlFlow::Continue(()))
                    .unwrap()
                    .tokens
            })
            .collect();
        // Started at different steps, stopping at different steps: the batch changes size.
        let mut running: Vec<(usize, Stepper)> = Vec::new();
        let mut got: Vec<Vec<u32>> = vec![Vec::new(); reqs.len()];
        let mut scratch = BatchScratch::default();
        let mut pending = 0;
        while pending < reqs.len() || !running.is_empty() {
            if pending < reqs.len() {
                // Odd requests feed their prompt in chunks of 3 between the others' steps.
                let (p, s) = &reqs[pending];
                let st = if pending % 2 == 0 {
                    g.start(p, s, false).unwrap()
                } else {
                    g.begin(p, s, false).unwrap()
                };
                running.push((pending, st));
                pending += 1;
            }
            for (_, st) in running.iter_mut().filter(|(_, st)| st.is_prefilling()) {
                g.prefill(st, 3).unwrap();
            }
            running.retain_mut(|(i, st)| {
                if st.is_prefilling() {
                    return true;
                }
                let stop = st
                    .emit(None, |e| {
                        got[*i].push(e.id);
                        std::ops::ControlFlow::Continue(())
                    })
                    .unwrap();
                stop.is_none()
            });
            let mut refs: Vec<&mut Stepper> = running
                .iter_mut()
                .map(|(_, s)| s)
                .filter(|s| !s.is_prefilling())
                .collect();
            if !refs.is_empty() {
                g.decode_step(&mut refs, &mut scratch).unwrap();
            }
        }
        assert_eq!(got, alone, "{name}");
    }
}
