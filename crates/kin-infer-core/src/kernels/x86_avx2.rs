//! x86-64 AVX2+FMA tier: a 6×16 GEMM micro-kernel and 8-wide elementwise/reduction kernels,
//! each bit-identical to the generic tier.
//!
//! The 16 canonical reduction lanes are two ymm registers (lanes 0-7 and 8-15) fed from each
//! 16-element chunk; elementwise tails run the scalar reference, which is inlined here so its
//! `mul_add` is the same FMA instruction.

use super::elementwise::{self, Vector};
use super::gemm::TileCall;
use super::generic;
use super::ggml::GgmlType;
use super::math::{self, Lanes};
use super::tile::{tile, F32Panel, Panel};
use super::x86_quant;
use super::x86_row4::{self, widen8, BF16, F16, F32};
use super::{tree16, tree16_max, Ops};
use std::arch::x86_64::*;

pub(crate) static OPS: Ops = tier_ops! {
    mr: MR,
    nr: NR,
    // How this tier runs a micro-kernel over each weight format (WeightFormat::index
    // order: F32, BF16, F16); each loads a panel row as f32 lanes its own way.
    kernels: [
        rows_table!(kernel_6x16, [1, 2, 3, 4, 5, 6]),
        rows_table!(kernel_6x16_half::<true>, [1, 2, 3, 4, 5, 6]),
        rows_table!(kernel_6x16_half::<false>, [1, 2, 3, 4, 5, 6]),
    ],
    row4: Some([
        x86_row4::avx2::<F32>,
        x86_row4::avx2::<BF16>,
        x86_row4::avx2::<F16>,
    ]),
    q8: Some(super::x86_q8_lanes::avx2),
    q8_lanes: true,
    row4_quant: &[
        (
            GgmlType::Q4_0,
            x86_quant::avx2_row4::<{ GgmlType::Q4_0.code() }>,
        ),
        (
            GgmlType::Q4_1,
            x86_quant::avx2_row4::<{ GgmlType::Q4_1.code() }>,
        ),
        (
            GgmlType::Q8_0,
            x86_quant::avx2_row4::<{ GgmlType::Q8_0.code() }>,
        ),
        (
            GgmlType::Q5_0,
            x86_quant::avx2_row4::<{ GgmlType::Q5_0.code() }>,
        ),
        (
            GgmlType::Q5_1,
            x86_quant::avx2_row4::<{ GgmlType::Q5_1.code() }>,
        ),
        (
            GgmlType::Q4_K,
            x86_quant::avx2_row4::<{ GgmlType::Q4_K.code() }>,
        ),
        (
            GgmlType::Q5_K,
            x86_quant::avx2_row4::<{ GgmlType::Q5_K.code() }>,
        ),
        (
            GgmlType::Q6_K,
            x86_quant::avx2_row4::<{ GgmlType::Q6_K.code() }>,
        ),
    ],
    dequant: Some(x86_quant::avx2_dequant),
    softmax_scaled: Some(|x, s| unsafe { softmax_scaled(x, s) }),
    pack_rows_f32: Some(|data, w, ldw, k, n| unsafe { pack_rows16(data, w, ldw, k, n) }),
};

/// 8 lanes of f32. Private, and only created inside this module's `#[target_feature]`
/// functions, which is what makes the safe trait methods (intrinsics inside) sound.
#[derive(Clone, Copy)]
struct V(__m256);

