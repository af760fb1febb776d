//! The CPU backend: the seam's operations over the [`kernels`](crate::kernels) dispatch table
//! and the current rayon pool. Tensors are plain `Vec<f32>`s and views are slices of them, so
//! the abstraction costs nothing here.

use super::attention;
use super::conv;
use super::cpu_views::{cpu_groups, host, host_mut, whole};
use super::deberta;
use super::{
    by_format, Act, AttnBias, AttnShape, CausalAttn, DeviceMatrix, DisentangledTerms, GpuCompute,
    GroupedConv, Inner, MatmulShape, Positions, QkvRows, RopeRows, SeqAttn, SeqSpan, Storage,
    Tensor, View, ViewMut,
};
use crate::activations::{Activations, Numerics};
use crate::error::Result;
use crate::io::safetensors::TensorData;
use crate::kernels::{self, math, Kernels, StoredRows, Tier};
use crate::op_args::pooling::{Pooling, PoolingMode};
use crate::op_args::rotary::RotaryChunk;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// `len` zeros, or an error if the allocator refuses. Zeroed memory straight from the
/// allocator (as `vec![0.0; len]` gets it), so a large cache costs address space until it is
/// written, not resident pages.
fn try_zeroed_vec(len: usize) -> Result<Vec<f32>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let refused = || {
        let needed = (len as u64).saturating_mul(4);
        let (limit_bytes, limit) =
            crate::resource::memory_ceiling().unwrap_or((0, "the allocator"));
        crate::error::InferError::OutOfMemory {
            what: format!("a buffer of {len} floats"),
            needed_bytes: needed,
            limit_bytes,
            limit,
        }
    };
    let layout = std::alloc::Layout::array::<f32>(len).map_err(|_| refused())?;
    // SAFETY: the layout has a non-zero size (len > 0); a non-null result is `len` zeroed,
    // f32-aligned floats from the global allocator with exactly this layout, which is what
    // `Vec::from_raw_parts` requires (capacity = len, all initialized: zero bits are 0.0).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut f32;
        if p.is_null() {
            return Err(refused());
        }
        Ok(Vec::from_raw_parts(p, len, len))
    }
}

/// The CPU backend.
pub struct CpuCompute {
    k: &'static Kernels,
    /// Whether ggml-quantized matrices are packed for 8-bit activations (`activations.rs`).
    q8: bool,
    /// Whether one was (what [`GpuCompute::numerics`] reports).
    q8_used: AtomicBool,
}

impl CpuCompute {
    /// The process-wide tier (best present, or `KIN_INFER_SIMD`), f32 activations.
    pub fn new() -> Result<Self> {
        Ok(Self::on(kernels::kernels()?, Activations::F32))
    }

    /// A specific tier (error if this CPU lacks it), f32 activations.
    pub fn with_tier(tier: Tier) -> Result<Self> {
        Ok(Self::on(kernels_for(tier)?, Activations::F32))
    }

    /// `tier` (else the process-wide one) in the activation mode `activations`.
    pub fn with(tier: Option<Tier>, activations: Activations) -> Result<Self> {
        let k = match tier {
            Some(t) => kernels_for(t)?,
            None => kernels::kernels()?,
        };
        Ok(Self::on(k, activations))
    }

