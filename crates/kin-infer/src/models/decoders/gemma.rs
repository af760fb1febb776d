//! Gemma (`model_type: gemma`) and Gemma 2 (`model_type: gemma2`).
//!
//! Gemma is the LLaMA layout with: GeGLU feed-forward (`gelu_pytorch_tanh`; the legacy
//! `gelu` spelling means the same, as transformers maps it), RMSNorm scaling by `(1 + w)`
//! (`x * 1/sqrt(mean(x²) + eps) * (1 + w)`, in f32 as `GemmaRMSNorm`), token embeddings
//! multiplied by `sqrt(hidden_size)` (rounded to f32 as transformers' `embed_scale` buffer),
//! a `head_dim` independent of `hidden_size`, and a tied head by default.
//!
//! Gemma 2 adds:
//! - "sandwich" norms: `x += post_attention_norm(attn(input_norm(x)))`,
//!   `x += post_feedforward_norm(mlp(pre_feedforward_norm(x)))`;
//! - attention scale `query_pre_attn_scalar^-0.5`;
//! - attention-logit softcapping `tanh(s / cap) * cap` (`attn_logit_softcapping`) on the
//!   scaled scores, and final-logit softcapping (`final_logit_softcapping`) on the logits
//!   (absent keys take transformers' defaults, 50 and 30; `null` turns one off);
//! - sliding-window attention (`sliding_window`) on the layers `layer_types` names
//!   `sliding_attention` (transformers 5.x), else on even layers (transformers' default).
//!
//! Config: the Hub's spelling (`rope_theta`, `torch_dtype`) and transformers 5.x's
//! (`rope_parameters.{rope_type, rope_theta}`, `dtype`, `layer_types`). Rope scaling types
//! other than `default`, `attention_bias: true` and bidirectional attention are a typed
//! [`InferError::Unsupported`].
//!
//! Tensors: `model.embed_tokens.weight`, `model.layers.N.self_attn.{q,k,v,o}_proj.weight`,
//! `model.layers.N.mlp.{gate,up,down}_proj.weight`,
//! `model.layers.N.{input_layernorm,post_attention_layernorm}.weight` (Gemma 2 adds
//! `pre_feedforward_layernorm`, `post_feedforward_layernorm`), `model.norm.weight`,
//! `lm_head.weight` (only when untied).

use super::block::{Block, DecoderModel, Parts, Residual, Rope};
use super::build::{assemble, Builder, Described};
use super::llama::{HF_ATTENTION, HF_GLOBALS};
use super::Sizes;
use super::{attention_dims, attention_kind, common_sizes, sliding_note, DecoderFamily};
use crate::backend::{AttnShape, GpuCompute};
use crate::error::{InferError, Result};
use crate::io::config_fields::{ConfigFields, ConfigSource};
use crate::io::safetensors::WeightStore;
use crate::io::source::Layout;
use crate::nn::ffn::FfnAct;
use crate::nn::rope::Rotary;
use crate::nn::rope_config::{object, RopeDict};
use serde_json::Value;

/// Gemma 2's layout: LLaMA's names (Gemma's own), but `post_attention_layernorm` normalizes
/// the attention output and the feed-forward has a norm on each side.
static LAYOUT_2: Layout = Layout {
    name: "safetensors, Hugging Face Gemma 2",
    prefixes: &[""],
    globals: &[HF_GLOBALS],
    layer_prefix: "model.layers.{}.",
    layer: &[
        HF_ATTENTION,
        &[
            ("post_attention_norm", "post_attention_layernorm"),
            ("ffn_norm", "pre_feedforward_layernorm"),
            ("ffn_gate", "mlp.gate_proj"),
            ("ffn_up", "mlp.up_proj"),
            ("ffn_down", "mlp.down_proj"),
            ("post_ffw_norm", "post_feedforward_layernorm"),
        ],
    ],
};

/// A validated Gemma / Gemma 2 config.
#[derive(Clone, Debug)]
struct GemmaConfig {
    /// Gemma 2 (sandwich norms, softcaps, windows).
    v2: bool,
    /// Per layer: the sliding window, `None` for full causal attention.
    windows: Vec<Option<usize>>,
    /// The sizes (`context`: `max_position_embeddings`).
    sizes: Sizes,
    eps: f32,
    rope_theta: f64,
    act: FfnAct,
    /// Attention scale (`head_dim^-0.5`, Gemma 2: `query_pre_attn_scalar^-0.5`).
    scale: f32,
    attn_softcap: Option<f32>,
    final_softcap: Option<f32>,
}

