//! `config.json`: family detection from `model_type` and the typed encoder config.
//!
//! Field names mirror the Hugging Face keys so the struct reads like the file. Both the Hub's
//! spelling and the one transformers 5.x writes (`dtype` for `torch_dtype`) are accepted.

use super::config_fields::ConfigFields;
use crate::error::{InferError, Result};
use std::path::{Path, PathBuf};

/// A model of the other kind than the one asked for (a decoder loaded as an embedder, or an
/// encoder as a generator): the error names its family and the commands that run it, since
/// "unsupported model_type `llama`" reads as if this build could not run it at all.
pub fn wrong_kind(model: &Path, family: &str, is_decoder: bool) -> InferError {
    InferError::Unsupported(if is_decoder {
        format!(
            "{} is a decoder ({family}), not an embedding model: use `generate` or `serve` \
             (the library's Generator)",
            model.display()
        )
    } else {
        format!(
            "{} is an encoder ({family}), not a text generator: use `embed` or `serve` \
             (the library's Embedder)",
            model.display()
        )
    })
}

/// The model families this build can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelArchitecture {
    Bert,
    Roberta,
    XlmRoberta,
    Albert,
    Deberta,
    DebertaV2,
    T5,
    Mt5,
    NomicBert,
    /// `model_type: bert` with `position_embedding_type: "alibi"` (JinaBERT v2 layout).
    JinaBert,
}

