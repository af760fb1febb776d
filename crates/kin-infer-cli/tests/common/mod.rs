//! Helpers shared by the CLI test binaries.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

pub fn minilm() -> Option<PathBuf> {
    let d = std::env::var_os("KIN_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models/all-MiniLM-L6-v2"));
    if d.join("model.safetensors").is_file() {
        Some(d)
    } else {
        // CI sets KIN_REQUIRE_MINILM=1: these are the only tests of a real tokenizer.json, so
        // a fetch that silently did not happen must fail them, not skip them.
        assert!(
            std::env::var("KIN_REQUIRE_MINILM").map_or(true, |v| v != "1"),
            "KIN_REQUIRE_MINILM=1 but all-MiniLM-L6-v2 is not at {} (scripts/fetch-minilm.sh)",
            d.display()
        );
        eprintln!(
            "SKIPPED: all-MiniLM-L6-v2 not found at {} (scripts/fetch-minilm.sh)",
            d.display()
        );
        None
    }
}

pub fn kin(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kin-infer"));
    c.args(args)
        .env_remove("KIN_INFER_SIMD")
        .env_remove("KIN_INFER_THREADS")
        .env_remove("KIN_INFER_BACKEND")
        .env_remove("KIN_INFER_FORCE_CPU")
        .env_remove("KIN_INFER_CPU_BACKEND");
    c
}

pub fn run(c: &mut Command, stdin: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    // The child may exit (bad model) before reading its input: a broken pipe is expected then.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn assert_clean_error(o: &Output, code: i32, needle: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(err.contains(needle), "stderr lacks `{needle}`: {err}");
}
