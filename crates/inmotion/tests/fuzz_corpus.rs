//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) through the same entry points the
//! cargo-fuzz targets call, so CI covers every input the fuzzer kept without nightly. An entry
//! point that panics fails the test; a missing or empty corpus directory fails it too.

use std::path::PathBuf;

fn replay(target: &str, entry: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
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
    inmotion::fuzzing::cleanup();
}

#[test]
fn golden_inmotion() {
    replay("golden_inmotion", inmotion::fuzzing::golden_inmotion);
}

#[test]
fn inmotion_meta() {
    replay("inmotion_meta", inmotion::fuzzing::inmotion_meta);
}

#[test]
fn inmotion_artifact() {
    replay("inmotion_artifact", inmotion::fuzzing::inmotion_artifact);
}

#[test]
fn window_line() {
    replay("window_line", inmotion::fuzzing::window_line);
}

#[test]
fn stream_line() {
    replay("stream_line", inmotion::fuzzing::stream_line);
}
