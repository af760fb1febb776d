//! The sentence-transformers layout around a checkpoint: `modules.json`, the pooling module's
//! `config.json`, `Dense` projections, `Normalize`, and the sequence limit in
//! `sentence_bert_config.json`.

use crate::error::{InferError, Result};
use crate::nn::dense::{DenseActivation, DenseConfig};
use crate::nn::pooling::{Pooling, PoolingMode};
use serde::Deserialize;
use std::path::Path;

/// What the sentence-transformers config of a model directory says.
#[derive(Debug, Clone)]
pub struct SentenceConfig {
    pub pooling: Pooling,
    pub normalize: bool,
    /// `Dense` modules between pooling and normalization, in pipeline order.
    pub dense: Vec<DenseConfig>,
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
                dense: Vec::new(),
                max_seq_length,
                from_modules: false,
            });
        }
        let modules: Vec<ModuleEntry> = super::read_json(&modules_path)?;
        let mut pooling = None;
        let mut normalize = false;
        let mut dense = Vec::new();
        for m in &modules {
            module_dir(dir, &m.path, &modules_path)?;
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
                "Dense" => {
                    if pooling.is_none() || normalize {
                        return Err(InferError::Unsupported(format!(
                            "{}: a Dense module is supported only between Pooling and Normalize",
                            modules_path.display()
                        )));
                    }
                    dense.push(read_dense(&dir.join(&m.path))?);
                }
                other => {
                    return Err(InferError::Unsupported(format!(
                        "{}: sentence-transformers module `{other}` (supported: Transformer, Pooling, Dense, Normalize)",
                        modules_path.display()
                    )))
                }
            }
        }
        Ok(SentenceConfig {
            pooling: pooling.unwrap_or_else(|| Pooling::new(vec![PoolingMode::Mean])),
            normalize,
            dense,
            max_seq_length,
            from_modules: true,
        })
    }
}

/// A `Dense` module's `config.json` (sentence-transformers' `Dense.get_config_dict`).
fn read_dense(dir: &Path) -> Result<DenseConfig> {
    let path = dir.join("config.json");
    let v: serde_json::Value = super::read_json(&path)?;
    let bad = |field: &str, reason: String| InferError::Config {
        path: path.clone(),
        field: field.into(),
        reason,
    };
    let dim = |field: &str| -> Result<usize> {
        match v.get(field) {
            None | Some(serde_json::Value::Null) => Err(bad(field, "missing".into())),
            Some(x) => match x.as_u64() {
                Some(n) if n > 0 && n <= 1 << 24 => Ok(n as usize),
                _ => Err(bad(
                    field,
                    format!("expected a positive integer, found {x}"),
                )),
            },
        }
    };
    let flag = |field: &str, default: bool| -> Result<bool> {
        match v.get(field) {
            None | Some(serde_json::Value::Null) => Ok(default),
            Some(x) => x
                .as_bool()
                .ok_or_else(|| bad(field, format!("expected true or false, found {x}"))),
        }
    };
    let in_features = dim("in_features")?;
    let out_features = dim("out_features")?;
    let bias = flag("bias", true)?;
    let use_residual = flag("use_residual", false)?;
    let activation = match v.get("activation_function") {
        // The constructor's default.
        None | Some(serde_json::Value::Null) => DenseActivation::Tanh,
        Some(x) => {
            let s = x.as_str().ok_or_else(|| {
                bad(
                    "activation_function",
                    format!("expected a string, found {x}"),
                )
            })?;
            if s.starts_with("torch.") {
                DenseActivation::from_class_path(s).ok_or_else(|| {
                    bad(
                        "activation_function",
                        format!(
                            "unsupported activation `{s}` (supported: {})",
                            DenseActivation::NAMES
                        ),
                    )
                })?
            } else {
                // sentence-transformers loads a non-torch class only with trust_remote_code; we
                // cannot run arbitrary code, so this is an error rather than its Tanh fallback.
                return Err(bad(
                    "activation_function",
                    format!(
                        "`{s}` is not a torch activation (supported: {})",
                        DenseActivation::NAMES
                    ),
                ));
            }
        }
    };
    for field in ["module_input_name", "module_output_name"] {
        if let Some(x) = v.get(field).filter(|x| !x.is_null()) {
            if x.as_str() != Some("sentence_embedding") {
                return Err(InferError::Unsupported(format!(
                    "{}: field `{field}` is {x}; only Dense modules on `sentence_embedding` are supported",
                    path.display()
                )));
            }
        }
    }
    Ok(DenseConfig {
        dir: dir.to_path_buf(),
        in_features,
        out_features,
        bias,
        activation,
        use_residual,
    })
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

/// A module's `path` from modules.json must name a folder inside the model directory (or the
/// directory itself, `""`): relative, with no `..`, so a crafted modules.json cannot make the
/// loader read files elsewhere.
fn module_dir(dir: &Path, rel: &str, modules_path: &Path) -> Result<std::path::PathBuf> {
    use std::path::Component;
    let p = Path::new(rel);
    if p.components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(InferError::Config {
            path: modules_path.to_path_buf(),
            field: "path".into(),
            reason: format!("module path `{rel}` leaves the model directory"),
        });
    }
    Ok(dir.join(p))
}

/// `max_seq_length` from `sentence_bert_config.json`, else a sane `model_max_length` from
/// `tokenizer_config.json`. (The truncation block inside `tokenizer.json` is not the model's
/// limit and is ignored.)
fn read_max_seq_length(dir: &Path) -> Result<Option<usize>> {
    let sb = dir.join("sentence_bert_config.json");
    if sb.is_file() {
        let v: serde_json::Value = super::read_json(&sb)?;
        match v.get("max_seq_length") {
            None | Some(serde_json::Value::Null) => {}
            Some(x) => match x.as_u64() {
                // Like `--max-length 0`: a limit of zero tokens embeds nothing.
                Some(n) if n >= 1 => return Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
                _ => {
                    return Err(InferError::Config {
                        path: sb,
                        field: "max_seq_length".into(),
                        reason: format!("expected a positive integer, found {x}"),
                    })
                }
            },
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
