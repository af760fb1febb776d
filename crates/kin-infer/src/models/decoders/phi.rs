//! Phi (phi-2 layout, `model_type: phi`) and Phi-3 (`model_type: phi3`).
//!
//! Phi (`PhiForCausalLM`): one LayerNorm per block (`input_layernorm`) feeding attention and
//! the MLP in parallel, `x = x + (attn(ln(x)) + mlp(ln(x)))`; q/k/v and `dense` with biases;
//! partial rotary (`partial_rotary_factor`: only the first `head_dim · factor` features of each
//! head rotate, GPT-NeoX halves); MLP `fc1` → GELU tanh (`gelu_new`) → `fc2`, with biases;
//! `final_layernorm`; `lm_head` with a bias. `qk_layernorm: true` is a typed `Unsupported`.
//!
//! Phi-3 (`Phi3ForCausalLM`): the LLaMA block (RMSNorm pre-norms, residual adds) with a fused
//! `qkv_proj` (`[q | k | v]` rows, no bias) and a fused `gate_up_proj` (gate rows first,
//! `down(silu(gate) · up)`), `sliding_window` on every layer (`null`: full attention), and
//! rope scaling `longrope` (`su` is its old name): `inv_freq[i] = 1 / (ext[i] · θ^(2i/d))` with
//! `ext` = `short_factor` or `long_factor`, and cos/sin multiplied by the attention factor
//! (`attention_factor`, else `sqrt(1 + ln(factor) / ln(original_max_position_embeddings))`
//! when `factor` — given, else `max_position_embeddings / original_max_position_embeddings` —
//! exceeds 1).
//!
//! Short or long factors are chosen **per KV cache**: a cache whose capacity exceeds
//! `original_max_position_embeddings` rotates every position with the long factors, a smaller
//! one with the short factors (as llama.cpp chooses from its context size). So a chunk of one
//! row computes what the same row computes inside a longer chunk over the same cache
//! (incremental decoding equals the full pass), and a full pass over a cache sized to the
//! sequence equals transformers' forward, which picks the long factors for every position of
//! a call covering more than `original_max_position_embeddings` positions. transformers'
//! Phi-3 generation instead starts with the short factors and recomputes its whole cache with
//! the long ones once the sequence grows past that length: the two agree for any generation
//! that stays on one side of the boundary (prompt plus new tokens within it, or a prompt
//! already past it); one that crosses it chooses its early tokens with the long factors here.
//!
//! Config: both spellings — the Hub's (`rope_theta`, `partial_rotary_factor`, `rope_scaling`,
//! `original_max_position_embeddings` at top level) and transformers 5.x's (`rope_parameters`
//! holding `rope_type`, `rope_theta`, `partial_rotary_factor`, `short_factor`, `long_factor`,
//! `factor`, `attention_factor`, `original_max_position_embeddings`).
//!
//! The rotary tables are built here (not by `nn::rope::Rotary`, which has no per-position
//! frequency sets or cos/sin factor), with `nn::rope`'s deterministic f64 routines and the same
//! f32 rounding steps as PyTorch.

use super::block::{Block, DecoderModel, Parts, Residual, Rope};
use super::build::{assemble, Builder, Described};
use super::llama::HF_GLOBALS;
use super::Sizes;
use super::{attention_dims, attention_kind, common_sizes, DecoderFamily};
use crate::backend::{AttnShape, GpuCompute};
use crate::error::{InferError, Result};
use crate::io::config_fields::{ConfigFields, ConfigSource};
use crate::io::safetensors::WeightStore;
use crate::io::source::Layout;
use crate::nn::ffn::FfnAct;
use crate::nn::rope::{ln_f64, pow_f64, RopeTable, SwitchedRotary};
use crate::nn::rope_config::{object, RopeDict};
use serde_json::Value;

/// Hugging Face's Phi (phi-1/2) layout, in logical names (`io::source`).
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face Phi",
    prefixes: &[""],
    globals: &[&[
        ("token_embd", "model.embed_tokens"),
        ("output_norm", "model.final_layernorm"),
        ("output", "lm_head"),
    ]],
    layer_prefix: "model.layers.{}.",
    layer: &[&[
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.dense"),
        ("ffn_up", "mlp.fc1"),
        ("ffn_down", "mlp.fc2"),
    ]],
};

