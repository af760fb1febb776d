//! `--model` as a Hugging Face repo id, resolved from a cache layout built by the test.

use crate::common::fixture;
use kin_infer::io::hub::resolve_in_cache;
use std::fs;

fn populate(snapshot: &std::path::Path) {
    fs::create_dir_all(snapshot).unwrap();
    for f in ["config.json", "model.safetensors"] {
        fs::copy(fixture("xlmr_tiny").join(f), snapshot.join(f)).unwrap();
    }
}

#[test]
fn repo_id_resolves_through_refs_main() {
    let cache = tempfile::tempdir().unwrap();
    let repo = cache.path().join("models--acme--tiny-xlmr");
    populate(&repo.join("snapshots/abc123"));
    fs::create_dir_all(repo.join("snapshots/old999")).unwrap();
    fs::create_dir_all(repo.join("refs")).unwrap();
    fs::write(repo.join("refs/main"), "abc123\n").unwrap();
    let dir = resolve_in_cache(cache.path(), "acme/tiny-xlmr").unwrap();
    assert!(dir.ends_with("snapshots/abc123"));
    kin_infer::Embedder::load(&dir, &Default::default()).unwrap();
}

#[test]
fn single_snapshot_without_refs_is_used_and_absent_repo_is_none() {
    let cache = tempfile::tempdir().unwrap();
    populate(&cache.path().join("models--acme--m/snapshots/deadbeef"));
    assert!(resolve_in_cache(cache.path(), "acme/m")
        .unwrap()
        .ends_with("deadbeef"));
    assert!(resolve_in_cache(cache.path(), "acme/other").is_none());
}
