//! The LLM pipeline end to end against recorded fixture dialogs served by a loopback HTTP
//! server inside the test (nothing leaves 127.0.0.1), then replayed offline from the cache.
//!
//! The dialogs (`tests/fixtures/dialogs/*.json`, written by `scripts/make_dialog_fixtures.py`)
//! are hand-authored test fixtures, not answers of a language model.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use lare::llm::{
    generate_encoder, tasks, CacheMode, CachedChat, ChatConfig, ChatRequest, HttpChat, Message, PipelineParams,
    ProbeSet, ResponseCache, ScriptedTurn, Source,
};
use lare::{LareError, LatentEncoder, SandboxLimits};
use rl_core::Params;

#[derive(serde::Deserialize)]
struct Dialog {
    #[allow(dead_code)]
    note: String,
    turns: Vec<ScriptedTurn>,
}

fn dialog(name: &str) -> Vec<ScriptedTurn> {
    let path = format!("{}/tests/fixtures/dialogs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let d: Dialog = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    d.turns
}

/// A one-thread HTTP/1.1 server on 127.0.0.1 that answers each POST with the next turn (or a
/// fixed error status), records the request bodies, and stops after `max_requests` or when no
/// client connects for 20 s.
struct FakeServer {
    url: String,
    requests: Arc<Mutex<Vec<serde_json::Value>>>,
    handle: Option<JoinHandle<()>>,
}

fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut head = String::new();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().ok()?;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some((head, body))
}

impl FakeServer {
    fn start(mut turns: Vec<ScriptedTurn>, error_status: Option<u16>, max_requests: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(false).unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        turns.reverse();
        let handle = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            listener.set_nonblocking(true).unwrap();
            let mut served = 0;
            while served < max_requests && std::time::Instant::now() < deadline {
                let mut stream = match listener.accept() {
                    Ok((s, _)) => s,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let Some((head, body)) = read_request(&mut stream) else { continue };
                served += 1;
                assert!(head.starts_with("POST /v1/chat/completions "), "{head}");
                let req: serde_json::Value = serde_json::from_slice(&body).unwrap();
                seen.lock().unwrap().push(req.clone());
                let (status, text) = match error_status {
                    Some(code) => (code, "{\"error\": {\"message\": \"overloaded\"}}".to_string()),
                    None => {
                        let turn = turns.pop().expect("the client asked more than the dialog holds");
                        let last_user = req["messages"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .rev()
                            .find(|m| m["role"] == "user")
                            .and_then(|m| m["content"].as_str())
                            .unwrap_or("")
                            .to_string();
                        if let Some(exp) = &turn.expect {
                            assert!(last_user.contains(exp.as_str()), "expected {exp:?} in {last_user:?}");
                        }
                        let n = req["n"].as_u64().unwrap() as usize;
                        let answers: Vec<String> = turn.answers.into_iter().take(n).collect();
                        let resp = lare::llm::ChatResponse::synthetic(req["model"].as_str().unwrap(), &answers);
                        (200, resp.to_string())
                    }
                };
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(reply.as_bytes());
                let _ = stream.flush();
            }
        });
        Self { url, requests, handle: Some(handle) }
    }

    fn stop(mut self) -> Vec<serde_json::Value> {
        // wake the accept loop so the thread ends now rather than at its deadline
        let addr = self.url.trim_start_matches("http://").trim_end_matches("/v1").to_string();
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(b"\r\n");
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let r = self.requests.lock().unwrap().clone();
        r
    }
}

fn probe() -> ProbeSet {
    let mut env =
        rl_envs::classic::Pendulum::new(rl_envs::classic::PendulumParams::default().check().unwrap()).unwrap();
    ProbeSet::from_env(&mut env, 16, &mut rl_core::rng_from_seed(3)).unwrap()
}

fn params() -> PipelineParams {
    PipelineParams::default().model("fixture-model").n_candidates(3)
}

