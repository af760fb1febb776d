//! Mistral and Qwen2 decoders (the LLaMA layout plus sliding windows / q-k-v biases) against
//! the transformers goldens of python/gen_fixtures_mistral_qwen2.py:
//! - mistral_sw: sliding window 4, shorter than every long prompt and the generated tokens;
//! - mistral_hd: explicit head_dim (heads * head_dim != hidden), tied, window null;
//! - qwen2_bias: q/k/v biases, tied, no sliding window;
//! - qwen2_sw: MQA, biases, window 5 on layers 1 and 2 only (`layer_types`).
//!
//! Full-prompt logits within `tol`, greedy tokens exactly, incremental decoding past the window
//! equal to the full forward pass bit for bit, 1 vs 2 threads and every SIMD tier
//! bit-identical, the Hub's Qwen2 spelling (`max_window_layers`, no `layer_types`) read the
//! same way, and clear errors for bad sliding-window fields.

use kin_infer::generate::{generate_greedy, KvCache};
use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::kernels::Tier;
use kin_infer::models::decoders::{load_decoder, Decoder, LogitsRows};
use kin_infer::InferError;
use serde_json::Value;
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 4] = ["mistral_sw", "mistral_hd", "qwen2_bias", "qwen2_sw"];

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

fn config(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name).join("config.json")).unwrap())
        .unwrap()
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

/// A copy of fixture `name` in a temporary directory with its config edited by `edit`.
struct Edited(PathBuf);

