//! Scaffolding shared by the decoder test binaries (`llama.rs`, `gpt2.rs`, `gemma.rs`, `gguf_*.rs`,
//! `mistral_qwen2.rs`, `phi.rs`, `llama_rope.rs`): fixture paths under
//! tests/decoder_fixtures, loading, golden cases, full and chunked logits, bits, and the
//! checks every decoder family runs: golden parity (logits within `tol`, greedy tokens
//! exactly), incremental decoding equal to the full forward pass bit for bit, 1 vs 2 threads
//! and every SIMD tier bit-identical, and clear errors past the context or for unknown ids.
#![allow(dead_code)]

use kin_infer::generate::{generate_greedy, KvCache};
use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::kernels::Tier;
use kin_infer::models::decoders::{load_decoder, Decoder, LogitsRows};
use kin_infer::InferError;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/decoder_fixtures")
        .join(name)
}

pub fn load(name: &str, be: &dyn GpuCompute) -> Box<dyn Decoder> {
    load_decoder(&fixture(name), be).unwrap_or_else(|e| panic!("load {name}: {e}"))
}

pub fn golden(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name).join("golden.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub fn config(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name).join("config.json")).unwrap())
        .unwrap()
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Logits of every position of `ids` in one pass over a fresh cache.
pub fn full_logits(m: &dyn Decoder, be: &dyn GpuCompute, ids: &[u32]) -> Vec<f32> {
    let mut cache = m.new_cache(ids.len()).unwrap();
    m.forward(be, ids, &mut cache, LogitsRows::All)
        .unwrap()
        .to_vec()
}

/// Logits of every position: the chunks `split`, then one token at a time.
pub fn chunked_logits(
    m: &dyn Decoder,
    be: &dyn GpuCompute,
    ids: &[u32],
    split: &[usize],
) -> Vec<f32> {
    let n = ids.len();
    let mut cache: KvCache = m.new_cache(n).unwrap();
    let mut got = vec![];
    let mut pos = 0;
    for &len in split {
        got.extend_from_slice(
            m.forward(be, &ids[pos..pos + len], &mut cache, LogitsRows::All)
                .unwrap(),
        );
        pos += len;
    }
    while pos < n {
        got.extend_from_slice(
            m.forward(be, &ids[pos..pos + 1], &mut cache, LogitsRows::Last)
                .unwrap(),
        );
        pos += 1;
    }
    assert_eq!(cache.len(), n);
    got
}

pub fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// `n` pseudo-random ids below `vocab`.
pub fn prompt(n: usize, vocab: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 37 + 11) % vocab as u32)
        .collect()
}

