//! Encoder families, one file each; the input embeddings and the post-LayerNorm layer the
//! BERT-like ones load alike are here.

pub mod albert;
pub mod bert;
pub mod deberta;
pub mod gguf;
pub mod jina;
pub mod nomic;
pub mod t5;

use crate::backend::{Act, GpuCompute, Tensor};
use crate::error::Result;
use crate::io::safetensors::Weights;
use crate::io::source::WeightSource;
use crate::models::Batch;
use crate::nn::embeddings::sum_embeddings;
use crate::nn::encoder::{EncoderFfn, PostLnLayer};
use crate::nn::{LayerNorm, Linear};
use rayon::prelude::*;

/// One post-LN layer's shape as its checkpoint stores it.
pub(crate) struct PostLnShape<'a> {
    pub hidden: usize,
    /// The attention width (heads · head dim), `hidden` in all but nomic's variants.
    pub inner: usize,
    /// Canonical names of the attention's input projections, fused into one GEMM of
    /// `3 · inner` outputs: q, k and v, or one stored `attn_qkv`.
    pub qkv: &'a [&'a str],
    /// Whether the attention's projections carry biases.
    pub attn_bias: bool,
    pub eps: f32,
}

impl PostLnShape<'static> {
    /// BERT's: attention as wide as the hidden size, q, k and v stored apart, with biases.
    pub fn bert(hidden: usize, eps: f32) -> Self {
        PostLnShape {
            hidden,
            inner: hidden,
            qkv: QKV_SPLIT,
            attn_bias: true,
            eps,
        }
    }
}

/// Loads `n` post-LN layers in parallel (load time is dominated by touching and packing
/// weights): `name(i, canonical)` names layer `i`'s tensors in the checkpoint, `ffn` loads a
/// layer's feed-forward from its names.
pub(crate) fn post_ln_layers(
    be: &dyn GpuCompute,
    w: &Weights,
    n: usize,
    name: impl Fn(usize, &str) -> String + Sync,
    s: &PostLnShape,
    ffn: impl Fn(&dyn Fn(&str) -> String) -> Result<EncoderFfn> + Sync,
) -> Result<Vec<PostLnLayer>> {
    (0..n)
        .into_par_iter()
        .map(|i| {
            let t = |canonical: &str| name(i, canonical);
            post_ln_layer(be, w, &t, s, ffn(&t)?)
        })
        .collect()
}

/// Loads a post-LN layer under the canonical tensor names (`t` maps one to the checkpoint's):
/// the fused attention projections, the output projection and its norm, `ffn`, the output
/// norm. transformers' order: LayerNorm(hidden + attention), then LayerNorm(attention + ffn).
fn post_ln_layer(
    be: &dyn GpuCompute,
    w: &Weights,
    t: &dyn Fn(&str) -> String,
    s: &PostLnShape,
    ffn: EncoderFfn,
) -> Result<PostLnLayer> {
    let qkv: Vec<String> = s.qkv.iter().map(|n| t(n)).collect();
    let qkv: Vec<&str> = qkv.iter().map(String::as_str).collect();
    let (h, inner) = (s.hidden, s.inner);
    Ok(PostLnLayer {
        qkv: Linear::load_with(be, w, &qkv, h, 3 * inner / qkv.len(), s.attn_bias)?,
        attn_out: Linear::load_with(be, w, &[&t("attn_output")], inner, h, s.attn_bias)?,
        attn_norm: LayerNorm::load(be, w, &t("attn_output_norm"), h, s.eps)?,
        ffn,
        out_norm: LayerNorm::load(be, w, &t("layer_output_norm"), h, s.eps)?,
    })
}

/// BERT's feed-forward: `ffn_down(act(ffn_up(x)))`, both with biases.
pub(crate) fn plain_ffn(
    be: &dyn GpuCompute,
    w: &Weights,
    t: &dyn Fn(&str) -> String,
    hidden: usize,
    width: usize,
    act: Act,
) -> Result<EncoderFfn> {
    Ok(EncoderFfn::Plain {
        intermediate: Linear::load(be, w, &t("ffn_up"), hidden, width)?,
        act,
        output: Linear::load(be, w, &t("ffn_down"), width, hidden)?,
        width,
    })
}

/// q, k and v as three stored tensors (every layout but nomic's original one).
pub(crate) const QKV_SPLIT: &[&str] = &["attn_q", "attn_k", "attn_v"];

/// Which row of the position table each token of a sequence reads.
#[derive(Clone, Copy)]
pub(crate) enum PositionIds {
    /// `0..len` (BERT, ALBERT).
    FromZero,
    /// RoBERTa's: `pad + cumsum(id != pad)` on real tokens and `pad` on pad tokens, as
    /// transformers' `create_position_ids_from_input_ids` computes them.
    PastPadding { pad: u32 },
}

impl PositionIds {
    fn of(self, ids: &[u32]) -> Vec<usize> {
        match self {
            PositionIds::FromZero => (0..ids.len()).collect(),
            PositionIds::PastPadding { pad } => {
                let mut count = 0;
                ids.iter()
                    .map(|&t| {
                        if t == pad {
                            pad as usize
                        } else {
                            count += 1;
                            pad as usize + count
                        }
                    })
                    .collect()
            }
        }
    }
}

/// BERT-style input embeddings: word and token-type tables, an optional learned position
/// table, and the LayerNorm of their sum (added in transformers' order, `nn::embeddings`).
pub(crate) struct TokenEmbeddings {
    /// `[vocab, width]`, usually borrowed from the map: only looked-up rows are read.
    word: Tensor,
    /// `[types, width]`
    token_type: Tensor,
    /// `[positions, width]` and how tokens index it.
    position: Option<(Tensor, PositionIds)>,
    norm: LayerNorm,
    width: usize,
}

/// The table sizes of [`TokenEmbeddings`]: rows of the word, token-type and (when the family
/// has one) position tables.
pub(crate) struct EmbeddingRows {
    pub vocab: usize,
    pub types: usize,
    pub positions: Option<(usize, PositionIds)>,
}

impl TokenEmbeddings {
    /// `token_embd`, `token_types`, `position_embd` (when `rows` has positions) and
    /// `token_embd_norm`, all `width` wide.
    pub(crate) fn load(
        be: &dyn GpuCompute,
        src: &WeightSource,
        width: usize,
        rows: EmbeddingRows,
        eps: f32,
    ) -> Result<Self> {
        let w = src.weights();
        let table = |name: &str, rows: usize| -> Result<Tensor> {
            let name = format!("{}.weight", src.global(name));
            Ok(be.upload_weights(w.get(&name, &[rows, width])?))
        };
        let position = match rows.positions {
            Some((n, ids)) => Some((table("position_embd", n)?, ids)),
            None => None,
        };
        Ok(TokenEmbeddings {
            word: table("token_embd", rows.vocab)?,
            token_type: table("token_types", rows.types)?,
            position,
            norm: LayerNorm::load(be, w, &src.global("token_embd_norm"), width, eps)?,
            width,
        })
    }

    /// The normed sum for every token of `batch`.
    pub(crate) fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Tensor {
        let of = |s: &[u32]| self.position.as_ref().map_or(vec![], |(_, ids)| ids.of(s));
        let pos = self
            .position
            .as_ref()
            .map(|(table, _)| (table, &of as &dyn Fn(&[u32]) -> Vec<usize>));
        let mut x = sum_embeddings(
            be,
            self.width,
            &self.word,
            &self.token_type,
            pos,
            batch.seqs,
            batch.type_ids,
        );
        self.norm.forward(be, x.at_mut(..));
        x
    }
}
