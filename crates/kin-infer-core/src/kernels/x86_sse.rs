//! x86-64 SSE4.1 tier for CPUs without FMA (Atom/Celeron such as the J3455, pre-Haswell
//! cores): a 6×8 GEMM micro-kernel and 4-wide elementwise/reduction kernels.
//!
//! Without FMA every multiply-accumulate is a multiply then an add (two roundings), so this
//! tier is NOT bit-identical to the others: it is held to the golden tolerance instead (see
//! ARCHITECTURE.md, "Determinism"), and [`super::Tier::exact`] is false for it. The operation
//! *order* is still the canonical one (k in order per GEMM output, 16 reduction lanes and the
//! fixed tree, the shared polynomials of `math.rs`), so its results do not depend on threads,
//! batch composition or m either. `KIN_INFER_SIMD=generic` gives the exact bits on such a CPU
//! (software FMA, slowly).

use super::elementwise::{self, Vector};
use super::gemm::TileCall;
use super::math::{self, Lanes};
use super::{tree16, Ops};
use std::arch::x86_64::*;

pub(crate) static OPS: Ops = tier_ops! {
    mr: MR,
    nr: NR,
    // How this tier runs a micro-kernel over each weight format (WeightFormat::index
    // order: F32, BF16, F16); each loads a panel row as f32 lanes its own way.
    kernels: [
        rows_table!(kernel_6x8, [1, 2, 3, 4, 5, 6]),
        rows_table!(kernel_6x8_half::<true>, [1, 2, 3, 4, 5, 6]),
        rows_table!(kernel_6x8_half::<false>, [1, 2, 3, 4, 5, 6]),
    ],
    row4: None,
    q8: None,
    q8_lanes: false,
    row4_quant: &[],
    dequant: None,
    softmax_scaled: None,
    pack_rows_f32: None,
};

/// 4 lanes of f32. Private, and only created inside this module's `#[target_feature]`
/// functions, which is what makes the safe trait methods (intrinsics inside) sound.
#[derive(Clone, Copy)]
struct V(__m128);

lanes! {
    V, mask: __m128, width: 4,
    load: |p| _mm_loadu_ps(p), store: |p, v| _mm_storeu_ps(p, v),
    splat: |x| _mm_set1_ps(x),
    add: _mm_add_ps, sub: _mm_sub_ps, mul: _mm_mul_ps, div: _mm_div_ps,
    // Unfused on this tier: `a * b` rounded, then `+ c` rounded.
    fma: |a, b, c| _mm_add_ps(_mm_mul_ps(a, b), c),
    // _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC
    round_even: |a| _mm_round_ps::<0x08>(a),
    abs: |a| _mm_andnot_ps(_mm_set1_ps(-0.0), a),
    neg: |a| _mm_xor_ps(_mm_set1_ps(-0.0), a),
    copysign: |a, s| _mm_or_ps(_mm_andnot_ps(_mm_set1_ps(-0.0), a), _mm_and_ps(_mm_set1_ps(-0.0), s)),
    gt: |a, b| _mm_cmpgt_ps(a, b),
    is_nan: |a| _mm_cmpunord_ps(a, a),
    none: |m| _mm_movemask_ps(m) == 0,
    all: |m| _mm_movemask_ps(m) == 0xf,
    select: |m, a, b| _mm_blendv_ps(b, a, m),
    pow2i: |a| _mm_castsi128_ps(_mm_slli_epi32::<23>(_mm_add_epi32(_mm_cvtps_epi32(a), _mm_set1_epi32(127)))),
}

/// Applies `$body` (in `$v`) to every 4 lanes; the tail runs the same vector code on a
/// zero-padded copy, so no element takes the scalar path (whose `mul_add` would be a
/// software FMA call on these CPUs). A macro, not a function taking a closure: a closure does
/// not inherit `#[target_feature]`.
macro_rules! map {
    ($x:expr, |$v:ident| $body:expr, |$s:ident| $sbody:expr) => {{
        let x: &mut [f32] = $x;
        let n = x.len();
        let main = n - n % 4;
        let p = x.as_mut_ptr();
        for i in (0..main).step_by(4) {
            let $v = V(_mm_loadu_ps(p.add(i)));
            _mm_storeu_ps(p.add(i), ($body).0);
        }
        if main < n {
            let mut t = [0.0f32; 4];
            t[..n - main].copy_from_slice(&x[main..]);
            let $v = V(_mm_loadu_ps(t.as_ptr()));
            _mm_storeu_ps(t.as_mut_ptr(), ($body).0);
            x[main..].copy_from_slice(&t[..n - main]);
        }
        // The scalar form (the generic tier's) goes unused: the tail runs as vector lanes too.
        let _ = |$s: f32| $sbody;
    }};
}

