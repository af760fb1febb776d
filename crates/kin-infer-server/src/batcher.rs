//! The dynamic batcher of an embedding model: one thread per model takes the waiting requests,
//! up to `--max-batch-tokens` tokens, runs them as one forward pass and hands each request its
//! rows. The engine is batch-invariant, so a vector has the same bits whatever it was batched
//! with (the tests compare with `embed`). Below the handlers and the registry: it knows only
//! the engine and the metrics.

use crate::metrics::Metrics;
use kin_infer::Embedder;
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// One request's sequences, waiting for a batch.
pub struct Job {
    pub ids: Vec<Vec<u32>>,
    /// Token type ids (texts); `None` for token-id input.
    pub types: Option<Vec<Vec<u32>>>,
    pub dims: Option<usize>,
    pub reply: oneshot::Sender<kin_infer::Result<Vec<Vec<f32>>>>,
}

impl Job {
    fn tokens(&self) -> usize {
        self.ids.iter().map(Vec::len).sum()
    }
}

/// The sending side of a model's batcher thread (which ends when this is dropped).
pub struct Batcher {
    tx: std::sync::Mutex<mpsc::Sender<Job>>,
}

impl Batcher {
    pub fn start(
        id: &str,
        embedder: Arc<Embedder>,
        max_batch_tokens: usize,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(format!("batcher-{id}"))
            .spawn(move || batch_loop(&embedder, &rx, max_batch_tokens, &metrics))
            .expect("spawning a thread");
        Batcher {
            tx: std::sync::Mutex::new(tx),
        }
    }

    pub fn submit(&self, job: Job) -> bool {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        tx.send(job).is_ok()
    }
}

fn batch_loop(e: &Embedder, rx: &mpsc::Receiver<Job>, max_batch_tokens: usize, m: &Metrics) {
    let mut carry: Option<Job> = None;
    loop {
        let first = match carry.take() {
            Some(j) => j,
            None => match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        let mut tokens = first.tokens();
        let mut batch = vec![first];
        while tokens < max_batch_tokens {
            match rx.try_recv() {
                Ok(j) if tokens + j.tokens() <= max_batch_tokens => {
                    tokens += j.tokens();
                    batch.push(j);
                }
                Ok(j) => {
                    carry = Some(j);
                    break;
                }
                Err(_) => break,
            }
        }
        // Requests whose clients left need no work.
        batch.retain(|j| !j.reply.is_closed());
        // Texts (with type ids) and token-id input run as separate passes.
        let (texts, ids): (Vec<Job>, Vec<Job>) = batch.into_iter().partition(|j| j.types.is_some());
        for group in [texts, ids] {
            if !group.is_empty() {
                run_group(e, group, m);
            }
        }
    }
}

fn run_group(e: &Embedder, group: Vec<Job>, m: &Metrics) {
    let ids: Vec<&[u32]> = group
        .iter()
        .flat_map(|j| j.ids.iter().map(Vec::as_slice))
        .collect();
    let types: Option<Vec<&[u32]>> = group[0].types.as_ref().map(|_| {
        group
            .iter()
            .flat_map(|j| j.types.iter().flatten().map(Vec::as_slice))
            .collect()
    });
    let dims: Vec<Option<usize>> = group
        .iter()
        .flat_map(|j| std::iter::repeat_n(j.dims, j.ids.len()))
        .collect();
    let tokens: usize = ids.iter().map(|s| s.len()).sum();
    match e.embed_tokens_dims(&ids, types.as_deref(), Some(&dims)) {
        Ok(mut vecs) => {
            m.embedding_batch(ids.len(), tokens);
            for j in group.into_iter().rev() {
                let rows = vecs.split_off(vecs.len() - j.ids.len());
                let _ = j.reply.send(Ok(rows));
            }
        }
        // Each request was validated before it was queued, so this is rare; run them one by
        // one so that one request's failure is its own.
        Err(_) if group.len() > 1 => {
            for j in group {
                run_group(e, vec![j], m);
            }
        }
        // A single request: its own error, as the engine typed it.
        Err(err) => {
            if let Some(j) = group.into_iter().next() {
                let _ = j.reply.send(Err(err));
            }
        }
    }
}
