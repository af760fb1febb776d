//! Thread-count resolution and the rayon pool the forward pass runs in.
//!
//! The count only partitions work (output rows and tiles, sequences × heads); it never
//! splits a reduction, so outputs are bit-identical for any count.

use crate::error::{InferError, Result};

/// An explicit count, else `KIN_INFER_THREADS`, else the number of logical CPUs.
pub fn resolve_threads(explicit: Option<usize>) -> Result<usize> {
    if let Some(n) = explicit {
        if n == 0 {
            return Err(InferError::Input("thread count must be at least 1".into()));
        }
        return Ok(n);
    }
    if let Ok(v) = std::env::var("KIN_INFER_THREADS") {
        if !v.trim().is_empty() {
            return match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(InferError::Input(format!(
                    "KIN_INFER_THREADS=`{v}` is not a positive integer"
                ))),
            };
        }
    }
    Ok(std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A dedicated pool of `n` threads.
pub fn build_pool(n: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("kin-infer-{i}"))
        .build()
        .map_err(|e| InferError::Threads(e.to_string()))
}
