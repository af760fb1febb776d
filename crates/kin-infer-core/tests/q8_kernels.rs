//! The q8 numerics mode's product (`kernels/q8_gemm.rs`): activations quantized to 8-bit
//! blocks, integer block dots. The contract: every exact tier returns the generic twin's
//! bits, for any m (a row's outputs are the same alone or in a batch), any n, with bias,
//! across threads; the matrix stays as stored (no f32 copy); and the result is the exact
//! product of the dequantized weights and the quantized activations up to f32 rounding,
//! hence within the activation quantization's bound of the f32 product.

use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::{for_tier, Tier};

mod common;
use common::blocks::{blocks, random_rows_with, scale_offsets, Rng};
use common::{assert_same, exact_tiers as tiers, pool, product};

fn q8_types() -> impl Iterator<Item = GgmlType> {
    GgmlType::ALL
        .into_iter()
        .filter(|t| t.q8_activations().is_some())
}

/// Random activations, some rows with an outlier (a block whose scale one value sets).
fn activations(m: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng(seed | 1);
    (0..m * k)
        .map(|i| r.f32() * if i % 97 == 3 { 40.0 } else { 1.0 })
        .collect()
}

#[test]
fn every_tier_thread_count_and_batch_gives_the_twins_bits() {
    let gen = for_tier(Tier::Generic).unwrap();
    for (i, t) in q8_types().enumerate() {
        let bl = t.block_len();
        for (k, n, m) in [(bl, 5, 1), (bl * 3, 37, 6), (bl * 2, 130, 3)] {
            let seed = i as u64 * 31 + n as u64;
            let w = random_rows_with(t, n, k, seed, i % 3 == 0);
            let a = activations(m, k, seed + 7);
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.25 - 3.0).collect();
            let bias = (n % 2 == 1).then_some(bias.as_slice());
            let gw = gen.pack_weights_q8(&[blocks(t, &w)], k).unwrap();
            assert!(
                gw.is_q8() && gw.stored_bytes() == w.len(),
                "{}: kept as stored",
                t.name()
            );
            let want = product(&gen, &a, m, &gw, bias);
            for kern in tiers() {
                let q = kern.pack_weights_q8(&[blocks(t, &w)], k).unwrap();
                let what = format!("{} k={k} n={n} m={m}", t.name());
                assert_same(&what, kern.tier(), &product(&kern, &a, m, &q, bias), &want);
                let threaded = pool(3).install(|| product(&kern, &a, m, &q, bias));
                assert_same(&format!("{what} 3 threads"), kern.tier(), &threaded, &want);
                // Each row alone: the bits it has in the batch.
                for r in 0..m {
                    let alone = product(&kern, &a[r * k..(r + 1) * k], 1, &q, bias);
                    let what = format!("{what} row {r} alone");
                    assert_same(&what, kern.tier(), &alone, &want[r * n..(r + 1) * n]);
                }
            }
        }
    }
}

/// Codes at their extremes (every code byte 0x00, 0xFF, 0x80, 0x7F or 0x81) against
/// activations whose every code is ±127: the largest integer sums a kernel's narrow
/// accumulators (AVX2's i16 pair sums) must hold, still the twin's bits on every tier.
#[test]
fn extreme_codes_and_activations_give_the_twins_bits() {
    let gen = for_tier(Tier::Generic).unwrap();
    for t in q8_types() {
        let (k, n, m) = (t.block_len() * 2, 11, 3);
        let signs: [fn(usize) -> f32; 3] =
            [|_| 1.0, |_| -1.0, |i| if i % 3 == 0 { -1.0 } else { 1.0 }];
        let a: Vec<f32> = (0..m * k).map(|i| signs[i / k](i % k) * 0.75).collect();
        for fill in [0x00u8, 0xFF, 0x80, 0x7F, 0x81] {
            let mut w = vec![fill; n * t.row_bytes(k).unwrap()];
            for block in w.chunks_exact_mut(t.block_bytes()) {
                for &at in scale_offsets(t) {
                    block[at..at + 2]
                        .copy_from_slice(&half::f16::from_f32(0.01).to_bits().to_le_bytes());
                }
            }
            let want = product(
                &gen,
                &a,
                m,
                &gen.pack_weights_q8(&[blocks(t, &w)], k).unwrap(),
                None,
            );
            for kern in tiers() {
                let q = kern.pack_weights_q8(&[blocks(t, &w)], k).unwrap();
                let what = format!("{} codes {fill:#04x}", t.name());
                assert_same(&what, kern.tier(), &product(&kern, &a, m, &q, None), &want);
            }
        }
    }
}

/// The product is Σ w·(d_a·q_a) for the dequantized weights `w` and the quantized
/// activations: each activation is off by at most half its block's step `max|x| / 127`
/// (plus, for the 32-blocks, the f16 rounding of the step), so the output is within
/// `Σ |w_i| · error_i` of the f32 product, plus the f32 rounding of the sums.
#[test]
fn products_are_within_the_activation_quantization_bound() {
    let gen = for_tier(Tier::Generic).unwrap();
    for (i, t) in q8_types().enumerate() {
        let (bl, k, n, m) = (t.block_len(), t.block_len() * 4, 9, 3);
        let w = random_rows_with(t, n, k, 500 + i as u64, false);
        let wf = t.dequantize_to_vec(&w);
        let a = activations(m, k, 900 + i as u64);
        let q = gen.pack_weights_q8(&[blocks(t, &w)], k).unwrap();
        let got = product(&gen, &a, m, &q, None);
        for r in 0..m {
            let x = &a[r * k..(r + 1) * k];
            for j in 0..n {
                let wj = &wf[j * k..(j + 1) * k];
                let exact: f64 = wj.iter().zip(x).map(|(w, x)| *w as f64 * *x as f64).sum();
                let (mut bound, mut mag) = (0.0f64, 0.0f64);
                for (wb, xb) in wj.chunks(bl).zip(x.chunks(bl)) {
                    let step = xb.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64 / 127.0;
                    // Half a step, plus the f16 rounding of the 32-blocks' scale (at most
                    // 2^-11 of it) times a code of up to 127.
                    let per_value = step * (0.5 + 127.0 / 2048.0);
                    bound += wb.iter().map(|w| w.abs() as f64).sum::<f64>() * per_value;
                    mag += wb
                        .iter()
                        .zip(xb)
                        .map(|(w, x)| (*w as f64 * *x as f64).abs())
                        .sum::<f64>();
                }
                let tol = bound + 1e-5 * (mag + bound) + 1e-30;
                let g = got[r * n + j] as f64;
                assert!(
                    (g - exact).abs() <= tol,
                    "{} row {r} col {j}: {g} vs f32 {exact}, off {} > {tol}",
                    t.name(),
                    (g - exact).abs()
                );
            }
        }
    }
}

#[test]
fn formats_without_a_q8_pairing_are_a_typed_error() {
    let gen = for_tier(Tier::Generic).unwrap();
    let w = vec![0.5f32; 64];
    let err = gen
        .pack_weights_q8(&[kin_infer_core::kernels::StoredRows::F32(&w)], 32)
        .unwrap_err()
        .to_string();
    assert!(err.contains("q8 activations over F32 weights"), "{err}");
    let b = random_rows_with(GgmlType::Q4_0, 1, 64, 3, false);
    let err = gen
        .pack_weights_q8(&[blocks(GgmlType::Q4_0, &b)], 48)
        .unwrap_err()
        .to_string();
    assert!(err.contains("whole blocks of 32"), "{err}");
}
