//! The compute backend trait. Model code calls only these operations, so a GPU backend can be
//! added behind a cargo feature without touching any model file. The CPU backend implements
//! them over the [`kernels`](crate::kernels) dispatch table and the current rayon pool.
//!
//! (The seed name `GpuCompute` is kept because callers already use it; the CPU is simply the
//! first implementation.)

use crate::error::Result;
use crate::io::config::Activation;
use crate::io::safetensors::MatrixData;
use crate::kernels::{self, HalfFormat, Kernels, PackedMatrix, Tier};
use rayon::prelude::*;
use std::sync::OnceLock;

/// A weight matrix prepared by a backend for `x · wᵀ` (packed panels on the CPU).
pub struct DeviceMatrix {
    n: usize,
    k: usize,
    inner: Inner,
}

enum Inner {
    Cpu(PackedMatrix),
}

impl DeviceMatrix {
    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }
}

/// One sequence of a packed (unpadded) batch: rows `start..start + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpan {
    pub start: usize,
    pub len: usize,
}

/// An additive attention bias (relative positions, ALiBi, DeBERTa's disentangled terms),
/// added to the scaled scores before the softmax: `score = (q·k)·scale + bias`.
pub trait AttentionBias: Sync {
    /// Adds the bias of sequence `seq`, head `head`, query position `i` to `scores`, the row of
    /// that query over the sequence's keys `0..len`. It must depend only on that sequence
    /// (batch invariance).
    fn add_row(&self, seq: usize, head: usize, i: usize, scores: &mut [f32]);
}

/// Operations a transformer forward pass needs. Activations are host `f32` slices laid out
/// row-major, one row per token of a packed batch (no padding rows).
pub trait GpuCompute: Send + Sync {
    /// "cpu", or the GPU backend's name.
    fn name(&self) -> &'static str;
    /// The CPU kernel tier in use (host-side work runs on it even with a GPU backend).
    fn tier(&self) -> Tier {
        self.host_kernels().tier()
    }
    /// The CPU kernels host-side steps (pooling, normalization) run on.
    fn host_kernels(&self) -> &'static Kernels;
    /// Prepares torch `Linear` weights sharing the input width `k` (each `rows × k`) as one
    /// matrix whose outputs are the parts' rows in order, for [`GpuCompute::linear`].
    fn prepare_matrix(&self, parts: &[&[f32]], k: usize) -> DeviceMatrix;
    /// [`GpuCompute::prepare_matrix`] over weights stored as raw bf16/f16 bits, kept in that
    /// type where the backend can (the CPU widens them inside its micro-kernels). The default
    /// widens to f32.
    fn prepare_matrix_half(&self, parts: &[&[u16]], k: usize, format: HalfFormat) -> DeviceMatrix {
        let wide: Vec<Vec<f32>> = parts
            .iter()
            .map(|p| p.iter().map(|b| format.widen(*b)).collect())
            .collect();
        let refs: Vec<&[f32]> = wide.iter().map(|v| v.as_slice()).collect();
        self.prepare_matrix(&refs, k)
    }
    /// Prepares weights as loaded ([`MatrixData`]): half panels when every part is stored in
    /// the same half type, else f32.
    fn prepare_weights(&self, parts: &[&MatrixData], k: usize) -> DeviceMatrix {
        let fmt = match parts.first() {
            Some(MatrixData::Half(f, _)) => Some(*f),
            _ => None,
        };
        let half: Option<Vec<&[u16]>> = fmt.and_then(|f| {
            parts
                .iter()
                .map(|p| match p {
                    MatrixData::Half(g, bits) if *g == f => Some(bits.as_slice()),
                    _ => None,
                })
                .collect()
        });
        match (fmt, half) {
            (Some(f), Some(bits)) => self.prepare_matrix_half(&bits, k, f),
            _ => {
                let wide: Vec<_> = parts.iter().map(|p| p.to_f32()).collect();
                let refs: Vec<&[f32]> = wide.iter().map(|v| &**v).collect();
                self.prepare_matrix(&refs, k)
            }
        }
    }
    /// `out[r] = x[r] · wᵀ + bias` for `rows` rows.
    fn linear(
        &self,
        x: &[f32],
        rows: usize,
        w: &DeviceMatrix,
        bias: Option<&[f32]>,
        out: &mut [f32],
    );
    /// LayerNorm of every row of width `w.len()`, in place.
    fn layer_norm(&self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32);
    /// Elementwise activation in place.
    fn activation(&self, x: &mut [f32], act: Activation);
    /// `x += y`.
    fn add(&self, x: &mut [f32], y: &[f32]);
    /// Multi-head self-attention without masking inside each sequence: `qkv` holds per token
    /// `[q | k | v]`, each `heads * head_dim` wide; `out` gets `heads * head_dim` per token.
    /// Scores are `(q · k) * scale` plus `bias` when given, softmax over the sequence's own
    /// keys only.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        qkv: &[f32],
        seqs: &[SeqSpan],
        heads: usize,
        head_dim: usize,
        scale: f32,
        bias: Option<&dyn AttentionBias>,
        out: &mut [f32],
    );
}

/// The CPU backend.
pub struct CpuCompute {
    k: &'static Kernels,
}

impl CpuCompute {
    /// The process-wide tier (best present, or `KIN_INFER_SIMD`).
    pub fn new() -> Result<Self> {
        Ok(CpuCompute {
            k: kernels::kernels()?,
        })
    }

