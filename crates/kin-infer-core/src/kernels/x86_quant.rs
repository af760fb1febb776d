//! Direct decode kernels over block-quantized panels (`blocks.rs`'s interleaved layout) for
//! the x86-64 AVX2 and AVX-512 tiers: one row × four panels, each weight dequantized in
//! registers and multiplied into f32 accumulators with one FMA, in the f32 GEMM's k order,
//! so the outputs are the bits of the f32 row kernel over the reference-dequantized matrix.
//!
//! Why the dequantization is exact, so its instruction order cannot matter: a scale is an
//! f16 (11 significant bits) and a code at most 8 bits, so `d · q` fits an f32 exactly; Q4_0's
//! `d · (q − 8)` is computed as `fma(q, d, −8·d)` (−8·d exact too), Q4_1's `(d · q) + m` as
//! `fma(q, d, m)` (one rounding, the reference's: its product is exact), Q8_0's as `q · d`.
//!
//! The four panels are taken two at a time (four accumulators, plus the two panels' scales
//! held in registers): measured on the prototype (examples/q4_decode_proto.rs), four at a
//! time spills and is slower; the loop is bound by the unpacking's instructions, not by
//! accumulator latency. Contract: [`super::gemm::Row4Kernel`] (`bstride` in elements).

use super::ggml::GgmlType;
use std::arch::x86_64::*;

/// Block bytes of the interleaved types (ggml-common.h).
const fn block_bytes(t: GgmlType) -> usize {
    t.block_bytes()
}

/// AVX2 (16-column panels): Q4_0 (`MIN = false`) or Q4_1 (`MIN = true`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_row4_q4<const MIN: bool>(
    kc: usize,
    a: *const f32,
    b: *const u8,
    bstride: usize,
    c: *mut f32,
    load: bool,
    bias: *const f32,
) {
    const NR: usize = 16;
    let t = if MIN { GgmlType::Q4_1 } else { GgmlType::Q4_0 };
    let bb = block_bytes(t);
    let (pb, stride) = (NR * bb, bstride / 32 * bb);
    let codes = if MIN { 4 * NR } else { 2 * NR };
    unsafe {
        let mask = _mm256_set1_epi32(15);
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
                let mut d = [_mm256_setzero_ps(); 4];
                let mut off = [_mm256_setzero_ps(); 4];
                for (q, panel) in panels.iter().enumerate() {
                    let blk = panel.add(kb * pb);
                    for h in 0..2 {
                        let s = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast()));
                        d[2 * q + h] = s;
                        off[2 * q + h] = if MIN {
                            _mm256_cvtph_ps(_mm_loadu_si128(blk.add(2 * NR + 16 * h).cast()))
                        } else {
                            _mm256_mul_ps(s, _mm256_set1_ps(-8.0))
                        };
                    }
                }
                let rows = [
                    panels[0].add(kb * pb + codes),
                    panels[1].add(kb * pb + codes),
                ];
                for p in 0..32 {
                    let av = _mm256_broadcast_ss(&*a.add(kb * 32 + p));
                    for (q, row) in rows.iter().enumerate() {
                        let w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(row.add(p * 8).cast()));
                        let lo = _mm256_cvtepi32_ps(_mm256_and_si256(w, mask));
                        let hi = _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(w));
                        let wlo = _mm256_fmadd_ps(lo, d[2 * q], off[2 * q]);
                        let whi = _mm256_fmadd_ps(hi, d[2 * q + 1], off[2 * q + 1]);
                        acc[2 * q] = _mm256_fmadd_ps(av, wlo, acc[2 * q]);
                        acc[2 * q + 1] = _mm256_fmadd_ps(av, whi, acc[2 * q + 1]);
                    }
                }
            }
            let bp = if bias.is_null() {
                bias
            } else {
                bias.add(pair * 2 * NR)
            };
            avx2_store(&acc, cp, bp);
        }
    }
}

/// AVX2 (16-column panels): Q8_0.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_row4_q8(
    kc: usize,
    a: *const f32,
    b: *const u8,
    bstride: usize,
    c: *mut f32,
    load: bool,
    bias: *const f32,
) {
    const NR: usize = 16;
    let bb = block_bytes(GgmlType::Q8_0);
    let (pb, stride) = (NR * bb, bstride / 32 * bb);
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
                let mut d = [_mm256_setzero_ps(); 4];
                for (q, panel) in panels.iter().enumerate() {
                    for h in 0..2 {
                        let s = _mm_loadu_si128(panel.add(kb * pb + 16 * h).cast());
                        d[2 * q + h] = _mm256_cvtph_ps(s);
                    }
                }
                let rows = [
                    panels[0].add(kb * pb + 2 * NR),
                    panels[1].add(kb * pb + 2 * NR),
                ];
                for p in 0..32 {
                    let av = _mm256_broadcast_ss(&*a.add(kb * 32 + p));
                    for (q, row) in rows.iter().enumerate() {
                        let r = row.add(p * NR);
                        let lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(r.cast()));
                        let hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(r.add(8).cast()));
                        let wlo = _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d[2 * q]);
                        let whi = _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d[2 * q + 1]);
                        acc[2 * q] = _mm256_fmadd_ps(av, wlo, acc[2 * q]);
                        acc[2 * q + 1] = _mm256_fmadd_ps(av, whi, acc[2 * q + 1]);
                    }
                }
            }
            let bp = if bias.is_null() {
                bias
            } else {
                bias.add(pair * 2 * NR)
            };
            avx2_store(&acc, cp, bp);
        }
    }
}

