//! `POST /v1/chat/completions` and `POST /v1/completions`: a prompt (a chat rendered through
//! the model's template, or text, or token ids) generated on a blocking thread, at most
//! `--max-concurrent` at once, each with its own KV cache (`Generator::generate`). Streamed
//! responses are OpenAI's server-sent chunks ending in `[DONE]`; a stream that fails or is
//! cut by shutdown ends with an error event and no `[DONE]`, so no client mistakes a cut
//! answer for a complete one. A client that goes away stops its generation.
//!
//! Before a generation reaches its scheduler it reserves its KV cache and per-token
//! bookkeeping from the server's memory budget ([`crate::memory`]): one that could never fit
//! is a 400 naming `max_tokens` (or the prompt) with what would fit; without `max_tokens` the
//! default (the rest of the context) is capped to what the whole budget holds; one that does
//! not fit beside the running ones waits up to `--request-timeout`, then gets a 503.

use crate::api::{
    ApiJson, ChatChoice, ChatMessageOut, ChatRequest, ChatResponse, CompletionChoice,
    CompletionRequest, CompletionResponse, MessageContent, PromptInput, Sampling, Stop,
    StreamEvent, Usage,
};
use crate::error::{ApiError, ApiResult, ModelRouteErrors};
use crate::memory::PER_TOKEN_BYTES;
use crate::registry::{GenModel, Kind, Model};
use crate::scheduler::{GenJob, OnToken};
use crate::state::{AppState, QueueSlot};
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use kin_infer::generate::chat::ChatMessage;
use kin_infer::generate::stream::{Generation, StopReason};
use kin_infer::generate::SamplingParams;
use kin_infer::generate::TokenEvent;
use serde_json::json;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// OpenAI's limit on stop strings.
const MAX_STOP: usize = 4;

fn gen_model<'a>(m: &'a Model, id: &str) -> ApiResult<&'a GenModel> {
    match &m.kind {
        Kind::Generate(g) => Ok(g),
        Kind::Embed(_) => Err(ApiError::model_not_found(id, "generation")),
    }
}

fn needs_tokenizer(g: &GenModel) -> ApiResult<&kin_infer::generate::GenTokenizer> {
    g.tokenizer.as_deref().ok_or_else(|| {
        ApiError::invalid(
            "model",
            "this model has no tokenizer, and the server answers with text",
        )
    })
}

/// The chat's prompt ids: the messages through the model's chat template.
fn chat_prompt(g: &GenModel, req: &ChatRequest) -> ApiResult<Vec<u32>> {
    let tok = needs_tokenizer(g)?;
    let Some(template) = &g.template else {
        return Err(ApiError::invalid(
            "model",
            "this model has no chat template (tokenizer_config.json, chat_template.jinja or \
             GGUF metadata); use /v1/completions",
        ));
    };
    if req.messages.is_empty() {
        return Err(ApiError::invalid("messages", "messages is empty"));
    }
    let mut msgs = Vec::with_capacity(req.messages.len());
    for (i, m) in req.messages.iter().enumerate() {
        let content = match &m.content {
            None => String::new(),
            Some(MessageContent::Text(t)) => t.clone(),
            Some(MessageContent::Parts(parts)) => {
                let mut s = String::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => s.push_str(t),
                        (k, _) => {
                            return Err(ApiError::invalid(
                                "messages",
                                format!(
                                    "message {i}: content part `{k}` is not supported (text only)"
                                ),
                            ))
                        }
                    }
                }
                s
            }
        };
        msgs.push(ChatMessage::new(m.role.as_str(), content));
    }
    let rendered = template
        .render(&msgs, true)
        .map_err(|e| ApiError::invalid("messages", e.to_string()))?;
    Ok(tok.encode_with(&rendered, false)?)
}

