//! `kin-infer serve`: an OpenAI-compatible HTTP server over the engine's session API (one
//! loaded model shared by reference, a state per request). Embeddings are batched across
//! requests and keep the bits `kin-infer embed` gives; generations run concurrently, each with
//! its own KV cache. See docs/server.md.
//!
//! Layout: [`api`] holds the wire types (also the OpenAPI schema), [`embeddings`] and
//! [`completions`] the model routes, [`routes`] the rest and the middleware, [`limits`] the
//! body limits and timeouts, [`conn`] the accept loop, [`memory`] the memory budget,
//! [`registry`] the loaded models, [`state`] what handlers share, [`metrics`] the Prometheus
//! counters.

pub mod api;
pub mod batcher;
pub mod completions;
pub mod conn;
pub mod embeddings;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod registry;
pub mod routes;
pub mod scheduler;
pub mod state;

pub use registry::ModelSpec;
pub use routes::router;
pub use state::{AppState, ServeConfig};

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

/// Everything `serve` needs beyond [`ServeConfig`].
pub struct ServeArgs {
    pub models: Vec<ModelSpec>,
    pub addr: SocketAddr,
    pub threads: Option<usize>,
    pub config: ServeConfig,
}

/// What `serve` tells once the port answers.
#[derive(Clone, Debug)]
pub struct Ready {
    pub addr: SocketAddr,
    /// The memory budget in bytes, and where it came from (the flag, or how it was derived).
    pub memory_budget: u64,
    pub memory_budget_source: String,
}

/// Loads the models into `state` (then `/health` turns 200) and sets the memory budget:
/// `--memory-budget`, else derived from what is left once they are loaded. Returns where the
/// budget came from.
pub fn load_models(
    state: &AppState,
    models: &[ModelSpec],
    threads: Option<usize>,
) -> kin_infer::Result<String> {
    let limits = registry::BatchLimits {
        max_batch_tokens: state.cfg.max_batch_tokens,
        prefill_chunk: state.cfg.prefill_chunk,
    };
    let opts = registry::LoadOptions {
        threads,
        activations: state.cfg.activations,
    };
    let loaded = registry::load_all(models, opts, limits, &state.metrics)?;
    let source = match state.cfg.memory_budget {
        Some(_) => "--memory-budget".to_string(),
        None => {
            let (bytes, how) = memory::default_budget();
            state.budget.set_total(bytes);
            how
        }
    };
    let _ = state.models.set(loaded);
    Ok(source)
}

/// Binds, loads the models (the port answers `/health` with 503 meanwhile), serves until
/// SIGTERM or Ctrl-C, then drains: new requests get 503, in-flight ones get
/// `shutdown_grace` to finish before running generations are cancelled. Returns once every
/// connection is closed. `on_ready` is called with the bound address (port 0 picks one) and
/// the memory budget.
pub fn serve(args: ServeArgs, on_ready: impl FnOnce(Ready)) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ServeError(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| ServeError(format!("cannot listen on {}: {e}", args.addr)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| ServeError(e.to_string()))?;
        let state = AppState::new(args.config);
        let loader = {
            let state = state.clone();
            let (models, threads) = (args.models, args.threads);
            tokio::task::spawn_blocking(move || load_models(&state, &models, threads))
        };
        let app = router(state.clone());
        let shutdown = {
            let state = state.clone();
            async move {
                shutdown_signal().await;
                eprintln!("kin-infer serve: shutting down (finishing in-flight requests)");
                state.draining.store(true, Ordering::Relaxed);
                let grace = state.cfg.shutdown_grace;
                let cancel = state.cancel_all.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    cancel.store(true, Ordering::Relaxed);
                    // Cancelled generations end their streams with an error event at their
                    // next token; a connection still open after that is cut, never completed.
                    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                    eprintln!(
                        "kin-infer serve: connections still open after the grace period; exiting"
                    );
                    std::process::exit(0);
                });
            }
        };
        let server = conn::serve(listener, app, state.cfg.request_timeout, shutdown);
        let server = tokio::spawn(server);
        let memory_budget_source = match loader.await {
            Ok(Ok(source)) => source,
            Ok(Err(e)) => return Err(ServeError(format!("loading the models: {e}"))),
            Err(e) => return Err(ServeError(format!("loading the models: {e}"))),
        };
        on_ready(Ready {
            addr,
            memory_budget: state.budget.total(),
            memory_budget_source,
        });
        server
            .await
            .map_err(|e| ServeError(format!("serving: {e}")))?;
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// Why `serve` could not start or stopped abnormally (binding, loading, the runtime).
#[derive(Debug)]
pub struct ServeError(pub String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServeError {}
