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
    cache_positions, decode_step, eos_token_ids, generate, has_tokenizer, Detokenize, GenTokenizer,
    Generation, Stepper, StopReason, TokenEvent,
};

use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
pub use crate::models::decoders::KvCache;
use crate::models::decoders::{Decoder, LogitsRows};

/// A prompt must hold at least one token and fit the context `ctx`.
pub(crate) fn check_prompt(prompt: &[u32], ctx: usize) -> Result<()> {
    if prompt.is_empty() {
        return Err(InferError::Input("empty prompt".into()));
    }
    if prompt.len() > ctx {
        return Err(InferError::ContextExceeded {
            message: format!(
                "prompt of {} tokens exceeds the model's context of {ctx} tokens",
                prompt.len()
            ),
            tokens: prompt.len(),
            limit: ctx,
        });
    }
    Ok(())
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
    check_prompt(prompt, ctx)?;
    // The last new token is never fed back.
    let needed = prompt
        .len()
        .saturating_add(max_new_tokens.saturating_sub(1));
    if needed > ctx {
        return Err(InferError::ContextExceeded {
            message: format!(
                "prompt of {} tokens plus {max_new_tokens} new ones exceeds the model's context \
                 of {ctx} tokens",
                prompt.len()
            ),
            tokens: needed,
            limit: ctx,
        });
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
