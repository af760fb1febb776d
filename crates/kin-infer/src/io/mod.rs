//! Everything that turns bytes on disk into typed, validated values: safetensors weights,
//! `config.json`, sentence-transformers module configs, golden files, the Hugging Face cache.

pub mod config;
pub(crate) mod config_fields;
pub mod golden;
pub mod hub;
pub mod input_line;
pub mod safetensors;
pub mod st_config;

use crate::error::{InferError, Result};
use std::path::Path;

/// Reads and parses a JSON file, naming the file in any error.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| InferError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| InferError::Json {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}
