//! `kin-infer quantize` (a container writer, so it lives in `io`: the compute seam keeps
//! `models/` away from the kernels, and quantizing a file is not compute): a Hugging Face LLaMA / Mistral / Qwen2 checkpoint written as a GGUF
//! file the way llama.cpp's `convert_hf_to_gguf.py` + `llama-quantize` lay it out: llama.cpp's
//! tensor names and metadata keys, LLaMA's q/k rows permuted into rotary-pair order (undone
//! again by `gguf.rs` when loading), every 2-D weight whose rows are whole blocks quantized by
//! ggml's reference quantizer (`kernels::ggml::quantize`), norms and biases F32, the tokenizer
//! (`tokenizer.ggml.*`, with the `tokenizer.ggml.pre` llama.cpp would choose for its
//! pre-tokenizer), BOS/EOS, `add_bos_token` and the chat template.
//!
//! Refused with a typed error rather than written wrong: rope scaling other than linear,
//! sliding-window attention (GGUF's llama/qwen2 architectures have no such key), non-finite
//! weights (named), tokenizers other than byte-level BPE, pre-tokenizers llama.cpp has no
//! name for.

use crate::error::{InferError, Result};
use crate::generate::chat::ChatTemplate;
use crate::io::config_fields::ConfigSource;
use crate::io::gguf::MetaValue;
use crate::io::gguf_writer::{self, TensorInfo};
use crate::io::safetensors::WeightStore;
use crate::kernels::ggml::GgmlType;
use crate::kernels::ggml::{can_quantize, quantize};
use crate::models::decoders::llama::{self, Family, LlamaConfig};
use crate::nn::rope::RopeScaling;
use serde_json::Value;
use std::path::Path;

/// What a run wrote.
#[derive(Clone, Debug)]
pub struct ExportReport {
    pub architecture: String,
    pub tensors: usize,
    /// Tensors stored quantized (in the requested type, or the `_M` recipe's Q6_K, or a
    /// K-quant's fallback); the rest F32: norms, biases, rows not whole blocks.
    pub quantized: usize,
    /// Tensors per stored ggml type (`"Q4_K": 14`, ...).
    pub types: std::collections::BTreeMap<String, usize>,
    pub bytes: u64,
    pub tokenizer: bool,
    pub chat_template: bool,
    /// Every weight matrix not stored in the type asked for, and why: the summary says so
    /// rather than letting `--type q4_k` quietly write Q5_0.
    pub fallbacks: Vec<Fallback>,
}

/// A tensor stored in another type than the one requested for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    pub tensor: String,
    /// The type asked for (`--type`, or the `_M` recipe's Q6_K).
    pub requested: GgmlType,
    pub used: GgmlType,
    /// The row length (values per row) that did not divide into the requested type's blocks.
    pub row_length: usize,
}

impl Fallback {
    /// Why, in words shared by every tensor of the same cause (a summary groups on it).
    pub fn reason(&self) -> String {
        format!(
            "row length not a multiple of {}",
            self.requested.block_len()
        )
    }
}

/// llama.cpp's `general.file_type` (`enum llama_ftype`) for a file mostly of `t` (`medium`:
/// the `_M` recipe; a plain K-quant file is its `_S`).
fn file_type(t: GgmlType, medium: bool) -> u32 {
    match (t, medium) {
        (GgmlType::F32, _) => 0,
        (GgmlType::F16, _) => 1,
        (GgmlType::Q4_0, _) => 2,
        (GgmlType::Q4_1, _) => 3,
        (GgmlType::Q8_0, _) => 7,
        (GgmlType::Q5_0, _) => 8,
        (GgmlType::Q5_1, _) => 9,
        (GgmlType::Q4_K, false) => 14,
        (GgmlType::Q4_K, true) => 15,
        (GgmlType::Q5_K, false) => 16,
        (GgmlType::Q5_K, true) => 17,
        (GgmlType::Q6_K, _) => 18,
        _ => 0,
    }
}

/// llama.cpp's substitute for a K-quant whose rows are not whole 256-value blocks
/// (`llama-quant.cpp`'s incompatible-tensor fallback).
fn fallback(t: GgmlType) -> GgmlType {
    match t {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        t => t,
    }
}

