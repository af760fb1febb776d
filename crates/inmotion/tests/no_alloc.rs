//! After load and one warm-up window, classifying allocates nothing (every buffer lives in the
//! model's scratch; kin-infer's GEMM keeps its A-panel scratch per thread). Its own test binary,
//! because the counting allocator is process-wide: an allocation on any thread counts, so a
//! classify that handed work to another thread could not hide it.
//!
//! Regression (issue 10): the test used to build a one-thread global rayon pool first. The
//! classify never used it, but the pool's worker thread started asynchronously, and on a busy
//! machine its start-up allocations (4 of them, on the worker, not the test thread) landed
//! inside the measured window: "t_jepa_q4 allocated, left 3677 right 3674", once in two CI runs.
//! Now no pool exists (kin-infer's GEMM forks only inside one, and `inmotion-infer` builds none
//! for one thread). That alone still failed under load, 4 times in 24 runs with both cores
//! busy: libtest's own main thread, scheduled late after spawning the test thread, made its
//! first allocations (its bookkeeping, its channel's first blocking receive) inside round 0.
//! So this binary has no libtest harness (`harness = false`): `main` runs on the only thread
//! there is, every allocation in the process is ours, and the measurement is repeated enough
//! to show it is stable (24 parallel runs on 2 loaded cores, none failed).

use inmotion::Model;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
/// Counted allocations made by a thread other than the test's.
static FOREIGN: AtomicUsize = AtomicUsize::new(0);
/// Size of the first counted allocation (for the failure message).
static FIRST_SIZE: AtomicUsize = AtomicUsize::new(0);
static MEASURING: AtomicBool = AtomicBool::new(false);

thread_local! {
    static TEST_THREAD: Cell<bool> = const { Cell::new(false) };
}

fn count(size: usize) {
    if !MEASURING.load(Ordering::SeqCst) {
        return;
    }
    if ALLOCS.fetch_add(1, Ordering::SeqCst) == 0 {
        FIRST_SIZE.store(size, Ordering::SeqCst);
    }
    // `try_with`: a thread being torn down has no thread-locals left.
    if !TEST_THREAD.try_with(Cell::get).unwrap_or(false) {
        FOREIGN.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count(n);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn main() {
    classify_allocates_nothing_after_warm_up();
    println!("no_alloc: classify allocated nothing after warm-up (20 rounds x 15 artifacts)");
}

fn classify_allocates_nothing_after_warm_up() {
    TEST_THREAD.with(|t| t.set(true));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inmotion");
    let mut seen = 0;
    // Rounds reload every model, so a late allocation anywhere in the process (a thread
    // starting, a lazily grown buffer) has many windows to show up in.
    for round in 0..20 {
        for f in ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"] {
            for p in ["fp32", "int8", "q4"] {
                let dir = root.join(format!("{f}_{p}"));
                assert!(dir.is_dir(), "fixture {} missing", dir.display());
                let mut m = Model::load(&dir).unwrap();
                let x: Vec<f32> = (0..m.meta.window_len())
                    .map(|i| (i as f32 * 0.3).sin())
                    .collect();
                m.classify(&x);
                ALLOCS.store(0, Ordering::SeqCst);
                FOREIGN.store(0, Ordering::SeqCst);
                MEASURING.store(true, Ordering::SeqCst);
                for _ in 0..25 {
                    std::hint::black_box(m.classify(std::hint::black_box(&x)));
                }
                MEASURING.store(false, Ordering::SeqCst);
                let (n, foreign) = (
                    ALLOCS.load(Ordering::SeqCst),
                    FOREIGN.load(Ordering::SeqCst),
                );
                assert_eq!(
                    n,
                    0,
                    "round {round}: {f}_{p} allocated {n} times ({foreign} on other threads; \
                     first of {} bytes)",
                    FIRST_SIZE.load(Ordering::SeqCst)
                );
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 20 * 15);
}
