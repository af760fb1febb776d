//! One function per subcommand (describe, plan, check, devices). Each returns the process exit
//! code or an error (exit 2).

use crate::model_args::{load, load_generator, plan_for, ModelArgs};
use crate::output::{print_report, Runtime};
use anyhow::Result;
use clap::Args;
use kin_infer::golden::{self, GoldenFile};
use kin_infer::EmbedderOptions;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// proof (default), throughput, interactive or ci (or KIN_RESOURCE_PROFILE).
    #[arg(long)]
    profile: Option<String>,
    /// Memory budget, e.g. 512M or 2G (default: the profile's share of free memory).
    #[arg(long)]
    memory_budget: Option<String>,
    /// One JSON object (kin-infer-plan/2: host, model_shape, embedding, kernel) instead of
    /// `key : value` lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// One JSON object instead of `key : value` lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Golden file (kin-infer-golden/1).
    #[arg(long)]
    golden: PathBuf,
    /// One JSON object: cases, max_abs_diff, tolerance, mismatches and the result.
    #[arg(long)]
    json: bool,
}

pub fn plan(a: PlanArgs) -> Result<u8> {
    let e = load(&a.model, EmbedderOptions::default())?;
    let mut p = plan_for(&e, a.profile.as_deref(), a.memory_budget.as_deref())?;
    // `embed` runs with an explicit --threads / KIN_INFER_THREADS over the plan's count
    // (embed_cmd.rs), so the plan shows that count: the one `describe` shows too.
    if a.model.threads.is_some() || std::env::var_os("KIN_INFER_THREADS").is_some() {
        p.embedding.threads = e.threads();
    }
    let model = e.info().dir.display().to_string();
    if a.json {
        println!("{}", plan_json(&p, &model, &e.device())?);
        return Ok(0);
    }
    let mib = |b: u64| format!("{} MiB", b >> 20);
    let opt_mib = |b: Option<u64>| b.map_or("unknown".to_string(), mib);
    let h = &p.host;
    let em = &p.embedding;
    print_report(&[
        ("format".into(), p.format.into()),
        ("model".into(), model),
        ("profile".into(), p.profile.name().into()),
        ("numerics_version".into(), p.numerics_version.into()),
        (
            "cores".into(),
            format!("{} logical, {} physical", h.logical_cores, h.physical_cores),
        ),
        (
            "cgroup cpu limit".into(),
            h.cgroup_cpu_limit
                .map_or("none".into(), |c| format!("{c:.2} CPUs")),
        ),
        (
            "memory".into(),
            format!(
                "{} total, {} available",
                opt_mib(h.total_memory_bytes),
                opt_mib(h.available_memory_bytes)
            ),
        ),
        (
            "cgroup memory limit".into(),
            h.cgroup_memory_limit_bytes.map_or("none".into(), mib),
        ),
        (
            "accelerators".into(),
            if h.accelerators.is_empty() {
                "none".into()
            } else {
                h.accelerators.join(", ")
            },
        ),
        (
            "simd_tiers_available".into(),
            h.simd_tiers_available.join(", "),
        ),
        ("threads".into(), em.threads.to_string()),
        ("batch_size".into(), em.batch_size.to_string()),
        (
            "max_tokens_per_batch".into(),
            em.max_tokens_per_batch.to_string(),
        ),
        ("bucketing".into(), em.bucketing.into()),
        ("memory_budget".into(), mib(em.memory_budget_bytes)),
        ("estimated_peak".into(), mib(em.estimated_peak_bytes)),
        ("simd_tier".into(), p.kernel.tier.into()),
        ("backend".into(), p.kernel.backend.into()),
        ("device".into(), e.device()),
        ("deterministic".into(), p.kernel.deterministic.to_string()),
        ("embed_orphan_check".into(), orphan_check_row()),
    ]);
    Ok(0)
}

/// The plan as JSON under `describe`'s names for the quantities both show: `model` is the
/// directory (the shape moves to `model_shape`), the shape's sequence limit is `max_length`
/// (the embedder's, which is what the plan is for), the kernel's tier `simd_tier`, plus the
/// `device`.
fn plan_json(
    p: &kin_infer::resource::ResourcePlan,
    model: &str,
    device: &str,
) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(p)?;
    let o = v
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("the resource plan did not serialize to an object"))?;
    if let Some(mut shape) = o.remove("model") {
        if let Some(s) = shape.as_object_mut() {
            if let Some(m) = s.remove("max_sequence_length") {
                s.insert("max_length".into(), m);
            }
        }
        o.insert("model_shape".into(), shape);
    }
    o.insert("model".into(), json!(model));
    if let Some(k) = o.get_mut("kernel").and_then(|k| k.as_object_mut()) {
        if let Some(t) = k.remove("tier") {
            k.insert("simd_tier".into(), t);
        }
        k.insert("device".into(), json!(device));
    }
    Ok(v)
}