/// llama.cpp's `use_more_bits(i, n)`: the first and last eighth of the layers and every
/// third one between, which the `_M` recipes give Q6_K for attn_v and ffn_down.
fn more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// Writes the checkpoint in `dir` to `out` with its weight matrices in `ty` (F32 or a type
/// [`can_quantize`] accepts). `progress(done, total)` after each tensor.
pub fn export(
    dir: &Path,
    out: &Path,
    ty: GgmlType,
    progress: impl FnMut(usize, usize),
) -> Result<ExportReport> {
    export_with(dir, out, ty, false, progress)
}

/// [`export`]; `medium` (with Q4_K or Q5_K): llama.cpp's `_M` recipe, Q6_K for the output
/// (or the tied embedding) and for attn_v and ffn_down in [`more_bits`] layers. A K-quant
/// tensor whose rows are not whole blocks takes llama.cpp's fallback type (Q4_K → Q5_0, Q5_K
/// → Q5_1, Q6_K → Q8_0), F32 if those do not fit either.
pub fn export_with(
    dir: &Path,
    out: &Path,
    ty: GgmlType,
    medium: bool,
    mut progress: impl FnMut(usize, usize),
) -> Result<ExportReport> {
    if ty != GgmlType::F32 && !can_quantize(ty) {
        return Err(InferError::Unsupported(format!(
            "quantizing to {} is not supported yet (supported: f32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m)",
            ty.name()
        )));
    }
    if medium && !matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
        return Err(InferError::Unsupported(format!(
            "the _M recipe exists for q4_k and q5_k, not {}",
            ty.name()
        )));
    }
    let config_path = dir.join("config.json");
    if !config_path.is_file() {
        return Err(InferError::ModelNotFound(dir.display().to_string()));
    }
    let source = ConfigSource::json(&config_path)?;
    let f = source.fields()?;
    let model_type = f.str("model_type", Some(""))?;
    if !matches!(model_type.as_str(), "llama" | "mistral" | "qwen2") {
        return Err(InferError::Unsupported(format!(
            "{}: quantize writes llama, mistral and qwen2 checkpoints so far, not `{model_type}`",
            config_path.display()
        )));
    }
    let cfg = LlamaConfig::parse(&f)?;
    let arch = match cfg.family {
        Family::Qwen2 => "qwen2",
        // llama.cpp converts Mistral as llama.
        _ => "llama",
    };
    if cfg.windows.iter().any(Option::is_some) {
        return Err(InferError::Unsupported(format!(
            "{}: sliding-window attention cannot be written to a GGUF `{arch}` model (it has no key for it)",
            config_path.display()
        )));
    }
    let store = WeightStore::open_dir(dir)?;
    let mut meta = metadata(&cfg, arch, dir, ty, medium)?;
    let tokenizer = tokenizer_metadata(dir, &cfg, &mut meta)?;
    let chat_template = match ChatTemplate::load(dir) {
        Ok(t) => {
            meta.push((
                "tokenizer.chat_template".into(),
                MetaValue::Str(t.source().into()),
            ));
            true
        }
        Err(_) => false,
    };

    // The tensors in llama.cpp's order, each with the checkpoint name it comes from.
    let l = &llama::LAYOUT;
    let mut plan: Vec<(String, String, Vec<usize>)> = Vec::new();
    let h = cfg.sizes.hidden;
    let (q_dim, kv_dim) = (
        cfg.sizes.heads * cfg.sizes.head_dim,
        cfg.sizes.kv_heads * cfg.sizes.head_dim,
    );
    plan.push((
        "token_embd.weight".into(),
        format!("{}.weight", l.global("token_embd")),
        vec![cfg.sizes.vocab, h],
    ));
    for i in 0..cfg.sizes.layers {
        let mut add = |logical: &str, kind: &str, shape: Vec<usize>| {
            plan.push((
                format!("blk.{i}.{logical}.{kind}"),
                format!("{}.{kind}", l.layer(i, logical)),
                shape,
            ))
        };
        add("attn_norm", "weight", vec![h]);
        for (name, rows) in [("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim)] {
            add(name, "weight", vec![rows, h]);
            if cfg.qkv_bias {
                add(name, "bias", vec![rows]);
            }
        }
        add("attn_output", "weight", vec![h, q_dim]);
        add("ffn_norm", "weight", vec![h]);
        add("ffn_gate", "weight", vec![cfg.sizes.intermediate, h]);
        add("ffn_up", "weight", vec![cfg.sizes.intermediate, h]);
        add("ffn_down", "weight", vec![h, cfg.sizes.intermediate]);
    }
    plan.push((
        "output_norm.weight".into(),
        format!("{}.weight", l.global("output_norm")),
        vec![h],
    ));
    if !cfg.sizes.tied {
        plan.push((
            "output.weight".into(),
            format!("{}.weight", l.global("output")),
            vec![cfg.sizes.vocab, h],
        ));
    }
    // The type each tensor is meant to have (None: F32 by design, norms and biases), then
    // the one it gets: the first of it and its fallback whose blocks divide the rows.
    let requested = |name: &str, shape: &[usize]| {
        if shape.len() != 2 || ty == GgmlType::F32 {
            return None;
        }
        let layer = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|n| n.parse::<usize>().ok());
        let six = medium
            && (name == "output.weight"
                || (cfg.sizes.tied && name == "token_embd.weight")
                || ((name.ends_with(".attn_v.weight") || name.ends_with(".ffn_down.weight"))
                    && layer.is_some_and(|i| more_bits(i, cfg.sizes.layers))));
        Some(if six { GgmlType::Q6_K } else { ty })
    };
    let stored = |name: &str, shape: &[usize]| {
        requested(name, shape).map_or(GgmlType::F32, |t| {
            [t, fallback(t)]
                .into_iter()
                .find(|t| shape[1].is_multiple_of(t.block_len()))
                .unwrap_or(GgmlType::F32)
        })
    };
    let infos: Vec<TensorInfo> = plan
        .iter()
        .map(|(name, _, shape)| TensorInfo {
            name: name.clone(),
            ty: stored(name, shape),
            dims: shape.iter().rev().copied().collect(),
        })
        .collect();
    let fallbacks: Vec<Fallback> = plan
        .iter()
        .zip(&infos)
        .filter_map(|((name, _, shape), info)| {
            let want = requested(name, shape)?;
            (want != info.ty).then(|| Fallback {
                tensor: name.clone(),
                requested: want,
                used: info.ty,
                row_length: shape[1],
            })
        })
        .collect();
    let quantized = infos.iter().filter(|t| t.ty != GgmlType::F32).count();
    let mut types = std::collections::BTreeMap::new();
    for t in &infos {
        *types.entry(t.ty.name().to_string()).or_insert(0) += 1;
    }
    let total = plan.len();
    let permute = arch == "llama";
    gguf_writer::write(
        out,
        &meta,
        &infos,
        |i| {
            let (name, physical, shape) = &plan[i];
            let values = store.read(physical, shape)?;
            if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
                return Err(InferError::Input(format!(
                    "{}: tensor `{physical}` holds a non-finite value ({}) at index {bad}; it cannot be quantized",
                    dir.display(),
                    values[bad]
                )));
            }
            let rows: Vec<f32> = match (
                permute,
                name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight"),
            ) {
                (true, true) => permuted(&values, shape[1], cfg.sizes.head_dim),
                _ => values.to_vec(),
            };
            Ok(match infos[i].ty {
                GgmlType::F32 => rows.iter().flat_map(|v| v.to_le_bytes()).collect(),
                t => {
                    let mut q = Vec::new();
                    quantize(t, &rows, &mut q);
                    q
                }
            })
        },
        |i| progress(i + 1, total),
    )?;
    let bytes = std::fs::metadata(out)
        .map_err(|e| InferError::io(out, e))?
        .len();
    Ok(ExportReport {
        architecture: arch.into(),
        tensors: total,
        quantized,
        types,
        bytes,
        tokenizer,
        chat_template,
        fallbacks,
    })
}

