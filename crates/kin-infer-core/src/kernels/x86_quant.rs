//! Kernels over block-quantized panels (`blocks.rs`'s interleaved layouts: Q8_0, Q4_0, Q4_1,
//! Q5_0, Q5_1, and `blocks_k.rs`'s Q4_K, Q5_K, Q6_K)
//! for the x86-64 AVX2 and AVX-512 tiers: the direct decode kernel (one row × four panels,
//! each weight dequantized in registers and multiplied into f32 accumulators with one FMA, in
//! the f32 GEMM's k order), and the staging dequantizer (a panel's KC slice into f32 panel
//! rows for the f32 micro-kernel). Both read a code row through the one `weights` function of
//! their tier, so they produce the same values: the reference dequantizer's.
//!
//! Why the dequantization is exact, so its instruction order cannot matter: a scale is an
//! f16 (11 significant bits) and a code at most 8 bits, so `d · q` fits an f32 exactly; Q4_1's
//! `(d · q) + m` is `fma(q, d, m)` (one rounding, the reference's: its product is exact),
//! Q8_0's `q · d`, Q5_0's `d · (q − 16)` is `fma(q, d, −16·d)`.
//!
//! Getting `q` into a float is most of a 4-bit weight's cost, so no tier converts Q4_0's
//! codes: a shuffle puts each code byte under the exponent bits of 1.0 and a mask keeps one
//! nibble, which then reads `1 + q·2⁻ᵏ`, and one fma with exact constants gives `d·(q − 8)`
//! (`Q4_0_FMA`; Q6_K likewise, `Q6K_FMA`). The AVX-512 tier reads Q4_1 and Q4_K nibbles as
//! indices into the table 0..15 instead (one permute, no mask for the low nibble). Measured
//! (quant_matvec 4096², one thread, 2-core Xeon VM with AVX-512): Q4_0 25 → 31 G weights/s on
//! AVX-512 and 18 → 20 on AVX2, Q4_1 25 → 27, Q4_K 23 → 25 (AVX-512); Q6_K unchanged (24,
//! bound by its byte per weight). The AVX2 loop is then port-bound: per 16 weights two
//! shuffles, two masks and four FMAs, which llama.cpp's integer dot products avoid by
//! quantizing the activations (ruled out by the determinism contract).
//!
//! The decode kernel takes its four panels two at a time (four accumulators, plus the two
//! panels' scales held in registers): measured on the first prototype (git history: examples/q4_decode_proto.rs),
//! four at a time spills and is slower; the loop is bound by the unpacking's instructions,
//! not by accumulator latency. Contract: [`Row4Call`] (`bstride` in elements).
//!
//! The K-quants' sub-block values `d·sc` and `dmin·m` are exact too (an f16 times a 6- or
//! 8-bit integer), so `fma(q, d·sc, −dmin·m)` is the reference's `(d·sc)·q − dmin·m` with its
//! one rounding; Q6_K's codes are widened to bytes in memory (`blocks_k.rs`), and its weight
//! `(q − 32) · (d·sc)` is exact. A panel block's scales are recomputed per sub-block
//! (`group`): 32 k, or 16 for Q6_K.
//!
//! Measured before that (examples/quant_matvec, one thread, 4096 × 4096, a 2-core Zen4 VM):
//! AVX-512 Q4_K runs at Q4_0's speed (33-38 vs 41 G weights/s), Q5_K at half (17: widening its
//! fifth-bit plane costs as much as the rest of the row, even with the compiler's vpternlogd).
//! Q6_K with a 6-bit layout (nibbles + 2-bit planes) ran at 18 (AVX-512) and 6 (AVX2) G/s; with
//! byte codes, 12-15 and 21 G/s, and the Q4_K_M decode benchmark rose on both tiers
//! (scripts/bench-gguf.py), at 8.6 instead of 6.6 resident bits per Q6_K weight. llama.cpp's
//! integer dot products avoid the unpacking by quantizing the activations, which the
//! determinism contract rules out.
//!
//! Each tier's kernels are generic over the type's ggml code (`CODE`), so one body serves the
//! eight types and the per-type branches fold away.

use super::blocks::{codes_at, high_at, interleaved};
use super::gemm::Row4Call;
use super::ggml::GgmlType;
use super::x86_row4::{self, Avx2, Avx512, Wide};
use std::arch::x86_64::*;

