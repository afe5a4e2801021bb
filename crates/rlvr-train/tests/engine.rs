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
        (SamplingParams::default().stop_token_ids(vec![3]).check()?, "sampling.stop_token_ids"),
    ] {
        match e.generate(&GenerateRequest { prompts: &ps, n: 1, sampling: &s, seed: 0 }) {
            Err(RolloutError::InvalidParameter { name, .. }) => ensure!(name == field),
            other => anyhow::bail!("{field}: {other:?}"),
        }
    }
    let s = SamplingParams::default().check()?;
    let e2 = e.generate(&GenerateRequest { prompts: &ps, n: 0, sampling: &s, seed: 0 });
    ensure!(matches!(e2, Err(RolloutError::InvalidParameter { .. })));
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
