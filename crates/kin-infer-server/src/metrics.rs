//! `/metrics` in Prometheus' text format: requests by route and status, latency and batch-size
//! histograms, queue depths, token counters. Written by hand (a few counters behind one mutex
//! taken once per request or batch; no metrics crate needed for that).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
const BATCH_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

#[derive(Default, Clone)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    n: u64,
}

impl Histogram {
    fn observe(&mut self, buckets: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; buckets.len()];
        }
        for (c, b) in self.counts.iter_mut().zip(buckets) {
            if v <= *b {
                *c += 1;
            }
        }
        self.sum += v;
        self.n += 1;
    }

    fn write(&self, out: &mut String, name: &str, labels: &str, buckets: &[f64]) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (i, b) in buckets.iter().enumerate() {
            let c = self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.n);
        let l = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{l} {}", self.sum);
        let _ = writeln!(out, "{name}_count{l} {}", self.n);
    }
}

#[derive(Default)]
struct Inner {
    requests: BTreeMap<(String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    batch_rows: Histogram,
    embedded_tokens: u64,
    prompt_tokens: u64,
    generated_tokens: u64,
    decode_tokens_per_s: f64,
}

/// The server's counters; queue depths are live gauges the handlers move.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    /// Embedding requests waiting for or inside a batch.
    pub embed_queue: AtomicUsize,
    /// Generations waiting for a slot.
    pub gen_waiting: AtomicUsize,
    /// Generations running.
    pub gen_running: AtomicUsize,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere never makes the counters unreadable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn request(&self, route: &str, status: u16, seconds: f64) {
        let mut g = self.lock();
        *g.requests.entry((route.to_string(), status)).or_default() += 1;
        g.latency
            .entry(route.to_string())
            .or_default()
            .observe(&LATENCY_BUCKETS, seconds);
    }

    pub fn embedding_batch(&self, rows: usize, tokens: usize) {
        let mut g = self.lock();
        g.batch_rows.observe(&BATCH_BUCKETS, rows as f64);
        g.embedded_tokens += tokens as u64;
    }

    pub fn generation(&self, prompt: usize, generated: usize, decode_tokens_per_s: f64) {
        let mut g = self.lock();
        g.prompt_tokens += prompt as u64;
        g.generated_tokens += generated as u64;
        if decode_tokens_per_s > 0.0 {
            g.decode_tokens_per_s = decode_tokens_per_s;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let g = self.lock();
        let mut o = String::new();
        o.push_str("# HELP kin_infer_requests_total HTTP requests by route and status.\n");
        o.push_str("# TYPE kin_infer_requests_total counter\n");
        for ((route, status), n) in &g.requests {
            let _ = writeln!(
                o,
                "kin_infer_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        o.push_str("# HELP kin_infer_request_duration_seconds Time to the response's end.\n");
        o.push_str("# TYPE kin_infer_request_duration_seconds histogram\n");
        for (route, h) in &g.latency {
            h.write(
                &mut o,
                "kin_infer_request_duration_seconds",
                &format!("route=\"{route}\""),
                &LATENCY_BUCKETS,
            );
        }
        o.push_str("# HELP kin_infer_embedding_batch_rows Texts per embedding forward pass.\n");
        o.push_str("# TYPE kin_infer_embedding_batch_rows histogram\n");
        g.batch_rows
            .write(&mut o, "kin_infer_embedding_batch_rows", "", &BATCH_BUCKETS);
        let gauges = [
            (
                "kin_infer_queue_depth{queue=\"embeddings\"}",
                self.embed_queue.load(Ordering::Relaxed) as f64,
            ),
            (
                "kin_infer_queue_depth{queue=\"generations\"}",
                self.gen_waiting.load(Ordering::Relaxed) as f64,
            ),
            (
                "kin_infer_generations_running",
                self.gen_running.load(Ordering::Relaxed) as f64,
            ),
            ("kin_infer_decode_tokens_per_second", g.decode_tokens_per_s),
        ];
        o.push_str("# TYPE kin_infer_queue_depth gauge\n");
        o.push_str("# TYPE kin_infer_generations_running gauge\n");
        o.push_str("# TYPE kin_infer_decode_tokens_per_second gauge\n");
        for (name, v) in gauges {
            let _ = writeln!(o, "{name} {v}");
        }
        let counters = [
            ("kin_infer_embedded_tokens_total", g.embedded_tokens),
            ("kin_infer_prompt_tokens_total", g.prompt_tokens),
            ("kin_infer_generated_tokens_total", g.generated_tokens),
        ];
        for (name, v) in counters {
            let _ = writeln!(o, "# TYPE {name} counter\n{name} {v}");
        }
        o
    }
}

/// The memory budget's gauges (total and reserved now), in the same exposition format.
pub fn budget_gauges(b: &crate::memory::MemoryBudget) -> String {
    let mut o = String::new();
    o.push_str("# HELP kin_infer_memory_budget_bytes --memory-budget: bytes all running generations may reserve.\n");
    o.push_str("# TYPE kin_infer_memory_budget_bytes gauge\n");
    let _ = writeln!(o, "kin_infer_memory_budget_bytes {}", b.total());
    o.push_str("# HELP kin_infer_memory_reserved_bytes Bytes running generations have reserved.\n");
    o.push_str("# TYPE kin_infer_memory_reserved_bytes gauge\n");
    let _ = writeln!(o, "kin_infer_memory_reserved_bytes {}", b.used());
    o
}
