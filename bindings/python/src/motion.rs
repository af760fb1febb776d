//! `kin_infer.inmotion.Model`'s native half: an inMotion artifact (the edge classifiers) on
//! the same runtime as `inmotion-infer`.

use crate::{invalid, raise};
use inmotion::golden::{self, Golden};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};
use std::path::Path;
use std::sync::Mutex;

#[pyclass(frozen, module = "kin_infer._native")]
pub struct Model {
    // A model owns its forward scratch, so one call runs at a time. The lock is only ever
    // taken with the GIL released (a thread waiting for it while holding the GIL would
    // deadlock with the holder, which needs the GIL back to return); what the getters read
    // is copied out at load.
    inner: Mutex<inmotion::Model>,
    meta: inmotion::meta::Meta,
}

fn motion_err(e: inmotion::Error) -> PyErr {
    let kind = match &e {
        inmotion::Error::Input(_) => "InvalidInputError",
        inmotion::Error::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound => {
            "ModelNotFoundError"
        }
        _ => "InvalidModelError",
    };
    raise(kind, e.to_string())
}

impl Model {
    fn lock(&self) -> std::sync::MutexGuard<'_, inmotion::Model> {
        // A panic inside a forward pass would poison the lock; the model holds no invariant a
        // panic could break halfway that a later call relies on (scratch is overwritten).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl Model {
    #[new]
    fn new(py: Python<'_>, artifact_dir: &str) -> PyResult<Self> {
        if !Path::new(artifact_dir).exists() {
            return Err(raise(
                "ModelNotFoundError",
                format!("artifact directory `{artifact_dir}` not found"),
            ));
        }
        let m = py
            .detach(|| inmotion::Model::load(Path::new(artifact_dir)))
            .map_err(motion_err)?;
        Ok(Model {
            meta: m.meta.clone(),
            inner: Mutex::new(m),
        })
    }

    /// Classifies `n` windows given as native-endian f32 bytes, `[n, seq_len, in_channels]`
    /// (or `[n, seq_len]` raw readings with `raw`, preprocessed as the artifact declares);
    /// (probabilities, logits) as flat f32 bytearrays of `n * num_classes` values.
    #[pyo3(signature = (data, n, raw=false))]
    fn classify<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        n: usize,
        raw: bool,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>)> {
        let meta = &self.meta;
        let (t, c, k) = (meta.seq_len, meta.in_channels, meta.num_classes);
        let per = if raw { t } else { t * c };
        if data.len() != n * per * 4 {
            return Err(invalid(format!(
                "{} bytes for {n} windows of {per} float32 values",
                data.len()
            )));
        }
        let pre = match (raw, &meta.preprocess) {
            (false, _) => None,
            (true, Some(p)) => Some(p.clone()),
            (true, None) => {
                return Err(invalid(format!(
                "{}: raw readings need a `preprocess` in the artifact, and this one declares none",
                meta.path.display()
            )))
            }
        };
        let values: Vec<f32> = data
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let (probs, logits) = py
            .detach(|| -> inmotion::Result<(Vec<u8>, Vec<u8>)> {
                let mut m = self.lock();
                let mut probs = Vec::with_capacity(n * k * 4);
                let mut logits = Vec::with_capacity(n * k * 4);
                let mut window = vec![0f32; t * c];
                for (i, w) in values.chunks_exact(per.max(1)).take(n).enumerate() {
                    if let Some((j, v)) = w.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                        return Err(inmotion::Error::Input(format!(
                            "window {i}: value {j} is {v}, not a finite number"
                        )));
                    }
                    let x: &[f32] = match &pre {
                        Some(p) => {
                            inmotion::preprocess::apply(p, w, &mut window);
                            &window
                        }
                        None => w,
                    };
                    let (l, p) = m.classify_finite(x, &format!("window {i}"))?;
                    for v in p {
                        probs.extend_from_slice(&v.to_ne_bytes());
                    }
                    for v in l {
                        logits.extend_from_slice(&v.to_ne_bytes());
                    }
                }
                Ok((probs, logits))
            })
            .map_err(motion_err)?;
        Ok((PyByteArray::new(py, &probs), PyByteArray::new(py, &logits)))
    }

    /// Replays a golden file (or `DIR/golden.json`), as `inmotion-infer check` does.
    fn check<'py>(&self, py: Python<'py>, golden: &str) -> PyResult<Bound<'py, PyDict>> {
        let r = py
            .detach(|| -> inmotion::Result<golden::Report> {
                let mut m = self.lock();
                let g = Golden::load(&golden::resolve(Path::new(golden)), &m.meta)?;
                Ok(golden::check(&mut m, &g))
            })
            .map_err(motion_err)?;
        let d = PyDict::new(py);
        d.set_item("passed", r.passed())?;
        d.set_item("cases", r.cases)?;
        d.set_item("max_abs_diff", r.max_diff)?;
        d.set_item("tolerance", r.tol)?;
        let mism: Vec<(usize, usize, f64, f32)> = r
            .mismatches
            .iter()
            .map(|x| (x.case, x.position, x.expected, x.actual))
            .collect();
        d.set_item("mismatches", mism)?;
        Ok(d)
    }

    #[getter]
    fn seq_len(&self) -> usize {
        self.meta.seq_len
    }
    #[getter]
    fn in_channels(&self) -> usize {
        self.meta.in_channels
    }
    #[getter]
    fn num_classes(&self) -> usize {
        self.meta.num_classes
    }
    #[getter]
    fn classes(&self) -> Option<Vec<String>> {
        self.meta.classes.clone()
    }
    #[getter]
    fn family(&self) -> String {
        self.meta.family.name().to_string()
    }
    #[getter]
    fn has_preprocess(&self) -> bool {
        self.meta.preprocess.is_some()
    }
}
