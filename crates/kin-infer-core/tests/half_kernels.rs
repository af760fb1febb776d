//! Half-precision packed weights: a bf16/f16 `PackedMatrix` keeps its storage type and the
//! micro-kernels widen it in registers. Widening is exact, so every tier must return the bits
//! of the generic tier's f32 packing of the widened weight (random shapes with odd tails,
//! strides, KC blocking, bias, threads, foreign panel widths). Unsupported tiers are skipped.

use kin_infer_core::kernels::{for_tier, Kernels, PackedMatrix, StoredRows, Tier, WeightFormat};
use proptest::prelude::*;

mod common;
use common::{assert_same, exact_tiers as tiers, fill, lcg, pool, run_matmul as run};

/// Random half bits: finite values of every exponent (incl. subnormals and ±0) with random
/// mantissas; exponents are kept moderate for bf16 so products stay finite.
fn half_bits(seed: u64, len: usize, bf16: bool) -> Vec<u16> {
    lcg(seed, len)
        .into_iter()
        .map(|s| {
            let sign = ((s & 1) as u16) << 15;
            if bf16 {
                // exponent 127 ± 40 (plus some subnormals/zeros), 7-bit mantissa
                let e = match (s >> 1) % 16 {
                    0 => 0,
                    _ => 87 + ((s >> 5) % 80) as u16,
                };
                sign | (e << 7) | ((s >> 12) as u16 & 0x7f)
            } else {
                // any finite f16: exponent 0..=30, 10-bit mantissa
                let e = ((s >> 1) % 31) as u16;
                sign | (e << 10) | ((s >> 12) as u16 & 0x3ff)
            }
        })
        .collect()
}

fn widen(bits: &[u16], bf16: bool) -> Vec<f32> {
    bits.iter()
        .map(|&b| {
            if bf16 {
                half::bf16::from_bits(b).to_f32()
            } else {
                half::f16::from_bits(b).to_f32()
            }
        })
        .collect()
}

fn half_format(bf16: bool) -> WeightFormat {
    if bf16 {
        WeightFormat::Bf16
    } else {
        WeightFormat::F16
    }
}

fn pack_half(kern: &Kernels, w: &[u16], n: usize, k: usize, bf16: bool) -> PackedMatrix {
    let m = kern
        .pack_weights(&[StoredRows::Half(half_format(bf16), w)], k)
        .unwrap();
    assert_eq!(m.n(), n);
    m
}

