//! x86-64 AVX-512 tier (F+BW+DQ+VL, with FMA): a 14×32 GEMM micro-kernel and 16-wide
//! elementwise/reduction kernels, each bit-identical to the generic tier.
//!
//! One zmm is exactly the 16 canonical reduction lanes, so reductions need no emulation; the
//! transcendentals come from `math.rs` over the [`Lanes`] impl below, op for op.

use super::elementwise::{self, Vector};
use super::gemm::TileCall;
use super::ggml::GgmlType;
use super::math::{self, Lanes};
use super::tile::{tile, F32Panel, Panel};
use super::x86_quant;
use super::x86_row4::{self, widen16, BF16, F16, F32};
use super::{tree16, tree16_max, Ops};
use std::arch::x86_64::*;

pub(crate) static OPS: Ops = tier_ops! {
    mr: MR,
    nr: NR,
    // How this tier runs a micro-kernel over each weight format (WeightFormat::index
    // order: F32, BF16, F16); each loads a panel row as f32 lanes its own way.
    kernels: [
        rows_table!(
            kernel_14x32,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        ),
        rows_table!(
            kernel_14x32_half::<true>,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        ),
        rows_table!(
            kernel_14x32_half::<false>,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        ),
    ],
    row4: Some([
        x86_row4::avx512::<F32>,
        x86_row4::avx512::<BF16>,
        x86_row4::avx512::<F16>,
    ]),
    q8: Some(super::x86_q8_lanes::avx512),
    q8_lanes: true,
    row4_quant: &[
        (
            GgmlType::Q4_0,
            x86_quant::avx512_row4::<{ GgmlType::Q4_0.code() }>,
        ),
        (
            GgmlType::Q4_1,
            x86_quant::avx512_row4::<{ GgmlType::Q4_1.code() }>,
        ),
        (
            GgmlType::Q8_0,
            x86_quant::avx512_row4::<{ GgmlType::Q8_0.code() }>,
        ),
        (
            GgmlType::Q5_0,
            x86_quant::avx512_row4::<{ GgmlType::Q5_0.code() }>,
        ),
        (
            GgmlType::Q5_1,
            x86_quant::avx512_row4::<{ GgmlType::Q5_1.code() }>,
        ),
        (
            GgmlType::Q4_K,
            x86_quant::avx512_row4::<{ GgmlType::Q4_K.code() }>,
        ),
        (
            GgmlType::Q5_K,
            x86_quant::avx512_row4::<{ GgmlType::Q5_K.code() }>,
        ),
        (
            GgmlType::Q6_K,
            x86_quant::avx512_row4::<{ GgmlType::Q6_K.code() }>,
        ),
    ],
    dequant: Some(x86_quant::avx512_dequant),
    softmax_scaled: Some(|x, s| unsafe { softmax_scaled(x, s) }),
    pack_rows_f32: None,
};

/// 16 lanes of f32. Private, and only created inside this module's `#[target_feature]`
/// functions, which is what makes the safe trait methods (intrinsics inside) sound.
#[derive(Clone, Copy)]
struct V(__m512);

lanes! {
    V, mask: __mmask16, width: 16,
    load: |p| _mm512_loadu_ps(p), store: |p, v| _mm512_storeu_ps(p, v),
    splat: |x| _mm512_set1_ps(x),
    add: _mm512_add_ps, sub: _mm512_sub_ps, mul: _mm512_mul_ps, div: _mm512_div_ps,
    fma: |a, b, c| _mm512_fmadd_ps(a, b, c),
    // imm 0x08: round to nearest even, exceptions suppressed, scale 2^0.
    round_even: |a| _mm512_roundscale_ps::<0x08>(a),
    abs: |a| _mm512_abs_ps(a),
    // The sign bit flipped and merged in the integer domain (AVX-512F has no float xor/and).
    neg: |a| _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(i32::MIN))),
    copysign: |a, s| {
        let sign = _mm512_set1_epi32(i32::MIN);
        let mag = _mm512_andnot_si512(sign, _mm512_castps_si512(a));
        _mm512_castsi512_ps(_mm512_or_si512(mag, _mm512_and_si512(sign, _mm512_castps_si512(s))))
    },
    gt: |a, b| _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b),
    is_nan: |a| _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a),
    none: |m| m == 0,
    all: |m| m == 0xffff,
    // blend takes the second source where the mask bit is set.
    select: |m, a, b| _mm512_mask_blend_ps(m, b, a),
    pow2i: |a| _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_cvtps_epi32(a), _mm512_set1_epi32(127)))),
}

