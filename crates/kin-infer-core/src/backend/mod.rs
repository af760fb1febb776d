//! The compute seam. Every operation a model family runs goes through [`GpuCompute`] (the
//! seed's name for the backend trait, also exported as [`Backend`]), on activations the
//! backend owns ([`Tensor`]): host memory for the CPU backend, device memory for a GPU one.
//! Activations cross only at the edges: token ids (and weights) in, logits, hidden states or
//! pooled embeddings out ([`GpuCompute::read`]). Small per-call parameters stay host slices
//! (ALiBi slopes, DeBERTa's relative index, position lists, rotary table rows): a GPU backend
//! uploads or caches them; none is an activation.
//!
//! What a new backend implements: this trait over its own [`Storage`] variant. What a model
//! family writes: a config parser and a forward built from the shared blocks in [`crate::nn`],
//! which call only these operations; no code outside `backend/` touches the CPU kernels (a
//! test, `tests/seam.rs`, enforces it).
//!
//! Views ([`View`], [`ViewMut`]) name a range of a tensor, so model code keeps the slice-like
//! `x.at(..rows * h)` shape of the CPU code it replaced, and a GPU backend binds an offset.

mod attention;
mod conv;
mod cpu;
mod cpu_views;
mod deberta;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod device;
/// The wgpu backend (`device::wgpu`), at the path callers know.
#[cfg(feature = "wgpu")]
pub use device::wgpu;

pub use conv::GroupedConv;
pub use cpu::CpuCompute;
pub use deberta::DisentangledTerms;

use crate::activations::{Activations, Numerics};
use crate::error::{InferError, Result};
use crate::io::safetensors::TensorData;
use crate::io::Activation;
pub use crate::kernels::StoredRows;
use crate::kernels::{PackedMatrix, Tier};
use crate::op_args::pooling::Pooling;
use crate::op_args::rotary::RotaryChunk;
use std::ops::{Bound, RangeBounds};

/// Where a tensor's floats live. One variant per backend compiled in; the CPU's is a plain
/// `Vec<f32>`, so the CPU path costs nothing for the abstraction.
#[non_exhaustive]
pub enum Storage {
    Host(Vec<f32>),
    /// Weights read in place from the mapped checkpoint (read-only).
    Mapped(TensorData),
    /// A GPU backend's buffer (boxed: the CPU's tensors stay small).
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    Device(Box<device::DeviceTensor>),
}

/// A flat `f32` buffer owned by a backend (activations, and the vectors of weights: norms,
/// biases, embedding tables). Shapes are the caller's: ops take rows and widths.
pub struct Tensor {
    storage: Storage,
}

fn bounds(r: impl RangeBounds<usize>, len: usize) -> (usize, usize) {
    let start = match r.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s + 1,
        Bound::Unbounded => 0,
    };
    let end = match r.end_bound() {
        Bound::Included(&e) => e + 1,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    assert!(
        start <= end && end <= len,
        "tensor range {start}..{end} out of 0..{len}"
    );
    (start, end - start)
}

impl Tensor {
    /// Floats held.
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Host(v) => v.len(),
            Storage::Mapped(t) => t.as_slice().len(),
            #[cfg(any(feature = "wgpu", feature = "cuda"))]
            Storage::Device(b) => b.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The floats `r` (like `&t[r]`).
    pub fn at(&self, r: impl RangeBounds<usize>) -> View<'_> {
        let (start, len) = bounds(r, self.len());
        View {
            t: self,
            start,
            len,
        }
    }

    /// The floats `r`, writable (like `&mut t[r]`).
    pub fn at_mut(&mut self, r: impl RangeBounds<usize>) -> ViewMut<'_> {
        let (start, len) = bounds(r, self.len());
        ViewMut {
            t: self,
            start,
            len,
        }
    }

    /// The whole tensor.
    pub fn view(&self) -> View<'_> {
        self.at(..)
    }
}

/// A range of a [`Tensor`], read-only.
#[derive(Clone, Copy)]
pub struct View<'a> {
    t: &'a Tensor,
    start: usize,
    len: usize,
}

impl<'a> View<'a> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A sub-range, relative to this view.
    pub fn at(&self, r: impl RangeBounds<usize>) -> View<'a> {
        let (start, len) = bounds(r, self.len);
        View {
            t: self.t,
            start: self.start + start,
            len,
        }
    }
}

