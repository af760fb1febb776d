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
//! `b · GROUP · block_bytes`: first the type's header fields (scales, minimums, packed
//! sub-block scales), each as [`GROUP`] copies side by side (output `j`'s at `j · width`),
//! then the codes in planes, per 32 elements ("chunk") of the block, each chunk's planes
//! side by side (a kernel reads a block front to back, one stream: with the high bits in a
//! region of their own, two streams a kilobyte apart ran Q6_K's product from DRAM at a
//! third of Q4_K's bandwidth):
//!
//! - nibbles (Q4_0, Q4_K, and Q6_K's low four bits): four 32-byte vectors; byte `4j + i` of
//!   vector `c` holds output `j`'s element `8c + i` in its low nibble and `8c + 4 + i` in its
//!   high one, so vector `v / 2`'s low (`v` even) or high nibbles are elements `4v..4v + 4`;
//! - the fifth bits (Q5_0, Q5_1, Q5_K), after the chunk's nibbles: one vector; bit `v` of
//!   byte `4j + i` is output `j`'s element `4v + i`'s;
//! - Q6_K's top two bits, after the chunk's nibbles: two vectors; bits `2(v % 4)` and up of
//!   byte `4j + i` of vector `v / 4` are output `j`'s element `4v + i`;
//! - bytes (Q8_0): eight vectors; byte `4j + i` of vector `v` is output `j`'s element
//!   `4v + i`, plus 128.

use super::ggml::GgmlType;

/// Weight rows per interleaved group (either layout), and outputs per kernel call: a tier's
/// eight f32 lanes, and a group small enough to stay in L1 while a prompt's activation rows
/// pass over it.
pub(crate) const GROUP: usize = 8;

/// How a type's codes are stored after its header.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Codes {
    Nibbles,
    NibblesHigh1,
    NibblesHigh2,
    Bytes,
}

/// A covered type's header fields (file offset, width in bytes) and its code planes.
fn layout(t: GgmlType) -> Option<(&'static [(usize, usize)], Codes)> {
    Some(match t {
        GgmlType::Q4_0 | GgmlType::IQ4_NL => (&[(0, 2)], Codes::Nibbles),
        GgmlType::Q4_1 => (&[(0, 2), (2, 2)], Codes::Nibbles),
        GgmlType::Q5_0 => (&[(0, 2)], Codes::NibblesHigh1),
        GgmlType::Q5_1 => (&[(0, 2), (2, 2)], Codes::NibblesHigh1),
        GgmlType::Q8_0 => (&[(0, 2)], Codes::Bytes),
        // d, dmin, then the twelve packed 6-bit scale and minimum bytes as three words.
        GgmlType::Q4_K => (&[(0, 2), (2, 2), (4, 4), (8, 4), (12, 4)], Codes::Nibbles),
        GgmlType::Q5_K => (
            &[(0, 2), (2, 2), (4, 4), (8, 4), (12, 4)],
            Codes::NibblesHigh1,
        ),
        // d, then the sixteen i8 sub-block scales as four words.
        GgmlType::Q6_K => (
            &[(208, 2), (192, 4), (196, 4), (200, 4), (204, 4)],
            Codes::NibblesHigh2,
        ),
        _ => return None,
    })
}

/// The weight types the lane layout covers (a tier's kernel asks for it by type).
pub(crate) fn covers(t: GgmlType) -> bool {
    layout(t).is_some()
}

/// Bytes of a covered type's header in a lane block (where its codes start).
pub(crate) fn header_bytes(t: GgmlType) -> usize {
    layout(t).map_or(0, |(h, _)| h.iter().map(|f| GROUP * f.1).sum())
}

/// Packs one group's rows (at most [`GROUP`], each `row_bytes` of the file's blocks) into
/// `out` (`GROUP · row_bytes` bytes, zeroed: missing rows stay zero).
///
/// # Panics
/// If the type is not [`covers`]ed.
pub(crate) fn pack_group(t: GgmlType, rows: &[&[u8]], row_bytes: usize, out: &mut [u8]) {
    let (header, codes) = layout(t).expect("a type the lane layout covers");
    let (bb, base) = (t.block_bytes(), header_bytes(t));
    // Output 0's places per element, once: output j's are 4j bytes on (a lane further).
    let table: Vec<[Place; 2]> = (0..t.block_len())
        .map(|e| {
            let mut p = places(codes, base, 0, e);
            let first = p.next().expect("every code has a plane");
            [first, p.next().unwrap_or((first.0, 0, (0, 0)))]
        })
        .collect();
    let mut q = vec![0u8; t.block_len()];
    for (b, dst) in out.chunks_exact_mut(GROUP * bb).enumerate() {
        for (j, row) in rows.iter().enumerate() {
            let src = &row[b * bb..(b + 1) * bb];
            let mut at = 0;
            for &(from, width) in header {
                dst[at + j * width..][..width].copy_from_slice(&src[from..from + width]);
                at += GROUP * width;
            }
            codes_of(t, src, &mut q);
            for (q, places) in q.iter().zip(&table) {
                // A missing second plane has mask 0: it ors nothing.
                for &(off, shift, (mask, from)) in places {
                    dst[off + 4 * j] |= ((q >> from) & mask) << shift;
                }
            }
        }
    }
    debug_assert_eq!(out.len(), GROUP * row_bytes);
}

/// Every element's code of a file block ([`code`] for each, the type matched once).
fn codes_of(t: GgmlType, src: &[u8], q: &mut [u8]) {
    macro_rules! each {
        ($t:expr) => {
            for (e, q) in q.iter_mut().enumerate() {
                *q = code($t, src, e);
            }
        };
    }
    match t {
        GgmlType::Q4_0 => each!(GgmlType::Q4_0),
        GgmlType::Q8_0 => each!(GgmlType::Q8_0),
        GgmlType::Q4_K => each!(GgmlType::Q4_K),
        GgmlType::Q6_K => each!(GgmlType::Q6_K),
        _ => each!(t),
    }
}

