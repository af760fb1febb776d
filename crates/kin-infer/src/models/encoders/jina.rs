//! JinaBERT v2 layout (jina-embeddings-v2-*): `model_type: bert` with
//! `position_embedding_type: "alibi"`. A BERT with three changes:
//!
//! - no position embeddings: a symmetric ALiBi bias `-slope_h · |i - j|` is added to the scaled
//!   scores (the backend's [`AttnBias::Alibi`]), with the ALiBi paper's head slopes:
//!   `2^(-8(h+1)/n)` for a power-of-two head count `n`, else those of the closest lower power of
//!   two followed by every other slope of the next one;
//! - a gated feed-forward `mlp.gated_layers` (`[2 * intermediate, hidden]`, no bias):
//!   `act(h[:I]) * h[I:]` (GELU for `feed_forward_type: geglu`, ReLU for `reglu`), then `mlp.wo`;
//! - that feed-forward's residual + LayerNorm is `mlp.layernorm`.
//!
//! Attention is BERT's (`attention.self.{query,key,value}`, `attention.output.dense` +
//! residual + `attention.output.LayerNorm`); embeddings are `LN(word + token_type)`.
//! The bias of query `i` depends only on `i`, the key index and the head, so a sequence's rows
//! never depend on its neighbours in the packed batch.

use super::bert::{BERT_ATTENTION, BERT_EMBEDDINGS};
use super::{post_ln_layers, EmbeddingRows, PostLnShape, TokenEmbeddings};
use crate::backend::{AttnBias, GpuCompute, Tensor};
use crate::error::{InferError, Result};
use crate::io::config::ModelArchitecture;
use crate::io::config_fields::ConfigFields;
use crate::io::safetensors::WeightStore;
use crate::io::source::{Layout, WeightSource};
use crate::models::{Batch, Encoder, EncoderSpec, Forward, Loaded};
use crate::nn::encoder::{run_post_ln, EncoderFfn, PostLnLayer, SelfAttention};
use crate::nn::ffn::{FfnAct, GatedFfn};
use crate::nn::rope::exp2_f64;
use std::path::Path;

/// Prefixes a JinaBERT checkpoint may nest its encoder under.
const PREFIXES: &[&str] = &["", "bert.", "model.", "encoder_model."];
/// JinaBERT v2's Hugging Face layout, in logical names (GGUF's jina-bert-v2 vocabulary,
/// `io::source`): the fused gate-and-up projection is `ffn_up` with twice the rows.
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face JinaBERT v2",
    prefixes: PREFIXES,
    globals: &[BERT_EMBEDDINGS],
    layer_prefix: "encoder.layer.{}.",
    layer: &[
        BERT_ATTENTION,
        &[
            ("ffn_up", "mlp.gated_layers"),
            ("ffn_down", "mlp.wo"),
            ("layer_output_norm", "mlp.layernorm"),
        ],
    ],
};

#[derive(Clone, Debug)]
struct JinaConfig {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    type_vocab_size: usize,
    max_position_embeddings: usize,
    layer_norm_eps: f32,
    act: FfnAct,
    pad_token_id: u32,
    dtype: Option<String>,
}

impl JinaConfig {
    fn from_file(path: &Path) -> Result<Self> {
        let v: serde_json::Value = crate::io::read_json(path)?;
        let f = ConfigFields::new(&v, path)?;
        let pe = f.str("position_embedding_type", Some("absolute"))?;
        if pe != "alibi" {
            return Err(f.err(
                "position_embedding_type",
                format!("`{pe}`: the JinaBERT family needs `alibi`"),
            ));
        }
        let hidden = f.usize("hidden_size", None)?;
        let heads = f.usize("num_attention_heads", None)?;
        let layers = f.usize("num_hidden_layers", None)?;
        let inter = f.usize("intermediate_size", None)?;
        let vocab = f.usize("vocab_size", None)?;
        let type_vocab = f.usize("type_vocab_size", Some(2))?;
        let max_pos = f.usize("max_position_embeddings", None)?;
        f.check_sizes(&[
            ("hidden_size", hidden),
            ("num_attention_heads", heads),
            ("num_hidden_layers", layers),
            ("intermediate_size", inter),
            ("vocab_size", vocab),
            ("type_vocab_size", type_vocab),
            ("max_position_embeddings", max_pos),
        ])?;
        f.check_multiple("hidden_size", hidden, "num_attention_heads", heads)?;
        // The published remote code's default is "original" (a plain BERT MLP); every released
        // v2 checkpoint sets a GLU variant.
        let act = match f.str("feed_forward_type", Some("original"))?.as_str() {
            "geglu" => FfnAct::GeluErf,
            "reglu" => FfnAct::Relu,
            other => {
                return Err(f.err(
                    "feed_forward_type",
                    format!("`{other}` is not supported (supported: geglu, reglu)"),
                ))
            }
        };
        let eps = f.f64("layer_norm_eps", 1e-12)?;
        Ok(JinaConfig {
            vocab_size: vocab,
            hidden_size: hidden,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            intermediate_size: inter,
            type_vocab_size: type_vocab,
            max_position_embeddings: max_pos,
            layer_norm_eps: f.check_eps("layer_norm_eps", eps)?,
            act,
            pad_token_id: f.pad_token_id(0, vocab)?,
            dtype: f.dtype()?,
        })
    }
}

