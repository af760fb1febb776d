//! The one error type of the crate. Every variant names the file and the field, tensor or line
//! at fault, so the CLI's one-line message is enough to fix the artifact or the input.

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
    #[error("{0}")]
    Kernels(String),
    /// A load or run that cannot fit in the memory this process may use.
    #[error("{0}")]
    Memory(String),
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
