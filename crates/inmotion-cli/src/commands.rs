//! `describe`, `bench`, `check` and `eval`. Each builds its whole output in a String and
//! prints it only when the command succeeded.

use crate::stream::load;
use anyhow::Result;
use clap::Args;
use inmotion::golden::{self, Golden};
use inmotion::meta::{Family, Hparams, Meta};
use inmotion::Model;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct DescribeArgs {
    /// Artifact directory (meta.json, model.safetensors).
    #[arg(long)]
    pub artifact: PathBuf,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Artifact directory (meta.json, model.safetensors).
    #[arg(long)]
    pub artifact: PathBuf,
    /// Timed windows.
    #[arg(long, default_value_t = 200)]
    pub iterations: usize,
    /// Untimed windows first.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Artifact directory (meta.json, model.safetensors).
    #[arg(long)]
    pub artifact: PathBuf,
    /// Golden file, or a directory holding golden.json (usually the artifact itself).
    #[arg(long)]
    pub golden: PathBuf,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct EvalArgs {
    /// Artifact directory (meta.json, model.safetensors).
    #[arg(long)]
    pub artifact: PathBuf,
    /// CSV in the inMotion layout: raw readings in columns `1`..`seq_len`, class in `label`.
    #[arg(long)]
    pub data: PathBuf,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `key : value` lines, keys padded as in golden-format.md's report.
fn kv(out: &mut String, key: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{key:<10} : {value}");
}

fn tokenizer_words(f: Family) -> &'static str {
    match f {
        Family::Lejepa => "per-timestep Linear(in_channels -> d_model)",
        Family::TJepa => "per-feature scalar tokens (weight * value + bias + feature embedding) with register tokens, then input_proj",
        Family::TsJepa => "Conv1d patches over time (kernel = stride = patch_size)",
        Family::CfJepa => "per-channel Linear(seq_len -> d_model)",
        Family::Sigreg => "none",
    }
}

fn describe_fields(m: &Model) -> Vec<(&'static str, Value)> {
    let meta: &Meta = &m.meta;
    let mut f: Vec<(&'static str, Value)> = vec![
        ("model", json!(meta.family.name())),
        ("artifact", json!(m.dir.display().to_string())),
        ("tensors", json!(m.n_tensors)),
        // Weight matrices a quantized artifact keeps as integer codes (dequantized inside
        // the GEMM), and the bytes their panels hold.
        ("matrices_as_codes", json!(m.codes_in_memory.0)),
        ("codes_bytes", json!(m.codes_in_memory.1)),
    ];
    match &meta.hparams {
        Hparams::Transformer(h) => {
            let tail = match meta.family {
                Family::Lejepa | Family::CfJepa => {
                    "proj_gelu_batchnorm (Linear, GELU, BatchNorm1d, Linear)"
                }
                _ => "mlp (Linear, GELU, Linear)",
            };
            let pool = if meta.family == Family::Lejepa {
                "attention"
            } else {
                "mean"
            };
            f.extend([
                ("family", json!("transformer")),
                ("seq_len", json!(meta.seq_len)),
                ("in_channels", json!(meta.in_channels)),
                ("num_classes", json!(meta.num_classes)),
                ("d_model", json!(h.d_model)),
                ("n_heads", json!(h.n_heads)),
                ("num_layers", json!(h.num_layers)),
                ("dim_feedforward", json!(h.dim_feedforward)),
                ("head_hidden", json!(h.head_hidden)),
                ("n_tokens", json!(m.n_tokens().unwrap_or(0))),
                ("n_reg", json!(h.n_reg)),
                ("tokenizer", json!(tokenizer_words(meta.family))),
                ("pool", json!(pool)),
                ("tail", json!(tail)),
            ]);
            if meta.family == Family::TsJepa {
                f.push(("patch_size", json!(h.patch_size)));
            }
        }
        Hparams::Sigreg(h) => f.extend([
            ("family", json!("cnn")),
            ("seq_len", json!(meta.seq_len)),
            ("in_channels", json!(meta.in_channels)),
            ("num_classes", json!(meta.num_classes)),
            ("num_filters", json!(h.num_filters)),
            ("num_blocks", json!(h.num_blocks)),
            ("latent_dim", json!(h.latent_dim)),
        ]),
    }
    f.push(("classes", json!(meta.classes)));
    f.push(("quantization", meta.quantization.raw.clone()));
    let pre = meta.preprocess.as_ref().map(|p| {
        let names: Vec<String> = p
            .features
            .iter()
            .map(|x| format!("{x:?}").to_lowercase())
            .collect();
        json!({"standardize": {"mean": p.mean, "std": p.std}, "features": names})
    });
    f.push(("preprocess", json!(pre)));
    f.push(("provenance", meta.provenance.clone()));
    f.push((
        "weights_sha256",
        json!(meta
            .weights_sha256
            .as_ref()
            .map(|s| format!("{s} (verified)"))),
    ));
    f.push(("kernel_tier", json!(m.tier().name())));
    f.push(("numerics", json!(inmotion::NUMERICS_VERSION)));
    f
}

pub fn describe(a: DescribeArgs) -> Result<u8> {
    let m = load(&a.artifact)?;
    let fields = describe_fields(&m);
    let mut out = String::new();
    if a.json {
        let map: Map<String, Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        out = format!("{}\n", Value::Object(map));
    } else {
        for (k, v) in fields {
            match v {
                Value::String(s) => kv(&mut out, k, s),
                Value::Null => kv(&mut out, k, "none"),
                other => kv(&mut out, k, other),
            }
        }
    }
    print!("{out}");
    Ok(0)
}

/// A fixed window for timing: the golden's first case when there is one, else a
/// deterministic pseudo-random one.
fn bench_window(m: &Model) -> Vec<f32> {
    if let Ok(g) = Golden::load(&m.dir, &m.meta) {
        return g.cases[0].input.clone();
    }
    let mut rng = inmotion::writer::Rng::new(42);
    (0..m.meta.window_len()).map(|_| rng.uniform()).collect()
}

pub fn bench(a: BenchArgs) -> Result<u8> {
    if a.iterations == 0 {
        anyhow::bail!("--iterations must be at least 1");
    }
    let start = Instant::now();
    let mut m = load(&a.artifact)?;
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    let x = bench_window(&m);
    let t0 = Instant::now();
    std::hint::black_box(m.classify(&x));
    let startup_ms = load_ms + t0.elapsed().as_secs_f64() * 1e3;
    for _ in 0..a.warmup {
        std::hint::black_box(m.classify(std::hint::black_box(&x)));
    }
    let mut ms = Vec::with_capacity(a.iterations);
    for _ in 0..a.iterations {
        let t = Instant::now();
        std::hint::black_box(m.classify(std::hint::black_box(&x)));
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    let mean = ms.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        ms[n / 2]
    } else {
        (ms[n / 2 - 1] + ms[n / 2]) / 2.0
    };
    let p95 = ms[((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1];
    let throughput = if median > 0.0 { 1e3 / median } else { 0.0 };
    let sha = inmotion::model::weights_sha256(&m.dir)?;
    let rev = env!("INMOTION_GIT_REVISION");
    let r6 = |x: f64| (x * 1e6).round() / 1e6;
    let out = if a.json {
        format!(
            "{}\n",
            json!({
                "model": m.meta.family.name(), "quantization": m.meta.quantization.scheme,
                "artifact": m.dir.display().to_string(),
                "iterations": a.iterations, "warmup": a.warmup, "threads": crate::threads(),
                "min_ms": r6(ms[0]), "median_ms": r6(median), "mean_ms": r6(mean), "p95_ms": r6(p95),
                "max_ms": r6(ms[n - 1]), "throughput_per_s": (throughput * 10.0).round() / 10.0,
                "load_ms": r6(load_ms), "startup_ms": r6(startup_ms),
                "kernel_tier": m.tier().name(), "artifact_sha256": sha,
                "git_revision": rev, "numerics": inmotion::NUMERICS_VERSION,
            })
        )
    } else {
        let mut o = String::new();
        kv(&mut o, "model", m.meta.family.name());
        kv(&mut o, "quantization", &m.meta.quantization.scheme);
        kv(&mut o, "tier", m.tier().name());
        kv(&mut o, "threads", crate::threads());
        kv(
            &mut o,
            "iterations",
            format!("{} (warmup {})", a.iterations, a.warmup),
        );
        kv(&mut o, "min", format!("{:.4} ms", ms[0]));
        kv(&mut o, "median", format!("{median:.4} ms"));
        kv(&mut o, "mean", format!("{mean:.4} ms"));
        kv(&mut o, "p95", format!("{p95:.4} ms"));
        kv(&mut o, "max", format!("{:.4} ms", ms[n - 1]));
        kv(&mut o, "throughput", format!("{throughput:.1} windows/s"));
        kv(
            &mut o,
            "startup",
            format!("{startup_ms:.3} ms (load {load_ms:.3} ms + first window)"),
        );
        kv(&mut o, "sha256", sha);
        kv(&mut o, "revision", rev);
        o
    };
    print!("{out}");
    Ok(0)
}

fn fmt_tol(t: f64) -> String {
    if t == 0.0 || t >= 1e-6 {
        format!("{t:.6}")
    } else {
        format!("{t:e}")
    }
}

pub fn check(a: CheckArgs) -> Result<u8> {
    let mut m = load(&a.artifact)?;
    let g = Golden::load(&a.golden, &m.meta)?;
    let r = golden::check(&mut m, &g);
    let ok = r.passed();
    let verdict = if ok { "PARITY OK" } else { "PARITY FAILED" };
    let case_name = |i: usize, n: &Option<String>| match n {
        Some(n) => format!("{i} ({n})"),
        None => i.to_string(),
    };
    let out = if a.json {
        let mism: Vec<Value> = r
            .mismatches
            .iter()
            .map(|x| {
                json!({"case": x.case, "name": x.name, "position": x.position,
                            "expected": x.expected, "actual": x.actual})
            })
            .collect();
        format!(
            "{}\n",
            json!({"cases": r.cases, "max_abs_diff": r.max_diff, "tolerance": r.tol,
                   "mismatches": mism, "result": verdict})
        )
    } else {
        let mut o = String::new();
        for x in &r.mismatches {
            let _ = writeln!(
                o,
                "case {}: logit {}: expected {} actual {} (|diff| {:.3e})",
                case_name(x.case, &x.name),
                x.position,
                x.expected,
                x.actual,
                (x.actual as f64 - x.expected).abs()
            );
        }
        kv(&mut o, "cases", r.cases);
        kv(&mut o, "max |diff|", format!("{:.8}", r.max_diff));
        kv(&mut o, "tolerance", fmt_tol(r.tol));
        let _ = writeln!(o, "{verdict}");
        o
    };
    print!("{out}");
    Ok(if ok { 0 } else { 1 })
}

pub fn eval(a: EvalArgs) -> Result<u8> {
    let mut m = load(&a.artifact)?;
    let r = inmotion::eval::eval_csv(&mut m, &a.data)?;
    let out = if a.json {
        let per: Vec<Value> = r
            .per_class
            .iter()
            .map(|c| {
                json!({"label": c.label, "precision": c.precision, "recall": c.recall,
                            "f1": c.f1, "support": c.support})
            })
            .collect();
        format!(
            "{}\n",
            json!({"model": m.meta.family.name(), "quantization": m.meta.quantization.scheme,
                   "data": a.data.display().to_string(), "rows": r.rows, "accuracy": r.accuracy,
                   "mcc": r.mcc, "per_class": per, "confusion": r.confusion,
                   "labels": r.per_class.iter().map(|c| c.label.clone()).collect::<Vec<_>>()})
        )
    } else {
        let mut o = String::new();
        kv(&mut o, "model", m.meta.family.name());
        kv(&mut o, "quantization", &m.meta.quantization.scheme);
        kv(&mut o, "rows", r.rows);
        kv(&mut o, "accuracy", format!("{:.4}", r.accuracy));
        kv(&mut o, "mcc", format!("{:.4}", r.mcc));
        let _ = writeln!(
            o,
            "\n{:<10} {:>9} {:>9} {:>9} {:>9}",
            "class", "precision", "recall", "f1", "support"
        );
        for c in &r.per_class {
            let _ = writeln!(
                o,
                "{:<10} {:>9.4} {:>9.4} {:>9.4} {:>9}",
                c.label, c.precision, c.recall, c.f1, c.support
            );
        }
        let _ = write!(o, "\nconfusion (rows true, columns predicted)\n{:<10}", "");
        for c in &r.per_class {
            let _ = write!(o, " {:>6}", c.label);
        }
        let _ = writeln!(o);
        for (c, row) in r.per_class.iter().zip(&r.confusion) {
            let _ = write!(o, "{:<10}", c.label);
            for n in row {
                let _ = write!(o, " {n:>6}");
            }
            let _ = writeln!(o);
        }
        o
    };
    print!("{out}");
    Ok(0)
}
