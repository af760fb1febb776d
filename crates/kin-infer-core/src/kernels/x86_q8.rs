//! The q8 numerics mode's kernel for x86-64 AVX2 (`q8_gemm.rs`'s [`Q8Kernel`] contract):
//! eight outputs at a time, one per f32 lane, each running the generic twin's per-block
//! sequence (`q8_dot.rs`) in its lane: `acc = fma(d_w·d_a, isum, acc)`.
//!
//! The integer sums are where the speed is: `vpmaddubsw` multiplies 32 unsigned weight
//! codes by 32 signed activation codes into 16 pair sums, `vpmaddwd` with ones folds those
//! into eight i32s, and a transposing reduction (`hsum8`) turns the eight outputs' vectors
//! into one vector of their eight block sums. Every step is exact (no pair sum exceeds
//! i16: 2·128·127 for Q8_0, 2·15·127 for a nibble), so the sums
//! equal the twin's whatever the order. Q4_0's offset is taken out once per block:
//! `Σ (q − 8)·a = Σ q·a − 8·Σ a` (the activation's 16-code sums). Q8_0's signed codes go
//! through the sign trick (`|w|` times `a` with `w`'s sign), as in ggml.
//!
//! Types without a kernel here return false and run the twin.

use super::ggml::GgmlType;
use super::q8_act::QuantRow;
use std::arch::x86_64::*;

/// [`super::q8_gemm::Q8Kernel`] for AVX2: Q8_0 and Q4_0.
///
/// # Safety
/// As the contract: `cols` rows of `row_bytes` at `w`, `cols` floats at `out`, AVX2+FMA+F16C.
pub(crate) unsafe fn avx2(
    t: GgmlType,
    w: *const u8,
    row_bytes: usize,
    cols: usize,
    a: &QuantRow,
    out: *mut f32,
) -> bool {
    match t {
        GgmlType::Q8_0 => run::<true>(w, row_bytes, cols, a, out),
        GgmlType::Q4_0 => run::<false>(w, row_bytes, cols, a, out),
        _ => return false,
    }
    true
}

/// Eight outputs at a time; a last short group repeats its last row in the spare lanes
/// (computed, not stored). `Q8`: Q8_0 (34-byte blocks), else Q4_0 (18).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run<const Q8: bool>(
    w: *const u8,
    row_bytes: usize,
    cols: usize,
    a: &QuantRow,
    out: *mut f32,
) {
    let bb = if Q8 { 34 } else { 18 };
    let blocks = a.d.len();
    let ones = _mm256_set1_epi16(1);
    let low = _mm256_set1_epi8(0x0F);
    let mut c0 = 0;
    while c0 < cols {
        let nc = (cols - c0).min(8);
        let rows: [*const u8; 8] = std::array::from_fn(|l| w.add((c0 + l.min(nc - 1)) * row_bytes));
        let mut acc = _mm256_setzero_ps();
        for b in 0..blocks {
            let qa = _mm256_loadu_si256(a.qs.as_ptr().add(b * 32) as *const __m256i);
            let mut scales = [0u16; 8];
            let sums: [__m256i; 8] = std::array::from_fn(|l| {
                let blk = rows[l].add(b * bb);
                scales[l] = (blk as *const u16).read_unaligned();
                let pairs = if Q8 {
                    let wq = _mm256_loadu_si256(blk.add(2) as *const __m256i);
                    _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(qa, wq))
                } else {
                    let x = _mm_loadu_si128(blk.add(2) as *const __m128i);
                    let q = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
                    _mm256_maddubs_epi16(_mm256_and_si256(q, low), qa)
                };
                _mm256_madd_epi16(pairs, ones)
            });
            let mut isum = hsum8(sums);
            if !Q8 {
                let sa = a.bsums[2 * b] + a.bsums[2 * b + 1];
                isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * sa));
            }
            let dw = _mm256_cvtph_ps(_mm_loadu_si128(scales.as_ptr() as *const __m128i));
            let d = _mm256_mul_ps(dw, _mm256_set1_ps(a.d[b]));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
        }
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
        std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add(c0), nc);
        c0 += 8;
    }
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
