//! Paths and helpers shared by the test modules.

pub use crate::support::{bits, fixture, fixtures_dir, load, random_sequences, repo_root};
use std::path::PathBuf;

/// Every fixture directory holding a golden file.
pub fn all_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("golden.json").is_file() && p.join("config.json").is_file())
        .collect();
    v.sort();
    v
}

/// all-MiniLM-L6-v2: `KIN_MINILM_DIR`, else `models/all-MiniLM-L6-v2` (scripts/fetch-minilm.sh).
/// `None` (and a note on stderr) when absent, so the caller skips.
pub fn minilm_dir(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("KIN_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("models/all-MiniLM-L6-v2"));
    if dir.join("model.safetensors").is_file() {
        Some(dir)
    } else {
        // CI sets KIN_REQUIRE_MINILM=1: these are the only tests of a real tokenizer.json, so
        // a fetch that silently did not happen must fail them, not skip them.
        assert!(
            std::env::var("KIN_REQUIRE_MINILM").map_or(true, |v| v != "1"),
            "{test}: KIN_REQUIRE_MINILM=1 but all-MiniLM-L6-v2 is not at {}",
            dir.display()
        );
        eprintln!(
            "SKIPPED {test}: all-MiniLM-L6-v2 not found at {} (run scripts/fetch-minilm.sh or set KIN_MINILM_DIR)",
            dir.display()
        );
        None
    }
}

/// Varied texts for the real model: code, unicode, empty, long.
pub fn sample_texts() -> Vec<String> {
    let mut v: Vec<String> = [
        "fn main() { println!(\"hello\"); }",
        "def add(a, b):\treturn a + b",
        "",
        "SELECT id, name FROM users WHERE age > 30 ORDER BY name;",
        "ünïcödé ✓ 日本語のテキスト 🚀",
        "a",
        "class Foo extends Bar implements Baz { private final int x = 42; }",
        "The quick brown fox jumps over the lazy dog.",
        "    indented    with   spaces   ",
        "مرحبا بالعالم",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("let x = vec![1, 2, 3]; ".repeat(60)); // longer than the 256-token limit
    v.push("if (a && b || c) { return -1; } ".repeat(8));
    v
}