/// A range of a [`Tensor`], writable.
pub struct ViewMut<'a> {
    t: &'a mut Tensor,
    start: usize,
    len: usize,
}

impl ViewMut<'_> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A sub-range, relative to this view (reborrows it).
    pub fn at_mut(&mut self, r: impl RangeBounds<usize>) -> ViewMut<'_> {
        let (start, len) = bounds(r, self.len);
        ViewMut {
            start: self.start + start,
            len,
            t: self.t,
        }
    }

    /// This range, read-only.
    pub fn as_view(&self) -> View<'_> {
        View {
            t: self.t,
            start: self.start,
            len: self.len,
        }
    }
}

/// A weight matrix prepared by a backend for `x · wᵀ` (packed panels on the CPU).
pub struct DeviceMatrix {
    n: usize,
    k: usize,
    inner: Inner,
}

/// Column groups in output order (one, unless the parts' storage formats differ).
enum Inner {
    Cpu(Vec<PackedMatrix>),
    /// f32 `[n, k]` per column group on a GPU, torch's layout.
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    Device(Vec<device::DeviceMatrixPart>),
}

impl DeviceMatrix {
    /// Matrices of the same input width side by side: their outputs in order.
    fn concat(mut groups: Vec<DeviceMatrix>) -> DeviceMatrix {
        if groups.len() == 1 {
            return groups.remove(0);
        }
        let k = groups.first().map_or(0, |g| g.k);
        assert!(
            groups.iter().all(|g| g.k == k),
            "concat: input widths differ"
        );
        let n = groups.iter().map(|g| g.n).sum();
        let mut inner = None::<Inner>;
        for g in groups {
            match (&mut inner, g.inner) {
                (None, first) => inner = Some(first),
                (Some(Inner::Cpu(all)), Inner::Cpu(parts)) => all.extend(parts),
                #[cfg(any(feature = "wgpu", feature = "cuda"))]
                (Some(Inner::Device(all)), Inner::Device(parts)) => all.extend(parts),
                #[cfg(any(feature = "wgpu", feature = "cuda"))]
                _ => panic!("concat: matrices of different backends"),
            }
        }
        DeviceMatrix {
            n,
            k,
            inner: inner.unwrap_or(Inner::Cpu(Vec::new())),
        }
    }

    /// Bytes the prepared weights occupy on their device.
    pub fn stored_bytes(&self) -> usize {
        match &self.inner {
            Inner::Cpu(parts) => parts.iter().map(PackedMatrix::stored_bytes).sum(),
            #[cfg(any(feature = "wgpu", feature = "cuda"))]
            Inner::Device(parts) => parts.iter().map(|p| p.bytes()).sum(),
        }
    }

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

/// An elementwise activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Silu,
    GeluErf,
    GeluTanh,
    Relu,
    /// Our tanh (`kernels::math`), never the platform's.
    Tanh,
}

impl From<Activation> for Act {
    fn from(a: Activation) -> Self {
        match a {
            Activation::GeluErf => Act::GeluErf,
            Activation::GeluTanh => Act::GeluTanh,
            Activation::Relu => Act::Relu,
        }
    }
}

/// An additive bias of bidirectional attention, as data: `score = (q·k)·scale + bias`.
/// Each kind depends only on the query, key and head inside one sequence (batch invariance).
pub enum AttnBias<'a> {
    /// T5's bucketed relative positions: a `[heads, 2·max_len − 1]` table over relative
    /// distance, key `j` of query `i` at column `(j − i) + max_len − 1`.
    Relative { table: &'a Tensor, max_len: usize },
    /// Symmetric ALiBi: `−(slope[head] · |i − j|)`.
    Alibi { slopes: &'a [f32] },
    /// A bias computed beforehand for every score (DeBERTa's disentangled terms, from
    /// [`GpuCompute::disentangled_bias`]): for each sequence of the attention's `seqs` in
    /// order, `heads × len × len` floats (head, query, key), from the tensor's start.
    Dense { bias: &'a Tensor },
}

/// Geometry and bias of bidirectional attention inside each sequence.
#[derive(Clone, Copy)]
pub struct SeqAttn<'a> {
    pub heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    pub bias: Option<&'a AttnBias<'a>>,
}

/// Geometry of causal attention over a KV cache.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// Sliding window: a query at position `p` attends to keys `p + 1 - w ..= p` (the `w` most
    /// recent positions, itself included, as transformers masks `kv > q - w`); `None` = all.
    pub window: Option<usize>,
    /// Attention-logit softcap (Gemma 2): each scaled score `s` becomes `tanh(s / cap) · cap`.
    pub softcap: Option<f32>,
}

