//! aarch64 NEON tier: a 6×16 GEMM micro-kernel and 4-wide elementwise/reduction kernels, each
//! bit-identical to the generic tier.
//!
//! The 16 canonical reduction lanes are four q registers fed from each 16-element chunk.
//! `vmaxq_f32` is not used for the canonical max: it returns NaN for a NaN operand and +0 for
//! (±0, ∓0), unlike the `a > b ? a : b` rule every tier follows; compare + select is.

use super::elementwise::{self, Vector};
use super::generic;
use super::math::{self, Lanes};
use super::tile::{tile, F32Panel, Panel};
use super::Ops;
use std::arch::aarch64::*;

pub(crate) static OPS: Ops = Ops {
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
    row4_quant: &[],
    dequant: Some(super::neon_quant::dequant),
    sum: |x| unsafe { sum(x) },
    dot: |x, y| unsafe { dot(x, y) },
    max: |x| unsafe { max(x) },
    exp_sub: |x, s| unsafe { exp_sub(x, s) },
    exp: |x| unsafe { exp(x) },
    gelu_erf: |x| unsafe { gelu_erf(x) },
    gelu_tanh: |x| unsafe { gelu_tanh(x) },
    silu: |x| unsafe { silu(x) },
    tanh: |x| unsafe { tanh(x) },
    sub_scalar: |x, s| unsafe { sub_scalar(x, s) },
    scale: |x, s| unsafe { scale(x, s) },
    add: |x, y| unsafe { add(x, y) },
    axpy: |x, a, y| unsafe { axpy(x, a, y) },
    gemv: |a, b, ldb, out| unsafe { gemv(a, b, ldb, out) },
    affine: |x, s, w, b| unsafe { affine(x, s, w, b) },
    softmax_scaled: None,
    pack_rows_f32: None,
};
// SAFETY (all the `unsafe` wrappers above): this table is only handed out by `Tier::ops`
// after `Tier::Neon.supported()` confirmed NEON at run time.

/// 4 lanes of f32. Private, and only created inside this module's `#[target_feature]`
/// functions, which is what makes the safe trait methods (intrinsics inside) sound.
#[derive(Clone, Copy)]
struct V(float32x4_t);

impl Lanes for V {
    type Mask = uint32x4_t;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        unsafe { V(vdupq_n_f32(v)) }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        unsafe { V(vaddq_f32(self.0, o.0)) }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        unsafe { V(vsubq_f32(self.0, o.0)) }
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        unsafe { V(vmulq_f32(self.0, o.0)) }
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        unsafe { V(vdivq_f32(self.0, o.0)) }
    }
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        // vfmaq_f32(c, a, b) = c + a·b, fused.
        unsafe { V(vfmaq_f32(c.0, self.0, b.0)) }
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        unsafe { V(vrndnq_f32(self.0)) }
    }
    #[inline(always)]
    fn abs(self) -> Self {
        unsafe { V(vabsq_f32(self.0)) }
    }
    #[inline(always)]
    fn neg(self) -> Self {
        unsafe { V(vnegq_f32(self.0)) }
    }
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        unsafe {
            let s = vdupq_n_u32(0x8000_0000);
            V(vbslq_f32(s, sign.0, self.0))
        }
    }
    #[inline(always)]
    fn gt(self, o: Self) -> uint32x4_t {
        unsafe { vcgtq_f32(self.0, o.0) }
    }
    #[inline(always)]
    fn is_nan(self) -> uint32x4_t {
        unsafe { vmvnq_u32(vceqq_f32(self.0, self.0)) }
    }
    #[inline(always)]
    fn none(m: uint32x4_t) -> bool {
        unsafe { vmaxvq_u32(m) == 0 }
    }
    #[inline(always)]
    fn all(m: uint32x4_t) -> bool {
        unsafe { vminvq_u32(m) == u32::MAX }
    }
    #[inline(always)]
    fn select(m: uint32x4_t, a: Self, b: Self) -> Self {
        unsafe { V(vbslq_f32(m, a.0, b.0)) }
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        unsafe {
            // The input is integral, so the truncating conversion is exact.
            let n = vcvtq_s32_f32(self.0);
            let e = vaddq_s32(n, vdupq_n_s32(127));
            V(vreinterpretq_f32_s32(vshlq_n_s32::<23>(e)))
        }
    }
}

impl Vector for V {
    const WIDTH: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { V(vld1q_f32(p)) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        unsafe { vst1q_f32(p, self.0) }
    }
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
unsafe fn kernel_6x16<const R: usize>(
    kc: usize,
    a: *const f32,
    b: *const u8,
    c: *mut f32,
    ldc: usize,
    load: bool,
    bias: *const f32,
) {
    unsafe { tile::<V, F32Panel, 4, R>(kc, a, b, c, ldc, load, bias) }
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
unsafe fn kernel_6x16_half<const BF16: bool, const R: usize>(
    kc: usize,
    a: *const f32,
    b: *const u8,
    c: *mut f32,
    ldc: usize,
    load: bool,
    bias: *const f32,
) {
    unsafe { tile::<V, HalfPanel<BF16>, 4, R>(kc, a, b, c, ldc, load, bias) }
}

/// [`super::Ops::gemv`]: 16 outputs per pass (four independent accumulators), then 4,
/// then the scalar tail; every output accumulates p in order from 0.0.
#[target_feature(enable = "neon")]
unsafe fn gemv(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    let n = out.len();
    let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    unsafe {
        while j + 16 <= n {
            let mut acc = [vdupq_n_f32(0.0); 4];
            for p in 0..a.len() {
                let av = vdupq_n_f32(*pa.add(p));
                let row = pb.add(p * ldb);
                for (q, acc_q) in acc.iter_mut().enumerate() {
                    *acc_q = vfmaq_f32(*acc_q, av, vld1q_f32(row.add(j + 4 * q)));
                }
            }
            for (q, v) in acc.iter().enumerate() {
                vst1q_f32(po.add(j + 4 * q), *v);
            }
            j += 16;
        }
        while j + 4 <= n {
            let mut acc = vdupq_n_f32(0.0);
            for p in 0..a.len() {
                let av = vdupq_n_f32(*pa.add(p));
                let row = pb.add(p * ldb);
                acc = vfmaq_f32(acc, av, vld1q_f32(row.add(j)));
            }
            vst1q_f32(po.add(j), acc);
            j += 4;
        }
    }
    if j < n {
        generic::gemv(a, &b[j..], ldb, &mut out[j..]);
    }
}
