//! Kernels over block-quantized panels (`blocks.rs`'s interleaved layout: Q8_0, Q4_0, Q4_1)
//! for the x86-64 AVX2 and AVX-512 tiers: the direct decode kernel (one row × four panels,
//! each weight dequantized in registers and multiplied into f32 accumulators with one FMA, in
//! the f32 GEMM's k order), and the staging dequantizer (a panel's KC slice into f32 panel
//! rows for the f32 micro-kernel). Both read a code row through the one `weights` function of
//! their tier, so they produce the same values: the reference dequantizer's.
//!
//! Why the dequantization is exact, so its instruction order cannot matter: a scale is an
//! f16 (11 significant bits) and a code at most 8 bits, so `d · q` fits an f32 exactly; Q4_0's
//! `d · (q − 8)` is computed as `fma(q, d, −8·d)` (−8·d exact too), Q4_1's `(d · q) + m` as
//! `fma(q, d, m)` (one rounding, the reference's: its product is exact), Q8_0's as `q · d`.
//!
//! The decode kernel takes its four panels two at a time (four accumulators, plus the two
//! panels' scales held in registers): measured on the first prototype (git history: examples/q4_decode_proto.rs),
//! four at a time spills and is slower; the loop is bound by the unpacking's instructions,
//! not by accumulator latency. Contract: [`super::gemm::Row4Kernel`] (`bstride` in elements).
//!
//! Each tier's kernels are generic over the type's ggml code (`CODE`), so one body serves the
//! three types and the per-type branches fold away.

use super::blocks::{codes_at, interleaved};
use super::ggml::GgmlType;
use super::{x86_avx2, x86_avx512};
use std::arch::x86_64::*;

const Q4_0: u32 = GgmlType::Q4_0.code();
const Q4_1: u32 = GgmlType::Q4_1.code();

/// The interleaved type with ggml code `CODE`.
const fn ty(code: u32) -> GgmlType {
    match code {
        Q4_0 => GgmlType::Q4_0,
        Q4_1 => GgmlType::Q4_1,
        // The tables instantiate only the three interleaved codes.
        _ => GgmlType::Q8_0,
    }
}

// ---- AVX2: 16-column panels, two 8-lane halves ---------------------------------------------

mod avx2 {
    use super::*;
    pub(super) const NR: usize = 16;

    /// A panel block's scales `d` and offsets (Q4_0: −8·d; Q4_1: the minimums; Q8_0: unused).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn scales(t: GgmlType, blk: *const u8) -> ([__m256; 2], [__m256; 2]) {
        unsafe {
            let d = [0, 1].map(|h| _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast())));
            let off = match t {
                GgmlType::Q4_1 => [0, 1]
                    .map(|h| _mm256_cvtph_ps(_mm_loadu_si128(blk.add(2 * NR + 16 * h).cast()))),
                _ => d.map(|s| _mm256_mul_ps(s, _mm256_set1_ps(-8.0))),
            };
            (d, off)
        }
    }

    /// Code row `p` (of the rows at `rows`) as the reference's weights, columns 0..8 and 8..16.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn weights(
        t: GgmlType,
        rows: *const u8,
        p: usize,
        d: &[__m256; 2],
        off: &[__m256; 2],
    ) -> (__m256, __m256) {
        unsafe {
            if t == GgmlType::Q8_0 {
                let r = rows.add(p * NR);
                let lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(r.cast()));
                let hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(r.add(8).cast()));
                (
                    _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d[0]),
                    _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d[1]),
                )
            } else {
                let w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(rows.add(p * NR / 2).cast()));
                let lo = _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(15)));
                let hi = _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(w));
                (
                    _mm256_fmadd_ps(lo, d[0], off[0]),
                    _mm256_fmadd_ps(hi, d[1], off[1]),
                )
            }
        }
    }
}

/// AVX2 decode kernel over Q8_0 / Q4_0 / Q4_1 panels (`CODE`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_row4<const CODE: u32>(
    kc: usize,
    a: *const f32,
    b: *const u8,
    bstride: usize,
    c: *mut f32,
    load: bool,
    bias: *const f32,
) {
    use avx2::NR;
    let t = ty(CODE);
    let (pb, stride) = (NR * t.block_bytes(), bstride / 32 * t.block_bytes());
    unsafe {
        for pair in 0..2 {
            let cp = c.add(pair * 2 * NR);
            let mut acc = [_mm256_setzero_ps(); 4];
            if load {
                for (i, v) in acc.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(cp.add(8 * i));
                }
            }
            let panels = [b.add(2 * pair * stride), b.add((2 * pair + 1) * stride)];
            for kb in 0..kc / 32 {
                let blk = panels.map(|p| p.add(kb * pb));
                let s = blk.map(|b| avx2::scales(t, b));
                let rows = blk.map(|b| b.add(codes_at(t, NR)));
                for p in 0..32 {
                    let av = _mm256_broadcast_ss(&*a.add(kb * 32 + p));
                    for q in 0..2 {
                        let (lo, hi) = avx2::weights(t, rows[q], p, &s[q].0, &s[q].1);
                        acc[2 * q] = _mm256_fmadd_ps(av, lo, acc[2 * q]);
                        acc[2 * q + 1] = _mm256_fmadd_ps(av, hi, acc[2 * q + 1]);
                    }
                }
            }
            let bp = if bias.is_null() {
                bias
            } else {
                bias.add(pair * 2 * NR)
            };
            x86_avx2::row4_store(&acc, cp, bp);
        }
    }
}

