//! The macros each SIMD tier module is written with, so that what every tier has in common
//! is written once: its `Ops` table (`tier_ops!`), its lanes type (`lanes!`), its activations
//! and scalar maps (`tier_maps!`), its fused kernels and reductions (`tier_fused!`) and its
//! micro-kernel tables (`rows_table!`). A tier module keeps only what differs: its target
//! features, its intrinsics and how its `map!` walks whole vectors and the tail.

/// A tier's micro-kernel instantiated for every row count: `rows_table!(k, [1, 2])` is
/// `&[k::<1>, k::<2>]` (generic arguments before the row count are kept).
macro_rules! rows_table {
    ($f:ident, [$($r:literal),*]) => {
        &[$($f::<$r> as _),*]
    };
    ($f:ident::<$g:literal>, [$($r:literal),*]) => {
        &[$($f::<$g, $r> as _),*]
    };
}

/// A SIMD tier's `Ops` table: the fields given (its register tile, micro-kernels and optional
/// kernels), then the elementwise and reduction entries, which every SIMD tier defines under
/// the same names (`tier_maps!`, `tier_fused!` and its own reductions) as `#[target_feature]`
/// functions, each wrapped in a safe `fn` pointer. SAFETY of the wrappers: a tier's table is
/// only handed out by `Tier::ops` after `Tier::supported()` confirmed its features at run time.
macro_rules! tier_ops {
    ($($field:ident: $value:expr),* $(,)?) => {
        Ops {
            $($field: $value,)*
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
        }
    };
}

