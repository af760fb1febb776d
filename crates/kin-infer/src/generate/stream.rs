//! The generation loop with stop conditions and streaming: prefill the prompt in one pass,
//! then one token at a time, each handed to a callback as soon as it is chosen.
//!
//! Stops, checked after every token: an EOS id (kept in the ids, absent from the text), a user
//! stop string in the generated text (the text ends before it; while a stop string could still
//! be completing, the streamed text holds back the possible prefix), `max_new_tokens`, or the
//! model's context being full. A prompt longer than the context is an error, not a stop.

use super::sampling::{Sampler, SamplingParams};
use crate::error::{InferError, Result};
use crate::gpu::GpuCompute;
use crate::models::decoders::{BatchScratch, Decoder, DecoderSpec, KvCache, LogitsRows};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a generation run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced one of the EOS ids.
    Eos,
    /// The generated text contains a user stop string.
    StopString,
    /// `max_new_tokens` were generated.
    MaxTokens,
    /// The model's context is full.
    Context,
    /// The callback asked to stop.
    Cancelled,
}

impl StopReason {
    /// The name `--json` output uses.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Eos => "eos",
            StopReason::StopString => "stop_string",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Context => "context",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// Token ids → text, for stop strings and streamed text.
pub trait Detokenize {
    /// The text of `ids` (special tokens skipped).
    fn decode(&self, ids: &[u32]) -> Result<String>;
}

/// A decoder model's `tokenizer.json`: prompts in (special tokens added, never truncated, so a
/// prompt too long for the model is an error, not silently cut), text out.
pub struct GenTokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
}

/// Whether the model at `path` (a directory, or a GGUF file) has a tokenizer to load.
pub fn has_tokenizer(path: &Path) -> bool {
    if crate::models::decoders::is_gguf_file(path) {
        return crate::io::gguf::GgufFile::open(path)
            .is_ok_and(|g| crate::io::gguf_tokenizer::has_tokenizer(&g));
    }
    path.join("tokenizer.json").is_file()
}

impl GenTokenizer {
    /// Loads `dir/tokenizer.json`, or the tokenizer of a GGUF file's metadata.
    pub fn load(dir: &Path) -> Result<Self> {
        if crate::models::decoders::is_gguf_file(dir) {
            let gguf = crate::io::gguf::GgufFile::open(dir)?;
            return Ok(GenTokenizer {
                inner: crate::io::gguf_tokenizer::load(&gguf)?,
                path: dir.to_path_buf(),
            });
        }
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(InferError::Tokenizer {
                reason: format!(
                    "{} does not exist; text prompts and text output need the model's \
                     tokenizer.json (token ids need none)",
                    path.display()
                ),
            });
        }
        let mut inner =
            tokenizers::Tokenizer::from_file(&path).map_err(|e| InferError::Tokenizer {
                reason: format!("{}: {e}", path.display()),
            })?;
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| InferError::Tokenizer {
                reason: format!("{}: {e}", path.display()),
            })?;
        Ok(GenTokenizer { inner, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Token ids of `text`, with the tokenizer's special tokens (e.g. BOS).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.encode_with(text, true)
    }

    /// Token ids of `text`, adding special tokens or not (a rendered chat prompt carries its
    /// own).
    pub fn encode_with(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let e = self
            .inner
            .encode(text, add_special)
            .map_err(|e| InferError::Tokenizer {
                reason: format!("{}: {e}", self.path.display()),
            })?;
        Ok(e.get_ids().to_vec())
    }
}

impl Detokenize for GenTokenizer {
    fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| InferError::Tokenizer {
                reason: format!("{}: {e}", self.path.display()),
            })
    }
}

/// The KV cache positions a generation of `max_new_tokens` after a prompt of `prompt_len`
/// needs (the last token is sampled, never fed back), at most the context `ctx`: what
/// [`Stepper::new`] allocates and a server reserves memory for.
pub fn cache_positions(prompt_len: usize, max_new_tokens: usize, ctx: usize) -> usize {
    (prompt_len + max_new_tokens.max(1) - 1).min(ctx)
}

