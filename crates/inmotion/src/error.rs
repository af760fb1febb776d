//! The one error type of the crate. Every variant names the file and the field, tensor or line
//! at fault, so the CLI's one-line message is enough to fix the artifact or the input.

pub use kin_infer_core::ErrorKind;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: invalid JSON: {reason}")]
    Json { path: PathBuf, reason: String },
    /// A meta.json (or golden) field is missing, ill-typed or out of range.
    #[error("{path}: field `{field}`: {reason}")]
    Field {
        path: PathBuf,
        field: String,
        reason: String,
    },
    /// A tensor is missing, extra, of the wrong shape or dtype.
    #[error("{path}: tensor `{name}`: {reason}")]
    Tensor {
        path: PathBuf,
        name: String,
        reason: String,
    },
    #[error("{path}: invalid safetensors file: {reason}")]
    Safetensors { path: PathBuf, reason: String },
    #[error("{path}: weights_sha256 mismatch: meta.json declares {declared}, the file hashes to {actual}")]
    Sha256 {
        path: PathBuf,
        declared: String,
        actual: String,
    },
    /// Bad user input (a window, a stream line, a CSV row).
    #[error("{0}")]
    Input(String),
    /// A load or run that cannot fit in the memory this process may use.
    #[error("{0}")]
    Memory(String),
    /// The engine below refused (an unsupported SIMD tier, a backend that cannot start).
    #[error(transparent)]
    Infer(#[from] kin_infer_core::InferError),
}

impl Error {
    /// The kind of this error, in kin-infer's one family of kinds, so a caller that runs
    /// both engines handles their errors alike.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            Error::Io { .. } => ErrorKind::Resource,
            Error::Json { .. }
            | Error::Field { .. }
            | Error::Tensor { .. }
            | Error::Safetensors { .. }
            | Error::Sha256 { .. } => ErrorKind::InvalidModel,
            Error::Input(_) => ErrorKind::InvalidInput,
            Error::Memory(_) => ErrorKind::Resource,
            Error::Infer(e) => e.kind(),
        }
    }
}

impl Error {
    pub(crate) fn field(path: &std::path::Path, field: &str, reason: impl Into<String>) -> Self {
        Error::Field {
            path: path.to_path_buf(),
            field: field.to_string(),
            reason: reason.into(),
        }
    }
    pub(crate) fn tensor(path: &std::path::Path, name: &str, reason: impl Into<String>) -> Self {
        Error::Tensor {
            path: path.to_path_buf(),
            name: name.to_string(),
            reason: reason.into(),
        }
    }
}
