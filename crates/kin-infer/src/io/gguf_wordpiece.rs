//! BERT vocabularies in GGUF files (`tokenizer.ggml.model = "bert"`) as a `tokenizers`
//! WordPiece, the tokenizer the vocabulary came from.
//!
//! llama.cpp's converter (`BertModel.set_vocab`) respells the vocabulary in "phantom space"
//! form: a word-initial piece `x` is stored as `▁x`, a continuation `##x` as plain `x`,
//! bracketed specials (`[CLS]`) as they are. That is undone here, and the tokenizer is Hugging
//! Face's uncased BERT WordPiece (`BertNormalizer` with lowercasing and accent stripping, which
//! llama.cpp's WPM tokenizer applies too; `BertPreTokenizer`; `##` continuations; unknown
//! words as the unknown token), `[CLS] … [SEP]` around each text when the file asks
//! (`add_bos_token`, `add_sep_token`; gguf writes [CLS] as BOS and [SEP] as the separator).
//! Reference: `tokenizers`' BertWordPieceTokenizer over the same vocabulary
//! (python/gen_gguf_encoders.py, tests/gguf_encoders.rs).

use crate::error::{InferError, Result};
use crate::io::gguf::{GgufFile, MetaValue};
use crate::io::gguf_vocab::token_id;
use serde_json::{json, Value};

fn err(gguf: &GgufFile, reason: String) -> InferError {
    InferError::Tokenizer {
        reason: format!("{}: {reason}", gguf.path().display()),
    }
}

/// The vocabulary as `tokenizers` spells it.
fn unphantom(t: &str) -> String {
    if let Some(word) = t.strip_prefix('\u{2581}') {
        word.to_string()
    } else if t.starts_with('[') && t.ends_with(']') {
        t.to_string()
    } else {
        format!("##{t}")
    }
}

/// The `tokenizer.json` document for a BERT vocabulary (`tokens`, `types` read and checked by
/// the caller).
pub(super) fn tokenizer_json(gguf: &GgufFile, tokens: &[&str], types: &[i64]) -> Result<Value> {
    let vocab_list: Vec<String> = tokens.iter().map(|t| unphantom(t)).collect();
    // A repeated spelling keeps its last id, as llama.cpp's token map and the reference's
    // Python dict do.
    let mut vocab = serde_json::Map::with_capacity(vocab_list.len());
    for (id, t) in vocab_list.iter().enumerate() {
        vocab.insert(t.clone(), json!(id));
    }
    let id_of = |key: &str| token_id(gguf, key, tokens.len());
    let unk = match id_of("tokenizer.ggml.unknown_token_id")? {
        Some(id) => vocab_list[id as usize].clone(),
        None => "[UNK]".to_string(),
    };
    // Control and unknown tokens are special (matched whole, skipped when decoding).
    let added: Vec<Value> = types
        .iter()
        .enumerate()
        .filter(|(_, ty)| **ty == 3 || **ty == 2)
        .map(|(id, _)| {
            json!({"id": id, "content": vocab_list[id], "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    let flag = |key: &str, default: bool| match gguf.get(key) {
        Some(MetaValue::Bool(b)) => *b,
        _ => default,
    };
    let cls = flag("tokenizer.ggml.add_bos_token", true)
        .then(|| id_of("tokenizer.ggml.bos_token_id"))
        .transpose()?
        .flatten();
    let sep = if flag("tokenizer.ggml.add_sep_token", true) {
        match id_of("tokenizer.ggml.seperator_token_id")? {
            Some(id) => Some(id),
            None => id_of("tokenizer.ggml.eos_token_id")?,
        }
    } else {
        None
    };
    let post = match (cls, sep) {
        (None, None) => Value::Null,
        _ => {
            let piece = |id: Option<u32>, ty: u32| -> Vec<Value> {
                id.map(|i| json!({"SpecialToken": {"id": vocab_list[i as usize], "type_id": ty}}))
                    .into_iter()
                    .collect()
            };
            let seq = |s: &str, ty: u32| vec![json!({"Sequence": {"id": s, "type_id": ty}})];
            let mut specials = serde_json::Map::new();
            for id in [cls, sep].into_iter().flatten() {
                let t = &vocab_list[id as usize];
                specials.insert(t.clone(), json!({"id": t, "ids": [id], "tokens": [t]}));
            }
            let single = [piece(cls, 0), seq("A", 0), piece(sep, 0)].concat();
            let pair = [
                piece(cls, 0),
                seq("A", 0),
                piece(sep, 0),
                seq("B", 1),
                piece(sep, 1),
            ]
            .concat();
            json!({
                "type": "TemplateProcessing", "single": single, "pair": pair,
                "special_tokens": specials,
            })
        }
    };
    if !vocab.contains_key(&unk) {
        return Err(err(
            gguf,
            format!("the unknown token {unk:?} is not in the vocabulary"),
        ));
    }
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": unk, "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }))
}
