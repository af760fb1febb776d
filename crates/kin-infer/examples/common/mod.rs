//! What every benchmark example reads from the environment, written once: the thread count
//! (`KIN_INFER_THREADS`) and the repetitions (`KIN_BENCH_REPS`), and the rayon pool sized by it.
//! Not an example itself (Cargo builds only `examples/*.rs` and `examples/*/main.rs`).

/// `name` parsed as a whole number, or `default` when unset or unparsable.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The pool of `KIN_INFER_THREADS` threads (`default_threads` when unset; 0 = rayon's default)
/// and `KIN_BENCH_REPS` (`default_reps` when unset).
pub fn pool_and_reps(default_threads: usize, default_reps: usize) -> (rayon::ThreadPool, usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(env_usize("KIN_INFER_THREADS", default_threads))
        .build()
        .expect("thread pool");
    (pool, env_usize("KIN_BENCH_REPS", default_reps))
}
