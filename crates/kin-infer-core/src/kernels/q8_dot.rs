//! The q8 mode's block dot products, generic twin: the definition every tier's kernel must
//! reproduce bit for bit. A weight block is read as integers ([`IntBlock`]: its codes with
//! their offsets removed, and how they scale), multiplied by the activation block's codes
//! (`q8_act.rs`) in exact integer arithmetic, and the block's result joins the output's f32
//! accumulator in one fixed order. Per output, from `acc = 0.0`, for each block in k order:
//!
//! - **scale** (Q4_0, Q5_0, Q8_0, IQ4_NL; activations Q8_0): `isum = Σ q·a`,
//!   `acc = fma(d·d_a, isum, acc)`;
//! - **affine** (Q4_1, Q5_1; activations Q8_1): the same, then `acc = fma(m, s_a, acc)`;
//! - **super-block** (the K-quants; activations Q8_K): `isum = Σ_j sc_j · Σ_{i∈j} q·a` over the
//!   sub-blocks `j`, `acc = fma(d·d_a, isum, acc)`, then for the types with minimums (Q2_K,
//!   Q4_K, Q5_K) `imin = Σ_j m_j · Σ_{i∈j} a` (from the activation's 16-code sums) and
//!   `acc = fma(−(dmin·d_a), imin, acc)`.
//!
//! `isum` and `imin` are exact (every one fits an i32), so a tier may sum them in any order
//! and width; only the f32 steps above are ordered, and a SIMD tier runs them per output lane.
//! The bias, if any, is added after the last block. The element order within a block is the
//! reference dequantizer's (`dequant.rs`), the activation's element `e` meeting weight
//! element `e`. A leaf, as `dequant.rs`: the format table points at each reading, and the
//! driver (`q8_gemm.rs`) runs them.

use super::dequant::{half, high_bits, nibble, scale_min, IQ4_NL_LEVELS, QK_K};
use super::q8_act::QuantRow;

/// How an [`IntBlock`]'s codes scale (see the module doc).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scaling {
    /// `d · q`.
    Scale { d: f32 },
    /// `d · q + m`.
    Affine { d: f32, m: f32 },
    /// Sub-blocks of `sub` values: `d · sc[j] · q − dmin · mn[j]`.
    Super(SubBlocks),
}

/// A K-quant super-block's scaling: `sub`-value sub-blocks with scales `sc` and minimums `mn`
/// (`dmin` `None`: no minimum).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SubBlocks {
    pub(crate) d: f32,
    pub(crate) dmin: Option<f32>,
    pub(crate) sub: usize,
    pub(crate) sc: [i32; 16],
    pub(crate) mn: [i32; 16],
}

impl Scaling {
    fn sub_blocks(d: f32, dmin: Option<f32>, sub: usize, sc: [i32; 16], mn: [i32; 16]) -> Self {
        Scaling::Super(SubBlocks {
            d,
            dmin,
            sub,
            sc,
            mn,
        })
    }
}

/// One weight block as integers: `codes[e]` for its `block_len` elements, offsets removed.
pub(crate) struct IntBlock {
    pub(crate) codes: [i8; QK_K],
    pub(crate) scaling: Scaling,
}

/// A weight type's integer reading of one stored block (a column of the format table).
pub type DecodeInt = fn(&[u8]) -> IntBlock;

fn block(len: usize, code: impl Fn(usize) -> i8, scaling: Scaling) -> IntBlock {
    let mut codes = [0i8; QK_K];
    for (e, c) in codes[..len].iter_mut().enumerate() {
        *c = code(e);
    }
    IntBlock { codes, scaling }
}

/// `block_q4_0`: `q − 8`.
pub(crate) fn q4_0(b: &[u8]) -> IntBlock {
    let d = half(b, 0);
    block(32, |e| nibble(&b[2..], e) as i8 - 8, Scaling::Scale { d })
}

/// `block_iq4_nl`: the level of each nibble.
pub(crate) fn iq4_nl(b: &[u8]) -> IntBlock {
    let d = half(b, 0);
    let code = |e| IQ4_NL_LEVELS[nibble(&b[2..], e) as usize];
    block(32, code, Scaling::Scale { d })
}

/// `block_q4_1`: `q`, with the minimum `m`.
pub(crate) fn q4_1(b: &[u8]) -> IntBlock {
    let (d, m) = (half(b, 0), half(b, 2));
    block(32, |e| nibble(&b[4..], e) as i8, Scaling::Affine { d, m })
}

