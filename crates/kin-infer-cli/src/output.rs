//! Output helpers: shortest round-trip floats, `key : value` reports, progress on stderr.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Prints `key : value` lines with keys padded to a common width.
pub fn print_report(rows: &[(String, String)]) {
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<w$} : {v}");
    }
}

/// Progress on stderr: a bar when stderr is a terminal and the input is a file, and/or
/// periodic one-line JSON records (`--progress-json`).
pub struct Progress {
    total: u64,
    /// Items already done when this run started (resumed).
    base: u64,
    start: Instant,
    last_json: Option<Instant>,
    bar: bool,
    json: bool,
}

/// JSON records at most this often.
const JSON_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Progress {
    pub fn new(total: u64, input_is_file: bool, json: bool, base: u64) -> Self {
        Progress {
            total,
            base,
            start: Instant::now(),
            last_json: None,
            bar: input_is_file && std::io::stderr().is_terminal() && total > 0,
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
        let (rate, eta) = self.rate(done);
        if self.bar {
            let width = 30;
            let filled = (width as u64 * done / self.total.max(1)) as usize;
            eprint!(
                "\r[{}{}] {}/{} texts  {:.1} texts/s  ETA {:.0}s ",
                "#".repeat(filled.min(width)),
                " ".repeat(width - filled.min(width)),
                done,
                self.total,
                rate,
                eta
            );
        }
        if self.json && self.last_json.is_none_or(|t| t.elapsed() >= JSON_EVERY) {
            self.last_json = Some(Instant::now());
            eprintln!(
                "{}",
                serde_json::json!({"event": "progress", "done": done, "persisted": persisted,
                    "total": self.total, "rate_per_s": (rate * 10.0).round() / 10.0, "eta_s": eta.round()})
            );
        }
    }

    pub fn finish(&mut self, persisted: u64) {
        if self.bar {
            eprintln!();
        }
        if self.json {
            let (rate, _) = self.rate(persisted);
            eprintln!(
                "{}",
                serde_json::json!({"event": "done", "persisted": persisted, "total": self.total,
                    "seconds": self.start.elapsed().as_secs_f64(), "rate_per_s": (rate * 10.0).round() / 10.0,
                    "peak_rss_bytes": peak_rss()})
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