/// Mask of the first `n` (< 16) lanes.
#[inline(always)]
fn tail_mask(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

/// Applies `$body` (an expression in `$v`) to every element: full vectors, then one masked
/// vector for the tail (inactive lanes compute on zeros and are not stored). A macro, not a
/// function taking a closure: a closure does not inherit `#[target_feature]`, so the math
/// would be compiled for baseline x86-64 with every intrinsic an out-of-line call.
macro_rules! map {
    ($x:expr, |$v:ident| $body:expr, |$s:ident| $sbody:expr) => {{
        let x: &mut [f32] = $x;
        let n = x.len();
        let p = x.as_mut_ptr();
        let mut i = 0;
        while i + 16 <= n {
            let $v = V(_mm512_loadu_ps(p.add(i)));
            _mm512_storeu_ps(p.add(i), ($body).0);
            i += 16;
        }
        if i < n {
            let m = tail_mask(n - i);
            let $v = V(_mm512_maskz_loadu_ps(m, p.add(i)));
            _mm512_mask_storeu_ps(p.add(i), m, ($body).0);
        }
        // The scalar form (the generic tier's) goes unused: the tail runs as vector lanes too.
        let _ = |$s: f32| $sbody;
    }};
}

tier_maps!("avx512f,avx512bw,avx512dq,avx512vl,fma");
tier_fused!("avx512f,avx512bw,avx512dq,avx512vl,fma");

/// Spills the 16 lanes for the scalar tail and tree (the tree is 15 scalar ops: cheaper to
/// keep in one place than to mirror with shuffles).
#[inline(always)]
unsafe fn lanes(v: __m512) -> [f32; 16] {
    let mut l = [0.0f32; 16];
    unsafe { _mm512_storeu_ps(l.as_mut_ptr(), v) };
    l
}

/// 14×32 register tile: 28 zmm accumulators + 2 for the B row; A values are broadcast from
/// memory (folded into the FMA). 28 FMAs per 16 loads keeps both FMA pipes busy.
const MR: usize = 14;
const NR: usize = 32;

/// AVX-512 micro-kernel; contract in [`super::gemm::MicroKernel`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn kernel_14x32<const R: usize>(t: TileCall) {
    unsafe { tile::<V, F32Panel, 2, R>(t) }
}

/// bf16 (`BF16`) or f16 B panels widened exactly in registers. bf16: one permute per 16
/// values puts value i in the high half of lane i and zeroes the low half (= bits << 16),
/// keeping the FMA ports free of widening work; f16: `vcvtph2ps`.
struct HalfPanel<const BF16: bool> {
    /// The permutes' indices: values 0-15 and 16-31 of a 32-value load.
    ilo: __m512i,
    ihi: __m512i,
}

impl<const BF16: bool> Panel<V> for HalfPanel<BF16> {
    type Elem = u16;
    #[inline(always)]
    unsafe fn new() -> Self {
        let mut lo = [0i16; 32];
        let mut hi = [0i16; 32];
        for i in 0..16 {
            lo[2 * i + 1] = i as i16;
            hi[2 * i + 1] = (16 + i) as i16;
        }
        unsafe {
            HalfPanel {
                ilo: _mm512_loadu_si512(lo.as_ptr() as *const _),
                ihi: _mm512_loadu_si512(hi.as_ptr() as *const _),
            }
        }
    }
    #[inline(always)]
    unsafe fn row<const NB: usize>(&self, p: *const u16) -> [V; NB] {
        let mut v = [V::splat(0.0); NB];
        for (j, x) in v.iter_mut().enumerate() {
            *x = V(unsafe {
                if BF16 {
                    // Each 32-value load feeds two vectors (NB is even: 2).
                    let w = _mm512_loadu_si512(p.add(32 * (j / 2)) as *const _);
                    let idx = if j % 2 == 0 { self.ilo } else { self.ihi };
                    _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAA_AAAA, idx, w))
                } else {
                    widen16::<false>(p.add(16 * j))
                }
            });
        }
        v
    }
}

