//! The pre-norm transformer block, written once. Decoders run it causally over a KV cache
//! (kin-infer's `decoders::block::Stack`: rotary, cache appends and causal attention between
//! [`Block::qkv`] and [`Block::tail`]); encoders whose layers are pre-norm (T5, inMotion's
//! transformers) run it bidirectionally over packed sequences
//! ([`Block::forward_bidirectional`]). Both share the norms, projections, feed-forward and
//! residual styles below, op for op.
//!
//! Per layer: `n = norm(x)`, `a = o(attn(q, k, v))` of `qkv(n)`, then the [`Residual`] style
//! combines `a` with the feed-forward:
//! - sequential (LLaMA, Mistral, Qwen2, GPT-2, Phi-3, Gemma, T5, inMotion):
//!   `x += a; x += ffn(norm2(x))`;
//! - parallel (Phi): `x += a + ffn(n)`, as transformers' `attn + ff + residual` rounds;
//! - sandwich (Gemma 2): `x += post_attn(a); x += post_ffn(ffn(pre_ffn(x)))`.

use super::ffn::{FfnAct, FfnBuffers, GatedFfn};
use super::{Linear, Norm};
use crate::backend::{AttnBias, AttnShape, GpuCompute, SeqAttn, SeqSpan, Tensor, View, ViewMut};

/// How a block combines its attention and feed-forward with the residual stream.
pub enum Residual {
    /// `x += a; x += ffn(ffn_norm(x))`.
    Sequential { ffn_norm: Norm },
    /// `x += a + ffn(n)` on the attention's own normalized input `n`.
    Parallel,
    /// `x += post_attn(a); x += post_ffn(ffn(pre_ffn(x)))`.
    Sandwich {
        post_attn: Norm,
        pre_ffn: Norm,
        post_ffn: Norm,
    },
}

/// A block's feed-forward.
pub enum Mlp {
    /// `down(act(gate(x)) · up(x))`.
    Gated(GatedFfn),
    /// `fc2(act(fc1(x)))`; `fc1`'s output is `width` wide.
    Plain {
        fc1: Linear,
        act: FfnAct,
        fc2: Linear,
        width: usize,
    },
}

/// One pre-norm layer.
pub struct Block {
    pub attn_norm: Norm,
    /// Fused `[q | k | v]`.
    pub qkv: Linear,
    pub o: Linear,
    pub mlp: Mlp,
    pub residual: Residual,
    /// This layer's attention (heads, scale; causally also window and softcap).
    pub attn: AttnShape,
}

/// The buffers a block works in, for up to a number of rows.
pub struct BlockBuffers {
    /// `[rows, hidden]` residual stream.
    pub x: Tensor,
    /// `[rows, hidden]` normalized input of a sub-block.
    pub normed: Tensor,
    /// `[rows, max(q_dim + 2·kv_dim, plain ffn width)]` fused projections (a plain
    /// feed-forward's hidden layer reuses it once attention has run).
    pub qkv: Tensor,
    /// `[rows, q_dim]` attention output.
    pub attn: Tensor,
    /// `[rows, hidden]` attention sub-block output.
    pub out: Tensor,
    /// `[rows, hidden]` feed-forward output.
    pub mlp: Tensor,
    /// A gated feed-forward's buffers.
    pub ffn: Option<FfnBuffers>,
}

impl BlockBuffers {
    /// Buffers for `rows` rows: `qkv_dim` wide fused projections (at least every plain
    /// feed-forward's width), `gated` the widest gated feed-forward (0: none).
    pub fn new(
        be: &dyn GpuCompute,
        rows: usize,
        hidden: usize,
        q_dim: usize,
        qkv_dim: usize,
        gated: usize,
    ) -> Self {
        BlockBuffers {
            x: be.zeros(rows * hidden),
            normed: be.zeros(rows * hidden),
            qkv: be.zeros(rows * qkv_dim),
            attn: be.zeros(rows * q_dim),
            out: be.zeros(rows * hidden),
            mlp: be.zeros(rows * hidden),
            ffn: (gated > 0).then(|| FfnBuffers::new(be, rows, gated)),
        }
    }
}

