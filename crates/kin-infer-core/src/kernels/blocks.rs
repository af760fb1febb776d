//! Block-quantized B panels: ggml's Q8_0, Q4_0, Q4_1, Q5_0, … weights kept quantized in
//! memory and dequantized inside the GEMM, exactly as [`GgmlType::dequantize`] does, so a
//! product over them has the bits of the f32 product over the dequantized matrix.
//!
//! A matrix of a block type is packed like any other (`nr`-wide panels, k-major), one
//! *panel block* per panel and 32 (or 256) k: `nr · panel_block_bytes` bytes holding the `nr`
//! columns' blocks for that stretch of k (the ggml blocks' bytes, except Q6_K's, widened:
//! `WeightFormat::panel_block_bytes`), so element offsets map to bytes as `off / block_len ·
//! panel_block_bytes` and a KC slice (a multiple of the block length) is a run of whole panel
//! blocks. Inside a panel block the layout depends on the type:
//!
//! - **interleaved** (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: the types with direct SIMD kernels): first
//!   the `nr` f16 scales `d` (then, for Q4_1 / Q5_1, the `nr` f16 minimums `m`), then 32 *code
//!   rows* (Q5: the low four bits; then 32 rows of `nr / 8` bytes, bit `c` column `c`'s fifth), one per
//!   k, each holding that k's code of every column: `nr` bytes for Q8_0; `nr / 2` bytes for
//!   the 4-bit types, byte `i` holding column `i` in its low nibble and column `i + nr/2` in
//!   its high one, so a tier widens a code row into two registers of consecutive columns
//!   with one mask and one shift; the K-quants with direct kernels (Q4_K, Q5_K, Q6_K) in the
//!   same spirit, their sub-block scales as rows across columns (`blocks_k.rs`);
//! - **verbatim** (every other type): the `nr` columns' ggml blocks one after another, read
//!   through the scalar reference (a slower path, as the issue allows for the other types).
//!
//! Padding columns of a last partial panel are zero bytes (scale 0.0); their products are
//! computed and discarded, as for f32 panels.

use super::aligned::AlignedBuf;
use super::blocks_k;
use super::format::WeightFormat;
use super::ggml::GgmlType;
use super::widen::f16_to_f32;

/// Largest block (an affine block of 256 8-bit codes: 264 bytes; ggml's largest, Q6_K, is
/// 210) rounded up: a stack buffer holds any one block.
const MAX_BLOCK: usize = 272;

/// The interleaved ggml type of `f`, if its panels use that layout.
fn interleaved_type(f: WeightFormat) -> Option<GgmlType> {
    f.quant().filter(|t| interleaved(*t))
}

/// Whether the panels of `t` use the interleaved layout (see the module doc).
pub(crate) const fn interleaved(t: GgmlType) -> bool {
    matches!(
        t,
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1
    ) || k_interleaved(t)
}

/// Whether `t` is a 32-value type with a fifth code bit (Q5_0, Q5_1).
const fn five_bit(t: GgmlType) -> bool {
    matches!(t, GgmlType::Q5_0 | GgmlType::Q5_1)
}

/// Where the rows of fifth code bits start (`nr / 8` bytes per k, bit `c` column `c`'s):
/// Q5_0 and Q5_1 after their 32 nibble rows, Q5_K after its 256.
pub(crate) const fn high_at(t: GgmlType, nr: usize) -> usize {
    match t {
        GgmlType::Q5_0 => 18 * nr,
        GgmlType::Q5_1 => 20 * nr,
        _ => blocks_k::high_at(t, nr),
    }
}

/// Whether `t` is a K-quant with the interleaved layout of `blocks_k.rs`.
pub(crate) const fn k_interleaved(t: GgmlType) -> bool {
    matches!(t, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
}

/// Bytes where the interleaved code rows start in a panel block of width `nr`.
pub(crate) const fn codes_at(t: GgmlType, nr: usize) -> usize {
    match t {
        GgmlType::Q4_1 | GgmlType::Q5_1 => 4 * nr,
        _ if k_interleaved(t) => blocks_k::codes_at(t, nr),
        _ => 2 * nr,
    }
}

/// Packs a `k × n` matrix of block format `t` given by its columns (`col(j)`: the ggml blocks of k
/// values, i.e. row `j` of a torch weight as stored in the file) into panels of width `nr`.
///
/// # Panics
/// If `t` is not a block type, `k` is not whole blocks or a column is shorter than its blocks.
pub(crate) fn pack<'a>(
    t: WeightFormat,
    nr: usize,
    k: usize,
    n: usize,
    col: impl Fn(usize) -> &'a [u8],
) -> AlignedBuf<u8> {
    let (bl, bb, pbb) = (t.block_len(), t.block_bytes(), t.panel_block_bytes());
    // Multiples of 8 columns: the K layouts' bit rows hold a whole byte of columns.
    assert!(t.is_block() && k.is_multiple_of(bl) && nr.is_multiple_of(8));
    let (kb_n, panels) = (k / bl, n.div_ceil(nr));
    // Zeroed: the interleaved nibbles are or-ed in, and padding columns stay zero.
    let mut buf = AlignedBuf::<u8>::zeroed(panels * kb_n * nr * pbb);
    let data = buf.as_mut_slice();
    for jp in 0..panels {
        let cols = nr.min(n - jp * nr);
        for c in 0..cols {
            let src = &col(jp * nr + c)[..kb_n * bb];
            for (kb, block) in src.chunks_exact(bb).enumerate() {
                let at = (jp * kb_n + kb) * nr * pbb;
                write_block(t, nr, &mut data[at..at + nr * pbb], c, block);
            }
        }
    }
    buf
}

