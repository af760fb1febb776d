//! `config.json`: family detection from `model_type` and the typed encoder config.
//!
//! Field names mirror the Hugging Face keys so the struct reads like the file. Both the Hub's
//! spelling and the one transformers 5.x writes (`dtype` for `torch_dtype`) are accepted.

use crate::error::{InferError, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The model families this build can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelArchitecture {
    Bert,
    Roberta,
    XlmRoberta,
}

impl ModelArchitecture {
    /// `model_type` values, in the order they are listed in errors.
    pub const SUPPORTED: [(&'static str, ModelArchitecture); 3] = [
        ("bert", ModelArchitecture::Bert),
        ("roberta", ModelArchitecture::Roberta),
        ("xlm-roberta", ModelArchitecture::XlmRoberta),
    ];

    pub fn from_model_type(model_type: &str) -> Option<Self> {
        let t = model_type.replace('_', "-").to_ascii_lowercase();
        Self::SUPPORTED
            .iter()
            .find(|(name, _)| *name == t)
            .map(|(_, a)| *a)
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelArchitecture::Bert => "bert",
            ModelArchitecture::Roberta => "roberta",
            ModelArchitecture::XlmRoberta => "xlm-roberta",
        }
    }

    /// Prefixes a checkpoint of this family may nest its encoder under.
    pub fn weight_prefixes(self) -> &'static [&'static str] {
        match self {
            ModelArchitecture::Bert => &["", "bert.", "model.", "encoder_model."],
            ModelArchitecture::Roberta | ModelArchitecture::XlmRoberta => {
                &["", "roberta.", "model.", "bert.", "encoder_model."]
            }
        }
    }

    /// Whether positions are offset past `pad_token_id` (RoBERTa's `padding_idx + 1 + i`).
    pub fn offset_positions(self) -> bool {
        !matches!(self, ModelArchitecture::Bert)
    }
}

/// Feed-forward activation named by `hidden_act`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact erf form.
    GeluErf,
    /// `gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`-like tanh approximation.
    GeluTanh,
    Relu,
}

impl Activation {
    pub fn name(self) -> &'static str {
        match self {
            Activation::GeluErf => "gelu (erf)",
            Activation::GeluTanh => "gelu (tanh)",
            Activation::Relu => "relu",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
struct RawBertConfig {
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_act")]
    hidden_act: String,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    pad_token_id: Option<i64>,
    position_embedding_type: Option<String>,
    torch_dtype: Option<String>,
    dtype: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

/// A validated BERT-family encoder config.
#[derive(Debug, Clone)]
pub struct BertConfig {
    pub architecture: ModelArchitecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f32,
    pub pad_token_id: u32,
    /// `torch_dtype` / `dtype` as written, if any (informational: storage is read per tensor).
    pub dtype: Option<String>,
    pub path: PathBuf,
}

impl BertConfig {
    /// Reads and validates `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let value: serde_json::Value = super::read_json(path)?;
        let model_type = value
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let architecture = ModelArchitecture::from_model_type(&model_type).ok_or_else(|| {
            InferError::UnsupportedModel {
                path: path.to_path_buf(),
                model_type: if model_type.is_empty() {
                    "(missing)".into()
                } else {
                    model_type.clone()
                },
                supported: ModelArchitecture::SUPPORTED.iter().map(|s| s.0).collect(),
            }
        })?;
        let raw: RawBertConfig =
            serde_json::from_value(value).map_err(|e| InferError::Config {
                path: path.to_path_buf(),
                field: field_of(&e.to_string()),
                reason: e.to_string(),
            })?;
        let _ = raw.model_type;
        let bad = |field: &str, reason: String| InferError::Config {
            path: path.to_path_buf(),
            field: field.into(),
            reason,
        };
        let hidden_act = match raw.hidden_act.as_str() {
            "gelu" => Activation::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => {
                return Err(bad(
                    "hidden_act",
                    format!("unsupported activation `{other}` (supported: gelu, gelu_new, gelu_pytorch_tanh, relu)"),
                ))
            }
        };
        if let Some(p) = raw.position_embedding_type.as_deref() {
            if p != "absolute" {
                return Err(InferError::Unsupported(format!(
                    "{}: position_embedding_type `{p}` (this build supports `absolute`)",
                    path.display()
                )));
            }
        }
        for (field, v) in [
            ("vocab_size", raw.vocab_size),
            ("hidden_size", raw.hidden_size),
            ("num_hidden_layers", raw.num_hidden_layers),
            ("num_attention_heads", raw.num_attention_heads),
            ("intermediate_size", raw.intermediate_size),
            ("max_position_embeddings", raw.max_position_embeddings),
            ("type_vocab_size", raw.type_vocab_size),
        ] {
            if v == 0 || v > (1 << 24) {
                return Err(bad(field, format!("value {v} is out of range")));
            }
        }
        if raw.hidden_size % raw.num_attention_heads != 0 {
            return Err(bad(
                "num_attention_heads",
                format!(
                    "hidden_size {} is not a multiple of num_attention_heads {}",
                    raw.hidden_size, raw.num_attention_heads
                ),
            ));
        }
        if !(raw.layer_norm_eps.is_finite() && raw.layer_norm_eps >= 0.0) {
            return Err(bad("layer_norm_eps", "must be finite and >= 0".into()));
        }
        let default_pad = match architecture {
            ModelArchitecture::Bert => 0,
            _ => 1,
        };
        let pad = raw.pad_token_id.unwrap_or(default_pad);
        if pad < 0 || pad as usize >= raw.vocab_size {
            return Err(bad(
                "pad_token_id",
                format!("{pad} is outside the vocabulary (size {})", raw.vocab_size),
            ));
        }
        if architecture.offset_positions() && pad as usize + 2 > raw.max_position_embeddings {
            return Err(bad(
                "max_position_embeddings",
                "too small for the padding offset of RoBERTa-style positions".into(),
            ));
        }
        Ok(BertConfig {
            architecture,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            num_hidden_layers: raw.num_hidden_layers,
            num_attention_heads: raw.num_attention_heads,
            intermediate_size: raw.intermediate_size,
            hidden_act,
            max_position_embeddings: raw.max_position_embeddings,
            type_vocab_size: raw.type_vocab_size,
            layer_norm_eps: raw.layer_norm_eps as f32,
            pad_token_id: pad as u32,
            dtype: raw.dtype.or(raw.torch_dtype),
            path: path.to_path_buf(),
        })
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// The longest sequence the position table can hold.
    pub fn max_sequence_length(&self) -> usize {
        if self.architecture.offset_positions() {
            self.max_position_embeddings - self.pad_token_id as usize - 1
        } else {
            self.max_position_embeddings
        }
    }
}

/// serde messages say "missing field `x`" or "invalid type ... for key `x`"; pull the name out.
fn field_of(msg: &str) -> String {
    msg.split('`').nth(1).unwrap_or("(unknown)").to_string()
}
