//! [`EmbedWatchdog`]: a guard thread for long runs. It asks the run to stop (and, if the run
//! does not stop within a grace period, because it is blocked in a write or a wedged driver,
//! ends the process itself) when the parent process has died, when a wall-clock cap is
//! exceeded, or when the rate of **persisted** items stays under a floor for a window.
//!
//! Liveness keys on persisted work, not CPU or GPU utilization: a busy-spinning driver keeps
//! utilization at 100% while persisting nothing. Ending the process is safe at any moment
//! because a durable run only counts what is already fsync'd, and resume repairs a torn tail.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why a run was stopped; exit codes as docs/cli-conventions.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Orphaned,
    WallCap,
    RateFloor,
    Interrupted,
}

impl StopReason {
    pub fn exit_code(self) -> u8 {
        match self {
            StopReason::Orphaned => 3,
            StopReason::WallCap => 4,
            StopReason::RateFloor => 5,
            StopReason::Interrupted => 130,
        }
    }

    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => StopReason::Orphaned,
            2 => StopReason::WallCap,
            3 => StopReason::RateFloor,
            4 => StopReason::Interrupted,
            _ => return None,
        })
    }

    fn to_u8(self) -> u8 {
        match self {
            StopReason::Orphaned => 1,
            StopReason::WallCap => 2,
            StopReason::RateFloor => 3,
            StopReason::Interrupted => 4,
        }
    }
}

/// What to guard against; `None` disables a check.
#[derive(Clone, Debug)]
pub struct WatchdogConfig {
    /// Stop when this process is gone; default: the parent at start (stop when orphaned).
    pub watch_pid: Option<u32>,
    /// Whether to watch for the parent's death at all.
    pub orphan_check: bool,
    pub max_wall: Option<Duration>,
    /// Items per second that must be persisted, measured over `rate_window`.
    pub min_rate: Option<f64>,
    pub rate_window: Duration,
    /// How long the run may take to stop by itself before the process is ended.
    pub grace: Duration,
    /// How often the checks run.
    pub poll: Duration,
}

impl Default for WatchdogConfig {
    fn default() -> Self {
        WatchdogConfig {
            watch_pid: None,
            orphan_check: true,
            max_wall: None,
            min_rate: None,
            rate_window: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            poll: Duration::from_millis(100),
        }
    }
}

struct Shared {
    persisted: AtomicU64,
    stop: AtomicU8,
    done: AtomicBool,
    /// Message for the stop (what was exceeded), written once before `stop` is set.
    detail: std::sync::Mutex<String>,
}

/// The guard; dropping it (or [`EmbedWatchdog::finish`]) ends the thread.
pub struct EmbedWatchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Called from the watchdog thread when the run failed to stop within the grace period.
pub type ForceExit = Box<dyn Fn(StopReason, &str) + Send>;

