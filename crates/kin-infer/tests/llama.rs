//! LLaMA decoders against the transformers goldens of python/gen_fixtures_llama.py
//! (tests/decoder_fixtures/llama_gqa: GQA, untied head; llama_mqa: MQA, tied embeddings):
//! full-prompt logits within `tol`, greedy tokens exactly, incremental decoding with the KV
//! cache equal to the full forward pass bit for bit, 1 vs 2 threads and every SIMD tier
//! bit-identical, and clear errors for a prompt longer than the context and an unknown id.

use kin_infer::generate::{generate_greedy, KvCache};
use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::kernels::Tier;
use kin_infer::models::decoders::{load_decoder, Decoder, LogitsRows};
use serde_json::Value;
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 2] = ["llama_gqa", "llama_mqa"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/decoder_fixtures")
        .join(name)
}

fn load(name: &str, be: &dyn GpuCompute) -> Box<dyn Decoder> {
    load_decoder(&fixture(name), be).unwrap_or_else(|e| panic!("load {name}: {e}"))
}

fn golden(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name).join("golden.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Logits of every position of `ids` in one pass over a fresh cache.
fn full_logits(m: &dyn Decoder, be: &dyn GpuCompute, ids: &[u32]) -> Vec<f32> {
    let mut cache = m.new_cache(ids.len()).unwrap();
    m.forward(be, ids, &mut cache, LogitsRows::All)
        .unwrap()
        .to_vec()
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn logits_and_greedy_tokens_match_transformers() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let m = load(name, be.as_ref());
        let g = golden(name);
        let tol = g["tol"].as_f64().unwrap() as f32;
        let vocab = m.spec().vocab_size;
        let mut worst = 0.0f32;
        let mut generated = 0;
        for case in g["cases"].as_array().unwrap() {
            let cname = case["name"].as_str().unwrap();
            let prompt = ids(&case["input_ids"][0]);
            match case["kind"].as_str().unwrap() {
                "logits" => {
                    let got = full_logits(m.as_ref(), be.as_ref(), &prompt);
                    let want: Vec<f32> = case["expected"][0]
                        .as_array()
                        .unwrap()
                        .iter()
                        .flat_map(|row| row.as_array().unwrap().iter())
                        .map(|x| x.as_f64().unwrap() as f32)
                        .collect();
                    assert_eq!(got.len(), prompt.len() * vocab, "{name}/{cname}");
                    assert_eq!(got.len(), want.len(), "{name}/{cname}");
                    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                        let d = (a - b).abs();
                        assert!(
                            d <= tol,
                            "{name}/{cname}: position {}, token {}: {a} vs {b}",
                            i / vocab,
                            i % vocab
                        );
                        worst = worst.max(d);
                    }
                }
                "generate" => {
                    let n = case["max_new_tokens"].as_u64().unwrap() as usize;
                    let mut streamed = vec![];
                    let got =
                        generate_greedy(m.as_ref(), be.as_ref(), &prompt, n, |t| streamed.push(t))
                            .unwrap();
                    assert_eq!(got, ids(&case["expected_tokens"][0]), "{name}/{cname}");
                    assert_eq!(streamed, got);
                    generated += 1;
                }
                k => panic!("unexpected case kind {k}"),
            }
        }
        assert!(generated > 0);
        eprintln!("{name}: max |diff| of logits {worst:e} (tol {tol:e})");
    }
}

/// The key decoder test: prefill + one token at a time (and other chunkings) give exactly
/// the full forward pass's logits.
#[test]
fn incremental_decoding_equals_the_full_forward_bit_for_bit() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let m = load(name, be.as_ref());
        let vocab = m.spec().vocab_size;
        let n = m.spec().max_sequence_length.min(40);
        let prompt: Vec<u32> = (0..n as u32)
            .map(|i| (i * 37 + 11) % vocab as u32)
            .collect();
        let full = full_logits(m.as_ref(), be.as_ref(), &prompt);
        for split in [vec![1], vec![5], vec![17, 1], vec![3, 20, 2], vec![n - 1]] {
            let mut cache: KvCache = m.new_cache(n).unwrap();
            let mut got = Vec::with_capacity(full.len());
            let mut pos = 0;
            for &len in &split {
                got.extend_from_slice(
                    m.forward(
                        be.as_ref(),
                        &prompt[pos..pos + len],
                        &mut cache,
                        LogitsRows::All,
                    )
                    .unwrap(),
                );
                pos += len;
            }
            while pos < n {
                let last = m
                    .forward(
                        be.as_ref(),
                        &prompt[pos..pos + 1],
                        &mut cache,
                        LogitsRows::Last,
                    )
                    .unwrap();
                got.extend_from_slice(last);
                pos += 1;
            }
            assert_eq!(cache.len(), n);
            assert!(
                bits(&got) == bits(&full),
                "{name}: chunks {split:?} then single tokens differ from the full pass"
            );
        }
    }
}

