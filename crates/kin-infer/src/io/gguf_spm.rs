//! SentencePiece vocabularies in GGUF files (`tokenizer.ggml.model = "llama"`: tokens, scores
//! and token types, usually no merges) as a `tokenizers` BPE, built the way transformers'
//! GGUF loader builds them (`integrations/gguf/gguf_tokenizer_mapping.py`, 5.24), which is the
//! reference our goldens come from:
//!
//! - the merges, when the file has none, are recovered from the vocabulary
//!   (`generate_merges`): every split of a token into two tokens of the vocabulary, ranked by
//!   the whole token's score, best first (ties: longer left piece, then longer right piece,
//!   then vocabulary order). That is SentencePiece's BPE rule, merge the adjacent pair whose
//!   union scores highest, written as a merge list;
//! - byte fallback (`<0x41>` tokens) for characters outside the vocabulary, unknown pieces fused;
//! - per architecture, as transformers picks: LLaMA and most others a `Metaspace`
//!   pre-tokenizer (spaces to `▁`, one `▁` prepended to the first piece); Phi-3 a normalizer
//!   that prepends and replaces; Gemma spaces replaced with no prefix, whitespace-only tokens
//!   respelled with `▁`, and the merges ranked by file order instead of score;
//! - `add_bos_token` defaults to true (llama.cpp's assumption for these vocabularies).
//!
//! Known difference from llama.cpp, kept to follow the reference: `tokenizer.ggml.add_space_prefix
//! = false` is not honoured (transformers ignores it too).

use crate::error::{InferError, Result};
use crate::io::gguf::{GgufFile, MetaValue};
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// The tokenizer.json conventions transformers applies to the file's architecture.
#[derive(Clone, Copy, PartialEq)]
enum Flavour {
    Llama,
    Phi3,
    Gemma,
}

fn flavour(gguf: &GgufFile) -> Flavour {
    match gguf
        .get("general.architecture")
        .and_then(MetaValue::as_str)
        .unwrap_or("")
    {
        "gemma" | "gemma2" | "gemma3" => Flavour::Gemma,
        "phi3" => Flavour::Phi3,
        _ => Flavour::Llama,
    }
}

fn err(gguf: &GgufFile, reason: String) -> InferError {
    InferError::Tokenizer {
        reason: format!("{}: {reason}", gguf.path().display()),
    }
}