const Q4_0: u32 = GgmlType::Q4_0.code();
const Q4_1: u32 = GgmlType::Q4_1.code();
const Q5_0: u32 = GgmlType::Q5_0.code();
const Q5_1: u32 = GgmlType::Q5_1.code();
const Q4_K: u32 = GgmlType::Q4_K.code();
const Q5_K: u32 = GgmlType::Q5_K.code();
const Q6_K: u32 = GgmlType::Q6_K.code();

/// The interleaved type with ggml code `CODE`.
const fn ty(code: u32) -> GgmlType {
    match code {
        Q4_0 => GgmlType::Q4_0,
        Q4_1 => GgmlType::Q4_1,
        Q5_0 => GgmlType::Q5_0,
        Q5_1 => GgmlType::Q5_1,
        Q4_K => GgmlType::Q4_K,
        Q5_K => GgmlType::Q5_K,
        Q6_K => GgmlType::Q6_K,
        // The tables instantiate only the interleaved codes.
        _ => GgmlType::Q8_0,
    }
}

/// The k that share one scale and offset: a legacy block's 32, a K-quant's sub-block.
const fn group(t: GgmlType) -> usize {
    match t {
        GgmlType::Q6_K => 16,
        _ => 32,
    }
}

/// Unaligned little-endian loads of a bit row.
#[inline(always)]
unsafe fn read_u16(p: *const u8) -> u16 {
    unsafe { u16::from_le(p.cast::<u16>().read_unaligned()) }
}
#[inline(always)]
unsafe fn read_u32(p: *const u8) -> u32 {
    unsafe { u32::from_le(p.cast::<u32>().read_unaligned()) }
}

/// Q4_0 without an int-to-float conversion: a code byte shuffled to bits 8..16 of a lane under
/// the exponent of 1.0 reads, after masking, as `f = 1 + q·2⁻¹⁵` (low nibble) or
/// `1 + q·2⁻¹¹` (high nibble), and `fma(f, M·d, O·d)` with these (M, O) is exactly
/// `d·(q − 8)`: `f·M·d + O·d` is that value in exact arithmetic, and both constants times the
/// f16 `d` (11 significant bits) are exact in f32 (32776 = 8·4097 and 2056 = 8·257 have 13 and
/// 9), so the fma's one rounding returns the reference's value, whatever `q`.
const Q4_0_FMA: [(f32, f32); 2] = [(32768.0, -32776.0), (2048.0, -2056.0)];

/// Q6_K likewise: its byte code `q` (0..64) shuffled to bits 16..24 under the exponent byte
/// 0x3F reads `f = 0.5 + q/256`, and `fma(f, 256·ds, −160·ds)` is `(q − 32)·ds` exactly
/// (`ds = d·sc` has at most 19 significant bits, 160 = 32·5 adds 3).
const Q6K_FMA: (f32, f32) = (256.0, -160.0);

// ---- AVX2: 16-column panels, two 8-lane halves ---------------------------------------------

mod avx2 {
    use super::*;
    pub(super) const NR: usize = 16;

