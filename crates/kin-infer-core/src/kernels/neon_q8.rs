//! The q8 numerics mode's kernel for aarch64 NEON (`q8_gemm.rs`'s `Q8Call` contract): per
//! output and block, the integer sums `isum` (and `imin`) with widening multiplies
//! (`vmull_s8`, pairwise-accumulated into i32 lanes, then one exact horizontal add), and the
//! block's f32 steps through `q8_dot::finish`, the generic twin's own sequence, so the bits
//! are the twin's by construction: the integer sums are exact whatever their order.
//!
//! Q8_0, Q4_0, Q4_1, IQ4_NL, Q4_K, Q5_K and Q6_K; the other types (Q5_0, Q5_1, Q2_K, Q3_K)
//! return false and run the twin. Checked under qemu-aarch64 by scripts/cross-check.sh (the
//! q8 kernel tests: every tier against the twin); not timed on ARM hardware here.

use super::dequant::{scale_min, IQ4_NL_LEVELS};
use super::ggml::GgmlType;
use super::q8_act::QuantRow;
use super::q8_dot::{finish, Factors};
use super::q8_gemm::Q8Call;
use super::widen::f16_to_f32;
use std::arch::aarch64::*;

/// One type's block: its f32 factors, `isum` and `imin` (block `b` of the activation row).
type BlockSums = unsafe fn(&[u8], &QuantRow, usize) -> (Factors, i32, i32);

/// [`super::q8_gemm::Q8Kernel`] for NEON.
///
/// # Safety
/// As [`Q8Call`]'s contract.
pub(crate) unsafe fn neon(call: Q8Call) -> bool {
    // The lane layout is the x86 kernels' (an x86 tier packed it): the twin reads it.
    if call.lanes {
        return false;
    }
    let (t, cols, row_bytes) = (call.t, call.cols, call.row_bytes);
    let block: BlockSums = match t {
        GgmlType::Q8_0 => q8_0,
        GgmlType::Q4_0 => q4_0,
        GgmlType::Q4_1 => q4_1,
        GgmlType::IQ4_NL => iq4_nl,
        GgmlType::Q4_K => q4_k,
        GgmlType::Q5_K => q5_k,
        GgmlType::Q6_K => q6_k,
        _ => return false,
    };
    let bb = t.block_bytes();
    let group = std::slice::from_raw_parts(call.w, cols * row_bytes);
    for (r, a) in call.a.iter().enumerate() {
        for c in 0..cols {
            let mut acc = 0.0f32;
            for b in 0..row_bytes / bb {
                let at = (b * cols + c) * bb;
                let (f, isum, imin) = block(&group[at..at + bb], a, b);
                acc = finish(f, a.d[b], a.s[b], isum, imin, acc);
            }
            *call.out.add(r * call.ldo + c) = acc;
        }
    }
    true
}

fn half(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// `Σ w·a` of 16 signed codes each, as four i32 lanes (exact: each product fits i16).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot16(w: int8x16_t, a: int8x16_t) -> int32x4_t {
    let lo = vmull_s8(vget_low_s8(w), vget_low_s8(a));
    vpadalq_s16(vpaddlq_s16(lo), vmull_high_s8(w, a))
}

/// 16 activation codes from element `e`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn act16(a: &QuantRow, e: usize) -> int8x16_t {
    vld1q_s8(a.qs.as_ptr().add(e))
}

