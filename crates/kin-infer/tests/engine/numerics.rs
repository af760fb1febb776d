//! Pins the exact output bits to `NUMERICS_VERSION` for every encoder and decoder family: a
//! change to kernels or model code that moves any bit fails here, and an intended one bumps
//! the version with new pins. `KIN_PRINT_PINS=1` prints the current fingerprints instead of
//! checking them (how the pins below were taken, on the code before the change under test).

use crate::common::{fixture, load, random_sequences, repo_root};
use kin_infer::backend::create_compute_with;
use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::models::decoders::{load_decoder, LogitsRows};
use kin_infer::{Activations, EmbedderOptions, NUMERICS_VERSION, Q8_NUMERICS_VERSION};
use kin_infer_core::pins::{assert_pinned, fingerprint, Pin};

/// Embeddings of fixed random sequences of lengths 1, 7, 23 and 40, as one batch.
fn encoder_fingerprint(name: &str) -> u64 {
    let e = load(&fixture(name), EmbedderOptions::default());
    let seqs = random_sequences(e.config().vocab_size, &[1, 7, 23, 40], 42);
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let out = e.embed_tokens(&refs, None).unwrap();
    fingerprint(out.iter().map(Vec::as_slice))
}

/// Logits of every position of a 20-token prompt (fewer when the context is shorter): all but
/// the last three in one chunk, then one token at a time through the KV cache.
fn decoder_fingerprint(name: &str) -> u64 {
    let dir = repo_root().join("tests/decoder_fixtures").join(name);
    logits_fingerprint(&dir, create_compute(None).unwrap().as_ref())
}

/// [`decoder_fingerprint`] of a quantized GGUF fixture in the q8 activation mode.
fn q8_fingerprint(name: &str) -> u64 {
    let path = repo_root()
        .join("tests/fixtures/gguf/decoders")
        .join(format!("{name}.gguf"));
    let be = create_compute_with(None, Activations::Q8).unwrap();
    logits_fingerprint(&path, be.as_ref())
}

fn logits_fingerprint(dir: &std::path::Path, be: &dyn GpuCompute) -> u64 {
    let name = dir.display();
    let m = load_decoder(dir, be).unwrap_or_else(|e| panic!("load {name}: {e}"));
    let (vocab, ctx) = (m.spec().vocab_size, m.spec().max_sequence_length);
    let n = ctx.min(20);
    let ids: Vec<u32> = (0..n as u32)
        .map(|i| (i * 37 + 11) % vocab as u32)
        .collect();
    let mut cache = m.new_cache(n).unwrap();
    let mut rows: Vec<Vec<f32>> = vec![m
        .forward(be, &ids[..n - 3], &mut cache, LogitsRows::All)
        .unwrap()
        .to_vec()];
    for &id in &ids[n - 3..] {
        let r = m.forward(be, &[id], &mut cache, LogitsRows::Last);
        rows.push(r.unwrap().to_vec());
    }
    fingerprint(rows.iter().map(Vec::as_slice))
}

