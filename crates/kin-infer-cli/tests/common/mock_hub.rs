//! A Hugging Face Hub on 127.0.0.1 speaking just enough HTTP/1.1 for the `hf-hub` crate's
//! sync API (0.4): `GET /{repo}/resolve/main/{file}` with a `Range` header. hf-hub first asks
//! for `bytes=0-0` and reads `etag` (the blob name), `x-repo-commit` (the snapshot name) and
//! `Content-Range` (`bytes 0-0/SIZE`) from the answer, then asks for `bytes=N-` and stores
//! the body. A file the repo lacks is a 404, which hf-hub reports as an error. Every
//! response closes its connection, so neither of hf-hub's two connection pools can leave a
//! request waiting on a connection this server has stopped reading.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The commit every file is served at (hf-hub names the snapshot directory after it).
pub const COMMIT: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

pub struct MockHub {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// `METHOD path` of every request, in order.
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl MockHub {
    /// Serves every file under `dir` (relative paths, `/`-separated) as repo `repo_id`.
    pub fn serve_dir(repo_id: &str, dir: &Path) -> MockHub {
        let mut files = HashMap::new();
        collect(dir, dir, &mut files);
        MockHub::start(repo_id, files)
    }

    pub fn start(repo_id: &str, files: HashMap<String, Vec<u8>>) -> MockHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Non-blocking accept so the loop sees `stop` and the port really closes on shutdown.
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let prefix = format!("/{repo_id}/resolve/main/");
        let files = Arc::new(files);
        let thread = {
            let stop = stop.clone();
            let requests = requests.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let (files, requests, prefix) =
                                (files.clone(), requests.clone(), prefix.clone());
                            std::thread::spawn(move || {
                                let _ = handle(s, &files, &requests, &prefix);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        MockHub {
            port,
            stop,
            thread: Some(thread),
            requests,
        }
    }

    /// What HF_ENDPOINT should be.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// Stops accepting and closes the port.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MockHub {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// A port nothing listens on (bound, then released).
pub fn closed_port_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

fn collect(root: &Path, dir: &Path, out: &mut HashMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(root, &p, out);
        } else {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read(&p).unwrap());
        }
    }
}

/// FNV-1a: a stable, content-derived etag (hf-hub uses it as the blob's file name).
fn etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}{:08x}", bytes.len())
}

fn handle(
    stream: TcpStream,
    files: &HashMap<String, Vec<u8>>,
    requests: &Mutex<Vec<String>>,
    prefix: &str,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut range = None;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    requests.lock().unwrap().push(format!("{method} {path}"));
    let mut w = stream;
    let Some(body) = path.strip_prefix(prefix).and_then(|f| files.get(f)) else {
        return w.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    };
    let total = body.len();
    // `bytes=A-` or `bytes=A-B` (inclusive); anything else is the whole file.
    let (start, end) = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .map(|(a, b)| {
            let a: usize = a.parse().unwrap_or(0);
            let b: usize = b.parse().map_or(total.saturating_sub(1), |b: usize| b);
            (a.min(total), (b + 1).min(total))
        })
        .unwrap_or((0, total));
    let chunk = &body[start..end.max(start)];
    let head = format!(
        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\n\
         etag: \"{}\"\r\nx-repo-commit: {COMMIT}\r\nConnection: close\r\n\r\n",
        chunk.len(),
        start,
        end.max(start + 1) - 1,
        total,
        etag(body)
    );
    w.write_all(head.as_bytes())?;
    if method != "HEAD" {
        w.write_all(chunk)?;
    }
    w.flush()
}
