//! The in-process rollout engine over rl-lm's transformer: shapes, seeds, behaviour log-probs
//! equal to the policy's teacher-forced log-probs, refusals, weight sync with a probe.

use anyhow::{ensure, Result};
use rl_core::Params;
use rl_lm::{LmConfig, TransformerLm};
use rlvr_rollout::{
    FinishReason, GenerateRequest, LogProbProbe, RolloutEngine, RolloutError, SamplingParams, WeightUpdate,
    WeightVersion,
};
use rlvr_tasks::CharTokenizer;
use rlvr_train::{Policy, PolicyEngine};
use tch::{Device, Kind};

fn lm(seed: u64) -> Result<TransformerLm> {
    let cfg = LmConfig::new(CharTokenizer::VOCAB_SIZE, 48).d_model(32).n_layers(1).n_heads(2).d_ff(64);
    Ok(TransformerLm::new(&cfg, Device::Cpu, &mut rl_core::rng_from_seed(seed))?)
}

fn prompts(p: &TransformerLm) -> Result<Vec<Vec<u32>>> {
    let mut out = Vec::new();
    for text in ["12+3=", "7*8="] {
        out.push(p.encode_prompt(text)?.into_iter().map(|t| t as u32).collect());
    }
    Ok(out)
}

/// Teacher-forced log-probs of `resp` after `prompt` at temperature `t`.
fn teacher(p: &TransformerLm, prompt: &[u32], resp: &[u32], t: f64) -> Result<Vec<f32>> {
    let _g = tch::no_grad_guard();
    let pr: Vec<i64> = prompt.iter().map(|&x| x.into()).collect();
    let rs: Vec<i64> = resp.iter().map(|&x| x.into()).collect();
    let out = Policy::response_logprobs(p, &[&pr], &[&rs], t, false)?;
    Ok(Vec::<f32>::try_from(out.logprobs.to_kind(Kind::Float).flatten(0, -1))?)
}

#[test]
fn generation_has_n_per_prompt_is_seeded_and_its_logprobs_are_the_policys() -> Result<()> {
    let policy = lm(1)?;
    let ps = prompts(&policy)?;
    let mut e = PolicyEngine::new(lm(1)?, WeightVersion(4));
    let s = SamplingParams::default().temperature(0.8).max_tokens(12).check()?;
    let g = e.generate(&GenerateRequest { prompts: &ps, n: 3, sampling: &s, seed: 9 })?;
    ensure!(g.version == WeightVersion(4) && g.completions.len() == 2);
    let mut worst = 0f32;
    for (prompt, group) in ps.iter().zip(&g.completions) {
        ensure!(group.len() == 3);
        for c in group {
            ensure!(!c.token_ids.is_empty() && c.token_ids.len() == c.logprobs.len());
            ensure!(c.token_ids.len() <= 12);
            let ends_with_eos = c.token_ids.last() == Some(&(CharTokenizer::EOS as u32));
            ensure!((c.finish_reason == FinishReason::Stop) == ends_with_eos, "{c:?}");
            let t = teacher(&policy, prompt, &c.token_ids, 0.8)?;
            for (a, b) in c.logprobs.iter().zip(&t) {
                worst = worst.max((a - b).abs());
            }
        }
    }
    ensure!(worst <= 1e-4, "behaviour vs teacher-forced log-probs differ by {worst}");
    let again = e.generate(&GenerateRequest { prompts: &ps, n: 3, sampling: &s, seed: 9 })?;
    ensure!(again == g, "the same seed gives the same responses");
    let other = e.generate(&GenerateRequest { prompts: &ps, n: 3, sampling: &s, seed: 10 })?;
    ensure!(other != g, "another seed gives other responses");
    Ok(())
}

