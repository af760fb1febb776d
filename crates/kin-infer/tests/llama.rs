//! LLaMA decoders against the transformers goldens of python/gen_fixtures_llama.py
//! (tests/decoder_fixtures/llama_gqa: GQA, untied head; llama_mqa: MQA, tied embeddings;
//! llama_bf16: BF16 storage kept half precision in memory; llama_sharded: six f32 shards):
//! full-prompt logits within `tol`, greedy tokens exactly, incremental decoding with the KV
//! cache equal to the full forward pass bit for bit, 1 vs 2 threads and every SIMD tier
//! bit-identical, and clear errors for a prompt longer than the context and an unknown id.

mod support;

use support::decoder::{
    assert_context_errors, assert_unknown_id_error, config, family_suite, threads_prompt,
    with_config,
};

use kin_infer::gpu::create_compute;
use kin_infer::models::decoders::load_decoder;

const FIXTURES: [&str; 4] = ["llama_gqa", "llama_mqa", "llama_bf16", "llama_sharded"];

family_suite! {
    fixtures: FIXTURES,
    threads_prompt: threads_prompt(60),
}

#[test]
fn prompt_longer_than_the_context_is_a_clear_error() {
    assert_context_errors("llama_gqa");
}

#[test]
fn out_of_vocabulary_id_is_a_clear_error() {
    assert_unknown_id_error("llama_mqa");
}

#[test]
fn unsupported_rope_scaling_is_a_typed_error() {
    let mut cfg = config("llama_gqa");
    // linear, dynamic and llama3 are supported (tests/llama_rope.rs); yarn is not yet.
    cfg["rope_parameters"]["rope_type"] = "yarn".into();
    let dir = with_config("llama", "llama_gqa", "rope", &cfg);
    let be = create_compute(None).unwrap();
    let e = load_decoder(&dir, be.as_ref()).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        matches!(e, kin_infer::InferError::Unsupported(_)) && e.to_string().contains("yarn"),
        "{e}"
    );
}
