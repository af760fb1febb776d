//! Fuzz entry point (fuzz/fuzz_targets/server_request.rs, and the corpus replay test): one
//! request through the whole router, with the tiny fixture models loaded once. The first byte
//! picks the route and the API key header, the rest is the body. Whatever the bytes, the
//! server must answer (no panic), never with a 5xx, and every 4xx must be an error in
//! OpenAI's shape.

use crate::{load_models, router, AppState, ModelSpec, ServeConfig};
use axum::body::Body;
use axum::http::Request;
use std::sync::OnceLock;
use tower::ServiceExt;

const ROUTES: [&str; 4] = [
    "/v1/embeddings",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
];

fn state() -> &'static AppState {
    static S: OnceLock<AppState> = OnceLock::new();
    S.get_or_init(|| {
        let fix = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/server_fixtures");
        let st = AppState::new(ServeConfig {
            api_key: Some("k".into()),
            max_body: 1 << 16,
            ..Default::default()
        });
        let specs = [
            ModelSpec::parse(&format!("embed={fix}/embed_tiny")).expect("spec"),
            ModelSpec::parse(&format!("chat={fix}/chat_tiny")).expect("spec"),
        ];
        load_models(&st, &specs, Some(1)).expect("the server fixtures load");
        st
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static R: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    R.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// `data[0] % 4` picks the route, `data[0] & 4` sends the API key (without it: a 401 unless
/// the route is unknown), `data[1..]` is the body.
pub fn request(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let route = ROUTES[sel as usize % ROUTES.len()];
    let method = if route == "/v1/models" { "GET" } else { "POST" };
    let mut req = Request::builder()
        .method(method)
        .uri(route)
        .header("content-type", "application/json");
    if sel & 4 != 0 {
        req = req.header("authorization", "Bearer k");
    }
    let req = req.body(Body::from(body.to_vec())).expect("a request");
    let (status, bytes) = runtime().block_on(async {
        let resp = router(state().clone())
            .oneshot(req)
            .await
            .expect("the router answers");
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("a body");
        (status, bytes)
    });
    assert!(
        !status.is_server_error(),
        "{route}: {status} for {:?}: {}",
        String::from_utf8_lossy(body),
        String::from_utf8_lossy(&bytes)
    );
    if status.is_client_error() {
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON error body");
        assert!(v["error"]["message"].is_string(), "{route}: {v}");
    }
}
