//! `kin-infer convert`: a decoder GGUF file written back as a Hugging Face model directory
//! (`config.json`, `model.safetensors`, `tokenizer.json`, `tokenizer_config.json`,
//! `generation_config.json`, `chat_template.jinja`) that transformers and kin-infer both load.
//! The reverse of `gguf_export` (a container writer, so it lives in `io` like that one).
//!
//! Everything comes from the engine's own reading of the file, so the directory is the model
//! the GGUF loader runs: the config is the object `models::decoders::gguf` fills from the
//! metadata under the Hub's keys, validated by the family's parser; the tensors go through the
//! reference dequantizers (`WeightStore::read`, equal to `gguf.quants`), llama.cpp's q/k row
//! permutation undone with the loader's own row map (`gguf_meta::unpermuted_row`); the tokenizer is
//! the `tokenizer.json` document the GGUF tokenizer is built from. Written as F32 (the default),
//! the directory's logits equal the GGUF's bit for bit: the engine's quantized GEMM gives the
//! bits of the F32 product over the dequantized matrix. F16/BF16 round each value to nearest
//! even (smaller, not bit-identical).
//!
//! Supported: `llama` (LLaMA, and Mistral as llama.cpp converts it) and `qwen2`. Others are a
//! typed [`InferError::Unsupported`] naming the architecture: Gemma's stored `1 + w` norms
//! cannot always be turned back into `w` exactly, and the Phi/GPT-2 layouts are not mapped yet.
//!
//! The directory is written under a temporary name beside `out` and renamed into place, so a
//! failed run leaves no half-written model; a non-empty `out` is replaced only when asked.

use crate::error::{InferError, Result};
use crate::io::gguf::{GgufFile, MetaValue};
use crate::io::gguf_tokenizer as gt;
use crate::io::safetensors::WeightStore;
use crate::models::decoders::gguf as dgguf;
use crate::models::decoders::llama::{Family, LlamaConfig, LAYOUT};
use crate::nn::rope::RopeScaling;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `general.architecture` values [`convert`] writes.
pub const SUPPORTED: &[&str] = &["llama", "qwen2"];

/// The element type of the written tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutDtype {
    F32,
    F16,
    Bf16,
}

impl OutDtype {
    /// `f32`, `f16` or `bf16` (any case; `float32`, `float16`, `bfloat16` too).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f32" | "float32" | "fp32" => Some(OutDtype::F32),
            "f16" | "float16" | "fp16" => Some(OutDtype::F16),
            "bf16" | "bfloat16" => Some(OutDtype::Bf16),
            _ => None,
        }
    }

    /// The name safetensors uses.
    pub fn safetensors_name(self) -> &'static str {
        match self {
            OutDtype::F32 => "F32",
            OutDtype::F16 => "F16",
            OutDtype::Bf16 => "BF16",
        }
    }

    /// The name config.json's `torch_dtype` / `dtype` uses.
    pub fn torch_name(self) -> &'static str {
        match self {
            OutDtype::F32 => "float32",
            OutDtype::F16 => "float16",
            OutDtype::Bf16 => "bfloat16",
        }
    }

    fn width(self) -> usize {
        match self {
            OutDtype::F32 => 4,
            _ => 2,
        }
    }
}

/// How to convert.
#[derive(Clone, Copy, Debug)]
pub struct ConvertOptions {
    pub dtype: OutDtype,
    /// Replace a non-empty `out` (otherwise an error).
    pub force: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            dtype: OutDtype::F32,
            force: false,
        }
    }
}

/// What a run wrote.
#[derive(Clone, Debug)]
pub struct ConvertReport {
    pub architecture: String,
    pub model_type: String,
    pub tensors: usize,
    /// Tensors per ggml type in the GGUF file (`"Q4_1": 210`, ...).
    pub source_types: BTreeMap<String, usize>,
    pub dtype: OutDtype,
    /// Size of `model.safetensors`.
    pub bytes: u64,
    pub tokenizer: bool,
    /// Why the file's tokenizer was not written, when it has one the engine cannot rebuild.
    pub tokenizer_skipped: Option<String>,
    pub chat_template: bool,
    /// The files written, in the order written.
    pub files: Vec<String>,
}

