//! Elementwise kernels and reductions written once over a tier's vector type ([`Vector`]):
//! each tier's `#[target_feature]` wrapper instantiates them, and the bodies
//! (`#[inline(always)]`) compile inside the wrapper to that tier's instructions. Main part in
//! whole vectors, tail by the generic tier, with the same fused operations in both, so element
//! `i` has the same bits in every exact tier (the SSE tier, which has no FMA, keeps its own).
//!
//! The reductions accumulate 16 canonical lanes whatever the vector width (AVX-512: one
//! vector, AVX2: two, NEON: four; lane `j` sums elements `i ≡ j mod 16`), then the generic
//! tail and the fixed tree ([`super::tree16`]): the same sum in every tier.

use super::generic;
use super::math::Lanes;
use super::{tree16, tree16_max};

/// A tier's vector of f32 lanes with unaligned loads and stores.
pub(crate) trait Vector: Lanes {
    /// Lanes per vector.
    const WIDTH: usize;
    /// # Safety
    /// `p` is valid for reading `WIDTH` floats.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` is valid for writing `WIDTH` floats.
    unsafe fn store(self, p: *mut f32);
}

/// `x[i] = fma(a, y[i], x[i])`.
///
/// # Safety
/// The caller runs with `V`'s target features enabled; `y` is at least as long as `x`.
#[inline(always)]
pub(crate) unsafe fn axpy<V: Vector>(x: &mut [f32], a: f32, y: &[f32]) {
    let main = x.len() - x.len() % V::WIDTH;
    let av = V::splat(a);
    let (px, py) = (x.as_mut_ptr(), y.as_ptr());
    for i in (0..main).step_by(V::WIDTH) {
        unsafe {
            av.fma(V::load(py.add(i)), V::load(px.add(i)))
                .store(px.add(i))
        };
    }
    generic::axpy(&mut x[main..], a, &y[main..]);
}

/// `x[i] += y[i]`.
///
/// # Safety
/// As [`axpy`].
#[inline(always)]
pub(crate) unsafe fn add<V: Vector>(x: &mut [f32], y: &[f32]) {
    let main = x.len() - x.len() % V::WIDTH;
    let (px, py) = (x.as_mut_ptr(), y.as_ptr());
    for i in (0..main).step_by(V::WIDTH) {
        unsafe { V::load(px.add(i)).add(V::load(py.add(i))).store(px.add(i)) };
    }
    generic::add(&mut x[main..], &y[main..]);
}

/// `x[i] = fma(x[i] * s, w[i], b[i])` (a norm's scale and shift).
///
/// # Safety
/// As [`axpy`], for `w` and `b`.
#[inline(always)]
pub(crate) unsafe fn affine<V: Vector>(x: &mut [f32], s: f32, w: &[f32], b: &[f32]) {
    let main = x.len() - x.len() % V::WIDTH;
    let sv = V::splat(s);
    let (px, pw, pb) = (x.as_mut_ptr(), w.as_ptr(), b.as_ptr());
    for i in (0..main).step_by(V::WIDTH) {
        unsafe {
            let v = V::load(px.add(i)).mul(sv);
            v.fma(V::load(pw.add(i)), V::load(pb.add(i)))
                .store(px.add(i));
        }
    }
    generic::affine(&mut x[main..], s, &w[main..], &b[main..]);
}

/// Vectors per 16 canonical lanes (at most 4: NEON's 4-lane vectors).
const fn per16<V: Vector>() -> usize {
    16 / V::WIDTH
}

/// The 16 canonical lanes of `acc[..per16]`, spilled for the scalar tail and the tree.
///
/// # Safety
/// As [`axpy`].
#[inline(always)]
unsafe fn spill<V: Vector>(acc: &[V; 4]) -> [f32; 16] {
    let mut l = [0.0f32; 16];
    for (j, a) in acc[..per16::<V>()].iter().enumerate() {
        unsafe { a.store(l.as_mut_ptr().add(j * V::WIDTH)) };
    }
    l
}

