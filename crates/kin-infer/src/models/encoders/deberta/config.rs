//! DeBERTa `config.json`: both families' fields, validated once, every error naming its
//! field; both spellings of `pos_att_type` (a list, or the Hub's older `"c2p|p2c"`) and of
//! the dtype (`dtype` / `torch_dtype`). Also what `describe` prints ([`spec_of`]).

use crate::backend::{self, GpuCompute, ViewMut};
use crate::error::{InferError, Result};
use crate::io::config::{Activation, ModelArchitecture};
use crate::io::config_fields::ConfigFields;
use crate::models::EncoderSpec;
use std::path::Path;

/// Activations `ACT2FN` names that this build runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Act {
    Gelu(Activation),
    Tanh,
}

impl Act {
    pub(super) fn parse(name: &str) -> Option<Act> {
        Some(match name {
            "gelu" => Act::Gelu(Activation::GeluErf),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Act::Gelu(Activation::GeluTanh),
            "relu" => Act::Gelu(Activation::Relu),
            "tanh" => Act::Tanh,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Act::Gelu(a) => a.name(),
            Act::Tanh => "tanh",
        }
    }

    /// The backend's activation: ours (never the platform's tanh).
    pub(super) fn backend(self) -> backend::Act {
        match self {
            Act::Gelu(a) => a.into(),
            Act::Tanh => backend::Act::Tanh,
        }
    }

    pub(super) fn apply(self, be: &dyn GpuCompute, x: ViewMut) {
        be.activation(x, self.backend());
    }
}

#[derive(Clone, Debug)]
pub(super) struct ConvConfig {
    pub(super) kernel: usize,
    pub(super) act: Act,
    pub(super) groups: usize,
}

/// A validated DeBERTa / DeBERTa-v2 config.
#[derive(Clone, Debug)]
pub(super) struct DebertaConfig {
    pub(super) v2: bool,
    pub(super) vocab_size: usize,
    pub(super) hidden_size: usize,
    pub(super) embedding_size: usize,
    pub(super) num_hidden_layers: usize,
    pub(super) num_attention_heads: usize,
    pub(super) intermediate_size: usize,
    pub(super) hidden_act: Activation,
    pub(super) max_position_embeddings: usize,
    pub(super) type_vocab_size: usize,
    pub(super) layer_norm_eps: f32,
    pub(super) pad_token_id: u32,
    pub(super) relative_attention: bool,
    /// Resolved: `max_position_embeddings` when the file says < 1.
    pub(super) max_relative_positions: usize,
    /// v2 log buckets; `None` when `position_buckets` <= 0 (or v1).
    pub(super) position_buckets: Option<usize>,
    pub(super) position_biased_input: bool,
    pub(super) c2p: bool,
    pub(super) p2c: bool,
    /// `1 + len(pos_att_type)`
    pub(super) scale_factor: usize,
    pub(super) share_att_key: bool,
    pub(super) norm_rel_ebd: bool,
    pub(super) conv: Option<ConvConfig>,
    pub(super) dtype: Option<String>,
}

impl DebertaConfig {
    pub(super) fn from_file(path: &Path) -> Result<Self> {
        let value: serde_json::Value = crate::io::read_json(path)?;
        let arch = ModelArchitecture::detect(path)?;
        let v2 = match arch {
            ModelArchitecture::Deberta => false,
            ModelArchitecture::DebertaV2 => true,
            other => {
                return Err(InferError::Unsupported(format!(
                    "{}: `{}` is not a DeBERTa config",
                    path.display(),
                    other.name()
                )))
            }
        };
        let f = ConfigFields::new(&value, path)?;
        let vocab_size = f.size("vocab_size", None)?;
        let hidden_size = f.size("hidden_size", None)?;
        let num_hidden_layers = f.size("num_hidden_layers", None)?;
        let num_attention_heads = f.size("num_attention_heads", None)?;
        let intermediate_size = f.size("intermediate_size", None)?;
        let max_position_embeddings = f.size("max_position_embeddings", Some(512))?;
        let embedding_size = f.size("embedding_size", Some(hidden_size as i64))?;
        let type_vocab_size = f.int("type_vocab_size", Some(0))?;
        if !(0..=1 << 24).contains(&type_vocab_size) {
            return Err(f.err(
                "type_vocab_size",
                format!("value {type_vocab_size} is out of range"),
            ));
        }
        f.check_multiple(
            "hidden_size",
            hidden_size,
            "num_attention_heads",
            num_attention_heads,
        )?;
        if let Some(x) = f.get("attention_head_size") {
            if x.as_u64() != Some((hidden_size / num_attention_heads) as u64) {
                return Err(f.err(
                    "attention_head_size",
                    format!(
                        "{x} differs from hidden_size / num_attention_heads = {} (unsupported)",
                        hidden_size / num_attention_heads
                    ),
                ));
            }
        }
        let eps = match f.get("layer_norm_eps") {
            None => 1e-7,
            Some(x) => x
                .as_f64()
                .filter(|e| e.is_finite() && *e >= 0.0)
                .ok_or_else(|| {
                    f.err(
                        "layer_norm_eps",
                        format!("expected a number >= 0, found {x}"),
                    )
                })?,
        };
        let act_name = f.opt_str("hidden_act")?.unwrap_or("gelu");
        let hidden_act = match Act::parse(act_name) {
            Some(Act::Gelu(a)) => a,
            _ => {
                return Err(f.err(
                    "hidden_act",
                    format!("unsupported activation `{act_name}` (supported: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu)"),
                ))
            }
        };
        let pad = f.int("pad_token_id", Some(0))?;
        if !(0..vocab_size as i64).contains(&pad) {
            return Err(f.err(
                "pad_token_id",
                format!("{pad} is outside the vocabulary (size {vocab_size})"),
            ));
        }
        let relative_attention = f.bool("relative_attention", false)?;
        let max_rel = f.int("max_relative_positions", Some(-1))?;
        let max_relative_positions = if max_rel < 1 {
            max_position_embeddings
        } else if max_rel > 1 << 24 {
            return Err(f.err(
                "max_relative_positions",
                format!("value {max_rel} is out of range"),
            ));
        } else {
            max_rel as usize
        };
        let buckets = if v2 {
            f.int("position_buckets", Some(-1))?
        } else {
            -1
        };
        let position_buckets = if buckets > 0 {
            let b = buckets as usize;
            if !(2..=1 << 24).contains(&b) || max_relative_positions <= b / 2 + 1 {
                return Err(f.err(
                    "position_buckets",
                    format!("{b} buckets need 2 <= position_buckets and position_buckets/2 + 1 < max_relative_positions ({max_relative_positions})"),
                ));
            }
            Some(b)
        } else {
            None
        };
        let pos_att_type = f.str_list("pos_att_type")?;
        let (mut c2p, mut p2c) = (false, false);
        for t in &pos_att_type {
            let flag = match t.as_str() {
                "c2p" => &mut c2p,
                "p2c" => &mut p2c,
                _ => {
                    return Err(f.err(
                        "pos_att_type",
                        format!("unsupported entry `{t}` (supported: c2p, p2c)"),
                    ))
                }
            };
            if *flag {
                return Err(f.err("pos_att_type", format!("`{t}` is listed twice")));
            }
            *flag = true;
        }
        if !v2 && f.bool("talking_head", false)? {
            return Err(f.err("talking_head", "talking-head attention is not supported"));
        }
        let norm_rel_ebd = if v2 {
            let s = f.opt_str("norm_rel_ebd")?.unwrap_or("none").to_lowercase();
            let parts: Vec<&str> = s.split('|').map(str::trim).collect();
            if let Some(bad) = parts
                .iter()
                .find(|p| !matches!(**p, "none" | "layer_norm" | ""))
            {
                return Err(f.err(
                    "norm_rel_ebd",
                    format!("unsupported entry `{bad}` (supported: none, layer_norm)"),
                ));
            }
            parts.contains(&"layer_norm")
        } else {
            false
        };
        let conv_kernel = if v2 {
            f.int("conv_kernel_size", Some(0))?
        } else {
            0
        };
        let conv = if conv_kernel > 0 {
            if conv_kernel % 2 == 0 || conv_kernel > 1 << 12 {
                return Err(f.err(
                    "conv_kernel_size",
                    format!("{conv_kernel}: only odd kernel sizes keep the sequence length"),
                ));
            }
            let act_name = f.opt_str("conv_act")?.unwrap_or("tanh");
            let act = Act::parse(act_name).ok_or_else(|| {
                f.err(
                    "conv_act",
                    format!("unsupported activation `{act_name}` (supported: tanh, gelu, gelu_new, relu)"),
                )
            })?;
            let groups = f.size("conv_groups", Some(1))?;
            f.check_multiple("hidden_size", hidden_size, "conv_groups", groups)?;
            Some(ConvConfig {
                kernel: conv_kernel as usize,
                act,
                groups,
            })
        } else {
            None
        };
        let dtype = f.dtype()?;
        Ok(DebertaConfig {
            v2,
            vocab_size,
            hidden_size,
            embedding_size,
            num_hidden_layers,
            num_attention_heads,
            intermediate_size,
            hidden_act,
            max_position_embeddings,
            type_vocab_size: type_vocab_size as usize,
            layer_norm_eps: eps as f32,
            pad_token_id: pad as u32,
            relative_attention,
            max_relative_positions,
            position_buckets,
            position_biased_input: f.bool("position_biased_input", true)?,
            c2p,
            p2c,
            scale_factor: 1 + pos_att_type.len(),
            share_att_key: v2 && f.bool("share_att_key", false)?,
            norm_rel_ebd,
            conv,
            dtype,
        })
    }

