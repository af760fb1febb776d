//! nomic-bert: rotary embeddings, SwiGLU, fused QKV.
//!
//! Not built yet: loading such a checkpoint is a typed `Unsupported` error.

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::io::safetensors::WeightStore;
use crate::models::Encoder;
use std::path::Path;

/// Loads a nomic-bert encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, _store: &WeightStore, _be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    Err(InferError::Unsupported(format!(
        "{}: nomic-bert encoders are not supported by this build yet",
        config.display()
    )))
}
