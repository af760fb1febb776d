//! Decoder (causal language model) families, one file each, behind the [`Decoder`] trait.
//!
//! A decoder runs a chunk of tokens at the positions that follow what its [`KvCache`] already
//! holds, appends their keys and values to the cache, and returns logits. The prompt is one
//! chunk (prefill, a batched pass), every generated token another chunk of one row (decode).
//!
//! Every family is configuration plus block choice: it parses its config and loads its tensors
//! into a [`block::Stack`], whose forward pass is written once. Determinism: a chunk of one
//! row computes exactly what the same row computes inside a longer chunk, so incremental
//! decoding gives the full forward pass's logits bit for bit (see [`block`] and the backend's
//! causal attention).

pub(crate) mod block;
pub(crate) mod build;
pub mod cache;
pub mod gemma;
pub mod gguf;
pub mod gpt2;
pub mod llama;
pub mod phi;

pub use cache::KvCache;

use crate::backend::GpuCompute;
use crate::error::{InferError, Result};
use crate::io::config_fields::{ConfigFields, ConfigSource};
use crate::io::safetensors::WeightStore;
use block::DecoderModel;
use serde_json::Value;
use std::path::Path;

/// What every decoder tells the generation loop and `describe`.
#[derive(Clone, Debug)]
pub struct DecoderSpec {
    /// `model_type` as the config names it, e.g. "llama".
    pub model_type: String,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    /// Context length: positions `0..max_sequence_length` (`max_position_embeddings`).
    pub max_sequence_length: usize,
    /// End-of-sequence ids from `config.json` (`eos_token_id`, an integer or a list).
    pub eos_token_ids: Vec<u32>,
    pub bos_token_id: Option<u32>,
    /// `lm_head` shares the token embedding table.
    pub tied_embeddings: bool,
    /// Positional scheme, e.g. "rotary (theta 10000)".
    pub positions: String,
    /// Attention kind, e.g. "causal, GQA 4 query / 2 kv heads".
    pub attention: String,
    /// Feed-forward kind, e.g. "SwiGLU".
    pub ffn: String,
    /// `torch_dtype` / `dtype` as the config writes it.
    pub dtype: Option<String>,
}

impl DecoderSpec {
    /// Keys and values per token per layer.
    pub fn kv_dim(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }

    /// Bytes of an f32 KV cache (keys and values of every layer) for `capacity` positions;
    /// `None` when that overflows. What [`Decoder::new_cache`] checks against the host and the
    /// server counts against its memory budget.
    pub fn kv_cache_bytes(&self, capacity: usize) -> Option<u64> {
        (self.num_hidden_layers as u64)
            .checked_mul(capacity as u64)
            .and_then(|n| n.checked_mul(self.kv_dim() as u64))
            .and_then(|n| n.checked_mul(2 * 4))
    }

    /// Checks a chunk of `ids` that would start at position `start`: non-empty, inside the
    /// vocabulary, and ending inside both the context and the cache.
    pub fn validate_chunk(&self, ids: &[u32], start: usize, cache_capacity: usize) -> Result<()> {
        if ids.is_empty() {
            return Err(InferError::Input("empty token sequence".into()));
        }
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(InferError::TokenOutOfVocabulary {
                id: bad,
                vocab: self.vocab_size,
            });
        }
        let end = start + ids.len();
        for (limit, what) in [
            (self.max_sequence_length, "model's context"),
            (cache_capacity, "KV cache's capacity"),
        ] {
            if end > limit {
                return Err(InferError::ContextExceeded {
                    message: format!(
                        "{} tokens after {start} cached ones exceed the {what} of {limit} tokens",
                        ids.len()
                    ),
                    tokens: end,
                    limit,
                });
            }
        }
        Ok(())
    }
}

/// Which rows of logits a forward call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsRows {
    /// One row of `vocab_size` per token of the chunk.
    All,
    /// Only the chunk's last token (all generation needs).
    Last,
}

impl LogitsRows {
    /// The first row and the number of rows to return from a chunk of `rows` rows.
    pub(crate) fn span(self, rows: usize) -> (usize, usize) {
        match self {
            LogitsRows::All => (0, rows),
            LogitsRows::Last => (rows - 1, 1),
        }
    }
}

