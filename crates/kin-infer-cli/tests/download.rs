//! `--download` against a mock Hugging Face Hub on 127.0.0.1 (tests/common/mock_hub.rs):
//! files land in the Hugging Face cache layout, later runs resolve from the cache without the
//! network, and an unreachable Hub is an error naming the endpoint and the offline ways.
//! Run with `cargo test -p kin-infer-cli --features download --test download`.
#![cfg(feature = "download")]

mod common;
#[path = "common/mock_hub.rs"]
mod mock_hub;

use common::*;
use mock_hub::{closed_port_url, MockHub, COMMIT};
use std::path::Path;
use std::process::{Command, Output};

/// `kin-infer ARGS` with the Hub at `endpoint` and every cache and data dir under `home`.
fn kin_at(home: &Path, endpoint: &str, args: &[&str]) -> Command {
    let mut c = kin(args);
    c.env("HOME", home)
        .env("KIN_INFER_HOME", home.join("kin"))
        .env("HF_HUB_CACHE", home.join("hub"))
        .env("HF_ENDPOINT", endpoint);
    // A proxy from the environment would take 127.0.0.1 requests elsewhere.
    for k in [
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "HF_HOME",
        "HF_HUB_OFFLINE",
        "HF_TOKEN",
        "ALL_PROXY",
        "all_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
    ] {
        c.env_remove(k);
    }
    c
}

fn describe(home: &Path, endpoint: &str, spec: &str, download: bool) -> Output {
    let mut args = vec!["describe", "--json", "--model", spec];
    if download {
        args.push("--download");
    }
    run(&mut kin_at(home, endpoint, &args), "")
}

fn ok_json(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn download_fills_the_cache_then_runs_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let hub = MockHub::serve_dir("acme/tiny", &fixture("bert_tiny"));

    let v = ok_json(&describe(home, &hub.url(), "acme/tiny", true));
    let want = ok_json(&describe(
        home,
        &hub.url(),
        fixture("bert_tiny").to_str().unwrap(),
        false,
    ));
    for k in ["family", "parameters", "hidden_size", "embedding_dim"] {
        assert_eq!(v[k], want[k], "{k}: {v} vs {want}");
    }

    let repo = home.join("hub/models--acme--tiny");
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    let snap = repo.join("snapshots").join(COMMIT);
    for f in [
        "config.json",
        "model.safetensors",
        "modules.json",
        "1_Pooling/config.json",
    ] {
        assert!(snap.join(f).is_file(), "{f} not in {}", snap.display());
    }
    let asked = hub.requests.lock().unwrap().clone();
    for f in ["config.json", "tokenizer.json", "generation_config.json"] {
        let want = format!("GET /acme/tiny/resolve/main/{f}");
        assert!(asked.contains(&want), "no `{want}` in {asked:?}");
    }

    // Cached: `--download` again asks the Hub nothing (offline first).
    let before = hub.request_count();
    ok_json(&describe(home, &hub.url(), "acme/tiny", true));
    assert_eq!(hub.request_count(), before, "{:?}", hub.requests);

    // The Hub gone: the repo id and its short name both resolve from the cache.
    let url = hub.url();
    hub.shutdown();
    for spec in ["acme/tiny", "tiny"] {
        let v = ok_json(&describe(home, &url, spec, false));
        assert_eq!(v["family"], want["family"], "{spec}: {v}");
    }
}

#[test]
fn sharded_checkpoints_download_every_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = MockHub::serve_dir("acme/sharded", &fixture("bert_sharded"));
    ok_json(&describe(tmp.path(), &hub.url(), "acme/sharded", true));
    let snap = tmp
        .path()
        .join("hub/models--acme--sharded/snapshots")
        .join(COMMIT);
    for i in 1..=3 {
        let f = format!("model-0000{i}-of-00003.safetensors");
        assert!(snap.join(&f).is_file(), "{f} not downloaded");
    }
}

#[test]
fn without_download_a_missing_repo_id_never_touches_the_network() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = MockHub::serve_dir("acme/tiny", &fixture("bert_tiny"));
    let o = describe(tmp.path(), &hub.url(), "acme/tiny", false);
    assert_clean_error(&o, 2, "rerun with `--download`");
    assert_eq!(hub.request_count(), 0, "{:?}", hub.requests);
}

#[test]
fn hf_hub_offline_refuses_to_download() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = MockHub::serve_dir("acme/tiny", &fixture("bert_tiny"));
    let o = run(
        kin_at(
            tmp.path(),
            &hub.url(),
            &["describe", "--model", "acme/tiny", "--download"],
        )
        .env("HF_HUB_OFFLINE", "1"),
        "",
    );
    assert_clean_error(&o, 2, "HF_HUB_OFFLINE is set");
    assert_eq!(hub.request_count(), 0, "{:?}", hub.requests);
}

#[test]
fn an_unreachable_hub_names_the_endpoint_and_the_offline_alternatives() {
    let tmp = tempfile::tempdir().unwrap();
    let url = closed_port_url();
    let o = describe(tmp.path(), &url, "acme/tiny", true);
    assert_clean_error(&o, 2, &url);
    for needle in [
        "HF_ENDPOINT",
        "Offline alternatives",
        "scripts/fetch-model.sh",
    ] {
        assert_clean_error(&o, 2, needle);
    }
}

#[test]
fn a_repo_the_hub_lacks_is_a_clean_error() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = MockHub::serve_dir("acme/tiny", &fixture("bert_tiny"));
    let o = describe(tmp.path(), &hub.url(), "acme/other", true);
    assert_clean_error(
        &o,
        2,
        "--download acme/other: cannot fetch config.json from the Hub at",
    );
}
