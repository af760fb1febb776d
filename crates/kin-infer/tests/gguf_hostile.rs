//! Hostile GGUF metadata (issue 30), each file made here from a committed fixture by editing
//! its metadata and writing it back with the crate's GGUF writer: tokenizer vocabularies the
//! `tokenizers` crate would panic on or misread, float keys that are NaN, infinite, out of
//! range or mistyped, special token ids outside the vocabulary (GGUF and config.json). Each
//! must be a typed error naming the key at fault (and the value or index), never a panic and
//! never a silent default.

use kin_infer::gpu::CpuCompute;
use kin_infer::io::gguf::{GgufFile, MetaValue};
use kin_infer::io::gguf_writer::{self, TensorInfo};
use kin_infer::models::decoders::load_decoder;
use kin_infer::ErrorKind;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

type Meta = Vec<(String, MetaValue)>;

/// `src` (relative to tests/fixtures/gguf) with its metadata edited by `edit`, written under
/// its own name into a temporary directory (removed when the returned guard drops), tensors
/// as stored.
fn rewrite(src: &str, edit: impl FnOnce(&mut Meta)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let f = GgufFile::open(&fixtures().join(src)).unwrap();
    let mut meta = f.metadata.clone();
    edit(&mut meta);
    let infos: Vec<TensorInfo> = f
        .tensors
        .iter()
        .map(|t| TensorInfo {
            name: t.name.clone(),
            ty: t.ty,
            dims: t.dims.clone(),
        })
        .collect();
    let out = dir.path().join(Path::new(src).file_name().unwrap());
    gguf_writer::write(
        &out,
        &meta,
        &infos,
        |i| Ok(f.tensor_bytes(&f.tensors[i]).to_vec()),
        |_| {},
    )
    .unwrap();
    (dir, out)
}

fn set(meta: &mut Meta, key: &str, v: MetaValue) {
    match meta.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = v,
        None => meta.push((key.to_string(), v)),
    }
}

fn remove(meta: &mut Meta, key: &str) {
    meta.retain(|(k, _)| k != key);
}

fn strs(items: &[&str]) -> MetaValue {
    MetaValue::Array(
        items
            .iter()
            .map(|s| MetaValue::Str(s.to_string()))
            .collect(),
    )
}

fn array(meta: &Meta, key: &str) -> Vec<MetaValue> {
    match meta.iter().find(|(k, _)| k == key) {
        Some((_, MetaValue::Array(a))) => a.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

/// The tokenizer built from `path`'s metadata: its error text, which must name `want`.
fn tokenizer_error(path: &Path) -> String {
    let g = GgufFile::open(path).unwrap();
    match kin_infer::io::gguf_tokenizer::load(&g) {
        Ok(_) => panic!("{}: the tokenizer built", path.display()),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            e.to_string()
        }
    }
}

fn decoder_error(path: &Path) -> String {
    let be = CpuCompute::new().unwrap();
    match load_decoder(path, &be) {
        Ok(_) => panic!("{}: the decoder loaded", path.display()),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidModel, "{e}");
            e.to_string()
        }
    }
}

/// Issue 30's panic: 128 tokens "a" and the merge "a a" made `tokenizers`' BPE builder
/// overrun its merge buffer (`range end index out of range`). The merged token is not in the
/// vocabulary: an error naming the merge.
#[test]
fn duplicate_tokens_with_a_merge_outside_the_vocabulary_are_an_error_not_a_panic() {
    let (_dir, path) = rewrite("tokenizers/bpe_gpt-2.gguf", |m| {
        set(m, "tokenizer.ggml.tokens", strs(&["a"; 128]));
        set(
            m,
            "tokenizer.ggml.token_type",
            MetaValue::Array(vec![MetaValue::I32(1); 128]),
        );
        set(m, "tokenizer.ggml.merges", strs(&["a a"]));
    });
    let e = tokenizer_error(&path);
    assert!(
        e.contains("`tokenizer.ggml.merges`[0]")
            && e.contains("merged token \"aa\"")
            && e.contains("not in the vocabulary"),
        "{e}"
    );
}

