//! aarch64 NEON tier: a 6×16 GEMM micro-kernel and 4-wide elementwise/reduction kernels, each
//! bit-identical to the generic tier.
//!
//! The 16 canonical reduction lanes are four q registers fed from each 16-element chunk.
//! `vmaxq_f32` is not used for the canonical max: it returns NaN for a NaN operand and +0 for
//! (±0, ∓0), unlike the `a > b ? a : b` rule every tier follows; compare + select is.

use super::elementwise::{self, Vector};
use super::gemm::TileCall;
use super::generic;
use super::math::{self, Lanes};
use super::tile::{tile, F32Panel, Panel};
use super::Ops;
use std::arch::aarch64::*;

pub(crate) static OPS: Ops = tier_ops! {
    mr: MR,
    nr: NR,
    // How this tier runs a micro-kernel over each weight format (WeightFormat::index
    // order: F32, BF16, F16); each loads a panel row as f32 lanes its own way.
    kernels: [
        rows_table!(kernel_6x16, [1, 2, 3, 4, 5, 6]),
        rows_table!(kernel_6x16_half::<true>, [1, 2, 3, 4, 5, 6]),
        rows_table!(kernel_6x16_half::<false>, [1, 2, 3, 4, 5, 6]),
    ],
    row4: None,
    q8: Some(super::neon_q8::neon),
    q8_lanes: false,
    row4_quant: &[],
    dequant: Some(super::neon_quant::dequant),
    softmax_scaled: None,
    pack_rows_f32: None,
};

/// 4 lanes of f32. Private, and only created inside this module's `#[target_feature]`
/// functions, which is what makes the safe trait methods (intrinsics inside) sound.
#[derive(Clone, Copy)]
struct V(float32x4_t);

lanes! {
    V, mask: uint32x4_t, width: 4,
    load: |p| vld1q_f32(p), store: |p, v| vst1q_f32(p, v),
    splat: |x| vdupq_n_f32(x),
    add: vaddq_f32, sub: vsubq_f32, mul: vmulq_f32, div: vdivq_f32,
    // vfmaq_f32(c, a, b) = c + a·b, fused.
    fma: |a, b, c| vfmaq_f32(c, a, b),
    round_even: |a| vrndnq_f32(a),
    abs: |a| vabsq_f32(a),
    neg: |a| vnegq_f32(a),
    // Bit select: the sign bit from `s`, the rest from `a`.
    copysign: |a, s| vbslq_f32(vdupq_n_u32(0x8000_0000), s, a),
    gt: |a, b| vcgtq_f32(a, b),
    is_nan: |a| vmvnq_u32(vceqq_f32(a, a)),
    none: |m| vmaxvq_u32(m) == 0,
    all: |m| vminvq_u32(m) == u32::MAX,
    select: |m, a, b| vbslq_f32(m, a, b),
    // The input is integral, so the truncating conversion is exact.
    pow2i: |a| vreinterpretq_f32_s32(vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(a), vdupq_n_s32(127)))),
}

/// Applies `$vbody` (in `$v`) to full vectors and `$sbody` (in `$s`) to the scalar tail. A
/// macro, not a function taking closures: a closure does not inherit `#[target_feature]`, so
/// the vector math would be compiled for the baseline target with out-of-line intrinsics.
macro_rules! map {
    ($x:expr, |$v:ident| $vbody:expr, |$s:ident| $sbody:expr) => {{
        let x: &mut [f32] = $x;
        let n = x.len();
        let main = n - n % 4;
        let p = x.as_mut_ptr();
        for i in (0..main).step_by(4) {
            let $v = V(vld1q_f32(p.add(i)));
            vst1q_f32(p.add(i), ($vbody).0);
        }
        generic::map(&mut x[main..], |$s| $sbody);
    }};
}

tier_maps!("neon");
tier_fused!("neon");

/// 6×16 register tile: 24 q accumulators + 4 for the B row, A values via `vfmaq_n_f32`.
const MR: usize = 6;
const NR: usize = 16;

/// NEON micro-kernel; contract in [`super::gemm::MicroKernel`].
#[target_feature(enable = "neon")]
unsafe fn kernel_6x16<const R: usize>(t: TileCall) {
    unsafe { tile::<V, F32Panel, 4, R>(t) }
}

/// Widens 4 bf16 values at `p` to f32, exactly (`bits << 16`).
#[target_feature(enable = "neon")]
#[inline]
unsafe fn widen4_bf16(p: *const u16) -> float32x4_t {
    unsafe { vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p))) }
}

/// Widens 4 f16 values at `p` to f32, exactly (`fcvtl`; every aarch64 CPU has it).
#[target_feature(enable = "neon")]
#[inline]
unsafe fn widen4_f16(p: *const u16) -> float32x4_t {
    unsafe {
        let h = vld1_u16(p);
        let out: float32x4_t;
        std::arch::asm!(
            "fcvtl {o:v}.4s, {i:v}.4h",
            o = lateout(vreg) out,
            i = in(vreg) h,
            options(pure, nomem, nostack)
        );
        out
    }
}

/// bf16 (`BF16`) or f16 B panels, each 4 values widened exactly in registers.
struct HalfPanel<const BF16: bool>;

impl<const BF16: bool> Panel<V> for HalfPanel<BF16> {
    type Elem = u16;
    #[inline(always)]
    unsafe fn new() -> Self {
        HalfPanel
    }
    #[inline(always)]
    unsafe fn row<const NB: usize>(&self, p: *const u16) -> [V; NB] {
        let mut v = [V::splat(0.0); NB];
        for (j, x) in v.iter_mut().enumerate() {
            *x = V(unsafe {
                match BF16 {
                    true => widen4_bf16(p.add(4 * j)),
                    false => widen4_f16(p.add(4 * j)),
                }
            });
        }
        v
    }
}

/// NEON micro-kernel over bf16/f16 B panels: [`kernel_6x16`] with each B row widened exactly
/// in registers; contract in [`super::gemm::MicroKernel`].
#[target_feature(enable = "neon")]
unsafe fn kernel_6x16_half<const BF16: bool, const R: usize>(t: TileCall) {
    unsafe { tile::<V, HalfPanel<BF16>, 4, R>(t) }
}

/// [`super::Ops::gemv`]: 16 outputs per pass (four independent accumulators), then 4,
/// then the scalar tail; every output accumulates p in order from 0.0.
#[target_feature(enable = "neon")]
unsafe fn gemv(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    let n = out.len();
    let j = unsafe { elementwise::gemv_columns::<V>(a, b, ldb, out) };
    if j < n {
        generic::gemv(a, &b[j..], ldb, &mut out[j..]);
    }
}
