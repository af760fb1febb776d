//! The q8 kernels over the lane layout (`q8_lanes.rs`): output `j` of a group in 32-bit lane
//! `j`, so a block's integer sums for all eight outputs build up in one vector, with no
//! reduction across lanes, and the eight scales are one load. Per four activation codes
//! (broadcast to every lane): AVX2 multiplies with `vpmaddubsw` (Q4_0's pair sums stay in
//! i16 over the whole block: at most 8 · 2 · 15 · 127 = 30480, then one `vpmaddwd`), VNNI
//! (`vpdpbusd`, the AVX-512 tier where the CPU has it) straight into i32. Every sum is exact,
//! so the lanes hold the twin's `isum`, and the f32 steps are the twin's (`q8_dot::finish`'s
//! `fma(d·d_a, isum, acc)`), in each lane.
//!
//! Offsets come out through the activation's block sum `Σ a`: Q4_0's codes are `q − 8`,
//! Q8_0's are stored `+ 128` (unsigned, as VNNI wants; AVX2 flips them back and uses the
//! sign trick, whose pair sums reach 2 · 128 · 127 and so each go to i32 at once).

use super::dequant::IQ4_NL_LEVELS;
use super::ggml::GgmlType;
use super::q8_act::{QuantRow, PAIRS};
use super::q8_gemm::{Q8Call, GROUP};
use std::arch::x86_64::*;

/// How a tier forms the block sums (AVX2's `vpmaddubsw` or VNNI's `vpdpbusd`).
trait Dot {
    /// The products of `V` unsigned code vectors `q[v]` (elements `4v..4v + 4` of each
    /// output) and the activation codes at `a`, in the tier's raw form: AVX2's i16 pair sums
    /// (the caller keeps `V · 2 · max q · 127` below 2¹⁵), VNNI's i32 lane sums.
    unsafe fn raw<const V: usize>(q: &[__m256i], a: *const u8) -> __m256i;
    /// Raw sums as i32 lanes.
    unsafe fn lanes(raw: __m256i) -> __m256i;
    /// Raw sums as i32 lanes times each lane's scale, given as i16 pairs (`sc16`, for AVX2's
    /// `vpmaddwd`) and as i32 (`sc32`, for VNNI's `vpmulld`).
    unsafe fn scaled(raw: __m256i, sc16: __m256i, sc32: __m256i) -> __m256i;
    /// Q8_0's lanes of `Σ w·a` from the eight stored vectors `u[v]` (`w + 128`), `sa` the
    /// activation block's `Σ a`.
    unsafe fn q8(u: &[__m256i; 8], a: *const u8, sa: i32) -> __m256i;
    /// Whether codes of five or six bits must be summed four or two vectors at a time (the
    /// i16 bound above).
    const SPLIT: bool;

    /// Lanes of `Σ q·a` ([`Self::raw`] as i32).
    #[inline(always)]
    unsafe fn sum<const V: usize>(q: &[__m256i], a: *const u8) -> __m256i {
        Self::lanes(Self::raw::<V>(q, a))
    }
}

/// An activation row's arrays as pointers, checked once per call against the weights'
/// blocks: the block loops then read them without bounds checks or reloading each `Vec`'s
/// fields (a fifth of a prompt's Q4_0 product went to those).
#[derive(Clone, Copy)]
struct Act {
    qs: *const u8,
    d: *const f32,
    s: *const f32,
    bs: *const i32,
    /// Q8K rows' [`QuantRow::pairs`] (dangling for the 32-element kinds, never read).
    pairs: *const i32,
}

impl Act {
    /// `r`'s pointers, for weight rows of `k` values in blocks of `bl`.
    ///
    /// # Panics
    /// If `r` holds fewer (a caller's broken contract, never a user's input).
    fn of(r: &QuantRow, k: usize, bl: usize) -> Act {
        assert!(
            r.qs.len() >= k
                && r.d.len() >= k / bl
                && r.s.len() >= k / bl
                && r.bsums.len() >= k / 16
                && (bl != 256 || r.pairs.len() >= k / bl * PAIRS),
            "q8 kernel: an activation row shorter than the weights"
        );
        Act {
            qs: r.qs.as_ptr() as *const u8,
            d: r.d.as_ptr(),
            s: r.s.as_ptr(),
            bs: r.bsums.as_ptr(),
            pairs: r.pairs.as_ptr(),
        }
    }
}