impl GemmaConfig {
    fn parse(f: &ConfigFields) -> Result<Self> {
        let v2 = match f.str("model_type", Some("gemma"))?.as_str() {
            "gemma" => false,
            "gemma2" => true,
            other => {
                return Err(f.err(
                    "model_type",
                    format!("`{other}` is not a Gemma family (gemma, gemma2)"),
                ))
            }
        };
        let sizes = common_sizes(f, 8192)?;
        let head_dim = f.usize("head_dim", Some(256))?;
        f.check_sizes(&[("head_dim", head_dim)])?;
        attention_dims(f, sizes.heads, sizes.kv_heads, head_dim)?;
        if !head_dim.is_multiple_of(2) {
            return Err(f.err(
                "head_dim",
                format!("{head_dim}: rotary needs an even head_dim"),
            ));
        }
        for flag in ["attention_bias", "use_bidirectional_attention"] {
            if f.get(flag).is_some_and(|x| !x.is_null()) && f.bool(flag, false)? {
                return Err(InferError::Unsupported(format!(
                    "{} with `{flag}: true` is not supported",
                    if v2 { "gemma2" } else { "gemma" }
                )));
            }
        }
        // transformers: Gemma reads `hidden_act` (legacy `gelu` meaning the tanh form),
        // Gemma 2 `hidden_activation`.
        let (act_field, act_default) = if v2 {
            ("hidden_activation", "gelu_pytorch_tanh")
        } else {
            ("hidden_act", "gelu_pytorch_tanh")
        };
        let act = match f.str(act_field, Some(act_default))?.as_str() {
            "gelu_pytorch_tanh" | "gelu_new" => FfnAct::GeluTanh,
            "gelu" if !v2 => FfnAct::GeluTanh,
            "gelu" => FfnAct::GeluErf,
            other => {
                return Err(f.err(
                    act_field,
                    format!("`{other}` is not supported (supported: gelu_pytorch_tanh, gelu)"),
                ))
            }
        };
        // Absent: transformers' Gemma2Config defaults (50 for attention, 30 for the final
        // logits), which llama.cpp also applies to a GGUF without the keys; only an explicit
        // null turns a softcap off.
        let softcap = |field: &str, default: f32| -> Result<Option<f32>> {
            match f.get(field) {
                None if f.is_null(field) => Ok(None),
                None => Ok(Some(default)),
                Some(x) => match x.as_f64() {
                    Some(c) if c > 0.0 && c.is_finite() => Ok(Some(c as f32)),
                    _ => Err(f.err(
                        field,
                        format!("expected a positive number or null, found {x}"),
                    )),
                },
            }
        };
        let (scale, attn_softcap, final_softcap, windows) = if v2 {
            let qpas = f.f64("query_pre_attn_scalar", 256.0)?;
            let qpas = f.positive_f64("query_pre_attn_scalar", qpas)?;
            (
                qpas.powf(-0.5) as f32,
                softcap("attn_logit_softcapping", 50.0)?,
                softcap("final_logit_softcapping", 30.0)?,
                layer_windows(f, sizes.layers)?,
            )
        } else {
            (
                (head_dim as f64).powf(-0.5) as f32,
                None,
                None,
                vec![None; sizes.layers],
            )
        };
        Ok(GemmaConfig {
            v2,
            windows,
            eps: f.eps("rms_norm_eps", 1e-6)?,
            rope_theta: rope_theta(f)?,
            act,
            scale,
            attn_softcap,
            final_softcap,
            sizes: sizes.decoder_sizes(f, head_dim, sizes.max_positions, true, true)?,
        })
    }
}

/// Gemma 2's window per layer: `layer_types` when present, else transformers' default
/// (layer `i` slides when `i` is even); the window is `sliding_window` (default 4096).
fn layer_windows(f: &ConfigFields, layers: usize) -> Result<Vec<Option<usize>>> {
    let w = match f.get("sliding_window") {
        None => Some(4096),
        Some(Value::Null) => None,
        Some(_) => match f.usize("sliding_window", None)? {
            0 => return Err(f.err("sliding_window", "must be at least 1 (or null)")),
            w => Some(w),
        },
    };
    let sliding = |i: usize, t: Option<&Value>| -> Result<Option<usize>> {
        let slides = match t {
            None => i.is_multiple_of(2),
            Some(t) => match t.as_str() {
                Some("sliding_attention") => true,
                Some("full_attention") => false,
                _ => {
                    return Err(f.err(
                        "layer_types",
                        format!("expected `full_attention` or `sliding_attention`, found {t}"),
                    ))
                }
            },
        };
        Ok(w.filter(|_| slides))
    };
    match f.get("layer_types") {
        None | Some(Value::Null) => (0..layers).map(|i| sliding(i, None)).collect(),
        Some(Value::Array(types)) => {
            if types.len() != layers {
                return Err(f.err(
                    "layer_types",
                    format!("{} entries for num_hidden_layers {layers}", types.len()),
                ));
            }
            (0..layers).map(|i| sliding(i, Some(&types[i]))).collect()
        }
        Some(x) => Err(f.err("layer_types", format!("expected a list, found {x}"))),
    }
}

