//! Fuzzing helpers shared by the engines' fuzz entry points (not API): scratch directories
//! private to a process and thread, corpus replay, and the byte-splitting conventions of
//! multi-part inputs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Splits multi-file inputs (`st_config`, and text before binary data elsewhere): JSON text
/// never holds a NUL byte.
pub const SEPARATOR: u8 = 0;

/// This process and thread's scratch root (`$TMPDIR/kin-infer-fuzz-PID-N`).
fn scratch_root() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static ID: usize = NEXT.fetch_add(1, Ordering::Relaxed));
    let id = ID.with(|i| *i);
    std::env::temp_dir().join(format!("kin-infer-fuzz-{}-{id}", std::process::id()))
}

/// An empty directory for `target` under this thread's scratch root (reused across calls,
/// emptied each time).
pub fn scratch_dir(target: &str) -> PathBuf {
    let dir = scratch_root().join(target);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// Removes this thread's scratch root (the replay tests call it when done).
pub fn cleanup() {
    let _ = std::fs::remove_dir_all(scratch_root());
}

/// Replays every file of the corpus `root/target` through `entry` (the stable replay tests):
/// panics naming the input that panicked, or when the directory is missing or empty.
pub fn replay_corpus(root: &Path, target: &str, entry: fn(&[u8])) {
    let dir = root.join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        // Name the input that panicked (the panic message itself is printed above).
        if std::panic::catch_unwind(|| entry(&data)).is_err() {
            panic!("{target}: {} panicked", f.display());
        }
    }
}

/// `data` up to the first [`SEPARATOR`], and the rest after it (`None` without one).
pub fn split_first(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.iter().position(|&b| b == SEPARATOR) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    }
}

/// Length-prefixed frames: each a little-endian u32 length then that many bytes (the last
/// frame takes what is left when the length runs past the end).
pub fn frames(mut rest: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !rest.is_empty() && out.len() < max {
        if rest.len() < 4 {
            out.push(rest);
            break;
        }
        let n = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let body = &rest[4..];
        let n = n.min(body.len());
        out.push(&body[..n]);
        rest = &body[n..];
    }
    out
}
