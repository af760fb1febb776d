//! Sizing a run to the machine: [`HostInfo`] inspects the host (cores, SIMD tier, memory,
//! cgroup limits, accelerators), and [`ResourcePlan::resolve`] turns it, a profile and a model's
//! shape into an embedding plan (threads, batch size, tokens per batch within a memory budget)
//! and a kernel plan (tier, backend).
//!
//! The plan never changes output bits: batch size and thread count only partition work (see
//! ARCHITECTURE.md), so every profile gives the same embeddings.

use crate::backend::GpuCompute;
use crate::error::{InferError, Result};
use crate::kernels::Tier;
pub use crate::units::human_bytes;
use serde::Serialize;
use std::path::Path;

/// Version of the plan's JSON form; bumped when a field changes meaning.
// 2: `model` is the path, its shape under `model_shape` (max_length, as describe names it),
// `kernel.simd_tier` and `kernel.device` (issue 35: describe and plan name things alike).
pub const PLAN_FORMAT: &str = "kin-infer-plan/2";

/// Fixed overhead outside weights and activations: tokenizer, runtime, I/O buffers.
const FIXED_OVERHEAD: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Deterministic stored embeddings (the default): all cores, half the free memory.
    Proof,
    /// Bulk work: all cores, bigger batches, three quarters of the free memory.
    Throughput,
    /// Latency next to a user: two threads, small batches, a quarter of the free memory.
    Interactive,
    /// CI and tests: one thread, 512 MiB.
    Ci,
}

impl Profile {
    pub const NAMES: &'static str = "proof, throughput, interactive, ci";

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "proof" => Profile::Proof,
            "throughput" => Profile::Throughput,
            "interactive" => Profile::Interactive,
            "ci" => Profile::Ci,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Proof => "proof",
            Profile::Throughput => "throughput",
            Profile::Interactive => "interactive",
            Profile::Ci => "ci",
        }
    }

    /// `explicit`, else `KIN_RESOURCE_PROFILE`, else `proof`.
    pub fn resolve(explicit: Option<&str>) -> Result<Self> {
        let env = std::env::var("KIN_RESOURCE_PROFILE").ok();
        match explicit.or(env.as_deref().filter(|s| !s.trim().is_empty())) {
            None => Ok(Profile::Proof),
            Some(s) => Profile::parse(s).ok_or_else(|| {
                InferError::Input(format!(
                    "unknown resource profile `{s}` (expected one of: {})",
                    Self::NAMES
                ))
            }),
        }
    }

    fn default_batch(self) -> usize {
        match self {
            Profile::Proof => 32,
            Profile::Throughput => 64,
            Profile::Interactive => 4,
            Profile::Ci => 8,
        }
    }
}

/// What the host offers.
#[derive(Clone, Debug, Serialize)]
pub struct HostInfo {
    pub logical_cores: usize,
    pub physical_cores: usize,
    pub simd_tier: &'static str,
    pub simd_tiers_available: Vec<&'static str>,
    pub total_memory_bytes: Option<u64>,
    pub available_memory_bytes: Option<u64>,
    /// CPUs allowed by a cgroup CPU quota (`cpu.max`), if any.
    pub cgroup_cpu_limit: Option<f64>,
    /// Bytes allowed by a cgroup memory limit (`memory.max`), if any.
    pub cgroup_memory_limit_bytes: Option<u64>,
    /// The process's address-space limit (`RLIMIT_AS`, `ulimit -v`), if any.
    pub address_space_limit_bytes: Option<u64>,
    /// GPUs the backend discovery found (`gpu::discover_devices`; none without a GPU
    /// feature), software adapters marked as such.
    pub accelerators: Vec<String>,
}

