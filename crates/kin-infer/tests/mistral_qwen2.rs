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

mod support;

use support::decoder::{
    assert_config_errors_name_fields, bits, family_suite, full_logits, layer_types_cases, load,
    load_edited_err, Edit, Edited,
};
use support::set;

use kin_infer::gpu::create_compute;
use kin_infer::models::decoders::load_decoder;
use serde_json::Value;

const FIXTURES: [&str; 4] = ["mistral_sw", "mistral_hd", "qwen2_bias", "qwen2_sw"];

family_suite! {
    fixtures: FIXTURES,
    window: 4,
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
        let full = Edited::new("mq", name, "full", |c| {
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
    let hub = Edited::new("mq", "qwen2_sw", "hub", |c| {
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
    let off = Edited::new("mq", "qwen2_sw", "off", |c| {
        c.as_object_mut().unwrap().remove("layer_types");
        c["use_sliding_window"] = false.into();
        c["max_window_layers"] = 0.into();
    });
    let m = load_decoder(&off.0, be.as_ref()).unwrap();
    assert!(!m.spec().attention.contains("sliding"));
}

#[test]
fn bad_sliding_window_fields_are_clear_errors() {
    let mut cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "mistral_sw",
            "zero",
            set("sliding_window", 0),
            "sliding_window",
        ),
        (
            "mistral_sw",
            "neg",
            set("sliding_window", -3),
            "sliding_window",
        ),
        (
            "qwen2_sw",
            "nowin",
            set("use_sliding_window", false),
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
    cases.extend(layer_types_cases("qwen2_sw"));
    assert_config_errors_name_fields("mq", cases);
}

#[test]
fn missing_qwen2_bias_names_the_tensor() {
    // A qwen2 config over LLaMA weights (no biases).
    let e = load_edited_err("mq", "llama_gqa", "nobias", |c| {
        c["model_type"] = "qwen2".into()
    });
    assert!(e.to_string().contains("q_proj.bias"), "{e}");
}
