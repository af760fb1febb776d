//! Decoders from GGUF files (llama.cpp's container): the configuration from the file's
//! metadata, the tensors through the GGUF layout (GGUF's names are the logical names, see
//! `io::source`), each weight matrix kept in its stored type (F32, F16, BF16, or a ggml block
//! type, dequantized inside the GEMM: `kernels/blocks.rs`).
//!
//! The metadata fills a config object under the Hub's keys ([`ConfigSource::from_object`]),
//! so each family validates a GGUF exactly as it validates a `config.json`, and an error
//! names both keys (`num_attention_heads (\`llama.attention.head_count\` in the file)`).
//!
//! llama.cpp's converter (`convert_hf_to_gguf.py`, `LlamaModel.permute`) reorders the rows of
//! LLaMA-architecture q and k projections so that each head's rotary pairs are adjacent (its
//! rope rotates element pairs `(2i, 2i+1)`; transformers' rotates `(i, i + d/2)`). The loader
//! undoes it row by row ([`MatrixData::permute_rows`], so a quantized row stays as stored);
//! Qwen2's converter leaves the rows as they are.
//!
//! Supported architectures: `llama` (LLaMA, and Mistral, which llama.cpp converts as llama),
//! `qwen2`, `phi3` (fused qkv and gate-up as stored; longrope from its factor tensors) and
//! `phi2` (transformers' `phi`), `gemma` and `gemma2` (norms stored as `1 + w`; Gemma 2's softcaps and window from
//! `gemma2.*`, its attention scale by llama.cpp's rule, as GGUF has no key for it), and `gpt2` (whose converter stores the `Conv1D` weights transposed to `[out, in]`
//! and writes the tied head out as `output`). Any other `general.architecture` is a typed [`InferError::Unsupported`].

use super::Decoder;
use crate::backend::GpuCompute;
use crate::error::{InferError, Result};
use crate::io::config_fields::ConfigSource;
use crate::io::gguf::{GgufFile, MetaValue};
use crate::io::model_kinds::{gguf_architectures, gguf_kind, ModelKind};
use crate::io::safetensors::WeightStore;
use crate::io::source::Layout;
use crate::models::gguf_meta::{architecture, copy_key, gguf_err};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// GGUF's own names: the logical names themselves.
pub(crate) static LAYOUT: Layout = Layout {
    name: "GGUF (llama.cpp)",
    prefixes: &[""],
    globals: &[&[
        ("token_embd", "token_embd"),
        ("output_norm", "output_norm"),
        ("output", "output"),
    ]],
    layer_prefix: "blk.{}.",
    layer: &[&[
        ("attn_norm", "attn_norm"),
        ("attn_q", "attn_q"),
        ("attn_k", "attn_k"),
        ("attn_v", "attn_v"),
        ("attn_qkv", "attn_qkv"),
        ("attn_output", "attn_output"),
        ("post_attention_norm", "post_attention_norm"),
        ("ffn_norm", "ffn_norm"),
        ("ffn_gate", "ffn_gate"),
        ("ffn_up", "ffn_up"),
        ("ffn_down", "ffn_down"),
        ("post_ffw_norm", "post_ffw_norm"),
    ]],
};

/// Loads the decoder a GGUF file holds.
pub fn load(path: &Path, be: &dyn GpuCompute) -> Result<Box<dyn Decoder>> {
    let (store, gguf) = WeightStore::open_gguf(path)?;
    let arch = architecture(&gguf)?;
    let config = config(&gguf, &store, &arch)?;
    match super::gguf_family(&arch) {
        Some(family) => Ok(Box::new((family.gguf)(&arch, &config, &store, be)?)),
        None => Err(unsupported(&gguf, &arch)),
    }
}

fn unsupported(gguf: &GgufFile, arch: &str) -> InferError {
    if gguf_kind(arch) == Some(ModelKind::Encoder) {
        return crate::io::config::wrong_kind(gguf.path(), arch, false);
    }
    InferError::Unsupported(format!(
        "{}: GGUF architecture `{arch}` is not supported yet (supported: {})",
        gguf.path().display(),
        gguf_architectures(ModelKind::Decoder).join(", ")
    ))
}