/// A SIMD tier's activations and scalar maps (`exp` … `scale`), each a
/// `#[target_feature(enable = $feat)]` function running the tier's own `map!` (how it walks
/// whole vectors and the tail) over its lanes type `V`, with the one `math::*_v` body every
/// tier runs: first as vector lanes, then as scalars (the tiers whose tail is not scalar ignore
/// the second). Written once, so no tier's list or formula can drift.
macro_rules! tier_maps {
    ($feat:literal) => {
        #[target_feature(enable = $feat)]
        unsafe fn exp(x: &mut [f32]) {
            unsafe { map!(x, |v| math::exp_v(v), |v| math::exp_v(v)) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn gelu_erf(x: &mut [f32]) {
            unsafe { map!(x, |v| math::gelu_erf_v(v), |v| math::gelu_erf_v(v)) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn gelu_tanh(x: &mut [f32]) {
            unsafe { map!(x, |v| math::gelu_tanh_v(v), |v| math::gelu_tanh_v(v)) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn silu(x: &mut [f32]) {
            unsafe { map!(x, |v| math::silu_v(v), |v| math::silu_v(v)) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn tanh(x: &mut [f32]) {
            unsafe { map!(x, |v| math::tanh_v(v), |v| math::tanh_v(v)) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn exp_sub(x: &mut [f32], s: f32) {
            let sv = V::splat(s);
            unsafe { map!(x, |v| math::exp_v(v.sub(sv)), |v| math::exp_v(v - s)) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn sub_scalar(x: &mut [f32], s: f32) {
            let sv = V::splat(s);
            unsafe { map!(x, |v| v.sub(sv), |v| v - s) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn scale(x: &mut [f32], s: f32) {
            let sv = V::splat(s);
            unsafe { map!(x, |v| v.mul(sv), |v| v * s) }
        }
    };
}

/// A fused-multiply-add tier's `axpy`, `add`, `affine`, `sum`, `dot` and `max`: the bodies
/// of [`elementwise`] compiled inside `#[target_feature(enable = $feat)]` over the tier's `V`.
/// (SSE has no FMA and keeps its own `axpy`, `add`, `affine` and `dot`.)
macro_rules! tier_fused {
    ($feat:literal) => {
        #[target_feature(enable = $feat)]
        unsafe fn axpy(x: &mut [f32], a: f32, y: &[f32]) {
            unsafe { elementwise::axpy::<V>(x, a, y) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn add(x: &mut [f32], y: &[f32]) {
            unsafe { elementwise::add::<V>(x, y) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn affine(x: &mut [f32], s: f32, w: &[f32], b: &[f32]) {
            unsafe { elementwise::affine::<V>(x, s, w, b) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn sum(x: &[f32]) -> f32 {
            unsafe { elementwise::sum::<V>(x) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn dot(x: &[f32], y: &[f32]) -> f32 {
            unsafe { elementwise::dot::<V>(x, y) }
        }
        #[target_feature(enable = $feat)]
        unsafe fn max(x: &[f32]) -> f32 {
            unsafe { elementwise::max::<V>(x) }
        }
    };
}

/// A tier's lanes type `$v` (a private newtype over one register): its [`math::Lanes`] and
/// [`elementwise::Vector`] impls from one expression per operation, each written over the raw
/// registers bound by the `|...|` names and wrapped here (`$v(...)`, `unsafe`,
/// `#[inline(always)]`). Only the intrinsics differ between tiers; every method's contract is
/// the trait's (exact or correctly rounded, lane by lane).
///
/// [`math::Lanes`]: super::math::Lanes
/// [`elementwise::Vector`]: super::elementwise::Vector
macro_rules! lanes {
    (
        $v:ident, mask: $mask:ty, width: $width:literal,
        load: |$lp:ident| $load:expr, store: |$sp:ident, $sx:ident| $store:expr,
        splat: |$splat_x:ident| $splat:expr,
        add: $add:path, sub: $sub:path, mul: $mul:path, div: $div:path,
        fma: |$fa:ident, $fb:ident, $fc:ident| $fma:expr,
        round_even: |$ra:ident| $round:expr,
        abs: |$aa:ident| $abs:expr,
        neg: |$na:ident| $neg:expr,
        copysign: |$ca:ident, $cs:ident| $copysign:expr,
        gt: |$ga:ident, $gb:ident| $gt:expr,
        is_nan: |$ia:ident| $is_nan:expr,
        none: |$nm:ident| $none:expr,
        all: |$am:ident| $all:expr,
        select: |$sm:ident, $sa:ident, $sb:ident| $select:expr,
        pow2i: |$pa:ident| $pow2i:expr $(,)?
    ) => {
        impl Lanes for $v {
            type Mask = $mask;
            #[inline(always)]
            fn splat($splat_x: f32) -> Self {
                unsafe { $v($splat) }
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                unsafe { $v($add(self.0, o.0)) }
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                unsafe { $v($sub(self.0, o.0)) }
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                unsafe { $v($mul(self.0, o.0)) }
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                unsafe { $v($div(self.0, o.0)) }
            }
            #[inline(always)]
            fn fma(self, b: Self, c: Self) -> Self {
                let ($fa, $fb, $fc) = (self.0, b.0, c.0);
                unsafe { $v($fma) }
            }
            #[inline(always)]
            fn round_even(self) -> Self {
                let $ra = self.0;
                unsafe { $v($round) }
            }
            #[inline(always)]
            fn abs(self) -> Self {
                let $aa = self.0;
                unsafe { $v($abs) }
            }
            #[inline(always)]
            fn neg(self) -> Self {
                let $na = self.0;
                unsafe { $v($neg) }
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                let ($ca, $cs) = (self.0, sign.0);
                unsafe { $v($copysign) }
            }
            #[inline(always)]
            fn gt(self, o: Self) -> $mask {
                let ($ga, $gb) = (self.0, o.0);
                unsafe { $gt }
            }
            #[inline(always)]
            fn is_nan(self) -> $mask {
                let $ia = self.0;
                unsafe { $is_nan }
            }
            // A mask register that is a plain integer (AVX-512's k registers) needs no
            // intrinsic to test.
            #[inline(always)]
            #[allow(unused_unsafe)]
            fn none($nm: $mask) -> bool {
                unsafe { $none }
            }
            #[inline(always)]
            #[allow(unused_unsafe)]
            fn all($am: $mask) -> bool {
                unsafe { $all }
            }
            #[inline(always)]
            fn select($sm: $mask, a: Self, b: Self) -> Self {
                let ($sa, $sb) = (a.0, b.0);
                unsafe { $v($select) }
            }
            #[inline(always)]
            fn pow2i(self) -> Self {
                let $pa = self.0;
                unsafe { $v($pow2i) }
            }
        }

        impl Vector for $v {
            const WIDTH: usize = $width;
            #[inline(always)]
            unsafe fn load($lp: *const f32) -> Self {
                unsafe { $v($load) }
            }
            #[inline(always)]
            unsafe fn store(self, $sp: *mut f32) {
                let $sx = self.0;
                unsafe { $store }
            }
        }
    };
}
