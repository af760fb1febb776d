//! kin-infer-core: what every kin-infer engine runs on, without tokenizers or templates: the
//! CPU kernels ([`kernels`]), the compute seam ([`backend`]), the shared blocks ([`nn`]),
//! safetensors weights ([`io`]), the typed error, threads and resource planning. `kin-infer`
//! (text models) and `inmotion` (the edge time-series models) both build on it; the small
//! edge binary links only this.

pub mod activations;
pub mod backend;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gpu;
pub mod io;
pub mod kernels;
pub mod nn;
pub mod op_args;
#[doc(hidden)]
pub mod pins;
pub mod resource;
pub mod threads;
pub mod units;

pub use activations::{Activations, Numerics, Q8_NUMERICS_VERSION};
pub use error::{ErrorKind, InferError, Result};
pub use nn::pooling::{Pooling, PoolingMode};

/// Changes whenever a change to kernels or model code could change output bits. A test pins
/// the exact bits of a fixed embedding to it (kin-infer's tests/engine/numerics.rs).
pub const NUMERICS_VERSION: &str = "kin-numerics/1";
