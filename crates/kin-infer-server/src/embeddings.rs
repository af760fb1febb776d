//! `POST /v1/embeddings`: validates and tokenizes a request, then hands it to the model's
//! batcher (batcher.rs) and waits for its rows.

use crate::api::{
    ApiJson, Embedding, EmbeddingInput, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage,
    EmbeddingVector, EncodingFormat,
};
use crate::batcher::Job;
use crate::error::{ApiError, ApiResult, ModelRouteErrors};
use crate::registry::Kind;
use crate::state::{AppState, QueueSlot};
use axum::extract::State;
use base64::Engine;
use kin_infer::Embedder;
use tokio::sync::oneshot;

/// OpenAI's limit on inputs per request.
pub const MAX_INPUTS: usize = 2048;

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
