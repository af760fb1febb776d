//! Integer affine blocks: the weight format of quantized inMotion artifacts (2- to 8-bit codes
//! `u` with an f32 scale and zero point per group of a row, `w = scale · (u − zero)` in f32),
//! kept packed in memory and dequantized inside the GEMM like ggml's blocks (`blocks.rs`).
//!
//! A block holds `block` consecutive values of one row: its scale (f32, little-endian), its
//! zero point (f32), then the codes, LSB-first, padded to a whole byte. A per-group artifact's
//! group, or a per-channel / per-tensor row, is cut into blocks of at most [`MAX_BLOCK`] values
//! that each repeat the group's scale and zero (the values are the same; blocks only bound the
//! GEMM's staging and let a KC slice be whole blocks).
//!
//! The reference dequantizer is [`AffineBlocks::dequantize`]: `(u as f32 − zero)` rounded, then
//! times `scale` rounded, the artifact reader's own order, so a product over these panels has
//! the bits of the f32 product over the matrix the reader used to build at load.

/// Largest block (values): the block machinery's stack buffers hold one block.
pub const MAX_BLOCK: usize = 256;

/// An affine block format: `bits`-bit codes in blocks of `block` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AffineBlocks {
    bits: u8,
    block: u16,
}

impl AffineBlocks {
    /// The format, if `bits` is 2..=8 and `block` 1..=[`MAX_BLOCK`].
    pub const fn new(bits: u32, block: usize) -> Option<AffineBlocks> {
        if bits >= 2 && bits <= 8 && block >= 1 && block <= MAX_BLOCK {
            Some(AffineBlocks {
                bits: bits as u8,
                block: block as u16,
            })
        } else {
            None
        }
    }

    /// The block for rows of `k` values whose scale and zero change every `group` values
    /// (`group = k` for per-channel and per-tensor; a last group may be shorter): the largest
    /// divisor of `gcd(group, k)` up to [`MAX_BLOCK`], so no block straddles two groups.
    /// `None` when the blocks would be so short that their scales outweigh the codes (then
    /// the matrix is better kept as f32).
    pub fn for_rows(bits: u32, k: usize, group: usize) -> Option<AffineBlocks> {
        if group == 0 || k == 0 {
            return None;
        }
        let (mut a, mut b) = (group, k);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        let block = (1..=a.min(MAX_BLOCK))
            .rev()
            .find(|b| a.is_multiple_of(*b))?;
        let f = Self::new(bits, block)?;
        (f.block_bytes() < 4 * block).then_some(f)
    }

    pub const fn bits(self) -> u32 {
        self.bits as u32
    }

    /// Values per block.
    pub const fn block_len(self) -> usize {
        self.block as usize
    }

    /// Bytes per block: scale, zero, codes.
    pub const fn block_bytes(self) -> usize {
        8 + (self.block as usize * self.bits as usize).div_ceil(8)
    }

