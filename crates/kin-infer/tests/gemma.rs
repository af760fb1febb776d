//! Gemma and Gemma 2 decoders against the transformers goldens of python/gen_fixtures_gemma.py:
//! - gemma_tied: GeGLU, (1 + w) RMSNorm, sqrt(hidden)-scaled embeddings, head_dim 24 with
//!   hidden 64 and 4 heads, GQA, tied head;
//! - gemma2_sw: sandwich norms, query_pre_attn_scalar 20, attention-logit softcap 1.5 and
//!   final-logit softcap 0.5, sliding window 5 on layers 0 and 2 (shorter than the prompts);
//! - gemma2_hd: the same with query_pre_attn_scalar = head_dim, as a Gemma 2 GGUF implies.
//!
//! Full-prompt logits within `tol`, greedy tokens exactly, incremental decoding past the window
//! equal to the full forward pass bit for bit, 1 vs 2 threads and every SIMD tier
//! bit-identical, the softcaps and window applied, the Hub spelling (no `layer_types`,
//! `rope_theta`, `torch_dtype`) read the same way, and clear errors for bad config fields.

mod support;

use support::decoder::{
    assert_config_errors_name_fields, bits, family_suite, full_logits, layer_types_cases, load,
    load_edited_err, Edit, Edited,
};
use support::set;

use kin_infer::gpu::create_compute;
use kin_infer::InferError;
use serde_json::Value;

const FIXTURES: [&str; 3] = ["gemma_tied", "gemma2_sw", "gemma2_hd"];

family_suite! {
    fixtures: FIXTURES,
    window: 5,
}

/// Each Gemma 2 feature changes the logits (the fixture would not test it otherwise), the
/// final softcap bounds them, and the spec describes the model.
#[test]
fn softcaps_and_window_are_applied_and_described() {
    let be = create_compute(None).unwrap();
    let prompt: Vec<u32> = (0..19u32).map(|i| (i * 7 + 3) % 90).collect();
    let m = load("gemma2_sw", be.as_ref());
    let spec = m.spec();
    assert!(
        spec.attention
            .ends_with("logit softcap 1.5, sliding window 5 on layers 0,2"),
        "{}",
        spec.attention
    );
    assert_eq!(spec.ffn, "GeGLU, sandwich norms");
    let want = full_logits(m.as_ref(), be.as_ref(), &prompt);
    assert!(want.iter().all(|v| v.abs() <= 0.5));
    let vocab = spec.vocab_size;
    type Edit = fn(&mut Value);
    let variants: [(&str, Edit); 3] = [
        ("noattncap", |c| c["attn_logit_softcapping"] = Value::Null),
        ("nofinalcap", |c| c["final_logit_softcapping"] = Value::Null),
        ("nowindow", |c| {
            c["layer_types"] =
                serde_json::json!(["full_attention", "full_attention", "full_attention"])
        }),
    ];
    for (tag, edit) in variants {
        let e = Edited::new("gemma", "gemma2_sw", tag, edit);
        let got = full_logits(e.load(be.as_ref()).as_ref(), be.as_ref(), &prompt);
        assert!(bits(&got) != bits(&want), "{tag} changes nothing");
        if tag == "nowindow" {
            // The first `window` positions see the same keys either way.
            assert_eq!(bits(&got[..5 * vocab]), bits(&want[..5 * vocab]));
            assert!(!e.load(be.as_ref()).spec().attention.contains("sliding"));
        }
    }
    let m = load("gemma_tied", be.as_ref());
    assert_eq!(m.spec().ffn, "GeGLU");
    assert_eq!(m.spec().head_dim, 24);
    assert!(m.spec().tied_embeddings);
    assert!(!m.spec().attention.contains("sliding"));
}