impl EmbedWatchdog {
    /// Starts the guard thread. `force_exit` ends the process when the run ignores a stop
    /// (the CLI prints the reason and exits with its code).
    pub fn start(mut cfg: WatchdogConfig, force_exit: ForceExit) -> Self {
        // Decided here, on the caller's thread, before the caller installs signal handlers.
        cfg.orphan_check = orphan_check(&cfg) == Ok(true);
        let shared = Arc::new(Shared {
            persisted: AtomicU64::new(0),
            stop: AtomicU8::new(0),
            done: AtomicBool::new(false),
            detail: std::sync::Mutex::new(String::new()),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kin-watchdog".into())
            .spawn(move || guard(cfg, s, force_exit))
            .ok();
        EmbedWatchdog { shared, thread }
    }

    /// Records `items` more persisted items (called after they are durable).
    pub fn persisted(&self, items: u64) {
        self.shared.persisted.fetch_add(items, Ordering::SeqCst);
    }

    /// The reason the run must stop, once a check has fired.
    pub fn stop_reason(&self) -> Option<StopReason> {
        StopReason::from_u8(self.shared.stop.load(Ordering::SeqCst))
    }

    /// What fired, in words.
    pub fn detail(&self) -> String {
        self.shared
            .detail
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    }

    /// Asks the run to stop as interrupted (SIGINT).
    pub fn interrupt(&self) {
        request(&self.shared, StopReason::Interrupted, "interrupted".into());
    }

    /// A handle for a signal handler.
    pub fn interrupter(&self) -> impl Fn() + Send + 'static {
        let s = self.shared.clone();
        move || request(&s, StopReason::Interrupted, "interrupted".into())
    }

    /// Ends the guard (the run is over).
    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.shared.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for EmbedWatchdog {
    fn drop(&mut self) {
        self.end();
    }
}

fn request(s: &Shared, reason: StopReason, detail: String) {
    if s.stop.load(Ordering::SeqCst) != 0 {
        return;
    }
    if let Ok(mut d) = s.detail.lock() {
        *d = detail;
    }
    let _ = s
        .stop
        .compare_exchange(0, reason.to_u8(), Ordering::SeqCst, Ordering::SeqCst);
}

fn alive(pid: u32) -> bool {
    // Linux: a live (or zombie) process has /proc/PID. Elsewhere only the parent check runs.
    !cfg!(target_os = "linux") || std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(unix)]
fn parent_pid() -> Option<u32> {
    Some(std::os::unix::process::parent_id())
}

/// The parent this process started with, once `note_parent` recorded it.
static FIRST_PARENT: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();

/// Records the parent process now. A binary calls this first thing in `main`: the guard
/// thread starts only after the model is loaded and the input validated, and a parent that
/// died in between would otherwise go unseen (the guard would take the reaper that adopted
/// the process for its parent).
pub fn note_parent() {
    let _ = FIRST_PARENT.set(parent_pid());
}

#[cfg(not(unix))]
fn parent_pid() -> Option<u32> {
    None
}

/// Why this process was detached on purpose, if it was: it ignores SIGHUP (`nohup`) or leads
/// its own session (`setsid`). Such a process is meant to outlive whoever started it, so the
/// default orphan check (the parent's death) would defeat the point; `--watch-pid` still
/// applies. Read before any handler is installed (the CLI's Ctrl-C handler comes later).
#[cfg(unix)]
pub fn detached() -> Option<&'static str> {
    // SAFETY: sigaction with a null new action only reads the current disposition into
    // `old`, a zeroed plain-data struct owned here.
    let ignores_hup = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    };
    if ignores_hup {
        return Some("started under nohup: SIGHUP is ignored");
    }
    // SAFETY: getsid(0) and getpid() take no pointers and cannot fail for this process.
    if unsafe { libc::getsid(0) == libc::getpid() } {
        return Some("started under setsid: leads its own session");
    }
    None
}

#[cfg(not(unix))]
pub fn detached() -> Option<&'static str> {
    None
}

/// Whether the parent-death check runs under `cfg`, and if not although asked for, why.
pub fn orphan_check(cfg: &WatchdogConfig) -> Result<bool, &'static str> {
    if !cfg.orphan_check {
        return Ok(false);
    }
    if cfg.watch_pid.is_some() {
        return Ok(true);
    }
    match detached() {
        Some(why) => Err(why),
        None => Ok(true),
    }
}

