//! The activation side of the q8 numerics mode (`kin-numerics/1+q8/1`): a row of f32
//! activations quantized once per product into 8-bit blocks, exactly as ggml's reference
//! quantizers do (`quantize_row_q8_0_ref`, `quantize_row_q8_1_ref`, `quantize_row_q8_K_ref`
//! in ggml-quants.c), so that the block dots of `q8_dot.rs` multiply integers.
//!
//! Each weight type names the activation blocks it pairs with (ggml's `vec_dot_type`, a
//! column of the format table): Q8_0 for Q4_0, Q5_0, Q8_0 and IQ4_NL; Q8_1 for the affine
//! Q4_1 and Q5_1 (Q8_0's codes plus each block's sum); Q8_K for the K-quants.
//!
//! - Q8_0 / Q8_1, per 32 values: `d = max|x| / 127`, `q = roundf(x · (1/d))` (half away from
//!   zero; `1/d` is 0 for a zero block), `d` kept as its f16 rounding (the products use the
//!   f16 value, as ggml's `block_q8_0` stores it); Q8_1's `s = f16((Σ q) · d)` with the
//!   unrounded `d`.
//! - Q8_K, per 256: `max` the value of largest magnitude (the first on ties), `iscale =
//!   −127 / max`, `q = min(127, nearest_int(iscale · x))` (ties to even, as ggml's
//!   `nearest_int`), `d = 1 / iscale` in f32, and the sums of each 16 codes; an all-zero block
//!   has `d = 0` and zero codes.
//!
//! One scalar implementation for every tier: quantizing a row is O(k) against the O(k·n)
//! product, and one implementation cannot disagree with itself.

use super::widen::f16_to_f32;

/// The 8-bit activation blocks a weight type's block dot takes (ggml's `vec_dot_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActBlocks {
    /// 32 codes and an f16 scale.
    Q8_0,
    /// Q8_0 plus `s`, the block's sum times its scale (for weights with a minimum).
    Q8_1,
    /// 256 codes, an f32 scale and the sums of each 16 codes (for the K-quants).
    Q8K,
}

impl ActBlocks {
    /// Values per block.
    pub const fn block_len(self) -> usize {
        match self {
            ActBlocks::Q8_0 | ActBlocks::Q8_1 => 32,
            ActBlocks::Q8K => 256,
        }
    }
}

/// One activation row quantized into [`ActBlocks`]: `qs` the codes (k of them), and per
/// block its scale `d`, its `s` (Q8_1; else 0) and, per 16 codes, their sum `bsums` (every
/// kind carries them: the K-quants' minimums need them, and a tier may use them elsewhere).
/// For [`ActBlocks::Q8K`] also `pairs`: per block [`PAIRS`] words, each two of those sums
/// as i16 halves (low, high), ready for an i16 multiply-add against lanes of sub-block
/// scales: the 16-sums `(j, j + 2)` for `j` = 0, 1, 4, 5, 8, 9, 12, 13 (Q6_K's scales),
/// then the 32-sums `(j, j + 2)` for `j` = 0, 1, 4, 5 (Q4_K / Q5_K's minimums). A 16-sum is
/// at most 16 · 127 in magnitude and a 32-sum 32 · 127: both fit an i16.
#[derive(Clone, Debug, Default)]
pub struct QuantRow {
    pub(crate) qs: Vec<i8>,
    pub(crate) d: Vec<f32>,
    pub(crate) s: Vec<f32>,
    pub(crate) bsums: Vec<i32>,
    pub(crate) pairs: Vec<i32>,
}

/// Words of [`QuantRow::pairs`] per Q8K block.
pub(crate) const PAIRS: usize = 12;

/// `lo` and `hi` (each within i16) as one word, `lo` in the low half.
fn pair(lo: i32, hi: i32) -> i32 {
    (lo as u16 as u32 | (hi as u32) << 16) as i32
}