/// llama.cpp's converter's row order for q/k (`LlamaModel.permute`): per head, row `2i + j`
/// is transformers' row `j · d/2 + i`.
fn permuted(w: &[f32], cols: usize, head_dim: usize) -> Vec<f32> {
    let rows = w.len() / cols;
    let half = head_dim / 2;
    let mut out = Vec::with_capacity(w.len());
    for r in 0..rows {
        let (head, rem) = (r / head_dim, r % head_dim);
        let (i, j) = (rem / 2, rem % 2);
        let src = head * head_dim + j * half + i;
        out.extend_from_slice(&w[src * cols..(src + 1) * cols]);
    }
    out
}

fn metadata(
    cfg: &LlamaConfig,
    arch: &str,
    dir: &Path,
    ty: GgmlType,
    medium: bool,
) -> Result<Vec<(String, MetaValue)>> {
    let u32v = |n: usize| MetaValue::U32(n as u32);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut m: Vec<(String, MetaValue)> = vec![
        ("general.architecture".into(), MetaValue::Str(arch.into())),
        ("general.name".into(), MetaValue::Str(name)),
        (format!("{arch}.context_length"), u32v(cfg.max_positions)),
        (format!("{arch}.embedding_length"), u32v(cfg.sizes.hidden)),
        (format!("{arch}.block_count"), u32v(cfg.sizes.layers)),
        (
            format!("{arch}.feed_forward_length"),
            u32v(cfg.sizes.intermediate),
        ),
        (
            format!("{arch}.rope.dimension_count"),
            u32v(cfg.sizes.head_dim),
        ),
        (
            format!("{arch}.attention.head_count"),
            u32v(cfg.sizes.heads),
        ),
        (
            format!("{arch}.attention.head_count_kv"),
            u32v(cfg.sizes.kv_heads),
        ),
        (
            format!("{arch}.rope.freq_base"),
            MetaValue::F32(cfg.rope_theta as f32),
        ),
        (
            format!("{arch}.attention.layer_norm_rms_epsilon"),
            MetaValue::F32(cfg.eps),
        ),
    ];
    if cfg.sizes.head_dim * cfg.sizes.heads != cfg.sizes.hidden {
        m.push((
            format!("{arch}.attention.key_length"),
            u32v(cfg.sizes.head_dim),
        ));
        m.push((
            format!("{arch}.attention.value_length"),
            u32v(cfg.sizes.head_dim),
        ));
    }
    match cfg.rope_scaling {
        RopeScaling::None => {}
        RopeScaling::Linear { factor } => {
            m.push((
                format!("{arch}.rope.scaling.type"),
                MetaValue::Str("linear".into()),
            ));
            m.push((
                format!("{arch}.rope.scaling.factor"),
                MetaValue::F32(factor as f32),
            ));
        }
        other => {
            return Err(InferError::Unsupported(format!(
                "{}: rope scaling {other:?} is not written to GGUF yet (supported: none, linear)",
                dir.display()
            )))
        }
    }
    m.push((
        "general.file_type".into(),
        MetaValue::U32(file_type(ty, medium)),
    ));
    if ty != GgmlType::F32 {
        m.push(("general.quantization_version".into(), MetaValue::U32(2)));
    }
    Ok(m)
}

