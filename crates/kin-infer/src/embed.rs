//! The sentence-embedding pipeline: tokenizer → encoder → pooling → optional L2 normalization,
//! configured from the sentence-transformers layout of the model directory (or an encoder GGUF
//! file's metadata), with options overriding it.

use crate::backend::{self as gpu, GpuCompute, Tensor};
use crate::error::{InferError, Result};
use crate::io::config::ModelArchitecture;
use crate::io::gguf::GgufFile;
use crate::io::gguf_tokenizer;
use crate::io::safetensors::{StorageDtype, WeightStore};
use crate::io::st_config::SentenceConfig;
use crate::kernels::Tier;
use crate::models::{encoders, load_encoder, pack_spans, Encoder, EncoderSpec};
use crate::nn::dense::Dense;
use crate::nn::pooling::Pooling;
use crate::threads;
use crate::tokenize::{Encoded, TextTokenizer};
use kin_infer_core::{Activations, Numerics};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Overrides of what the model directory says; `None` keeps the directory's choice.
#[derive(Clone, Debug, Default)]
pub struct EmbedderOptions {
    pub pooling: Option<Pooling>,
    pub normalize: Option<bool>,
    /// Tokens per text, special tokens included; must not exceed the model's position limit.
    pub max_length: Option<usize>,
    /// Worker threads (else `KIN_INFER_THREADS`, else all logical CPUs).
    pub threads: Option<usize>,
    /// SIMD tier (else the process-wide one: best present, or `KIN_INFER_SIMD`).
    pub tier: Option<Tier>,
    /// Matryoshka truncation: keep the first N dimensions (then L2-normalize if normalizing).
    pub dimensions: Option<usize>,
    /// Activation numerics (else `KIN_INFER_ACTIVATIONS`, else auto: the faster mode on this
    /// build, f32 for now; `kin_infer_core::activations`).
    pub activations: Option<Activations>,
}

/// Facts about a loaded model, for `describe`.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub dir: PathBuf,
    pub tensors: usize,
    pub parameters: usize,
    pub dtype_counts: BTreeMap<String, usize>,
    pub storage_dtype: Option<StorageDtype>,
    pub shards: usize,
    pub weight_prefix: String,
    pub load_ms: f64,
}

pub struct Embedder {
    model: Box<dyn Encoder>,
    info: ModelInfo,
    tokenizer: Option<TextTokenizer>,
    pooling: Pooling,
    /// sentence-transformers `Dense` modules applied after pooling, in order.
    dense: Vec<Dense>,
    normalize: bool,
    max_length: usize,
    dimensions: Option<usize>,
    backend: Box<dyn GpuCompute>,
    pool: rayon::ThreadPool,
    threads: usize,
    numerics: Numerics,
}

