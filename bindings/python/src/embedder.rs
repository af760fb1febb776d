//! `kin_infer.Embedder`'s native half.

use crate::{f32_bytes, invalid, py_err};
use kin_infer::corpus::RunIdentity;
use kin_infer::io::hub;
use kin_infer::{EmbedderOptions, Pooling, PoolingMode};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};
use std::path::Path;
use std::sync::{Arc, Mutex};

#[pyclass(frozen, module = "kin_infer._native")]
pub struct Embedder {
    pub(crate) inner: Arc<kin_infer::Embedder>,
    /// The run identity, computed once: it hashes every model file, which a Ray worker would
    /// otherwise redo for each shard it writes.
    identity: Mutex<Option<RunIdentity>>,
}

impl Embedder {
    fn run_identity(&self, input_format: &str) -> kin_infer::Result<RunIdentity> {
        let mut cached = self.identity.lock().unwrap_or_else(|p| p.into_inner());
        if cached.is_none() {
            *cached = Some(RunIdentity::of(&self.inner, input_format)?);
        }
        let mut id = cached.clone().unwrap_or_else(|| unreachable!("set above"));
        id.input_format = input_format.to_string();
        Ok(id)
    }
}

fn parse_pooling(s: &str) -> PyResult<Pooling> {
    let modes = s
        .split('+')
        .map(|m| {
            PoolingMode::parse(m).ok_or_else(|| {
                invalid(format!(
                    "unknown pooling `{m}` (expected one of: {})",
                    PoolingMode::NAMES
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Pooling::new(modes))
}

#[pymethods]
impl Embedder {
    #[new]
    #[pyo3(signature = (path, threads=None, max_length=None, normalize=None, pooling=None, dimensions=None, activations=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &str,
        threads: Option<usize>,
        max_length: Option<usize>,
        normalize: Option<bool>,
        pooling: Option<&str>,
        dimensions: Option<usize>,
        activations: Option<&str>,
    ) -> PyResult<Self> {
        let opts = EmbedderOptions {
            pooling: pooling.map(parse_pooling).transpose()?,
            normalize,
            max_length,
            threads,
            tier: None,
            dimensions,
            activations: activations.map(crate::parse_activations).transpose()?,
        };
        let path = path.to_string();
        let e = py
            .detach(|| {
                let dir = hub::resolve_model(&path)?;
                kin_infer::Embedder::load(&dir, &opts)
            })
            .map_err(py_err)?;
        Ok(Embedder {
            inner: Arc::new(e),
            identity: Mutex::new(None),
        })
    }

    /// Embeds `texts` in batches of `batch_size`; the rows as one flat bytearray of
    /// native-endian f32, `len(texts) * width` values, and the width.
    #[pyo3(signature = (texts, batch_size=32, dimensions=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        batch_size: usize,
        dimensions: Option<usize>,
    ) -> PyResult<(Bound<'py, PyByteArray>, usize)> {
        if batch_size == 0 {
            return Err(invalid("batch_size must be at least 1"));
        }
        let e = &*self.inner;
        let rows = py
            .detach(|| -> kin_infer::Result<Vec<Vec<f32>>> {
                let mut rows = Vec::with_capacity(texts.len());
                for chunk in texts.chunks(batch_size) {
                    let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    if dimensions.is_none() {
                        rows.extend(e.embed_texts(&refs)?);
                        continue;
                    }
                    let enc = e.tokenize(&refs)?;
                    let ids: Vec<&[u32]> = enc.iter().map(|x| x.ids.as_slice()).collect();
                    let types: Vec<&[u32]> = enc.iter().map(|x| x.type_ids.as_slice()).collect();
                    let dims = vec![dimensions; refs.len()];
                    rows.extend(e.embed_tokens_dims(&ids, Some(&types), Some(&dims))?);
                }
                Ok(rows)
            })
            .map_err(py_err)?;
        let width = rows
            .first()
            .map_or_else(|| dimensions.unwrap_or(e.dim()), Vec::len);
        let bytes = py.detach(|| f32_bytes(&rows));
        Ok((PyByteArray::new(py, &bytes), width))
    }

    /// Token ids and type ids of each text, truncated to the model's limit (no padding).
    fn tokenize<'py>(&self, py: Python<'py>, texts: Vec<String>) -> PyResult<Bound<'py, PyDict>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let enc = py.detach(|| self.inner.tokenize(&refs)).map_err(py_err)?;
        let d = PyDict::new(py);
        let ids: Vec<Vec<u32>> = enc.iter().map(|x| x.ids.clone()).collect();
        let types: Vec<Vec<u32>> = enc.iter().map(|x| x.type_ids.clone()).collect();
        let mask: Vec<Vec<u32>> = enc.iter().map(|x| vec![1; x.ids.len()]).collect();
        d.set_item("input_ids", ids)?;
        d.set_item("token_type_ids", types)?;
        d.set_item("attention_mask", mask)?;
        Ok(d)
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn max_length(&self) -> usize {
        self.inner.max_length()
    }
    #[getter]
    fn normalize(&self) -> bool {
        self.inner.normalize()
    }
    #[getter]
    fn pooling(&self) -> String {
        self.inner.pooling().name()
    }
    #[getter]
    fn threads(&self) -> usize {
        self.inner.threads()
    }
    #[getter]
    fn path(&self) -> String {
        self.inner.info().dir.display().to_string()
    }
    #[getter]
    fn family(&self) -> String {
        self.inner.config().architecture.name().to_string()
    }
    #[getter]
    fn tier(&self) -> String {
        self.inner.tier().name().to_string()
    }
    /// The activation numerics it runs: `q8` or `f32`.
    #[getter]
    fn activations(&self) -> &'static str {
        self.inner.numerics().name()
    }
    /// The numerics version its embeddings are pinned to.
    #[getter]
    fn numerics_version(&self) -> &'static str {
        self.inner.numerics().version()
    }

    /// The JSON of what decides a corpus run's output bytes (model hash, numerics version,
    /// settings), as `kin-infer embed --resume` records it.
    #[pyo3(signature = (input_format="jsonl"))]
    fn identity(&self, py: Python<'_>, input_format: &str) -> PyResult<String> {
        if input_format != "jsonl" && input_format != "lines" {
            return Err(invalid(format!(
                "input format `{input_format}` (expected jsonl or lines)"
            )));
        }
        let id = py
            .detach(|| self.run_identity(input_format))
            .map_err(py_err)?;
        Ok(serde_json::to_string(&id).unwrap_or_default())
    }

    /// Embeds shard `k` of the sharded run in `run_dir` (see `kin_infer::shards`);
    /// (items found already durable, items embedded now).
    /// A shard locked by another worker is waited for up to `lock_wait_s` seconds.
    #[pyo3(signature = (run_dir, k, batch_size=32, lock_wait_s=300.0))]
    fn write_shard(
        &self,
        py: Python<'_>,
        run_dir: &str,
        k: usize,
        batch_size: usize,
        lock_wait_s: f64,
    ) -> PyResult<(u64, u64)> {
        let wait = std::time::Duration::try_from_secs_f64(lock_wait_s)
            .map_err(|_| invalid("lock_wait_s must be a non-negative number of seconds"))?;
        let dir = Path::new(run_dir);
        let e = &*self.inner;
        let out = py
            .detach(|| {
                let run = kin_infer::shards::load_run(dir)?;
                let id = self.run_identity(&run.identity.input_format)?;
                kin_infer::shards::write_shard(e, &id, dir, k, batch_size, wait)
            })
            .map_err(py_err)?;
        Ok((out.resumed, out.embedded))
    }
}