fn check(m: usize, k: usize, n: usize, pad: usize, seed: u64, with_bias: bool, bf16: bool) {
    let gen = for_tier(Tier::Generic).unwrap();
    let (lda, ldc) = (k + pad, n + pad);
    let a = fill(seed, m * lda);
    let wbits = half_bits(seed ^ 1, n * k, bf16);
    let wf = widen(&wbits, bf16);
    let bias = fill(seed ^ 2, n);
    let bias = with_bias.then_some(&bias[..]);
    // Reference: the existing f32 path on the widened weight, generic tier.
    let want = run(&gen, &a, lda, m, &gen.pack_rows(&wf, n, k, k), bias, ldc);
    let fmt = if bf16 {
        WeightFormat::Bf16
    } else {
        WeightFormat::F16
    };
    for kern in tiers() {
        let f32p = kern.pack_rows(&wf, n, k, k);
        assert_eq!(f32p.format(), WeightFormat::F32);
        let got = run(&kern, &a, lda, m, &f32p, bias, ldc);
        assert_same("f32 packing", kern.tier(), &got, &want);

        let hp = pack_half(&kern, &wbits, n, k, bf16);
        assert_eq!(hp.format(), fmt);
        assert_eq!((hp.k(), hp.n()), (k, n));
        for (p, j) in [(0, 0), (k - 1, n - 1), (k / 2, n / 3)] {
            assert_eq!(hp.get(p, j).to_bits(), wf[j * k + p].to_bits());
        }
        let got = run(&kern, &a, lda, m, &hp, bias, ldc);
        assert_same("half packing", kern.tier(), &got, &want);

        // Concat packing of two parts equals the single packing.
        let split = (n / 2) * k;
        let f = half_format(bf16);
        let parts = [
            StoredRows::Half(f, &wbits[..split]),
            StoredRows::Half(f, &wbits[split..]),
        ];
        let cat = kern.pack_weights(&parts, k).unwrap();
        let got = run(&kern, &a, lda, m, &cat, bias, ldc);
        assert_same("half concat packing", kern.tier(), &got, &want);

        // Packed by the generic tier (other panel width): repacked on use, same bits.
        let foreign = pack_half(&gen, &wbits, n, k, bf16);
        let got = run(&kern, &a, lda, m, &foreign, bias, ldc);
        assert_same("half foreign packing", kern.tier(), &got, &want);
        assert_eq!(foreign.format(), fmt);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn half_gemm_matches_f32_widened(
        m in 1usize..40, k in 1usize..300, n in 1usize..80, pad in 0usize..3,
        seed in any::<u64>(), with_bias in any::<bool>(), bf16 in any::<bool>(),
    ) {
        check(m, k, n, pad, seed, with_bias, bf16);
    }

    #[test]
    fn half_matvec_matches_f32_widened(
        k in 1usize..700, n in 1usize..100, seed in any::<u64>(), bf16 in any::<bool>(),
    ) {
        check(1, k, n, 0, seed, true, bf16);
    }
}

#[test]
fn half_gemm_fixed_shapes() {
    for bf16 in [true, false] {
        for &(m, k, n) in &[
            (1, 1, 1),
            (14, 256, 32),
            (15, 257, 33),
            (1, 513, 97),
            // one row over four-panel groups (decode), across KC blocks
            (1, 600, 256),
            (7, 33, 200),
        ] {
            check(m, k, n, 1, 42 + m as u64, true, bf16);
        }
    }
}

/// Large enough to run in parallel: threads split tiles, never k, so the bits stay.
#[test]
fn half_gemm_threads() {
    let (m, k, n) = (37, 300, 150);
    for bf16 in [true, false] {
        let a = fill(7, m * k);
        let wbits = half_bits(8, n * k, bf16);
        let wf = widen(&wbits, bf16);
        let gen = for_tier(Tier::Generic).unwrap();
        let want = run(&gen, &a, k, m, &gen.pack_rows(&wf, n, k, k), None, n);
        for threads in [1, 3] {
            let pool = pool(threads);
            for kern in tiers() {
                let hp = pack_half(&kern, &wbits, n, k, bf16);
                let got = pool.install(|| run(&kern, &a, k, m, &hp, None, n));
                assert_same("half threads", kern.tier(), &got, &want);
            }
        }
    }
}

/// Every f16 bit pattern widens like `half` (the kernels' and `get`'s widening agree).
#[test]
fn f16_all_values_widen_exactly() {
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    let k = 1;
    let n = bits.len();
    let a = [1.0f32];
    // fma(1, x, +0.0) is x except that -0 becomes +0; NaNs compare as NaN.
    let want: Vec<f32> = bits
        .iter()
        .map(|&b| 1.0f32.mul_add(half::f16::from_bits(b).to_f32(), 0.0))
        .collect();
    for kern in tiers() {
        let hp = pack_half(&kern, &bits, n, k, false);
        let got = run(&kern, &a, k, 1, &hp, None, n);
        assert_same("f16 all values", kern.tier(), &got, &want);
    }
}

/// The formats' scalar reference dequantizer (the one every tier's panel loads must match)
/// agrees with the `half` crate on every 16-bit pattern, and reads F32 bytes as stored.
#[test]
fn reference_dequantizer_matches_half_on_every_pattern() {
    let bits: Vec<u16> = (0..=u16::MAX).collect();
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    for (fmt, reference) in [
        (
            WeightFormat::Bf16,
            (|b| half::bf16::from_bits(b).to_f32()) as fn(u16) -> f32,
        ),
        (WeightFormat::F16, |b| half::f16::from_bits(b).to_f32()),
    ] {
        assert_eq!((fmt.block_len(), fmt.block_bytes()), (1, 2));
        let mut out = vec![0.0f32; bits.len()];
        fmt.dequantize(&bytes, &mut out);
        for (&b, &v) in bits.iter().zip(&out) {
            let want = reference(b);
            assert!(
                v.to_bits() == want.to_bits() || (v.is_nan() && want.is_nan()),
                "{} {b:#06x}: {v} vs {want}",
                fmt.name()
            );
            assert!(v.to_bits() == fmt.widen(b).to_bits() || v.is_nan());
        }
    }
    let vals = fill(7, 33);
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = vec![0.0f32; vals.len()];
    WeightFormat::F32.dequantize(&bytes, &mut out);
    assert_eq!(out, vals);
    assert_eq!(
        WeightFormat::ALL.map(WeightFormat::index),
        [0, 1, 2],
        "index is the position in ALL (every tier's kernel table is in this order)"
    );
}
