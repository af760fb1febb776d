//! [`Model`]: an artifact directory loaded, validated and ready to classify windows.
//!
//! `load` reads meta.json, maps model.safetensors, verifies `weights_sha256` when declared,
//! builds the family's network on a kin-infer backend (every weight prepared once), and
//! rejects any tensor the architecture did not consume. After that, [`Model::classify`]
//! allocates nothing: every buffer lives in the network's scratch (and the CPU backend's
//! per-thread scratch, sized on the first window).

use crate::error::{Error, Result};
use crate::meta::{Hparams, Meta};
use crate::sha256::sha256_hex;
use crate::sigreg::Sigreg;
use crate::transformer::Transformer;
use crate::weights::Store;
use kin_infer_core::backend::{Backend, CpuCompute, Tensor};
use kin_infer_core::kernels::Tier;
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
    /// Weight matrices kept as integer codes in memory, and the bytes their panels hold.
    pub codes_in_memory: (usize, usize),
    be: Box<dyn Backend>,
    net: Net,
    logits: Tensor,
    probs: Tensor,
    /// Where `read` copies a device tensor (unused on the CPU, which reads in place).
    staging: (Vec<f32>, Vec<f32>),
}

/// The process-wide tier (best present, or `KIN_INFER_SIMD`).
pub fn default_tier() -> Result<Tier> {
    Ok(CpuCompute::new()?.tier())
}

/// Reads a whole file, naming it on error.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|err| Error::Io {
        path: path.to_path_buf(),
        err,
    })
}

impl Model {
    /// Loads `dir` on the CPU backend at the process-wide tier.
    pub fn load(dir: &Path) -> Result<Model> {
        Model::load_with(dir, default_tier()?)
    }

    /// Loads `dir` on the CPU backend at `tier` (tests run every tier).
    pub fn load_with(dir: &Path, tier: Tier) -> Result<Model> {
        Model::load_on(dir, Box::new(CpuCompute::with_tier(tier)?))
    }

    /// Loads `dir` onto `be`.
    pub fn load_on(dir: &Path, be: Box<dyn Backend>) -> Result<Model> {
        Model::load_on_with(dir, be, true)
    }

    /// [`Model::load_on`]; `keep_codes`: a quantized artifact's weight matrices stay 2-8-bit
    /// codes in memory (the default), else they are dequantized to f32 at load. The outputs
    /// are the same bits either way.
    pub fn load_on_with(dir: &Path, be: Box<dyn Backend>, keep_codes: bool) -> Result<Model> {
        if !dir.is_dir() {
            return Err(Error::Input(format!(
                "artifact `{}` is not a directory",
                dir.display()
            )));
        }
        let meta = Meta::load(&dir.join("meta.json"))?;
        kin_infer_core::resource::check_fits(
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
        let mut store = Store::parse(&wpath, &map, q.int, &q.tensors)?;
        if !keep_codes {
            store = store.dequantize_at_load();
        }
        let net = match &meta.hparams {
            Hparams::Transformer(h) => {
                Net::Transformer(Box::new(Transformer::load(&*be, &store, &meta, h)?))
            }
            Hparams::Sigreg(h) => Net::Sigreg(Box::new(Sigreg::load(&*be, &store, &meta, h)?)),
        };
        store.finish()?;
        let k = meta.num_classes;
        Ok(Model {
            n_tensors: store.len(),
            codes_in_memory: store.kept(),
            dir: dir.to_path_buf(),
            meta,
            logits: be.zeros(k),
            probs: be.zeros(k),
            be,
            net,
            staging: (Vec::new(), Vec::new()),
        })
    }

    /// The kernel tier the backend runs.
    pub fn tier(&self) -> Tier {
        self.be.tier()
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
        let be = &*self.be;
        match &mut self.net {
            Net::Transformer(t) => t.forward(be, x, &mut self.logits),
            Net::Sigreg(s) => s.forward(be, x, &mut self.logits),
        }
        be.read(self.logits.view(), &mut self.staging.0)
    }

    /// [`Model::classify`], but a window whose logits are not all finite (a finite input can
    /// overflow to infinity and then NaN) is an error naming the first bad logit, so no
    /// caller reports a class for it. `what` names the window in the message.
    pub fn classify_finite(&mut self, x: &[f32], what: &str) -> Result<(&[f32], &[f32])> {
        let (logits, probs) = self.classify(x);
        if let Some((j, v)) = logits.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::Input(format!(
                "{what}: the model's output is not finite (logit {j} is {v}); no class can be \
                 reported for this window"
            )));
        }
        Ok((logits, probs))
    }

    /// Logits and softmax probabilities of one window.
    pub fn classify(&mut self, x: &[f32]) -> (&[f32], &[f32]) {
        self.forward(x);
        let be = &*self.be;
        let k = self.logits.len();
        be.copy(self.logits.view(), self.probs.at_mut(..));
        be.softmax(self.probs.at_mut(..), k);
        let (sl, sp) = &mut self.staging;
        (
            be.read(self.logits.view(), sl),
            be.read(self.probs.view(), sp),
        )
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
