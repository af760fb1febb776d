//! ALBERT: factorized embeddings (`embedding_size` wide, LayerNorm there, then
//! `encoder.embedding_hidden_mapping_in` up to `hidden_size`) and cross-layer parameter
//! sharing: `num_hidden_groups` groups of `inner_group_num` BERT-style post-LayerNorm layers,
//! layer `i` running group `int(i / (num_hidden_layers / num_hidden_groups))` as transformers
//! computes it. Learned absolute positions and token types as BERT.
//!
//! The batch is packed exactly as for BERT: attention runs per sequence over its own keys.

use super::bert::{BERT_EMBEDDINGS, BERT_POSITIONS};
use super::{plain_ffn, post_ln_layers, EmbeddingRows, PositionIds, PostLnShape, TokenEmbeddings};
use crate::backend::{GpuCompute, Tensor};
use crate::error::Result;
use crate::io::config::{Activation, ModelArchitecture};
use crate::io::config_fields::ConfigFields;
use crate::io::safetensors::WeightStore;
use crate::io::source::{Layout, WeightSource};
use crate::models::{Batch, Encoder, EncoderSpec, Forward, Loaded};
use crate::nn::encoder::{run_post_ln, PostLnLayer, SelfAttention};
use crate::nn::Linear;
use std::path::Path;

/// Where checkpoints nest the encoder (`AlbertForMaskedLM` etc. save under `albert.`).
const PREFIXES: &[&str] = &["", "albert.", "model.", "encoder_model."];
/// Hugging Face's ALBERT layout in logical names (GGUF's BERT vocabulary, `io::source`, plus
/// `token_embd_proj`, the factorized embedding's map into the hidden size). A layer is named
/// by (group, layer in group): layers share weights across the groups' repeats.
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face ALBERT",
    prefixes: PREFIXES,
    globals: &[
        BERT_EMBEDDINGS,
        BERT_POSITIONS,
        &[("token_embd_proj", "encoder.embedding_hidden_mapping_in")],
    ],
    layer_prefix: "encoder.albert_layer_groups.{}.albert_layers.{}.",
    layer: &[&[
        ("attn_q", "attention.query"),
        ("attn_k", "attention.key"),
        ("attn_v", "attention.value"),
        ("attn_output", "attention.dense"),
        ("attn_output_norm", "attention.LayerNorm"),
        ("ffn_up", "ffn"),
        ("ffn_down", "ffn_output"),
        ("layer_output_norm", "full_layer_layer_norm"),
    ]],
};

/// A validated ALBERT config.
#[derive(Clone, Debug)]
struct AlbertConfig {
    vocab_size: usize,
    embedding_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_hidden_groups: usize,
    inner_group_num: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    hidden_act: Activation,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    layer_norm_eps: f32,
    pad_token_id: u32,
    dtype: Option<String>,
}

impl AlbertConfig {
    fn from_file(path: &Path) -> Result<Self> {
        let value: serde_json::Value = crate::io::read_json(path)?;
        let f = ConfigFields::new(&value, path)?;
        // Defaults are transformers' AlbertConfig defaults.
        let vocab_size = f.dim(&["vocab_size"], Some(30000))?;
        let embedding_size = f.dim(&["embedding_size"], Some(128))?;
        let hidden_size = f.dim(&["hidden_size"], None)?;
        let num_hidden_layers = f.dim(&["num_hidden_layers"], None)?;
        let num_hidden_groups = f.dim(&["num_hidden_groups"], Some(1))?;
        let inner_group_num = f.dim(&["inner_group_num"], Some(1))?;
        let num_attention_heads = f.dim(&["num_attention_heads"], None)?;
        let intermediate_size = f.dim(&["intermediate_size"], None)?;
        let max_position_embeddings = f.dim(&["max_position_embeddings"], Some(512))?;
        let type_vocab_size = f.dim(&["type_vocab_size"], Some(2))?;
        let layer_norm_eps = f.eps("layer_norm_eps", 1e-12)?;
        let hidden_act = crate::io::config::hidden_act(&f, "gelu_new")?;
        if let Some(p) = f.opt_str("position_embedding_type")? {
            if p != "absolute" {
                return Err(f.err(
                    "position_embedding_type",
                    format!("`{p}` is not supported (this build supports `absolute`)"),
                ));
            }
        }
        f.check_multiple(
            "hidden_size",
            hidden_size,
            "num_attention_heads",
            num_attention_heads,
        )?;
        if num_hidden_groups > num_hidden_layers {
            return Err(f.err(
                "num_hidden_groups",
                format!("{num_hidden_groups} groups for {num_hidden_layers} layers"),
            ));
        }
        Ok(AlbertConfig {
            pad_token_id: f.pad_token_id(0, vocab_size)?,
            dtype: f.dtype()?,
            vocab_size,
            embedding_size,
            hidden_size,
            num_hidden_layers,
            num_hidden_groups,
            inner_group_num,
            num_attention_heads,
            intermediate_size,
            hidden_act,
            max_position_embeddings,
            type_vocab_size,
            layer_norm_eps,
        })
    }

