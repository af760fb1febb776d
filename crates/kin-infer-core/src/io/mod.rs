//! The container reading the core needs: safetensors weights (mmap'd, validated) and the
//! typed reader of config fields the shared blocks use. Hugging Face layouts, tokenizers and
//! goldens stay in kin-infer.

pub mod config_fields;
pub mod gguf;
pub mod gguf_writer;
pub mod safetensors;
pub mod source;

use crate::error::{InferError, Result};
use std::path::Path;

/// Reads and parses a JSON file, naming the file in any error.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| InferError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| InferError::Json {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
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
