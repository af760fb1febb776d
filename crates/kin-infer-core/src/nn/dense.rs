//! sentence-transformers' `Dense` module: `act(x · Wᵀ + b)` on the pooled sentence embedding
//! (optionally plus a residual), between pooling and normalization. sentence-t5, GTR and many
//! fine-tuned models project their embedding with one; it works after any encoder family.
//!
//! Its configuration is parsed by [`crate::io::st_config`] (`N_Dense/config.json`); the
//! weights are `linear.weight` / `linear.bias` (and `residual.weight` for a projected
//! residual) in `N_Dense/model.safetensors`.

use crate::backend::StoredRows;
use crate::backend::{Act, DeviceMatrix, GpuCompute, Tensor, View};
use crate::error::{InferError, Result};
use crate::io::safetensors::{WeightStore, Weights};
use std::path::PathBuf;

/// The activation named by `activation_function` (a torch module class path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseActivation {
    Identity,
    Tanh,
    Relu,
    /// `torch.nn.GELU()` with its default `approximate='none'`: the erf form.
    Gelu,
}

impl DenseActivation {
    /// Supported class paths, for error messages.
    pub const NAMES: &'static str = "torch.nn.modules.linear.Identity, torch.nn.modules.activation.Tanh, torch.nn.modules.activation.ReLU, torch.nn.modules.activation.GELU";

    /// From a torch class path such as `torch.nn.modules.activation.Tanh` (the last component
    /// decides; `None` if unknown).
    pub fn from_class_path(path: &str) -> Option<Self> {
        Some(match path.rsplit('.').next().unwrap_or(path) {
            "Identity" => DenseActivation::Identity,
            "Tanh" => DenseActivation::Tanh,
            "ReLU" => DenseActivation::Relu,
            "GELU" => DenseActivation::Gelu,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DenseActivation::Identity => "identity",
            DenseActivation::Tanh => "tanh",
            DenseActivation::Relu => "relu",
            DenseActivation::Gelu => "gelu (erf)",
        }
    }
}

/// A `Dense` module's configuration (from `N_Dense/config.json`), validated.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseConfig {
    /// The module directory (`N_Dense`).
    pub dir: PathBuf,
    pub in_features: usize,
    pub out_features: usize,
    pub bias: bool,
    pub activation: DenseActivation,
    /// `use_residual`: add the input (projected by `residual.weight` when the widths differ).
    pub use_residual: bool,
}

/// A loaded `Dense` module.
pub struct Dense {
    cfg: DenseConfig,
    weight: DeviceMatrix,
    bias: Option<Tensor>,
    /// `residual.weight` (`[out, in]`, no bias) when `use_residual` and the widths differ.
    residual: Option<DeviceMatrix>,
}

impl Dense {
    /// Loads the weights from `cfg.dir/model.safetensors`. A directory with only
    /// `pytorch_model.bin` is a typed `Unsupported` error naming that file.
    pub fn load(cfg: &DenseConfig, be: &dyn GpuCompute) -> Result<Self> {
        let st = cfg.dir.join("model.safetensors");
        if !st.is_file() {
            let bin = cfg.dir.join("pytorch_model.bin");
            if bin.is_file() {
                return Err(InferError::Unsupported(format!(
                    "{}: Dense weights in pickle format; only model.safetensors is supported (convert it with safetensors' `save_file`)",
                    bin.display()
                )));
            }
            return Err(InferError::io(
                &st,
                std::io::Error::new(std::io::ErrorKind::NotFound, "Dense weights not found"),
            ));
        }
        let store = WeightStore::open_files(std::slice::from_ref(&st), st.clone())?;
        let w = Weights::with_prefixes(&store, &[""], "linear.weight")?;
        let (i, o) = (cfg.in_features, cfg.out_features);
        let lw = w.get("linear.weight", &[o, i])?;
        let bias = if cfg.bias {
            Some(be.upload(w.get("linear.bias", &[o])?.to_vec()))
        } else {
            None
        };
        let residual = if cfg.use_residual && i != o {
            let r = w.get("residual.weight", &[o, i])?;
            Some(be.prepare_weights(&[StoredRows::F32(&r)], i)?)
        } else {
            None
        };
        Ok(Dense {
            weight: be.prepare_weights(&[StoredRows::F32(&lw)], i)?,
            cfg: cfg.clone(),
            bias,
            residual,
        })
    }

    pub fn config(&self) -> &DenseConfig {
        &self.cfg
    }

    pub fn in_features(&self) -> usize {
        self.cfg.in_features
    }

    pub fn out_features(&self) -> usize {
        self.cfg.out_features
    }

    /// For `describe`: e.g. "dense 768 → 768, no bias, identity".
    pub fn describe(&self) -> String {
        format!(
            "dense {} → {}, {}, {}{}",
            self.cfg.in_features,
            self.cfg.out_features,
            if self.cfg.bias { "bias" } else { "no bias" },
            self.cfg.activation.name(),
            if self.cfg.use_residual {
                " + residual"
            } else {
                ""
            }
        )
    }

    /// `rows` embeddings of `in_features` in, `rows` of `out_features` out. Each row is
    /// computed alone (GEMM rows never interact), so batching changes no bits.
    pub fn forward(&self, be: &dyn GpuCompute, x: View, rows: usize) -> Tensor {
        let o = self.cfg.out_features;
        let mut out = be.zeros(rows * o);
        be.linear(x, rows, &self.weight, self.bias.as_ref(), out.at_mut(..));
        match self.cfg.activation {
            DenseActivation::Identity => {}
            DenseActivation::Tanh => be.activation(out.at_mut(..), Act::Tanh),
            DenseActivation::Relu => be.activation(out.at_mut(..), Act::Relu),
            DenseActivation::Gelu => be.activation(out.at_mut(..), Act::GeluErf),
        }
        if self.cfg.use_residual {
            match &self.residual {
                Some(r) => {
                    let mut res = be.zeros(rows * o);
                    be.linear(x, rows, r, None, res.at_mut(..));
                    be.add(out.at_mut(..), res.view());
                }
                None => be.add(out.at_mut(..), x),
            }
        }
        out
    }
}
