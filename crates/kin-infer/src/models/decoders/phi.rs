//! Phi (phi-2) and Phi-3: parallel attention + MLP, partial rotary, fused qkv/gate_up, longrope.
//!
//! Not built yet: loading such a checkpoint is a typed `Unsupported` error.

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::io::safetensors::WeightStore;
use crate::models::decoders::Decoder;
use std::path::Path;

/// Loads a Phi model from `config` (its parsed `config.json` is `_v`) and `_store`.
pub fn load(
    config: &Path,
    _v: &serde_json::Value,
    _store: &WeightStore,
    _be: &dyn GpuCompute,
) -> Result<Box<dyn Decoder>> {
    Err(InferError::Unsupported(format!(
        "{}: Phi decoders are not supported by this build yet",
        config.display()
    )))
}
