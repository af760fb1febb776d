//! The sharded corpus run's driver-side functions (`kin_infer.ray` calls them): index the
//! input, start or resume a run, list unfinished shards, merge, read a shard back.

use crate::{f32_bytes, invalid, py_err};
use kin_infer::corpus::RunIdentity;
use kin_infer::shards;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use std::path::Path;

/// Indexes `input` into spans of `shard_items` items and writes (or checks, on a resume)
/// `run.json` in `run_dir` for `identity` (the JSON of `Embedder.identity`). Returns the run
/// manifest as JSON.
#[pyfunction]
fn prepare_run(
    py: Python<'_>,
    run_dir: &str,
    input: &str,
    jsonl: bool,
    shard_items: u64,
    identity: &str,
) -> PyResult<String> {
    let identity: RunIdentity = serde_json::from_str(identity)
        .map_err(|e| invalid(format!("identity is not a run identity: {e}")))?;
    let run = py
        .detach(|| {
            let index = shards::index_input(Path::new(input), jsonl, shard_items)?;
            shards::prepare_run(Path::new(run_dir), identity, index)
        })
        .map_err(py_err)?;
    Ok(serde_json::to_string(&run).unwrap_or_default())
}

/// Shards of the run in `run_dir` not finished yet.
#[pyfunction]
fn pending_shards(py: Python<'_>, run_dir: &str) -> PyResult<Vec<usize>> {
    py.detach(|| {
        let dir = Path::new(run_dir);
        shards::pending_shards(dir, &shards::load_run(dir)?)
    })
    .map_err(py_err)
}

/// Concatenates the finished shards into `out` (JSON Lines); (items, bytes, shards).
#[pyfunction]
fn merge(py: Python<'_>, run_dir: &str, out: &str) -> PyResult<(u64, u64, usize)> {
    let r = py
        .detach(|| shards::merge(Path::new(run_dir), Path::new(out)))
        .map_err(py_err)?;
    Ok((r.items, r.bytes, r.shards))
}

/// A finished shard's records: (indices, ids as JSON text, embeddings as flat f32 bytes,
/// width), for writing other formats (Parquet).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn read_shard<'py>(
    py: Python<'py>,
    run_dir: &str,
    k: usize,
) -> PyResult<(Vec<u64>, Vec<String>, Bound<'py, PyByteArray>, usize)> {
    let path = shards::shard_path(Path::new(run_dir), k);
    let text = py
        .detach(|| std::fs::read_to_string(&path))
        .map_err(|e| py_err(kin_infer::InferError::io(&path, e)))?;
    let (mut idx, mut ids, mut rows) = (Vec::new(), Vec::new(), Vec::new());
    for (no, line) in text.lines().enumerate() {
        let bad = |why: &str| invalid(format!("{}: line {}: {why}", path.display(), no + 1));
        let v: serde_json::Value = serde_json::from_str(line).map_err(|_| bad("not JSON"))?;
        idx.push(v["index"].as_u64().ok_or_else(|| bad("no index"))?);
        ids.push(v["id"].to_string());
        let emb = v["embedding"]
            .as_array()
            .ok_or_else(|| bad("no embedding"))?
            .iter()
            .map(|x| {
                x.as_f64()
                    .map(|f| f as f32)
                    .ok_or_else(|| bad("not a number"))
            })
            .collect::<PyResult<Vec<f32>>>()?;
        rows.push(emb);
    }
    let width = rows.first().map_or(0, Vec::len);
    if rows.iter().any(|r| r.len() != width) {
        return Err(invalid(format!(
            "{}: rows of different widths",
            path.display()
        )));
    }
    let bytes = f32_bytes(&rows);
    Ok((idx, ids, PyByteArray::new(py, &bytes), width))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(prepare_run, m)?)?;
    m.add_function(wrap_pyfunction!(pending_shards, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(read_shard, m)?)?;
    Ok(())
}
