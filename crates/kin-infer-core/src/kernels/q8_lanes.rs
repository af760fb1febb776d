//! The q8 mode's lane layout: a group of [`GROUP`] weight rows rearranged so that a SIMD
//! kernel keeps one output per 32-bit lane. With the file's blocks side by side, a kernel
//! sums each output's block in a vector of its own and then reduces eight vectors across
//! lanes, per block; here four consecutive codes of output `j` sit in lane `j`, so one
//! broadcast of four activation codes and one `vpmaddubsw` (or VNNI's `vpdpbusd`) feed
//! eight outputs at once and a block's sums come out already in lanes, with the block's
//! eight scales one load away. The values are the file's, only moved (Q8_0's codes stored
//! `+ 128` as unsigned bytes, an exact shift the kernel takes back out as `128 · Σ a`), so
//! any reader gets the file's blocks back ([`block`]) and the twin's bits are unchanged.
//!
//! A group always has [`GROUP`] rows (a short last one is padded with zero rows, never
//! stored to the output); its block `b` is [`GROUP`] times the file's block bytes at
//! `b · GROUP · block_bytes`, laid out per type:
//!
//! - Q4_0: the eight f16 scales `d_j`, then four 32-byte vectors: byte `4j + i` of vector
//!   `c` holds output `j`'s code of element `8c + i` in its low nibble and of `8c + 4 + i`
//!   in its high nibble.
//! - Q8_0: the eight f16 scales, then eight 32-byte vectors: byte `4j + i` of vector `c` is
//!   output `j`'s code of element `4c + i`, plus 128.

use super::ggml::GgmlType;

/// Weight rows per interleaved group (either layout), and outputs per kernel call: a tier's
/// eight f32 lanes, and a group small enough to stay in L1 while a prompt's activation rows
/// pass over it.
pub(crate) const GROUP: usize = 8;

/// The weight types the lane layout covers (a tier's kernel asks for it by type).
pub(crate) fn covers(t: GgmlType) -> bool {
    matches!(t, GgmlType::Q4_0 | GgmlType::Q8_0)
}

/// Packs one group's rows (at most [`GROUP`], each `row_bytes` of the file's blocks) into
/// `out` (`GROUP · row_bytes` bytes, zeroed: missing rows stay zero).
///
/// # Panics
/// If the type is not [`covers`]ed.
pub(crate) fn pack_group(t: GgmlType, rows: &[&[u8]], row_bytes: usize, out: &mut [u8]) {
    let bb = t.block_bytes();
    for (b, dst) in out.chunks_exact_mut(GROUP * bb).enumerate() {
        for (j, row) in rows.iter().enumerate() {
            let src = &row[b * bb..(b + 1) * bb];
            dst[2 * j..2 * j + 2].copy_from_slice(&src[..2]);
            for e in 0..t.block_len() {
                let (at, value) = place(t, j, e, code(t, src, e));
                let v = &mut dst[2 * GROUP + at];
                *v |= value;
            }
        }
    }
    debug_assert_eq!(out.len(), GROUP * row_bytes);
}

/// The file's block `b` of the group's row `j` (`group` its packed bytes), into `out`.
pub(crate) fn block(t: GgmlType, group: &[u8], j: usize, b: usize, out: &mut [u8]) {
    let bb = t.block_bytes();
    let src = &group[b * GROUP * bb..(b + 1) * GROUP * bb];
    let out = &mut out[..bb];
    out.fill(0);
    out[..2].copy_from_slice(&src[2 * j..2 * j + 2]);
    for e in 0..t.block_len() {
        let (at, _) = place(t, j, e, 0);
        let packed = src[2 * GROUP + at];
        let c = match t {
            GgmlType::Q4_0 if (e % 8) < 4 => packed & 0x0F,
            GgmlType::Q4_0 => packed >> 4,
            _ => packed ^ 0x80,
        };
        match t {
            GgmlType::Q4_0 if e < 16 => out[2 + e] |= c,
            GgmlType::Q4_0 => out[2 + e - 16] |= c << 4,
            _ => out[2 + e] = c,
        }
    }
}

/// Element `e`'s code of a file block: Q4_0's nibble (0..16), Q8_0's byte.
fn code(t: GgmlType, src: &[u8], e: usize) -> u8 {
    match t {
        GgmlType::Q4_0 if e < 16 => src[2 + e] & 0x0F,
        GgmlType::Q4_0 => src[2 + e - 16] >> 4,
        _ => src[2 + e],
    }
}

/// Where output `j`'s element `e` goes in the codes after the scales, and its bits there.
fn place(t: GgmlType, j: usize, e: usize, code: u8) -> (usize, u8) {
    match t {
        GgmlType::Q4_0 => {
            let (c, i, high) = (e / 8, e % 4, (e % 8) >= 4);
            (32 * c + 4 * j + i, if high { code << 4 } else { code })
        }
        _ => (32 * (e / 4) + 4 * j + e % 4, code ^ 0x80),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block comes back as the file stored it, for full and short groups.
    #[test]
    fn blocks_come_back_as_stored() {
        let mut seed = 0x2545_f491u32;
        for t in [GgmlType::Q4_0, GgmlType::Q8_0] {
            let row_bytes = 3 * t.block_bytes();
            for n in [1, 5, GROUP] {
                let rows: Vec<Vec<u8>> = (0..n)
                    .map(|_| {
                        (0..row_bytes)
                            .map(|_| {
                                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                                (seed >> 24) as u8
                            })
                            .collect()
                    })
                    .collect();
                let refs: Vec<&[u8]> = rows.iter().map(|r| r.as_slice()).collect();
                let mut packed = vec![0u8; GROUP * row_bytes];
                pack_group(t, &refs, row_bytes, &mut packed);
                let mut got = vec![0u8; t.block_bytes()];
                for (j, row) in rows.iter().enumerate() {
                    for (b, want) in row.chunks_exact(t.block_bytes()).enumerate() {
                        block(t, &packed, j, b, &mut got);
                        assert_eq!(&got[..], want, "{} n={n} row {j} block {b}", t.name());
                    }
                }
            }
        }
    }
}
