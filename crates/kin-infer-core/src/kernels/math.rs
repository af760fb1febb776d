//! Our own transcendentals (exp, erf, tanh) and the activations built on them, written ONCE
//! over the [`Lanes`] trait so the scalar reference and every SIMD tier run the very same
//! operation sequence (determinism contract: bit-identical across tiers, never the platform's
//! libm, which differs by OS and is slow per element).
//!
//! Every operation used here is exactly rounded in IEEE 754 (add, sub, mul, div, fma) or exact
//! (round-to-nearest-even, abs, copysign, neg, compare/select, power-of-two construction), so a
//! `__m512`, a `float32x4_t` and an `f32` produce the same bits lane by lane. Accuracy is checked
//! against f64 references in `tests/kernels.rs`.

/// The per-lane operations the transcendentals are written in. Implemented for `f32` (the
/// scalar reference, used by the generic tier and by SIMD tails) and for private vector newtypes
/// in the SIMD tier modules. Every method must be exact or correctly rounded, lane by lane.
pub(crate) trait Lanes: Copy {
    type Mask: Copy;
    fn splat(v: f32) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// `self * b + c` with one rounding.
    fn fma(self, b: Self, c: Self) -> Self;
    /// Round to the nearest integer, ties to even.
    fn round_even(self) -> Self;
    fn abs(self) -> Self;
    fn neg(self) -> Self;
    /// Magnitude of `self`, sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// Ordered `self > o` (false when either is NaN).
    fn gt(self, o: Self) -> Self::Mask;
    fn is_nan(self) -> Self::Mask;
    /// `m ? a : b` per lane.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// No lane of `m` set.
    fn none(m: Self::Mask) -> bool;
    /// Every lane of `m` set.
    fn all(m: Self::Mask) -> bool;
    /// `2^self` for integral `self` in [-126, 127], built from exponent bits.
    fn pow2i(self) -> Self;

    /// `self > o ? self : o` — spelled out (not `maxps`/`f32::max`) because the platform max
    /// instructions disagree on NaN and on ±0; this form is the same everywhere.
    #[inline(always)]
    fn max_(self, o: Self) -> Self {
        Self::select(self.gt(o), self, o)
    }
    /// `o > self ? self : o`, the mirror of [`Lanes::max_`].
    #[inline(always)]
    fn min_(self, o: Self) -> Self {
        Self::select(o.gt(self), self, o)
    }
}

impl Lanes for f32 {
    type Mask = bool;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self - o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self * o
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        self / o
    }
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn round_even(self) -> Self {
        self.round_ties_even()
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f32::abs(self)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        -self
    }
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        f32::copysign(self, sign)
    }
    #[inline(always)]
    fn gt(self, o: Self) -> bool {
        self > o
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    #[inline(always)]
    fn none(m: bool) -> bool {
        !m
    }
    #[inline(always)]
    fn all(m: bool) -> bool {
        m
    }
    #[inline(always)]
    fn select(m: bool, a: Self, b: Self) -> Self {
        if m {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        f32::from_bits(((self as i32 + 127) as u32) << 23)
    }
}

// exp: Cody–Waite range reduction x = n·ln2 + r, |r| <= ln2/2, then the Cephes expf minimax
// polynomial (about 1 ulp). LN2_HI has few significant bits so n·LN2_HI is exact for |n| < 256.
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4; // 0.693359375, exactly representable with 9 bits
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5, // Cephes' 5.0000001201E-1 rounds to exactly 0.5 in f32
];
// Clamp bounds: below -104 the result rounds to 0, above 89 it overflows to +inf; clamping
// keeps n within [-150, 129] so the two-step scaling below never wraps the exponent.
const EXP_LO: f32 = -104.0;
const EXP_HI: f32 = 89.0;