#[test]
fn options_the_policy_lacks_are_refused() -> Result<()> {
    let mut e = PolicyEngine::new(lm(1)?, WeightVersion(0));
    let ps = prompts(e.policy())?;
    for (s, field) in [
        (SamplingParams::default().top_k(Some(4)).check()?, "sampling.top_k"),
        (SamplingParams::default().stop_token_ids(vec![CharTokenizer::PAD as u32]).check()?, "sampling.stop_token_ids"),
    ] {
        match e.generate(&GenerateRequest { prompts: &ps, n: 1, sampling: &s, seed: 0 }) {
            Err(RolloutError::InvalidParameter { name, .. }) => ensure!(name == field),
            other => anyhow::bail!("{field}: {other:?}"),
        }
    }
    let s = SamplingParams::default().check()?;
    let e2 = e.generate(&GenerateRequest { prompts: &ps, n: 0, sampling: &s, seed: 0 });
    ensure!(matches!(e2, Err(RolloutError::InvalidParameter { .. })));
    // its own stop id is accepted
    let own = SamplingParams::default().stop_token_ids(vec![CharTokenizer::EOS as u32]).max_tokens(4).check()?;
    ensure!(e.generate(&GenerateRequest { prompts: &ps, n: 1, sampling: &own, seed: 0 }).is_ok());
    Ok(())
}

#[test]
fn sync_loads_the_new_weights_and_a_stale_probe_is_refused() -> Result<()> {
    let (old, new) = (lm(1)?, lm(2)?);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("v1.safetensors");
    Policy::save(&new, &path)?;
    let probe_prompt = prompts(&old)?.remove(0);
    let cont: Vec<u32> = CharTokenizer::new().encode("15")?.into_iter().map(|t| t as u32).collect();
    let expected_new: Vec<f64> = teacher(&new, &probe_prompt, &cont, 1.0)?.into_iter().map(f64::from).collect();
    let expected_old: Vec<f64> = teacher(&old, &probe_prompt, &cont, 1.0)?.into_iter().map(f64::from).collect();
    let mut e = PolicyEngine::new(lm(1)?, WeightVersion(0));
    // a probe computed from other weights than the file's: stale
    let stale = LogProbProbe {
        prompt: probe_prompt.clone(),
        continuation: cont.clone(),
        expected: expected_old,
        tolerance: 1e-4,
    };
    let err = e.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: &path, probe: &stale }).unwrap_err();
    ensure!(matches!(err, RolloutError::StaleWeights { version: WeightVersion(1), .. }), "{err:?}");
    ensure!(e.weight_version() == WeightVersion(0));
    let good = LogProbProbe { expected: expected_new, ..stale };
    e.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: &path, probe: &good })?;
    ensure!(e.weight_version() == WeightVersion(1));
    // the engine now samples what the new policy samples
    let ps = prompts(&new)?;
    let s = SamplingParams::default().max_tokens(8).check()?;
    let g = e.generate(&GenerateRequest { prompts: &ps, n: 2, sampling: &s, seed: 3 })?;
    let mut fresh = PolicyEngine::new(lm(2)?, WeightVersion(1));
    ensure!(fresh.generate(&GenerateRequest { prompts: &ps, n: 2, sampling: &s, seed: 3 })? == g);
    // versions only move forward
    let again = e.sync_weights(&WeightUpdate { version: WeightVersion(1), dir: &path, probe: &good });
    ensure!(matches!(again, Err(RolloutError::InvalidParameter { .. })));
    Ok(())
}

/// Countdown with two numbers (level 0), train.rs's tiny model and warm start (partial
/// accuracy, so groups are mixed), POPO replay, DPS.
fn tiny_run() -> rlvr_train::RunConfig {
    use rlvr_tasks::{Family, PoolParams};
    let mut c = rlvr_train::RunConfig { seed: 5, device: "cpu".into(), ..rlvr_train::RunConfig::default() };
    c.task.pool = PoolParams::new(Family::Countdown, 5).levels([0]);
    c.task.train_prompts = 100;
    c.task.eval_prompts = 8;
    c.model = LmConfig::new(CharTokenizer::VOCAB_SIZE, 32).d_model(48).n_layers(2).n_heads(4).d_ff(192);
    c.sft.steps = 60;
    c.sft.batch_size = 32;
    c.rl.steps = 3;
    c.rl.batch_prompts = 8;
    c.rl.group_size = 8;
    c.rl.lr = 1e-3;
    c.rl.max_new_tokens = 10;
    c.eval.every = 100;
    c.eval.samples = 2;
    c.eval.k = 2;
    c.replay = Some(rlvr_replay::ReplayParams::new(8));
    c.selector = rlvr_train::SelectorConfig::Dps { params: rlvr_select::DpsParams::default() };
    c
}