/// llama.cpp's name for a `tokenizer.json` pre-tokenizer (the ones its converter recognizes
/// for byte-level BPE), `None` when it has none.
fn pre_name(pre: &Value) -> Option<&'static str> {
    const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    let ty = |v: &Value| {
        v.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let byte_level = |v: &Value, regex: bool| {
        ty(v) == "ByteLevel" && v.get("use_regex").and_then(Value::as_bool).unwrap_or(true) == regex
    };
    if byte_level(pre, true) {
        return Some("gpt-2");
    }
    let parts = pre.get("pretokenizers").and_then(Value::as_array)?;
    match parts.as_slice() {
        [a, b] if byte_level(b, false) && ty(a) == "Split" => {
            match a.pointer("/pattern/Regex").and_then(Value::as_str)? {
                LLAMA3 => Some("llama-bpe"),
                QWEN2 => Some("qwen2"),
                r => crate::io::gguf_tokenizer::pre_name_of(&[r]),
            }
        }
        [a, b] if ty(a) == "Digits" && byte_level(b, true) => a
            .get("individual_digits")
            .and_then(Value::as_bool)
            .filter(|d| *d)
            .map(|_| "smollm"),
        // What `kin-infer convert` writes from a GGUF file: llama.cpp's own expressions as
        // isolated splits, then the byte mapping without a regex of its own.
        [splits @ .., last] if byte_level(last, false) => {
            let regexes = splits
                .iter()
                .map(|s| {
                    (ty(s) == "Split")
                        .then(|| s.pointer("/pattern/Regex").and_then(Value::as_str))
                        .flatten()
                })
                .collect::<Option<Vec<&str>>>()?;
            crate::io::gguf_tokenizer::pre_name_of(&regexes)
        }
        _ => None,
    }
}