/// A temporary directory `kin-{prefix}-{tag}-{pid}` holding fixture `name`'s weights with
/// `cfg` as its config.json; the caller removes it.
pub fn with_config(prefix: &str, name: &str, tag: &str, cfg: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kin-{prefix}-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(
        fixture(name).join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    dir
}

/// Loads fixture `name`'s weights with its config edited by `edit` (from a temporary
/// directory `kin-{prefix}-{tag}-{pid}`, removed afterwards).
pub fn load_edited(
    prefix: &str,
    name: &str,
    tag: &str,
    edit: impl FnOnce(&mut Value),
) -> kin_infer::Result<Box<dyn Decoder>> {
    let mut cfg = config(name);
    edit(&mut cfg);
    let dir = with_config(prefix, name, tag, &cfg);
    let be = create_compute(None).unwrap();
    let m = load_decoder(&dir, be.as_ref());
    std::fs::remove_dir_all(&dir).ok();
    m
}

/// [`load_edited`], which must fail; the error.
pub fn load_edited_err(
    prefix: &str,
    name: &str,
    tag: &str,
    edit: impl FnOnce(&mut Value),
) -> InferError {
    load_edited(prefix, name, tag, edit)
        .err()
        .expect("must fail")
}

/// A config edit for [`assert_config_errors_name_fields`].
pub type Edit = Box<dyn FnOnce(&mut Value)>;

/// Each case `(fixture, tag, edit, field)`: the fixture with its config edited fails to load
/// with a config error that names `field`.
pub fn assert_config_errors_name_fields(prefix: &str, cases: Vec<(&str, &str, Edit, &str)>) {
    for (name, tag, edit, field) in cases {
        let e = load_edited_err(prefix, name, tag, edit);
        assert!(
            matches!(&e, InferError::Config { field: f, .. } if f == field),
            "{name}/{tag}: {e}"
        );
        assert!(e.to_string().contains(field), "{e}");
    }
}

/// The `layer_types` cases every family that reads it shares: a list of the wrong length, and
/// an attention kind this build does not know.
pub fn layer_types_cases(
    fixture: &'static str,
) -> Vec<(&'static str, &'static str, Edit, &'static str)> {
    let len: Edit = Box::new(|c| c["layer_types"] = serde_json::json!(["full_attention"]));
    let kind: Edit = Box::new(|c| {
        c["layer_types"] =
            serde_json::json!(["full_attention", "chunked_attention", "full_attention"])
    });
    vec![
        (fixture, "len", len, "layer_types"),
        (fixture, "kind", kind, "layer_types"),
    ]
}

/// A copy of fixture `name` in a temporary directory `kin-{prefix}-{name}-{tag}-{pid}` with
/// its config edited by `edit`; removed on drop.
pub struct Edited(pub PathBuf);

impl Edited {
    pub fn new(prefix: &str, name: &str, tag: &str, edit: impl FnOnce(&mut Value)) -> Self {
        let mut cfg = config(name);
        edit(&mut cfg);
        Edited(with_config(prefix, name, &format!("{name}-{tag}"), &cfg))
    }

    pub fn load(&self, be: &dyn GpuCompute) -> Box<dyn Decoder> {
        load_decoder(&self.0, be).unwrap()
    }
}

impl Drop for Edited {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// Every golden case of every fixture: full-prompt logits within the golden's `tol`, greedy
/// tokens exactly (and, when `check_streamed`, streamed as returned). `per_model` runs extra
/// checks on each loaded model.
pub fn assert_goldens_match(
    fixtures: &[&str],
    check_streamed: bool,
    per_model: impl Fn(&str, &dyn Decoder),
) {
    let be = create_compute(None).unwrap();
    for &name in fixtures {
        let m = load(name, be.as_ref());
        per_model(name, m.as_ref());
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
                    if check_streamed {
                        assert_eq!(streamed, got);
                    }
                    generated += 1;
                }
                k => panic!("unexpected case kind {k}"),
            }
        }
        assert!(generated > 0);
        eprintln!("{name}: max |diff| of logits {worst:e} (tol {tol:e})");
    }
}

/// For every fixture and every prompt length `lengths(model)`: the chunks of each of
/// `splits(n)`, then one token at a time, give exactly the full forward pass's logits.
pub fn assert_incremental_equals_full(
    fixtures: &[&str],
    lengths: impl Fn(&dyn Decoder) -> Vec<usize>,
    splits: impl Fn(usize) -> Vec<Vec<usize>>,
) {
    let be = create_compute(None).unwrap();
    for &name in fixtures {
        let m = load(name, be.as_ref());
        for n in lengths(m.as_ref()) {
            let p = prompt(n, m.spec().vocab_size);
            let full = full_logits(m.as_ref(), be.as_ref(), &p);
            for split in splits(n) {
                assert!(
                    bits(&chunked_logits(m.as_ref(), be.as_ref(), &p, &split)) == bits(&full),
                    "{name}: {n} tokens, chunks {split:?} then single tokens differ from the full pass"
                );
            }
        }
    }
}

/// The chunkings most families check after the prompt: single tokens, short and long runs,
/// uneven splits, and everything but the last token at once.
pub fn standard_splits(n: usize) -> Vec<Vec<usize>> {
    vec![vec![1], vec![5], vec![17, 1], vec![3, 20, 2], vec![n - 1]]
}

/// Chunkings for a sliding `window`: the first chunk ends inside the window, at it and one
/// past it, then long chunks cross it.
pub fn window_splits(window: usize) -> impl Fn(usize) -> Vec<Vec<usize>> {
    move |n| {
        vec![
            vec![1],
            vec![3],
            vec![window],
            vec![window + 1, 1],
            vec![17, 1],
            vec![3, 20, 2],
            vec![n - 1],
        ]
    }
}

/// Fixtures named `<model_type>_<variant>` load as that model type.
pub fn model_type_is_name_prefix(name: &str, m: &dyn Decoder) {
    assert_eq!(m.spec().model_type, name.split('_').next().unwrap());
}

/// The 23-token prompt (ids below `vocab`) the threads-and-tiers check decodes from.
pub fn threads_prompt(vocab: u32) -> Vec<u32> {
    (0..23u32).map(|i| (i * 13 + 5) % vocab).collect()
}