    fn on(k: &'static Kernels, activations: Activations) -> Self {
        CpuCompute {
            k,
            q8: activations.wants_q8(),
            q8_used: AtomicBool::new(false),
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

/// Rows per parallel task for row-wise work: enough to amortise scheduling.
const ROW_CHUNK: usize = 16;
/// Floats per parallel task for elementwise work (a multiple of every tier's lane count, so
/// the SIMD/tail split is the same as over the whole buffer).
const ELEM_CHUNK: usize = 4096;

/// Whether this thread runs inside a rayon pool. Ops split work across the pool only there;
/// outside one (the single-threaded edge runtime) they run on the calling thread, so no op
/// ever starts rayon's global pool. Splitting never changes bits: each chunk computes alone.
fn in_pool() -> bool {
    rayon::current_thread_index().is_some()
}

/// `f` over `chunk`-sized pieces of `x`.
fn each_mut(x: &mut [f32], chunk: usize, f: impl Fn(&mut [f32]) + Send + Sync) {
    if in_pool() {
        x.par_chunks_mut(chunk).for_each(f)
    } else {
        x.chunks_mut(chunk).for_each(f)
    }
}

/// `f` over matching pieces of `x` (`xc` long) and `y` (`yc` long).
fn each_zip(
    x: &mut [f32],
    xc: usize,
    y: &[f32],
    yc: usize,
    f: impl Fn(&mut [f32], &[f32]) + Send + Sync,
) {
    if in_pool() {
        x.par_chunks_mut(xc)
            .zip(y.par_chunks(yc))
            .for_each(|(a, b)| f(a, b))
    } else {
        x.chunks_mut(xc)
            .zip(y.chunks(yc))
            .for_each(|(a, b)| f(a, b))
    }
}

/// `f` over matching pieces of two writable buffers.
fn each_zip_mut(
    x: &mut [f32],
    xc: usize,
    y: &mut [f32],
    yc: usize,
    f: impl Fn(&mut [f32], &mut [f32]) + Send + Sync,
) {
    if in_pool() {
        x.par_chunks_mut(xc)
            .zip(y.par_chunks_mut(yc))
            .for_each(|(a, b)| f(a, b))
    } else {
        x.chunks_mut(xc)
            .zip(y.chunks_mut(yc))
            .for_each(|(a, b)| f(a, b))
    }
}

/// `f(index, piece)` over `chunk`-sized pieces of `x`.
fn each_indexed(x: &mut [f32], chunk: usize, f: impl Fn(usize, &mut [f32]) + Send + Sync) {
    if in_pool() {
        x.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i, c))
    } else {
        x.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c))
    }
}

fn act_slice(k: &Kernels, act: Act, x: &mut [f32]) {
    match act {
        Act::Silu => k.silu(x),
        Act::GeluErf => k.gelu_erf(x),
        Act::GeluTanh => k.gelu_tanh(x),
        Act::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        Act::Tanh => k.tanh_inplace(x),
    }
}

impl GpuCompute for CpuCompute {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn numerics(&self) -> Numerics {
        if self.q8_used.load(Ordering::Relaxed) {
            Numerics::Q8
        } else {
            Numerics::F32
        }
    }

    fn tier(&self) -> Tier {
        self.k.tier()
    }

    fn zeros(&self, len: usize) -> Tensor {
        Tensor {
            storage: Storage::Host(vec![0.0; len]),
        }
    }

    fn try_zeros(&self, len: usize) -> Result<Tensor> {
        Ok(Tensor {
            storage: Storage::Host(try_zeroed_vec(len)?),
        })
    }

    fn upload(&self, data: Vec<f32>) -> Tensor {
        Tensor {
            storage: Storage::Host(data),
        }
    }

    fn upload_weights(&self, data: TensorData) -> Tensor {
        Tensor {
            storage: Storage::Mapped(data),
        }
    }

    fn read<'a>(&self, v: View<'a>, _staging: &'a mut Vec<f32>) -> &'a [f32] {
        host(&v)
    }

    fn copy(&self, src: View, dst: ViewMut) {
        host_mut(dst).copy_from_slice(host(&src));
    }

    fn prepare_weights(&self, parts: &[StoredRows], k: usize) -> Result<DeviceMatrix> {
        by_format(parts, |run| {
            let q8 = self.q8
                && run[0]
                    .format()
                    .quant()
                    .is_some_and(|t| t.q8_activations().is_some());
            let packed = if q8 {
                self.q8_used.store(true, Ordering::Relaxed);
                self.k.pack_weights_q8(run, k)?
            } else {
                self.k.pack_weights(run, k)?
            };
            Ok(DeviceMatrix {
                n: packed.n(),
                k,
                inner: Inner::Cpu(vec![packed]),
            })
        })
    }

