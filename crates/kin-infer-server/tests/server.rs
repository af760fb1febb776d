//! The server in-process (the router driven without a socket): bad requests each get their
//! 4xx in OpenAI's error shape, embeddings keep the library's bits however requests are
//! batched, streamed chat equals the unstreamed reply and the library's generation, a full
//! queue answers 429 with Retry-After. Over real sockets and with the `openai` client:
//! python/test_server.py.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kin_infer::generate::chat::{ChatMessage, ChatTemplate};
use kin_infer::generate::{Detokenize, GenTokenizer, SamplingParams};
use kin_infer::{Embedder, EmbedderOptions, Generator, GeneratorOptions};
use kin_infer_server::{load_models, router, AppState, ModelSpec, ServeConfig};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;
use tower::ServiceExt;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/server_fixtures")
        .join(name)
}

fn spec(id: &str, dir: &str) -> ModelSpec {
    ModelSpec::parse(&format!("{id}={}", fixture(dir).display())).unwrap()
}

fn state_with(cfg: ServeConfig) -> AppState {
    let st = AppState::new(cfg);
    load_models(
        &st,
        &[spec("embed", "embed_tiny"), spec("chat", "chat_tiny")],
        Some(2),
    )
    .unwrap();
    st
}

/// One loaded state shared by the tests that need no special configuration.
fn state() -> AppState {
    static S: OnceLock<AppState> = OnceLock::new();
    S.get_or_init(|| state_with(ServeConfig::default())).clone()
}

