//! Golden files (`kin-infer-golden/1`, see docs/golden-format.md): parsing, validation and
//! replay against an [`Embedder`]. A malformed file is an error, never a silent pass.

use crate::error::{InferError, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "kin-infer-golden/1";

/// Input of an `embedding` case.
#[derive(Clone, Debug)]
pub enum EmbeddingInput {
    Text(String),
    Ids(Vec<u32>),
}

#[derive(Clone, Debug)]
pub enum CaseKind {
    Hidden {
        input_ids: Vec<Vec<u32>>,
        token_type_ids: Option<Vec<Vec<u32>>>,
        /// Per sequence, `len` rows of `hidden_size`.
        expected: Vec<Vec<Vec<f64>>>,
    },
    Embedding {
        input: EmbeddingInput,
        expected: Vec<f64>,
    },
    /// Decoder logits over whole prompts: per sequence, one row of `vocab_size` per position.
    Logits {
        input_ids: Vec<Vec<u32>>,
        expected: Vec<Vec<Vec<f64>>>,
    },
    /// Greedy decoding without stopping on EOS, compared token for token.
    Generate {
        input_ids: Vec<Vec<u32>>,
        max_new_tokens: usize,
        expected_tokens: Vec<Vec<u32>>,
    },
}

impl CaseKind {
    /// Whether the case needs a decoder (`logits`, `generate`) rather than an encoder.
    pub fn is_decoder(&self) -> bool {
        matches!(self, CaseKind::Logits { .. } | CaseKind::Generate { .. })
    }
}

#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub kind: CaseKind,
}

#[derive(Clone, Debug)]
pub struct GoldenFile {
    pub path: PathBuf,
    pub tol: f64,
    pub cases: Vec<Case>,
}

impl GoldenFile {
    pub fn load(path: &Path) -> Result<Self> {
        let v: Value = crate::io::read_json(path)?;
        Self::from_value(&v, path)
    }

    pub fn from_value(v: &Value, path: &Path) -> Result<Self> {
        let err = |reason: String| InferError::Golden {
            path: path.to_path_buf(),
            reason,
        };
        let obj = v
            .as_object()
            .ok_or_else(|| err("not a JSON object".into()))?;
        match obj.get("format").and_then(Value::as_str) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(err(format!(
                    "unknown format `{other}` (expected `{FORMAT}`)"
                )))
            }
            None => return Err(err(format!("missing `format` (expected `{FORMAT}`)"))),
        }
        let tol = obj
            .get("tol")
            .and_then(Value::as_f64)
            .ok_or_else(|| err("missing or non-numeric `tol`".into()))?;
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(err(format!("`tol` {tol} must be finite and >= 0")));
        }
        let cases_v = obj
            .get("cases")
            .and_then(Value::as_array)
            .ok_or_else(|| err("missing `cases` array".into()))?;
        if cases_v.is_empty() {
            return Err(err("`cases` is empty".into()));
        }
        let cases = cases_v
            .iter()
            .enumerate()
            .map(|(i, c)| parse_case(i, c).map_err(|r| err(format!("case {i}: {r}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(GoldenFile {
            path: path.to_path_buf(),
            tol,
            cases,
        })
    }
}

