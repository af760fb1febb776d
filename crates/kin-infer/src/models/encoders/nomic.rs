//! nomic-bert (nomic-embed-text): rotary position embeddings, a gated SwiGLU feed-forward,
//! fused QKV, post-LayerNorm blocks, token type embeddings, no learned positions.
//!
//! Two checkpoint layouts, both `model_type: nomic_bert`:
//!
//! - **original** (the published nomic-embed-text checkpoints, contrastors' remote code): config
//!   keys `n_embd`, `n_head`, `n_layer`, `n_inner`, `rotary_emb_fraction`, `rotary_emb_base`,
//!   `rotary_emb_interleaved`, `layer_norm_epsilon`, `qkv_proj_bias`, `mlp_fc1_bias`,
//!   `mlp_fc2_bias`, `n_positions`; tensors `emb_ln`, `encoder.layers.N.attn.Wqkv`,
//!   `attn.out_proj`, `mlp.fc11` (up) / `mlp.fc12` (gate) / `mlp.fc2`, `norm1`, `norm2`.
//! - **transformers 5.x** (`NomicBertModel`): `hidden_size`, `num_attention_heads`,
//!   `rope_parameters.rope_theta` (or `rope_theta`), `hidden_act`; tensors
//!   `embeddings.LayerNorm`, `layers.N.self_attn.{q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`,
//!   `post_attention_layernorm`, `post_mlp_layernorm`; full-width rotary, no biases.
//!
//! Forward (both): `LN(word + type)`; per layer `x = LN1(x + out(attn(rope(qkv(x)))))`,
//! `x = LN2(x + down(act(gate(x)) * up(x)))`. Positions restart at 0 in every sequence of the
//! packed batch, so a sequence's rows never depend on its neighbours.

use super::{post_ln_layers, EmbeddingRows, PostLnShape, TokenEmbeddings, QKV_SPLIT};
use crate::backend::{GpuCompute, Tensor};
use crate::error::Result;
use crate::io::config::ModelArchitecture;
use crate::io::config_fields::ConfigFields;
use crate::io::safetensors::WeightStore;
use crate::io::source::{self, WeightSource};
use crate::models::{Batch, Encoder, EncoderSpec, Forward, Loaded};
use crate::nn::encoder::{run_post_ln, EncoderFfn, PostLnLayer, SelfAttention};
use crate::nn::ffn::{FfnAct, GatedFfn};
use crate::nn::rope::Rotary;
use std::path::Path;

/// Prefixes a nomic-bert checkpoint may nest its encoder under (`nomic_bert.` is what
/// transformers' task heads write).
const PREFIXES: &[&str] = &["", "nomic_bert.", "bert.", "model.", "encoder_model."];
/// The published checkpoints' tensor names in logical names (GGUF's nomic-bert vocabulary,
/// `io::source`): a fused `attn_qkv`, gate `fc12`, up `fc11`.
static ORIGINAL_NAMES: source::Layout = source::Layout {
    name: "safetensors, nomic-bert (original names)",
    prefixes: PREFIXES,
    globals: &[&[
        ("token_embd", "embeddings.word_embeddings"),
        ("token_types", "embeddings.token_type_embeddings"),
        ("token_embd_norm", "emb_ln"),
    ]],
    layer_prefix: "encoder.layers.{}.",
    layer: &[&[
        ("attn_qkv", "attn.Wqkv"),
        ("attn_output", "attn.out_proj"),
        ("attn_output_norm", "norm1"),
        ("ffn_gate", "mlp.fc12"),
        ("ffn_up", "mlp.fc11"),
        ("ffn_down", "mlp.fc2"),
        ("layer_output_norm", "norm2"),
    ]],
};

/// transformers 5.x's `NomicBertModel` names (separate q, k, v).
static HF5_NAMES: source::Layout = source::Layout {
    name: "safetensors, nomic-bert (transformers 5 names)",
    prefixes: PREFIXES,
    globals: &[&[
        ("token_embd", "embeddings.word_embeddings"),
        ("token_types", "embeddings.token_type_embeddings"),
        ("token_embd_norm", "embeddings.LayerNorm"),
    ]],
    layer_prefix: "layers.{}.",
    layer: &[&[
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_output_norm", "post_attention_layernorm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("layer_output_norm", "post_mlp_layernorm"),
    ]],
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// The published checkpoints (`n_embd`, `Wqkv`, `fc11`/`fc12`).
    Original,
    /// transformers 5.x `NomicBertModel`.
    Transformers,
}

