//! Feed-forward pieces more than one family uses: the activation a config names for its
//! feed-forward (plain or gated), and the gated (GLU) feed-forward with its scratch buffers.
//!
//! The gated block fuses gate and up into one GEMM (`[gate | up]` per row), so the input is
//! read once; each output element is still computed exactly as in a separate projection.

use super::Linear;
use crate::error::Result;
use crate::gpu::GpuCompute;
use crate::io::config::Activation;
use crate::io::safetensors::Weights;
use crate::kernels::Kernels;
use rayon::prelude::*;

/// A feed-forward activation: the gate's in a GLU, or the whole hidden layer's in T5's plain
/// `relu` / `gelu` feed-forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FfnAct {
    Silu,
    GeluErf,
    GeluTanh,
    Relu,
}

impl FfnAct {
    pub(crate) fn name(self) -> &'static str {
        match self {
            FfnAct::Silu => "silu",
            FfnAct::GeluErf => "gelu (erf)",
            FfnAct::GeluTanh => "gelu (tanh)",
            FfnAct::Relu => "relu",
        }
    }

    /// The conventional name of the gated feed-forward built on this activation.
    pub(crate) fn glu_name(self) -> &'static str {
        match self {
            FfnAct::Silu => "SwiGLU",
            FfnAct::GeluErf | FfnAct::GeluTanh => "GeGLU",
            FfnAct::Relu => "ReGLU",
        }
    }

    /// On host memory, one slice at a time (the GLU applies it per row, next to the product).
    fn apply_host(self, k: &Kernels, x: &mut [f32]) {
        match self {
            FfnAct::Silu => k.silu(x),
            FfnAct::GeluErf => k.gelu_erf(x),
            FfnAct::GeluTanh => k.gelu_tanh(x),
            FfnAct::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        }
    }

    /// On a whole buffer through the backend's activation op where it has one (silu it lacks,
    /// so that one runs on the host kernels).
    pub(crate) fn apply(self, be: &dyn GpuCompute, x: &mut [f32]) {
        match self {
            FfnAct::Relu => be.activation(x, Activation::Relu),
            FfnAct::GeluErf => be.activation(x, Activation::GeluErf),
            FfnAct::GeluTanh => be.activation(x, Activation::GeluTanh),
            FfnAct::Silu => {
                let k = be.host_kernels();
                x.par_chunks_mut(4096).for_each(|c| k.silu(c));
            }
        }
    }
}

/// Scratch of a [`GatedFfn`] forward, allocated once per batch.
pub(crate) struct FfnBuffers {
    /// `[rows, 2 * intermediate]`: `[gate | up]` per row.
    gate_up: Vec<f32>,
    /// `[rows, intermediate]`
    hidden: Vec<f32>,
}

impl FfnBuffers {
    pub(crate) fn new(rows: usize, intermediate: usize) -> Self {
        FfnBuffers {
            gate_up: vec![0.0; rows * 2 * intermediate],
            hidden: vec![0.0; rows * intermediate],
        }
    }
}

/// `down(act(gate(x)) * up(x))`; the product is elementwise (one rounding per element, the
/// same on every tier).
pub(crate) struct GatedFfn {
    gate_up: Linear,
    down: Linear,
    act: FfnAct,
    intermediate: usize,
}

impl GatedFfn {
    /// `gate_up`: the gate part then the up part, each `[intermediate, hidden]` (or a single
    /// `[2 * intermediate, hidden]` tensor whose first half is the gate).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        be: &dyn GpuCompute,
        w: &Weights,
        gate_up: &[&str],
        down: &str,
        hidden: usize,
        intermediate: usize,
        gate_up_bias: bool,
        down_bias: bool,
        act: FfnAct,
    ) -> Result<Self> {
        let part_rows = 2 * intermediate / gate_up.len();
        Ok(GatedFfn {
            gate_up: Linear::load_with(be, w, gate_up, hidden, part_rows, gate_up_bias)?,
            down: Linear::load_with(be, w, &[down], intermediate, hidden, down_bias)?,
            act,
            intermediate,
        })
    }

    /// `out` gets `rows * hidden`.
    pub(crate) fn forward(
        &self,
        be: &dyn GpuCompute,
        x: &[f32],
        rows: usize,
        buf: &mut FfnBuffers,
        out: &mut [f32],
    ) {
        let i = self.intermediate;
        self.gate_up.forward(be, x, rows, &mut buf.gate_up);
        let k = be.host_kernels();
        let act = self.act;
        buf.hidden[..rows * i]
            .par_chunks_mut(i)
            .zip(buf.gate_up[..rows * 2 * i].par_chunks_mut(2 * i))
            .for_each(|(hrow, gu)| {
                let (gate, up) = gu.split_at_mut(i);
                act.apply_host(k, gate);
                for j in 0..i {
                    hrow[j] = gate[j] * up[j];
                }
            });
        self.down.forward(be, &buf.hidden[..rows * i], rows, out);
    }
}
