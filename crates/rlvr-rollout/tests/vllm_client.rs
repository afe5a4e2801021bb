//! The vLLM client against a fake server answering hand-written fixtures in vLLM 0.32.0's
//! documented format (tests/fixtures/README.md). Each fake answers a bounded number of
//! requests, lives at most 20 s, and stops when the test drops it.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{closed_port_url, fixture, FakeReply, FakeServer};
use rl_core::{Params, Valid};
use rlvr_rollout::{
    FinishReason, GenerateRequest, Generation, RolloutEngine, RolloutError, SamplingParams, VllmClient, VllmConfig,
    WeightVersion,
};

const LIFE: Duration = Duration::from_secs(20);
const MODEL: &str = "tiny-qwen2";

fn client(servers: Vec<String>, tweak: impl FnOnce(VllmConfig) -> VllmConfig) -> VllmClient {
    let cfg = tweak(VllmConfig::new(servers, MODEL, 512).retry_backoff_ms(10).request_timeout_ms(5000));
    VllmClient::new(cfg.check().unwrap(), WeightVersion(3)).unwrap()
}

fn sampling() -> Valid<SamplingParams> {
    SamplingParams::default().temperature(0.7).top_p(0.9).max_tokens(4).check().unwrap()
}

fn gen(c: &mut VllmClient, prompts: &[Vec<u32>], n: usize) -> Result<Generation, RolloutError> {
    let s = sampling();
    c.generate(&GenerateRequest { prompts, n, sampling: &s, seed: 11 })
}

/// The error inside `PromptFailed`, with the prompt and attempts it names.
fn failed(e: RolloutError) -> (usize, String, u32, RolloutError) {
    match e {
        RolloutError::PromptFailed { prompt, server, attempts, source } => (prompt, server, attempts, *source),
        other => panic!("expected PromptFailed, got {other:?}"),
    }
}

fn one_fixture(name: &'static str, max_requests: usize) -> FakeServer {
    FakeServer::start(max_requests, LIFE, move |_| FakeReply::ok(fixture(name)))
}

#[test]
fn good_answer_is_parsed_and_the_request_has_every_field() {
    let fake = one_fixture("good_n1.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let g = gen(&mut c, &[vec![1, 2, 3]], 1).unwrap();
    assert_eq!(g.version, WeightVersion(3));
    assert_eq!(g.completions.len(), 1);
    let r = &g.completions[0][0];
    assert_eq!(r.token_ids, vec![17, 42, 2]);
    assert_eq!(r.logprobs, vec![-0.5, -1.25, -0.125]);
    assert_eq!(r.finish_reason, FinishReason::Stop);
    assert_eq!(g.total_tokens(), 3);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!((reqs[0].method.as_str(), reqs[0].path.as_str()), ("POST", "/v1/completions"));
    let b = reqs[0].json();
    assert_eq!(b["model"], MODEL);
    assert_eq!(b["prompt"], serde_json::json!([[1, 2, 3]]));
    assert_eq!(b["n"], 1);
    assert_eq!(b["max_tokens"], 4);
    assert_eq!(b["temperature"], 0.7);
    assert_eq!(b["top_p"], 0.9);
    assert_eq!(b["logprobs"], 0);
    assert_eq!(b["return_token_ids"], true);
    assert_eq!(b["return_tokens_as_token_ids"], true);
    assert!(b["seed"].as_u64().is_some_and(|s| s <= i64::MAX as u64), "seed {:?}", b["seed"]);
    assert!(b.get("top_k").is_none() && b.get("stop_token_ids").is_none());
    assert_eq!(c.server_stats()[0].requests, 1);
}

#[test]
fn two_prompts_with_n2_come_back_in_prompt_order_with_fixed_seeds() {
    let fake = FakeServer::start(4, LIFE, |r| {
        let p = &r.json()["prompt"][0];
        FakeReply::ok(fixture(if p.as_array().map(Vec::len) == Some(3) { "good_n2_a.json" } else { "good_n2_b.json" }))
    });
    let mut c = client(vec![fake.url.clone()], |c| c.max_in_flight(2));
    let prompts = vec![vec![1, 2, 3], vec![1, 5]];
    let s = SamplingParams::default().max_tokens(4).top_k(Some(5)).stop_token_ids(vec![2]).check().unwrap();
    let g = c.generate(&GenerateRequest { prompts: &prompts, n: 2, sampling: &s, seed: 11 }).unwrap();
    assert_eq!(g.completions.len(), 2);
    assert_eq!(g.completions[0].len(), 2);
    assert_eq!(g.completions[0][0].token_ids, vec![17, 2]);
    assert_eq!(g.completions[0][1].token_ids, vec![30, 31, 32, 33]);
    assert_eq!(g.completions[0][1].finish_reason, FinishReason::Length);
    assert_eq!(g.completions[1][0].logprobs, vec![-0.5; 4]);
    assert_eq!(g.completions[1][1].token_ids, vec![2]);
    assert_eq!(g.completions[1][1].finish_reason, FinishReason::Stop);
    // same call again: the same seed per prompt (the request is idempotent)
    c.generate(&GenerateRequest { prompts: &prompts, n: 2, sampling: &s, seed: 11 }).unwrap();
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 4);
    let seed_of = |len: usize| -> Vec<u64> {
        reqs.iter()
            .filter(|r| r.json()["prompt"][0].as_array().map(Vec::len) == Some(len))
            .map(|r| r.json()["seed"].as_u64().unwrap())
            .collect()
    };
    let (a, b) = (seed_of(3), seed_of(2));
    assert_eq!(a.len(), 2);
    assert_eq!(a[0], a[1]);
    assert_eq!(b[0], b[1]);
    assert_ne!(a[0], b[0], "each prompt has its own seed");
    assert_eq!(reqs[0].json()["top_k"], 5);
    assert_eq!(reqs[0].json()["stop_token_ids"], serde_json::json!([2]));
    assert_eq!(reqs[0].json()["n"], 2);
}