    /// Group `g`'s multipliers and offsets of a panel block, per half: the weight is
    /// `fma(code, mul, off)` (Q8_0: `code · mul`). Q4_1: `d`, `m`; Q4_K and
    /// Q5_K: `d·sc`, −(`dmin·m`); Q4_0 and Q6_K: `Q4_0_FMA` / `Q6K_FMA` times `d` (`d·sc`),
    /// for the codes as `weights` reads them (all exact, see the module doc).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn scales(
        t: GgmlType,
        blk: *const u8,
        g: usize,
    ) -> ([__m256; 2], [__m256; 2]) {
        unsafe {
            let half = |at: usize| {
                [0, 1].map(|h| _mm256_cvtph_ps(_mm_loadu_si128(blk.add(at + 16 * h).cast())))
            };
            let bytes = |at: usize, h: usize| _mm_loadl_epi64(blk.add(at + 8 * h).cast());
            match t {
                GgmlType::Q4_1 | GgmlType::Q5_1 => (half(0), half(2 * NR)),
                GgmlType::Q5_0 => {
                    let d = half(0);
                    (d, d.map(|s| _mm256_mul_ps(s, _mm256_set1_ps(-16.0))))
                }
                GgmlType::Q4_K | GgmlType::Q5_K => {
                    let (d, dmin) = (half(0), half(2 * NR));
                    let shift = _mm_cvtsi32_si128(4 * (g % 2) as i32);
                    let (lo_at, hi_at) = (4 * NR + g * NR, 12 * NR + g / 2 * NR);
                    let mut mul = d;
                    let mut off = d;
                    for h in 0..2 {
                        let lo = _mm256_cvtepu8_epi32(bytes(lo_at, h));
                        let hi = _mm256_srl_epi32(_mm256_cvtepu8_epi32(bytes(hi_at, h)), shift);
                        let three = _mm256_set1_epi32(3);
                        let sc = _mm256_or_si256(
                            _mm256_and_si256(lo, _mm256_set1_epi32(15)),
                            _mm256_slli_epi32::<4>(_mm256_and_si256(hi, three)),
                        );
                        let m = _mm256_or_si256(
                            _mm256_srli_epi32::<4>(lo),
                            _mm256_slli_epi32::<4>(_mm256_and_si256(
                                _mm256_srli_epi32::<2>(hi),
                                three,
                            )),
                        );
                        mul[h] = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(sc));
                        let dm = _mm256_mul_ps(dmin[h], _mm256_cvtepi32_ps(m));
                        off[h] = _mm256_xor_ps(dm, _mm256_set1_ps(-0.0));
                    }
                    (mul, off)
                }
                GgmlType::Q6_K => {
                    let d = half(0);
                    let dsc = [0, 1].map(|h| {
                        let sc = _mm256_cvtepi8_epi32(bytes(2 * NR + g * NR, h));
                        _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(sc))
                    });
                    let (m, o) = Q6K_FMA;
                    (
                        dsc.map(|s| _mm256_mul_ps(s, _mm256_set1_ps(m))),
                        dsc.map(|s| _mm256_mul_ps(s, _mm256_set1_ps(o))),
                    )
                }
                GgmlType::Q4_0 => {
                    let d = half(0);
                    let times = |h: usize, c: f32| _mm256_mul_ps(d[h], _mm256_set1_ps(c));
                    (
                        [0, 1].map(|h| times(h, Q4_0_FMA[h].0)),
                        [0, 1].map(|h| times(h, Q4_0_FMA[h].1)),
                    )
                }
                _ => {
                    let d = half(0);
                    (d, d.map(|s| _mm256_mul_ps(s, _mm256_set1_ps(-8.0))))
                }
            }
        }
    }

    /// Code row `p` of the panel block `blk` as the reference's weights, columns 0..8 and
    /// 8..16.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(super) unsafe fn weights(
        t: GgmlType,
        blk: *const u8,
        p: usize,
        mul: &[__m256; 2],
        off: &[__m256; 2],
    ) -> (__m256, __m256) {
        unsafe {
            let rows = blk.add(codes_at(t, NR));
            // Q8_0's byte codes: `q · mul`, exact.
            if t == GgmlType::Q8_0 {
                let r = rows.add(p * NR);
                let lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(r.cast()));
                let hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(r.add(8).cast()));
                return (
                    _mm256_mul_ps(_mm256_cvtepi32_ps(lo), mul[0]),
                    _mm256_mul_ps(_mm256_cvtepi32_ps(hi), mul[1]),
                );
            }
            // Q6_K's byte codes `q` (0..64) become the mantissa of `0.5 + q/256` with one
            // shuffle (the exponent byte 0x3F comes from the blended-in constant), then
            // `fma(f, 256·d·sc, −160·d·sc)` (see `Q6K_FMA`).
            if t == GgmlType::Q6_K {
                let r = rows.add(p * NR);
                let ctrl = _mm256_setr_epi32(
                    0x0800_8080,
                    0x0801_8080,
                    0x0802_8080,
                    0x0803_8080,
                    0x0804_8080,
                    0x0805_8080,
                    0x0806_8080,
                    0x0807_8080,
                );
                let f = |at: usize| {
                    let src = _mm256_blend_epi32::<0b1100_1100>(
                        _mm256_set1_epi64x(r.add(at).cast::<i64>().read_unaligned()),
                        _mm256_set1_epi32(0x3F),
                    );
                    _mm256_castsi256_ps(_mm256_shuffle_epi8(src, ctrl))
                };
                return (
                    _mm256_fmadd_ps(f(0), mul[0], off[0]),
                    _mm256_fmadd_ps(f(8), mul[1], off[1]),
                );
            }
            // Q4_0: the code byte of column c (low nibble) and c + 8 (high) goes to bits 8..16
            // of lane c beside the exponent bytes 0x80 0x3F, so masking keeps `1 + q·2⁻¹⁵`
            // (low) or `1 + q·2⁻¹¹` (high): no conversion, see `Q4_0_FMA`.
            if t == GgmlType::Q4_0 {
                let r = rows.add(p * NR / 2);
                let ctrl = _mm256_setr_epi32(
                    0x0809_0080,
                    0x0809_0180,
                    0x0809_0280,
                    0x0809_0380,
                    0x0809_0480,
                    0x0809_0580,
                    0x0809_0680,
                    0x0809_0780,
                );
                let src = _mm256_blend_epi32::<0b1100_1100>(
                    _mm256_set1_epi64x(r.cast::<i64>().read_unaligned()),
                    _mm256_set1_epi32(0x803F),
                );
                let s = _mm256_shuffle_epi8(src, ctrl);
                let lo = _mm256_and_si256(s, _mm256_set1_epi32(0xFFFF_0F00u32 as i32));
                let hi = _mm256_and_si256(s, _mm256_set1_epi32(0xFFFF_F000u32 as i32));
                return (
                    _mm256_fmadd_ps(_mm256_castsi256_ps(lo), mul[0], off[0]),
                    _mm256_fmadd_ps(_mm256_castsi256_ps(hi), mul[1], off[1]),
                );
            }
            let w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(rows.add(p * NR / 2).cast()));
            let mut lo = _mm256_and_si256(w, _mm256_set1_epi32(15));
            let mut hi = _mm256_srli_epi32::<4>(w);
            if matches!(t, GgmlType::Q5_K | GgmlType::Q5_0 | GgmlType::Q5_1) {
                // Column c's fifth bit is bit c of the row: shifted to bit 4 of lane c.
                let bits = read_u16(blk.add(high_at(t, NR) + p * NR / 8)) as i32;
                let v = _mm256_set1_epi32(bits << 4);
                let sixteen = _mm256_set1_epi32(16);
                let lo_b = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                let hi_b = _mm256_srlv_epi32(v, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
                lo = _mm256_or_si256(lo, _mm256_and_si256(lo_b, sixteen));
                hi = _mm256_or_si256(hi, _mm256_and_si256(hi_b, sixteen));
            }
            (
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), mul[0], off[0]),
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), mul[1], off[1]),
            )
        }
    }
}

