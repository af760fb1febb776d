//! The GGUF reader against a file the `gguf` package's own writer made
//! (tests/fixtures/gguf/all_types.gguf, python/gen_gguf_fixture.py: every metadata value type,
//! one tensor of every ggml type read), and against malformed files: every truncation, random
//! byte flips, hostile counts, unread types. Bad input is an error, never a panic.

use kin_infer_core::error::{ErrorKind, InferError};
use kin_infer_core::io::gguf::{GgufFile, MetaValue};
use kin_infer_core::kernels::ggml::GgmlType;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

fn hex_f32(s: &str) -> Vec<f32> {
    (0..s.len())
        .step_by(8)
        .map(|i| {
            let b: Vec<u8> = (0..4)
                .map(|j| u8::from_str_radix(&s[i + 2 * j..i + 2 * j + 2], 16).unwrap())
                .collect();
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        })
        .collect()
}

#[test]
fn reads_what_gguf_writes() {
    let f = GgufFile::open(&fixture().join("all_types.gguf")).expect("open");
    let side: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("all_types.json")).unwrap())
            .unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.alignment, 32);
    assert_eq!(
        f.get("general.architecture").and_then(|v| v.as_str()),
        Some("llama")
    );
    for (key, m) in side["metadata"].as_object().unwrap() {
        let v = f.get(key).unwrap_or_else(|| panic!("no `{key}`"));
        let ty = m["type"].as_str().unwrap();
        let want = &m["value"];
        match ty {
            "array" => {
                let MetaValue::Array(items) = v else {
                    panic!("{key}: {v:?}")
                };
                let want = want.as_array().unwrap();
                assert_eq!(items.len(), want.len(), "{key}");
                for (got, w) in items.iter().zip(want) {
                    match w {
                        Value::String(s) => assert_eq!(got.as_str(), Some(s.as_str()), "{key}"),
                        _ => assert_eq!(got.as_u64(), w.as_u64(), "{key}"),
                    }
                }
            }
            _ => {
                assert_eq!(v.type_name(), ty, "{key}");
                match v {
                    MetaValue::Str(s) => assert_eq!(s, want.as_str().unwrap()),
                    MetaValue::Bool(b) => assert_eq!(*b, want.as_bool().unwrap()),
                    MetaValue::F32(x) => assert_eq!(*x as f64, want.as_f64().unwrap()),
                    MetaValue::F64(x) => assert_eq!(*x, want.as_f64().unwrap()),
                    MetaValue::I8(x) => assert_eq!(*x as i64, want.as_i64().unwrap()),
                    MetaValue::I16(x) => assert_eq!(*x as i64, want.as_i64().unwrap()),
                    MetaValue::I32(x) => assert_eq!(*x as i64, want.as_i64().unwrap()),
                    MetaValue::I64(x) => assert_eq!(*x, want.as_i64().unwrap()),
                    _ => assert_eq!(v.as_u64(), want.as_u64(), "{key}"),
                }
            }
        }
    }
    let tensors = side["tensors"].as_array().unwrap();
    assert_eq!(f.tensors.len(), tensors.len());
    for t in tensors {
        let name = t["name"].as_str().unwrap();
        let got = f
            .tensor(name)
            .unwrap_or_else(|| panic!("no tensor `{name}`"));
        assert_eq!(got.ty.name(), t["type"].as_str().unwrap(), "{name}");
        let dims: Vec<usize> = serde_json::from_value(t["dims"].clone()).unwrap();
        assert_eq!(got.dims, dims, "{name}");
        let want = hex_f32(t["values"].as_str().unwrap());
        let vals = f.dequantize(got);
        assert_eq!(vals.len(), want.len(), "{name}");
        for (i, (a, b)) in vals.iter().zip(&want).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{name} value {i}: {a:e} vs gguf's {b:e}"
            );
        }
    }
    for ty in GgmlType::ALL {
        assert!(
            f.tensors.iter().any(|t| t.ty == ty),
            "fixture lacks {}",
            ty.name()
        );
    }
    // One tensor of each type; bits per weight from the blocks' own geometry.
    assert!(f.type_counts().iter().all(|&(_, n)| n == 1));
    assert_eq!(f.type_counts().len(), GgmlType::ALL.len());
    let (bytes, values) = f.tensors.iter().fold((0, 0), |(b, v), t| {
        let blocks = t.len() / t.ty.block_len();
        (b + blocks * t.ty.block_bytes(), v + t.len())
    });
    let bpw = f.bits_per_weight().unwrap();
    assert_eq!(bpw, bytes as f64 * 8.0 / values as f64);
    assert!(bpw > 4.0 && bpw < 32.0, "{bpw}");
}

