//! `POST /v1/embeddings` and the dynamic batcher behind it. Each embedding model has one
//! batcher thread: it takes the waiting requests, up to `--max-batch-tokens` tokens, runs them
//! as one forward pass and hands each request its rows. The engine is batch-invariant, so a
//! vector has the same bits whatever it was batched with (the tests compare with `embed`).

use crate::api::{
    ApiJson, Embedding, EmbeddingInput, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage,
    EmbeddingVector, EncodingFormat,
};
use crate::error::{ApiError, ApiResult, ModelRouteErrors};
use crate::metrics::Metrics;
use crate::registry::{BatchLimits, Kind};
use crate::state::{AppState, QueueSlot};
use axum::extract::State;
use base64::Engine;
use kin_infer::Embedder;
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// OpenAI's limit on inputs per request.
pub const MAX_INPUTS: usize = 2048;

/// One request's sequences, waiting for a batch.
struct Job {
    ids: Vec<Vec<u32>>,
    /// Token type ids (texts); `None` for token-id input.
    types: Option<Vec<Vec<u32>>>,
    dims: Option<usize>,
    reply: oneshot::Sender<kin_infer::Result<Vec<Vec<f32>>>>,
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
        limits: BatchLimits,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(format!("batcher-{id}"))
            .spawn(move || batch_loop(&embedder, &rx, limits, &metrics))
            .expect("spawning a thread");
        Batcher {
            tx: std::sync::Mutex::new(tx),
        }
    }

    fn submit(&self, job: Job) -> bool {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        tx.send(job).is_ok()
    }
}

fn batch_loop(e: &Embedder, rx: &mpsc::Receiver<Job>, limits: BatchLimits, m: &Metrics) {
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
        while tokens < limits.max_batch_tokens {
            match rx.try_recv() {
                Ok(j) if tokens + j.tokens() <= limits.max_batch_tokens => {
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

/// Tokenized input: ids, type ids (texts only), and the prompt-token count.
struct Prepared {
    ids: Vec<Vec<u32>>,
    types: Option<Vec<Vec<u32>>>,
    tokens: usize,
}

fn prepare(e: &Embedder, input: EmbeddingInput, truncate: bool) -> ApiResult<Prepared> {
    let limit = e.max_length();
    let texts = match input {
        EmbeddingInput::Text(t) => vec![t],
        EmbeddingInput::Texts(t) => t,
        EmbeddingInput::Tokens(t) => return prepare_ids(e, vec![t], truncate),
        EmbeddingInput::TokenLists(t) => return prepare_ids(e, t, truncate),
    };
    check_count(texts.len())?;
    // An empty text would embed only the special tokens: a vector that means nothing.
    if let Some(i) = texts.iter().position(|t| t.is_empty()) {
        return Err(ApiError::invalid(
            "input",
            format!("input {i} is an empty string"),
        ));
    }
    let Some(tok) = e.tokenizer() else {
        return Err(ApiError::invalid(
            "input",
            "this model has no tokenizer; send token ids instead of text",
        ));
    };
    let mut ids = Vec::with_capacity(texts.len());
    let mut types = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let (enc, cut) = tok.encode_flagged(t)?;
        if cut && !truncate {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "input {i} is longer than the model's limit of {limit} tokens \
                     (without \"truncate\": false it would be truncated to them)"
                ),
            ));
        }
        ids.push(enc.ids);
        types.push(enc.type_ids);
    }
    for (i, s) in ids.iter().enumerate() {
        e.config()
            .validate(s, Some(&types[i]))
            .map_err(|err| ApiError::invalid("input", format!("input {i}: {err}")))?;
    }
    let tokens = ids.iter().map(Vec::len).sum();
    Ok(Prepared {
        ids,
        types: Some(types),
        tokens,
    })
}

