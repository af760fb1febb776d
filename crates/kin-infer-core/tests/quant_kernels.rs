//! Block-quantized packed weights (ggml's Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, the K-quants, IQ4_NL):
//! the panels stay quantized and the GEMM dequantizes them (into f32 panel rows, or in
//! registers in a tier's direct decode kernel). The contract: every exact tier returns the
//! bits of the generic tier's f32 product over the reference-dequantized matrix, for any m
//! (decode's single row included), any n (partial last panels), with bias, across KC blocks,
//! across threads, and for panels packed by another tier.

use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::{for_tier, Tier, WeightFormat};

mod common;
use common::blocks::{blocks, random_rows, random_rows_with, Rng};
use common::{exact_tiers as tiers, pool, product};

fn dequantized(t: GgmlType, bytes: &[u8], rows: usize, k: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; rows * k];
    t.dequantize(bytes, &mut out);
    out
}

fn assert_bits(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.to_bits() == w.to_bits(),
            "{what}: differs at {i}: {g:e} vs {w:e}"
        );
    }
}

/// Every block type of the format table (a new row is tested here without a line added,
/// once [`scale_offsets`] knows where its scales are).
fn block_types() -> impl Iterator<Item = GgmlType> {
    GgmlType::ALL.into_iter().filter(|t| t.block_len() > 1)
}

fn check(t: GgmlType, m: usize, k: usize, n: usize, seed: u64, with_bias: bool) {
    check_with(t, m, k, n, seed, with_bias, false)
}

fn check_with(
    t: GgmlType,
    m: usize,
    k: usize,
    n: usize,
    seed: u64,
    with_bias: bool,
    extreme: bool,
) {
    let w = random_rows_with(t, n, k, seed, extreme);
    let wf = dequantized(t, &w, n, k);
    let mut r = Rng(seed.wrapping_mul(31) | 1);
    let a: Vec<f32> = (0..m * k).map(|_| r.f32()).collect();
    let bias: Vec<f32> = (0..n).map(|_| r.f32()).collect();
    let bias = with_bias.then_some(bias.as_slice());
    let gen = for_tier(Tier::Generic).unwrap();
    let want = product(&gen, &a, m, &gen.pack_rows(&wf, n, k, k), bias);
    for kern in tiers() {
        let q = kern.pack_weights(&[blocks(t, &w)], k).unwrap();
        assert_eq!(q.format(), WeightFormat::Quant(t));
        let padded_f32 = n.div_ceil(q.panel_width()) * q.panel_width() * k * 4;
        assert!(
            q.stored_bytes() * 3 < padded_f32,
            "{}: stays quantized: {} bytes, {padded_f32} as f32",
            t.name(),
            q.stored_bytes()
        );
        let what = format!("{} m={m} k={k} n={n} tier {}", t.name(), kern.tier().name());
        assert_bits(&what, &product(&kern, &a, m, &q, bias), &want);
    }
}

#[test]
fn every_block_type_equals_the_f32_product_over_its_dequantized_weights() {
    for (i, t) in block_types().enumerate() {
        let bl = t.block_len();
        // k: one block, several blocks across a KC boundary; n: partial panels, four-panel
        // decode groups and a remainder; m: decode's single row, a short and a long prompt.
        for (j, &(k, n)) in [(bl, 7), (bl * 3, 70), (bl * 11, 130)].iter().enumerate() {
            if bl == 256 && k > 768 {
                continue;
            }
            for (l, m) in [1usize, 3, 13].into_iter().enumerate() {
                check(t, m, k, n, (i * 100 + j * 10 + l) as u64 + 1, l != 1);
            }
        }
    }
}

/// The direct kernels' dequantization is exact for every finite scale (module doc of
/// `kernels/x86_quant.rs`), not only the small ones a quantizer writes: the f16 range's ends,
/// subnormals and zero, decode and prompt rows.
#[test]
fn extreme_finite_scales_stay_exact() {
    for (i, t) in block_types().enumerate() {
        let k = t.block_len() * 3;
        for m in [1usize, 5] {
            check_with(t, m, k, 70, 1000 + i as u64 * 7 + m as u64, m == 5, true);
        }
    }
}

