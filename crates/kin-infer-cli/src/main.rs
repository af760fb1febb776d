//! `kin-infer`: the command-line face of the engine. Thin: parses arguments, reads inputs,
//! calls the library, prints. Exit codes follow docs/cli-conventions.md (0 ok, 1 parity
//! failed, 2 bad usage/input/model).

mod bench_cmd;
mod commands;
mod convert_cmd;
#[cfg(feature = "download")]
mod download;
mod embed_cmd;
mod generate_cmd;
mod input;
mod model_args;
mod output;
mod progress;
mod quantize_cmd;
mod serve_cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "kin-infer",
    version,
    about = "Bit-reproducible transformer inference",
    arg_required_else_help = true
)]
struct Cli {
    /// Where to compute: auto (a hardware GPU if this build has a GPU backend and one is
    /// present, else the CPU), cpu, wgpu, cuda. An unavailable choice is an error.
    #[arg(long, global = true, env = "KIN_INFER_BACKEND")]
    backend: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Embed texts (one per line, or JSON Lines with --jsonl) into JSON Lines vectors.
    Embed(embed_cmd::EmbedArgs),
    /// Describe a model: family, sizes, dtype, pooling, tokenizer, SIMD tier, threads.
    Describe(commands::DescribeArgs),
    /// Print the resource plan (threads, batch size, memory budget, SIMD tier) for a model.
    Plan(commands::PlanArgs),
    /// Replay a golden file against the model and report parity.
    Check(commands::CheckArgs),
    /// Measure throughput (encoders: a file of texts; decoders: prefill and decode), min/median/max over --repeat runs.
    Bench(bench_cmd::BenchArgs),
    /// Generate text with a decoder model, streamed token by token.
    Generate(generate_cmd::GenerateArgs),
    /// Write a decoder checkpoint as a quantized GGUF file or safetensors directory (Q8_0 … Q6_K, Q4_K_M, Q5_K_M; see --type).
    Quantize(quantize_cmd::QuantizeArgs),
    /// Write a decoder GGUF file as a Hugging Face model directory (config, safetensors,
    /// tokenizer, chat template).
    Convert(convert_cmd::ConvertArgs),
    /// Serve models over HTTP with OpenAI's API (embeddings, chat and text completions).
    Serve(serve_cmd::ServeCmdArgs),
    /// List the GPUs this build can use, the CPU, and the backend `auto` selects.
    Devices(commands::DevicesArgs),
}

/// The parser, with every option that takes a value accepting a negative number, so that
/// `--temperature -1` or `--seed -1` reaches the option's own check (which names it and its
/// range) instead of clap's "unexpected argument '-1'".
fn command() -> clap::Command {
    let negative_ok = |a: clap::Arg| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    };
    Cli::command()
        .mut_args(negative_ok)
        .mut_subcommands(move |sc| sc.mut_args(negative_ok))
}

fn main() -> ExitCode {
    // Before anything slow: the watchdog's orphan check compares against this parent.
    kin_infer::watchdog::note_parent();
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
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
    if let Some(b) = &cli.backend {
        // One choice for the whole process: every backend the library creates reads it.
        if let Err(e) = kin_infer::backend::BackendChoice::parse(b) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        std::env::set_var("KIN_INFER_BACKEND", b);
    }
    let result = match cli.command {
        Command::Embed(a) => embed_cmd::embed(a),
        Command::Describe(a) => commands::describe(a),
        Command::Check(a) => commands::check(a),
        Command::Plan(a) => commands::plan(a),
        Command::Bench(a) => bench_cmd::bench(a),
        Command::Generate(a) => generate_cmd::run(a),
        Command::Quantize(a) => quantize_cmd::run(a),
        Command::Convert(a) => convert_cmd::run(a),
        Command::Serve(a) => serve_cmd::run(a),
        Command::Devices(a) => commands::devices(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
