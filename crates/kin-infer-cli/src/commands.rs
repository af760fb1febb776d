//! One function per subcommand. Each returns the process exit code or an error (exit 2).

use crate::input::{parse_items, read_source};
use crate::output::{print_report, push_f32_array, Progress};
use anyhow::{bail, Context, Result};
use clap::Args;
use kin_infer::io::golden::{self, GoldenFile};
use kin_infer::io::hub;
use kin_infer::{Embedder, EmbedderOptions, Pooling, PoolingMode, NUMERICS_VERSION};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
pub struct ModelArgs {
    /// Model directory, or a Hugging Face repo id found in the local Hugging Face cache.
    #[arg(long)]
    model: String,
    /// Worker threads (default: KIN_INFER_THREADS, else all logical CPUs).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Input file (default: stdin): one text per line, or JSON Lines with --jsonl.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Output file (default: stdout). Written to a temporary file and renamed when complete.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Input lines are JSON objects with a string "text" and an optional "id".
    #[arg(long)]
    jsonl: bool,
    /// Texts per forward pass (outputs do not depend on it).
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Pooling: cls, mean, max, mean_sqrt_len_tokens, weightedmean, lasttoken (joined by +
    /// to concatenate). Default: the model's sentence-transformers config.
    #[arg(long)]
    pooling: Option<String>,
    /// L2-normalize embeddings (default: as the model's modules.json says).
    #[arg(long, overrides_with = "no_normalize")]
    normalize: bool,
    /// Do not L2-normalize embeddings.
    #[arg(long)]
    no_normalize: bool,
    /// Truncate texts to N tokens, special tokens included (default: the model's limit).
    #[arg(long)]
    max_length: Option<usize>,
    /// Keep the first N embedding dimensions (Matryoshka), re-normalized when normalizing.
    #[arg(long)]
    dimensions: Option<usize>,
}

#[derive(Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// One JSON object instead of `key : value` lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Golden file (kin-infer-golden/1).
    #[arg(long)]
    golden: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Texts, one per line.
    #[arg(long)]
    input: PathBuf,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Timed passes over the whole input.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long)]
    json: bool,
}