#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn avx2_store(acc: &[__m256; 4], c: *mut f32, bias: *const f32) {
    unsafe {
        for (i, v) in acc.iter().enumerate() {
            let v = if bias.is_null() {
                *v
            } else {
                _mm256_add_ps(*v, _mm256_loadu_ps(bias.add(8 * i)))
            };
            _mm256_storeu_ps(c.add(8 * i), v);
        }
    }
}

/// AVX-512 (32-column panels): Q4_0 (`MIN = false`) or Q4_1 (`MIN = true`).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_row4_q4<const MIN: bool>(
    kc: usize,
    a: *const f32,
    b: *const u8,
    bstride: usize,
    c: *mut f32,
    load: bool,
    bias: *const f32,
) {
    const NR: usize = 32;
    let t = if MIN { GgmlType::Q4_1 } else { GgmlType::Q4_0 };
    let bb = block_bytes(t);
    let (pb, stride) = (NR * bb, bstride / 32 * bb);
    let codes = if MIN { 4 * NR } else { 2 * NR };
    unsafe {
        let mask = _mm512_set1_epi32(15);
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
                let mut d = [_mm512_setzero_ps(); 4];
                let mut off = [_mm512_setzero_ps(); 4];
                for (q, panel) in panels.iter().enumerate() {
                    let blk = panel.add(kb * pb);
                    for h in 0..2 {
                        let s = _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32 * h).cast()));
                        d[2 * q + h] = s;
                        off[2 * q + h] = if MIN {
                            _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(2 * NR + 32 * h).cast()))
                        } else {
                            _mm512_mul_ps(s, _mm512_set1_ps(-8.0))
                        };
                    }
                }
                let rows = [
                    panels[0].add(kb * pb + codes),
                    panels[1].add(kb * pb + codes),
                ];
                for p in 0..32 {
                    let av = _mm512_set1_ps(*a.add(kb * 32 + p));
                    for (q, row) in rows.iter().enumerate() {
                        let w = _mm512_cvtepu8_epi32(_mm_loadu_si128(row.add(p * 16).cast()));
                        let lo = _mm512_cvtepi32_ps(_mm512_and_si512(w, mask));
                        let hi = _mm512_cvtepi32_ps(_mm512_srli_epi32::<4>(w));
                        let wlo = _mm512_fmadd_ps(lo, d[2 * q], off[2 * q]);
                        let whi = _mm512_fmadd_ps(hi, d[2 * q + 1], off[2 * q + 1]);
                        acc[2 * q] = _mm512_fmadd_ps(av, wlo, acc[2 * q]);
                        acc[2 * q + 1] = _mm512_fmadd_ps(av, whi, acc[2 * q + 1]);
                    }
                }
            }
            let bp = if bias.is_null() {
                bias
            } else {
                bias.add(pair * 2 * NR)
            };
            avx512_store(&acc, cp, bp);
        }
    }
}

/// AVX-512 (32-column panels): Q8_0.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_row4_q8(
    kc: usize,
    a: *const f32,
    b: *const u8,
    bstride: usize,
    c: *mut f32,
    load: bool,
    bias: *const f32,
) {
    const NR: usize = 32;
    let bb = block_bytes(GgmlType::Q8_0);
    let (pb, stride) = (NR * bb, bstride / 32 * bb);
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
                let mut d = [_mm512_setzero_ps(); 4];
                for (q, panel) in panels.iter().enumerate() {
                    for h in 0..2 {
                        let s = _mm256_loadu_si256(panel.add(kb * pb + 32 * h).cast());
                        d[2 * q + h] = _mm512_cvtph_ps(s);
                    }
                }
                let rows = [
                    panels[0].add(kb * pb + 2 * NR),
                    panels[1].add(kb * pb + 2 * NR),
                ];
                for p in 0..32 {
                    let av = _mm512_set1_ps(*a.add(kb * 32 + p));
                    for (q, row) in rows.iter().enumerate() {
                        let r = row.add(p * NR);
                        let lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(r.cast()));
                        let hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(r.add(16).cast()));
                        let wlo = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d[2 * q]);
                        let whi = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d[2 * q + 1]);
                        acc[2 * q] = _mm512_fmadd_ps(av, wlo, acc[2 * q]);
                        acc[2 * q + 1] = _mm512_fmadd_ps(av, whi, acc[2 * q + 1]);
                    }
                }
            }
            let bp = if bias.is_null() {
                bias
            } else {
                bias.add(pair * 2 * NR)
            };
            avx512_store(&acc, cp, bp);
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
#[inline]
unsafe fn avx512_store(acc: &[__m512; 4], c: *mut f32, bias: *const f32) {
    unsafe {
        for (i, v) in acc.iter().enumerate() {
            let v = if bias.is_null() {
                *v
            } else {
                _mm512_add_ps(*v, _mm512_loadu_ps(bias.add(16 * i)))
            };
            _mm512_storeu_ps(c.add(16 * i), v);
        }
    }
}

