//! What every command that takes `--model` shares: the arguments, the one way to load an
//! embedder or a generator from them, pooling names, and the resource plan for a model.
//! Its own module so the commands depend on it and not on each other.

use anyhow::{bail, Context, Result};
use clap::Args;
use kin_infer::io::hub;
use kin_infer::resource::{HostInfo, ModelShape, Profile, ResourcePlan};
use kin_infer::{Activations, Embedder, EmbedderOptions, Pooling, PoolingMode};
use std::path::PathBuf;

#[derive(Args)]
pub struct ModelArgs {
    /// A model directory, a .gguf file, a catalogue name installed by
    /// scripts/fetch-model.sh, or a Hugging Face repo id (owner/name) in the local Hugging Face
    /// cache (docs/models.md).
    #[arg(long)]
    pub model: String,
    /// Fetch a --model repo id missing from the local Hugging Face cache from the Hub
    /// (HF_ENDPOINT; needs a build with the `download` feature). Without it nothing is fetched.
    #[arg(long)]
    pub download: bool,
    /// Worker threads (default: KIN_INFER_THREADS, else the resource plan's).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Activation numerics: q8 (8-bit activations and integer dot products for ggml-quantized
    /// weights, on the CPU), f32 (quantized output == its dequantized F32 twin's bits), or auto
    /// (the faster on this build: f32 for now); default KIN_INFER_ACTIVATIONS, else auto
    /// (docs/numerics.md).
    #[arg(long, value_name = "MODE", value_parser = parse_activations)]
    pub activations: Option<Activations>,
}

/// `--activations auto|q8|f32`.
pub fn parse_activations(s: &str) -> Result<Activations, String> {
    Activations::parse(s).ok_or_else(|| {
        format!(
            "`{s}` is not an activation mode (expected one of: {})",
            Activations::NAMES
        )
    })
}

pub fn parse_pooling(s: &str) -> Result<Pooling> {
    let modes = s
        .split('+')
        .map(|m| {
            PoolingMode::parse(m).with_context(|| {
                format!(
                    "unknown pooling `{m}` (expected one of: {})",
                    PoolingMode::NAMES
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Pooling::new(modes))
}

impl ModelArgs {
    /// The model directory or `.gguf` file `--model` names (see [`resolve`]).
    pub fn resolve(&self) -> Result<PathBuf> {
        resolve(&self.model, self.download)
    }
}

/// `--model SPEC [--download]`: the local resolution (`kin_infer::io::hub`), then, only with
/// `--download` and only for a repo id that is not found locally, a fetch from the Hub. Offline
/// first: a model already on disk is never re-checked against the network.
pub fn resolve(spec: &str, download: bool) -> Result<PathBuf> {
    if download && !cfg!(feature = "download") {
        return Err(kin_infer::InferError::Unsupported(
            "--download: this build has no downloader: rebuild with `cargo install --path \
             crates/kin-infer-cli --features download` or use scripts/fetch-model.sh"
                .into(),
        )
        .into());
    }
    match hub::resolve_model(spec) {
        Ok(d) => Ok(d),
        #[cfg(feature = "download")]
        Err(kin_infer::InferError::ModelUnresolved { .. })
            if download && hub::looks_like_repo_id(spec) =>
        {
            crate::download::download(spec)
        }
        // Not a repo id: --download cannot help, and what resolution found stays the message.
        Err(e @ kin_infer::InferError::ModelUnresolved { .. })
            if download && !hub::looks_like_repo_id(spec) =>
        {
            bail!("{e} (--download fetches only Hugging Face repo ids, owner/name)")
        }
        Err(e) => Err(e.into()),
    }
}

pub fn load(model: &ModelArgs, mut opts: EmbedderOptions) -> Result<Embedder> {
    let dir = model.resolve()?;
    opts.threads = model.threads;
    opts.activations = model.activations;
    Ok(Embedder::load(&dir, &opts)?)
}

/// The CLI's one way to load a decoder: the library's session API.
pub fn load_generator(
    dir: &std::path::Path,
    threads: Option<usize>,
    activations: Option<Activations>,
) -> Result<kin_infer::Generator> {
    Ok(kin_infer::Generator::load(
        dir,
        &kin_infer::GeneratorOptions {
            threads,
            activations,
            ..Default::default()
        },
    )?)
}

/// Parses `512M`, `2G`, `300000000`.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: f64 = num
        .parse()
        .with_context(|| format!("`{s}` is not a size (e.g. 512M, 2G)"))?;
    if !(n.is_finite() && n > 0.0) {
        bail!("`{s}` is not a positive size");
    }
    Ok((n * mul as f64) as u64)
}

/// The plan for this model on this host.
pub fn plan_for(e: &Embedder, profile: Option<&str>, budget: Option<&str>) -> Result<ResourcePlan> {
    let spec = e.config();
    let shape = ModelShape {
        hidden_size: spec.hidden_size,
        intermediate_size: spec.intermediate_size,
        num_hidden_layers: spec.num_hidden_layers,
        num_attention_heads: spec.num_attention_heads,
        max_sequence_length: e.max_length(),
        weight_bytes: e.info().parameters as u64 * 4,
    };
    let budget = budget.map(parse_size).transpose()?;
    let mut plan = ResourcePlan::resolve(
        HostInfo::detect()?,
        shape,
        Profile::resolve(profile)?,
        budget,
    )?;
    plan.numerics_version = e.numerics().version();
    Ok(plan)
}