/// A causal language model.
pub trait Decoder: Send + Sync {
    fn spec(&self) -> &DecoderSpec;

    /// A cache for `capacity` positions (at most the context), allocated once.
    fn new_cache(&self, capacity: usize) -> Result<KvCache> {
        let s = self.spec();
        let message = format!(
            "KV cache capacity {capacity} must lie in 1..={} (the model's context)",
            s.max_sequence_length
        );
        if capacity == 0 {
            return Err(InferError::Input(message));
        }
        if capacity > s.max_sequence_length {
            return Err(InferError::ContextExceeded {
                message,
                tokens: capacity,
                limit: s.max_sequence_length,
            });
        }
        // Keys and values, f32, before anything is allocated: a context the host cannot hold
        // is a typed error, not an abort.
        let bytes = s.kv_cache_bytes(capacity);
        crate::resource::check_fits(&format!("a KV cache of {capacity} positions"), bytes)?;
        Ok(KvCache::new(s.num_hidden_layers, s.kv_dim(), capacity))
    }

    /// Runs `ids` at positions `cache.len()..`, appends their keys/values to `cache`, and
    /// returns the logits of `rows` (row-major, `vocab_size` each). On error the cache is
    /// unchanged.
    fn forward<'c>(
        &self,
        be: &dyn GpuCompute,
        ids: &[u32],
        cache: &'c mut KvCache,
        rows: LogitsRows,
    ) -> Result<&'c [f32]>;

    /// One decode step of several sequences: `ids[i]` at the next position of `caches[i]`,
    /// returning `[ids.len(), vocab]` logits, each row with the bits `forward` of that id on
    /// that cache gives. The block stack runs the rows as one batch (weights read once per
    /// step, the point of batching concurrent generations); this default runs them one by one.
    /// On error no cache has changed.
    fn decode_batch<'s>(
        &self,
        be: &dyn GpuCompute,
        ids: &[u32],
        caches: &mut [&mut KvCache],
        scratch: &'s mut BatchScratch,
    ) -> Result<&'s [f32]> {
        if ids.is_empty() || caches.len() != ids.len() {
            return Err(InferError::Input(format!(
                "a decode batch of {} ids for {} caches",
                ids.len(),
                caches.len()
            )));
        }
        for (id, c) in ids.iter().zip(caches.iter()) {
            self.spec()
                .validate_chunk(std::slice::from_ref(id), c.len(), c.capacity())?;
        }
        let out = &mut scratch.0.staging;
        out.clear();
        for (id, c) in ids.iter().zip(caches.iter_mut()) {
            out.extend_from_slice(self.forward(be, &[*id], c, LogitsRows::Last)?);
        }
        Ok(out)
    }
}

/// Scratch buffers of [`Decoder::decode_batch`], kept by the caller between steps (they grow
/// to the largest batch and context seen, then are reused).
#[derive(Default)]
pub struct BatchScratch(pub(crate) cache::Scratch);

/// One decoder family in the registry: the names it answers to and its two loaders.
pub(crate) struct DecoderFamily {
    /// Hugging Face `model_type`s (`config.json`).
    pub(crate) model_types: &'static [&'static str],
    /// GGUF `general.architecture`s.
    pub(crate) gguf_architectures: &'static [&'static str],
    /// Loads a Hub checkpoint: `config.json` and its safetensors.
    pub(crate) hub: fn(&ConfigSource, &WeightStore, &dyn GpuCompute) -> Result<DecoderModel>,
    /// Loads a GGUF of architecture `arch` (its config already filled from the metadata,
    /// [`gguf::config`]) through the GGUF layout.
    pub(crate) gguf: fn(&str, &ConfigSource, &WeightStore, &dyn GpuCompute) -> Result<DecoderModel>,
}

/// Every decoder family, the one `model_type` / GGUF architecture → loader table (its names
/// are `io::model_kinds`' lists, which the messages below models use; a test keeps the two
/// equal).
pub(crate) const FAMILIES: &[DecoderFamily] =
    &[llama::FAMILY, gpt2::FAMILY, phi::FAMILY, gemma::FAMILY];

