//! Feed-forward pieces more than one family uses: the activation a config names for its
//! feed-forward (plain or gated), and the gated (GLU) feed-forward with its scratch buffers.
//!
//! The gated block fuses gate and up into one GEMM (`[gate | up]` per row), so the input is
//! read once; each output element is still computed exactly as in a separate projection.

use super::Linear;
use crate::backend::{Act, GpuCompute, Tensor, View, ViewMut};
use crate::error::Result;
use crate::io::safetensors::Weights;

/// A feed-forward activation: the gate's in a GLU, or the whole hidden layer's in T5's plain
/// `relu` / `gelu` feed-forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnAct {
    Silu,
    GeluErf,
    GeluTanh,
    Relu,
}

impl FfnAct {
    pub fn name(self) -> &'static str {
        match self {
            FfnAct::Silu => "silu",
            FfnAct::GeluErf => "gelu (erf)",
            FfnAct::GeluTanh => "gelu (tanh)",
            FfnAct::Relu => "relu",
        }
    }

    /// The conventional name of the gated feed-forward built on this activation.
    pub fn glu_name(self) -> &'static str {
        match self {
            FfnAct::Silu => "SwiGLU",
            FfnAct::GeluErf | FfnAct::GeluTanh => "GeGLU",
            FfnAct::Relu => "ReGLU",
        }
    }

    /// The backend activation.
    pub fn act(self) -> Act {
        match self {
            FfnAct::Silu => Act::Silu,
            FfnAct::GeluErf => Act::GeluErf,
            FfnAct::GeluTanh => Act::GeluTanh,
            FfnAct::Relu => Act::Relu,
        }
    }

    /// On a whole buffer, in place.
    pub fn apply(self, be: &dyn GpuCompute, x: ViewMut) {
        be.activation(x, self.act());
    }
}

/// Scratch of a [`GatedFfn`] forward, allocated once per batch.
pub struct FfnBuffers {
    /// `[rows, 2 * intermediate]`: `[gate | up]` per row.
    gate_up: Tensor,
    /// `[rows, intermediate]`
    hidden: Tensor,
}

impl FfnBuffers {
    pub fn new(be: &dyn GpuCompute, rows: usize, intermediate: usize) -> Self {
        FfnBuffers {
            gate_up: be.zeros(rows * 2 * intermediate),
            hidden: be.zeros(rows * intermediate),
        }
    }
}

/// `down(act(gate(x)) * up(x))`; the product is elementwise (one rounding per element, the
/// same on every tier).
pub struct GatedFfn {
    gate_up: Linear,
    down: Linear,
    act: FfnAct,
    intermediate: usize,
}

impl GatedFfn {
    /// `gate_up`: the gate part then the up part, each `[intermediate, hidden]` (or a single
    /// `[2 * intermediate, hidden]` tensor whose first half is the gate).
    #[allow(clippy::too_many_arguments)]
    pub fn load(
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

    pub fn intermediate(&self) -> usize {
        self.intermediate
    }

    /// `out` gets `rows * hidden`.
    pub fn forward(
        &self,
        be: &dyn GpuCompute,
        x: View,
        rows: usize,
        buf: &mut FfnBuffers,
        out: ViewMut,
    ) {
        let i = self.intermediate;
        self.gate_up
            .forward(be, x, rows, buf.gate_up.at_mut(..rows * 2 * i));
        be.glu(
            buf.gate_up.at_mut(..rows * 2 * i),
            rows,
            i,
            self.act.act(),
            buf.hidden.at_mut(..rows * i),
        );
        self.down.forward(be, buf.hidden.at(..rows * i), rows, out);
    }
}