fn guard(cfg: WatchdogConfig, s: Arc<Shared>, force_exit: ForceExit) {
    let start = Instant::now();
    let parent = FIRST_PARENT.get().copied().unwrap_or_else(parent_pid);
    let mut samples: VecDeque<(Instant, u64)> = VecDeque::new();
    let mut stop_seen: Option<Instant> = None;
    while !s.done.load(Ordering::SeqCst) {
        std::thread::sleep(cfg.poll);
        let now = Instant::now();
        if let Some(since) = stop_seen {
            if now.duration_since(since) >= cfg.grace && !s.done.load(Ordering::SeqCst) {
                if let Some(r) = StopReason::from_u8(s.stop.load(Ordering::SeqCst)) {
                    let detail = s.detail.lock().map(|d| d.clone()).unwrap_or_default();
                    force_exit(r, &detail);
                }
                return;
            }
            continue;
        }
        if s.stop.load(Ordering::SeqCst) != 0 {
            stop_seen = Some(now);
            continue;
        }
        if cfg.orphan_check {
            let gone = match cfg.watch_pid {
                Some(pid) => !alive(pid),
                None => parent.is_some() && parent_pid() != parent,
            };
            if gone {
                let who = cfg
                    .watch_pid
                    .map_or("the parent process".to_string(), |p| format!("process {p}"));
                request(
                    &s,
                    StopReason::Orphaned,
                    format!("{who} is gone (orphaned)"),
                );
                continue;
            }
        }
        if let Some(cap) = cfg.max_wall {
            if now.duration_since(start) >= cap {
                request(
                    &s,
                    StopReason::WallCap,
                    format!("wall-clock cap of {:.1} s exceeded", cap.as_secs_f64()),
                );
                continue;
            }
        }
        if let Some(floor) = cfg.min_rate {
            let done = s.persisted.load(Ordering::SeqCst);
            samples.push_back((now, done));
            while samples.len() > 1 && now.duration_since(samples[1].0) >= cfg.rate_window {
                samples.pop_front();
            }
            let (t0, n0) = samples[0];
            let span = now.duration_since(t0);
            // Judge only once a whole window has been observed.
            if span >= cfg.rate_window && now.duration_since(start) >= cfg.rate_window {
                let rate = (done - n0) as f64 / span.as_secs_f64();
                if rate < floor {
                    request(
                        &s,
                        StopReason::RateFloor,
                        format!(
                            "persisted {rate:.2} items/s over the last {:.1} s, under the floor of {floor} items/s",
                            span.as_secs_f64()
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn quick(cfg: WatchdogConfig) -> WatchdogConfig {
        WatchdogConfig {
            poll: Duration::from_millis(10),
            grace: Duration::from_millis(200),
            ..cfg
        }
    }

    /// A watchdog whose wall-clock cap is `ms` milliseconds, and the stop reasons it reports.
    fn wall_capped(ms: u64) -> (EmbedWatchdog, mpsc::Receiver<StopReason>) {
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let wd = EmbedWatchdog::start(
            quick(WatchdogConfig {
                max_wall: Some(Duration::from_millis(ms)),
                ..Default::default()
            }),
            Box::new(move |r, _| tx.lock().unwrap().send(r).unwrap()),
        );
        (wd, rx)
    }

    #[test]
    fn wall_cap_fires_and_force_exit_follows_when_ignored() {
        let (wd, rx) = wall_capped(50);
        let r = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(r, StopReason::WallCap);
        assert_eq!(wd.stop_reason(), Some(StopReason::WallCap));
        assert!(wd.detail().contains("wall-clock"));
    }

    #[test]
    fn steady_progress_keeps_the_rate_floor_quiet_and_a_stall_trips_it() {
        let wd = EmbedWatchdog::start(
            quick(WatchdogConfig {
                min_rate: Some(50.0),
                rate_window: Duration::from_millis(200),
                ..Default::default()
            }),
            Box::new(|_, _| {}),
        );
        for _ in 0..40 {
            wd.persisted(2); // 200 items/s
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(wd.stop_reason(), None);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(wd.stop_reason(), Some(StopReason::RateFloor));
        wd.finish();
    }

    #[test]
    fn a_finished_run_is_not_force_exited() {
        let (wd, rx) = wall_capped(20);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(wd.stop_reason(), Some(StopReason::WallCap));
        wd.finish(); // the run stopped by itself within the grace period
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    }
}
