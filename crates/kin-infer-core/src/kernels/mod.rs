//! CPU kernels behind one dispatch table, chosen once at start-up by runtime CPU detection.
//!
//! Tiers: `generic` (portable Rust, the reference), x86-64 `avx2` (AVX2+FMA), x86-64 `avx512`
//! (F+BW+DQ+VL), aarch64 `neon`. The binary is built for the baseline target, so SIMD bodies are
//! `#[target_feature]` functions reached only through a table built after detection.
//! `KIN_INFER_SIMD=generic|avx2|avx512|neon` forces a tier.
//!
//! Determinism contract (ARCHITECTURE.md): every tier returns the generic tier's bits.
//! - GEMM: each output element accumulates p = 0, 1, …, k-1 in order with FMA from 0.0, then adds
//!   the bias; tiles, KC blocks, threads and m never change that sequence (see `gemm.rs`).
//! - Reductions: 16 canonical lanes (lane l takes elements l, l+16, …), then the fixed tree
//!   [`tree16`]; wider/narrower registers emulate exactly those 16 lanes.
//! - Transcendentals: one implementation over [`math::Lanes`], never libm.
//!
//! Composite kernels (layer_norm, softmax) are written once here from per-tier primitives, so
//! their formula sequence cannot drift between tiers.

/// The macros every SIMD tier builds its table and kernels with (before the tiers: textual scope).
#[macro_use]
mod tier_macros;

pub mod affine;
mod aligned;
mod blocks;
mod blocks_k;
mod dequant;
mod elementwise;
pub mod format;
mod gemm;
mod generic;
pub mod ggml;
pub mod math;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_q8;
#[cfg(target_arch = "aarch64")]
mod neon_quant;
mod packed;
mod panels;
pub mod q8_act;
mod q8_dot;
mod q8_gemm;
mod q8_lanes;
pub mod quantize;
mod quantize_k;
mod stored;
mod tile;
mod widen;
#[cfg(target_arch = "x86_64")]
mod x86_avx2;
#[cfg(target_arch = "x86_64")]
mod x86_avx512;
#[cfg(target_arch = "x86_64")]
mod x86_q8_lanes;
#[cfg(target_arch = "x86_64")]
mod x86_quant;
#[cfg(target_arch = "x86_64")]
mod x86_row4;
#[cfg(target_arch = "x86_64")]
mod x86_sse;

use crate::error::{InferError, Result};
use std::sync::OnceLock;

/// A SIMD tier. Every tier with FMA computes bit-identical results (see ARCHITECTURE.md);
/// `Sse`, for x86-64 CPUs without FMA, agrees within the golden tolerance ([`Tier::exact`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    Generic,
    Sse,
    Avx2,
    Avx512,
    Neon,
}

