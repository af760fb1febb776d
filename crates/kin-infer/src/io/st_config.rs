//! The sentence-transformers layout around a checkpoint: `modules.json`, the pooling module's
//! `config.json`, `Normalize`, and the sequence limit in `sentence_bert_config.json`.

use crate::error::{InferError, Result};
use crate::nn::pooling::{Pooling, PoolingMode};
use serde::Deserialize;
use std::path::Path;

/// What the sentence-transformers config of a model directory says.
#[derive(Debug, Clone)]
pub struct SentenceConfig {
    pub pooling: Pooling,
    pub normalize: bool,
    /// `max_seq_length` from `sentence_bert_config.json`.
    pub max_seq_length: Option<usize>,
    /// Whether `modules.json` was present (else the defaults of a plain checkpoint apply).
    pub from_modules: bool,
}

#[derive(Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize, Default)]
struct PoolingFile {
    /// sentence-transformers 6: one mode name, or a list concatenated in list order.
    #[serde(default)]
    pooling_mode: Option<serde_json::Value>,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

impl SentenceConfig {
    pub fn read(dir: &Path) -> Result<Self> {
        let max_seq_length = read_max_seq_length(dir)?;
        let modules_path = dir.join("modules.json");
        if !modules_path.is_file() {
            // A plain transformers checkpoint: sentence-transformers wraps it in mean pooling.
            return Ok(SentenceConfig {
                pooling: Pooling::new(vec![PoolingMode::Mean]),
                normalize: false,
                max_seq_length,
                from_modules: false,
            });
        }
        let modules: Vec<ModuleEntry> = super::read_json(&modules_path)?;
        let mut pooling = None;
        let mut normalize = false;
        for m in &modules {
            let kind = m.kind.rsplit('.').next().unwrap_or(&m.kind);
            match kind {
                "Transformer" => {}
                "Pooling" => {
                    let p = dir.join(&m.path).join("config.json");
                    let file: PoolingFile = if p.is_file() {
                        super::read_json(&p)?
                    } else {
                        PoolingFile {
                            pooling_mode_mean_tokens: true,
                            ..Default::default()
                        }
                    };
                    pooling = Some(pooling_from_file(&file, &p)?);
                }
                "Normalize" => normalize = true,
                other => {
                    return Err(InferError::Unsupported(format!(
                        "{}: sentence-transformers module `{other}` (supported: Transformer, Pooling, Normalize)",
                        modules_path.display()
                    )))
                }
            }
        }
        Ok(SentenceConfig {
            pooling: pooling.unwrap_or_else(|| Pooling::new(vec![PoolingMode::Mean])),
            normalize,
            max_seq_length,
            from_modules: true,
        })
    }
}

fn pooling_from_file(f: &PoolingFile, path: &Path) -> Result<Pooling> {
    if let Some(mode) = &f.pooling_mode {
        let bad = |reason: String| InferError::Config {
            path: path.to_path_buf(),
            field: "pooling_mode".into(),
            reason,
        };
        let names: Vec<&serde_json::Value> = match mode {
            serde_json::Value::Array(a) => a.iter().collect(),
            one => vec![one],
        };
        let modes = names
            .iter()
            .map(|n| {
                let s = n
                    .as_str()
                    .ok_or_else(|| bad(format!("`{n}` is not a string")))?;
                PoolingMode::parse(s).ok_or_else(|| {
                    bad(format!(
                        "unknown pooling mode `{s}` (supported: {})",
                        PoolingMode::NAMES
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if modes.is_empty() {
            return Err(bad("empty list".into()));
        }
        return Ok(Pooling::new(modes));
    }
    // sentence-transformers concatenates the enabled modes in this fixed order.
    let mut modes = Vec::new();
    for (on, m) in [
        (f.pooling_mode_cls_token, PoolingMode::Cls),
        (f.pooling_mode_max_tokens, PoolingMode::Max),
        (f.pooling_mode_mean_tokens, PoolingMode::Mean),
        (
            f.pooling_mode_mean_sqrt_len_tokens,
            PoolingMode::MeanSqrtLen,
        ),
        (
            f.pooling_mode_weightedmean_tokens,
            PoolingMode::WeightedMean,
        ),
        (f.pooling_mode_lasttoken, PoolingMode::LastToken),
    ] {
        if on {
            modes.push(m);
        }
    }
    if modes.is_empty() {
        return Err(InferError::Config {
            path: path.to_path_buf(),
            field: "pooling_mode_*".into(),
            reason: "no pooling mode is enabled".into(),
        });
    }
    Ok(Pooling::new(modes))
}

/// `max_seq_length` from `sentence_bert_config.json`, else a sane `model_max_length` from
/// `tokenizer_config.json`. (The truncation block inside `tokenizer.json` is not the model's
/// limit and is ignored.)
fn read_max_seq_length(dir: &Path) -> Result<Option<usize>> {
    let sb = dir.join("sentence_bert_config.json");
    if sb.is_file() {
        let v: serde_json::Value = super::read_json(&sb)?;
        if let Some(n) = v.get("max_seq_length").and_then(|x| x.as_u64()) {
            return Ok(Some(n as usize));
        }
    }
    let tc = dir.join("tokenizer_config.json");
    if tc.is_file() {
        let v: serde_json::Value = super::read_json(&tc)?;
        // transformers writes 1e30 for "no limit".
        if let Some(n) = v.get("model_max_length").and_then(|x| x.as_f64()) {
            if (1.0..1e7).contains(&n) {
                return Ok(Some(n as usize));
            }
        }
    }
    Ok(None)
}
