//! Weight sync by disk against a fake server: the directory is checked before anything is
//! sent, tied embeddings are refused, then `/collective_rpc` reload_weights,
//! `/reset_prefix_cache` and the probe (tests/fixtures/probe.json: prompt_logprobs of
//! `[1, 2, 3, 17, 42]` are -3.5, -2.25, -0.8125, -1.375 from the second token on).

mod common;

use std::path::Path;
use std::time::Duration;

use common::{fixture, FakeReply, FakeServer};
use rl_core::Params;
use rlvr_rollout::{
    check_weight_dir, GenerateRequest, LogProbProbe, RolloutEngine, RolloutError, SamplingParams, VllmClient,
    VllmConfig, WeightUpdate, WeightVersion,
};

const LIFE: Duration = Duration::from_secs(20);

/// A safetensors file holding one f32 tensor per name.
fn write_safetensors(path: &Path, names: &[&str]) {
    let mut header = serde_json::Map::new();
    for (i, n) in names.iter().enumerate() {
        header.insert(
            n.to_string(),
            serde_json::json!({"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}),
        );
    }
    let h = serde_json::Value::Object(header).to_string();
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend(std::iter::repeat_n(0u8, 4 * names.len()));
    std::fs::write(path, bytes).unwrap();
}

fn hf_dir(config: &str, tensors: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("config.json"), config).unwrap();
    write_safetensors(&d.path().join("model.safetensors"), tensors);
    d
}

fn untied() -> tempfile::TempDir {
    hf_dir(r#"{"model_type": "qwen2", "tie_word_embeddings": false}"#, &["model.embed_tokens.weight", "lm_head.weight"])
}

fn probe(expected: Vec<f64>) -> LogProbProbe {
    LogProbProbe { prompt: vec![1, 2, 3], continuation: vec![17, 42], expected, tolerance: 1e-4 }
}

/// A fake vLLM with dev-mode routes.
fn fake(max_requests: usize) -> FakeServer {
    FakeServer::start(max_requests, LIFE, |r| match r.path.as_str() {
        "/collective_rpc" => FakeReply::ok(fixture("collective_rpc.json")),
        "/reset_prefix_cache" => FakeReply::ok(""),
        "/v1/completions" if r.json()["prompt_logprobs"] == 0 => FakeReply::ok(fixture("probe.json")),
        "/v1/completions" => FakeReply::ok(fixture("good_n1.json")),
        _ => FakeReply::status(404, "{\"detail\": \"Not Found\"}"),
    })
}

fn client(servers: Vec<String>) -> VllmClient {
    let cfg = VllmConfig::new(servers, "tiny-qwen2", 512).retry_backoff_ms(10).request_timeout_ms(5000);
    VllmClient::new(cfg.check().unwrap(), WeightVersion(0)).unwrap()
}

#[test]
fn a_matching_probe_moves_every_server_to_the_new_version() {
    let (a, b) = (fake(4), fake(4));
    let mut c = client(vec![a.url.clone(), b.url.clone()]);
    let dir = untied();
    let p = probe(vec![-0.81252, -1.37498]);
    c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: dir.path(), probe: &p }).unwrap();
    assert_eq!(c.weight_version(), WeightVersion(1));
    for f in [&a, &b] {
        let reqs = f.requests();
        let routes: Vec<&str> = reqs.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(routes, ["/collective_rpc", "/reset_prefix_cache", "/v1/completions"]);
        let rpc = reqs[0].json();
        assert_eq!(rpc["method"], "reload_weights");
        assert_eq!(rpc["kwargs"]["weights_path"], dir.path().to_str().unwrap());
        assert_eq!(rpc["kwargs"]["is_checkpoint_format"], true);
        let pr = reqs[2].json();
        assert_eq!(pr["prompt"], serde_json::json!([[1, 2, 3, 17, 42]]));
        assert_eq!((pr["max_tokens"].clone(), pr["temperature"].clone()), (1.into(), 1.0.into()));
        assert_eq!(pr["prompt_logprobs"], 0);
    }
    // generation now reports the new version
    let s = SamplingParams::default().check().unwrap();
    let g = c.generate(&GenerateRequest { prompts: &[vec![1, 2, 3]], n: 1, sampling: &s, seed: 0 }).unwrap();
    assert_eq!(g.version, WeightVersion(1));
}

