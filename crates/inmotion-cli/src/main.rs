//! `inmotion-infer`: runs inMotion artifacts (docs/inmotion.md). Thin: parses arguments, reads
//! input, calls the `inmotion` library, prints. Exit codes follow docs/cli-conventions.md:
//! 0 ok, 1 verification failed (`check`), 2 bad usage / input / artifact / golden. Output is
//! buffered and printed only on success, so an error never leaves partial data on stdout
//! (`stream` excepted: it prints each classification as it happens).

mod commands;
mod input;
mod stream;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "inmotion-infer",
    version,
    about = "Run exported inMotion time-series models (no Python) and prove they match PyTorch",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load and validate an artifact (no inference); print its architecture and quantization.
    Describe(commands::DescribeArgs),
    /// Classify one window read from a file.
    Predict(stream::PredictArgs),
    /// Classify a stream of timesteps or windows (stdin by default), one line per result.
    Stream(stream::StreamArgs),
    /// Latency per window (min / median / mean / p95 / max) and throughput, one thread.
    Bench(commands::BenchArgs),
    /// Replay a golden file and report parity with the reference logits.
    Check(commands::CheckArgs),
    /// Accuracy, per-class metrics, MCC and confusion matrix over a labelled CSV.
    Eval(commands::EvalArgs),
}

/// One thread unless KIN_INFER_THREADS says otherwise: the models are small, and a single
/// thread avoids pool start-up and hand-off costs on the hot path. Results do not depend on it.
/// One thread means no pool at all: everything runs on the main thread (kin-infer's GEMM forks
/// only inside a pool), so no idle worker threads exist.
fn thread_pool() -> anyhow::Result<Option<rayon::ThreadPool>> {
    let n = match std::env::var("KIN_INFER_THREADS") {
        Ok(v) if !v.trim().is_empty() => kin_infer_core::threads::resolve_threads(None)?,
        _ => 1,
    };
    if n <= 1 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map(Some)
        .map_err(|e| anyhow::anyhow!("thread pool: {e}"))
}

/// Threads the commands compute on (1 outside a pool).
pub(crate) fn threads() -> usize {
    if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        1
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = match e.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => 0,
                _ => 2,
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let run = move || match cli.command {
        Command::Describe(a) => commands::describe(a),
        Command::Predict(a) => stream::predict(a),
        Command::Stream(a) => stream::stream(a),
        Command::Bench(a) => commands::bench(a),
        Command::Check(a) => commands::check(a),
        Command::Eval(a) => commands::eval(a),
    };
    let result = thread_pool().and_then(|pool| match pool {
        Some(p) => p.install(run),
        None => run(),
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
