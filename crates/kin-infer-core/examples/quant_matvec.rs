//! Decode's matrix-vector product over block-quantized weights against the f32 one, per tier:
//! random `ROWS × K` blocks of Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K (finite f16 scales), packed by each SIMD
//! tier this CPU has (panels stay quantized; the tier's direct kernel dequantizes in
//! registers), timed against that tier's f32 product over the reference-dequantized matrix,
//! and checked to give the same bits; and the q8 numerics mode's product (8-bit activations,
//! integer block dots; its own bits) timed against the quantized f32 one.
//!
//! ```sh
//! cargo run --release -p kin-infer-core --example quant_matvec -- [ROWS] [K] [REPS] [M]
//! ```
//!
//! One thread (no rayon pool is installed, so the product runs on the caller). Default
//! 4096 × 4096 (16.8 M weights: 67 MB as f32, 9.4 MB as Q4_0). The issue's first prototype
//! of the Q4_0 kernel (its own panel code, since folded into `kernels/x86_quant.rs`) is in
//! git history as `examples/q4_decode_proto.rs` (commit e56d87a).

use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::{for_tier, StoredRows, Tier, WeightFormat};
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let n = args.first().copied().unwrap_or(4096);
    let k = args.get(1).copied().unwrap_or(4096);
    let reps = args.get(2).copied().unwrap_or(10);
    // M activation rows (1: decode's matrix-vector product; more: a prompt's).
    let m = args.get(3).copied().unwrap_or(1).max(1);
    if !k.is_multiple_of(256) || n == 0 {
        eprintln!("K must be a multiple of 256 (the K-quants' block) and ROWS at least 1");
        std::process::exit(2);
    }
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let a: Vec<f32> = (0..m * k)
        .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let time = |f: &mut dyn FnMut()| {
        f();
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let weights = (m * n * k) as f64;
    println!(
        "one thread, {n} x {k} ({:.1} M weights) times {m} row(s), best of {reps}",
        (n * k) as f64 / 1e6
    );
    // QUANT_MATVEC_ONLY=avx2,Q4_0 (tier and/or type names) runs only those, e.g. for `perf`.
    let only = std::env::var("QUANT_MATVEC_ONLY").ok();
    let mut all_equal = true;
    for t in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        let mut q = vec![0u8; n * t.row_bytes(k).expect("whole blocks")];
        for blk in q.chunks_exact_mut(t.block_bytes()) {
            for b in blk.iter_mut() {
                *b = next() as u8;
            }
            // The f16 fields (ggml-common.h): scales, and minimums of Q4_1 / Q4_K / Q5_K.
            let at: &[usize] = match t {
                GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
                GgmlType::Q6_K => &[208],
                _ => &[0],
            };
            for &f in at {
                let v = half::f16::from_f32(0.002 + (next() % 1000) as f32 * 2e-5);
                blk[f..f + 2].copy_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        let mut wf = vec![0.0f32; n * k];
        t.dequantize(&q, &mut wf);
        for tier in [Tier::Generic, Tier::Avx2, Tier::Avx512, Tier::Neon] {
            if !selected(only.as_deref(), tier, t) {
                continue;
            }
            let Ok(kern) = for_tier(tier) else { continue };
            let packed_f32 = kern.pack_rows(&wf, n, k, k);
            let rows = StoredRows::Blocks(WeightFormat::from_ggml(t), &q);
            let packed_q = kern.pack_weights(&[rows], k).expect("whole blocks");
            let (mut want, mut got) = (vec![0.0f32; m * n], vec![0.0f32; m * n]);
            let tf = time(&mut || kern.matmul(&a, k, m, &packed_f32, None, &mut want, n));
            let tq = time(&mut || kern.matmul(&a, k, m, &packed_q, None, &mut got, n));
            // The q8 numerics mode (8-bit activations; other bits, so only timed).
            let packed_q8 = kern.pack_weights_q8(&[rows], k).expect("whole blocks");
            let mut q8 = vec![0.0f32; m * n];
            let t8 = time(&mut || kern.matmul(&a, k, m, &packed_q8, None, &mut q8, n));
            let equal = want
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            all_equal &= equal;
            println!(
                "{:5} {:8}: f32 {:7.3} ms ({:5.2} G w/s) | quantized {:7.3} ms ({:5.2} G w/s, {:5.2} GB/s) | {:.2}x | bits equal: {equal} | q8 activations {:7.3} ms ({:5.2} GB/s) {:.2}x",
                t.name(),
                tier.name(),
                tf * 1e3,
                weights / tf / 1e9,
                tq * 1e3,
                weights / tq / 1e9,
                packed_q.stored_bytes() as f64 / tq / 1e9,
                tf / tq,
                t8 * 1e3,
                packed_q8.stored_bytes() as f64 / t8 / 1e9,
                tq / t8
            );
        }
    }
    if !all_equal {
        std::process::exit(1);
    }
}

/// Whether `QUANT_MATVEC_ONLY` (`only`) selects this tier and type: each is unrestricted unless
/// the list names some tier (type), and then must be one of them.
fn selected(only: Option<&str>, tier: Tier, t: GgmlType) -> bool {
    let Some(only) = only else { return true };
    let (tiers, types): (Vec<&str>, Vec<&str>) =
        only.split(',').partition(|n| Tier::parse(n).is_some());
    (tiers.is_empty() || tiers.iter().any(|n| Tier::parse(n) == Some(tier)))
        && (types.is_empty()
            || types
                .iter()
                .any(|n| n.trim().eq_ignore_ascii_case(t.name())))
}
