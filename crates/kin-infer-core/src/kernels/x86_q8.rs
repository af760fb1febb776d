//! The q8 numerics mode's kernel for x86-64 AVX2 (`q8_gemm.rs`'s `Q8Call` contract; the
//! AVX-512 tier runs it too): eight outputs at a time, one per f32 lane, each running the
//! generic twin's per-block sequence (`q8_dot.rs`) in its lane: `acc = fma(d_w·d_a, isum,
//! acc)`, then the minimum's step for the types with one.
//!
//! The integer sums are where the speed is: `vpmaddubsw` multiplies 32 unsigned weight
//! codes by 32 signed activation codes into 16 pair sums, `vpmaddwd` folds those into eight
//! i32s (with ones, or with a K-quant's sub-block scales), and a transposing reduction
//! (`hsum8`) turns the eight outputs' vectors into one vector of their eight block sums.
//! Every step is exact (no pair sum leaves i16: at most 2·128·127, Q8_0's magnitudes), so the
//! sums equal the twin's whatever the order. Offsets come out as sums of the activation:
//! `Σ (q − 8)·a = Σ q·a − 8·Σ a` (Q4_0, Q5_0: the activation's 16-code sums), Q6_K's `− 32`
//! per sub-block through its scales. Signed codes (Q8_0, IQ4_NL's levels) go through the
//! sign trick (`|w|` times `a` with `w`'s sign), as in ggml.
//!
//! Q2_K and Q3_K have no kernel here: they return false and run the twin.

use super::dequant::IQ4_NL_LEVELS;
use super::ggml::GgmlType;
use super::q8_act::QuantRow;
use super::q8_gemm::Q8Call;
use std::arch::x86_64::*;

/// How a type's block sums join the accumulator (`q8_dot.rs`'s three shapes).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Steps {
    /// `fma(d·d_a, isum, acc)`.
    Scale,
    /// Then `fma(m, s_a, acc)`.
    Affine,
    /// Then `fma(−(dmin·d_a), imin, acc)`.
    Minimum,
}

/// One weight type's AVX2 reading.
trait Kind {
    /// Bytes per block; where its f16 `d` and `m` / `dmin` are.
    const BB: usize;
    const D_AT: usize;
    const M_AT: usize;
    const STEPS: Steps;
    /// Subtracted as `OFFSET · Σ a` from a 32-block's sum (Q4_0's 8, Q5_0's 16).
    const OFFSET: i32 = 0;
    /// Per activation row `a[r]`, eight i32 lanes whose total is the block's `isum` (less
    /// `OFFSET · Σ a`): the block unpacked once for all `R` rows.
    ///
    /// # Safety
    /// `blk` holds a whole block; `b` is a block of every `a[r]`; AVX2.
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R];
    /// The block's `imin` ([`Steps::Minimum`]).
    fn imin(_blk: &[u8], _a: &QuantRow, _b: usize) -> i32 {
        0
    }
}

/// [`super::q8_gemm::Q8Kernel`] for AVX2.
///
/// # Safety
/// As [`Q8Call`]'s contract (at most eight rows, four activation rows), AVX2+FMA+F16C.
pub(crate) unsafe fn avx2(c: Q8Call) -> bool {
    if c.lanes {
        return super::x86_q8_lanes::avx2(c);
    }
    let Q8Call {
        t,
        w,
        row_bytes,
        cols,
        a,
        out,
        ldo,
        ..
    } = c;
    macro_rules! rows {
        ($k:ty) => {
            match a {
                [a0] => run::<$k, 1>(w, row_bytes, cols, [a0], out, ldo),
                [a0, a1] => run::<$k, 2>(w, row_bytes, cols, [a0, a1], out, ldo),
                [a0, a1, a2] => run::<$k, 3>(w, row_bytes, cols, [a0, a1, a2], out, ldo),
                [a0, a1, a2, a3] => run::<$k, 4>(w, row_bytes, cols, [a0, a1, a2, a3], out, ldo),
                _ => return false,
            }
        };
    }
    match t {
        GgmlType::Q8_0 => rows!(Q8_0),
        GgmlType::Q4_0 => rows!(Q4_0),
        GgmlType::Q4_1 => rows!(Q4_1),
        GgmlType::Q5_0 => rows!(Q5_0),
        GgmlType::Q5_1 => rows!(Q5_1),
        GgmlType::IQ4_NL => rows!(Iq4Nl),
        GgmlType::Q4_K => rows!(Q4K),
        GgmlType::Q5_K => rows!(Q5K),
        GgmlType::Q6_K => rows!(Q6K),
        _ => return false,
    }
    true
}