tier_maps!("sse4.1");

/// Two-input loops: full vectors, then the tail on zero-padded copies.
macro_rules! zip2 {
    ($x:expr, $y:expr, |$a:ident, $b:ident| $body:expr) => {{
        let x: &mut [f32] = $x;
        let y: &[f32] = $y;
        let n = x.len().min(y.len());
        let main = n - n % 4;
        let (px, py) = (x.as_mut_ptr(), y.as_ptr());
        for i in (0..main).step_by(4) {
            let ($a, $b) = (_mm_loadu_ps(px.add(i)), _mm_loadu_ps(py.add(i)));
            _mm_storeu_ps(px.add(i), $body);
        }
        if main < n {
            let (mut tx, mut ty) = ([0.0f32; 4], [0.0f32; 4]);
            tx[..n - main].copy_from_slice(&x[main..n]);
            ty[..n - main].copy_from_slice(&y[main..n]);
            let ($a, $b) = (_mm_loadu_ps(tx.as_ptr()), _mm_loadu_ps(ty.as_ptr()));
            _mm_storeu_ps(tx.as_mut_ptr(), $body);
            x[main..n].copy_from_slice(&tx[..n - main]);
        }
    }};
}

#[target_feature(enable = "sse4.1")]
unsafe fn add(x: &mut [f32], y: &[f32]) {
    unsafe { zip2!(x, y, |a, b| _mm_add_ps(a, b)) }
}

#[target_feature(enable = "sse4.1")]
unsafe fn axpy(x: &mut [f32], s: f32, y: &[f32]) {
    unsafe {
        let sv = _mm_set1_ps(s);
        zip2!(x, y, |a, b| _mm_add_ps(_mm_mul_ps(sv, b), a))
    }
}

#[target_feature(enable = "sse4.1")]
unsafe fn affine(x: &mut [f32], s: f32, w: &[f32], b: &[f32]) {
    let n = x.len();
    let main = n - n % 4;
    unsafe {
        let sv = _mm_set1_ps(s);
        let (px, pw, pb) = (x.as_mut_ptr(), w.as_ptr(), b.as_ptr());
        for i in (0..main).step_by(4) {
            let v = _mm_mul_ps(_mm_loadu_ps(px.add(i)), sv);
            let v = _mm_add_ps(
                _mm_mul_ps(v, _mm_loadu_ps(pw.add(i))),
                _mm_loadu_ps(pb.add(i)),
            );
            _mm_storeu_ps(px.add(i), v);
        }
    }
    for i in main..n {
        x[i] = x[i] * s * w[i] + b[i];
    }
}

/// Spills the four xmm (canonical lanes 0-3, 4-7, 8-11, 12-15) for the tail and tree.
#[inline(always)]
unsafe fn lanes(v: [__m128; 4]) -> [f32; 16] {
    let mut l = [0.0f32; 16];
    unsafe {
        for (i, r) in v.iter().enumerate() {
            _mm_storeu_ps(l.as_mut_ptr().add(4 * i), *r);
        }
    }
    l
}

#[target_feature(enable = "sse4.1")]
unsafe fn sum(x: &[f32]) -> f32 {
    // A sum or a max has no fused step: the shared body is exact on this tier too.
    unsafe { elementwise::sum::<V>(x) }
}

#[target_feature(enable = "sse4.1")]
unsafe fn dot(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let main = n - n % 16;
    unsafe {
        let mut acc = [_mm_setzero_ps(); 4];
        let (px, py) = (x.as_ptr(), y.as_ptr());
        for i in (0..main).step_by(16) {
            for (q, a) in acc.iter_mut().enumerate() {
                let prod = _mm_mul_ps(
                    _mm_loadu_ps(px.add(i + 4 * q)),
                    _mm_loadu_ps(py.add(i + 4 * q)),
                );
                *a = _mm_add_ps(*a, prod);
            }
        }
        let mut l = lanes(acc);
        for i in main..n {
            l[i % 16] += x[i] * y[i];
        }
        tree16(l)
    }
}

#[target_feature(enable = "sse4.1")]
unsafe fn max(x: &[f32]) -> f32 {
    // A sum or a max has no fused step: the shared body is exact on this tier too.
    unsafe { elementwise::max::<V>(x) }
}

