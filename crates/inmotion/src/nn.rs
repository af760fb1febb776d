//! Loading the building blocks both model files use onto a backend: kin-infer's shared
//! [`Linear`] and [`LayerNorm`], and BatchNorm (eval), which never runs as an op of its own:
//! it is folded, at load, into the linear map next to it. Weights are read through [`Store`]
//! (names as in the spec).

use crate::error::Result;
use crate::weights::Store;
use kin_infer_core::backend::{Backend, DeviceMatrix, StoredRows};
use kin_infer_core::nn::{LayerNorm, Linear};

/// A torch-layout weight (`out` rows of `inp`) and its bias on the backend.
pub fn linear(be: &dyn Backend, w: &[f32], b: Vec<f32>, inp: usize) -> Linear {
    Linear::from_parts(be, f32_matrix(be, w, inp), Some(b))
}

/// f32 rows of `inp` values onto the backend (callers shape them as whole rows, so this
/// cannot fail).
pub fn f32_matrix(be: &dyn Backend, w: &[f32], inp: usize) -> DeviceMatrix {
    be.prepare_weights(&[StoredRows::F32(w)], inp)
        .expect("f32 weights are whole rows")
}

/// `{prefix}.weight` of `wshape` (whose product over dims ≥ 1 is the input width; a conv
/// weight `[out, in, k]` is `[out, in·k]`) and `{prefix}.bias`, as host data.
pub fn load_host(st: &Store, prefix: &str, wshape: &[usize]) -> Result<(Vec<f32>, Vec<f32>)> {
    let w = st.get(&format!("{prefix}.weight"), wshape)?;
    let b = st.get(&format!("{prefix}.bias"), &[wshape[0]])?;
    Ok((w, b))
}

/// `{prefix}.weight` / `{prefix}.bias` onto the backend (the weight packed from the map).
pub fn load_linear(be: &dyn Backend, st: &Store, prefix: &str, wshape: &[usize]) -> Result<Linear> {
    let w = load_matrix(be, st, &format!("{prefix}.weight"), wshape)?;
    let b = st.get(&format!("{prefix}.bias"), &[wshape[0]])?;
    Ok(Linear::from_parts(be, w, Some(b)))
}

/// A weight matrix of `wshape` onto the backend, as stored: a quantized artifact's codes stay
/// codes (integer affine blocks, dequantized inside the GEMM to the values [`Store::get`]
/// gives, so the products have the same bits); float weights are packed from the map.
pub fn load_matrix(
    be: &dyn Backend,
    st: &Store,
    name: &str,
    wshape: &[usize],
) -> Result<DeviceMatrix> {
    let inp = wshape[1..].iter().product();
    if let Some((format, bytes)) = st.blocks(name, wshape)? {
        if let Ok(m) = be.prepare_weights(&[StoredRows::Blocks(format, &bytes)], inp) {
            st.note_kept(m.stored_bytes());
            return Ok(m);
        }
    }
    st.with(name, wshape, |w| f32_matrix(be, w, inp))
}

/// LayerNorm `{prefix}.weight` / `{prefix}.bias` of width `d`.
pub fn load_norm(
    be: &dyn Backend,
    st: &Store,
    prefix: &str,
    d: usize,
    eps: f32,
) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        be.upload(st.get(&format!("{prefix}.weight"), &[d])?),
        be.upload(st.get(&format!("{prefix}.bias"), &[d])?),
        eps,
    ))
}

/// BatchNorm1d in eval mode as per-channel `y = x · alpha + beta`, PyTorch's
/// `alpha = weight / sqrt(running_var + eps)`, `beta = bias - running_mean · alpha`.
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

    /// Folds the norm into the linear map **before** it (`BN(W·x + b)`, rows of `w` are
    /// output channels): `W'[o] = alpha[o] · W[o]`, `b'[o] = alpha[o] · b[o] + beta[o]`.
    pub fn fold_after(&self, w: &mut [f32], b: &mut [f32]) {
        let inp = w.len() / b.len();
        for (o, row) in w.chunks_exact_mut(inp).enumerate() {
            row.iter_mut().for_each(|v| *v *= self.alpha[o]);
            b[o] = self.alpha[o].mul_add(b[o], self.beta[o]);
        }
    }

    /// Folds the norm into the linear map **after** it (`W·BN(h) + b`, columns of `w` are
    /// the norm's channels): `W'[o][j] = W[o][j] · alpha[j]`, `b'[o] = b[o] + Σ_j W[o][j] ·
    /// beta[j]` (the sum in f64, rounded once).
    pub fn fold_before(&self, w: &mut [f32], b: &mut [f32]) {
        let inp = self.alpha.len();
        for (row, bo) in w.chunks_exact_mut(inp).zip(b.iter_mut()) {
            let shift: f64 = row
                .iter()
                .zip(&self.beta)
                .map(|(&w, &beta)| w as f64 * beta as f64)
                .sum();
            *bo = (*bo as f64 + shift) as f32;
            row.iter_mut().zip(&self.alpha).for_each(|(v, &a)| *v *= a);
        }
    }
}