#[test]
fn fixture_dialog_with_repairs_then_offline_replay() {
    let server = FakeServer::start(dialog("pendulum_repair"), None, 4);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = ResponseCache::new(cache_dir.path());
    let http = HttpChat::new(ChatConfig::new(server.url.clone(), "fixture-model"));
    let mut chat =
        CachedChat::new(cache.clone(), CacheMode::RecordMissing, Box::new(http), Source::TestFixture, "fixture");
    let prompt = tasks::pendulum();
    let p = params().check().unwrap();
    let record = generate_encoder(&mut chat, &prompt, &probe(), &p).unwrap();
    let requests = server.stop();

    // LaRe's schedule: 3 candidates at T = 1.0, then summary and repairs at T = 0.3, n = 1
    assert_eq!(requests.len(), 4);
    assert_eq!((requests[0]["n"].as_u64(), requests[0]["temperature"].as_f64()), (Some(3), Some(1.0)));
    for r in &requests[1..] {
        assert_eq!((r["n"].as_u64(), r["temperature"].as_f64()), (Some(1), Some(0.3)));
        assert_eq!(r["response_format"]["type"], "json_object");
    }
    // the repair turns replace the previous failing pair: the dialog sent stays short
    let sent = |i: usize| requests[i]["messages"].as_array().unwrap().len();
    assert_eq!((sent(0), sent(1), sent(2), sent(3)), (1, 3, 5, 5));
    let error_turn = requests[2]["messages"][4]["content"].as_str().unwrap();
    assert!(error_turn.starts_with("There is an error in your previous answer. Error: "), "{error_turn}");
    assert!(error_turn.contains("theta"), "the error names the missing field: {error_turn}");
    // the accepted encoder: the fixed answer, two repair rounds, fixture provenance
    assert_eq!(record.repair_rounds, 2);
    assert_eq!(record.source, Source::TestFixture);
    assert_eq!(record.spec.n_factors, 3);
    assert_eq!(record.cache_keys.len(), 4);
    assert!(record.label().contains("test-fixture"));
    let enc = record.encoder(SandboxLimits::default().check().unwrap()).unwrap();
    let mut out = [0.0f32; 3];
    enc.encode(&[0.0, 1.0, 2.0], &[1.0], &[0.0; 3], &mut out).unwrap();
    let angle = std::f32::consts::FRAC_PI_2;
    assert!((out[0] - angle * angle).abs() < 1e-5 && out[1] == 4.0 && out[2] == 1.0, "{out:?}");
    // the whole dialog is kept: prompt, candidates, summary ask, summary, 2 × (error, answer)
    assert_eq!(record.dialog.len(), 8);

    // offline replay: no server, same record bit for bit
    let mut replay = CachedChat::replay(cache.clone());
    let again = generate_encoder(&mut replay, &prompt, &probe(), &p).unwrap();
    assert_eq!(again, record);
    // a run with other parameters is not in the cache: a typed miss, not a silent call
    let other = params().candidate_temperature(0.9).check().unwrap();
    assert!(matches!(generate_encoder(&mut replay, &prompt, &probe(), &other), Err(LareError::CacheMiss { .. })));
    // the record round-trips through its file
    let path = cache_dir.path().join("record.json");
    record.save(&path).unwrap();
    assert_eq!(lare::llm::EncoderRecord::load(&path).unwrap(), record);
}

#[test]
fn repair_budget_runs_out_with_a_typed_error() {
    let server = FakeServer::start(dialog("always_broken"), None, 2);
    let cache_dir = tempfile::tempdir().unwrap();
    let http = HttpChat::new(ChatConfig::new(server.url.clone(), "fixture-model"));
    let mut chat = CachedChat::new(
        ResponseCache::new(cache_dir.path()),
        CacheMode::RecordMissing,
        Box::new(http),
        Source::TestFixture,
        "",
    );
    let p = params().n_candidates(1).max_repairs(1).check().unwrap();
    let err = generate_encoder(&mut chat, &tasks::pendulum(), &probe(), &p).unwrap_err();
    let requests = server.stop();
    assert_eq!(requests.len(), 2, "one candidate (no summary with n = 1) and one repair");
    match err {
        LareError::RepairExhausted { rounds, last_error } => {
            assert_eq!(rounds, 1);
            assert!(last_error.contains("limit `max_operations`"), "the endless loop was stopped: {last_error}");
        }
        other => panic!("expected RepairExhausted, got {other}"),
    }
}

#[test]
fn endpoint_errors_and_short_servers() {
    // an error status is a typed HTTP error naming the URL and the status
    let server = FakeServer::start(vec![], Some(503), 1);
    let mut http = HttpChat::new(ChatConfig::new(server.url.clone(), "m"));
    let req = ChatRequest {
        model: "m".into(),
        messages: vec![Message::user("hi")],
        temperature: 1.0,
        n: 2,
        seed: None,
        json_mode: false,
    };
    let err = lare::llm::ChatBackend::complete(&mut http, &req).unwrap_err();
    server.stop();
    assert!(matches!(&err, LareError::Http { reason, .. } if reason.contains("503")), "{err}");
    // a server that returns one choice per call (llama.cpp) is topped up to n
    let turns = vec![
        ScriptedTurn { expect: Some("hi".into()), answers: vec!["a".into()] },
        ScriptedTurn { expect: Some("hi".into()), answers: vec!["b".into()] },
    ];
    let server = FakeServer::start(turns, None, 2);
    let dir = tempfile::tempdir().unwrap();
    let http = HttpChat::new(ChatConfig::new(server.url.clone(), "m"));
    let mut chat = CachedChat::new(
        ResponseCache::new(dir.path()),
        CacheMode::RecordMissing,
        Box::new(http),
        Source::TestFixture,
        "",
    );
    let ans = chat.complete(&req).unwrap();
    server.stop();
    assert_eq!(ans.choices, vec!["a", "b"]);
    // nothing listening: a transport error, not a panic
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let mut http = HttpChat::new(ChatConfig::new(url, "m"));
    assert!(matches!(lare::llm::ChatBackend::complete(&mut http, &req), Err(LareError::Http { .. })));
}