/// `Σ x[i]` over 16 canonical lanes, then the tree.
///
/// # Safety
/// As [`axpy`].
#[inline(always)]
pub(crate) unsafe fn sum<V: Vector>(x: &[f32]) -> f32 {
    let main = x.len() - x.len() % 16;
    let mut acc = [V::splat(0.0); 4];
    let p = x.as_ptr();
    for i in (0..main).step_by(16) {
        for (j, a) in acc[..per16::<V>()].iter_mut().enumerate() {
            *a = a.add(unsafe { V::load(p.add(i + j * V::WIDTH)) });
        }
    }
    let mut l = unsafe { spill(&acc) };
    generic::sum_lanes(&mut l, &x[main..]);
    tree16(l)
}

/// `Σ x[i] · y[i]` (fused) over 16 canonical lanes, then the tree.
///
/// # Safety
/// As [`axpy`].
#[inline(always)]
pub(crate) unsafe fn dot<V: Vector>(x: &[f32], y: &[f32]) -> f32 {
    let main = x.len() - x.len() % 16;
    let mut acc = [V::splat(0.0); 4];
    let (px, py) = (x.as_ptr(), y.as_ptr());
    for i in (0..main).step_by(16) {
        for (j, a) in acc[..per16::<V>()].iter_mut().enumerate() {
            let o = i + j * V::WIDTH;
            *a = unsafe { V::load(px.add(o)).fma(V::load(py.add(o)), *a) };
        }
    }
    let mut l = unsafe { spill(&acc) };
    generic::dot_lanes(&mut l, &x[main..], &y[main..]);
    tree16(l)
}

/// The canonical max ([`Lanes::max_`]: NaN-ignoring, as every tier's) over 16 lanes, then the
/// tree.
///
/// # Safety
/// As [`axpy`].
#[inline(always)]
pub(crate) unsafe fn max<V: Vector>(x: &[f32]) -> f32 {
    let main = x.len() - x.len() % 16;
    let mut acc = [V::splat(f32::NEG_INFINITY); 4];
    let p = x.as_ptr();
    for i in (0..main).step_by(16) {
        for (j, a) in acc[..per16::<V>()].iter_mut().enumerate() {
            *a = unsafe { V::load(p.add(i + j * V::WIDTH)) }.max_(*a);
        }
    }
    let mut l = unsafe { spill(&acc) };
    generic::max_lanes(&mut l, &x[main..]);
    tree16_max(l)
}

/// [`super::Ops::gemv`]'s vector part: outputs in passes of four vectors (four independent
/// accumulators), then of one, each output accumulating `a[p]·b[p·ldb + j]` for p = 0, 1, …
/// in order with FMA from 0.0. Returns how many leading outputs it wrote; the tier finishes
/// the shorter tail its own way (the same per-output sequence).
///
/// # Safety
/// `b` holds `a.len()` rows of stride `ldb` covering `out.len()` columns; the tier's features.
#[inline(always)]
pub(crate) unsafe fn gemv_columns<V: Vector>(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    out: &mut [f32],
) -> usize {
    let n = out.len();
    let w = V::WIDTH;
    let (pb, po) = (b.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    unsafe {
        while j + 4 * w <= n {
            let mut acc = [V::splat(0.0); 4];
            for (p, &ap) in a.iter().enumerate() {
                let (av, row) = (V::splat(ap), pb.add(p * ldb));
                for (q, acc_q) in acc.iter_mut().enumerate() {
                    *acc_q = av.fma(V::load(row.add(j + w * q)), *acc_q);
                }
            }
            for (q, v) in acc.iter().enumerate() {
                v.store(po.add(j + w * q));
            }
            j += 4 * w;
        }
        while j + w <= n {
            let mut acc = V::splat(0.0);
            for (p, &ap) in a.iter().enumerate() {
                acc = V::splat(ap).fma(V::load(pb.add(p * ldb + j)), acc);
            }
            acc.store(po.add(j));
            j += w;
        }
    }
    j
}