/// The file's block `b` of the group's row `j` (`group` its packed bytes), into `out`.
pub(crate) fn block(t: GgmlType, group: &[u8], j: usize, b: usize, out: &mut [u8]) {
    let (header, codes) = layout(t).expect("a type the lane layout covers");
    let (bb, base) = (t.block_bytes(), header_bytes(t));
    let src = &group[b * GROUP * bb..(b + 1) * GROUP * bb];
    let out = &mut out[..bb];
    out.fill(0);
    let mut at = 0;
    for &(to, width) in header {
        out[to..to + width].copy_from_slice(&src[at + j * width..][..width]);
        at += GROUP * width;
    }
    for e in 0..t.block_len() {
        let mut q = 0u8;
        for (off, shift, bits) in places(codes, base, j, e) {
            q |= ((src[off] >> shift) & bits.0) << bits.1;
        }
        set_code(t, out, e, q);
    }
}

/// Where output `j`'s element `e` lives after the header: per plane, the byte, the shift
/// there, and which bits of the code (mask, taken from the code shifted right by `.1`).
fn places(codes: Codes, base: usize, j: usize, e: usize) -> Places {
    let (ch, i) = (e / 32, e % 32);
    let lane = 4 * j + i % 4;
    let (first, second) = match codes {
        Codes::Bytes => ((base + 32 * (e / 4) + lane, 0, (0xFF, 0)), None),
        _ => {
            let at = base + chunk_bytes(codes) * ch;
            let nib = (at + 32 * (i / 8) + lane, 4 * ((i % 8) / 4), (0x0F, 0));
            let high = match codes {
                Codes::NibblesHigh1 => Some((at + 128 + lane, i / 4, (0x01, 4))),
                Codes::NibblesHigh2 => Some((
                    at + 128 + 32 * (i / 16) + lane,
                    2 * ((i / 4) % 4),
                    (0x03, 4),
                )),
                _ => None,
            };
            (nib, high)
        }
    };
    std::iter::once(first).chain(second)
}

/// Bytes of one chunk's code planes (the nibbles, then their high bits) for nibble codes.
fn chunk_bytes(codes: Codes) -> usize {
    match codes {
        Codes::NibblesHigh1 => 160,
        Codes::NibblesHigh2 => 192,
        _ => 128,
    }
}

/// [`places`]' planes of one element (one or two).
type Places = std::iter::Chain<std::iter::Once<Place>, std::option::IntoIter<Place>>;
/// A byte, the shift there, and which bits of the code (mask, shift).
type Place = (usize, usize, (u8, u32));

/// Where a 32-block type's nibbles and fifth bits (a little-endian u32) start.
fn nibbles_at(t: GgmlType) -> (usize, Option<usize>) {
    match t {
        GgmlType::Q4_1 => (4, None),
        GgmlType::Q5_0 => (6, Some(2)),
        GgmlType::Q5_1 => (8, Some(4)),
        _ => (2, None),
    }
}

/// Element `e`'s code in a file block (Q8_0's stored `+ 128`).
#[inline(always)]
fn code(t: GgmlType, src: &[u8], e: usize) -> u8 {
    match t {
        GgmlType::Q4_0 | GgmlType::IQ4_NL | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (qs, qh) = nibbles_at(t);
            let lo = (src[qs + e % 16] >> (4 * (e / 16))) & 0x0F;
            lo | qh.map_or(0, |h| ((src[h + e / 8] >> (e % 8)) & 1) << 4)
        }
        GgmlType::Q8_0 => src[2 + e] ^ 0x80,
        GgmlType::Q4_K => (src[16 + 32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0x0F,
        GgmlType::Q5_K => {
            let (j, l) = (e / 32, e % 32);
            let lo = (src[48 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
            lo | ((src[16 + l] >> j) & 1) << 4
        }
        _ => {
            let (h, r) = (e / 128, e % 128);
            let lo = (src[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
            let hi = (src[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
            lo | hi << 4
        }
    }
}

/// Sets element `e`'s code `q` in a file block whose code bits start zero ([`code`]'s inverse).
fn set_code(t: GgmlType, dst: &mut [u8], e: usize, q: u8) {
    match t {
        GgmlType::Q4_0 | GgmlType::IQ4_NL | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (qs, qh) = nibbles_at(t);
            dst[qs + e % 16] |= (q & 0x0F) << (4 * (e / 16));
            if let Some(h) = qh {
                dst[h + e / 8] |= (q >> 4) << (e % 8);
            }
        }
        GgmlType::Q8_0 => dst[2 + e] = q ^ 0x80,
        GgmlType::Q4_K => dst[16 + 32 * (e / 64) + e % 32] |= q << (4 * ((e / 32) % 2)),
        GgmlType::Q5_K => {
            let (j, l) = (e / 32, e % 32);
            dst[48 + 32 * (j / 2) + l] |= (q & 0x0F) << (4 * (j % 2));
            dst[16 + l] |= (q >> 4) << j;
        }
        _ => {
            let (h, r) = (e / 128, e % 128);
            dst[64 * h + r % 64] |= (q & 0x0F) << (4 * (r / 64));
            dst[128 + 32 * h + r % 32] |= (q >> 4) << (2 * (r / 32));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block comes back as the file stored it, for full and short groups.
    #[test]
    fn blocks_come_back_as_stored() {
        let mut seed = 0x2545_f491u32;
        for t in GgmlType::ALL.into_iter().filter(|&t| covers(t)) {
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