/// Hugging Face's Phi-3 layout: fused q/k/v, and the fused gate-and-up projection (`ffn_up`
/// with twice the rows, as GGUF names it).
static LAYOUT_3: Layout = Layout {
    name: "safetensors, Hugging Face Phi-3",
    prefixes: &[""],
    globals: &[HF_GLOBALS],
    layer_prefix: "model.layers.{}.",
    layer: &[&[
        ("attn_norm", "input_layernorm"),
        ("attn_qkv", "self_attn.qkv_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("ffn_norm", "post_attention_layernorm"),
        ("ffn_up", "mlp.gate_up_proj"),
        ("ffn_down", "mlp.down_proj"),
    ]],
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Phi,
    Phi3,
}

/// Longrope parameters (Phi-3).
#[derive(Clone, Debug)]
struct LongRope {
    short: Vec<f32>,
    long: Vec<f32>,
    original_max: usize,
    attention_factor: f64,
}

#[derive(Clone, Debug)]
struct PhiConfig {
    family: Family,
    /// The sizes (`context`: `max_position_embeddings`).
    sizes: Sizes,
    /// Rotated features per head (even).
    rotary_dim: usize,
    max_positions: usize,
    eps: f32,
    rope_theta: f64,
    longrope: Option<LongRope>,
    window: Option<usize>,
    act: FfnAct,
}

fn factors(f: &ConfigFields, field: &str, v: Option<&Value>, n: usize) -> Result<Vec<f32>> {
    let a = v
        .and_then(|v| v.as_array())
        .ok_or_else(|| f.err(field, "longrope needs a list of numbers"))?;
    if a.len() != n {
        return Err(f.err(
            field,
            format!("{} entries, expected {n} (rotary dim / 2)", a.len()),
        ));
    }
    a.iter()
        .map(|x| match x.as_f64() {
            Some(v) if v.is_finite() && v > 0.0 => Ok(v as f32),
            _ => Err(f.err(field, format!("expected positive numbers, found {x}"))),
        })
        .collect()
}

impl PhiConfig {
    fn parse(f: &ConfigFields) -> Result<Self> {
        let family = match f.str("model_type", None)?.as_str() {
            "phi" => Family::Phi,
            "phi3" => Family::Phi3,
            other => {
                return Err(f.err(
                    "model_type",
                    format!("`{other}` is not a Phi family (phi, phi3)"),
                ))
            }
        };
        let sizes = common_sizes(f, 2048)?;
        let even = sizes.even_head_dim(f)?;
        let head_dim = f.opt_usize("head_dim")?.unwrap_or(even);
        attention_dims(f, sizes.heads, sizes.kv_heads, head_dim)?;
        let rp = object(f, "rope_parameters")?;
        let scaling = object(f, "rope_scaling")?;
        // The scaling parameters: transformers 5.x's rope_parameters, else the Hub's rope_scaling.
        let sp = match (rp, scaling) {
            (Some(rp), _) if rp.contains_key("rope_type") || rp.contains_key("type") => {
                RopeDict::new(f, "rope_parameters", Some(rp))
            }
            (_, Some(s)) => RopeDict::new(f, "rope_scaling", Some(s)),
            (rp, None) => RopeDict::new(f, "rope_parameters", rp),
        };
        let sp_name = sp.field;
        let rope_type = sp.kind()?.to_string();
        let params = RopeDict::new(f, "rope_parameters", rp);
        let partial = params.num_or_top("partial_rotary_factor")?.unwrap_or(1.0);
        if !(partial > 0.0 && partial <= 1.0) {
            return Err(f.err(
                "partial_rotary_factor",
                format!("{partial} must lie in (0, 1]"),
            ));
        }
        let rotary_dim = (head_dim as f64 * partial) as usize;
        if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) {
            return Err(f.err(
                "partial_rotary_factor",
                format!("head_dim {head_dim} × {partial} = {rotary_dim} rotated features: rotary needs an even, positive count"),
            ));
        }
        let rope_theta = params.theta()?;
        let longrope = match (family, rope_type.as_str()) {
            (_, "default") => None,
            (Family::Phi3, "longrope" | "su") => {
                let half = rotary_dim / 2;
                let short = factors(f, &format!("{sp_name}.short_factor"), sp.get("short_factor"), half)?;
                let long = factors(f, &format!("{sp_name}.long_factor"), sp.get("long_factor"), half)?;
                let om = match sp.get("original_max_position_embeddings").filter(|x| !x.is_null()) {
                    Some(x) => x.as_u64().map(|n| n as usize).ok_or_else(|| {
                        f.err(
                            &format!("{sp_name}.original_max_position_embeddings"),
                            format!("expected a positive integer, found {x}"),
                        )
                    })?,
                    None => f.usize("original_max_position_embeddings", Some(4096))?,
                };
                if om < 2 {
                    return Err(f.err(
                        "original_max_position_embeddings",
                        format!("{om} must be at least 2"),
                    ));
                }
                let num = |key: &str| -> Result<Option<f64>> {
                    match sp.get(key).filter(|x| !x.is_null()) {
                        None => Ok(None),
                        Some(x) => match x.as_f64() {
                            Some(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
                            _ => Err(f.err(
                                &format!("{sp_name}.{key}"),
                                format!("expected a positive number, found {x}"),
                            )),
                        },
                    }
                };
                let factor = num("factor")?.unwrap_or(sizes.max_positions as f64 / om as f64);
                let attention_factor = match num("attention_factor")? {
                    Some(a) => a,
                    None if factor <= 1.0 => 1.0,
                    None => (1.0 + ln_f64(factor) / ln_f64(om as f64)).sqrt(),
                };
                Some(LongRope {
                    short,
                    long,
                    original_max: om,
                    attention_factor,
                })
            }
            (fam, other) => {
                return Err(InferError::Unsupported(format!(
                    "{} `{sp_name}.rope_type` `{other}` (rope scaling) is not supported (supported: default{})",
                    if fam == Family::Phi { "phi" } else { "phi3" },
                    if fam == Family::Phi3 { ", longrope, su" } else { "" }
                )))
            }
        };
        let (act, window, eps) = match family {
            Family::Phi => {
                if f.bool("qk_layernorm", false)? {
                    return Err(InferError::Unsupported(
                        "phi with `qk_layernorm: true` is not supported yet".into(),
                    ));
                }
                let act = match f.str("hidden_act", Some("gelu_new"))?.as_str() {
                    "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => FfnAct::GeluTanh,
                    "gelu" => FfnAct::GeluErf,
                    other => {
                        return Err(f.err(
                            "hidden_act",
                            format!("`{other}` is not supported (supported: gelu_new, gelu_pytorch_tanh, gelu_fast, gelu)"),
                        ))
                    }
                };
                (act, None, f.eps("layer_norm_eps", 1e-5)?)
            }
            Family::Phi3 => {
                let act = f.str("hidden_act", Some("silu"))?;
                if act != "silu" {
                    return Err(f.err(
                        "hidden_act",
                        format!("`{act}` is not supported (supported: silu)"),
                    ));
                }
                let window = match f.opt_usize("sliding_window")? {
                    Some(0) => {
                        return Err(f.err(
                            "sliding_window",
                            "must be at least 1 (or null for full attention)",
                        ))
                    }
                    w => w,
                };
                (FfnAct::Silu, window, f.eps("rms_norm_eps", 1e-5)?)
            }
        };
        Ok(PhiConfig {
            family,
            rotary_dim,
            max_positions: sizes.max_positions,
            eps,
            rope_theta,
            longrope,
            window,
            act,
            sizes: sizes.decoder_sizes(f, head_dim, sizes.max_positions, false, false)?,
        })
    }
}

/// Rotary tables: one set of frequencies, or longrope's short and long sets, with the cos/sin
/// factor applied.
/// `1 / (ext[i] · base^(2i / dim))` in f32, as transformers computes it (no `ext` for plain
/// RoPE).
fn scaled_inv_freq(dim: usize, base: f64, ext: Option<&[f32]>) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| {
            let e = (2 * i) as f32 / dim as f32;
            let p = pow_f64(base, e as f64) as f32;
            let d = match ext {
                Some(x) => x[i] * p,
                None => p,
            };
            1.0f32 / d
        })
        .collect()
}