/// A repeated token text (real vocabularies hold a few) is accepted, as transformers'
/// loader accepts it: the text keeps its first id, and the tokenizer works.
#[test]
fn a_repeated_token_keeps_its_first_id() {
    let mut dup = String::new();
    let (_dir, path) = rewrite("tokenizers/bpe_gpt-2.gguf", |m| {
        let mut tokens = array(m, "tokenizer.ggml.tokens");
        let mut types = array(m, "tokenizer.ggml.token_type");
        dup = tokens[10].as_str().unwrap().to_string();
        tokens.push(tokens[10].clone());
        types.push(MetaValue::I32(1));
        set(m, "tokenizer.ggml.tokens", MetaValue::Array(tokens));
        set(m, "tokenizer.ggml.token_type", MetaValue::Array(types));
    });
    let g = GgufFile::open(&path).unwrap();
    let tok = kin_infer::io::gguf_tokenizer::load(&g).unwrap();
    assert_eq!(tok.token_to_id(&dup), Some(10), "{dup:?}");
    let ids = tok.encode("the cat", false).unwrap().get_ids().to_vec();
    assert!(!ids.is_empty());
}

#[test]
fn merges_naming_tokens_outside_the_vocabulary_are_named() {
    for (merge, what) in [
        ("Ġ zzz", "right token \"zzz\""),
        ("qq t", "left token \"qq\""),
    ] {
        let (_dir, path) = rewrite("tokenizers/bpe_gpt-2.gguf", |m| {
            let mut merges = array(m, "tokenizer.ggml.merges");
            merges.insert(3, MetaValue::Str(merge.into()));
            set(m, "tokenizer.ggml.merges", MetaValue::Array(merges));
        });
        let e = tokenizer_error(&path);
        assert!(
            e.contains("`tokenizer.ggml.merges`[3]") && e.contains(what),
            "{merge}: {e}"
        );
    }
    // A merge without a space, in a SentencePiece file that carries merges.
    let (_dir, path) = rewrite("tokenizers/spm_llama.gguf", |m| {
        set(m, "tokenizer.ggml.merges", strs(&["ab"]));
    });
    let e = tokenizer_error(&path);
    assert!(
        e.contains("`tokenizer.ggml.merges`[0]") && e.contains("not two tokens"),
        "{e}"
    );
}

#[test]
fn unknown_token_types_are_named_with_their_index() {
    for (bad, shown) in [
        (MetaValue::I32(9), "I32(9)"),
        (MetaValue::I32(-1), "I32(-1)"),
    ] {
        for src in ["tokenizers/bpe_gpt-2.gguf", "tokenizers/spm_llama.gguf"] {
            let (_dir, path) = rewrite(src, |m| {
                let mut types = array(m, "tokenizer.ggml.token_type");
                types[7] = bad.clone();
                set(m, "tokenizer.ggml.token_type", MetaValue::Array(types));
            });
            let e = tokenizer_error(&path);
            assert!(
                e.contains("`tokenizer.ggml.token_type`[7]")
                    && e.contains(shown)
                    && e.contains("not a llama.cpp token type"),
                "{src}: {e}"
            );
        }
    }
}

#[test]
fn types_and_scores_must_have_one_entry_per_token() {
    let (_dir, path) = rewrite("tokenizers/spm_llama.gguf", |m| {
        let mut types = array(m, "tokenizer.ggml.token_type");
        types.pop();
        set(m, "tokenizer.ggml.token_type", MetaValue::Array(types));
    });
    let e = tokenizer_error(&path);
    assert!(
        e.contains("`tokenizer.ggml.token_type` has 499 types for 500 tokens"),
        "{e}"
    );
    // Scores are checked whatever the model (a BPE file with too few is corrupt too).
    for src in ["tokenizers/spm_llama.gguf", "tokenizers/bpe_gpt-2.gguf"] {
        let (_dir, path) = rewrite(src, |m| {
            set(
                m,
                "tokenizer.ggml.scores",
                MetaValue::Array(vec![MetaValue::F32(0.0); 3]),
            );
        });
        let e = tokenizer_error(&path);
        assert!(
            e.contains("`tokenizer.ggml.scores` has 3 scores for"),
            "{src}: {e}"
        );
    }
}