impl Tier {
    pub const ALL: [Tier; 5] = [
        Tier::Generic,
        Tier::Sse,
        Tier::Avx2,
        Tier::Avx512,
        Tier::Neon,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Generic => "generic",
            Tier::Sse => "sse",
            Tier::Avx2 => "avx2",
            Tier::Avx512 => "avx512",
            Tier::Neon => "neon",
        }
    }

    pub fn parse(s: &str) -> Option<Tier> {
        Tier::ALL
            .into_iter()
            .find(|t| t.name() == s.trim().to_ascii_lowercase())
    }

    /// Whether this CPU can run the tier.
    pub fn supported(self) -> bool {
        match self {
            Tier::Generic => true,
            #[cfg(target_arch = "x86_64")]
            Tier::Sse => std::arch::is_x86_feature_detected!("sse4.1"),
            #[cfg(target_arch = "x86_64")]
            Tier::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Tier::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "aarch64")]
            Tier::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// Whether the tier gives the exact (bit-identical) results: every tier with FMA does;
    /// `Sse` multiplies and adds separately, so it only agrees within tolerance.
    pub fn exact(self) -> bool {
        self != Tier::Sse
    }

    /// The tiers this CPU can run, best last.
    pub fn available() -> Vec<Tier> {
        Tier::ALL.into_iter().filter(|t| t.supported()).collect()
    }

    /// The exact tiers this CPU can run (what bit-identity tests compare), best last.
    pub fn available_exact() -> Vec<Tier> {
        Tier::ALL
            .into_iter()
            .filter(|t| t.exact() && t.supported())
            .collect()
    }

    /// The default tier: the best exact SIMD tier, else (no FMA) the fast SSE tier, else
    /// the generic reference.
    pub fn preferred() -> Tier {
        let exact = Tier::available_exact();
        match exact.last() {
            Some(t) if *t != Tier::Generic => *t,
            _ if Tier::Sse.supported() => Tier::Sse,
            _ => Tier::Generic,
        }
    }

    /// The table for a tier. Only called after `supported()` returned true: the SIMD entries
    /// are safe wrappers around `#[target_feature]` code, sound only on such a CPU.
    fn ops(self) -> &'static Ops {
        match self {
            #[cfg(target_arch = "x86_64")]
            Tier::Avx2 => &x86_avx2::OPS,
            #[cfg(target_arch = "x86_64")]
            Tier::Avx512 => &x86_avx512::OPS,
            #[cfg(target_arch = "x86_64")]
            Tier::Sse => &x86_sse::OPS,
            #[cfg(target_arch = "aarch64")]
            Tier::Neon => &neon::OPS,
            _ => &generic::OPS,
        }
    }
}

/// One tier's primitives. Plain function pointers: one indirect call per row-level kernel.
/// `(data, w, ldw, k, n)`: see [`Ops::pack_rows_f32`].
pub(crate) type PackRows = fn(&mut [f32], &[f32], usize, usize, usize);
/// See [`Ops::dequant`].
pub(crate) type DequantFn = unsafe fn(ggml::GgmlType, *const u8, usize, *mut f32) -> bool;