/// The config object of the LLaMA-layout families, under the Hub's keys, from `arch.*` and
/// `tokenizer.ggml.*` metadata; the vocabulary size and tied head from the tensors.
pub(crate) fn config(gguf: &GgufFile, store: &WeightStore, arch: &str) -> Result<ConfigSource> {
    let mut obj = Map::new();
    let mut keys = BTreeMap::new();
    let mut put = |hub: &str, key: String, obj: &mut Map<String, Value>| {
        copy_key(gguf, &mut keys, obj, hub, &key)
    };
    // transformers calls llama.cpp's phi2 `phi`.
    let model_type = if arch == "phi2" { "phi" } else { arch };
    obj.insert("model_type".into(), json!(model_type));
    // Each architecture's keys under the names its family's config.json uses: its own, then
    // (below) the LLaMA-layout ones most share.
    let pairs: &[(&str, &str)] = match arch {
        "phi2" => &[
            ("max_position_embeddings", "context_length"),
            ("hidden_size", "embedding_length"),
            ("num_hidden_layers", "block_count"),
            ("num_attention_heads", "attention.head_count"),
            ("num_key_value_heads", "attention.head_count_kv"),
            ("layer_norm_eps", "attention.layernorm_epsilon"),
            ("rope_theta", "rope.freq_base"),
        ],
        "phi3" => &[
            (
                "original_max_position_embeddings",
                "rope.scaling.original_context_length",
            ),
            ("sliding_window", "attention.sliding_window"),
        ],
        "gpt2" => &[
            ("n_positions", "context_length"),
            ("n_embd", "embedding_length"),
            ("n_layer", "block_count"),
            ("n_inner", "feed_forward_length"),
            ("n_head", "attention.head_count"),
            ("layer_norm_epsilon", "attention.layer_norm_epsilon"),
        ],
        _ => &[("head_dim", "attention.key_length")],
    };
    // The LLaMA-layout keys Phi-3 and the LLaMA-style families share.
    let llama: &[(&str, &str)] = match arch {
        "phi2" | "gpt2" => &[],
        _ => &[
            ("max_position_embeddings", "context_length"),
            ("hidden_size", "embedding_length"),
            ("num_hidden_layers", "block_count"),
            ("intermediate_size", "feed_forward_length"),
            ("num_attention_heads", "attention.head_count"),
            ("num_key_value_heads", "attention.head_count_kv"),
            ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
            ("rope_theta", "rope.freq_base"),
        ],
    };
    for (hub, own) in llama.iter().chain(pairs) {
        put(hub, format!("{arch}.{own}"), &mut obj)?;
    }
    if arch == "gemma2" {
        for (hub, own) in [
            ("attn_logit_softcapping", "attn_logit_softcapping"),
            ("final_logit_softcapping", "final_logit_softcapping"),
            ("sliding_window", "attention.sliding_window"),
        ] {
            put(hub, format!("{arch}.{own}"), &mut obj)?;
        }
        // GGUF has no key for it: llama.cpp scales by head_dim^-0.5, except for the 27B
        // model (46 layers), by (hidden / heads)^-0.5, which is its query_pre_attn_scalar.
        let layers = obj.get("num_hidden_layers").and_then(Value::as_u64);
        let scalar = match (layers, head_dim(&obj)) {
            (Some(46), _) => obj
                .get("hidden_size")
                .and_then(Value::as_u64)
                .zip(obj.get("num_attention_heads").and_then(Value::as_u64))
                .filter(|(_, n)| *n > 0)
                .map(|(h, n)| h / n),
            (_, d) => d.map(|d| d as u64),
        };
        if let Some(q) = scalar {
            obj.insert("query_pre_attn_scalar".into(), json!(q));
        }
    }
    for (hub, own) in [
        ("bos_token_id", "tokenizer.ggml.bos_token_id"),
        ("eos_token_id", "tokenizer.ggml.eos_token_id"),
    ] {
        put(hub, own.to_string(), &mut obj)?;
    }
    // Rope scaling: GGUF's `rope.scaling.type` (none, linear, yarn, ...).
    let scaling = gguf
        .get(&format!("{arch}.rope.scaling.type"))
        .and_then(MetaValue::as_str);
    match scaling {
        None | Some("none") => {}
        Some("linear") => {
            // Absent stays `null` (the family says the factor is required); a mistyped or
            // non-finite one is an error here, not a `null`.
            let key = format!("{arch}.rope.scaling.factor");
            let factor = gguf.float(&key)?;
            obj.insert(
                "rope_scaling".into(),
                json!({"rope_type": "linear", "factor": factor}),
            );
            keys.insert("rope_scaling".into(), key);
        }
        Some(other) => {
            return Err(InferError::Unsupported(format!(
                "{}: rope scaling `{other}` (`{arch}.rope.scaling.type`) is not supported yet",
                gguf.path().display()
            )))
        }
    }
    if gguf.tensor("rope_freqs.weight").is_some() {
        return Err(InferError::Unsupported(format!(
            "{}: per-frequency rope factors (`rope_freqs.weight`, llama3-style scaling) are not supported yet",
            gguf.path().display()
        )));
    }
    // The rotary width must be the head's, except in the Phi families (partial rotary).
    let head_dim_key = format!("{arch}.rope.dimension_count");
    if let (Some(rot), Some(hd)) = (
        gguf.get(&head_dim_key).and_then(MetaValue::as_u64),
        head_dim(&obj),
    ) {
        if arch.starts_with("phi") {
            if rot != hd as u64 {
                obj.insert(
                    "partial_rotary_factor".into(),
                    json!(rot as f64 / hd as f64),
                );
                keys.insert("partial_rotary_factor".into(), head_dim_key.clone());
            }
        } else if rot != hd as u64 {
            return Err(InferError::Unsupported(format!(
                "{}: `{head_dim_key}` {rot} differs from the head dimension {hd} (partial rotary) in a {arch} model",
                gguf.path().display()
            )));
        }
    }
    if obj.contains_key("query_pre_attn_scalar") {
        keys.insert(
            "query_pre_attn_scalar".into(),
            "(none: llama.cpp's rule, head_dim, or hidden/heads with 46 layers)".into(),
        );
    }
    if arch.starts_with("phi") {
        phi_extras(gguf, store, arch, &mut obj, &mut keys)?;
    }
    // The vocabulary is the embedding table's rows (GGUF has no required key for it).
    if let Some([vocab, _]) = store.shape("token_embd.weight") {
        obj.insert("vocab_size".into(), json!(vocab));
        keys.insert("vocab_size".into(), "token_embd.weight".into());
    }
    obj.insert(
        "tie_word_embeddings".into(),
        json!(!store.contains("output.weight")),
    );
    Ok(ConfigSource::from_object(
        Value::Object(obj),
        gguf.path().to_path_buf(),
        keys,
    ))
}

