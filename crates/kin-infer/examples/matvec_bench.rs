//! Decode's matrix-vector products (m = 1..4 rows) over f32 and bf16 panels: GB/s of weights
//! streamed, for a set of matrices larger than the caches (as a decoder's layers are) and for
//! one matrix that stays in cache. Compare against a memcpy bound measured in the same run.
//!
//! `KIN_INFER_THREADS` (default 1), `KIN_BENCH_REPS` (default 5). Prints one line per case.

use kin_infer::kernels::{kernels, StoredRows, WeightFormat};
use std::time::Instant;

mod common;

fn main() {
    let (pool, reps) = common::pool_and_reps(1, 5);
    let k = kernels().expect("kernels");
    let (n, kk) = (2048usize, 768usize);
    let w: Vec<f32> = (0..n * kk)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3)
        .collect();
    let bits: Vec<u16> = w.iter().map(|v| (v.to_bits() >> 16) as u16).collect();
    // 64 matrices of 2048 x 768: 400 MB of f32 panels, far past the caches.
    let count = 64;
    let f32s: Vec<_> = (0..count).map(|_| k.pack_rows(&w, n, kk, kk)).collect();
    let halves: Vec<_> = (0..count)
        .map(|_| {
            k.pack_weights(&[StoredRows::Half(WeightFormat::Bf16, &bits)], kk)
                .expect("whole rows")
        })
        .collect();
    let mut buf = vec![0u8; 256 << 20];
    let src = vec![1u8; 256 << 20];
    let mut copy = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        buf.copy_from_slice(&src);
        copy = copy.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&buf);
    println!(
        "tier {} threads {} memcpy {:.1} GB/s (read + write)",
        k.tier().name(),
        pool.current_num_threads(),
        2.0 * (256 << 20) as f64 / copy / 1e9
    );
    for m in [1usize, 2, 4] {
        let a: Vec<f32> = (0..m * kk).map(|i| (i % 13) as f32 * 0.1).collect();
        let mut c = vec![0.0f32; m * n];
        for (label, bytes, stream) in [("f32", 4usize, true), ("bf16", 2, true)] {
            let mut best = f64::MAX;
            pool.install(|| {
                for _ in 0..reps {
                    let t = Instant::now();
                    for i in 0..count {
                        if stream && bytes == 4 {
                            k.matmul(&a, kk, m, &f32s[i], None, &mut c, n);
                        } else {
                            k.matmul(&a, kk, m, &halves[i], None, &mut c, n);
                        }
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
            });
            let gb = (count * n * kk * bytes) as f64 / best / 1e9;
            println!(
                "m {m} {label:5} streamed {gb:6.1} GB/s ({:.3} ms per matrix)",
                best * 1e3 / count as f64
            );
        }
        for (label, hot_f32) in [("f32", true), ("bf16", false)] {
            let mut best = f64::MAX;
            pool.install(|| {
                for _ in 0..reps {
                    let t = Instant::now();
                    for _ in 0..count {
                        if hot_f32 {
                            k.matmul(&a, kk, m, &f32s[0], None, &mut c, n);
                        } else {
                            k.matmul(&a, kk, m, &halves[0], None, &mut c, n);
                        }
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
            });
            let bytes = if hot_f32 { 4 } else { 2 };
            let gb = (count * n * kk * bytes) as f64 / best / 1e9;
            println!("m {m} {label:5} in cache {gb:6.1} GB/s");
        }
    }
}
