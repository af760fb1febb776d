//! Decoder weights holding NaN or an infinity (issue 30): each step's logits are checked, so
//! generation stops with a typed error instead of sampling token 0 forever and exiting 0, and
//! the refused step leaves the session's cache as it was.

use crate::common::repo_root;
use kin_infer::generate::SamplingParams;
use kin_infer::models::decoders::LogitsRows;
use kin_infer::{ErrorKind, Generator, GeneratorOptions, InferError};
use std::path::Path;

/// A copy of decoder fixture `name` whose first F32 tensor named like `pattern` has `value`
/// as its first element (the safetensors header read here, as the format defines it).
fn poisoned(name: &str, pattern: &str, value: f32) -> tempfile::TempDir {
    let src = repo_root().join("tests/decoder_fixtures").join(name);
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    let path = tmp.path().join("model.safetensors");
    let mut b = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    let (tensor, info) = header
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, v)| k.contains(pattern) && v.get("dtype").is_some_and(|d| d == "F32"))
        .unwrap_or_else(|| panic!("{name} has no F32 tensor like {pattern}"));
    let at = 8 + n + info["data_offsets"][0].as_u64().unwrap() as usize;
    b[at..at + 4].copy_from_slice(&value.to_le_bytes());
    std::fs::write(&path, b).unwrap();
    eprintln!("{name}: {tensor}[0] = {value}");
    tmp
}

fn load(dir: &Path) -> Generator {
    Generator::load(dir, &GeneratorOptions::default()).unwrap()
}

fn assert_non_finite(e: InferError) {
    assert_eq!(e.kind(), ErrorKind::InvalidModel, "{e}");
    assert!(
        matches!(e, InferError::NonFinite { .. }) && e.to_string().contains("non-finite"),
        "{e}"
    );
}

#[test]
fn nan_or_inf_weights_stop_generation_with_a_typed_error() {
    for (name, pattern) in [
        ("llama_gqa", "q_proj.weight"),
        ("gpt2_small", "attn.c_attn.weight"),
    ] {
        if !repo_root()
            .join("tests/decoder_fixtures")
            .join(name)
            .is_dir()
        {
            panic!("decoder fixture {name} is missing");
        }
        for value in [f32::NAN, f32::INFINITY] {
            let dir = poisoned(name, pattern, value);
            let g = load(dir.path());
            let params = SamplingParams {
                max_new_tokens: 4,
                ..Default::default()
            };
            let mut tokens = 0;
            let e = g
                .generate(&[1, 2, 3], &params, None, |_| {
                    tokens += 1;
                    std::ops::ControlFlow::Continue(())
                })
                .unwrap_err();
            assert_non_finite(e);
            assert_eq!(
                tokens, 0,
                "{name}: no token may come from non-finite logits"
            );
        }
    }
}

#[test]
fn a_refused_step_leaves_the_session_unchanged() {
    let dir = poisoned("llama_gqa", "q_proj.weight", f32::NAN);
    let g = load(dir.path());
    let mut s = g.session(16).unwrap();
    assert_non_finite(s.forward(&[1, 2], LogitsRows::Last).unwrap_err());
    assert_eq!(s.len(), 0);
    assert_non_finite(s.forward(&[3], LogitsRows::All).unwrap_err());
    assert_eq!(s.len(), 0);
}
