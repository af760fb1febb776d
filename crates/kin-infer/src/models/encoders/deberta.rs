//! DeBERTa v1 and v2/v3: disentangled attention over relative positions.
//!
//! Not built yet: loading such a checkpoint is a typed `Unsupported` error.

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::io::safetensors::WeightStore;
use crate::models::Encoder;
use std::path::Path;

/// Loads a DeBERTa encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, _store: &WeightStore, _be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    Err(InferError::Unsupported(format!(
        "{}: DeBERTa encoders are not supported by this build yet",
        config.display()
    )))
}