#[test]
fn identical_across_threads_and_tiers() {
    for name in FIXTURES {
        let mut reference: Option<(Vec<u32>, Vec<u32>)> = None;
        for tier in Tier::available() {
            let be = create_compute(Some(tier)).unwrap();
            let m = load(name, be.as_ref());
            let prompt: Vec<u32> = (0..23u32).map(|i| (i * 13 + 5) % 90).collect();
            for threads in [1, 2] {
                let pool = kin_infer::threads::build_pool(threads).unwrap();
                let (logits, tokens) = pool.install(|| {
                    (
                        bits(&full_logits(m.as_ref(), be.as_ref(), &prompt)),
                        generate_greedy(m.as_ref(), be.as_ref(), &prompt, 8, |_| {}).unwrap(),
                    )
                });
                match &reference {
                    None => reference = Some((logits, tokens)),
                    Some((l, t)) => {
                        assert!(
                            &logits == l,
                            "{name}: logits differ on {} with {threads} threads",
                            tier.name()
                        );
                        assert_eq!(&tokens, t, "{name}: tokens on {}", tier.name());
                    }
                }
            }
        }
    }
}

#[test]
fn prompt_longer_than_the_context_is_a_clear_error() {
    let be = create_compute(None).unwrap();
    let m = load("llama_gqa", be.as_ref());
    let ctx = m.spec().max_sequence_length;
    let prompt = vec![5u32; ctx + 1];
    let e = generate_greedy(m.as_ref(), be.as_ref(), &prompt, 4, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("context") && e.contains(&ctx.to_string()), "{e}");
    // Prompt fits, but the new tokens would not.
    let prompt = vec![5u32; ctx - 2];
    let e = generate_greedy(m.as_ref(), be.as_ref(), &prompt, 4, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("context"), "{e}");
    // Exactly fills the context: fine.
    assert_eq!(
        generate_greedy(m.as_ref(), be.as_ref(), &prompt, 3, |_| {})
            .unwrap()
            .len(),
        3
    );
    // A cache past the context, and a chunk past the cache.
    assert!(m.new_cache(ctx + 1).is_err());
    let mut cache = m.new_cache(4).unwrap();
    let e = m
        .forward(be.as_ref(), &[1, 2, 3, 4, 5], &mut cache, LogitsRows::Last)
        .unwrap_err()
        .to_string();
    assert!(e.contains("capacity"), "{e}");
    assert_eq!(
        cache.len(),
        0,
        "a failed forward leaves the cache unchanged"
    );
}

#[test]
fn out_of_vocabulary_id_is_a_clear_error() {
    let be = create_compute(None).unwrap();
    let m = load("llama_mqa", be.as_ref());
    let vocab = m.spec().vocab_size as u32;
    let e = generate_greedy(m.as_ref(), be.as_ref(), &[3, vocab, 4], 2, |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("token id {vocab}")) && e.contains("vocabulary"),
        "{e}"
    );
}

#[test]
fn unsupported_rope_scaling_is_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("kin-llama-rope-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = fixture("llama_gqa");
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    // linear, dynamic and llama3 are supported (tests/llama_rope.rs); yarn is not yet.
    cfg["rope_parameters"]["rope_type"] = "yarn".into();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(src.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    let be = create_compute(None).unwrap();
    let e = load_decoder(&dir, be.as_ref()).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        matches!(e, kin_infer::InferError::Unsupported(_)) && e.to_string().contains("yarn"),
        "{e}"
    );
}