/// The rotary tables: plain, or longrope's short and long (chosen by the cache's capacity).
fn rotary(c: &PhiConfig) -> SwitchedRotary {
    let dim = c.rotary_dim;
    let n = c.max_positions;
    match &c.longrope {
        None => SwitchedRotary::new(
            dim,
            RopeTable::new(scaled_inv_freq(dim, c.rope_theta, None), n, None),
            None,
        ),
        Some(lr) => {
            let af = Some(lr.attention_factor as f32);
            SwitchedRotary::new(
                dim,
                RopeTable::new(scaled_inv_freq(dim, c.rope_theta, Some(&lr.short)), n, af),
                Some((
                    lr.original_max,
                    RopeTable::new(scaled_inv_freq(dim, c.rope_theta, Some(&lr.long)), n, af),
                )),
            )
        }
    }
}

/// Phi and Phi-3 in the registry; llama.cpp calls transformers' `phi` `phi2`.
pub(crate) const FAMILY: DecoderFamily = DecoderFamily {
    model_types: &["phi", "phi3"],
    gguf_architectures: &["phi3", "phi2"],
    hub: |config, store, be| load_with(config, store, None, be),
    gguf: |_, config, store, be| load_with(config, store, Some(&super::gguf::LAYOUT), be),
};

/// Loads a Phi / Phi-3 model from `config` and `store` through `layout` (default: the
/// Hub's, per family;
/// GGUF's names are the logical names, fused Phi-3 tensors included).
pub(crate) fn load_with(
    config: &ConfigSource,
    store: &WeightStore,
    layout: Option<&'static Layout>,
    be: &dyn GpuCompute,
) -> Result<DecoderModel> {
    let cfg = PhiConfig::parse(&config.fields()?)?;
    let (s, phi) = (&cfg.sizes, cfg.family == Family::Phi);
    let (h, q_dim, kv_dim) = (s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim);
    let hub = if phi { &LAYOUT } else { &LAYOUT_3 };
    let b = Builder::open(be, store, layout.unwrap_or(hub), h)?;
    let embed = b.embedding(s.vocab, s.tied)?;
    let attn = AttnShape {
        heads: s.heads,
        kv_heads: s.kv_heads,
        head_dim: s.head_dim,
        scale: (s.head_dim as f64).powf(-0.5) as f32,
        window: cfg.window,
        softcap: None,
    };
    // Phi: one LayerNorm feeding attention and the MLP, biases everywhere. Phi-3: the LLaMA
    // block over fused qkv and gate_up tensors.
    let norm = |base: &str| match phi {
        true => b.layer_norm(base, cfg.eps),
        false => b.rms(base, cfg.eps),
    };
    let blocks = b.blocks(s.layers, |i| {
        let t = |name: &str| b.layer(i, name);
        let biased = |base: &str, i, o| b.linear(base, i, o, true);
        Ok(Block {
            attn_norm: norm(&t("attn_norm"))?,
            qkv: match phi {
                true => b.qkv(i, (q_dim, kv_dim), true, None)?,
                false => b.linear(&t("attn_qkv"), h, q_dim + 2 * kv_dim, false)?,
            },
            o: b.linear(&t("attn_output"), q_dim, h, phi)?,
            residual: match phi {
                true => Residual::Parallel,
                false => Residual::Sequential {
                    ffn_norm: norm(&t("ffn_norm"))?,
                },
            },
            mlp: match phi {
                true => b.plain(i, s.intermediate, cfg.act, biased)?,
                false => b.gated(i, &["ffn_up"], s.intermediate, FfnAct::Silu)?,
            },
            attn,
        })
    })?;
    let described = Described {
        model_type: if phi { "phi" } else { "phi3" }.into(),
        positions: cfg.positions(),
        attention: cfg.attention(),
        ffn: match phi {
            true => format!("fc1 → {} → fc2", cfg.act.name()),
            false => "SwiGLU (fused gate_up)".into(),
        },
    };
    let parts = Parts {
        embed,
        embed_scale: None,
        rope: Rope::Switched(rotary(&cfg)),
        blocks,
        final_norm: norm(&b.global("output_norm"))?,
        // Phi's head has a bias (also when its weight is tied), Phi-3's none.
        lm_head: b.head(s.vocab, s.tied, phi)?,
        final_softcap: None,
    };
    Ok(assemble(s, described, parts))
}

impl PhiConfig {
    /// `describe`'s attention.
    fn attention(&self) -> String {
        let mut a = attention_kind(self.sizes.heads, self.sizes.kv_heads);
        if self.family == Family::Phi {
            a.push_str(", q/k/v/dense biases, parallel with the MLP");
        }
        if let Some(win) = self.window {
            a.push_str(&format!(", sliding window {win}"));
        }
        a
    }

    /// `describe`'s positions: the rotated share of each head and longrope's factors.
    fn positions(&self) -> String {
        let mut p = format!("rotary (theta {}", self.rope_theta);
        if self.rotary_dim < self.sizes.head_dim {
            p.push_str(&format!(
                ", {} of {} features per head",
                self.rotary_dim, self.sizes.head_dim
            ));
        }
        if let Some(lr) = &self.longrope {
            p.push_str(&format!(
                ", longrope: original context {}, attention factor {}",
                lr.original_max, lr.attention_factor
            ));
        }
        p.push(')');
        p
    }
}