/// [`super::q8_gemm::Q8Kernel`] for the AVX-512 tier: VNNI's over the lane layout where the
/// CPU has it, else [`avx2`]'s.
///
/// # Safety
/// As [`avx2`].
pub(crate) unsafe fn avx512(c: Q8Call) -> bool {
    if c.lanes && std::arch::is_x86_feature_detected!("avx512vnni") {
        return super::x86_q8_lanes::vnni(c);
    }
    avx2(c)
}

/// The (at most eight) outputs of one interleaved group for `R` activation rows; a short
/// group repeats its last weight row in the spare lanes (computed, not stored). Each block's
/// scales are gathered once for all rows.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run<K: Kind, const R: usize>(
    w: *const u8,
    _row_bytes: usize,
    cols: usize,
    a: [&QuantRow; R],
    out: *mut f32,
    ldo: usize,
) {
    debug_assert!((1..=8).contains(&cols));
    let blocks = a[0].d.len();
    let sign = _mm256_set1_ps(-0.0);
    let mut acc = [_mm256_setzero_ps(); R];
    for b in 0..blocks {
        let blk = |l: usize| w.add((b * cols + l.min(cols - 1)) * K::BB);
        let sums: [[__m256i; R]; 8] = std::array::from_fn(|l| K::lanes::<R>(blk(l), &a, b));
        let dw = halves(std::array::from_fn(|l| blk(l).add(K::D_AT)));
        let mw = match K::STEPS {
            Steps::Scale => dw,
            _ => halves(std::array::from_fn(|l| blk(l).add(K::M_AT))),
        };
        let imin: [[i32; 8]; R] = match K::STEPS {
            Steps::Minimum => std::array::from_fn(|r| {
                std::array::from_fn(|l| K::imin(std::slice::from_raw_parts(blk(l), K::BB), a[r], b))
            }),
            _ => [[0; 8]; R],
        };
        for r in 0..R {
            let mut isum = hsum8(std::array::from_fn(|l| sums[l][r]));
            if K::OFFSET != 0 {
                let sa = a[r].bsums[2 * b] + a[r].bsums[2 * b + 1];
                isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(K::OFFSET * sa));
            }
            let da = _mm256_set1_ps(a[r].d[b]);
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(isum), acc[r]);
            match K::STEPS {
                Steps::Scale => {}
                Steps::Affine => {
                    acc[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a[r].s[b]), acc[r]);
                }
                Steps::Minimum => {
                    let im = _mm256_loadu_si256(imin[r].as_ptr() as *const __m256i);
                    let neg = _mm256_xor_ps(_mm256_mul_ps(mw, da), sign);
                    acc[r] = _mm256_fmadd_ps(neg, _mm256_cvtepi32_ps(im), acc[r]);
                }
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), *acc);
        std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add(r * ldo), cols);
    }
}

/// The eight f16 at `at[l]`, widened (exact).
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn halves(at: [*const u8; 8]) -> __m256 {
    let h: [u16; 8] = std::array::from_fn(|l| (at[l] as *const u16).read_unaligned());
    _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr() as *const __m128i))
}

/// `[Σ v0, Σ v1, …, Σ v7]`: each vector's eight i32s summed (exact integer adds).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn hsum8(v: [__m256i; 8]) -> __m256i {
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    // Each 128-bit half: outputs 0..3 (4..7) over that half's four i32s.
    let h0123 = _mm256_hadd_epi32(h01, h23);
    let h4567 = _mm256_hadd_epi32(h45, h67);
    let lo = _mm256_permute2x128_si256(h0123, h4567, 0x20);
    let hi = _mm256_permute2x128_si256(h0123, h4567, 0x31);
    _mm256_add_epi32(lo, hi)
}

/// 32 activation codes from element `e` of the row.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn act32(a: &QuantRow, e: usize) -> __m256i {
    _mm256_loadu_si256(a.qs.as_ptr().add(e) as *const __m256i)
}

/// `Σ u·s` of 32 unsigned and 32 signed bytes as eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn dot_us(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// `Σ w·s` of 32 signed bytes each (the sign trick: `|w|` times `s` with `w`'s sign).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn dot_ss(w: __m256i, s: __m256i) -> __m256i {
    dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(s, w))
}

/// A 32-block's 16 nibble bytes as 32 codes (elements 0..16 low nibbles, 16..32 high).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn nibbles32(p: *const u8) -> __m256i {
    let x = _mm_loadu_si128(p as *const __m128i);
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(x, 4), x),
        _mm256_set1_epi8(0x0F),
    )
}

/// The 32 bits of `x` as 32 bytes: 0x10 where the bit is set (a fifth code bit), else 0.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fifth_bits(x: u32) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(x as i32),
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    // Byte i of each eight keeps only bit i % 8 clear: all ones exactly when that bit is set.
    let probe = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    let set = _mm256_cmpeq_epi8(probe, _mm256_set1_epi8(-1));
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

