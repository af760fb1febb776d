//! Shared building blocks, written once for every family: linear layers, norms, gated
//! feed-forwards, embedding sums, pooling, the pre-norm block (decoders, T5, inMotion).
//! They hold backend-prepared weights and call only [`GpuCompute`] operations.

pub mod block;
pub mod dense;
pub mod embeddings;
pub mod encoder;
pub mod ffn;
pub mod norm;
// Pooling modes are backend op arguments (op_args); kept at this path for the models.
pub use crate::op_args::pooling;
pub mod rope;
pub mod rope_config;

pub use norm::LayerNorm;
pub use norm::{Norm, RmsNorm};

use crate::backend::{DeviceMatrix, GpuCompute, Tensor, View, ViewMut};
use crate::error::Result;
use crate::io::safetensors::{StoredMatrix, Weights};

/// `y = x · Wᵀ + b` with a torch-layout weight (`out` rows of `in`).
pub struct Linear {
    weight: DeviceMatrix,
    bias: Option<Tensor>,
}

impl Linear {
    /// Loads `{name}.weight` (`[out, in]`) and `{name}.bias` (`[out]`).
    pub fn load(
        be: &dyn GpuCompute,
        w: &Weights,
        name: &str,
        in_dim: usize,
        out_dim: usize,
    ) -> Result<Self> {
        Self::load_fused(be, w, &[name], in_dim, out_dim)
    }

    /// Fuses several linears over the same input (e.g. q, k, v) into one wider matrix, so
    /// one GEMM pass reads the input once. Each output element is computed exactly as it
    /// would be alone.
    pub fn load_fused(
        be: &dyn GpuCompute,
        w: &Weights,
        names: &[&str],
        in_dim: usize,
        out_dim: usize,
    ) -> Result<Self> {
        Self::load_with(be, w, names, in_dim, out_dim, true)
    }

    /// As [`Linear::load_fused`], reading `{name}.bias` only when `bias` (T5 and the
    /// transformers nomic layout have none; the original nomic layout makes it a config flag).
    pub fn load_with(
        be: &dyn GpuCompute,
        w: &Weights,
        names: &[&str],
        in_dim: usize,
        out_dim: usize,
        bias: bool,
    ) -> Result<Self> {
        let mut weights = Vec::with_capacity(names.len());
        let mut b = Vec::with_capacity(if bias { names.len() * out_dim } else { 0 });
        for name in names {
            weights.push(w.get_matrix(&format!("{name}.weight"), &[out_dim, in_dim])?);
            if bias {
                b.extend_from_slice(&w.get(&format!("{name}.bias"), &[out_dim])?);
            }
        }
        let parts: Vec<_> = weights.iter().map(StoredMatrix::rows).collect();
        Ok(Linear {
            weight: be.prepare_weights(&parts, in_dim)?,
            bias: bias.then(|| be.upload(b)),
        })
    }

    /// A head tied to another tensor (`lm_head` sharing the token embeddings): `name`
    /// (`[out, in]`) as the weight, with an optional bias of its own.
    pub fn tied(
        be: &dyn GpuCompute,
        w: &Weights,
        name: &str,
        in_dim: usize,
        out_dim: usize,
        bias: Option<Vec<f32>>,
    ) -> Result<Self> {
        let weight = w.get_matrix(name, &[out_dim, in_dim])?;
        Ok(Self::from_parts(
            be,
            be.prepare_weights(&[weight.rows()], in_dim)?,
            bias,
        ))
    }

    /// A weight the caller has already laid out (regrouped rows, unfolded convolutions).
    pub fn from_parts(be: &dyn GpuCompute, weight: DeviceMatrix, bias: Option<Vec<f32>>) -> Self {
        Linear {
            weight,
            bias: bias.map(|b| be.upload(b)),
        }
    }

    /// The prepared weight (`[out, in]` as the products use it).
    pub fn weight(&self) -> &DeviceMatrix {
        &self.weight
    }

    pub fn out_dim(&self) -> usize {
        self.weight.n()
    }

    /// Writes the first `rows * out_dim` floats of `out` (scratch may be longer).
    pub fn forward(&self, be: &dyn GpuCompute, x: View, rows: usize, out: ViewMut) {
        be.linear(x, rows, &self.weight, self.bias.as_ref(), out);
    }
}