impl HostInfo {
    pub fn detect() -> Result<Self> {
        let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem = |key: &str| meminfo_bytes(&meminfo, key);
        Ok(HostInfo {
            logical_cores: logical,
            physical_cores: physical_cores().unwrap_or(logical),
            simd_tier: crate::backend::CpuCompute::new()?.tier().name(),
            simd_tiers_available: Tier::available().into_iter().map(Tier::name).collect(),
            total_memory_bytes: mem("MemTotal:"),
            available_memory_bytes: mem("MemAvailable:"),
            cgroup_cpu_limit: cgroup_cpu_limit(),
            cgroup_memory_limit_bytes: cgroup_memory_limit(),
            address_space_limit_bytes: address_space_limit(),
            accelerators: crate::backend::discover_devices()
                .into_iter()
                .map(|d| format!("{} ({}, {})", d.name, d.backend, d.kind))
                .collect(),
        })
    }

    /// Free memory the run may count on: the smaller of what the kernel reports available and
    /// the cgroup limit.
    pub fn usable_memory(&self) -> Option<u64> {
        match (self.available_memory_bytes, self.cgroup_memory_limit_bytes) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        }
    }

    /// CPUs the run may use: logical cores, capped by a cgroup quota.
    pub fn usable_cpus(&self) -> usize {
        let cap = self
            .cgroup_cpu_limit
            .map_or(usize::MAX, |c| c.ceil().max(1.0) as usize);
        self.logical_cores.min(cap).max(1)
    }
}

/// Distinct (physical id, core id) pairs in /proc/cpuinfo.
fn physical_cores() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mut cores = std::collections::BTreeSet::new();
    let mut phys = "0".to_string();
    for line in info.lines() {
        let mut kv = line.splitn(2, ':').map(str::trim);
        match (kv.next(), kv.next()) {
            (Some("physical id"), Some(v)) => phys = v.to_string(),
            (Some("core id"), Some(v)) => {
                cores.insert((phys.clone(), v.to_string()));
            }
            _ => {}
        }
    }
    (!cores.is_empty()).then_some(cores.len())
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(Path::new(p))
        .ok()
        .map(|s| s.trim().to_string())
}

/// cgroup v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD"), else v1 cfs quota/period.
fn cgroup_cpu_limit() -> Option<f64> {
    if let Some(s) = read_trim("/sys/fs/cgroup/cpu.max") {
        let mut it = s.split_whitespace();
        let (q, p) = (it.next()?, it.next()?);
        if q == "max" {
            return None;
        }
        return Some(q.parse::<f64>().ok()? / p.parse::<f64>().ok()?);
    }
    let q: f64 = read_trim("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")?
        .parse()
        .ok()?;
    let p: f64 = read_trim("/sys/fs/cgroup/cpu/cpu.cfs_period_us")?
        .parse()
        .ok()?;
    (q > 0.0 && p > 0.0).then(|| q / p)
}

/// cgroup v2 `memory.max`, else v1 `memory.limit_in_bytes` (huge values mean no limit).
fn cgroup_memory_limit() -> Option<u64> {
    let v = read_trim("/sys/fs/cgroup/memory.max")
        .or_else(|| read_trim("/sys/fs/cgroup/memory/memory.limit_in_bytes"))?;
    v.parse::<u64>().ok().filter(|&b| b < (1u64 << 60))
}

/// The `key` line of a `/proc/meminfo` text (in KiB there), in bytes.
fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    meminfo
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
}

/// The soft `Max address space` of `/proc/self/limits` (what `ulimit -v` sets; `unlimited`
/// is none). Read from procfs so the library needs no libc binding.
fn address_space_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft = line["Max address space".len()..]
        .split_whitespace()
        .next()?;
    soft.parse::<u64>().ok()
}

/// The most memory this process can ever hold, and what sets it: the smallest of physical
/// memory, the cgroup limit and `RLIMIT_AS`. `None` when none of them can be read.
pub fn memory_ceiling() -> Option<(u64, &'static str)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let total = meminfo_bytes(&meminfo, "MemTotal:");
    [
        (total, "physical memory"),
        (cgroup_memory_limit(), "the cgroup memory limit"),
        (address_space_limit(), "the address-space limit (RLIMIT_AS)"),
    ]
    .into_iter()
    .filter_map(|(v, what)| v.map(|v| (v, what)))
    .min_by_key(|&(v, _)| v)
}

