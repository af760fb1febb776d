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
    #[error("{path}: invalid GGUF file: {reason}")]
    Gguf { path: PathBuf, reason: String },
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
    /// Tokens that would end past the model's context or a cache's capacity: `tokens` asked
    /// for, `limit` available; the message says which limit.
    #[error("invalid input: {message}")]
    ContextExceeded {
        message: String,
        tokens: usize,
        limit: usize,
    },
    #[error("invalid input: token id {id} is outside the vocabulary (size {vocab})")]
    TokenOutOfVocabulary { id: u32, vocab: usize },
    #[error("model directory `{0}` not found (and not a repo id in the local Hugging Face cache)")]
    ModelNotFound(String),
    /// A `--model` value that names nothing loadable; the message says what was tried (paths,
    /// the data dir, the Hugging Face cache) and the offline ways to get the model.
    #[error("{message}")]
    ModelUnresolved { spec: String, message: String },
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("golden file {path}: {reason}")]
    Golden { path: PathBuf, reason: String },
    #[error("thread pool: {0}")]
    Threads(String),
    /// A GPU device failed at run time (validation, out of memory, device lost).
    #[error("GPU device: {0}")]
    Device(String),
    /// The model computed a NaN or an infinity (poisoned or overflowing weights): refused
    /// rather than sampled from, since every token drawn from such logits is meaningless.
    #[error("the model produced a non-finite value ({what}); check its weights")]
    NonFinite { what: String },
    /// A load or run whose estimated memory cannot fit (see `resource::check_fits`).
    #[error("{what} needs about {} of memory, more than {limit} allows ({})", crate::units::human_bytes(*needed_bytes), crate::units::human_bytes(*limit_bytes))]
    OutOfMemory {
        what: String,
        needed_bytes: u64,
        limit_bytes: u64,
        limit: &'static str,
    },
}

/// What kind of failure an error is, for callers that map errors to status codes (a server:
/// 400 for invalid input and out-of-vocabulary tokens, 413/400 for context exceeded, 501 for
/// unsupported, 404 for a missing model, 507/503 for resources, 500 otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed (empty, wrong shape, bad parameter).
    InvalidInput,
    /// The request does not fit the model's context or the session's cache.
    ContextExceeded,
    /// A token id outside the vocabulary.
    TokenOutOfVocabulary,
    /// The model or request uses something this build does not support.
    Unsupported,
    /// The model directory or a file in it does not exist.
    NotFound,
    /// Memory or threads could not be had.
    Resource,
    /// A model file is malformed (config, tensors, golden).
    InvalidModel,
}

impl InferError {
    /// The kind of this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        use InferError::*;
        match self {
            Input(_) | Tokenizer { .. } => ErrorKind::InvalidInput,
            ContextExceeded { .. } => ErrorKind::ContextExceeded,
            TokenOutOfVocabulary { .. } => ErrorKind::TokenOutOfVocabulary,
            Unsupported(_)
            | UnsupportedModel { .. }
            | UnsupportedDtype { .. }
            | UnsupportedSimd { .. } => ErrorKind::Unsupported,
            ModelNotFound(_) | ModelUnresolved { .. } => ErrorKind::NotFound,
            Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            OutOfMemory { .. } | Threads(_) | Device(_) => ErrorKind::Resource,
            Io { .. }
            | Safetensors { .. }
            | Gguf { .. }
            | Json { .. }
            | Config { .. }
            | MissingTensor { .. }
            | ShapeMismatch { .. }
            | Golden { .. }
            | NonFinite { .. } => ErrorKind::InvalidModel,
        }
    }

    /// An input error unless `got` (of `what`, e.g. "token_type_ids rows") equals `want`
    /// (of `per`, e.g. "sequences"): "{got} {what} for {want} {per}".
    pub fn counts_match(what: &str, got: usize, per: &str, want: usize) -> Result<()> {
        if got == want {
            return Ok(());
        }
        Err(InferError::Input(format!("{got} {what} for {want} {per}")))
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        InferError::Io {
            path: path.into(),
            err: source,
        }
    }
}