#[test]
fn bits_per_weight_follow_the_block_geometry() {
    // Q4_0: 18 bytes per 32 values = 4.5 bits; Q6_K: 210 per 256 = 6.5625.
    for (code, n, bytes, want) in [(2u32, 64u64, 36usize, 4.5), (14, 256, 210, 6.5625)] {
        let file = build(1, &[("w", &[n], code, 0)], &vec![0; bytes]);
        let f = GgufFile::from_bytes("t.gguf", file).unwrap();
        assert_eq!(f.bits_per_weight(), Some(want));
    }
}

fn fixture_bytes() -> Vec<u8> {
    std::fs::read(fixture().join("all_types.gguf")).unwrap()
}

#[test]
fn every_truncation_is_an_error() {
    let data = fixture_bytes();
    // The writer pads the last tensor to the alignment: cutting only padding leaves a whole file.
    let full = GgufFile::from_bytes("full.gguf", data.clone()).unwrap();
    let end = full
        .tensors
        .iter()
        .map(|t| t.offset + t.size)
        .max()
        .unwrap();
    assert!(data.len() - end < full.alignment);
    for len in 0..end {
        match GgufFile::from_bytes("cut.gguf", data[..len].to_vec()) {
            Ok(_) => panic!("{len} of {} bytes parsed", data.len()),
            Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidModel, "{len} bytes: {e}"),
        }
    }
}

#[test]
fn flipped_bytes_never_panic() {
    let data = fixture_bytes();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut d = data.clone();
        for _ in 0..1 + next() % 3 {
            // Mostly the header and directory, where the structure is.
            let at = (next() as usize) % 1200.min(d.len());
            d[at] ^= 1 << (next() % 8);
        }
        if let Ok(f) = GgufFile::from_bytes("flip.gguf", d) {
            for t in &f.tensors {
                assert_eq!(f.dequantize(t).len(), t.len());
            }
        }
    }
}

