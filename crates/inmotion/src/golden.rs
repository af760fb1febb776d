//! Golden files for artifacts (specs/golden-format.md, case kind `classify`): parse and
//! validate against the artifact's shapes, replay, and report the largest |diff|.

use crate::error::{Error, Result};
use crate::meta::Meta;
use crate::model::Model;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const GOLDEN_FORMAT: &str = "kin-infer-golden/1";

#[derive(Clone, Debug)]
pub struct Case {
    pub name: Option<String>,
    /// `[seq_len, in_channels]` row-major.
    pub input: Vec<f32>,
    /// Kept in f64, as written, so the comparison adds no rounding of its own.
    pub expected: Vec<f64>,
}

#[derive(Clone, Debug)]
pub struct Golden {
    pub path: PathBuf,
    pub tol: f64,
    pub cases: Vec<Case>,
}

/// One value outside the tolerance (or non-finite).
#[derive(Clone, Debug)]
pub struct Mismatch {
    pub case: usize,
    pub name: Option<String>,
    pub position: usize,
    pub expected: f64,
    pub actual: f32,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub cases: usize,
    pub max_diff: f64,
    pub tol: f64,
    pub mismatches: Vec<Mismatch>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// `DIR_OR_FILE`: a directory means `DIR/golden.json`.
pub fn resolve(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join("golden.json")
    } else {
        p.to_path_buf()
    }
}

fn floats(path: &Path, field: &str, v: &Value) -> Result<Vec<f32>> {
    Ok(floats64(path, field, v)?
        .into_iter()
        .map(|x| x as f32)
        .collect())
}

fn floats64(path: &Path, field: &str, v: &Value) -> Result<Vec<f64>> {
    let arr = v
        .as_array()
        .ok_or_else(|| Error::field(path, field, "must be an array of numbers"))?;
    arr.iter()
        .map(|x| {
            x.as_f64()
                .ok_or_else(|| Error::field(path, field, format!("must hold numbers, found {x}")))
        })
        .collect()
}

impl Golden {
    pub fn load(path: &Path, meta: &Meta) -> Result<Golden> {
        let path = resolve(path);
        let text = std::fs::read_to_string(&path).map_err(|err| Error::Io {
            path: path.clone(),
            err,
        })?;
        let v: Value = serde_json::from_str(&text).map_err(|e| Error::Json {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Golden::from_value(&v, &path, meta)
    }

    pub fn from_value(v: &Value, path: &Path, meta: &Meta) -> Result<Golden> {
        let p = path;
        if !v.is_object() {
            return Err(Error::field(p, "(top level)", "must be a JSON object"));
        }
        match v.get("format").and_then(Value::as_str) {
            Some(GOLDEN_FORMAT) => {}
            None => {
                return Err(Error::field(
                    p,
                    "format",
                    format!("missing (expected `{GOLDEN_FORMAT}`)"),
                ))
            }
            Some(other) => {
                return Err(Error::field(
                    p,
                    "format",
                    format!("unknown format `{other}` (expected `{GOLDEN_FORMAT}`)"),
                ))
            }
        }
        let tol = match v.get("tol") {
            None | Some(Value::Null) => {
                return Err(Error::field(
                    p,
                    "tol",
                    "missing: a golden file must state its tolerance",
                ))
            }
            Some(t) => match t.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => x,
                _ => {
                    return Err(Error::field(
                        p,
                        "tol",
                        format!("must be a non-negative number, found {t}"),
                    ))
                }
            },
        };
        let cases_v = v
            .get("cases")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::field(p, "cases", "missing or not an array"))?;
        if cases_v.is_empty() {
            return Err(Error::field(p, "cases", "is empty: nothing to check"));
        }
        let mut cases = Vec::with_capacity(cases_v.len());
        for (i, c) in cases_v.iter().enumerate() {
            let f = |name: &str| format!("cases[{i}].{name}");
            let kind = match c.get("kind") {
                Some(Value::String(k)) => k.as_str(),
                None | Some(Value::Null) => {
                    return Err(Error::field(p, &f("kind"), "missing (expected `classify`)"))
                }
                Some(x) => {
                    return Err(Error::field(
                        p,
                        &f("kind"),
                        format!("must be a string, found {x}"),
                    ))
                }
            };
            if kind != "classify" {
                return Err(Error::field(
                    p,
                    &f("kind"),
                    format!("unknown or unsupported case kind `{kind}` for an inMotion artifact (classify)"),
                ));
            }
            let rows = c
                .get("input")
                .and_then(Value::as_array)
                .ok_or_else(|| Error::field(p, &f("input"), "missing or not an array of rows"))?;
            if rows.len() != meta.seq_len {
                return Err(Error::field(
                    p,
                    &f("input"),
                    format!(
                        "has {} rows, the artifact's seq_len is {}",
                        rows.len(),
                        meta.seq_len
                    ),
                ));
            }
            let mut input = Vec::with_capacity(meta.window_len());
            for (r, row) in rows.iter().enumerate() {
                let vals = floats(p, &f(&format!("input[{r}]")), row)?;
                if vals.len() != meta.in_channels {
                    return Err(Error::field(
                        p,
                        &f(&format!("input[{r}]")),
                        format!(
                            "has {} values, the artifact's in_channels is {}",
                            vals.len(),
                            meta.in_channels
                        ),
                    ));
                }
                input.extend(vals);
            }
            if input.iter().any(|x| !x.is_finite()) {
                return Err(Error::field(p, &f("input"), "holds a non-finite value"));
            }
            let expected = floats64(
                p,
                &f("expected"),
                c.get("expected")
                    .ok_or_else(|| Error::field(p, &f("expected"), "missing"))?,
            )?;
            if expected.len() != meta.num_classes {
                return Err(Error::field(
                    p,
                    &f("expected"),
                    format!(
                        "has {} logits, the artifact's num_classes is {}",
                        expected.len(),
                        meta.num_classes
                    ),
                ));
            }
            let name = c.get("name").and_then(Value::as_str).map(str::to_string);
            cases.push(Case {
                name,
                input,
                expected,
            });
        }
        Ok(Golden {
            path: p.to_path_buf(),
            tol,
            cases,
        })
    }
}

/// Replays every case; NaN or infinity on either side is a mismatch.
pub fn check(model: &mut Model, g: &Golden) -> Report {
    let mut max_diff = 0f64;
    let mut mismatches = Vec::new();
    for (i, c) in g.cases.iter().enumerate() {
        let logits = model.forward(&c.input);
        for (j, (&a, &e)) in logits.iter().zip(&c.expected).enumerate() {
            let d = (a as f64 - e).abs();
            let bad = !a.is_finite() || !e.is_finite() || d > g.tol;
            if d.is_finite() && d > max_diff {
                max_diff = d;
            }
            if bad {
                mismatches.push(Mismatch {
                    case: i,
                    name: c.name.clone(),
                    position: j,
                    expected: e,
                    actual: a,
                });
            }
        }
    }
    Report {
        cases: g.cases.len(),
        max_diff,
        tol: g.tol,
        mismatches,
    }
}
