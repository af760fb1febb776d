//! Memory read bandwidth with the engine's thread count: a 1 GiB buffer summed in parallel
//! (each thread streams its own contiguous part), best of `KIN_BENCH_REPS` (default 5). The
//! bound for decode, which reads every weight once per token and writes almost nothing.
//! `KIN_INFER_THREADS` (default: rayon's). Prints `read GB/s` and `copy GB/s (read + write)`.

use rayon::prelude::*;
use std::time::Instant;

mod common;

fn main() {
    let (pool, reps) = common::pool_and_reps(0, 5);
    let n = (1usize << 30) / 8;
    let src: Vec<u64> = (0..n as u64).collect();
    let mut dst = vec![0u64; n];
    let parts = pool.current_num_threads();
    let chunk = n.div_ceil(parts);
    let (mut read, mut copy) = (f64::MAX, f64::MAX);
    pool.install(|| {
        for _ in 0..reps {
            let t = Instant::now();
            let s: u64 = src
                .par_chunks(chunk)
                .map(|c| c.iter().fold(0u64, |a, &x| a.wrapping_add(x)))
                .reduce(|| 0, u64::wrapping_add);
            read = read.min(t.elapsed().as_secs_f64());
            std::hint::black_box(s);
            let t = Instant::now();
            dst.par_chunks_mut(chunk)
                .zip(src.par_chunks(chunk))
                .for_each(|(d, s)| d.copy_from_slice(s));
            copy = copy.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&dst);
        }
    });
    let bytes = (n * 8) as f64;
    println!("threads {parts}");
    println!("read {:.2} GB/s", bytes / read / 1e9);
    println!("copy {:.2} GB/s", 2.0 * bytes / copy / 1e9);
}