    fn linear(&self, x: View, rows: usize, w: &DeviceMatrix, bias: Option<&Tensor>, out: ViewMut) {
        let groups = cpu_groups(w);
        if rows == 0 {
            return;
        }
        let out = &mut host_mut(out)[..rows * w.n];
        let (x, bias) = (host(&x), bias.map(whole));
        // Column groups write their columns of each output row (row stride n).
        let mut j0 = 0;
        for p in groups {
            let b = bias.map(|b| &b[j0..j0 + p.n()]);
            let end = (rows - 1) * w.n + j0 + p.n();
            self.k.matmul(x, w.k, rows, p, b, &mut out[j0..end], w.n);
            j0 += p.n();
        }
    }

    fn matmul(&self, a: View, b: View, s: MatmulShape, out: ViewMut) {
        let MatmulShape { m, k, n, lda, ldb } = s;
        self.k
            .matmul_unpacked(host(&a), lda, m, k, host(&b), ldb, n, host_mut(out), n);
    }

    fn layer_norm(&self, x: ViewMut, w: &Tensor, b: &Tensor, eps: f32) {
        let (w, b) = (whole(w), whole(b));
        let width = w.len();
        each_mut(host_mut(x), width * ROW_CHUNK, |chunk| {
            for row in chunk.chunks_exact_mut(width) {
                self.k.layer_norm(row, w, b, eps);
            }
        });
    }

    fn rms_norm(&self, x: View, w: &Tensor, eps: f32, out: ViewMut) {
        let w = whole(w);
        let h = w.len();
        let k = self.k;
        each_zip(host_mut(out), h, host(&x), h, |o, x| {
            let n = x.len() as f32;
            let inv = 1.0 / (k.dot(x, x) / n + eps).sqrt();
            for ((o, &v), &g) in o.iter_mut().zip(x).zip(w) {
                *o = g * (v * inv);
            }
        });
    }

    fn activation(&self, x: ViewMut, act: Act) {
        each_mut(host_mut(x), ELEM_CHUNK, |c| act_slice(self.k, act, c));
    }

    fn glu(&self, gate_up: ViewMut, rows: usize, width: usize, act: Act, out: ViewMut) {
        let i = width;
        let k = self.k;
        let gate_up = &mut host_mut(gate_up)[..rows * 2 * i];
        each_zip_mut(
            &mut host_mut(out)[..rows * i],
            i,
            gate_up,
            2 * i,
            |hrow, gu| {
                let (gate, up) = gu.split_at_mut(i);
                act_slice(k, act, gate);
                for j in 0..i {
                    hrow[j] = gate[j] * up[j];
                }
            },
        );
    }

    fn mul(&self, x: ViewMut, y: View) {
        each_zip(host_mut(x), ELEM_CHUNK, host(&y), ELEM_CHUNK, |g, l| {
            g.iter_mut().zip(l).for_each(|(a, b)| *a *= b)
        });
    }

    fn add(&self, x: ViewMut, y: View) {
        each_zip(host_mut(x), ELEM_CHUNK, host(&y), ELEM_CHUNK, |a, b| {
            self.k.add(a, b)
        });
    }

    fn scale(&self, x: ViewMut, s: f32) {
        each_mut(host_mut(x), ELEM_CHUNK, |c| {
            c.iter_mut().for_each(|v| *v *= s)
        });
    }

    fn softcap(&self, x: ViewMut, cap: f32) {
        each_mut(host_mut(x), ELEM_CHUNK, |c| {
            for v in c {
                *v = math::tanh(*v / cap) * cap;
            }
        });
    }

    fn gather(&self, table: &Tensor, width: usize, ids: &[u32], out: ViewMut) {
        let t = whole(table);
        for (row, &id) in host_mut(out).chunks_exact_mut(width).zip(ids) {
            row.copy_from_slice(&t[id as usize * width..][..width]);
        }
    }

    fn gather_matrix_rows(&self, m: &DeviceMatrix, ids: &[u32], out: ViewMut) {
        let groups = cpu_groups(m);
        for (row, &id) in host_mut(out).chunks_exact_mut(m.k).zip(ids) {
            // The column group holding output `id`.
            let mut j = id as usize;
            for g in groups {
                if j < g.n() {
                    g.column_into(j, row);
                    break;
                }
                j -= g.n();
            }
        }
    }