#[test]
fn a_mismatching_probe_is_stale_weights_and_generation_is_refused_until_a_sync_succeeds() {
    let f = fake(8);
    let mut c = client(vec![f.url.clone()]);
    let dir = untied();
    // the engine says -1.375 for token 42; the new weights say -1.0
    let bad = probe(vec![-0.8125, -1.0]);
    let e = c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: dir.path(), probe: &bad }).unwrap_err();
    match e {
        RolloutError::StaleWeights { server, version, position, expected, got, diff, tolerance } => {
            assert_eq!(server, f.url);
            assert_eq!((version, position), (WeightVersion(1), 1));
            assert_eq!((expected, got, tolerance), (-1.0, -1.375, 1e-4));
            assert!((diff - 0.375).abs() < 1e-12);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.weight_version(), WeightVersion(0));
    let s = SamplingParams::default().check().unwrap();
    let e = c.generate(&GenerateRequest { prompts: &[vec![1, 2, 3]], n: 1, sampling: &s, seed: 0 }).unwrap_err();
    assert!(matches!(e, RolloutError::OutOfSync { version: WeightVersion(1) }), "{e:?}");
    let sent = f.requests().len();
    assert_eq!(sent, 3, "no generation request after the failed sync");
    // a good sync to the same version clears it
    let good = probe(vec![-0.8125, -1.375]);
    c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: dir.path(), probe: &good }).unwrap();
    c.generate(&GenerateRequest { prompts: &[vec![1, 2, 3]], n: 1, sampling: &s, seed: 0 }).unwrap();
    // an older or equal version is refused
    let e = c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: dir.path(), probe: &good }).unwrap_err();
    assert!(matches!(&e, RolloutError::InvalidParameter { name, .. } if name == "update.version"), "{e:?}");
}

#[test]
fn tied_embeddings_are_refused_before_anything_is_sent() {
    let f = fake(1);
    let mut c = client(vec![f.url.clone()]);
    let p = probe(vec![-0.8125, -1.375]);
    let explicit = hf_dir(r#"{"tie_word_embeddings": true}"#, &["model.embed_tokens.weight", "lm_head.weight"]);
    let implicit = hf_dir(r#"{"model_type": "qwen2"}"#, &["model.embed_tokens.weight"]);
    for d in [&explicit, &implicit] {
        let e = c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: d.path(), probe: &p }).unwrap_err();
        assert!(matches!(e, RolloutError::TiedEmbeddings { .. }), "{e:?}");
        assert!(e.to_string().contains("export untied weights"), "{e}");
    }
    // no tie_word_embeddings key but a separate lm_head: untied
    let untied_implicit = hf_dir(r#"{"model_type": "qwen2"}"#, &["model.embed_tokens.weight", "lm_head.weight"]);
    assert!(check_weight_dir(untied_implicit.path()).unwrap().tied().is_none());
    assert!(f.requests().is_empty());
    assert_eq!(c.weight_version(), WeightVersion(0));
}

#[test]
fn incomplete_directories_are_refused_before_anything_is_sent() {
    let f = fake(1);
    let mut c = client(vec![f.url.clone()]);
    let p = probe(vec![-0.8125, -1.375]);
    let missing = tempfile::tempdir().unwrap();
    let no_config = tempfile::tempdir().unwrap();
    write_safetensors(&no_config.path().join("model.safetensors"), &["lm_head.weight"]);
    let no_weights = tempfile::tempdir().unwrap();
    std::fs::write(no_weights.path().join("config.json"), "{}").unwrap();
    let bad_config = hf_dir("{not json", &["lm_head.weight"]);
    let bad_tie = hf_dir(r#"{"tie_word_embeddings": "no"}"#, &["lm_head.weight"]);
    let bad_weights = untied();
    std::fs::write(bad_weights.path().join("model.safetensors"), [255u8; 12]).unwrap();
    let nope = missing.path().join("nope");
    let cases: Vec<(&Path, &str)> = vec![
        (&nope, "not a directory"),
        (Path::new("relative/dir"), "not a directory"),
        (no_config.path(), "config.json"),
        (no_weights.path(), "no *.safetensors"),
        (bad_config.path(), "not JSON"),
        (bad_tie.path(), "not a boolean"),
        (bad_weights.path(), "header length"),
    ];
    for (dir, why) in cases {
        let e = c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir, probe: &p }).unwrap_err();
        match &e {
            RolloutError::WeightsDir { reason, .. } => assert!(reason.contains(why), "{}: {reason}", dir.display()),
            other => panic!("{}: {other:?}", dir.display()),
        }
    }
    // a probe that does not line up is refused too
    let short = LogProbProbe { expected: vec![-1.0], ..probe(vec![]) };
    let e = c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: untied().path(), probe: &short });
    assert!(matches!(e, Err(RolloutError::InvalidParameter { ref name, .. }) if name == "probe.expected"), "{e:?}");
    let oov = LogProbProbe { continuation: vec![17, 512], ..probe(vec![-1.0, -1.0]) };
    let e = c.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: untied().path(), probe: &oov });
    assert!(matches!(e, Err(RolloutError::InvalidParameter { ref name, .. }) if name == "probe.continuation[1]"));
    assert!(f.requests().is_empty());
}

#[test]
fn a_server_without_dev_mode_routes_fails_the_sync_with_its_status() {
    let f = FakeServer::start(1, LIFE, |_| FakeReply::status(404, "{\"detail\": \"Not Found\"}"));
    let mut c = client(vec![f.url.clone()]);
    let p = probe(vec![-0.8125, -1.375]);
    let dir = untied();
    let e = c.sync_weights(&WeightUpdate { version: WeightVersion(2), dir: dir.path(), probe: &p }).unwrap_err();
    assert!(matches!(&e, RolloutError::HttpStatus { status: 404, route, .. } if route == "/collective_rpc"), "{e:?}");
    assert_eq!(c.weight_version(), WeightVersion(0));
}
