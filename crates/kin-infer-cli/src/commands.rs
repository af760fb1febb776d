//! One function per subcommand. Each returns the process exit code or an error (exit 2).

use crate::input::read_all;
use crate::model_args::{load, load_generator, plan_for, ModelArgs};
use crate::output::print_report;
use anyhow::{bail, Result};
use clap::Args;
use kin_infer::golden::{self, GoldenFile};
use kin_infer::{EmbedderOptions, NUMERICS_VERSION};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

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
    /// One JSON object (kin-infer-plan/1: host, model_shape, embedding, kernel) instead of
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

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Texts, one per line (encoders; decoders are fed random token ids).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Encoders: texts per forward pass.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Timed passes (encoders: over the whole input; decoders: prefill + decode runs).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Decoders: prompt length of the prefill (random in-vocabulary ids, fixed seed).
    /// Default 128, lowered to fit a smaller context.
    #[arg(long)]
    prompt_tokens: Option<usize>,
    /// Decoders: greedy tokens decoded one at a time after the prompt.
    /// Default 64, lowered to fit a smaller context.
    #[arg(long)]
    decode_tokens: Option<usize>,
    /// One JSON object: min/median/max per repeat and per batch (decoders: prefill_ms,
    /// decode_ms), and the rates from the median.
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
    let g = load_generator(dir, a.model.threads)?;
    let (threads, be) = (g.threads(), g.backend());
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
    let mut v = json!({
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
        "backend": be.name(),
        "device": be.device(),
        "simd_tier": be.tier().name(),
        "threads": threads,
        "numerics_version": NUMERICS_VERSION,
        "load_ms": (load_ms * 100.0).round() / 100.0,
    });
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
        "backend": e.backend_name(),
        "device": e.device(),
        "simd_tier": e.tier().name(),
        "threads": e.threads(),
        "numerics_version": NUMERICS_VERSION,
        "load_ms": (info.load_ms * 100.0).round() / 100.0,
    });
    print_value(&v, a.json);
    Ok(0)
}