struct Q8_0;
impl Kind for Q8_0 {
    const BB: usize = 34;
    const D_AT: usize = 0;
    const M_AT: usize = 0;
    const STEPS: Steps = Steps::Scale;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let w = _mm256_loadu_si256(blk.add(2) as *const __m256i);
        std::array::from_fn(|r| dot_ss(w, act32(a[r], b * 32)))
    }
}

struct Q4_0;
impl Kind for Q4_0 {
    const BB: usize = 18;
    const D_AT: usize = 0;
    const M_AT: usize = 0;
    const STEPS: Steps = Steps::Scale;
    const OFFSET: i32 = 8;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let q = nibbles32(blk.add(2));
        std::array::from_fn(|r| dot_us(q, act32(a[r], b * 32)))
    }
}

struct Q4_1;
impl Kind for Q4_1 {
    const BB: usize = 20;
    const D_AT: usize = 0;
    const M_AT: usize = 2;
    const STEPS: Steps = Steps::Affine;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let q = nibbles32(blk.add(4));
        std::array::from_fn(|r| dot_us(q, act32(a[r], b * 32)))
    }
}

struct Q5_0;
impl Kind for Q5_0 {
    const BB: usize = 22;
    const D_AT: usize = 0;
    const M_AT: usize = 0;
    const STEPS: Steps = Steps::Scale;
    const OFFSET: i32 = 16;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let qh = (blk.add(2) as *const u32).read_unaligned();
        let q = _mm256_or_si256(nibbles32(blk.add(6)), fifth_bits(qh));
        std::array::from_fn(|r| dot_us(q, act32(a[r], b * 32)))
    }
}

struct Q5_1;
impl Kind for Q5_1 {
    const BB: usize = 24;
    const D_AT: usize = 0;
    const M_AT: usize = 2;
    const STEPS: Steps = Steps::Affine;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let qh = (blk.add(4) as *const u32).read_unaligned();
        let q = _mm256_or_si256(nibbles32(blk.add(8)), fifth_bits(qh));
        std::array::from_fn(|r| dot_us(q, act32(a[r], b * 32)))
    }
}

struct Iq4Nl;
impl Kind for Iq4Nl {
    const BB: usize = 18;
    const D_AT: usize = 0;
    const M_AT: usize = 0;
    const STEPS: Steps = Steps::Scale;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let table = _mm_loadu_si128(IQ4_NL_LEVELS.as_ptr() as *const __m128i);
        let levels = _mm256_shuffle_epi8(_mm256_set_m128i(table, table), nibbles32(blk.add(2)));
        std::array::from_fn(|r| dot_ss(levels, act32(a[r], b * 32)))
    }
}

/// Q4_K / Q5_K's eight 6-bit sub-block scales and minimums (`dequant::scale_min`'s values),
/// unpacked four at a time from the 12 packed bytes with 32-bit masks and shifts (a shift
/// across bytes only moves bits the mask then drops). Called per block and row, once per
/// scalar `scale_min` it was more than half the Q4_K kernel's time.
#[inline(always)]
fn scales_mins(blk: &[u8]) -> ([u8; 8], [u8; 8]) {
    let word = |at: usize| u32::from_le_bytes([blk[at], blk[at + 1], blk[at + 2], blk[at + 3]]);
    let (u0, u1, u2) = (word(4), word(8), word(12));
    const SIX: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let sc_hi = (u2 & LOW4) | (((u0 >> 6) & TOP2) << 4);
    let mn_hi = ((u2 >> 4) & LOW4) | (((u1 >> 6) & TOP2) << 4);
    let join = |lo: u32, hi: u32| {
        let (l, h) = (lo.to_le_bytes(), hi.to_le_bytes());
        [l[0], l[1], l[2], l[3], h[0], h[1], h[2], h[3]]
    };
    (join(u0 & SIX, sc_hi), join(u1 & SIX, mn_hi))
}

/// `Σ_j m_j · Σ_{i∈j} a` over Q4_K / Q5_K's eight sub-blocks of 32.
#[inline(always)]
fn k4_imin(blk: &[u8], a: &QuantRow, b: usize) -> i32 {
    let (_, mn) = scales_mins(blk);
    let bs: &[i32; 16] = a.bsums[16 * b..16 * b + 16]
        .try_into()
        .expect("16 sums a block");
    let mut imin = 0i32;
    for j in 0..8 {
        imin += mn[j] as i32 * (bs[2 * j] + bs[2 * j + 1]);
    }
    imin
}

