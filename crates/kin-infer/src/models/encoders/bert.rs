//! BERT, RoBERTa and XLM-RoBERTa: learned absolute positions (offset past the padding id for
//! the RoBERTa family), token type embeddings, post-LayerNorm blocks, GELU feed-forward.
//!
//! The batch is packed: every sequence contributes only its real tokens, one row each, and
//! attention runs per sequence over its own keys. No padding row is ever computed, so a
//! sequence's output cannot depend on its neighbours (the determinism contract) and no work
//! is spent on padding.

use super::{plain_ffn, post_ln_layers, EmbeddingRows, PositionIds, PostLnShape, TokenEmbeddings};
use crate::backend::{GpuCompute, Tensor};
use crate::error::Result;
use crate::io::config::BertConfig;
use crate::io::safetensors::WeightStore;
use crate::io::source::{Layout, Names, WeightSource};
use crate::models::{Batch, EncoderSpec, Forward, Loaded};
use crate::nn::encoder::{run_post_ln, PostLnLayer, SelfAttention};

/// Hugging Face's BERT layout (RoBERTa and XLM-RoBERTa share it), in logical names (GGUF's
/// BERT vocabulary, `io::source`); the prefix (`bert.`, `roberta.`, ...) is the
/// architecture's.
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face BERT",
    prefixes: &[""],
    globals: &[BERT_EMBEDDINGS, BERT_POSITIONS],
    layer_prefix: "encoder.layer.{}.",
    layer: &[BERT_ATTENTION, BERT_FFN],
};

/// The embeddings the BERT-style checkpoints name alike (BERT, RoBERTa, XLM-R, ALBERT,
/// DeBERTa, JinaBERT).
pub(super) const BERT_EMBEDDINGS: Names = &[
    ("token_embd", "embeddings.word_embeddings"),
    ("token_types", "embeddings.token_type_embeddings"),
    ("token_embd_norm", "embeddings.LayerNorm"),
];

/// Their learned absolute positions (JinaBERT has none: ALiBi).
pub(super) const BERT_POSITIONS: Names = &[("position_embd", "embeddings.position_embeddings")];

/// BERT's self-attention names (JinaBERT's too).
pub(super) const BERT_ATTENTION: Names = &[
    ("attn_q", "attention.self.query"),
    ("attn_k", "attention.self.key"),
    ("attn_v", "attention.self.value"),
    ("attn_output", "attention.output.dense"),
    ("attn_output_norm", "attention.output.LayerNorm"),
];

/// BERT's feed-forward names (DeBERTa's too).
pub(super) const BERT_FFN: Names = &[
    ("ffn_up", "intermediate.dense"),
    ("ffn_down", "output.dense"),
    ("layer_output_norm", "output.LayerNorm"),
];

/// A BERT-family encoder.
pub struct BertModel {
    cfg: BertConfig,
    emb: TokenEmbeddings,
    layers: Vec<PostLnLayer>,
}

impl BertModel {
    pub fn load(cfg: BertConfig, store: &WeightStore, be: &dyn GpuCompute) -> Result<Loaded<Self>> {
        let prefixes = cfg.architecture.weight_prefixes();
        Self::load_with(cfg, store, &LAYOUT, prefixes, be)
    }

    /// [`BertModel::load`] through another container's `layout` (a GGUF file's: its names
    /// are the logical names) under one of `prefixes`.
    pub(crate) fn load_with(
        cfg: BertConfig,
        store: &WeightStore,
        layout: &'static Layout,
        prefixes: &[&str],
        be: &dyn GpuCompute,
    ) -> Result<Loaded<Self>> {
        let src = WeightSource::open_with_prefixes(store, layout, prefixes)?;
        let w = src.weights();
        let h = cfg.hidden_size;
        let eps = cfg.layer_norm_eps;
        let ids = if cfg.architecture.offset_positions() {
            PositionIds::PastPadding {
                pad: cfg.pad_token_id,
            }
        } else {
            PositionIds::FromZero
        };
        let rows = EmbeddingRows {
            vocab: cfg.vocab_size,
            types: cfg.type_vocab_size,
            positions: Some((cfg.max_position_embeddings, ids)),
        };
        let emb = TokenEmbeddings::load(be, &src, h, rows, eps)?;
        let layers = post_ln_layers(
            be,
            w,
            cfg.num_hidden_layers,
            |i, name| src.layer(i, name),
            &PostLnShape::bert(h, eps),
            |t| plain_ffn(be, w, t, h, cfg.intermediate_size, cfg.hidden_act.into()),
        )?;
        let prefix = w.prefix().to_string();
        let spec = EncoderSpec {
            architecture: cfg.architecture,
            hidden_size: cfg.hidden_size,
            num_hidden_layers: cfg.num_hidden_layers,
            num_attention_heads: cfg.num_attention_heads,
            intermediate_size: cfg.intermediate_size,
            vocab_size: cfg.vocab_size,
            type_vocab_size: cfg.type_vocab_size,
            max_sequence_length: cfg.max_sequence_length(),
            pad_token_id: cfg.pad_token_id,
            positions: if cfg.architecture.offset_positions() {
                "learned absolute (offset past padding_idx)".into()
            } else {
                "learned absolute".into()
            },
            attention: "multi-head softmax, post-LayerNorm".into(),
            ffn: format!("dense + {}", cfg.hidden_act.name()),
            dtype: cfg.dtype.clone(),
        };
        Ok(Loaded::new(spec, &prefix, BertModel { cfg, emb, layers }))
    }

    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }
}

impl Forward for BertModel {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor> {
        let c = &self.cfg;
        // Embeddings: (word + token_type) + position, then LayerNorm (transformers' order).
        let mut x = self.emb.forward(be, batch);
        let att = SelfAttention::scaled(&batch.spans, c.num_attention_heads, c.head_dim());
        run_post_ln(be, &self.layers, &mut x, batch.total, c.hidden_size, &att);
        Ok(x)
    }
}