/// The positions a rotary op rotates rows at.
#[derive(Clone, Copy, Debug)]
pub enum Positions<'a> {
    /// Row `r` at position `start + r` (a decoder chunk).
    From(usize),
    /// Row `r` at `pos[r]` (a packed batch of sequences).
    List(&'a [u32]),
}

impl Positions<'_> {
    /// The position of row `r`.
    pub fn at(&self, r: usize) -> usize {
        match self {
            Positions::From(start) => start + r,
            Positions::List(p) => p[r] as usize,
        }
    }
}

/// The features a rotary op rotates: in each of `rows` rows (row stride `stride`), the heads
/// of `head_dim` within the first `width` features (q and k of a fused `[q | k | v]`).
#[derive(Clone, Copy, Debug)]
pub struct RopeRows {
    pub rows: usize,
    pub stride: usize,
    pub width: usize,
    pub head_dim: usize,
}

/// One layer's cache: keys transposed `[kv_dim, capacity]` (a query's scores over consecutive
/// positions are one gemv in the GEMM's k order), values `[capacity, kv_dim]`.
pub struct KvView<'a> {
    pub keys: View<'a>,
    pub values: View<'a>,
    pub capacity: usize,
}

/// `rows` rows of a fused `[q | k | v]` buffer (q of `q_dim`, k and v of `kv_dim` each) at
/// positions `start..start + rows`: one decoder step's chunk.
#[derive(Clone, Copy)]
pub struct QkvRows<'a> {
    pub qkv: View<'a>,
    pub q_dim: usize,
    pub kv_dim: usize,
    pub rows: usize,
    pub start: usize,
}

impl QkvRows<'_> {
    /// Floats from one row to the next.
    pub fn stride(&self) -> usize {
        self.q_dim + 2 * self.kv_dim
    }
}

/// The arguments of [`GpuCompute::causal_attention`], by name.
pub struct CausalAttn<'a> {
    /// The chunk whose q rows attend.
    pub x: QkvRows<'a>,
    pub kv: KvView<'a>,
    pub scores: ViewMut<'a>,
    pub out: ViewMut<'a>,
}

/// [`GpuCompute::prepare_weights`] for a backend that prepares one format at a time:
/// consecutive parts of one format are prepared together by `prepare`, and a change of format
/// starts a new column group (a llama.cpp file may store a layer's q and k as Q4_K beside a
/// Q6_K v). Every output column is computed on its own, so the grouping changes no bits.
pub(crate) fn by_format(
    parts: &[StoredRows],
    prepare: impl FnMut(&[StoredRows]) -> Result<DeviceMatrix>,
) -> Result<DeviceMatrix> {
    let groups = parts
        .chunk_by(|a, b| a.format() == b.format())
        .map(prepare)
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceMatrix::concat(groups))
}

/// The shape of [`GpuCompute::matmul`]'s operands: `a` is `m` rows of `k` (row stride `lda`),
/// `b` is `k` rows of `n` (row stride `ldb`).
#[derive(Clone, Copy, Debug)]
pub struct MatmulShape {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub lda: usize,
    pub ldb: usize,
}

