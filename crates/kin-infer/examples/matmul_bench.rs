//! GEMM throughput per available SIMD tier: f32 1024³ and the BERT-like shapes the engine runs
//! (m × k × n with B packed once, as the model does), plus small attention products.
//!
//! Threads: `KIN_INFER_THREADS` or rayon's default; best of N runs (`KIN_BENCH_REPS`, default
//! 7) so the number reflects the kernel, not a noisy neighbour. `KIN_BENCH_TIERS=avx512,...`
//! limits the tiers; the generic tier is skipped for the big shapes unless listed there (on
//! baseline x86-64 its `mul_add` is a software FMA, minutes per 1024³).
//! `KIN_BENCH_SHAPES=llama,1024` keeps the shapes whose label starts with one of the prefixes.
//! The `llama` shapes are the prefill products of scripts/bench-decode.py's model (128 prompt
//! rows; fused q/k/v 768 → 1280, o 768 → 768, fused gate/up 768 → 4096, down 2048 → 768).
//! `KIN_BENCH_COLD=1` cycles each product through enough copies of its weight matrix (≥ 512 MB)
//! that B comes from memory, not cache, as it does in a model's forward pass.
//! Prints one line per (tier, shape): `tier shape GFLOP/s`.

use kin_infer::kernels::{for_tier, Tier};
use std::time::Instant;

mod common;

/// m × k × n of one product.
type Dims = (usize, usize, usize);

fn main() {
    let (pool, reps) = common::pool_and_reps(0, 7);
    let wanted: Option<Vec<Tier>> = std::env::var("KIN_BENCH_TIERS")
        .ok()
        .map(|v| v.split(',').filter_map(Tier::parse).collect());
    println!("threads {}", pool.current_num_threads());
    // m × k × n per label prefix; a shape's label is `prefix mxkxn` (1024³'s is `1024^3`).
    let bert = [
        (512, 384, 384),
        (512, 384, 1536),
        (512, 1536, 384),
        (2048, 384, 1536),
        (2048, 1536, 384),
    ];
    let attn = [(128, 64, 128), (256, 32, 256), (64, 64, 64)];
    let llama = [
        (128, 768, 1280),
        (128, 768, 768),
        (128, 768, 4096),
        (128, 2048, 768),
    ];
    let families: [(&str, &[Dims]); 3] = [("bert", &bert), ("attn", &attn), ("llama", &llama)];
    let shapes: Vec<(usize, usize, usize, String)> = [(1024, 1024, 1024, "1024^3".to_string())]
        .into_iter()
        .chain(families.into_iter().flat_map(|(p, dims)| {
            dims.iter()
                .map(move |&(m, k, n)| (m, k, n, format!("{p} {m}x{k}x{n}")))
        }))
        .collect();
    let only: Option<Vec<String>> = std::env::var("KIN_BENCH_SHAPES")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    for tier in Tier::available_exact() {
        let listed = wanted.as_ref().map(|w| w.contains(&tier));
        if listed == Some(false) || (tier == Tier::Generic && listed.is_none()) {
            continue;
        }
        let kern = for_tier(tier).expect("available tier");
        for &(m, k, n, ref label) in &shapes {
            if let Some(only) = &only {
                if !only.iter().any(|p| label.starts_with(p.as_str())) {
                    continue;
                }
            }
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 1000) as f32 * 1e-3)
                .collect();
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 104729) % 997) as f32 * 1e-3)
                .collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
            let cold = std::env::var("KIN_BENCH_COLD").is_ok_and(|v| v == "1");
            let copies = if cold {
                (512usize << 20).div_ceil(4 * n * k)
            } else {
                1
            };
            let packs: Vec<_> = (0..copies).map(|_| kern.pack_rows(&w, n, k, k)).collect();
            let mut next = 0;
            let mut packed_at = |_: usize| {
                next = (next + 1) % copies;
                &packs[next]
            };
            let mut c = vec![0.0f32; m * n];
            // Small products are timed in batches so the clock resolution does not matter.
            let inner = (1usize << 28).div_ceil(m * n * k).max(copies);
            let mut best = f64::INFINITY;
            pool.install(|| {
                kern.matmul(&a, k, m, packed_at(0), Some(&bias), &mut c, n); // warm-up
                for _ in 0..reps {
                    let t = Instant::now();
                    for i in 0..inner {
                        kern.matmul(&a, k, m, packed_at(i), Some(&bias), &mut c, n);
                    }
                    best = best.min(t.elapsed().as_secs_f64() / inner as f64);
                }
            });
            let gflops = 2.0 * (m * n * k) as f64 / best / 1e9;
            let label = if cold {
                format!("{label} cold")
            } else {
                label.to_string()
            };
            println!("{:8} {:22} {:8.1} GFLOP/s", tier.name(), label, gflops);
        }
    }
}