/// `describe` for a decoder: the spec, the weights and the kernel tier.
fn describe_decoder(a: &DescribeArgs, dir: &std::path::Path) -> Result<u8> {
    let t0 = std::time::Instant::now();
    let g = load_generator(dir, a.model.threads, a.model.activations)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let gguf = kin_infer::models::decoders::is_gguf_file(dir);
    let (store, file) = if gguf {
        let (s, f) = kin_infer::io::safetensors::WeightStore::open_gguf(dir)?;
        (s, Some(f))
    } else {
        (
            kin_infer::io::safetensors::WeightStore::open_dir(dir)?,
            None,
        )
    };
    let c = g.spec();
    let tokenizer = match &file {
        Some(f) => match f.get("tokenizer.ggml.model").and_then(|v| v.as_str()) {
            Some(m) => format!("tokenizer.ggml.* (model `{m}`)"),
            None => "none (token-id input only)".into(),
        },
        None if dir.join("tokenizer.json").is_file() => "tokenizer.json".into(),
        None => "none (token-id input only)".into(),
    };
    let v = json!({
        "model": dir.display().to_string(),
        "family": c.model_type,
        "kind": "decoder",
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "context": c.max_sequence_length,
        "eos_token_ids": c.eos_token_ids,
        "tied_embeddings": c.tied_embeddings,
        "positions": c.positions,
        "attention": c.attention,
        "ffn": c.ffn,
        "dtype": store.storage_dtype().map_or("none", |d| d.name()),
        "tensors": store.len(),
        "parameters": store.parameter_count(),
        "shards": store.shard_paths().len(),
        "tokenizer": tokenizer,
        "load_ms": (load_ms * 100.0).round() / 100.0,
    });
    let mut v = Runtime::of_generator(&g).add_to(v);
    if let Some(f) = &file {
        // Each stored type's tensor count and the file's bits per weight (scales included).
        let types: serde_json::Map<String, serde_json::Value> = f
            .type_counts()
            .into_iter()
            .map(|(t, n)| (t.name().to_string(), json!(n)))
            .collect();
        v["dtype"] = json!(if types.len() == 1 {
            types.keys().next().cloned().unwrap_or_default()
        } else {
            "mixed".into()
        });
        v["tensor_types"] = serde_json::Value::Object(types);
        v["bits_per_weight"] = json!(f.bits_per_weight().map(|b| (b * 1000.0).round() / 1000.0));
        v["gguf_version"] = json!(f.version);
    }
    print_value(&v, a.json);
    Ok(0)
}

/// One JSON object, or `key : value` lines.
fn print_value(v: &serde_json::Value, json: bool) {
    if json {
        println!("{v}");
    } else {
        let rows: Vec<(String, String)> = v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), String::from),
                )
            })
            .collect();
        print_report(&rows);
    }
}

pub fn describe(a: DescribeArgs) -> Result<u8> {
    let dir = a.model.resolve()?;
    if kin_infer::models::decoders::is_decoder_dir(&dir) {
        return describe_decoder(&a, &dir);
    }
    let e = load(&a.model, EmbedderOptions::default())?;
    let c = e.config();
    let info = e.info();
    let dtype = info.storage_dtype.map_or("none", |d| d.name());
    let dtypes = info
        .dtype_counts
        .iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let tokenizer = e
        .tokenizer()
        .map_or("none (token-id input only)".to_string(), |t| {
            format!("{} (vocab {})", t.path().display(), t.vocab_size())
        });
    let v = json!({
        "model": info.dir.display().to_string(),
        "family": c.architecture.name(),
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "max_sequence_length": c.max_sequence_length,
        "max_length": e.max_length(),
        "positions": c.positions,
        "attention": c.attention,
        "ffn": c.ffn,
        "dtype": dtype,
        "tensor_dtypes": dtypes,
        "tensors": info.tensors,
        "parameters": info.parameters,
        "shards": info.shards,
        "weight_prefix": info.weight_prefix,
        "pooling": e.pooling().name(),
        "dense": if e.dense().is_empty() { "none".to_string() } else { e.dense().iter().map(|d| d.describe()).collect::<Vec<_>>().join("; ") },
        "normalize": e.normalize(),
        "embedding_dim": e.dim(),
        "tokenizer": tokenizer,
        "load_ms": (info.load_ms * 100.0).round() / 100.0,
    });
    let v = Runtime::of_embedder(&e).add_to(v);
    print_value(&v, a.json);
    Ok(0)
}