/// Tokens per text: the option (checked against the model's position `limit`), else `default`.
fn max_length(opts: &EmbedderOptions, default: usize, limit: usize) -> Result<usize> {
    match opts.max_length {
        Some(0) => Err(InferError::Input("max length must be at least 1".into())),
        Some(n) if n > limit => Err(InferError::Input(format!(
            "max length {n} exceeds the model's position limit of {limit}"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

/// A Matryoshka width `dimensions` fits the `full_dim`-wide embedding.
fn check_dimensions(dimensions: Option<usize>, full_dim: usize) -> Result<()> {
    match dimensions {
        Some(d) if d == 0 || d > full_dim => Err(InferError::Input(format!(
            "dimensions {d} must be between 1 and the embedding size {full_dim}"
        ))),
        _ => Ok(()),
    }
}

/// Where a model's configuration comes from: a directory's sentence-transformers files, or
/// a GGUF file's metadata.
enum Source {
    Dir(SentenceConfig),
    Gguf(GgufFile),
}

impl Embedder {
    /// Loads a model directory (config.json + safetensors, optional tokenizer.json and
    /// sentence-transformers configs), or an encoder GGUF file (llama.cpp's `bert`: weights,
    /// config, tokenizer and pooling from the file, `models/encoders/gguf.rs`; no Dense
    /// modules; normalization only if asked). One path for both, so the options apply alike.
    pub fn load(path: &Path, opts: &EmbedderOptions) -> Result<Self> {
        let t0 = Instant::now();
        let config_path = path.join("config.json");
        // The family (and a directory's sentence-transformers configs) first, to fail fast
        // on an unsupported model before touching the weights.
        let (store, src) = if crate::models::decoders::is_gguf_file(path) {
            let (store, gguf) = WeightStore::open_gguf(path)?;
            (store, Source::Gguf(gguf))
        } else if !path.is_dir() {
            return Err(InferError::ModelNotFound(path.display().to_string()));
        } else {
            ModelArchitecture::detect(&config_path)?;
            let st = SentenceConfig::read(path)?;
            (WeightStore::open_dir(path)?, Source::Dir(st))
        };
        let threads = threads::resolve_threads(opts.threads)?;
        let pool = threads::build_pool(threads)?;
        let asked = Activations::resolve(opts.activations)?;
        let backend = gpu::create_compute_with(opts.tier, asked)?;
        let model = pool.install(|| match &src {
            Source::Gguf(g) => encoders::gguf::load(g, &store, backend.as_ref()),
            Source::Dir(_) => load_encoder(&config_path, &store, backend.as_ref()),
        })?;
        let limit = model.spec().max_sequence_length;
        let default_length = match &src {
            Source::Dir(st) => st.max_seq_length.unwrap_or(limit).min(limit),
            Source::Gguf(_) => limit,
        };
        let max_length = max_length(opts, default_length, limit)?;
        let tokenizer = match &src {
            Source::Gguf(g) if gguf_tokenizer::has_tokenizer(g) => {
                let t = gguf_tokenizer::load(g)?;
                Some(TextTokenizer::from_tokenizer(t, path, max_length)?)
            }
            Source::Gguf(_) => None,
            Source::Dir(_) => path
                .join("tokenizer.json")
                .is_file()
                .then(|| TextTokenizer::load(path, max_length))
                .transpose()?,
        };
        let info = ModelInfo {
            dir: path.to_path_buf(),
            tensors: store.len(),
            parameters: store.parameter_count(),
            dtype_counts: store.dtype_counts(),
            storage_dtype: store.storage_dtype(),
            shards: store.shard_paths().len(),
            weight_prefix: model.weight_prefix().to_string(),
            load_ms: t0.elapsed().as_secs_f64() * 1e3,
        };
        let pooling = match (opts.pooling.clone(), &src) {
            (Some(p), _) => p,
            (None, Source::Dir(st)) => st.pooling.clone(),
            (None, Source::Gguf(g)) => encoders::gguf::pooling(g)?,
        };
        if pooling.modes().is_empty() {
            return Err(InferError::Input("pooling names no mode".into()));
        }
        // The widths chain (checked before any Dense weight is read), then the weights load.
        let (dense_configs, st_normalize) = match &src {
            Source::Dir(st) => (&st.dense[..], st.normalize),
            Source::Gguf(_) => (&[][..], false),
        };
        let mut full_dim = pooling.output_dim(model.spec().hidden_size);
        for c in dense_configs {
            if c.in_features != full_dim {
                return Err(InferError::Config {
                    path: c.dir.join("config.json"),
                    field: "in_features".into(),
                    reason: format!(
                        "{} does not match the {full_dim}-wide embedding it receives",
                        c.in_features
                    ),
                });
            }
            full_dim = c.out_features;
        }
        let dense = dense_configs
            .iter()
            .map(|c| Dense::load(c, backend.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        check_dimensions(opts.dimensions, full_dim)?;
        let numerics = backend
            .numerics()
            .check(asked, &path.display().to_string())?;
        Ok(Embedder {
            numerics,
            dimensions: opts.dimensions,
            model,
            info,
            tokenizer,
            pooling,
            dense,
            normalize: opts.normalize.unwrap_or(st_normalize),
            max_length,
            backend,
            pool,
            threads,
        })
    }

    /// The activation numerics this model runs (its outputs' numerics version).
    pub fn numerics(&self) -> Numerics {
        self.numerics
    }

    pub fn config(&self) -> &EncoderSpec {
        self.model.spec()
    }
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }
    pub fn pooling(&self) -> &Pooling {
        &self.pooling
    }
    pub fn normalize(&self) -> bool {
        self.normalize
    }
    pub fn max_length(&self) -> usize {
        self.max_length
    }
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Changes the worker thread count (outputs do not depend on it).
    pub fn set_threads(&mut self, n: usize) -> Result<()> {
        if n != self.threads {
            self.pool = threads::build_pool(threads::resolve_threads(Some(n))?)?;
            self.threads = n;
        }
        Ok(())
    }
    pub fn tier(&self) -> Tier {
        self.backend.tier()
    }
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }
    /// The device the backend computes on ("CPU (avx512)", or the GPU adapter).
    pub fn device(&self) -> String {
        self.backend.device()
    }
    pub fn tokenizer(&self) -> Option<&TextTokenizer> {
        self.tokenizer.as_ref()
    }
    /// The `Dense` modules between pooling and normalization.
    pub fn dense(&self) -> &[Dense] {
        &self.dense
    }
    /// Length of each embedding.
    /// The Matryoshka width this embedder was loaded with, if any.
    pub fn dimensions(&self) -> Option<usize> {
        self.dimensions
    }
    pub fn dim(&self) -> usize {
        self.dimensions.unwrap_or_else(|| self.full_dim())
    }
    /// Length of the embedding before any `dimensions` truncation.
    fn full_dim(&self) -> usize {
        self.dense.last().map_or_else(
            || self.pooling.output_dim(self.model.spec().hidden_size),
            |d| d.out_features(),
        )
    }

    /// Tokenizes texts (truncated to the model's limit).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Encoded>> {
        match &self.tokenizer {
            Some(t) => t.encode_batch(texts),
            None => Err(InferError::Tokenizer {
                reason: format!(
                    "{} has no tokenizer.json; text input needs one (token ids need none)",
                    self.info.dir.display()
                ),
            }),
        }
    }

    /// Embeds texts as one batch.
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let enc = self.tokenize(texts)?;
        let ids: Vec<&[u32]> = enc.iter().map(|e| e.ids.as_slice()).collect();
        let types: Vec<&[u32]> = enc.iter().map(|e| e.type_ids.as_slice()).collect();
        self.embed_tokens(&ids, Some(&types))
    }

    /// Embeds token-id sequences as one batch (no tokenizer needed): encoder → pooling →
    /// Dense → truncation → normalization, all on the backend; only the embeddings come back.
    /// Rows never interact after the encoder, so the embeddings stay batch-invariant.
    pub fn embed_tokens(
        &self,
        ids: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
    ) -> Result<Vec<Vec<f32>>> {
        self.embed_tokens_dims(ids, type_ids, None)
    }

    /// [`Embedder::embed_tokens`] with a Matryoshka width per row (`None`: the embedder's),
    /// so that a server can batch requests that ask for different `dimensions`. Rows are
    /// grouped by width after the Dense modules; each group is narrowed and normalized by the
    /// same backend ops as a batch of one width, so a row's bits do not depend on its group.
    pub fn embed_tokens_dims(
        &self,
        ids: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
        dims: Option<&[Option<usize>]>,
    ) -> Result<Vec<Vec<f32>>> {
        if let Some(d) = dims {
            InferError::counts_match("dimensions", d.len(), "sequences", ids.len())?;
            for &k in d {
                check_dimensions(k, self.full_dim())?;
            }
            let first = d.first().copied().flatten();
            if d.iter().any(|&k| k != first) {
                return self.embed_mixed_widths(ids, type_ids, d);
            }
        }
        let keep_override = dims.and_then(|d| d.first().copied().flatten());
        let Some(states) = self.encode(ids, type_ids)? else {
            return Ok(Vec::new());
        };
        let be = self.backend.as_ref();
        let h = self.model.spec().hidden_size;
        let rows = ids.len();
        let (spans, _) = pack_spans(ids);
        self.pool.install(|| {
            let mut width = self.pooling.output_dim(h);
            let mut x = be.zeros(rows * width);
            be.pool(states.view(), &spans, h, &self.pooling, x.at_mut(..));
            for d in &self.dense {
                x = d.forward(be, x.view(), rows);
                width = d.out_features();
            }
            if let Some(keep) = keep_override.or(self.dimensions).filter(|&d| d < width) {
                let mut t = be.zeros(rows * keep);
                be.narrow(x.view(), rows, width, keep, t.at_mut(..));
                (x, width) = (t, keep);
            }
            if self.normalize {
                be.normalize(x.at_mut(..), width);
            }
            let mut staging = Vec::new();
            let host = be.read(x.view(), &mut staging);
            be.check()?;
            Ok(host.chunks_exact(width).map(<[f32]>::to_vec).collect())
        })
    }

    /// Rows asking for different widths: each group of equal width runs as its own batch
    /// (the encoder is batch-invariant, so this costs time, never bits).
    fn embed_mixed_widths(
        &self,
        ids: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
        dims: &[Option<usize>],
    ) -> Result<Vec<Vec<f32>>> {
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
        let mut widths: Vec<Option<usize>> = dims.to_vec();
        widths.sort_unstable();
        widths.dedup();
        for w in widths {
            let rows: Vec<usize> = (0..ids.len()).filter(|&i| dims[i] == w).collect();
            let sub_ids: Vec<&[u32]> = rows.iter().map(|&i| ids[i]).collect();
            let sub_types: Option<Vec<&[u32]>> =
                type_ids.map(|t| rows.iter().map(|&i| t[i]).collect());
            let sub_dims = vec![w; rows.len()];
            let vecs = self.embed_tokens_dims(&sub_ids, sub_types.as_deref(), Some(&sub_dims))?;
            for (i, v) in rows.into_iter().zip(vecs) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// The encoder's last hidden state per sequence (`len` rows of `hidden_size`).
    pub fn hidden_states(
        &self,
        ids: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
    ) -> Result<Vec<Vec<f32>>> {
        let Some(states) = self.encode(ids, type_ids)? else {
            return Ok(Vec::new());
        };
        let h = self.model.spec().hidden_size;
        let mut staging = Vec::new();
        let flat = self.backend.read(states.view(), &mut staging);
        self.backend.check()?;
        let mut out = Vec::with_capacity(ids.len());
        let mut start = 0;
        for s in ids {
            out.push(flat[start * h..(start + s.len()) * h].to_vec());
            start += s.len();
        }
        Ok(out)
    }

    /// Validates a batch and runs the encoder on it (`None` for an empty batch).
    fn encode(&self, ids: &[&[u32]], type_ids: Option<&[&[u32]]>) -> Result<Option<Tensor>> {
        if let Some(t) = type_ids {
            InferError::counts_match("token_type_ids rows", t.len(), "sequences", ids.len())?;
        }
        if ids.is_empty() {
            return Ok(None);
        }
        let spec = self.model.spec();
        for (i, s) in ids.iter().enumerate() {
            spec.validate(s, type_ids.map(|t| t[i]))?;
        }
        self.pool
            .install(|| self.model.forward(self.backend.as_ref(), ids, type_ids))
            .map(Some)
    }
}
