//! Norms, written once: LayerNorm (BERT-likes, GPT-2, Phi) and RMSNorm (LLaMA-likes, Gemma
//! with its `1 + w` folded in at load, T5), and [`Norm`], the choice a block makes.

use crate::backend::{GpuCompute, Tensor, View, ViewMut};
use crate::error::Result;
use crate::io::safetensors::Weights;

/// LayerNorm over the last dimension.
pub struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

impl LayerNorm {
    /// Loads `{key}.weight` / `{key}.bias`, accepting the old `gamma` / `beta` names of
    /// TF-converted checkpoints.
    pub fn load(be: &dyn GpuCompute, w: &Weights, key: &str, dim: usize, eps: f32) -> Result<Self> {
        let (wn, bn) =
            if !w.contains(&format!("{key}.weight")) && w.contains(&format!("{key}.gamma")) {
                ("gamma", "beta")
            } else {
                ("weight", "bias")
            };
        Ok(LayerNorm {
            weight: be.upload(w.get(&format!("{key}.{wn}"), &[dim])?.to_vec()),
            bias: be.upload(w.get(&format!("{key}.{bn}"), &[dim])?.to_vec()),
            eps,
        })
    }

    /// A norm over parameters already on the backend (another container's weights).
    pub fn new(weight: Tensor, bias: Tensor, eps: f32) -> Self {
        LayerNorm { weight, bias, eps }
    }

    /// Normalizes every row in place.
    pub fn forward(&self, be: &dyn GpuCompute, x: ViewMut) {
        be.layer_norm(x, &self.weight, &self.bias, self.eps);
    }
}

/// RMSNorm: `w · (x · 1/sqrt(mean(x²) + eps))`, no mean, no bias.
pub struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    /// Loads `{key}` (`[dim]`, the whole tensor name).
    pub fn load(be: &dyn GpuCompute, w: &Weights, key: &str, dim: usize, eps: f32) -> Result<Self> {
        Ok(Self::from_weight(be, w.get(key, &[dim])?.to_vec(), eps))
    }

    /// Gemma's norms scale by `1 + w`: the caller folds that into `weight` (in f32, as
    /// transformers computes `1.0 + weight.float()`).
    pub fn from_weight(be: &dyn GpuCompute, weight: Vec<f32>, eps: f32) -> Self {
        RmsNorm {
            weight: be.upload(weight),
            eps,
        }
    }

    /// Normalizes every row of `x` into `out`.
    pub fn forward(&self, be: &dyn GpuCompute, x: View, out: ViewMut) {
        be.rms_norm(x, &self.weight, self.eps, out);
    }
}

/// The norm a block applies.
pub enum Norm {
    Layer(LayerNorm),
    Rms(RmsNorm),
}

impl Norm {
    /// Normalizes every row of `x` into `out` (same length).
    pub fn forward(&self, be: &dyn GpuCompute, x: View, mut out: ViewMut) {
        match self {
            Norm::Layer(ln) => {
                be.copy(x, out.at_mut(..));
                ln.forward(be, out);
            }
            Norm::Rms(n) => n.forward(be, x, out),
        }
    }
}