    fn gather_add(&self, table: &Tensor, width: usize, ids: &[u32], out: ViewMut) {
        let t = whole(table);
        for (row, &id) in host_mut(out).chunks_exact_mut(width).zip(ids) {
            for (o, &e) in row.iter_mut().zip(&t[id as usize * width..][..width]) {
                *o += e;
            }
        }
    }

    fn rope(&self, x: ViewMut, at: RopeRows, pos: Positions, rotary: &RotaryChunk) {
        let stride = at.stride;
        each_indexed(&mut host_mut(x)[..at.rows * stride], stride, |r, row| {
            for head in row[..at.width].chunks_exact_mut(at.head_dim) {
                rotary.apply(head, pos.at(r));
            }
        });
    }

    fn attention(&self, qkv: View, seqs: &[SeqSpan], shape: &SeqAttn, out: ViewMut) {
        let heads = shape.heads;
        let bias = shape.bias.map(|b| match b {
            AttnBias::Relative { table, max_len } => attention::Bias::Relative {
                table: whole(table),
                max_len: *max_len,
            },
            AttnBias::Alibi { slopes } => attention::Bias::Alibi { slopes },
            AttnBias::Dense { bias } => attention::Bias::Dense {
                bias: whole(bias),
                offsets: deberta::dense_offsets(seqs, heads),
            },
        });
        attention::bidirectional(
            self.k,
            host(&qkv),
            seqs,
            heads,
            shape.head_dim,
            shape.scale,
            bias.as_ref(),
            host_mut(out),
        );
    }

    fn kv_append(&self, x: QkvRows, keys: ViewMut, values: ViewMut) {
        let (kc, vc) = (host_mut(keys), host_mut(values));
        let (q_dim, kv_dim, stride) = (x.q_dim, x.kv_dim, x.stride());
        let capacity = kc.len() / kv_dim;
        for (r, row) in host(&x.qkv)[..x.rows * stride]
            .chunks_exact(stride)
            .enumerate()
        {
            let t = x.start + r;
            for (c, &v) in row[q_dim..q_dim + kv_dim].iter().enumerate() {
                kc[c * capacity + t] = v;
            }
            vc[t * kv_dim..(t + 1) * kv_dim].copy_from_slice(&row[q_dim + kv_dim..]);
        }
    }

    fn causal_attention(&self, shape: &AttnShape, a: CausalAttn) {
        let CausalAttn { x, kv, scores, out } = a;
        attention::causal(
            self.k,
            shape,
            host(&x.qkv),
            x.stride(),
            x.rows,
            x.start,
            host(&kv.keys),
            host(&kv.values),
            kv.capacity,
            host_mut(scores),
            host_mut(out),
        );
    }

    fn pool(&self, x: View, seqs: &[SeqSpan], hidden: usize, pooling: &Pooling, out: ViewMut) {
        let x = host(&x);
        let o = pooling.output_dim(hidden);
        for (s, dst) in seqs.iter().zip(host_mut(out).chunks_exact_mut(o)) {
            pool_rows(
                pooling.modes(),
                &x[s.start * hidden..(s.start + s.len) * hidden],
                hidden,
                dst,
            );
        }
    }

    fn normalize(&self, x: ViewMut, width: usize) {
        for v in host_mut(x).chunks_exact_mut(width) {
            let norm = self.k.dot(v, v).sqrt().max(1e-12);
            for x in v.iter_mut() {
                *x /= norm;
            }
        }
    }

    fn narrow(&self, x: View, rows: usize, width: usize, keep: usize, out: ViewMut) {
        let x = host(&x);
        for (r, dst) in host_mut(out)[..rows * keep]
            .chunks_exact_mut(keep)
            .enumerate()
        {
            dst.copy_from_slice(&x[r * width..r * width + keep]);
        }
    }

    fn write(&self, src: &[f32], dst: ViewMut) {
        host_mut(dst).copy_from_slice(src);
    }

    fn transpose(&self, x: View, rows: usize, cols: usize, out: ViewMut) {
        let (x, out) = (host(&x), host_mut(out));
        for r in 0..rows {
            for c in 0..cols {
                out[c * rows + r] = x[r * cols + c];
            }
        }
    }

