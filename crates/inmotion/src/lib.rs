//! inmotion: the inMotion edge models (lejepa, t_jepa, ts_jepa, cf_jepa, sigreg) on
//! kin-infer-core's compute seam (its backend ops and shared blocks). An artifact directory
//! (specs in docs/inmotion-artifact.md) is read once by [`Model::load`] (meta.json →
//! [`meta::Meta`], model.safetensors → [`weights::Store`], validated, dequantized and
//! prepared on the backend), then [`Model::classify`] runs windows without
//! allocating. [`golden`] proves parity with PyTorch, [`eval`] scores a labelled CSV.

pub mod error;
pub mod eval;
#[doc(hidden)]
pub mod fuzzing;
pub mod golden;
pub mod input;
pub mod meta;
pub mod model;
mod nn;
pub mod preprocess;
pub mod sha256;
mod sigreg;
pub mod transformer;
pub mod weights;
pub mod writer;

pub use error::{Error, Result};

/// The numerics version of inMotion's output bits (see specs/cli-conventions.md): `describe`
/// and `bench` record it, and tests/numerics.rs pins the logits of every fixture artifact to
/// it. /2: the families run on kin-infer's backend ops (fused multiply-adds everywhere,
/// BatchNorm folded at load, t_jepa's tokenizer folded into its input projection).
pub const NUMERICS_VERSION: &str = "inmotion-numerics/2";
pub use meta::{Family, Meta};
pub use model::{argmax, Model};
