//! After load and one warm-up window, classifying allocates nothing (every buffer lives in the
//! model's scratch; kin-infer's GEMM keeps its A-panel scratch per thread). Its own test binary,
//! because the counting allocator is process-wide.

use inmotion::Model;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn classify_allocates_nothing_after_warm_up() {
    // One thread, so the GEMM runs on this thread and never forks.
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global()
        .unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inmotion");
    let mut seen = 0;
    for f in ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"] {
        for p in ["fp32", "q4"] {
            let dir = root.join(format!("{f}_{p}"));
            if !dir.is_dir() {
                continue;
            }
            let mut m = Model::load(&dir).unwrap();
            let x: Vec<f32> = (0..m.meta.window_len())
                .map(|i| (i as f32 * 0.3).sin())
                .collect();
            m.classify(&x);
            let before = ALLOCS.load(Ordering::SeqCst);
            for _ in 0..10 {
                std::hint::black_box(m.classify(std::hint::black_box(&x)));
            }
            assert_eq!(ALLOCS.load(Ordering::SeqCst), before, "{f}_{p} allocated");
            seen += 1;
        }
    }
    assert!(seen > 0, "no fixtures");
}