pub(crate) struct Ops {
    /// Micro-kernel register tile (rows × columns); `nr` is also the packed-B panel width.
    pub mr: usize,
    pub nr: usize,
    /// `kernels[format.index()][r - 1]` computes an r×NR tile (A panels packed r rows wide)
    /// over B panels stored in `format`, r = 1..=mr: a short row panel (decode's single row, a
    /// prompt's last rows) does only its own rows' work. Every variant accumulates each output
    /// element in the same k order, and a stored format's kernel gives the bits of the f32
    /// kernel over its dequantized values.
    pub kernels: PerFormat<&'static [gemm::MicroKernel]>,
    /// One row across four adjacent panels (decode's matrix-vector product): four times the
    /// independent accumulator chains of `kernel[0]`, so a single row is bound by memory, not
    /// by FMA latency. Same per-output k order. `None`: the driver calls `kernel[0]` per panel.
    pub row4: Option<PerFormat<gemm::Row4Kernel>>,
    /// Direct single-row kernels over block-quantized panels (`blocks.rs`'s interleaved
    /// layout), by type: the [`gemm::Row4Kernel`] contract (offsets and `bstride` in
    /// elements), each weight dequantized in registers to the reference's value. A type
    /// without one is dequantized into f32 panel rows for the f32 kernel.
    pub row4_quant: &'static [(ggml::GgmlType, gemm::Row4Kernel)],
    /// The tier's staging dequantizer for block panels (`(type, panel, kc, out)`, the
    /// contract of `blocks::dequant_slice`), returning false for a type it leaves to the
    /// scalar one. Exact values either way: only faster.
    pub dequant: Option<DequantFn>,
    /// The q8 numerics mode's kernel (`q8_gemm.rs`): a run of outputs of one activation row
    /// with the generic twin's bits. `None` (or a type it declines): the twin runs.
    pub q8: Option<q8_gemm::Q8Kernel>,
    /// Whether `q8` reads the lane layout (`q8_lanes.rs`) for the types it covers.
    pub q8_lanes: bool,
    pub sum: fn(&[f32]) -> f32,
    pub dot: fn(&[f32], &[f32]) -> f32,
    /// Canonical max (16 lanes, `a > b ? a : b`, tree16 order), -inf for an empty slice.
    pub max: fn(&[f32]) -> f32,
    /// `x[i] = exp(x[i] - s)`.
    pub exp_sub: fn(&mut [f32], f32),
    pub exp: fn(&mut [f32]),
    pub gelu_erf: fn(&mut [f32]),
    pub gelu_tanh: fn(&mut [f32]),
    pub silu: fn(&mut [f32]),
    pub tanh: fn(&mut [f32]),
    /// `x[i] -= s`.
    pub sub_scalar: fn(&mut [f32], f32),
    /// `x[i] *= s`.
    pub scale: fn(&mut [f32], f32),
    /// `x[i] += y[i]`.
    pub add: fn(&mut [f32], &[f32]),
    /// `x[i] = fma(a, y[i], x[i])`.
    pub axpy: fn(&mut [f32], f32, &[f32]),
    /// `out[j] = Σ_p a[p]·b[p·ldb + j]`, each output accumulating p = 0, 1, … in order with
    /// FMA from 0.0 (the GEMM's order): a row vector times a row-major matrix that is not
    /// packed (the KV cache's keys and values).
    pub gemv: fn(&[f32], &[f32], usize, &mut [f32]),
    /// `x[i] = fma(x[i] * s, w[i], b[i])`.
    pub affine: fn(&mut [f32], f32, &[f32], &[f32]),
    /// `x *= s` then softmax, in one function with the composite's exact operation sequence
    /// (canonical max, `exp(x - max)`, canonical sum, `* (1 / sum)`): short attention rows
    /// otherwise pay five calls and five passes. `None`: the composite runs.
    pub softmax_scaled: Option<fn(&mut [f32], f32)>,
    /// `(data, w, ldw, k, n)`: f32 B panels (width `nr`) from the `n` rows of `w` (row
    /// stride `ldw`, `k` values each), every element of `data` written; a copy, so it cannot
    /// change bits. `None`: the generic cache-blocked copy.
    pub pack_rows_f32: Option<PackRows>,
}

use format::PerFormat;
pub use format::WeightFormat;
pub use packed::PackedMatrix;
pub(crate) use panels::copy_short;
pub use stored::StoredRows;

/// The dispatch table.
pub struct Kernels {
    tier: Tier,
    ops: &'static Ops,
}

type Selected = std::result::Result<Kernels, (String, Vec<&'static str>)>;
static SELECTED: OnceLock<Selected> = OnceLock::new();

/// The process-wide kernels: the best tier present, or the one `KIN_INFER_SIMD` forces.
pub fn kernels() -> Result<&'static Kernels> {
    let sel = SELECTED.get_or_init(|| {
        let tier = match std::env::var("KIN_INFER_SIMD") {
            Ok(v) if !v.trim().is_empty() => match Tier::parse(&v) {
                Some(t) if t.supported() => t,
                _ => return Err((v, Tier::available().into_iter().map(Tier::name).collect())),
            },
            _ => Tier::preferred(),
        };
        Ok(Kernels {
            tier,
            ops: tier.ops(),
        })
    });
    sel.as_ref()
        .map_err(|(requested, available)| InferError::UnsupportedSimd {
            requested: requested.clone(),
            available: available.clone(),
        })
}

/// Kernels for one tier (tests compare tiers against each other).
pub fn for_tier(tier: Tier) -> Result<Kernels> {
    if !tier.supported() {
        return Err(InferError::UnsupportedSimd {
            requested: tier.name().into(),
            available: Tier::available().into_iter().map(Tier::name).collect(),
        });
    }
    Ok(Kernels {
        tier,
        ops: tier.ops(),
    })
}