/// Four activation codes from `a`, in every lane.
#[inline(always)]
unsafe fn four(a: *const u8) -> __m256i {
    _mm256_set1_epi32((a as *const i32).read_unaligned())
}

struct Avx2;
impl Dot for Avx2 {
    const SPLIT: bool = true;
    #[inline(always)]
    unsafe fn raw<const V: usize>(q: &[__m256i], a: *const u8) -> __m256i {
        let add = |s, (v, q): (usize, &__m256i)| {
            _mm256_add_epi16(s, _mm256_maddubs_epi16(*q, four(a.add(4 * v))))
        };
        q[..V].iter().enumerate().fold(_mm256_setzero_si256(), add)
    }
    #[inline(always)]
    unsafe fn lanes(raw: __m256i) -> __m256i {
        _mm256_madd_epi16(raw, _mm256_set1_epi16(1))
    }
    #[inline(always)]
    unsafe fn scaled(raw: __m256i, sc16: __m256i, _: __m256i) -> __m256i {
        _mm256_madd_epi16(raw, sc16)
    }
    #[inline(always)]
    unsafe fn q8(u: &[__m256i; 8], a: *const u8, _sa: i32) -> __m256i {
        let flip = _mm256_set1_epi8(-128);
        let mut s = _mm256_setzero_si256();
        for (v, u) in u.iter().enumerate() {
            // The sign trick: |w| times a with w's sign (pair sums up to 2 · 128 · 127).
            let w = _mm256_xor_si256(*u, flip);
            let a = _mm256_sign_epi8(four(a.add(4 * v)), w);
            s = _mm256_add_epi32(
                s,
                Self::lanes(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), a)),
            );
        }
        s
    }
}

struct Vnni;
impl Dot for Vnni {
    #[inline(always)]
    unsafe fn raw<const V: usize>(q: &[__m256i], a: *const u8) -> __m256i {
        // Two chains (even and odd vectors): each `vpdpbusd` waits on its accumulator, and
        // one chain of eight left the multipliers idle (exact integer sums: any order).
        let mut s = [_mm256_setzero_si256(); 2];
        for (v, q) in q[..V].iter().enumerate() {
            s[v % 2] = _mm256_dpbusd_epi32(s[v % 2], *q, four(a.add(4 * v)));
        }
        _mm256_add_epi32(s[0], s[1])
    }
    const SPLIT: bool = false;
    #[inline(always)]
    unsafe fn lanes(raw: __m256i) -> __m256i {
        raw
    }
    #[inline(always)]
    unsafe fn scaled(raw: __m256i, _: __m256i, sc32: __m256i) -> __m256i {
        _mm256_mullo_epi32(raw, sc32)
    }
    #[inline(always)]
    unsafe fn q8(u: &[__m256i; 8], a: *const u8, sa: i32) -> __m256i {
        _mm256_sub_epi32(Self::raw::<8>(u, a), _mm256_set1_epi32(128 * sa))
    }
}

/// The call's type and activation row count as const parameters of `$f`.
macro_rules! dispatch {
    ($c:ident, $f:ident) => {{
        macro_rules! rows {
            ($t:ident) => {
                match $c.a {
                    [a0] => $f::<$t, 1>($c, [a0]),
                    [a0, a1] => $f::<$t, 2>($c, [a0, a1]),
                    [a0, a1, a2] => $f::<$t, 3>($c, [a0, a1, a2]),
                    [a0, a1, a2, a3] => $f::<$t, 4>($c, [a0, a1, a2, a3]),
                    _ => return false,
                }
            };
        }
        match $c.t {
            GgmlType::Q4_0 => rows!(Q4_0),
            GgmlType::Q8_0 => rows!(Q8_0),
            GgmlType::Q4_1 => rows!(Q4_1),
            GgmlType::Q5_0 => rows!(Q5_0),
            GgmlType::Q5_1 => rows!(Q5_1),
            GgmlType::IQ4_NL => rows!(IQ4_NL),
            GgmlType::Q4_K => rows!(Q4_K),
            GgmlType::Q5_K => rows!(Q5_K),
            GgmlType::Q6_K => rows!(Q6_K),
            _ => return false,
        }
        true
    }};
}

