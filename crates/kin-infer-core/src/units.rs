//! Units for messages, a leaf module: the error type formats sizes with it, so it must sit
//! below `error` (and `resource`, which re-exports it, sits above the backend).

/// `n` bytes in binary units for messages (`3.2 GiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
