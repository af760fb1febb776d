//! Choosing the next token from a row of logits: penalties, temperature, top-k, top-p, min-p,
//! then a draw from our own seeded generator.
//!
//! The order is the one transformers' logits processors and candle apply (llama.cpp's default
//! chain differs only in where it puts the temperature):
//! 1. repetition, frequency and presence penalties on the raw logits of every token already in
//!    the context (prompt and generated);
//! 2. temperature 0 → greedy: the first largest penalized logit (as [`argmax`]); otherwise
//!    logits / temperature;
//! 3. top-k: the `k` largest logits (ties broken by the lower id);
//! 4. softmax over the survivors (`kernels::math::exp`, summed in descending-logit order);
//! 5. top-p: the smallest prefix of the sorted probabilities whose sum reaches `p`;
//! 6. min-p: tokens whose probability is at least `min_p` × the largest one;
//! 7. a draw `u ∈ [0, 1)` from xoshiro256** seeded by splitmix64, scaled by the kept mass,
//!    walked through the kept tokens in sorted order.
//!
//! Every step is scalar f32/f64 arithmetic in a fixed order with our own `exp`, so a seed gives
//! the same tokens on every platform, thread count and SIMD tier. The [`Sampler`] allocates its
//! buffers once (vocabulary-sized); choosing a token allocates nothing.

use super::argmax;
use crate::error::{InferError, Result};
use crate::kernels::math;
use std::cmp::Ordering;

/// Everything that decides which tokens a generation run produces and when it stops.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 → greedy (argmax of the penalized logits). Must be finite and ≥ 0.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Nucleus: keep the smallest set of most likely tokens whose probability reaches `top_p`;
    /// 1 keeps all. In (0, 1].
    pub top_p: f32,
    /// Keep tokens at least `min_p` × as likely as the most likely one; 0 keeps all. In [0, 1].
    pub min_p: f32,
    /// CTRL-style: a seen token's logit is divided by this when positive, multiplied when
    /// negative. 1 disables. Must be > 0.
    pub repetition_penalty: f32,
    /// Subtracted from a seen token's logit once per occurrence. 0 disables.
    pub frequency_penalty: f32,
    /// Subtracted once from a seen token's logit. 0 disables.
    pub presence_penalty: f32,
    /// Seed of the token draw (ignored when greedy).
    pub seed: u64,
    /// Tokens to generate at most.
    pub max_new_tokens: usize,
    /// Stop as soon as the generated text contains one of these (needs a tokenizer); the
    /// result's text ends before it.
    pub stop: Vec<String>,
    /// Stop after generating one of these ids (it is kept in the token list, not in the text).
    pub eos_token_ids: Vec<u32>,
}

impl Default for SamplingParams {
    /// Greedy, no penalties, 256 new tokens, no stop condition.
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: 0,
            max_new_tokens: 256,
            stop: Vec::new(),
            eos_token_ids: Vec::new(),
        }
    }
}

