//! Text generation over a [`Decoder`]: the key/value cache, the greedy loop, sampling
//! ([`sampling`]) and the streaming loop with stop conditions ([`stream`]).
//!
//! The prompt is prefilled in one batched pass, then each new token runs alone against the
//! cache. Both paths compute the same bits (see `models::decoders`), so greedy output does not
//! depend on how the prompt was split. The cache is allocated once for the positions the run
//! needs; decode steps allocate nothing.

pub mod chat;
pub mod sampling;
pub mod stream;

pub use sampling::{Rng, Sampler, SamplingParams};
pub use stream::{
    eos_token_ids, generate, Detokenize, GenTokenizer, Generation, StopReason, TokenEvent,
};

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::models::decoders::{Decoder, LogitsRows, Scratch};

/// Keys and values of every layer for positions `0..len()`, preallocated for `capacity()`.
pub struct KvCache {
    layers: usize,
    kv_dim: usize,
    capacity: usize,
    len: usize,
    /// `[layers, kv_dim, capacity]`: keys transposed (see `decoders::store_kv`).
    k: Vec<f32>,
    /// `[layers, capacity, kv_dim]`
    v: Vec<f32>,
    /// The decoder's per-forward buffers.
    pub(crate) scratch: Scratch,
}

impl KvCache {
    /// A cache for `layers` layers of `kv_dim` keys (and values) per position, `capacity`
    /// positions. Usually made by [`Decoder::new_cache`].
    pub fn new(layers: usize, kv_dim: usize, capacity: usize) -> Self {
        KvCache {
            layers,
            kv_dim,
            capacity,
            len: 0,
            k: vec![0.0; layers * capacity * kv_dim],
            v: vec![0.0; layers * capacity * kv_dim],
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

    /// Layer `layer`'s `(keys, values)`: keys `[kv_dim, capacity]`, values
    /// `[capacity, kv_dim]`; and the scratch.
    pub(crate) fn layer_mut(&mut self, layer: usize) -> (&mut [f32], &mut [f32], &mut Scratch) {
        let n = self.capacity * self.kv_dim;
        (
            &mut self.k[layer * n..(layer + 1) * n],
            &mut self.v[layer * n..(layer + 1) * n],
            &mut self.scratch,
        )
    }

    /// Marks `n` more positions as filled (after a forward pass wrote them).
    pub(crate) fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.capacity);
        self.len += n;
    }
}

/// Index of the largest logit (the first on ties, as `torch.argmax`).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// Greedy decoding of `max_new_tokens` tokens after `prompt`, without stopping on EOS (what
/// the golden `generate` case specifies). `on_token` sees each token as it is chosen.
/// The whole run must fit the context: `prompt.len() + max_new_tokens - 1` positions are fed.
pub fn generate_greedy(
    model: &dyn Decoder,
    be: &dyn GpuCompute,
    prompt: &[u32],
    max_new_tokens: usize,
    mut on_token: impl FnMut(u32),
) -> Result<Vec<u32>> {
    let ctx = model.spec().max_sequence_length;
    if prompt.is_empty() {
        return Err(InferError::Input("empty prompt".into()));
    }
    if prompt.len() > ctx {
        return Err(InferError::Input(format!(
            "prompt of {} tokens exceeds the model's context of {ctx} tokens",
            prompt.len()
        )));
    }
    // The last new token is never fed back.
    let needed = prompt
        .len()
        .saturating_add(max_new_tokens.saturating_sub(1));
    if needed > ctx {
        return Err(InferError::Input(format!(
            "prompt of {} tokens plus {max_new_tokens} new ones exceeds the model's context of \
             {ctx} tokens",
            prompt.len()
        )));
    }
    let mut out = Vec::with_capacity(max_new_tokens);
    if max_new_tokens == 0 {
        model.spec().validate_chunk(prompt, 0, ctx)?;
        return Ok(out);
    }
    let mut cache = model.new_cache(needed)?;
    let mut next = argmax(model.forward(be, prompt, &mut cache, LogitsRows::Last)?);
    loop {
        out.push(next);
        on_token(next);
        if out.len() == max_new_tokens {
            return Ok(out);
        }
        next = argmax(model.forward(be, &[next], &mut cache, LogitsRows::Last)?);
    }
}
