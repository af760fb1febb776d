//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) through the same entry points the
//! cargo-fuzz targets call, so CI covers every input the fuzzer kept without nightly. An entry
//! point that panics fails the test; a missing or empty corpus directory fails it too.

use std::path::Path;

fn replay(target: &str, entry: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    kin_infer_core::fuzzing::replay_corpus(&root, target, entry);
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