lanes! {
    V, mask: __m256, width: 8,
    load: |p| _mm256_loadu_ps(p), store: |p, v| _mm256_storeu_ps(p, v),
    splat: |x| _mm256_set1_ps(x),
    add: _mm256_add_ps, sub: _mm256_sub_ps, mul: _mm256_mul_ps, div: _mm256_div_ps,
    fma: |a, b, c| _mm256_fmadd_ps(a, b, c),
    // _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC
    round_even: |a| _mm256_round_ps::<0x08>(a),
    abs: |a| _mm256_andnot_ps(_mm256_set1_ps(-0.0), a),
    neg: |a| _mm256_xor_ps(_mm256_set1_ps(-0.0), a),
    copysign: |a, s| _mm256_or_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0), a), _mm256_and_ps(_mm256_set1_ps(-0.0), s)),
    gt: |a, b| _mm256_cmp_ps::<_CMP_GT_OQ>(a, b),
    is_nan: |a| _mm256_cmp_ps::<_CMP_UNORD_Q>(a, a),
    none: |m| _mm256_movemask_ps(m) == 0,
    all: |m| _mm256_movemask_ps(m) == 0xff,
    // blendv takes the second source where the mask lane's sign bit is set.
    select: |m, a, b| _mm256_blendv_ps(b, a, m),
    pow2i: |a| _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(a), _mm256_set1_epi32(127)))),
}

/// Applies `$vbody` (in `$v`) to full vectors and `$sbody` (in `$s`) to the scalar tail. A
/// macro, not a function taking closures: a closure does not inherit `#[target_feature]`, so
/// the vector math would be compiled for the baseline target with out-of-line intrinsics.
macro_rules! map {
    ($x:expr, |$v:ident| $vbody:expr, |$s:ident| $sbody:expr) => {{
        let x: &mut [f32] = $x;
        let n = x.len();
        let main = n - n % 8;
        let p = x.as_mut_ptr();
        for i in (0..main).step_by(8) {
            let $v = V(_mm256_loadu_ps(p.add(i)));
            _mm256_storeu_ps(p.add(i), ($vbody).0);
        }
        if main < n {
            // The tail as one masked vector: every tier's math is one op sequence over
            // `Lanes`, so a lane computes the scalar path's bits (`$sbody`, kept as the
            // reference). Masked lanes read 0.0 and are never stored. Short rows (attention's
            // 42 keys) otherwise pay a scalar exp per tail element.
            let mask = tail_mask8(n - main);
            let $v = V(_mm256_maskload_ps(p.add(main), mask));
            _mm256_maskstore_ps(p.add(main), mask, ($vbody).0);
        }
        let _ = |$s: f32| $sbody;
    }};
}

tier_maps!("avx2,fma");
tier_fused!("avx2,fma");

/// Lanes `0..rem` of a 256-bit mask set (`rem` <= 8).
#[inline(always)]
unsafe fn tail_mask8(rem: usize) -> __m256i {
    const ON: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];
    // SAFETY: rem <= 8, so the 8 lanes read lie inside ON.
    unsafe { _mm256_loadu_si256(ON.as_ptr().add(8 - rem).cast()) }
}

/// Spills the two ymm (canonical lanes 0-7, 8-15) for the scalar tail and tree.
#[inline(always)]
unsafe fn lanes(lo: __m256, hi: __m256) -> [f32; 16] {
    let mut l = [0.0f32; 16];
    unsafe {
        _mm256_storeu_ps(l.as_mut_ptr(), lo);
        _mm256_storeu_ps(l.as_mut_ptr().add(8), hi);
    }
    l
}