/// `tokenizer.ggml.*` from `tokenizer.json` (and `tokenizer_config.json`'s `add_bos_token`);
/// false when the checkpoint has no tokenizer (the file then loads with token-id input only).
fn tokenizer_metadata(
    dir: &Path,
    cfg: &LlamaConfig,
    meta: &mut Vec<(String, MetaValue)>,
) -> Result<bool> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Ok(false);
    }
    let doc: Value = crate::io::read_json(&path)?;
    let bad = |reason: String| InferError::Tokenizer {
        reason: format!("{}: {reason}", path.display()),
    };
    let model = &doc["model"];
    if model["type"] != "BPE" {
        return Err(InferError::Unsupported(format!(
            "{}: only byte-level BPE tokenizers are written to GGUF so far (this one is {})",
            path.display(),
            model["type"]
        )));
    }
    let pre = pre_name(&doc["pre_tokenizer"]).ok_or_else(|| {
        InferError::Unsupported(format!(
            "{}: its pre-tokenizer has no llama.cpp name (`tokenizer.ggml.pre`) this build knows: {}",
            path.display(),
            doc["pre_tokenizer"]
        ))
    })?;
    // Tokens by id, padded to the model's vocabulary as llama.cpp's converter does.
    let mut tokens: Vec<Option<(String, i32)>> = vec![None; cfg.sizes.vocab];
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad("no model.vocab".into()))?;
    let mut place = |text: &str, id: u64, ty: i32| -> Result<()> {
        let slot = tokens.get_mut(id as usize).ok_or_else(|| {
            bad(format!(
                "token `{text}` has id {id}, past vocab_size {}",
                cfg.sizes.vocab
            ))
        })?;
        *slot = Some((text.to_string(), ty));
        Ok(())
    };
    for (text, id) in vocab {
        place(
            text,
            id.as_u64()
                .ok_or_else(|| bad(format!("token `{text}`: bad id")))?,
            1,
        )?;
    }
    for t in doc["added_tokens"].as_array().into_iter().flatten() {
        let (Some(text), Some(id)) = (t["content"].as_str(), t["id"].as_u64()) else {
            return Err(bad(format!("malformed added token {t}")));
        };
        place(text, id, if t["special"] == true { 3 } else { 4 })?;
    }
    let (texts, types): (Vec<MetaValue>, Vec<MetaValue>) = tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let (text, ty) = t.unwrap_or_else(|| (format!("[PAD{i}]"), 5));
            (MetaValue::Str(text), MetaValue::I32(ty))
        })
        .unzip();
    let merges: Vec<MetaValue> = model["merges"]
        .as_array()
        .ok_or_else(|| bad("no model.merges".into()))?
        .iter()
        .map(|m| match m {
            Value::String(s) => Ok(MetaValue::Str(s.clone())),
            Value::Array(pair) if pair.len() == 2 => Ok(MetaValue::Str(format!(
                "{} {}",
                pair[0].as_str().unwrap_or(""),
                pair[1].as_str().unwrap_or("")
            ))),
            other => Err(bad(format!("malformed merge {other}"))),
        })
        .collect::<Result<_>>()?;
    meta.push(("tokenizer.ggml.model".into(), MetaValue::Str("gpt2".into())));
    meta.push(("tokenizer.ggml.pre".into(), MetaValue::Str(pre.into())));
    meta.push(("tokenizer.ggml.tokens".into(), MetaValue::Array(texts)));
    meta.push(("tokenizer.ggml.token_type".into(), MetaValue::Array(types)));
    meta.push(("tokenizer.ggml.merges".into(), MetaValue::Array(merges)));
    if let Some(b) = cfg.sizes.bos {
        meta.push(("tokenizer.ggml.bos_token_id".into(), MetaValue::U32(b)));
    }
    if let Some(e) = cfg.sizes.eos.first() {
        meta.push(("tokenizer.ggml.eos_token_id".into(), MetaValue::U32(*e)));
    }
    let tc = dir.join("tokenizer_config.json");
    if tc.is_file() {
        let v: Value = crate::io::read_json(&tc)?;
        if let Some(b) = v.get("add_bos_token").and_then(Value::as_bool) {
            meta.push(("tokenizer.ggml.add_bos_token".into(), MetaValue::Bool(b)));
        }
    }
    Ok(true)
}