/// [`super::q8_gemm::Q8Kernel`] for AVX2: over the lane layout (the layout this tier packs
/// every type it covers in; a matrix in the other, packed by another tier, runs the twin).
///
/// # Safety
/// As [`Q8Call`]'s contract, AVX2+FMA+F16C.
pub(crate) unsafe fn avx2(c: Q8Call) -> bool {
    if !c.lanes {
        return false;
    }
    dispatch!(c, avx2_rows)
}

/// [`super::q8_gemm::Q8Kernel`] for the AVX-512 tier: VNNI where the CPU has it, else AVX2's.
///
/// # Safety
/// As [`Q8Call`]'s contract, AVX-512 F/VL with AVX2+FMA+F16C.
pub(crate) unsafe fn avx512(c: Q8Call) -> bool {
    if !c.lanes {
        return false;
    }
    if std::arch::is_x86_feature_detected!("avx512vnni") {
        return dispatch!(c, vnni_rows);
    }
    dispatch!(c, avx2_rows)
}

/// [`run`] compiled for a tier's features, one instance per way of forming the sums.
macro_rules! rows_fn {
    ($name:ident, $dot:ty, $features:literal) => {
        #[target_feature(enable = $features)]
        unsafe fn $name<const T: u8, const R: usize>(c: Q8Call, a: [&QuantRow; R]) {
            run::<$dot, T, R>(c, a)
        }
    };
}
rows_fn!(avx2_rows, Avx2, "avx2,fma,f16c");
rows_fn!(vnni_rows, Vnni, "avx2,fma,f16c,avx512f,avx512vl,avx512vnni");

// The types as const parameters.
const Q4_0: u8 = 0;
const Q8_0: u8 = 1;
const Q4_K: u8 = 2;
const Q6_K: u8 = 3;
const Q4_1: u8 = 4;
const Q5_0: u8 = 5;
const Q5_1: u8 = 6;
const IQ4_NL: u8 = 7;
const Q5_K: u8 = 8;

/// A group's outputs for `R` activation rows (type `T`), stored to `out`.
#[inline(always)]
unsafe fn run<D: Dot, const T: u8, const R: usize>(c: Q8Call, a: [&QuantRow; R]) {
    debug_assert!((1..=GROUP).contains(&c.cols));
    let k = c.row_bytes / c.t.block_bytes() * c.t.block_len();
    let a = a.map(|r| Act::of(r, k, c.t.block_len()));
    let acc = match T {
        Q4_K => q4_k::<D, false, R>(c, a),
        Q5_K => q4_k::<D, true, R>(c, a),
        Q6_K => q6_k::<D, R>(c, a),
        _ => run32::<D, T, R>(c, a),
    };
    for (r, acc) in acc.iter().enumerate() {
        if c.cols == GROUP {
            _mm256_storeu_ps(c.out.add(r * c.ldo), *acc);
        } else {
            let mut lanes = [0.0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), *acc);
            std::ptr::copy_nonoverlapping(lanes.as_ptr(), c.out.add(r * c.ldo), c.cols);
        }
    }
}

