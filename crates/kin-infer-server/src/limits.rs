//! The body of a model route, read before its handler runs, under two limits: its size
//! (`--max-body`: a `Content-Length` over it is a 413 before a byte is read, so a client that
//! sent `Expect: 100-continue` is never told to go on, since hyper answers 100 only when the
//! body is first polled; a chunked body is cut at the limit, 413 too) and its time
//! (`--request-timeout` from the end of the headers to the end of the body: a body that
//! stalls or trickles is a 408). Both answers have JSON bodies and close the connection, as
//! the rest of the body is never read.

use crate::error::ApiError;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

pub fn too_large(max_body: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the request body is larger than the server's --max-body ({max_body} bytes)"),
    )
}

/// The error answer, with `Connection: close` (the unread rest of the body is not waited for).
fn closing(e: ApiError) -> Response {
    let mut r = e.into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Middleware: reads the whole body under the limits, then runs the handler on it.
pub async fn read_body(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let max = st.cfg.max_body;
    let (parts, body) = req.into_parts();
    if let Some(v) = parts.headers.get(header::CONTENT_LENGTH) {
        // hyper refuses a malformed Content-Length itself; this covers requests made in
        // process, which do not go through its parser.
        match v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(n) if n > max as u64 => return closing(too_large(max)),
            Some(_) => {}
            None => {
                return closing(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_body",
                    "Content-Length is not a number",
                ))
            }
        }
    }
    let timeout = st.cfg.request_timeout;
    let read = tokio::time::timeout(timeout, Limited::new(body, max).collect()).await;
    let bytes = match read {
        Ok(Ok(c)) => c.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return closing(too_large(max))
        }
        Ok(Err(e)) => {
            return closing(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_body",
                format!("cannot read the body: {e}"),
            ))
        }
        Err(_) => {
            return closing(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the request body did not arrive within --request-timeout ({} s)",
                    timeout.as_secs_f64()
                ),
            ))
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
