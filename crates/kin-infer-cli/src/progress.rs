//! Human feedback on long work: an item bar with rate and ETA, and a "loading MODEL…" spinner
//! that appears only when a load takes over a second. Both draw on stderr and only when it is
//! a terminal: a log or a pipe gets the end summary alone (docs/cli-conventions.md), so bars
//! never interleave with machine-read output (`--progress-json` records, test captures).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

/// Whether stderr is a terminal a person is watching.
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// Loads that finish within this show nothing: a spinner that flashes for a few frames is
/// noise.
const SPINNER_AFTER: Duration = Duration::from_secs(1);

/// A bar over `total` units (`unit`: "items", "tensors"), drawn on stderr; `None` when stderr
/// is not a terminal or there is nothing to count.
pub fn bar(total: u64, unit: &str, base: u64) -> Option<ProgressBar> {
    if total == 0 || !stderr_is_tty() {
        return None;
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("[{{bar:30}}] {{pos}}/{{len}} {unit}  {{rate}} {unit}/s  ETA {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        // indicatif's own {per_sec} prints four decimals; one is what a person reads.
        let rate = |st: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.1}", st.per_sec());
        };
        pb.set_style(style.with_key("rate", rate).progress_chars("#>-"));
    }
    // A resumed run starts part-way: the rate counts this run's work only.
    pb.set_position(base);
    pb.reset_eta();
    Some(pb)
}

/// Runs `f` (a model load); if it is still running after a second and stderr is a terminal,
/// a spinner "loading WHAT…" shows until it returns, then is cleared.
pub fn loading<T>(what: &str, f: impl FnOnce() -> T) -> T {
    if !stderr_is_tty() {
        return f();
    }
    let (tx, rx) = mpsc::channel::<()>();
    let label = format!("loading {what}…");
    let spinner = std::thread::Builder::new()
        .name("kin-spinner".into())
        .spawn(move || {
            // Done (or the sender dropped) within the second: nothing is drawn.
            if rx.recv_timeout(SPINNER_AFTER) != Err(mpsc::RecvTimeoutError::Timeout) {
                return;
            }
            let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
                pb.set_style(style);
            }
            pb.set_message(label);
            pb.enable_steady_tick(Duration::from_millis(100));
            let _ = rx.recv();
            pb.finish_and_clear();
        })
        .ok();
    let out = f();
    drop(tx);
    if let Some(t) = spinner {
        let _ = t.join();
    }
    out
}
