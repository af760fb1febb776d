//! `kin-infer quantize`'s writer (convert::gguf_export) against the `gguf` package:
//! a fixture checkpoint exported to F32 / Q8_0 / Q4_0 / Q4_1 holds, tensor for tensor, the
//! names, types, dims and **bytes** that python/gen_gguf_decoders.py wrote with GGUFWriter and
//! gguf.quants' reference quantizers (llama.cpp's q/k permutation included), and the same
//! model metadata; so it loads to the same logits. Unsupported inputs are typed errors.

mod support;

use kin_infer::convert::gguf_export;
use kin_infer::gpu::create_compute;
use kin_infer::io::gguf::GgufFile;
use kin_infer::kernels::ggml::GgmlType;
use kin_infer::models::decoders::load_decoder;
use std::path::PathBuf;
use support::decoder::{bits, fixture, full_logits, prompt};

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf/decoders")
        .join(name)
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kin-gguf-export-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn exported_files_equal_the_gguf_packages_tensor_for_tensor() {
    let out_dir = scratch("eq");
    for model in ["llama_gqa", "qwen2_bias"] {
        for (q, ty) in [
            ("f32", GgmlType::F32),
            ("q8_0", GgmlType::Q8_0),
            ("q4_0", GgmlType::Q4_0),
            ("q4_1", GgmlType::Q4_1),
        ] {
            let out = out_dir.join(format!("{model}.{q}.gguf"));
            let mut calls = 0;
            let report = gguf_export::export(&fixture(model), &out, ty, |done, total| {
                calls += 1;
                assert!(done <= total);
            })
            .unwrap();
            assert_eq!(calls, report.tensors);
            let ours = GgufFile::open(&out).unwrap();
            let theirs = GgufFile::open(&reference(&format!("{model}.{q}.gguf"))).unwrap();
            assert_eq!(ours.tensors.len(), theirs.tensors.len(), "{model} {q}");
            for (a, b) in ours.tensors.iter().zip(&theirs.tensors) {
                assert_eq!(
                    (&a.name, a.ty, &a.dims),
                    (&b.name, b.ty, &b.dims),
                    "{model} {q}"
                );
                assert!(
                    ours.tensor_bytes(a) == theirs.tensor_bytes(b),
                    "{model} {q}: tensor {} bytes differ from gguf's",
                    a.name
                );
            }
            // Every model key gguf's file has, ours has with the same value.
            for (key, value) in &theirs.metadata {
                if key.starts_with("tokenizer.") || key == "general.name" {
                    continue; // the fixture checkpoints have no tokenizer.json
                }
                assert_eq!(ours.get(key), Some(value), "{model} {q}: `{key}`");
            }
            assert_eq!(
                report.architecture,
                ours.get("general.architecture").unwrap().as_str().unwrap()
            );
            assert!(!report.tokenizer);
        }
    }
    std::fs::remove_dir_all(&out_dir).ok();
}

#[test]
fn an_exported_q8_0_file_runs_like_its_reference() {
    let out_dir = scratch("run");
    let out = out_dir.join("m.gguf");
    gguf_export::export(&fixture("llama_gqa"), &out, GgmlType::Q8_0, |_, _| {}).unwrap();
    let be = create_compute(None).unwrap();
    let a = load_decoder(&out, be.as_ref()).unwrap();
    let b = load_decoder(&reference("llama_gqa.q8_0.gguf"), be.as_ref()).unwrap();
    let ids = prompt(17, a.spec().vocab_size);
    assert_eq!(
        bits(&full_logits(a.as_ref(), be.as_ref(), &ids)),
        bits(&full_logits(b.as_ref(), be.as_ref(), &ids))
    );
    std::fs::remove_dir_all(&out_dir).ok();
}

/// The K-quant exports follow llama.cpp's choices: with q4_k_m, Q6_K for the output and for
/// attn_v / ffn_down in use_more_bits layers (of llama_gqa's two: `i < 2/8 || i >= 7·2/8 ||
/// (i − 2/8) % 3 == 2` holds for layer 1 only), Q4_K elsewhere; a matrix whose rows are not
/// whole 256-value blocks takes the fallback (Q4_K → Q5_0, Q6_K → Q8_0). The file loads and
/// runs. (The K-quantizers' bytes are held to llama.cpp's own in kin-infer-core's
/// tests/ggml_formats.rs.)
#[test]
fn k_quant_recipes_follow_llama_cpp() {
    let out_dir = scratch("k");
    let out = out_dir.join("m.gguf");
    let r = gguf_export::export_with(&fixture("llama_gqa"), &out, GgmlType::Q4_K, true, |_, _| {})
        .unwrap();
    let f = GgufFile::open(&out).unwrap();
    assert_eq!(
        f.get("general.file_type").and_then(|v| v.as_u64()),
        Some(15),
        "LLAMA_FTYPE_MOSTLY_Q4_K_M"
    );
    let ty = |name: &str| f.tensor(name).unwrap_or_else(|| panic!("{name}")).ty;
    // Rows of 64 and 96 values: never whole K blocks, so every type is its fallback.
    assert_eq!(ty("output.weight"), GgmlType::Q8_0);
    assert_eq!(ty("blk.1.attn_v.weight"), GgmlType::Q8_0);
    assert_eq!(ty("blk.1.ffn_down.weight"), GgmlType::Q8_0);
    assert_eq!(ty("blk.0.attn_v.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.0.attn_norm.weight"), GgmlType::F32);
    assert!(r.quantized > 0);
    let be = create_compute(None).unwrap();
    let m = load_decoder(&out, be.as_ref()).unwrap();
    let logits = full_logits(m.as_ref(), be.as_ref(), &prompt(9, m.spec().vocab_size));
    assert!(logits.iter().all(|x| x.is_finite()));
    std::fs::remove_dir_all(&out_dir).ok();
}

