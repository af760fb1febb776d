//! LLaMA (LLaMA 2/3 layout, `model_type: llama`): RMSNorm pre-norm blocks, rotary positions
//! with `rope_theta`, grouped-query attention (`num_key_value_heads`: MHA, GQA, MQA), SwiGLU
//! feed-forward, tied or untied `lm_head`. The same file serves the two families that differ
//! from it only in attention:
//! - Mistral (`model_type: mistral`): `sliding_window` attention on every layer (a token sees
//!   the `sliding_window` most recent positions, itself included; `null` = full attention).
//! - Qwen2 (`model_type: qwen2`): biases on q/k/v (none on o_proj), and sliding windows per
//!   layer: `layer_types` (transformers 5.x: `sliding_attention` / `full_attention` per layer)
//!   when present, else derived as transformers does — layer `i` slides when
//!   `use_sliding_window` and `i >= max_window_layers` (default 28) — with the window
//!   `sliding_window`.
//!
//! Config: the Hub's spelling (`rope_theta`, `rope_scaling` at top level) and transformers
//! 5.x's (`rope_parameters.{rope_type, rope_theta}`; a non-empty top-level `rope_scaling` wins, as
//! in transformers). Rope scaling types `linear`, `dynamic` and `llama3` (see
//! [`RopeScaling`]); other types (`yarn`, `longrope`, ...) are a typed
//! [`InferError::Unsupported`], as are LLaMA's `attention_bias` / `mlp_bias`. With `dynamic` the
//! context is `max_position_embeddings · factor` (transformers sets no limit), and a chunk ending
//! past `max_position_embeddings` rotates with the frequencies of its sequence length while the
//! cached keys keep theirs (transformers' `dynamic_rope_update`): decoding token by token then
//! differs from one full pass, by construction.
//!
//! Tensors: `model.embed_tokens.weight`, `model.layers.N.self_attn.{q,k,v,o}_proj.weight`,
//! `model.layers.N.mlp.{gate,up,down}_proj.weight`,
//! `model.layers.N.{input_layernorm,post_attention_layernorm}.weight`, `model.norm.weight`,
//! `lm_head.weight` (absent when tied); Qwen2 adds `model.layers.N.self_attn.{q,k,v}_proj.bias`.
//!
//! Forward of a chunk at positions `p0..p0+rows`: `x = embed[ids]`; per layer
//! `x += o(attn(rope(q), rope(k) ∪ cache, v ∪ cache))` on `rms(x)`, then
//! `x += down(silu(gate) * up)` on `rms(x)`; logits `= lm_head(rms(x))`.

use super::block::{Block, DecoderModel, Parts, Residual, Rope};
use super::build::{assemble, Builder, Described};
use super::Sizes;
use super::{
    attention_dims, attention_kind, common_sizes, scaled_context, sliding_note, DecoderFamily,
    MAX_ROPE_FACTOR,
};
use crate::backend::{AttnShape, GpuCompute};
use crate::error::{InferError, Result};
use crate::io::config_fields::{ConfigFields, ConfigSource};
use crate::io::safetensors::WeightStore;
use crate::io::source::{Layout, Names};
use crate::nn::ffn::FfnAct;
use crate::nn::rope::{RopeScaling, Rotary};
use crate::nn::rope_config::{object, RopeDict};
use serde_json::Value;

/// Hugging Face's LLaMA layout (Mistral and Qwen2 share it), in logical names
/// (`io::source`). Also Gemma's.
pub(crate) static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face LLaMA",
    prefixes: &[""],
    globals: &[HF_GLOBALS],
    layer_prefix: "model.layers.{}.",
    layer: &[
        HF_ATTENTION,
        &[
            ("ffn_norm", "post_attention_layernorm"),
            ("ffn_gate", "mlp.gate_proj"),
            ("ffn_up", "mlp.up_proj"),
            ("ffn_down", "mlp.down_proj"),
        ],
    ],
};

/// What the Hugging Face decoders name alike (LLaMA, Mistral, Qwen2, Gemma, Phi-3): the
/// embedding table, the final norm and the head.
pub(crate) const HF_GLOBALS: Names = &[
    ("token_embd", "model.embed_tokens"),
    ("output_norm", "model.norm"),
    ("output", "lm_head"),
];