/// The EOS ids of the model in `dir`: `generation_config.json`'s `eos_token_id` (an integer
/// or a list) when that file has one, else `config.json`'s (`spec.eos_token_ids`).
pub fn eos_token_ids(dir: &Path, spec: &DecoderSpec) -> Result<Vec<u32>> {
    let path = dir.join("generation_config.json");
    if !path.is_file() {
        return Ok(spec.eos_token_ids.clone());
    }
    let v: serde_json::Value = crate::io::read_json(&path)?;
    let err = |reason: String| InferError::Config {
        path: path.clone(),
        field: "eos_token_id".into(),
        reason,
    };
    // An id past the vocabulary can never be sampled, so EOS would silently never fire.
    let vocab = spec.vocab_size;
    let id = |x: &serde_json::Value| -> Result<u32> {
        let n = x
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| err(format!("expected a token id, found {x}")))?;
        if n as usize >= vocab {
            return Err(err(format!(
                "token id {n} is outside the vocabulary (size {vocab})"
            )));
        }
        Ok(n)
    };
    match v.get("eos_token_id") {
        None | Some(serde_json::Value::Null) => Ok(spec.eos_token_ids.clone()),
        Some(serde_json::Value::Array(a)) => a.iter().map(id).collect(),
        Some(x) => Ok(vec![id(x)?]),
    }
}

/// One generated token, as the callback sees it.
#[derive(Clone, Copy, Debug)]
pub struct TokenEvent<'a> {
    /// 0 for the first generated token.
    pub index: usize,
    pub id: u32,
    /// New text this token completes (empty without a tokenizer, and while the text could be
    /// the start of a stop string or ends inside an incomplete UTF-8 sequence).
    pub text: &'a str,
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Generated ids (an EOS id that stopped the run included).
    pub tokens: Vec<u32>,
    /// Generated text when a tokenizer was given (ends before a stop string).
    pub text: Option<String>,
    pub stop_reason: StopReason,
    pub prompt_tokens: usize,
    /// Wall time of the prompt's forward pass and the first token's choice.
    pub prefill_time: Duration,
    /// Wall time of the decode steps (one forward pass and one choice each).
    pub decode_time: Duration,
    /// Forward passes of one token (`tokens.len() - 1`).
    pub decode_steps: usize,
}

impl Generation {
    /// Prompt tokens per second of prefill.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        rate(self.prompt_tokens, self.prefill_time)
    }

    /// Generated tokens per second after the first.
    pub fn decode_tokens_per_s(&self) -> f64 {
        rate(self.decode_steps, self.decode_time)
    }
}

