//! `kin-infer embed`: streams the input in batches through the embedder into JSON Lines, plain
//! (stdout, or a file renamed into place when complete) or durable (`--resume`: fsync'd commits
//! plus a manifest, restartable), under the watchdog and the resource plan.

use crate::input::{validate, Item, Source};
use crate::model_args::{load, parse_pooling, plan_for, ModelArgs};
use crate::output::{Progress, Summary};
use anyhow::{bail, Context, Result};
use clap::Args;
use kin_infer::corpus::{push_record, DurableOutput, RunIdentity};
use kin_infer::watchdog::{EmbedWatchdog, WatchdogConfig};
use kin_infer::{Embedder, EmbedderOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct EmbedArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Input file (default: stdin): one text per line, or JSON Lines with --jsonl.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Output file (default: stdout). Without --resume it is written to a temporary file and
    /// renamed when complete.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Input lines are JSON objects with a string "text" and an optional unique "id".
    #[arg(long)]
    jsonl: bool,
    /// Texts per forward pass (default: the resource plan's; outputs do not depend on it).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Pooling: cls, mean, max, mean_sqrt_len_tokens, weightedmean, lasttoken (joined by +
    /// to concatenate). Default: the model's sentence-transformers config.
    #[arg(long)]
    pooling: Option<String>,
    /// L2-normalize embeddings (default: as the model's modules.json says).
    #[arg(long, conflicts_with = "no_normalize")]
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
    /// Durable run: append fsync'd batches to --output with a manifest beside it
    /// (FILE.manifest.json); rerun the same command to continue after an interruption.
    #[arg(long, requires = "output")]
    resume: bool,
    /// Resource profile: proof (default), throughput, interactive, ci (or KIN_RESOURCE_PROFILE).
    #[arg(long)]
    profile: Option<String>,
    /// Memory budget for the plan, e.g. 512M or 2G (default: the profile's share of free memory).
    #[arg(long)]
    memory_budget: Option<String>,
    /// Durable run: fsync at most every SECS seconds, so small batches do not each pay an
    /// fsync (0: after every batch).
    #[arg(long, default_value_t = 0.5)]
    commit_interval: f64,
    /// Periodic one-line JSON progress records on stderr.
    #[arg(long)]
    progress_json: bool,
    /// Watchdog: stop (exit 4) after this many seconds.
    #[arg(long)]
    max_wall: Option<f64>,
    /// Watchdog: stop (exit 5) when fewer items than this per second are persisted over the
    /// rate window.
    #[arg(long)]
    min_rate: Option<f64>,
    /// Watchdog: window for --min-rate, in seconds.
    #[arg(long, default_value_t = 60.0)]
    rate_window: f64,
    /// Watchdog: stop (exit 3) when this process is gone (default: when the parent is gone,
    /// unless started under nohup or setsid).
    #[arg(long)]
    watch_pid: Option<u32>,
    /// Watchdog: keep running when the parent process dies (implied under nohup or setsid).
    #[arg(long)]
    no_orphan_check: bool,
}

fn positive(v: Option<f64>, flag: &str) -> Result<Option<Duration>> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            bail!("{flag} must be a positive number of seconds")
        }
        Some(x) => Ok(Some(Duration::from_secs_f64(x))),
        None => Ok(None),
    }
}

/// Where records go.
enum Sink {
    /// Stdout or a temporary file renamed into place at the end.
    Plain {
        out: Box<dyn Write>,
        tmp: Option<(PathBuf, PathBuf)>,
    },
    Durable(Box<DurableOutput>),
}

fn tmp_path(p: &Path) -> PathBuf {
    let mut name = p.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    p.with_file_name(name)
}