fn parse_case(i: usize, c: &Value) -> Result<Case, String> {
    let name = c
        .get("name")
        .and_then(Value::as_str)
        .map_or_else(|| format!("#{i}"), String::from);
    let kind = c
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("missing `kind`")?;
    let kind = match kind {
        "hidden" => {
            let input_ids = id_rows(c.get("input_ids"), "input_ids")?;
            let token_type_ids = match c.get("token_type_ids") {
                None | Some(Value::Null) => None,
                v => Some(id_rows(v, "token_type_ids")?),
            };
            if let Some(t) = &token_type_ids {
                if t.len() != input_ids.len() || t.iter().zip(&input_ids).any(|(a, b)| a.len() != b.len()) {
                    return Err("`token_type_ids` does not have the shape of `input_ids`".into());
                }
            }
            if let Some(p) = c.get("pad_token_id") {
                if !p.is_u64() {
                    return Err("`pad_token_id` is not a non-negative integer".into());
                }
            }
            let expected = rows_per_token(c.get("expected"), &input_ids)?;
            CaseKind::Hidden {
                input_ids,
                token_type_ids,
                expected,
            }
        }
        "embedding" => {
            let input = match (c.get("text"), c.get("input_ids")) {
                (Some(Value::String(t)), None) => EmbeddingInput::Text(t.clone()),
                (None, Some(v)) => {
                    // Accept `[id, ...]` and a single-row `[[id, ...]]`.
                    let rows = match v.as_array() {
                        Some(a) if a.first().is_some_and(Value::is_array) => id_rows(Some(v), "input_ids")?,
                        _ => vec![ids(Some(v), "input_ids")?],
                    };
                    if rows.len() != 1 {
                        return Err("an `embedding` case holds one sequence".into());
                    }
                    EmbeddingInput::Ids(rows.into_iter().next().unwrap_or_default())
                }
                (Some(_), Some(_)) => return Err("give either `text` or `input_ids`, not both".into()),
                (Some(_), None) => return Err("`text` is not a string".into()),
                (None, None) => return Err("needs `text` or `input_ids`".into()),
            };
            let e = c.get("expected");
            // Accept `[floats]` and a single-row `[[floats]]`.
            let expected = match e.and_then(Value::as_array) {
                Some(a) if a.len() == 1 && a[0].is_array() => floats(Some(&a[0]), "expected")?,
                _ => floats(e, "expected")?,
            };
            CaseKind::Embedding { input, expected }
        }
        "logits" => {
            let input_ids = id_rows(c.get("input_ids"), "input_ids")?;
            let expected = rows_per_token(c.get("expected"), &input_ids)?;
            CaseKind::Logits {
                input_ids,
                expected,
            }
        }
        "generate" => {
            let input_ids = id_rows(c.get("input_ids"), "input_ids")?;
            let max_new_tokens = c
                .get("max_new_tokens")
                .and_then(Value::as_u64)
                .ok_or("missing or non-integer `max_new_tokens`")? as usize;
            let expected_tokens = id_rows(c.get("expected_tokens"), "expected_tokens")?;
            if expected_tokens.len() != input_ids.len()
                || expected_tokens.iter().any(|t| t.len() != max_new_tokens)
            {
                return Err(format!(
                    "`expected_tokens` must hold {max_new_tokens} tokens for each of the {} prompts",
                    input_ids.len()
                ));
            }
            CaseKind::Generate {
                input_ids,
                max_new_tokens,
                expected_tokens,
            }
        }
        "classify" => {
            return Err("case kind `classify` is for inMotion artifacts (inmotion-infer check), not a Hugging Face model".into())
        }
        other => return Err(format!("unknown kind `{other}`")),
    };
    Ok(Case { name, kind })
}

/// `expected` as one array per sequence holding one row of floats per token of that
/// sequence (the shape of `hidden` and `logits` cases).
fn rows_per_token(v: Option<&Value>, input_ids: &[Vec<u32>]) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let exp = v
        .and_then(Value::as_array)
        .ok_or("missing `expected` array")?;
    if exp.len() != input_ids.len() {
        return Err(format!(
            "`expected` has {} sequences, `input_ids` {}",
            exp.len(),
            input_ids.len()
        ));
    }
    exp.iter()
        .enumerate()
        .map(|(s, rows)| {
            let rows = rows
                .as_array()
                .ok_or(format!("expected[{s}] is not an array"))?;
            if rows.len() != input_ids[s].len() {
                return Err(format!(
                    "expected[{s}] has {} rows for {} tokens",
                    rows.len(),
                    input_ids[s].len()
                ));
            }
            rows.iter()
                .map(|r| floats(Some(r), &format!("expected[{s}]")))
                .collect()
        })
        .collect()
}

/// The array `v` with each element read by `read`; an element it rejects is `bad` (what it
/// is not) in the message.
fn array_of<T>(
    v: Option<&Value>,
    what: &str,
    read: impl Fn(&Value) -> Option<T>,
    bad: &str,
) -> Result<Vec<T>, String> {
    let a = v
        .and_then(Value::as_array)
        .ok_or(format!("`{what}` is not an array"))?;
    a.iter()
        .map(|x| read(x).ok_or(format!("`{what}` holds {bad}: {x}")))
        .collect()
}

fn ids(v: Option<&Value>, what: &str) -> Result<Vec<u32>, String> {
    let id = |x: &Value| x.as_u64().and_then(|n| u32::try_from(n).ok());
    array_of(v, what, id, "a non-integer or out-of-range id")
}

fn id_rows(v: Option<&Value>, what: &str) -> Result<Vec<Vec<u32>>, String> {
    let a = v
        .and_then(Value::as_array)
        .ok_or(format!("missing `{what}` array"))?;
    if a.is_empty() {
        return Err(format!("`{what}` is empty"));
    }
    a.iter().map(|r| ids(Some(r), what)).collect()
}

fn floats(v: Option<&Value>, what: &str) -> Result<Vec<f64>, String> {
    array_of(v, what, Value::as_f64, "a non-number")
}