/// `block_q5_0`: `q − 16`.
pub(crate) fn q5_0(b: &[u8]) -> IntBlock {
    let (d, qh) = (half(b, 0), high_bits(b, 2));
    let code = |e: usize| (nibble(&b[6..], e) | (((qh >> e) & 1) as u8) << 4) as i8 - 16;
    block(32, code, Scaling::Scale { d })
}

/// `block_q5_1`: `q`, with the minimum `m`.
pub(crate) fn q5_1(b: &[u8]) -> IntBlock {
    let (d, m, qh) = (half(b, 0), half(b, 2), high_bits(b, 4));
    let code = |e: usize| (nibble(&b[8..], e) | (((qh >> e) & 1) as u8) << 4) as i8;
    block(32, code, Scaling::Affine { d, m })
}

/// `block_q8_0`: `q`.
pub(crate) fn q8_0(b: &[u8]) -> IntBlock {
    let d = half(b, 0);
    block(32, |e| b[2 + e] as i8, Scaling::Scale { d })
}

/// `block_q2_K`: 2-bit `q`; sub-block scale `sc & 15`, minimum `sc >> 4`.
pub(crate) fn q2_k(b: &[u8]) -> IntBlock {
    let (scales, qs) = (&b[..16], &b[16..80]);
    let code = |e: usize| ((qs[(e / 128) * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 3) as i8;
    let sc = std::array::from_fn(|j| (scales[j] & 0x0F) as i32);
    let mn = std::array::from_fn(|j| (scales[j] >> 4) as i32);
    let (d, dmin) = (half(b, 80), Some(half(b, 82)));
    block(QK_K, code, Scaling::sub_blocks(d, dmin, 16, sc, mn))
}

/// `block_q3_K`: `q − 4` where the high bit is clear; 6-bit signed scales.
pub(crate) fn q3_k(b: &[u8]) -> IntBlock {
    let (hmask, qs, s) = (&b[..32], &b[32..96], &b[96..108]);
    let code = |e: usize| {
        let ql = ((qs[(e / 128) * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 3) as i8;
        ql - ((((hmask[e % 32] >> (e / 32)) & 1) ^ 1) << 2) as i8
    };
    let sc = std::array::from_fn(|j| {
        let lo = (s[j % 8] >> (4 * (j / 8))) & 0x0F;
        let hi = (s[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        (lo | hi << 4) as i32 - 32
    });
    let d = half(b, 108);
    block(QK_K, code, Scaling::sub_blocks(d, None, 16, sc, [0; 16]))
}

/// The eight 6-bit scales and minimums of Q4_K / Q5_K.
fn k4_scaling(b: &[u8]) -> Scaling {
    let (mut sc, mut mn) = ([0i32; 16], [0i32; 16]);
    for j in 0..8 {
        let (s, m) = scale_min(&b[4..16], j);
        (sc[j], mn[j]) = (s as i32, m as i32);
    }
    let (d, dmin) = (half(b, 0), Some(half(b, 2)));
    Scaling::sub_blocks(d, dmin, 32, sc, mn)
}

/// `block_q4_K`: nibble `q`.
pub(crate) fn q4_k(b: &[u8]) -> IntBlock {
    let qs = &b[16..144];
    let code = |e: usize| ((qs[(e / 64) * 32 + e % 32] >> (4 * ((e / 32) % 2))) & 0x0F) as i8;
    block(QK_K, code, k4_scaling(b))
}

/// `block_q5_K`: nibble `q` with its fifth bit.
pub(crate) fn q5_k(b: &[u8]) -> IntBlock {
    let (qh, qs) = (&b[16..48], &b[48..176]);
    let code = |e: usize| {
        let (j, l) = (e / 32, e % 32);
        let ql = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F;
        (ql | ((qh[l] >> j) & 1) << 4) as i8
    };
    block(QK_K, code, k4_scaling(b))
}

/// `block_q6_K`: `q − 32`; 8-bit signed scales.
pub(crate) fn q6_k(b: &[u8]) -> IntBlock {
    let (ql, qh, scales) = (&b[..128], &b[128..192], &b[192..208]);
    let code = |e: usize| {
        let (h, r) = (e / 128, e % 128);
        let lo = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
        let hi = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
        (lo | hi << 4) as i8 - 32
    };
    let sc = std::array::from_fn(|j| scales[j] as i8 as i32);
    let d = half(b, 208);
    block(QK_K, code, Scaling::sub_blocks(d, None, 16, sc, [0; 16]))
}

fn idot(w: &[i8], a: &[i8]) -> i32 {
    w.iter().zip(a).map(|(&w, &a)| w as i32 * a as i32).sum()
}

/// A block's f32 factors: what its exact integer sums are scaled by.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Factors {
    /// `fma(d·d_a, isum, acc)`.
    Scale { d: f32 },
    /// Then `fma(m, s_a, acc)`.
    Affine { d: f32, m: f32 },
    /// Then `fma(−(dmin·d_a), imin, acc)`.
    Minimum { d: f32, dmin: f32 },
}

/// The f32 steps of one block (the module doc's), given its exact `isum` (and `imin`) and
/// the activation block's `d_a` and `s_a`: the one sequence every tier's kernel runs.
#[inline(always)]
pub(crate) fn finish(f: Factors, da: f32, sa: f32, isum: i32, imin: i32, acc: f32) -> f32 {
    match f {
        Factors::Scale { d } => (d * da).mul_add(isum as f32, acc),
        Factors::Affine { d, m } => m.mul_add(sa, (d * da).mul_add(isum as f32, acc)),
        Factors::Minimum { d, dmin } => {
            (-(dmin * da)).mul_add(imin as f32, (d * da).mul_add(isum as f32, acc))
        }
    }
}

/// Block `b` of an output's accumulation (the module doc's steps): `acc` after it.
pub(crate) fn accumulate(w: &IntBlock, len: usize, a: &QuantRow, b: usize, acc: f32) -> f32 {
    let qa = a.codes(b, len);
    let (factors, isum, imin) = match w.scaling {
        Scaling::Scale { d } => (Factors::Scale { d }, idot(&w.codes[..len], qa), 0),
        Scaling::Affine { d, m } => (Factors::Affine { d, m }, idot(&w.codes[..len], qa), 0),
        Scaling::Super(ref s) => {
            let SubBlocks { d, dmin, sub, .. } = *s;
            let (mut isum, mut imin) = (0i32, 0i32);
            let bsums = &a.bsums[b * len / 16..(b + 1) * len / 16];
            for j in 0..len / sub {
                let r = j * sub..(j + 1) * sub;
                isum += s.sc[j] * idot(&w.codes[r.clone()], &qa[r]);
                let per = sub / 16;
                imin += s.mn[j] * bsums[j * per..(j + 1) * per].iter().sum::<i32>();
            }
            let f = match dmin {
                Some(dmin) => Factors::Minimum { d, dmin },
                None => Factors::Scale { d },
            };
            (f, isum, imin)
        }
    };
    finish(factors, a.d[b], a.s[b], isum, imin, acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::ggml::GgmlType;

    /// Each integer reading is the reference dequantizer's values: `d·q` (+ `m`), or per
    /// sub-block `d·sc·q − dmin·mn`, to within the f32 rounding of those products.
    #[test]
    fn integer_blocks_are_the_dequantized_values() {
        let mut seed = 0x9e37_79b9u32;
        for t in GgmlType::ALL {
            let Some((_, decode)) = t.traits().q8 else {
                continue;
            };
            for _ in 0..20 {
                let mut bytes: Vec<u8> = (0..t.block_bytes())
                    .map(|_| {
                        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        (seed >> 24) as u8
                    })
                    .collect();
                // Finite, modest f16 scales (the random bytes could spell inf or NaN).
                for at in scale_offsets(t) {
                    bytes[at + 1] &= 0x3B;
                }
                let want = t.dequantize_to_vec(&bytes);
                let ib = decode(&bytes);
                for (e, w) in want.iter().enumerate() {
                    let q = ib.codes[e] as f32;
                    let got = match ib.scaling {
                        Scaling::Scale { d } => d * q,
                        Scaling::Affine { d, m } => d * q + m,
                        Scaling::Super(ref s) => {
                            let j = e / s.sub;
                            s.d * s.sc[j] as f32 * q - s.dmin.unwrap_or(0.0) * s.mn[j] as f32
                        }
                    };
                    assert!(
                        (got - w).abs() <= 1e-3 * w.abs().max(1e-3),
                        "{} e{e}: {got} vs {w}",
                        t.name()
                    );
                }
            }
        }
    }

    /// Byte offsets of a block's f16 scales.
    fn scale_offsets(t: GgmlType) -> Vec<usize> {
        match t {
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => vec![0, 2],
            GgmlType::Q2_K => vec![80, 82],
            GgmlType::Q3_K => vec![108],
            GgmlType::Q6_K => vec![208],
            _ => vec![0],
        }
    }
}
