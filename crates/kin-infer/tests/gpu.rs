//! A GPU backend end to end (features `wgpu`, `cuda`; run with `KIN_INFER_BACKEND=wgpu` by
//! scripts/test-gpu.sh on lavapipe in CI, and under either backend on a real GPU by
//! scripts/run-gpu-tests.sh): every encoder and decoder fixture's golden through the device,
//! incremental decoding equal to the full forward pass on the device bit for bit, device
//! embeddings identical run to run and across batch compositions, and MiniLM against
//! sentence-transformers. Every test first asserts that the backend really is the GPU one
//! asked for, so a run without the variable fails instead of passing on the CPU.
#![cfg(any(feature = "wgpu", feature = "cuda"))]

mod support;

use kin_infer::golden::{check, GoldenFile};
use kin_infer::gpu::create_compute;
use kin_infer::EmbedderOptions;
use support::decoder::{
    assert_goldens_match, assert_incremental_equals_full, bits as dbits, context_up_to_40,
    full_logits, load as load_decoder, prompt,
};
use support::{bits, fixture, fixtures_dir, load, random_ids};

const DECODERS: [&str; 18] = [
    "gemma2_hd",
    "gemma2_sw",
    "gemma_tied",
    "gpt2_bare",
    "gpt2_small",
    "llama_bf16",
    "llama_gqa",
    "llama_mqa",
    "llama_rope_dynamic",
    "llama_rope_linear",
    "llama_rope_llama3",
    "llama_sharded",
    "mistral_hd",
    "mistral_sw",
    "phi3_longrope",
    "phi_partial",
    "qwen2_bias",
    "qwen2_sw",
];

/// The GPU backend `KIN_INFER_BACKEND` names ("wgpu" or "cuda").
fn require_gpu() -> String {
    let want = std::env::var("KIN_INFER_BACKEND").unwrap_or_default();
    assert!(
        want == "wgpu" || want == "cuda",
        "these tests need KIN_INFER_BACKEND=wgpu or cuda (scripts/test-gpu.sh, scripts/run-gpu-tests.sh)"
    );
    let be = create_compute(None).expect("the GPU backend");
    assert_eq!(be.name(), want);
    eprintln!("device: {}", be.device());
    want
}

#[test]
fn every_encoder_fixture_passes_its_golden_on_the_device() {
    let backend = require_gpu();
    let mut names: Vec<_> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            p.join("golden.json").is_file().then_some(p)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 20, "encoder fixtures: {}", names.len());
    for dir in names {
        let golden = GoldenFile::load(&dir.join("golden.json")).unwrap();
        let e = load(&dir, EmbedderOptions::default());
        assert_eq!(e.backend_name(), backend);
        let r = check(&e, &golden).unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            r.compared > 0 && r.passed(),
            "{name}: max |diff| {} > tol {}",
            r.max_diff,
            r.tol
        );
        eprintln!("{name}: max |diff| {:e} (tol {:e})", r.max_diff, r.tol);
    }
}

#[test]
fn every_decoder_fixture_passes_its_golden_on_the_device() {
    require_gpu();
    assert_goldens_match(&DECODERS, true, |_, _| {});
}

#[test]
fn incremental_decoding_equals_the_full_forward_on_the_device() {
    require_gpu();
    let splits = |n: usize| vec![vec![1], vec![n / 2], vec![1, n / 3], vec![n - 1]];
    // Dynamic rotary scaling past its table rotates a chunk with the frequencies of the
    // length it ends at (as transformers does), so it is compared within its table (16).
    let (dynamic, rest): (Vec<&str>, Vec<&str>) =
        DECODERS.iter().partition(|n| **n == "llama_rope_dynamic");
    assert_incremental_equals_full(&rest, context_up_to_40, splits);
    assert_incremental_equals_full(&dynamic, |_| vec![16], splits);
}

