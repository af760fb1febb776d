//! Kernel tests: every SIMD tier bit-identical to the generic tier (property tests over random
//! shapes with odd tails and strides), GEMM against an f64 reference, invariance to threads and
//! to m, accuracy of our transcendentals against f64 references, special values.
//! Tiers this CPU cannot run are skipped; a line names the tiers tested.

use kin_infer_core::kernels::{for_tier, math, Kernels, PackedMatrix, Tier};
use proptest::prelude::*;

mod common;
use common::{assert_same, exact_tiers, fill, pool, run_matmul, same};

/// The generic tier and every other exact tier this CPU runs.
fn tiers() -> (Kernels, Vec<Kernels>) {
    let simd = exact_tiers()
        .into_iter()
        .filter(|k| k.tier() != Tier::Generic)
        .collect();
    (for_tier(Tier::Generic).unwrap(), simd)
}

/// One GEMM case on every tier, with A and C strides and both packings.
fn check_gemm(m: usize, k: usize, n: usize, pad: usize, seed: u64, with_bias: bool) {
    let (gen, simd) = tiers();
    let lda = k + pad;
    let ldc = n + pad;
    let a = fill(seed, m * lda);
    let w = fill(seed ^ 1, n * k); // n × k, torch Linear layout
    let bias = fill(seed ^ 2, n);
    let bias = with_bias.then_some(&bias[..]);
    let want = run_matmul(&gen, &a, lda, m, &gen.pack_rows(&w, n, k, k), bias, ldc);
    // Transposed copy for pack_cols: the same B.
    let mut bt = vec![0.0f32; k * n];
    for p in 0..k {
        for j in 0..n {
            bt[p * n + j] = w[j * k + p];
        }
    }
    let cols = run_matmul(&gen, &a, lda, m, &gen.pack_cols(&bt, k, n, n), bias, ldc);
    assert_same("pack_cols", Tier::Generic, &cols, &want);
    for kern in &simd {
        let got = run_matmul(kern, &a, lda, m, &kern.pack_rows(&w, n, k, k), bias, ldc);
        assert_same("matmul", kern.tier(), &got, &want);
        let got = run_matmul(kern, &a, lda, m, &kern.pack_cols(&bt, k, n, n), bias, ldc);
        assert_same("matmul(pack_cols)", kern.tier(), &got, &want);
        // A matrix packed by another tier (other panel width) must give the same bits.
        let foreign = gen.pack_rows(&w, n, k, k);
        let got = run_matmul(kern, &a, lda, m, &foreign, bias, ldc);
        assert_same("matmul(foreign packing)", kern.tier(), &got, &want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn gemm_tiers_match_generic(m in 1usize..40, k in 0usize..70, n in 1usize..70,
                                pad in 0usize..3, seed in any::<u64>(), bias in any::<bool>()) {
        check_gemm(m, k, n, pad, seed, bias);
    }

    #[test]
    fn reductions_match_generic(len in 0usize..100, seed in any::<u64>()) {
        let (gen, simd) = tiers();
        let x = fill(seed, len);
        let y = fill(seed ^ 7, len);
        for kern in &simd {
            let t = kern.tier();
            assert_same("sum", t, &[kern.sum(&x)], &[gen.sum(&x)]);
            assert_same("dot", t, &[kern.dot(&x, &y)], &[gen.dot(&x, &y)]);
            assert_same("max", t, &[kern.max(&x)], &[gen.max(&x)]);
        }
        // The canonical max ignores a NaN in any lane, main part or tail.
        if len > 0 {
            let mut x = x;
            x[seed as usize % len] = f32::NAN;
            for kern in &simd {
                assert_same("max with a NaN", kern.tier(), &[kern.max(&x)], &[gen.max(&x)]);
            }
        }
    }

    #[test]
    fn unpacked_matmul_equals_the_packed_gemm(m in 1usize..20, k in 1usize..70, n in 1usize..90, pad in 0usize..5, seed in any::<u64>()) {
        let (gen, simd) = tiers();
        let (lda, ldb, ldc) = (k + pad, n + 2 * pad, n + pad);
        let a = fill(seed, m * lda);
        let b = fill(seed ^ 9, k * ldb);
        for kern in std::iter::once(&gen).chain(&simd) {
            // The reference: b packed as the GEMM's right operand.
            let packed = kern.pack_cols(&b, k, n, ldb);
            let mut want = vec![0.0; m * n];
            kern.matmul(&a, lda, m, &packed, None, &mut want, n);
            let mut got = vec![f32::NAN; m * ldc];
            kern.matmul_unpacked(&a, lda, m, k, &b, ldb, n, &mut got, ldc);
            let got: Vec<f32> = got.chunks(ldc).flat_map(|r| r[..n].to_vec()).collect();
            assert_same("matmul_unpacked", kern.tier(), &got, &want);
        }
    }

    #[test]
    fn gemv_matches_generic_and_the_gemm_order(k in 1usize..80, n in 1usize..150, pad in 0usize..9, seed in any::<u64>()) {
        let (gen, simd) = tiers();
        let ldb = n + pad;
        let a = fill(seed, k);
        let b = fill(seed ^ 5, k * ldb);
        let mut want = vec![0.0; n];
        gen.gemv(&a, &b, ldb, &mut want);
        // The GEMM's order: each output accumulates p = 0, 1, ... with FMA from 0.0.
        for (j, w) in want.iter().enumerate() {
            let r = (0..k).fold(0.0f32, |acc, p| a[p].mul_add(b[p * ldb + j], acc));
            prop_assert!(same(*w, r), "generic gemv out {j}: {w} vs {r}");
        }
        for kern in &simd {
            let mut got = vec![f32::NAN; n];
            kern.gemv(&a, &b, ldb, &mut got);
            assert_same("gemv", kern.tier(), &got, &want);
        }
    }

    #[test]
    fn row_kernels_match_generic(len in 1usize..100, seed in any::<u64>(), spread in 0.1f32..40.0) {
        let (gen, simd) = tiers();
        let x: Vec<f32> = fill(seed, len).iter().map(|v| v * spread).collect();
        let w = fill(seed ^ 3, len);
        let b = fill(seed ^ 4, len);
        type RowOp = fn(&Kernels, &mut [f32], &[f32], &[f32]);
        let ops: [(&str, RowOp); 13] = [
            ("layer_norm", |k, x, w, b| k.layer_norm(x, w, b, 1e-12)),
            ("softmax", |k, x, _, _| k.softmax(x)),
            ("softmax_scaled", |k, x, _, _| k.softmax_scaled(x, 0.125)),
            // The fused form is bit for bit `scale` then `softmax`, on every tier.
            ("scale+softmax", |k, x, _, _| {
                let mut y = x.to_vec();
                k.softmax_scaled(&mut y, 0.37);
                k.scale(x, 0.37);
                k.softmax(x);
                let same_bits = x.iter().zip(&y).all(|(a, b)| same(*a, *b));
                assert!(same_bits, "fused softmax_scaled differs from the composite");
            }),
            ("gelu_erf", |k, x, _, _| k.gelu_erf(x)),
            ("gelu_tanh", |k, x, _, _| k.gelu_tanh(x)),
            ("silu", |k, x, _, _| k.silu(x)),
            ("exp", |k, x, _, _| k.exp_inplace(x)),
            ("tanh", |k, x, _, _| k.tanh_inplace(x)),
            ("scale", |k, x, _, _| k.scale(x, 0.3)),
            ("add", |k, x, w, _| k.add(x, w)),
            ("axpy", |k, x, w, _| k.axpy(x, -0.7, w)),
            ("layer_norm(eps=1e-5)", |k, x, w, b| k.layer_norm(x, w, b, 1e-5)),
        ];
        for (name, op) in ops {
            let mut want = x.clone();
            op(&gen, &mut want, &w, &b);
            for kern in &simd {
                let mut got = x.clone();
                op(kern, &mut got, &w, &b);
                assert_same(name, kern.tier(), &got, &want);
            }
        }
    }
}

#[test]
fn gemm_tiers_match_generic_larger_shapes() {
    // Crosses KC blocks (k > 256), several row/column blocks, parallel tasks, edge tiles.
    for &(m, k, n) in &[
        (150, 700, 100),
        (37, 513, 65),
        (200, 64, 200),
        (3, 1536, 40),
        // One row (decode): the four-panel row kernels, across KC blocks, with a remainder
        // of panels and a narrow last panel.
        (1, 700, 256),
        (1, 513, 200),
        (1, 300, 1000),
    ] {
        check_gemm(m, k, n, 1, (m * k * n) as u64, true);
    }
}

#[test]
fn gemm_k_zero_gives_bias() {
    let (gen, simd) = tiers();
    let bias = [1.5f32, -0.0, 3.0];
    for kern in std::iter::once(&gen).chain(&simd) {
        let b = kern.pack_rows(&[], 3, 0, 0);
        let mut c = vec![9.0f32; 6];
        kern.matmul(&[], 0, 2, &b, Some(&bias), &mut c, 3);
        // 0.0 + bias: -0.0 becomes +0.0, exactly as the generic formula says.
        assert_eq!(c.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), {
            let row = [1.5f32, 0.0, 3.0].map(f32::to_bits);
            [row, row].concat()
        });
        kern.matmul(&[], 0, 2, &b, None, &mut c, 3);
        assert!(c.iter().all(|v| v.to_bits() == 0));
    }
}

#[test]
fn gemm_matches_f64_reference() {
    let (gen, simd) = tiers();
    let (m, k, n) = (33, 300, 47);
    let a = fill(11, m * k);
    let w = fill(12, n * k);
    let bias = fill(13, n);
    for kern in std::iter::once(&gen).chain(&simd) {
        let c = run_matmul(kern, &a, k, m, &kern.pack_rows(&w, n, k, k), Some(&bias), n);
        for i in 0..m {
            for j in 0..n {
                let mut r = bias[j] as f64;
                let mut mag = bias[j].abs() as f64;
                for p in 0..k {
                    r += a[i * k + p] as f64 * w[j * k + p] as f64;
                    mag += (a[i * k + p] as f64 * w[j * k + p] as f64).abs();
                }
                let err = (c[i * n + j] as f64 - r).abs();
                assert!(
                    err <= 1e-6 * mag + 1e-6,
                    "({i},{j}) {} vs {r}",
                    c[i * n + j]
                );
            }
        }
    }
}

#[test]
fn gemm_same_bits_with_1_and_2_threads_and_row_alone() {
    let (gen, simd) = tiers();
    let (m, k, n) = (301, 384, 200);
    let a = fill(21, m * k);
    let w = fill(22, n * k);
    let bias = fill(23, n);
    for kern in std::iter::once(&gen).chain(&simd) {
        let b = kern.pack_rows(&w, n, k, k);
        let c1 = pool(1).install(|| run_matmul(kern, &a, k, m, &b, Some(&bias), n));
        let c2 = pool(2).install(|| run_matmul(kern, &a, k, m, &b, Some(&bias), n));
        assert_same("2 threads vs 1", kern.tier(), &c2, &c1);
        for &row in &[0usize, 13, 150, 300] {
            let alone = run_matmul(kern, &a[row * k..], k, 1, &b, Some(&bias), n);
            assert_same(
                "row alone",
                kern.tier(),
                &alone[..n],
                &c1[row * n..(row + 1) * n],
            );
        }
        // A window of rows starting mid-tile.
        let part = run_matmul(kern, &a[7 * k..], k, 20, &b, Some(&bias), n);
        assert_same("row window", kern.tier(), &part, &c1[7 * n..27 * n]);
    }
}

#[test]
fn special_values_match_generic() {
    let (gen, simd) = tiers();
    let specials = [
        0.0f32,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        1e-40,
        -1e-40,
        1e-45,
        88.72,
        88.73,
        -87.3,
        -103.9,
        -104.5,
        0.927_734_4,
        -0.927_734_4,
        0.55,
        -0.55,
        3.9,
        -9.0,
        1e20,
        -1e20,
    ];
    // Repeat so the values land in vector bodies and in tails of every width.
    let x: Vec<f32> = specials
        .iter()
        .cycle()
        .take(specials.len() * 3 + 5)
        .copied()
        .collect();
    for kern in &simd {
        for (name, f) in [
            ("exp", Kernels::exp_inplace as fn(&Kernels, &mut [f32])),
            ("tanh", Kernels::tanh_inplace),
            ("gelu_erf", Kernels::gelu_erf),
            ("gelu_tanh", Kernels::gelu_tanh),
            ("silu", Kernels::silu),
            ("softmax", Kernels::softmax),
        ] {
            let mut want = x.clone();
            f(&gen, &mut want);
            let mut got = x.clone();
            f(kern, &mut got);
            assert_same(name, kern.tier(), &got, &want);
        }
        // Scalar references equal the vector kernels element by element.
        let mut got = x.clone();
        kern.exp_inplace(&mut got);
        let want: Vec<f32> = x.iter().map(|v| math::exp(*v)).collect();
        assert_same("exp vs math::exp", kern.tier(), &got, &want);
    }
}

#[test]
fn exp_special_values() {
    assert!(math::exp(f32::NAN).is_nan());
    assert_eq!(math::exp(f32::NEG_INFINITY), 0.0);
    assert_eq!(math::exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(math::exp(100.0), f32::INFINITY);
    assert_eq!(math::exp(-200.0), 0.0);
    assert_eq!(math::exp(0.0), 1.0);
    assert_eq!(math::exp(-0.0), 1.0);
    // Subnormal results are scaled, not flushed: e^-100 ≈ 3.72e-44.
    let e = math::exp(-100.0);
    assert!(e > 0.0 && e < f32::MIN_POSITIVE);
    assert!(((e as f64) - (-100f64).exp()).abs() <= 1.5e-45);
    assert_eq!(math::exp(1e-40), 1.0);
}

#[test]
fn erf_tanh_special_values() {
    for f in [math::erf, math::tanh] {
        assert!(f(f32::NAN).is_nan());
        assert_eq!(f(f32::INFINITY), 1.0);
        assert_eq!(f(f32::NEG_INFINITY), -1.0);
        assert_eq!(f(1e30), 1.0);
        assert_eq!(f(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits());
        // Tiny and subnormal inputs: f(x) ≈ c·x, never NaN, sign kept.
        assert!(f(1e-40) >= 0.0 && f(-1e-40) <= 0.0 && f(1e-40) < 1e-39);
    }
}

/// Regression: the small-|x| tanh branch `x + x³·P(x²)` rounded tanh(-0) to +0 (found by
/// `erf_tanh_special_values`); fixed with an exact copysign.
#[test]
fn regression_tanh_negative_zero_keeps_sign() {
    assert_eq!(math::tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    let (_, simd) = tiers();
    for kern in &simd {
        let mut x = [-0.0f32; 19];
        kern.tanh_inplace(&mut x);
        assert!(x.iter().all(|v| v.to_bits() == (-0.0f32).to_bits()));
    }
}

#[test]
fn softmax_special_values() {
    let k = for_tier(Tier::Generic).unwrap();
    let mut x = [1.0f32, f32::NEG_INFINITY, 3.0, -1e30];
    k.softmax(&mut x);
    assert_eq!(x[1], 0.0);
    assert_eq!(x[3], 0.0);
    assert!((x[0] + x[2] - 1.0).abs() < 1e-6);
    let mut big = [1e30f32, 1e30, -1e30];
    k.softmax(&mut big);
    assert_eq!(big, [0.5, 0.5, 0.0]);
    let mut nan = [1.0f32, f32::NAN, 2.0];
    k.softmax(&mut nan);
    assert!(nan.iter().all(|v| v.is_nan()));
    let mut empty: [f32; 0] = [];
    k.softmax(&mut empty);
}

/// Error of `got` against `want` in units of the f32 spacing at `want` (subnormal spacing
/// below the normal range, so tiny results are judged absolutely).
fn ulps(got: f32, want: f64) -> f64 {
    let a = want.abs().max(f32::MIN_POSITIVE as f64);
    let spacing = 2f64.powi(a.log2().floor() as i32 - 23);
    (got as f64 - want).abs() / spacing
}

/// erf in f64: 2/√π · e^{-x²} · Σ 2ⁿ x^{2n+1} / (1·3·…·(2n+1)) — every term positive, so no
/// cancellation (std has no f64 erf).
fn erf_f64(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum();
    }
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs() {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

/// Max ulp error of `f` over `n` evenly spaced points in [lo, hi] plus random points.
fn max_ulps(f: fn(f32) -> f32, r: fn(f64) -> f64, lo: f32, hi: f32, n: usize) -> (f64, f32) {
    let mut worst = (0.0, 0.0);
    let xs = (0..n)
        .map(|i| lo + (hi - lo) * (i as f32 / (n - 1) as f32))
        .chain(
            fill(5, n)
                .into_iter()
                .map(|v| lo + (hi - lo) * (v + 2.0) / 4.0),
        );
    for x in xs {
        let u = ulps(f(x), r(x as f64));
        if u > worst.0 {
            worst = (u, x);
        }
    }
    worst
}

/// Each transcendental within its ulp bound of the f64 reference over a range (400k points
/// over the useful domain, denser near 0 where relative error is hardest).
#[test]
fn transcendentals_within_their_ulp_bounds() {
    type Case = (
        &'static str,
        fn(f32) -> f32,
        fn(f64) -> f64,
        f32,
        f32,
        usize,
        f64,
    );
    let cases: [Case; 6] = [
        ("exp", math::exp, f64::exp, -103.0, 88.7, 400_000, 2.0),
        ("exp near 0", math::exp, f64::exp, -1.0, 1.0, 200_000, 2.0),
        ("erf", math::erf, erf_f64, -5.0, 5.0, 400_000, 2.0),
        ("erf near 0", math::erf, erf_f64, -1e-3, 1e-3, 10_000, 2.0),
        ("tanh", math::tanh, f64::tanh, -10.0, 10.0, 400_000, 3.0),
        ("tanh small", math::tanh, f64::tanh, -0.6, 0.6, 200_000, 2.0),
    ];
    for (name, f, reference, lo, hi, n, bound) in cases {
        let (u, x) = max_ulps(f, reference, lo, hi, n);
        eprintln!("{name}: max {u:.2} ulp at {x}");
        assert!(u <= bound, "{name}: {u} ulp at {x}");
    }
}

#[test]
fn erf_absolute_error_below_1e_6() {
    for i in 0..100_000 {
        let x = -6.0 + 12.0 * i as f32 / 100_000.0;
        let err = (math::erf(x) as f64 - erf_f64(x as f64)).abs();
        assert!(err < 1e-6, "erf({x}): abs err {err}");
    }
}

#[test]
fn activations_accuracy() {
    let gelu_erf = |x: f64| 0.5 * x * (1.0 + erf_f64(x / std::f64::consts::SQRT_2));
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let gelu_tanh = |x: f64| 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh());
    let silu = |x: f64| x / (1.0 + (-x).exp());
    for i in 0..20_000 {
        let x = -12.0 + 24.0 * i as f32 / 20_000.0;
        let xd = x as f64;
        for (name, got, want) in [
            ("gelu_erf", math::gelu_erf(x), gelu_erf(xd)),
            ("gelu_tanh", math::gelu_tanh(x), gelu_tanh(xd)),
            ("silu", math::silu(x), silu(xd)),
        ] {
            let err = (got as f64 - want).abs();
            assert!(
                err <= 2e-6 * want.abs() + 1e-7,
                "{name}({x}) = {got}, want {want}"
            );
        }
    }
}

#[test]
fn tier_parse_and_unsupported_tier_error() {
    for t in Tier::ALL {
        assert_eq!(Tier::parse(t.name()), Some(t));
        assert_eq!(
            Tier::parse(&format!(" {} ", t.name().to_uppercase())),
            Some(t)
        );
    }
    assert_eq!(Tier::parse("sse9"), None);
    assert!(Tier::available().contains(&Tier::Generic));
    for t in Tier::ALL {
        match for_tier(t) {
            Ok(k) => assert!(t.supported() && k.tier() == t),
            Err(e) => {
                assert!(!t.supported());
                assert!(e.to_string().contains(t.name()), "{e}");
            }
        }
    }
    // The process-wide selection is a supported tier (or the forced one).
    let k = kin_infer_core::kernels::kernels().unwrap();
    assert!(k.tier().supported());
}

/// Packing into a reused buffer (attention's per-head keys and values) gives the panels of a
/// fresh packing, whatever size the buffer last held, on every tier.
#[test]
fn packing_into_a_reused_buffer_matches_a_fresh_packing() {
    let (_, all) = tiers();
    for k in &all {
        let mut rows_buf = PackedMatrix::empty();
        let mut cols_buf = PackedMatrix::empty();
        for (n, kk, ld) in [
            (42, 32, 96),
            (5, 3, 7),
            (64, 16, 16),
            (1, 1, 1),
            (33, 40, 41),
            (0, 4, 4),
        ] {
            let w = fill((n * 31 + kk) as u64, n.max(1) * ld + kk);
            let fresh = k.pack_rows(&w, n, kk, ld);
            k.pack_rows_into(&mut rows_buf, &w, n, kk, ld);
            let b = fill((n * 17 + kk) as u64, kk.max(1) * ld + n);
            let fresh_c = k.pack_cols(&b, kk, n.min(ld), ld);
            k.pack_cols_into(&mut cols_buf, &b, kk, n.min(ld), ld);
            for (f, r) in [(&fresh, &rows_buf), (&fresh_c, &cols_buf)] {
                assert_eq!(
                    (f.k(), f.n(), f.panel_width()),
                    (r.k(), r.n(), r.panel_width())
                );
                for p in 0..f.k() {
                    for j in 0..f.n() {
                        assert_eq!(
                            f.get(p, j).to_bits(),
                            r.get(p, j).to_bits(),
                            "{:?}",
                            k.tier()
                        );
                    }
                }
            }
            // The padding columns are zero too: the GEMM over both gives the same bits.
            let a = fill(3, 3 * kk.max(1));
            let (mut c1, mut c2) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
            k.matmul(&a, kk, 3, &fresh, None, &mut c1, n);
            k.matmul(&a, kk, 3, &rows_buf, None, &mut c2, n);
            assert_eq!(c1, c2);
        }
    }
}