/// A minimal GGUF v3: no metadata, the given tensor infos `(name, dims, type code, offset)`,
/// then `data` after padding to 32.
fn build(n_tensors_field: u64, infos: &[(&str, &[u64], u32, u64)], data: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(n_tensors_field.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    for (name, dims, ty, off) in infos {
        b.extend((name.len() as u64).to_le_bytes());
        b.extend(name.as_bytes());
        b.extend((dims.len() as u32).to_le_bytes());
        for d in *dims {
            b.extend(d.to_le_bytes());
        }
        b.extend(ty.to_le_bytes());
        b.extend(off.to_le_bytes());
    }
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b.extend(data);
    b
}

fn err(bytes: Vec<u8>) -> InferError {
    match GgufFile::from_bytes("t.gguf", bytes) {
        Ok(_) => panic!("parsed"),
        Err(e) => e,
    }
}

#[test]
fn hostile_directories_are_named_errors() {
    let huge = err(build(u64::MAX, &[], &[]));
    assert!(huge.to_string().contains("tensor count"), "{huge}");
    let q = vec![0u8; 18];
    let ok = GgufFile::from_bytes("t.gguf", build(1, &[("w", &[32], 2, 0)], &q)).unwrap();
    assert_eq!(ok.tensors[0].size, 18);
    let e = err(build(1, &[("w", &[33], 2, 0)], &q));
    assert!(e.to_string().contains("whole 32-value blocks"), "{e}");
    let e = err(build(1, &[("w", &[32, 2], 2, 0)], &q));
    assert!(e.to_string().contains("run past the data section"), "{e}");
    let e = err(build(1, &[("w", &[32], 2, 4)], &[0u8; 64]));
    assert!(
        e.to_string().contains("not a multiple of the alignment"),
        "{e}"
    );
    let e = err(build(1, &[("w", &[u64::MAX, u64::MAX], 0, 0)], &q));
    assert!(e.to_string().contains("overflows"), "{e}");
    let e = err(build(1, &[("w", &[1, 1, 1, 1, 1], 0, 0)], &q));
    assert!(e.to_string().contains("5 dimensions"), "{e}");
    let e = err(build(
        2,
        &[("w", &[4], 0, 0), ("w", &[4], 0, 32)],
        &[0u8; 64],
    ));
    assert!(e.to_string().contains("appears twice"), "{e}");
    let e = err(build(1, &[("w", &[256], 16, 0)], &[0u8; 1024]));
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(
        e.to_string().contains("`w`") && e.to_string().contains("IQ2_XXS"),
        "{e}"
    );
    let mut v1 = build(0, &[], &[]);
    v1[4] = 1;
    assert_eq!(err(v1).kind(), ErrorKind::Unsupported);
    let e = err(b"GGML\x03\0\0\0".to_vec());
    assert!(e.to_string().contains("not a GGUF file"), "{e}");
}

/// Where `key`'s value type (the u32 after the key string) sits in a GGUF file's bytes.
fn key_at(data: &[u8], key: &str) -> usize {
    let mut pat = (key.len() as u64).to_le_bytes().to_vec();
    pat.extend(key.as_bytes());
    let at = data
        .windows(pat.len())
        .position(|w| w == pat)
        .unwrap_or_else(|| panic!("no `{key}` in the file"));
    at + pat.len()
}

/// Where tensor `name`'s type code sits in the directory of `data`.
fn tensor_type_at(data: &[u8], name: &str) -> usize {
    let at = key_at(data, name);
    let n_dims = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
    at + 4 + 8 * n_dims
}

/// A GGUF v3 with the given metadata pairs (`(key, type code, value bytes)`) and no tensors.
fn build_meta(pairs: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend((pairs.len() as u64).to_le_bytes());
    for (key, ty, value) in pairs {
        b.extend((key.len() as u64).to_le_bytes());
        b.extend(key.as_bytes());
        b.extend(ty.to_le_bytes());
        b.extend(value);
    }
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b
}

/// An array value of `n` elements of type `elem`, each `item`.
fn array_value(elem: u32, n: usize, item: &[u8]) -> Vec<u8> {
    let mut v = elem.to_le_bytes().to_vec();
    v.extend((n as u64).to_le_bytes());
    for _ in 0..n {
        v.extend(item);
    }
    v
}

/// Issue 30's abort: a 12-byte edit of a real tokenizer file (`tokenizer.ggml.token_type`
/// made a u8 array of millions of elements, the bytes appended) asked for 32 bytes of memory
/// per file byte up front. The count is refused before one element is decoded, naming the key.
#[test]
fn a_metadata_array_past_the_decoded_cap_is_refused_naming_the_key() {
    use kin_infer_core::io::gguf::MAX_METADATA_BYTES;
    let mut data = std::fs::read(fixture().join("tokenizers/bpe_gpt-2.gguf")).unwrap();
    let at = key_at(&data, "tokenizer.ggml.token_type");
    assert_eq!(&data[at..at + 4], &9u32.to_le_bytes(), "an array");
    let n = MAX_METADATA_BYTES / std::mem::size_of::<MetaValue>() + 1;
    data[at + 4..at + 8].copy_from_slice(&0u32.to_le_bytes());
    data[at + 8..at + 16].copy_from_slice(&(n as u64).to_le_bytes());
    data.resize(data.len() + n, 1);
    let e = err(data);
    assert_eq!(e.kind(), ErrorKind::InvalidModel);
    let msg = e.to_string();
    assert!(
        msg.contains("`tokenizer.ggml.token_type`")
            && msg.contains(&format!("{n} elements"))
            && msg.contains("cap of 256 MiB"),
        "{msg}"
    );
}

/// The cap is on the whole header: arrays each under it are refused once their sum passes
/// it, at the key that crosses it.
#[test]
fn the_decoded_cap_counts_every_key() {
    let per = 1_000_000;
    let item = array_value(0, per, &[7]);
    let keys: Vec<String> = (0..10).map(|i| format!("kin.test.k{i}")).collect();
    let pairs: Vec<(&str, u32, Vec<u8>)> =
        keys.iter().map(|k| (k.as_str(), 9, item.clone())).collect();
    // 32 bytes a slot: 8 arrays of a million fit in 256 MiB, the 9th does not.
    let e = err(build_meta(&pairs)).to_string();
    assert!(e.contains("`kin.test.k8`") && e.contains("cap"), "{e}");
    // Under the cap the same arrays read, every element kept.
    let f = GgufFile::from_bytes("t.gguf", build_meta(&pairs[..2])).unwrap();
    match f.get("kin.test.k1") {
        Some(MetaValue::Array(a)) => {
            assert_eq!(a.len(), per);
            assert!(a.iter().all(|v| *v == MetaValue::U8(7)));
        }
        other => panic!("{other:?}"),
    }
}

/// An array nested in an array is charged like one at the top.
#[test]
fn strings_and_nested_arrays_are_charged() {
    // 9 inner arrays of a million u8 inside one array: 288 MB decoded.
    let inner = array_value(0, 1_000_000, &[0]);
    let mut outer = 9u32.to_le_bytes().to_vec();
    outer.extend(9u64.to_le_bytes());
    for _ in 0..9 {
        outer.extend(&inner);
    }
    let e = err(build_meta(&[("kin.test.nested", 9, outer)])).to_string();
    assert!(e.contains("`kin.test.nested`") && e.contains("cap"), "{e}");
    // A string value, its bytes charged, reads under the cap.
    let mut s = 3u64.to_le_bytes().to_vec();
    s.extend(b"abc");
    let f = GgufFile::from_bytes("t.gguf", build_meta(&[("kin.test.s", 8, s)])).unwrap();
    assert_eq!(f.get("kin.test.s").and_then(MetaValue::as_str), Some("abc"));
}

/// Two tensors sharing bytes (an offset edited to another tensor's) are refused naming both.
#[test]
fn overlapping_tensors_are_refused_naming_both() {
    let e = err(build(
        2,
        &[("a", &[16], 0, 0), ("b", &[8], 0, 32)],
        &[0u8; 96],
    ));
    let msg = e.to_string();
    assert!(
        msg.contains("`a`") && msg.contains("`b`") && msg.contains("overlap"),
        "{msg}"
    );
    assert!(
        msg.contains("data bytes 0..64") && msg.contains("data bytes 32..64"),
        "{msg}"
    );
    // The same offsets in either directory order; a zero-length tensor overlaps nothing.
    let e = err(build(
        2,
        &[("b", &[8], 0, 32), ("a", &[16], 0, 0)],
        &[0u8; 96],
    ));
    assert!(e.to_string().contains("overlap"), "{e}");
    let f = GgufFile::from_bytes(
        "t.gguf",
        build(2, &[("a", &[8], 0, 0), ("e", &[0], 0, 0)], &[0u8; 32]),
    )
    .unwrap();
    assert_eq!(f.tensors.len(), 2);
    // Adjacent tensors (one ends where the next starts) are the normal layout.
    GgufFile::from_bytes(
        "t.gguf",
        build(2, &[("a", &[8], 0, 0), ("b", &[8], 0, 32)], &[0u8; 64]),
    )
    .unwrap();
}

/// A tensor whose type was edited to a wider one (F16 to F32, Q4_0 to Q8_0 in the fixture's
/// directory) runs into the next tensor's data: refused naming both.
#[test]
fn a_type_edited_to_a_wider_one_is_refused() {
    for (name, wider, next) in [("t.f16", 0u32, "t.bf16"), ("t.q4_0", 8, "t.q4_1")] {
        let mut data = fixture_bytes();
        let at = tensor_type_at(&data, name);
        data[at..at + 4].copy_from_slice(&wider.to_le_bytes());
        let msg = err(data).to_string();
        assert!(
            msg.contains(&format!("`{name}`"))
                && msg.contains(&format!("`{next}`"))
                && msg.contains("overlap"),
            "{name}: {msg}"
        );
    }
}

/// [`GgufFile::float`], the reader every loader's float keys go through: absent is `None`,
/// a non-float or a non-finite value an error naming the key.
#[test]
fn float_keys_refuse_non_finite_and_mistyped_values() {
    let f32v = |x: f32| x.to_le_bytes().to_vec();
    let file = build_meta(&[
        ("k.ok", 6, f32v(1e6)),
        ("k.f64", 12, 0.5f64.to_le_bytes().to_vec()),
        ("k.nan", 6, f32v(f32::NAN)),
        ("k.inf", 12, f64::NEG_INFINITY.to_le_bytes().to_vec()),
        ("k.int", 4, 10000u32.to_le_bytes().to_vec()),
    ]);
    let f = GgufFile::from_bytes("t.gguf", file).unwrap();
    assert_eq!(f.float("k.ok").unwrap(), Some(1e6));
    assert_eq!(f.float("k.f64").unwrap(), Some(0.5));
    assert_eq!(f.float("k.absent").unwrap(), None);
    let e = f.float("k.nan").unwrap_err().to_string();
    assert!(e.contains("`k.nan`") && e.contains("NaN"), "{e}");
    let e = f.float("k.inf").unwrap_err().to_string();
    assert!(e.contains("`k.inf`") && e.contains("-inf"), "{e}");
    let e = f.float("k.int").unwrap_err().to_string();
    assert!(e.contains("`k.int`") && e.contains("uint32"), "{e}");
}
