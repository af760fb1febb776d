//! The generation side of the session API, beside [`crate::Embedder`]: a [`Generator`] is a
//! loaded decoder, its backend and its thread pool, immutable once loaded and shared by
//! reference (it is `Send + Sync`); each generation owns its state in a [`Session`] (the KV
//! cache and the forward scratch) or inside [`Generator::generate`] (cache and sampler), so
//! several sessions run on one model from several threads.

use crate::backend::{create_compute_with, GpuCompute};
use crate::error::{InferError, Result};
use crate::generate::stream::{decode_step, generate, Detokenize, Generation, Stepper, TokenEvent};
use crate::generate::SamplingParams;
use crate::kernels::Tier;
use crate::models::decoders::{
    load_decoder, BatchScratch, Decoder, DecoderSpec, KvCache, LogitsRows,
};
use crate::threads;
use kin_infer_core::{Activations, Numerics};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How to load a [`Generator`]; `None` keeps the default.
#[derive(Clone, Debug, Default)]
pub struct GeneratorOptions {
    /// Worker threads (else `KIN_INFER_THREADS`, else all logical CPUs).
    pub threads: Option<usize>,
    /// SIMD tier (else the process-wide one).
    pub tier: Option<Tier>,
    /// Activation numerics (else `KIN_INFER_ACTIVATIONS`, else auto: the faster mode on this
    /// build, f32 for now; `kin_infer_core::activations`).
    pub activations: Option<Activations>,
}

/// A loaded decoder, ready to serve sessions.
pub struct Generator {
    model: Box<dyn Decoder>,
    backend: Box<dyn GpuCompute>,
    pool: rayon::ThreadPool,
    threads: usize,
    numerics: Numerics,
    dir: PathBuf,
    load_ms: f64,
}