/// The AVX2 staging dequantizer: `kc` k of one interleaved panel into f32 panel rows, as
/// `blocks::dequant_slice`. Returns false, writing nothing, for a type it does not handle.
///
/// # Safety
/// As `blocks::dequant_slice`, on a CPU with AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    use avx2::NR;
    if !interleaved(t) {
        return false;
    }
    let pb = NR * t.block_bytes();
    unsafe {
        for kb in 0..kc / 32 {
            let blk = src.add(kb * pb);
            let (d, off) = avx2::scales(t, blk);
            let (rows, o) = (blk.add(codes_at(t, NR)), out.add(kb * 32 * NR));
            for p in 0..32 {
                let (lo, hi) = avx2::weights(t, rows, p, &d, &off);
                _mm256_storeu_ps(o.add(p * NR), lo);
                _mm256_storeu_ps(o.add(p * NR + 8), hi);
            }
        }
    }
    true
}

// ---- AVX-512: 32-column panels, two 16-lane halves ------------------------------------------

mod avx512 {
    use super::*;
    pub(super) const NR: usize = 32;

    /// As [`super::avx2::scales`], 16 lanes per half.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    #[inline]
    pub(super) unsafe fn scales(t: GgmlType, blk: *const u8) -> ([__m512; 2], [__m512; 2]) {
        unsafe {
            let d = [0, 1].map(|h| _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32 * h).cast())));
            let off = match t {
                GgmlType::Q4_1 => [0, 1]
                    .map(|h| _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(2 * NR + 32 * h).cast()))),
                _ => d.map(|s| _mm512_mul_ps(s, _mm512_set1_ps(-8.0))),
            };
            (d, off)
        }
    }

    /// As [`super::avx2::weights`]: columns 0..16 and 16..32.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    #[inline]
    pub(super) unsafe fn weights(
        t: GgmlType,
        rows: *const u8,
        p: usize,
        d: &[__m512; 2],
        off: &[__m512; 2],
    ) -> (__m512, __m512) {
        unsafe {
            if t == GgmlType::Q8_0 {
                let r = rows.add(p * NR);
                let lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(r.cast()));
                let hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(r.add(16).cast()));
                (
                    _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d[0]),
                    _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d[1]),
                )
            } else {
                let w = _mm512_cvtepu8_epi32(_mm_loadu_si128(rows.add(p * NR / 2).cast()));
                let lo = _mm512_cvtepi32_ps(_mm512_and_si512(w, _mm512_set1_epi32(15)));
                let hi = _mm512_cvtepi32_ps(_mm512_srli_epi32::<4>(w));
                (
                    _mm512_fmadd_ps(lo, d[0], off[0]),
                    _mm512_fmadd_ps(hi, d[1], off[1]),
                )
            }
        }
    }
}

/// AVX-512 decode kernel over Q8_0 / Q4_0 / Q4_1 panels (`CODE`).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_row4<const CODE: u32>(
    kc: usize,
    a: *const f32,
    b: *const u8,
    bstride: usize,
    c: *mut f32,
    load: bool,
    bias: *const f32,
) {
    use avx512::NR;
    let t = ty(CODE);
    let (pb, stride) = (NR * t.block_bytes(), bstride / 32 * t.block_bytes());
    unsafe {
        for pair in 0..2 {
            let cp = c.add(pair * 2 * NR);
            let mut acc = [_mm512_setzero_ps(); 4];
            if load {
                for (i, v) in acc.iter_mut().enumerate() {
                    *v = _mm512_loadu_ps(cp.add(16 * i));
                }
            }
            let panels = [b.add(2 * pair * stride), b.add((2 * pair + 1) * stride)];
            for kb in 0..kc / 32 {
                let blk = panels.map(|p| p.add(kb * pb));
                let s = blk.map(|b| avx512::scales(t, b));
                let rows = blk.map(|b| b.add(codes_at(t, NR)));
                for p in 0..32 {
                    let av = _mm512_set1_ps(*a.add(kb * 32 + p));
                    for q in 0..2 {
                        let (lo, hi) = avx512::weights(t, rows[q], p, &s[q].0, &s[q].1);
                        acc[2 * q] = _mm512_fmadd_ps(av, lo, acc[2 * q]);
                        acc[2 * q + 1] = _mm512_fmadd_ps(av, hi, acc[2 * q + 1]);
                    }
                }
            }
            let bp = if bias.is_null() {
                bias
            } else {
                bias.add(pair * 2 * NR)
            };
            x86_avx512::row4_store(&acc, cp, bp);
        }
    }
}

/// [`avx2_dequant`] for the AVX-512 tier.
///
/// # Safety
/// As `blocks::dequant_slice`, on a CPU with the AVX-512 tier's features.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    use avx512::NR;
    if !interleaved(t) {
        return false;
    }
    let pb = NR * t.block_bytes();
    unsafe {
        for kb in 0..kc / 32 {
            let blk = src.add(kb * pb);
            let (d, off) = avx512::scales(t, blk);
            let (rows, o) = (blk.add(codes_at(t, NR)), out.add(kb * 32 * NR));
            for p in 0..32 {
                let (lo, hi) = avx512::weights(t, rows, p, &d, &off);
                _mm512_storeu_ps(o.add(p * NR), lo);
                _mm512_storeu_ps(o.add(p * NR + 16), hi);
            }
        }
    }
    true
}
