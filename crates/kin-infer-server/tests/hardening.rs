//! Hostile clients (issue 30): the memory budget (a 400 for what could never fit, a wait then
//! a 503 for what does not fit now, concurrent huge `max_tokens` all answered), read timeouts
//! over a real socket (a stalled body and trickled headers get a 408 with a JSON body), a body
//! declared over `--max-body` refused from its `Content-Length` without `100 Continue`,
//! hyper's own parse errors with JSON bodies, a lowercase `bearer`, empty embedding input,
//! and type errors that name their field.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kin_infer_server::{load_models, router, AppState, ModelSpec, ServeConfig};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tower::ServiceExt;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/server_fixtures")
        .join(name)
}

/// chat_tiny with a context of 2^18 positions (its KV cache: 512 bytes per position), in a
/// temporary directory of its own: a long-context model whose every cache is cheap to test.
fn long_context_model(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kin-hardening-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in std::fs::read_dir(fixture("chat_tiny")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let cfg_path = dir.join("config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["max_position_embeddings"] = json!(1 << 18);
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    dir
}

fn state(tag: &str, cfg: ServeConfig) -> AppState {
    let st = AppState::new(cfg);
    let specs = [
        ModelSpec::parse(&format!("embed={}", fixture("embed_tiny").display())).unwrap(),
        ModelSpec::parse(&format!("chat={}", long_context_model(tag).display())).unwrap(),
    ];
    load_models(&st, &specs, Some(1)).unwrap();
    st
}

async fn post(
    st: &AppState,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (StatusCode, Value, axum::http::HeaderMap) {
    let mut req = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Body::from(body.to_string())).unwrap();
    let resp = router(st.clone()).oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{path}: not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (parts.status, v, parts.headers)
}

fn completion(max_tokens: Option<u64>) -> Value {
    let mut b = json!({"model": "chat", "prompt": "hello", "temperature": 0});
    if let Some(n) = max_tokens {
        b["max_tokens"] = json!(n);
    }
    b
}

/// Waits (at most 5 s) for every reservation to be given back: a scheduler drops a finished
/// job just after it has handed the client its answer.
async fn released(st: &AppState) {
    let t0 = Instant::now();
    while st.budget.used() != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{} bytes still reserved",
            st.budget.used()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The `at most N` of a memory-budget 400.
fn at_most(v: &Value) -> u64 {
    let msg = v["error"]["message"].as_str().unwrap();
    msg.rsplit("at most ")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{msg}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_that_could_never_fit_is_a_400_naming_max_tokens_and_what_fits() {
    // 64 KiB: 85 positions of 768 bytes (512 of KV cache, 256 of bookkeeping).
    let st = state(
        "never",
        ServeConfig {
            memory_budget: Some(64 << 10),
            ..Default::default()
        },
    );
    let (s, v, _) = post(&st, "/v1/completions", &completion(Some(200_000)), &[]).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["code"], "memory_budget");
    assert_eq!(v["error"]["param"], "max_tokens");
    let fit = at_most(&v);
    assert!((50..85).contains(&fit), "{v}");
    let (s, v, _) = post(&st, "/v1/completions", &completion(Some(fit + 1)), &[]).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("memory_budget"))
    );
    let (s, v, _) = post(&st, "/v1/completions", &completion(Some(fit)), &[]).await;
    assert_eq!(s, StatusCode::OK, "exactly what fits runs: {v}");
    // Without max_tokens the default (the rest of a 262144-token context) is capped to what
    // the budget holds, not refused.
    let (s, v, _) = post(&st, "/v1/completions", &completion(None), &[]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(
        v["usage"]["completion_tokens"].as_u64().unwrap() <= fit,
        "{v}"
    );
    // A prompt that alone is over the budget names the prompt.
    let long = json!({"model": "chat", "prompt": "hello ".repeat(200), "max_tokens": 1});
    let (s, v, _) = post(&st, "/v1/completions", &long, &[]).await;
    assert_eq!(
        (s, v["error"]["param"].as_str()),
        (StatusCode::BAD_REQUEST, Some("prompt")),
        "{v}"
    );
    released(&st).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_that_does_not_fit_now_waits_then_gets_a_503_with_retry_after() {
    let st = state(
        "wait",
        ServeConfig {
            memory_budget: Some(1 << 20),
            request_timeout: Duration::from_millis(300),
            ..Default::default()
        },
    );
    // Running generations hold the whole budget.
    let held = st.budget.try_reserve(st.budget.total()).unwrap();
    let t0 = Instant::now();
    let (s, v, h) = post(&st, "/v1/completions", &completion(Some(4)), &[]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "memory_budget");
    assert_eq!(h["retry-after"], "1");
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "it waited for room first"
    );
    // A request that is waiting runs as soon as the room is given back.
    let waiting = {
        let st = st.clone();
        tokio::spawn(async move {
            post(&st, "/v1/completions", &completion(Some(4)), &[])
                .await
                .0
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(held);
    assert_eq!(waiting.await.unwrap(), StatusCode::OK);
    // The scheduler gives the generation's room back once it retires it, which may be just
    // after the response's last byte: wait for that (a bounded poll, not a sleep).
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let m = router(st.clone())
            .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let text =
            String::from_utf8(m.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        if text.contains("kin_infer_memory_reserved_bytes 0\n") || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        text.contains("kin_infer_memory_budget_bytes 1048576"),
        "{text}"
    );
    assert!(
        text.contains("kin_infer_memory_reserved_bytes 0\n"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_huge_max_tokens_are_all_answered_within_the_budget() {
    // Room for two of the largest at once; sixteen ask for it, streamed and not.
    let st = state(
        "concurrent",
        ServeConfig {
            memory_budget: Some(128 << 10),
            max_concurrent: 8,
            ..Default::default()
        },
    );
    let (_, v, _) = post(&st, "/v1/completions", &completion(Some(200_000)), &[]).await;
    let fit = at_most(&v) / 2;
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watcher = {
        let (st, peak) = (st.clone(), peak.clone());
        tokio::spawn(async move {
            loop {
                peak.fetch_max(st.budget.used(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let mut tasks = Vec::new();
    for i in 0..16 {
        let st = st.clone();
        let mut body = completion(Some(fit));
        body["stream"] = json!(i % 2 == 0);
        body["seed"] = json!(i);
        body["temperature"] = json!(1);
        tasks.push(tokio::spawn(async move {
            let req = Request::post("/v1/completions")
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap();
            let resp = router(st).oneshot(req).await.unwrap();
            let s = resp.status();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (s, String::from_utf8_lossy(&bytes).into_owned())
        }));
    }
    for t in tasks {
        let (s, body) = t.await.unwrap();
        assert_eq!(s, StatusCode::OK, "{body}");
        assert!(
            body.contains("[DONE]") || body.contains("\"usage\""),
            "{body}"
        );
    }
    watcher.abort();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        peak > 0 && peak <= st.budget.total(),
        "peak {peak} within {}",
        st.budget.total()
    );
    released(&st).await;
}

/// A real server on a free port (the accept loop with its timeouts), until the test ends.
async fn socket_server(cfg: ServeConfig) -> SocketAddr {
    let st = AppState::new(cfg);
    let specs = [ModelSpec::parse(&format!("chat={}", fixture("chat_tiny").display())).unwrap()];
    load_models(&st, &specs, Some(1)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let timeout = st.cfg.request_timeout;
    tokio::spawn(kin_infer_server::conn::serve(
        listener,
        router(st),
        timeout,
        std::future::pending(),
    ));
    addr
}

/// Sends `parts` with `pause` between them, then reads until the server closes (or 10 s).
fn exchange(addr: SocketAddr, parts: &[&[u8]], pause: Duration) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for p in parts {
        if s.write_all(p).is_err() {
            break; // the server may close before all is sent
        }
        std::thread::sleep(pause);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The status and JSON error body of one raw response.
fn parse_error(resp: &str) -> (u16, Value) {
    let status = resp
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{resp:?}"));
    let body = resp.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {resp:?}"));
    assert!(v["error"]["message"].is_string(), "{resp}");
    (status, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_and_trickled_headers_get_a_408_with_a_json_body() {
    let addr = socket_server(ServeConfig {
        request_timeout: Duration::from_millis(500),
        ..Default::default()
    })
    .await;
    let r = tokio::task::spawn_blocking(move || {
        let t0 = Instant::now();
        let stalled = exchange(addr, &[b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\""], Duration::ZERO);
        let stalled_s = t0.elapsed();
        // One header byte every 100 ms: never a whole head within 500 ms.
        let head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
        let bytes: Vec<&[u8]> = head.chunks(1).collect();
        let t0 = Instant::now();
        let trickled = exchange(addr, &bytes, Duration::from_millis(100));
        let trickled_s = t0.elapsed();
        // A connection that sends nothing is closed without an answer.
        let silent = exchange(addr, &[], Duration::ZERO);
        (stalled, stalled_s, trickled, trickled_s, silent)
    })
    .await
    .unwrap();
    let (stalled, stalled_s, trickled, trickled_s, silent) = r;
    let (s, v) = parse_error(&stalled);
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (408, Some("request_timeout")),
        "{stalled}"
    );
    assert!(stalled_s >= Duration::from_millis(500) && stalled_s < Duration::from_secs(5));
    let (s, v) = parse_error(&trickled);
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (408, Some("request_timeout")),
        "{trickled}"
    );
    assert!(
        trickled_s < Duration::from_secs(5),
        "cut at the timeout, not after the whole head"
    );
    assert_eq!(silent, "", "nothing to answer on a silent connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_over_max_body_is_413_at_once_without_100_continue() {
    let addr = socket_server(ServeConfig {
        max_body: 1000,
        ..Default::default()
    })
    .await;
    let resp = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out); // the body was never sent: the answer cannot wait for it
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .unwrap();
    assert!(!resp.contains("100 Continue"), "{resp}");
    let (s, v) = parse_error(&resp);
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (413, Some("body_too_large")),
        "{resp}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_hyper_cannot_parse_get_json_bodies() {
    let addr = socket_server(ServeConfig::default()).await;
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"NOT HTTP AT ALL\r\n\r\n".to_vec(), 400, "bad_http"),
        (
            b"GET /health HTTP/1.1\r\nBad Header\r\n\r\n".to_vec(),
            400,
            "bad_http",
        ),
        (
            [
                &b"GET /health HTTP/1.1\r\nX: "[..],
                &vec![b'a'; 100_000],
                b"\r\n\r\n",
            ]
            .concat(),
            431,
            "headers_too_large",
        ),
    ];
    for (req, status, code) in cases {
        let shown = String::from_utf8_lossy(&req[..req.len().min(60)]).into_owned();
        let resp = tokio::task::spawn_blocking(move || exchange(addr, &[&req], Duration::ZERO))
            .await
            .unwrap();
        assert!(
            resp.starts_with(&format!("HTTP/1.1 {status}")),
            "{shown:?}: {resp}"
        );
        let (s, v) = parse_error(&resp);
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{resp}"
        );
    }
    // The server still answers.
    let ok = tokio::task::spawn_blocking(move || {
        exchange(
            addr,
            &[b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
            Duration::ZERO,
        )
    })
    .await
    .unwrap();
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_is_case_insensitive_and_a_wrong_scheme_is_not_called_missing() {
    let st = state(
        "auth",
        ServeConfig {
            api_key: Some("k1".into()),
            ..Default::default()
        },
    );
    let body = json!({"model": "embed", "input": "a"});
    for auth in ["Bearer k1", "bearer k1", "BEARER    k1"] {
        let (s, v, _) = post(&st, "/v1/embeddings", &body, &[("authorization", auth)]).await;
        assert_eq!(s, StatusCode::OK, "{auth}: {v}");
    }
    let (s, v, _) = post(
        &st,
        "/v1/embeddings",
        &body,
        &[("authorization", "Basic k1")],
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(!msg.contains("required"), "a header was given: {msg}");
    let (s, v, _) = post(
        &st,
        "/v1/embeddings",
        &body,
        &[("authorization", "bearer nope")],
    )
    .await;
    assert_eq!(
        (s, v["error"]["message"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("the API key is wrong"))
    );
}

/// A valid completions or embeddings request with `field` set to a bad `value`, and the field
/// the 400 must name.
fn bad(
    path: &'static str,
    field: &'static str,
    value: Value,
) -> (&'static str, Value, &'static str) {
    let mut body = if path == "/v1/completions" {
        json!({"model": "chat", "prompt": "x"})
    } else {
        json!({"model": "embed", "input": "a"})
    };
    body[field] = value;
    (path, body, field)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_inputs_and_bad_field_values_are_400s_naming_the_field() {
    let st = state("fields", ServeConfig::default());
    let cases: Vec<(&str, Value, &str)> = vec![
        bad("/v1/embeddings", "input", json!("")),
        bad("/v1/embeddings", "input", json!([])),
        bad("/v1/embeddings", "input", json!(["a", ""])),
        bad("/v1/embeddings", "dimensions", json!(-1)),
        ("/v1/embeddings", json!({"input": "a"}), "model"),
        bad("/v1/completions", "max_tokens", json!(-1)),
        bad("/v1/completions", "max_tokens", json!(1e10)),
        bad("/v1/completions", "max_tokens", json!(99_999_999_999u64)),
        bad("/v1/completions", "seed", json!(-1)),
        bad("/v1/completions", "max_tokens", json!(0)),
        (
            "/v1/chat/completions",
            json!({"model": "chat", "messages": [{"role": "user", "content": "x"}],
                   "max_completion_tokens": 0}),
            "max_completion_tokens",
        ),
        bad("/v1/completions", "temperature", json!("hot")),
        bad("/v1/completions", "temperature", json!(1e39)),
        bad("/v1/completions", "top_p", json!(-0.5)),
        bad("/v1/completions", "presence_penalty", json!(1e300)),
        (
            "/v1/chat/completions",
            json!({"model": "chat", "messages": [{"role": 5}]}),
            "messages[0].role",
        ),
    ];
    for (path, body, field) in cases {
        let (s, v, _) = post(&st, path, &body, &[]).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["param"], field, "{body}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(!msg.contains("is required"), "{body}: {msg}");
    }
}
