//! GPT-2 (`model_type: gpt2`): learned absolute positions (`wpe`), pre-LayerNorm blocks
//! (`ln_1`, `ln_2`, final `ln_f`), fused `c_attn` (`[q | k | v]`) multi-head attention,
//! `c_fc` → GELU (tanh, `gelu_new`) → `c_proj` feed-forward, head tied to `wte`.
//!
//! Config: `n_embd`, `n_head`, `n_layer`, `vocab_size` (the Hub and transformers 5.x write the
//! same names; the `hidden_size` / `num_attention_heads` / `num_hidden_layers` aliases are read
//! too), `n_positions` (or the older `n_ctx`; default 1024) as the context, `n_inner` (null:
//! `4 * n_embd`), `layer_norm_epsilon` (1e-5), `activation_function`, `scale_attn_weights`,
//! `scale_attn_by_inverse_layer_idx`.
//!
//! Tensors, with or without the `transformer.` prefix (the Hub's original `gpt2` has none):
//! `wte.weight`, `wpe.weight`, `h.N.{ln_1,ln_2}.{weight,bias}`,
//! `h.N.attn.{c_attn,c_proj}.{weight,bias}`, `h.N.mlp.{c_fc,c_proj}.{weight,bias}`,
//! `ln_f.{weight,bias}`; `lm_head.weight` only when `tie_word_embeddings` is false. The
//! `Conv1D` weights are stored `[in, out]` (transposed relative to `nn.Linear`): they are
//! transposed once at load, then packed like any linear.
//!
//! Forward of a chunk at positions `p0..p0+rows`: `x = wte[ids] + wpe[p0..]`; per layer
//! `x += c_proj(attn(c_attn(ln_1(x))) ∪ cache)`, then `x += c_proj(gelu(c_fc(ln_2(x))))`;
//! logits `= ln_f(x) · wteᵀ`.

use super::block::{Block, DecoderModel, Parts, Residual, Rope};
use super::build::{assemble, Builder, Described};
use super::Sizes;
use super::{special_ids, DecoderFamily};
use crate::backend::StoredRows;
use crate::backend::{AttnShape, GpuCompute};
use crate::error::{InferError, Result};
use crate::io::config_fields::{ConfigFields, ConfigSource};
use crate::io::safetensors::{WeightStore, Weights};
use crate::io::source::Layout;
use crate::nn::ffn::FfnAct;
use crate::nn::Linear;

/// Hugging Face's GPT-2 layout, in logical names (`io::source`); `transformer.` nests it when
/// saved from `GPT2LMHeadModel`.
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face GPT-2",
    prefixes: &["transformer.", ""],
    globals: &[&[
        ("token_embd", "wte"),
        ("position_embd", "wpe"),
        ("output_norm", "ln_f"),
        ("output", "lm_head"),
    ]],
    layer_prefix: "h.{}.",
    layer: &[&[
        ("attn_norm", "ln_1"),
        ("attn_qkv", "attn.c_attn"),
        ("attn_output", "attn.c_proj"),
        ("ffn_norm", "ln_2"),
        ("ffn_up", "mlp.c_fc"),
        ("ffn_down", "mlp.c_proj"),
    ]],
};

/// GGUF's GPT-2 (llama.cpp's converter): its own names, the `Conv1D` weights already
/// transposed to `[out, in]`, and the tied head written out as `output`.
pub(crate) static GGUF_LAYOUT: Layout = Layout {
    name: "GGUF (llama.cpp), GPT-2",
    prefixes: &[""],
    globals: &[&[
        ("token_embd", "token_embd"),
        ("position_embd", "position_embd"),
        ("output_norm", "output_norm"),
        ("output", "output"),
    ]],
    layer_prefix: "blk.{}.",
    layer: &[&[
        ("attn_norm", "attn_norm"),
        ("attn_qkv", "attn_qkv"),
        ("attn_output", "attn_output"),
        ("ffn_norm", "ffn_norm"),
        ("ffn_up", "ffn_up"),
        ("ffn_down", "ffn_down"),
    ]],
};

/// A validated GPT-2 config.
#[derive(Clone, Debug)]
struct Gpt2Config {
    /// The sizes (`intermediate`: `n_inner`, `context`: `n_positions`).
    sizes: Sizes,
    eps: f32,
    act: FfnAct,
    scale_attn_weights: bool,
    scale_by_layer: bool,
}

impl Gpt2Config {
    fn parse(f: &ConfigFields) -> Result<Self> {
        let hidden = f.dim(&["n_embd", "hidden_size"], None)?;
        let heads = f.dim(&["n_head", "num_attention_heads"], None)?;
        let layers = f.dim(&["n_layer", "num_hidden_layers"], None)?;
        let vocab = f.dim(&["vocab_size"], None)?;
        let positions = f.dim(
            &["n_positions", "n_ctx", "max_position_embeddings"],
            Some(1024),
        )?;
        let inner = f.dim(&["n_inner"], Some(4 * hidden))?;
        f.check_multiple("n_embd", hidden, "n_head", heads)?;
        let act = match f.str("activation_function", Some("gelu_new"))?.as_str() {
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => FfnAct::GeluTanh,
            "gelu" => FfnAct::GeluErf,
            "relu" => FfnAct::Relu,
            other => {
                return Err(f.err(
                    "activation_function",
                    format!(
                        "`{other}` is not supported (supported: gelu_new, gelu_pytorch_tanh, \
                         gelu_fast, gelu, relu)"
                    ),
                ))
            }
        };
        if f.bool("add_cross_attention", false)? {
            return Err(InferError::Unsupported(
                "gpt2 with `add_cross_attention: true` (an encoder-decoder) is not supported"
                    .into(),
            ));
        }
        let (eos, bos) = special_ids(f, vocab, false)?;
        Ok(Gpt2Config {
            eps: f.eps("layer_norm_epsilon", 1e-5)?,
            act,
            scale_attn_weights: f.bool("scale_attn_weights", true)?,
            scale_by_layer: f.bool("scale_attn_by_inverse_layer_idx", false)?,
            sizes: Sizes {
                vocab,
                hidden,
                layers,
                heads,
                kv_heads: heads,
                head_dim: hidden / heads,
                intermediate: inner,
                context: positions,
                tied: f.bool("tie_word_embeddings", true)?,
                eos,
                bos,
                dtype: f.dtype()?,
            },
        })
    }