/// The 32-element types: per block the eight scales (and Q4_1 / Q5_1's minimums), the codes
/// unpacked once for all rows, then per row the lanes' exact sums, less the codes' offset
/// times the activation block's sum, and the twin's steps.
#[inline(always)]
unsafe fn run32<D: Dot, const T: u8, const R: usize>(c: Q8Call, a: [Act; R]) -> [__m256; R] {
    let (w, blocks) = (c.w, c.row_bytes / c.t.block_bytes());
    let (bb, affine, offset) = match T {
        Q4_0 => (18, false, 8),
        Q4_1 => (20, true, 0),
        Q5_0 => (22, false, 16),
        Q5_1 => (24, true, 0),
        IQ4_NL => (18, false, 0),
        _ => (34, false, 0),
    };
    let levels = {
        let l: [u8; 16] = std::array::from_fn(|i| IQ4_NL_LEVELS[i] as u8 ^ 0x80);
        let l = _mm_loadu_si128(l.as_ptr() as *const __m128i);
        _mm256_set_m128i(l, l)
    };
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        let base = w.add(b * GROUP * bb);
        let half = |at: usize| _mm256_cvtph_ps(_mm_loadu_si128(base.add(at) as *const __m128i));
        let (dw, mw) = (half(0), half(16));
        let codes = base.add(if affine { 32 } else { 16 });
        let act = |r: usize| a[r].qs.add(32 * b);
        let sa = |r: usize| *a[r].bs.add(2 * b) + *a[r].bs.add(2 * b + 1);
        let less = |s: __m256i, r: usize| _mm256_sub_epi32(s, _mm256_set1_epi32(offset * sa(r)));
        let isum: [__m256i; R] = match T {
            Q8_0 => {
                let u: [__m256i; 8] =
                    std::array::from_fn(
                        |v| _mm256_loadu_si256(codes.add(32 * v) as *const __m256i),
                    );
                std::array::from_fn(|r| D::q8(&u, act(r), sa(r)))
            }
            IQ4_NL => {
                let u = nibbles(codes).map(|i| _mm256_shuffle_epi8(levels, i));
                std::array::from_fn(|r| D::q8(&u, act(r), sa(r)))
            }
            Q5_0 | Q5_1 => {
                let q = with_fifth(nibbles(codes), codes.add(128));
                std::array::from_fn(|r| {
                    let lo = D::sum::<4>(&q[..4], act(r));
                    less(
                        _mm256_add_epi32(lo, D::sum::<4>(&q[4..], act(r).add(16))),
                        r,
                    )
                })
            }
            _ => {
                let q = nibbles(codes);
                std::array::from_fn(|r| less(D::sum::<8>(&q, act(r)), r))
            }
        };
        for r in 0..R {
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(*a[r].d.add(b)));
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[r]), acc[r]);
            if affine {
                acc[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(*a[r].s.add(b)), acc[r]);
            }
        }
    }
    acc
}

/// `q` with each code's fifth bit (bit 4) from the chunk's fifth-bit vector at `p` (bit `v`
/// of each byte for vector `v`).
#[inline(always)]
unsafe fn with_fifth(mut q: [__m256i; 8], p: *const u8) -> [__m256i; 8] {
    let h = _mm256_loadu_si256(p as *const __m256i);
    let bit = _mm256_set1_epi8(0x10);
    for (v, q) in q.iter_mut().enumerate() {
        // Bit v to bit 4 (16-bit shifts: what crosses a byte lands outside the mask).
        let at4 = match v {
            0 => _mm256_slli_epi16(h, 4),
            1 => _mm256_slli_epi16(h, 3),
            2 => _mm256_slli_epi16(h, 2),
            3 => _mm256_slli_epi16(h, 1),
            4 => h,
            5 => _mm256_srli_epi16(h, 1),
            6 => _mm256_srli_epi16(h, 2),
            _ => _mm256_srli_epi16(h, 3),
        };
        *q = _mm256_or_si256(*q, _mm256_and_si256(at4, bit));
    }
    q
}

/// The eight nibble code vectors of a 32-element chunk at `p` (vector `v`: elements
/// `4v..4v + 4` of each output).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> [__m256i; 8] {
    let low = _mm256_set1_epi8(0x0F);
    let x: [__m256i; 4] =
        std::array::from_fn(|c| _mm256_loadu_si256(p.add(32 * c) as *const __m256i));
    std::array::from_fn(|v| match v % 2 {
        0 => _mm256_and_si256(x[v / 2], low),
        _ => _mm256_and_si256(_mm256_srli_epi16(x[v / 2], 4), low),
    })
}

/// Byte `k` of each 32-bit lane of a vector, as `pshufb` indices: into bytes `to` of the
/// lane (the others zeroed).
const fn spread(k: usize, to: [bool; 4]) -> [u8; 32] {
    let mut m = [0x80u8; 32];
    let mut i = 0;
    while i < 32 {
        if to[i % 4] {
            m[i] = ((i % 16) / 4 * 4 + k) as u8;
        }
        i += 1;
    }
    m
}