pub fn check(a: CheckArgs) -> Result<u8> {
    let g = GoldenFile::load(&a.golden)?;
    let dir = a.model.resolve()?;
    let r = if kin_infer::models::decoders::is_decoder_dir(&dir) {
        let gen = load_generator(&dir, a.model.threads)?;
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

/// (min, median, max); the median of an even count is the mean of the middle two.
fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (s[0], median, s[n - 1])
}

/// `{"min": .., "median": .., "max": ..}` of `v`, scaled by `k` (seconds to ms: 1e3).
fn stats_json(v: &[f64], k: f64) -> serde_json::Value {
    let (lo, med, hi) = stats(v);
    json!({"min": lo * k, "median": med * k, "max": hi * k})
}

pub fn bench(a: BenchArgs) -> Result<u8> {
    if a.batch_size == 0 || a.repeat == 0 {
        bail!("--batch-size and --repeat must be at least 1");
    }
    if let Ok(dir) = a.model.resolve() {
        if kin_infer::models::decoders::is_decoder_dir(&dir) {
            return bench_decoder(&a, &dir);
        }
    }
    if a.prompt_tokens.is_some() || a.decode_tokens.is_some() {
        bail!("--prompt-tokens and --decode-tokens apply to decoder models only");
    }
    let Some(input) = &a.input else {
        bail!("--input FILE (texts, one per line) is required to benchmark an encoder model");
    };
    let e = load(&a.model, EmbedderOptions::default())?;
    let load_ms = e.info().load_ms;
    let src = input.display().to_string();
    let items = read_all(input)?;
    if items.is_empty() {
        bail!("{src}: no texts to benchmark");
    }
    let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
    let tokens: usize = e.tokenize(&texts)?.iter().map(|t| t.ids.len()).sum();
    // Every repeat and every batch in it timed on its own: the median is of real samples.
    let mut secs = Vec::with_capacity(a.repeat);
    let mut batch_secs = Vec::new();
    for r in 0..a.repeat {
        let t0 = Instant::now();
        for batch in texts.chunks(a.batch_size) {
            let tb = Instant::now();
            e.embed_texts(batch)?;
            batch_secs.push(tb.elapsed().as_secs_f64());
        }
        let s = t0.elapsed().as_secs_f64();
        eprintln!("repeat {}/{}: {:.3} s", r + 1, a.repeat, s);
        secs.push(s);
    }
    let n = texts.len() as f64;
    let (smin, smed, smax) = stats(&secs);
    let v = json!({
        "model": e.info().dir.display().to_string(),
        "texts": texts.len(),
        "tokens": tokens,
        "batch_size": a.batch_size,
        "batches": texts.len().div_ceil(a.batch_size),
        "repeat": a.repeat,
        "seconds": stats_json(&secs, 1.0),
        "batch_ms": stats_json(&batch_secs, 1e3),
        "texts_per_s": n / smed,
        "tokens_per_s": tokens as f64 / smed,
        "texts_per_s_min": n / smax, "texts_per_s_median": n / smed, "texts_per_s_max": n / smin,
        "tokens_per_s_min": tokens as f64 / smax, "tokens_per_s_median": tokens as f64 / smed, "tokens_per_s_max": tokens as f64 / smin,
        "load_ms": load_ms,
        "backend": e.backend_name(),
        "device": e.device(),
        "simd_tier": e.tier().name(),
        "threads": e.threads(),
        "numerics_version": NUMERICS_VERSION,
    });
    if a.json {
        println!("{v}");
    } else {
        print_report(&[
            ("texts".into(), texts.len().to_string()),
            ("tokens".into(), tokens.to_string()),
            ("repeat".into(), a.repeat.to_string()),
            (
                "seconds per pass (min/median/max)".into(),
                format!("{smin:.4} / {smed:.4} / {smax:.4}"),
            ),
            (
                format!("ms per batch of {} (min/median/max)", a.batch_size),
                {
                    let (lo, med, hi) = stats(&batch_secs);
                    format!("{:.3} / {:.3} / {:.3}", lo * 1e3, med * 1e3, hi * 1e3)
                },
            ),
            ("texts/s (median)".into(), format!("{:.1}", n / smed)),
            (
                "texts/s (min/median/max)".into(),
                format!("{:.1} / {:.1} / {:.1}", n / smax, n / smed, n / smin),
            ),
            (
                "tokens/s (min/median/max)".into(),
                format!(
                    "{:.0} / {:.0} / {:.0}",
                    tokens as f64 / smax,
                    tokens as f64 / smed,
                    tokens as f64 / smin
                ),
            ),
            ("load".into(), format!("{load_ms:.1} ms")),
            ("device".into(), e.device()),
            ("simd_tier".into(), e.tier().name().into()),
            ("threads".into(), e.threads().to_string()),
        ]);
    }
    Ok(0)
}

/// `bench` for a decoder: one prompt of `--prompt-tokens` random in-vocabulary ids (fixed
/// seed) prefilled in one pass, then `--decode-tokens` greedy tokens one at a time, `--repeat`
/// times; prefill and decode tokens/s (min / median / max over the runs).
fn bench_decoder(a: &BenchArgs, dir: &std::path::Path) -> Result<u8> {
    use kin_infer::generate::{argmax, Rng};
    use kin_infer::models::decoders::LogitsRows;

    let g = load_generator(dir, a.model.threads)?;
    let (threads, load_ms, spec) = (g.threads(), g.load_ms(), g.spec());
    let ctx = spec.max_sequence_length;

    // Defaults shrink to fit a small context; explicit lengths must fit as given.
    let n_prompt = a.prompt_tokens.unwrap_or_else(|| {
        let want_decode = a.decode_tokens.unwrap_or(64);
        128.min(ctx.saturating_sub(want_decode).max(ctx / 2))
    });
    let n_decode = a
        .decode_tokens
        .unwrap_or_else(|| 64.min(ctx.saturating_sub(n_prompt)));
    if a.prompt_tokens == Some(0) || a.decode_tokens == Some(0) {
        bail!("--prompt-tokens and --decode-tokens must be at least 1");
    }
    if n_prompt >= ctx {
        bail!(
            "--prompt-tokens {n_prompt} leaves no room to decode in the model's context of \
             {ctx} tokens"
        );
    }
    if n_prompt + n_decode > ctx {
        bail!(
            "--prompt-tokens {n_prompt} plus --decode-tokens {n_decode} exceed the model's \
             context of {ctx} tokens"
        );
    }
    let mut rng = Rng::new(0x6b69_6e5f_6265_6e63);
    let vocab = spec.vocab_size as u64;
    let prompt: Vec<u32> = (0..n_prompt)
        .map(|_| (rng.next_u64() % vocab) as u32)
        .collect();

    let mut prefill = Vec::with_capacity(a.repeat);
    let mut decode = Vec::with_capacity(a.repeat);
    // One session for every repeat, run on the generator's pool (its forwards run inline).
    g.install(|| -> Result<()> {
        let mut session = g.session(n_prompt + n_decode)?;
        for r in 0..a.repeat {
            session.clear();
            let t = Instant::now();
            let mut next = argmax(session.forward(&prompt, LogitsRows::Last)?);
            let tp = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for _ in 0..n_decode {
                next = argmax(session.forward(&[next], LogitsRows::Last)?);
            }
            let td = t.elapsed().as_secs_f64();
            eprintln!(
                "repeat {}/{}: prefill {:.3} ms, decode {:.3} ms",
                r + 1,
                a.repeat,
                tp * 1e3,
                td * 1e3
            );
            prefill.push(tp);
            decode.push(td);
        }
        Ok(())
    })?;
    // Rates from the times: the fastest run is the highest rate, the median time the median.
    let (tpmin, tpmed, tpmax) = stats(&prefill);
    let (tdmin, tdmed, tdmax) = stats(&decode);
    let (pn, dn) = (n_prompt as f64, n_decode as f64);
    let (pmin, pmed, pmax) = (pn / tpmax, pn / tpmed, pn / tpmin);
    let (dmin, dmed, dmax) = (dn / tdmax, dn / tdmed, dn / tdmin);
    let tier = g.backend().tier().name();
    if a.json {
        let v = json!({
            "model": dir.display().to_string(),
            "model_type": spec.model_type,
            "prompt_tokens": n_prompt,
            "decode_tokens": n_decode,
            "repeat": a.repeat,
            "prefill_ms": stats_json(&prefill, 1e3),
            "decode_ms": stats_json(&decode, 1e3),
            "prefill_tokens_per_s": pmed,
            "decode_tokens_per_s": dmed,
            "prefill_tokens_per_s_min": pmin, "prefill_tokens_per_s_median": pmed, "prefill_tokens_per_s_max": pmax,
            "decode_tokens_per_s_min": dmin, "decode_tokens_per_s_median": dmed, "decode_tokens_per_s_max": dmax,
            "load_ms": load_ms,
            "backend": g.backend().name(),
            "device": g.backend().device(),
            "simd_tier": tier,
            "threads": threads,
            "numerics_version": NUMERICS_VERSION,
        });
        println!("{v}");
    } else {
        print_report(&[
            ("model type".into(), spec.model_type.clone()),
            ("prompt tokens".into(), n_prompt.to_string()),
            ("decode tokens".into(), n_decode.to_string()),
            ("repeat".into(), a.repeat.to_string()),
            (
                "prefill ms (min/median/max)".into(),
                format!(
                    "{:.3} / {:.3} / {:.3}",
                    tpmin * 1e3,
                    tpmed * 1e3,
                    tpmax * 1e3
                ),
            ),
            (
                "decode ms (min/median/max)".into(),
                format!(
                    "{:.3} / {:.3} / {:.3}",
                    tdmin * 1e3,
                    tdmed * 1e3,
                    tdmax * 1e3
                ),
            ),
            (
                "prefill tokens/s (min/median/max)".into(),
                format!("{pmin:.1} / {pmed:.1} / {pmax:.1}"),
            ),
            (
                "decode tokens/s (min/median/max)".into(),
                format!("{dmin:.1} / {dmed:.1} / {dmax:.1}"),
            ),
            ("load".into(), format!("{load_ms:.1} ms")),
            ("device".into(), g.backend().device()),
            ("simd_tier".into(), tier.into()),
            ("threads".into(), threads.to_string()),
        ]);
    }
    Ok(0)
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
