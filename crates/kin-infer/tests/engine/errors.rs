//! Bad input never panics: broken weights, configs and inputs give typed errors that name
//! the file, tensor or field at fault.

use crate::common::fixture;
use crate::support::load_err;
use kin_infer::{Embedder, EmbedderOptions, InferError};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::fs;
use std::path::Path;

/// A temp model dir with bert_tiny's config and the given safetensors bytes.
fn model_with(bytes: &[u8]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::copy(
        fixture("bert_tiny/config.json"),
        d.path().join("config.json"),
    )
    .unwrap();
    fs::write(d.path().join("model.safetensors"), bytes).unwrap();
    d
}

fn original() -> Vec<u8> {
    fs::read(fixture("bert_tiny/model.safetensors")).unwrap()
}

/// Re-serializes bert_tiny's tensors after `edit` (name, dtype, shape, data) → keep?
fn rewritten(edit: impl Fn(&str, &mut Dtype, &mut Vec<usize>) -> bool) -> Vec<u8> {
    let bytes = original();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut views = Vec::new();
    for (name, t) in st.tensors() {
        let mut dtype = t.dtype();
        let mut shape = t.shape().to_vec();
        if edit(&name, &mut dtype, &mut shape) {
            views.push((name, TensorView::new(dtype, shape, t.data()).unwrap()));
        }
    }
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn truncated_safetensors_is_rejected() {
    let b = original();
    for cut in [0, 5, 100, b.len() / 2, b.len() - 1] {
        let d = model_with(&b[..cut]);
        let e = load_err(d.path());
        assert!(
            matches!(e, InferError::Safetensors { .. }),
            "cut {cut}: {e}"
        );
        assert!(e.to_string().contains("model.safetensors"), "{e}");
    }
}

#[test]
fn header_lying_about_offsets_is_rejected() {
    let b = original();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&b[8..8 + n]).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(header).unwrap();
    let (_, t) = v
        .as_object_mut()
        .unwrap()
        .iter_mut()
        .find(|(k, _)| *k != "__metadata__")
        .unwrap();
    let end = t["data_offsets"][1].as_u64().unwrap();
    t["data_offsets"][1] = serde_json::json!(end + 4096);
    let h = serde_json::to_string(&v).unwrap();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(&b[8 + n..]);
    let d = model_with(&out);
    assert!(matches!(load_err(d.path()), InferError::Safetensors { .. }));
}

#[test]
fn missing_tensor_names_it_the_prefixes_and_the_file() {
    let d = model_with(&rewritten(|name, _, _| {
        !name.ends_with("encoder.layer.1.output.dense.weight")
    }));
    let e = load_err(d.path());
    let msg = e.to_string();
    assert!(matches!(e, InferError::MissingTensor { .. }), "{msg}");
    assert!(msg.contains("encoder.layer.1.output.dense.weight"), "{msg}");
    assert!(msg.contains("'bert.'"), "{msg}");
    assert!(msg.contains("model.safetensors"), "{msg}");
}

#[test]
fn missing_probe_tensor_lists_every_prefix_tried() {
    let d = model_with(&rewritten(|name, _, _| !name.contains("word_embeddings")));
    let msg = load_err(d.path()).to_string();
    for p in ["''", "'bert.'", "'model.'"] {
        assert!(msg.contains(p), "{msg}");
    }
}

#[test]
fn wrong_shape_names_both_shapes() {
    let d = model_with(&rewritten(|name, _, shape| {
        if name.ends_with("encoder.layer.0.intermediate.dense.weight") {
            shape.reverse();
        }
        true
    }));
    let e = load_err(d.path());
    let msg = e.to_string();
    assert!(matches!(e, InferError::ShapeMismatch { .. }), "{msg}");
    assert!(
        msg.contains("[48, 80]") && msg.contains("[80, 48]"),
        "{msg}"
    );
}

#[test]
fn unsupported_dtype_is_named() {
    let d = model_with(&rewritten(|name, dtype, _| {
        if name.ends_with("embeddings.LayerNorm.bias") {
            *dtype = Dtype::I32;
        }
        true
    }));
    let msg = load_err(d.path()).to_string();
    assert!(
        msg.contains("embeddings.LayerNorm.bias") && msg.contains("I32"),
        "{msg}"
    );
}

#[test]
fn unknown_model_type_lists_the_supported_ones() {
    let d = model_with(&original());
    let cfg = fs::read_to_string(d.path().join("config.json")).unwrap();
    fs::write(
        d.path().join("config.json"),
        cfg.replace("\"bert\"", "\"frobnitz\""),
    )
    .unwrap();
    let e = load_err(d.path());
    let msg = e.to_string();
    assert!(matches!(e, InferError::UnsupportedModel { .. }), "{msg}");
    assert!(
        msg.contains("frobnitz") && msg.contains("xlm-roberta"),
        "{msg}"
    );
}

