//! The interleaved panel-block layout of the K-quants with direct SIMD kernels (Q4_K, Q5_K,
//! Q6_K): one super-block of 256 k for `nr` columns, in exactly `nr · block_bytes` bytes (so
//! a panel's addressing is the same as for the verbatim layout), rearranged so that a tier
//! widens one k's codes of every column with a few vector instructions, and one sub-block's
//! scales of every column with a few more.
//!
//! Q4_K and Q5_K (sub-blocks of 32 k, 6-bit scale `sc` and minimum `m` each):
//!
//! | bytes            | what                                                             |
//! |------------------|------------------------------------------------------------------|
//! | `0 .. 2nr`       | `d` (f16) of each column                                         |
//! | `2nr .. 4nr`     | `dmin` (f16) of each column                                      |
//! | `4nr .. 12nr`    | 8 rows (one per sub-block `j`) of `(sc & 15) | (m & 15) << 4`    |
//! | `12nr .. 16nr`   | 4 rows (sub-blocks `2r`, `2r+1`): `sc>>4 | (m>>4)<<2` at bit `4·(j%2)` |
//! | `16nr .. 144nr`  | 256 nibble rows of `nr/2` bytes (Q4_0's code rows)               |
//! | `144nr .. 176nr` | Q5_K: 256 bit rows of `nr/8` bytes, bit `c` the fifth bit of column `c` |
//!
//! Q6_K (sub-blocks of 16 k, i8 scale each, codes 6 bits, minus 32), in `274 · nr` bytes, not
//! the stored 210: each code widened to a byte (`q`, 0..64), so a row is one byte per weight like
//! Q8_0's and runs at its speed (measured: unpacking the 2-bit planes of a 6-bit layout halved the kernel's rate;
//! the cost is 8.6 instead of 6.6 bits per weight resident, which `stored_bytes` reports):
//!
//! | bytes            | what                                                             |
//! |------------------|------------------------------------------------------------------|
//! | `0 .. 2nr`       | `d` (f16) of each column                                         |
//! | `2nr .. 18nr`    | 16 rows of i8 scales                                             |
//! | `18nr .. 274nr`  | 256 code rows of `nr` bytes: `q` (0..64, the weight is `q − 32`) |
//!
//! Each sub-block's values are the reference's: `(d·sc)` and `(dmin·m)` are exact in f32 (an
//! f16 times a 6- or 8-bit integer), so a tier computes them in any order with the same bits.
//! Q4_K and Q5_K keep exactly `nr · block_bytes` bytes per panel block.

use super::dequant::scale_min;
use super::ggml::GgmlType;

/// Where the code rows start in a panel block of width `nr`.
pub(crate) const fn codes_at(t: GgmlType, nr: usize) -> usize {
    match t {
        GgmlType::Q6_K => 18 * nr,
        _ => 16 * nr,
    }
}

/// Where Q5_K's rows of fifth code bits start.
pub(crate) const fn high_at(_t: GgmlType, nr: usize) -> usize {
    144 * nr
}

