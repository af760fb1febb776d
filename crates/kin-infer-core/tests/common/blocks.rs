//! Random ggml blocks for the quantized-kernel tests (quant_kernels.rs, q8_kernels.rs): rows
//! of any block type with finite f16 scales, ordinary or at the ends of the f16 range.

use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::{StoredRows, WeightFormat};

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn f32(&mut self) -> f32 {
        (self.next() % 20001) as f32 / 10000.0 - 1.0
    }
}

/// Rows of ggml type `t` as stored.
pub fn blocks(t: GgmlType, bytes: &[u8]) -> StoredRows<'_> {
    StoredRows::Blocks(WeightFormat::from_ggml(t), bytes)
}

/// Byte offsets of each block type's f16 scale fields (ggml-common.h), which random blocks
/// must hold finite: every other byte is a code or a packed 6-bit scale, any value valid.
pub fn scale_offsets(t: GgmlType) -> &'static [usize] {
    match t {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::IQ4_NL => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        _ => unreachable!("not a block type"),
    }
}

/// `rows` rows of `k` values of random blocks of `t` with finite scales of either sign.
pub fn random_rows(t: GgmlType, rows: usize, k: usize, seed: u64) -> Vec<u8> {
    random_rows_with(t, rows, k, seed, false)
}

/// Finite f16 scales at the ends of the range: the largest, the smallest normal and
/// subnormal, zero, and values whose products need every significant bit.
pub const EXTREME_SCALES: [f32; 9] = [
    65504.0,
    -65504.0,
    6.1035156e-5,
    -5.9604645e-8,
    0.0,
    1.0,
    -2047.0,
    0.33325195,
    1.0009766,
];

/// As [`random_rows`]; with `extreme`, every scale field is one of [`EXTREME_SCALES`].
pub fn random_rows_with(t: GgmlType, rows: usize, k: usize, seed: u64, extreme: bool) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let mut bytes: Vec<u8> = (0..rows * t.row_bytes(k).unwrap())
        .map(|_| r.next() as u8)
        .collect();
    for block in bytes.chunks_exact_mut(t.block_bytes()) {
        for &at in scale_offsets(t) {
            let v = if extreme {
                EXTREME_SCALES[(r.next() % EXTREME_SCALES.len() as u64) as usize]
            } else {
                (r.next() % 2000) as f32 * 1e-5 * if r.next() & 1 == 0 { 1.0 } else { -1.0 }
            };
            block[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes());
        }
    }
    bytes
}