/// An error when `bytes` (an estimate of what `what` needs) cannot fit in
/// [`memory_ceiling`]: a typed error the CLIs report with exit 2, instead of an allocation
/// that aborts the process. `None` for `bytes` means the size overflowed `u64`.
pub fn check_fits(what: &str, bytes: Option<u64>) -> Result<()> {
    let ceiling = memory_ceiling();
    let (needed, over) = match (bytes, ceiling) {
        (None, _) => (u64::MAX, true),
        (Some(b), Some((limit, _))) => (b, b > limit),
        (Some(b), None) => (b, false),
    };
    if over {
        let (limit, source) = ceiling.unwrap_or((0, "addressable memory"));
        return Err(InferError::OutOfMemory {
            what: what.to_string(),
            needed_bytes: needed,
            limit_bytes: limit,
            limit: source,
        });
    }
    Ok(())
}

/// The model facts the plan needs.
#[derive(Clone, Debug, Serialize)]
pub struct ModelShape {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub max_sequence_length: usize,
    /// Bytes of weights in memory once loaded (f32 after packing).
    pub weight_bytes: u64,
}

impl ModelShape {
    /// Activation bytes per token in flight: hidden state, fused qkv, attention context,
    /// residual scratch (each `hidden`) and the feed-forward intermediate.
    pub fn bytes_per_token(&self) -> u64 {
        ((6 * self.hidden_size + self.intermediate_size) * 4) as u64
    }