impl ModelArchitecture {
    /// `model_type` values, in the order they are listed in errors.
    pub const SUPPORTED: [(&'static str, ModelArchitecture); 9] = [
        ("bert", ModelArchitecture::Bert),
        ("roberta", ModelArchitecture::Roberta),
        ("xlm-roberta", ModelArchitecture::XlmRoberta),
        ("albert", ModelArchitecture::Albert),
        ("deberta", ModelArchitecture::Deberta),
        ("deberta-v2", ModelArchitecture::DebertaV2),
        ("t5", ModelArchitecture::T5),
        ("mt5", ModelArchitecture::Mt5),
        ("nomic-bert", ModelArchitecture::NomicBert),
    ];

    pub fn from_model_type(model_type: &str) -> Option<Self> {
        let t = model_type.replace('_', "-").to_ascii_lowercase();
        Self::SUPPORTED
            .iter()
            .find(|(name, _)| *name == t)
            .map(|(_, a)| *a)
    }

    /// Reads `model_type` from a `config.json` (typed error listing the supported ones).
    pub fn detect(path: &Path) -> Result<Self> {
        let value: serde_json::Value = super::read_json(path)?;
        Self::from_config_value(&value, path)
    }

    fn from_config_value(value: &serde_json::Value, path: &Path) -> Result<Self> {
        let model_type = value
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let alibi = value
            .get("position_embedding_type")
            .and_then(|v| v.as_str())
            == Some("alibi");
        match Self::from_model_type(&model_type) {
            Some(ModelArchitecture::Bert) if alibi => return Ok(ModelArchitecture::JinaBert),
            Some(a) => return Ok(a),
            None => {}
        }
        if super::model_kinds::DECODER_MODEL_TYPES.contains(&model_type.as_str()) {
            return Err(wrong_kind(path.parent().unwrap_or(path), &model_type, true));
        }
        Err(InferError::UnsupportedModel {
            path: path.to_path_buf(),
            model_type: if model_type.is_empty() {
                "(missing)".into()
            } else {
                model_type.clone()
            },
            supported: Self::SUPPORTED.iter().map(|s| s.0).collect(),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelArchitecture::Bert => "bert",
            ModelArchitecture::Roberta => "roberta",
            ModelArchitecture::XlmRoberta => "xlm-roberta",
            ModelArchitecture::Albert => "albert",
            ModelArchitecture::Deberta => "deberta",
            ModelArchitecture::DebertaV2 => "deberta-v2",
            ModelArchitecture::T5 => "t5",
            ModelArchitecture::Mt5 => "mt5",
            ModelArchitecture::NomicBert => "nomic-bert",
            ModelArchitecture::JinaBert => "jina-bert (alibi)",
        }
    }

    /// Prefixes a BERT-layout checkpoint may nest its encoder under (other families keep
    /// their own list in their file).
    pub fn weight_prefixes(self) -> &'static [&'static str] {
        match self {
            ModelArchitecture::Roberta | ModelArchitecture::XlmRoberta => {
                &["", "roberta.", "model.", "bert.", "encoder_model."]
            }
            _ => &["", "bert.", "model.", "encoder_model."],
        }
    }

    /// Whether positions are offset past `pad_token_id` (RoBERTa's `padding_idx + 1 + i`).
    pub fn offset_positions(self) -> bool {
        matches!(
            self,
            ModelArchitecture::Roberta | ModelArchitecture::XlmRoberta
        )
    }
}

pub use kin_infer_core::io::Activation;

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
        let architecture = ModelArchitecture::from_config_value(&value, path)?;
        if !matches!(
            architecture,
            ModelArchitecture::Bert | ModelArchitecture::Roberta | ModelArchitecture::XlmRoberta
        ) {
            return Err(InferError::Unsupported(format!(
                "{}: `{}` is not a BERT-layout config",
                path.display(),
                architecture.name()
            )));
        }
        let f = ConfigFields::new(&value, path)?;
        Self::from_fields(architecture, &f, path)
    }

    /// Validates a BERT-layout config from its fields (a `config.json`, or a GGUF file's
    /// metadata under the Hub's keys: `models/encoders/gguf.rs`).
    pub fn from_fields(
        architecture: ModelArchitecture,
        f: &ConfigFields,
        path: &Path,
    ) -> Result<Self> {
        let vocab_size = f.usize("vocab_size", None)?;
        let hidden_size = f.usize("hidden_size", None)?;
        let num_hidden_layers = f.usize("num_hidden_layers", None)?;
        let num_attention_heads = f.usize("num_attention_heads", None)?;
        let intermediate_size = f.usize("intermediate_size", None)?;
        let max_position_embeddings = f.usize("max_position_embeddings", None)?;
        let type_vocab_size = f.usize("type_vocab_size", Some(2))?;
        let layer_norm_eps = f.f64("layer_norm_eps", 1e-12)?;
        let position_embedding_type = f.opt_str("position_embedding_type")?;
        let dtype = f.dtype()?;
        let pad_token_id = f.opt_usize("pad_token_id")?;
        let hidden_act = hidden_act(f, "gelu")?;
        if let Some(p) = position_embedding_type {
            if p != "absolute" {
                return Err(InferError::Unsupported(format!(
                    "{}: position_embedding_type `{p}` (this build supports `absolute`)",
                    path.display()
                )));
            }
        }
        f.check_sizes(&[
            ("vocab_size", vocab_size),
            ("hidden_size", hidden_size),
            ("num_hidden_layers", num_hidden_layers),
            ("num_attention_heads", num_attention_heads),
            ("intermediate_size", intermediate_size),
            ("max_position_embeddings", max_position_embeddings),
            ("type_vocab_size", type_vocab_size),
        ])?;
        f.check_multiple(
            "hidden_size",
            hidden_size,
            "num_attention_heads",
            num_attention_heads,
        )?;
        if !(layer_norm_eps.is_finite() && layer_norm_eps >= 0.0) {
            return Err(f.err("layer_norm_eps", "must be finite and >= 0"));
        }
        let default_pad = match architecture {
            ModelArchitecture::Bert => 0,
            _ => 1,
        };
        let pad = f.check_pad(pad_token_id.unwrap_or(default_pad), vocab_size)?;
        if architecture.offset_positions() && pad as usize + 2 > max_position_embeddings {
            return Err(f.err(
                "max_position_embeddings",
                "too small for the padding offset of RoBERTa-style positions",
            ));
        }
        Ok(BertConfig {
            architecture,
            vocab_size,
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            intermediate_size,
            hidden_act,
            max_position_embeddings,
            type_vocab_size,
            layer_norm_eps: layer_norm_eps as f32,
            pad_token_id: pad,
            dtype,
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

/// `hidden_act` of a BERT-layout encoder (BERT, RoBERTa, ALBERT), `default` when absent:
/// transformers' `ACT2FN` names for the erf GELU, the tanh approximations and ReLU.
pub(crate) fn hidden_act(f: &ConfigFields, default: &str) -> Result<Activation> {
    Ok(match f.opt_str("hidden_act")?.unwrap_or(default) {
        "gelu" => Activation::GeluErf,
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
        "relu" => Activation::Relu,
        other => {
            return Err(f.err(
                "hidden_act",
                format!("unsupported activation `{other}` (supported: gelu, gelu_new, gelu_pytorch_tanh, relu)"),
            ))
        }
    })
}
