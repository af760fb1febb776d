//! A GGUF file's tokenizer (`tokenizer.ggml.*` metadata) as a `tokenizers` tokenizer, and its
//! chat template and special tokens.
//!
//! Supported: `tokenizer.ggml.model = "gpt2"` (byte-level BPE: `tokens`, `merges`,
//! `token_type`), with the pre-tokenizer llama.cpp picks for `tokenizer.ggml.pre`
//! (llama-vocab.cpp): the same regular expressions applied one after another, each match its
//! own piece (a `Sequence` of isolated `Split`s), then GPT-2's byte-to-unicode mapping.
//! Control tokens (type 3) are special; control and user-defined tokens (type 4) are matched
//! whole in the text before pre-tokenization, as llama.cpp's special-token parsing does.
//! `tokenizer.ggml.add_bos_token` (default false for BPE) prepends the BOS id.
//! SentencePiece vocabularies (`"llama"`): `gguf_spm.rs`; BERT's WordPiece (`"bert"`):
//! `gguf_wordpiece.rs`. Other models (`t5`'s unigram,
//! `rwkv`, ...) are a typed Unsupported.

use crate::error::{InferError, Result};
use crate::io::gguf::{GgufFile, MetaValue};
pub use crate::io::gguf_vocab::token_id;
use crate::io::gguf_vocab::{check_merges, err, per_token, strings, template};
use serde_json::{json, Value};
use std::collections::HashSet;

/// The largest vocabulary accepted (real ones are up to a few hundred thousand).
const MAX_VOCAB: usize = 1 << 22;

/// GPT-2's split (llama.cpp's `LLAMA_VOCAB_PRE_TYPE_GPT2`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// LLaMA 3's (`LLAMA3`, as llama.cpp adapts it: case-insensitive contractions spelled out).
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's (`QWEN2`): LLaMA 3's with single digits.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp's regular expressions for a `tokenizer.ggml.pre` value, `None` if this build
/// does not know it.
fn pre_regexes(pre: &str) -> Option<Vec<&'static str>> {
    Some(match pre {
        // LLAMA_VOCAB_PRE_TYPE_DEFAULT
        "default" => vec![r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
        "gpt-2" | "mpt" | "olmo" | "jais" | "trillion" => vec![GPT2],
        "llama3" | "llama-v3" | "llama-bpe" | "smaug-bpe" | "dbrx" => vec![LLAMA3],
        "qwen2" | "stablelm2" | "hunyuan" => vec![QWEN2],
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
            vec![r"\p{N}", GPT2]
        }
        _ => return None,
    })
}

/// The `tokenizer.ggml.pre` name whose regular expressions are `regexes` (what
/// [`pre_regexes`] gives, in order): how a tokenizer.json this module wrote from a GGUF file
/// goes back into one (`kin-infer quantize` of a converted directory). The first name of each
/// group of equivalent ones.
pub(crate) fn pre_name_of(regexes: &[&str]) -> Option<&'static str> {
    ["default", "gpt-2", "llama-bpe", "qwen2", "smollm"]
        .into_iter()
        .find(|name| pre_regexes(name).is_some_and(|r| r == regexes))
}

/// llama.cpp's token types (`llama_token_type`; gguf-py's `TokenType` from 1): 0 undefined,
/// 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
const MAX_TOKEN_TYPE: i64 = 6;

/// `tokenizer.ggml.token_type`: one known type per token (all normal when absent). A type
/// outside llama.cpp's enum is an error naming its index: it would otherwise be read as a
/// normal token, and a control token's text matched as plain text.
fn token_types(gguf: &GgufFile, n: usize) -> Result<Vec<i64>> {
    let key = "tokenizer.ggml.token_type";
    let Some(items) = per_token(gguf, key, n, "types")? else {
        return Ok(vec![1; n]);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let t = match *v {
                MetaValue::I32(t) => Some(t as i64),
                ref other => other.as_u64().and_then(|t| i64::try_from(t).ok()),
            };
            match t {
                Some(t) if (0..=MAX_TOKEN_TYPE).contains(&t) => Ok(t),
                _ => Err(err(
                    gguf,
                    format!(
                        "`{key}`[{i}] is {v:?}, not a llama.cpp token type (0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)"
                    ),
                )),
            }
        })
        .collect()
}

/// The special-token ids a tokenizer built here uses (BOS and EOS in templates and
/// generation, the unknown and separator tokens in WordPiece and SentencePiece): each
/// present one must name a token.
const SPECIAL_IDS: &[&str] = &[
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.seperator_token_id",
];

/// Checks what the `tokenizers` crate trusts, before it sees it: `tokenizer.ggml.scores`
/// (when present, any model) one per token, and every special id in [`SPECIAL_IDS`]
/// inside the vocabulary. A repeated token text is accepted, as transformers' GGUF loader
/// accepts it (each builder states which id it keeps): real vocabularies hold a few (a
/// converter's respelling can merge two tokens), though llama.cpp refuses them.
fn check_vocab(gguf: &GgufFile, tokens: &[&str]) -> Result<()> {
    let key = "tokenizer.ggml.scores";
    match gguf.get(key) {
        None => {}
        Some(MetaValue::Array(a)) if a.len() == tokens.len() => {}
        Some(MetaValue::Array(a)) => {
            return Err(err(
                gguf,
                format!("`{key}` has {} scores for {} tokens", a.len(), tokens.len()),
            ))
        }
        Some(v) => {
            return Err(err(
                gguf,
                format!("`{key}` is a {}, expected an array", v.type_name()),
            ))
        }
    }
    for key in SPECIAL_IDS {
        token_id(gguf, key, tokens.len())?;
    }
    Ok(())
}