    /// Attention scratch of one (sequence, head) task at the longest sequence: scores plus
    /// packed keys, values and context.
    pub fn attention_task_bytes(&self) -> u64 {
        let l = self.max_sequence_length as u64;
        let d = (self.hidden_size / self.num_attention_heads.max(1)) as u64;
        (l * l + 3 * l * d) * 4
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct EmbeddingPlan {
    pub threads: usize,
    pub batch_size: usize,
    pub max_tokens_per_batch: usize,
    /// Why there is no length bucketing: batches are packed (no padding), so sorting by
    /// length would save nothing and would reorder work for no gain.
    pub bucketing: &'static str,
    pub memory_budget_bytes: u64,
    /// Weights + fixed overhead + a full batch of activations + attention scratch.
    pub estimated_peak_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct KernelPlan {
    pub tier: &'static str,
    pub backend: &'static str,
    /// Every profile runs the deterministic kernels: no fast mode exists, and none is needed
    /// to meet the throughput targets. False only on the SSE tier (x86-64 without FMA), which
    /// agrees within tolerance; `KIN_INFER_SIMD=generic` gives the exact bits there.
    pub deterministic: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ResourcePlan {
    pub format: &'static str,
    pub profile: Profile,
    pub numerics_version: &'static str,
    pub host: HostInfo,
    pub model: ModelShape,
    pub embedding: EmbeddingPlan,
    pub kernel: KernelPlan,
}

impl ResourcePlan {
    /// Resolves a plan. `budget` overrides the profile's memory budget (bytes).
    pub fn resolve(
        host: HostInfo,
        model: ModelShape,
        profile: Profile,
        budget: Option<u64>,
    ) -> Result<Self> {
        let usable = host.usable_memory().unwrap_or(4 << 30);
        let budget = budget.unwrap_or(match profile {
            Profile::Proof => (usable / 2).min(8 << 30),
            Profile::Throughput => usable / 4 * 3,
            Profile::Interactive => (usable / 4).min(1 << 30),
            Profile::Ci => 512 << 20,
        });
        let threads = match profile {
            Profile::Proof | Profile::Throughput => host.usable_cpus(),
            Profile::Interactive => host.usable_cpus().min(2),
            Profile::Ci => 1,
        };
        let fixed =
            FIXED_OVERHEAD + model.weight_bytes + threads as u64 * model.attention_task_bytes();
        let per_token = model.bytes_per_token().max(1);
        let max_len = model.max_sequence_length.max(1);
        let tokens = budget.saturating_sub(fixed) / per_token;
        if tokens < max_len as u64 {
            return Err(InferError::Input(format!(
                "memory budget of {} MiB is too small for this model: weights and scratch need {} MiB, \
                 and one sequence of {max_len} tokens {} MiB more",
                budget >> 20,
                fixed >> 20,
                (max_len as u64 * per_token) >> 20
            )));
        }
        let batch_size = profile
            .default_batch()
            .min((tokens / max_len as u64) as usize)
            .max(1);
        let max_tokens_per_batch = batch_size * max_len;
        let estimated_peak_bytes = fixed + max_tokens_per_batch as u64 * per_token;
        let tier = host.simd_tier;
        Ok(ResourcePlan {
            format: PLAN_FORMAT,
            profile,
            numerics_version: crate::NUMERICS_VERSION,
            embedding: EmbeddingPlan {
                threads,
                batch_size,
                max_tokens_per_batch,
                bucketing: "none (packed batches carry no padding)",
                memory_budget_bytes: budget,
                estimated_peak_bytes,
            },
            kernel: {
                let backend = planned_backend();
                KernelPlan {
                    tier,
                    backend,
                    // A GPU is held to the goldens' tolerance, not to the CPU's bits.
                    deterministic: backend == "cpu" && tier_is_exact(tier),
                }
            },
            host,
            model,
        })
    }
}

/// The backend `create_compute` would choose here, without creating it: the one asked for, or
/// under `auto` the first hardware GPU's (CUDA before wgpu); else `cpu`.
fn planned_backend() -> &'static str {
    use crate::backend::BackendChoice;
    match BackendChoice::from_env() {
        Ok(BackendChoice::Wgpu) => "wgpu",
        Ok(BackendChoice::Cuda) => "cuda",
        Ok(BackendChoice::Auto)
            if crate::backend::discover_devices()
                .iter()
                .any(|d| !d.software) =>
        {
            "wgpu"
        }
        _ => "cpu",
    }
}

/// Whether the tier named `tier` gives the exact bits ([`Tier::exact`]).
fn tier_is_exact(tier: &str) -> bool {
    Tier::parse(tier).is_none_or(|t| t.exact())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostInfo {
        HostInfo {
            logical_cores: 8,
            physical_cores: 4,
            simd_tier: "generic",
            simd_tiers_available: vec!["generic"],
            total_memory_bytes: Some(16 << 30),
            available_memory_bytes: Some(8 << 30),
            cgroup_cpu_limit: Some(2.5),
            cgroup_memory_limit_bytes: None,
            address_space_limit_bytes: None,
            accelerators: vec![],
        }
    }

    fn minilm() -> ModelShape {
        ModelShape {
            hidden_size: 384,
            intermediate_size: 1536,
            num_hidden_layers: 6,
            num_attention_heads: 12,
            max_sequence_length: 256,
            weight_bytes: 90 << 20,
        }
    }

    #[test]
    fn profiles_choose_threads_within_the_cgroup_quota() {
        let p = |prof| {
            ResourcePlan::resolve(host(), minilm(), prof, None)
                .unwrap()
                .embedding
        };
        assert_eq!(p(Profile::Proof).threads, 3);
        assert_eq!(p(Profile::Interactive).threads, 2);
        assert_eq!(p(Profile::Ci).threads, 1);
        assert_eq!(p(Profile::Proof).batch_size, 32);
    }

    #[test]
    fn batch_shrinks_to_fit_a_small_budget_and_too_small_is_an_error() {
        let big = ResourcePlan::resolve(host(), minilm(), Profile::Proof, None).unwrap();
        let small =
            ResourcePlan::resolve(host(), minilm(), Profile::Proof, Some(200 << 20)).unwrap();
        assert!(small.embedding.batch_size < big.embedding.batch_size);
        assert!(small.embedding.estimated_peak_bytes <= 200 << 20);
        assert!(ResourcePlan::resolve(host(), minilm(), Profile::Proof, Some(100 << 20)).is_err());
    }
}