/// Operations a transformer forward pass needs, on backend-owned [`Tensor`]s laid out
/// row-major, one row per token of a packed batch (no padding rows). Every op computes each
/// row alone (batch invariance) and in one fixed order (bit-reproducibility).
pub trait GpuCompute: Send + Sync {
    /// "cpu", or the GPU backend's name.
    fn name(&self) -> &'static str;
    /// The device this backend computes on, for `describe`, `plan` and `bench` ("CPU" and
    /// its tier, or the GPU adapter).
    fn device(&self) -> String {
        format!("CPU ({})", self.tier().name())
    }
    /// A device failure since the backend was created (validation, out of memory, device
    /// lost) as a typed error. The engine calls it after each forward pass: a GPU backend
    /// cannot fail inside an op's signature, so it records the failure, returns NaN from
    /// reads, and reports it here. The CPU never fails this way.
    fn check(&self) -> Result<()> {
        Ok(())
    }
    /// The CPU kernel tier in use.
    fn tier(&self) -> Tier;
    /// The activation numerics of the matrices prepared so far (`activations.rs`): `Q8` once
    /// one ggml-quantized matrix takes 8-bit activations. The GPU backends run f32.
    fn numerics(&self) -> Numerics {
        Numerics::F32
    }

    // ---- memory: the edges --------------------------------------------------------------
    /// `len` zeros.
    fn zeros(&self, len: usize) -> Tensor;
    /// [`GpuCompute::zeros`] for a size derived from a request or a file (a KV cache, the
    /// attention scores of a long context): an allocation the machine refuses is a typed
    /// [`crate::InferError::OutOfMemory`], never an abort. A device backend records its
    /// failure for [`GpuCompute::check`] as it does for every op.
    fn try_zeros(&self, len: usize) -> Result<Tensor> {
        Ok(self.zeros(len))
    }
    /// Host data in (weights' vectors, tables).
    fn upload(&self, data: Vec<f32>) -> Tensor;
    /// A weight vector or table as loaded (the CPU reads a mapped one in place).
    fn upload_weights(&self, data: TensorData) -> Tensor {
        match data {
            TensorData::Owned(v) => self.upload(v),
            mapped => self.upload(mapped.as_slice().to_vec()),
        }
    }
    /// Host data out: the floats of `v`, borrowed where they already are in host memory, else
    /// copied into `staging`.
    fn read<'a>(&self, v: View<'a>, staging: &'a mut Vec<f32>) -> &'a [f32];
    /// `dst = src` (same length).
    fn copy(&self, src: View, dst: ViewMut);

    // ---- weights ------------------------------------------------------------------------
    /// Prepares torch `Linear` weights sharing the input width `k` (each part `rows × k`, in
    /// its stored format: [`StoredRows`]) as one matrix whose outputs are the parts' rows in
    /// order, for [`GpuCompute::linear`]. Each part stays in its storage where the backend
    /// can (the CPU widens half precision and dequantizes blocks inside its micro-kernels);
    /// backends that prepare one format at a time share [`by_format`].
    ///
    /// # Errors
    /// A part not whole rows of `k`, or block rows that are not whole blocks (the readers
    /// refuse such tensors first).
    fn prepare_weights(&self, parts: &[StoredRows], k: usize) -> Result<DeviceMatrix>;