impl Kernels {
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// Register tile of this tier's GEMM micro-kernel, `(mr, nr)`.
    pub fn gemm_tile(&self) -> (usize, usize) {
        (self.ops.mr, self.ops.nr)
    }

    /// Packs `w` (n rows of k, row stride `ldw`, i.e. a torch `Linear` weight) so that
    /// `matmul` computes `a · wᵀ`.
    pub fn pack_rows(&self, w: &[f32], n: usize, k: usize, ldw: usize) -> PackedMatrix {
        let mut m = PackedMatrix::empty();
        self.pack_rows_into(&mut m, w, n, k, ldw);
        m
    }

    /// f32 panels from contiguous weight rows (see [`panels::pack_col_slices`]).
    fn f32_panels<'a>(&self, k: usize, n: usize, row: impl Fn(usize) -> &'a [f32]) -> PackedMatrix {
        let nr = self.ops.nr;
        PackedMatrix {
            k,
            n,
            nr,
            buf: panels::Panels::f32(panels::pack_col_slices(nr, k, n, row)),
        }
    }

    /// [`Self::pack_rows`] into `dst`, reusing its allocation when large enough.
    pub fn pack_rows_into(
        &self,
        dst: &mut PackedMatrix,
        w: &[f32],
        n: usize,
        k: usize,
        ldw: usize,
    ) {
        if n > 0 && k > 0 {
            assert_fits(w.len(), n, k, ldw, "pack_rows: w");
        }
        let nr = self.ops.nr;
        let buf = panels::f32_panels_of(dst, k, n, nr);
        match self.ops.pack_rows_f32 {
            Some(fast) => {
                buf.reuse(n.div_ceil(nr) * k * nr);
                fast(buf.as_mut_slice(), w, ldw, k, n)
            }
            None => panels::fill_col_slices(buf, nr, k, n, |j| &w[j * ldw..j * ldw + k]),
        }
    }

    /// [`Self::pack_cols`] into `dst`, reusing its allocation when large enough.
    pub fn pack_cols_into(
        &self,
        dst: &mut PackedMatrix,
        b: &[f32],
        k: usize,
        n: usize,
        ldb: usize,
    ) {
        if n > 0 && k > 0 {
            assert_fits(b.len(), k, n, ldb, "pack_cols: b");
        }
        let nr = self.ops.nr;
        let buf = panels::f32_panels_of(dst, k, n, nr);
        panels::fill_row_slices(buf, nr, k, n, |p| &b[p * ldb..p * ldb + n]);
    }

    /// Packs `b` (k rows of n, row stride `ldb`) so that `matmul` computes `a · b`.
    pub fn pack_cols(&self, b: &[f32], k: usize, n: usize, ldb: usize) -> PackedMatrix {
        let mut m = PackedMatrix::empty();
        self.pack_cols_into(&mut m, b, k, n, ldb);
        m
    }

    /// `c[i][j] = bias[j] + Σ_p a[i][p]·b[p][j]` for m rows; `a` has row stride `lda`, `c` row
    /// stride `ldc`. Each element accumulates p = 0, 1, 2, … with FMA from 0.0, then adds the
    /// bias, whatever the tier, tile or thread. Parallel over output tiles on the current rayon
    /// pool (call inside `pool.install`). A matrix packed for the q8 numerics mode
    /// ([`Self::pack_weights_q8`]) instead quantizes each row of `a` and takes `q8_dot.rs`'s
    /// integer block dots, with the same independence of tier, thread and m.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul(
        &self,
        a: &[f32],
        lda: usize,
        m: usize,
        b: &PackedMatrix,
        bias: Option<&[f32]>,
        c: &mut [f32],
        ldc: usize,
    ) {
        // Packed by another tier: same values, other panel width. Correct, not fast. (q8
        // rows are the same for every tier.)
        let other_tier = !b.is_q8() && b.nr != self.ops.nr;
        let repacked = other_tier.then(|| b.repack(self.ops.nr));
        let b = repacked.as_ref().unwrap_or(b);
        let p = gemm::Product {
            a,
            lda,
            m,
            b,
            bias,
            ldc,
        };
        match b.q8_rows() {
            Some(rows) => q8_gemm::matmul(self.ops, p, rows, c),
            None => gemm::matmul(self.ops, p, c),
        }
    }

    /// Canonical sum: 16 lanes (lane l takes x[l], x[l+16], …), then a fixed pairwise tree.
    pub fn sum(&self, x: &[f32]) -> f32 {
        (self.ops.sum)(x)
    }

    /// Canonical dot product (FMA per lane, then the same tree as `sum`).
    pub fn dot(&self, x: &[f32], y: &[f32]) -> f32 {
        let n = x.len().min(y.len());
        (self.ops.dot)(&x[..n], &y[..n])
    }

    /// Canonical maximum (16 lanes, then the tree, each step `a > b ? a : b`): NaNs are
    /// ignored; `-inf` for an empty or all-NaN slice.
    pub fn max(&self, x: &[f32]) -> f32 {
        (self.ops.max)(x)
    }

    /// LayerNorm of one row in place (biased variance, as torch).
    pub fn layer_norm(&self, x: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
        let len = x.len();
        assert!(
            w.len() >= len && b.len() >= len,
            "layer_norm: w/b too short"
        );
        let n = len as f32;
        let mean = self.sum(x) / n;
        (self.ops.sub_scalar)(x, mean);
        let var = self.dot(x, x) / n;
        let inv = 1.0 / (var + eps).sqrt();
        (self.ops.affine)(x, inv, &w[..len], &b[..len]);
    }

    /// Softmax of one row in place: exp(x - max) with our exp, canonical sum, times 1/sum.
    pub fn softmax(&self, x: &mut [f32]) {
        self.softmax_scaled(x, 1.0)
    }

    /// `x *= s`, then [`Kernels::softmax`] (bit for bit the two calls; one pass fewer).
    pub fn softmax_scaled(&self, x: &mut [f32], s: f32) {
        if x.is_empty() {
            return;
        }
        if let Some(f) = self.ops.softmax_scaled {
            return f(x, s);
        }
        if s != 1.0 {
            self.scale(x, s);
        }
        let max = self.max(x);
        (self.ops.exp_sub)(x, max);
        let inv = 1.0 / self.sum(x);
        self.scale(x, inv);
    }

    /// GELU with the exact erf form, in place.
    pub fn gelu_erf(&self, x: &mut [f32]) {
        (self.ops.gelu_erf)(x)
    }

    /// GELU with the tanh approximation (`gelu_new`/`gelu_pytorch_tanh`), in place.
    pub fn gelu_tanh(&self, x: &mut [f32]) {
        (self.ops.gelu_tanh)(x)
    }

    /// SiLU (`x·sigmoid(x)`), in place.
    pub fn silu(&self, x: &mut [f32]) {
        (self.ops.silu)(x)
    }

    /// `x = exp(x)` with our exp ([`math::exp`]), in place.
    pub fn exp_inplace(&self, x: &mut [f32]) {
        (self.ops.exp)(x)
    }

    /// `x = tanh(x)` with our tanh ([`math::tanh`]), in place.
    pub fn tanh_inplace(&self, x: &mut [f32]) {
        (self.ops.tanh)(x)
    }

    /// `x *= s`
    pub fn scale(&self, x: &mut [f32], s: f32) {
        (self.ops.scale)(x, s)
    }

    /// `x += y`
    pub fn add(&self, x: &mut [f32], y: &[f32]) {
        let n = x.len().min(y.len());
        (self.ops.add)(&mut x[..n], &y[..n])
    }

    /// `out[j] = Σ_p a[p] · b[p·ldb + j]` for `j < out.len()`, `p < a.len()`: each output
    /// accumulates p in order with FMA from 0.0, as the GEMM does (bit-identical in every
    /// exact tier).
    pub fn gemv(&self, a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
        let (k, n) = (a.len(), out.len());
        if k == 0 || n == 0 {
            out.fill(0.0);
            return;
        }
        assert_fits(b.len(), k, n, ldb, "gemv: b");
        (self.ops.gemv)(a, b, ldb, out)
    }

    /// `c[i][j] = Σ_p a[i][p] · b[p][j]` for `m` rows of `k` (`a` row stride `lda`) times `b`'s
    /// `k` rows of `n` (row stride `ldb`), **neither operand packed**: for products of two
    /// activations (attention's `p · v`, a transposed cache's `q · kᵀ`), where packing would
    /// copy an operand used once. Each element accumulates p = 0, 1, … with FMA from 0.0, the
    /// order of [`Kernels::matmul`], so it equals packing `b` with [`Kernels::pack_cols`] and
    /// running the GEMM, bit for bit (tests/kernels.rs). Rows of a large product run in
    /// parallel, only inside a rayon pool, like the GEMM.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_unpacked(
        &self,
        a: &[f32],
        lda: usize,
        m: usize,
        k: usize,
        b: &[f32],
        ldb: usize,
        n: usize,
        c: &mut [f32],
        ldc: usize,
    ) {
        if m == 0 || n == 0 {
            return;
        }
        assert_fits(a.len(), m, k, lda, "matmul_unpacked: a");
        assert_fits(c.len(), m, n, ldc, "matmul_unpacked: c");
        let row = |i: usize, out: &mut [f32]| self.gemv(&a[i * lda..i * lda + k], b, ldb, out);
        // Forking pays only for large products (attention runs one per (sequence, head),
        // already in parallel); threads never change bits.
        if rayon::current_thread_index().is_some() && m > 1 && m * n * k >= 1 << 18 {
            use rayon::prelude::*;
            c.par_chunks_mut(ldc)
                .take(m)
                .enumerate()
                .for_each(|(i, r)| row(i, &mut r[..n]));
        } else {
            for (i, r) in c.chunks_mut(ldc).take(m).enumerate() {
                row(i, &mut r[..n]);
            }
        }
    }

    /// `x[i] = fma(a, y[i], x[i])` (one rounding per element, the same in every tier).
    pub fn axpy(&self, x: &mut [f32], a: f32, y: &[f32]) {
        let n = x.len().min(y.len());
        (self.ops.axpy)(&mut x[..n], a, &y[..n])
    }
}

/// The canonical reduction tree over 16 lanes: l[i] += l[i+8], then +4, +2, +1.
#[inline(always)]
/// Panics unless `rows` rows of `cols` values at row stride `ld` fit in a buffer of `len`:
/// the bounds check that makes each entry point's unsafe kernel calls sound (`what` names the
/// call and its operand in the message).
#[track_caller]
pub(crate) fn assert_fits(len: usize, rows: usize, cols: usize, ld: usize, what: &str) {
    let fits = rows == 0 || (ld >= cols && len >= (rows - 1) * ld + cols);
    assert!(fits, "{what} too short");
}

pub(crate) fn tree16(mut l: [f32; 16]) -> f32 {
    let mut w = 8;
    while w > 0 {
        for i in 0..w {
            l[i] += l[i + w];
        }
        w /= 2;
    }
    l[0]
}

/// The same tree with the canonical max (`a > b ? a : b`, a = lane i, b = lane i + w).
#[inline(always)]
pub(crate) fn tree16_max(mut l: [f32; 16]) -> f32 {
    let mut w = 8;
    while w > 0 {
        for i in 0..w {
            l[i] = if l[i] > l[i + w] { l[i] } else { l[i + w] };
        }
        w /= 2;
    }
    l[0]
}
