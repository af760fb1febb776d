//! `--model org/name` download from the Hugging Face Hub (cargo feature `download`, off by
//! default so the default build has no TLS stack). Files land in the standard Hugging Face
//! cache layout, where `kin_infer::io::hub` then finds them.

use anyhow::{Context, Result};
use std::path::PathBuf;

/// Files a sentence-transformers encoder directory may hold; only the config and weights are
/// required.
const OPTIONAL: [&str; 6] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
];

/// Downloads `repo_id` (config, weights single or sharded, tokenizer, sentence-transformers
/// configs) and returns its snapshot directory.
pub fn download(repo_id: &str) -> Result<PathBuf> {
    let api = hf_hub::api::sync::ApiBuilder::new()
        .with_progress(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .build()
        .context("cannot start the Hugging Face Hub client")?;
    let repo = api.model(repo_id.to_string());
    let config = repo
        .get("config.json")
        .with_context(|| format!("{repo_id}: cannot download config.json"))?;
    if repo.get("model.safetensors").is_err() {
        let index = repo.get("model.safetensors.index.json").with_context(|| {
            format!("{repo_id}: no model.safetensors or model.safetensors.index.json")
        })?;
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index)?)
            .with_context(|| format!("{}: invalid JSON", index.display()))?;
        let mut shards: Vec<&str> = v["weight_map"]
            .as_object()
            .context("index has no weight_map")?
            .values()
            .filter_map(|s| s.as_str())
            .collect();
        shards.sort_unstable();
        shards.dedup();
        for s in shards {
            repo.get(s)
                .with_context(|| format!("{repo_id}: cannot download {s}"))?;
        }
    }
    for f in OPTIONAL {
        // Absent optional files are normal (a plain transformers checkpoint).
        let _ = repo.get(f);
    }
    Ok(config.parent().map(PathBuf::from).unwrap_or_default())
}