impl Edited {
    fn new(name: &str, tag: &str, edit: impl FnOnce(&mut Value)) -> Self {
        let dir = std::env::temp_dir().join(format!("kin-mq-{name}-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cfg = config(name);
        edit(&mut cfg);
        std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
        let src = fixture(name);
        std::fs::copy(src.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
        Edited(dir)
    }
}

impl Drop for Edited {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

#[test]
fn logits_and_greedy_tokens_match_transformers() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let m = load(name, be.as_ref());
        assert_eq!(m.spec().model_type, name.split('_').next().unwrap());
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

/// Prefill + one token at a time (and other chunkings, some ending inside the window, some
/// past it) give exactly the full forward pass's logits.
#[test]
fn incremental_decoding_past_the_window_equals_the_full_forward_bit_for_bit() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let m = load(name, be.as_ref());
        let vocab = m.spec().vocab_size;
        let n = m.spec().max_sequence_length.min(40);
        let prompt: Vec<u32> = (0..n as u32)
            .map(|i| (i * 37 + 11) % vocab as u32)
            .collect();
        let full = full_logits(m.as_ref(), be.as_ref(), &prompt);
        for split in [
            vec![1],
            vec![3],
            vec![4],
            vec![5, 1],
            vec![17, 1],
            vec![3, 20, 2],
            vec![n - 1],
        ] {
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

/// The window changes the logits (the fixtures would not test it otherwise), and the spec
/// says which layers slide.
#[test]
fn sliding_window_is_applied_and_described() {
    let be = create_compute(None).unwrap();
    let prompt: Vec<u32> = (0..19u32).map(|i| (i * 7 + 3) % 90).collect();
    for (name, desc) in [
        ("mistral_sw", "sliding window 4"),
        ("qwen2_sw", "sliding window 5 on layers 1,2"),
    ] {
        let m = load(name, be.as_ref());
        assert!(m.spec().attention.ends_with(desc), "{}", m.spec().attention);
        let windowed = full_logits(m.as_ref(), be.as_ref(), &prompt);
        let full = Edited::new(name, "full", |c| {
            c["sliding_window"] = Value::Null;
            c["use_sliding_window"] = false.into();
            if c.get("layer_types").is_some() {
                c["layer_types"] =
                    serde_json::json!(["full_attention", "full_attention", "full_attention"]);
            }
        });
        let m_full = load_decoder(&full.0, be.as_ref()).unwrap();
        assert!(!m_full.spec().attention.contains("sliding"));
        let unwindowed = full_logits(m_full.as_ref(), be.as_ref(), &prompt);
        // The first `window` positions see the same keys either way; later ones do not.
        let vocab = m.spec().vocab_size;
        assert_eq!(bits(&windowed[..4 * vocab]), bits(&unwindowed[..4 * vocab]));
        assert!(bits(&windowed) != bits(&unwindowed), "{name}");
    }
    let m = load("qwen2_bias", be.as_ref());
    assert!(m.spec().attention.contains("q/k/v biases"));
    assert!(!m.spec().attention.contains("sliding"));
}

/// The Hub's Qwen2 config has no `layer_types`: layers at or past `max_window_layers` slide
/// when `use_sliding_window`, which gives the same model as the transformers 5.x spelling.
#[test]
fn qwen2_hub_spelling_derives_layer_types_from_max_window_layers() {
    let be = create_compute(None).unwrap();
    let prompt: Vec<u32> = (0..26u32).map(|i| (i * 11 + 4) % 90).collect();
    let want = full_logits(load("qwen2_sw", be.as_ref()).as_ref(), be.as_ref(), &prompt);
    let hub = Edited::new("qwen2_sw", "hub", |c| {
        let o = c.as_object_mut().unwrap();
        o.remove("layer_types");
        let rp = o.remove("rope_parameters").unwrap();
        o.insert("rope_theta".into(), rp["rope_theta"].clone());
        o.insert("torch_dtype".into(), o["dtype"].clone());
        o.remove("dtype");
    });
    let m = load_decoder(&hub.0, be.as_ref()).unwrap();
    assert!(
        m.spec()
            .attention
            .ends_with("sliding window 5 on layers 1,2"),
        "{}",
        m.spec().attention
    );
    assert!(bits(&full_logits(m.as_ref(), be.as_ref(), &prompt)) == bits(&want));
    // use_sliding_window false: every layer full, whatever max_window_layers says.
    let off = Edited::new("qwen2_sw", "off", |c| {
        c.as_object_mut().unwrap().remove("layer_types");
        c["use_sliding_window"] = false.into();
        c["max_window_layers"] = 0.into();
    });
    let m = load_decoder(&off.0, be.as_ref()).unwrap();
    assert!(!m.spec().attention.contains("sliding"));
}

fn config_error(name: &str, tag: &str, edit: impl FnOnce(&mut Value)) -> InferError {
    let dir = Edited::new(name, tag, edit);
    let be = create_compute(None).unwrap();
    load_decoder(&dir.0, be.as_ref()).err().expect("must fail")
}

#[test]
fn bad_sliding_window_fields_are_clear_errors() {
    type Edit = Box<dyn FnOnce(&mut Value)>;
    let cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "mistral_sw",
            "zero",
            Box::new(|c| c["sliding_window"] = 0.into()),
            "sliding_window",
        ),
        (
            "mistral_sw",
            "neg",
            Box::new(|c| c["sliding_window"] = (-3).into()),
            "sliding_window",
        ),
        (
            "qwen2_sw",
            "len",
            Box::new(|c| c["layer_types"] = serde_json::json!(["full_attention"])),
            "layer_types",
        ),
        (
            "qwen2_sw",
            "kind",
            Box::new(|c| {
                c["layer_types"] =
                    serde_json::json!(["full_attention", "chunked_attention", "full_attention"])
            }),
            "layer_types",
        ),
        (
            "qwen2_sw",
            "nowin",
            Box::new(|c| c["use_sliding_window"] = false.into()),
            "layer_types",
        ),
        (
            "qwen2_sw",
            "mwl",
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("layer_types");
                c["max_window_layers"] = "one".into();
            }),
            "max_window_layers",
        ),
    ];
    for (name, tag, edit, field) in cases {
        let e = config_error(name, tag, edit);
        assert!(
            matches!(&e, InferError::Config { field: f, .. } if f == field),
            "{name}/{tag}: {e}"
        );
        assert!(e.to_string().contains(field), "{e}");
    }
}

#[test]
fn missing_qwen2_bias_names_the_tensor() {
    // A qwen2 config over LLaMA weights (no biases).
    let dir = std::env::temp_dir().join(format!("kin-mq-nobias-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/decoder_fixtures/llama_gqa");
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    cfg["model_type"] = "qwen2".into();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(src.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    let be = create_compute(None).unwrap();
    let e = load_decoder(&dir, be.as_ref()).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.to_string().contains("q_proj.bias"), "{e}");
}