/// ALiBi head slopes (Press et al.): `2^(-8(h+1)/n)` for a power-of-two `n`; otherwise the
/// slopes of the closest lower power of two `p`, then every other slope of `2p`, `n - p` of them.
/// Computed in deterministic `f64` and rounded once to `f32` (as the reference's
/// `torch.Tensor(list_of_python_floats)`).
pub fn alibi_slopes(n: usize) -> Vec<f32> {
    fn pow2(n: usize) -> Vec<f64> {
        (0..n)
            .map(|h| exp2_f64(-8.0 * (h + 1) as f64 / n as f64))
            .collect()
    }
    fn slopes(n: usize) -> Vec<f64> {
        if n.is_power_of_two() {
            return pow2(n);
        }
        let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let mut s = pow2(p);
        s.extend(slopes(2 * p).into_iter().step_by(2).take(n - p));
        s
    }
    slopes(n).into_iter().map(|s| s as f32).collect()
}

/// A JinaBERT (ALiBi) encoder.
pub struct JinaModel {
    cfg: JinaConfig,
    /// `LN(word + token_type)`, no position table.
    emb: TokenEmbeddings,
    slopes: Vec<f32>,
    layers: Vec<PostLnLayer>,
}

/// Loads a JinaBERT (ALiBi) encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    let cfg = JinaConfig::from_file(config)?;
    Ok(Box::new(JinaModel::load(cfg, store, be)?))
}

impl JinaModel {
    fn load(cfg: JinaConfig, store: &WeightStore, be: &dyn GpuCompute) -> Result<Loaded<Self>> {
        let src = WeightSource::open(store, &LAYOUT)?;
        let w = src.weights();
        let h = cfg.hidden_size;
        let eps = cfg.layer_norm_eps;
        for (name, what) in [
            (
                "encoder.layer.0.attention.self.layer_norm_q.weight",
                "query/key LayerNorm",
            ),
            (
                "encoder.layer.0.mlp.up_gated_layer.weight",
                "`up_gated_layer` feed-forward",
            ),
        ] {
            if w.contains(name) {
                return Err(InferError::Unsupported(format!(
                    "{}: JinaBERT checkpoint with a {what} (the jina-bert-v2-qk-post-norm layout) \
                     is not supported yet",
                    store.origin().display()
                )));
            }
        }
        let rows = EmbeddingRows {
            vocab: cfg.vocab_size,
            types: cfg.type_vocab_size,
            positions: None,
        };
        let layers = post_ln_layers(
            be,
            w,
            cfg.num_hidden_layers,
            |i, name| src.layer(i, name),
            &PostLnShape::bert(h, eps),
            |t| {
                Ok(EncoderFfn::Gated(GatedFfn::load(
                    be,
                    w,
                    &[&t("ffn_up")],
                    &t("ffn_down"),
                    h,
                    cfg.intermediate_size,
                    false,
                    true,
                    cfg.act,
                )?))
            },
        )?;
        let slopes = alibi_slopes(cfg.num_attention_heads);
        let spec = EncoderSpec {
            architecture: ModelArchitecture::JinaBert,
            hidden_size: h,
            num_hidden_layers: cfg.num_hidden_layers,
            num_attention_heads: cfg.num_attention_heads,
            intermediate_size: cfg.intermediate_size,
            vocab_size: cfg.vocab_size,
            type_vocab_size: cfg.type_vocab_size,
            max_sequence_length: cfg.max_position_embeddings,
            pad_token_id: cfg.pad_token_id,
            positions: format!(
                "ALiBi (symmetric -slope*|i-j|, {} head slopes {} .. {})",
                slopes.len(),
                slopes.iter().copied().fold(f32::MIN, f32::max),
                slopes.iter().copied().fold(f32::MAX, f32::min)
            ),
            attention: "multi-head softmax + ALiBi bias, post-LayerNorm".into(),
            ffn: format!(
                "{} ({}(gated_layers[:I]) * gated_layers[I:] -> wo), post-LayerNorm",
                cfg.act.glu_name(),
                cfg.act.name()
            ),
            dtype: cfg.dtype.clone(),
        };
        Ok(Loaded::new(
            spec,
            w.prefix(),
            JinaModel {
                emb: TokenEmbeddings::load(be, &src, h, rows, eps)?,
                cfg,
                slopes,
                layers,
            },
        ))
    }
}

impl Forward for JinaModel {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor> {
        let (c, h) = (&self.cfg, self.cfg.hidden_size);
        let mut x = self.emb.forward(be, batch);
        let att = SelfAttention {
            bias: Some(AttnBias::Alibi {
                slopes: &self.slopes,
            }),
            ..SelfAttention::scaled(
                &batch.spans,
                c.num_attention_heads,
                h / c.num_attention_heads,
            )
        };
        run_post_ln(be, &self.layers, &mut x, batch.total, h, &att);
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::alibi_slopes;

    #[test]
    fn slopes_follow_the_alibi_paper() {
        assert_eq!(alibi_slopes(4), vec![0.25, 0.0625, 0.015625, 0.00390625]);
        // 5 heads: the 4-head slopes, then every other 8-head slope (2^-1).
        assert_eq!(
            alibi_slopes(5),
            vec![0.25, 0.0625, 0.015625, 0.00390625, 0.5]
        );
        // 12 heads (jina-embeddings-v2-base): 8-head slopes 2^-1..2^-8, then 2^-0.5, 2^-1.5, ...
        let s = alibi_slopes(12);
        assert_eq!(
            s[..8],
            [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
        );
        let want = [-0.5f64, -1.5, -2.5, -3.5];
        for (k, e) in want.iter().enumerate() {
            assert_eq!(s[8 + k], 2f64.powf(*e) as f32);
        }
    }
}