/// A validated nomic-bert config.
#[derive(Clone, Debug)]
struct NomicConfig {
    layout: Layout,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    head_dim: usize,
    intermediate_size: usize,
    type_vocab_size: usize,
    layer_norm_eps: f32,
    max_sequence_length: usize,
    rotary_dim: usize,
    rotary_base: f64,
    rotary_interleaved: bool,
    qkv_bias: bool,
    fc1_bias: bool,
    fc2_bias: bool,
    act: FfnAct,
    pad_token_id: u32,
    dtype: Option<String>,
}

impl NomicConfig {
    fn from_file(path: &Path) -> Result<Self> {
        let v: serde_json::Value = crate::io::read_json(path)?;
        let f = ConfigFields::new(&v, path)?;
        if v.get("n_embd").is_some() {
            Self::original(&f)
        } else {
            Self::transformers(&f)
        }
    }

    fn original(f: &ConfigFields) -> Result<Self> {
        for (field, bad_if_true) in [
            ("prenorm", "pre-LayerNorm blocks"),
            ("parallel_block", "parallel attention/MLP blocks"),
            ("use_rms_norm", "RMSNorm"),
            ("causal", "causal attention"),
        ] {
            if f.bool(field, false)? {
                return Err(f.err(
                    field,
                    format!("{bad_if_true} are not supported (expected false)"),
                ));
            }
        }
        if f.has("rotary_emb_scale_base") {
            return Err(f.err(
                "rotary_emb_scale_base",
                "xPos rotary scaling is not supported (expected null)",
            ));
        }
        let hidden = f.usize("n_embd", None)?;
        let heads = f.usize("n_head", None)?;
        let layers = f.usize("n_layer", None)?;
        let inner = f.usize("n_inner", Some(hidden.saturating_mul(4)))?;
        let vocab = f.usize("vocab_size", None)?;
        let type_vocab = f.usize("type_vocab_size", Some(2))?;
        let eps = f.f64("layer_norm_epsilon", 1e-5)?;
        f.check_sizes(&[
            ("n_embd", hidden),
            ("n_head", heads),
            ("n_layer", layers),
            ("n_inner", inner),
            ("vocab_size", vocab),
            ("type_vocab_size", type_vocab),
        ])?;
        f.check_multiple("n_embd", hidden, "n_head", heads)?;
        let head_dim = hidden / heads;
        let fraction = f.f64("rotary_emb_fraction", 0.0)?;
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(f.err(
                "rotary_emb_fraction",
                format!("{fraction}: only rotary checkpoints (0 < fraction <= 1) are supported"),
            ));
        }
        let rotary_dim = (head_dim as f64 * fraction) as usize;
        if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) {
            return Err(f.err(
                "rotary_emb_fraction",
                format!("gives {rotary_dim} rotary features of head_dim {head_dim}; must be even and > 0"),
            ));
        }
        let base = f.f64("rotary_emb_base", 10000.0)?;
        let n_positions = f.usize("n_positions", Some(2048))?;
        // Dynamic NTK scaling changes the frequencies only past `max_trained_positions`; up to
        // there it is plain rotary, so the limit is that length when scaling is configured.
        let max_len = if f.has("rotary_scaling_factor") {
            f.usize("max_trained_positions", Some(2048))?
                .min(n_positions)
        } else {
            n_positions
        };
        let act = match f.str("activation_function", Some("swiglu"))?.as_str() {
            "swiglu" => FfnAct::Silu,
            "geglu" => FfnAct::GeluErf,
            other => {
                return Err(f.err(
                    "activation_function",
                    format!("`{other}` is not supported (supported: swiglu, geglu)"),
                ))
            }
        };
        Ok(NomicConfig {
            layout: Layout::Original,
            vocab_size: vocab,
            hidden_size: hidden,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            head_dim,
            intermediate_size: inner,
            type_vocab_size: type_vocab,
            layer_norm_eps: f.check_eps("layer_norm_epsilon", eps)?,
            max_sequence_length: f.positive("n_positions", max_len)?,
            rotary_dim,
            rotary_base: f.positive_f64("rotary_emb_base", base)?,
            rotary_interleaved: f.bool("rotary_emb_interleaved", false)?,
            qkv_bias: f.bool("qkv_proj_bias", true)?,
            fc1_bias: f.bool("mlp_fc1_bias", true)?,
            fc2_bias: f.bool("mlp_fc2_bias", true)?,
            act,
            pad_token_id: f.pad_token_id(0, vocab)?,
            dtype: f.dtype()?,
        })
    }

    fn transformers(f: &ConfigFields) -> Result<Self> {
        let hidden = f.usize("hidden_size", None)?;
        let heads = f.usize("num_attention_heads", None)?;
        let layers = f.usize("num_hidden_layers", None)?;
        let inner = f.usize("intermediate_size", None)?;
        let vocab = f.usize("vocab_size", None)?;
        let type_vocab = f.usize("type_vocab_size", Some(2))?;
        let max_pos = f.usize("max_position_embeddings", Some(2048))?;
        f.check_sizes(&[
            ("hidden_size", hidden),
            ("num_attention_heads", heads),
            ("num_hidden_layers", layers),
            ("intermediate_size", inner),
            ("vocab_size", vocab),
            ("type_vocab_size", type_vocab),
            ("max_position_embeddings", max_pos),
        ])?;
        let head_dim = match f.opt_usize("head_dim")? {
            Some(d) => d,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(f.err(
                    "num_attention_heads",
                    format!(
                        "hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
                    ),
                ))
            }
        };
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(f.err(
                "head_dim",
                format!("{head_dim}: rotary needs an even head_dim"),
            ));
        }
        let (base, field) = match f.v.get("rope_parameters") {
            Some(serde_json::Value::Object(rp)) => {
                if let Some(t) = rp.get("rope_type").and_then(|t| t.as_str()) {
                    if t != "default" {
                        return Err(f.err(
                            "rope_parameters.rope_type",
                            format!("`{t}` is not supported (supported: default)"),
                        ));
                    }
                }
                match rp.get("rope_theta") {
                    Some(x) => (
                        x.as_f64().ok_or_else(|| {
                            f.err(
                                "rope_parameters.rope_theta",
                                format!("expected a number, found {x}"),
                            )
                        })?,
                        "rope_parameters.rope_theta",
                    ),
                    None => (f.f64("rope_theta", 1000.0)?, "rope_theta"),
                }
            }
            None | Some(serde_json::Value::Null) => (f.f64("rope_theta", 1000.0)?, "rope_theta"),
            Some(x) => {
                return Err(f.err("rope_parameters", format!("expected an object, found {x}")))
            }
        };
        let act = match f.str("hidden_act", Some("silu"))?.as_str() {
            "silu" | "swish" => FfnAct::Silu,
            "gelu" => FfnAct::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" => FfnAct::GeluTanh,
            "relu" => FfnAct::Relu,
            other => {
                return Err(f.err(
                    "hidden_act",
                    format!(
                    "`{other}` is not supported (supported: silu, gelu, gelu_pytorch_tanh, relu)"
                ),
                ))
            }
        };
        let eps = f.f64("layer_norm_eps", 1e-12)?;
        Ok(NomicConfig {
            layout: Layout::Transformers,
            vocab_size: vocab,
            hidden_size: hidden,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            head_dim,
            intermediate_size: inner,
            type_vocab_size: type_vocab,
            layer_norm_eps: f.check_eps("layer_norm_eps", eps)?,
            max_sequence_length: max_pos,
            rotary_dim: head_dim,
            rotary_base: f.positive_f64(field, base)?,
            rotary_interleaved: false,
            qkv_bias: false,
            fc1_bias: false,
            fc2_bias: false,
            act,
            pad_token_id: f.pad_token_id(0, vocab)?,
            dtype: f.dtype()?,
        })
    }

    fn inner(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }
}

