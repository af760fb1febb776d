//! kin-infer: a pure-Rust transformer inference engine whose outputs are bit-reproducible
//! across thread counts, batch compositions and SIMD tiers (see ARCHITECTURE.md).
//!
//! Data flows one way: bytes ([`io`]) → typed config and weights, validated once at load →
//! model structs ([`models`]) built from shared blocks ([`nn`]) running on a compute backend
//! ([`backend::GpuCompute`], the one seam every op goes through: the CPU over the [`kernels`]
//! dispatch table, or a GPU) → pipelines ([`embed::Embedder`]) → the CLI. No module imports
//! one below it (`scripts/check-layering.py`; the layer order is in ARCHITECTURE.md).

pub use kin_infer_core::{backend, error, gpu, kernels, nn, resource, threads};

pub mod convert;
pub mod corpus;
pub mod embed;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod generator;
pub mod golden;
pub mod io;
pub mod models;
pub mod shards;
pub mod tokenize;
pub mod watchdog;

pub use embed::{Embedder, EmbedderOptions};
pub use error::{ErrorKind, InferError, Result};
pub use generator::{Generator, GeneratorOptions, Session};
pub use io::config::{BertConfig, ModelArchitecture};
pub use nn::pooling::{Pooling, PoolingMode};

pub use kin_infer_core::{Activations, Numerics, NUMERICS_VERSION, Q8_NUMERICS_VERSION};