/// Converts the GGUF file `model` into the directory `out`. `progress(done, total)` after each
/// tensor.
pub fn convert(
    model: &Path,
    out: &Path,
    opts: &ConvertOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<ConvertReport> {
    check_out(model, out, opts.force)?;
    let (store, gguf) = WeightStore::open_gguf(model)?;
    let arch = crate::models::gguf_meta::architecture(&gguf)?;
    if !SUPPORTED.contains(&arch.as_str()) {
        return Err(InferError::Unsupported(format!(
            "{}: converting GGUF architecture `{arch}` to a Hugging Face directory is not supported yet (supported: {})",
            model.display(),
            SUPPORTED.join(", ")
        )));
    }
    let source = dgguf::config(&gguf, &store, &arch)?;
    let cfg = LlamaConfig::parse(&source.fields()?)?;
    let plan = tensor_plan(&store, &cfg, model)?;
    // A tokenizer the engine cannot rebuild (no merges, an unsupported model) leaves the
    // directory for token-id input, as the GGUF itself is: the report says why.
    let (tokenizer, tokenizer_skipped) = if gguf.get("tokenizer.ggml.model").is_some() {
        match gt::tokenizer_json(&gguf) {
            Ok(doc) => (Some(doc), None),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, None)
    };

    let tmp = TempDir::create(out)?;
    let mut files = Vec::new();
    let mut write = |name: &str, text: String| -> Result<()> {
        let p = tmp.path.join(name);
        std::fs::write(&p, text).map_err(|e| InferError::io(&p, e))?;
        files.push(name.to_string());
        Ok(())
    };
    write("config.json", pretty(&config_json(&cfg, opts.dtype)))?;
    write(
        "generation_config.json",
        pretty(&generation_config(&gguf, &cfg)?),
    )?;
    let template = gt::chat_template(&gguf);
    if let Some(doc) = &tokenizer {
        write("tokenizer.json", pretty(doc))?;
        write(
            "tokenizer_config.json",
            pretty(&tokenizer_config(&gguf, &cfg, template)?),
        )?;
    }
    if let Some(t) = template {
        write("chat_template.jinja", t.to_string())?;
    }
    let st = tmp.path.join("model.safetensors");
    let bytes = write_safetensors(&store, &plan, &cfg, opts.dtype, &st, &mut progress)?;
    files.push("model.safetensors".into());
    tmp.persist(out, opts.force)?;

    let mut source_types = BTreeMap::new();
    for (ty, n) in gguf.type_counts() {
        source_types.insert(ty.name().to_string(), n);
    }
    Ok(ConvertReport {
        architecture: arch,
        model_type: cfg.family.name().to_string(),
        tensors: plan.len(),
        source_types,
        dtype: opts.dtype,
        bytes,
        tokenizer: tokenizer.is_some(),
        tokenizer_skipped,
        chat_template: template.is_some(),
        files,
    })
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a JSON value serializes");
    s.push('\n');
    s
}

/// `out` must be absent, an empty directory, or (with `force`) a directory to replace, and
/// must not hold the file being converted (replacing it would delete the source).
fn check_out(model: &Path, out: &Path, force: bool) -> Result<()> {
    if out.file_name().is_none() {
        return Err(InferError::Input(format!(
            "--out {}: name a directory to create (it has no final component)",
            out.display()
        )));
    }
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(InferError::Input(format!(
            "--out {} exists and is not a directory; name a new directory",
            out.display()
        )));
    }
    if let (Ok(m), Ok(o)) = (model.canonicalize(), out.canonicalize()) {
        if m.starts_with(&o) {
            return Err(InferError::Input(format!(
                "--out {} holds the GGUF file being converted; write the directory elsewhere",
                out.display()
            )));
        }
    }
    let entries = std::fs::read_dir(out)
        .map_err(|e| InferError::io(out, e))?
        .count();
    if entries > 0 && !force {
        return Err(InferError::Input(format!(
            "--out {} is not empty ({entries} entries); pass --force to replace it, or name a new directory",
            out.display()
        )));
    }
    Ok(())
}

