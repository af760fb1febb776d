//! `kin-infer quantize`: a Hugging Face decoder checkpoint written as a GGUF file in a block
//! type (the library's `convert::gguf_export`), with a progress line on stderr.

use anyhow::{bail, Result};
use clap::Args;
use kin_infer::convert::gguf_export;
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
    /// ffn_down). `--help` describes each.
    #[arg(long = "type", value_name = "TYPE", long_help = type_help())]
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

/// Every `--type` value: name, the ggml type it writes, and what it is.
const TYPES: [(&str, GgmlType, &str); 13] = [
    ("q8_0", GgmlType::Q8_0, "8-bit, one scale per 32 values; near-lossless"),
    ("q4_0", GgmlType::Q4_0, "4-bit, one scale per 32 values"),
    ("q4_1", GgmlType::Q4_1, "4-bit, a scale and a minimum per 32 values"),
    ("q5_0", GgmlType::Q5_0, "5-bit, one scale per 32 values"),
    ("q5_1", GgmlType::Q5_1, "5-bit, a scale and a minimum per 32 values"),
    ("q4_k", GgmlType::Q4_K, "K-quant: 4-bit in 256-value super-blocks with 6-bit sub-block scales and minimums (rows not whole 256-value blocks: Q5_0 in GGUF, F32 in safetensors)"),
    ("q5_k", GgmlType::Q5_K, "K-quant: 5-bit in 256-value super-blocks (fallback: Q5_1 in GGUF, F32 in safetensors)"),
    ("q6_k", GgmlType::Q6_K, "K-quant: 6-bit in 256-value super-blocks with 8-bit scales (fallback: Q8_0 in GGUF, F32 in safetensors)"),
    ("q4_k_m", GgmlType::Q4_K, "llama.cpp's Q4_K_M recipe: q4_k, with Q6_K (6.5625 bits) for the output and some attn_v and ffn_down; GGUF only"),
    ("q5_k_m", GgmlType::Q5_K, "llama.cpp's Q5_K_M recipe: q5_k, with Q6_K (6.5625 bits) for the output and some attn_v and ffn_down; GGUF only"),
    ("q4_k_s", GgmlType::Q4_K, "the same as q4_k (llama.cpp's name for a plain Q4_K file)"),
    ("q5_k_s", GgmlType::Q5_K, "the same as q5_k (llama.cpp's name for a plain Q5_K file)"),
    ("f32", GgmlType::F32, "no quantization: every tensor F32"),
];

/// `--type`'s long help: one line per value with its bits per weight (block scales included).
fn type_help() -> String {
    let mut h = String::from(
        "Storage type of the weight matrices (norms and biases stay F32). Bits per weight \
         count the block scales:\n",
    );
    for (name, t, what) in TYPES {
        let bpw = (t.block_bytes() * 8) as f64 / t.block_len() as f64;
        // A recipe mixes its type with Q6_K's 6.5625 bits.
        let bits = if name.ends_with("_m") {
            format!("{bpw}-6.56")
        } else {
            bpw.to_string()
        };
        h.push_str(&format!("\n  {name:<7} {bits:>9} bits  {what}"));
    }
    h
}

/// The summary's fallback lines: one per (requested, used, reason), e.g. "q4_k requested: 16
/// tensors fell back to Q5_0 (row length not a multiple of 256)".
fn fallback_lines(fallbacks: &[gguf_export::Fallback]) -> Vec<String> {
    let mut groups: std::collections::BTreeMap<(String, &str, String), usize> = Default::default();
    for f in fallbacks {
        let key = (
            f.requested.name().to_ascii_lowercase(),
            f.used.name(),
            f.reason(),
        );
        *groups.entry(key).or_insert(0) += 1;
    }
    groups
        .into_iter()
        .map(|((req, used, why), n)| {
            let s = if n == 1 { "tensor" } else { "tensors" };
            format!("{req} requested: {n} {s} fell back to {used} ({why})")
        })
        .collect()
}

fn fallback_json(fallbacks: &[gguf_export::Fallback]) -> serde_json::Value {
    fallbacks
        .iter()
        .map(|f| {
            json!({"tensor": f.tensor, "requested": f.requested.name(), "used": f.used.name(),
                   "reason": f.reason(), "row_length": f.row_length})
        })
        .collect()
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
    let r =
        kin_infer::convert::st_quantize::export_report(&a.model, &a.out, ty, progress(a.quiet))?;
    let (tensors, quantized) = (r.tensors, r.quantized);
    let v = json!({
        "model": a.model.display().to_string(),
        "out": a.out.display().to_string(),
        "format": "safetensors",
        "type": a.ty.trim().to_ascii_lowercase(),
        "tensors": tensors,
        "quantized_tensors": quantized,
        "fallbacks": fallback_json(&r.fallbacks),
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
        for line in fallback_lines(&r.fallbacks) {
            eprintln!("{line}");
        }
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
        "fallbacks": fallback_json(&report.fallbacks),
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
        for line in fallback_lines(&report.fallbacks) {
            eprintln!("{line}");
        }
    }
    Ok(0)
}