/// Element `e`'s code (the unsigned integer before scale and offset) and sub-block in a
/// ggml block of `t`.
fn code(t: GgmlType, b: &[u8], e: usize) -> u8 {
    match t {
        GgmlType::Q6_K => {
            let (h, r) = (e / 128, e % 128);
            let lo = (b[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
            let hi = (b[128 + h * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
            lo | hi << 4
        }
        _ => {
            let (j, l) = (e / 32, e % 32);
            let qs = if t == GgmlType::Q5_K { 48 } else { 16 };
            let lo = (b[qs + (j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F;
            let hi = if t == GgmlType::Q5_K {
                (b[16 + l] >> j) & 1
            } else {
                0
            };
            lo | hi << 4
        }
    }
}

/// Stores element `e`'s code `q` into a (zeroed) ggml block of `t`: [`code`]'s inverse.
fn set_code(t: GgmlType, b: &mut [u8], e: usize, q: u8) {
    match t {
        GgmlType::Q6_K => {
            let (h, r) = (e / 128, e % 128);
            b[h * 64 + r % 64] |= (q & 0x0F) << (4 * (r / 64));
            b[128 + h * 32 + r % 32] |= (q >> 4) << (2 * (r / 32));
        }
        _ => {
            let (j, l) = (e / 32, e % 32);
            let qs = if t == GgmlType::Q5_K { 48 } else { 16 };
            b[qs + (j / 2) * 32 + l] |= (q & 0x0F) << (4 * (j % 2));
            if t == GgmlType::Q5_K {
                b[16 + l] |= (q >> 4) << j;
            }
        }
    }
}

/// Stores column `c`'s ggml block `src` into the zeroed panel block `dst`.
pub(crate) fn write(t: GgmlType, nr: usize, dst: &mut [u8], c: usize, src: &[u8]) {
    let (codes, high) = (codes_at(t, nr), high_at(t, nr));
    let half = nr / 2;
    if t == GgmlType::Q6_K {
        dst[2 * c..2 * c + 2].copy_from_slice(&src[208..210]);
        for g in 0..16 {
            dst[2 * nr + g * nr + c] = src[192 + g];
        }
    } else {
        dst[2 * c..2 * c + 2].copy_from_slice(&src[..2]);
        dst[2 * nr + 2 * c..2 * nr + 2 * c + 2].copy_from_slice(&src[2..4]);
        for j in 0..8 {
            let (s, m) = scale_min(&src[4..16], j);
            dst[4 * nr + j * nr + c] = (s & 15) | (m & 15) << 4;
            dst[12 * nr + (j / 2) * nr + c] |= ((s >> 4) | (m >> 4) << 2) << (4 * (j % 2));
        }
    }
    for e in 0..256 {
        let q = code(t, src, e);
        match t {
            GgmlType::Q6_K => dst[codes + e * nr + c] = q,
            _ => {
                dst[codes + e * half + c % half] |= (q & 15) << (4 * (c / half));
                if t == GgmlType::Q5_K {
                    dst[high + e * nr / 8 + c / 8] |= (q >> 4) << (c % 8);
                }
            }
        }
    }
}

/// Column `c`'s ggml block back out of the panel block `src` into the zeroed `out`.
pub(crate) fn read(t: GgmlType, nr: usize, src: &[u8], c: usize, out: &mut [u8]) {
    let (codes, high) = (codes_at(t, nr), high_at(t, nr));
    let half = nr / 2;
    if t == GgmlType::Q6_K {
        out[208..210].copy_from_slice(&src[2 * c..2 * c + 2]);
        for g in 0..16 {
            out[192 + g] = src[2 * nr + g * nr + c];
        }
    } else {
        out[..2].copy_from_slice(&src[2 * c..2 * c + 2]);
        out[2..4].copy_from_slice(&src[2 * nr + 2 * c..2 * nr + 2 * c + 2]);
        let sc = &mut out[4..16];
        for j in 0..8 {
            let lo = src[4 * nr + j * nr + c];
            let hi = src[12 * nr + (j / 2) * nr + c] >> (4 * (j % 2));
            let s = (lo & 15) | (hi & 3) << 4;
            let m = (lo >> 4) | ((hi >> 2) & 3) << 4;
            // get_scale_min_k4's packing: sub-blocks 0..4 in the low six bits of bytes 0..8,
            // 4..8 split between bytes 8..12 (low four bits) and those bytes' top two.
            if j < 4 {
                sc[j] |= s;
                sc[4 + j] |= m;
            } else {
                let i = j - 4;
                sc[8 + i] = (s & 15) | (m & 15) << 4;
                sc[i] |= (s >> 4) << 6;
                sc[4 + i] |= (m >> 4) << 6;
            }
        }
    }
    for e in 0..256 {
        let q = match t {
            GgmlType::Q6_K => src[codes + e * nr + c],
            _ => {
                let lo = (src[codes + e * half + c % half] >> (4 * (c / half))) & 15;
                if t == GgmlType::Q5_K {
                    lo | ((src[high + e * nr / 8 + c / 8] >> (c % 8)) & 1) << 4
                } else {
                    lo
                }
            }
        };
        set_code(t, out, e, q);
    }
}
