//! Resolves `--model` values (docs/models.md), in this order:
//!
//! 1. an existing directory, or a `.gguf` file;
//! 2. a path to a `config.json` or `*.safetensors` file: its directory;
//! 3. a catalogue name installed in kin-infer's data dir ([`data_dir`]`/models/NAME`, where
//!    `scripts/fetch-model.sh NAME` puts it): that directory if it holds `config.json`, else
//!    the one `.gguf` file in it;
//! 4. a repo id `owner/name` in the local Hugging Face cache ([`cache_dir`]; layout
//!    `models--{owner}--{name}/snapshots/{revision}`, the revision named by `refs/main`);
//! 5. a short name (`all-MiniLM-L6-v2`) matching the name part of exactly one cached repo.
//!
//! No network: downloading is the CLI's opt-in `--download`. Every failure names what was
//! tried and the offline way to get the model.

use crate::error::{InferError, Result};
use std::path::{Path, PathBuf};

/// The models `scripts/fetch-model.sh` installs (its `NAMES`), quoted in not-found messages
/// so a user sees what a bare name could be; a test keeps the two lists equal.
pub const CATALOGUE: [&str; 3] = [
    "all-minilm-l6-v2",
    "smollm2-135m-instruct",
    "smollm2-135m-instruct-hf",
];

fn env_path(k: &str) -> Option<PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The hub cache directory the environment points at.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(p) = env_path("HF_HUB_CACHE") {
        return Some(p);
    }
    if let Some(p) = env_path("HF_HOME") {
        return Some(p.join("hub"));
    }
    if let Some(p) = env_path("XDG_CACHE_HOME") {
        return Some(p.join("huggingface").join("hub"));
    }
    env_path("HOME").map(|h| h.join(".cache").join("huggingface").join("hub"))
}

/// kin-infer's data dir: `KIN_INFER_HOME`, else `XDG_DATA_HOME/kin-infer`, else
/// `HOME/.local/share/kin-infer`. Catalogue models live in its `models/` folder.
pub fn data_dir() -> Option<PathBuf> {
    if let Some(p) = env_path("KIN_INFER_HOME") {
        return Some(p);
    }
    if let Some(p) = env_path("XDG_DATA_HOME") {
        return Some(p.join("kin-infer"));
    }
    env_path("HOME").map(|h| h.join(".local").join("share").join("kin-infer"))
}

/// `owner/name` with Hub-legal characters.
pub fn looks_like_repo_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() == 2 && parts.iter().all(|p| is_name_part(p))
}