/// Whether the file carries a tokenizer this build can build.
pub fn has_tokenizer(gguf: &GgufFile) -> bool {
    gguf.get("tokenizer.ggml.model")
        .and_then(MetaValue::as_str)
        .is_some_and(|m| m == "gpt2" || m == "llama" || m == "bert")
}

/// The `tokenizer.json` document equivalent to the file's tokenizer.
pub fn tokenizer_json(gguf: &GgufFile) -> Result<Value> {
    let model = match gguf.get("tokenizer.ggml.model") {
        Some(MetaValue::Str(m)) => m.as_str(),
        Some(v) => {
            return Err(err(
                gguf,
                format!("`tokenizer.ggml.model` is a {}", v.type_name()),
            ))
        }
        None => {
            return Err(err(
                gguf,
                "no tokenizer (`tokenizer.ggml.model`) in the file".into(),
            ))
        }
    };
    if !matches!(model, "gpt2" | "llama" | "bert") {
        return Err(InferError::Unsupported(format!(
            "{}: GGUF tokenizer model `{model}` is not supported yet (supported: gpt2, byte-level BPE; llama, SentencePiece BPE; bert, WordPiece)",
            gguf.path().display()
        )));
    }
    let tokens = strings(gguf, "tokenizer.ggml.tokens")?
        .ok_or_else(|| err(gguf, "no `tokenizer.ggml.tokens`".into()))?;
    if tokens.is_empty() || tokens.len() > MAX_VOCAB {
        return Err(err(
            gguf,
            format!("{} tokens (expected 1..={MAX_VOCAB})", tokens.len()),
        ));
    }
    let types = token_types(gguf, tokens.len())?;
    check_vocab(gguf, &tokens)?;
    if model == "llama" {
        return super::gguf_spm::tokenizer_json(gguf, &tokens, &types);
    }
    if model == "bert" {
        return super::gguf_wordpiece::tokenizer_json(gguf, &tokens, &types);
    }
    let merges = strings(gguf, "tokenizer.ggml.merges")?.ok_or_else(|| {
        err(
            gguf,
            "a BPE tokenizer without `tokenizer.ggml.merges`".into(),
        )
    })?;
    let known: HashSet<&str> = tokens.iter().copied().collect();
    check_merges(gguf, &merges, &known)?;
    let pre = gguf
        .get("tokenizer.ggml.pre")
        .and_then(MetaValue::as_str)
        .unwrap_or("default");
    let Some(regexes) = pre_regexes(pre) else {
        return Err(InferError::Unsupported(format!(
            "{}: pre-tokenizer `{pre}` (`tokenizer.ggml.pre`) is not supported yet",
            gguf.path().display()
        )));
    };
    let mut vocab = serde_json::Map::with_capacity(tokens.len());
    let mut added = Vec::new();
    for (id, (tok, ty)) in tokens.iter().zip(&types).enumerate() {
        // A repeated token text keeps its first id, as a tokenizer.json vocabulary must.
        vocab.entry(tok.to_string()).or_insert(json!(id));
        if *ty == 3 || *ty == 4 {
            added.push(json!({
                "id": id, "content": tok, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": *ty == 3,
            }));
        }
    }
    let splits: Vec<Value> = regexes
        .iter()
        .map(|r| {
            json!({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": false})
        })
        .chain(std::iter::once(json!({
            "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false
        })))
        .collect();
    let add_bos = matches!(
        gguf.get("tokenizer.ggml.add_bos_token"),
        Some(MetaValue::Bool(true))
    );
    let add_eos = matches!(
        gguf.get("tokenizer.ggml.add_eos_token"),
        Some(MetaValue::Bool(true))
    );
    let post = template(gguf, &tokens, add_bos, add_eos)?;
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": splits},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    }))
}

/// The file's tokenizer, built.
pub fn load(gguf: &GgufFile) -> Result<tokenizers::Tokenizer> {
    let doc = tokenizer_json(gguf)?.to_string();
    doc.parse::<tokenizers::Tokenizer>()
        .map_err(|e| err(gguf, format!("building the tokenizer: {e}")))
}

/// `tokenizer.chat_template`, if the file has one.
pub fn chat_template(gguf: &GgufFile) -> Option<&str> {
    gguf.get("tokenizer.chat_template")
        .and_then(MetaValue::as_str)
}

/// The text of the token `key` names (`tokenizer.ggml.bos_token_id`), for chat templates.
pub fn token_text(gguf: &GgufFile, key: &str) -> Option<String> {
    let tokens = strings(gguf, "tokenizer.ggml.tokens").ok().flatten()?;
    let id = token_id(gguf, key, tokens.len()).ok().flatten()?;
    Some(tokens[id as usize].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pre_name_is_found_again_from_its_regexes() {
        for name in ["default", "gpt-2", "llama-bpe", "qwen2", "smollm"] {
            assert_eq!(pre_name_of(&pre_regexes(name).unwrap()), Some(name));
        }
        // Aliases come back as the group's first name; unknown expressions as none.
        assert_eq!(
            pre_name_of(&pre_regexes("starcoder").unwrap()),
            Some("smollm")
        );
        assert_eq!(pre_name_of(&[r"\p{N}"]), None);
    }
}