#[test]
fn decode_rows_over_many_panels_and_k_blocks() {
    // A decoder's projection shapes: 576 → 1536 (k three KC blocks of 192), and 1536 → 576.
    for t in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
    ] {
        check(t, 1, 576, 1536, 5, false);
        check(t, 1, 1536, 576, 6, true);
        check(t, 2, 576, 192, 7, false);
    }
    // The K-quants with direct kernels: decode and prompt rows, four-panel groups with a
    // remainder, a partial panel, bias.
    for t in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        check(t, 1, 1024, 320, 8, false);
        check(t, 1, 768, 200, 9, true);
        check(t, 5, 512, 150, 10, true);
    }
}

/// Threads split tiles, never k, so the bits stay.
#[test]
fn threads_change_no_bits() {
    let (m, k, n) = (29, 512, 200);
    for t in [
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        let w = random_rows(t, n, k, 11);
        let wf = dequantized(t, &w, n, k);
        let a: Vec<f32> = {
            let mut r = Rng(99);
            (0..m * k).map(|_| r.f32()).collect()
        };
        let gen = for_tier(Tier::Generic).unwrap();
        for rows in [m, 1] {
            let want = product(&gen, &a, rows, &gen.pack_rows(&wf, n, k, k), None);
            for threads in [1, 3] {
                let pool = pool(threads);
                for kern in tiers() {
                    let q = kern.pack_weights(&[blocks(t, &w)], k).unwrap();
                    let got = pool.install(|| product(&kern, &a, rows, &q, None));
                    assert_bits(&format!("{} threads {threads}", t.name()), &got, &want);
                }
            }
        }
    }
}

/// Panels packed by one tier and used by another are repacked on use: same bits, and `get`
/// reads every element back as the reference dequantizes it.
#[test]
fn foreign_panel_widths_and_get() {
    for t in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q3_K,
    ] {
        let (k, n) = (t.block_len() * 3, 45);
        let w = random_rows(t, n, k, 21);
        let wf = dequantized(t, &w, n, k);
        let a: Vec<f32> = {
            let mut r = Rng(5);
            (0..4 * k).map(|_| r.f32()).collect()
        };
        let gen = for_tier(Tier::Generic).unwrap();
        let want = product(&gen, &a, 4, &gen.pack_rows(&wf, n, k, k), None);
        for packer in tiers() {
            let q = packer
                .pack_weights(
                    &[
                        blocks(t, &w[..20 * t.row_bytes(k).unwrap()]),
                        blocks(t, &w[20 * t.row_bytes(k).unwrap()..]),
                    ],
                    k,
                )
                .unwrap();
            for j in 0..n {
                for p in 0..k {
                    assert_eq!(
                        q.get(p, j).to_bits(),
                        wf[j * k + p].to_bits(),
                        "{} get({p}, {j})",
                        t.name()
                    );
                }
            }
            for user in tiers() {
                assert_bits(
                    &format!(
                        "{} packed by {} used by {}",
                        t.name(),
                        packer.tier().name(),
                        user.tier().name()
                    ),
                    &product(&user, &a, 4, &q, None),
                    &want,
                );
            }
        }
    }
}

#[test]
fn rows_that_are_not_whole_blocks_are_a_typed_error() {
    let gen = for_tier(Tier::Generic).unwrap();
    let e = gen
        .pack_weights(&[blocks(GgmlType::Q8_0, &[0u8; 36])], 48)
        .err()
        .unwrap();
    assert!(e.to_string().contains("whole blocks"), "{e}");
    let e = gen
        .pack_weights(&[blocks(GgmlType::Q8_0, &[0u8; 35])], 32)
        .err()
        .unwrap();
    assert!(e.to_string().contains("not whole rows"), "{e}");
}
