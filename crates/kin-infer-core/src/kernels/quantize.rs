//! ggml's reference quantizers (`quantize_row_*_ref` in ggml-quants.c) for the block types a
//! file is written in: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1. Bit for bit the `gguf` package's
//! `gguf.quants.quantize` (numpy, written to match ggml): each step one f32 operation,
//! rounded on its own, in numpy's order (Rust never contracts `a * b + c`), and the scales
//! stored as f16 rounded to nearest even. Held to gguf's goldens by `tests/ggml_formats.rs`.
//!
//! - Q8_0: `d = max|x| / 127`, `q = roundf(x / d)` (half away from zero, as `roundf`);
//! - Q4_0 / Q5_0: `d = x_max / −8` (`/ −16`, `x_max` the value of largest magnitude, the first
//!   on ties), `q = min(15, trunc(x · (1/d) + 8.5))` (`31`, `16.5`);
//! - Q4_1 / Q5_1: `d = (max − min) / 15` (`/ 31`), `q = min(15, trunc((x − min) · (1/d) + 0.5))`.
//!
//! `1/d` is 0 when `d` is 0 (a zero block). The format table (`ggml::FORMATS`) points at
//! each; `ggml::quantize` runs a row's quantizer over whole blocks. Q4_K, Q5_K and Q6_K: `quantize_k.rs` (held to
//! llama.cpp's own C functions). Q2_K and Q3_K are not written: asking for one is a typed
//! error in the callers.

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

fn inverse(d: f32) -> f32 {
    if d == 0.0 {
        0.0
    } else {
        1.0 / d
    }
}

/// numpy's `np_roundf` (gguf.quants): `floor(a) + floor(2 · (a − floor(a)))` with the sign,
/// i.e. C's `roundf` (half away from zero).
pub(super) fn roundf(n: f32) -> f32 {
    let a = n.abs();
    let fl = a.floor();
    let b = fl + (2.0 * (a - fl)).floor();
    if n > 0.0 {
        b
    } else if n < 0.0 {
        -b
    } else {
        0.0 * b
    }
}

/// One Q8_0 block.
pub(super) fn q8_0(b: &[f32], out: &mut Vec<u8>) {
    let amax = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = inverse(d);
    out.extend_from_slice(&f16_bytes(d));
    out.extend(b.iter().map(|v| roundf(v * id) as i8 as u8));
}

/// The 4- and 5-bit codes' low nibbles (elements 0..16 low, 16..32 high) and, for 5-bit
/// types, the fifth bits as a little-endian u32.
fn pack(q: &[u8; 32], five_bits: bool, out: &mut Vec<u8>) {
    if five_bits {
        let qh = q
            .iter()
            .enumerate()
            .fold(0u32, |h, (i, v)| h | (((*v >> 4) as u32 & 1) << i));
        out.extend_from_slice(&qh.to_le_bytes());
    }
    out.extend((0..16).map(|i| (q[i] & 15) | (q[i + 16] << 4)));
}

/// One Q4_0 block.
pub(super) fn q4_0(b: &[f32], out: &mut Vec<u8>) {
    symmetric(false, b, out);
}

/// One Q5_0 block.
pub(super) fn q5_0(b: &[f32], out: &mut Vec<u8>) {
    symmetric(true, b, out);
}

/// One Q4_1 block.
pub(super) fn q4_1(b: &[f32], out: &mut Vec<u8>) {
    with_min(false, b, out);
}

/// One Q5_1 block.
pub(super) fn q5_1(b: &[f32], out: &mut Vec<u8>) {
    with_min(true, b, out);
}

/// Q4_0 / Q5_0 (`five`): a scale from the value of largest magnitude, codes offset by 8 (16).
fn symmetric(five: bool, b: &[f32], out: &mut Vec<u8>) {
    let (div, off, top) = if five {
        (-16.0f32, 16.5f32, 31.0f32)
    } else {
        (-8.0, 8.5, 15.0)
    };
    // argmax of |x|: the first of equal magnitudes, as numpy's argmax.
    let mut max = b[0];
    for &v in &b[1..] {
        if v.abs() > max.abs() {
            max = v;
        }
    }
    let d = max / div;
    let id = inverse(d);
    let q: [u8; 32] = std::array::from_fn(|i| ((b[i] * id) + off).trunc().clamp(0.0, top) as u8);
    out.extend_from_slice(&f16_bytes(d));
    pack(&q, five, out);
}

/// Q4_1 / Q5_1 (`five`): scale and minimum from the block's range.
fn with_min(five: bool, b: &[f32], out: &mut Vec<u8>) {
    let top = if five { 31.0f32 } else { 15.0 };
    let max = b.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = b.iter().copied().fold(f32::INFINITY, f32::min);
    let d = (max - min) / top;
    let id = inverse(d);
    let q: [u8; 32] =
        std::array::from_fn(|i| ((b[i] - min) * id + 0.5).trunc().clamp(0.0, top) as u8);
    out.extend_from_slice(&f16_bytes(d));
    out.extend_from_slice(&f16_bytes(min));
    pack(&q, five, out);
}