    /// A specific tier (error if this CPU lacks it).
    pub fn with_tier(tier: Tier) -> Result<Self> {
        Ok(CpuCompute {
            k: kernels_for(tier)?,
        })
    }

    pub fn kernels(&self) -> &'static Kernels {
        self.k
    }
}

/// Rows per parallel task for row-wise work: enough to amortise scheduling.
const ROW_CHUNK: usize = 16;

impl GpuCompute for CpuCompute {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn host_kernels(&self) -> &'static Kernels {
        self.k
    }

    fn prepare_matrix(&self, parts: &[&[f32]], k: usize) -> DeviceMatrix {
        let packed = self.k.pack_rows_concat(parts, k);
        DeviceMatrix {
            n: packed.n(),
            k,
            inner: Inner::Cpu(packed),
        }
    }

    fn prepare_matrix_half(&self, parts: &[&[u16]], k: usize, format: HalfFormat) -> DeviceMatrix {
        let packed = match format {
            HalfFormat::Bf16 => self.k.pack_rows_concat_bf16(parts, k),
            HalfFormat::F16 => self.k.pack_rows_concat_f16(parts, k),
        };
        DeviceMatrix {
            n: packed.n(),
            k,
            inner: Inner::Cpu(packed),
        }
    }

    fn linear(
        &self,
        x: &[f32],
        rows: usize,
        w: &DeviceMatrix,
        bias: Option<&[f32]>,
        out: &mut [f32],
    ) {
        let Inner::Cpu(p) = &w.inner;
        self.k.matmul(x, w.k, rows, p, bias, out, w.n);
    }

    fn layer_norm(&self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
        let width = w.len();
        x.par_chunks_mut(width * ROW_CHUNK).for_each(|chunk| {
            for row in chunk.chunks_exact_mut(width) {
                self.k.layer_norm(row, w, b, eps);
            }
        });
    }

    fn activation(&self, x: &mut [f32], act: Activation) {
        x.par_chunks_mut(4096).for_each(|c| match act {
            Activation::GeluErf => self.k.gelu_erf(c),
            Activation::GeluTanh => self.k.gelu_tanh(c),
            Activation::Relu => c.iter_mut().for_each(|v| *v = v.max(0.0)),
        });
    }

    fn add(&self, x: &mut [f32], y: &[f32]) {
        x.par_chunks_mut(4096)
            .zip(y.par_chunks(4096))
            .for_each(|(a, b)| self.k.add(a, b));
    }

    fn attention(
        &self,
        qkv: &[f32],
        seqs: &[SeqSpan],
        heads: usize,
        head_dim: usize,
        scale: f32,
        bias: Option<&dyn AttentionBias>,
        out: &mut [f32],
    ) {
        let hidden = heads * head_dim;
        let stride = 3 * hidden;
        let k = self.k;
        let tasks: Vec<(usize, usize)> = (0..seqs.len())
            .flat_map(|s| (0..heads).map(move |h| (s, h)))
            .collect();
        let results: Vec<Vec<f32>> = tasks
            .par_iter()
            .map(|&(s, h)| {
                let SeqSpan { start, len } = seqs[s];
                let base = start * stride + h * head_dim;
                let q = &qkv[base..];
                let keys = k.pack_rows(&qkv[base + hidden..], len, head_dim, stride);
                let mut scores = vec![0.0f32; len * len];
                k.matmul(q, stride, len, &keys, None, &mut scores, len);
                for (i, row) in scores.chunks_exact_mut(len).enumerate() {
                    match bias {
                        Some(b) => {
                            k.scale(row, scale);
                            b.add_row(s, h, i, row);
                            k.softmax(row);
                        }
                        None => k.softmax_scaled(row, scale),
                    }
                }
                let values = k.pack_cols(&qkv[base + 2 * hidden..], len, head_dim, stride);
                let mut ctx = vec![0.0f32; len * head_dim];
                k.matmul(&scores, len, len, &values, None, &mut ctx, head_dim);
                ctx
            })
            .collect();
        for (&(s, h), ctx) in tasks.iter().zip(&results) {
            let SeqSpan { start, len } = seqs[s];
            for i in 0..len {
                let dst = (start + i) * hidden + h * head_dim;
                out[dst..dst + head_dim].copy_from_slice(&ctx[i * head_dim..(i + 1) * head_dim]);
            }
        }
    }
}

/// One dispatch table per tier for the life of the process, so backends can hold `&'static`.
fn kernels_for(tier: Tier) -> Result<&'static Kernels> {
    static TABLES: [OnceLock<Kernels>; Tier::ALL.len()] =
        [const { OnceLock::new() }; Tier::ALL.len()];
    let slot = &TABLES[Tier::ALL.iter().position(|t| *t == tier).unwrap_or(0)];
    if let Some(k) = slot.get() {
        return Ok(k);
    }
    let k = kernels::for_tier(tier)?;
    Ok(slot.get_or_init(|| k))
}

/// The backend to run on: the CPU today, on `tier` or else the process-wide tier.
/// `KIN_INFER_FORCE_CPU=1` pins the CPU once GPU backends exist behind features.
pub fn create_compute(tier: Option<Tier>) -> Result<Box<dyn GpuCompute>> {
    let _force_cpu = std::env::var("KIN_INFER_FORCE_CPU").is_ok_and(|v| v == "1");
    Ok(Box::new(match tier {
        Some(t) => CpuCompute::with_tier(t)?,
        None => CpuCompute::new()?,
    }))
}