/// `tokenizer.ggml.scores`, one finite f32 per token.
fn scores(gguf: &GgufFile, n: usize) -> Result<Option<Vec<f64>>> {
    let Some(items) = crate::io::gguf_vocab::per_token(gguf, "tokenizer.ggml.scores", n, "values")?
    else {
        return Ok(None);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| match s.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(err(
                gguf,
                format!("`tokenizer.ggml.scores`[{i}] = {s:?} is not a finite number"),
            )),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The longest token (bytes) whose splits are considered as merges.
const MAX_SPLIT: usize = 1024;

/// transformers' `generate_merges(vocab, vocab_scores)`: `order` is the scored tokens in
/// first-appearance order (a Python dict's), each with its score.
fn generate_merges<'a>(
    vocab: &HashMap<&'a str, usize>,
    order: &[(&'a str, f64)],
) -> Vec<(&'a str, &'a str)> {
    let mut merges: Vec<(&str, &str, f64, usize, usize)> = Vec::new();
    for &(merge, score) in order {
        // Splitting costs the token's length squared (each half is hashed): a token past
        // MAX_SPLIT bytes (real vocabularies stay under a few hundred) is left unsplit, so a
        // hostile file cannot make loading quadratic in its size.
        if merge.len() > MAX_SPLIT {
            continue;
        }
        let at = merges.len();
        // Split points between characters (Python indexes code points).
        for (i, _) in merge.char_indices().skip(1) {
            let (l, r) = merge.split_at(i);
            if vocab.contains_key(l) && vocab.contains_key(r) {
                merges.push((l, r, score, l.chars().count(), r.chars().count()));
            }
        }
        merges[at..].sort_by_key(|m| (vocab[m.0], vocab[m.1]));
    }
    // Stable, descending on (score, left length, right length), as Python's reverse sort.
    merges.sort_by(|a, b| {
        b.2.partial_cmp(&a.2)
            .unwrap_or(Ordering::Equal)
            .then(b.3.cmp(&a.3))
            .then(b.4.cmp(&a.4))
    });
    merges.into_iter().map(|m| (m.0, m.1)).collect()
}

/// The `tokenizer.json` document for the file's SentencePiece vocabulary (`tokens` and their
/// `types` already read and checked by the caller).
pub(super) fn tokenizer_json(gguf: &GgufFile, tokens: &[&str], types: &[i64]) -> Result<Value> {
    let fl = flavour(gguf);
    // Gemma files store whitespace-only tokens with real spaces; its tokenizer looks them up
    // as `▁`s.
    let respelled: Vec<String> = tokens
        .iter()
        .map(|t| {
            if fl == Flavour::Gemma && t.contains(' ') && t.trim().is_empty() {
                "\u{2581}".repeat(t.chars().count())
            } else {
                t.to_string()
            }
        })
        .collect();
    let tokens: Vec<&str> = respelled.iter().map(String::as_str).collect();
    // Python dict semantics: a repeated token keeps its first position and its last value.
    let mut vocab: HashMap<&str, usize> = HashMap::with_capacity(tokens.len());
    let mut first: Vec<&str> = Vec::with_capacity(tokens.len());
    for (id, t) in tokens.iter().enumerate() {
        if vocab.insert(t, id).is_none() {
            first.push(t);
        }
    }
    let merges: Vec<Value> = match crate::io::gguf_vocab::strings(gguf, "tokenizer.ggml.merges")? {
        Some(m) => {
            // Checked against the vocabulary as the tokenizer sees it (respelled).
            let known: HashSet<&str> = vocab.keys().copied().collect();
            crate::io::gguf_vocab::check_merges(gguf, &m, &known)?;
            m.iter()
                .filter_map(|s| s.split_once(' '))
                .map(|(l, r)| json!([l, r]))
                .collect()
        }
        None => {
            let score: Vec<f64> = match fl {
                // Gemma's scores do not follow its merge order; its file order does.
                Flavour::Gemma => (0..tokens.len()).map(|i| -(i as f64)).collect(),
                _ => scores(gguf, tokens.len())?.ok_or_else(|| {
                    err(
                        gguf,
                        "a SentencePiece vocabulary with neither `tokenizer.ggml.merges` nor `tokenizer.ggml.scores`".into(),
                    )
                })?,
            };
            let mut last: HashMap<&str, f64> = HashMap::with_capacity(tokens.len());
            for (t, s) in tokens.iter().zip(&score) {
                last.insert(t, *s);
            }
            let order: Vec<(&str, f64)> = first.iter().map(|t| (*t, last[t])).collect();
            generate_merges(&vocab, &order)
                .into_iter()
                .map(|(l, r)| json!([l, r]))
                .collect()
        }
    };
    // Control tokens (type 3) are special; user-defined ones (4) are matched whole too.
    let mut added: Vec<Value> = Vec::new();
    for want in [3, 4] {
        for (t, ty) in tokens.iter().zip(types) {
            if *ty == want {
                added.push(json!({
                    "id": vocab[t], "content": t, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": want == 3,
                }));
            }
        }
    }
    let replace = |from: &str, to: &str| json!({"type": "Replace", "pattern": {"String": from}, "content": to});
    let (normalizer, pre) = match fl {
        Flavour::Llama => (
            Value::Null,
            json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "first", "split": false}),
        ),
        Flavour::Phi3 => (
            json!({"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u{2581}"}, replace(" ", "\u{2581}")]}),
            Value::Null,
        ),
        Flavour::Gemma => (
            replace(" ", "\u{2581}"),
            json!({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false}),
        ),
    };
    let mut decoders = vec![
        replace("\u{2581}", " "),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if fl != Flavour::Gemma {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    let add_bos = !matches!(
        gguf.get("tokenizer.ggml.add_bos_token"),
        Some(MetaValue::Bool(false))
    );
    let add_eos = matches!(
        gguf.get("tokenizer.ggml.add_eos_token"),
        Some(MetaValue::Bool(true))
    );
    let post = crate::io::gguf_vocab::template(gguf, &tokens, add_bos, add_eos)?;
    let unk = (fl == Flavour::Gemma).then_some("<unk>");
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre,
        "post_processor": post,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    }))
}