/// The family whose Hub `model_type` is `t`.
fn hub_family(t: &str) -> Option<&'static DecoderFamily> {
    FAMILIES.iter().find(|f| f.model_types.contains(&t))
}

/// The family whose GGUF architecture is `arch`.
pub(crate) fn gguf_family(arch: &str) -> Option<&'static DecoderFamily> {
    FAMILIES
        .iter()
        .find(|f| f.gguf_architectures.contains(&arch))
}

/// Reads `config.json` in `dir`, picks the family from `model_type`, loads the weights; or,
/// given a `.gguf` file, loads the decoder it holds ([`gguf::load`]).
pub fn load_decoder(dir: &Path, be: &dyn GpuCompute) -> Result<Box<dyn Decoder>> {
    if is_gguf_file(dir) {
        return gguf::load(dir, be);
    }
    let config = dir.join("config.json");
    if !config.is_file() {
        return Err(InferError::ModelNotFound(dir.display().to_string()));
    }
    let source = ConfigSource::json(&config)?;
    let model_type = source
        .value()
        .get("model_type")
        .and_then(|t| t.as_str())
        .unwrap_or("")
        .to_string();
    if let Some(family) = hub_family(&model_type) {
        let store = WeightStore::open_dir(dir)?;
        return Ok(Box::new((family.hub)(&source, &store, be)?));
    }
    if crate::io::config::ModelArchitecture::from_model_type(&model_type).is_some() {
        return Err(crate::io::config::wrong_kind(dir, &model_type, false));
    }
    Err(InferError::UnsupportedModel {
        path: config,
        model_type,
        supported: SUPPORTED.to_vec(),
    })
}

// Where the loaders and the CLI have always found it; it lives in io/ (a fact of the path).
pub use crate::io::hub::is_gguf_file;

/// Whether `dir/config.json` names a decoder family this build knows (else it is treated as
/// an encoder, whose loader reports unsupported types).
pub fn is_decoder_dir(dir: &Path) -> bool {
    // A GGUF file holds a decoder unless its architecture is an encoder's (`bert`); one that
    // does not parse goes to the decoder loader, which reports why.
    if is_gguf_file(dir) {
        return crate::io::gguf::GgufFile::open(dir)
            .map(|g| !crate::models::gguf_meta::is_encoder(&g))
            .unwrap_or(true);
    }
    crate::io::read_json::<serde_json::Value>(&dir.join("config.json"))
        .ok()
        .and_then(|v| {
            v.get("model_type")
                .and_then(|t| t.as_str())
                .map(String::from)
        })
        .is_some_and(|t| SUPPORTED.contains(&t.as_str()))
}

/// Decoder `model_type` values, in the order errors list them (the kinds table's).
pub const SUPPORTED: &[&str] = crate::io::model_kinds::DECODER_MODEL_TYPES;

/// The sizes a decoder's spec and its stack both state, from the family's config.
#[derive(Clone, Debug)]
pub(crate) struct Sizes {
    pub(crate) hidden: usize,
    pub(crate) layers: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) intermediate: usize,
    pub(crate) vocab: usize,
    /// The longest sequence, in tokens.
    pub(crate) context: usize,
    pub(crate) tied: bool,
    pub(crate) eos: Vec<u32>,
    pub(crate) bos: Option<u32>,
    pub(crate) dtype: Option<String>,
}

/// The size fields LLaMA-like configs share, read and checked in one order.
pub(crate) struct CommonSizes {
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) layers: usize,
    pub(crate) intermediate: usize,
    pub(crate) vocab: usize,
    pub(crate) kv_heads: usize,
    pub(crate) max_positions: usize,
}