impl Block {
    /// The whole layer over `rows` rows of `s.x` (`hidden` wide) holding the packed
    /// sequences `seqs`, each attending to all of itself (no cache, no rotary), with `bias`
    /// added to the scores. Needs `heads == kv_heads`.
    pub fn forward_bidirectional(
        &self,
        be: &dyn GpuCompute,
        s: &mut BlockBuffers,
        (rows, hidden): (usize, usize),
        seqs: &[SeqSpan],
        bias: Option<&AttnBias>,
    ) {
        let a = &self.attn;
        assert_eq!(
            a.heads, a.kv_heads,
            "bidirectional attention with grouped keys"
        );
        let n = rows * hidden;
        let q_dim = a.heads * a.head_dim;
        self.attn_norm
            .forward(be, s.x.at(..n), s.normed.at_mut(..n));
        self.qkv
            .forward(be, s.normed.at(..n), rows, s.qkv.at_mut(..rows * 3 * q_dim));
        let shape = SeqAttn {
            heads: a.heads,
            head_dim: a.head_dim,
            scale: a.scale,
            bias,
        };
        let qkv = s.qkv.at(..rows * 3 * q_dim);
        be.attention(qkv, seqs, &shape, s.attn.at_mut(..rows * q_dim));
        self.tail(be, s, rows, hidden, q_dim);
    }

    /// The layer after attention: the output projection, then the residual style with its
    /// feed-forward, on `rows` rows of `s`.
    pub fn tail(
        &self,
        be: &dyn GpuCompute,
        s: &mut BlockBuffers,
        rows: usize,
        h: usize,
        q_dim: usize,
    ) {
        let b = self;
        let n = rows * h;
        b.o.forward(be, s.attn.at(..rows * q_dim), rows, s.out.at_mut(..));
        match &b.residual {
            Residual::Sequential { ffn_norm } => {
                be.add(s.x.at_mut(..n), s.out.at(..n));
                ffn_norm.forward(be, s.x.at(..n), s.normed.at_mut(..n));
                b.ffn(be, s, rows, n);
                be.add(s.x.at_mut(..n), s.mlp.at(..n));
            }
            Residual::Parallel => {
                b.ffn(be, s, rows, n);
                be.add(s.out.at_mut(..n), s.mlp.at(..n));
                be.add(s.x.at_mut(..n), s.out.at(..n));
            }
            Residual::Sandwich {
                post_attn,
                pre_ffn,
                post_ffn,
            } => {
                post_attn.forward(be, s.out.at(..n), s.normed.at_mut(..n));
                be.add(s.x.at_mut(..n), s.normed.at(..n));
                pre_ffn.forward(be, s.x.at(..n), s.normed.at_mut(..n));
                b.ffn(be, s, rows, n);
                post_ffn.forward(be, s.mlp.at(..n), s.normed.at_mut(..n));
                be.add(s.x.at_mut(..n), s.normed.at(..n));
            }
        }
    }
}

impl Block {
    /// The feed-forward of `s.normed`'s first `n` values (`rows` rows) into `s.mlp`.
    fn ffn(&self, be: &dyn GpuCompute, s: &mut BlockBuffers, rows: usize, n: usize) {
        let x = s.normed.at(..n);
        self.mlp
            .forward(be, x, rows, &mut s.qkv, &mut s.ffn, s.mlp.at_mut(..));
    }
}

impl Mlp {
    /// Reads `rows` rows of `x`, writes `rows · hidden` of `out`; `inner` (the qkv buffer) and
    /// `ffn` are scratch.
    pub fn forward(
        &self,
        be: &dyn GpuCompute,
        x: View,
        rows: usize,
        inner: &mut Tensor,
        ffn: &mut Option<FfnBuffers>,
        out: ViewMut,
    ) {
        match self {
            Mlp::Gated(g) => g.forward(be, x, rows, ffn.as_mut().expect("gated buffers"), out),
            Mlp::Plain {
                fc1,
                act,
                fc2,
                width,
            } => {
                let w = rows * width;
                fc1.forward(be, x, rows, inner.at_mut(..w));
                act.apply(be, inner.at_mut(..w));
                fc2.forward(be, inner.at(..w), rows, out);
            }
        }
    }
}