/// Fused `x *= s; softmax(x)`: the composite's exact sequence (see `Ops::softmax_scaled`):
/// the max and the sum over the 16 canonical lanes (`lo` = lanes 0-7, `hi` = 8-15), the
/// tail as masked lanes that leave their accumulator as the scalar tail would. One call
/// instead of four: attention's rows are short (inMotion t_jepa: 42 keys), where the calls
/// and the reloads cost as much as the exps.
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_scaled(x: &mut [f32], s: f32) {
    let n = x.len();
    let p = x.as_mut_ptr();
    let main = n - n % 16;
    let rem = n - main;
    // Tail: lanes 0..rem of the pair (lo, hi), each with its own mask.
    let (mlo, mhi) = unsafe { (tail_mask8(rem.min(8)), tail_mask8(rem.saturating_sub(8))) };
    unsafe {
        let (mlo_f, mhi_f) = (_mm256_castsi256_ps(mlo), _mm256_castsi256_ps(mhi));
        let sv = V::splat(s);
        let ninf = V::splat(f32::NEG_INFINITY);
        let (mut lo, mut hi) = (ninf, ninf);
        for i in (0..main).step_by(16) {
            let a = V(_mm256_loadu_ps(p.add(i))).mul(sv);
            let b = V(_mm256_loadu_ps(p.add(i + 8))).mul(sv);
            _mm256_storeu_ps(p.add(i), a.0);
            _mm256_storeu_ps(p.add(i + 8), b.0);
            lo = a.max_(lo);
            hi = b.max_(hi);
        }
        if rem > 0 {
            let a = V(_mm256_maskload_ps(p.add(main), mlo)).mul(sv);
            let b = V(_mm256_maskload_ps(p.add(main + 8), mhi)).mul(sv);
            _mm256_maskstore_ps(p.add(main), mlo, a.0);
            _mm256_maskstore_ps(p.add(main + 8), mhi, b.0);
            lo = V::select(mlo_f, a, ninf).max_(lo);
            hi = V::select(mhi_f, b, ninf).max_(hi);
        }
        let m = V::splat(tree16_max(lanes(lo.0, hi.0)));
        let (mut slo, mut shi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..main).step_by(16) {
            let a = math::exp_v(V(_mm256_loadu_ps(p.add(i))).sub(m));
            let b = math::exp_v(V(_mm256_loadu_ps(p.add(i + 8))).sub(m));
            _mm256_storeu_ps(p.add(i), a.0);
            _mm256_storeu_ps(p.add(i + 8), b.0);
            slo = _mm256_add_ps(slo, a.0);
            shi = _mm256_add_ps(shi, b.0);
        }
        if rem > 0 {
            let a = math::exp_v(V(_mm256_maskload_ps(p.add(main), mlo)).sub(m));
            let b = math::exp_v(V(_mm256_maskload_ps(p.add(main + 8), mhi)).sub(m));
            _mm256_maskstore_ps(p.add(main), mlo, a.0);
            _mm256_maskstore_ps(p.add(main + 8), mhi, b.0);
            // A masked-off lane adds +0.0: exact, since a sum of exps is never -0.0.
            slo = _mm256_add_ps(slo, _mm256_and_ps(a.0, mlo_f));
            shi = _mm256_add_ps(shi, _mm256_and_ps(b.0, mhi_f));
        }
        let inv = V::splat(1.0 / tree16(lanes(slo, shi)));
        for i in (0..main).step_by(8) {
            _mm256_storeu_ps(p.add(i), V(_mm256_loadu_ps(p.add(i))).mul(inv).0);
        }
        if rem > 0 {
            let a = V(_mm256_maskload_ps(p.add(main), mlo)).mul(inv);
            let b = V(_mm256_maskload_ps(p.add(main + 8), mhi)).mul(inv);
            _mm256_maskstore_ps(p.add(main), mlo, a.0);
            _mm256_maskstore_ps(p.add(main + 8), mhi, b.0);
        }
    }
}

/// The 8×8 transpose of `r` (`out[q]` lane `i` = `r[i]` lane `q`): unpack pairs of rows,
/// shuffle pairs of pairs, then swap 128-bit halves.
#[inline(always)]
unsafe fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    unsafe {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]); // a0 b0 a1 b1 | a4 b4 a5 b5
        let t1 = _mm256_unpackhi_ps(r[0], r[1]); // a2 b2 a3 b3 | a6 b6 a7 b7
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2); // a0 b0 c0 d0 | a4 b4 c4 d4
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2); // a1 .. d1 | a5 .. d5
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let v0 = _mm256_shuffle_ps::<0x44>(t4, t6); // e0 f0 g0 h0 | e4 f4 g4 h4
        let v1 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let v2 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let v3 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, v0),
            _mm256_permute2f128_ps::<0x20>(u1, v1),
            _mm256_permute2f128_ps::<0x20>(u2, v2),
            _mm256_permute2f128_ps::<0x20>(u3, v3),
            _mm256_permute2f128_ps::<0x31>(u0, v0),
            _mm256_permute2f128_ps::<0x31>(u1, v1),
            _mm256_permute2f128_ps::<0x31>(u2, v2),
            _mm256_permute2f128_ps::<0x31>(u3, v3),
        ]
    }
}