pub fn embed(a: EmbedArgs) -> Result<u8> {
    if a.batch_size == Some(0) {
        bail!("--batch-size must be at least 1");
    }
    let max_wall = positive(a.max_wall, "--max-wall")?;
    let rate_window = positive(Some(a.rate_window), "--rate-window")?.unwrap_or_default();
    if !(a.commit_interval.is_finite() && a.commit_interval >= 0.0) {
        bail!("--commit-interval must be a non-negative number of seconds");
    }
    let commit_every = Duration::from_secs_f64(a.commit_interval);
    if a.min_rate.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
        bail!("--min-rate must be a non-negative number");
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
        // Set from --activations by `load`, with the threads.
        activations: None,
    };
    // Resolved (and, with --download, fetched with hf-hub's own bars) before the spinner starts,
    // so the two never draw over each other; the load's own resolve is then a local hit.
    a.model.resolve()?;
    let mut embedder = crate::progress::loading(&a.model.model, || load(&a.model, opts))?;
    let plan = plan_for(&embedder, a.profile.as_deref(), a.memory_budget.as_deref())?;
    if a.model.threads.is_none() && std::env::var_os("KIN_INFER_THREADS").is_none() {
        embedder.set_threads(plan.embedding.threads)?;
    }
    let batch_size = a.batch_size.unwrap_or(plan.embedding.batch_size);

    warn_jsonl_suffix(a.input.as_deref(), a.jsonl);
    let source = Source::new(a.input.as_deref())?;
    let total = validate(&source, a.jsonl)?;
    if total > 0 && embedder.tokenizer().is_none() {
        embedder.tokenize(&[""])?; // the typed "no tokenizer" error, before any work
    }

    let mut reader = source.reader(a.jsonl)?;
    let mut done = 0u64;
    let mut sink = match (&a.output, a.resume) {
        (Some(out), true) => {
            let identity = RunIdentity::of(&embedder, if a.jsonl { "jsonl" } else { "lines" })?;
            let (durable, at) = DurableOutput::open(out, identity, &source.name())?;
            if at.repaired_bytes > 0 {
                eprintln!(
                    "resume: cut a torn last record ({} bytes) from {}",
                    at.repaired_bytes,
                    out.display()
                );
            }
            skip_done(&source, a.jsonl, &mut reader, &at, out)?;
            done = at.items;
            if done > 0 {
                eprintln!(
                    "resume: {done} of {total} items already persisted in {}",
                    out.display()
                );
            }
            Sink::Durable(Box::new(durable))
        }
        (Some(out), false) => {
            let tmp = tmp_path(out);
            let f = std::fs::File::create(&tmp)
                .with_context(|| format!("cannot create {}", tmp.display()))?;
            Sink::Plain {
                out: Box::new(std::io::BufWriter::with_capacity(1 << 20, f)),
                tmp: Some((tmp, out.clone())),
            }
        }
        (None, _) => Sink::Plain {
            out: Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            tmp: None,
        },
    };

    let partial = match &sink {
        Sink::Plain {
            tmp: Some((t, _)), ..
        } => Some(t.clone()),
        _ => None,
    };
    let wd_cfg = WatchdogConfig {
        watch_pid: a.watch_pid,
        orphan_check: !a.no_orphan_check,
        max_wall,
        min_rate: a.min_rate,
        rate_window,
        ..Default::default()
    };
    // Said, not silent: a run detached on purpose does not stop when its parent dies.
    if let Err(why) = kin_infer::watchdog::orphan_check(&wd_cfg) {
        eprintln!(
            "kin-infer embed: orphan check off ({why}); --watch-pid PID stops the run when PID \
             exits"
        );
    }
    let wd = EmbedWatchdog::start(
        wd_cfg,
        Box::new(move |reason, detail| {
            if let Some(t) = &partial {
                let _ = std::fs::remove_file(t);
            }
            eprintln!(
                "kin-infer: stopped: {detail} (the run did not stop within the grace period)"
            );
            std::process::exit(reason.exit_code() as i32);
        }),
    );
    let interrupter = wd.interrupter();
    let _ = ctrlc::set_handler(interrupter);

    let mut progress = Progress::new(total, a.progress_json, done);
    let result = run_batches(
        &embedder,
        &mut reader,
        &mut sink,
        &wd,
        &mut progress,
        (batch_size, commit_every),
        done,
    );
    let stopped = wd.stop_reason();
    let detail = wd.detail();
    wd.finish();
    match (result, sink) {
        (Ok(persisted), Sink::Durable(d)) => {
            if let Some(r) = stopped {
                progress.clear();
                let out = a.output.as_deref().unwrap_or(Path::new(""));
                eprintln!(
                    "kin-infer: stopped: {detail}; {persisted} of {total} items persisted in {} (rerun the same command to continue)",
                    out.display()
                );
                return Ok(r.exit_code());
            }
            d.finish(reader.bytes(), reader.hasher())?;
            progress.finish(Summary {
                items: persisted,
                output: a.output.as_deref(),
            });
            Ok(0)
        }
        (Ok(persisted), Sink::Plain { mut out, tmp }) => {
            out.flush().context("cannot write output")?;
            drop(out);
            if let Some(r) = stopped {
                progress.clear();
                let kept = match &tmp {
                    Some((t, out)) => {
                        let _ = std::fs::remove_file(t);
                        format!("nothing persisted: {} was not written", out.display())
                    }
                    None => "written to stdout, nothing persisted".into(),
                };
                eprintln!(
                    "kin-infer: stopped: {detail}; embedded {persisted} of {total} items ({kept}): run with --output FILE --resume to keep work across runs"
                );
                return Ok(r.exit_code());
            }
            if let Some((t, out)) = &tmp {
                std::fs::rename(t, out)
                    .with_context(|| format!("cannot write {}", out.display()))?;
            }
            progress.finish(Summary {
                items: persisted,
                output: a.output.as_deref(),
            });
            Ok(0)
        }
        (
            Err(e),
            Sink::Plain {
                tmp: Some((t, _)), ..
            },
        ) => {
            let _ = std::fs::remove_file(t);
            Err(e)
        }
        (Err(e), _) => Err(e),
    }
}

