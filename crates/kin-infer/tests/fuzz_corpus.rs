//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) through the same entry points the
//! cargo-fuzz targets call, so CI covers every input the fuzzer kept without nightly. An entry
//! point that panics fails the test; a missing or empty corpus directory fails it too.

use std::path::Path;

fn replay(target: &str, entry: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    kin_infer::fuzzing::replay_corpus(&root, target, entry);
    kin_infer::fuzzing::cleanup();
}

#[test]
fn safetensors_header() {
    replay("safetensors_header", kin_infer::fuzzing::safetensors_header);
}

#[test]
fn gguf_file() {
    replay("gguf_file", kin_infer::fuzzing::gguf_file);
}

#[test]
fn shard_index() {
    replay("shard_index", kin_infer::fuzzing::shard_index);
}

#[test]
fn config_json() {
    replay("config_json", kin_infer::fuzzing::config_json);
}

#[test]
fn st_config() {
    replay("st_config", kin_infer::fuzzing::st_config);
}

#[test]
fn golden_kin() {
    replay("golden_kin", kin_infer::fuzzing::golden_kin);
}

#[test]
fn embed_jsonl() {
    replay("embed_jsonl", kin_infer::fuzzing::embed_jsonl);
}

#[test]
fn corpus_run() {
    replay("corpus_run", kin_infer::fuzzing::corpus_run);
}