/// Reads `hidden_size`, `num_attention_heads`, `num_hidden_layers`, `intermediate_size`,
/// `vocab_size`, `num_key_value_heads` (default: the query heads) and
/// `max_position_embeddings` (default `default_positions`), checks they are positive, and
/// that the query heads are a multiple of the kv heads.
pub(crate) fn common_sizes(f: &ConfigFields, default_positions: usize) -> Result<CommonSizes> {
    let hidden = f.usize("hidden_size", None)?;
    let heads = f.usize("num_attention_heads", None)?;
    let layers = f.usize("num_hidden_layers", None)?;
    let intermediate = f.usize("intermediate_size", None)?;
    let vocab = f.usize("vocab_size", None)?;
    let kv_heads = f.usize("num_key_value_heads", Some(heads))?;
    let max_positions = f.usize("max_position_embeddings", Some(default_positions))?;
    f.check_sizes(&[
        ("hidden_size", hidden),
        ("num_attention_heads", heads),
        ("num_hidden_layers", layers),
        ("intermediate_size", intermediate),
        ("vocab_size", vocab),
        ("num_key_value_heads", kv_heads),
        ("max_position_embeddings", max_positions),
    ])?;
    f.check_multiple(
        "num_attention_heads",
        heads,
        "num_key_value_heads",
        kv_heads,
    )?;
    Ok(CommonSizes {
        hidden,
        heads,
        layers,
        intermediate,
        vocab,
        kv_heads,
        max_positions,
    })
}

impl CommonSizes {
    /// `hidden_size / num_attention_heads`, an error naming the heads where it does not divide.
    pub(crate) fn even_head_dim(&self, f: &ConfigFields) -> Result<usize> {
        let (hidden, heads) = (self.hidden, self.heads);
        f.check_multiple("hidden_size", hidden, "num_attention_heads", heads)?;
        Ok(hidden / heads)
    }

    /// The decoder's [`Sizes`]: these, its `head_dim` and `context`, and the fields every
    /// family spells alike ([`special_ids`], `tie_word_embeddings` defaulting to `tied`, the
    /// dtype).
    pub(crate) fn decoder_sizes(
        &self,
        f: &ConfigFields,
        head_dim: usize,
        context: usize,
        tied: bool,
        null_is_absent: bool,
    ) -> Result<Sizes> {
        let (eos, bos) = special_ids(f, self.vocab, null_is_absent)?;
        Ok(Sizes {
            vocab: self.vocab,
            hidden: self.hidden,
            layers: self.layers,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim,
            intermediate: self.intermediate,
            context,
            tied: f.bool("tie_word_embeddings", tied)?,
            eos,
            bos,
            dtype: f.dtype()?,
        })
    }
}

/// `eos_token_id` (the ids that end a generation) and `bos_token_id` (the first of its ids
/// starts one), each checked below `vocab`; see [`token_ids`] for `null_is_absent`.
pub(crate) fn special_ids(
    f: &ConfigFields,
    vocab: usize,
    null_is_absent: bool,
) -> Result<(Vec<u32>, Option<u32>)> {
    for field in ["eos_token_id", "bos_token_id"] {
        f.check_token_ids(field, vocab)?;
    }
    let eos = token_ids(f, "eos_token_id", null_is_absent)?;
    let bos = token_ids(f, "bos_token_id", null_is_absent)?
        .first()
        .copied();
    Ok((eos, bos))
}

/// The largest `head_dim` accepted (real models use 64..256; 2^40 once made `describe`
/// allocate terabytes before any weight shape was checked).
pub(crate) const MAX_HEAD_DIM: usize = 1 << 16;
/// The largest attention width (`heads · head_dim`, `kv_heads · head_dim`) accepted.
pub(crate) const MAX_ATTENTION_WIDTH: usize = 1 << 24;
/// The largest context (positions) accepted, `max_position_embeddings` times any rope factor
/// included: past it, position arithmetic and the rotary argument reduction lose meaning.
pub(crate) const MAX_CONTEXT: usize = 1 << 24;
/// The largest rope scaling `factor` accepted.
pub(crate) const MAX_ROPE_FACTOR: f64 = 1024.0;

