//! What the kernel test files share: the tiers to test, the deterministic inputs and the
//! bit-for-bit comparison. Each test binary uses a part of it.
#![allow(dead_code)]

pub mod blocks;

use kin_infer_core::kernels::{for_tier, Kernels, PackedMatrix, Tier};

/// Every tier this CPU runs whose contract is bit-identity with the generic tier (the generic
/// tier included; SSE, without FMA, is held to a tolerance elsewhere). Says once which.
pub fn exact_tiers() -> Vec<Kernels> {
    let all: Vec<Kernels> = Tier::ALL
        .into_iter()
        .filter(|t| t.exact())
        .filter_map(|t| for_tier(t).ok())
        .collect();
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        let names: Vec<_> = all.iter().map(|k| k.tier().name()).collect();
        eprintln!("tiers tested: {names:?}");
    });
    all
}

/// Deterministic pseudo-random u64 stream (an LCG: proptest picks the seed, shrinking stays
/// cheap), 48 bits per value.
pub fn lcg(seed: u64, len: usize) -> Vec<u64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s >> 16
        })
        .collect()
}

/// Deterministic pseudo-random values in [-2, 2).
pub fn fill(seed: u64, len: usize) -> Vec<f32> {
    lcg(seed, len)
        .into_iter()
        .map(|s| ((s >> 24) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0)
        .collect()
}

pub fn same(a: f32, b: f32) -> bool {
    // NaN payloads are not part of the contract (x86 and ARM propagate them differently).
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `got` (from `tier`) equals `want` bit for bit.
pub fn assert_same(what: &str, tier: Tier, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            same(*g, *w),
            "{what}: tier {} differs at {i}: {g:e} ({:#x}) vs {w:e} ({:#x})",
            tier.name(),
            g.to_bits(),
            w.to_bits()
        );
    }
}

/// `a` (`m` rows, `lda` apart) times the packed `b`, with `bias`, into a fresh NaN-filled
/// output with rows `ldc` apart (so an unwritten element shows).
pub fn run_matmul(
    kern: &Kernels,
    a: &[f32],
    lda: usize,
    m: usize,
    b: &PackedMatrix,
    bias: Option<&[f32]>,
    ldc: usize,
) -> Vec<f32> {
    let mut c = vec![f32::NAN; m.max(1) * ldc];
    kern.matmul(a, lda, m, b, bias, &mut c, ldc);
    c
}

/// A rayon pool of `threads` threads.
pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// `a · b` (+ bias) for the `m` rows of `a` through `kern`, C prefilled with NaN so an
/// unwritten output shows.
pub fn product(
    kern: &Kernels,
    a: &[f32],
    m: usize,
    b: &PackedMatrix,
    bias: Option<&[f32]>,
) -> Vec<f32> {
    let (k, n) = (b.k(), b.n());
    let mut c = vec![f32::NAN; m * n];
    kern.matmul(a, k, m, b, bias, &mut c, n);
    c
}