/// The three tests every decoder family file runs on its fixtures, written once so that no
/// family can drop one: golden parity (`assert_goldens_match` with `streamed` and
/// `per_model`), incremental decoding equal to the full pass for each chunking of
/// `splits(n)` at each length of `lengths(model)`, and 1 vs 2 threads on every SIMD tier
/// bit-identical when decoding from `threads_prompt`.
#[allow(unused_macros)]
macro_rules! family_suite {
    // The usual case: no per-model check, the standard lengths and chunkings.
    (fixtures: $fixtures:expr, threads_prompt: $prompt:expr $(,)?) => {
        $crate::support::decoder::family_suite! {
            fixtures: $fixtures,
            streamed: true,
            per_model: |_, _| {},
            lengths: $crate::support::decoder::context_up_to_40,
            splits: $crate::support::decoder::standard_splits,
            threads_prompt: $prompt,
        }
    };
    // Sliding-window families (several model_types per file): chunkings that end inside the
    // window of `window` tokens and past it.
    (fixtures: $fixtures:expr, window: $window:expr $(,)?) => {
        $crate::support::decoder::family_suite! {
            fixtures: $fixtures,
            streamed: true,
            per_model: $crate::support::decoder::model_type_is_name_prefix,
            lengths: $crate::support::decoder::context_up_to_40,
            splits: $crate::support::decoder::window_splits($window),
            threads_prompt: $crate::support::decoder::threads_prompt(90),
        }
    };
    (
        fixtures: $fixtures:expr,
        streamed: $streamed:expr,
        per_model: $per_model:expr,
        lengths: $lengths:expr,
        splits: $splits:expr,
        threads_prompt: $prompt:expr $(,)?
    ) => {
        #[test]
        fn logits_and_greedy_tokens_match_transformers() {
            $crate::support::decoder::assert_goldens_match(&$fixtures, $streamed, $per_model);
        }

        #[test]
        fn incremental_decoding_equals_the_full_forward_bit_for_bit() {
            $crate::support::decoder::assert_incremental_equals_full(&$fixtures, $lengths, $splits);
        }

        #[test]
        fn identical_across_threads_and_tiers() {
            $crate::support::decoder::assert_identical_across_threads_and_tiers(
                &$fixtures, &$prompt,
            );
        }
    };
}
#[allow(unused_imports)] // only the family files use it
pub(crate) use family_suite;

/// The fixture's context, at most 40 positions: the usual incremental-decoding length.
pub fn context_up_to_40(m: &dyn Decoder) -> Vec<usize> {
    vec![m.spec().max_sequence_length.min(40)]
}

/// Full-pass logits of `prompt` and 8 greedy tokens after it are identical with 1 and 2
/// threads on every available SIMD tier.
pub fn assert_identical_across_threads_and_tiers(fixtures: &[&str], prompt: &[u32]) {
    for &name in fixtures {
        let mut reference: Option<(Vec<u32>, Vec<u32>)> = None;
        for tier in Tier::available_exact() {
            let be = create_compute(Some(tier)).unwrap();
            let m = load(name, be.as_ref());
            for threads in [1, 2] {
                let pool = kin_infer::threads::build_pool(threads).unwrap();
                let (logits, tokens) = pool.install(|| {
                    (
                        bits(&full_logits(m.as_ref(), be.as_ref(), prompt)),
                        generate_greedy(m.as_ref(), be.as_ref(), prompt, 8, |_| {}).unwrap(),
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

/// A prompt past the context, new tokens past it, a cache past it and a chunk past the
/// cache are clear errors; exactly filling the context is fine.
pub fn assert_context_errors(name: &str) {
    let be = create_compute(None).unwrap();
    let m = load(name, be.as_ref());
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

/// Generating from a prompt holding the id `vocab_size` is an error naming the id and the
/// vocabulary.
pub fn assert_unknown_id_error(name: &str) {
    let be = create_compute(None).unwrap();
    let m = load(name, be.as_ref());
    let vocab = m.spec().vocab_size as u32;
    let e = generate_greedy(m.as_ref(), be.as_ref(), &[3, vocab, 4], 2, |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("token id {vocab}")) && e.contains("vocabulary"),
        "{e}"
    );
}

/// A GGUF decoder fixture (tests/fixtures/gguf/decoders).
pub fn gguf(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf/decoders")
        .join(name)
}

/// The quantized GGUF decoder fixtures (each beside its `.twin.gguf`, dequantized to F32).
pub const QUANTIZED_GGUF: [&str; 6] = [
    "llama_gqa.q8_0",
    "llama_gqa.q4_0",
    "llama_gqa.q4_1",
    "qwen2_bias.q4_0",
    "gemma_tied.q8_0",
    "phi3_longrope.q8_0",
];
