//! Golden files (`kin-infer-golden/1`, see docs/golden-format.md): parsing, validation and
//! replay against an [`Embedder`]. A malformed file is an error, never a silent pass.

use crate::embed::Embedder;
use crate::error::{InferError, Result};
use crate::generate::generate_greedy;
use crate::gpu::GpuCompute;
use crate::models::decoders::{Decoder, LogitsRows};
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

/// The first comparison beyond tolerance in a case.
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub case: String,
    /// Where in the case: e.g. `sequence 2, token 5, dim 17`.
    pub position: String,
    pub expected: f64,
    pub actual: f64,
}

#[derive(Clone, Debug)]
pub struct CheckReport {
    pub cases: usize,
    pub compared: usize,
    pub max_diff: f64,
    pub tol: f64,
    pub mismatches: Vec<Mismatch>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
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

fn ids(v: Option<&Value>, what: &str) -> Result<Vec<u32>, String> {
    let a = v
        .and_then(Value::as_array)
        .ok_or(format!("`{what}` is not an array"))?;
    a.iter()
        .map(|x| {
            x.as_u64()
                .filter(|&n| n <= u32::MAX as u64)
                .map(|n| n as u32)
                .ok_or(format!(
                    "`{what}` holds a non-integer or out-of-range id: {x}"
                ))
        })
        .collect()
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
    let a = v
        .and_then(Value::as_array)
        .ok_or(format!("`{what}` is not an array"))?;
    a.iter()
        .map(|x| {
            x.as_f64()
                .ok_or(format!("`{what}` holds a non-number: {x}"))
        })
        .collect()
}

/// Tracks the largest difference and the first mismatch of a case.
struct Comparer<'a> {
    report: &'a mut CheckReport,
    case: &'a str,
    failed: bool,
}

impl Comparer<'_> {
    fn compare(&mut self, expected: &[f64], actual: &[f32], position: impl Fn(usize) -> String) {
        for (j, (&e, &a)) in expected.iter().zip(actual).enumerate() {
            let a = a as f64;
            let d = (a - e).abs();
            self.report.compared += 1;
            let bad = d.is_nan() || d > self.report.tol; // NaN on either side fails
            if d.is_finite() && d > self.report.max_diff {
                self.report.max_diff = d;
            }
            if bad {
                if !d.is_finite() {
                    self.report.max_diff = f64::INFINITY;
                }
                if !self.failed {
                    self.failed = true;
                    self.report.mismatches.push(Mismatch {
                        case: self.case.to_string(),
                        position: position(j),
                        expected: e,
                        actual: a,
                    });
                }
            }
        }
    }
}

/// Replays every case; errors (exit 2) for inputs the model rejects or shape disagreements.
pub fn check(embedder: &Embedder, golden: &GoldenFile) -> Result<CheckReport> {
    let mut report = CheckReport {
        cases: golden.cases.len(),
        compared: 0,
        max_diff: 0.0,
        tol: golden.tol,
        mismatches: Vec::new(),
    };
    let gerr = |case: &str, reason: String| InferError::Golden {
        path: golden.path.clone(),
        reason: format!("case {case}: {reason}"),
    };
    let hidden_size = embedder.config().hidden_size;
    for case in &golden.cases {
        let before = report.compared;
        if case.kind.is_decoder() {
            return Err(gerr(
                &case.name,
                "`logits` and `generate` cases need a decoder model; this is an encoder".into(),
            ));
        }
        match &case.kind {
            CaseKind::Hidden {
                input_ids,
                token_type_ids,
                expected,
            } => {
                let ids: Vec<&[u32]> = input_ids.iter().map(Vec::as_slice).collect();
                let types: Option<Vec<&[u32]>> = token_type_ids
                    .as_ref()
                    .map(|t| t.iter().map(Vec::as_slice).collect());
                let out = embedder.hidden_states(&ids, types.as_deref())?;
                let mut cmp = Comparer {
                    report: &mut report,
                    case: &case.name,
                    failed: false,
                };
                for (s, (rows, act)) in expected.iter().zip(&out).enumerate() {
                    for (t, row) in rows.iter().enumerate() {
                        if row.len() != hidden_size {
                            return Err(gerr(
                                &case.name,
                                format!("expected[{s}][{t}] has {} values, the model's hidden_size is {hidden_size}", row.len()),
                            ));
                        }
                        let a = &act[t * hidden_size..(t + 1) * hidden_size];
                        cmp.compare(row, a, |d| format!("sequence {s}, token {t}, dim {d}"));
                    }
                }
            }
            CaseKind::Embedding { input, expected } => {
                let out = match input {
                    EmbeddingInput::Text(t) => embedder.embed_texts(&[t.as_str()])?,
                    EmbeddingInput::Ids(ids) => embedder.embed_tokens(&[ids.as_slice()], None)?,
                };
                let v = &out[0];
                if v.len() != expected.len() {
                    return Err(gerr(
                        &case.name,
                        format!(
                            "expected {} values, the model's embedding has {}",
                            expected.len(),
                            v.len()
                        ),
                    ));
                }
                let mut cmp = Comparer {
                    report: &mut report,
                    case: &case.name,
                    failed: false,
                };
                cmp.compare(expected, v, |d| format!("dim {d}"));
            }
            CaseKind::Logits { .. } | CaseKind::Generate { .. } => {}
        }
        compared_something(&report, before, &case.name, &gerr)?;
    }
    Ok(report)
}