impl QuantRow {
    /// Quantizes `x` (whole blocks of `kind`) into this row, reusing its allocations.
    ///
    /// # Panics
    /// If `x` is not whole blocks (the caller's matrix width is: checked at packing).
    pub fn quantize(&mut self, kind: ActBlocks, x: &[f32]) {
        let bl = kind.block_len();
        assert!(x.len().is_multiple_of(bl), "quantize: not whole blocks");
        self.qs.clear();
        self.d.clear();
        self.s.clear();
        self.bsums.clear();
        self.pairs.clear();
        for b in x.chunks_exact(bl) {
            let at = self.qs.len();
            match kind {
                ActBlocks::Q8_0 | ActBlocks::Q8_1 => {
                    let amax = abs_max(b);
                    let d = amax / 127.0;
                    let id = if d == 0.0 { 0.0 } else { 1.0 / d };
                    let mut q = [0i8; 32];
                    for (q, v) in q.iter_mut().zip(b) {
                        *q = round_away(v * id);
                    }
                    self.qs.extend_from_slice(&q);
                    let sum: i32 = q.iter().map(|&q| q as i32).sum();
                    self.d.push(f16_round(d));
                    self.s.push(match kind {
                        ActBlocks::Q8_1 => f16_round(sum as f32 * d),
                        _ => 0.0,
                    });
                }
                ActBlocks::Q8K => {
                    let (mut amax, mut max) = (0.0f32, 0.0f32);
                    for &v in b {
                        if v.abs() > amax {
                            amax = v.abs();
                            max = v;
                        }
                    }
                    if amax == 0.0 {
                        self.qs.extend(std::iter::repeat_n(0i8, bl));
                        self.d.push(0.0);
                    } else {
                        let iscale = -127.0 / max;
                        self.qs
                            .extend(b.iter().map(|v| nearest_even(iscale * v).min(127) as i8));
                        self.d.push(1.0 / iscale);
                    }
                    self.s.push(0.0);
                }
            }
            for sixteen in self.qs[at..].chunks_exact(16) {
                self.bsums.push(sixteen.iter().map(|&q| q as i32).sum());
            }
            if kind == ActBlocks::Q8K {
                let bs = &self.bsums[self.bsums.len() - 16..];
                let s32 = |j: usize| bs[2 * j] + bs[2 * j + 1];
                for j in [0, 1, 4, 5, 8, 9, 12, 13] {
                    self.pairs.push(pair(bs[j], bs[j + 2]));
                }
                for j in [0, 1, 4, 5] {
                    self.pairs.push(pair(s32(j), s32(j + 2)));
                }
            }
        }
    }

    /// The codes of block `b` (of `len` values).
    #[inline]
    pub(crate) fn codes(&self, b: usize, len: usize) -> &[i8] {
        &self.qs[b * len..(b + 1) * len]
    }
}

/// The largest `|v|`, NaNs passed over (`fold(0, f32::max)` over `|v|`), as an integer
/// maximum over the magnitudes' bits (ordered as the values are, for non-NaN floats): a
/// reduction the compiler vectorizes, where the float fold stayed scalar.
#[inline]
fn abs_max(b: &[f32]) -> f32 {
    let bits = |v: &f32| match v.to_bits() & 0x7FFF_FFFF {
        m if m > 0x7F80_0000 => 0,
        m => m,
    };
    f32::from_bits(b.iter().map(bits).max().unwrap_or(0))
}

/// `roundf(x) as i8` (half away from zero, saturating), without a libm call: the x86-64
/// baseline has no rounding instruction, and `floorf` per code was a tenth of a q8 decode.
/// Exact for every input: the truncation `t` (via i32, saturating) and `x − t` are exact for
/// |x| < 2³¹, and a larger or non-finite `x` saturates the same either way (NaN gives 0).
#[inline]
fn round_away(x: f32) -> i8 {
    let t = x as i32 as f32;
    let f = x - t;
    (t + (f >= 0.5) as i32 as f32 - (f <= -0.5) as i32 as f32) as i8
}

/// `x.round_ties_even() as i32` (ggml's `nearest_int`): for |x| < 2²² the f32 sum with
/// 1.5·2²³ rounds exactly there (IEEE round-to-nearest-even), without the libm call
/// `round_ties_even` makes on the x86-64 baseline; larger or non-finite `x` takes it.
#[inline]
fn nearest_even(x: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    if x.abs() < 4_194_304.0 {
        ((x + MAGIC) - MAGIC) as i32
    } else {
        x.round_ties_even() as i32
    }
}