    // ---- ops ----------------------------------------------------------------------------
    /// `out[r] = x[r] · wᵀ + bias` for `rows` rows (`x` holds `rows · w.k()`, `out`
    /// `rows · w.n()`).
    fn linear(&self, x: View, rows: usize, w: &DeviceMatrix, bias: Option<&Tensor>, out: ViewMut);
    /// `out = a · b` for two activations, neither packed, shaped by `s` ([`MatmulShape`]);
    /// `out` is `m × n` (stride `n`). Each element accumulates k in order, as
    /// [`GpuCompute::linear`] does, so the product has the bits of packing `b` as a weight.
    fn matmul(&self, a: View, b: View, s: MatmulShape, out: ViewMut);
    /// LayerNorm of every row (width `w.len()`), in place.
    fn layer_norm(&self, x: ViewMut, w: &Tensor, b: &Tensor, eps: f32);
    /// RMSNorm of every row of `x` into `out`: `w · (x · 1/sqrt(mean(x²) + eps))`, as
    /// transformers' `LlamaRMSNorm` and T5's round (Gemma's `1 + w` is folded into `w` at
    /// load).
    fn rms_norm(&self, x: View, w: &Tensor, eps: f32, out: ViewMut);
    /// Elementwise activation in place.
    fn activation(&self, x: ViewMut, act: Act);
    /// Gated linear unit: each row of `gate_up` is `[gate | up]` (`width` each); row `r` of
    /// `out` is `act(gate) · up`. `gate_up` is scratch (the gate is activated in place).
    fn glu(&self, gate_up: ViewMut, rows: usize, width: usize, act: Act, out: ViewMut);
    /// `x ·= y`, elementwise.
    fn mul(&self, x: ViewMut, y: View);
    /// `x += y`.
    fn add(&self, x: ViewMut, y: View);
    /// `x ·= s`.
    fn scale(&self, x: ViewMut, s: f32);
    /// `x = tanh(x / cap) · cap` (Gemma 2's final logit softcap).
    fn softcap(&self, x: ViewMut, cap: f32);
    /// Embedding lookup: row `r` of `out` is row `ids[r]` of `table` (`width` wide).
    fn gather(&self, table: &Tensor, width: usize, ids: &[u32], out: ViewMut);
    /// `out` row `i` = output feature `ids[i]` of a prepared matrix (its `k` weights, the
    /// torch weight's row), as the matrix's products use it: a token embedding table kept in
    /// its stored format (quantized, or the tied head itself) gathered without an f32 copy.
    fn gather_matrix_rows(&self, m: &DeviceMatrix, ids: &[u32], out: ViewMut);
    /// Row `r` of `out` += row `ids[r]` of `table`.
    fn gather_add(&self, table: &Tensor, width: usize, ids: &[u32], out: ViewMut);
    /// Rotates the heads `at` names in `x`, row `r` at `pos`'s position, with `rotary`'s
    /// tables (interleaved or neox, partial or full).
    fn rope(&self, x: ViewMut, at: RopeRows, pos: Positions, rotary: &RotaryChunk);
    /// Multi-head self-attention without masking inside each sequence: `qkv` holds per token
    /// `[q | k | v]`, each `heads · head_dim` wide; `out` gets `heads · head_dim` per token.
    /// Scores are `(q · k) · scale` plus `bias`, softmax over the sequence's own keys only.
    fn attention(&self, qkv: View, seqs: &[SeqSpan], shape: &SeqAttn, out: ViewMut);
    /// Appends the k and v of each row of `x` to one layer's cache at positions `x.start..`.
    fn kv_append(&self, x: QkvRows, keys: ViewMut, values: ViewMut);
    /// Causal attention of the q of each row of `a.x` (heads contiguous) at its position over
    /// one layer's cache `a.kv`, already holding positions `0..x.start + x.rows`; query head
    /// `h` reads kv head `h / (heads / kv_heads)` (GQA/MQA). `a.out` gets
    /// `[rows, heads · head_dim]`; `a.scores` is scratch of at least [`causal_scores_len`].
    /// Every (query, head) runs the same code whatever `rows` is, so decode equals prefill.
    fn causal_attention(&self, shape: &AttnShape, a: CausalAttn);
    /// Pools each sequence's rows of `x` (`hidden` wide) into a row of
    /// `pooling.output_dim(hidden)` of `out`.
    fn pool(&self, x: View, seqs: &[SeqSpan], hidden: usize, pooling: &Pooling, out: ViewMut);
    /// L2 normalization of each row (`width` wide), as `torch.nn.functional.normalize`.
    fn normalize(&self, x: ViewMut, width: usize);
    /// The first `keep` features of each of `rows` rows of `width` (Matryoshka truncation).
    fn narrow(&self, x: View, rows: usize, width: usize, keep: usize, out: ViewMut);
    /// Host data into an existing tensor range (an input window each call, with no new
    /// allocation: the edge runtime's contract).
    fn write(&self, src: &[f32], dst: ViewMut);
    /// `out[c][r] = x[r][c]` for `x` of `rows × cols`.
    fn transpose(&self, x: View, rows: usize, cols: usize, out: ViewMut);
    /// Softmax of every `width`-wide row in place (canonical max and sum, as attention's).
    fn softmax(&self, x: ViewMut, width: usize);
    /// `x[r] += s[r] · y[r]` for every `width`-wide row `r`, each element one fused
    /// multiply-add (a per-row scalar times a row: inMotion t_jepa's value tokens).
    fn row_axpy(&self, x: ViewMut, width: usize, s: View, y: View);