/// AVX-512 micro-kernel over bf16/f16 B panels: [`kernel_14x32`] with each B row widened
/// exactly in registers; contract in [`super::gemm::MicroKernel`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn kernel_14x32_half<const BF16: bool, const R: usize>(t: TileCall) {
    unsafe { tile::<V, HalfPanel<BF16>, 2, R>(t) }
}

/// Fused `x *= s; softmax(x)`: the composite's exact sequence (see `Ops::softmax_scaled`),
/// tails by masked lanes (a masked-off lane keeps its accumulator, as the scalar tail does).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn softmax_scaled(x: &mut [f32], s: f32) {
    let n = x.len();
    let p = x.as_mut_ptr();
    let main = n - n % 16;
    let tail = tail_mask(n - main);
    unsafe {
        let sv = V::splat(s);
        let mut mx = V::splat(f32::NEG_INFINITY);
        for i in (0..main).step_by(16) {
            let v = V(_mm512_loadu_ps(p.add(i))).mul(sv);
            _mm512_storeu_ps(p.add(i), v.0);
            mx = v.max_(mx);
        }
        if main < n {
            let v = V(_mm512_maskz_loadu_ps(tail, p.add(main))).mul(sv);
            _mm512_mask_storeu_ps(p.add(main), tail, v.0);
            let v = V(_mm512_mask_blend_ps(
                tail,
                _mm512_set1_ps(f32::NEG_INFINITY),
                v.0,
            ));
            mx = v.max_(mx);
        }
        let m = V::splat(tree16_max(lanes(mx.0)));
        let mut acc = _mm512_setzero_ps();
        for i in (0..main).step_by(16) {
            let e = math::exp_v(V(_mm512_loadu_ps(p.add(i))).sub(m));
            _mm512_storeu_ps(p.add(i), e.0);
            acc = _mm512_add_ps(acc, e.0);
        }
        if main < n {
            let e = math::exp_v(V(_mm512_maskz_loadu_ps(tail, p.add(main))).sub(m));
            _mm512_mask_storeu_ps(p.add(main), tail, e.0);
            acc = _mm512_mask_add_ps(acc, tail, acc, e.0);
        }
        let inv = V::splat(1.0 / tree16(lanes(acc)));
        for i in (0..main).step_by(16) {
            _mm512_storeu_ps(p.add(i), V(_mm512_loadu_ps(p.add(i))).mul(inv).0);
        }
        if main < n {
            let v = V(_mm512_maskz_loadu_ps(tail, p.add(main))).mul(inv);
            _mm512_mask_storeu_ps(p.add(main), tail, v.0);
        }
    }
}

/// [`super::Ops::gemv`]: 64 outputs per pass (four independent accumulators), then 16,
/// then the scalar tail; every output accumulates p in order from 0.0.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
unsafe fn gemv(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    let n = out.len();
    let j = unsafe { elementwise::gemv_columns::<V>(a, b, ldb, out) };
    if j < n {
        // Masked lanes: the same per-output FMA sequence as the scalar reference.
        let m = tail_mask(n - j);
        unsafe {
            let mut acc = _mm512_setzero_ps();
            for (p, &ap) in a.iter().enumerate() {
                let row = _mm512_maskz_loadu_ps(m, b.as_ptr().add(p * ldb + j));
                acc = _mm512_fmadd_ps(_mm512_set1_ps(ap), row, acc);
            }
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(j), m, acc);
        }
    }
}
