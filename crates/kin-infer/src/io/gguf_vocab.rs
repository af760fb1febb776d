//! The `tokenizer.ggml.*` reads every GGUF vocabulary shares (the byte-level BPE of
//! gguf_tokenizer.rs, SentencePiece's gguf_spm.rs, WordPiece's gguf_wordpiece.rs): per-token
//! arrays, string lists, checked token ids and merges, the BOS/EOS post-processor. A leaf below
//! the three, so none of them imports another's internals.

use crate::error::{InferError, Result};
use crate::io::gguf::{GgufFile, MetaValue};
use serde_json::{json, Value};
use std::collections::HashSet;

/// A per-token metadata array (`tokenizer.ggml.token_type`, `.scores`): `None` when absent,
/// else an array with exactly one entry per token (`what` names the entries in the error).
pub(crate) fn per_token<'g>(
    gguf: &'g GgufFile,
    key: &str,
    n: usize,
    what: &str,
) -> Result<Option<&'g [MetaValue]>> {
    match gguf.get(key) {
        None => Ok(None),
        Some(MetaValue::Array(a)) if a.len() == n => Ok(Some(a)),
        Some(MetaValue::Array(a)) => Err(err(
            gguf,
            format!("`{key}` has {} {what} for {n} tokens", a.len()),
        )),
        Some(v) => Err(err(
            gguf,
            format!("`{key}` is a {}, expected an array", v.type_name()),
        )),
    }
}

pub(crate) fn err(gguf: &GgufFile, reason: String) -> InferError {
    InferError::Tokenizer {
        reason: format!("{}: {reason}", gguf.path().display()),
    }
}

/// A string array of the metadata.
pub(crate) fn strings<'a>(gguf: &'a GgufFile, key: &str) -> Result<Option<Vec<&'a str>>> {
    match gguf.get(key) {
        None => Ok(None),
        Some(MetaValue::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| err(gguf, format!("`{key}` holds a {}", v.type_name())))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(v) => Err(err(
            gguf,
            format!("`{key}` is a {}, expected an array", v.type_name()),
        )),
    }
}

/// Every merge `l r` must join two tokens of the vocabulary (`known`) into a third. The
/// `tokenizers` crate refuses a missing part, but a joined token longer than every token
/// of the vocabulary overruns its merge buffer and panics (issue 30: 128 tokens "a" and the
/// merge "a a"), so all three are checked here, naming the merge.
pub(crate) fn check_merges(gguf: &GgufFile, merges: &[&str], known: &HashSet<&str>) -> Result<()> {
    let key = "tokenizer.ggml.merges";
    for (i, m) in merges.iter().enumerate() {
        let Some((l, r)) = m.split_once(' ') else {
            return Err(err(
                gguf,
                format!("`{key}`[{i}] {m:?} is not two tokens joined by a space"),
            ));
        };
        let joined = format!("{l}{r}");
        for (what, t) in [
            ("left token", l),
            ("right token", r),
            ("merged token", &joined),
        ] {
            if !known.contains(t) {
                return Err(err(
                    gguf,
                    format!("`{key}`[{i}] {m:?}: its {what} {t:?} is not in the vocabulary"),
                ));
            }
        }
    }
    Ok(())
}

/// A token id of the metadata (`bos_token_id`, ...), checked against the vocabulary.
pub fn token_id(gguf: &GgufFile, key: &str, vocab: usize) -> Result<Option<u32>> {
    match gguf.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(id) if (id as usize) < vocab => Ok(Some(id as u32)),
            _ => Err(err(
                gguf,
                format!("`{key}` = {v:?} is not a token id below the vocabulary size {vocab}"),
            )),
        },
    }
}

/// The post-processor adding BOS before (and EOS after) each sequence, as transformers'
/// `update_post_processor` writes it; null when neither is added.
pub(crate) fn template(gguf: &GgufFile, tokens: &[&str], bos: bool, eos: bool) -> Result<Value> {
    if !bos && !eos {
        return Ok(Value::Null);
    }
    let mut specials = serde_json::Map::new();
    let mut piece = |key: &str, on: bool| -> Result<Vec<Value>> {
        if !on {
            return Ok(Vec::new());
        }
        let id = token_id(gguf, key, tokens.len())?.ok_or_else(|| {
            err(
                gguf,
                format!("the file asks for this token to be added but has no `{key}`"),
            )
        })?;
        let t = tokens[id as usize];
        specials.insert(t.into(), json!({"id": t, "ids": [id], "tokens": [t]}));
        Ok(vec![json!({"SpecialToken": {"id": t, "type_id": 0}})])
    };
    let (b, e) = (
        piece("tokenizer.ggml.bos_token_id", bos)?,
        piece("tokenizer.ggml.eos_token_id", eos)?,
    );
    let seq = |id: &str, ty: u32| json!({"Sequence": {"id": id, "type_id": ty}});
    let single: Vec<Value> = [b.clone(), vec![seq("A", 0)], e.clone()].concat();
    let pair: Vec<Value> = [b, vec![seq("A", 0)], e.clone(), vec![seq("B", 1)], e].concat();
    Ok(json!({
        "type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials,
    }))
}