/// Replays `logits` and `generate` cases against a decoder (on the current rayon pool).
pub fn check_decoder(
    model: &dyn Decoder,
    be: &dyn GpuCompute,
    golden: &GoldenFile,
) -> Result<CheckReport> {
    let mut report = CheckReport {
        cases: golden.cases.len(),
        compared: 0,
        max_diff: 0.0,
        tol: golden.tol,
        mismatches: Vec::new(),
    };
    let gerr = |case: &str, reason: String| InferError::Golden {
        path: golden.path.clone(),
        reason: format!("case {case}: {reason}"),
    };
    let vocab = model.spec().vocab_size;
    for case in &golden.cases {
        let before = report.compared;
        match &case.kind {
            CaseKind::Logits {
                input_ids,
                expected,
            } => {
                let mut cmp = Comparer {
                    report: &mut report,
                    case: &case.name,
                    failed: false,
                };
                for (s, (ids, rows)) in input_ids.iter().zip(expected).enumerate() {
                    if let Some(r) = rows.iter().find(|r| r.len() != vocab) {
                        return Err(gerr(
                            &case.name,
                            format!("a row of expected[{s}] has {} values, the model's vocab_size is {vocab}", r.len()),
                        ));
                    }
                    let mut cache = model.new_cache(ids.len().max(1))?;
                    let got = model.forward(be, ids, &mut cache, LogitsRows::All)?;
                    for (t, row) in rows.iter().enumerate() {
                        let a = &got[t * vocab..(t + 1) * vocab];
                        cmp.compare(row, a, |d| format!("sequence {s}, position {t}, logit {d}"));
                    }
                }
            }
            CaseKind::Generate {
                input_ids,
                max_new_tokens,
                expected_tokens,
            } => {
                for (s, (ids, want)) in input_ids.iter().zip(expected_tokens).enumerate() {
                    let got = generate_greedy(model, be, ids, *max_new_tokens, |_| {})?;
                    report.compared += got.len();
                    if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
                        report.mismatches.push(Mismatch {
                            case: case.name.clone(),
                            position: format!("sequence {s}, new token {i} (got {got:?})"),
                            expected: want[i] as f64,
                            actual: got.get(i).map_or(f64::NAN, |&t| t as f64),
                        });
                    }
                }
            }
            CaseKind::Hidden { .. } | CaseKind::Embedding { .. } => {
                return Err(gerr(
                    &case.name,
                    "`hidden` and `embedding` cases need an encoder model; this is a decoder"
                        .into(),
                ))
            }
        }
        compared_something(&report, before, &case.name, &gerr)?;
    }
    Ok(report)
}

/// A case that compared no value proves nothing (e.g. `generate` with `max_new_tokens: 0`):
/// an error, never a silent `PARITY OK`.
fn compared_something(
    report: &CheckReport,
    before: usize,
    case: &str,
    gerr: &impl Fn(&str, String) -> InferError,
) -> Result<()> {
    if report.compared == before {
        return Err(gerr(case, "no values compared".into()));
    }
    Ok(())
}
