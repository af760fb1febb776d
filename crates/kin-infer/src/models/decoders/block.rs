//! The decoder block and stack every decoder family is configured into: a family file parses
//! its config and loads its tensors into a [`Stack`]; the forward pass is written once, here.
//!
//! Per layer, the shared pre-norm [`Block`] (`nn::block`, which T5 and inMotion run
//! bidirectionally): `n = norm(x)`, `a = o(attn(rope(q), rope(k) ∪ cache, v ∪ cache))` on
//! `n`, then the block's residual style with its feed-forward ([`Block::tail`]).
//!
//! Then `logits = lm_head(norm(x))` for the rows asked, optionally soft-capped.
//! Determinism: every op is per row or per (query, head), so a chunk of one row computes what
//! the same row computes inside a longer chunk, and incremental decoding equals the full pass.

use super::cache::{Buffers, KvCache, Scratch, ScratchDims};
use super::{BatchScratch, Decoder, DecoderSpec, LogitsRows, Sizes};
use crate::backend::{
    CausalAttn, DeviceMatrix, GpuCompute, KvView, Positions, QkvRows, RopeRows, Tensor, ViewMut,
};
use crate::error::{InferError, Result};
pub(crate) use crate::nn::block::{Block, Mlp, Residual};
use crate::nn::rope::{Rotary, RotaryChunk, SwitchedRotary};
use crate::nn::{Linear, Norm};

/// Positions of a decoder.
pub(crate) enum Rope {
    /// Learned absolute positions added to the token embeddings (GPT-2's `wpe`).
    Learned(Tensor),
    /// Rotary q/k (its scaling tables; dynamic scaling per chunk).
    Rotary(Rotary),
    /// Rotary tables chosen by the cache's capacity (Phi-3 longrope), partial or full.
    Switched(SwitchedRotary),
}

/// Where the token embeddings live.
pub(crate) enum Embedding {
    /// An f32 table.
    Table(Tensor),
    /// A prepared matrix in its stored format (a quantized table stays quantized; each
    /// gathered row is dequantized exactly).
    Matrix(DeviceMatrix),
    /// The tied head's own weight (no second copy of the table).
    Head,
}

/// A loaded decoder: configuration plus blocks.
pub(crate) struct Stack {
    /// The sizes the spec states too (hidden, heads, kv_heads, head_dim, vocab are read here).
    pub(crate) sizes: Sizes,
    pub(crate) parts: Parts,
}

/// The loaded pieces of a decoder around its blocks.
pub(crate) struct Parts {
    pub(crate) embed: Embedding,
    /// Gemma multiplies the gathered embeddings by `sqrt(hidden)`.
    pub(crate) embed_scale: Option<f32>,
    pub(crate) rope: Rope,
    pub(crate) blocks: Vec<Block>,
    pub(crate) final_norm: Norm,
    pub(crate) lm_head: Linear,
    pub(crate) final_softcap: Option<f32>,
}

impl Stack {
    fn q_dim(&self) -> usize {
        self.sizes.heads * self.sizes.head_dim
    }

    fn kv_dim(&self) -> usize {
        self.sizes.kv_heads * self.sizes.head_dim
    }

    fn dims(&self) -> ScratchDims {
        let (q_dim, kv_dim) = (self.q_dim(), self.kv_dim());
        let mut qkv_dim = q_dim + 2 * kv_dim;
        let mut gated = 0;
        for b in &self.parts.blocks {
            match &b.mlp {
                Mlp::Plain { width, .. } => qkv_dim = qkv_dim.max(*width),
                Mlp::Gated(g) => gated = gated.max(g.intermediate()),
            }
        }
        ScratchDims {
            hidden: self.sizes.hidden,
            q_dim,
            qkv_dim,
            heads: self.sizes.heads,
            gated,
            vocab: self.sizes.vocab,
        }
    }