/// Validates the attention geometry read from `config.json` before anything is sized from it:
/// `head_dim` within `1..=MAX_HEAD_DIM`, and `heads · head_dim`, `kv_heads · head_dim` within
/// [`MAX_ATTENTION_WIDTH`] (checked products). Errors name the field and the limit.
pub(crate) fn attention_dims(
    f: &ConfigFields,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
) -> Result<()> {
    if head_dim == 0 || head_dim > MAX_HEAD_DIM {
        return Err(f.err(
            "head_dim",
            format!("{head_dim} is out of range (1..={MAX_HEAD_DIM})"),
        ));
    }
    for (field, n) in [
        ("num_attention_heads", heads),
        ("num_key_value_heads", kv_heads),
    ] {
        match n.checked_mul(head_dim) {
            Some(w) if w <= MAX_ATTENTION_WIDTH => {}
            _ => {
                return Err(f.err(
                    field,
                    format!(
                        "{n} heads of head_dim {head_dim} exceed the largest attention width \
                         ({MAX_ATTENTION_WIDTH})"
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// `max_positions · factor` (dynamic rope), an error past [`MAX_CONTEXT`].
pub(crate) fn scaled_context(
    f: &ConfigFields,
    field: &str,
    max_positions: usize,
    factor: f64,
) -> Result<usize> {
    let ctx = (max_positions as f64 * factor).floor();
    if !(ctx.is_finite() && ctx <= MAX_CONTEXT as f64) {
        return Err(f.err(
            field,
            format!(
                "factor {factor} makes the context max_position_embeddings {max_positions} × \
                 {factor}, past the largest supported context ({MAX_CONTEXT})"
            ),
        ));
    }
    Ok((ctx as usize).max(max_positions))
}

/// `describe`'s attention kind: multi-head, GQA or MQA.
pub(crate) fn attention_kind(heads: usize, kv_heads: usize) -> String {
    match kv_heads {
        1 => format!("causal, MQA ({heads} query heads, 1 kv head)"),
        k if k == heads => format!("causal, multi-head ({k} heads)"),
        k => format!("causal, GQA ({heads} query heads, {k} kv heads)"),
    }
}

/// `describe`'s note on per-layer sliding windows (`None`: full attention): empty without
/// any, `, sliding window W` on every layer, else the layers that slide.
pub(crate) fn sliding_note(windows: &[Option<usize>]) -> String {
    let sliding: Vec<String> = (0..windows.len())
        .filter(|&i| windows[i].is_some())
        .map(|i| i.to_string())
        .collect();
    match windows.iter().flatten().next() {
        None => String::new(),
        Some(w) if sliding.len() == windows.len() => format!(", sliding window {w}"),
        Some(w) => format!(", sliding window {w} on layers {}", sliding.join(",")),
    }
}

/// Token ids from `field` (`eos_token_id`, `bos_token_id`): an integer or a list; absent is
/// empty, and so is `null` when `null_is_absent`.
pub(crate) fn token_ids(f: &ConfigFields, field: &str, null_is_absent: bool) -> Result<Vec<u32>> {
    match f.get(field) {
        None => Ok(vec![]),
        Some(Value::Null) if null_is_absent => Ok(vec![]),
        // `try_from`: 2³² + 1 must not wrap to id 1.
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| f.err(field, format!("expected token ids, found {x}")))
            })
            .collect(),
        Some(x) => x
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(|n| vec![n])
            .ok_or_else(|| f.err(field, format!("expected a token id, found {x}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::FAMILIES;
    use crate::io::model_kinds::{gguf_architectures, ModelKind, DECODER_MODEL_TYPES};

    /// The registry and the kinds table name the same families, each name once.
    #[test]
    fn registry_names_match_the_kinds_table() {
        let mut hub: Vec<_> = FAMILIES
            .iter()
            .flat_map(|f| f.model_types)
            .copied()
            .collect();
        let mut want = DECODER_MODEL_TYPES.to_vec();
        let mut gguf: Vec<_> = FAMILIES
            .iter()
            .flat_map(|f| f.gguf_architectures)
            .copied()
            .collect();
        let mut want_gguf = gguf_architectures(ModelKind::Decoder);
        for v in [&mut hub, &mut want, &mut gguf, &mut want_gguf] {
            v.sort_unstable();
        }
        assert_eq!(hub, want);
        assert_eq!(gguf, want_gguf);
        let (n, mut dedup) = (hub.len(), hub.clone());
        dedup.dedup();
        assert_eq!(dedup.len(), n, "a model_type in two families");
    }
}