/// AVX2 decode kernel over the interleaved panels of ggml type `CODE`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_row4<const CODE: u32>(call: Row4Call) {
    let t = ty(CODE);
    unsafe {
        row4_body::<Avx2>(
            t,
            call,
            |b, g| avx2::scales(t, b, g),
            |b, p, s| avx2::weights(t, b, p, &s.0, &s.1),
        )
    }
}

/// The AVX2 staging dequantizer: `kc` k of one interleaved panel into f32 panel rows, as
/// `blocks::dequant_slice`. Returns false, writing nothing, for a type it does not handle.
///
/// # Safety
/// As `blocks::dequant_slice`, on a CPU with AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2_dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    unsafe {
        dequant_body::<Avx2>(
            t,
            (src, kc, out),
            |b, g| avx2::scales(t, b, g),
            |b, p, s| avx2::weights(t, b, p, &s.0, &s.1),
        )
    }
}

// ---- AVX-512: 32-column panels, two 16-lane halves ------------------------------------------

mod avx512 {
    use super::*;
    pub(super) const NR: usize = 32;

    /// As [`super::avx2::scales`], 16 lanes per half.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    #[inline]
    pub(super) unsafe fn scales(
        t: GgmlType,
        blk: *const u8,
        g: usize,
    ) -> ([__m512; 2], [__m512; 2]) {
        unsafe {
            let half = |at: usize| {
                [0, 1].map(|h| _mm512_cvtph_ps(_mm256_loadu_si256(blk.add(at + 32 * h).cast())))
            };
            let bytes = |at: usize, h: usize| _mm_loadu_si128(blk.add(at + 16 * h).cast());
            match t {
                GgmlType::Q4_1 | GgmlType::Q5_1 => (half(0), half(2 * NR)),
                GgmlType::Q5_0 => {
                    let d = half(0);
                    (d, d.map(|s| _mm512_mul_ps(s, _mm512_set1_ps(-16.0))))
                }
                GgmlType::Q4_K | GgmlType::Q5_K => {
                    let (d, dmin) = (half(0), half(2 * NR));
                    let shift = _mm_cvtsi32_si128(4 * (g % 2) as i32);
                    let (lo_at, hi_at) = (4 * NR + g * NR, 12 * NR + g / 2 * NR);
                    let mut mul = d;
                    let mut off = d;
                    for h in 0..2 {
                        let lo = _mm512_cvtepu8_epi32(bytes(lo_at, h));
                        let hi = _mm512_srl_epi32(_mm512_cvtepu8_epi32(bytes(hi_at, h)), shift);
                        let three = _mm512_set1_epi32(3);
                        let sc = _mm512_or_si512(
                            _mm512_and_si512(lo, _mm512_set1_epi32(15)),
                            _mm512_slli_epi32::<4>(_mm512_and_si512(hi, three)),
                        );
                        let m = _mm512_or_si512(
                            _mm512_srli_epi32::<4>(lo),
                            _mm512_slli_epi32::<4>(_mm512_and_si512(
                                _mm512_srli_epi32::<2>(hi),
                                three,
                            )),
                        );
                        mul[h] = _mm512_mul_ps(d[h], _mm512_cvtepi32_ps(sc));
                        let dm = _mm512_mul_ps(dmin[h], _mm512_cvtepi32_ps(m));
                        off[h] = _mm512_xor_ps(dm, _mm512_set1_ps(-0.0));
                    }
                    (mul, off)
                }
                GgmlType::Q6_K => {
                    let d = half(0);
                    let dsc = [0, 1].map(|h| {
                        let sc = _mm512_cvtepi8_epi32(bytes(2 * NR + g * NR, h));
                        _mm512_mul_ps(d[h], _mm512_cvtepi32_ps(sc))
                    });
                    let (m, o) = Q6K_FMA;
                    (
                        dsc.map(|s| _mm512_mul_ps(s, _mm512_set1_ps(m))),
                        dsc.map(|s| _mm512_mul_ps(s, _mm512_set1_ps(o))),
                    )
                }
                GgmlType::Q4_0 => {
                    let d = half(0);
                    let times = |h: usize, c: f32| _mm512_mul_ps(d[h], _mm512_set1_ps(c));
                    (
                        [0, 1].map(|h| times(h, Q4_0_FMA[h].0)),
                        [0, 1].map(|h| times(h, Q4_0_FMA[h].1)),
                    )
                }
                _ => {
                    let d = half(0);
                    (d, d.map(|s| _mm512_mul_ps(s, _mm512_set1_ps(-8.0))))
                }
            }
        }
    }