/// SentencePiece's unknown id (and the other special ids a tokenizer uses) must name a
/// token; before, an unknown id past the vocabulary was accepted unread.
#[test]
fn special_ids_outside_the_vocabulary_are_refused() {
    for (src, key, id) in [
        (
            "tokenizers/spm_llama.gguf",
            "tokenizer.ggml.unknown_token_id",
            500,
        ),
        (
            "tokenizers/spm_llama.gguf",
            "tokenizer.ggml.eos_token_id",
            1 << 20,
        ),
        (
            "tokenizers/bpe_gpt-2.gguf",
            "tokenizer.ggml.bos_token_id",
            469,
        ),
        (
            "encoders/bert_tiny.f32.gguf",
            "tokenizer.ggml.seperator_token_id",
            100,
        ),
    ] {
        let (_dir, path) = rewrite(src, |m| set(m, key, MetaValue::U32(id)));
        let e = tokenizer_error(&path);
        assert!(
            e.contains(&format!("`{key}`"))
                && e.contains(&id.to_string())
                && e.contains("vocabulary size"),
            "{src}: {e}"
        );
    }
}

/// Every float key the decoder loaders read, NaN, infinite, out of range or of another
/// type: an error naming the key (before, NaN and infinity became `null` in the config
/// object, which reads as absent: the default).
#[test]
fn non_finite_or_mistyped_float_keys_are_named() {
    let llama = "decoders/llama_gqa.f32.gguf";
    let gemma2 = "decoders/gemma2_hd.f32.gguf";
    /// (file, key, [(bad value, what the error must say)])
    type KeyCases = (&'static str, &'static str, Vec<(MetaValue, &'static str)>);
    let cases: Vec<KeyCases> = vec![
        (
            llama,
            "llama.rope.freq_base",
            vec![
                (MetaValue::F32(f32::NAN), "is NaN"),
                (MetaValue::F32(f32::INFINITY), "is inf"),
                (MetaValue::F64(f64::NEG_INFINITY), "is -inf"),
                (MetaValue::U32(1_000_000), "is a uint32"),
                (MetaValue::F32(0.0), "must be a finite number > 1"),
                (MetaValue::F32(-5e5), "must be a finite number > 1"),
            ],
        ),
        (
            llama,
            "llama.attention.layer_norm_rms_epsilon",
            vec![
                (MetaValue::F32(f32::NAN), "is NaN"),
                (MetaValue::F32(-1e-6), ">= 0"),
            ],
        ),
        (
            gemma2,
            "gemma2.attention.layer_norm_rms_epsilon",
            vec![(MetaValue::F64(f64::INFINITY), "is inf")],
        ),
        (
            gemma2,
            "gemma2.attn_logit_softcapping",
            vec![
                (MetaValue::F32(f32::NAN), "is NaN"),
                (MetaValue::Str("x".into()), "is a string"),
            ],
        ),
        (
            gemma2,
            "gemma2.final_logit_softcapping",
            vec![
                (MetaValue::F32(f32::INFINITY), "is inf"),
                (MetaValue::F32(-1.0), "positive"),
            ],
        ),
    ];
    for (src, key, values) in cases {
        for (value, want) in values {
            let shown = format!("{value:?}");
            let (_dir, path) = rewrite(src, |m| set(m, key, value));
            let e = decoder_error(&path);
            assert!(
                e.contains(&format!("`{key}`")) && e.contains(want),
                "{key} = {shown}: {e}"
            );
        }
    }
}

/// Linear rope scaling's factor: NaN or mistyped is named; absent says it is required
/// (the message for an invalid factor no longer claims it is missing).
#[test]
fn rope_scaling_factors_are_checked_not_dropped() {
    let cases: Vec<(Option<MetaValue>, &str)> = vec![
        (Some(MetaValue::F32(f32::NAN)), "is NaN"),
        (Some(MetaValue::U32(4)), "is a uint32"),
        (Some(MetaValue::F32(-2.0)), "must be positive"),
        (None, "is required by this rope type"),
    ];
    for (factor, want) in cases {
        let shown = format!("{factor:?}");
        let (_dir, path) = rewrite("decoders/llama_gqa.f32.gguf", |m| {
            set(
                m,
                "llama.rope.scaling.type",
                MetaValue::Str("linear".into()),
            );
            if let Some(f) = factor {
                set(m, "llama.rope.scaling.factor", f);
            }
        });
        let e = decoder_error(&path);
        assert!(
            e.contains("`llama.rope.scaling.factor`") && e.contains(want),
            "{shown}: {e}"
        );
    }
    // A valid factor still loads.
    let (_dir, path) = rewrite("decoders/llama_gqa.f32.gguf", |m| {
        set(
            m,
            "llama.rope.scaling.type",
            MetaValue::Str("linear".into()),
        );
        set(m, "llama.rope.scaling.factor", MetaValue::F32(2.0));
    });
    let be = CpuCompute::new().unwrap();
    load_decoder(&path, &be).unwrap();
}

/// An EOS (or BOS) id at or past the vocabulary never fires: refused naming the field, the
/// GGUF key and the vocabulary size.
#[test]
fn gguf_eos_and_bos_ids_outside_the_vocabulary_are_refused() {
    for src in ["decoders/llama_gqa.f32.gguf", "decoders/gemma2_hd.f32.gguf"] {
        for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id"] {
            let (_dir, path) = rewrite(src, |m| set(m, key, MetaValue::U32(4096)));
            let e = decoder_error(&path);
            assert!(
                e.contains(&format!("`{key}`")) && e.contains("token id 4096"),
                "{src} {key}: {e}"
            );
        }
    }
    // The boundary: the last id is a token, the vocabulary size is not.
    let (_dir, path) = rewrite("decoders/llama_gqa.f32.gguf", |m| {
        set(m, "tokenizer.ggml.eos_token_id", MetaValue::U32(128));
        remove(m, "tokenizer.ggml.bos_token_id");
    });
    let e = decoder_error(&path);
    assert!(e.contains("(size 128)"), "{e}");
}

/// config.json: the same check, for one id and for a list.
#[test]
fn config_json_eos_ids_outside_the_vocabulary_are_refused() {
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/decoder_fixtures/llama_gqa");
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    for (field, value) in [
        ("eos_token_id", serde_json::json!(128)),
        ("eos_token_id", serde_json::json!([2, 5000])),
        ("bos_token_id", serde_json::json!(1u64 << 32)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = base.clone();
        cfg[field] = value.clone();
        std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
        std::fs::copy(
            src.join("model.safetensors"),
            dir.path().join("model.safetensors"),
        )
        .unwrap();
        let be = CpuCompute::new().unwrap();
        let e = match load_decoder(dir.path(), &be) {
            Ok(_) => panic!("{field} = {value}: loaded"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), ErrorKind::InvalidModel, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(field) && msg.contains("outside the vocabulary (size 128)"),
            "{field} = {value}: {msg}"
        );
    }
}

/// `generation_config.json`'s EOS ids (which override config.json's) are held to the same rule.
#[test]
fn generation_config_eos_ids_outside_the_vocabulary_are_refused() {
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/decoder_fixtures/llama_gqa");
    let be = CpuCompute::new().unwrap();
    let model = load_decoder(&src, &be).unwrap();
    for (value, ok) in [
        (serde_json::json!(127), true),
        (serde_json::json!([2, 127]), true),
        (serde_json::json!(128), false),
        (serde_json::json!([2, 5000]), false),
        (serde_json::json!((1u64 << 32) + 1), false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let gc = serde_json::json!({ "eos_token_id": value });
        std::fs::write(dir.path().join("generation_config.json"), gc.to_string()).unwrap();
        let got = kin_infer::generate::eos_token_ids(dir.path(), model.spec());
        match (got, ok) {
            (Ok(ids), true) => assert!(!ids.is_empty()),
            (Err(e), false) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("generation_config.json") && msg.contains("eos_token_id"),
                    "{value}: {msg}"
                );
            }
            (got, _) => panic!("{value}: {:?}", got.map_err(|e| e.to_string())),
        }
    }
}

/// The BERT encoder's float key, through the embedder's loader.
#[test]
fn encoder_float_keys_are_named() {
    for (value, want) in [
        (MetaValue::F32(f32::NAN), "is NaN"),
        (MetaValue::U32(1), "is a uint32"),
    ] {
        let (_dir, path) = rewrite("encoders/bert_tiny.f32.gguf", |m| {
            set(m, "bert.attention.layer_norm_epsilon", value)
        });
        let opts = kin_infer::EmbedderOptions {
            threads: Some(1),
            ..Default::default()
        };
        let e = match kin_infer::Embedder::load(&path, &opts) {
            Ok(_) => panic!("loaded"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("`bert.attention.layer_norm_epsilon`") && e.contains(want),
            "{e}"
        );
    }
}