fn parse_pooling(s: &str) -> Result<Pooling> {
    let modes = s
        .split('+')
        .map(|m| {
            PoolingMode::parse(m).with_context(|| {
                format!(
                    "unknown pooling `{m}` (expected one of: {})",
                    PoolingMode::NAMES
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Pooling::new(modes))
}

fn load(model: &ModelArgs, mut opts: EmbedderOptions) -> Result<Embedder> {
    let dir = match hub::resolve_model(&model.model) {
        Ok(d) => d,
        #[cfg(feature = "download")]
        Err(kin_infer::InferError::ModelNotFound(_)) if hub::looks_like_repo_id(&model.model) => {
            crate::download::download(&model.model)?
        }
        Err(e) => return Err(e.into()),
    };
    opts.threads = model.threads;
    Ok(Embedder::load(&dir, &opts)?)
}

pub fn embed(a: EmbedArgs) -> Result<u8> {
    if a.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let opts = EmbedderOptions {
        pooling: a.pooling.as_deref().map(parse_pooling).transpose()?,
        normalize: if a.normalize {
            Some(true)
        } else if a.no_normalize {
            Some(false)
        } else {
            None
        },
        max_length: a.max_length,
        threads: None,
        tier: None,
        dimensions: a.dimensions,
    };
    let embedder = load(&a.model, opts)?;
    let source = a
        .input
        .as_deref()
        .map_or_else(|| "<stdin>".to_string(), |p| p.display().to_string());
    let items = parse_items(&read_source(a.input.as_deref())?, a.jsonl, &source)?;
    // Fail before any work when text input cannot be tokenized.
    if !items.is_empty() && embedder.tokenizer().is_none() {
        embedder.tokenize(&[""])?;
    }

    let (tmp, mut sink): (Option<PathBuf>, Box<dyn Write>) = match &a.output {
        Some(p) => {
            let tmp = tmp_path(p);
            let f = std::fs::File::create(&tmp)
                .with_context(|| format!("cannot create {}", tmp.display()))?;
            (Some(tmp), Box::new(std::io::BufWriter::new(f)))
        }
        None => (
            None,
            Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
        ),
    };
    let result = write_embeddings(
        &embedder,
        &items,
        a.batch_size,
        a.input.is_some(),
        &mut sink,
    );
    let result = result.and_then(|()| sink.flush().context("cannot write output"));
    drop(sink);
    match (result, &tmp, &a.output) {
        (Ok(()), Some(tmp), Some(out)) => {
            std::fs::rename(tmp, out).with_context(|| format!("cannot write {}", out.display()))?;
            Ok(0)
        }
        (Ok(()), _, _) => Ok(0),
        (Err(e), tmp, _) => {
            if let Some(t) = tmp {
                let _ = std::fs::remove_file(t);
            }
            Err(e)
        }
    }
}

fn tmp_path(p: &Path) -> PathBuf {
    let mut name = p.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    p.with_file_name(name)
}

fn write_embeddings(
    embedder: &Embedder,
    items: &[crate::input::Item],
    batch_size: usize,
    from_file: bool,
    sink: &mut dyn Write,
) -> Result<()> {
    let mut progress = Progress::new(items.len(), from_file);
    let mut line = String::new();
    for (b, batch) in items.chunks(batch_size).enumerate() {
        let texts: Vec<&str> = batch.iter().map(|i| i.text.as_str()).collect();
        let vecs = embedder.embed_texts(&texts)?;
        for (j, (item, v)) in batch.iter().zip(&vecs).enumerate() {
            let index = b * batch_size + j;
            if v.iter().any(|x| !x.is_finite()) {
                bail!("item {index}: the model produced a non-finite value (check the weights)");
            }
            line.clear();
            line.push_str("{\"index\":");
            line.push_str(&index.to_string());
            line.push_str(",\"id\":");
            line.push_str(
                &item
                    .id
                    .as_ref()
                    .map_or_else(|| "null".into(), |v| v.to_string()),
            );
            line.push_str(",\"embedding\":");
            push_f32_array(&mut line, v);
            line.push_str("}\n");
            sink.write_all(line.as_bytes())
                .context("cannot write output")?;
        }
        progress.advance(batch.len());
    }
    Ok(())
}

pub fn describe(a: DescribeArgs) -> Result<u8> {
    let e = load(&a.model, EmbedderOptions::default())?;
    let c = e.config();
    let info = e.info();
    let dtype = info.storage_dtype.map_or("none", |d| d.name());
    let dtypes = info
        .dtype_counts
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let tokenizer = e
        .tokenizer()
        .map_or("none (token-id input only)".to_string(), |t| {
            format!("{} (vocab {})", t.path().display(), t.vocab_size())
        });
    let v = json!({
        "model": info.dir.display().to_string(),
        "family": c.architecture.name(),
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "max_sequence_length": c.max_sequence_length,
        "max_length": e.max_length(),
        "positions": c.positions,
        "attention": c.attention,
        "ffn": c.ffn,
        "dtype": dtype,
        "tensor_dtypes": dtypes,
        "tensors": info.tensors,
        "parameters": info.parameters,
        "shards": info.shards,
        "weight_prefix": info.weight_prefix,
        "pooling": e.pooling().name(),
        "normalize": e.normalize(),
        "embedding_dim": e.dim(),
        "tokenizer": tokenizer,
        "backend": e.backend_name(),
        "simd_tier": e.tier().name(),
        "threads": e.threads(),
        "numerics_version": NUMERICS_VERSION,
        "load_ms": (info.load_ms * 100.0).round() / 100.0,
    });
    if a.json {
        println!("{v}");
    } else {
        let rows: Vec<(String, String)> = v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), String::from),
                )
            })
            .collect();
        print_report(&rows);
    }
    Ok(0)
}