    /// As [`super::avx2::weights`]: columns 0..16 and 16..32.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
    #[inline]
    pub(super) unsafe fn weights(
        t: GgmlType,
        blk: *const u8,
        p: usize,
        mul: &[__m512; 2],
        off: &[__m512; 2],
    ) -> (__m512, __m512) {
        unsafe {
            let rows = blk.add(codes_at(t, NR));
            // Each 128-bit lane of a shuffle sees the same 16 code bytes; dword j of lane l
            // takes byte 4l + j (at bits 8..16 for Q4_0, 16..24 for Q6_K), zeros elsewhere.
            let ctrl = |at: u32| {
                let idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                let zeros = _mm512_set1_epi32((0x8080_8080u32 & !(0xFF << at)) as i32);
                _mm512_or_si512(_mm512_sllv_epi32(idx, _mm512_set1_epi32(at as i32)), zeros)
            };
            // Q6_K's byte codes `q` (0..64): `0.5 + q/256` by one shuffle and one or, then
            // `fma(f, 256·d·sc, −160·d·sc)` (see `Q6K_FMA`).
            if t == GgmlType::Q6_K {
                let r = rows.add(p * NR);
                let c = ctrl(16);
                let f = |at: usize| {
                    let src = _mm512_broadcast_i32x4(_mm_loadu_si128(r.add(at).cast()));
                    let s = _mm512_shuffle_epi8(src, c);
                    _mm512_castsi512_ps(_mm512_or_si512(s, _mm512_set1_epi32(0x3F00_0000)))
                };
                return (
                    _mm512_fmadd_ps(f(0), mul[0], off[0]),
                    _mm512_fmadd_ps(f(16), mul[1], off[1]),
                );
            }
            // Q4_0: the code byte of columns c (low nibble) and c + 16 (high) at bits 8..16 of
            // lane c; a ternary-logic `(s & mask) | 0x3F800000` keeps `1 + q·2⁻¹⁵` (low) or
            // `1 + q·2⁻¹¹` (high): no conversion, see `Q4_0_FMA`.
            if t == GgmlType::Q4_0 {
                let src = _mm512_broadcast_i32x4(_mm_loadu_si128(rows.add(p * NR / 2).cast()));
                let s = _mm512_shuffle_epi8(src, ctrl(8));
                let one = _mm512_set1_epi32(0x3F80_0000);
                let lo = _mm512_ternarylogic_epi32::<0xEA>(s, _mm512_set1_epi32(0x0F00), one);
                let hi = _mm512_ternarylogic_epi32::<0xEA>(s, _mm512_set1_epi32(0xF000), one);
                return (
                    _mm512_fmadd_ps(_mm512_castsi512_ps(lo), mul[0], off[0]),
                    _mm512_fmadd_ps(_mm512_castsi512_ps(hi), mul[1], off[1]),
                );
            }
            // Q4_1 and Q4_K: a nibble is its own index into the table 0.0..15.0 (a permute
            // reads only an index's low four bits, so the low nibble needs no mask): the
            // exact `q` without a conversion, then `fma(q, mul, off)` as below.
            if matches!(t, GgmlType::Q4_1 | GgmlType::Q4_K) {
                let v = _mm512_cvtepu8_epi32(_mm_loadu_si128(rows.add(p * NR / 2).cast()));
                let iota = _mm512_setr_ps(
                    0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0,
                    15.0,
                );
                let lo = _mm512_permutexvar_ps(v, iota);
                let hi = _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(v), iota);
                return (
                    _mm512_fmadd_ps(lo, mul[0], off[0]),
                    _mm512_fmadd_ps(hi, mul[1], off[1]),
                );
            }
            // Q8_0's byte codes: `q · mul`, exact.
            if t == GgmlType::Q8_0 {
                let r = rows.add(p * NR);
                let lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(r.cast()));
                let hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(r.add(16).cast()));
                return (
                    _mm512_mul_ps(_mm512_cvtepi32_ps(lo), mul[0]),
                    _mm512_mul_ps(_mm512_cvtepi32_ps(hi), mul[1]),
                );
            }
            let w = _mm512_cvtepu8_epi32(_mm_loadu_si128(rows.add(p * NR / 2).cast()));
            let mut lo = _mm512_and_si512(w, _mm512_set1_epi32(15));
            let mut hi = _mm512_srli_epi32::<4>(w);
            if matches!(t, GgmlType::Q5_K | GgmlType::Q5_0 | GgmlType::Q5_1) {
                // Bit c of the row is column c's fifth bit: the row is the lanes' mask.
                let bits = read_u32(blk.add(high_at(t, NR) + p * NR / 8));
                let sixteen = _mm512_set1_epi32(16);
                lo = _mm512_mask_or_epi32(lo, bits as u16, lo, sixteen);
                hi = _mm512_mask_or_epi32(hi, (bits >> 16) as u16, hi, sixteen);
            }
            (
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), mul[0], off[0]),
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), mul[1], off[1]),
            )
        }
    }
}

