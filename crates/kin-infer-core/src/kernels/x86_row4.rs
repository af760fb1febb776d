//! The x86-64 decode kernels of one row × four panels ([`Row4Call`]) for the
//! AVX2 and AVX-512 tiers, written once over the register width ([`Wide`]): the two tiers'
//! bodies differed only in it. A leaf module: the tier tables (`x86_avx2.rs`,
//! `x86_avx512.rs`) and the block-format kernels (`x86_quant.rs`, which shares
//! [`store`]) import it, and it imports none of them.
//!
//! Each body is `#[inline(always)]` and called only from a per-tier `#[target_feature]`
//! entry point, so it is compiled with that tier's features, as the per-tier copies were; the
//! operation order per lane (one FMA per panel element, in k order) is the same on both.

use super::gemm::Row4Call;
use std::arch::x86_64::*;

/// One x86 register width of f32 lanes: the few operations the row4 bodies use. The methods
/// are unsafe: they are sound only inside a function compiled with the tier's features.
pub(super) trait Wide {
    type R: Copy;
    /// f32 lanes per register; a panel row (the tier's NR) is two registers.
    const W: usize;
    unsafe fn zero() -> Self::R;
    unsafe fn load(p: *const f32) -> Self::R;
    unsafe fn store(p: *mut f32, v: Self::R);
    unsafe fn add(a: Self::R, b: Self::R) -> Self::R;
    /// `a * b + c` with one rounding.
    unsafe fn fma(a: Self::R, b: Self::R, c: Self::R) -> Self::R;
    /// `*p` in every lane.
    unsafe fn bcast(p: *const f32) -> Self::R;
    /// `W` bf16 (`BF16`) or f16 values at `p`, widened to f32 exactly.
    unsafe fn widen<const BF16: bool>(p: *const u16) -> Self::R;
}

/// The AVX2 tier's 8 lanes.
pub(super) struct Avx2;
/// The AVX-512 tier's 16 lanes.
pub(super) struct Avx512;

impl Wide for Avx2 {
    type R = __m256;
    const W: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const f32) -> __m256 {
        unsafe { _mm256_broadcast_ss(&*p) }
    }
    #[inline(always)]
    unsafe fn widen<const BF16: bool>(p: *const u16) -> __m256 {
        unsafe { widen8::<BF16>(p) }
    }
}

impl Wide for Avx512 {
    type R = __m512;
    const W: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> __m512 {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const f32) -> __m512 {
        unsafe { _mm512_set1_ps(*p) }
    }
    #[inline(always)]
    unsafe fn widen<const BF16: bool>(p: *const u16) -> __m512 {
        unsafe { widen16::<BF16>(p) }
    }
}

/// Widens 8 bf16 (`BF16`) or f16 values at `p` to f32, exactly.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn widen8<const BF16: bool>(p: *const u16) -> __m256 {
    unsafe {
        let h = _mm_loadu_si128(p as *const __m128i);
        if BF16 {
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
        } else {
            _mm256_cvtph_ps(h)
        }
    }
}

/// Widens 16 bf16 (`BF16`) or f16 values at `p` to f32, exactly.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
#[inline]
pub(super) unsafe fn widen16<const BF16: bool>(p: *const u16) -> __m512 {
    unsafe {
        let h = _mm256_loadu_si256(p as *const __m256i);
        if BF16 {
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        } else {
            _mm512_cvtph_ps(h)
        }
    }
}

/// The panel element formats, in `WeightFormat::index` order (the `KIND` of [`avx2`] and
/// [`avx512`]).
pub(super) const F32: u8 = 0;
pub(super) const BF16: u8 = 1;
pub(super) const F16: u8 = 2;

/// Panel row element `i` of format `KIND` at `b`, as f32 lanes.
#[inline(always)]
unsafe fn load_b<L: Wide, const KIND: u8>(b: *const u8, i: usize) -> L::R {
    unsafe {
        match KIND {
            F32 => L::load(b.cast::<f32>().add(i)),
            BF16 => L::widen::<true>(b.cast::<u16>().add(i)),
            _ => L::widen::<false>(b.cast::<u16>().add(i)),
        }
    }
}

/// One row × four panels (8 registers of columns); contract in [`Row4Call`].
/// Eight independent accumulators instead of two: decode is bound by memory, not FMA latency.
#[inline(always)]
unsafe fn body<L: Wide, const KIND: u8>(t: Row4Call) {
    let (w, nr) = (L::W, 2 * L::W);
    let bytes = if KIND == F32 { 4 } else { 2 };
    unsafe {
        let mut acc = [L::zero(); 8];
        if t.load {
            for (i, v) in acc.iter_mut().enumerate() {
                *v = L::load(t.c.add(w * i));
            }
        }
        let bq = [0, 1, 2, 3].map(|q| t.b.add(q * t.bstride * bytes));
        for p in 0..t.kc {
            let av = L::bcast(t.a.add(p));
            for q in 0..4 {
                let (b0, b1) = (
                    load_b::<L, KIND>(bq[q], p * nr),
                    load_b::<L, KIND>(bq[q], p * nr + w),
                );
                acc[2 * q] = L::fma(av, b0, acc[2 * q]);
                acc[2 * q + 1] = L::fma(av, b1, acc[2 * q + 1]);
            }
        }
        store::<L, 8>(&acc, t.c, t.bias);
    }
}

/// Stores `N` accumulator registers of consecutive columns to `c`, adding `bias` (if
/// non-null) first; shared with the block-format kernels (`x86_quant.rs`).
#[inline(always)]
pub(super) unsafe fn store<L: Wide, const N: usize>(
    acc: &[L::R; N],
    c: *mut f32,
    bias: *const f32,
) {
    unsafe {
        for (i, v) in acc.iter().enumerate() {
            let v = if bias.is_null() {
                *v
            } else {
                L::add(*v, L::load(bias.add(L::W * i)))
            };
            L::store(c.add(L::W * i), v);
        }
    }
}

/// The AVX2 tier's row4 kernel over panels of format `KIND`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2<const KIND: u8>(t: Row4Call) {
    unsafe { body::<Avx2, KIND>(t) }
}

/// The AVX-512 tier's row4 kernel over panels of format `KIND`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512<const KIND: u8>(t: Row4Call) {
    unsafe { body::<Avx512, KIND>(t) }
}
