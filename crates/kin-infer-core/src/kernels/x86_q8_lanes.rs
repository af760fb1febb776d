//! The q8 kernels over the lane layout (`q8_lanes.rs`): output `j` of a group in 32-bit lane
//! `j`, so a block's integer sums for all eight outputs build up in one vector, with no
//! reduction across lanes, and the eight scales are one load. Per four activation codes
//! (broadcast to every lane): AVX2 multiplies with `vpmaddubsw` (Q4_0's pair sums stay in
//! i16 over the whole block: at most 8 · 2 · 15 · 127 = 30480, then one `vpmaddwd`), VNNI
//! (`vpdpbusd`, the AVX-512 tier where the CPU has it) straight into i32. Every sum is exact,
//! so the lanes hold the twin's `isum`, and the f32 steps are the twin's (`q8_dot::finish`'s
//! `fma(d·d_a, isum, acc)`), in each lane.
//!
//! Offsets come out through the activation's block sum `Σ a`: Q4_0's codes are `q − 8`,
//! Q8_0's are stored `+ 128` (unsigned, as VNNI wants; AVX2 flips them back and uses the
//! sign trick, whose pair sums reach 2 · 128 · 127 and so each go to i32 at once).

use super::ggml::GgmlType;
use super::q8_act::QuantRow;
use super::q8_gemm::{Q8Call, GROUP};
use std::arch::x86_64::*;

/// How a tier forms the block sums (AVX2's `vpmaddubsw` or VNNI's `vpdpbusd`).
trait Dot {
    /// Q4_0: lanes of `Σ q·a` over the block's eight code vectors `q[v]` (elements
    /// `4v..4v + 4` of each output) against the activation codes at `a`.
    unsafe fn q4(q: &[__m256i; 8], a: *const u8) -> __m256i;
    /// Q8_0: lanes of `Σ w·a` from the eight stored vectors `u[v]` (`w + 128`), `sa` the
    /// activation block's `Σ a`.
    unsafe fn q8(u: &[__m256i; 8], a: *const u8, sa: i32) -> __m256i;
}

/// Four activation codes from `a`, in every lane.
#[inline(always)]
unsafe fn four(a: *const u8) -> __m256i {
    _mm256_set1_epi32((a as *const i32).read_unaligned())
}

struct Avx2;
impl Dot for Avx2 {
    #[inline(always)]
    unsafe fn q4(q: &[__m256i; 8], a: *const u8) -> __m256i {
        let mut s16 = _mm256_setzero_si256();
        for (v, q) in q.iter().enumerate() {
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(*q, four(a.add(4 * v))));
        }
        _mm256_madd_epi16(s16, _mm256_set1_epi16(1))
    }
    #[inline(always)]
    unsafe fn q8(u: &[__m256i; 8], a: *const u8, _sa: i32) -> __m256i {
        let (flip, ones) = (_mm256_set1_epi8(-128), _mm256_set1_epi16(1));
        let mut s = _mm256_setzero_si256();
        for (v, u) in u.iter().enumerate() {
            let w = _mm256_xor_si256(*u, flip);
            let a = _mm256_sign_epi8(four(a.add(4 * v)), w);
            let p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), a);
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
        }
        s
    }
}

struct Vnni;
impl Dot for Vnni {
    #[inline(always)]
    unsafe fn q4(q: &[__m256i; 8], a: *const u8) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for (v, q) in q.iter().enumerate() {
            s = _mm256_dpbusd_epi32(s, *q, four(a.add(4 * v)));
        }
        s
    }
    #[inline(always)]
    unsafe fn q8(u: &[__m256i; 8], a: *const u8, sa: i32) -> __m256i {
        let mut s = _mm256_setzero_si256();
        for (v, u) in u.iter().enumerate() {
            s = _mm256_dpbusd_epi32(s, *u, four(a.add(4 * v)));
        }
        _mm256_sub_epi32(s, _mm256_set1_epi32(128 * sa))
    }
}

