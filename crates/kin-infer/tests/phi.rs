//! Phi and Phi-3 decoders against the transformers goldens of python/gen_fixtures_phi.py
//! (tests/decoder_fixtures/phi_partial: phi-2 layout, partial rotary 0.5, GQA;
//! phi3_longrope: fused qkv / gate_up, longrope with original context 24 of 64, sliding
//! window 12): logits within `tol` (including positions past the original context, against
//! transformers run with its KV cache), greedy tokens exactly (generation crossing the
//! original context), incremental decoding equal to the full pass bit for bit, 1 vs 2 threads
//! and every SIMD tier bit-identical, the Hub config spelling equal to transformers 5.x's, and
//! clear errors for bad config fields.

use kin_infer::generate::{generate_greedy, KvCache};
use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::kernels::Tier;
use kin_infer::models::decoders::{load_decoder, Decoder, LogitsRows};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 2] = ["phi_partial", "phi3_longrope"];

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

fn full_logits(m: &dyn Decoder, be: &dyn GpuCompute, ids: &[u32]) -> Vec<f32> {
    let mut cache = m.new_cache(ids.len()).unwrap();
    m.forward(be, ids, &mut cache, LogitsRows::All)
        .unwrap()
        .to_vec()
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn config(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name).join("config.json")).unwrap())
        .unwrap()
}

/// A copy of fixture `name` with `cfg` as its config.json.
fn with_config(name: &str, tag: &str, cfg: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kin-phi-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(
        fixture(name).join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    dir
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

/// The phi3 goldens exercise both longrope factor sets: a forward and a generation past the
/// original context (long factors), others within it (short factors).
#[test]
fn phi3_goldens_cover_short_and_long_factors() {
    let g = golden("phi3_longrope");
    let orig = config("phi3_longrope")["original_max_position_embeddings"]
        .as_u64()
        .unwrap() as usize;
    let cases = g["cases"].as_array().unwrap();
    let len = |c: &Value| c["input_ids"][0].as_array().unwrap().len();
    for kind in ["logits", "generate"] {
        assert!(
            cases.iter().any(|c| c["kind"] == kind && len(c) > orig),
            "{kind}"
        );
        assert!(
            cases.iter().any(|c| c["kind"] == kind && len(c) < orig),
            "{kind}"
        );
    }
}

/// A cache with more positions than original_max_position_embeddings rotates with the long
/// factors from position 0; one within it with the short factors.
#[test]
fn phi3_factor_set_follows_the_cache_capacity() {
    let be = create_compute(None).unwrap();
    let m = load("phi3_longrope", be.as_ref());
    let prompt: Vec<u32> = (0..10u32).map(|i| (i * 7 + 3) % 90).collect();
    let run = |cap: usize| {
        let mut cache = m.new_cache(cap).unwrap();
        bits(
            m.forward(be.as_ref(), &prompt, &mut cache, LogitsRows::All)
                .unwrap(),
        )
    };
    assert_eq!(
        run(10),
        run(24),
        "both within the original context: short factors"
    );
    assert_eq!(run(25), run(64), "both past it: long factors");
    assert_ne!(run(24), run(25), "the long factors change the logits");
}

#[test]
fn incremental_decoding_equals_the_full_forward_bit_for_bit() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let m = load(name, be.as_ref());
        let vocab = m.spec().vocab_size;
        // 20 and 40 positions: within and past the phi3 fixture's original context (24, short
        // and long factors), both past its sliding window (12).
        for n in [20, 40] {
            let prompt: Vec<u32> = (0..n as u32)
                .map(|i| (i * 37 + 11) % vocab as u32)
                .collect();
            let full = full_logits(m.as_ref(), be.as_ref(), &prompt);
            for split in [vec![1], vec![5], vec![17, 1], vec![3, 14, 2], vec![n - 1]] {
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
                "{name}: {n} tokens, chunks {split:?} then single tokens differ from the full pass"
            );
            }
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

/// The Hub's spelling (top-level `rope_theta` / `partial_rotary_factor`, `rope_scaling` with
/// `type: su`, top-level `original_max_position_embeddings`, `torch_dtype`) loads the same model.
#[test]
fn hub_config_spelling_gives_the_same_logits() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let mut cfg = config(name);
        let rp = cfg
            .as_object_mut()
            .unwrap()
            .remove("rope_parameters")
            .unwrap();
        cfg["rope_theta"] = rp["rope_theta"].clone();
        cfg["partial_rotary_factor"] = rp["partial_rotary_factor"].clone();
        if rp["rope_type"] == "longrope" {
            cfg["rope_scaling"] = json!({
                "type": "su",
                "short_factor": rp["short_factor"],
                "long_factor": rp["long_factor"],
            });
        }
        let dtype = cfg.as_object_mut().unwrap().remove("dtype").unwrap();
        cfg["torch_dtype"] = dtype;
        let dir = with_config(name, "hub", &cfg);
        let hub = load_decoder(&dir, be.as_ref()).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let m = load(name, be.as_ref());
        assert_eq!(hub.spec().positions, m.spec().positions, "{name}");
        let prompt: Vec<u32> = (0..30u32).map(|i| (i * 7 + 3) % 90).collect();
        assert!(
            bits(&full_logits(hub.as_ref(), be.as_ref(), &prompt))
                == bits(&full_logits(m.as_ref(), be.as_ref(), &prompt)),
            "{name}"
        );
    }
}

