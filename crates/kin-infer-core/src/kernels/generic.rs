//! The generic tier: portable Rust that defines the bits every other tier must reproduce.
//!
//! The `*_lanes` helpers and [`map`] are `#[inline(always)]` so the SIMD tiers reuse them for
//! their tails: inlined into a `#[target_feature]` function, `f32::mul_add` becomes one FMA
//! instruction instead of a libm call, with the same result.

use super::math::{self, Lanes};
use super::{gemm, tree16, tree16_max, Ops};

pub(crate) static OPS: Ops = Ops {
    mr: MR,
    nr: NR,
    // How this tier runs a micro-kernel over each weight format (WeightFormat::index
    // order: F32, BF16, F16); each loads a panel row as f32 lanes its own way.
    kernels: [
        rows_table!(kernel_generic, [1, 2, 3, 4]),
        rows_table!(kernel_half::<true>, [1, 2, 3, 4]),
        rows_table!(kernel_half::<false>, [1, 2, 3, 4]),
    ],
    row4: None,
    q8: None,
    q8_lanes: false,
    row4_quant: &[],
    dequant: None,
    sum,
    dot,
    max,
    exp_sub,
    exp: |x| map(x, math::exp_v),
    gelu_erf: |x| map(x, math::gelu_erf_v),
    gelu_tanh: |x| map(x, math::gelu_tanh_v),
    silu: |x| map(x, math::silu_v),
    tanh: |x| map(x, math::tanh_v),
    sub_scalar,
    scale,
    add,
    axpy,
    gemv,
    affine,
    softmax_scaled: None,
    pack_rows_f32: None,
};

/// Adds `x[i]` into lane `i % 16`; callers pass a tail that starts at a multiple of 16.
#[inline(always)]
pub(crate) fn sum_lanes(l: &mut [f32; 16], x: &[f32]) {
    for (i, v) in x.iter().enumerate() {
        l[i % 16] += v;
    }
}

#[inline(always)]
pub(crate) fn dot_lanes(l: &mut [f32; 16], x: &[f32], y: &[f32]) {
    for (i, (a, b)) in x.iter().zip(y).enumerate() {
        l[i % 16] = a.mul_add(*b, l[i % 16]);
    }
}

#[inline(always)]
pub(crate) fn max_lanes(l: &mut [f32; 16], x: &[f32]) {
    for (i, v) in x.iter().enumerate() {
        l[i % 16] = v.max_(l[i % 16]);
    }
}

/// Applies `f` to every element (scalar reference of the elementwise kernels).
#[inline(always)]
pub(crate) fn map(x: &mut [f32], f: impl Fn(f32) -> f32) {
    for v in x.iter_mut() {
        *v = f(*v);
    }
}

fn sum(x: &[f32]) -> f32 {
    let mut l = [0.0f32; 16];
    sum_lanes(&mut l, x);
    tree16(l)
}

fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut l = [0.0f32; 16];
    dot_lanes(&mut l, x, y);
    tree16(l)
}

fn max(x: &[f32]) -> f32 {
    let mut l = [f32::NEG_INFINITY; 16];
    max_lanes(&mut l, x);
    tree16_max(l)
}

#[inline(always)]
pub(crate) fn exp_sub(x: &mut [f32], s: f32) {
    map(x, |v| math::exp_v(v - s))
}

#[inline(always)]
pub(crate) fn sub_scalar(x: &mut [f32], s: f32) {
    map(x, |v| v - s)
}

#[inline(always)]
pub(crate) fn scale(x: &mut [f32], s: f32) {
    map(x, |v| v * s)
}

#[inline(always)]
pub(crate) fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Reference of [`super::Ops::gemv`] (the caller checked the extents).
#[inline(always)]
pub(crate) fn gemv(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (p, &av) in a.iter().enumerate() {
        let row = &b[p * ldb..p * ldb + out.len()];
        for (o, &bv) in out.iter_mut().zip(row) {
            *o = av.mul_add(bv, *o);
        }
    }
}

#[inline(always)]
pub(crate) fn axpy(x: &mut [f32], a: f32, y: &[f32]) {
    for (v, w) in x.iter_mut().zip(y) {
        *v = a.mul_add(*w, *v);
    }
}

#[inline(always)]
pub(crate) fn affine(x: &mut [f32], s: f32, w: &[f32], b: &[f32]) {
    for ((v, w), b) in x.iter_mut().zip(w).zip(b) {
        *v = (*v * s).mul_add(*w, *b);
    }
}

/// Generic register tile: small enough that the accumulator array stays in registers and the
/// column loop autovectorizes where FMA is baseline (aarch64); on baseline x86-64 `mul_add` is
/// a software FMA call, which is the price of exact bits there.
const MR: usize = 4;
const NR: usize = 16;

/// Generic micro-kernel; contract in [`gemm::TileCall`].
unsafe fn kernel_generic<const R: usize>(t: gemm::TileCall) {
    // SAFETY: the driver guarantees kc·NR floats at `b`.
    unsafe {
        body::<f32, R>(t, |bp| {
            let mut row = [0.0f32; NR];
            row.copy_from_slice(std::slice::from_raw_parts(bp, NR));
            row
        })
    }
}

/// Generic micro-kernel over bf16 (`BF16`) or f16 B panels; contract in [`gemm::TileCall`].
/// Each B row is widened exactly, then the same FMA sequence as [`kernel_generic`] runs.
unsafe fn kernel_half<const BF16: bool, const R: usize>(t: gemm::TileCall) {
    // SAFETY: the driver guarantees kc·NR u16 values at `b`.
    unsafe {
        body::<u16, R>(t, |bp| {
            let mut row = [0.0f32; NR];
            for (d, s) in row.iter_mut().zip(std::slice::from_raw_parts(bp, NR)) {
                *d = if BF16 {
                    gemm::bf16_to_f32(*s)
                } else {
                    gemm::f16_to_f32(*s)
                };
            }
            row
        })
    }
}

/// The R×NR tile over B rows of `E` that `row` reads as f32: `acc = fma(a, b, acc)` in k order.
///
/// # Safety
/// The driver guarantees kc·R floats at `a`, kc rows at `b`, an R×NR tile at `c` (row stride
/// ldc) and NR floats at `bias` when non-null.
#[inline(always)]
unsafe fn body<E, const R: usize>(t: gemm::TileCall, row: impl Fn(*const E) -> [f32; NR]) {
    let (c, ldc) = (t.c, t.ldc);
    unsafe {
        let mut acc = [[0.0f32; NR]; R];
        if t.load {
            for (r, row) in acc.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = *c.add(r * ldc + j);
                }
            }
        }
        let b = t.b.cast::<E>();
        for p in 0..t.kc {
            let bp = row(b.add(p * NR));
            for (r, row) in acc.iter_mut().enumerate() {
                let av = *t.a.add(p * R + r);
                for (v, bv) in row.iter_mut().zip(&bp) {
                    *v = av.mul_add(*bv, *v);
                }
            }
        }
        gemm::store_tile(&acc, c, ldc, t.bias);
    }
}