/// `v` rounded to f16 (nearest even) and widened back: the value a stored f16 scale has.
fn f16_round(v: f32) -> f32 {
    f16_to_f32(half::f16::from_f32(v).to_bits())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::ggml::{quantize, GgmlType};

    /// Q8_0 activations are the Q8_0 weight quantizer's blocks (held to `gguf.quants`).
    #[test]
    fn q8_0_codes_and_scales_are_the_reference_quantizers() {
        let x: Vec<f32> = (0..96)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.173 + if i == 5 { 0.5 } else { 0.0 })
            .collect();
        let mut bytes = Vec::new();
        quantize(GgmlType::Q8_0, &x, &mut bytes);
        let mut row = QuantRow::default();
        row.quantize(ActBlocks::Q8_1, &x);
        for (b, block) in bytes.chunks_exact(34).enumerate() {
            let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
            assert_eq!(row.d[b].to_bits(), d.to_bits());
            let codes: Vec<i8> = block[2..].iter().map(|&c| c as i8).collect();
            assert_eq!(row.codes(b, 32), &codes[..]);
            let sum: i32 = codes.iter().map(|&c| c as i32).sum();
            let amax = x[b * 32..][..32].iter().fold(0.0f32, |m, v| m.max(v.abs()));
            assert_eq!(row.s[b], f16_round(sum as f32 * (amax / 127.0)));
            let bs: i32 = row.bsums[2 * b..2 * b + 2].iter().sum();
            assert_eq!(bs, sum);
        }
    }

    /// The libm-free roundings are libm's, at the halves, the edges and non-finite values.
    #[test]
    fn the_roundings_are_roundf_and_round_ties_even() {
        let mut xs = vec![
            0.0f32, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -127.5, 127.49,
        ];
        xs.extend([
            0.49999997,
            -0.49999997,
            4_194_303.5,
            4_194_304.0,
            8_388_609.0,
            3e9,
            -3e9,
        ]);
        xs.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            1e-40,
        ]);
        let mut seed = 7u32;
        for _ in 0..100_000 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            xs.push((seed as i32 as f32) / 8_388_608.0 * 130.0);
        }
        for x in xs {
            assert_eq!(round_away(x), x.round() as i8, "{x}");
            assert_eq!(nearest_even(x), x.round_ties_even() as i32, "{x}");
        }
    }

    /// The integer maximum is the float fold, NaNs, infinities, signed zeros and
    /// subnormals included.
    #[test]
    fn abs_max_is_the_float_fold() {
        let specials = [
            0.0f32,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -3.5,
        ];
        let mut seed = 11u32;
        for case in 0..2000 {
            let b: Vec<f32> = (0..32)
                .map(|_| {
                    seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    match seed >> 28 {
                        0 if case % 3 == 0 => specials[(seed >> 8) as usize % specials.len()],
                        _ => (seed as i32 as f32) / 2e9 * 50.0,
                    }
                })
                .collect();
            let want = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            assert_eq!(abs_max(&b).to_bits(), want.to_bits(), "{b:?}");
        }
        assert_eq!(abs_max(&[f32::NAN; 32]).to_bits(), 0.0f32.to_bits());
    }

    #[test]
    fn q8_k_takes_the_signed_maximum_and_rounds_ties_to_even() {
        // The first value of largest magnitude is 127, so iscale = −1: codes are −x, ties
        // to even, and −127 (a later value of the same magnitude) becomes 127.
        let mut x = vec![0.0f32; 256];
        x[0] = 100.5;
        x[1] = 127.0;
        x[2] = 3.5;
        x[3] = -127.0;
        let mut row = QuantRow::default();
        row.quantize(ActBlocks::Q8K, &x);
        assert_eq!(&row.qs[..4], &[-100, -127, -4, 127]);
        assert_eq!(row.d[0], -1.0);
        assert_eq!(row.bsums[0], -100 - 127 - 4 + 127);
        let zero = vec![0.0f32; 256];
        row.quantize(ActBlocks::Q8K, &zero);
        assert!(row.qs.iter().all(|&q| q == 0) && row.d[0] == 0.0);
    }

    /// The pair words hold the sums they name, at their extremes too (all codes ±127).
    #[test]
    fn q8_k_pairs_are_the_block_sums() {
        let half = |w: i32, hi: bool| if hi { w >> 16 } else { w as i16 as i32 };
        for x in [
            (0..512)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.3)
                .collect::<Vec<f32>>(),
            vec![1.0; 512],
            vec![-1.0; 512],
        ] {
            let mut row = QuantRow::default();
            row.quantize(ActBlocks::Q8K, &x);
            assert_eq!(row.pairs.len(), 2 * PAIRS);
            for b in 0..2 {
                let (bs, w) = (&row.bsums[16 * b..], &row.pairs[PAIRS * b..]);
                for (h, j) in [0, 1, 4, 5, 8, 9, 12, 13].into_iter().enumerate() {
                    assert_eq!((half(w[h], false), half(w[h], true)), (bs[j], bs[j + 2]));
                }
                let s32 = |j: usize| bs[2 * j] + bs[2 * j + 1];
                for (h, j) in [0, 1, 4, 5].into_iter().enumerate() {
                    let w = w[8 + h];
                    assert_eq!((half(w, false), half(w, true)), (s32(j), s32(j + 2)));
                }
            }
        }
    }
}
