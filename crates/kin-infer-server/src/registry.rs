//! The loaded models: each `--model [NAME=]PATH` becomes an embedding model (an encoder, with
//! its dynamic batcher) or a generation model (a decoder, its tokenizer and chat template),
//! chosen by what the directory or GGUF file holds.

use crate::batcher::Batcher;
use crate::metrics::Metrics;
use crate::scheduler::Scheduler;
use kin_infer::generate::chat::ChatTemplate;
use kin_infer::generate::{eos_token_ids, has_tokenizer, GenTokenizer};
use kin_infer::io::hub;
use kin_infer::models::decoders::is_decoder_dir;
use kin_infer::{Embedder, EmbedderOptions, Generator, GeneratorOptions, InferError, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One `--model` argument.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// The id clients name: `NAME`, else the directory's or file's name.
    pub id: String,
    pub path: String,
}

impl ModelSpec {
    /// Parses `[NAME=]PATH`.
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let (id, path) = match s.split_once('=') {
            Some((n, p)) if !n.is_empty() && !n.contains('/') => (n.to_string(), p.to_string()),
            _ => {
                let p = Path::new(s.trim_end_matches('/'));
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| s.to_string());
                (name, s.to_string())
            }
        };
        if path.is_empty() {
            return Err(format!("--model {s}: no path"));
        }
        Ok(ModelSpec { id, path })
    }
}

pub struct EmbedModel {
    pub embedder: Arc<Embedder>,
    pub batcher: Batcher,
}

pub struct GenModel {
    pub generator: Arc<Generator>,
    pub tokenizer: Option<Arc<GenTokenizer>>,
    pub template: Option<ChatTemplate>,
    pub eos: Vec<u32>,
    /// The thread that runs this model's generations, batched.
    pub scheduler: Scheduler,
}

pub enum Kind {
    Embed(EmbedModel),
    Generate(Box<GenModel>),
}

pub struct Model {
    pub id: String,
    pub path: PathBuf,
    pub created: u64,
    pub kind: Kind,
}

impl Model {
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Embed(_) => "embedding",
            Kind::Generate(_) => "generation",
        }
    }

    /// The activation numerics it runs (`f32` or `q8`).
    pub fn numerics(&self) -> kin_infer::Numerics {
        match &self.kind {
            Kind::Embed(m) => m.embedder.numerics(),
            Kind::Generate(m) => m.generator.numerics(),
        }
    }
}

/// What the batcher of an embedding model is allowed.
#[derive(Clone, Copy, Debug)]
pub struct BatchLimits {
    pub max_batch_tokens: usize,
    /// Prompt tokens a decoder's scheduler feeds per step.
    pub prefill_chunk: usize,
}

/// How every model loads: its threads and activation numerics.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    pub threads: Option<usize>,
    pub activations: Option<kin_infer::Activations>,
}

/// Loads every model; the first failure names its `--model` argument.
pub fn load_all(
    specs: &[ModelSpec],
    opts: LoadOptions,
    limits: BatchLimits,
    metrics: &Arc<Metrics>,
) -> Result<Vec<Arc<Model>>> {
    let mut out: Vec<Arc<Model>> = Vec::new();
    for s in specs {
        if out.iter().any(|m| m.id == s.id) {
            return Err(InferError::Input(format!(
                "two models are named `{}`; name them with --model NAME=PATH",
                s.id
            )));
        }
        let path = hub::resolve_model(&s.path)?;
        let created = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let kind = if is_decoder_dir(&path) {
            Kind::Generate(Box::new(load_generator(&s.id, &path, opts, limits)?))
        } else {
            let embedder = Arc::new(Embedder::load(
                &path,
                &EmbedderOptions {
                    threads: opts.threads,
                    activations: opts.activations,
                    ..Default::default()
                },
            )?);
            let batcher = Batcher::start(
                &s.id,
                embedder.clone(),
                limits.max_batch_tokens,
                metrics.clone(),
            );
            Kind::Embed(EmbedModel { embedder, batcher })
        };
        out.push(Arc::new(Model {
            id: s.id.clone(),
            path,
            created,
            kind,
        }));
    }
    Ok(out)
}

fn load_generator(
    id: &str,
    path: &Path,
    opts: LoadOptions,
    limits: BatchLimits,
) -> Result<GenModel> {
    let generator = Arc::new(Generator::load(
        path,
        &GeneratorOptions {
            threads: opts.threads,
            activations: opts.activations,
            ..Default::default()
        },
    )?);
    let tokenizer = if has_tokenizer(path) {
        Some(Arc::new(GenTokenizer::load(path)?))
    } else {
        None
    };
    // A model without a template still serves text completions; chat then says why not.
    let template = ChatTemplate::load(path).ok();
    let eos = eos_token_ids(path, generator.spec())?;
    let scheduler = Scheduler::start(
        id,
        generator.clone(),
        tokenizer.clone(),
        limits.prefill_chunk,
    );
    Ok(GenModel {
        generator,
        tokenizer,
        template,
        eos,
        scheduler,
    })
}