/// AVX-512 decode kernel over the interleaved panels of ggml type `CODE`. Q5_0 is
/// `fma(q, d, −16·d)` (exact product, one rounding of the exact `d·(q − 16)`), Q5_1 Q4_1's.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_row4<const CODE: u32>(call: Row4Call) {
    let t = ty(CODE);
    unsafe {
        row4_body::<Avx512>(
            t,
            call,
            |b, g| avx512::scales(t, b, g),
            |b, p, s| avx512::weights(t, b, p, &s.0, &s.1),
        )
    }
}

/// [`avx2_dequant`] for the AVX-512 tier.
///
/// # Safety
/// As `blocks::dequant_slice`, on a CPU with the AVX-512 tier's features.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,fma")]
pub(super) unsafe fn avx512_dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    unsafe {
        dequant_body::<Avx512>(
            t,
            (src, kc, out),
            |b, g| avx512::scales(t, b, g),
            |b, p, s| avx512::weights(t, b, p, &s.0, &s.1),
        )
    }
}

/// A panel block's multipliers and offsets for one group, per half (a tier's `scales`).
type Scales<R> = ([R; 2], [R; 2]);

/// The decode kernel written once over the register width: the tiers differ only in it and
/// in their `scales` (a panel block's group `g`) and `weights` (code row `p` of a panel
/// block, as two registers of columns). Per output: one FMA per k, in k order.
///
/// # Safety
/// The [`Row4Call`] contract for panels of `t`, compiled inside a `#[target_feature]` entry
/// point of `L`'s tier (the closures inline there).
#[inline(always)]
unsafe fn row4_body<L: Wide>(
    t: GgmlType,
    call: Row4Call,
    scales: impl Fn(*const u8, usize) -> Scales<L::R>,
    weights: impl Fn(*const u8, usize, &Scales<L::R>) -> (L::R, L::R),
) {
    let nr = 2 * L::W;
    let (bl, gl) = (t.block_len(), group(t));
    let pbb = super::format::WeightFormat::Quant(t).panel_block_bytes();
    let (pb, stride) = (nr * pbb, call.bstride / bl * pbb);
    unsafe {
        for pair in 0..2 {
            let cp = call.c.add(pair * 2 * nr);
            let mut acc = [L::zero(); 4];
            if call.load {
                for (i, v) in acc.iter_mut().enumerate() {
                    *v = L::load(cp.add(L::W * i));
                }
            }
            let b = call.b;
            let panels = [b.add(2 * pair * stride), b.add((2 * pair + 1) * stride)];
            for kb in 0..call.kc / bl {
                let blk = panels.map(|p| p.add(kb * pb));
                for g in 0..bl / gl {
                    let s = blk.map(|b| scales(b, g));
                    for p in g * gl..(g + 1) * gl {
                        let av = L::bcast(call.a.add(kb * bl + p));
                        for q in 0..2 {
                            let (lo, hi) = weights(blk[q], p, &s[q]);
                            acc[2 * q] = L::fma(av, lo, acc[2 * q]);
                            acc[2 * q + 1] = L::fma(av, hi, acc[2 * q + 1]);
                        }
                    }
                }
            }
            let bp = if call.bias.is_null() {
                call.bias
            } else {
                call.bias.add(pair * 2 * nr)
            };
            x86_row4::store::<L, 4>(&acc, cp, bp);
        }
    }
}