/// f32 B panels from the rows of `w` (`n` rows of `k`, row stride `ldw`; row j is column j
/// of B), into `data` (`n.div_ceil(16)·k·16` floats, every one written): each full group of 8
/// columns by 8×8 register transposes, the rest (a short last panel) by scalar copies and
/// zero padding. Attention packs each head's keys this way per call.
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_rows16(data: &mut [f32], w: &[f32], ldw: usize, k: usize, n: usize) {
    let panels = n.div_ceil(NR);
    assert!(data.len() >= panels * k * NR);
    assert!(n == 0 || k == 0 || (ldw >= k && w.len() >= (n - 1) * ldw + k));
    let (src, dst) = (w.as_ptr(), data.as_mut_ptr());
    // SAFETY: reads at j·ldw + p with j < n and p < k, writes below panels·k·16: inside the
    // lengths asserted above.
    unsafe {
        for jp in 0..panels {
            let panel = dst.add(jp * k * NR);
            for g in 0..NR / 8 {
                let j0 = jp * NR + g * 8;
                let cols = n.saturating_sub(j0).min(8);
                let mut p = 0;
                if cols == 8 {
                    while p + 8 <= k {
                        let t = transpose8(core::array::from_fn(|i| {
                            _mm256_loadu_ps(src.add((j0 + i) * ldw + p))
                        }));
                        for (q, v) in t.iter().enumerate() {
                            _mm256_storeu_ps(panel.add((p + q) * NR + g * 8), *v);
                        }
                        p += 8;
                    }
                }
                for p in p..k {
                    for i in 0..8 {
                        *panel.add(p * NR + g * 8 + i) = if i < cols {
                            *src.add((j0 + i) * ldw + p)
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    }
}

/// 6×16 register tile: 12 ymm accumulators + 2 for the B row + 1 broadcast of 16 registers.
const MR: usize = 6;
const NR: usize = 16;

/// AVX2 micro-kernel; contract in [`super::gemm::MicroKernel`].
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_6x16<const R: usize>(t: TileCall) {
    unsafe { tile::<V, F32Panel, 2, R>(t) }
}

/// bf16 (`BF16`) or f16 B panels, each 8 values widened exactly in registers.
struct HalfPanel<const BF16: bool>;

impl<const BF16: bool> Panel<V> for HalfPanel<BF16> {
    type Elem = u16;
    #[inline(always)]
    unsafe fn new() -> Self {
        HalfPanel
    }
    #[inline(always)]
    unsafe fn row<const NB: usize>(&self, p: *const u16) -> [V; NB] {
        let mut v = [V::splat(0.0); NB];
        for (j, x) in v.iter_mut().enumerate() {
            *x = V(unsafe { widen8::<BF16>(p.add(8 * j)) });
        }
        v
    }
}

/// AVX2 micro-kernel over bf16/f16 B panels: [`kernel_6x16`] with each B row widened exactly
/// in registers; contract in [`super::gemm::MicroKernel`]. The tier requires F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn kernel_6x16_half<const BF16: bool, const R: usize>(t: TileCall) {
    unsafe { tile::<V, HalfPanel<BF16>, 2, R>(t) }
}

/// [`super::Ops::gemv`]: 32 outputs per pass (four independent accumulators), then 8,
/// then the scalar tail; every output accumulates p in order from 0.0.
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    let n = out.len();
    let j = unsafe { elementwise::gemv_columns::<V>(a, b, ldb, out) };
    if j < n {
        generic::gemv(a, &b[j..], ldb, &mut out[j..]);
    }
}
