//! `--model` resolution by name (docs/models.md): catalogue names in the data dir, short
//! names in the Hugging Face cache, file paths, and the errors that say what was tried. Every
//! test runs in its own HOME / KIN_INFER_HOME / HF_HUB_CACHE, so nothing on this machine (a
//! real cache, a real data dir) can make it pass or fail.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh home: `kin/` is KIN_INFER_HOME, `hub/` is HF_HUB_CACHE.
struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Home {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> &Path {
        self.tmp.path()
    }
    fn models(&self) -> PathBuf {
        self.path().join("kin/models")
    }
    fn hub(&self) -> PathBuf {
        self.path().join("hub")
    }
    /// `kin-infer ARGS` seeing only this home.
    fn kin(&self, args: &[&str]) -> Command {
        let mut c = kin(args);
        c.env("HOME", self.path())
            .env("KIN_INFER_HOME", self.path().join("kin"))
            .env("HF_HUB_CACHE", self.hub());
        for k in [
            "XDG_DATA_HOME",
            "XDG_CACHE_HOME",
            "HF_HOME",
            "HF_ENDPOINT",
            "HF_HUB_OFFLINE",
        ] {
            c.env_remove(k);
        }
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        run(&mut self.kin(args), "")
    }
    /// `describe --json` of `spec`, which must succeed.
    fn describe(&self, spec: &str) -> serde_json::Value {
        let o = self.run(&["describe", "--json", "--model", spec]);
        assert_eq!(o.status.code(), Some(0), "{spec}: {}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    }
    /// A cached Hugging Face repo `owner/name` holding a copy of fixture `fixture`.
    fn cache_repo(&self, repo_id: &str, fixture_name: &str) -> PathBuf {
        let repo = self
            .hub()
            .join(format!("models--{}", repo_id.replace('/', "--")));
        let snap = repo.join("snapshots/0123abcd");
        copy_dir(&fixture(fixture_name), &snap);
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
        snap
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn gguf_fixture() -> PathBuf {
    fixture("gguf/decoders/llama_gqa.q4_1.gguf")
}

/// `describe` of the GGUF fixture by its path: what a name must resolve to.
fn same_model(a: &serde_json::Value, b: &serde_json::Value) {
    for k in [
        "family",
        "kind",
        "parameters",
        "hidden_size",
        "num_hidden_layers",
    ] {
        assert_eq!(a[k], b[k], "field {k}: {a} vs {b}");
    }
}

#[test]
fn catalogue_name_resolves_to_the_gguf_file_in_the_data_dir() {
    let h = Home::new();
    let dir = h.models().join("smollm2-135m-instruct");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(gguf_fixture(), dir.join("SmolLM2-135M-Instruct.Q4_1.gguf")).unwrap();
    let by_name = h.describe("smollm2-135m-instruct");
    let by_path = h.describe(gguf_fixture().to_str().unwrap());
    same_model(&by_name, &by_path);
    assert_eq!(by_name["kind"], "decoder", "{by_name}");

    // Every command that takes --model resolves the same way; generate has its own flag.
    let o = h.run(&[
        "generate",
        "--model",
        "smollm2-135m-instruct",
        "--prompt-ids",
        "1 2",
        "--max-tokens",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn catalogue_dir_with_config_json_resolves_to_the_dir() {
    let h = Home::new();
    copy_dir(&fixture("bert_tiny"), &h.models().join("tiny-hf"));
    let v = h.describe("tiny-hf");
    same_model(&v, &h.describe(fixture("bert_tiny").to_str().unwrap()));
}

#[test]
fn data_dir_falls_back_to_xdg_data_home_then_home() {
    let h = Home::new();
    let xdg = h.path().join("xdg");
    copy_dir(&fixture("bert_tiny"), &xdg.join("kin-infer/models/via-xdg"));
    let o = run(
        h.kin(&["describe", "--model", "via-xdg"])
            .env_remove("KIN_INFER_HOME")
            .env("XDG_DATA_HOME", &xdg),
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

    copy_dir(
        &fixture("bert_tiny"),
        &h.path().join(".local/share/kin-infer/models/via-home"),
    );
    let o = run(
        h.kin(&["describe", "--model", "via-home"])
            .env_remove("KIN_INFER_HOME"),
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn empty_catalogue_dir_says_to_refetch() {
    let h = Home::new();
    std::fs::create_dir_all(h.models().join("all-minilm-l6-v2")).unwrap();
    let o = h.run(&["describe", "--model", "all-minilm-l6-v2"]);
    assert_clean_error(&o, 2, "neither config.json nor a .gguf file");
    assert_clean_error(&o, 2, "scripts/fetch-model.sh all-minilm-l6-v2");
}

#[test]
fn short_name_matches_one_cached_repo_exactly() {
    let h = Home::new();
    h.cache_repo("acme/bert-tiny", "bert_tiny");
    let v = h.describe("bert-tiny");
    same_model(&v, &h.describe(fixture("bert_tiny").to_str().unwrap()));
    // The full repo id still works, and the match is case-sensitive.
    h.describe("acme/bert-tiny");
    let o = h.run(&["describe", "--model", "Bert-Tiny"]);
    assert_clean_error(&o, 2, "not found");
}

#[test]
fn ambiguous_short_name_lists_every_match() {
    let h = Home::new();
    h.cache_repo("acme/bert-tiny", "bert_tiny");
    h.cache_repo("other/bert-tiny", "bert_tiny");
    let o = h.run(&["describe", "--model", "bert-tiny"]);
    assert_clean_error(&o, 2, "matches several repos");
    let err = text(&o.stderr);
    assert!(
        err.contains("acme/bert-tiny") && err.contains("other/bert-tiny"),
        "{err}"
    );
    assert!(err.contains("OWNER/NAME"), "{err}");
}

#[test]
fn config_json_or_safetensors_path_resolves_to_its_directory() {
    let h = Home::new();
    let want = h.describe(fixture("bert_tiny").to_str().unwrap());
    for f in ["config.json", "model.safetensors"] {
        let p = fixture("bert_tiny").join(f);
        same_model(&h.describe(p.to_str().unwrap()), &want);
    }
}

#[test]
fn config_json_in_the_current_directory_resolves() {
    let h = Home::new();
    let o = run(
        h.kin(&["describe", "--json", "--model", "config.json"])
            .current_dir(fixture("bert_tiny")),
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[cfg(unix)]
#[test]
fn dangling_symlink_is_named_as_such() {
    let h = Home::new();
    let link = h.path().join("model");
    let target = h.path().join("gone/model.gguf");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = h.run(&["describe", "--model", link.to_str().unwrap()]);
    assert_clean_error(&o, 2, "is a symbolic link to");
    let err = text(&o.stderr);
    assert!(
        err.contains(&target.display().to_string()) && err.contains("which does not exist"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_a_model_says_what_model_takes() {
    let h = Home::new();
    let f = fixture("bert_tiny").join("modules.json");
    let o = h.run(&["describe", "--model", f.to_str().unwrap()]);
    assert_clean_error(
        &o,
        2,
        "is a file; --model takes a model directory, a .gguf file",
    );
}

#[test]
fn not_found_names_every_place_tried_and_the_offline_fixes() {
    let h = Home::new();
    let o = h.run(&["describe", "--model", "no-such-model"]);
    assert_clean_error(&o, 2, "model `no-such-model` not found");
    let err = text(&o.stderr);
    let data = h.models().join("no-such-model");
    let cache = h.hub().join("models--*--no-such-model");
    for needle in [
        data.to_str().unwrap(),
        cache.to_str().unwrap(),
        "scripts/fetch-model.sh NAME",
        "scripts/fetch-model.sh --list",
        "smollm2-135m-instruct",
        "--download",
    ] {
        assert!(err.contains(needle), "stderr lacks `{needle}`: {err}");
    }

    // A repo id: the cache entry looked for, and `--download` as the first fix.
    let o = h.run(&["describe", "--model", "acme/nothing"]);
    assert_clean_error(&o, 2, "models--acme--nothing");
    let err = text(&o.stderr);
    assert!(
        err.contains("rerun with `--download`") && err.contains("nothing is fetched without it"),
        "{err}"
    );

    // What is installed is listed, so a typo is visible.
    std::fs::create_dir_all(h.models().join("smollm2-135m-instruct")).unwrap();
    let o = h.run(&["describe", "--model", "smollm2-135m-instrcut"]);
    assert_clean_error(&o, 2, "installed now: smollm2-135m-instruct");
}

#[cfg(not(feature = "download"))]
#[test]
fn download_without_the_feature_is_a_typed_error() {
    let h = Home::new();
    for cmd in ["describe", "embed"] {
        let o = h.run(&[cmd, "--model", "acme/tiny", "--download"]);
        assert_clean_error(&o, 2, "this build has no downloader");
        assert_clean_error(&o, 2, "--features download");
        assert_clean_error(&o, 2, "scripts/fetch-model.sh");
    }
    let o = h.run(&[
        "generate",
        "--model",
        "acme/tiny",
        "--download",
        "--prompt-ids",
        "1",
    ]);
    assert_clean_error(&o, 2, "this build has no downloader");
}

/// The names the not-found message quotes are the ones scripts/fetch-model.sh installs.
#[test]
fn catalogue_constant_matches_the_fetch_script() {
    let script = std::fs::read_to_string(root().join("scripts/fetch-model.sh")).unwrap();
    let line = script
        .lines()
        .find_map(|l| l.strip_prefix("NAMES=("))
        .expect("scripts/fetch-model.sh has a NAMES=(...) line");
    let names: Vec<&str> = line.trim_end_matches(')').split_whitespace().collect();
    assert_eq!(names, kin_infer::io::hub::CATALOGUE);
}
