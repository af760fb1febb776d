//! The router: the model routes, `/v1/models`, `/health`, `/metrics`, `/openapi.json`, the
//! page at `/`, and the middleware around them (API key, CORS, body limit, one log line and
//! the metrics per request).

use crate::api::*;
use crate::error::{ApiError, ErrorBody, ErrorDetail};
use crate::state::AppState;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::time::Instant;
use tower_http::cors::{AllowOrigin, Any, CorsLayer};
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "kin-infer",
        description = "OpenAI-compatible embeddings and completions from kin-infer: \
                       embeddings bit-identical to `kin-infer embed`, however they are batched."
    ),
    paths(
        crate::embeddings::embeddings,
        crate::completions::chat,
        crate::completions::completions,
        models,
        health,
        metrics
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&Bearer)
)]
pub struct ApiDoc;

struct Bearer;

impl utoipa::Modify for Bearer {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let c = api.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The whole application on `state`.
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/v1/embeddings", post(crate::embeddings::embeddings))
        .route("/v1/chat/completions", post(crate::completions::chat))
        .route("/v1/completions", post(crate::completions::completions))
        .route("/v1/models", get(models))
        // The key is checked first, so a client without one cannot make the server read a body.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            crate::limits::read_body,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    let mut app = Router::new()
        .merge(v1)
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/", get(page))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.cfg.max_body))
        .layer(middleware::from_fn_with_state(state.clone(), observe));
    if let Some(origin) = &state.cfg.cors {
        let allow = if origin == "*" {
            AllowOrigin::any()
        } else {
            match HeaderValue::from_str(origin) {
                Ok(v) => AllowOrigin::exact(v),
                Err(_) => AllowOrigin::list([]),
            }
        };
        app = app.layer(
            CorsLayer::new()
                .allow_origin(allow)
                .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
                .allow_headers(Any),
        );
    }
    app.with_state(state)
}

/// `Authorization: Bearer KEY` on `/v1/*` when `--api-key` is set. The scheme is
/// case-insensitive and may be followed by any run of spaces (RFC 9110 section 11.1).
async fn auth(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.cfg.api_key {
        let header = req.headers().get(header::AUTHORIZATION);
        let msg = match header.map(|v| bearer_token(v.as_bytes())) {
            None => Some("an API key is required (Authorization: Bearer KEY)"),
            Some(None) => Some("the Authorization header is not `Bearer KEY`"),
            Some(Some(given)) if constant_time_eq(given, key.as_bytes()) => None,
            Some(Some(_)) => Some("the API key is wrong"),
        };
        if let Some(msg) = msg {
            return ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", msg).into_response();
        }
    }
    next.run(req).await
}

/// The token of a `Bearer` credential: the scheme in any case, one or more spaces, the token
/// (surrounding whitespace dropped).
fn bearer_token(v: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = v.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !rest.starts_with(b" ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Compares without an early exit, so the time taken does not tell how much of a key matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// One log line and the metrics for every request.
async fn observe(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_string();
    let resp = next.run(req).await;
    let secs = t0.elapsed().as_secs_f64();
    let status = resp.status().as_u16();
    st.metrics.request(&route, status, secs);
    if st.cfg.log_json {
        eprintln!(
            "{}",
            serde_json::json!({
                "ts_ms": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                "method": method.as_str(),
                "path": path,
                "route": route,
                "status": status,
                "ms": (secs * 1e3 * 1000.0).round() / 1000.0,
            })
        );
    } else {
        eprintln!("{method} {path} {status} {:.1}ms", secs * 1e3);
    }
    resp
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("no route {} {}", req.method(), req.uri().path()),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

#[utoipa::path(
    get,
    path = "/v1/models",
    responses(
        (status = 200, description = "The loaded models", body = ModelList),
        (status = 401, description = "Missing or wrong API key", body = ErrorBody),
        (status = 503, description = "Still loading", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
async fn models(State(st): State<AppState>) -> Result<axum::Json<ModelList>, ApiError> {
    let data = st
        .loaded()?
        .iter()
        .map(|m| ModelCard {
            id: m.id.clone(),
            object: "model",
            created: m.created,
            owned_by: "kin-infer",
            kind: m.kind_name(),
            activations: m.numerics().name(),
            numerics_version: m.numerics().version(),
        })
        .collect();
    Ok(axum::Json(ModelList {
        object: "list",
        data,
    }))
}

#[utoipa::path(
    get,
    path = "/health",
    responses(
        (status = 200, description = "Models loaded", body = Health),
        (status = 503, description = "Loading, or shutting down", body = Health),
    )
)]
async fn health(State(st): State<AppState>) -> (StatusCode, axum::Json<Health>) {
    if st.is_shutting_down() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(Health {
                status: "shutting_down",
            }),
        )
    } else if st.models.get().is_some() {
        (StatusCode::OK, axum::Json(Health { status: "ok" }))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(Health { status: "loading" }),
        )
    }
}

#[utoipa::path(
    get,
    path = "/metrics",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain"))
)]
async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    let mut text = st.metrics.render();
    text.push_str(&crate::metrics::budget_gauges(&st.budget));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}

/// The OpenAPI document, with each request's `model` narrowed to the ids this server has
/// loaded for that route, so that generated clients and schema-driven testers use real ones.
async fn openapi(State(st): State<AppState>) -> impl IntoResponse {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    if let Ok(models) = st.loaded() {
        let ids = |kind: &str| -> Vec<String> {
            models
                .iter()
                .filter(|m| m.kind_name() == kind)
                .map(|m| m.id.clone())
                .collect()
        };
        for (schema, kind) in [
            ("EmbeddingRequest", "embedding"),
            ("ChatRequest", "generation"),
            ("CompletionRequest", "generation"),
        ] {
            let ids = ids(kind);
            if !ids.is_empty() {
                set_model_enum(&mut doc["components"]["schemas"][schema], &ids);
            }
        }
    }
    axum::Json(doc)
}

/// Sets `enum` on every `properties.model` inside `schema` (a plain object or an `allOf`).
fn set_model_enum(schema: &mut serde_json::Value, ids: &[String]) {
    if let Some(m) = schema.pointer_mut("/properties/model") {
        m["enum"] = serde_json::json!(ids);
    }
    if let Some(parts) = schema.get_mut("allOf").and_then(|a| a.as_array_mut()) {
        for p in parts {
            set_model_enum(p, ids);
        }
    }
}

async fn page() -> Html<&'static str> {
    Html(include_str!("page.html"))
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn bearer_scheme_is_case_insensitive_and_spaces_are_free() {
        for ok in ["Bearer k1", "bearer k1", "BEARER   k1", "Bearer k1  "] {
            assert_eq!(bearer_token(ok.as_bytes()), Some(&b"k1"[..]), "{ok:?}");
        }
        for bad in ["Basic k1", "Bearerk1", "Bearer", "Bearer   ", "", "Bear k1"] {
            assert_eq!(bearer_token(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
