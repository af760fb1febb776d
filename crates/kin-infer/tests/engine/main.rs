//! Engine integration tests, one module per area (kernels have their own binary).

#[path = "../support/mod.rs"]
mod support;

mod common;
mod determinism;
mod errors;
mod fixtures;
mod hub;
mod minilm;
mod nonfinite;
mod numerics;
mod sessions;
mod shards;