#[test]
fn a_server_that_is_down_is_unreachable_after_the_bounded_retries() {
    let url = closed_port_url();
    let mut c = client(vec![url.clone()], |c| c.max_attempts(2));
    let (prompt, server, attempts, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert_eq!((prompt, attempts), (0, 2));
    assert_eq!(server, url);
    assert!(matches!(&e, RolloutError::Unreachable { server, .. } if *server == url), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(c.server_stats()[0].failures, 2);
}

#[test]
fn a_slow_answer_times_out_and_the_retry_succeeds() {
    let fake = FakeServer::start(2, LIFE, |r| {
        let reply = FakeReply::ok(fixture("good_n1.json"));
        if r.seq == 0 {
            reply.delayed(Duration::from_millis(3000))
        } else {
            reply
        }
    });
    // one attempt: the timeout is the error
    // margins for a loaded machine: a 1 s timeout against a 3 s answer
    let mut c1 = client(vec![fake.url.clone()], |c| c.request_timeout_ms(1000).max_attempts(1));
    let t0 = Instant::now();
    let (_, _, attempts, e) = failed(gen(&mut c1, &[vec![1, 2, 3]], 1).unwrap_err());
    assert!(t0.elapsed() < Duration::from_millis(2800), "waited {:?}", t0.elapsed());
    assert_eq!(attempts, 1);
    assert!(matches!(e, RolloutError::Timeout { .. }), "{e:?}");
    // the second request is answered at once
    let g = gen(&mut c1, &[vec![1, 2, 3]], 1).unwrap();
    assert_eq!(g.completions[0][0].token_ids, vec![17, 42, 2]);
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn a_timeout_is_retried_within_one_call() {
    let fake = FakeServer::start(2, LIFE, |r| {
        let reply = FakeReply::ok(fixture("good_n1.json"));
        if r.seq == 0 {
            reply.delayed(Duration::from_millis(3000))
        } else {
            reply
        }
    });
    let mut c = client(vec![fake.url.clone()], |c| c.request_timeout_ms(1000).max_attempts(3));
    let g = gen(&mut c, &[vec![1, 2, 3]], 1).unwrap();
    assert_eq!(g.completions[0][0].logprobs, vec![-0.5, -1.25, -0.125]);
    let s = &c.server_stats()[0];
    assert_eq!((s.requests, s.failures), (2, 1));
}

#[test]
fn malformed_json_is_a_typed_error_and_not_retried() {
    let fake = one_fixture("malformed.json", 3);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (prompt, server, attempts, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert_eq!((prompt, attempts), (0, 1));
    assert_eq!(server, fake.url);
    assert!(matches!(e, RolloutError::Malformed { .. }), "{e:?}");
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn http_500_is_retried_then_reported_with_its_body() {
    let fake = FakeServer::start(3, LIFE, |_| FakeReply::status(500, "{\"error\": \"EngineCore died\"}"));
    let mut c = client(vec![fake.url.clone()], |c| c.max_attempts(3));
    let (_, _, attempts, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert_eq!(attempts, 3);
    match e {
        RolloutError::HttpStatus { status, body, route, .. } => {
            assert_eq!((status, route.as_str()), (500, "/v1/completions"));
            assert!(body.contains("EngineCore died"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(fake.overflow.load(Ordering::SeqCst), 0);
}

#[test]
fn http_400_is_not_retried() {
    let fake = FakeServer::start(2, LIFE, |_| FakeReply::status(400, "{\"error\": \"bad seed\"}"));
    let mut c = client(vec![fake.url.clone()], |c| c.max_attempts(3));
    let (_, _, attempts, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert_eq!(attempts, 1);
    assert!(matches!(e, RolloutError::HttpStatus { status: 400, .. }), "{e:?}");
}

#[test]
fn fewer_choices_than_n() {
    let fake = one_fixture("fewer_choices.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 2).unwrap_err());
    assert!(matches!(e, RolloutError::ChoiceCount { expected: 2, got: 1, .. }), "{e:?}");
}

#[test]
fn logprob_count_differs_from_token_count() {
    let fake = one_fixture("length_mismatch.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert!(matches!(e, RolloutError::LengthMismatch { tokens: 3, logprobs: 2, choice: 0, .. }), "{e:?}");
}

#[test]
fn token_ids_and_logprob_tokens_disagree() {
    let fake = one_fixture("token_mismatch.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert!(matches!(e, RolloutError::TokenMismatch { position: 1, id: 42, .. }), "{e:?}");
}

#[test]
fn token_outside_the_vocabulary() {
    let fake = one_fixture("out_of_vocab.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert!(matches!(e, RolloutError::OutOfVocab { id: 600, position: 1, vocab_size: 512, .. }), "{e:?}");
}

#[test]
fn nan_null_and_clamped_logprobs_are_refused() {
    // a literal NaN is not JSON: malformed
    let fake = one_fixture("nan_logprob.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert!(matches!(e, RolloutError::Malformed { .. }), "{e:?}");
    // null (how pydantic writes a NaN) and -9999 (vLLM's clamp of -inf): non-finite
    for (name, value) in [("null_logprob.json", "null"), ("neg_inf_logprob.json", "-9999")] {
        let fake = one_fixture(name, 1);
        let mut c = client(vec![fake.url.clone()], |c| c);
        let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
        match e {
            RolloutError::NonFinite { position, value: v, .. } => assert_eq!((position, v.as_str()), (1, value)),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn another_model_is_a_mismatch() {
    let fake = one_fixture("wrong_model.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3]], 1).unwrap_err());
    assert!(matches!(&e, RolloutError::ModelMismatch { got, .. } if got == "another-model"), "{e:?}");
}

#[test]
fn an_answer_to_another_prompt_is_refused() {
    let fake = one_fixture("good_n1.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let (_, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 4]], 1).unwrap_err());
    assert!(matches!(&e, RolloutError::Malformed { reason, .. } if reason.contains("another prompt")), "{e:?}");
}

#[test]
fn bad_requests_are_refused_before_anything_is_sent() {
    let fake = one_fixture("good_n1.json", 1);
    let mut c = client(vec![fake.url.clone()], |c| c);
    let e = gen(&mut c, &[vec![1, 2, 3]], 0).unwrap_err();
    assert!(matches!(&e, RolloutError::InvalidParameter { name, .. } if name == "request.n"), "{e:?}");
    let e = gen(&mut c, &[vec![1], vec![]], 1).unwrap_err();
    assert!(matches!(&e, RolloutError::InvalidParameter { name, .. } if name == "request.prompts[1]"), "{e:?}");
    let e = gen(&mut c, &[vec![1, 512]], 1).unwrap_err();
    assert!(matches!(&e, RolloutError::InvalidParameter { name, .. } if name == "request.prompts[0][1]"), "{e:?}");
    assert!(fake.requests().is_empty());
}

#[test]
fn a_failure_names_the_prompt_and_the_call_fails_as_a_whole() {
    // the fake answers every request for prompt [1, 2, 3]: prompt 1 gets an answer to another prompt
    let fake = one_fixture("good_n1.json", 3);
    let mut c = client(vec![fake.url.clone()], |c| c.max_in_flight(1));
    let (prompt, _, _, e) = failed(gen(&mut c, &[vec![1, 2, 3], vec![1, 2, 9], vec![1, 2, 3]], 1).unwrap_err());
    assert_eq!(prompt, 1);
    assert!(matches!(e, RolloutError::Malformed { .. }), "{e:?}");
    // one worker: prompt 2 was never sent after prompt 1 failed
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn least_loaded_routing_spreads_work_and_retries_avoid_a_dead_server() {
    let a = FakeServer::start(8, LIFE, |_| FakeReply::ok(fixture("good_n1.json")).delayed(Duration::from_millis(30)));
    let b = FakeServer::start(8, LIFE, |_| FakeReply::ok(fixture("good_n1.json")).delayed(Duration::from_millis(30)));
    let mut c = client(vec![a.url.clone(), b.url.clone()], |c| c.max_in_flight(2));
    let prompts = vec![vec![1, 2, 3]; 8];
    let g = gen(&mut c, &prompts, 1).unwrap();
    assert_eq!(g.completions.len(), 8);
    let (na, nb) = (a.requests().len(), b.requests().len());
    assert_eq!(na + nb, 8);
    assert!(na >= 2 && nb >= 2, "a {na}, b {nb}");
    // a dead first server: every prompt is retried on the live one and succeeds
    let dead = closed_port_url();
    let mut c = client(vec![dead.clone(), b.url.clone()], |c| c.max_in_flight(2).max_attempts(2));
    let before = b.requests().len();
    let g = gen(&mut c, &prompts[..4], 1).unwrap();
    assert_eq!(g.completions.len(), 4);
    assert_eq!(b.requests().len() - before, 4);
    let stats = c.server_stats();
    assert_eq!(stats[0].url, dead);
    assert_eq!(stats[0].requests, stats[0].failures);
    assert!(stats[0].requests >= 1);
    assert_eq!(a.overflow.load(Ordering::SeqCst) + b.overflow.load(Ordering::SeqCst), 0);
}

#[test]
fn requests_in_flight_are_bounded() {
    let fake =
        FakeServer::start(12, LIFE, |_| FakeReply::ok(fixture("good_n1.json")).delayed(Duration::from_millis(100)));
    let mut c = client(vec![fake.url.clone()], |c| c.max_in_flight(3));
    let g = gen(&mut c, &vec![vec![1, 2, 3]; 12], 1).unwrap();
    assert_eq!(g.completions.len(), 12);
    let most = fake.max_concurrent.load(Ordering::SeqCst);
    assert!((2..=3).contains(&most), "{most} requests in flight at once");
    assert_eq!(fake.requests().len(), 12);
}

#[test]
fn check_servers_compares_the_served_model() {
    let fake = FakeServer::start(2, LIFE, |r| {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/v1/models"));
        FakeReply::ok(r#"{"object": "list", "data": [{"id": "tiny-qwen2", "object": "model", "max_model_len": 512}]}"#)
    });
    client(vec![fake.url.clone()], |c| c).check_servers().unwrap();
    let e = client(vec![fake.url.clone()], |c| c.model("other")).check_servers().unwrap_err();
    assert!(matches!(e, RolloutError::ModelMismatch { .. }), "{e:?}");
}

#[test]
fn config_ranges_name_the_field() {
    let base = || VllmConfig::new(vec!["http://127.0.0.1:1".into()], MODEL, 512);
    let cases: Vec<(VllmConfig, &str)> = vec![
        (base().servers(vec![]), "vllm.servers"),
        (base().servers(vec!["https://x:1".into()]), "vllm.servers[0]"),
        (base().servers(vec!["http://".into()]), "vllm.servers[0]"),
        (base().model(""), "vllm.model"),
        (base().vocab_size(0), "vllm.vocab_size"),
        (base().max_in_flight(0), "vllm.max_in_flight"),
        (base().max_in_flight(4097), "vllm.max_in_flight"),
        (base().connect_timeout_ms(0), "vllm.connect_timeout_ms"),
        (base().request_timeout_ms(0), "vllm.request_timeout_ms"),
        (base().max_attempts(0), "vllm.max_attempts"),
        (base().max_attempts(101), "vllm.max_attempts"),
        (base().max_response_bytes(1023), "vllm.max_response_bytes"),
    ];
    for (cfg, field) in cases {
        match cfg.check() {
            Err(RolloutError::InvalidParameter { name, .. }) => assert_eq!(name, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(base().max_in_flight(4096).max_attempts(100).max_response_bytes(1024).check().is_ok());
    // a config file may omit any field; a misspelt one is refused
    let c: VllmConfig = serde_json::from_str(r#"{"servers": ["http://h:1"], "model": "m", "vocab_size": 4}"#).unwrap();
    assert_eq!(c.max_in_flight, 8);
    assert!(serde_json::from_str::<VllmConfig>(r#"{"max_inflight": 3}"#).is_err());
}

#[test]
fn sampling_ranges_name_the_field() {
    let cases: Vec<(SamplingParams, &str)> = vec![
        (SamplingParams::default().temperature(-0.1), "sampling.temperature"),
        (SamplingParams::default().temperature(f64::NAN), "sampling.temperature"),
        (SamplingParams::default().top_p(0.0), "sampling.top_p"),
        (SamplingParams::default().top_p(1.01), "sampling.top_p"),
        (SamplingParams::default().top_k(Some(0)), "sampling.top_k"),
        (SamplingParams::default().max_tokens(0), "sampling.max_tokens"),
    ];
    for (p, field) in cases {
        match p.check() {
            Err(RolloutError::InvalidParameter { name, .. }) => assert_eq!(name, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(SamplingParams::default().temperature(0.0).top_p(1.0).top_k(Some(1)).max_tokens(1).check().is_ok());
}