/// The staging dequantizer written once over the register width, as [`row4_body`]:
/// `kc` k of the panel at `src` into f32 panel rows at `out`.
///
/// # Safety
/// As `blocks::dequant_slice`, inside a `#[target_feature]` entry point of `L`'s tier.
#[inline(always)]
unsafe fn dequant_body<L: Wide>(
    t: GgmlType,
    (src, kc, out): (*const u8, usize, *mut f32),
    scales: impl Fn(*const u8, usize) -> Scales<L::R>,
    weights: impl Fn(*const u8, usize, &Scales<L::R>) -> (L::R, L::R),
) -> bool {
    if !interleaved(t) {
        return false;
    }
    let nr = 2 * L::W;
    let (bl, gl) = (t.block_len(), group(t));
    let pb = nr * super::format::WeightFormat::Quant(t).panel_block_bytes();
    unsafe {
        for kb in 0..kc / bl {
            let (blk, o) = (src.add(kb * pb), out.add(kb * bl * nr));
            for g in 0..bl / gl {
                let s = scales(blk, g);
                for p in g * gl..(g + 1) * gl {
                    let (lo, hi) = weights(blk, p, &s);
                    L::store(o.add(p * nr), lo);
                    L::store(o.add(p * nr + L::W), hi);
                }
            }
        }
    }
    true
}