async fn call(
    st: &AppState,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (StatusCode, Vec<u8>, axum::http::HeaderMap) {
    call_with(st, method, path, body, &[]).await
}

async fn call_with(
    st: &AppState,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (StatusCode, Vec<u8>, axum::http::HeaderMap) {
    let mut req = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = router(st.clone()).oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes().to_vec();
    (parts.status, bytes, parts.headers)
}

async fn post_json(st: &AppState, path: &str, body: Value) -> (StatusCode, Value) {
    let (s, b, _) = call(st, "POST", path, Some(&body.to_string())).await;
    let v = serde_json::from_slice(&b)
        .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", String::from_utf8_lossy(&b)));
    (s, v)
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

const TEXTS: [&str; 6] = [
    "hello world",
    "parse the string into a tree",
    "fn return struct",
    "a",
    "the graph of the code: node, edge, node, edge!",
    "data",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn malformed_requests_get_their_4xx_in_openai_shape() {
    let st = state();
    let long = "hello ".repeat(200);
    let cases: Vec<(&str, String, StatusCode, &str)> = vec![
        ("/v1/embeddings", "{".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/embeddings", "[]".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/embeddings", json!({"input": "x"}).to_string(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/embeddings", json!({"model": "embed", "input": 3}).to_string(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/embeddings", json!({"model": "embed", "input": []}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "embed", "input": [[]]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "embed", "input": [5, 100000]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "embed", "input": "x", "dimensions": 0}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "embed", "input": "x", "dimensions": 49}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "embed", "input": "x", "encoding_format": "hex"}).to_string(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/embeddings", json!({"model": "embed", "input": long, "truncate": false}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "embed", "input": vec!["x"; 2049]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/embeddings", json!({"model": "nope", "input": "x"}).to_string(), StatusCode::NOT_FOUND, "model_not_found"),
        ("/v1/embeddings", json!({"model": "chat", "input": "x"}).to_string(), StatusCode::NOT_FOUND, "model_not_found"),
        ("/v1/chat/completions", json!({"model": "embed", "messages": [{"role": "user", "content": "x"}]}).to_string(), StatusCode::NOT_FOUND, "model_not_found"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": []}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": "hi"}).to_string(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "temperature": 3}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "top_p": 0}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "n": 2}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 100000}).to_string(), StatusCode::BAD_REQUEST, "context_length_exceeded"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "stop": ""}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": long}]}).to_string(), StatusCode::BAD_REQUEST, "context_length_exceeded"),
        ("/v1/completions", json!({"model": "chat", "prompt": [1, 128]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/completions", json!({"model": "chat", "prompt": []}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/completions", json!({"model": "chat", "prompt": ["a", "b"]}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/completions", json!({"model": "chat", "prompt": "x", "max_tokens": -1}).to_string(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/completions", json!({"model": "chat", "prompt": "x", "seed": "s"}).to_string(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("/v1/chat/completions", json!({"model": "chat", "messages": [{"role": "user", "content": "x"}], "logprobs": true}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/completions", json!({"model": "chat", "prompt": "x", "logprobs": 2}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/completions", json!({"model": "chat", "prompt": "x", "echo": true}).to_string(), StatusCode::BAD_REQUEST, "invalid_request"),
        ("/v1/nothing", "{}".into(), StatusCode::NOT_FOUND, "route_not_found"),
    ];
    for (path, body, want, code) in cases {
        let (s, b, _) = call(&st, "POST", path, Some(&body)).await;
        let v: Value = serde_json::from_slice(&b)
            .unwrap_or_else(|_| panic!("{path} {body}: not JSON: {}", String::from_utf8_lossy(&b)));
        let short: String = body.chars().take(120).collect();
        assert_eq!(s, want, "{path} {short}: {v}");
        assert_eq!(v["error"]["code"], code, "{path} {short}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert!(v["error"]["type"].is_string(), "{v}");
    }
    let (s, b, _) = call(&st, "GET", "/v1/embeddings", None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert!(serde_json::from_slice::<Value>(&b).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_the_limit_is_413_before_any_work() {
    let st = state_with(ServeConfig {
        max_body: 1000,
        ..Default::default()
    });
    let body = json!({"model": "embed", "input": "a ".repeat(1000)}).to_string();
    let (s, b, _) = call(&st, "POST", "/v1/embeddings", Some(&body)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["error"]["code"], "body_too_large");
    let small = json!({"model": "embed", "input": "a"}).to_string();
    assert_eq!(
        call(&st, "POST", "/v1/embeddings", Some(&small)).await.0,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_guards_v1_but_not_health() {
    let st = state_with(ServeConfig {
        api_key: Some("sekrit".into()),
        ..Default::default()
    });
    let body = json!({"model": "embed", "input": "a"}).to_string();
    for headers in [
        vec![],
        vec![("authorization", "Bearer wrong")],
        vec![("authorization", "sekrit")],
    ] {
        let (s, b, _) = call_with(&st, "POST", "/v1/embeddings", Some(&body), &headers).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{headers:?}");
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["error"]["type"], "authentication_error");
    }
    let ok = [("authorization", "Bearer sekrit")];
    assert_eq!(
        call_with(&st, "POST", "/v1/embeddings", Some(&body), &ok)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        call_with(&st, "GET", "/v1/models", None, &ok).await.0,
        StatusCode::OK
    );
    assert_eq!(call(&st, "GET", "/health", None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn health_is_503_until_the_models_are_loaded() {
    let st = AppState::new(ServeConfig::default());
    let (s, b, _) = call(&st, "GET", "/health", None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        serde_json::from_slice::<Value>(&b).unwrap()["status"],
        "loading"
    );
    let (s, _, h) = call(&st, "GET", "/v1/models", None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert!(h.contains_key("retry-after"));
}

/// The library's embedding of each text alone (a batch of one), optionally narrowed.
fn reference(texts: &[&str], dimensions: Option<usize>) -> Vec<Vec<f32>> {
    let e = Embedder::load(
        &fixture("embed_tiny"),
        &EmbedderOptions {
            dimensions,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    texts
        .iter()
        .map(|t| e.embed_texts(&[t]).unwrap().remove(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_embeddings_keep_the_bits_of_one_text_alone() {
    let st = state();
    let want = reference(&TEXTS, None);
    let want4 = reference(&TEXTS, Some(4));
    // 96 requests at once, mixing widths, single texts and lists, floats and base64: the
    // batcher packs them into shared forward passes.
    let mut tasks = Vec::new();
    for i in 0..96usize {
        let st = st.clone();
        tasks.push(tokio::spawn(async move {
            let t = i % TEXTS.len();
            let dims = (i % 3 == 0).then_some(4);
            let mut body = json!({"model": "embed", "input": if i % 2 == 0 { json!(TEXTS[t]) } else { json!([TEXTS[t], TEXTS[(t + 1) % TEXTS.len()]]) }});
            if let Some(d) = dims {
                body["dimensions"] = json!(d);
            }
            if i % 5 == 0 {
                body["encoding_format"] = json!("base64");
            }
            let (s, v) = post_json(&st, "/v1/embeddings", body).await;
            (i, t, dims, s, v)
        }));
    }
    let b64 = |s: &str| -> Vec<f32> {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    for task in tasks {
        let (i, t, dims, s, v) = task.await.unwrap();
        assert_eq!(s, StatusCode::OK, "{v}");
        let data = v["data"].as_array().unwrap();
        for (k, d) in data.iter().enumerate() {
            assert_eq!(d["index"], k);
            let got = match &d["embedding"] {
                Value::String(s) => b64(s),
                e => floats(e),
            };
            let w = if dims.is_some() { &want4 } else { &want }[(t + k) % TEXTS.len()].clone();
            let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&w), "request {i} row {k}");
        }
    }
    let (_, m, _) = call(&st, "GET", "/metrics", None).await;
    let m = String::from_utf8(m).unwrap();
    assert!(m.contains("kin_infer_embedding_batch_rows_count"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_and_token_input_and_truncation() {
    let st = state();
    let e = Embedder::load(&fixture("embed_tiny"), &EmbedderOptions::default()).unwrap();
    let enc = e.tokenize(&TEXTS[..2]).unwrap();
    let n: usize = enc.iter().map(|x| x.ids.len()).sum();
    let (s, v) = post_json(
        &st,
        "/v1/embeddings",
        json!({"model": "embed", "input": &TEXTS[..2]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["usage"]["prompt_tokens"], n);
    assert_eq!(v["usage"]["total_tokens"], n);
    // Token ids in give what the same ids give through the library.
    let ids = enc[1].ids.clone();
    let (s, v) = post_json(
        &st,
        "/v1/embeddings",
        json!({"model": "embed", "input": ids}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let want = e.embed_tokens(&[&ids], None).unwrap().remove(0);
    assert_eq!(floats(&v["data"][0]["embedding"]), want);
    // A text over the limit is truncated like `embed` truncates it.
    let long = "hello world ".repeat(100);
    let (s, v) = post_json(
        &st,
        "/v1/embeddings",
        json!({"model": "embed", "input": long}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["usage"]["prompt_tokens"], e.max_length());
    assert_eq!(
        floats(&v["data"][0]["embedding"]),
        e.embed_texts(&[&long]).unwrap()[0]
    );
}

fn reference_generation(prompt_text: &str, max: usize) -> String {
    let dir = fixture("chat_tiny");
    let g = Generator::load(
        &dir,
        &GeneratorOptions {
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    let tok = GenTokenizer::load(&dir).unwrap();
    let rendered = ChatTemplate::load(&dir)
        .unwrap()
        .render(&[ChatMessage::new("user", prompt_text)], true)
        .unwrap();
    let ids = tok.encode_with(&rendered, false).unwrap();
    let params = SamplingParams {
        max_new_tokens: max,
        eos_token_ids: vec![2],
        temperature: 0.8,
        seed: 7,
        ..Default::default()
    };
    let detok: &(dyn Detokenize + Sync) = &tok;
    g.generate(&ids, &params, Some(detok), |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap()
    .text
    .unwrap()
}

/// Concatenates the `content` deltas of an SSE body; checks it ends with `[DONE]`.
fn sse_content(body: &[u8]) -> (String, Option<String>) {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .collect();
    assert_eq!(
        events.last().map(|e| e.trim()),
        Some("data: [DONE]"),
        "{text}"
    );
    let mut out = String::new();
    let mut finish = None;
    for e in &events[..events.len() - 1] {
        let data = e
            .trim()
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("{e}"));
        let v: Value = serde_json::from_str(data).unwrap();
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            out.push_str(c);
        }
        if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    (out, finish)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chat_streamed_equals_unstreamed_equals_the_library() {
    let st = state();
    let want = reference_generation("hello there", 24);
    let req = json!({"model": "chat", "messages": [{"role": "user", "content": "hello there"}],
                     "max_tokens": 24, "temperature": 0.8, "seed": 7});
    let (s, v) = post_json(&st, "/v1/chat/completions", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], want);
    assert_eq!(v["object"], "chat.completion");
    let usage = &v["usage"];
    assert_eq!(
        usage["completion_tokens"].as_u64().unwrap() + usage["prompt_tokens"].as_u64().unwrap(),
        usage["total_tokens"].as_u64().unwrap()
    );
    // Eight streams at once, each its own cache: all the same text as the library's.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let st = st.clone();
        let mut r = req.clone();
        r["stream"] = json!(true);
        tasks.push(tokio::spawn(async move {
            call(&st, "POST", "/v1/chat/completions", Some(&r.to_string())).await
        }));
    }
    for t in tasks {
        let (s, body, h) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK);
        assert_eq!(h["content-type"], "text/event-stream");
        let (text, finish) = sse_content(&body);
        assert_eq!(text, want);
        assert!(finish.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_queue_answers_429_with_retry_after() {
    let st = state_with(ServeConfig {
        max_concurrent: 1,
        queue: 1,
        ..Default::default()
    });
    // The test holds the only generation slot, so the first request waits in the queue and
    // the second finds it full.
    let held = st.gen_slots.clone().acquire_owned().await.unwrap();
    let req = json!({"model": "chat", "prompt": [3, 4, 5], "max_tokens": 8, "temperature": 0})
        .to_string();
    let waiting = {
        let (st, req) = (st.clone(), req.clone());
        tokio::spawn(async move { call(&st, "POST", "/v1/completions", Some(&req)).await })
    };
    while st
        .metrics
        .gen_waiting
        .load(std::sync::atomic::Ordering::SeqCst)
        == 0
    {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let (s, b, h) = call(&st, "POST", "/v1/completions", Some(&req)).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(h["retry-after"], "1");
    let v: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
    drop(held);
    let (s, b, _) = waiting.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
}

#[tokio::test]
async fn openapi_describes_every_route() {
    let st = AppState::new(ServeConfig::default());
    let (s, b, _) = call(&st, "GET", "/openapi.json", None).await;
    assert_eq!(s, StatusCode::OK);
    let v: Value = serde_json::from_slice(&b).unwrap();
    for p in [
        "/v1/embeddings",
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
        "/health",
        "/metrics",
    ] {
        assert!(v["paths"][p].is_object(), "{p} missing");
    }
    let (s, b, _) = call(&st, "GET", "/", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(String::from_utf8(b)
        .unwrap()
        .contains("/v1/chat/completions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gguf_files_serve_and_a_model_without_template_says_so() {
    let gguf = |p: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/gguf")
            .join(p)
    };
    let st = AppState::new(ServeConfig::default());
    let specs = [
        ModelSpec::parse(&gguf("decoders/qwen2_bias.q4_0.gguf").display().to_string()).unwrap(),
        ModelSpec::parse(&format!(
            "enc={}",
            gguf("encoders/bert_tiny.f32.gguf").display()
        ))
        .unwrap(),
    ];
    assert_eq!(specs[0].id, "qwen2_bias.q4_0.gguf");
    load_models(&st, &specs, Some(1)).unwrap();
    let (s, v) = post_json(&st, "/v1/completions", json!({"model": "qwen2_bias.q4_0.gguf", "prompt": "abc", "max_tokens": 5, "temperature": 0})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        v["usage"]["completion_tokens"].as_u64().unwrap()
            + v["usage"]["prompt_tokens"].as_u64().unwrap(),
        v["usage"]["total_tokens"].as_u64().unwrap()
    );
    let (s, v) = post_json(
        &st,
        "/v1/chat/completions",
        json!({"model": "qwen2_bias.q4_0.gguf", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("chat template"),
        "{v}"
    );
    let (s, v) = post_json(
        &st,
        "/v1/embeddings",
        json!({"model": "enc", "input": [[2, 7, 9, 3]]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let e = Embedder::load(
        &gguf("encoders/bert_tiny.f32.gguf"),
        &EmbedderOptions::default(),
    )
    .unwrap();
    assert_eq!(
        floats(&v["data"][0]["embedding"]),
        e.embed_tokens(&[&[2, 7, 9, 3]], None).unwrap()[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_input_tokens_bounds_a_request() {
    let st = state_with(ServeConfig {
        max_input_tokens: Some(8),
        ..Default::default()
    });
    let (s, v) = post_json(
        &st,
        "/v1/embeddings",
        json!({"model": "embed", "input": ["hello world", "hello world"]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = post_json(
        &st,
        "/v1/embeddings",
        json!({"model": "embed", "input": ["hello world", "hello world", "a"]}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 8"),
        "{v}"
    );
    let (s, _) = post_json(
        &st,
        "/v1/completions",
        json!({"model": "chat", "prompt": vec![3; 9], "max_tokens": 1}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = post_json(
        &st,
        "/v1/completions",
        json!({"model": "chat", "prompt": vec![3; 8], "max_tokens": 1}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_allows_the_configured_origin_only() {
    let st = state_with(ServeConfig {
        cors: Some("http://editor.local".into()),
        ..Default::default()
    });
    let preflight = [
        ("origin", "http://editor.local"),
        ("access-control-request-method", "POST"),
        (
            "access-control-request-headers",
            "content-type,authorization",
        ),
    ];
    let (s, _, h) = call_with(&st, "OPTIONS", "/v1/embeddings", None, &preflight).await;
    assert!(s.is_success(), "{s}");
    assert_eq!(h["access-control-allow-origin"], "http://editor.local");
    let other = [("origin", "http://elsewhere.example")];
    // Another origin is not echoed back (the browser then refuses the response).
    let (_, _, h) = call_with(&st, "GET", "/v1/models", None, &other).await;
    assert_eq!(h["access-control-allow-origin"], "http://editor.local");
    // Without --cors no browser origin is allowed.
    let (_, _, h) = call_with(&state(), "GET", "/v1/models", None, &other).await;
    assert!(!h.contains_key("access-control-allow-origin"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prompts_fed_in_chunks_beside_running_streams_generate_the_same() {
    let st = state_with(ServeConfig {
        prefill_chunk: 4,
        ..Default::default()
    });
    let want = reference_generation("hello there", 24);
    let req = json!({"model": "chat", "messages": [{"role": "user", "content": "hello there"}],
                     "max_tokens": 24, "temperature": 0.8, "seed": 7});
    let mut tasks = Vec::new();
    for i in 0..6 {
        let st = st.clone();
        let mut r = req.clone();
        r["stream"] = json!(i % 2 == 0);
        tasks.push(tokio::spawn(async move {
            call(&st, "POST", "/v1/chat/completions", Some(&r.to_string())).await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let (s, body, _) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK);
        let text = if i % 2 == 0 {
            sse_content(&body).0
        } else {
            let v: Value = serde_json::from_slice(&body).unwrap();
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(text, want, "request {i}");
    }
}