/// `rope_parameters.rope_theta` (transformers 5.x) or `rope_theta` (Hub), default 10000;
/// a scaling type other than `default` is unsupported.
fn rope_theta(f: &ConfigFields) -> Result<f64> {
    let scaling = RopeDict::new(f, "rope_scaling", object(f, "rope_scaling")?);
    let params = RopeDict::new(f, "rope_parameters", object(f, "rope_parameters")?);
    for d in [&scaling, &params] {
        match d.kind()? {
            "default" => {}
            other => {
                return Err(InferError::Unsupported(format!(
                    "gemma `{}.rope_type` `{other}` (rope scaling) is not supported (supported: \
                     default)",
                    d.field
                )))
            }
        }
    }
    params.theta()
}

/// Gemma and Gemma 2 in the registry. llama.cpp's Gemma converters store the norms as
/// `1 + w`, and rope in transformers' (NeoX) layout: nothing to permute.
pub(crate) const FAMILY: DecoderFamily = DecoderFamily {
    model_types: &["gemma", "gemma2"],
    gguf_architectures: &["gemma", "gemma2"],
    hub: |config, store, be| load_with(config, store, None, false, be),
    gguf: |_, config, store, be| load_with(config, store, Some(&super::gguf::LAYOUT), true, be),
};

/// Loads a Gemma model from `config` and `store` through `layout` (default: the Hub's,
/// per version); `norms_plus_one`: the norm weights are stored as `1 + w` already, as
/// llama.cpp's converter writes them (its RMSNorm multiplies by the weight alone).
pub(crate) fn load_with(
    config: &ConfigSource,
    store: &WeightStore,
    layout: Option<&'static Layout>,
    norms_plus_one: bool,
    be: &dyn GpuCompute,
) -> Result<DecoderModel> {
    let cfg = GemmaConfig::parse(&config.fields()?)?;
    let s = &cfg.sizes;
    let (h, q_dim, kv_dim) = (s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let hub = if cfg.v2 {
        &LAYOUT_2
    } else {
        &super::llama::LAYOUT
    };
    let b = Builder::open(be, store, layout.unwrap_or(hub), h)?;
    // Unscaled: the stack scales the gathered rows.
    let embed = b.embedding(s.vocab, s.tied)?;
    let norm = |base: &str| match norms_plus_one {
        true => b.rms(base, cfg.eps),
        false => b.rms_mapped(base, cfg.eps, |w| w.iter().map(|&g| 1.0 + g).collect()),
    };
    let blocks = b.blocks(s.layers, |i| {
        let t = |name: &str| b.layer(i, name);
        // Gemma: the post-attention norm is the pre-feed-forward norm. Gemma 2: it
        // normalizes the attention output, and the feed-forward has its own two.
        let residual = match cfg.v2 {
            true => Residual::Sandwich {
                post_attn: norm(&t("post_attention_norm"))?,
                pre_ffn: norm(&t("ffn_norm"))?,
                post_ffn: norm(&t("post_ffw_norm"))?,
            },
            false => Residual::Sequential {
                ffn_norm: norm(&t("ffn_norm"))?,
            },
        };
        Ok(Block {
            attn_norm: norm(&t("attn_norm"))?,
            qkv: b.qkv(i, (q_dim, kv_dim), false, None)?,
            o: b.linear(&t("attn_output"), q_dim, h, false)?,
            residual,
            mlp: b.gated(i, &["ffn_gate", "ffn_up"], s.intermediate, cfg.act)?,
            attn: AttnShape {
                heads: s.heads,
                kv_heads: s.kv_heads,
                head_dim: s.head_dim,
                scale: cfg.scale,
                window: cfg.windows[i],
                softcap: cfg.attn_softcap,
            },
        })
    })?;
    let mut attention = attention_kind(s.heads, s.kv_heads);
    if let Some(c) = cfg.attn_softcap {
        attention.push_str(&format!(", logit softcap {c}"));
    }
    attention.push_str(&sliding_note(&cfg.windows));
    let described = Described {
        model_type: if cfg.v2 { "gemma2" } else { "gemma" }.into(),
        positions: format!("rotary (theta {})", cfg.rope_theta),
        attention,
        ffn: format!(
            "{}{}",
            cfg.act.glu_name(),
            if cfg.v2 { ", sandwich norms" } else { "" }
        ),
    };
    let parts = Parts {
        embed,
        embed_scale: Some((h as f64).sqrt() as f32),
        rope: Rope::Rotary(Rotary::new(s.head_dim, cfg.rope_theta, false, s.context)),
        blocks,
        final_norm: norm(&b.global("output_norm"))?,
        lm_head: b.head(s.vocab, s.tied, false)?,
        final_softcap: cfg.final_softcap,
    };
    Ok(assemble(s, described, parts))
}