fn check_count(n: usize) -> ApiResult<()> {
    if n == 0 {
        return Err(ApiError::invalid("input", "input is empty"));
    }
    if n > MAX_INPUTS {
        return Err(ApiError::invalid(
            "input",
            format!("{n} inputs in one request; at most {MAX_INPUTS}"),
        ));
    }
    Ok(())
}

fn prepare_ids(e: &Embedder, mut ids: Vec<Vec<u32>>, truncate: bool) -> ApiResult<Prepared> {
    check_count(ids.len())?;
    let limit = e.max_length();
    for (i, s) in ids.iter_mut().enumerate() {
        if s.len() > limit {
            if !truncate {
                return Err(ApiError::invalid(
                    "input",
                    format!(
                        "input {i} has {} tokens, more than the model's limit of {limit}",
                        s.len()
                    ),
                ));
            }
            s.truncate(limit);
        }
        e.config()
            .validate(s, None)
            .map_err(|err| ApiError::invalid("input", format!("input {i}: {err}")))?;
    }
    let tokens = ids.iter().map(Vec::len).sum();
    Ok(Prepared {
        ids,
        types: None,
        tokens,
    })
}

#[utoipa::path(
    post,
    path = "/v1/embeddings",
    request_body = EmbeddingRequest,
    responses(
        (status = 200, description = "One vector per input", body = EmbeddingResponse),
        ModelRouteErrors,
    ),
    security((), ("bearer" = []))
)]
pub async fn embeddings(
    State(st): State<AppState>,
    ApiJson(req): ApiJson<EmbeddingRequest>,
) -> ApiResult<axum::Json<EmbeddingResponse>> {
    let model = st.model(&req.model, "embedding")?;
    let Kind::Embed(em) = &model.kind else {
        return Err(ApiError::model_not_found(&req.model, "embedding"));
    };
    let dims = match req.dimensions {
        None => None,
        Some(d) if d == 0 || d as usize > em.embedder.dim() => {
            return Err(ApiError::invalid(
                "dimensions",
                format!(
                    "dimensions must be between 1 and the embedding size {}",
                    em.embedder.dim()
                ),
            ))
        }
        Some(d) => Some(d as usize),
    };
    let truncate = req.truncate.unwrap_or(true);
    let e = em.embedder.clone();
    let prepared = tokio::task::spawn_blocking(move || prepare(&e, req.input, truncate))
        .await
        .map_err(|_| ApiError::shutting_down())??;
    if let Some(max) = st.cfg.max_input_tokens {
        if prepared.tokens > max {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "the request holds {} tokens; this server accepts at most {max} per request",
                    prepared.tokens
                ),
            ));
        }
    }
    let _slot = QueueSlot::take(&st.metrics.embed_queue, st.cfg.queue)
        .ok_or_else(|| ApiError::queue_full("embedding"))?;
    let (reply, rx) = oneshot::channel();
    let job = Job {
        ids: prepared.ids,
        types: prepared.types,
        dims,
        reply,
    };
    if st.is_shutting_down() || !em.batcher.submit(job) {
        return Err(ApiError::shutting_down());
    }
    let vecs = rx.await.map_err(|_| ApiError::shutting_down())??;
    let format = req.encoding_format.unwrap_or_default();
    let data = vecs
        .into_iter()
        .enumerate()
        .map(|(index, v)| {
            if v.iter().any(|x| !x.is_finite()) {
                return Err(ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "non_finite",
                    format!("the model produced a non-finite value for input {index}"),
                ));
            }
            let embedding = match format {
                EncodingFormat::Float => EmbeddingVector::Float(v),
                EncodingFormat::Base64 => {
                    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                    EmbeddingVector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
                }
            };
            Ok(Embedding {
                object: "embedding",
                index,
                embedding,
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(axum::Json(EmbeddingResponse {
        object: "list",
        data,
        model: model.id.clone(),
        usage: EmbeddingUsage {
            prompt_tokens: prepared.tokens,
            total_tokens: prepared.tokens,
        },
    }))
}