/// Per byte `k`: into bytes 0 and 2 (an unsigned i16 pair), byte 0 (an unsigned i32), bytes
/// 1 and 3 (a signed i16 pair, after an arithmetic shift by 8) and byte 3 (a signed i32,
/// after a shift by 24).
static SPREAD: [[[u8; 32]; 4]; 4] = {
    let mut t = [[[0u8; 32]; 4]; 4];
    let to = [
        [true, false, true, false],
        [true, false, false, false],
        [false, true, false, true],
        [false, false, false, true],
    ];
    let mut k = 0;
    while k < 4 {
        let mut f = 0;
        while f < 4 {
            t[f][k] = spread(k, to[f]);
            f += 1;
        }
        k += 1;
    }
    t
};

#[inline(always)]
unsafe fn pick(x: __m256i, form: usize, k: usize) -> __m256i {
    _mm256_shuffle_epi8(
        x,
        _mm256_loadu_si256(SPREAD[form][k].as_ptr() as *const __m256i),
    )
}

/// Q4_K and Q5_K (`Q5`, with the fifth bits): per super-block of 256, d and dmin, the eight
/// 6-bit scales and minimums unpacked in lanes (32-bit masks and shifts over the packed
/// bytes, eight outputs at once), per sub-block of 32 the scaled lane sums, and the
/// minimums against the activation's 32-sums.
#[inline(always)]
unsafe fn q4_k<D: Dot, const Q5: bool, const R: usize>(c: Q8Call, a: [Act; R]) -> [__m256; R] {
    let (w, blocks) = (c.w, c.row_bytes / c.t.block_bytes());
    let bb: usize = if Q5 { 176 } else { 144 };
    let sign = _mm256_set1_ps(-0.0);
    let (six, low4, top2) = (
        _mm256_set1_epi32(0x3f3f_3f3f),
        _mm256_set1_epi32(0x0f0f_0f0f),
        _mm256_set1_epi32(0x0303_0303),
    );
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        let base = w.add(b * GROUP * bb);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(base as *const __m128i));
        let dmin = _mm256_cvtph_ps(_mm_loadu_si128(base.add(16) as *const __m128i));
        let word = |k: usize| _mm256_loadu_si256(base.add(32 + 32 * k) as *const __m256i);
        let (u0, u1, u2) = (word(0), word(1), word(2));
        let high =
            |x: __m256i| _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(x, 6), top2), 4);
        let sc = [
            _mm256_and_si256(u0, six),
            _mm256_or_si256(_mm256_and_si256(u2, low4), high(u0)),
        ];
        let mn = [
            _mm256_and_si256(u1, six),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), low4), high(u1)),
        ];
        let even = _mm256_set1_epi32(0x00FF_00FF);
        let mins = [
            _mm256_and_si256(mn[0], even),
            _mm256_srli_epi16(mn[0], 8),
            _mm256_and_si256(mn[1], even),
            _mm256_srli_epi16(mn[1], 8),
        ];
        let mut isum = [_mm256_setzero_si256(); R];
        for j in 0..8 {
            let at = base.add(128 + if Q5 { 160 } else { 128 } * j);
            let mut q = nibbles(at);
            if Q5 {
                q = with_fifth(q, at.add(128));
            }
            let (sc16, sc32) = (pick(sc[j / 4], 0, j % 4), pick(sc[j / 4], 1, j % 4));
            for r in 0..R {
                let act = a[r].qs.add(256 * b + 32 * j);
                let sum = if Q5 && D::SPLIT {
                    _mm256_add_epi32(
                        D::scaled(D::raw::<4>(&q, act), sc16, sc32),
                        D::scaled(D::raw::<4>(&q[4..], act.add(16)), sc16, sc32),
                    )
                } else {
                    D::scaled(D::raw::<8>(&q, act), sc16, sc32)
                };
                isum[r] = _mm256_add_epi32(isum[r], sum);
            }
        }
        for r in 0..R {
            // mins[h]: sub-blocks 4(h / 2) + h % 2 and + 2 of each lane, against the
            // activation's 32-sums of those sub-blocks (its pair word 8 + h).
            let pairs = a[r].pairs.add(PAIRS * b + 8);
            let mut imin = _mm256_setzero_si256();
            for (h, m) in mins.iter().enumerate() {
                let p = _mm256_set1_epi32(*pairs.add(h));
                imin = _mm256_add_epi32(imin, _mm256_madd_epi16(*m, p));
            }
            let da = _mm256_set1_ps(*a[r].d.add(b));
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            let neg = _mm256_xor_ps(_mm256_mul_ps(dmin, da), sign);
            acc[r] = _mm256_fmadd_ps(neg, _mm256_cvtepi32_ps(imin), acc[r]);
        }
    }
    acc
}