/// Stores column `c`'s ggml block `src` into the panel block `dst` (zeroed before).
fn write_block(f: WeightFormat, nr: usize, dst: &mut [u8], c: usize, src: &[u8]) {
    let bb = f.block_bytes();
    let Some(t) = interleaved_type(f) else {
        dst[c * bb..(c + 1) * bb].copy_from_slice(src);
        return;
    };
    if k_interleaved(t) {
        return blocks_k::write(t, nr, dst, c, src);
    }
    dst[2 * c..2 * c + 2].copy_from_slice(&src[..2]);
    let codes = codes_at(t, nr);
    match t {
        GgmlType::Q8_0 => {
            for (p, q) in src[2..34].iter().enumerate() {
                dst[codes + p * nr + c] = *q;
            }
        }
        _ => {
            // block_q4_1 / block_q5_1 carry `m` after `d`; Q5's `qh` (u32) precedes `qs`.
            let with_min = matches!(t, GgmlType::Q4_1 | GgmlType::Q5_1);
            if with_min {
                dst[2 * nr + 2 * c..2 * nr + 2 * c + 2].copy_from_slice(&src[2..4]);
            }
            let qh_at = if with_min { 4 } else { 2 };
            let qs_at = qh_at + if five_bit(t) { 4 } else { 0 };
            let qh =
                u32::from_le_bytes([src[qh_at], src[qh_at + 1], src[qh_at + 2], src[qh_at + 3]]);
            let qs = &src[qs_at..qs_at + 16];
            let half = nr / 2;
            for p in 0..32 {
                let q = if p < 16 { qs[p] & 15 } else { qs[p - 16] >> 4 };
                dst[codes + p * half + c % half] |= q << (4 * (c / half));
                if five_bit(t) && (qh >> p) & 1 == 1 {
                    dst[high_at(t, nr) + p * nr / 8 + c / 8] |= 1 << (c % 8);
                }
            }
        }
    }
}

/// Column `c`'s ggml block back out of the panel block `src` (the first `block_bytes`
/// bytes of the result): what [`write_block`] stored.
fn read_block(f: WeightFormat, nr: usize, src: &[u8], c: usize) -> [u8; MAX_BLOCK] {
    let bb = f.block_bytes();
    let mut out = [0u8; MAX_BLOCK];
    let Some(t) = interleaved_type(f) else {
        out[..bb].copy_from_slice(&src[c * bb..(c + 1) * bb]);
        return out;
    };
    if k_interleaved(t) {
        blocks_k::read(t, nr, src, c, &mut out);
        return out;
    }
    out[..2].copy_from_slice(&src[2 * c..2 * c + 2]);
    let codes = codes_at(t, nr);
    match t {
        GgmlType::Q8_0 => {
            for p in 0..32 {
                out[2 + p] = src[codes + p * nr + c];
            }
        }
        _ => {
            let with_min = matches!(t, GgmlType::Q4_1 | GgmlType::Q5_1);
            if with_min {
                out[2..4].copy_from_slice(&src[2 * nr + 2 * c..2 * nr + 2 * c + 2]);
            }
            let qh_at = if with_min { 4 } else { 2 };
            let qs_at = qh_at + if five_bit(t) { 4 } else { 0 };
            let half = nr / 2;
            let mut qh = 0u32;
            for p in 0..32 {
                let q = (src[codes + p * half + c % half] >> (4 * (c / half))) & 15;
                out[qs_at + p % 16] |= if p < 16 { q } else { q << 4 };
                if five_bit(t) {
                    qh |= (((src[high_at(t, nr) + p * nr / 8 + c / 8] >> (c % 8)) & 1) as u32) << p;
                }
            }
            if five_bit(t) {
                out[qh_at..qh_at + 4].copy_from_slice(&qh.to_le_bytes());
            }
        }
    }
    out
}

/// The same matrix's panels at another panel width (a matrix packed by another tier).
pub(crate) fn repack(
    t: WeightFormat,
    from_nr: usize,
    data: &[u8],
    k: usize,
    n: usize,
    nr: usize,
) -> AlignedBuf<u8> {
    let (bl, bb, pbb) = (t.block_len(), t.block_bytes(), t.panel_block_bytes());
    let kb_n = k / bl;
    let cols: Vec<Vec<u8>> = (0..n)
        .map(|j| {
            let (jp, c) = (j / from_nr, j % from_nr);
            let mut v = Vec::with_capacity(kb_n * bb);
            for kb in 0..kb_n {
                let at = (jp * kb_n + kb) * from_nr * pbb;
                v.extend_from_slice(
                    &read_block(t, from_nr, &data[at..at + from_nr * pbb], c)[..bb],
                );
            }
            v
        })
        .collect();
    pack(t, nr, k, n, |j| &cols[j])
}