fn completion_prompt(g: &GenModel, prompt: &PromptInput) -> ApiResult<Vec<u32>> {
    let one = |n: usize| {
        if n == 1 {
            Ok(())
        } else {
            Err(ApiError::invalid(
                "prompt",
                format!("{n} prompts in one request; send one prompt per request"),
            ))
        }
    };
    match prompt {
        PromptInput::Text(t) => Ok(needs_tokenizer(g)?.encode(t)?),
        PromptInput::Texts(t) => {
            one(t.len())?;
            Ok(needs_tokenizer(g)?.encode(&t[0])?)
        }
        PromptInput::Tokens(ids) => Ok(ids.clone()),
        PromptInput::TokenLists(l) => {
            one(l.len())?;
            Ok(l[0].clone())
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ NEXT_ID
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Bytes a generation of `positions` cache positions reserves from the memory budget.
fn reservation_bytes(g: &GenModel, positions: usize) -> u64 {
    g.generator
        .spec()
        .kv_cache_bytes(positions)
        .and_then(|kv| kv.checked_add((positions as u64).checked_mul(PER_TOKEN_BYTES)?))
        .unwrap_or(u64::MAX)
}

/// The cache positions a generation needs: the engine's own sizing, so a reservation cannot
/// drift from what the cache allocates.
use kin_infer::generate::cache_positions as positions;

/// The engine's sampling parameters from the request's, every range checked, and the
/// new tokens capped to what `budget` bytes can hold (see the module doc).
fn params(g: &GenModel, s: &Sampling, prompt_len: usize, budget: u64) -> ApiResult<SamplingParams> {
    let ctx = g.generator.spec().max_sequence_length;
    if s.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid("n", "only n = 1 is supported"));
    }
    let asked = |v: &serde_json::Value| {
        !matches!(v, serde_json::Value::Null | serde_json::Value::Bool(false))
    };
    if s.logprobs.as_ref().is_some_and(asked) {
        return Err(ApiError::invalid(
            "logprobs",
            "log probabilities are not offered",
        ));
    }
    if s.echo == Some(true) {
        return Err(ApiError::invalid("echo", "echo is not offered"));
    }
    if prompt_len == 0 {
        return Err(ApiError::invalid("prompt", "the prompt has no tokens"));
    }
    if prompt_len >= ctx {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "context_length_exceeded",
            format!("the prompt has {prompt_len} tokens; the model's context holds {ctx}, and at least one must be left to generate"),
        ));
    }
    let room = ctx - prompt_len;
    let max = s.max_completion_tokens.or(s.max_tokens);
    let field = if s.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    // Positions the whole budget holds (a cache costs the same per position).
    let per_position = reservation_bytes(g, 1).max(1);
    let fit = usize::try_from(budget / per_position).unwrap_or(usize::MAX);
    let h = kin_infer::resource::human_bytes;
    if fit < prompt_len {
        return Err(ApiError {
            param: Some("prompt".into()),
            ..ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "memory_budget",
                format!(
                    "the prompt's {prompt_len} tokens need {} of KV cache, more than the \
                     server's whole memory budget ({}, {fit} positions)",
                    h(reservation_bytes(g, prompt_len)),
                    h(budget)
                ),
            )
        });
    }
    let fit_new = fit + 1 - prompt_len;
    let max_new_tokens = match max {
        None => room.min(fit_new),
        // As OpenAI answers it: a request for no tokens is a mistake, not an empty completion.
        Some(0) => {
            return Err(ApiError::invalid(
                field,
                format!("{field} must be at least 1"),
            ))
        }
        Some(n) if n as usize > room => {
            return Err(ApiError {
                param: Some(field.into()),
                ..ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "context_length_exceeded",
                format!("{field} {n} with a prompt of {prompt_len} tokens exceeds the model's context of {ctx}; at most {room}"),
            )})
        }
        Some(n) if n as usize > fit_new => {
            return Err(ApiError {
                param: Some(field.into()),
                ..ApiError::new(
                    axum::http::StatusCode::BAD_REQUEST,
                    "memory_budget",
                    format!(
                        "{field} {n} with a prompt of {prompt_len} tokens needs {} of KV cache, \
                         more than the server's whole memory budget ({}); at most {fit_new}",
                        h(reservation_bytes(g, positions(prompt_len, n as usize, ctx))),
                        h(budget)
                    ),
                )
            })
        }
        Some(n) => n as usize,
    };
    let temperature = s.temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::invalid(
            "temperature",
            "temperature must be between 0 and 2",
        ));
    }
    let top_p = s.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::invalid("top_p", "top_p must be in (0, 1]"));
    }
    let pen = |v: Option<f32>, name: &str| match v.unwrap_or(0.0) {
        p if (-2.0..=2.0).contains(&p) => Ok(p),
        _ => Err(ApiError::invalid(
            name,
            format!("{name} must be between -2 and 2"),
        )),
    };
    let stop = match &s.stop {
        None => Vec::new(),
        Some(Stop::One(x)) => vec![x.clone()],
        Some(Stop::Many(v)) => v.clone(),
    };
    if stop.len() > MAX_STOP || stop.iter().any(String::is_empty) {
        return Err(ApiError::invalid(
            "stop",
            format!("stop takes at most {MAX_STOP} non-empty strings"),
        ));
    }
    let p = SamplingParams {
        temperature,
        top_p,
        presence_penalty: pen(s.presence_penalty, "presence_penalty")?,
        frequency_penalty: pen(s.frequency_penalty, "frequency_penalty")?,
        seed: s.seed.unwrap_or_else(fresh_seed),
        max_new_tokens,
        stop,
        eos_token_ids: g.eos.clone(),
        ..Default::default()
    };
    p.validate()?;
    Ok(p)
}