    /// The name reports use (`INT4`, ...).
    pub const fn name(self) -> &'static str {
        match self.bits {
            2 => "INT2",
            3 => "INT3",
            4 => "INT4",
            5 => "INT5",
            6 => "INT6",
            7 => "INT7",
            _ => "INT8",
        }
    }

    /// Whole blocks (`bytes`, a multiple of the block size) into `out` (their values).
    pub fn dequantize(self, bytes: &[u8], out: &mut [f32]) {
        let (bl, bb) = (self.block_len(), self.block_bytes());
        for (blk, o) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(bl)) {
            let scale = f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]);
            let zero = f32::from_le_bytes([blk[4], blk[5], blk[6], blk[7]]);
            let codes = &blk[8..];
            // The same two roundings for every width; the byte-aligned widths only skip the
            // generic bit reader (a code per byte, two, or four), which made the staging
            // dequantizer the cost of a quantized inMotion forward.
            let f = |u: u8| scale * (u as f32 - zero);
            match self.bits {
                8 => {
                    for (v, &u) in o.iter_mut().zip(codes) {
                        *v = f(u);
                    }
                }
                4 => {
                    for (pair, &b) in o.chunks_mut(2).zip(codes) {
                        pair[0] = f(b & 0x0f);
                        if let Some(v) = pair.get_mut(1) {
                            *v = f(b >> 4);
                        }
                    }
                }
                2 => {
                    for (quad, &b) in o.chunks_mut(4).zip(codes) {
                        for (i, v) in quad.iter_mut().enumerate() {
                            *v = f((b >> (2 * i)) & 3);
                        }
                    }
                }
                _ => {
                    for (c, v) in o.iter_mut().enumerate() {
                        *v = f(read_code(codes, self.bits(), c) as u8);
                    }
                }
            }
        }
    }

    /// The blocks of one row of `k` values: `code(c)` its codes, `scale(g)` / `zero(g)` its
    /// groups' (group `g` covers values `g·group ..`), appended to `out`.
    pub fn encode_row(
        self,
        k: usize,
        group: usize,
        code: impl Fn(usize) -> u32,
        scale: impl Fn(usize) -> f32,
        zero: impl Fn(usize) -> f32,
        out: &mut Vec<u8>,
    ) {
        let (bl, bits) = (self.block_len(), self.bits());
        for b0 in (0..k).step_by(bl) {
            let g = b0 / group;
            out.extend_from_slice(&scale(g).to_le_bytes());
            out.extend_from_slice(&zero(g).to_le_bytes());
            let at = out.len();
            out.resize(at + (bl * bits as usize).div_ceil(8), 0);
            for c in 0..bl {
                let u = code(b0 + c);
                let pos = c * bits as usize;
                // Codes straddle at most two bytes (bits ≤ 8).
                let wide = (u as u16) << (pos % 8);
                out[at + pos / 8] |= wide as u8;
                if pos % 8 + bits as usize > 8 {
                    out[at + pos / 8 + 1] |= (wide >> 8) as u8;
                }
            }
        }
    }
}

/// Code `c` of `bits` bits, LSB-first.
#[inline]
fn read_code(codes: &[u8], bits: u32, c: usize) -> u32 {
    let pos = c * bits as usize;
    let lo = codes[pos / 8] as u32;
    let hi = codes.get(pos / 8 + 1).copied().unwrap_or(0) as u32;
    ((lo | hi << 8) >> (pos % 8)) & ((1 << bits) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_every_width_and_repeat_group_scales() {
        for bits in 2..=8u32 {
            let (k, group) = (96, 48);
            let f = AffineBlocks::for_rows(bits, k, group).unwrap();
            assert_eq!(f.block_len(), 48);
            let codes: Vec<u32> = (0..k as u32).map(|c| (c * 7 + 3) % (1 << bits)).collect();
            let scales = [0.5f32, -0.25];
            let zeros = [3.0f32, 1.5];
            let mut bytes = Vec::new();
            f.encode_row(
                k,
                group,
                |c| codes[c],
                |g| scales[g],
                |g| zeros[g],
                &mut bytes,
            );
            assert_eq!(bytes.len(), 2 * f.block_bytes());
            let mut out = vec![0.0; k];
            f.dequantize(&bytes, &mut out);
            for c in 0..k {
                let g = c / group;
                let want = scales[g] * (codes[c] as f32 - zeros[g]);
                assert_eq!(out[c].to_bits(), want.to_bits(), "bits {bits} c {c}");
            }
        }
        // Per-channel rows longer than a block are cut into equal blocks.
        let f = AffineBlocks::for_rows(4, 600, 600).unwrap();
        assert_eq!(f.block_len(), 200);
        // A last group shorter than the others: blocks of gcd(group, k), none straddling.
        let f = AffineBlocks::for_rows(4, 48, 32).unwrap();
        assert_eq!(f.block_len(), 16);
        let codes: Vec<u32> = (0..48).map(|c| c % 16).collect();
        let mut bytes = Vec::new();
        f.encode_row(
            48,
            32,
            |c| codes[c],
            |g| [1.0, 2.0][g],
            |g| [0.0, 8.0][g],
            &mut bytes,
        );
        let mut out = vec![0.0; 48];
        f.dequantize(&bytes, &mut out);
        assert_eq!(out[31], 15.0);
        assert_eq!(out[32], 2.0 * (0.0 - 8.0));
        // Blocks too short to pay off: none (the matrix stays f32).
        assert!(AffineBlocks::for_rows(8, 2, 2).is_none());
        assert!(AffineBlocks::for_rows(4, 100, 3).is_none());
    }
}