    /// The attention scale of layer `l`, computed in f64 and rounded once, as transformers
    /// does (`head_dim ** -0.5`, divided by `l + 1` with `scale_attn_by_inverse_layer_idx`).
    fn attn_scale(&self, l: usize) -> f32 {
        let mut s = 1.0f64;
        if self.scale_attn_weights {
            s = 1.0 / (self.sizes.head_dim as f64).sqrt();
        }
        if self.scale_by_layer {
            s /= (l + 1) as f64;
        }
        s as f32
    }
}

/// A `Conv1D` (`x · W + b`, `W` stored `[in, out]`) as a [`Linear`]: the weight is transposed
/// once to the `[out, in]` layout the backend packs.
fn conv1d(
    be: &dyn GpuCompute,
    w: &Weights,
    name: &str,
    in_dim: usize,
    out_dim: usize,
) -> Result<Linear> {
    let wt = w.get(&format!("{name}.weight"), &[in_dim, out_dim])?;
    let mut t = vec![0.0f32; in_dim * out_dim];
    for (i, row) in wt.chunks_exact(out_dim).enumerate() {
        for (o, &v) in row.iter().enumerate() {
            t[o * in_dim + i] = v;
        }
    }
    let bias = w.get(&format!("{name}.bias"), &[out_dim])?.to_vec();
    Ok(Linear::from_parts(
        be,
        be.prepare_weights(&[StoredRows::F32(&t)], in_dim)?,
        Some(bias),
    ))
}

/// GPT-2 in the registry. Hugging Face stores its projections as `Conv1D` (`[in, out]`);
/// llama.cpp's converter transposes them to `[out, in]`.
pub(crate) const FAMILY: DecoderFamily = DecoderFamily {
    model_types: &["gpt2"],
    gguf_architectures: &["gpt2"],
    hub: |config, store, be| load_with(config, store, &LAYOUT, true, be),
    gguf: |_, config, store, be| load_with(config, store, &GGUF_LAYOUT, false, be),
};

/// Loads a GPT-2 model from `config` and `store` through `layout`; `conv1d_weights`: the projection weights
/// are stored `[in, out]` (Hugging Face) rather than `[out, in]` (GGUF), whose matrices then
/// stay in their stored format.
pub(crate) fn load_with(
    config: &ConfigSource,
    store: &WeightStore,
    layout: &'static Layout,
    conv1d_weights: bool,
    be: &dyn GpuCompute,
) -> Result<DecoderModel> {
    let cfg = Gpt2Config::parse(&config.fields()?)?;
    let s = &cfg.sizes;
    let h = s.hidden;
    let b = Builder::open(be, store, layout, h)?;
    let embed = b.embedding(s.vocab, s.tied)?;
    let linear = |name: &str, i: usize, o: usize| match conv1d_weights {
        true => conv1d(be, b.w(), name, i, o),
        false => b.linear(name, i, o, true),
    };
    let wpe = format!("{}.weight", b.global("position_embd"));
    let wpe = be.upload(b.w().get(&wpe, &[s.context, h])?.to_vec());
    let blocks = b.blocks(s.layers, |i| {
        let t = |name: &str| b.layer(i, name);
        Ok(Block {
            attn_norm: b.layer_norm(&t("attn_norm"), cfg.eps)?,
            qkv: linear(&t("attn_qkv"), h, 3 * h)?,
            o: linear(&t("attn_output"), h, h)?,
            residual: Residual::Sequential {
                ffn_norm: b.layer_norm(&t("ffn_norm"), cfg.eps)?,
            },
            mlp: b.plain(i, s.intermediate, cfg.act, linear)?,
            attn: AttnShape {
                heads: s.heads,
                kv_heads: s.heads,
                head_dim: s.head_dim,
                scale: cfg.attn_scale(i),
                window: None,
                softcap: None,
            },
        })
    })?;
    let final_norm = b.layer_norm(&b.global("output_norm"), cfg.eps)?;
    let lm_head = if s.tied {
        b.head(s.vocab, true, false)?
    } else {
        // `lm_head` sits beside `transformer.`, not under it.
        let head = b.global("output");
        let top = Weights::with_prefixes(store, &[""], &format!("{head}.weight"))?;
        Linear::load_with(be, &top, &[&head], h, s.vocab, false)?
    };
    let described = Described {
        model_type: "gpt2".into(),
        positions: format!("learned absolute ({} positions)", s.context),
        attention: format!("causal, multi-head ({} heads)", s.heads),
        ffn: format!("{} MLP", cfg.act.name()),
    };
    let parts = Parts {
        embed,
        embed_scale: None,
        rope: Rope::Learned(wpe),
        blocks,
        final_norm,
        lm_head,
        final_softcap: None,
    };
    Ok(assemble(s, described, parts))
}
