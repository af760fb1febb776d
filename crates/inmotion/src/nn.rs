//! The building blocks both model files use: a packed Linear, LayerNorm and BatchNorm (eval)
//! parameters. Weights are read through [`Store`] (names as in the spec) and packed once, at
//! load, into the kernel table's GEMM panels.

use crate::error::Result;
use crate::weights::Store;
use kin_infer::kernels::{Kernels, PackedMatrix};

/// `y = x · Wᵀ + b` with `W` `[out, inp]` (a conv weight `[out, in, k]` is `[out, in*k]`).
pub struct Linear {
    pub w: PackedMatrix,
    pub b: Vec<f32>,
    pub out: usize,
}

impl Linear {
    /// `{prefix}.weight` of `wshape` (whose product over dims ≥ 1 is `inp`) and `{prefix}.bias`.
    pub fn load(k: &Kernels, st: &Store, prefix: &str, wshape: &[usize]) -> Result<Linear> {
        let out = wshape[0];
        let inp: usize = wshape[1..].iter().product();
        let w = st.get(&format!("{prefix}.weight"), wshape)?;
        let b = st.get(&format!("{prefix}.bias"), &[out])?;
        Ok(Linear {
            w: k.pack_rows(&w, out, inp, inp),
            b,
            out,
        })
    }

    /// `c[i] = a[i] · Wᵀ + b` for `m` rows (`a` row stride `lda`, `c` row stride `ldc`).
    #[inline]
    pub fn run(&self, k: &Kernels, a: &[f32], lda: usize, m: usize, c: &mut [f32], ldc: usize) {
        k.matmul(a, lda, m, &self.w, Some(&self.b), c, ldc);
    }
}

/// LayerNorm parameters (`weight`, `bias`) and eps.
pub struct Norm {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
    pub eps: f32,
}

impl Norm {
    pub fn load(st: &Store, prefix: &str, d: usize, eps: f32) -> Result<Norm> {
        Ok(Norm {
            w: st.get(&format!("{prefix}.weight"), &[d])?,
            b: st.get(&format!("{prefix}.bias"), &[d])?,
            eps,
        })
    }

    /// Every row of `x` (rows of `d = w.len()`) in place.
    pub fn rows(&self, k: &Kernels, x: &mut [f32]) {
        for row in x.chunks_exact_mut(self.w.len()) {
            k.layer_norm(row, &self.w, &self.b, self.eps);
        }
    }
}

/// BatchNorm1d in eval mode as PyTorch's CPU inference computes it:
/// `alpha = weight / sqrt(running_var + eps)`, `beta = bias - running_mean * alpha`,
/// `y = x * alpha + beta` per channel.
pub struct BatchNorm {
    pub alpha: Vec<f32>,
    pub beta: Vec<f32>,
}

impl BatchNorm {
    pub fn load(st: &Store, prefix: &str, d: usize, eps: f32) -> Result<BatchNorm> {
        let w = st.get(&format!("{prefix}.weight"), &[d])?;
        let b = st.get(&format!("{prefix}.bias"), &[d])?;
        let m = st.get(&format!("{prefix}.running_mean"), &[d])?;
        let v = st.get(&format!("{prefix}.running_var"), &[d])?;
        let alpha: Vec<f32> = w
            .iter()
            .zip(&v)
            .map(|(&w, &v)| w / (v + eps).sqrt())
            .collect();
        let beta = b
            .iter()
            .zip(&m)
            .zip(&alpha)
            .map(|((&b, &m), &a)| b - m * a)
            .collect();
        Ok(BatchNorm { alpha, beta })
    }

    /// Every row of `x` (channels last) in place.
    pub fn rows(&self, x: &mut [f32]) {
        for row in x.chunks_exact_mut(self.alpha.len()) {
            for ((v, &a), &b) in row.iter_mut().zip(&self.alpha).zip(&self.beta) {
                *v = *v * a + b;
            }
        }
    }
}
