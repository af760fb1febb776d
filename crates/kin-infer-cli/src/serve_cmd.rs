//! `kin-infer serve`: the OpenAI-compatible server (crate `kin-infer-server`). Prints one JSON
//! line on stdout once the models are loaded and the port answers (`{"event":"listening",
//! "url":...}`; `--port 0` picks a free port), logs one line per request on stderr, and exits 0
//! after SIGTERM or Ctrl-C once in-flight work has finished or been cancelled.

use crate::model_args::parse_size;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use kin_infer_server::{ModelSpec, ServeArgs, ServeConfig};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Args)]
pub struct ServeCmdArgs {
    /// A model to serve, `[NAME=]DIR|FILE.gguf|org/name` (repeatable). Its id is NAME, else
    /// the directory's or file's name. Encoders serve /v1/embeddings, decoders the completions.
    #[arg(long = "model", required = true, value_name = "[NAME=]PATH")]
    models: Vec<String>,
    /// Address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface, so set --api-key).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// 0 picks a free port (printed on stdout).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Require `Authorization: Bearer KEY` on /v1/* (or KIN_INFER_API_KEY).
    #[arg(long, env = "KIN_INFER_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Tokens per embedding forward pass, concurrent requests batched together.
    #[arg(long, default_value_t = 8192)]
    max_batch_tokens: usize,
    /// Generations running at once, each with its own KV cache.
    #[arg(long, default_value_t = 8)]
    max_concurrent: usize,
    /// Prompt tokens fed per generation step, new requests together: a long prompt delays
    /// running streams by one chunk at a time.
    #[arg(long, default_value_t = 256)]
    prefill_chunk: usize,
    /// Requests that may wait per queue (embeddings, generations) before a 429.
    #[arg(long, default_value_t = 256)]
    queue: usize,
    /// Tokens one request may hold, all its inputs together (default: no limit beyond the
    /// model's own).
    #[arg(long)]
    max_input_tokens: Option<usize>,
    /// Largest request body, e.g. 8M (a larger one is a 413).
    #[arg(long, default_value = "8M")]
    max_body: String,
    /// Allow browsers from ORIGIN (`*`: any) to call the API.
    #[arg(long, value_name = "ORIGIN")]
    cors: Option<String>,
    /// Worker threads per model (default: KIN_INFER_THREADS, else all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Activation numerics: q8 (8-bit activations for ggml-quantized weights, on the CPU),
    /// f32, or auto (the faster on this build: f32 for now); default KIN_INFER_ACTIVATIONS,
    /// else auto (docs/numerics.md).
    #[arg(long, value_name = "MODE", value_parser = crate::model_args::parse_activations)]
    activations: Option<kin_infer::Activations>,
    /// Request log lines on stderr: text, or one JSON object per line.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Seconds in-flight work may run after SIGTERM/Ctrl-C before it is cancelled.
    #[arg(long, default_value_t = 10.0)]
    shutdown_timeout: f64,
    /// Memory all running generations may reserve together for their KV caches, e.g. 4G
    /// (default: half of what is left once the models are loaded; see docs/server.md).
    #[arg(long, value_name = "SIZE")]
    memory_budget: Option<String>,
    /// Seconds a request's headers, then its body, may take to arrive (408 after), and the
    /// longest a generation waits for room in the memory budget (503 after).
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    request_timeout: f64,
}

pub fn run(a: ServeCmdArgs) -> Result<u8> {
    if a.max_batch_tokens == 0 || a.max_concurrent == 0 || a.queue == 0 || a.prefill_chunk == 0 {
        bail!(
            "--max-batch-tokens, --max-concurrent, --prefill-chunk and --queue must be at least 1"
        );
    }
    if a.max_input_tokens == Some(0) {
        bail!("--max-input-tokens must be at least 1");
    }
    if !(a.shutdown_timeout.is_finite() && a.shutdown_timeout >= 0.0) {
        bail!("--shutdown-timeout must be a non-negative number of seconds");
    }
    if !(a.request_timeout.is_finite() && a.request_timeout > 0.0 && a.request_timeout <= 86400.0) {
        bail!("--request-timeout must be a number of seconds above 0, at most 86400");
    }
    let max_body = usize::try_from(parse_size(&a.max_body)?).context("--max-body")?;
    let memory_budget = a
        .memory_budget
        .as_deref()
        .map(parse_size)
        .transpose()
        .context("--memory-budget")?;
    let models = a
        .models
        .iter()
        .map(|m| ModelSpec::parse(m).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()?;
    let addr: SocketAddr = (a.host.as_str(), a.port)
        .to_socket_addrs()
        .with_context(|| format!("--host {}: not an address", a.host))?
        .next()
        .with_context(|| format!("--host {}: no address", a.host))?;
    let ids: Vec<String> = models.iter().map(|m| m.id.clone()).collect();
    let args = ServeArgs {
        models,
        addr,
        threads: a.threads,
        config: ServeConfig {
            api_key: a.api_key.filter(|k| !k.is_empty()),
            max_batch_tokens: a.max_batch_tokens,
            max_concurrent: a.max_concurrent,
            prefill_chunk: a.prefill_chunk,
            queue: a.queue,
            max_input_tokens: a.max_input_tokens,
            max_body,
            cors: a.cors,
            log_json: matches!(a.log_format, LogFormat::Json),
            shutdown_grace: Duration::from_secs_f64(a.shutdown_timeout),
            memory_budget,
            request_timeout: Duration::from_secs_f64(a.request_timeout),
            activations: a.activations,
        },
    };
    kin_infer_server::serve(args, |ready| {
        let url = format!("http://{}", ready.addr);
        eprintln!(
            "kin-infer serve: listening on {url} (models: {}); memory budget for generations \
             {} ({})",
            ids.join(", "),
            kin_infer::resource::human_bytes(ready.memory_budget),
            ready.memory_budget_source
        );
        let line = serde_json::json!({"event": "listening", "url": url, "models": ids,
            "memory_budget_bytes": ready.memory_budget});
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    eprintln!("kin-infer serve: stopped");
    Ok(0)
}