/// A policy of the run's architecture with its own (other) initial weights.
fn replica(cfg: &rlvr_train::RunConfig, seed: u64) -> Result<TransformerLm> {
    Ok(TransformerLm::new(&cfg.model, Device::Cpu, &mut rl_core::rng_from_seed(seed))?)
}

/// An engine that ignores new weights: it reloads the weights it started with (so its probe
/// sees the old policy).
#[derive(Debug)]
struct Frozen {
    inner: PolicyEngine<TransformerLm>,
    own: std::path::PathBuf,
}

impl RolloutEngine for Frozen {
    fn generate(&mut self, r: &GenerateRequest<'_>) -> rlvr_rollout::Result<rlvr_rollout::Generation> {
        self.inner.generate(r)
    }
    fn sync_weights(&mut self, u: &WeightUpdate<'_>) -> rlvr_rollout::Result<()> {
        self.inner.sync_weights(&WeightUpdate { dir: &self.own, ..*u })
    }
    fn weight_version(&self) -> WeightVersion {
        self.inner.weight_version()
    }
}

#[test]
fn the_trainer_generates_through_an_attached_engine_and_reports_the_mismatch() -> Result<()> {
    let cfg = tiny_run();
    let mut t = rlvr_train::Trainer::new(cfg.clone())?;
    t.warm_start(&mut |_, _| {})?;
    let sync = tempfile::tempdir()?;
    // a replica with other initial weights: the first sync must replace them
    t.attach_engine(Box::new(PolicyEngine::new(replica(&cfg, 77)?, WeightVersion(0))), sync.path(), 1e-4)?;
    let mut measured = 0;
    for step in 0..3u64 {
        let rec = t.step()?;
        let m = |k: &str| rec.metrics.get(k);
        ensure!(m("engine/version") == Some((step + 1) as f64), "{:?}", m("engine/version"));
        ensure!(m("engine/staleness") == Some(0.0));
        ensure!(rec.rollouts.train >= 8 * 8 * (step + 1));
        if rec.batch_groups > 0 {
            let d = m("engine/logprob_abs_diff_mean").ok_or_else(|| anyhow::anyhow!("no mismatch metric"))?;
            // the same kernels on both sides: generation-time vs teacher-forced log-probs
            ensure!((0.0..1e-4).contains(&d), "mean |engine - trainer| = {d}");
            ensure!(m("engine/logprob_abs_diff_max").is_some_and(|x| x < 1e-3));
            measured += 1;
        }
        // only the weights the engine serves now are kept on disk
        let files: Vec<_> = std::fs::read_dir(sync.path())?.collect();
        ensure!(files.len() == 1, "{} paths in the sync directory", files.len());
    }
    ensure!(measured > 0, "no step trained on a batch");
    ensure!(t.engine().map(|e| e.weight_version()) == Some(WeightVersion(3)));
    // detached, the trainer samples from its own policy again: no engine metrics
    ensure!(t.detach_engine().is_some());
    let rec = t.step()?;
    ensure!(rec.metrics.get("engine/version").is_none());
    Ok(())
}

#[test]
fn an_engine_that_keeps_old_weights_fails_the_step_with_stale_weights() -> Result<()> {
    let cfg = tiny_run();
    let mut t = rlvr_train::Trainer::new(cfg.clone())?;
    t.warm_start(&mut |_, _| {})?;
    let dir = tempfile::tempdir()?;
    let own = dir.path().join("own.safetensors");
    let replica = replica(&cfg, 77)?;
    Policy::save(&replica, &own)?;
    let frozen = Frozen { inner: PolicyEngine::new(replica, WeightVersion(0)), own };
    t.attach_engine(Box::new(frozen), dir.path().join("sync"), 1e-4)?;
    match t.step() {
        Err(rlvr_train::TrainError::Rollout(RolloutError::StaleWeights { version, .. })) => {
            ensure!(version == WeightVersion(1))
        }
        other => anyhow::bail!("expected StaleWeights, got {other:?}"),
    }
    ensure!(t.attach_engine(Box::new(PolicyEngine::new(lm(1)?, WeightVersion(0))), dir.path(), 0.0).is_err());
    Ok(())
}