fn is_name_part(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('.')
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// What `--model` accepts, for messages.
const ACCEPTS: &str = "--model takes a model directory, a .gguf file, a config.json or \
     .safetensors file inside a model directory, a catalogue name (scripts/fetch-model.sh \
     --list) or a Hugging Face repo id (owner/name)";

/// Whether `path` is a GGUF model file (a file named `*.gguf`).
pub fn is_gguf_file(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// The model directory (or `.gguf` file) `spec` names; see the module doc for the order.
pub fn resolve_model(spec: &str) -> Result<PathBuf> {
    let p = Path::new(spec);
    if p.is_dir() || is_gguf_file(p) {
        return Ok(p.to_path_buf());
    }
    if p.is_file() {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let st = p
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
        if name == "config.json" || st {
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
            return Ok(dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf));
        }
        return Err(InferError::Input(format!("`{spec}` is a file; {ACCEPTS}")));
    }
    if let Ok(target) = std::fs::read_link(p) {
        // Not a file or directory yet a link: it dangles (or loops).
        return Err(unresolved(
            spec,
            format!(
                "`{spec}` is a symbolic link to `{}`, which does not exist; point it at a \
                 model directory or a .gguf file",
                target.display()
            ),
        ));
    }
    let bare = is_name_part(spec);
    if bare {
        if let Some(models) = data_dir().map(|d| d.join("models")) {
            if let Some(found) = resolve_in_data_dir(spec, &models.join(spec))? {
                return Ok(found);
            }
        }
    }
    if let Some(cache) = cache_dir() {
        if looks_like_repo_id(spec) {
            if let Some(dir) = resolve_in_cache(&cache, spec) {
                return Ok(dir);
            }
        } else if bare {
            if let Some(dir) = resolve_short_name(&cache, spec)? {
                return Ok(dir);
            }
        }
    }
    Err(not_found(spec))
}

fn unresolved(spec: &str, message: String) -> InferError {
    InferError::ModelUnresolved {
        spec: spec.to_string(),
        message,
    }
}

/// A catalogue model's directory `dir`: itself when it holds `config.json` (a Hugging Face
/// layout), else its one `.gguf` file; `None` when it does not exist.
fn resolve_in_data_dir(name: &str, dir: &Path) -> Result<Option<PathBuf>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    if dir.join("config.json").is_file() {
        return Ok(Some(dir.to_path_buf()));
    }
    let mut ggufs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|err| InferError::Io {
            path: dir.to_path_buf(),
            err,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_gguf_file(p))
        .collect();
    ggufs.sort();
    match ggufs.len() {
        1 => Ok(ggufs.pop()),
        0 => Err(unresolved(
            name,
            format!(
                "`{name}` is installed at `{}` but that directory holds neither config.json \
                 nor a .gguf file (an interrupted fetch?); delete it and rerun \
                 `scripts/fetch-model.sh {name}`",
                dir.display()
            ),
        )),
        _ => Err(unresolved(
            name,
            format!(
                "`{}` holds several .gguf files ({}); pass one of them to --model",
                dir.display(),
                ggufs
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The one cached repo whose name part (after the owner) is `name`, exactly; several is an
/// error listing them, since picking one would be a guess.
fn resolve_short_name(cache: &Path, name: &str) -> Result<Option<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return Ok(None);
    };
    let mut hits: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|d| {
            let rest = d.strip_prefix("models--")?;
            let repo_id = match rest.split_once("--") {
                Some((owner, n)) if n == name => format!("{owner}/{n}"),
                // A legacy repo without an owner (`gpt2`).
                None if rest == name => rest.to_string(),
                _ => return None,
            };
            let dir = resolve_in_cache(cache, &repo_id)?;
            Some((repo_id, dir))
        })
        .collect();
    hits.sort();
    match hits.len() {
        0 => Ok(None),
        1 => Ok(hits.pop().map(|(_, d)| d)),
        _ => Err(unresolved(
            name,
            format!(
                "`{name}` matches several repos in the Hugging Face cache `{}`: {}; pass the \
                 one you mean as --model OWNER/NAME",
                cache.display(),
                hits.iter()
                    .map(|(r, _)| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// The not-found error: every place looked in, and the offline ways to fill one of them.
fn not_found(spec: &str) -> InferError {
    let repo = looks_like_repo_id(spec);
    let bare = is_name_part(spec);
    let mut tried = vec![format!("a file or directory `{spec}`: none")];
    let data = data_dir().map(|d| d.join("models"));
    if bare {
        tried.push(match &data {
            Some(m) => format!(
                "the kin-infer data dir: no `{}` (KIN_INFER_HOME, else \
                 XDG_DATA_HOME/kin-infer, else ~/.local/share/kin-infer)",
                m.join(spec).display()
            ),
            None => "the kin-infer data dir: none (set KIN_INFER_HOME or HOME)".into(),
        });
    }
    if repo || bare {
        let pattern = if repo {
            format!("models--{}", spec.replace('/', "--"))
        } else {
            format!("models--*--{spec}")
        };
        tried.push(match cache_dir() {
            Some(c) => format!(
                "the Hugging Face cache: no `{}` with a snapshot (HF_HUB_CACHE, else \
                 HF_HOME/hub, else ~/.cache/huggingface/hub)",
                c.join(pattern).display()
            ),
            None => "the Hugging Face cache: none (set HF_HUB_CACHE or HOME)".into(),
        });
    }
    let installed = data
        .and_then(|m| std::fs::read_dir(m).ok())
        .map(|es| {
            let mut v: Vec<String> = es
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| !n.starts_with('.'))
                .collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    let mut fixes = Vec::new();
    if repo {
        fixes.push(format!(
            "rerun with `--download` to fetch `{spec}` from the Hugging Face Hub (HF_ENDPOINT; \
             a build with the `download` feature); nothing is fetched without it"
        ));
    }
    fixes.push(format!(
        "`scripts/fetch-model.sh NAME` installs a catalogue model into the data dir, no Hub \
         needed (`scripts/fetch-model.sh --list`; names: {})",
        CATALOGUE.join(", ")
    ));
    if !repo {
        fixes.push("a Hugging Face repo id (owner/name) with `--download` fetches it".into());
    }
    if !installed.is_empty() {
        fixes.push(format!("installed now: {}", installed.join(", ")));
    }
    unresolved(
        spec,
        format!(
            "model `{spec}` not found; tried:\n  - {}\nto get it:\n  - {}",
            tried.join("\n  - "),
            fixes.join("\n  - ")
        ),
    )
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
