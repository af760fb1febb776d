//! Exact widening of the 16-bit float formats to f32: a leaf every kernel and the reference
//! dequantizers share.

/// bf16 bits to f32 (exact).
#[inline(always)]
pub(crate) fn bf16_to_f32(x: u16) -> f32 {
    f32::from_bits((x as u32) << 16)
}

/// f16 bits to f32 (exact).
#[inline(always)]
pub(crate) fn f16_to_f32(x: u16) -> f32 {
    half::f16::from_bits(x).to_f32()
}