#[test]
fn malformed_config_names_the_field() {
    let d = model_with(&original());
    let cfg = fs::read_to_string(d.path().join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    v["hidden_size"] = serde_json::json!("big");
    fs::write(d.path().join("config.json"), v.to_string()).unwrap();
    let msg = load_err(d.path()).to_string();
    assert!(msg.contains("hidden_size"), "{msg}");
    fs::write(d.path().join("config.json"), "{not json").unwrap();
    assert!(matches!(load_err(d.path()), InferError::Json { .. }));
}

#[test]
fn text_without_tokenizer_is_a_clear_error() {
    let e = Embedder::load(&fixture("bert_tiny"), &EmbedderOptions::default()).unwrap();
    let err = e.embed_texts(&["hello"]).unwrap_err();
    assert!(matches!(err, InferError::Tokenizer { .. }), "{err}");
    assert!(err.to_string().contains("tokenizer.json"));
}

#[test]
fn bad_token_inputs_are_errors() {
    let e = Embedder::load(&fixture("bert_tiny"), &EmbedderOptions::default()).unwrap();
    let vocab = e.config().vocab_size as u32;
    let too_long = vec![5u32; e.config().max_sequence_length() + 1];
    use kin_infer::ErrorKind;
    for (ids, why, kind) in [
        (vec![], "empty", ErrorKind::InvalidInput),
        (
            vec![2, vocab, 3],
            "vocabulary",
            ErrorKind::TokenOutOfVocabulary,
        ),
        (too_long, "limit", ErrorKind::ContextExceeded),
    ] {
        let err = e.embed_tokens(&[ids.as_slice()], None).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        let err = err.to_string();
        assert!(err.contains(why), "{err}");
    }
    // A pooling naming no mode is refused at load (it would make empty embeddings).
    let opts = EmbedderOptions {
        pooling: Some(kin_infer::Pooling::new(vec![])),
        ..Default::default()
    };
    let err = Embedder::load(&fixture("bert_tiny"), &opts)
        .err()
        .expect("empty pooling");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let err = e
        .embed_tokens(&[&[2, 5, 3]], Some(&[&[0, 7, 0]]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("type"), "{err}");
}

#[test]
fn missing_model_dir_is_model_not_found() {
    let e = load_err(Path::new("/nonexistent/model"));
    assert!(matches!(e, InferError::ModelNotFound(_)));
}

/// Random byte corruption of a valid checkpoint (header and data): loading and embedding
/// either work or return an error; they never panic.
#[test]
fn corrupted_checkpoints_never_panic() {
    let b = original();
    let header_end = 8 + u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for trial in 0..200 {
        let mut m = b.clone();
        for _ in 0..1 + next(4) {
            // Mostly the header, where the structure lives; sometimes anywhere.
            let at = if trial % 4 == 0 {
                next(m.len())
            } else {
                next(header_end)
            };
            m[at] = next(256) as u8;
        }
        let d = model_with(&m);
        let r = std::panic::catch_unwind(|| {
            if let Ok(e) = Embedder::load(d.path(), &EmbedderOptions::default()) {
                let _ = e.embed_tokens(&[&[2, 5, 6, 3]], None);
            }
        });
        assert!(r.is_ok(), "trial {trial}: panic on a corrupted checkpoint");
    }
}

/// Byte-level corruption of every fixture's config.json and golden.json, and of the
/// sentence-transformers configs: parsing and loading either work or return an error; they
/// never panic.
#[test]
fn corrupted_json_files_never_panic() {
    let mut seed = 0x243f6a8885a308d3u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let bytes = b"{}[]\",:0123456789-.eEtruefalsnl \n\\";
    for name in [
        "bert_tiny",
        "t5_tiny",
        "deberta_v2_tiny",
        "nomic_orig",
        "jina_odd",
        "albert_dense",
    ] {
        let src = fixture(name);
        for trial in 0..40 {
            let d = tempfile::tempdir().unwrap();
            for e in fs::read_dir(&src).unwrap() {
                let e = e.unwrap();
                if e.path().is_dir() {
                    let sub = d.path().join(e.file_name());
                    fs::create_dir_all(&sub).unwrap();
                    for f in fs::read_dir(e.path()).unwrap() {
                        let f = f.unwrap();
                        fs::copy(f.path(), sub.join(f.file_name())).unwrap();
                    }
                } else {
                    fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
                }
            }
            let victim = match trial % 4 {
                0 | 1 => d.path().join("config.json"),
                2 => d.path().join("golden.json"),
                _ => d.path().join("1_Pooling/config.json"),
            };
            let mut text = fs::read(&victim).unwrap();
            for _ in 0..1 + next(3) {
                let at = next(text.len());
                match next(3) {
                    0 => text[at] = bytes[next(bytes.len())],
                    1 => text.truncate(at),
                    _ => {
                        text.remove(at.min(text.len().saturating_sub(1)));
                    }
                }
                if text.is_empty() {
                    break;
                }
            }
            fs::write(&victim, &text).unwrap();
            let r = std::panic::catch_unwind(|| {
                let g = kin_infer::golden::GoldenFile::load(&d.path().join("golden.json"));
                if let Ok(e) = Embedder::load(d.path(), &EmbedderOptions::default()) {
                    if let Ok(g) = g {
                        let _ = kin_infer::golden::check(&e, &g);
                    }
                }
            });
            assert!(
                r.is_ok(),
                "{name} trial {trial}: panic on a corrupted {}",
                victim.display()
            );
        }
    }
}