/// The call's type and activation row count as const parameters of `$f`.
macro_rules! dispatch {
    ($c:ident, $f:ident) => {{
        let Q8Call {
            t,
            w,
            cols,
            a,
            out,
            ldo,
            ..
        } = $c;
        let blocks = $c.row_bytes / t.block_bytes();
        macro_rules! rows {
            ($q8:literal) => {
                match a {
                    [a0] => $f::<$q8, 1>(w, blocks, [a0], cols, out, ldo),
                    [a0, a1] => $f::<$q8, 2>(w, blocks, [a0, a1], cols, out, ldo),
                    [a0, a1, a2] => $f::<$q8, 3>(w, blocks, [a0, a1, a2], cols, out, ldo),
                    [a0, a1, a2, a3] => $f::<$q8, 4>(w, blocks, [a0, a1, a2, a3], cols, out, ldo),
                    _ => return false,
                }
            };
        }
        match t {
            GgmlType::Q4_0 => rows!(false),
            GgmlType::Q8_0 => rows!(true),
            _ => return false,
        }
        true
    }};
}

/// [`super::q8_gemm::Q8Kernel`] over the lane layout, AVX2.
///
/// # Safety
/// As [`Q8Call`]'s contract, AVX2+FMA+F16C.
pub(crate) unsafe fn avx2(c: Q8Call) -> bool {
    dispatch!(c, avx2_rows)
}

/// [`super::q8_gemm::Q8Kernel`] over the lane layout, VNNI.
///
/// # Safety
/// As [`Q8Call`]'s contract, AVX-512 F/VL/VNNI with AVX2+FMA+F16C.
pub(crate) unsafe fn vnni(c: Q8Call) -> bool {
    dispatch!(c, vnni_rows)
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn avx2_rows<const Q8: bool, const R: usize>(
    w: *const u8,
    blocks: usize,
    a: [&QuantRow; R],
    cols: usize,
    out: *mut f32,
    ldo: usize,
) {
    run::<Avx2, Q8, R>(w, blocks, a, cols, out, ldo)
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
unsafe fn vnni_rows<const Q8: bool, const R: usize>(
    w: *const u8,
    blocks: usize,
    a: [&QuantRow; R],
    cols: usize,
    out: *mut f32,
    ldo: usize,
) {
    run::<Vnni, Q8, R>(w, blocks, a, cols, out, ldo)
}

/// A group's outputs for `R` activation rows: per block, the eight scales, the codes
/// unpacked once for all rows, then per row the lanes' exact sums and the twin's step.
#[inline(always)]
unsafe fn run<D: Dot, const Q8: bool, const R: usize>(
    w: *const u8,
    blocks: usize,
    a: [&QuantRow; R],
    cols: usize,
    out: *mut f32,
    ldo: usize,
) {
    debug_assert!((1..=GROUP).contains(&cols));
    let bb = if Q8 { 34 } else { 18 };
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        let base = w.add(b * GROUP * bb);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(base as *const __m128i));
        let codes = base.add(2 * GROUP);
        let load = |v: usize| _mm256_loadu_si256(codes.add(32 * v) as *const __m256i);
        let act = |r: usize| a[r].qs.as_ptr().add(32 * b) as *const u8;
        let sa = |r: usize| a[r].bsums[2 * b] + a[r].bsums[2 * b + 1];
        let isum: [__m256i; R] = if Q8 {
            let u: [__m256i; 8] = std::array::from_fn(load);
            std::array::from_fn(|r| D::q8(&u, act(r), sa(r)))
        } else {
            let low = _mm256_set1_epi8(0x0F);
            let x: [__m256i; 4] = std::array::from_fn(load);
            let q: [__m256i; 8] = std::array::from_fn(|v| match v % 2 {
                0 => _mm256_and_si256(x[v / 2], low),
                _ => _mm256_and_si256(_mm256_srli_epi16(x[v / 2], 4), low),
            });
            std::array::from_fn(|r| {
                _mm256_sub_epi32(D::q4(&q, act(r)), _mm256_set1_epi32(8 * sa(r)))
            })
        };
        for r in 0..R {
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(a[r].d[b]));
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[r]), acc[r]);
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), *acc);
        std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add(r * ldo), cols);
    }
}