impl SamplingParams {
    /// Checks every field's range; errors name the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, v: f32, want: &str| {
            Err(InferError::Input(format!(
                "sampling parameter `{field}` = {v} is invalid: {want}"
            )))
        };
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(
                "temperature",
                self.temperature,
                "expected a finite value ≥ 0",
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p, "expected 0 < top_p ≤ 1");
        }
        if !(self.min_p >= 0.0 && self.min_p <= 1.0) {
            return bad("min_p", self.min_p, "expected 0 ≤ min_p ≤ 1");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return bad(
                "repetition_penalty",
                self.repetition_penalty,
                "expected a finite value > 0",
            );
        }
        if !self.frequency_penalty.is_finite() {
            return bad(
                "frequency_penalty",
                self.frequency_penalty,
                "expected a finite value",
            );
        }
        if !self.presence_penalty.is_finite() {
            return bad(
                "presence_penalty",
                self.presence_penalty,
                "expected a finite value",
            );
        }
        if self.stop.iter().any(|s| s.is_empty()) {
            return Err(InferError::Input("empty stop string".into()));
        }
        Ok(())
    }

    /// Whether the penalties change any logit.
    pub fn has_penalties(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.frequency_penalty != 0.0
            || self.presence_penalty != 0.0
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// xoshiro256** (Blackman & Vigna), seeded through splitmix64: small, fast, and the same
/// sequence on every platform.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1), 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Descending logit, then ascending id: a total order, so sorting is deterministic.
fn by_logit_desc(a: &(u32, f32), b: &(u32, f32)) -> Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Applies the penalties in place to `logits` for the tokens in `counts` (occurrences of each
/// id in the context so far; ids past the end are ignored).
pub fn apply_penalties(logits: &mut [f32], counts: &[u32], p: &SamplingParams) {
    for (l, &c) in logits.iter_mut().zip(counts) {
        if c == 0 {
            continue;
        }
        if p.repetition_penalty != 1.0 {
            *l = if *l > 0.0 {
                *l / p.repetition_penalty
            } else {
                *l * p.repetition_penalty
            };
        }
        *l -= c as f32 * p.frequency_penalty + p.presence_penalty;
    }
}

/// The token choice of one run: parameters, generator state, context counts and buffers.
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    /// Occurrences of each id in the context (only kept when penalties are on).
    counts: Vec<u32>,
    /// Penalized logits, `[vocab]`.
    work: Vec<f32>,
    /// (id, logit, later probability) candidates, `[vocab]`.
    cand: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler for a vocabulary of `vocab` ids; validates `params`.
    pub fn new(params: SamplingParams, vocab: usize) -> Result<Self> {
        params.validate()?;
        let pen = params.has_penalties();
        Ok(Sampler {
            rng: Rng::new(params.seed),
            counts: if pen { vec![0; vocab] } else { Vec::new() },
            work: if pen {
                Vec::with_capacity(vocab)
            } else {
                Vec::new()
            },
            cand: if params.is_greedy() {
                Vec::new()
            } else {
                Vec::with_capacity(vocab)
            },
            params,
        })
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Records tokens entering the context (the prompt, then each chosen token).
    pub fn observe(&mut self, ids: &[u32]) {
        if self.counts.is_empty() {
            return;
        }
        for &t in ids {
            if let Some(c) = self.counts.get_mut(t as usize) {
                *c += 1;
            }
        }
    }

    /// Chooses the next token from one row of logits (does not [`observe`](Self::observe) it).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let logits = if self.params.has_penalties() {
            self.work.clear();
            self.work.extend_from_slice(logits);
            apply_penalties(&mut self.work, &self.counts, &self.params);
            &self.work[..]
        } else {
            logits
        };
        if self.params.is_greedy() {
            return argmax(logits);
        }
        let t = self.params.temperature;
        self.cand.clear();
        self.cand
            .extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l / t)));
        let kept = filter_candidates(&mut self.cand, &self.params);
        let u = self.rng.next_f64();
        draw(&self.cand[..kept], u)
    }
}

/// Sorts `cand` (id, logit) by descending logit, applies top-k, softmax, top-p and min-p, and
/// leaves the kept tokens' probabilities (normalized over the top-k survivors) in the
/// `.1` fields of `cand[..kept]`; returns `kept` (≥ 1). Public for tests on hand-built
/// distributions.
pub fn filter_candidates(cand: &mut Vec<(u32, f32)>, p: &SamplingParams) -> usize {
    let mut n = cand.len();
    if p.top_k > 0 && p.top_k < n {
        cand.select_nth_unstable_by(p.top_k - 1, by_logit_desc);
        n = p.top_k;
        cand.truncate(n);
    }
    cand.sort_unstable_by(by_logit_desc);
    if n == 0 {
        return 0;
    }
    // Softmax anchored at the largest logit.
    let max = cand[0].1;
    let mut sum = 0.0f32;
    for c in cand.iter_mut() {
        let e = if c.1 == f32::NEG_INFINITY {
            0.0
        } else {
            math::exp(c.1 - max)
        };
        c.1 = e;
        sum += e;
    }
    for c in cand.iter_mut() {
        c.1 /= sum;
    }
    // Top-p: the smallest prefix whose mass reaches p (at least one token).
    if p.top_p < 1.0 {
        let mut acc = 0.0f32;
        let mut keep = n;
        for (i, c) in cand.iter().enumerate() {
            acc += c.1;
            if acc >= p.top_p {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    // Min-p: relative to the most likely token.
    if p.min_p > 0.0 {
        let floor = p.min_p * cand[0].1;
        n = cand[..n].iter().take_while(|c| c.1 >= floor).count().max(1);
    }
    n
}

/// Picks from `kept` (id, probability) with `u ∈ [0, 1)` scaled by their total mass.
pub fn draw(kept: &[(u32, f32)], u: f64) -> u32 {
    let total: f64 = kept.iter().map(|c| c.1 as f64).sum();
    let target = u * total;
    let mut acc = 0.0f64;
    for c in kept {
        acc += c.1 as f64;
        if target < acc {
            return c.0;
        }
    }
    // Rounding: u · total landed on the total itself.
    kept.iter().rev().find(|c| c.1 > 0.0).unwrap_or(&kept[0]).0
}
