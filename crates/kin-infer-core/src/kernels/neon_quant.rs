//! The aarch64 NEON staging dequantizer for block-quantized panels (`blocks.rs`'s interleaved
//! layouts, 16-column panels): a panel's KC slice into f32 panel rows for the NEON f32
//! micro-kernel, for Q8_0, Q4_0, Q4_1 and Q4_K (the other types take the scalar reference).
//!
//! A group's multipliers and offsets (per column: `d`, Q4_0's `−8·d`, Q4_1's `m`, Q4_K's
//! `d·sc` and `−(dmin·m)`) are computed with scalar f32 operations, each exact (an f16 times a
//! small integer), then every code row is widened to four quads of f32 and dequantized with one
//! `vfmaq_f32` per quad (Q8_0: `vmulq_f32`): the x86 tiers' formulas (`x86_quant.rs`), so the
//! values are the reference dequantizer's bit for bit. Checked under qemu-aarch64 by
//! scripts/cross-check.sh (examples/quant_matvec: every tier's quantized product equals its f32
//! product over the dequantized matrix); not timed on ARM hardware here.

use super::blocks::codes_at;
use super::gemm::f16_to_f32;
use super::ggml::GgmlType;
use std::arch::aarch64::*;

const NR: usize = 16;

/// Group `g`'s per-column multipliers and offsets of the panel block `blk`.
fn scales(t: GgmlType, blk: &[u8], g: usize) -> ([f32; NR], [f32; NR]) {
    let half = |at: usize, c: usize| {
        f16_to_f32(u16::from_le_bytes([blk[at + 2 * c], blk[at + 2 * c + 1]]))
    };
    let (mut mul, mut off) = ([0.0f32; NR], [0.0f32; NR]);
    for c in 0..NR {
        let d = half(0, c);
        (mul[c], off[c]) = match t {
            GgmlType::Q4_0 => (d, d * -8.0),
            GgmlType::Q4_1 => (d, half(2 * NR, c)),
            GgmlType::Q4_K => {
                let lo = blk[4 * NR + g * NR + c];
                let hi = blk[12 * NR + g / 2 * NR + c] >> (4 * (g % 2));
                let sc = (lo & 15) | (hi & 3) << 4;
                let m = (lo >> 4) | ((hi >> 2) & 3) << 4;
                (d * sc as f32, -(half(2 * NR, c) * m as f32))
            }
            _ => (d, 0.0),
        };
    }
    (mul, off)
}

/// The NEON staging dequantizer (`Ops::dequant`'s contract: `blocks::dequant_slice`'s).
/// Returns false, writing nothing, for a type it leaves to the scalar reference.
///
/// # Safety
/// As `blocks::dequant_slice`, with panels of width 16.
pub(super) unsafe fn dequant(t: GgmlType, src: *const u8, kc: usize, out: *mut f32) -> bool {
    if !matches!(
        t,
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q4_K
    ) {
        return false;
    }
    let (bl, bb) = (
        t.block_len(),
        super::format::WeightFormat::Quant(t).panel_block_bytes(),
    );
    let codes = codes_at(t, NR);
    // SAFETY: the caller's extents (kc / block_len panel blocks at src, kc · 16 floats at out).
    unsafe {
        for kb in 0..kc / bl {
            let blk = std::slice::from_raw_parts(src.add(kb * NR * bb), NR * bb);
            let o = out.add(kb * bl * NR);
            for g in 0..bl / 32 {
                let (mul, off) = scales(t, blk, g);
                let m = [0, 1, 2, 3].map(|i| vld1q_f32(mul.as_ptr().add(4 * i)));
                let a = [0, 1, 2, 3].map(|i| vld1q_f32(off.as_ptr().add(4 * i)));
                for p in 32 * g..32 * (g + 1) {
                    let w = if t == GgmlType::Q8_0 {
                        let q = vld1q_s8(blk.as_ptr().add(codes + p * NR).cast());
                        let (l, h) = (vmovl_s8(vget_low_s8(q)), vmovl_high_s8(q));
                        let q32 = [
                            vmovl_s16(vget_low_s16(l)),
                            vmovl_high_s16(l),
                            vmovl_s16(vget_low_s16(h)),
                            vmovl_high_s16(h),
                        ];
                        [0, 1, 2, 3].map(|i| vmulq_f32(vcvtq_f32_s32(q32[i]), m[i]))
                    } else {
                        // Byte i: column i in its low nibble, column i + 8 in its high one.
                        let v = vld1_u8(blk.as_ptr().add(codes + p * NR / 2));
                        let (l, h) = (
                            vmovl_u8(vand_u8(v, vdup_n_u8(15))),
                            vmovl_u8(vshr_n_u8::<4>(v)),
                        );
                        let q32 = [
                            vmovl_u16(vget_low_u16(l)),
                            vmovl_high_u16(l),
                            vmovl_u16(vget_low_u16(h)),
                            vmovl_high_u16(h),
                        ];
                        [0, 1, 2, 3].map(|i| vfmaq_f32(a[i], vcvtq_f32_u32(q32[i]), m[i]))
                    };
                    for (i, wi) in w.into_iter().enumerate() {
                        vst1q_f32(o.add(p * NR + 4 * i), wi);
                    }
                }
            }
        }
    }
    true
}
