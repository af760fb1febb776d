//! Decoders from GGUF files (tests/fixtures/gguf/decoders, written by
//! python/gen_gguf_decoders.py with the `gguf` package as llama.cpp's converter writes them):
//! - an F32 GGUF of a fixture checkpoint (llama, qwen2, gemma, gemma2, phi3 with longrope, phi2, gpt2) gives the safetensors
//!   checkpoint's logits bit for bit (the LLaMA q/k row permutation undone, Gemma's `1 + w`
//!   norms read as stored, GPT-2's Conv1D
//!   weights read as converted; config from metadata), so it meets the same transformers
//!   goldens;
//! - a Q8_0 / Q4_0 / Q4_1 GGUF and its F32 twin (every quantized tensor replaced by
//!   `gguf.quants.dequantize`) give bit-identical logits on every exact tier, one and two
//!   threads, full pass and token by token: weights stay quantized, activations never are;
//! - the metadata's errors are typed and name the file's keys.

mod support;

use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::kernels::Tier;
use kin_infer::models::decoders::{load_decoder, Decoder};
use std::path::PathBuf;
use support::decoder::{bits, chunked_logits, fixture, full_logits, gguf, prompt};

fn load(path: &std::path::Path, be: &dyn GpuCompute) -> Box<dyn Decoder> {
    load_decoder(path, be).unwrap_or_else(|e| panic!("load {}: {e}", path.display()))
}

#[test]
fn f32_gguf_equals_the_safetensors_checkpoint_bit_for_bit() {
    let be = create_compute(None).unwrap();
    for name in [
        "llama_gqa",
        "llama_mqa",
        "qwen2_bias",
        "gemma_tied",
        "gemma2_hd",
        "phi3_longrope",
        "phi_partial",
        "gpt2_small",
    ] {
        let st = load(&fixture(name), be.as_ref());
        let gg = load(&gguf(&format!("{name}.f32.gguf")), be.as_ref());
        let (a, b) = (st.spec(), gg.spec());
        assert_eq!(
            (
                a.hidden_size,
                a.num_hidden_layers,
                a.num_attention_heads,
                a.num_key_value_heads
            ),
            (
                b.hidden_size,
                b.num_hidden_layers,
                b.num_attention_heads,
                b.num_key_value_heads
            ),
            "{name}: sizes from metadata"
        );
        assert_eq!(
            (
                a.head_dim,
                a.intermediate_size,
                a.vocab_size,
                a.max_sequence_length
            ),
            (
                b.head_dim,
                b.intermediate_size,
                b.vocab_size,
                b.max_sequence_length
            ),
            "{name}"
        );
        // llama.cpp's GPT-2 converter writes the tied head out as its own `output` tensor.
        if name != "gpt2_small" {
            assert_eq!(a.tied_embeddings, b.tied_embeddings, "{name}: tied head");
        }
        assert_eq!(a.attention, b.attention, "{name}: attention kind");
        // 30 tokens: past phi3_longrope's original context (24), so its long factors too.
        for len in [19, 30] {
            if len > a.max_sequence_length {
                continue;
            }
            let ids = prompt(len, a.vocab_size);
            assert_eq!(
                bits(&full_logits(st.as_ref(), be.as_ref(), &ids)),
                bits(&full_logits(gg.as_ref(), be.as_ref(), &ids)),
                "{name}: F32 GGUF logits differ from the safetensors checkpoint's ({len} tokens)"
            );
        }
    }
}

#[test]
fn quantized_gguf_equals_its_dequantized_f32_twin_on_every_tier() {
    let tiers: Vec<Tier> = Tier::available_exact();
    for (name, formats) in [
        ("llama_gqa", &["q8_0", "q4_0", "q4_1"][..]),
        ("qwen2_bias", &["q8_0", "q4_0", "q4_1"]),
        ("gemma_tied", &["q8_0"]),
        ("phi3_longrope", &["q8_0"]),
    ] {
        for &q in formats {
            let mut first: Option<Vec<u32>> = None;
            for &tier in &tiers {
                let be = create_compute(Some(tier)).unwrap();
                let quant = load(&gguf(&format!("{name}.{q}.gguf")), be.as_ref());
                let twin = load(&gguf(&format!("{name}.{q}.twin.gguf")), be.as_ref());
                let ids = prompt(13, quant.spec().vocab_size);
                let want = bits(&full_logits(twin.as_ref(), be.as_ref(), &ids));
                let got = bits(&full_logits(quant.as_ref(), be.as_ref(), &ids));
                assert_eq!(
                    got,
                    want,
                    "{name} {q} tier {}: quantized vs twin",
                    tier.name()
                );
                // Token by token (decode's single rows, the direct kernels) and in chunks.
                let stepped = bits(&chunked_logits(quant.as_ref(), be.as_ref(), &ids, &[4]));
                assert_eq!(
                    stepped,
                    want,
                    "{name} {q} tier {}: incremental",
                    tier.name()
                );
                match &first {
                    None => first = Some(got),
                    Some(f) => assert_eq!(&got, f, "{name} {q}: tier {} differs", tier.name()),
                }
            }
        }
    }
}

#[test]
fn quantized_gguf_is_thread_count_independent() {
    let be = create_compute(None).unwrap();
    let path = gguf("llama_gqa.q4_0.gguf");
    let m = load(&path, be.as_ref());
    let ids = prompt(21, m.spec().vocab_size);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| bits(&full_logits(m.as_ref(), be.as_ref(), &ids)))
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn gguf_metadata_errors_are_typed() {
    let be = create_compute(None).unwrap();
    // gguf's own all-types fixture: architecture llama, but no model metadata or tensors.
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/all_types.gguf");
    let e = load_decoder(&path, be.as_ref()).err().expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("all_types.gguf") && msg.contains("llama."),
        "the error names the file and the GGUF key: {msg}"
    );
    assert_eq!(e.kind(), kin_infer::ErrorKind::InvalidModel, "{msg}");
    // A truncated file is a GGUF error (exit 2), not a panic.
    let bytes = std::fs::read(gguf("llama_gqa.q8_0.gguf")).unwrap();
    let dir = std::env::temp_dir().join(format!("kin-gguf-trunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = load_decoder(&cut, be.as_ref()).err().expect("must fail");
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(e.kind(), kin_infer::ErrorKind::InvalidModel, "{e}");
    assert!(e.to_string().contains("cut.gguf"), "{e}");
}