/// Their pre-attention norm and separate q/k/v/o projections (LLaMA's, Gemma's).
pub(crate) const HF_ATTENTION: Names = &[
    ("attn_norm", "input_layernorm"),
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
];

/// Which member of the LLaMA layout a checkpoint is (from `model_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Llama,
    Mistral,
    Qwen2,
}

impl Family {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Mistral => "mistral",
            Family::Qwen2 => "qwen2",
        }
    }
}

/// A validated LLaMA / Mistral / Qwen2 config.
#[derive(Clone, Debug)]
pub(crate) struct LlamaConfig {
    pub(crate) family: Family,
    /// q/k/v projections carry biases (Qwen2).
    pub(crate) qkv_bias: bool,
    /// Per layer: the sliding window, `None` for full causal attention.
    pub(crate) windows: Vec<Option<usize>>,
    /// The sizes (`context`: `max_positions`, times `factor` for `dynamic` rope).
    pub(crate) sizes: Sizes,
    pub(crate) max_positions: usize,
    pub(crate) eps: f32,
    pub(crate) rope_theta: f64,
    pub(crate) rope_scaling: RopeScaling,
}

impl LlamaConfig {
    pub(crate) fn parse(f: &ConfigFields) -> Result<Self> {
        let family = match f.str("model_type", Some("llama"))?.as_str() {
            "llama" => Family::Llama,
            "mistral" => Family::Mistral,
            "qwen2" => Family::Qwen2,
            other => {
                return Err(f.err(
                    "model_type",
                    format!("`{other}` is not a LLaMA-layout family (llama, mistral, qwen2)"),
                ))
            }
        };
        let sizes = common_sizes(f, 2048)?;
        let head_dim = match f.opt_usize("head_dim")? {
            Some(d) => d,
            None => sizes.even_head_dim(f)?,
        };
        attention_dims(f, sizes.heads, sizes.kv_heads, head_dim)?;
        if !head_dim.is_multiple_of(2) {
            return Err(f.err(
                "head_dim",
                format!("{head_dim}: rotary needs an even head_dim"),
            ));
        }
        // Mistral and Qwen2 fix their biases in code (transformers ignores these flags there).
        if family == Family::Llama {
            for flag in ["attention_bias", "mlp_bias"] {
                if f.bool(flag, false)? {
                    return Err(InferError::Unsupported(format!(
                        "llama with `{flag}: true` (biases) is not supported yet"
                    )));
                }
            }
        }
        let windows = layer_windows(f, family, sizes.layers)?;
        let act = f.str("hidden_act", Some("silu"))?;
        if act != "silu" {
            return Err(f.err(
                "hidden_act",
                format!("`{act}` is not supported (supported: silu)"),
            ));
        }
        let (rope_theta, rope_scaling) = rope(f, sizes.max_positions, head_dim)?;
        let context = match rope_scaling {
            RopeScaling::Dynamic { factor } => {
                scaled_context(f, "rope_scaling.factor", sizes.max_positions, factor)?
            }
            _ => sizes.max_positions,
        };
        Ok(LlamaConfig {
            family,
            qkv_bias: family == Family::Qwen2,
            windows,
            max_positions: sizes.max_positions,
            eps: f.eps("rms_norm_eps", 1e-6)?,
            rope_theta,
            rope_scaling,
            sizes: sizes.decoder_sizes(f, head_dim, context, false, false)?,
        })
    }
}

impl LlamaConfig {
    /// `describe`'s positions: the rotary base and its scaling.
    fn positions(&self) -> String {
        let theta = self.rope_theta;
        match self.rope_scaling {
            RopeScaling::None => format!("rotary (theta {theta})"),
            RopeScaling::Linear { factor } => {
                format!("rotary (theta {theta}, linear scaling x{factor})")
            }
            RopeScaling::Dynamic { factor } => format!(
                "rotary (theta {theta}, dynamic NTK scaling x{factor} past {} positions)",
                self.max_positions
            ),
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_positions,
            } => format!(
                "rotary (theta {theta}, llama3 scaling x{factor}, low/high freq factors \
                 {low_freq_factor}/{high_freq_factor}, original context \
                 {original_max_positions})"
            ),
        }
    }
}