/// The staging dequantizer of the AVX2 tier (16-column panels): `kc` k of one interleaved
/// panel into f32 panel rows, as `blocks::dequant_slice` (same exact values). Returns false,
/// writing nothing, for a type it does not handle (the scalar staging runs instead).
///
/// # Safety
/// As `blocks::dequant_slice`, on a CPU with AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    const NR: usize = 16;
    if !matches!(t, GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1) {
        return false;
    }
    let pb = NR * t.block_bytes();
    let codes = if t == GgmlType::Q4_1 { 4 * NR } else { 2 * NR };
    unsafe {
        let mask = _mm256_set1_epi32(15);
        for kb in 0..kc / 32 {
            let blk = src.add(kb * pb);
            let d = [0, 1].map(|h| _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h).cast())));
            let off = match t {
                GgmlType::Q4_1 => {
                    [0, 1].map(|h| _mm256_cvtph_ps(_mm_loadu_si128(blk.add(32 + 16 * h).cast())))
                }
                _ => d.map(|s| _mm256_mul_ps(s, _mm256_set1_ps(-8.0))),
            };
            let rows = blk.add(codes);
            let o = out.add(kb * 32 * NR);
            for p in 0..32 {
                let (lo, hi) = if t == GgmlType::Q8_0 {
                    let r = rows.add(p * NR);
                    let lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(r.cast())));
                    let hi =
                        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(r.add(8).cast())));
                    (_mm256_mul_ps(lo, d[0]), _mm256_mul_ps(hi, d[1]))
                } else {
                    let w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(rows.add(p * 8).cast()));
                    let lo = _mm256_cvtepi32_ps(_mm256_and_si256(w, mask));
                    let hi = _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(w));
                    (
                        _mm256_fmadd_ps(lo, d[0], off[0]),
                        _mm256_fmadd_ps(hi, d[1], off[1]),
                    )
                };
                _mm256_storeu_ps(o.add(p * NR), lo);
                _mm256_storeu_ps(o.add(p * NR + 8), hi);
            }
        }
    }
    true
}

/// [`avx2_dequant`] for the AVX-512 tier (32-column panels).
///
/// # Safety
/// As `blocks::dequant_slice`, on a CPU with the AVX-512 tier's features.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    const NR: usize = 32;
    if !matches!(t, GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1) {
        return false;
    }
    let pb = NR * t.block_bytes();
    let codes = if t == GgmlType::Q4_1 { 4 * NR } else { 2 * NR };
    unsafe {
        let mask = _mm512_set1_epi32(15);
        for kb in 0..kc / 32 {
            let blk = src.add(kb * pb);
            let d = [0, 1].map(|h| _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(32 * h).cast())));
            let off = match t {
                GgmlType::Q4_1 => {
                    [0, 1].map(|h| _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(64 + 32 * h).cast())))
                }
                _ => d.map(|s| _mm512_mul_ps(s, _mm512_set1_ps(-8.0))),
            };
            let rows = blk.add(codes);
            let o = out.add(kb * 32 * NR);
            for p in 0..32 {
                let (lo, hi) = if t == GgmlType::Q8_0 {
                    let r = rows.add(p * NR);
                    let lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(r.cast())));
                    let hi =
                        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(r.add(16).cast())));
                    (_mm512_mul_ps(lo, d[0]), _mm512_mul_ps(hi, d[1]))
                } else {
                    let w = _mm512_cvtepu8_epi32(_mm_loadu_si128(rows.add(p * 16).cast()));
                    let lo = _mm512_cvtepi32_ps(_mm512_and_si512(w, mask));
                    let hi = _mm512_cvtepi32_ps(_mm512_srli_epi32::<4>(w));
                    (
                        _mm512_fmadd_ps(lo, d[0], off[0]),
                        _mm512_fmadd_ps(hi, d[1], off[1]),
                    )
                };
                _mm512_storeu_ps(o.add(p * NR), lo);
                _mm512_storeu_ps(o.add(p * NR + 16), hi);
            }
        }
    }
    true
}