/// A nomic-bert encoder.
pub struct NomicModel {
    cfg: NomicConfig,
    /// `LN(word + token_type)`, no position table.
    emb: TokenEmbeddings,
    rotary: Rotary,
    layers: Vec<PostLnLayer>,
}

/// Loads a nomic-bert encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    let cfg = NomicConfig::from_file(config)?;
    Ok(Box::new(NomicModel::load(cfg, store, be)?))
}

impl NomicModel {
    fn load(cfg: NomicConfig, store: &WeightStore, be: &dyn GpuCompute) -> Result<Loaded<Self>> {
        let h = cfg.hidden_size;
        let inner = cfg.inner();
        let ffn = cfg.intermediate_size;
        let eps = cfg.layer_norm_eps;
        let orig = cfg.layout == Layout::Original;
        // transformers 5.x reads both namings and *writes* the original one (its conversion
        // mapping runs in reverse on save), so the tensor naming is detected from the tensors,
        // independently of which config form the checkpoint carries. Both name the word
        // embedding alike, so either finds the prefix.
        let src = WeightSource::open(store, &ORIGINAL_NAMES)?;
        let orig_names = src.has_global("token_embd_norm", "weight")
            || src
                .weights()
                .contains(&format!("{}.weight", src.layer(0, "attn_qkv")));
        let src = if orig_names {
            src
        } else {
            WeightSource::open(store, &HF5_NAMES)?
        };
        let w = src.weights();
        let rows = EmbeddingRows {
            vocab: cfg.vocab_size,
            types: cfg.type_vocab_size,
            positions: None,
        };
        let emb = TokenEmbeddings::load(be, &src, h, rows, eps)?;
        let shape = PostLnShape {
            hidden: h,
            inner,
            qkv: if orig_names { &["attn_qkv"] } else { QKV_SPLIT },
            attn_bias: cfg.qkv_bias,
            eps,
        };
        let layers = post_ln_layers(
            be,
            w,
            cfg.num_hidden_layers,
            |i, name| src.layer(i, name),
            &shape,
            |t| {
                // gate first, then up: one GEMM, `act(gate) * up`.
                Ok(EncoderFfn::Gated(GatedFfn::load(
                    be,
                    w,
                    &[&t("ffn_gate"), &t("ffn_up")],
                    &t("ffn_down"),
                    h,
                    ffn,
                    cfg.fc1_bias,
                    cfg.fc2_bias,
                    cfg.act,
                )?))
            },
        )?;
        let rotary = Rotary::new(
            cfg.rotary_dim,
            cfg.rotary_base,
            cfg.rotary_interleaved,
            cfg.max_sequence_length,
        );
        let spec = EncoderSpec {
            architecture: ModelArchitecture::NomicBert,
            hidden_size: h,
            num_hidden_layers: cfg.num_hidden_layers,
            num_attention_heads: cfg.num_attention_heads,
            intermediate_size: ffn,
            vocab_size: cfg.vocab_size,
            type_vocab_size: cfg.type_vocab_size,
            max_sequence_length: cfg.max_sequence_length,
            pad_token_id: cfg.pad_token_id,
            positions: format!(
                "rotary ({}, {} of {} head dims, base {})",
                if cfg.rotary_interleaved {
                    "interleaved"
                } else {
                    "rotate-half"
                },
                cfg.rotary_dim,
                cfg.head_dim,
                cfg.rotary_base
            ),
            attention: format!(
                "multi-head softmax, fused QKV{}, post-LayerNorm ({} config, {} tensor names)",
                if cfg.qkv_bias { " + bias" } else { "" },
                if orig {
                    "original nomic"
                } else {
                    "transformers"
                },
                if orig_names {
                    "original"
                } else {
                    "transformers"
                }
            ),
            ffn: format!(
                "gated {} ({}(gate) * up -> down{})",
                cfg.act.glu_name(),
                cfg.act.name(),
                if cfg.fc1_bias || cfg.fc2_bias {
                    ", biased"
                } else {
                    ""
                }
            ),
            dtype: cfg.dtype.clone(),
        };
        Ok(Loaded::new(
            spec,
            w.prefix(),
            NomicModel {
                cfg,
                emb,
                rotary,
                layers,
            },
        ))
    }
}

impl Forward for NomicModel {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor> {
        let Batch {
            seqs,
            ref spans,
            total,
            ..
        } = *batch;
        let c = &self.cfg;
        let h = c.hidden_size;
        let mut x = self.emb.forward(be, batch);
        let positions: Vec<u32> = seqs.iter().flat_map(|s| 0..s.len() as u32).collect();
        let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0);

        let att = SelfAttention {
            rope: Some((self.rotary.chunk(0, longest), &positions)),
            ..SelfAttention::scaled(spans, c.num_attention_heads, c.head_dim)
        };
        run_post_ln(be, &self.layers, &mut x, total, h, &att);
        Ok(x)
    }
}
