//! A generation's state on the backend: the key/value cache of every layer and the forward
//! pass's scratch. One per session; the model it runs on is shared and never written.

use crate::backend::{causal_scores_len, GpuCompute, Tensor, ViewMut};
use crate::error::{InferError, Result};
use crate::nn::block::BlockBuffers;

/// Keys and values of every layer for positions `0..len()`, preallocated for `capacity()` on
/// the backend at the first forward pass.
pub struct KvCache {
    layers: usize,
    kv_dim: usize,
    capacity: usize,
    /// Written by the stack directly when a step is refused after its append (wound back:
    /// the values past it are overwritten by the next append).
    pub(super) len: usize,
    /// `[layers, kv_dim, capacity]`: keys transposed (see [`GpuCompute::kv_append`]) and
    /// `[layers, capacity, kv_dim]` values; `None` until the first forward.
    kv: Option<(Tensor, Tensor)>,
    /// The decoder's per-forward buffers.
    pub(crate) scratch: Scratch,
}

impl KvCache {
    /// A cache for `layers` layers of `kv_dim` keys (and values) per position, `capacity`
    /// positions. Usually made by [`super::Decoder::new_cache`], which checks it fits.
    pub fn new(layers: usize, kv_dim: usize, capacity: usize) -> Self {
        KvCache {
            layers,
            kv_dim,
            capacity,
            len: 0,
            kv: None,
            scratch: Scratch::default(),
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forgets every position (keeps the memory).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn check_shape(&self, layers: usize, kv_dim: usize) -> Result<()> {
        if self.layers != layers || self.kv_dim != kv_dim {
            return Err(InferError::Input(format!(
                "KV cache made for {} layers × {} kv features, model has {layers} × {kv_dim}",
                self.layers, self.kv_dim
            )));
        }
        Ok(())
    }

    /// Allocates the keys and values on `be` if this is the first forward.
    pub(crate) fn ensure(&mut self, be: &dyn GpuCompute) -> Result<()> {
        if self.kv.is_none() {
            let n = self.layers * self.capacity * self.kv_dim;
            self.kv = Some((be.try_zeros(n)?, be.try_zeros(n)?));
        }
        Ok(())
    }

    /// Layer `layer`'s keys and values, writable.
    pub(crate) fn layer_mut(&mut self, layer: usize) -> (ViewMut<'_>, ViewMut<'_>) {
        let n = self.capacity * self.kv_dim;
        let (k, v) = self.kv.as_mut().expect("KvCache::ensure ran");
        (
            k.at_mut(layer * n..(layer + 1) * n),
            v.at_mut(layer * n..(layer + 1) * n),
        )
    }

    /// Marks `n` more positions as filled (after a forward pass wrote them).
    pub(crate) fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.capacity);
        self.len += n;
    }
}

/// Per-forward scratch on the backend, kept in the [`KvCache`] and grown only when a chunk has
/// more rows than any before it: decode steps after the prefill allocate nothing.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Rows the buffers hold, and the model dimensions they were sized for (a cache used with
    /// another model of the same layers and kv width gets new buffers, not a panic).
    rows: usize,
    dims: Option<ScratchDims>,
    pub(crate) bufs: Option<Buffers>,
    /// Host copy of the logits where the backend keeps them elsewhere.
    pub(crate) staging: Vec<f32>,
}

pub(crate) struct Buffers {
    /// The blocks' buffers (residual stream, projections, feed-forward).
    pub(crate) block: BlockBuffers,
    /// Causal attention scores.
    pub(crate) scores: Tensor,
    /// `[rows, vocab]` logits.
    pub(crate) logits: Tensor,
}

/// Dimensions a decoder's scratch needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScratchDims {
    pub hidden: usize,
    pub q_dim: usize,
    /// Width of the `qkv` buffer.
    pub qkv_dim: usize,
    pub heads: usize,
    /// Gated feed-forward width (0: none).
    pub gated: usize,
    pub vocab: usize,
}

impl Scratch {
    pub(crate) fn ensure(
        &mut self,
        be: &dyn GpuCompute,
        rows: usize,
        capacity: usize,
        d: &ScratchDims,
    ) -> Result<()> {
        let scores = causal_scores_len(d.heads, capacity);
        let same = self.dims.as_ref() == Some(d);
        if same && rows <= self.rows && self.bufs.as_ref().is_some_and(|b| b.scores.len() >= scores)
        {
            return Ok(());
        }
        let rows = if same { rows.max(self.rows) } else { rows };
        self.rows = rows;
        self.dims = Some(d.clone());
        self.bufs = Some(Buffers {
            block: BlockBuffers::new(be, rows, d.hidden, d.q_dim, d.qkv_dim, d.gated),
            // The two that grow with a request's context and prompt: fallible.
            scores: be.try_zeros(scores)?,
            logits: be.try_zeros(rows * d.vocab)?,
        });
        Ok(())
    }
}
