//! Engine integration tests, one module per area (kernels have their own binary).

mod common;
mod determinism;
mod errors;
mod fixtures;
mod hub;
mod minilm;
mod numerics;