/// A directory beside the final one, removed on drop unless persisted.
struct TempDir {
    path: PathBuf,
    done: bool,
}

impl TempDir {
    fn create(out: &Path) -> Result<Self> {
        let name = out.file_name().expect("checked").to_string_lossy();
        let path = out.with_file_name(format!(".{name}.convert-{}", std::process::id()));
        if path.exists() {
            // Left by a killed run of this same process id: ours to clear.
            std::fs::remove_dir_all(&path).map_err(|e| InferError::io(&path, e))?;
        }
        std::fs::create_dir_all(&path).map_err(|e| InferError::io(&path, e))?;
        Ok(TempDir { path, done: false })
    }

    /// Renames the directory to `out`; an existing `out` (checked empty, or `force`) is moved
    /// aside first and removed once the new one is in place.
    fn persist(mut self, out: &Path, force: bool) -> Result<()> {
        let mut old = None;
        if out.exists() {
            // Per process, and cleared first: a `.old` a crashed run left must not make this
            // rename fail with a bare I/O error.
            let aside = self
                .path
                .with_extension(format!("old-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&aside);
            if force {
                std::fs::rename(out, &aside).map_err(|e| InferError::io(out, e))?;
                old = Some(aside);
            } else {
                std::fs::remove_dir(out).map_err(|e| InferError::io(out, e))?;
            }
        }
        if let Err(e) = std::fs::rename(&self.path, out) {
            if let Some(aside) = &old {
                let _ = std::fs::rename(aside, out);
            }
            return Err(InferError::io(out, e));
        }
        self.done = true;
        if let Some(aside) = old {
            std::fs::remove_dir_all(&aside).map_err(|e| InferError::io(&aside, e))?;
        }
        Ok(())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// One tensor to write: its GGUF name, its Hugging Face name, its shape (torch order), and
/// whether its rows are llama.cpp-permuted (LLaMA's q and k).
struct Planned {
    gguf: String,
    hf: String,
    shape: Vec<usize>,
    permuted: bool,
}

/// Every tensor of the file under its Hugging Face name, sorted by that name. A tensor the
/// layout has no name for is an error: dropping it would write a different model.
fn tensor_plan(store: &WeightStore, cfg: &LlamaConfig, model: &Path) -> Result<Vec<Planned>> {
    let mut plan = Vec::new();
    for name in store.names() {
        let unknown = || {
            InferError::Unsupported(format!(
                "{}: tensor `{name}` has no Hugging Face {} name; the file holds more than this converter maps",
                model.display(),
                cfg.family.name()
            ))
        };
        let (base, kind) = name.rsplit_once('.').ok_or_else(unknown)?;
        let (hf_base, logical) = match base.strip_prefix("blk.") {
            Some(rest) => {
                let (i, logical) = rest.split_once('.').ok_or_else(unknown)?;
                let i: usize = i.parse().map_err(|_| unknown())?;
                if i >= cfg.sizes.layers {
                    return Err(unknown());
                }
                let p = LAYOUT.layer_name(logical).ok_or_else(unknown)?;
                (
                    format!("{}{p}", LAYOUT.layer_prefix.replace("{}", &i.to_string())),
                    logical,
                )
            }
            None => (
                LAYOUT.global_name(base).ok_or_else(unknown)?.to_string(),
                base,
            ),
        };
        if kind != "weight" && kind != "bias" {
            return Err(unknown());
        }
        let shape = store.shape(name).expect("listed").to_vec();
        plan.push(Planned {
            gguf: name.to_string(),
            hf: format!("{hf_base}.{kind}"),
            permuted: cfg.family != Family::Qwen2
                && kind == "weight"
                && matches!(logical, "attn_q" | "attn_k"),
            shape,
        });
    }
    plan.sort_by(|a, b| a.hf.cmp(&b.hf));
    Ok(plan)
}

/// Writes `model.safetensors` one tensor at a time (the header first: every size is known
/// from the shapes), so no more than one dequantized tensor is in memory. Returns its size.
fn write_safetensors(
    store: &WeightStore,
    plan: &[Planned],
    cfg: &LlamaConfig,
    dtype: OutDtype,
    path: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<u64> {
    let mut header = Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut offset = 0usize;
    for t in plan {
        let len = t.shape.iter().product::<usize>() * dtype.width();
        header.insert(
            t.hf.clone(),
            json!({"dtype": dtype.safetensors_name(), "shape": t.shape, "data_offsets": [offset, offset + len]}),
        );
        offset += len;
    }
    let mut head = Value::Object(header).to_string().into_bytes();
    // The data starts 8-aligned: the header is padded with spaces, as the format allows.
    while !head.len().is_multiple_of(8) {
        head.push(b' ');
    }
    let file = std::fs::File::create(path).map_err(|e| InferError::io(path, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let io = |e| InferError::io(path, e);
    w.write_all(&(head.len() as u64).to_le_bytes())
        .map_err(io)?;
    w.write_all(&head).map_err(io)?;
    let mut buf = Vec::new();
    for (done, t) in plan.iter().enumerate() {
        let values = store.read(&t.gguf, &t.shape)?;
        let values: Vec<f32> = match (t.permuted, t.shape.as_slice()) {
            (true, [rows, cols]) => (0..*rows)
                .flat_map(|r| {
                    let from = crate::models::gguf_meta::unpermuted_row(r, cfg.sizes.head_dim);
                    values[from * cols..][..*cols].iter().copied()
                })
                .collect(),
            _ => values.to_vec(),
        };
        encode(&values, dtype, &t.hf, &mut buf)?;
        w.write_all(&buf).map_err(io)?;
        progress(done + 1, plan.len());
    }
    let file = w
        .into_inner()
        .map_err(|e| InferError::io(path, e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok((8 + head.len() + offset) as u64)
}

/// `values` as little-endian `dtype` bytes into `buf`. A finite value F16 cannot hold (beyond
/// ±65504) is an error naming the tensor, never an infinity written silently.
fn encode(values: &[f32], dtype: OutDtype, name: &str, buf: &mut Vec<u8>) -> Result<()> {
    buf.clear();
    buf.reserve(values.len() * dtype.width());
    match dtype {
        OutDtype::F32 => values
            .iter()
            .for_each(|v| buf.extend_from_slice(&v.to_le_bytes())),
        OutDtype::Bf16 => values.iter().for_each(|v| {
            buf.extend_from_slice(&half::bf16::from_f32(*v).to_le_bytes());
        }),
        OutDtype::F16 => {
            for (i, v) in values.iter().enumerate() {
                let h = half::f16::from_f32(*v);
                if h.is_infinite() && v.is_finite() {
                    return Err(InferError::Input(format!(
                        "tensor `{name}` holds {v} at index {i}, beyond f16's range; use --dtype bf16 or f32"
                    )));
                }
                buf.extend_from_slice(&h.to_le_bytes());
            }
        }
    }
    Ok(())
}

/// A single id as a number, several as a list (config.json's `eos_token_id` spelling).
fn ids(v: &[u32]) -> Value {
    match v {
        [] => Value::Null,
        [one] => json!(one),
        many => json!(many),
    }
}

/// The Hub's config.json of the family, from the validated config.
fn config_json(cfg: &LlamaConfig, dtype: OutDtype) -> Value {
    let (arch, model_type) = match cfg.family {
        Family::Qwen2 => ("Qwen2ForCausalLM", "qwen2"),
        Family::Mistral => ("MistralForCausalLM", "mistral"),
        Family::Llama => ("LlamaForCausalLM", "llama"),
    };
    let mut c = json!({
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": cfg.sizes.vocab,
        "hidden_size": cfg.sizes.hidden,
        "intermediate_size": cfg.sizes.intermediate,
        "num_hidden_layers": cfg.sizes.layers,
        "num_attention_heads": cfg.sizes.heads,
        "num_key_value_heads": cfg.sizes.kv_heads,
        "head_dim": cfg.sizes.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_positions,
        // The file's f32 values, widened exactly: the engine reads the same numbers back.
        "rms_norm_eps": cfg.eps as f64,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": match cfg.rope_scaling {
            RopeScaling::Linear { factor } => json!({"rope_type": "linear", "factor": factor}),
            _ => Value::Null,
        },
        "tie_word_embeddings": cfg.sizes.tied,
        "bos_token_id": cfg.sizes.bos.map_or(Value::Null, |b| json!(b)),
        "eos_token_id": ids(&cfg.sizes.eos),
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": true,
        "torch_dtype": dtype.torch_name(),
        "dtype": dtype.torch_name(),
    });
    let o = c.as_object_mut().expect("an object");
    match cfg.family {
        Family::Qwen2 => {
            o.insert("use_sliding_window".into(), json!(false));
            o.insert("sliding_window".into(), Value::Null);
            o.insert("max_window_layers".into(), json!(cfg.sizes.layers));
        }
        _ => {
            o.insert("attention_bias".into(), json!(false));
            o.insert("mlp_bias".into(), json!(false));
            o.insert("pretraining_tp".into(), json!(1));
        }
    }
    c
}

/// A token id of the metadata, checked against the vocabulary (`None` when absent).
fn meta_id(gguf: &GgufFile, key: &str, cfg: &LlamaConfig) -> Result<Option<u32>> {
    gt::token_id(gguf, key, cfg.sizes.vocab)
}

fn generation_config(gguf: &GgufFile, cfg: &LlamaConfig) -> Result<Value> {
    let mut g = json!({
        "bos_token_id": cfg.sizes.bos.map_or(Value::Null, |b| json!(b)),
        "eos_token_id": ids(&cfg.sizes.eos),
    });
    if let Some(pad) = meta_id(gguf, "tokenizer.ggml.padding_token_id", cfg)? {
        g["pad_token_id"] = json!(pad);
    }
    Ok(g)
}

/// transformers' tokenizer_config.json: the special tokens' texts, whether BOS/EOS are added
/// (the tokenizer.json post-processor already does it; transformers reads the flags too), the
/// chat template and the model's context.
fn tokenizer_config(gguf: &GgufFile, cfg: &LlamaConfig, template: Option<&str>) -> Result<Value> {
    let flag = |key: &str| matches!(gguf.get(key), Some(MetaValue::Bool(true)));
    let mut t = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": flag("tokenizer.ggml.add_bos_token"),
        "add_eos_token": flag("tokenizer.ggml.add_eos_token"),
        "clean_up_tokenization_spaces": false,
        "model_max_length": cfg.sizes.context,
    });
    for (field, key) in [
        ("bos_token", "tokenizer.ggml.bos_token_id"),
        ("eos_token", "tokenizer.ggml.eos_token_id"),
        ("unk_token", "tokenizer.ggml.unknown_token_id"),
        ("pad_token", "tokenizer.ggml.padding_token_id"),
    ] {
        meta_id(gguf, key, cfg)?;
        if let Some(text) = gt::token_text(gguf, key) {
            t[field] = json!(text);
        }
    }
    if let Some(s) = template {
        t["chat_template"] = json!(s);
    }
    Ok(t)
}