/// The Phi families' config from tensors: phi2's intermediate size (its converter writes
/// `4 · hidden` whatever the model has; the fc1 rows are the truth), Phi-3's sliding window
/// (0: none) and longrope factors (`rope_factors_long/short.weight`, with
/// `phi3.rope.scaling.attn_factor` when it is not the default transformers derives).
fn phi_extras(
    gguf: &GgufFile,
    store: &WeightStore,
    arch: &str,
    obj: &mut Map<String, Value>,
    keys: &mut BTreeMap<String, String>,
) -> Result<()> {
    if arch == "phi2" {
        if let Some([rows, _]) = store.shape("blk.0.ffn_up.weight") {
            obj.insert("intermediate_size".into(), json!(rows));
            keys.insert("intermediate_size".into(), "blk.0.ffn_up.weight".into());
        }
        return Ok(());
    }
    if obj.get("sliding_window").and_then(Value::as_u64) == Some(0) {
        obj.insert("sliding_window".into(), Value::Null);
    }
    let (long, short) = ("rope_factors_long.weight", "rope_factors_short.weight");
    if !store.contains(long) && !store.contains(short) {
        return Ok(());
    }
    let factors = |name: &str| -> Result<Value> {
        let n = match store.shape(name) {
            Some([n]) => *n,
            _ => {
                return Err(gguf_err(
                    gguf,
                    format!(
                        "`{name}` is missing or not a vector (longrope needs both factor tensors)"
                    ),
                ))
            }
        };
        let t = store.read(name, &[n])?;
        Ok(json!(t
            .as_slice()
            .iter()
            .map(|x| *x as f64)
            .collect::<Vec<_>>()))
    };
    let mut scaling = json!({"rope_type": "longrope", "long_factor": factors(long)?, "short_factor": factors(short)?});
    keys.insert("rope_scaling".into(), format!("{long}, {short}"));
    // transformers' default attention factor; the file's (an f32) replaces it only when it
    // differs beyond its own rounding.
    let af_key = format!("{arch}.rope.scaling.attn_factor");
    if let Some(af) = gguf.float(&af_key)? {
        let num = |k: &str| obj.get(k).and_then(Value::as_f64);
        let default = match (
            num("max_position_embeddings"),
            num("original_max_position_embeddings"),
        ) {
            (Some(m), Some(o)) if o > 1.0 && m > o => (1.0 + (m / o).ln() / o.ln()).sqrt(),
            _ => 1.0,
        };
        if (af - default).abs() > 1e-6 * default {
            scaling["attention_factor"] = json!(af);
            keys.insert("rope_scaling.attention_factor".into(), af_key);
        }
    }
    obj.insert("rope_scaling".into(), scaling);
    Ok(())
}

/// The head dimension the config implies (explicit, else hidden / heads), if it can tell.
fn head_dim(obj: &Map<String, Value>) -> Option<usize> {
    if let Some(d) = obj.get("head_dim").and_then(Value::as_u64) {
        return Some(d as usize);
    }
    let h = obj.get("hidden_size")?.as_u64()?;
    let n = obj.get("num_attention_heads")?.as_u64()?;
    (n > 0 && h % n == 0).then(|| (h / n) as usize)
}