pub fn check(a: CheckArgs) -> Result<u8> {
    let g = GoldenFile::load(&a.golden)?;
    let e = load(&a.model, EmbedderOptions::default())?;
    let r = golden::check(&e, &g)?;
    let ok = r.passed();
    if a.json {
        let mism: Vec<_> = r
            .mismatches
            .iter()
            .map(|m| json!({"case": m.case, "position": m.position, "expected": m.expected, "actual": m.actual}))
            .collect();
        println!(
            "{}",
            json!({"cases": r.cases, "compared": r.compared, "max_abs_diff": r.max_diff, "tolerance": r.tol,
                   "mismatches": mism, "result": if ok { "PARITY OK" } else { "PARITY FAILED" }})
        );
    } else {
        for m in &r.mismatches {
            println!(
                "case {}: {}: expected {} actual {} (|diff| {:.3e})",
                m.case,
                m.position,
                m.expected,
                m.actual,
                (m.actual - m.expected).abs()
            );
        }
        println!("cases      : {}", r.cases);
        println!("max |diff| : {:.8}", r.max_diff);
        println!("tolerance  : {:.6}", r.tol);
        println!("{}", if ok { "PARITY OK" } else { "PARITY FAILED" });
    }
    Ok(if ok { 0 } else { 1 })
}

/// (min, median, max)
fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[0], s[s.len() / 2], s[s.len() - 1])
}

pub fn bench(a: BenchArgs) -> Result<u8> {
    if a.batch_size == 0 || a.repeat == 0 {
        bail!("--batch-size and --repeat must be at least 1");
    }
    let e = load(&a.model, EmbedderOptions::default())?;
    let load_ms = e.info().load_ms;
    let src = a.input.display().to_string();
    let items = parse_items(&read_source(Some(&a.input))?, false, &src)?;
    if items.is_empty() {
        bail!("{src}: no texts to benchmark");
    }
    let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
    let tokens: usize = e.tokenize(&texts)?.iter().map(|t| t.ids.len()).sum();
    let mut secs = Vec::with_capacity(a.repeat);
    for r in 0..a.repeat {
        let t0 = Instant::now();
        for batch in texts.chunks(a.batch_size) {
            e.embed_texts(batch)?;
        }
        let s = t0.elapsed().as_secs_f64();
        eprintln!("repeat {}/{}: {:.3} s", r + 1, a.repeat, s);
        secs.push(s);
    }
    let n = texts.len() as f64;
    let (smin, smed, smax) = stats(&secs);
    let v = json!({
        "model": e.info().dir.display().to_string(),
        "texts": texts.len(),
        "tokens": tokens,
        "batch_size": a.batch_size,
        "repeat": a.repeat,
        "texts_per_s_min": n / smax, "texts_per_s_median": n / smed, "texts_per_s_max": n / smin,
        "tokens_per_s_min": tokens as f64 / smax, "tokens_per_s_median": tokens as f64 / smed, "tokens_per_s_max": tokens as f64 / smin,
        "load_ms": load_ms,
        "simd_tier": e.tier().name(),
        "threads": e.threads(),
        "numerics_version": NUMERICS_VERSION,
    });
    if a.json {
        println!("{v}");
    } else {
        print_report(&[
            ("texts".into(), texts.len().to_string()),
            ("tokens".into(), tokens.to_string()),
            (
                "texts/s (min/median/max)".into(),
                format!("{:.1} / {:.1} / {:.1}", n / smax, n / smed, n / smin),
            ),
            (
                "tokens/s (min/median/max)".into(),
                format!(
                    "{:.0} / {:.0} / {:.0}",
                    tokens as f64 / smax,
                    tokens as f64 / smed,
                    tokens as f64 / smin
                ),
            ),
            ("load".into(), format!("{load_ms:.1} ms")),
            ("simd tier".into(), e.tier().name().into()),
            ("threads".into(), e.threads().to_string()),
        ]);
    }
    Ok(0)
}
