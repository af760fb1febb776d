//! What every handler shares: the configuration, the models (absent while loading), the
//! metrics, the generation slots, the memory budget and the shutdown signal.

use crate::error::{ApiError, ApiResult};
use crate::memory::MemoryBudget;
use crate::metrics::Metrics;
use crate::registry::Model;
use axum::http::StatusCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The server's settings (the `serve` flags).
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub api_key: Option<String>,
    /// Tokens per embedding forward pass, all requests together.
    pub max_batch_tokens: usize,
    /// Generations running at once (each with its own KV cache).
    pub max_concurrent: usize,
    /// Prompt tokens fed per scheduler step, all new requests together.
    pub prefill_chunk: usize,
    /// Requests waiting per queue (embeddings; generations) before a 429.
    pub queue: usize,
    /// Tokens one request may hold (all its inputs together); `None`: no limit beyond the
    /// model's.
    pub max_input_tokens: Option<usize>,
    pub max_body: usize,
    pub cors: Option<String>,
    pub log_json: bool,
    /// How long in-flight work may run after a shutdown signal before it is cancelled.
    pub shutdown_grace: Duration,
    /// Bytes all running generations may reserve together (KV caches and per-token
    /// bookkeeping, every model); `None`: derived once the models are loaded
    /// ([`crate::memory::default_budget`]).
    pub memory_budget: Option<u64>,
    /// How long a request's headers, and then its body, may take to arrive (408 after), and
    /// the longest a generation waits for room in the memory budget (503 after).
    pub request_timeout: Duration,
    /// Every model's activation numerics (`--activations`; `None`: KIN_INFER_ACTIVATIONS,
    /// else auto).
    pub activations: Option<kin_infer::Activations>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            api_key: None,
            max_batch_tokens: 8192,
            max_concurrent: 8,
            prefill_chunk: 256,
            queue: 256,
            max_input_tokens: None,
            max_body: 8 << 20,
            cors: None,
            log_json: false,
            shutdown_grace: Duration::from_secs(10),
            memory_budget: None,
            activations: None,
            request_timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub cfg: Arc<ServeConfig>,
    pub models: Arc<OnceLock<Vec<Arc<Model>>>>,
    pub metrics: Arc<Metrics>,
    pub gen_slots: Arc<Semaphore>,
    /// Set when a shutdown signal arrived: new work is refused.
    pub draining: Arc<AtomicBool>,
    /// Set when the grace period is over: running generations stop.
    pub cancel_all: Arc<AtomicBool>,
    pub started: std::time::Instant,
    /// What running generations have reserved, against `--memory-budget`.
    pub budget: Arc<MemoryBudget>,
}

impl AppState {
    pub fn new(cfg: ServeConfig) -> Self {
        let cfg_budget = cfg.memory_budget.unwrap_or(u64::MAX);
        AppState {
            gen_slots: Arc::new(Semaphore::new(cfg.max_concurrent.max(1))),
            cfg: Arc::new(cfg),
            models: Arc::new(OnceLock::new()),
            metrics: Arc::new(Metrics::default()),
            draining: Arc::new(AtomicBool::new(false)),
            cancel_all: Arc::new(AtomicBool::new(false)),
            started: std::time::Instant::now(),
            // Unbounded until the models are loaded; no generation can start before.
            budget: Arc::new(MemoryBudget::new(cfg_budget)),
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn loaded(&self) -> ApiResult<&[Arc<Model>]> {
        match self.models.get() {
            Some(m) => Ok(m),
            None => Err(ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "loading",
                    "the models are still loading",
                )
            }),
        }
    }

    /// The model `id` (404 when none is loaded under that id).
    pub fn model(&self, id: &str, kind: &str) -> ApiResult<Arc<Model>> {
        if self.is_shutting_down() {
            return Err(ApiError::shutting_down());
        }
        self.loaded()?
            .iter()
            .find(|m| m.id == id)
            .cloned()
            .ok_or_else(|| ApiError::model_not_found(id, kind))
    }
}

/// A place in a bounded queue, given back when dropped.
pub struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    /// A slot if fewer than `limit` are taken.
    pub fn take(counter: &'a AtomicUsize, limit: usize) -> Option<Self> {
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| QueueSlot(counter))
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
