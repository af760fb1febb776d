//! The accept loop: HTTP/1.1 connections served by hyper with a header read timeout, and the
//! few responses hyper writes by itself given JSON bodies.
//!
//! `axum::serve` sets no timer, so hyper never times out a request head: a client trickling
//! header bytes held its connection forever. Here each connection gets hyper's
//! `header_read_timeout` (`--request-timeout`). On that timeout hyper closes the connection
//! without a response; [`Guarded`] then writes a 408 with a JSON body itself when part of a
//! head had arrived (a client that connected and sent nothing, or an idle keep-alive
//! connection, is closed without one: there is no request to answer, and a 408 there would be
//! read by a client reusing the connection as the answer to its next request).
//!
//! hyper answers a request line or headers it cannot parse (400), headers over the limits
//! (431: [`MAX_HEADER_BYTES`], or more than 100 headers) and a URI too long (414) from inside its
//! parser with a bare head and `content-length: 0`; it offers no hook for the body
//! (hyper 1.x, `proto/h1/role.rs`, `Server::on_error`). The application never sends such a
//! head (its every 4xx has a JSON body), so [`Guarded`] recognizes exactly that write and
//! sends the same status with an error body in OpenAI's shape instead.
//!
//! Shutdown is `axum::serve`'s: stop accepting, let every connection finish its in-flight
//! request (hyper's graceful shutdown), return once all are closed.

use crate::error::ApiError;
use axum::http::StatusCode;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head (request line and headers) read: a limit of its own, because
/// hyper's default (its ~400 KiB read buffer) applies only when the head arrives in pieces.
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// Serves `app` on `listener` until `shutdown` completes, then drains the connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    request_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => connection(tcp, &app, request_timeout, &graceful),
                // A peer that reset before we accepted it costs nothing; out of file
                // descriptors (or memory) is worth a line and a pause, not an exit.
                Err(e) if is_peer_error(&e) => {}
                Err(e) => {
                    eprintln!("kin-infer serve: accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

fn is_peer_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    )
}

fn connection(tcp: TcpStream, app: &Router, timeout: Duration, graceful: &GracefulShutdown) {
    let timed_out = Arc::new(AtomicBool::new(false));
    let io = TokioIo::new(Guarded::new(tcp, timed_out.clone(), timeout));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .max_header_size(MAX_HEADER_BYTES)
        .serve_connection(io, TowerToHyperService::new(app.clone()));
    let conn = graceful.watch(conn);
    tokio::spawn(async move {
        let mut conn = std::pin::pin!(conn);
        if let Err(e) = conn.as_mut().await {
            if e.is_timeout() {
                timed_out.store(true, Ordering::Release);
            }
        }
        // `conn` is dropped here, after the flag: its `Guarded` writes the 408 then.
    });
}

/// The body of an error response hyper cannot give one, as a whole HTTP/1.1 response.
fn error_response(e: &ApiError) -> Vec<u8> {
    let body = serde_json::to_vec(&e.body()).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        e.status.as_u16(),
        e.status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

fn header_timeout_error(timeout: Duration) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "request_timeout",
        format!(
            "the request's headers did not arrive within --request-timeout ({} s)",
            timeout.as_secs_f64()
        ),
    )
}

/// The response for `buf` when it is exactly one of hyper's own bodiless parse-error heads.
fn rewrite_parse_error(buf: &[u8]) -> Option<Vec<u8>> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    if head_end + 4 != buf.len() {
        return None; // a head with a body after it is the application's
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let (status_line, headers) = head.split_once("\r\n").unwrap_or((head.as_str(), ""));
    if !headers.split("\r\n").any(|h| h == "content-length: 0") {
        return None;
    }
    let (code, message) = match status_line.strip_prefix("http/1.1 ")?.get(..3)? {
        "400" => (
            "bad_http",
            "the request line or headers are not valid HTTP/1.1",
        ),
        "414" => ("uri_too_long", "the request's URI is too long"),
        "431" => (
            "headers_too_large",
            "the request's headers are over the server's limits (64 KiB, at most 100 headers)",
        ),
        _ => return None,
    };
    let status = match code {
        "bad_http" => StatusCode::BAD_REQUEST,
        "uri_too_long" => StatusCode::URI_TOO_LONG,
        _ => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
    };
    Some(error_response(&ApiError::new(status, code, message)))
}

/// A connection's socket as hyper sees it, with the two interventions the module doc tells.
struct Guarded {
    tcp: TcpStream,
    /// Bytes arrived since the last response bytes left: a request is in progress. When
    /// hyper then reports a header timeout, it was a head that stalled.
    read_since_write: bool,
    /// Set by the connection's task when hyper gave up on a head (its header timeout).
    timed_out: Arc<AtomicBool>,
    timeout: Duration,
    /// A rewritten response still to send, and how much of it has been.
    pending: Vec<u8>,
    sent: usize,
}

impl Guarded {
    fn new(tcp: TcpStream, timed_out: Arc<AtomicBool>, timeout: Duration) -> Self {
        Guarded {
            tcp,
            read_since_write: false,
            timed_out,
            timeout,
            pending: Vec::new(),
            sent: 0,
        }
    }

    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let n = ready!(Pin::new(&mut self.tcp).poll_write(cx, &self.pending[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // Best effort and without waiting: a socket whose buffer is full (a client that does
        // not read) gets no 408, only the close.
        if self.sent < self.pending.len() {
            let _ = self.tcp.try_write(&self.pending[self.sent..]);
        } else if self.read_since_write && self.timed_out.load(Ordering::Acquire) {
            let _ = self
                .tcp
                .try_write(&error_response(&header_timeout_error(self.timeout)));
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.tcp).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.read_since_write = true;
        }
        r
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(resp) = rewrite_parse_error(buf) {
            this.pending = resp;
            this.sent = 0;
            this.read_since_write = false;
            // hyper's bytes count as written; ours go out here and in poll_flush.
            let _ = this.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        let r = Pin::new(&mut this.tcp).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.read_since_write = false;
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }

    // Not vectored: hyper then flattens each message into one buffer, so a parse-error head
    // arrives in one write, whole, where `rewrite_parse_error` can recognize it.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bare_parse_error_heads_are_rewritten() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = String::from_utf8(rewrite_parse_error(bare).unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
        let body = out.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "bad_http");
        let big = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert!(String::from_utf8(rewrite_parse_error(big).unwrap())
            .unwrap()
            .contains("headers_too_large"));
        // The application's own responses pass untouched.
        let app = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        assert!(rewrite_parse_error(app).is_none());
        let app_head = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 20\r\n\r\n";
        assert!(rewrite_parse_error(app_head).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(rewrite_parse_error(ok).is_none());
    }
}
