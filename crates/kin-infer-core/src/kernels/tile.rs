//! The GEMM micro-kernel written once over a tier's [`Vector`]: `R` rows of A times one packed
//! B panel of `NB` vectors per k step, accumulated in `R × NB` registers with one fused
//! multiply-add per lane, then the bias, then the store (contract in
//! [`super::gemm::MicroKernel`]). Each tier's `#[target_feature]` wrapper instantiates it with
//! its vector type and tile width (AVX-512: 2 × 16 lanes, AVX2: 2 × 8, NEON: 4 × 4) and a
//! [`Panel`] that reads one B row as f32 (stored f32, or bf16/f16 widened exactly in
//! registers); the body (`#[inline(always)]`) compiles inside the wrapper to that tier's
//! instructions. Element `(r, j)` sums `a[r][k] · b[k][j]` in k order on every tier, the
//! same sequence the generic tier runs, so all give the same bits.

use super::elementwise::Vector;
use super::gemm::TileCall;

/// How a micro-kernel reads one packed row of its B panel as `NB` vectors of f32.
pub(crate) trait Panel<V: Vector> {
    /// The stored element (f32, or the bits of a bf16/f16).
    type Elem;
    /// Set up once per call (constants a widening needs).
    ///
    /// # Safety
    /// The caller runs with `V`'s target features enabled.
    unsafe fn new() -> Self;
    /// The row at `p` (`NB · V::WIDTH` elements), exactly as f32.
    ///
    /// # Safety
    /// As [`Panel::new`]; `p` is valid for reading the row.
    unsafe fn row<const NB: usize>(&self, p: *const Self::Elem) -> [V; NB];
}

/// A panel stored as f32.
pub(crate) struct F32Panel;

impl<V: Vector> Panel<V> for F32Panel {
    type Elem = f32;
    #[inline(always)]
    unsafe fn new() -> Self {
        F32Panel
    }
    #[inline(always)]
    unsafe fn row<const NB: usize>(&self, p: *const f32) -> [V; NB] {
        let mut v = [V::splat(0.0); NB];
        for (j, x) in v.iter_mut().enumerate() {
            *x = unsafe { V::load(p.add(j * V::WIDTH)) };
        }
        v
    }
}

/// `c[r][j] (+)= Σ_k a[k][r] · b[k][j] (+ bias[j])` for `R` rows and `NB · V::WIDTH` columns.
///
/// # Safety
/// The caller runs with `V`'s target features enabled and upholds the
/// [`TileCall`] contract (`a`: `kc · R` floats, `b`: `kc` packed rows of `P`,
/// `c`: `R` rows of `ldc`, `bias` null or one row).
#[inline(always)]
pub(crate) unsafe fn tile<V: Vector, P: Panel<V>, const NB: usize, const R: usize>(t: TileCall) {
    let w = V::WIDTH;
    let nr = NB * w;
    let c = t.c;
    unsafe {
        let panel = P::new();
        let mut acc = [[V::splat(0.0); NB]; R];
        if t.load {
            for (r, row) in acc.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = V::load(c.add(r * t.ldc + j * w));
                }
            }
        }
        let (mut ap, mut bp) = (t.a, t.b.cast::<P::Elem>());
        for _ in 0..t.kc {
            let bv: [V; NB] = panel.row(bp);
            for (r, row) in acc.iter_mut().enumerate() {
                let av = V::splat(*ap.add(r));
                for (v, b) in row.iter_mut().zip(bv) {
                    *v = av.fma(b, *v);
                }
            }
            ap = ap.add(R);
            bp = bp.add(nr);
        }
        if !t.bias.is_null() {
            let z: [V; NB] = <F32Panel as Panel<V>>::row(&F32Panel, t.bias);
            for row in acc.iter_mut() {
                for (v, z) in row.iter_mut().zip(z) {
                    *v = v.add(z);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                v.store(c.add(r * t.ldc + j * w));
            }
        }
    }
}
