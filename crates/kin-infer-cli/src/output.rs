//! Output helpers: shortest round-trip floats, `key : value` reports, progress on stderr.

use std::io::Write;
use std::time::Instant;

/// Prints `key : value` lines with keys padded to a common width.
pub fn print_report(rows: &[(String, String)]) {
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<w$} : {v}");
    }
}

/// Progress on stderr: a bar with rate and ETA when stderr is a terminal (not with
/// `--progress-json`, whose records a program reads), and/or periodic one-line JSON records;
/// then one summary (a line, or the JSON `done` record).
pub struct Progress {
    total: u64,
    /// Items already done when this run started (resumed).
    base: u64,
    start: Instant,
    last_json: Option<Instant>,
    bar: Option<indicatif::ProgressBar>,
    json: bool,
}

/// JSON records at most this often.
const JSON_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How an embed run ended, for its summary.
pub struct Summary<'a> {
    /// Items in the output when the run ended (resumed ones included).
    pub items: u64,
    /// Where the records went: a file, or `None` for stdout.
    pub output: Option<&'a std::path::Path>,
}

impl Progress {
    pub fn new(total: u64, json: bool, base: u64) -> Self {
        Progress {
            total,
            base,
            start: Instant::now(),
            last_json: None,
            bar: if json {
                None
            } else {
                crate::progress::bar(total, "items", base)
            },
            json,
        }
    }

    fn rate(&self, done: u64) -> (f64, f64) {
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = (done - self.base.min(done)) as f64 / secs;
        let eta = (self.total.saturating_sub(done)) as f64 / rate.max(1e-9);
        (rate, eta)
    }

    /// `done` items embedded, `persisted` of them durable.
    pub fn update(&mut self, done: u64, persisted: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
        if self.json && self.last_json.is_none_or(|t| t.elapsed() >= JSON_EVERY) {
            let (rate, eta) = self.rate(done);
            self.last_json = Some(Instant::now());
            eprintln!(
                "{}",
                serde_json::json!({"event": "progress", "done": done, "persisted": persisted,
                    "total": self.total, "rate_per_s": (rate * 10.0).round() / 10.0, "eta_s": eta.round()})
            );
        }
    }

    /// Clears the bar (before a stop message, so the message starts its own line).
    pub fn clear(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    /// The end summary: the JSON `done` record with `--progress-json`, else one line.
    pub fn finish(&mut self, s: Summary) {
        self.clear();
        let secs = self.start.elapsed().as_secs_f64();
        let (rate, _) = self.rate(s.items);
        let this_run = s.items.saturating_sub(self.base);
        let output = s
            .output
            .map_or("stdout".to_string(), |p| p.display().to_string());
        if self.json {
            eprintln!(
                "{}",
                serde_json::json!({"event": "done", "persisted": s.items, "total": self.total,
                    "items": s.items, "items_this_run": this_run, "output": output,
                    "seconds": secs, "rate_per_s": (rate * 10.0).round() / 10.0,
                    "items_per_s": (rate * 10.0).round() / 10.0,
                    "peak_rss_bytes": peak_rss()})
            );
        } else {
            let resumed = if self.base > 0 {
                format!(" ({this_run} this run, {} resumed)", self.base)
            } else {
                String::new()
            };
            eprintln!(
                "embedded {} items{resumed} in {secs:.1} s ({rate:.1} items/s) -> {output}",
                s.items
            );
        }
    }
}

/// Peak resident memory of this process (Linux `VmHWM`), if known.
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Where a loaded model runs and with which numerics: the fields every `describe` and `bench`
/// report carries, added to its JSON object once here.
pub struct Runtime(serde_json::Map<String, serde_json::Value>);

impl Runtime {
    fn new(be: (&str, String, &str), threads: usize, n: kin_infer::Numerics) -> Self {
        let fields: [(&str, serde_json::Value); 6] = [
            ("backend", be.0.into()),
            ("device", be.1.into()),
            ("simd_tier", be.2.into()),
            ("threads", threads.into()),
            ("activations", n.name().into()),
            ("numerics_version", n.version().into()),
        ];
        Self(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    pub fn of_embedder(e: &kin_infer::Embedder) -> Self {
        let be = (e.backend_name(), e.device(), e.tier().name());
        Self::new(be, e.threads(), e.numerics())
    }

    pub fn of_generator(g: &kin_infer::Generator) -> Self {
        let be = g.backend();
        Self::new(
            (be.name(), be.device(), be.tier().name()),
            g.threads(),
            g.numerics(),
        )
    }

    /// `v` (a JSON object) with these fields added.
    pub fn add_to(self, mut v: serde_json::Value) -> serde_json::Value {
        if let Some(o) = v.as_object_mut() {
            o.extend(self.0);
        }
        v
    }
}