/// Q4_K / Q5_K: `Σ_j sc_j · Σ q·a`, sub-blocks `2c` and `2c + 1` the low and high nibbles of
/// the same 32 bytes, `high(j)` their fifth bits (Q5_K) or zero.
#[inline(always)]
unsafe fn k4_lanes<const R: usize>(
    blk: *const u8,
    qs: *const u8,
    a: &[&QuantRow; R],
    b: usize,
    high: impl Fn(usize) -> __m256i,
) -> [__m256i; R] {
    let (sc, _) = scales_mins(std::slice::from_raw_parts(blk, 16));
    let low = _mm256_set1_epi8(0x0F);
    let mut lanes = [_mm256_setzero_si256(); R];
    for c in 0..4 {
        let x = _mm256_loadu_si256(qs.add(32 * c) as *const __m256i);
        for (s, q) in [(0, x), (1, _mm256_srli_epi16(x, 4))] {
            let j = 2 * c + s;
            let q = _mm256_or_si256(_mm256_and_si256(q, low), high(j));
            let scale = _mm256_set1_epi16(sc[j] as i16);
            for r in 0..R {
                let pairs = _mm256_maddubs_epi16(q, act32(a[r], b * 256 + 32 * j));
                lanes[r] = _mm256_add_epi32(lanes[r], _mm256_madd_epi16(pairs, scale));
            }
        }
    }
    lanes
}

struct Q4K;
impl Kind for Q4K {
    const BB: usize = 144;
    const D_AT: usize = 0;
    const M_AT: usize = 2;
    const STEPS: Steps = Steps::Minimum;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        k4_lanes(blk, blk.add(16), a, b, |_| _mm256_setzero_si256())
    }
    fn imin(blk: &[u8], a: &QuantRow, b: usize) -> i32 {
        k4_imin(blk, a, b)
    }
}

struct Q5K;
impl Kind for Q5K {
    const BB: usize = 176;
    const D_AT: usize = 0;
    const M_AT: usize = 2;
    const STEPS: Steps = Steps::Minimum;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let qh = _mm256_loadu_si256(blk.add(16) as *const __m256i);
        let high = |j: usize| {
            let bit = _mm256_set1_epi8(1 << j);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
            _mm256_and_si256(set, _mm256_set1_epi8(0x10))
        };
        k4_lanes(blk, blk.add(48), a, b, high)
    }
    fn imin(blk: &[u8], a: &QuantRow, b: usize) -> i32 {
        k4_imin(blk, a, b)
    }
}

struct Q6K;
impl Kind for Q6K {
    const BB: usize = 210;
    const D_AT: usize = 208;
    const M_AT: usize = 208;
    const STEPS: Steps = Steps::Scale;
    #[inline(always)]
    unsafe fn lanes<const R: usize>(blk: *const u8, a: &[&QuantRow; R], b: usize) -> [__m256i; R] {
        let (ql, qh, sc) = (blk, blk.add(128), blk.add(192) as *const i8);
        let (low, two) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x03));
        let mut lanes = [_mm256_setzero_si256(); R];
        // Elements h·128 + s·32 + l: nibble s / 2 of ql[h·64 + (s % 2)·32 + l], bits 2s of
        // qh[h·32 + l]; sub-blocks of 16 (two per 32, each with its own scale).
        for h in 0..2 {
            let hi_bits = _mm256_loadu_si256(qh.add(32 * h) as *const __m256i);
            for s in 0..4 {
                let lo = _mm256_loadu_si256(ql.add(64 * h + 32 * (s % 2)) as *const __m256i);
                let lo = _mm256_and_si256(
                    _mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * (s as i32 / 2))),
                    low,
                );
                let hi = _mm256_and_si256(
                    _mm256_srl_epi16(hi_bits, _mm_cvtsi32_si128(2 * s as i32)),
                    two,
                );
                let q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                let e = 128 * h + 32 * s;
                let j = e / 16;
                let scale = _mm256_set_m128i(
                    _mm_set1_epi16(*sc.add(j + 1) as i16),
                    _mm_set1_epi16(*sc.add(j) as i16),
                );
                for (r, lanes) in lanes.iter_mut().enumerate() {
                    let pairs = _mm256_maddubs_epi16(q, act32(a[r], b * 256 + e));
                    *lanes = _mm256_add_epi32(*lanes, _mm256_madd_epi16(pairs, scale));
                }
            }
        }
        // The codes are q − 32: take 32 · Σ_j sc_j · Σ_{i∈j} a back out.
        let sc_lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(sc as *const __m128i));
        let sc_hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(sc.add(8) as *const __m128i));
        for (r, lanes) in lanes.iter_mut().enumerate() {
            let bs = a[r].bsums.as_ptr().add(16 * b);
            let off = _mm256_add_epi32(
                _mm256_mullo_epi32(sc_lo, _mm256_loadu_si256(bs as *const __m256i)),
                _mm256_mullo_epi32(sc_hi, _mm256_loadu_si256(bs.add(8) as *const __m256i)),
            );
            *lanes = _mm256_sub_epi32(*lanes, _mm256_slli_epi32(off, 5));
        }
        lanes
    }
}