/// The Hub's spelling (no `layer_types`: even layers slide; `rope_theta`, `torch_dtype` at the
/// top level; Gemma's legacy `hidden_act: gelu`) gives the same model bit for bit.
#[test]
fn hub_spelling_gives_the_same_model() {
    let be = create_compute(None).unwrap();
    let prompt: Vec<u32> = (0..26u32).map(|i| (i * 11 + 4) % 90).collect();
    for name in FIXTURES {
        let want = full_logits(load(name, be.as_ref()).as_ref(), be.as_ref(), &prompt);
        let hub = Edited::new("gemma", name, "hub", |c| {
            let o = c.as_object_mut().unwrap();
            o.remove("layer_types");
            let rp = o.remove("rope_parameters").unwrap();
            o.insert("rope_theta".into(), rp["rope_theta"].clone());
            o.insert("torch_dtype".into(), o["dtype"].clone());
            o.remove("dtype");
            if o.contains_key("hidden_act") {
                o.insert("hidden_act".into(), "gelu".into());
            }
        });
        let m = hub.load(be.as_ref());
        assert_eq!(m.spec().dtype.as_deref(), Some("float32"));
        assert!(
            bits(&full_logits(m.as_ref(), be.as_ref(), &prompt)) == bits(&want),
            "{name}"
        );
    }
}

/// Absent softcap keys are transformers' Gemma2Config defaults (50 and 30, which llama.cpp
/// also applies to a GGUF without them): the same model as writing them out, not one with the
/// softcaps off (which only an explicit `null` gives).
#[test]
fn absent_softcaps_take_transformers_defaults() {
    let be = create_compute(None).unwrap();
    let prompt: Vec<u32> = (0..12u32).map(|i| (i * 5 + 1) % 90).collect();
    let logits = |tag: &str, edit: fn(&mut Value)| {
        let e = Edited::new("gemma", "gemma2_sw", tag, edit);
        let m = e.load(be.as_ref());
        (
            m.spec().attention.clone(),
            bits(&full_logits(m.as_ref(), be.as_ref(), &prompt)),
        )
    };
    let (absent_attn, absent) = logits("capsabsent", |c| {
        let o = c.as_object_mut().unwrap();
        o.remove("attn_logit_softcapping");
        o.remove("final_logit_softcapping");
    });
    let (_, written) = logits("capswritten", |c| {
        c["attn_logit_softcapping"] = 50.0.into();
        c["final_logit_softcapping"] = 30.0.into();
    });
    let (off_attn, _) = logits("capsnull", |c| {
        c["attn_logit_softcapping"] = Value::Null;
        c["final_logit_softcapping"] = Value::Null;
    });
    assert!(absent_attn.contains("logit softcap 50"), "{absent_attn}");
    // (The tiny model's logits are too small for a cap of 30 or 50 to move their bits, so
    // "on" is told from "off" by the description.)
    assert!(absent == written);
    assert!(!off_attn.contains("softcap"), "{off_attn}");
}

#[test]
fn bad_config_fields_are_clear_errors() {
    let mut cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "gemma2_sw",
            "zero",
            set("sliding_window", 0),
            "sliding_window",
        ),
        (
            "gemma2_sw",
            "cap",
            set("attn_logit_softcapping", -1.0),
            "attn_logit_softcapping",
        ),
        (
            "gemma2_sw",
            "fcap",
            set("final_logit_softcapping", "big"),
            "final_logit_softcapping",
        ),
        (
            "gemma2_sw",
            "qpas",
            set("query_pre_attn_scalar", 0),
            "query_pre_attn_scalar",
        ),
        (
            "gemma2_sw",
            "act",
            set("hidden_activation", "swish"),
            "hidden_activation",
        ),
        ("gemma_tied", "act", set("hidden_act", "relu"), "hidden_act"),
        ("gemma_tied", "hd", set("head_dim", 23), "head_dim"),
        (
            "gemma_tied",
            "kv",
            set("num_key_value_heads", 3),
            "num_key_value_heads",
        ),
    ];
    cases.extend(layer_types_cases("gemma2_sw"));
    assert_config_errors_name_fields("gemma", cases);
    let e = load_edited_err("gemma", "gemma_tied", "bias", |c| {
        c["attention_bias"] = true.into()
    });
    assert!(matches!(e, InferError::Unsupported(_)), "{e}");
    let e = load_edited_err("gemma", "gemma2_sw", "rope", |c| {
        c["rope_parameters"]["rope_type"] = "yarn".into()
    });
    assert!(matches!(e, InferError::Unsupported(_)), "{e}");
}

#[test]
fn missing_sandwich_norm_names_the_tensor() {
    // A gemma2 config over Gemma weights (no pre/post feed-forward norms).
    let e = load_edited_err("gemma", "gemma_tied", "v2", |c| {
        c["model_type"] = "gemma2".into()
    });
    assert!(e.to_string().contains("pre_feedforward_layernorm"), "{e}");
}