pub fn check(a: CheckArgs) -> Result<u8> {
    let g = GoldenFile::load(&a.golden)?;
    let dir = a.model.resolve()?;
    let r = if kin_infer::models::decoders::is_decoder_dir(&dir) {
        let gen = load_generator(&dir, a.model.threads, a.model.activations)?;
        gen.install(|| golden::check_decoder(gen.decoder(), gen.backend(), &g))?
    } else {
        let e = load(&a.model, EmbedderOptions::default())?;
        golden::check(&e, &g)?
    };
    let ok = r.passed();
    if a.json {
        let mism: Vec<_> = r
            .mismatches
            .iter()
            .map(|m| json!({"case": m.case, "position": m.position, "expected": m.expected, "actual": m.actual}))
            .collect();
        println!(
            "{}",
            json!({"cases": r.cases, "compared": r.compared, "max_abs_diff": r.max_diff, "tolerance": r.tol,
                   "mismatches": mism, "result": if ok { "PARITY OK" } else { "PARITY FAILED" }})
        );
    } else {
        for m in &r.mismatches {
            println!(
                "case {}: {}: expected {} actual {} (|diff| {:.3e})",
                m.case,
                m.position,
                m.expected,
                m.actual,
                (m.actual - m.expected).abs()
            );
        }
        println!("cases      : {}", r.cases);
        println!("max |diff| : {:.8}", r.max_diff);
        println!("tolerance  : {:.6}", r.tol);
        println!("{}", if ok { "PARITY OK" } else { "PARITY FAILED" });
    }
    Ok(if ok { 0 } else { 1 })
}

#[derive(clap::Args)]
pub struct DevicesArgs {
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `devices`: the GPUs this build can see, the CPU, and what `auto` would choose.
pub fn devices(a: DevicesArgs) -> Result<u8> {
    let gpus = kin_infer::backend::discover_devices();
    let cpu: Box<dyn kin_infer::backend::GpuCompute> =
        Box::new(kin_infer::backend::CpuCompute::new()?);
    let chosen = kin_infer::backend::create_compute(None)?;
    if a.json {
        let list: Vec<_> = gpus
            .iter()
            .map(|d| {
                json!({"name": d.name, "backend": d.backend, "kind": d.kind, "driver": d.driver,
                       "software": d.software, "max_buffer_bytes": d.max_buffer_bytes})
            })
            .collect();
        let v = json!({
            "gpus": list,
            "cpu": {"simd_tier": cpu.tier().name()},
            "features": {"wgpu": cfg!(feature = "wgpu"), "cuda": cfg!(feature = "cuda")},
            "selected": {"backend": chosen.name(), "device": chosen.device()},
        });
        println!("{v}");
        return Ok(0);
    }
    let mut rows = vec![(
        "cpu".to_string(),
        format!("{} (always present)", cpu.device()),
    )];
    for d in &gpus {
        rows.push((
            d.backend.clone(),
            format!(
                "{} ({}; driver {}; largest buffer {})",
                d.name,
                d.kind,
                d.driver,
                kin_infer::resource::human_bytes(d.max_buffer_bytes)
            ),
        ));
    }
    if gpus.is_empty() {
        rows.push((
            "gpu".into(),
            if cfg!(any(feature = "wgpu", feature = "cuda")) {
                "none found".into()
            } else {
                "none (this build has no GPU backend: build with --features wgpu or cuda)".into()
            },
        ));
    }
    rows.push((
        "selected".into(),
        format!("{} on {}", chosen.name(), chosen.device()),
    ));
    print_report(&rows);
    Ok(0)
}

/// What `embed` does when its parent dies, for `plan`: a detached process (nohup, setsid)
/// keeps running (kin_infer::watchdog::detached).
fn orphan_check_row() -> String {
    match kin_infer::watchdog::detached() {
        Some(why) => format!("off ({why}); --watch-pid PID still applies"),
        None => "on (exit 3 when the parent dies; off under nohup or setsid)".into(),
    }
}
