//! Model families, one file each, built from the shared blocks in [`crate::nn`].
//!
//! Every encoder family implements [`Encoder`]; [`load_encoder`] picks the family from
//! `config.json`'s `model_type`, so the embedding pipeline, `describe`, `check` and `bench`
//! serve every family through one interface.

pub mod decoders;
pub mod encoders;
pub mod gguf_meta;

use crate::backend::{GpuCompute, SeqSpan, Tensor};
use crate::error::{InferError, Result};
use crate::io::config::{BertConfig, ModelArchitecture};
use crate::io::safetensors::WeightStore;
use std::path::Path;

pub use encoders::bert::BertModel;

/// What every encoder tells the pipeline and `describe`.
#[derive(Clone, Debug)]
pub struct EncoderSpec {
    pub architecture: ModelArchitecture,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub vocab_size: usize,
    pub type_vocab_size: usize,
    /// Longest sequence the model accepts (position table or configured limit).
    pub max_sequence_length: usize,
    pub pad_token_id: u32,
    /// Positional scheme, e.g. "learned absolute".
    pub positions: String,
    /// Attention kind, e.g. "multi-head softmax".
    pub attention: String,
    /// Feed-forward kind, e.g. "dense + gelu (erf)".
    pub ffn: String,
    /// `torch_dtype` / `dtype` as the config writes it.
    pub dtype: Option<String>,
}

impl EncoderSpec {
    pub fn max_sequence_length(&self) -> usize {
        self.max_sequence_length
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Checks ids against the vocabulary and the length limit, type ids against the type
    /// vocabulary.
    pub fn validate(&self, ids: &[u32], type_ids: Option<&[u32]>) -> Result<()> {
        if ids.is_empty() {
            return Err(InferError::Input("empty token sequence".into()));
        }
        if ids.len() > self.max_sequence_length {
            return Err(InferError::ContextExceeded {
                message: format!(
                    "sequence of {} tokens exceeds the model's limit of {}",
                    ids.len(),
                    self.max_sequence_length
                ),
                tokens: ids.len(),
                limit: self.max_sequence_length,
            });
        }
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(InferError::TokenOutOfVocabulary {
                id: bad,
                vocab: self.vocab_size,
            });
        }
        if let Some(t) = type_ids {
            InferError::counts_match("token_type_ids entries", t.len(), "tokens", ids.len())?;
            if let Some(bad) = t
                .iter()
                .find(|&&t| t as usize >= self.type_vocab_size.max(1))
            {
                return Err(InferError::Input(format!(
                    "token type id {bad} is outside type_vocab_size {}",
                    self.type_vocab_size
                )));
            }
        }
        Ok(())
    }
}

/// An encoder: token ids in, last hidden state out.
pub trait Encoder: Send + Sync {
    fn spec(&self) -> &EncoderSpec;
    /// The weight-name prefix the checkpoint uses (`""`, `"bert."`, ...).
    fn weight_prefix(&self) -> &str;
    /// Runs a packed batch (each sequence only its real tokens, validated by the caller with
    /// [`EncoderSpec::validate`]); returns one row of `hidden_size` per token, in order, on
    /// the backend. A sequence's rows must not depend on the other sequences of the batch.
    fn forward(
        &self,
        be: &dyn GpuCompute,
        seqs: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
    ) -> Result<Tensor>;
}

/// A loaded encoder family: what the pipeline asks of every family (its spec and weight
/// prefix) held once here, around the family's forward pass.
pub struct Loaded<M> {
    spec: EncoderSpec,
    prefix: String,
    /// The family's model.
    pub model: M,
}

impl<M> Loaded<M> {
    pub(crate) fn new(spec: EncoderSpec, prefix: &str, model: M) -> Self {
        Loaded {
            spec,
            prefix: prefix.to_string(),
            model,
        }
    }
}

/// One packed batch as a family's forward pass reads it: the sequences, their token types,
/// and the spans [`pack_spans`] lays them out at (`total` rows).
pub(crate) struct Batch<'a> {
    pub seqs: &'a [&'a [u32]],
    pub type_ids: Option<&'a [&'a [u32]]>,
    pub spans: Vec<SeqSpan>,
    pub total: usize,
}

/// A family's forward pass over a packed batch (the contract of [`Encoder::forward`]).
pub(crate) trait Forward: Send + Sync {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor>;
}

impl<M: Forward> Encoder for Loaded<M> {
    fn spec(&self) -> &EncoderSpec {
        &self.spec
    }

    fn weight_prefix(&self) -> &str {
        &self.prefix
    }

    fn forward(
        &self,
        be: &dyn GpuCompute,
        seqs: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
    ) -> Result<Tensor> {
        let (spans, total) = pack_spans(seqs);
        let batch = Batch {
            seqs,
            type_ids,
            spans,
            total,
        };
        self.model.forward(be, &batch)
    }
}

/// Lays a batch out as one packed buffer: each sequence's rows follow the previous one's,
/// with no padding. Returns each sequence's span and the total row count.
pub(crate) fn pack_spans(seqs: &[&[u32]]) -> (Vec<SeqSpan>, usize) {
    let mut spans = Vec::with_capacity(seqs.len());
    let mut total = 0;
    for ids in seqs {
        spans.push(SeqSpan {
            start: total,
            len: ids.len(),
        });
        total += ids.len();
    }
    (spans, total)
}

/// Reads `config.json`, detects the family and loads its weights.
pub fn load_encoder(
    config: &Path,
    store: &WeightStore,
    be: &dyn GpuCompute,
) -> Result<Box<dyn Encoder>> {
    let arch = ModelArchitecture::detect(config)?;
    Ok(match arch {
        ModelArchitecture::Bert | ModelArchitecture::Roberta | ModelArchitecture::XlmRoberta => {
            Box::new(BertModel::load(BertConfig::from_file(config)?, store, be)?)
        }
        ModelArchitecture::Albert => encoders::albert::load(config, store, be)?,
        ModelArchitecture::Deberta | ModelArchitecture::DebertaV2 => {
            encoders::deberta::load(config, store, be)?
        }
        ModelArchitecture::T5 | ModelArchitecture::Mt5 => encoders::t5::load(config, store, be)?,
        ModelArchitecture::NomicBert => encoders::nomic::load(config, store, be)?,
        ModelArchitecture::JinaBert => encoders::jina::load(config, store, be)?,
    })
}
