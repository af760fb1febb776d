//! `kin-infer convert`: a decoder GGUF file written as a Hugging Face model directory (the
//! library's `convert::gguf_convert`), with a progress line on a terminal and a one-line summary.

use anyhow::{bail, Result};
use clap::Args;
use kin_infer::convert::gguf_convert::{self, ConvertOptions, OutDtype};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ConvertArgs {
    /// The GGUF file to convert (architectures llama, qwen2).
    #[arg(long)]
    pub model: PathBuf,
    /// The model directory to write (config.json, model.safetensors, tokenizer files).
    #[arg(long)]
    pub out: PathBuf,
    /// Element type of the written tensors: f32 (the GGUF's logits bit for bit), f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Replace --out when it exists and is not empty.
    #[arg(long)]
    pub force: bool,
    /// No progress line or summary on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ConvertArgs) -> Result<u8> {
    let Some(dtype) = OutDtype::parse(&a.dtype) else {
        bail!("--dtype `{}`: expected f32, f16 or bf16", a.dtype);
    };
    if a.model.is_dir() {
        bail!(
            "--model {}: is a directory; convert takes a .gguf file (a Hugging Face directory \
             is already what convert writes)",
            a.model.display()
        );
    }
    if !a.model.is_file() {
        bail!(
            "--model {}: no such file (convert takes a .gguf file)",
            a.model.display()
        );
    }
    let opts = ConvertOptions {
        dtype,
        force: a.force,
    };
    use std::io::IsTerminal;
    let live = !a.quiet && std::io::stderr().is_terminal();
    let t0 = std::time::Instant::now();
    let report = gguf_convert::convert(&a.model, &a.out, &opts, |done, total| {
        if live {
            eprint!("\rconvert: {done}/{total} tensors");
            if done == total {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
    })?;
    let secs = t0.elapsed().as_secs_f64();
    if a.json {
        let v = json!({
            "model": a.model.display().to_string(),
            "out": a.out.display().to_string(),
            "architecture": report.architecture,
            "model_type": report.model_type,
            "dtype": report.dtype.torch_name(),
            "tensors": report.tensors,
            "source_types": report.source_types,
            "bytes": report.bytes,
            "tokenizer": report.tokenizer,
            "tokenizer_skipped": report.tokenizer_skipped,
            "chat_template": report.chat_template,
            "files": report.files,
            "seconds": (secs * 1000.0).round() / 1000.0,
        });
        println!("{v}");
    } else if !a.quiet {
        eprintln!(
            "wrote {}: {} {} tensors ({} bytes) from {} ({}), architecture {}{}{}",
            a.out.display(),
            report.tensors,
            report.dtype.torch_name(),
            report.bytes,
            a.model.display(),
            report
                .source_types
                .iter()
                .map(|(t, n)| format!("{n} {t}"))
                .collect::<Vec<_>>()
                .join(", "),
            report.architecture,
            match (&report.tokenizer_skipped, report.tokenizer) {
                (_, true) => ", tokenizer".to_string(),
                (Some(why), false) => format!(
                    ", no tokenizer (token-id input only; the file's could not be rebuilt: {why})"
                ),
                (None, false) => ", no tokenizer (token-id input only)".to_string(),
            },
            if report.chat_template {
                ", chat template"
            } else {
                ""
            },
        );
    }
    Ok(0)
}
