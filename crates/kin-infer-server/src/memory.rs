//! The server's memory budget (`--memory-budget`): one pool of bytes that every running
//! generation reserves its KV cache (and its per-token bookkeeping) from before it is handed
//! to a scheduler, all models together. Each cache passes the engine's own fit check alone
//! (`resource::check_fits`), but `--max-concurrent` of them could not: without a shared
//! count a few concurrent long generations exhaust the machine and an allocation inside a
//! worker thread aborts the process. With it, a generation that does not fit waits (bounded)
//! or is refused with a 503, and one that could never fit is a 400.
//!
//! The default is derived once the models are loaded ([`default_budget`]): half of the memory
//! left, i.e. the smaller of the memory ceiling minus what the process holds then and what
//! the kernel reports available. The other half is headroom for what the budget does not
//! count: activations and scratch (bounded by `--prefill-chunk`, `--max-concurrent` and
//! `--max-batch-tokens`), request bodies (`--max-body`), the allocator, other processes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Bytes a generation holds per position beyond its KV cache: its token ids, its text and,
/// when streamed, the events waiting for a slow client (about 200 bytes of JSON each).
pub const PER_TOKEN_BYTES: u64 = 256;

/// Used when no memory size can be read (no /proc): small enough for any server machine.
pub const FALLBACK_BUDGET: u64 = 2 << 30;

/// One shared count of reserved bytes against a total.
#[derive(Debug)]
pub struct MemoryBudget {
    total: AtomicU64,
    used: AtomicU64,
    freed: Notify,
}

/// Bytes taken from a [`MemoryBudget`], given back when dropped (a job's `hold`: when its
/// generation has stopped and its cache is gone).
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
        self.budget.freed.notify_waiters();
    }
}

impl MemoryBudget {
    pub fn new(total: u64) -> Self {
        MemoryBudget {
            total: AtomicU64::new(total),
            used: AtomicU64::new(0),
            freed: Notify::new(),
        }
    }

    /// Sets the total (once the models are loaded, when the default is derived from them).
    pub fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::Release);
        self.freed.notify_waiters();
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Acquire)
    }

    /// Bytes reserved by running generations now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// `bytes` if they fit beside what is reserved now.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        let total = self.total();
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(bytes).filter(|&n| n <= total)
            })
            .ok()
            .map(|_| Reservation {
                budget: self.clone(),
                bytes,
            })
    }

    /// `bytes` once they fit, waiting at most `wait` for running generations to give theirs
    /// back; `None` when they did not fit in time (the caller answers 503).
    pub async fn reserve(self: &Arc<Self>, bytes: u64, wait: Duration) -> Option<Reservation> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the attempt, so a release between the two is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(r) = self.try_reserve(bytes) {
                return Some(r);
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return self.try_reserve(bytes);
            }
        }
    }
}

/// `VmRSS` of this process (Linux), in bytes.
pub fn resident_bytes() -> Option<u64> {
    status_kib("VmRSS:")
}

/// `VmHWM` (peak resident) of this process (Linux), in bytes.
pub fn peak_resident_bytes() -> Option<u64> {
    status_kib("VmHWM:")
}

fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    kib_line(&s, key)
}

fn kib_line(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

/// The default budget and how it was derived (for the startup log): half of the memory left
/// after loading, the smaller of (the memory ceiling minus this process's resident memory,
/// which holds the loaded weights) and what the kernel reports available.
pub fn default_budget() -> (u64, String) {
    let ceiling = kin_infer::resource::memory_ceiling();
    let resident = resident_bytes().unwrap_or(0);
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| kib_line(&m, "MemAvailable:"));
    let left = match (ceiling, available) {
        (Some((c, _)), Some(a)) => Some(c.saturating_sub(resident).min(a)),
        (Some((c, _)), None) => Some(c.saturating_sub(resident)),
        (None, a) => a,
    };
    let h = kin_infer::resource::human_bytes;
    match left {
        Some(left) => {
            let source = ceiling.map_or("available memory", |(_, s)| s);
            (
                left / 2,
                format!(
                    "half of the {} left after loading ({source} {}, {} resident, {} available)",
                    h(left),
                    ceiling.map_or_else(|| "unknown".into(), |(c, _)| h(c)),
                    h(resident),
                    available.map_or_else(|| "unknown".into(), h),
                ),
            )
        }
        None => (
            FALLBACK_BUDGET,
            format!("{} (no memory size could be read)", h(FALLBACK_BUDGET)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_count_against_the_total_and_give_back_on_drop() {
        let b = Arc::new(MemoryBudget::new(100));
        let r1 = b.try_reserve(60).expect("60 of 100");
        assert!(b.try_reserve(50).is_none(), "60 + 50 is over 100");
        let r2 = b.try_reserve(40).expect("60 + 40 fits exactly");
        assert_eq!(b.used(), 100);
        drop(r1);
        assert_eq!(b.used(), 40);
        assert!(
            b.try_reserve(u64::MAX).is_none(),
            "an overflowing sum never fits"
        );
        drop(r2);
        assert_eq!(b.used(), 0);
    }

    #[tokio::test]
    async fn a_waiting_reservation_gets_the_bytes_a_finished_one_gives_back() {
        let b = Arc::new(MemoryBudget::new(100));
        let r1 = b.try_reserve(80).unwrap();
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move { b.reserve(50, Duration::from_secs(10)).await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(r1);
        assert!(
            waiter.await.unwrap(),
            "the waiter got its bytes once 80 were freed"
        );
        let t0 = std::time::Instant::now();
        let _r = b.try_reserve(100).unwrap();
        assert!(b.reserve(1, Duration::from_millis(100)).await.is_none());
        assert!(
            t0.elapsed() >= Duration::from_millis(100),
            "it waited before refusing"
        );
    }

    #[test]
    fn kib_lines_parse() {
        let s = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t1024 kB\n";
        assert_eq!(kib_line(s, "VmRSS:"), Some(1 << 20));
        assert_eq!(kib_line(s, "VmHWM:"), Some(2 << 20));
        assert_eq!(kib_line(s, "VmSwap:"), None);
    }
}
