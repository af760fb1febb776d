//! The one error type of the library. Variants carry structured fields so a caller (and the
//! CLI's message) can say exactly which file, tensor or field was at fault.

use std::path::PathBuf;

pub type Result<T, E = InferError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// The I/O error is part of the message (not a `source`), so a printed chain names it once.
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: invalid safetensors file: {reason}")]
    Safetensors { path: PathBuf, reason: String },
    #[error("{path}: invalid JSON: {reason}")]
    Json { path: PathBuf, reason: String },
    #[error("{path}: field `{field}`: {reason}")]
    Config {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error("unsupported model_type `{model_type}` in {path}; supported: {}", supported.join(", "))]
    UnsupportedModel {
        path: PathBuf,
        model_type: String,
        supported: Vec<&'static str>,
    },
    #[error("tensor `{name}` not found; tried prefixes {} in {file}", tried.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", "))]
    MissingTensor {
        name: String,
        tried: Vec<String>,
        file: PathBuf,
    },
    #[error("tensor `{name}` in {file} has shape {actual:?}, but the config implies {expected:?}")]
    ShapeMismatch {
        name: String,
        file: PathBuf,
        expected: Vec<usize>,
        actual: Vec<usize>,
    },
    #[error("tensor `{name}` in {file} has dtype {dtype}, which is not supported here (supported: F32, F16, BF16)")]
    UnsupportedDtype {
        name: String,
        file: PathBuf,
        dtype: String,
    },
    #[error("SIMD tier `{requested}` is not available on this CPU (available: {})", available.join(", "))]
    UnsupportedSimd {
        requested: String,
        available: Vec<&'static str>,
    },
    #[error("no tokenizer: {reason}")]
    Tokenizer { reason: String },
    #[error("invalid input: {0}")]
    Input(String),
    #[error("model directory `{0}` not found (and not a repo id in the local Hugging Face cache)")]
    ModelNotFound(String),
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("golden file {path}: {reason}")]
    Golden { path: PathBuf, reason: String },
    #[error("thread pool: {0}")]
    Threads(String),
    /// A load or run whose estimated memory cannot fit (see `resource::check_fits`).
    #[error("{what} needs about {} of memory, more than {limit} allows ({})", crate::resource::human_bytes(*needed_bytes), crate::resource::human_bytes(*limit_bytes))]
    OutOfMemory {
        what: String,
        needed_bytes: u64,
        limit_bytes: u64,
        limit: &'static str,
    },
}

impl InferError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        InferError::Io {
            path: path.into(),
            err: source,
        }
    }
}
