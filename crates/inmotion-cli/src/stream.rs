//! `predict` (one window) and `stream` (timesteps or windows, line by line).

use crate::input::read_values;
use anyhow::{bail, Context, Result};
use clap::Args;
use inmotion::meta::Preprocess;
use inmotion::{argmax, Model};
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct PredictArgs {
    /// Artifact directory (meta.json, model.safetensors).
    #[arg(long)]
    pub artifact: PathBuf,
    /// File with seq_len x in_channels floats (row order), or seq_len raw readings with --raw.
    #[arg(long)]
    pub input: PathBuf,
    /// The input is seq_len raw readings; apply the artifact's `preprocess`.
    #[arg(long)]
    pub raw: bool,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct StreamArgs {
    /// Artifact directory (meta.json, model.safetensors).
    #[arg(long)]
    pub artifact: PathBuf,
    /// Read this file instead of stdin.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Each line is one raw reading (or a whole raw window); windows are preprocessed as the
    /// artifact declares.
    #[arg(long)]
    pub raw: bool,
    /// One JSON object per classification.
    #[arg(long)]
    pub json: bool,
}

pub fn load(dir: &Path) -> Result<Model> {
    Ok(Model::load(dir)?)
}

fn require_preprocess(m: &Model) -> Result<Preprocess> {
    match &m.meta.preprocess {
        Some(p) => Ok(p.clone()),
        None => bail!(
            "{}: --raw needs a `preprocess` in the artifact, and this one declares none",
            m.meta.path.display()
        ),
    }
}

fn list(v: &[f32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

pub fn predict(a: PredictArgs) -> Result<u8> {
    let mut m = load(&a.artifact)?;
    let values = read_values(&a.input)?;
    let (t, c) = (m.meta.seq_len, m.meta.in_channels);
    let window = if a.raw {
        let p = require_preprocess(&m)?;
        if values.len() != t {
            bail!(
                "{}: expected {t} raw readings (seq_len), found {}",
                a.input.display(),
                values.len()
            );
        }
        let mut w = vec![0.0; t * c];
        inmotion::preprocess::apply(&p, &values, &mut w);
        w
    } else {
        if values.len() != t * c {
            bail!(
                "{}: expected {} values (seq_len {t} x in_channels {c}), found {}",
                a.input.display(),
                t * c,
                values.len()
            );
        }
        values
    };
    let (logits, probs) = {
        let (l, p) = m.classify_finite(&window, &a.input.display().to_string())?;
        (l.to_vec(), p.to_vec())
    };
    let (k, conf) = argmax(&probs);
    let out = if a.json {
        let mut v = json!({"logits": logits, "probabilities": probs, "class": k,
                           "confidence": conf});
        v["label"] = json!(m.meta.label(k));
        format!("{v}\n")
    } else {
        let name = match &m.meta.classes {
            Some(cl) => format!(" {}", cl[k]),
            None => String::new(),
        };
        format!(
            "logits        : {}\nprobabilities : {}\npredicted     : class {k}{name} (confidence {conf:.4})\n",
            list(&logits),
            list(&probs)
        )
    };
    print!("{out}");
    Ok(0)
}

/// The last seq_len timesteps seen (raw readings or window rows).
struct Ring {
    width: usize,
    rows: usize,
    buf: Vec<f32>,
    filled: usize,
}

impl Ring {
    fn push(&mut self, row: &[f32]) {
        if self.filled == self.rows {
            self.buf.copy_within(self.width.., 0);
            self.filled -= 1;
        }
        let at = self.filled * self.width;
        self.buf[at..at + self.width].copy_from_slice(row);
        self.filled += 1;
    }
    fn replace(&mut self, all: &[f32]) {
        self.buf.copy_from_slice(all);
        self.filled = self.rows;
    }
    fn full(&self) -> bool {
        self.filled == self.rows
    }
}

pub fn stream(a: StreamArgs) -> Result<u8> {
    let mut m = load(&a.artifact)?;
    let (t, c) = (m.meta.seq_len, m.meta.in_channels);
    let pre = if a.raw {
        Some(require_preprocess(&m)?)
    } else {
        None
    };
    let width = if a.raw { 1 } else { c };
    let mut ring = Ring {
        width,
        rows: t,
        buf: vec![0.0; t * width],
        filled: 0,
    };
    let labels: Vec<String> = (0..m.meta.num_classes).map(|k| m.meta.label(k)).collect();
    let reader: Box<dyn BufRead> = match &a.input {
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p).with_context(|| p.display().to_string())?,
        )),
        None => Box::new(std::io::stdin().lock()),
    };
    let source = a
        .input
        .as_ref()
        .map_or("stdin".to_string(), |p| p.display().to_string());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut window = vec![0.0; t * c];
    let (mut steps, mut results, mut lines) = (0usize, 0usize, 0usize);
    let mut counts = vec![0usize; labels.len()];
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("{source}: line {}", i + 1))?;
        let what = format!("{source}: line {}", i + 1);
        let Some(v) = inmotion::input::stream_line(&line, &what)? else {
            continue;
        };
        lines += 1;
        if v.len() == width {
            ring.push(&v);
            steps += 1;
        } else if v.len() == width * t {
            ring.replace(&v);
            steps += t;
        } else {
            bail!(
                "{what}: {} values; expected {width} (one timestep) or {} (a whole window of {t} x {width})",
                v.len(),
                width * t
            );
        }
        if !ring.full() {
            continue;
        }
        match &pre {
            Some(p) => inmotion::preprocess::apply(p, &ring.buf, &mut window),
            None => window.copy_from_slice(&ring.buf),
        }
        let (_, probs) = m.classify_finite(
            &window,
            &format!("{what}: the window ending at sample {steps}"),
        )?;
        let (k, conf) = argmax(probs);
        counts[k] += 1;
        results += 1;
        let text = if a.json {
            format!(
                "{}\n",
                json!({"sample": steps, "class": k, "label": labels[k], "confidence": conf,
                       "probabilities": probs})
            )
        } else {
            let pairs: Vec<String> = labels
                .iter()
                .zip(probs)
                .map(|(l, p)| format!("{l} {p:.4}"))
                .collect();
            format!(
                "t={steps}  {}  confidence={conf:.4}  [{}]\n",
                labels[k],
                pairs.join(" ")
            )
        };
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing stdout")?;
    }
    let dist: Vec<String> = labels
        .iter()
        .zip(&counts)
        .map(|(l, n)| format!("{l} {n}"))
        .collect();
    eprintln!(
        "stream: {lines} lines, {steps} timesteps, {results} classifications ({})",
        dist.join(", ")
    );
    Ok(0)
}