/// Q6_K: per super-block of 256, d and the sixteen i8 scales in lanes; per chunk of 32 the
/// six-bit codes (nibbles and top bits), per sub-block of 16 the scaled lane sums; the
/// codes' `− 32` through `32 · Σ sc_j · Σ_{i∈j} a`.
#[inline(always)]
unsafe fn q6_k<D: Dot, const R: usize>(c: Q8Call, a: [Act; R]) -> [__m256; R] {
    let (w, blocks) = (c.w, c.row_bytes / c.t.block_bytes());
    const BB: usize = 210;
    let top = _mm256_set1_epi8(0x30);
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        let base = w.add(b * GROUP * BB);
        let dw = _mm256_cvtph_ps(_mm_loadu_si128(base as *const __m128i));
        let scv: [__m256i; 4] =
            std::array::from_fn(|k| _mm256_loadu_si256(base.add(16 + 32 * k) as *const __m256i));
        let mut isum = [_mm256_setzero_si256(); R];
        for ch in 0..8 {
            let at = base.add(144 + 192 * ch);
            let mut q = nibbles(at);
            let hv = |h: usize| _mm256_loadu_si256(at.add(128 + 32 * h) as *const __m256i);
            let hi = [hv(0), hv(1)];
            for (v, q) in q.iter_mut().enumerate() {
                let x = hi[v / 4];
                let at4 = match v % 4 {
                    0 => _mm256_slli_epi16(x, 4),
                    1 => _mm256_slli_epi16(x, 2),
                    2 => x,
                    _ => _mm256_srli_epi16(x, 2),
                };
                *q = _mm256_or_si256(*q, _mm256_and_si256(at4, top));
            }
            for s in 0..2 {
                let j = 2 * ch + s;
                let sc16 = _mm256_srai_epi16(pick(scv[j / 4], 2, j % 4), 8);
                let sc32 = _mm256_srai_epi32(pick(scv[j / 4], 3, j % 4), 24);
                let q = &q[4 * s..4 * s + 4];
                for r in 0..R {
                    let act = a[r].qs.add(256 * b + 32 * ch + 16 * s);
                    let sum = if D::SPLIT {
                        _mm256_add_epi32(
                            D::scaled(D::raw::<2>(q, act), sc16, sc32),
                            D::scaled(D::raw::<2>(&q[2..], act.add(8)), sc16, sc32),
                        )
                    } else {
                        D::scaled(D::raw::<4>(q, act), sc16, sc32)
                    };
                    isum[r] = _mm256_add_epi32(isum[r], sum);
                }
            }
        }
        // Each lane's scales 4k..4k + 4 as signed i16 pairs: (4k, 4k + 2) in `sc16[2k]`,
        // (4k + 1, 4k + 3) in `sc16[2k + 1]`, against the activation's pair words 2k, 2k + 1.
        let sc16: [__m256i; 8] = std::array::from_fn(|h| match h % 2 {
            0 => _mm256_srai_epi16(_mm256_slli_epi16(scv[h / 2], 8), 8),
            _ => _mm256_srai_epi16(scv[h / 2], 8),
        });
        for r in 0..R {
            let pairs = a[r].pairs.add(PAIRS * b);
            let mut off = _mm256_setzero_si256();
            for (h, sc) in sc16.iter().enumerate() {
                let p = _mm256_set1_epi32(*pairs.add(h));
                off = _mm256_add_epi32(off, _mm256_madd_epi16(*sc, p));
            }
            let isum = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(off, 5));
            let da = _mm256_set1_ps(*a[r].d.add(b));
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum), acc[r]);
        }
    }
    acc
}
