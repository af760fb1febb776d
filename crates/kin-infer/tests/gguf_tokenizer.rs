//! GGUF tokenizers (`tokenizer.ggml.*`) against transformers' GGUF tokenizer loader
//! (tests/fixtures/gguf/tokenizers/golden.json, from python/gen_gguf_tokenizers.py): one
//! byte-level BPE vocabulary written with `tokenizer.ggml.pre` "gpt-2", "llama-bpe" and
//! "qwen2", the pre-tokenizers for which transformers splits as llama.cpp does. Every case's
//! ids must match exactly, decode back to its text, and the chat template and special tokens
//! come from the file.

mod support;

use kin_infer::generate::chat::{encode_rendered, ChatMessage, ChatTemplate};
use kin_infer::generate::{Detokenize, GenTokenizer};
use serde_json::Value;
use std::path::PathBuf;
use support::decoder::ids;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/tokenizers")
}

/// Every case of the golden file's group `group` (three GGUF files, a list of cases each): its
/// `ids` (no special tokens) are the file's tokenizer's; then `check` gets the file's name, the
/// tokenizer, the text, the case and those ids.
fn each_case(group: &str, mut check: impl FnMut(&str, &GenTokenizer, &str, &Value, &[u32])) {
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("golden.json")).unwrap()).unwrap();
    let files = golden[group].as_object().unwrap();
    assert_eq!(files.len(), 3);
    for (name, cases) in files {
        let tok = GenTokenizer::load(&dir().join(name)).unwrap();
        for case in cases.as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let got = tok.encode_with(text, false).unwrap();
            assert_eq!(got, ids(&case["ids"]), "{name}: {text:?}");
            check(name, &tok, text, case, &got);
        }
    }
}

#[test]
fn ids_match_transformers_for_every_pre_tokenizer() {
    each_case("files", |name, tok, text, _, got| {
        // add_bos_token is false in these files: the same ids with special tokens on.
        assert_eq!(
            tok.encode(text).unwrap(),
            got,
            "{name}: {text:?} (specials)"
        );
        if !text.contains("<|") {
            assert_eq!(tok.decode(got).unwrap(), text, "{name}: decode");
        }
    });
}

/// SentencePiece vocabularies (`tokenizer.ggml.model` "llama", scores and no merges) for the
/// three conventions transformers applies (llama, phi3, gemma2): ids with and without BOS.
#[test]
fn sentencepiece_ids_match_transformers() {
    each_case("spm", |name, tok, text, case, got| {
        let with = ids(&case["ids_with_special"]);
        assert_eq!(tok.encode(text).unwrap(), with, "{name}: {text:?} (BOS)");
        // The decoder strips the prefix `▁` (and so one leading space of the text, as
        // transformers' does); Gemma adds none. Added tokens (`<think>`) start new pieces.
        if !text.contains('<') && !text.starts_with(' ') {
            assert_eq!(tok.decode(got).unwrap(), text, "{name}: decode");
        }
    });
}

#[test]
fn chat_template_and_special_tokens_come_from_the_file() {
    let path = dir().join("bpe_qwen2.gguf");
    let t = ChatTemplate::load(&path).unwrap();
    let text = t.render(&[ChatMessage::new("user", "hi")], true).unwrap();
    assert_eq!(
        text,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = encode_rendered(&path, &text).unwrap();
    let tok = GenTokenizer::load(&path).unwrap();
    // Control tokens stay whole (one id each) and are skipped when decoding.
    assert_eq!(ids.len(), tok.encode_with(&text, false).unwrap().len());
    assert_eq!(tok.decode(&ids).unwrap(), "user\nhi\nassistant\n");
}

#[test]
fn a_gguf_without_a_tokenizer_is_a_clear_error() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/all_types.gguf");
    let e = GenTokenizer::load(&path).err().expect("must fail");
    assert!(e.to_string().contains("tokenizer.ggml.model"), "{e}");
    assert!(!kin_infer::generate::has_tokenizer(&path));
    assert!(kin_infer::generate::has_tokenizer(
        &dir().join("bpe_gpt-2.gguf")
    ));
}
