//! Output helpers: shortest round-trip floats, `key : value` reports, progress on stderr.

use std::io::{IsTerminal, Write};
use std::time::Instant;

/// Appends `v` as a JSON array of shortest round-trip f32 literals.
pub fn push_f32_array(out: &mut String, v: &[f32]) {
    let mut buf = ryu::Buffer::new();
    out.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(buf.format_finite(*x));
    }
    out.push(']');
}

/// Prints `key : value` lines with keys padded to a common width.
pub fn print_report(rows: &[(String, String)]) {
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<w$} : {v}");
    }
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
pub struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    enabled: bool,
}

impl Progress {
    pub fn new(total: usize, wanted: bool) -> Self {
        Progress {
            total,
            done: 0,
            start: Instant::now(),
            enabled: wanted && std::io::stderr().is_terminal() && total > 0,
        }
    }

    pub fn advance(&mut self, n: usize) {
        self.done += n;
        if !self.enabled {
            return;
        }
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = self.done as f64 / secs;
        let eta = (self.total - self.done) as f64 / rate.max(1e-9);
        let width = 30;
        let filled = width * self.done / self.total;
        eprint!(
            "\r[{}{}] {}/{} texts  {:.1} texts/s  ETA {:.0}s ",
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.done,
            self.total,
            rate,
            eta
        );
        if self.done >= self.total {
            eprintln!();
        }
    }
}
