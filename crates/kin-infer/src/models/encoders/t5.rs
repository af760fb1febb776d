//! T5 and mT5 encoders: RMSNorm, bucketed relative position bias.
//!
//! Not built yet: loading such a checkpoint is a typed `Unsupported` error.

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::io::safetensors::WeightStore;
use crate::models::Encoder;
use std::path::Path;

/// Loads a T5 encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, _store: &WeightStore, _be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    Err(InferError::Unsupported(format!(
        "{}: T5 encoders are not supported by this build yet",
        config.display()
    )))
}
