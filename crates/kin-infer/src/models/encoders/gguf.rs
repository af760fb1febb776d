//! Encoders from GGUF files: llama.cpp's `bert` architecture (BERT as `convert_hf_to_gguf.py`'s
//! BertModel writes it), through the BERT family's own loader.
//!
//! The config comes from `bert.*` metadata under the Hub's keys (errors name both), the
//! vocabulary and type-vocabulary sizes from the embedding tables; tensors are GGUF's names,
//! which are the logical names (`token_embd`, `position_embd`, `token_types`,
//! `token_embd_norm`, `blk.N.attn_q` …, `blk.N.layer_output_norm`). The pooling is
//! `bert.pooling_type` (llama.cpp's enum: 1 mean, 2 CLS, 3 last token; none and rank are
//! typed Unsupported), mean when absent. A GGUF carries no sentence-transformers Normalize
//! module: normalization is off unless asked for (`--normalize`).

use super::bert::BertModel;
use crate::backend::GpuCompute;
use crate::error::{InferError, Result};
use crate::io::config::{BertConfig, ModelArchitecture};
use crate::io::config_fields::ConfigSource;
use crate::io::gguf::{GgufFile, MetaValue};
use crate::io::model_kinds::{gguf_architectures, gguf_kind, ModelKind};
use crate::io::safetensors::WeightStore;
use crate::io::source::Layout;
pub use crate::models::gguf_meta::is_encoder;
use crate::models::gguf_meta::{architecture, copy_key};
use crate::models::Encoder;
use crate::nn::pooling::{Pooling, PoolingMode};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// llama.cpp's BERT tensor names: the logical names themselves.
static LAYOUT: Layout = Layout {
    name: "GGUF (llama.cpp) BERT",
    prefixes: &[""],
    globals: &[&[
        ("token_embd", "token_embd"),
        ("token_types", "token_types"),
        ("position_embd", "position_embd"),
        ("token_embd_norm", "token_embd_norm"),
    ]],
    layer_prefix: "blk.{}.",
    layer: &[&[
        ("attn_q", "attn_q"),
        ("attn_k", "attn_k"),
        ("attn_v", "attn_v"),
        ("attn_output", "attn_output"),
        ("attn_output_norm", "attn_output_norm"),
        ("ffn_up", "ffn_up"),
        ("ffn_down", "ffn_down"),
        ("layer_output_norm", "layer_output_norm"),
    ]],
};

/// Loads the encoder a GGUF file holds.
pub fn load(gguf: &GgufFile, store: &WeightStore, be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    let arch = architecture(gguf)?;
    if gguf_kind(&arch) == Some(ModelKind::Decoder) {
        return Err(crate::io::config::wrong_kind(gguf.path(), &arch, true));
    }
    if arch != "bert" {
        return Err(InferError::Unsupported(format!(
            "{}: GGUF encoder architecture `{arch}` is not supported yet (supported: {})",
            gguf.path().display(),
            gguf_architectures(ModelKind::Encoder).join(", ")
        )));
    }
    if matches!(
        gguf.get("bert.attention.causal"),
        Some(MetaValue::Bool(true))
    ) {
        return Err(InferError::Unsupported(format!(
            "{}: a causal BERT (`bert.attention.causal` true) is not an encoder this build runs",
            gguf.path().display()
        )));
    }
    let mut obj = Map::new();
    let mut keys = BTreeMap::new();
    obj.insert("model_type".into(), json!("bert"));
    for (hub, own) in [
        ("max_position_embeddings", "bert.context_length"),
        ("hidden_size", "bert.embedding_length"),
        ("num_hidden_layers", "bert.block_count"),
        ("intermediate_size", "bert.feed_forward_length"),
        ("num_attention_heads", "bert.attention.head_count"),
        ("layer_norm_eps", "bert.attention.layer_norm_epsilon"),
        ("pad_token_id", "tokenizer.ggml.padding_token_id"),
    ] {
        copy_key(gguf, &mut keys, &mut obj, hub, own)?;
    }
    for (hub, tensor) in [
        ("vocab_size", "token_embd.weight"),
        ("type_vocab_size", "token_types.weight"),
    ] {
        if let Some([rows, _]) = store.shape(tensor) {
            obj.insert(hub.into(), json!(rows));
            keys.insert(hub.into(), tensor.into());
        }
    }
    let source = ConfigSource::from_object(Value::Object(obj), gguf.path().to_path_buf(), keys);
    let f = source.fields()?;
    let cfg = BertConfig::from_fields(ModelArchitecture::Bert, &f, gguf.path())?;
    Ok(Box::new(BertModel::load_with(
        cfg,
        store,
        &LAYOUT,
        &[""],
        be,
    )?))
}

/// The pooling `bert.pooling_type` names (mean when absent).
pub fn pooling(gguf: &GgufFile) -> Result<Pooling> {
    let mode = match gguf.get("bert.pooling_type").map(|v| v.as_u64()) {
        None => PoolingMode::Mean,
        Some(Some(1)) => PoolingMode::Mean,
        Some(Some(2)) => PoolingMode::Cls,
        Some(Some(3)) => PoolingMode::LastToken,
        Some(other) => {
            return Err(InferError::Unsupported(format!(
                "{}: `bert.pooling_type` {other:?} (llama.cpp: 0 none, 4 rank) is not a sentence pooling this build runs (supported: 1 mean, 2 cls, 3 last)",
                gguf.path().display()
            )))
        }
    };
    Ok(Pooling::new(vec![mode]))
}