/// 6×8 register tile: 12 xmm accumulators + 2 for the B row + 1 broadcast of 16 registers.
const MR: usize = 6;
const NR: usize = 8;

/// SSE micro-kernel (multiply then add); contract in [`TileCall`], except that each step
/// rounds twice.
#[target_feature(enable = "sse4.1")]
unsafe fn kernel_6x8<const R: usize>(t: TileCall) {
    // SAFETY: each B row holds NR f32 values.
    unsafe { body::<f32, R>(t, |bp| (_mm_loadu_ps(bp), _mm_loadu_ps(bp.add(4)))) }
}

/// [`kernel_6x8`] over bf16/f16 B panels: bf16 widens with an integer unpack (exact); f16
/// (no F16C on these CPUs) widens each row through `half` first.
#[target_feature(enable = "sse4.1")]
unsafe fn kernel_6x8_half<const BF16: bool, const R: usize>(t: TileCall) {
    // SAFETY: each B row holds NR u16 values.
    unsafe {
        let zero = _mm_setzero_si128();
        body::<u16, R>(t, |bp| {
            if BF16 {
                let h = _mm_loadu_si128(bp as *const __m128i);
                (
                    _mm_castsi128_ps(_mm_unpacklo_epi16(zero, h)),
                    _mm_castsi128_ps(_mm_unpackhi_epi16(zero, h)),
                )
            } else {
                let mut w = [0.0f32; NR];
                for (j, v) in w.iter_mut().enumerate() {
                    *v = super::gemm::f16_to_f32(*bp.add(j));
                }
                (_mm_loadu_ps(w.as_ptr()), _mm_loadu_ps(w.as_ptr().add(4)))
            }
        })
    }
}

/// The 6×8 tile over B rows of `E` that `row` reads as two registers of f32 (its operations
/// are SSE2, which every x86-64 CPU has, so the closure needs no target feature).
#[inline(always)]
unsafe fn body<E, const R: usize>(t: TileCall, row: impl Fn(*const E) -> (__m128, __m128)) {
    let (c, ldc) = (t.c, t.ldc);
    unsafe {
        let mut c0 = [_mm_setzero_ps(); R];
        let mut c1 = [_mm_setzero_ps(); R];
        if t.load {
            for r in 0..R {
                c0[r] = _mm_loadu_ps(c.add(r * ldc));
                c1[r] = _mm_loadu_ps(c.add(r * ldc + 4));
            }
        }
        let (mut ap, mut bp) = (t.a, t.b.cast::<E>());
        for _ in 0..t.kc {
            let (b0, b1) = row(bp);
            for r in 0..R {
                let av = _mm_set1_ps(*ap.add(r));
                c0[r] = _mm_add_ps(_mm_mul_ps(av, b0), c0[r]);
                c1[r] = _mm_add_ps(_mm_mul_ps(av, b1), c1[r]);
            }
            ap = ap.add(R);
            bp = bp.add(NR);
        }
        // The bias, then the store.
        let (z0, z1) = if t.bias.is_null() {
            (_mm_setzero_ps(), _mm_setzero_ps())
        } else {
            (_mm_loadu_ps(t.bias), _mm_loadu_ps(t.bias.add(4)))
        };
        for r in 0..R {
            let (mut v0, mut v1) = (c0[r], c1[r]);
            if !t.bias.is_null() {
                v0 = _mm_add_ps(v0, z0);
                v1 = _mm_add_ps(v1, z1);
            }
            _mm_storeu_ps(c.add(r * ldc), v0);
            _mm_storeu_ps(c.add(r * ldc + 4), v1);
        }
    }
}

/// [`super::Ops::gemv`]: 16 outputs per pass (four independent accumulators), then 4,
/// then the scalar tail; every output accumulates p in order from 0.0.
#[target_feature(enable = "sse4.1")]
unsafe fn gemv(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    let n = out.len();
    let j = unsafe { elementwise::gemv_columns::<V>(a, b, ldb, out) };
    if j < n {
        gemv_tail(a, &b[j..], ldb, &mut out[j..]);
    }
}

/// The SSE tier's scalar tail: multiply then add, as its vector lanes do.
fn gemv_tail(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (p, &av) in a.iter().enumerate() {
        for (o, &bv) in out.iter_mut().zip(&b[p * ldb..]) {
            *o += av * bv;
        }
    }
}