fn rate(n: usize, t: Duration) -> f64 {
    let s = t.as_secs_f64();
    if n == 0 || s <= 0.0 {
        0.0
    } else {
        n as f64 / s
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of some stop string (text
/// that must be held back while a stop string may be completing), on a char boundary.
fn held_back(text: &str, stops: &[String]) -> usize {
    let mut best = 0;
    for s in stops {
        let max = (s.len() - 1).min(text.len());
        for n in (best + 1..=max).rev() {
            let start = text.len() - n;
            if text.is_char_boundary(start) && s.as_bytes().starts_with(&text.as_bytes()[start..]) {
                best = n;
                break;
            }
        }
    }
    best
}

/// Generates after `prompt` with `params`, calling `on_token` for each token as it is chosen
/// (return `ControlFlow::Break(())` to stop: [`StopReason::Cancelled`]). `detok` turns ids into
/// text; stop strings need it. The cache holds `prompt.len() + max_new_tokens - 1` positions at
/// most (the last token is never fed back), capped at the context.
pub fn generate(
    model: &dyn Decoder,
    be: &dyn GpuCompute,
    prompt: &[u32],
    params: &SamplingParams,
    detok: Option<&dyn Detokenize>,
    mut on_token: impl FnMut(&TokenEvent) -> ControlFlow<()>,
) -> Result<Generation> {
    let mut st = Stepper::start(model, be, prompt, params, detok.is_some())?;
    loop {
        if st.emit(detok, &mut on_token)?.is_some() {
            return Ok(st.finish());
        }
        let t = Instant::now();
        st.next =
            st.sampler
                .sample(model.forward(be, &[st.next], &mut st.cache, LogitsRows::Last)?);
        st.g.decode_time += t.elapsed();
        st.g.decode_steps += 1;
    }
}

/// One generation as a state machine, so that a scheduler can run many at once and batch
/// their decode steps ([`Decoder::decode_batch`]): [`Stepper::start`] prefills and chooses the
/// first token, [`Stepper::emit`] hands the chosen token to the callback and applies the stop
/// rules, [`decode_step`] feeds every running stepper's token through one batched forward and
/// samples each one's next. [`generate`] is `start`, then `emit` and a one-row step until a
/// stop: the same tokens, whatever a stepper was batched with.
pub struct Stepper {
    params: SamplingParams,
    sampler: Sampler,
    cache: KvCache,
    capacity: usize,
    g: Generation,
    /// Text decoded so far, and how much of it the callback has seen.
    text: String,
    emitted: usize,
    /// The chosen token, not yet emitted.
    next: u32,
    done: bool,
    /// The prompt, and how much of it the cache holds (prefill may come in chunks).
    prompt: Vec<u32>,
    prefilled: usize,
}

impl Stepper {
    /// Checks the request, prefills `prompt` and chooses the first token. `has_detok`: a
    /// detokenizer will be given to [`Stepper::emit`] (stop strings need one).
    pub fn start(
        model: &dyn Decoder,
        be: &dyn GpuCompute,
        prompt: &[u32],
        params: &SamplingParams,
        has_detok: bool,
    ) -> Result<Self> {
        let mut st = Self::new(model, prompt, params, has_detok)?;
        st.prefill(model, be, usize::MAX)?;
        Ok(st)
    }

    /// Checks the request and allocates the cache; the prompt is fed by [`Stepper::prefill`],
    /// in one pass or in chunks (a scheduler interleaves chunks with other generations' decode
    /// steps). Chunked or not, the cache and the first token have the same bits: every op is
    /// per row or per (query, head), accumulated in a fixed order.
    pub fn new(
        model: &dyn Decoder,
        prompt: &[u32],
        params: &SamplingParams,
        has_detok: bool,
    ) -> Result<Self> {
        let spec = model.spec();
        let ctx = spec.max_sequence_length;
        params.validate()?;
        super::check_prompt(prompt, ctx)?;
        spec.validate_chunk(prompt, 0, ctx)?;
        if params.max_new_tokens > ctx {
            return Err(InferError::ContextExceeded {
                message: format!(
                    "max tokens {} exceeds the model's context of {ctx} tokens",
                    params.max_new_tokens
                ),
                tokens: params.max_new_tokens,
                limit: ctx,
            });
        }
        if !params.stop.is_empty() && !has_detok {
            return Err(InferError::Input(
                "stop strings need a tokenizer to decode the generated text".into(),
            ));
        }
        let g = Generation {
            tokens: Vec::with_capacity(params.max_new_tokens.min(ctx)),
            text: has_detok.then(String::new),
            stop_reason: StopReason::MaxTokens,
            prompt_tokens: prompt.len(),
            prefill_time: Duration::ZERO,
            decode_time: Duration::ZERO,
            decode_steps: 0,
        };
        let capacity = cache_positions(prompt.len(), params.max_new_tokens, ctx);
        let mut st = Stepper {
            params: params.clone(),
            sampler: Sampler::new(params.clone(), spec.vocab_size)?,
            cache: model.new_cache(capacity)?,
            capacity,
            g,
            text: String::new(),
            emitted: 0,
            next: 0,
            done: params.max_new_tokens == 0,
            prompt: prompt.to_vec(),
            prefilled: 0,
        };
        if !st.done {
            st.sampler.observe(prompt);
        }
        Ok(st)
    }

    /// Feeds up to `max_tokens` more of the prompt; once all of it is in, chooses the first
    /// token. Returns whether the stepper is ready to [`Stepper::emit`].
    pub fn prefill(
        &mut self,
        model: &dyn Decoder,
        be: &dyn GpuCompute,
        max_tokens: usize,
    ) -> Result<bool> {
        if !self.is_prefilling() {
            return Ok(true);
        }
        let end = self
            .prompt
            .len()
            .min(self.prefilled.saturating_add(max_tokens.max(1)));
        let t0 = Instant::now();
        let logits = model.forward(
            be,
            &self.prompt[self.prefilled..end],
            &mut self.cache,
            LogitsRows::Last,
        )?;
        if end == self.prompt.len() {
            self.next = self.sampler.sample(logits);
        }
        self.prefilled = end;
        self.g.prefill_time += t0.elapsed();
        Ok(!self.is_prefilling())
    }

    /// Prompt tokens fed so far.
    pub fn prefill_progress(&self) -> usize {
        self.prefilled
    }

    /// Whether part of the prompt is still to be fed (not ready to emit or decode).
    pub fn is_prefilling(&self) -> bool {
        !self.done && self.prefilled < self.prompt.len()
    }

    /// Whether the generation has stopped (nothing left to emit or decode).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Hands the chosen token to `on_token` (with the new text it completes) and applies the
    /// stop rules: EOS, max tokens, a full context, a stop string, or the callback's `Break`.
    /// Returns the stop reason once the generation has stopped.
    pub fn emit(
        &mut self,
        detok: Option<&dyn Detokenize>,
        mut on_token: impl FnMut(&TokenEvent) -> ControlFlow<()>,
    ) -> Result<Option<StopReason>> {
        if self.done {
            return Ok(Some(self.g.stop_reason));
        }
        if self.is_prefilling() {
            return Err(InferError::Input(
                "the prompt is not prefilled yet: nothing to emit".into(),
            ));
        }
        let (params, next) = (&self.params, self.next);
        self.g.tokens.push(next);
        self.sampler.observe(&[next]);
        let mut stop = if params.eos_token_ids.contains(&next) {
            Some(StopReason::Eos)
        } else if self.g.tokens.len() == params.max_new_tokens {
            Some(StopReason::MaxTokens)
        } else if self.cache.len() == self.capacity {
            Some(StopReason::Context)
        } else {
            None
        };
        let mut end = 0;
        if let Some(d) = detok {
            let full = d.decode(&self.g.tokens)?;
            // A trailing U+FFFD is usually a multi-byte character split across tokens: wait
            // for the next token unless this is the last.
            if stop.is_some() || !full.ends_with('\u{FFFD}') {
                self.text = full;
            }
            let found = params
                .stop
                .iter()
                .filter_map(|s| self.text.find(s.as_str()))
                .min();
            end = if let Some(i) = found {
                stop = Some(StopReason::StopString);
                self.text.truncate(i);
                i
            } else if stop.is_some() {
                self.text.len()
            } else {
                self.text.len() - held_back(&self.text, &params.stop)
            };
        }
        let delta = self
            .text
            .get(self.emitted..end.max(self.emitted))
            .unwrap_or("");
        let event = TokenEvent {
            index: self.g.tokens.len() - 1,
            id: next,
            text: delta,
        };
        let flow = on_token(&event);
        self.emitted = self.emitted.max(end);
        if flow.is_break() && stop.is_none() {
            stop = Some(StopReason::Cancelled);
        }
        if let Some(reason) = stop {
            self.g.stop_reason = reason;
            self.done = true;
            if let Some(t) = self.g.text.as_mut() {
                let mut text = std::mem::take(&mut self.text);
                text.truncate(end.max(self.emitted).min(text.len()));
                *t = text;
            }
        }
        Ok(stop)
    }

    /// The result (call once stopped; before that, what has been generated so far).
    pub fn finish(self) -> Generation {
        self.g
    }
}

/// One decode step of every stepper in `steppers` (none stopped): their pending tokens through
/// one [`Decoder::decode_batch`], then each samples its next token from its own row. Each
/// stepper's timing counts the step's whole wall time.
pub fn decode_step(
    model: &dyn Decoder,
    be: &dyn GpuCompute,
    steppers: &mut [&mut Stepper],
    scratch: &mut BatchScratch,
) -> Result<()> {
    if steppers.iter().any(|s| s.done || s.is_prefilling()) {
        return Err(InferError::Input(
            "only a prefilled, running generation can take a decode step".into(),
        ));
    }
    let t = Instant::now();
    let ids: Vec<u32> = steppers.iter().map(|s| s.next).collect();
    let mut caches: Vec<&mut KvCache> = steppers.iter_mut().map(|s| &mut s.cache).collect();
    let logits = model.decode_batch(be, &ids, &mut caches, scratch)?;
    let vocab = model.spec().vocab_size;
    let dt = t.elapsed();
    for (s, row) in steppers.iter_mut().zip(logits.chunks_exact(vocab)) {
        s.next = s.sampler.sample(row);
        s.g.decode_time += dt;
        s.g.decode_steps += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::held_back;

    #[test]
    fn held_back_is_the_longest_partial_stop() {
        let stops = vec!["</s>".to_string(), "END".to_string()];
        assert_eq!(held_back("hello </", &stops), 2);
        assert_eq!(held_back("hello EN", &stops), 2);
        assert_eq!(held_back("hello", &stops), 0);
        assert_eq!(held_back("x<", &stops), 1);
    }
}