    pub(super) fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Half the relative embedding table (`2·span` rows).
    pub(super) fn span(&self) -> usize {
        self.position_buckets.unwrap_or(self.max_relative_positions)
    }

    /// Whether attention has disentangled terms.
    pub(super) fn disentangled(&self) -> bool {
        self.relative_attention && (self.c2p || self.p2c)
    }
}

impl DebertaConfig {
    /// `sqrt(head_dim · scale_factor)`, in f32 as torch computes it.
    pub(super) fn scale(&self) -> f32 {
        (self.head_dim() as f32 * self.scale_factor as f32).sqrt()
    }
}

pub(super) fn spec_of(cfg: &DebertaConfig) -> EncoderSpec {
    let terms = match (cfg.c2p, cfg.p2c) {
        (true, true) => "c2p+p2c",
        (true, false) => "c2p",
        (false, true) => "p2c",
        (false, false) => "none",
    };
    let mut positions = if !cfg.relative_attention {
        "none (relative attention off)".to_string()
    } else if let Some(b) = cfg.position_buckets {
        format!(
            "relative (log buckets: {b}, max distance {})",
            cfg.max_relative_positions
        )
    } else {
        format!("relative (clamped at ±{})", cfg.max_relative_positions)
    };
    if cfg.relative_attention && cfg.share_att_key {
        positions.push_str(", shared key/query projections");
    }
    if cfg.norm_rel_ebd {
        positions.push_str(", LayerNorm'ed rel embeddings");
    }
    if cfg.position_biased_input {
        positions.push_str(" + learned absolute");
    }
    let mut attention = format!(
        "disentangled multi-head softmax ({terms}, scale sqrt(d*{})), post-LayerNorm",
        cfg.scale_factor
    );
    if !cfg.v2 {
        attention.push_str(", fused in_proj");
    }
    if let Some(c) = &cfg.conv {
        attention.push_str(&format!(
            "; conv after layer 0 (kernel {}, {}, {} group{})",
            c.kernel,
            c.act.name(),
            c.groups,
            if c.groups == 1 { "" } else { "s" }
        ));
    }
    EncoderSpec {
        architecture: if cfg.v2 {
            ModelArchitecture::DebertaV2
        } else {
            ModelArchitecture::Deberta
        },
        hidden_size: cfg.hidden_size,
        num_hidden_layers: cfg.num_hidden_layers,
        num_attention_heads: cfg.num_attention_heads,
        intermediate_size: cfg.intermediate_size,
        vocab_size: cfg.vocab_size,
        type_vocab_size: cfg.type_vocab_size,
        max_sequence_length: cfg.max_position_embeddings,
        pad_token_id: cfg.pad_token_id,
        positions,
        attention,
        ffn: format!("dense + {}", cfg.hidden_act.name()),
        dtype: cfg.dtype.clone(),
    }
}
