//! `kin-infer quantize`: a Hugging Face decoder checkpoint written as a GGUF file in a block
//! type (the library's `io::gguf_export`), with a progress line on stderr.

use anyhow::{bail, Result};
use clap::Args;
use kin_infer::io::gguf_export;
use kin_infer::kernels::ggml::GgmlType;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
pub struct QuantizeArgs {
    /// Model directory (config.json + safetensors; LLaMA, Mistral or Qwen2).
    #[arg(long)]
    pub model: PathBuf,
    /// Storage type of the weight matrices: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k or
    /// f32, or llama.cpp's q4_k_m / q5_k_m recipes (Q6_K for the output and some attn_v and
    /// ffn_down).
    #[arg(long = "type")]
    pub ty: String,
    /// Output: a `.gguf` file, or with `--format safetensors` a model directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Output container: gguf (llama.cpp's; LLaMA, Mistral, Qwen2), or safetensors (the
    /// checkpoint's own layout, ggml blocks as U8 tensors; any family).
    #[arg(long, default_value = "gguf")]
    pub format: String,
    /// No progress line or summary on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `--type`: a ggml type name, or llama.cpp's `q4_k_m` / `q5_k_m` recipes (`q4_k_s`, `q5_k_s`
/// are the plain K-quants): the type and whether it is the `_M` recipe.
fn parse_type(s: &str) -> Result<(GgmlType, bool)> {
    let s = s.trim().to_ascii_lowercase();
    let (base, medium) = match s.as_str() {
        "q4_k_m" => ("q4_k", true),
        "q5_k_m" => ("q5_k", true),
        "q4_k_s" => ("q4_k", false),
        "q5_k_s" => ("q5_k", false),
        other => (other, false),
    };
    let t = GgmlType::ALL
        .into_iter()
        .find(|t| t.name().eq_ignore_ascii_case(base));
    match t {
        Some(t) => Ok((t, medium)),
        None => bail!(
            "--type `{s}` is not a ggml type (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, f32)"
        ),
    }
}

/// A bar per tensor with rate and ETA, on a terminal only (a log gets the summary); made on
/// the first call, which brings the total.
fn progress(quiet: bool) -> impl FnMut(usize, usize) {
    let mut bar: Option<Option<indicatif::ProgressBar>> = quiet.then_some(None);
    move |done, total| {
        let b = bar.get_or_insert_with(|| crate::progress::bar(total as u64, "tensors", 0));
        if let Some(pb) = b {
            pb.set_position(done as u64);
            if done >= total {
                pb.finish_and_clear();
            }
        }
    }
}

fn run_safetensors(a: &QuantizeArgs, ty: GgmlType) -> Result<u8> {
    let t0 = std::time::Instant::now();
    let (tensors, quantized) =
        kin_infer::io::st_quantize::export(&a.model, &a.out, ty, progress(a.quiet))?;
    let v = json!({
        "model": a.model.display().to_string(),
        "out": a.out.display().to_string(),
        "format": "safetensors",
        "type": a.ty.trim().to_ascii_lowercase(),
        "tensors": tensors,
        "quantized_tensors": quantized,
        "seconds": (t0.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
    });
    if a.json {
        println!("{v}");
    } else if !a.quiet {
        eprintln!(
            "wrote {}/model.safetensors in {:.1} s: {tensors} tensors, {quantized} in {}",
            a.out.display(),
            t0.elapsed().as_secs_f64(),
            ty.name()
        );
    }
    Ok(0)
}

pub fn run(a: QuantizeArgs) -> Result<u8> {
    let (ty, medium) = parse_type(&a.ty)?;
    if a.format == "safetensors" {
        if medium {
            bail!("--type {}: the _M recipes are GGUF's (llama.cpp's tensor names); --format safetensors takes one type", a.ty);
        }
        return run_safetensors(&a, ty);
    }
    if a.format != "gguf" {
        bail!("--format `{}`: expected gguf or safetensors", a.format);
    }
    let t0 = std::time::Instant::now();
    let report = gguf_export::export_with(&a.model, &a.out, ty, medium, progress(a.quiet))?;
    let secs = t0.elapsed().as_secs_f64();
    let v = json!({
        "model": a.model.display().to_string(),
        "out": a.out.display().to_string(),
        "type": a.ty.trim().to_ascii_lowercase(),
        "architecture": report.architecture,
        "tensors": report.tensors,
        "quantized_tensors": report.quantized,
        "tensor_types": report.types,
        "bytes": report.bytes,
        "tokenizer": report.tokenizer,
        "chat_template": report.chat_template,
        "seconds": (secs * 1000.0).round() / 1000.0,
    });
    // stdout carries data only (docs/cli-conventions.md): the JSON; a human summary is stderr's.
    if a.json {
        println!("{v}");
    } else if !a.quiet {
        eprintln!(
            "wrote {} ({} bytes) in {secs:.1} s: {} tensors, {} quantized ({}), architecture {}{}{}",
            a.out.display(),
            report.bytes,
            report.tensors,
            report.quantized,
            report
                .types
                .iter()
                .filter(|(t, _)| t.as_str() != "F32")
                .map(|(t, n)| format!("{n} {t}"))
                .collect::<Vec<_>>()
                .join(", "),
            report.architecture,
            if report.tokenizer {
                ", tokenizer"
            } else {
                ", no tokenizer (token-id input only)"
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