    // ---- DeBERTa ops ----
    /// Divides columns `from..from + width` of every `stride`-wide row of `x` by `s`. DeBERTa
    /// scales q (v1) or k (v2) inside the fused `[q | k | v]` rows before its products, as
    /// transformers does: a division, not a multiply by `1 / s`, so the bits are torch's.
    fn divide_columns(&self, x: ViewMut, stride: usize, from: usize, width: usize, s: f32);
    /// Grouped 1-D convolution over positions with same padding, inside each sequence of a
    /// packed batch (DeBERTa-v2's `ConvLayer`, inMotion sigreg's convolutions): each sequence
    /// is zero-padded by `(kernel − 1) / 2` rows at its own ends, so no row reads a
    /// neighbour's. `x` holds the batch's rows of `channels` inputs, `out` rows of
    /// `G · o` outputs; `groups[g]` is group `g`'s weight as [`GpuCompute::prepare_matrix`]
    /// rows `[o, kernel · c]` (`c = channels / G`), columns `(tap, input channel)`:
    /// `w_g[j][tap · c + i] = conv.weight[g · o + j][i][tap]`. Output `g · o + j` of row `t` is
    /// `Σ_(tap, i) w_g[j][tap · c + i] · x[t + tap − pad][g · c + i]`, accumulated in that
    /// order as [`GpuCompute::linear`] does, plus `bias[g · o + j]`.
    fn grouped_conv1d(&self, x: View, seqs: &[SeqSpan], conv: &GroupedConv, out: ViewMut);
    /// DeBERTa's disentangled relative-position bias ([`DisentangledTerms`] `t`: content→position
    /// and position→content scores) of every (sequence, head) of `seqs`, from the fused
    /// `[q | k | v]` rows of `qkv` (`t.heads · t.head_dim` each), into `out` laid out as
    /// [`AttnBias::Dense`] reads it: per sequence in order, `heads × len × len`. Both terms
    /// are GEMMs over activations and tables; computing them once into a buffer keeps the
    /// attention kernel generic.
    fn disentangled_bias(&self, qkv: View, seqs: &[SeqSpan], t: &DisentangledTerms, out: ViewMut);
}

/// The seam's name in new code.
pub use GpuCompute as Backend;

/// Score scratch [`GpuCompute::causal_attention`] needs for a cache of `capacity` positions.
pub fn causal_scores_len(heads: usize, capacity: usize) -> usize {
    attention::ATTN_CHUNK * heads * capacity
}

/// A GPU the process can see (`gpu::discover_devices`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDevice {
    /// The adapter's name ("NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub name: String,
    /// How it is reached: "wgpu/vulkan", "wgpu/metal", "wgpu/dx12".
    pub backend: String,
    /// "discrete GPU", "integrated GPU", "virtual GPU", "software (CPU)" or "other".
    pub kind: String,
    /// Driver name and version, where the API reports them.
    pub driver: String,
    /// A software rasterizer on the CPU (lavapipe, WARP): never chosen automatically.
    pub software: bool,
    /// The largest storage buffer one op may bind: bounds the largest weight tensor (wgpu
    /// reports no total memory).
    pub max_buffer_bytes: u64,
}

/// The GPUs this build can use on this machine (none without a GPU feature).
pub fn discover_devices() -> Vec<GpuDevice> {
    #[allow(unused_mut)]
    let mut all = Vec::new();
    #[cfg(feature = "cuda")]
    all.extend(device::cuda::devices());
    #[cfg(feature = "wgpu")]
    all.extend(wgpu::adapters());
    all
}

/// A backend choice: `KIN_INFER_BACKEND` / `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The first of: a hardware GPU through wgpu (Metal on macOS, else Vulkan or DX12), then
    /// the CPU. Never a software adapter.
    Auto,
    Cpu,
    /// wgpu on any adapter, a software one included (how CI tests the shaders on lavapipe).
    Wgpu,
    Cuda,
}

