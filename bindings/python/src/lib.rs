//! The `kin_infer._native` extension module: thin PyO3 wrappers over the engine's library API
//! (`kin_infer::Embedder`, `kin_infer::Generator`, `kin_infer::shards`, `inmotion::Model`).
//! The Python package (`python/kin_infer`) adds numpy arrays, iterators and docstrings on
//! top; everything that computes runs here with the GIL released, so Python threads (and the
//! engine's own worker threads) run while it works.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

mod embedder;
mod generator;
mod motion;
mod shards;

/// A Python exception of class `kind` from `kin_infer.errors` (defined in Python so that
/// each can also derive from the builtin it refines, e.g. `InvalidInputError(ValueError)`).
pub(crate) fn raise(kind: &str, msg: String) -> PyErr {
    Python::attach(|py| {
        let cls = py
            .import("kin_infer.errors")
            .and_then(|m| m.getattr(kind))
            .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
        match cls {
            Ok(t) => PyErr::from_type(t, msg),
            Err(_) => PyRuntimeError::new_err(msg),
        }
    })
}

/// The engine's typed error as the matching Python exception, with the same message.
pub(crate) fn py_err(e: kin_infer::InferError) -> PyErr {
    use kin_infer::ErrorKind::*;
    let kind = match e.kind() {
        InvalidInput | TokenOutOfVocabulary => "InvalidInputError",
        ContextExceeded => "ContextExceededError",
        Unsupported => "UnsupportedError",
        NotFound => "ModelNotFoundError",
        Resource => "ResourceError",
        InvalidModel => "InvalidModelError",
    };
    raise(kind, e.to_string())
}

pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    raise("InvalidInputError", msg.into())
}

/// `activations=`: `auto`, `q8` or `f32`.
pub(crate) fn parse_activations(s: &str) -> PyResult<kin_infer::Activations> {
    kin_infer::Activations::parse(s).ok_or_else(|| {
        invalid(format!(
            "activations=`{s}` is not an activation mode (expected one of: {})",
            kin_infer::Activations::NAMES
        ))
    })
}

/// f32 values as native-endian bytes (numpy reads them with `frombuffer`).
pub(crate) fn f32_bytes(rows: &[Vec<f32>]) -> Vec<u8> {
    let n: usize = rows.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(n * 4);
    for r in rows {
        for x in r {
            out.extend_from_slice(&x.to_ne_bytes());
        }
    }
    out
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NUMERICS_VERSION", kin_infer::NUMERICS_VERSION)?;
    m.add("Q8_NUMERICS_VERSION", kin_infer::Q8_NUMERICS_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<embedder::Embedder>()?;
    m.add_class::<generator::Generator>()?;
    m.add_class::<generator::Stream>()?;
    m.add_class::<motion::Model>()?;
    shards::register(m)?;
    Ok(())
}