    /// transformers: `int(i / (num_hidden_layers / num_hidden_groups))`, in Python floats.
    fn group_of_layer(&self, i: usize) -> usize {
        let per = self.num_hidden_layers as f64 / self.num_hidden_groups as f64;
        ((i as f64 / per) as usize).min(self.num_hidden_groups - 1)
    }
}

/// The factorized embeddings: `embedding_size` wide, then mapped into the hidden size.
struct Embeddings {
    tokens: TokenEmbeddings,
    /// `embedding_size` → `hidden_size`.
    mapping_in: Linear,
}

/// An ALBERT encoder.
pub struct AlbertModel {
    cfg: AlbertConfig,
    emb: Embeddings,
    /// `[group][inner layer]`
    groups: Vec<Vec<PostLnLayer>>,
}

/// Loads an ALBERT encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    Ok(Box::new(AlbertModel::load(config, store, be)?))
}

impl AlbertModel {
    pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Loaded<Self>> {
        let cfg = AlbertConfig::from_file(config)?;
        let src = WeightSource::open(store, &LAYOUT)?;
        let w = src.weights();
        let (e, h, eps) = (cfg.embedding_size, cfg.hidden_size, cfg.layer_norm_eps);
        let rows = EmbeddingRows {
            vocab: cfg.vocab_size,
            types: cfg.type_vocab_size,
            positions: Some((cfg.max_position_embeddings, PositionIds::FromZero)),
        };
        let emb = Embeddings {
            tokens: TokenEmbeddings::load(be, &src, e, rows, eps)?,
            mapping_in: Linear::load(be, w, &src.global("token_embd_proj"), e, h)?,
        };
        // Layer k is (group, layer in group) = (k / inner_group_num, k % inner_group_num).
        let per = cfg.inner_group_num;
        let layers = post_ln_layers(
            be,
            w,
            cfg.num_hidden_groups * per,
            |k, name| src.layer_at(&[k / per, k % per], name),
            &PostLnShape::bert(h, eps),
            |t| plain_ffn(be, w, t, h, cfg.intermediate_size, cfg.hidden_act.into()),
        )?;
        let mut it = layers.into_iter();
        let groups = (0..cfg.num_hidden_groups)
            .map(|_| it.by_ref().take(cfg.inner_group_num).collect())
            .collect();
        let spec = EncoderSpec {
            architecture: ModelArchitecture::Albert,
            hidden_size: h,
            num_hidden_layers: cfg.num_hidden_layers,
            num_attention_heads: cfg.num_attention_heads,
            intermediate_size: cfg.intermediate_size,
            vocab_size: cfg.vocab_size,
            type_vocab_size: cfg.type_vocab_size,
            max_sequence_length: cfg.max_position_embeddings,
            pad_token_id: cfg.pad_token_id,
            positions: format!("learned absolute (factorized embeddings: {e} → {h})"),
            attention: format!(
                "multi-head softmax, post-LayerNorm; {} layers sharing {} group(s) of {} layer(s)",
                cfg.num_hidden_layers, cfg.num_hidden_groups, cfg.inner_group_num
            ),
            ffn: format!("dense + {}", cfg.hidden_act.name()),
            dtype: cfg.dtype.clone(),
        };
        Ok(Loaded::new(
            spec,
            w.prefix(),
            AlbertModel { emb, groups, cfg },
        ))
    }
}

impl Forward for AlbertModel {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor> {
        let (c, total) = (&self.cfg, batch.total);
        let h = c.hidden_size;

        // Embeddings: (word + token_type) + position, LayerNorm, all `embedding_size` wide.
        let emb = self.emb.tokens.forward(be, batch);
        let mut x = be.zeros(total * h);
        self.emb
            .mapping_in
            .forward(be, emb.view(), total, x.at_mut(..));

        let hd = h / c.num_attention_heads;
        let att = SelfAttention::scaled(&batch.spans, c.num_attention_heads, hd);
        let layers = (0..c.num_hidden_layers).flat_map(|i| &self.groups[c.group_of_layer(i)]);
        run_post_ln(be, layers, &mut x, total, h, &att);
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn layer_groups_follow_transformers() {
        // int(i / (5 / 2)) for i in 0..5 = 0, 0, 0, 1, 1; int(i / (12 / 5)) for 12 layers.
        let cfg = |layers, groups| super::AlbertConfig {
            vocab_size: 1,
            embedding_size: 1,
            hidden_size: 1,
            num_hidden_layers: layers,
            num_hidden_groups: groups,
            inner_group_num: 1,
            num_attention_heads: 1,
            intermediate_size: 1,
            hidden_act: crate::io::config::Activation::Relu,
            max_position_embeddings: 1,
            type_vocab_size: 1,
            layer_norm_eps: 0.0,
            pad_token_id: 0,
            dtype: None,
        };
        let c = cfg(5, 2);
        let g: Vec<usize> = (0..5).map(|i| c.group_of_layer(i)).collect();
        assert_eq!(g, vec![0, 0, 0, 1, 1]);
        let c = cfg(12, 5);
        let g: Vec<usize> = (0..12).map(|i| c.group_of_layer(i)).collect();
        assert_eq!(g, vec![0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4]);
    }
}