/// The sliding window of each layer (`None`: full causal attention).
/// - llama: none.
/// - mistral: `sliding_window` on every layer (transformers' `MistralModel` ignores
///   `layer_types`).
/// - qwen2: the window is `sliding_window` when `use_sliding_window` (else there is none, as
///   transformers sets it to `None`); which layers use it comes from `layer_types` when the
///   config has it, else layer `i` slides when `i >= max_window_layers`.
fn layer_windows(f: &ConfigFields, family: Family, layers: usize) -> Result<Vec<Option<usize>>> {
    let window = |field: &str| -> Result<Option<usize>> {
        match f.opt_usize(field)? {
            Some(0) => Err(f.err(field, "must be at least 1 (or null for full attention)")),
            w => Ok(w),
        }
    };
    match family {
        Family::Llama => Ok(vec![None; layers]),
        Family::Mistral => Ok(vec![window("sliding_window")?; layers]),
        Family::Qwen2 => {
            let w = if f.bool("use_sliding_window", false)? {
                window("sliding_window")?
            } else {
                None
            };
            match f.get("layer_types") {
                Some(Value::Array(types)) => {
                    if types.len() != layers {
                        return Err(f.err(
                            "layer_types",
                            format!("{} entries for num_hidden_layers {layers}", types.len()),
                        ));
                    }
                    types
                        .iter()
                        .map(|t| match t.as_str() {
                            Some("full_attention") => Ok(None),
                            Some("sliding_attention") => w.map(Some).ok_or_else(|| {
                                f.err(
                                    "layer_types",
                                    "names `sliding_attention` but the config sets no \
                                     sliding window (`use_sliding_window` false or \
                                     `sliding_window` null)",
                                )
                            }),
                            _ => Err(f.err(
                                "layer_types",
                                format!(
                                    "expected `full_attention` or `sliding_attention`, found {t}"
                                ),
                            )),
                        })
                        .collect()
                }
                Some(x) => Err(f.err("layer_types", format!("expected a list, found {x}"))),
                None => {
                    let first = f.usize("max_window_layers", Some(28))?;
                    Ok((0..layers).map(|i| w.filter(|_| i >= first)).collect())
                }
            }
        }
    }
}

/// `(rope_theta, scaling)`. The rope dict is a non-empty top-level `rope_scaling` (Hub) when
/// present, else `rope_parameters` (transformers 5.x), as transformers reads them; its type is
/// `rope_type` or `type` (default `default`); theta is its `rope_theta`, else the top-level
/// `rope_theta`, else 10000. `llama3`'s `original_max_position_embeddings` defaults to
/// `max_position_embeddings`.
fn rope(f: &ConfigFields, max_positions: usize, head_dim: usize) -> Result<(f64, RopeScaling)> {
    // A non-empty top-level `rope_scaling` wins over `rope_parameters`, as in transformers.
    let d = match object(f, "rope_scaling")? {
        Some(o) if !o.is_empty() => RopeDict::new(f, "rope_scaling", Some(o)),
        _ => RopeDict::new(f, "rope_parameters", object(f, "rope_parameters")?),
    };
    let positive = |key: &str| -> Result<f64> {
        match d.num(key)? {
            Some(v) if key == "factor" && v > MAX_ROPE_FACTOR => Err(d.err(
                key,
                format!("{v} is out of range (at most {MAX_ROPE_FACTOR})"),
            )),
            Some(v) if v > 0.0 && v.is_finite() => Ok(v),
            Some(v) => Err(d.err(key, format!("must be positive, found {v}"))),
            None => Err(d.err(key, "is required by this rope type")),
        }
    };
    if let Some(p) = d.get("partial_rotary_factor") {
        if p.as_f64() != Some(1.0) {
            return Err(InferError::Unsupported(format!(
                "llama with partial_rotary_factor {p} is not supported"
            )));
        }
    }
    let theta = d.theta()?;
    let kind = d.kind()?;
    let field = d.field;
    let scaling = match kind {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear {
            factor: positive("factor")?,
        },
        "dynamic" => {
            if head_dim <= 2 {
                return Err(f.err(
                    "head_dim",
                    format!("{head_dim}: dynamic rope needs a head_dim above 2"),
                ));
            }
            RopeScaling::Dynamic {
                factor: positive("factor")?,
            }
        }
        "llama3" => {
            let (low, high) = (positive("low_freq_factor")?, positive("high_freq_factor")?);
            if high <= low {
                return Err(f.err(
                    &format!("{field}.high_freq_factor"),
                    format!("{high} must exceed low_freq_factor {low}"),
                ));
            }
            let key = "original_max_position_embeddings";
            let original = match d.get(key) {
                None => max_positions,
                Some(x) => match x.as_u64() {
                    Some(n) if n > 0 => n as usize,
                    _ => {
                        return Err(f.err(
                            &format!("{field}.{key}"),
                            format!("expected a positive integer, found {x}"),
                        ))
                    }
                },
            };
            RopeScaling::Llama3 {
                factor: positive("factor")?,
                low_freq_factor: low,
                high_freq_factor: high,
                original_max_positions: original,
            }
        }
        other => {
            return Err(InferError::Unsupported(format!(
                "llama `{field}.rope_type` `{other}` (rope scaling) is not supported yet \
                 (supported: default, linear, dynamic, llama3)"
            )))
        }
    };
    Ok((theta, scaling))
}