    fn softmax(&self, x: ViewMut, width: usize) {
        each_mut(host_mut(x), width * ROW_CHUNK, |chunk| {
            for row in chunk.chunks_exact_mut(width) {
                self.k.softmax(row);
            }
        });
    }

    fn row_axpy(&self, x: ViewMut, width: usize, s: View, y: View) {
        let (s, y) = (host(&s), host(&y));
        for ((row, &a), yr) in host_mut(x)
            .chunks_exact_mut(width)
            .zip(s)
            .zip(y.chunks_exact(width))
        {
            self.k.axpy(row, a, yr);
        }
    }

    // ---- DeBERTa ops (backend/deberta.rs) ----
    fn divide_columns(&self, x: ViewMut, stride: usize, from: usize, width: usize, s: f32) {
        deberta::divide_columns(host_mut(x), stride, from, width, s);
    }

    fn grouped_conv1d(&self, x: View, seqs: &[SeqSpan], conv: &GroupedConv, out: ViewMut) {
        conv::grouped_conv1d(self.k, host(&x), seqs, conv, host_mut(out));
    }

    fn disentangled_bias(&self, qkv: View, seqs: &[SeqSpan], t: &DisentangledTerms, out: ViewMut) {
        deberta::disentangled_bias(self.k, host(&qkv), seqs, t, host_mut(out));
    }
}

/// Pools one sequence's `states` (`len` rows of `hidden`, only its real tokens) into `out`
/// (`hidden` per mode, modes in order). Column sums run top to bottom, so a token's
/// contribution never depends on padding.
fn pool_rows(modes: &[PoolingMode], states: &[f32], hidden: usize, out: &mut [f32]) {
    let len = states.len() / hidden;
    let rows = || states.chunks_exact(hidden);
    // Column sums into `dst`, top to bottom from 0.0 (no scratch: the edge runtime pools
    // without allocating).
    let column_sum = |dst: &mut [f32]| {
        dst.fill(0.0);
        for r in rows() {
            for (a, b) in dst.iter_mut().zip(r) {
                *a += b;
            }
        }
    };
    for (m, dst) in modes.iter().zip(out.chunks_exact_mut(hidden)) {
        match m {
            PoolingMode::Cls => dst.copy_from_slice(&states[..hidden]),
            PoolingMode::LastToken => dst.copy_from_slice(&states[(len - 1) * hidden..]),
            PoolingMode::Max => {
                dst.fill(f32::NEG_INFINITY);
                for r in rows() {
                    for (a, b) in dst.iter_mut().zip(r) {
                        *a = a.max(*b);
                    }
                }
            }
            PoolingMode::Mean => {
                let n = len as f32;
                column_sum(dst);
                dst.iter_mut().for_each(|d| *d /= n);
            }
            PoolingMode::MeanSqrtLen => {
                let n = (len as f32).sqrt();
                column_sum(dst);
                dst.iter_mut().for_each(|d| *d /= n);
            }
            PoolingMode::WeightedMean => {
                // Weights 1..=len, as sentence-transformers' position-weighted mean.
                dst.fill(0.0);
                for (i, r) in rows().enumerate() {
                    let w = (i + 1) as f32;
                    for (a, b) in dst.iter_mut().zip(r) {
                        *a = b.mul_add(w, *a);
                    }
                }
                let total = (len * (len + 1) / 2) as f32;
                dst.iter_mut().for_each(|d| *d /= total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::try_zeroed_vec;

    #[test]
    fn an_allocation_the_machine_refuses_is_an_error_not_an_abort() {
        // Past isize::MAX bytes (no layout), and 1 EiB (more than even a 57-bit address space).
        for len in [usize::MAX / 2, 1usize << 58] {
            let e = try_zeroed_vec(len).unwrap_err().to_string();
            assert!(e.contains(&format!("a buffer of {len} floats")), "{e}");
        }
        assert!(try_zeroed_vec(0).unwrap().is_empty());
        let v = try_zeroed_vec(1000).unwrap();
        assert!(v.len() == 1000 && v.iter().all(|&x| x.to_bits() == 0));
    }
}
