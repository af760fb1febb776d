//! The post-LayerNorm encoder layer BERT, RoBERTa, ALBERT, JinaBERT and nomic-bert share,
//! written once (transformers' order: `x = LN(x + attn_out(attn(qkv(x))))`, then
//! `x = LN(x + ffn(x))`), with the choices those families make: the attention bias (ALiBi),
//! rotary q/k (nomic), a plain or gated feed-forward.

use super::ffn::{FfnBuffers, GatedFfn};
use super::rope::RotaryChunk;
use super::{LayerNorm, Linear};
use crate::backend::{Act, AttnBias, GpuCompute, Positions, RopeRows, SeqAttn, SeqSpan, Tensor};

/// An encoder layer's feed-forward.
pub enum EncoderFfn {
    /// `output(act(intermediate(x)))`, `intermediate` producing `width` features.
    Plain {
        intermediate: Linear,
        act: Act,
        output: Linear,
        width: usize,
    },
    /// `down(act(gate(x)) · up(x))`.
    Gated(GatedFfn),
}

impl EncoderFfn {
    fn width(&self) -> usize {
        match self {
            EncoderFfn::Plain { width, .. } => *width,
            EncoderFfn::Gated(g) => g.intermediate(),
        }
    }
}

/// One post-LN layer.
pub struct PostLnLayer {
    /// q, k, v fused: `[3 · inner, hidden]`.
    pub qkv: Linear,
    pub attn_out: Linear,
    pub attn_norm: LayerNorm,
    pub ffn: EncoderFfn,
    pub out_norm: LayerNorm,
}

/// The attention every layer of a forward pass shares.
pub struct SelfAttention<'a> {
    pub spans: &'a [SeqSpan],
    pub heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    pub bias: Option<AttnBias<'a>>,
    /// Rotary q/k: the tables and each packed row's position.
    pub rope: Option<(RotaryChunk<'a>, &'a [u32])>,
}

impl<'a> SelfAttention<'a> {
    /// Attention over `spans` scaled by 1/√head_dim, with neither bias nor rotary.
    pub fn scaled(spans: &'a [SeqSpan], heads: usize, head_dim: usize) -> Self {
        SelfAttention {
            spans,
            heads,
            head_dim,
            scale: 1.0 / (head_dim as f32).sqrt(),
            bias: None,
            rope: None,
        }
    }
}

/// Runs `layers` in order on the `rows` rows of `x` (`hidden` wide), in place, all with
/// `att` and one set of scratch sized by the first.
pub fn run_post_ln<'l>(
    be: &dyn GpuCompute,
    layers: impl IntoIterator<Item = &'l PostLnLayer>,
    x: &mut Tensor,
    rows: usize,
    hidden: usize,
    att: &SelfAttention,
) {
    let mut layers = layers.into_iter().peekable();
    let Some(&first) = layers.peek() else {
        return;
    };
    let mut buf = EncoderBuffers::new(be, rows, hidden, att.heads * att.head_dim, first);
    for layer in layers {
        layer.forward(be, x, rows, att, &mut buf);
    }
}

/// Scratch of a forward pass, allocated once for the batch.
pub struct EncoderBuffers {
    qkv: Tensor,
    ctx: Tensor,
    tmp: Tensor,
    inter: Tensor,
    ffn: Option<FfnBuffers>,
}

impl EncoderBuffers {
    /// For `rows` tokens of `hidden`, attention `inner` wide, and `layer`'s feed-forward.
    pub fn new(
        be: &dyn GpuCompute,
        rows: usize,
        hidden: usize,
        inner: usize,
        layer: &PostLnLayer,
    ) -> Self {
        let (plain, gated) = match &layer.ffn {
            EncoderFfn::Plain { width, .. } => (*width, None),
            EncoderFfn::Gated(_) => (0, Some(FfnBuffers::new(be, rows, layer.ffn.width()))),
        };
        EncoderBuffers {
            qkv: be.zeros(rows * 3 * inner),
            ctx: be.zeros(rows * inner),
            tmp: be.zeros(rows * hidden),
            inter: be.zeros(rows * plain),
            ffn: gated,
        }
    }
}

impl PostLnLayer {
    /// Runs the layer on the `rows` rows of `x`, in place.
    pub fn forward(
        &self,
        be: &dyn GpuCompute,
        x: &mut Tensor,
        rows: usize,
        att: &SelfAttention,
        buf: &mut EncoderBuffers,
    ) {
        let inner = att.heads * att.head_dim;
        self.qkv.forward(be, x.view(), rows, buf.qkv.at_mut(..));
        if let Some((rotary, pos)) = &att.rope {
            let at = RopeRows {
                rows,
                stride: 3 * inner,
                width: 2 * inner,
                head_dim: att.head_dim,
            };
            be.rope(buf.qkv.at_mut(..), at, Positions::List(pos), rotary);
        }
        let shape = SeqAttn {
            heads: att.heads,
            head_dim: att.head_dim,
            scale: att.scale,
            bias: att.bias.as_ref(),
        };
        be.attention(buf.qkv.view(), att.spans, &shape, buf.ctx.at_mut(..));
        self.attn_out
            .forward(be, buf.ctx.view(), rows, buf.tmp.at_mut(..));
        be.add(buf.tmp.at_mut(..), x.view());
        self.attn_norm.forward(be, buf.tmp.at_mut(..));
        std::mem::swap(x, &mut buf.tmp);

        match &self.ffn {
            EncoderFfn::Plain {
                intermediate,
                act,
                output,
                ..
            } => {
                intermediate.forward(be, x.view(), rows, buf.inter.at_mut(..));
                be.activation(buf.inter.at_mut(..), *act);
                output.forward(be, buf.inter.view(), rows, buf.tmp.at_mut(..));
            }
            EncoderFfn::Gated(g) => g.forward(
                be,
                x.view(),
                rows,
                buf.ffn.as_mut().expect("gated buffers"),
                buf.tmp.at_mut(..),
            ),
        }
        be.add(buf.tmp.at_mut(..), x.view());
        self.out_norm.forward(be, buf.tmp.at_mut(..));
        std::mem::swap(x, &mut buf.tmp);
    }
}
