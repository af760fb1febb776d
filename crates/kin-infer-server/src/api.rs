//! The request and response types of every route, in OpenAI's shapes. The handlers use these
//! types and `/openapi.json` is generated from them (utoipa), so the two cannot drift apart.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A JSON body, read under the body limit: a body over it is a 413 and malformed JSON or a
/// wrong type a 400, both in OpenAI's error shape (axum's own `Json` answers in plain text).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let status = e.status();
            if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    status,
                    "body_too_large",
                    "the request body is larger than the server's --max-body",
                )
            } else {
                ApiError::new(status, "bad_body", format!("cannot read the body: {e}"))
            }
        })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let v = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| invalid_json(e, &bytes))
            .and_then(|v| {
                de.end().map(|_| v).map_err(|e| {
                    ApiError::new(
                        axum::http::StatusCode::BAD_REQUEST,
                        "invalid_json",
                        format!("the body is not a valid request: {e}"),
                    )
                })
            })?;
        Ok(ApiJson(v))
    }
}

/// A body that does not deserialize: a 400 naming the field at fault (its path, e.g.
/// `messages[0].role`, as `param`), or the field that is missing.
fn invalid_json(e: serde_path_to_error::Error<serde_json::Error>, body: &[u8]) -> ApiError {
    let mut path = e.path().to_string();
    let mut inner = e.into_inner();
    let text = inner.to_string();
    let missing = text
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
        .map(str::to_string);
    // serde's `flatten` (the sampling fields of both completion routes) buffers the fields
    // and loses their path; reading them alone finds it again.
    if path == "." && missing.is_none() {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
            if let Err(e) = serde_path_to_error::deserialize::<_, Sampling>(v) {
                if e.path().to_string() != "." {
                    path = e.path().to_string();
                    inner = e.into_inner();
                }
            }
        }
    }
    let at = (path != ".").then_some(path);
    let message = match &at {
        Some(p) => format!("the body is not a valid request: `{p}`: {inner}"),
        None => format!("the body is not a valid request: {inner}"),
    };
    ApiError {
        param: at.or(missing),
        ..ApiError::new(axum::http::StatusCode::BAD_REQUEST, "invalid_json", message)
    }
}

/// `input` of an embeddings request: a string, strings, token ids, or lists of token ids.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(untagged)]
pub enum EmbeddingInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    #[default]
    Float,
    /// Little-endian f32 bytes, base64-encoded.
    Base64,
}

/// Unknown fields are ignored, as OpenAI-compatible servers do (clients send extras).
#[derive(Deserialize, ToSchema, Debug)]
pub struct EmbeddingRequest {
    pub input: EmbeddingInput,
    pub model: String,
    #[serde(default)]
    pub encoding_format: Option<EncodingFormat>,
    /// Keep the first N dimensions (Matryoshka), re-normalized when the model normalizes.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub dimensions: Option<u32>,
    /// Accepted and ignored (OpenAI's end-user id).
    #[serde(default)]
    pub user: Option<String>,
    /// `false`: an input longer than the model's limit is a 400 instead of being truncated.
    #[serde(default)]
    pub truncate: Option<bool>,
}

/// One vector: floats, or base64 of little-endian f32 bytes.
#[derive(Serialize, ToSchema, Debug)]
#[serde(untagged)]
pub enum EmbeddingVector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize, ToSchema, Debug)]
pub struct Embedding {
    /// Always `embedding`.
    pub object: &'static str,
    pub index: usize,
    pub embedding: EmbeddingVector,
}

#[derive(Serialize, ToSchema, Debug, Clone, Copy)]
pub struct EmbeddingUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct EmbeddingResponse {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<Embedding>,
    pub model: String,
    pub usage: EmbeddingUsage,
}

/// Message content: a string, or parts of which only `text` parts are supported.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize, ToSchema, Debug)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Deserialize, ToSchema, Debug)]
pub struct ChatMessageIn {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub name: Option<String>,
}

/// `stop`: one string or several.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, ToSchema, Debug, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// The sampling fields chat and text completions share.
#[derive(Deserialize, ToSchema, Debug, Default)]
pub struct Sampling {
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_tokens: Option<u32>,
    /// Alias of `max_tokens` (OpenAI's newer name).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_completion_tokens: Option<u32>,
    /// 0 is greedy; default 1.
    #[serde(default)]
    #[schema(minimum = 0.0, maximum = 2.0)]
    pub temperature: Option<f32>,
    #[serde(default)]
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub top_p: Option<f32>,
    /// The same seed gives the same tokens on every machine; without one, a fresh seed.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stop: Option<Stop>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    #[schema(minimum = -2.0, maximum = 2.0)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    #[schema(minimum = -2.0, maximum = 2.0)]
    pub frequency_penalty: Option<f32>,
    /// Only 1 is supported.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1)]
    pub n: Option<u32>,
    #[serde(default)]
    pub user: Option<String>,
    /// Not offered: `true` (chat) or a number (completions) is a 400.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<serde_json::Value>,
    /// Not offered: `true` is a 400.
    #[serde(default)]
    pub echo: Option<bool>,
}

#[derive(Deserialize, ToSchema, Debug)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessageIn>,
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// `prompt` of a text completion: text or token ids, one prompt per request.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize, ToSchema, Debug)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: PromptInput,
    #[serde(flatten)]
    pub sampling: Sampling,
}

#[derive(Serialize, ToSchema, Debug, Clone, Copy)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct ChatMessageOut {
    /// Always `assistant`.
    pub role: &'static str,
    pub content: String,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct ChatChoice {
    pub index: usize,
    pub message: ChatMessageOut,
    /// `stop` (EOS or a stop string) or `length` (max_tokens or the context).
    pub finish_reason: &'static str,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct ChatResponse {
    pub id: String,
    /// Always `chat.completion`.
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct CompletionChoice {
    pub index: usize,
    pub text: String,
    pub finish_reason: &'static str,
    /// Always null (log probabilities are not offered).
    pub logprobs: Option<()>,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct CompletionResponse {
    pub id: String,
    /// Always `text_completion`.
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    pub usage: Usage,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct ModelCard {
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    pub created: u64,
    pub owned_by: &'static str,
    /// `embedding` or `generation`: which routes serve it.
    pub kind: &'static str,
    /// The activation numerics it runs: `q8` (8-bit activations over its ggml-quantized
    /// weights) or `f32`.
    pub activations: &'static str,
    /// The numerics version its outputs are pinned to.
    pub numerics_version: &'static str,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    pub data: Vec<ModelCard>,
}

#[derive(Serialize, ToSchema, Debug)]
pub struct Health {
    /// `ok`, or `loading` (with status 503).
    pub status: &'static str,
}

/// One server-sent event of a streamed completion (documentation of `text/event-stream`):
/// `data` is a JSON chunk (`chat.completion.chunk` or `text_completion`), or `[DONE]` last; a
/// stream that fails ends with an `error` event whose data is an error body, and no `[DONE]`.
#[derive(Serialize, ToSchema, Debug)]
pub struct StreamEvent {
    /// `message` (the default), or `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    pub data: String,
}