impl BackendChoice {
    /// Parses a `--backend` / `KIN_INFER_BACKEND` value.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => BackendChoice::Auto,
            "cpu" => BackendChoice::Cpu,
            "wgpu" | "metal" | "vulkan" => BackendChoice::Wgpu,
            "cuda" => BackendChoice::Cuda,
            other => {
                return Err(InferError::Input(format!(
                "unknown backend `{other}` (KIN_INFER_BACKEND / --backend: auto, cpu, wgpu, cuda)"
            )))
            }
        })
    }

    /// The process's choice: `KIN_INFER_FORCE_CPU=1` pins the CPU; else `KIN_INFER_BACKEND`
    /// (default auto). `KIN_INFER_CPU_BACKEND` (the seed's switch) accepts only `pure-rust`,
    /// the one CPU path there is.
    pub fn from_env() -> Result<Self> {
        if let Ok(v) = std::env::var("KIN_INFER_CPU_BACKEND") {
            if !v.is_empty() && v != "pure-rust" {
                return Err(InferError::Input(format!(
                    "KIN_INFER_CPU_BACKEND=`{v}`: the only CPU backend is `pure-rust` (no BLAS backend is built)"
                )));
            }
        }
        if std::env::var("KIN_INFER_FORCE_CPU").is_ok_and(|v| v == "1") {
            return Ok(BackendChoice::Cpu);
        }
        Self::parse(&std::env::var("KIN_INFER_BACKEND").unwrap_or_default())
    }
}

/// The backend to run on, chosen by [`BackendChoice::from_env`]; the CPU runs on `tier` or
/// else the process-wide tier. An explicit choice that this build or machine lacks is an
/// error; `auto` falls back to the CPU.
pub fn create_compute(tier: Option<Tier>) -> Result<Box<dyn GpuCompute>> {
    create_compute_with(tier, Activations::F32)
}

/// [`create_compute`] in an activation mode (`activations.rs`): with `Q8` the CPU packs
/// ggml-quantized matrices for 8-bit activations, and a GPU backend (f32 only) refuses it.
pub fn create_compute_with(tier: Option<Tier>, act: Activations) -> Result<Box<dyn GpuCompute>> {
    let cpu = || -> Result<Box<dyn GpuCompute>> { Ok(Box::new(CpuCompute::with(tier, act)?)) };
    match BackendChoice::from_env()? {
        BackendChoice::Cpu => cpu(),
        #[cfg(feature = "cuda")]
        BackendChoice::Cuda => on_gpu(Box::new(device::cuda::CudaCompute::new(0)?), act),
        #[cfg(not(feature = "cuda"))]
        BackendChoice::Cuda => Err(InferError::Unsupported(
            "the CUDA backend is not in this build (build with `--features cuda`)".into(),
        )),
        #[cfg(feature = "wgpu")]
        BackendChoice::Wgpu => on_gpu(Box::new(wgpu::WgpuCompute::new(true)?), act),
        #[cfg(not(feature = "wgpu"))]
        BackendChoice::Wgpu => Err(InferError::Unsupported(
            "the wgpu backend is not in this build (build with `--features wgpu`)".into(),
        )),
        // An explicit CPU tier asks for the CPU, and so do 8-bit activations (a CPU mode).
        BackendChoice::Auto if tier.is_some() || act == Activations::Q8 => cpu(),
        BackendChoice::Auto => auto().map_or_else(cpu, Ok),
    }
}

/// A GPU backend asked for by name: f32 activations only, so an explicit `Q8` is refused.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn on_gpu(be: Box<dyn GpuCompute>, activations: Activations) -> Result<Box<dyn GpuCompute>> {
    if activations == Activations::Q8 {
        return Err(InferError::Unsupported(format!(
            "activations q8 runs on the CPU backend only (KIN_INFER_BACKEND chose {}): use \
             auto or f32",
            be.name()
        )));
    }
    Ok(be)
}

/// `auto`'s walk: Metal (wgpu on macOS), then CUDA, then wgpu on Vulkan or DX12; `None`
/// leaves the CPU. Never a software adapter.
fn auto() -> Option<Box<dyn GpuCompute>> {
    #[cfg(all(feature = "wgpu", target_os = "macos"))]
    if let Ok(g) = wgpu::WgpuCompute::new(false) {
        return Some(Box::new(g));
    }
    #[cfg(feature = "cuda")]
    if let Ok(g) = device::cuda::CudaCompute::new(0) {
        return Some(Box::new(g));
    }
    #[cfg(all(feature = "wgpu", not(target_os = "macos")))]
    if let Ok(g) = wgpu::WgpuCompute::new(false) {
        return Some(Box::new(g));
    }
    None
}
