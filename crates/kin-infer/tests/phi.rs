//! Phi and Phi-3 decoders against the transformers goldens of python/gen_fixtures_phi.py
//! (tests/decoder_fixtures/phi_partial: phi-2 layout, partial rotary 0.5, GQA;
//! phi3_longrope: fused qkv / gate_up, longrope with original context 24 of 64, sliding
//! window 12): logits within `tol` (including positions past the original context, against
//! transformers run with its KV cache), greedy tokens exactly (generation crossing the
//! original context), incremental decoding equal to the full pass bit for bit, 1 vs 2 threads
//! and every SIMD tier bit-identical, the Hub config spelling equal to transformers 5.x's, and
//! clear errors for bad config fields.

mod support;

use support::decoder::{
    bits, config, family_suite, full_logits, golden, load, load_edited_err, threads_prompt,
    with_config,
};

use kin_infer::generate::generate_greedy;
use kin_infer::gpu::create_compute;
use kin_infer::models::decoders::{load_decoder, LogitsRows};
use serde_json::{json, Value};

const FIXTURES: [&str; 2] = ["phi_partial", "phi3_longrope"];

// 20 and 40 positions: within and past the phi3 fixture's original context (24, short and
// long factors), both past its sliding window (12).
family_suite! {
    fixtures: FIXTURES,
    streamed: true,
    per_model: |_, _| {},
    lengths: |_| vec![20, 40],
    splits: |n| vec![vec![1], vec![5], vec![17, 1], vec![3, 14, 2], vec![n - 1]],
    threads_prompt: threads_prompt(90),
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
        let dir = with_config("phi", name, "hub", &cfg);
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
    load_edited_err("phi", name, tag, edit)
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