#[inline(always)]
pub(crate) fn exp_v<V: Lanes>(x: V) -> V {
    let xc = x.max_(V::splat(EXP_LO)).min_(V::splat(EXP_HI));
    let n = xc.mul(V::splat(LOG2E)).round_even();
    let r = n.fma(V::splat(-LN2_HI), xc);
    let r = n.fma(V::splat(-LN2_LO), r);
    let mut p = V::splat(EXP_P[0]);
    p = p.fma(r, V::splat(EXP_P[1]));
    p = p.fma(r, V::splat(EXP_P[2]));
    p = p.fma(r, V::splat(EXP_P[3]));
    p = p.fma(r, V::splat(EXP_P[4]));
    p = p.fma(r, V::splat(EXP_P[5]));
    let y = p.fma(r.mul(r), r).add(V::splat(1.0));
    // 2^n as 2^n1 · 2^n2 (both normal): the first product is exact, the second rounds once,
    // which gives correctly scaled subnormal results and a clean overflow to +inf.
    let n1 = n.mul(V::splat(0.5)).round_even();
    let n2 = n.sub(n1);
    let res = y.mul(n1.pow2i()).mul(n2.pow2i());
    V::select(x.is_nan(), x, res)
}

// erf: a well-known branch-free float erf (two minimax pieces split at 475/512, max error about
// 1 ulp): small |x| an odd polynomial, large |x| 1 - exp(poly(|x|)).
pub(crate) const ERF_SPLIT: f32 = 0.927_734_4; // 475/512
pub(crate) const ERF_BIG: [f32; 7] = [
    -1.728_534_7e-5,
    3.831_971_3e-4,
    -3.883_964_4e-3,
    2.425_462_2e-2,
    -1.067_778_8e-1,
    -6.348_467e-1,
    -1.287_175_1e-1,
];
pub(crate) const ERF_SMALL: [f32; 6] = [
    -5.967_617e-4,
    4.991_194_2e-3,
    -2.676_813_5e-2,
    1.128_199_3e-1,
    -3.761_253_4e-1,
    1.283_791_7e-1,
];

#[inline(always)]
pub(crate) fn erf_v<V: Lanes>(a: V) -> V {
    let t = a.abs();
    let s = a.mul(a);
    let big_lanes = t.gt(V::splat(ERF_SPLIT));
    // A lane's value is its own piece whatever the other lanes hold, so where every lane takes
    // the same piece the other is not computed: the same bits, and (for the small piece) no
    // exp. GELU inputs are mostly small (|x| < 1.31), often for a whole vector.
    if V::none(big_lanes) {
        return erf_small(a, s);
    }
    let big = erf_big(a, t, s);
    if V::all(big_lanes) {
        return big;
    }
    V::select(big_lanes, big, erf_small(a, s))
}

/// erf's large piece, `copysign(1 - exp(poly(|x|)), x)`.
#[inline(always)]
fn erf_big<V: Lanes>(a: V, t: V, s: V) -> V {
    let mut r = V::splat(ERF_BIG[0]).fma(t, V::splat(ERF_BIG[1]));
    let u = V::splat(ERF_BIG[2]).fma(t, V::splat(ERF_BIG[3]));
    r = r.fma(s, u);
    r = r.fma(t, V::splat(ERF_BIG[4]));
    r = r.fma(t, V::splat(ERF_BIG[5]));
    r = r.fma(t, V::splat(ERF_BIG[6]));
    r = r.fma(t, t.neg());
    V::splat(1.0).sub(exp_v(r)).copysign(a)
}

/// erf's small piece, `x + x·s·Q(s)` with `s = x²`.
#[inline(always)]
fn erf_small<V: Lanes>(a: V, s: V) -> V {
    let mut q = V::splat(ERF_SMALL[0]);
    q = q.fma(s, V::splat(ERF_SMALL[1]));
    q = q.fma(s, V::splat(ERF_SMALL[2]));
    q = q.fma(s, V::splat(ERF_SMALL[3]));
    q = q.fma(s, V::splat(ERF_SMALL[4]));
    q = q.fma(s, V::splat(ERF_SMALL[5]));
    q.fma(a, a)
}

