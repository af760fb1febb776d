//! [`Model`]: an artifact directory loaded, validated and ready to classify windows.
//!
//! `load` reads meta.json, maps model.safetensors, verifies `weights_sha256` when declared,
//! builds the family's network (packing every weight once for the kernel table), and rejects
//! any tensor the architecture did not consume. After that, [`Model::classify`] allocates
//! nothing: every buffer lives in the network's scratch.

use crate::error::{Error, Result};
use crate::meta::{Hparams, Meta};
use crate::sha256::sha256_hex;
use crate::sigreg::Sigreg;
use crate::transformer::Transformer;
use crate::weights::Store;
use kin_infer::kernels::Kernels;
use std::path::{Path, PathBuf};

enum Net {
    Transformer(Box<Transformer>),
    Sigreg(Box<Sigreg>),
}

pub struct Model {
    pub meta: Meta,
    pub dir: PathBuf,
    /// Number of tensors in model.safetensors.
    pub n_tensors: usize,
    kernels: &'static Kernels,
    net: Net,
    logits: Vec<f32>,
    probs: Vec<f32>,
}

/// The process-wide kernel table (best tier, or `KIN_INFER_SIMD`).
pub fn default_kernels() -> Result<&'static Kernels> {
    kin_infer::kernels::kernels().map_err(|e| Error::Kernels(e.to_string()))
}

/// Reads a whole file, naming it on error.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|err| Error::Io {
        path: path.to_path_buf(),
        err,
    })
}

impl Model {
    /// Loads `dir` with the process-wide kernels.
    pub fn load(dir: &Path) -> Result<Model> {
        Model::load_with(dir, default_kernels()?)
    }

    /// Loads `dir`, packing weights for `kernels` (tests pass each tier's table).
    pub fn load_with(dir: &Path, kernels: &'static Kernels) -> Result<Model> {
        if !dir.is_dir() {
            return Err(Error::Input(format!(
                "artifact `{}` is not a directory",
                dir.display()
            )));
        }
        let meta = Meta::load(&dir.join("meta.json"))?;
        kin_infer::resource::check_fits(
            &format!("running {} at its declared size", dir.display()),
            meta.run_bytes(),
        )
        .map_err(|e| Error::Memory(e.to_string()))?;
        let wpath = dir.join("model.safetensors");
        let file = std::fs::File::open(&wpath).map_err(|err| Error::Io {
            path: wpath.clone(),
            err,
        })?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < 8 {
            return Err(Error::Safetensors {
                path: wpath,
                reason: format!("{len} bytes, shorter than the 8-byte header length"),
            });
        }
        // SAFETY: the map is read-only and dropped before load returns; an artifact modified
        // while loading is outside the contract. Every byte is read (hashed, widened or
        // unpacked), so the pages are faulted in at once (MAP_POPULATE) rather than one by one.
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(|err| {
            Error::Io {
                path: wpath.clone(),
                err,
            }
        })?;
        if let Some(declared) = &meta.weights_sha256 {
            let actual = sha256_hex(&map);
            if &actual != declared {
                return Err(Error::Sha256 {
                    path: dir.join("meta.json"),
                    declared: declared.clone(),
                    actual,
                });
            }
        }
        let q = &meta.quantization;
        let store = Store::parse(&wpath, &map, q.int, &q.tensors)?;
        let net = match &meta.hparams {
            Hparams::Transformer(h) => {
                Net::Transformer(Box::new(Transformer::load(kernels, &store, &meta, h)?))
            }
            Hparams::Sigreg(h) => Net::Sigreg(Box::new(Sigreg::load(kernels, &store, &meta, h)?)),
        };
        store.finish()?;
        let k = meta.num_classes;
        Ok(Model {
            n_tensors: store.len(),
            dir: dir.to_path_buf(),
            meta,
            kernels,
            net,
            logits: vec![0.0; k],
            probs: vec![0.0; k],
        })
    }

    pub fn kernels(&self) -> &'static Kernels {
        self.kernels
    }

    /// Tokens the transformer makes per window (None for sigreg).
    pub fn n_tokens(&self) -> Option<usize> {
        match &self.net {
            Net::Transformer(t) => Some(t.n_tokens()),
            Net::Sigreg(_) => None,
        }
    }

    /// Logits of one preprocessed window `[seq_len, in_channels]` (row-major).
    ///
    /// # Panics
    /// If `x.len() != seq_len * in_channels` (callers validate input first).
    pub fn forward(&mut self, x: &[f32]) -> &[f32] {
        assert_eq!(x.len(), self.meta.window_len(), "window length");
        match &mut self.net {
            Net::Transformer(t) => t.forward(self.kernels, x, &mut self.logits),
            Net::Sigreg(s) => s.forward(self.kernels, x, &mut self.logits),
        }
        &self.logits
    }

    /// [`Model::classify`], but a window whose logits are not all finite (a finite input can
    /// overflow to infinity and then NaN) is an error naming the first bad logit, so no
    /// caller reports a class for it. `what` names the window in the message.
    pub fn classify_finite(&mut self, x: &[f32], what: &str) -> Result<(&[f32], &[f32])> {
        self.classify(x);
        if let Some((j, v)) = self.logits.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::Input(format!(
                "{what}: the model's output is not finite (logit {j} is {v}); no class can be \
                 reported for this window"
            )));
        }
        Ok((&self.logits, &self.probs))
    }

    /// Logits and softmax probabilities of one window.
    pub fn classify(&mut self, x: &[f32]) -> (&[f32], &[f32]) {
        self.forward(x);
        self.probs.copy_from_slice(&self.logits);
        self.kernels.softmax(&mut self.probs);
        (&self.logits, &self.probs)
    }
}

/// Index and value of the largest probability (first on ties).
pub fn argmax(p: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, &v) in p.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best
}

/// sha256 of the artifact's model.safetensors (recorded by `bench`).
pub fn weights_sha256(dir: &Path) -> Result<String> {
    Ok(sha256_hex(&read_file(&dir.join("model.safetensors"))?))
}
