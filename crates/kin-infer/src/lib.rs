//! kin-infer: a pure-Rust transformer inference engine whose outputs are bit-reproducible
//! across thread counts, batch compositions and SIMD tiers (see ARCHITECTURE.md).
//!
//! Data flows one way: bytes ([`io`]) → typed config and weights, validated once at load →
//! model structs ([`models`]) built from shared blocks ([`nn`]) running on a compute backend
//! ([`backend::GpuCompute`], the one seam every op goes through: the CPU today, over the
//! [`kernels`] dispatch table) → pipelines ([`embed::Embedder`]) → the CLI.

pub mod backend;
pub mod corpus;
pub mod embed;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod generator;
pub mod golden;
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
pub use error::{ErrorKind, InferError, Result};
pub use generator::{Generator, GeneratorOptions, Session};
pub use io::config::{BertConfig, ModelArchitecture};
pub use nn::pooling::{Pooling, PoolingMode};

/// Changes whenever a change to kernels or model code could change output bits. A test pins
/// the exact bits of a fixed embedding to it (tests/numerics.rs).
pub const NUMERICS_VERSION: &str = "kin-numerics/1";