/// Column `j` of a packed block matrix (all `k` values: a torch weight's row `j`, e.g. a
/// token's embedding) dequantized into `out`, block by block as the reference does.
pub(crate) fn column_into(
    t: WeightFormat,
    nr: usize,
    data: &[u8],
    k: usize,
    j: usize,
    out: &mut [f32],
) {
    let (bl, bb, pbb) = (t.block_len(), t.block_bytes(), t.panel_block_bytes());
    let (jp, c) = (j / nr, j % nr);
    for (kb, o) in out[..k].chunks_exact_mut(bl).enumerate() {
        let at = (jp * (k / bl) + kb) * nr * pbb;
        let block = read_block(t, nr, &data[at..at + nr * pbb], c);
        t.dequantize(&block[..bb], o);
    }
}

/// B[p][j] of a packed block matrix (dequantizes the block holding it).
pub(crate) fn get(t: WeightFormat, nr: usize, data: &[u8], k: usize, p: usize, j: usize) -> f32 {
    let (bl, bb, pbb) = (t.block_len(), t.block_bytes(), t.panel_block_bytes());
    let (jp, c, kb) = (j / nr, j % nr, p / bl);
    let at = (jp * (k / bl) + kb) * nr * pbb;
    let block = read_block(t, nr, &data[at..at + nr * pbb], c);
    let mut vals = [0.0f32; 256];
    t.dequantize(&block[..bb], &mut vals[..bl]);
    vals[p % bl]
}

/// The scalar staging dequantizer: `kc` k (whole blocks) of one panel, starting at the panel
/// block `src`, into `out` as f32 panel rows (`out[p·nr + c]`), each value the reference's
/// bits. The driver runs the f32 micro-kernel on the result; every tier may use this one
/// (the values are exact, so a tier's own version can only be faster, never different).
///
/// # Safety
/// `src` must hold `kc / block_len` panel blocks of width `nr`, `out` `kc · nr` floats.
pub(crate) unsafe fn dequant_slice(
    t: WeightFormat,
    nr: usize,
    src: *const u8,
    kc: usize,
    out: *mut f32,
) {
    let (bl, bb, pbb) = (t.block_len(), t.block_bytes(), t.panel_block_bytes());
    // SAFETY: the caller's extents.
    let (src, out) = unsafe {
        (
            std::slice::from_raw_parts(src, kc / bl * nr * pbb),
            std::slice::from_raw_parts_mut(out, kc * nr),
        )
    };
    for (kb, pb) in src.chunks_exact(nr * pbb).enumerate() {
        let rows = &mut out[kb * bl * nr..(kb + 1) * bl * nr];
        match t.quant() {
            Some(q @ (GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1)) => {
                interleaved_block(q, nr, pb, rows)
            }
            _ => {
                // Each column's block, through the reference: verbatim blocks (the affine
                // ones included) straight from the panel, the interleaved K layouts
                // unshuffled first.
                let mut vals = [0.0f32; 256];
                let verbatim = interleaved_type(t).is_none();
                for c in 0..nr {
                    if verbatim {
                        t.dequantize(&pb[c * bb..(c + 1) * bb], &mut vals[..bl]);
                    } else {
                        let block = read_block(t, nr, pb, c);
                        t.dequantize(&block[..bb], &mut vals[..bl]);
                    }
                    for (p, v) in vals[..bl].iter().enumerate() {
                        rows[p * nr + c] = *v;
                    }
                }
            }
        }
    }
}

/// One interleaved panel block into 32 f32 panel rows, with the reference's formulas.
#[inline]
fn interleaved_block(t: GgmlType, nr: usize, pb: &[u8], rows: &mut [f32]) {
    let scale = |at: usize| f16_to_f32(u16::from_le_bytes([pb[at], pb[at + 1]]));
    let codes = codes_at(t, nr);
    let half = nr / 2;
    for c in 0..nr {
        let d = scale(2 * c);
        match t {
            GgmlType::Q8_0 => {
                for p in 0..32 {
                    rows[p * nr + c] = d * (pb[codes + p * nr + c] as i8) as f32;
                }
            }
            GgmlType::Q4_0 => {
                for p in 0..32 {
                    let q = (pb[codes + p * half + c % half] >> (4 * (c / half))) & 15;
                    rows[p * nr + c] = d * (q as i8 - 8) as f32;
                }
            }
            _ => {
                let m = scale(2 * nr + 2 * c);
                for p in 0..32 {
                    let q = (pb[codes + p * half + c % half] >> (4 * (c / half))) & 15;
                    rows[p * nr + c] = (d * q as f32) + m;
                }
            }
        }
    }
}
