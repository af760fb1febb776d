//! `bench`: times each repeat (and, for encoders, each batch) separately and reports
//! min / median / max, with the rates taken from the median, as text or one JSON object.

use crate::input::read_all;
use crate::model_args::{load, load_generator, ModelArgs};
use crate::output::{print_report, Runtime};
use anyhow::{bail, Result};
use clap::Args;
use kin_infer::EmbedderOptions;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

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
    });
    let v = Runtime::of_embedder(&e).add_to(v);
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
            ("activations".into(), e.numerics().name().into()),
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

    let g = load_generator(dir, a.model.threads, a.model.activations)?;
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
        });
        let v = Runtime::of_generator(&g).add_to(v);
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
            ("activations".into(), g.numerics().name().into()),
        ]);
    }
    Ok(0)
}
