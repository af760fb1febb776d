//! inmotion: the inMotion edge models (lejepa, t_jepa, ts_jepa, cf_jepa, sigreg) on the
//! kin-infer kernel table. An artifact directory (specs in docs/inmotion-artifact.md) is read
//! once by [`Model::load`] (meta.json → [`meta::Meta`], model.safetensors → [`weights::Store`],
//! validated, dequantized and packed), then [`Model::classify`] runs windows without
//! allocating. [`golden`] proves parity with PyTorch, [`eval`] scores a labelled CSV.

mod attn_gemm;
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
pub use meta::{Family, Meta};
pub use model::{argmax, Model};