// tanh: |x| > 0.55 uses 1 - 2/(e^{2|x|} + 1) (no cancellation there: the subtracted term is
// <= 1/2); below, x + x³·P(x²) with P fitted (weighted least squares, relative error ~1e-9).
pub(crate) const TANH_SPLIT: f32 = 0.55;
pub(crate) const TANH_P: [f32; 5] = [
    -6.274_244_7e-3,
    2.107_168_4e-2,
    -5.385_231_2e-2,
    1.333_258_6e-1,
    -3.333_331_6e-1,
];

#[inline(always)]
pub(crate) fn tanh_v<V: Lanes>(x: V) -> V {
    let s = x.abs();
    let e = exp_v(s.add(s));
    let big = V::splat(1.0)
        .sub(V::splat(2.0).div(e.add(V::splat(1.0))))
        .copysign(x);
    let z = x.mul(x);
    let mut p = V::splat(TANH_P[0]);
    p = p.fma(z, V::splat(TANH_P[1]));
    p = p.fma(z, V::splat(TANH_P[2]));
    p = p.fma(z, V::splat(TANH_P[3]));
    p = p.fma(z, V::splat(TANH_P[4]));
    // x + x³·P: the correction has the opposite sign of x, so for x = -0 the sum would round
    // to +0; copysign restores tanh(-0) = -0 (exact, and a no-op for every other x).
    let small = p.mul(z).fma(x, x).copysign(x);
    V::select(s.gt(V::splat(TANH_SPLIT)), big, small)
}

/// GELU, erf form: `0.5·x·(1 + erf(x/√2))`, evaluated as `(0.5·x)·(1 + e)`.
#[inline(always)]
pub(crate) fn gelu_erf_v<V: Lanes>(x: V) -> V {
    let e = erf_v(x.mul(V::splat(std::f32::consts::FRAC_1_SQRT_2)));
    V::splat(0.5).mul(x).mul(V::splat(1.0).add(e))
}

const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// GELU, tanh form: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, the inner cubic as
/// `fma(0.044715·x·x, x, x)`.
#[inline(always)]
pub(crate) fn gelu_tanh_v<V: Lanes>(x: V) -> V {
    let u = V::splat(0.044_715).mul(x).mul(x).fma(x, x);
    let t = tanh_v(V::splat(SQRT_2_OVER_PI).mul(u));
    V::splat(0.5).mul(x).mul(V::splat(1.0).add(t))
}

/// SiLU: `x / (1 + exp(-x))`.
#[inline(always)]
pub(crate) fn silu_v<V: Lanes>(x: V) -> V {
    x.div(V::splat(1.0).add(exp_v(x.neg())))
}

/// `e^x` — the scalar reference every tier reproduces bit for bit (about 1 ulp; subnormal
/// results correctly scaled; `exp(NaN) = NaN`, `exp(-inf) = 0`, `exp(+inf) = +inf`).
pub fn exp(x: f32) -> f32 {
    exp_v(x)
}

/// `erf(x)` — the scalar reference every tier reproduces bit for bit (max abs error < 1e-6).
pub fn erf(x: f32) -> f32 {
    erf_v(x)
}

/// `tanh(x)` — the scalar reference every tier reproduces bit for bit.
pub fn tanh(x: f32) -> f32 {
    tanh_v(x)
}

/// GELU (erf form), scalar reference.
pub fn gelu_erf(x: f32) -> f32 {
    gelu_erf_v(x)
}

/// GELU (tanh form), scalar reference.
pub fn gelu_tanh(x: f32) -> f32 {
    gelu_tanh_v(x)
}

/// SiLU, scalar reference.
pub fn silu(x: f32) -> f32 {
    silu_v(x)
}
