//! GPT-2: learned positions, Conv1D weights, fused c_attn, GELU tanh, tied head.
//!
//! Not built yet: loading such a checkpoint is a typed `Unsupported` error.

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::io::safetensors::WeightStore;
use crate::models::decoders::Decoder;
use std::path::Path;

/// Loads a GPT-2 model from `config` (its parsed `config.json` is `_v`) and `_store`.
pub fn load(
    config: &Path,
    _v: &serde_json::Value,
    _store: &WeightStore,
    _be: &dyn GpuCompute,
) -> Result<Box<dyn Decoder>> {
    Err(InferError::Unsupported(format!(
        "{}: GPT-2 decoders are not supported by this build yet",
        config.display()
    )))
}