/// A 32-block's nibbles (16 bytes at `qs`) dotted with its 32 activation codes from `e`, the
/// codes minus `offset`, or mapped through `table`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn nibble_dot(
    qs: *const u8,
    a: &QuantRow,
    e: usize,
    offset: i8,
    table: Option<int8x16_t>,
) -> i32 {
    let x = vld1q_u8(qs);
    let (lo, hi) = (vandq_u8(x, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(x));
    let code = |n: uint8x16_t| match table {
        Some(t) => vqtbl1q_s8(t, n),
        None => vsubq_s8(vreinterpretq_s8_u8(n), vdupq_n_s8(offset)),
    };
    let s = vaddq_s32(
        dot16(code(lo), act16(a, e)),
        dot16(code(hi), act16(a, e + 16)),
    );
    vaddvq_s32(s)
}

#[target_feature(enable = "neon")]
unsafe fn q8_0(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    let w = blk.as_ptr().add(2) as *const i8;
    let s = vaddq_s32(
        dot16(vld1q_s8(w), act16(a, 32 * b)),
        dot16(vld1q_s8(w.add(16)), act16(a, 32 * b + 16)),
    );
    (Factors::Scale { d: half(blk, 0) }, vaddvq_s32(s), 0)
}

#[target_feature(enable = "neon")]
unsafe fn q4_0(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    let isum = nibble_dot(blk.as_ptr().add(2), a, 32 * b, 8, None);
    (Factors::Scale { d: half(blk, 0) }, isum, 0)
}

#[target_feature(enable = "neon")]
unsafe fn q4_1(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    let isum = nibble_dot(blk.as_ptr().add(4), a, 32 * b, 0, None);
    (
        Factors::Affine {
            d: half(blk, 0),
            m: half(blk, 2),
        },
        isum,
        0,
    )
}

#[target_feature(enable = "neon")]
unsafe fn iq4_nl(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    let table = vld1q_s8(IQ4_NL_LEVELS.as_ptr());
    let isum = nibble_dot(blk.as_ptr().add(2), a, 32 * b, 0, Some(table));
    (Factors::Scale { d: half(blk, 0) }, isum, 0)
}

/// Q4_K / Q5_K: sub-block `j`'s 32 codes are nibble `j % 2` of `qs[(j / 2)·32..]`, plus (Q5_K)
/// bit `j` of `qh[l]` as the fifth; `isum = Σ_j sc_j · dot_j`, `imin = Σ_j m_j · Σ a`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn k4(
    blk: &[u8],
    qs: *const u8,
    qh: Option<*const u8>,
    a: &QuantRow,
    b: usize,
) -> (Factors, i32, i32) {
    let (mut isum, mut imin) = (0i32, 0i32);
    let bs = &a.bsums[16 * b..16 * b + 16];
    for j in 0..8 {
        let (sc, m) = scale_min(&blk[4..16], j);
        let mut s = vdupq_n_s32(0);
        for half16 in 0..2 {
            let x = vld1q_u8(qs.add((j / 2) * 32 + 16 * half16));
            let mut q = if j % 2 == 0 {
                vandq_u8(x, vdupq_n_u8(0x0F))
            } else {
                vshrq_n_u8::<4>(x)
            };
            if let Some(qh) = qh {
                let bit = vdupq_n_u8(1 << j);
                let set = vceqq_u8(vandq_u8(vld1q_u8(qh.add(16 * half16)), bit), bit);
                q = vorrq_u8(q, vandq_u8(set, vdupq_n_u8(0x10)));
            }
            s = vaddq_s32(
                s,
                dot16(
                    vreinterpretq_s8_u8(q),
                    act16(a, 256 * b + 32 * j + 16 * half16),
                ),
            );
        }
        isum += sc as i32 * vaddvq_s32(s);
        imin += m as i32 * (bs[2 * j] + bs[2 * j + 1]);
    }
    (
        Factors::Minimum {
            d: half(blk, 0),
            dmin: half(blk, 2),
        },
        isum,
        imin,
    )
}

#[target_feature(enable = "neon")]
unsafe fn q4_k(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    k4(blk, blk.as_ptr().add(16), None, a, b)
}

#[target_feature(enable = "neon")]
unsafe fn q5_k(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    k4(blk, blk.as_ptr().add(48), Some(blk.as_ptr().add(16)), a, b)
}

/// Q6_K: elements `h·128 + s·32 + l` take nibble `s / 2` of `ql[h·64 + (s % 2)·32 + l]` and
/// bits `2s` of `qh[h·32 + l]`, minus 32; sub-blocks of 16 with i8 scales.
#[target_feature(enable = "neon")]
unsafe fn q6_k(blk: &[u8], a: &QuantRow, b: usize) -> (Factors, i32, i32) {
    let (ql, qh, sc) = (blk.as_ptr(), blk.as_ptr().add(128), &blk[192..208]);
    let mut isum = 0i32;
    for h in 0..2 {
        for s in 0..4 {
            for half16 in 0..2 {
                let lo = vld1q_u8(ql.add(64 * h + 32 * (s % 2) + 16 * half16));
                let lo = if s / 2 == 0 {
                    vandq_u8(lo, vdupq_n_u8(0x0F))
                } else {
                    vshrq_n_u8::<4>(lo)
                };
                let hi = vld1q_u8(qh.add(32 * h + 16 * half16));
                let hi = vandq_u8(vshlq_u8(hi, vdupq_n_s8(-2 * s as i8)), vdupq_n_u8(0x03));
                let q = vorrq_u8(lo, vshlq_n_u8::<4>(hi));
                let q = vsubq_s8(vreinterpretq_s8_u8(q), vdupq_n_s8(32));
                let e = 128 * h + 32 * s + 16 * half16;
                isum += sc[e / 16] as i8 as i32 * vaddvq_s32(dot16(q, act16(a, 256 * b + e)));
            }
        }
    }
    (Factors::Scale { d: half(blk, 208) }, isum, 0)
}