    /// Runs `ids` at positions `cache.len()..`, appends their keys and values to `cache`, and
    /// returns the logits of `out_rows` (host memory). On error the cache is unchanged.
    pub(crate) fn forward<'c>(
        &self,
        be: &dyn GpuCompute,
        spec: &DecoderSpec,
        ids: &[u32],
        cache: &'c mut KvCache,
        out_rows: LogitsRows,
    ) -> Result<&'c [f32]> {
        let rows = ids.len();
        // The step takes the cache for its keys and values; its scratch is lent meanwhile.
        let mut scratch = std::mem::take(&mut cache.scratch);
        let ran = self.run(be, spec, ids, rows, &mut [&mut *cache], &mut scratch);
        cache.scratch = scratch;
        ran?;
        let (first, n) = out_rows.span(rows);
        // A refused step leaves the cache as it was (the length is a field apart from the
        // scratch the logits borrow, so it can be wound back on the error path).
        match self.checked_head(be, &mut cache.scratch, first, n) {
            Ok(logits) => Ok(logits),
            Err(e) => {
                cache.len -= rows;
                Err(e)
            }
        }
    }

    /// One decode step of several sequences at once: `ids[i]` at position `caches[i].len()`
    /// of its own cache, through the same [`Self::run`] as [`Self::forward`]. Every op is per
    /// row or per (query, head), so each sequence's logits have the bits its own `forward`
    /// would give (tested). Returns `[ids.len(), vocab]` logits; on error no cache has
    /// changed.
    pub(crate) fn decode_batch<'s>(
        &self,
        be: &dyn GpuCompute,
        spec: &DecoderSpec,
        ids: &[u32],
        caches: &mut [&mut KvCache],
        scratch: &'s mut Scratch,
    ) -> Result<&'s [f32]> {
        let rows = ids.len();
        if rows == 0 || caches.len() != rows {
            return Err(crate::error::InferError::Input(format!(
                "a decode batch of {rows} ids for {} caches",
                caches.len()
            )));
        }
        self.run(be, spec, ids, 1, caches, scratch)?;
        match self.checked_head(be, scratch, 0, rows) {
            Ok(logits) => Ok(logits),
            Err(e) => {
                for c in caches.iter_mut() {
                    c.len -= 1;
                }
                Err(e)
            }
        }
    }

    /// The one layer loop: `ids` is `caches.len()` chunks of `per` rows, chunk `i` at
    /// positions `caches[i].len()..` of its cache. The projections and feed-forwards run as
    /// one `ids.len()`-row GEMM (the weights read once for all), rotary, cache appends and
    /// attention per chunk; then every cache advances by `per`. Checks every chunk before
    /// anything is written.
    fn run(
        &self,
        be: &dyn GpuCompute,
        spec: &DecoderSpec,
        ids: &[u32],
        per: usize,
        caches: &mut [&mut KvCache],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let rows = ids.len();
        let h = self.sizes.hidden;
        let (q_dim, kv_dim) = (self.q_dim(), self.kv_dim());
        let qkv_dim = q_dim + 2 * kv_dim;
        let mut max_capacity = 0;
        for (i, c) in caches.iter().enumerate() {
            c.check_shape(self.parts.blocks.len(), kv_dim)?;
            spec.validate_chunk(&ids[i * per..(i + 1) * per], c.len(), c.capacity())?;
            max_capacity = max_capacity.max(c.capacity());
        }
        for c in caches.iter_mut() {
            c.ensure(be)?;
        }
        scratch.ensure(be, rows, max_capacity, &self.dims())?;
        let s = scratch.bufs.as_mut().expect("scratch ensured");
        self.embed(be, ids, s);
        let mut rotary: Vec<Option<RotaryChunk>> = Vec::with_capacity(caches.len());
        for (i, c) in caches.iter().enumerate() {
            let p = c.len();
            rotary.push(match &self.parts.rope {
                Rope::Learned(wpe) => {
                    let x = s.block.x.at_mut(i * per * h..(i + 1) * per * h);
                    be.add(x, wpe.at(p * h..(p + per) * h));
                    None
                }
                Rope::Rotary(r) => Some(r.chunk(p, per)),
                Rope::Switched(r) => Some(r.chunk(c.capacity(), p, per)),
            });
        }
        let n = rows * h;
        for (l, b) in self.parts.blocks.iter().enumerate() {
            b.attn_norm
                .forward(be, s.block.x.at(..n), s.block.normed.at_mut(..n));
            b.qkv
                .forward(be, s.block.normed.at(..n), rows, s.block.qkv.at_mut(..));
            for (i, c) in caches.iter_mut().enumerate() {
                let (start, capacity) = (c.len(), c.capacity());
                let (mut kc, mut vc) = c.layer_mut(l);
                self.attend(
                    be,
                    b,
                    s.block
                        .qkv
                        .at_mut(i * per * qkv_dim..(i + 1) * per * qkv_dim),
                    (per, start, capacity),
                    rotary[i].as_ref(),
                    (kc.at_mut(..), vc.at_mut(..)),
                    s.scores.at_mut(..),
                    s.block.attn.at_mut(i * per * q_dim..(i + 1) * per * q_dim),
                );
            }
            b.tail(be, &mut s.block, rows, h, q_dim);
        }
        for c in caches.iter_mut() {
            c.advance(per);
        }
        Ok(())
    }

    /// Attention of `rows` rows of fused `[q | k | v]` at positions `start..` of a cache of
    /// `capacity`: rotary on q and k, the keys and values appended to the layer's cache
    /// `(keys, values)`, then causal attention over the cache into `out`.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        be: &dyn GpuCompute,
        b: &Block,
        mut qkv: ViewMut,
        (rows, start, capacity): (usize, usize, usize),
        rotary: Option<&RotaryChunk>,
        (mut kc, mut vc): (ViewMut, ViewMut),
        scores: ViewMut,
        out: ViewMut,
    ) {
        let (q_dim, kv_dim) = (self.q_dim(), self.kv_dim());
        if let Some(chunk) = rotary {
            let at = RopeRows {
                rows,
                stride: q_dim + 2 * kv_dim,
                width: q_dim + kv_dim,
                head_dim: self.sizes.head_dim,
            };
            be.rope(qkv.at_mut(..), at, Positions::From(start), chunk);
        }
        let x = QkvRows {
            qkv: qkv.as_view(),
            q_dim,
            kv_dim,
            rows,
            start,
        };
        be.kv_append(x, kc.at_mut(..), vc.at_mut(..));
        let kv = KvView {
            keys: kc.as_view(),
            values: vc.as_view(),
            capacity,
        };
        be.causal_attention(&b.attn, CausalAttn { x, kv, scores, out });
    }

    /// Gathers the embeddings of `ids` into `s.block.x` (scaled where the family scales them).
    fn embed(&self, be: &dyn GpuCompute, ids: &[u32], s: &mut Buffers) {
        let n = ids.len() * self.sizes.hidden;
        let x = s.block.x.at_mut(..n);
        match &self.parts.embed {
            Embedding::Table(t) => be.gather(t, self.sizes.hidden, ids, x),
            Embedding::Matrix(m) => be.gather_matrix_rows(m, ids, x),
            Embedding::Head => be.gather_matrix_rows(self.parts.lm_head.weight(), ids, x),
        }
        if let Some(f) = self.parts.embed_scale {
            be.scale(s.block.x.at_mut(..n), f);
        }
    }

    /// The logits of rows `first..first + n` of the residual stream (host memory).
    fn head<'s>(
        &self,
        be: &dyn GpuCompute,
        scratch: &'s mut Scratch,
        first: usize,
        n: usize,
    ) -> &'s [f32] {
        let h = self.sizes.hidden;
        let s = scratch.bufs.as_mut().expect("scratch ensured");
        self.parts.final_norm.forward(
            be,
            s.block.x.at(first * h..(first + n) * h),
            s.block.normed.at_mut(..n * h),
        );
        self.parts
            .lm_head
            .forward(be, s.block.normed.at(..n * h), n, s.logits.at_mut(..));
        if let Some(cap) = self.parts.final_softcap {
            be.softcap(s.logits.at_mut(..n * self.sizes.vocab), cap);
        }
        be.read(s.logits.at(..n * self.sizes.vocab), &mut scratch.staging)
    }

    /// [`Self::head`], after which a GPU backend reports any device failure of the step.
    fn checked_head<'s>(
        &self,
        be: &dyn GpuCompute,
        scratch: &'s mut Scratch,
        first: usize,
        n: usize,
    ) -> Result<&'s [f32]> {
        let logits = self.head(be, scratch, first, n);
        be.check()?;
        // NaN/Inf weights (or an overflow) would otherwise be sampled as token 0 forever
        // with a clean exit; one pass over the logits costs far less than the head's GEMM.
        if let Some(i) = logits.iter().position(|x| !x.is_finite()) {
            let (row, col) = (first + i / self.sizes.vocab, i % self.sizes.vocab);
            return Err(InferError::NonFinite {
                what: format!(
                    "logit {} of token {col} at row {row} of the step",
                    logits[i]
                ),
            });
        }
        Ok(logits)
    }
}

/// A loaded decoder, whatever its family: its spec and the [`Stack`] the family's loader
/// built (a family file is config parsing and tensor names; the forward pass and the batched
/// decode step are the stack's, written once).
pub struct DecoderModel {
    pub(crate) spec: DecoderSpec,
    pub(crate) stack: Stack,
}

impl Decoder for DecoderModel {
    fn spec(&self) -> &DecoderSpec {
        &self.spec
    }

    fn forward<'c>(
        &self,
        be: &dyn GpuCompute,
        ids: &[u32],
        cache: &'c mut KvCache,
        rows: LogitsRows,
    ) -> Result<&'c [f32]> {
        self.stack.forward(be, &self.spec, ids, cache, rows)
    }

    fn decode_batch<'s>(
        &self,
        be: &dyn GpuCompute,
        ids: &[u32],
        caches: &mut [&mut KvCache],
        scratch: &'s mut BatchScratch,
    ) -> Result<&'s [f32]> {
        self.stack
            .decode_batch(be, &self.spec, ids, caches, &mut scratch.0)
    }
}
