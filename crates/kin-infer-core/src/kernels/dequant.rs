//! The scalar reference dequantizers of ggml's types, one stored block into its values: bit for
//! bit the `gguf` Python package's `gguf.quants` (numpy, maintained with llama.cpp; layouts as
//! in ggml's `ggml-common.h`). A leaf: the format table ([`FORMATS`](super::ggml::FORMATS))
//! holds a pointer to each, and nothing here knows the table.
//!
//! The references follow numpy's operation order exactly, every step an f32 operation rounded
//! on its own (Rust never contracts `a * b + c` into an FMA): Q4_1 is `(d * q) + m`, the
//! k-quants first form the sub-block scale `d * sc` and minimum `dmin * m`, then
//! `scale * q - min`. Where a product is exact (a half-precision scale times a small integer
//! always is) the order cannot matter, but it is kept anyway so that a reading of numpy's
//! code is a reading of this one. Held to the reference by `tests/ggml_formats.rs` against
//! goldens that `python/gen_ggml_goldens.py` wrote with `gguf` itself.

use super::widen::{bf16_to_f32, f16_to_f32};

/// Values per k-quant super-block.
pub const QK_K: usize = 256;

/// One F32 value, little-endian.
pub(crate) fn f32_le(b: &[u8], o: &mut [f32]) {
    o[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
}

/// One f16 value, widened (exact).
pub(crate) fn f16_le(b: &[u8], o: &mut [f32]) {
    o[0] = half(b, 0);
}

/// One bf16 value, widened (exact).
pub(crate) fn bf16_le(b: &[u8], o: &mut [f32]) {
    o[0] = bf16_to_f32(u16::from_le_bytes([b[0], b[1]]));
}

/// The f16 at byte `at`, widened (exact).
#[inline]
pub(super) fn half(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Element `i` (0..32) of a 32-value block's nibbles `qs` (16 bytes): low nibbles are
/// elements 0..16, high nibbles 16..32.
#[inline]
pub(super) fn nibble(qs: &[u8], i: usize) -> u8 {
    if i < 16 {
        qs[i] & 0x0F
    } else {
        qs[i - 16] >> 4
    }
}

/// `block_q4_0 { d: f16, qs: [u8; 16] }`: `d * (q - 8)`.
pub(crate) fn q4_0(b: &[u8], o: &mut [f32]) {
    let d = half(b, 0);
    for (i, v) in o.iter_mut().enumerate() {
        *v = d * (nibble(&b[2..], i) as i8 - 8) as f32;
    }
}

/// IQ4_NL's 16 non-linear levels (ggml-common.h's `kvalues_iq4nl`).
pub(super) const IQ4_NL_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// `block_iq4_nl { d: f16, qs: [u8; 16] }`: `d * level[q]`, with Q4_0's nibble order.
pub(crate) fn iq4_nl(b: &[u8], o: &mut [f32]) {
    let d = half(b, 0);
    for (i, v) in o.iter_mut().enumerate() {
        *v = d * IQ4_NL_LEVELS[nibble(&b[2..], i) as usize] as f32;
    }
}

/// `block_q4_1 { d: f16, m: f16, qs: [u8; 16] }`: `(d * q) + m`.
pub(crate) fn q4_1(b: &[u8], o: &mut [f32]) {
    let (d, m) = (half(b, 0), half(b, 2));
    for (i, v) in o.iter_mut().enumerate() {
        *v = (d * nibble(&b[4..], i) as f32) + m;
    }
}

/// The fifth bits of a Q5 block: bit `i` of the little-endian u32 at `at` is element `i`'s.
#[inline]
pub(super) fn high_bits(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `block_q5_0 { d: f16, qh: [u8; 4], qs: [u8; 16] }`: `d * (q - 16)`.
pub(crate) fn q5_0(b: &[u8], o: &mut [f32]) {
    let (d, qh) = (half(b, 0), high_bits(b, 2));
    for (i, v) in o.iter_mut().enumerate() {
        let q = nibble(&b[6..], i) | (((qh >> i) & 1) as u8) << 4;
        *v = d * (q as i8 - 16) as f32;
    }
}

/// `block_q5_1 { d: f16, m: f16, qh: [u8; 4], qs: [u8; 16] }`: `(d * q) + m`.
pub(crate) fn q5_1(b: &[u8], o: &mut [f32]) {
    let (d, m, qh) = (half(b, 0), half(b, 2), high_bits(b, 4));
    for (i, v) in o.iter_mut().enumerate() {
        let q = nibble(&b[8..], i) | (((qh >> i) & 1) as u8) << 4;
        *v = (d * q as f32) + m;
    }
}

/// `block_q8_0 { d: f16, qs: [i8; 32] }`: `q * d`.
pub(crate) fn q8_0(b: &[u8], o: &mut [f32]) {
    let d = half(b, 0);
    for (v, &q) in o.iter_mut().zip(&b[2..]) {
        *v = q as i8 as f32 * d;
    }
}

/// `block_q2_K { scales: [u8; 16], qs: [u8; 64], d: f16, dmin: f16 }`: 16 sub-blocks of 16,
/// scale `d * (sc & 15)`, minimum `dmin * (sc >> 4)`; element `e = h·128 + s·32 + l` is
/// 2 bits `2s` of `qs[h·32 + l]`.
pub(crate) fn q2_k(b: &[u8], o: &mut [f32]) {
    let (scales, qs) = (&b[..16], &b[16..80]);
    let (d, dmin) = (half(b, 80), half(b, 82));
    for (e, v) in o.iter_mut().enumerate() {
        let (h, s, l) = (e / 128, (e / 32) % 4, e % 32);
        let q = (qs[h * 32 + l] >> (2 * s)) & 3;
        let sc = scales[e / 16];
        let dl = d * (sc & 0x0F) as f32;
        let ml = dmin * (sc >> 4) as f32;
        *v = dl * q as f32 - ml;
    }
}

/// `block_q3_K { hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: f16 }`: 16 sub-blocks
/// of 16 with 6-bit signed scales; element `e = h·128 + s·32 + l` is 2 bits `2s` of
/// `qs[h·32 + l]`, minus 4 where bit `e / 32` of `hmask[e % 32]` is clear.
pub(crate) fn q3_k(b: &[u8], o: &mut [f32]) {
    let (hmask, qs, sc) = (&b[..32], &b[32..96], &b[96..108]);
    let d = half(b, 108);
    let scale = |j: usize| -> f32 {
        let lo = (sc[j % 8] >> (4 * (j / 8))) & 0x0F;
        let hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 0x03;
        ((lo | hi << 4) as i8 - 32) as f32
    };
    for (e, v) in o.iter_mut().enumerate() {
        let (h, s, l) = (e / 128, (e / 32) % 4, e % 32);
        let ql = ((qs[h * 32 + l] >> (2 * s)) & 3) as i8;
        let qh = ((hmask[e % 32] >> (e / 32)) & 1) ^ 1;
        let q = ql - (qh << 2) as i8;
        let dl = d * scale(e / 16);
        *v = dl * q as f32;
    }
}

/// Q4_K/Q5_K's 12 packed bytes of eight 6-bit scales and mins (`get_scale_min`).
pub(crate) fn scale_min(sc: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (sc[j] & 0x3F, sc[4 + j] & 0x3F)
    } else {
        let i = j - 4;
        (
            (sc[8 + i] & 0x0F) | ((sc[i] >> 2) & 0x30),
            (sc[8 + i] >> 4) | ((sc[4 + i] >> 2) & 0x30),
        )
    }
}

/// `block_q4_K { d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] }`: 8 sub-blocks of 32;
/// sub-block `j = 2c + s` is nibble `s` of `qs[c·32 + l]`; `(d * sc) * q - (dmin * m)`.
pub(crate) fn q4_k(b: &[u8], o: &mut [f32]) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let (sc, qs) = (&b[4..16], &b[16..144]);
    for (e, v) in o.iter_mut().enumerate() {
        let (j, l) = (e / 32, e % 32);
        let q = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F;
        let (s, m) = scale_min(sc, j);
        let (ds, dm) = (d * s as f32, dmin * m as f32);
        *v = ds * q as f32 - dm;
    }
}

/// `block_q5_K { d, dmin, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128] }`: Q4_K's nibbles
/// with bit `j` of `qh[l]` as the fifth bit of sub-block `j`'s element `l`.
pub(crate) fn q5_k(b: &[u8], o: &mut [f32]) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let (sc, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
    for (e, v) in o.iter_mut().enumerate() {
        let (j, l) = (e / 32, e % 32);
        let ql = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F;
        let q = ql | ((qh[l] >> j) & 1) << 4;
        let (s, m) = scale_min(sc, j);
        let (ds, dm) = (d * s as f32, dmin * m as f32);
        *v = ds * q as f32 - dm;
    }
}

/// `block_q6_K { ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 }`: element
/// `e = h·128 + r` (r < 128) takes nibble `r / 64` of `ql[h·64 + r % 64]` and 2 bits
/// `2·(r / 32)` of `qh[h·32 + r % 32]`, minus 32; times `d * scales[e / 16]`.
pub(crate) fn q6_k(b: &[u8], o: &mut [f32]) {
    let (ql, qh, scales) = (&b[..128], &b[128..192], &b[192..208]);
    let d = half(b, 208);
    for (e, v) in o.iter_mut().enumerate() {
        let (h, r) = (e / 128, e % 128);
        let lo = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
        let hi = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
        let q = (lo | hi << 4) as i8 - 32;
        let ds = d * scales[e / 16] as i8 as f32;
        *v = ds * q as f32;
    }
}