/// A `.jsonl` file read as plain lines embeds each JSON object's text verbatim: almost never
/// what was meant, but a valid request, so a warning and not an error.
fn warn_jsonl_suffix(input: Option<&Path>, jsonl: bool) {
    if let Some(p) = input {
        if !jsonl
            && p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
        {
            eprintln!(
                "warning: {} ends in .jsonl but --jsonl is not set: each line is embedded as text; pass --jsonl to read objects",
                p.display()
            );
        }
    }
}

/// Checks that the input is the one the run began with (its prefix up to the last recorded
/// commit hashes the same), then skips the items the resumed output already holds.
fn skip_done(
    source: &Source,
    jsonl: bool,
    reader: &mut crate::input::Reader,
    at: &kin_infer::corpus::ResumePoint,
    out: &Path,
) -> Result<()> {
    let prev = &at.previous;
    if prev.items > 0 {
        let mut check = source.reader(jsonl)?;
        for _ in 0..prev.items {
            if check.next_item()?.is_none() {
                break;
            }
        }
        let hash = format!("{:032x}", check.hasher().digest128());
        if check.bytes() != prev.input_bytes || hash != prev.input_prefix_hash {
            bail!(
                "the input {} changed since the run began (its first {} items differ from what {} was made from)",
                source.name(),
                prev.items,
                out.display()
            );
        }
    }
    for i in 0..at.items {
        let Some(item) = reader.next_item()? else {
            bail!(
                "the input has only {i} items but {} already holds {}: a different input?",
                out.display(),
                at.items
            );
        };
        if i + 1 == at.items {
            if let Some((_, id)) = &at.last_record {
                if item.id.as_ref().unwrap_or(&serde_json::Value::Null) != id {
                    bail!("the input changed since the run began: item {i} has id {:?}, the output {id}", item.id);
                }
            }
        }
    }
    Ok(())
}

/// The main loop; returns the number of items persisted (in total, including resumed ones).
fn run_batches(
    e: &Embedder,
    reader: &mut crate::input::Reader,
    sink: &mut Sink,
    wd: &EmbedWatchdog,
    progress: &mut Progress,
    (batch_size, commit_every): (usize, Duration),
    mut index: u64,
) -> Result<u64> {
    let mut persisted = index;
    let mut line = String::new();
    let mut last_commit = Instant::now();
    loop {
        if wd.stop_reason().is_some() {
            break;
        }
        let batch: Vec<Item> = reader.next_batch(batch_size)?;
        if batch.is_empty() {
            break;
        }
        let texts: Vec<&str> = batch.iter().map(|i| i.text.as_str()).collect();
        let vecs = e.embed_texts(&texts)?;
        line.clear();
        for (item, v) in batch.iter().zip(&vecs) {
            push_record(&mut line, index, item.id.as_ref(), v)?;
            index += 1;
        }
        let n = batch.len() as u64;
        match sink {
            Sink::Plain { out, .. } => {
                out.write_all(line.as_bytes())
                    .context("cannot write output")?;
                out.flush().context("cannot write output")?;
                persisted += n;
                wd.persisted(n);
            }
            Sink::Durable(d) => {
                d.append(line.as_bytes(), n);
                if last_commit.elapsed() >= commit_every {
                    let c = d.commit(reader.bytes(), reader.hasher())?;
                    persisted += c;
                    wd.persisted(c);
                    last_commit = Instant::now();
                }
            }
        }
        progress.update(index, persisted);
    }
    if let Sink::Durable(d) = sink {
        let c = d.commit(reader.bytes(), reader.hasher())?;
        persisted += c;
        wd.persisted(c);
    }
    Ok(persisted)
}
