//! The ggml block formats' scalar reference dequantizers (`kernels::ggml`) against the `gguf`
//! package's `gguf.quants`, bit for bit: tests/fixtures/ggml/blocks.json, written by
//! python/gen_ggml_goldens.py (gguf 0.19.0, numpy 2.4.6) from random blocks and from rows
//! that gguf's own quantizers wrote.

use kin_infer_core::kernels::ggml::GgmlType;
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn goldens() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/ggml/blocks.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("read ggml goldens"))
        .expect("parse ggml goldens")
}

#[test]
fn every_type_dequantizes_as_gguf_quants_does() {
    let g = goldens();
    assert_eq!(g["format"], "kin-infer-ggml-golden/1");
    let types = g["types"].as_array().expect("types");
    let mut seen = Vec::new();
    for t in types {
        let name = t["type"].as_str().unwrap();
        let code = t["code"].as_u64().unwrap() as u32;
        let ty = GgmlType::from_code(code).unwrap_or_else(|| panic!("{name}: code {code} unread"));
        assert_eq!(ty.name(), name);
        assert_eq!(
            ty.block_len() as u64,
            t["block_len"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            ty.block_bytes() as u64,
            t["block_bytes"].as_u64().unwrap(),
            "{name}"
        );
        for case in t["cases"].as_array().unwrap() {
            let kind = case["kind"].as_str().unwrap();
            let blocks = hex(case["blocks"].as_str().unwrap());
            let want = f32s(&hex(case["values"].as_str().unwrap()));
            assert!(!want.is_empty(), "{name} {kind}: empty case");
            let mut got = vec![f32::NAN; want.len()];
            ty.dequantize(&blocks, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{name} {kind}: value {i} (block {}) is {g:e}, gguf.quants gives {w:e}",
                    i / ty.block_len()
                );
            }
        }
        seen.push(ty);
    }
    for ty in GgmlType::ALL {
        assert!(seen.contains(&ty), "no golden for {}", ty.name());
    }
}

/// Our reference quantizers write the reference's bytes for every quantize case (random rows, a
/// constant one, an all-zero one; the K-quants' also one with outliers and one all positive):
/// gguf.quants' for the 32-value types, llama.cpp's own `quantize_row_*_ref` for the K-quants.
#[test]
fn quantizers_write_what_gguf_quants_writes() {
    use kin_infer_core::kernels::ggml::{can_quantize, quantize};
    let g = goldens();
    let mut checked = 0;
    for t in g["types"].as_array().unwrap() {
        let ty = GgmlType::from_code(t["code"].as_u64().unwrap() as u32).unwrap();
        for case in t["cases"].as_array().unwrap() {
            if case["kind"] != "quantize" {
                continue;
            }
            assert!(can_quantize(ty), "{}: golden but no quantizer", ty.name());
            let src = f32s(&hex(case["source"].as_str().unwrap()));
            let want = hex(case["blocks"].as_str().unwrap());
            let mut got = Vec::new();
            quantize(ty, &src, &mut got);
            assert_eq!(got.len(), want.len(), "{}", ty.name());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    a,
                    b,
                    "{}: byte {i} (block {})",
                    ty.name(),
                    i / ty.block_bytes()
                );
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked, 8,
        "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (gguf.quants) and Q4_K, Q5_K, Q6_K (llama.cpp's C)"
    );
}

#[test]
fn a_short_buffer_is_refused() {
    let mut out = vec![0.0; 32];
    let r = std::panic::catch_unwind(move || GgmlType::Q4_0.dequantize(&[0u8; 17], &mut out));
    assert!(r.is_err(), "17 bytes are not a Q4_0 block");
}
