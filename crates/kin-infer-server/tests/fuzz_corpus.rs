//! Replays the committed corpus of the `server_request` fuzz target
//! (fuzz/corpus/server_request/) through the same entry point, so CI covers every input the
//! fuzzer kept without nightly: no panic, no 5xx, every 4xx in OpenAI's error shape.

#[test]
fn server_request() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    kin_infer::fuzzing::replay_corpus(&root, "server_request", kin_infer_server::fuzzing::request);
}
