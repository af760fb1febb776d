//! GPT-2 decoders against the transformers goldens of python/gen_fixtures_gpt2.py
//! (tests/decoder_fixtures/gpt2_small: `transformer.`-prefixed tensors, n_inner unset;
//! gpt2_bare: unprefixed tensors, explicit n_inner, `scale_attn_by_inverse_layer_idx`):
//! full-prompt logits within `tol`, greedy tokens exactly, incremental decoding with the KV
//! cache equal to the full forward pass bit for bit, 1 vs 2 threads and every SIMD tier
//! bit-identical, and clear errors for a prompt longer than the context (`n_positions`), an
//! unknown id and bad config fields.

mod support;

use support::decoder::{
    assert_context_errors, assert_unknown_id_error, family_suite, load, load_edited_err,
    threads_prompt,
};

use kin_infer::gpu::create_compute;
use serde_json::Value;

const FIXTURES: [&str; 2] = ["gpt2_small", "gpt2_bare"];

family_suite! {
    fixtures: FIXTURES,
    threads_prompt: threads_prompt(100),
}

#[test]
fn prompt_longer_than_the_context_is_a_clear_error() {
    assert_context_errors("gpt2_small");
}

#[test]
fn out_of_vocabulary_id_is_a_clear_error() {
    assert_unknown_id_error("gpt2_bare");
}

/// A copy of `gpt2_small` whose config.json is edited by `edit`; returns the load error.
fn load_error(tag: &str, edit: impl FnOnce(&mut Value)) -> kin_infer::InferError {
    load_edited_err("gpt2", "gpt2_small", tag, edit)
}

#[test]
fn bad_config_fields_are_clear_errors() {
    let e = load_error("heads", |c| c["n_head"] = 5.into());
    assert!(
        matches!(e, kin_infer::InferError::Config { ref field, .. } if field == "n_head"),
        "{e}"
    );
    let e = load_error("act", |c| c["activation_function"] = "swish".into());
    assert!(
        matches!(e, kin_infer::InferError::Config { ref field, .. } if field == "activation_function")
            && e.to_string().contains("swish"),
        "{e}"
    );
    let e = load_error("embd", |c| {
        c.as_object_mut().unwrap().remove("n_embd");
    });
    assert!(
        matches!(e, kin_infer::InferError::Config { ref field, .. } if field == "n_embd"),
        "{e}"
    );
    let e = load_error("eps", |c| c["layer_norm_epsilon"] = "small".into());
    assert!(e.to_string().contains("layer_norm_epsilon"), "{e}");
    // Shapes that disagree with the checkpoint name the tensor.
    let e = load_error("positions", |c| c["n_positions"] = 32.into());
    assert!(e.to_string().contains("wpe.weight"), "{e}");
    // An untied head must be present.
    let e = load_error("untied", |c| c["tie_word_embeddings"] = false.into());
    assert!(e.to_string().contains("lm_head.weight"), "{e}");
    let e = load_error("cross", |c| c["add_cross_attention"] = true.into());
    assert!(matches!(e, kin_infer::InferError::Unsupported(_)), "{e}");
}

#[test]
fn spec_describes_the_model() {
    let be = create_compute(None).unwrap();
    let m = load("gpt2_bare", be.as_ref());
    let s = m.spec();
    assert_eq!(s.model_type, "gpt2");
    assert_eq!(
        (
            s.hidden_size,
            s.num_attention_heads,
            s.num_key_value_heads,
            s.head_dim
        ),
        (64, 8, 8, 8)
    );
    assert_eq!((s.intermediate_size, s.max_sequence_length), (96, 40));
    assert!(s.tied_embeddings);
    assert_eq!(s.eos_token_ids, vec![2]);
    let m = load("gpt2_small", be.as_ref());
    assert_eq!(m.spec().intermediate_size, 4 * 48);
}