/// A batch's embeddings are the same bits as each sequence alone, in another order, and in a
/// second run: each output element is reduced in one fixed order whatever else is in the batch.
#[test]
fn device_embeddings_are_batch_invariant_and_repeatable() {
    require_gpu();
    // Absolute positions, T5's relative buckets, DeBERTa's dense bias and convolution,
    // ALiBi (jina), rotary (nomic), CLS/max pooling with Dense (albert_dense).
    for name in [
        "bert_tiny",
        "t5_tiny",
        "deberta_v2_conv",
        "jina_tiny",
        "nomic_tiny",
        "albert_dense",
    ] {
        let e = load(&fixture(name), EmbedderOptions::default());
        let vocab = e.config().vocab_size;
        let seqs = random_ids(5, vocab, &[7, 1, 13, 4, 9], 42);
        let refs: Vec<&[u32]> = seqs.iter().map(|s| &s[..]).collect();
        let batch = bits(&e.embed_tokens(&refs, None).unwrap());
        let again = bits(&e.embed_tokens(&refs, None).unwrap());
        assert_eq!(batch, again, "{name}: run to run");
        for (i, s) in refs.iter().enumerate() {
            let alone = bits(&e.embed_tokens(&[s], None).unwrap());
            assert_eq!(
                alone[0], batch[i],
                "{name}: sequence {i} alone vs in the batch"
            );
        }
        let reversed: Vec<&[u32]> = refs.iter().rev().copied().collect();
        let mut rev = bits(&e.embed_tokens(&reversed, None).unwrap());
        rev.reverse();
        assert_eq!(rev, batch, "{name}: reversed batch");
    }
}

#[test]
fn device_logits_are_repeatable() {
    require_gpu();
    let be = create_compute(None).unwrap();
    for name in ["llama_gqa", "gemma2_sw", "phi3_longrope"] {
        let m = load_decoder(name, be.as_ref());
        let p = prompt(24, m.spec().vocab_size);
        let a = dbits(&full_logits(m.as_ref(), be.as_ref(), &p));
        let b = dbits(&full_logits(m.as_ref(), be.as_ref(), &p));
        assert!(a == b, "{name}: two runs differ");
    }
}

/// all-MiniLM-L6-v2 on the device against sentence-transformers (tests/golden/minilm.json,
/// 30 texts, tol 1e-5), through the real tokenizer.
#[test]
fn minilm_matches_sentence_transformers_on_the_device() {
    require_gpu();
    let dir = std::env::var_os("KIN_MINILM_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| support::repo_root().join("models/all-MiniLM-L6-v2"));
    if !dir.join("model.safetensors").is_file() {
        assert!(
            std::env::var("KIN_REQUIRE_MINILM").map_or(true, |v| v != "1"),
            "KIN_REQUIRE_MINILM=1 but all-MiniLM-L6-v2 is not at {}",
            dir.display()
        );
        eprintln!("SKIPPED: all-MiniLM-L6-v2 not found (scripts/fetch-minilm.sh)");
        return;
    }
    let golden = GoldenFile::load(&support::repo_root().join("tests/golden/minilm.json")).unwrap();
    let e = load(&dir, EmbedderOptions::default());
    let r = check(&e, &golden).unwrap();
    assert!(
        r.cases == 30 && r.passed(),
        "MiniLM on the device: max |diff| {} > tol {} ({} compared)",
        r.max_diff,
        r.tol,
        r.compared
    );
    eprintln!(
        "MiniLM on the device: max |diff| {:e} (tol {:e})",
        r.max_diff, r.tol
    );
}

/// Quantized GGUF decoders on the device (Q8_0, Q4_0 and Q4_1 kept in their blocks there):
/// the logits of each file against its F32 twin (every tensor dequantized by `gguf.quants`) on
/// the device, and against the CPU's logits of the same quantized file.
#[test]
fn quantized_gguf_files_on_the_device_match_their_f32_twins() {
    require_gpu();
    let be = create_compute(None).unwrap();
    let cpu = kin_infer::backend::CpuCompute::new().unwrap();
    let dir = support::repo_root().join("tests/fixtures/gguf/decoders");
    for name in support::decoder::QUANTIZED_GGUF {
        let load = |file: String, be: &dyn kin_infer::backend::GpuCompute| {
            kin_infer::models::decoders::load_decoder(&dir.join(file), be)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let q = load(format!("{name}.gguf"), be.as_ref());
        let twin = load(format!("{name}.twin.gguf"), be.as_ref());
        let on_cpu = load(format!("{name}.gguf"), &cpu);
        let p = prompt(12, q.spec().vocab_size);
        let a = full_logits(q.as_ref(), be.as_ref(), &p);
        let b = full_logits(twin.as_ref(), be.as_ref(), &p);
        let c = full_logits(on_cpu.as_ref(), &cpu, &p);
        let worst = |x: &[f32], y: &[f32]| {
            x.iter()
                .zip(y)
                .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
                .fold(0.0f32, f32::max)
        };
        let (vs_twin, vs_cpu) = (worst(&a, &b), worst(&a, &c));
        assert!(
            vs_twin <= 1e-4 && vs_cpu <= 1e-4,
            "{name}: {vs_twin} {vs_cpu}"
        );
        eprintln!("{name}: vs F32 twin {vs_twin:e}, vs CPU {vs_cpu:e}");
    }
}