/// Sets its flag when dropped: the handler's future or the response stream went away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Chat,
    Text,
}

fn finish_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::Eos | StopReason::StopString => "stop",
        _ => "length",
    }
}

/// One streamed chunk in OpenAI's shape.
fn chunk(
    shape: Shape,
    id: &str,
    model: &str,
    text: Option<&str>,
    finish: Option<&str>,
    first: bool,
) -> Event {
    let body = match shape {
        Shape::Chat => {
            let mut delta = serde_json::Map::new();
            if first {
                delta.insert("role".into(), json!("assistant"));
            }
            if let Some(t) = text {
                delta.insert("content".into(), json!(t));
            }
            json!({"id": id, "object": "chat.completion.chunk", "created": now(), "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        }
        Shape::Text => {
            json!({"id": id, "object": "text_completion", "created": now(), "model": model,
                   "choices": [{"index": 0, "text": text.unwrap_or(""), "finish_reason": finish, "logprobs": null}]})
        }
    };
    Event::default().data(body.to_string())
}

struct Prepared {
    model: Arc<Model>,
    prompt: Vec<u32>,
    params: SamplingParams,
    stream: bool,
    include_usage: bool,
    /// What the generation reserves from the memory budget.
    reserve: u64,
}

async fn run(st: AppState, p: Prepared, shape: Shape) -> ApiResult<Response> {
    if let Some(max) = st.cfg.max_input_tokens {
        if p.prompt.len() > max {
            return Err(ApiError::invalid(
                "prompt",
                format!(
                    "the prompt has {} tokens; this server accepts at most {max} per request",
                    p.prompt.len()
                ),
            ));
        }
    }
    // Wait in a bounded queue for a slot, then for room in the memory budget; the slot and
    // the reservation are held until the generation stops.
    let (permit, reservation) = {
        let _waiting = QueueSlot::take(&st.metrics.gen_waiting, st.cfg.queue)
            .ok_or_else(|| ApiError::queue_full("generation"))?;
        let permit = st
            .gen_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::shutting_down())?;
        let wait = st.cfg.request_timeout;
        let Some(r) = st.budget.reserve(p.reserve, wait).await else {
            let h = kin_infer::resource::human_bytes;
            return Err(ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "memory_budget",
                    format!(
                        "this generation needs {} of the server's memory budget ({}), which \
                         running generations held for {} s; retry shortly",
                        h(p.reserve),
                        h(st.budget.total()),
                        wait.as_secs_f64()
                    ),
                )
            });
        };
        (permit, r)
    };
    if st.is_shutting_down() {
        return Err(ApiError::shutting_down());
    }
    let Kind::Generate(g) = &p.model.kind else {
        unreachable!("checked by prepare_common")
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop(cancel.clone());
    let id = format!(
        "{}-{:x}{:08x}",
        if shape == Shape::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        },
        now(),
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    );
    // Unbounded: the scheduler thread never waits for a slow client (a response holds at most
    // the context's tokens).
    let (tx, rx) = mpsc::unbounded_channel::<Event>();
    let streamed = Arc::new(std::sync::Mutex::new(String::new()));
    let on_token: OnToken = {
        let (tx, cancel_all) = (tx.clone(), st.cancel_all.clone());
        let (id, model_id, streamed) = (id.clone(), p.model.id.clone(), streamed.clone());
        let stream = p.stream;
        Box::new(move |e: &TokenEvent| {
            if cancel.load(Ordering::Relaxed) || cancel_all.load(Ordering::Relaxed) {
                return ControlFlow::Break(());
            }
            if stream && !e.text.is_empty() {
                let mut s = streamed.lock().unwrap_or_else(|p| p.into_inner());
                let first = s.is_empty();
                s.push_str(e.text);
                if tx
                    .send(chunk(shape, &id, &model_id, Some(e.text), None, first))
                    .is_err()
                {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
    };
    let (done, result) = oneshot::channel();
    st.metrics.gen_running.fetch_add(1, Ordering::Relaxed);
    let job = GenJob {
        prompt: p.prompt.clone(),
        params: p.params.clone(),
        on_token,
        done,
        hold: Box::new((permit, reservation, Running(st.metrics.clone()))),
    };
    if !g.scheduler.submit(job) {
        return Err(ApiError::shutting_down());
    }
    if p.stream {
        // The response stream owns the guard: when the client goes, the stream is dropped and
        // the generation sees its flag at its next token. A task sends the last events.
        let st2 = st.clone();
        tokio::spawn(async move {
            let r = result.await;
            finish_stream(&st2, &p, shape, &id, &tx, &streamed, r);
        });
        let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(move |e| {
            let _ = &guard;
            Ok::<_, std::convert::Infallible>(e)
        });
        return Ok(Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let r = result.await.map_err(|_| ApiError::shutting_down())?;
    drop(guard);
    let g = r?;
    record(&st, &g);
    if g.stop_reason == StopReason::Cancelled {
        return Err(ApiError::shutting_down());
    }
    let text = g.text.clone().unwrap_or_default();
    let usage = Usage {
        prompt_tokens: g.prompt_tokens,
        completion_tokens: g.tokens.len(),
        total_tokens: g.prompt_tokens + g.tokens.len(),
    };
    let (created, model) = (now(), p.model.id.clone());
    let finish = finish_reason(g.stop_reason);
    Ok(match shape {
        Shape::Chat => axum::Json(ChatResponse {
            id,
            object: "chat.completion",
            created,
            model,
            choices: vec![ChatChoice {
                index: 0,
                message: ChatMessageOut {
                    role: "assistant",
                    content: text,
                },
                finish_reason: finish,
            }],
            usage,
        })
        .into_response(),
        Shape::Text => axum::Json(CompletionResponse {
            id,
            object: "text_completion",
            created,
            model,
            choices: vec![CompletionChoice {
                index: 0,
                text,
                finish_reason: finish,
                logprobs: None,
            }],
            usage,
        })
        .into_response(),
    })
}

/// Counts a running generation until its job is dropped by the scheduler.
struct Running(Arc<crate::metrics::Metrics>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.gen_running.fetch_sub(1, Ordering::Relaxed);
    }
}

fn record(st: &AppState, g: &Generation) {
    st.metrics
        .generation(g.prompt_tokens, g.tokens.len(), g.decode_tokens_per_s());
}

/// The end of a stream: text held back while it could have begun a stop string, the chunk
/// with `finish_reason`, usage when asked, `[DONE]`; or an error event and no `[DONE]`.
fn finish_stream(
    st: &AppState,
    p: &Prepared,
    shape: Shape,
    id: &str,
    tx: &mpsc::UnboundedSender<Event>,
    streamed: &std::sync::Mutex<String>,
    r: Result<Result<Generation, ApiError>, oneshot::error::RecvError>,
) {
    let model_id = p.model.id.as_str();
    let send = |e: Event| {
        let _ = tx.send(e);
    };
    let error = |e: ApiError| {
        Event::default()
            .event("error")
            .data(json!(e.body()).to_string())
    };
    match r {
        Ok(Ok(g)) if g.stop_reason != StopReason::Cancelled => {
            record(st, &g);
            let streamed = streamed.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(rest) = g
                .text
                .as_deref()
                .and_then(|t| t.strip_prefix(streamed.as_str()))
            {
                if !rest.is_empty() {
                    send(chunk(
                        shape,
                        id,
                        model_id,
                        Some(rest),
                        None,
                        streamed.is_empty(),
                    ));
                }
            }
            send(chunk(
                shape,
                id,
                model_id,
                None,
                Some(finish_reason(g.stop_reason)),
                false,
            ));
            if p.include_usage {
                let object = if shape == Shape::Chat {
                    "chat.completion.chunk"
                } else {
                    "text_completion"
                };
                let u = json!({"id": id, "object": object, "created": now(), "model": model_id,
                    "choices": [], "usage": {"prompt_tokens": g.prompt_tokens,
                    "completion_tokens": g.tokens.len(),
                    "total_tokens": g.prompt_tokens + g.tokens.len()}});
                send(Event::default().data(u.to_string()));
            }
            send(Event::default().data("[DONE]"));
        }
        Ok(Ok(_)) | Err(_) => send(error(ApiError::shutting_down())),
        Ok(Err(e)) => send(error(e)),
    }
}

fn prepare_common(
    st: &AppState,
    model_id: &str,
    sampling: &Sampling,
    prompt: impl FnOnce(&GenModel) -> ApiResult<Vec<u32>>,
) -> ApiResult<Prepared> {
    let model = st.model(model_id, "generation")?;
    let g = gen_model(&model, model_id)?;
    let ids = prompt(g)?;
    let vocab = g.generator.spec().vocab_size;
    if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
        return Err(ApiError::invalid(
            "prompt",
            format!("token id {bad} is outside the model's vocabulary of {vocab}"),
        ));
    }
    let params = params(g, sampling, ids.len(), st.budget.total())?;
    let ctx = g.generator.spec().max_sequence_length;
    let reserve = reservation_bytes(g, positions(ids.len(), params.max_new_tokens, ctx));
    if !params.stop.is_empty() && g.tokenizer.is_none() {
        return Err(ApiError::invalid(
            "stop",
            "stop strings need the model's tokenizer",
        ));
    }
    let stream = sampling.stream.unwrap_or(false);
    let include_usage = sampling
        .stream_options
        .as_ref()
        .and_then(|o| o.include_usage)
        .unwrap_or(false);
    Ok(Prepared {
        model,
        prompt: ids,
        params,
        stream,
        include_usage,
        reserve,
    })
}

#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    request_body = ChatRequest,
    responses(
        (status = 200, description = "The reply (a JSON object, or server-sent chunks when `stream` is true)", content((ChatResponse = "application/json"), (StreamEvent = "text/event-stream"))),
        ModelRouteErrors,
    ),
    security((), ("bearer" = []))
)]
pub async fn chat(
    State(st): State<AppState>,
    ApiJson(req): ApiJson<ChatRequest>,
) -> ApiResult<Response> {
    let p = prepare_common(&st, &req.model, &req.sampling, |g| chat_prompt(g, &req))?;
    run(st, p, Shape::Chat).await
}

#[utoipa::path(
    post,
    path = "/v1/completions",
    request_body = CompletionRequest,
    responses(
        (status = 200, description = "The completion (a JSON object, or server-sent chunks when `stream` is true)", content((CompletionResponse = "application/json"), (StreamEvent = "text/event-stream"))),
        ModelRouteErrors,
    ),
    security((), ("bearer" = []))
)]
pub async fn completions(
    State(st): State<AppState>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> ApiResult<Response> {
    let p = prepare_common(&st, &req.model, &req.sampling, |g| {
        completion_prompt(g, &req.prompt)
    })?;
    run(st, p, Shape::Text).await
}
