//! Continuous batching of generations. Each decoder model has one scheduler thread holding
//! the running generations ([`Stepper`]s, each with its own KV cache): a new request's prompt
//! is fed in chunks between steps (`--prefill-chunk` tokens per step), then every step feeds all running generations' tokens through
//! one batched forward pass ([`Generator::decode_step`]: the weights are read once per step
//! for all of them, which is what makes concurrent decoding cheap when decode is bound by
//! memory), and each samples its next token from its own row. A row's logits have the bits
//! of that sequence decoded alone, so a request generates the same tokens whoever it shares
//! steps with (tests/server.rs and python/test_server.py check it against the library).
//!
//! Callbacks run on this thread and must not block: they push onto unbounded channels (a
//! response holds at most the model's context in tokens) and return `Break` when their client
//! is gone or the shutdown grace has run out; that generation then stops at its next token.

use crate::error::ApiError;
use kin_infer::generate::TokenEvent;
use kin_infer::generate::{Detokenize, GenTokenizer, Generation, SamplingParams, Stepper};
use kin_infer::models::decoders::BatchScratch;
use kin_infer::Generator;
use std::any::Any;
use std::ops::ControlFlow;
use std::sync::{mpsc, Arc};
use tokio::sync::oneshot;

/// The per-token callback of a job.
pub type OnToken = Box<dyn FnMut(&TokenEvent) -> ControlFlow<()> + Send>;

/// One generation request.
pub struct GenJob {
    pub prompt: Vec<u32>,
    pub params: SamplingParams,
    pub on_token: OnToken,
    /// The generation, or its error as the client will see it.
    pub done: oneshot::Sender<Result<Generation, ApiError>>,
    /// Held until the generation has stopped (its concurrency slot, its metrics guard).
    pub hold: Box<dyn Any + Send>,
}

/// The sending side of a model's scheduler thread (which ends when this is dropped).
pub struct Scheduler {
    tx: std::sync::Mutex<mpsc::Sender<GenJob>>,
}

impl Scheduler {
    /// `prefill_chunk`: prompt tokens fed per step, all new requests together, so that a long
    /// prompt delays the running generations by one chunk at a time, not by its whole prefill.
    pub fn start(
        id: &str,
        gen: Arc<Generator>,
        tok: Option<Arc<GenTokenizer>>,
        prefill_chunk: usize,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<GenJob>();
        std::thread::Builder::new()
            .name(format!("scheduler-{id}"))
            .spawn(move || run(&gen, tok.as_deref(), &rx, prefill_chunk.max(1)))
            .expect("spawning a thread");
        Scheduler {
            tx: std::sync::Mutex::new(tx),
        }
    }

    /// Queues `job`; false if the scheduler is gone (the job is dropped, releasing its hold).
    pub fn submit(&self, job: GenJob) -> bool {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        tx.send(job).is_ok()
    }
}

struct Running {
    st: Stepper,
    job: GenJob,
}

fn run(gen: &Generator, tok: Option<&GenTokenizer>, rx: &mpsc::Receiver<GenJob>, chunk: usize) {
    let detok = tok.map(|t| t as &dyn Detokenize);
    let mut running: Vec<Running> = Vec::new();
    let mut scratch = BatchScratch::default();
    loop {
        // Admit: wait when idle, else take whatever has arrived.
        if running.is_empty() {
            match rx.recv() {
                Ok(job) => admit(gen, tok.is_some(), job, &mut running),
                Err(_) => return,
            }
        }
        while let Ok(job) = rx.try_recv() {
            admit(gen, tok.is_some(), job, &mut running);
        }
        // Prefill: one chunk of budget per step, oldest request first.
        let mut budget = chunk;
        let mut i = 0;
        while i < running.len() && budget > 0 {
            if !running[i].st.is_prefilling() {
                i += 1;
                continue;
            }
            let before = running[i].st.prefill_progress();
            match gen.prefill(&mut running[i].st, budget) {
                Ok(_) => {
                    budget -= (running[i].st.prefill_progress() - before).min(budget);
                    i += 1;
                }
                Err(e) => {
                    let r = running.swap_remove(i);
                    let _ = r.job.done.send(Err(e.into()));
                }
            }
        }
        // Hand every pending token to its callback; finished generations leave.
        let mut i = 0;
        while i < running.len() {
            let r = &mut running[i];
            if r.st.is_prefilling() {
                i += 1;
                continue;
            }
            match r.st.emit(detok, &mut r.job.on_token) {
                Ok(None) => i += 1,
                Ok(Some(_)) => {
                    let r = running.swap_remove(i);
                    let _ = r.job.done.send(Ok(r.st.finish()));
                }
                Err(e) => {
                    let r = running.swap_remove(i);
                    let _ = r.job.done.send(Err(e.into()));
                }
            }
        }
        let mut steppers: Vec<&mut Stepper> = running
            .iter_mut()
            .map(|r| &mut r.st)
            .filter(|s| !s.is_prefilling())
            .collect();
        if steppers.is_empty() {
            continue;
        }
        if let Err(e) = gen.decode_step(&mut steppers, &mut scratch) {
            // Every sequence was checked when it started and stops before its cache fills,
            // so this is the model or the machine failing (non-finite logits, a device
            // error): every generation reports it, with the status its kind deserves (a 5xx).
            let err = ApiError::from(e);
            for r in running.drain(..) {
                let _ = r.job.done.send(Err(err.clone()));
            }
            // (prefilling ones included: the model failing fails every request on it)
        }
    }
}

fn admit(gen: &Generator, has_detok: bool, job: GenJob, running: &mut Vec<Running>) {
    if job.done.is_closed() {
        return; // the client left while the job was queued
    }
    match gen.begin(&job.prompt, &job.params, has_detok) {
        Ok(st) => running.push(Running { st, job }),
        Err(e) => {
            let _ = job.done.send(Err(e.into()));
        }
    }
}
