//! `eval`: the Rust runtime's own accuracy on a labelled CSV in the inMotion layout (raw
//! readings in columns named `1`..`seq_len`, class in `label`), preprocessed as the artifact
//! declares. Metrics: accuracy, per-class precision / recall / F1, multiclass MCC
//! (Gorodkin's R_K, as scikit-learn's `matthews_corrcoef`), confusion matrix.

use crate::error::{Error, Result};
use crate::model::{argmax, Model};
use crate::preprocess;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct ClassMetrics {
    pub label: String,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub support: usize,
}

#[derive(Clone, Debug)]
pub struct EvalReport {
    pub rows: usize,
    pub accuracy: f64,
    pub mcc: f64,
    pub per_class: Vec<ClassMetrics>,
    /// `confusion[true][predicted]`.
    pub confusion: Vec<Vec<usize>>,
}

/// Splits one CSV line (double-quoted fields may hold commas; `""` is a quote).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    out.push(cur);
    out.into_iter().map(|s| s.trim().to_string()).collect()
}

/// Metrics from true and predicted class indices.
pub fn metrics(truth: &[usize], pred: &[usize], labels: &[String]) -> EvalReport {
    let k = labels.len();
    let mut cm = vec![vec![0usize; k]; k];
    for (&t, &p) in truth.iter().zip(pred) {
        cm[t][p] += 1;
    }
    let n = truth.len();
    let correct: usize = (0..k).map(|i| cm[i][i]).sum();
    let t_k: Vec<usize> = (0..k).map(|i| cm[i].iter().sum()).collect();
    let p_k: Vec<usize> = (0..k).map(|j| (0..k).map(|i| cm[i][j]).sum()).collect();
    let div = |a: f64, b: f64| if b == 0.0 { 0.0 } else { a / b };
    let per_class = (0..k)
        .map(|i| {
            let tp = cm[i][i] as f64;
            let precision = div(tp, p_k[i] as f64);
            let recall = div(tp, t_k[i] as f64);
            ClassMetrics {
                label: labels[i].clone(),
                precision,
                recall,
                f1: div(2.0 * precision * recall, precision + recall),
                support: t_k[i],
            }
        })
        .collect();
    let (c, s) = (correct as f64, n as f64);
    let sum_pt: f64 = (0..k).map(|i| p_k[i] as f64 * t_k[i] as f64).sum();
    let sum_pp: f64 = p_k.iter().map(|&x| (x * x) as f64).sum();
    let sum_tt: f64 = t_k.iter().map(|&x| (x * x) as f64).sum();
    let den = ((s * s - sum_pp) * (s * s - sum_tt)).sqrt();
    EvalReport {
        rows: n,
        accuracy: div(c, s),
        mcc: div(c * s - sum_pt, den),
        per_class,
        confusion: cm,
    }
}

/// Classifies every row of `csv` with `model` and scores it.
pub fn eval_csv(model: &mut Model, csv: &Path) -> Result<EvalReport> {
    let meta = model.meta.clone();
    let pre = meta.preprocess.clone().ok_or_else(|| {
        Error::Input(format!(
            "{}: the artifact declares no `preprocess`, so raw CSV readings cannot be turned into windows",
            meta.path.display()
        ))
    })?;
    let text = std::fs::read_to_string(csv).map_err(|err| Error::Io {
        path: csv.to_path_buf(),
        err,
    })?;
    let bad =
        |line: usize, reason: String| Error::Input(format!("{}:{line}: {reason}", csv.display()));
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or_else(|| bad(1, "empty file (no header)".into()))?;
    let header = split_csv(header);
    let col = |name: &str| header.iter().position(|h| h == name);
    let cols: Vec<usize> = (1..=meta.seq_len)
        .map(|i| {
            col(&i.to_string()).ok_or_else(|| bad(1, format!("no column `{i}` in the header")))
        })
        .collect::<Result<_>>()?;
    let label_col = col("label").ok_or_else(|| bad(1, "no column `label` in the header".into()))?;
    let labels: Vec<String> = (0..meta.num_classes).map(|k| meta.label(k)).collect();
    let mut raw = vec![0f32; meta.seq_len];
    let mut window = vec![0f32; meta.window_len()];
    let (mut truth, mut pred) = (Vec::new(), Vec::new());
    for (i, line) in lines {
        let ln = i + 1;
        let f = split_csv(line);
        if f.len() < header.len() {
            return Err(bad(
                ln,
                format!("{} fields, the header has {}", f.len(), header.len()),
            ));
        }
        for (r, &c) in raw.iter_mut().zip(&cols) {
            *r = f[c]
                .parse::<f32>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    bad(
                        ln,
                        format!("column {}: `{}` is not a finite number", header[c], f[c]),
                    )
                })?;
        }
        let lab = &f[label_col];
        let t = labels
            .iter()
            .position(|l| l == lab)
            .or_else(|| lab.parse::<usize>().ok().filter(|&k| k < meta.num_classes))
            .ok_or_else(|| {
                bad(
                    ln,
                    format!(
                        "label `{lab}` is not a class of the artifact ({})",
                        labels.join(", ")
                    ),
                )
            })?;
        preprocess::apply(&pre, &raw, &mut window);
        let (_, probs) = model.classify_finite(&window, &format!("{}:{ln}", csv.display()))?;
        truth.push(t);
        pred.push(argmax(probs).0);
    }
    if truth.is_empty() {
        return Err(bad(1, "no data rows".into()));
    }
    Ok(metrics(&truth, &pred, &labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcc_matches_sklearn_on_a_small_case() {
        // c = 4, s = 6, t = [2, 2, 2], p = [2, 3, 1]: (24 - 12) / sqrt((36 - 14) * (36 - 12))
        let labels: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let r = metrics(&[0, 0, 1, 1, 2, 2], &[0, 1, 1, 1, 2, 0], &labels);
        assert!((r.mcc - 12.0 / 528f64.sqrt()).abs() < 1e-12, "{}", r.mcc);
        assert!((r.accuracy - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(r.confusion[2][0], 1);
        let perfect = metrics(&[0, 1, 2], &[0, 1, 2], &labels);
        assert_eq!(perfect.mcc, 1.0);
    }

    #[test]
    fn csv_quotes() {
        assert_eq!(split_csv("a,\"b,c\",d"), vec!["a", "b,c", "d"]);
    }
}