#[test]
fn unsupported_inputs_are_typed_errors() {
    let out_dir = scratch("err");
    let out = out_dir.join("m.gguf");
    // Q2_K and Q3_K have no reference quantizer here; the _M recipe is Q4_K's and Q5_K's.
    let e = gguf_export::export(&fixture("llama_gqa"), &out, GgmlType::Q2_K, |_, _| {})
        .err()
        .unwrap();
    assert_eq!(e.kind(), kin_infer::ErrorKind::Unsupported, "{e}");
    let e = gguf_export::export_with(&fixture("llama_gqa"), &out, GgmlType::Q8_0, true, |_, _| {})
        .err()
        .unwrap();
    assert_eq!(e.kind(), kin_infer::ErrorKind::Unsupported, "{e}");
    // Mistral's sliding window has no GGUF llama key.
    let e = gguf_export::export(&fixture("mistral_sw"), &out, GgmlType::Q8_0, |_, _| {})
        .err()
        .unwrap();
    assert!(e.to_string().contains("sliding-window"), "{e}");
    // Another family.
    let e = gguf_export::export(&fixture("gpt2_small"), &out, GgmlType::Q8_0, |_, _| {})
        .err()
        .unwrap();
    assert_eq!(e.kind(), kin_infer::ErrorKind::Unsupported, "{e}");
    assert!(!out.exists(), "no file is left behind by a refused export");
    std::fs::remove_dir_all(&out_dir).ok();
}

/// The safetensors variant: same checkpoint names, matrices as U8 ggml blocks named in
/// `__metadata__`. Loaded by the ordinary family code, its logits equal the GGUF of the same
/// quantization bit for bit (quantizing a row does not depend on the row order, so llama.cpp's
/// permutation changes no block).
#[test]
fn the_safetensors_variant_loads_quantized_and_matches_the_gguf() {
    use kin_infer::convert::st_quantize;
    use kin_infer::io::safetensors::WeightStore;
    let out_dir = scratch("st");
    let be = create_compute(None).unwrap();
    for (q, ty) in [
        ("q8_0", GgmlType::Q8_0),
        ("q4_0", GgmlType::Q4_0),
        ("q4_1", GgmlType::Q4_1),
    ] {
        let dir = out_dir.join(q);
        let (tensors, quantized) =
            st_quantize::export(&fixture("llama_gqa"), &dir, ty, |_, _| {}).unwrap();
        assert!(quantized > 0 && quantized < tensors);
        let store = WeightStore::open_dir(&dir).unwrap();
        assert_eq!(store.dtype_counts().get(ty.name()), Some(&quantized), "{q}");
        let a = load_decoder(&dir, be.as_ref()).unwrap();
        let b = load_decoder(&reference(&format!("llama_gqa.{q}.gguf")), be.as_ref()).unwrap();
        let ids = prompt(15, a.spec().vocab_size);
        assert_eq!(
            bits(&full_logits(a.as_ref(), be.as_ref(), &ids)),
            bits(&full_logits(b.as_ref(), be.as_ref(), &ids)),
            "{q}: safetensors variant vs GGUF"
        );
    }
    std::fs::remove_dir_all(&out_dir).ok();
}

/// A block-type entry that does not fit its tensor is a clear error naming both.
#[test]
fn a_block_entry_that_does_not_fit_its_tensor_is_refused() {
    use kin_infer::io::safetensors::WeightStore;
    let dir = scratch("bad-st");
    let bytes = vec![0u8; 4 * 64];
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 32], &bytes).unwrap();
    for (ty, what) in [
        ("Q8_0", "expected a U8 tensor"),
        ("IQ2_XS", "not a ggml block type"),
    ] {
        let meta = std::collections::HashMap::from([(
            "kin.ggml_type.w.weight".to_string(),
            ty.to_string(),
        )]);
        safetensors::tensor::serialize_to_file(
            [("w.weight", view.clone())],
            Some(meta),
            &dir.join("model.safetensors"),
        )
        .unwrap();
        let e = WeightStore::open_dir(&dir).err().expect("must fail");
        let msg = e.to_string();
        assert!(msg.contains("w.weight") && msg.contains(what), "{msg}");
        assert_eq!(e.kind(), kin_infer::ErrorKind::InvalidModel);
    }
    std::fs::remove_dir_all(&dir).ok();
}
