//! What every command that takes `--model` shares: the arguments, the one way to load an
//! embedder or a generator from them, pooling names, and the resource plan for a model.
//! Its own module so the commands depend on it and not on each other.

use anyhow::{bail, Context, Result};
use clap::Args;
use kin_infer::io::hub;
use kin_infer::resource::{HostInfo, ModelShape, Profile, ResourcePlan};
use kin_infer::{Embedder, EmbedderOptions, Pooling, PoolingMode};

#[derive(Args)]
pub struct ModelArgs {
    /// Model directory, or a Hugging Face repo id found in the local Hugging Face cache.
    #[arg(long)]
    pub model: String,
    /// Worker threads (default: KIN_INFER_THREADS, else the resource plan's).
    #[arg(long)]
    pub threads: Option<usize>,
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

pub fn load(model: &ModelArgs, mut opts: EmbedderOptions) -> Result<Embedder> {
    let dir = match hub::resolve_model(&model.model) {
        Ok(d) => d,
        #[cfg(feature = "download")]
        Err(kin_infer::InferError::ModelNotFound(_)) if hub::looks_like_repo_id(&model.model) => {
            crate::download::download(&model.model)?
        }
        Err(e) => return Err(e.into()),
    };
    opts.threads = model.threads;
    Ok(Embedder::load(&dir, &opts)?)
}

/// The CLI's one way to load a decoder: the library's session API.
pub fn load_generator(
    dir: &std::path::Path,
    threads: Option<usize>,
) -> Result<kin_infer::Generator> {
    Ok(kin_infer::Generator::load(
        dir,
        &kin_infer::GeneratorOptions {
            threads,
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
    Ok(ResourcePlan::resolve(
        HostInfo::detect()?,
        shape,
        Profile::resolve(profile)?,
        budget,
    )?)
}