/// (numerics version, fixture, fingerprint); one fixture per family and variant, encoders
/// first. The encoders' taken with `KIN_PRINT_PINS=1` on main at 0b59a90, before the lazy
/// rotary tables (issue 10): the bert/roberta pins are the ones kin-numerics/1 always had.
const PINS: &[Pin] = &[
    ("kin-numerics/1", "bert_tiny", 0xc4d07587412c2ac6),
    ("kin-numerics/1", "roberta_tiny", 0x65aee675b650c5b8),
    ("kin-numerics/1", "xlmr_tiny", 0x8531a537f4576ee3),
    ("kin-numerics/1", "albert_tiny", 0x2ae61a4ac47cc421),
    ("kin-numerics/1", "deberta_v1_tiny", 0xe012a04b97f0fd62),
    ("kin-numerics/1", "deberta_v2_tiny", 0xb61a5e4d11ff43b0),
    ("kin-numerics/1", "deberta_v2_conv", 0x6c56cfac3d567e02),
    ("kin-numerics/1", "t5_tiny", 0xf28ac9a5526e5487),
    ("kin-numerics/1", "mt5_tiny", 0x6dd26eeb5f03a99),
    ("kin-numerics/1", "st5_tiny", 0xee70442d05ae65c),
    ("kin-numerics/1", "nomic_tiny", 0x1e3fa70cf4ecfba6),
    ("kin-numerics/1", "nomic_orig", 0xd47bba421c6debcf),
    ("kin-numerics/1", "jina_tiny", 0xc21900a1163f0f90),
    // decoders
    ("kin-numerics/1", "gpt2_small", 0xb88ea5852e9bd003),
    ("kin-numerics/1", "llama_gqa", 0x92666b119c67fa22),
    ("kin-numerics/1", "llama_bf16", 0x9e8fa00575a493c0),
    ("kin-numerics/1", "llama_rope_linear", 0xaf5dee63f2c9f228),
    ("kin-numerics/1", "llama_rope_dynamic", 0xb800519f236c379e),
    ("kin-numerics/1", "llama_rope_llama3", 0x660647f41e3626ff),
    ("kin-numerics/1", "mistral_sw", 0x7a2bab59a7169fd8),
    ("kin-numerics/1", "qwen2_bias", 0xd37cf79e7909c59),
    ("kin-numerics/1", "qwen2_sw", 0xd21acc9ac1da3559),
    ("kin-numerics/1", "phi_partial", 0x9fe9da5553230512),
    ("kin-numerics/1", "phi3_longrope", 0x15303efa59317263),
    ("kin-numerics/1", "gemma_tied", 0x531399bdba0e557e),
    ("kin-numerics/1", "gemma2_sw", 0xdec51684d2785053),
    // The quantized GGUF fixtures in the q8 activation mode (issue 32), taken with
    // KIN_PRINT_PINS=1 on the generic, AVX2 and AVX-512 tiers (the same values).
    ("kin-numerics/1+q8/1", "llama_gqa.q8_0", 0x54e0091f4dad98ab),
    ("kin-numerics/1+q8/1", "llama_gqa.q4_0", 0xbef86fdad644bbd8),
    ("kin-numerics/1+q8/1", "llama_gqa.q4_1", 0x93d6f5fed6a21b62),
    ("kin-numerics/1+q8/1", "qwen2_bias.q8_0", 0x1183634170987b42),
    ("kin-numerics/1+q8/1", "qwen2_bias.q4_0", 0xad7155aa28d601e3),
    ("kin-numerics/1+q8/1", "qwen2_bias.q4_1", 0x58cfa886e6a4940a),
    ("kin-numerics/1+q8/1", "gemma_tied.q8_0", 0x332aa0fccaaa5e9d),
    (
        "kin-numerics/1+q8/1",
        "phi3_longrope.q8_0",
        0x3a9d7334c89783c3,
    ),
];

#[test]
fn output_bits_are_pinned_to_the_numerics_version() {
    assert_pinned(NUMERICS_VERSION, PINS, ENCODERS, encoder_fingerprint);
    assert_pinned(NUMERICS_VERSION, PINS, DECODERS, decoder_fingerprint);
    assert_pinned(Q8_NUMERICS_VERSION, PINS, Q8_DECODERS, q8_fingerprint);
}

/// The quantized GGUF fixtures, run in the q8 activation mode (docs/numerics.md).
const Q8_DECODERS: &[&str] = &[
    "llama_gqa.q8_0",
    "llama_gqa.q4_0",
    "llama_gqa.q4_1",
    "qwen2_bias.q8_0",
    "qwen2_bias.q4_0",
    "qwen2_bias.q4_1",
    "gemma_tied.q8_0",
    "phi3_longrope.q8_0",
];

/// Every encoder family and variant with a fixture.
const ENCODERS: &[&str] = &[
    "bert_tiny",
    "roberta_tiny",
    "xlmr_tiny",
    "albert_tiny",
    "deberta_v1_tiny",
    "deberta_v2_tiny",
    "deberta_v2_conv",
    "t5_tiny",
    "mt5_tiny",
    "st5_tiny",
    "nomic_tiny",
    "nomic_orig",
    "jina_tiny",
];

/// Every decoder family and variant with a fixture (rope scalings, windows, biases, softcaps).
const DECODERS: &[&str] = &[
    "gpt2_small",
    "llama_gqa",
    "llama_bf16",
    "llama_rope_linear",
    "llama_rope_dynamic",
    "llama_rope_llama3",
    "mistral_sw",
    "qwen2_bias",
    "qwen2_sw",
    "phi_partial",
    "phi3_longrope",
    "gemma_tied",
    "gemma2_sw",
];