impl Generator {
    /// Loads the decoder in `dir` (`config.json` + safetensors), or a `.gguf` file.
    pub fn load(dir: &Path, opts: &GeneratorOptions) -> Result<Self> {
        let t0 = Instant::now();
        if !dir.is_dir() && !crate::models::decoders::is_gguf_file(dir) {
            return Err(InferError::ModelNotFound(dir.display().to_string()));
        }
        let threads = threads::resolve_threads(opts.threads)?;
        let pool = threads::build_pool(threads)?;
        let asked = Activations::resolve(opts.activations)?;
        let backend = create_compute_with(opts.tier, asked)?;
        let model = pool.install(|| load_decoder(dir, backend.as_ref()))?;
        let numerics = backend
            .numerics()
            .check(asked, &dir.display().to_string())?;
        Ok(Generator {
            model,
            backend,
            pool,
            threads,
            numerics,
            dir: dir.to_path_buf(),
            load_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }

    pub fn spec(&self) -> &DecoderSpec {
        self.model.spec()
    }

    /// The activation numerics this model runs (its outputs' numerics version).
    pub fn numerics(&self) -> Numerics {
        self.numerics
    }

    pub fn decoder(&self) -> &dyn Decoder {
        self.model.as_ref()
    }

    pub fn backend(&self) -> &dyn GpuCompute {
        self.backend.as_ref()
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Wall time of [`Generator::load`].
    pub fn load_ms(&self) -> f64 {
        self.load_ms
    }

    /// Runs `f` on the generator's thread pool (where its kernels fork).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// A new session whose cache holds `capacity` positions (at most the context), allocated
    /// now on the backend (after `new_cache` checked that it fits).
    pub fn session(&self, capacity: usize) -> Result<Session<'_>> {
        let mut cache = self.model.new_cache(capacity)?;
        cache.ensure(self.backend.as_ref())?;
        Ok(Session { g: self, cache })
    }

    /// Generates from `prompt` with its own cache and sampler (see
    /// [`crate::generate::generate`]), calling `on_token` per token (on the caller's thread).
    ///
    /// The pool is entered once per forward pass, not for the whole run: concurrent
    /// generations on one model (a server's) then take turns token by token instead of the
    /// first `threads` of them holding every worker until they finish.
    pub fn generate(
        &self,
        prompt: &[u32],
        params: &SamplingParams,
        detok: Option<&(dyn Detokenize + Sync)>,
        on_token: impl FnMut(&TokenEvent) -> ControlFlow<()>,
    ) -> Result<Generation> {
        let model = Pooled {
            inner: self.model.as_ref(),
            pool: &self.pool,
        };
        generate(
            &model,
            self.backend.as_ref(),
            prompt,
            params,
            detok.map(|d| d as &dyn Detokenize),
            on_token,
        )
    }
}

impl Generator {
    /// Starts a generation to be stepped by a scheduler (see [`Stepper`]): checks the request,
    /// prefills `prompt` on the pool and chooses the first token.
    pub fn start(
        &self,
        prompt: &[u32],
        params: &SamplingParams,
        has_detok: bool,
    ) -> Result<Stepper> {
        self.pool.install(|| {
            Stepper::start(
                self.model.as_ref(),
                self.backend.as_ref(),
                prompt,
                params,
                has_detok,
            )
        })
    }

    /// A generation whose prompt is fed in chunks by [`Generator::prefill`] (see
    /// [`Stepper::new`]).
    pub fn begin(
        &self,
        prompt: &[u32],
        params: &SamplingParams,
        has_detok: bool,
    ) -> Result<Stepper> {
        Stepper::new(self.model.as_ref(), prompt, params, has_detok)
    }

    /// Feeds up to `max_tokens` more of a stepper's prompt on the pool; whether it is ready.
    pub fn prefill(&self, st: &mut Stepper, max_tokens: usize) -> Result<bool> {
        self.pool
            .install(|| st.prefill(self.model.as_ref(), self.backend.as_ref(), max_tokens))
    }

    /// One batched decode step of running generations ([`decode_step`]) on the pool.
    pub fn decode_step(
        &self,
        steppers: &mut [&mut Stepper],
        scratch: &mut BatchScratch,
    ) -> Result<()> {
        self.pool.install(|| {
            decode_step(
                self.model.as_ref(),
                self.backend.as_ref(),
                steppers,
                scratch,
            )
        })
    }
}

/// A decoder whose forward passes run on a given pool (where its kernels fork), for
/// [`Generator::generate`]'s one sequence. Its `decode_batch` is the trait's one-by-one
/// default (the same bits, each forward on the pool): batched steps go through
/// [`Generator::decode_step`], which enters the pool once for the whole step.
struct Pooled<'a> {
    inner: &'a dyn Decoder,
    pool: &'a rayon::ThreadPool,
}

impl Decoder for Pooled<'_> {
    fn spec(&self) -> &DecoderSpec {
        self.inner.spec()
    }

    fn new_cache(&self, capacity: usize) -> Result<KvCache> {
        self.inner.new_cache(capacity)
    }

    fn forward<'c>(
        &self,
        be: &dyn GpuCompute,
        ids: &[u32],
        cache: &'c mut KvCache,
        rows: LogitsRows,
    ) -> Result<&'c [f32]> {
        self.pool
            .install(|| self.inner.forward(be, ids, cache, rows))
    }
}

/// One generation's state on a shared [`Generator`]: its KV cache and scratch.
pub struct Session<'g> {
    g: &'g Generator,
    cache: KvCache,
}

impl Session<'_> {
    /// Runs `ids` at the positions after what the session holds and returns the logits of
    /// `rows`; on error the session is unchanged.
    pub fn forward(&mut self, ids: &[u32], rows: LogitsRows) -> Result<&[f32]> {
        let g = self.g;
        let cache = &mut self.cache;
        g.pool
            .install(|| g.model.forward(g.backend.as_ref(), ids, cache, rows))
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// Forgets every position (keeps the memory).
    pub fn clear(&mut self) {
        self.cache.clear();
    }
}
