//! kin-infer: a pure-Rust transformer inference engine whose outputs are bit-reproducible
//! across thread counts, batch compositions and SIMD tiers (see ARCHITECTURE.md).
//!
//! Data flows one way: bytes ([`io`]) → typed config and weights, validated once at load →
//! model structs ([`models`]) built from shared blocks ([`nn`]) running on a compute backend
//! ([`gpu::GpuCompute`], CPU today, over the [`kernels`] dispatch table) → pipelines
//! ([`embed::Embedder`]) → the CLI.

pub mod corpus;
pub mod embed;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod gpu;
pub mod io;
pub mod kernels;
pub mod models;
pub mod nn;
pub mod resource;
pub mod threads;
pub mod tokenize;
pub mod watchdog;

pub use embed::{Embedder, EmbedderOptions};
pub use error::{InferError, Result};
pub use io::config::{BertConfig, ModelArchitecture};
pub use nn::pooling::{Pooling, PoolingMode};

/// Changes whenever a change to kernels or model code could change output bits. A test pins
/// the exact bits of a fixed embedding to it (tests/numerics.rs).
pub const NUMERICS_VERSION: &str = "kin-numerics/1";