#[test]
fn spec_describes_the_layout() {
    let be = create_compute(None).unwrap();
    let phi = load("phi_partial", be.as_ref());
    let s = phi.spec();
    assert_eq!(s.model_type, "phi");
    assert!(s.positions.contains("8 of 16"), "{}", s.positions);
    assert!(s.attention.contains("parallel"), "{}", s.attention);
    let phi3 = load("phi3_longrope", be.as_ref());
    let s = phi3.spec();
    assert_eq!(s.model_type, "phi3");
    assert!(s.positions.contains("longrope"), "{}", s.positions);
    assert!(s.attention.contains("sliding window 12"), "{}", s.attention);
}

fn load_err(name: &str, tag: &str, edit: impl FnOnce(&mut Value)) -> kin_infer::InferError {
    let mut cfg = config(name);
    edit(&mut cfg);
    let dir = with_config(name, tag, &cfg);
    let be = create_compute(None).unwrap();
    let e = load_decoder(&dir, be.as_ref()).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    e
}

#[test]
fn bad_config_fields_are_clear_errors() {
    let e = load_err("phi_partial", "prf", |c| {
        c["rope_parameters"]["partial_rotary_factor"] = json!(0.1)
    });
    assert!(e.to_string().contains("partial_rotary_factor"), "{e}");
    let e = load_err("phi_partial", "act", |c| c["hidden_act"] = json!("swish"));
    assert!(e.to_string().contains("hidden_act"), "{e}");
    let e = load_err("phi_partial", "qkln", |c| c["qk_layernorm"] = json!(true));
    assert!(
        matches!(e, kin_infer::InferError::Unsupported(_))
            && e.to_string().contains("qk_layernorm"),
        "{e}"
    );
    let e = load_err("phi_partial", "rope", |c| {
        c["rope_parameters"]["rope_type"] = json!("linear")
    });
    assert!(
        matches!(e, kin_infer::InferError::Unsupported(_)) && e.to_string().contains("linear"),
        "{e}"
    );
    let e = load_err("phi3_longrope", "short", |c| {
        c["rope_parameters"]["short_factor"] = json!([1.0, 2.0])
    });
    assert!(
        e.to_string().contains("short_factor") && e.to_string().contains("2 entries"),
        "{e}"
    );
    let e = load_err("phi3_longrope", "long", |c| {
        c["rope_parameters"]["long_factor"] = json!("big")
    });
    assert!(e.to_string().contains("long_factor"), "{e}");
    let e = load_err("phi3_longrope", "win", |c| c["sliding_window"] = json!(0));
    assert!(e.to_string().contains("sliding_window"), "{e}");
    let e = load_err("phi3_longrope", "kv", |c| {
        c["num_key_value_heads"] = json!(3)
    });
    assert!(e.to_string().contains("num_key_value_heads"), "{e}");
}

#[test]
fn prompt_longer_than_the_context_and_unknown_ids_are_clear_errors() {
    let be = create_compute(None).unwrap();
    let m = load("phi3_longrope", be.as_ref());
    let ctx = m.spec().max_sequence_length;
    let e = generate_greedy(m.as_ref(), be.as_ref(), &vec![5u32; ctx + 1], 4, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("context") && e.contains(&ctx.to_string()), "{e}");
    let vocab = m.spec().vocab_size as u32;
    let e = generate_greedy(m.as_ref(), be.as_ref(), &[3, vocab, 4], 2, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("token id {vocab}")), "{e}");
}
