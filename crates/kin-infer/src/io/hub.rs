//! Resolves `--model` values: a directory, or a Hugging Face repo id looked up in the local
//! Hugging Face cache (`HF_HUB_CACHE`, `HF_HOME/hub`, `XDG_CACHE_HOME/huggingface/hub`,
//! `~/.cache/huggingface/hub`; layout `models--{owner}--{name}/snapshots/{revision}` with the
//! revision named by `refs/main`). No network: downloading is a separate, opt-in concern.

use crate::error::{InferError, Result};
use std::path::{Path, PathBuf};

/// The hub cache directory the environment points at.
pub fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = env("HF_HUB_CACHE") {
        return Some(p);
    }
    if let Some(p) = env("HF_HOME") {
        return Some(p.join("hub"));
    }
    if let Some(p) = env("XDG_CACHE_HOME") {
        return Some(p.join("huggingface").join("hub"));
    }
    env("HOME").map(|h| h.join(".cache").join("huggingface").join("hub"))
}

/// `owner/name` with Hub-legal characters.
pub fn looks_like_repo_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
}

/// A model directory for `spec`: the path itself if it is a directory, else the cached
/// snapshot of the repo id `spec`.
pub fn resolve_model(spec: &str) -> Result<PathBuf> {
    let p = Path::new(spec);
    if p.is_dir() || crate::models::decoders::is_gguf_file(p) {
        return Ok(p.to_path_buf());
    }
    if looks_like_repo_id(spec) {
        if let Some(cache) = cache_dir() {
            if let Some(dir) = resolve_in_cache(&cache, spec) {
                return Ok(dir);
            }
        }
    }
    Err(InferError::ModelNotFound(spec.to_string()))
}

/// The snapshot of `repo_id` in the cache at `cache`, if present.
pub fn resolve_in_cache(cache: &Path, repo_id: &str) -> Option<PathBuf> {
    let repo = cache.join(format!("models--{}", repo_id.replace('/', "--")));
    let snapshots = repo.join("snapshots");
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs").join("main")) {
        let rev = rev.trim();
        let dir = snapshots.join(rev);
        if !rev.is_empty() && !rev.contains('/') && dir.join("config.json").is_file() {
            return Some(dir);
        }
    }
    // No usable refs/main: accept the snapshot only when there is exactly one.
    let mut found: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| d.join("config.json").is_file())
        .collect();
    if found.len() == 1 {
        found.pop()
    } else {
        None
    }
}
