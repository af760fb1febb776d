//! The two activation × activation products of attention (`q·kᵀ` and `p·v`), with neither
//! operand packed: `c[i][j] = Σ_p a[i][p] · b[p][j]` over contiguous rows of `b`.
//!
//! Every element starts from 0.0 and accumulates p = 0, 1, … in order, each step a separate
//! IEEE multiply then add (never fused), so the result does not depend on the register
//! blocking or vector width: the same source is compiled once per x86-64 tier
//! (`#[target_feature]`) and picked from the kernel table's tier, and all give the same bits
//! (tested below). kin-infer's GEMM would need its B operand packed (an allocation per call);
//! this keeps `forward` allocation-free.

use kin_infer::kernels::Kernels;

/// `(a, lda, m, k, b, ldb, n, c, ldc)`.
pub type SmallGemm = fn(&[f32], usize, usize, usize, &[f32], usize, usize, &mut [f32], usize);

const R: usize = 4;
const L: usize = 16;

/// One `ROWS × w` tile (`w ≤ L`) at rows `i0..`, columns `j0..`; lanes past `w` compute on
/// zero padding and are dropped.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn tile<const ROWS: usize>(
    a: &[f32],
    lda: usize,
    i0: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    j0: usize,
    w: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let mut acc = [[0f32; L]; ROWS];
    let arows: [&[f32]; ROWS] = core::array::from_fn(|r| &a[(i0 + r) * lda..(i0 + r) * lda + k]);
    for p in 0..k {
        let mut bp = [0f32; L];
        if w == L {
            bp.copy_from_slice(&b[p * ldb + j0..p * ldb + j0 + L]);
        } else {
            bp[..w].copy_from_slice(&b[p * ldb + j0..p * ldb + j0 + w]);
        }
        for r in 0..ROWS {
            let av = arows[r][p];
            for l in 0..L {
                acc[r][l] += av * bp[l];
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        c[(i0 + r) * ldc + j0..(i0 + r) * ldc + j0 + w].copy_from_slice(&acc[..w]);
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn body(
    a: &[f32],
    lda: usize,
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(a.len() >= (m - 1) * lda + k && c.len() >= (m - 1) * ldc + n);
    assert!(k == 0 || b.len() >= (k - 1) * ldb + n);
    let mut j0 = 0;
    while j0 < n {
        let w = L.min(n - j0);
        let mut i0 = 0;
        while i0 + R <= m {
            tile::<R>(a, lda, i0, k, b, ldb, j0, w, c, ldc);
            i0 += R;
        }
        while i0 < m {
            tile::<1>(a, lda, i0, k, b, ldb, j0, w, c, ldc);
            i0 += 1;
        }
        j0 += L;
    }
}

#[allow(clippy::too_many_arguments)]
fn gemm_baseline(
    a: &[f32],
    lda: usize,
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    body(a, lda, m, k, b, ldb, n, c, ldc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_avx2_inner(
    a: &[f32],
    lda: usize,
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    body(a, lda, m, k, b, ldb, n, c, ldc)
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn gemm_avx2(
    a: &[f32],
    lda: usize,
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    // SAFETY: selected only for the AVX2 / AVX-512 tiers, whose detection requires AVX2.
    unsafe { gemm_avx2_inner(a, lda, m, k, b, ldb, n, c, ldc) }
}

/// AVX-512 tile: `ROWS` rows × 16 columns in registers; tails through lane masks (the masked
/// lanes load 0.0 and are not stored).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile512<const ROWS: usize>(
    a: *const f32,
    lda: usize,
    k: usize,
    b: *const f32,
    ldb: usize,
    mask: u16,
    c: *mut f32,
    ldc: usize,
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); ROWS];
    for p in 0..k {
        let bv = _mm512_maskz_loadu_ps(mask, b.add(p * ldb));
        for (r, acc) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(*a.add(r * lda + p));
            *acc = _mm512_add_ps(*acc, _mm512_mul_ps(av, bv));
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        _mm512_mask_storeu_ps(c.add(r * ldc), mask, *acc);
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn gemm_avx512(
    a: &[f32],
    lda: usize,
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    n: usize,
    c: &mut [f32],
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    // These bounds make every pointer access below in range.
    assert!(a.len() >= (m - 1) * lda + k && c.len() >= (m - 1) * ldc + n);
    assert!(k == 0 || b.len() >= (k - 1) * ldb + n);
    const RB: usize = 8;
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    let mut j0 = 0;
    while j0 < n {
        let w = L.min(n - j0);
        let mask: u16 = if w == L { u16::MAX } else { (1u16 << w) - 1 };
        let mut i0 = 0;
        // SAFETY: selected only for the AVX-512 tier (detected AVX-512F); rows i0..i0+ROWS < m,
        // columns j0..j0+w ≤ n and p < k stay inside the slices checked above.
        unsafe {
            while i0 + RB <= m {
                tile512::<RB>(
                    ap.add(i0 * lda),
                    lda,
                    k,
                    bp.add(j0),
                    ldb,
                    mask,
                    cp.add(i0 * ldc + j0),
                    ldc,
                );
                i0 += RB;
            }
            while i0 < m {
                tile512::<1>(
                    ap.add(i0 * lda),
                    lda,
                    k,
                    bp.add(j0),
                    ldb,
                    mask,
                    cp.add(i0 * ldc + j0),
                    ldc,
                );
                i0 += 1;
            }
        }
        j0 += L;
    }
}

/// The version for `k`'s tier (aarch64's baseline already has NEON).
pub fn for_kernels(k: &Kernels) -> SmallGemm {
    #[cfg(target_arch = "x86_64")]
    {
        use kin_infer::kernels::Tier;
        match k.tier() {
            Tier::Avx512 => return gemm_avx512,
            Tier::Avx2 => return gemm_avx2,
            _ => {}
        }
    }
    let _ = k;
    gemm_baseline
}

#[cfg(test)]
mod tests {
    use super::*;
    use kin_infer::kernels::Tier;

    #[test]
    fn every_version_gives_the_naive_bits() {
        for (m, k, n) in [
            (1, 1, 1),
            (5, 7, 3),
            (10, 32, 10),
            (42, 32, 42),
            (9, 2, 33),
            (4, 16, 16),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
            let mut want = vec![0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0f32;
                    for p in 0..k {
                        acc += a[i * k + p] * b[p * n + j];
                    }
                    want[i * n + j] = acc;
                }
            }
            for t in Tier::available() {
                let kn = kin_infer::kernels::for_tier(t).unwrap();
                let mut c = vec![f32::NAN; m * n];
                for_kernels(&kn)(&a, k, m, k, &b, n, n, &mut c, n);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&c), bits(&want), "{t:?} {m}x{k}x{n}");
            }
        }
    }
}
