//! Thread-count resolution and the rayon pool the forward pass runs in.
//!
//! The count only partitions work (output rows and tiles, sequences × heads); it never
//! splits a reduction, so outputs are bit-identical for any count.

use crate::error::{InferError, Result};

/// The most threads a pool may have: 8 per logical CPU, and never fewer than 64 (so that a
/// determinism test can oversubscribe a small machine). Past that a pool only costs memory
/// and start-up time (a million threads took 70 s to spawn before failing), so a larger
/// count is refused rather than attempted.
pub fn max_threads() -> usize {
    (8 * logical_cpus()).max(64)
}

fn logical_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// An explicit count, else `KIN_INFER_THREADS`, else the number of logical CPUs; at most
/// [`max_threads`].
pub fn resolve_threads(explicit: Option<usize>) -> Result<usize> {
    let (n, what) = match explicit {
        Some(n) => (n, "the thread count".to_string()),
        None => match std::env::var("KIN_INFER_THREADS") {
            Ok(v) if !v.trim().is_empty() => match v.trim().parse::<usize>() {
                Ok(n) => (n, format!("KIN_INFER_THREADS={n}")),
                Err(_) => {
                    return Err(InferError::Input(format!(
                        "KIN_INFER_THREADS=`{v}` is not a positive integer"
                    )))
                }
            },
            _ => return Ok(logical_cpus()),
        },
    };
    check_threads(n, &what)
}

fn check_threads(n: usize, what: &str) -> Result<usize> {
    let max = max_threads();
    if n == 0 {
        return Err(InferError::Input(format!("{what} must be at least 1")));
    }
    if n > max {
        return Err(InferError::Input(format!(
            "{what} is {n}; this machine allows at most {max} ({} logical CPUs × 8, at least 64)",
            logical_cpus()
        )));
    }
    Ok(n)
}

/// A dedicated pool of `n` threads (at most [`max_threads`]).
pub fn build_pool(n: usize) -> Result<rayon::ThreadPool> {
    check_threads(n, "the thread count")?;
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("kin-infer-{i}"))
        .build()
        .map_err(|e| InferError::Threads(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_past_the_cap_are_refused_before_any_thread_is_spawned() {
        let max = max_threads();
        assert!(max >= 64);
        assert_eq!(resolve_threads(Some(max)).unwrap(), max);
        let e = resolve_threads(Some(1_000_000)).unwrap_err().to_string();
        assert!(e.contains("1000000") && e.contains(&max.to_string()), "{e}");
        assert!(build_pool(1_000_000).is_err());
        let e = resolve_threads(Some(0)).unwrap_err().to_string();
        assert!(e.contains("at least 1"), "{e}");
    }
}
