//! Errors in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`) with the status
//! a client's mistake deserves. A 5xx means the server failed, never that the request was bad.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use kin_infer::{ErrorKind, InferError};
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `not_found_error`,
    /// `rate_limit_error`, `server_error` or `service_unavailable`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    /// A stable machine-readable code (e.g. `model_not_found`, `body_too_large`).
    pub code: Option<String>,
}

/// The error statuses of the model routes, as the OpenAPI document lists them.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only: handlers answer with `ApiError`
pub enum ModelRouteErrors {
    #[response(status = 400, description = "Malformed request")]
    BadRequest(ErrorBody),
    #[response(status = 401, description = "Missing or wrong API key")]
    Unauthorized(ErrorBody),
    #[response(status = 404, description = "Unknown model")]
    NotFound(ErrorBody),
    #[response(status = 405, description = "Wrong method")]
    MethodNotAllowed(ErrorBody),
    #[response(
        status = 408,
        description = "Body not received within --request-timeout"
    )]
    Timeout(ErrorBody),
    #[response(status = 413, description = "Body over --max-body")]
    TooLarge(ErrorBody),
    #[response(status = 429, description = "Queue full (see Retry-After)")]
    QueueFull(ErrorBody),
    #[response(
        status = 503,
        description = "Loading, shutting down, or the memory budget is taken (see Retry-After)"
    )]
    Unavailable(ErrorBody),
}

/// An error a handler returns; rendered as JSON with its status.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<String>,
    pub code: &'static str,
    /// Seconds for `Retry-After` (429 and 503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            param: None,
            code,
            retry_after: None,
        }
    }

    /// 400 naming the request field at fault.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.to_string()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
        }
    }

    pub fn model_not_found(id: &str, kind: &str) -> Self {
        ApiError {
            param: Some("model".into()),
            ..Self::new(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!("no {kind} model `{id}` is loaded (GET /v1/models lists them)"),
            )
        }
    }

    pub fn queue_full(what: &str) -> Self {
        ApiError {
            retry_after: Some(1),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                format!("the {what} queue is full; retry shortly"),
            )
        }
    }

    pub fn shutting_down() -> Self {
        ApiError {
            retry_after: Some(1),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the server is shutting down",
            )
        }
    }

    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            StatusCode::SERVICE_UNAVAILABLE => "service_unavailable",
            s if s.is_server_error() => "server_error",
            _ => "invalid_request_error",
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                message: self.message.clone(),
                kind: self.kind().into(),
                param: self.param.clone(),
                code: Some(self.code.into()),
            },
        }
    }
}

/// Engine errors: what the request caused is a 4xx, what the model or machine caused a 5xx.
impl From<InferError> for ApiError {
    fn from(e: InferError) -> Self {
        let (status, code) = match e.kind() {
            ErrorKind::InvalidInput => (StatusCode::BAD_REQUEST, "invalid_input"),
            ErrorKind::ContextExceeded => (StatusCode::BAD_REQUEST, "context_length_exceeded"),
            ErrorKind::TokenOutOfVocabulary => (StatusCode::BAD_REQUEST, "token_out_of_vocabulary"),
            ErrorKind::Unsupported => (StatusCode::BAD_REQUEST, "unsupported"),
            ErrorKind::Resource => (StatusCode::SERVICE_UNAVAILABLE, "resource_exhausted"),
            ErrorKind::NotFound | ErrorKind::InvalidModel => {
                (StatusCode::INTERNAL_SERVER_ERROR, "model_error")
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

pub type ApiResult<T> = std::result::Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_failing_is_a_5xx_and_a_bad_request_a_4xx() {
        let nan = ApiError::from(InferError::NonFinite {
            what: "logits".into(),
        });
        assert_eq!(
            (nan.status, nan.code),
            (StatusCode::INTERNAL_SERVER_ERROR, "model_error")
        );
        let oom = ApiError::from(InferError::OutOfMemory {
            what: "a KV cache".into(),
            needed_bytes: 1 << 40,
            limit_bytes: 1 << 30,
            limit: "physical memory",
        });
        assert_eq!(oom.status, StatusCode::SERVICE_UNAVAILABLE);
        let bad = ApiError::from(InferError::Input("empty".into()));
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        let v = serde_json::to_value(nan.body()).unwrap();
        assert_eq!(v["error"]["type"], "server_error");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("non-finite"));
    }
}
