//! Golden replay: runs a model on the cases of a golden file ([`crate::io::golden`] parses and
//! validates it) and compares what it computes with what the reference computed. Kept out of
//! `io/` so that parsing depends on nothing above it.

pub use crate::io::golden::{Case, CaseKind, EmbeddingInput, GoldenFile};

use crate::backend::GpuCompute;
use crate::embed::Embedder;
use crate::error::{InferError, Result};
use crate::generate::generate_greedy;
use crate::models::decoders::{Decoder, LogitsRows};

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

impl CheckReport {
    /// Nothing compared yet, for `golden`'s cases and tolerance.
    fn empty(golden: &GoldenFile) -> Self {
        CheckReport {
            cases: golden.cases.len(),
            compared: 0,
            max_diff: 0.0,
            tol: golden.tol,
            mismatches: Vec::new(),
        }
    }
}

impl GoldenFile {
    /// An error in case `case` of this file (exit 2).
    fn case_error(&self, case: &str, reason: String) -> InferError {
        InferError::Golden {
            path: self.path.clone(),
            reason: format!("case {case}: {reason}"),
        }
    }
}

/// Replays every case; errors (exit 2) for inputs the model rejects or shape disagreements.
pub fn check(embedder: &Embedder, golden: &GoldenFile) -> Result<CheckReport> {
    let mut report = CheckReport::empty(golden);
    let gerr = |case: &str, reason: String| golden.case_error(case, reason);
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
    let mut report = CheckReport::empty(golden);
    let gerr = |case: &str, reason: String| golden.case_error(case, reason);
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
