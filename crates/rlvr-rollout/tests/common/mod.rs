//! A fake vLLM server for the tests: a `TcpListener` on 127.0.0.1:0 in a thread that answers
//! each HTTP/1.1 request (one per connection, `Connection: close`) with what a handler returns.
//! It answers at most `max_requests` requests (more get HTTP 599, which the tests assert
//! against), stops by itself after `lifetime`, and stops when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// `GET` / `POST`.
    pub method: String,
    /// The route.
    pub path: String,
    /// The body (empty for GET).
    pub body: String,
    /// 0-based number of the request at this server.
    pub seq: usize,
}

impl FakeRequest {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What the fake answers.
#[derive(Debug, Clone)]
pub struct FakeReply {
    /// HTTP status.
    pub status: u16,
    /// Body.
    pub body: String,
    /// Sleep before answering.
    pub delay: Duration,
}

impl FakeReply {
    pub fn ok(body: impl Into<String>) -> Self {
        Self { status: 200, body: body.into(), delay: Duration::ZERO }
    }
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Self { status, body: body.into(), delay: Duration::ZERO }
    }
    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

type Handler = dyn Fn(&FakeRequest) -> FakeReply + Send + Sync;

pub struct FakeServer {
    pub url: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub log: Arc<Mutex<Vec<FakeRequest>>>,
    /// Most requests being handled at once.
    pub max_concurrent: Arc<AtomicUsize>,
    /// Requests refused because `max_requests` was reached.
    pub overflow: Arc<AtomicUsize>,
}

impl FakeServer {
    /// Starts a fake answering at most `max_requests` requests, for at most `lifetime`.
    pub fn start(
        max_requests: usize,
        lifetime: Duration,
        handler: impl Fn(&FakeRequest) -> FakeReply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let max_concurrent = Arc::new(AtomicUsize::new(0));
        let overflow = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (stop2, log2, maxc, over) = (stop.clone(), log.clone(), max_concurrent.clone(), overflow.clone());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let active = Arc::new(AtomicUsize::new(0));
            let seq = Arc::new(AtomicUsize::new(0));
            let mut conns: Vec<JoinHandle<()>> = Vec::new();
            while !stop2.load(Ordering::Relaxed) && t0.elapsed() < lifetime {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (h, log, active, seq, maxc, over) =
                            (handler.clone(), log2.clone(), active.clone(), seq.clone(), maxc.clone(), over.clone());
                        conns.push(std::thread::spawn(move || {
                            serve(stream, &*h, &log, &active, &seq, &maxc, &over, max_requests)
                        }));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    Err(_) => break,
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Self { url, stop, thread: Some(thread), log, max_concurrent, overflow }
    }

    /// Requests seen so far.
    pub fn requests(&self) -> Vec<FakeRequest> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn serve(
    stream: TcpStream,
    handler: &Handler,
    log: &Mutex<Vec<FakeRequest>>,
    active: &AtomicUsize,
    seq: &AtomicUsize,
    max_concurrent: &AtomicUsize,
    overflow: &AtomicUsize,
    max_requests: usize,
) {
    stream.set_nonblocking(false).ok();
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
    max_concurrent.fetch_max(now, Ordering::SeqCst);
    let n = seq.fetch_add(1, Ordering::SeqCst);
    let req = FakeRequest { method, path, body: String::from_utf8_lossy(&body).into_owned(), seq: n };
    log.lock().unwrap().push(req.clone());
    let reply = if n >= max_requests {
        overflow.fetch_add(1, Ordering::SeqCst);
        FakeReply::status(599, "the fake's request bound was exceeded")
    } else {
        handler(&req)
    };
    std::thread::sleep(reply.delay);
    active.fetch_sub(1, Ordering::SeqCst);
    let mut out = stream;
    let head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.body.len()
    );
    let _ = out.write_all(head.as_bytes()).and_then(|_| out.write_all(reply.body.as_bytes()));
    let _ = out.flush();
}

/// A fixture under `tests/fixtures/`.
pub fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A port nothing listens on (bound, then released).
pub fn closed_port_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    url
}
