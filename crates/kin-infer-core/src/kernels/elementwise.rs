//! Elementwise kernels written once over a tier's vector type ([`Vector`]): each tier's
//! `#[target_feature]` wrapper instantiates them, and the bodies (`#[inline(always)]`) compile
//! inside the wrapper to that tier's instructions. Main part in whole vectors, tail by the
//! generic tier, with the same fused operations in both, so element `i` has the same bits in
//! every exact tier (the SSE tier, which has no FMA, keeps its own).

use super::generic;
use super::math::Lanes;

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