/// Loads a LLaMA model from `config` and `store` (the Hub's layout).
/// LLaMA, Mistral and Qwen2 in the registry. llama.cpp converts Mistral as `llama`, whose
/// q and k rows it stores in rotary-pair order; Qwen2's it leaves as they are.
pub(crate) const FAMILY: DecoderFamily = DecoderFamily {
    model_types: &["llama", "mistral", "qwen2"],
    gguf_architectures: &["llama", "qwen2"],
    hub: |config, store, be| load_with(config, store, &LAYOUT, false, be),
    gguf: |arch, config, store, be| {
        load_with(config, store, &super::gguf::LAYOUT, arch == "llama", be)
    },
};

/// Loads a LLaMA-layout model from `config` and `store` through `layout`; `qk_permuted`: the q and k rows
/// are in llama.cpp's rotary-pair order (undone here, see `gguf.rs`).
pub(crate) fn load_with(
    config: &ConfigSource,
    store: &WeightStore,
    layout: &'static Layout,
    qk_permuted: bool,
    be: &dyn GpuCompute,
) -> Result<DecoderModel> {
    let cfg = LlamaConfig::parse(&config.fields()?)?;
    let s = &cfg.sizes;
    let (h, hd) = (s.hidden, s.head_dim);
    let (q_dim, kv_dim) = (s.heads * hd, s.kv_heads * hd);
    let b = Builder::open(be, store, layout, h)?;
    let embed = b.embedding(s.vocab, s.tied)?;
    let blocks = b.blocks(s.layers, |i| {
        Ok(Block {
            attn_norm: b.rms(&b.layer(i, "attn_norm"), cfg.eps)?,
            qkv: b.qkv(i, (q_dim, kv_dim), cfg.qkv_bias, qk_permuted.then_some(hd))?,
            o: b.linear(&b.layer(i, "attn_output"), q_dim, h, false)?,
            residual: Residual::Sequential {
                ffn_norm: b.rms(&b.layer(i, "ffn_norm"), cfg.eps)?,
            },
            mlp: b.gated(i, &["ffn_gate", "ffn_up"], s.intermediate, FfnAct::Silu)?,
            attn: AttnShape {
                heads: s.heads,
                kv_heads: s.kv_heads,
                head_dim: hd,
                scale: 1.0 / (hd as f32).sqrt(),
                window: cfg.windows[i],
                softcap: None,
            },
        })
    })?;
    let mut attention = attention_kind(s.heads, s.kv_heads);
    if cfg.qkv_bias {
        attention.push_str(", q/k/v biases");
    }
    attention.push_str(&sliding_note(&cfg.windows));
    let rotary = Rotary::with_scaling(
        hd,
        cfg.rope_theta,
        false,
        cfg.max_positions,
        cfg.rope_scaling,
    );
    let described = Described {
        model_type: cfg.family.name().into(),
        positions: cfg.positions(),
        attention,
        ffn: "SwiGLU".into(),
    };
    let parts = Parts {
        embed,
        embed_scale: None,
        rope: Rope::Rotary(rotary),
        blocks,
        final_norm: b.rms(&b.global("output_norm"), cfg.eps)?,
        lm_head: b.head(s.vocab, s.tied, false)?,
        final_softcap: None,
    };
    Ok(assemble(s, described, parts))
}
