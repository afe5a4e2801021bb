//! The RL loop on a Hugging Face directory (`rl-hf`'s tiny random Qwen2 with a byte-level BPE
//! tokenizer, `crates/rl-hf/tests/fixtures/qwen2_rlvr`): the same trainer, selector, replay and
//! loss as on `rl-lm`'s policy, through the `Policy` trait.

use std::path::PathBuf;

use anyhow::{ensure, Result};
use rl_core::Params;
use rl_hf::{HfDtype, HfModel, HfTokenizer, LogProbParams};
use rlvr_train::{HfPolicy, HfPolicyConfig, Policy, PolicySource, RunConfig, TrainError, Trainer};
use tch::{Device, Kind, Tensor};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rl-hf/tests/fixtures/qwen2_rlvr")
}

/// `examples/configs/tiny_hf.toml` with the fixture's absolute path, fewer steps.
fn tiny_hf() -> Result<RunConfig> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/configs/tiny_hf.toml");
    let mut c = RunConfig::from_toml_file(path)?;
    c.hf = Some(HfPolicyConfig { dir: fixture(), ..c.hf.clone().unwrap_or_else(|| HfPolicyConfig::new(fixture())) });
    c.sft.steps = 4;
    c.rl.steps = 2;
    c.task.train_prompts = 40;
    c.task.eval_prompts = 8;
    c.rl.batch_prompts = 4;
    Ok(c)
}

fn weights(t: &Trainer) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> =
        t.policy().var_store().variables().into_iter().map(|(n, x)| (n, x.copy())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn the_trainer_runs_on_an_hf_directory_and_resumes_exactly() -> Result<()> {
    let cfg = tiny_hf()?;
    let mut t = Trainer::new(cfg.clone())?;
    ensure!(t.model().is_none(), "an HF policy is not rl-lm's transformer");
    ensure!(matches!(t.policy().source(), PolicySource::Hf(h) if h.dir == fixture()));
    let before = weights(&t);
    let losses = t.warm_start(&mut |_, _| {})?;
    ensure!(losses.len() == 4 && losses.iter().all(|l| l.is_finite()), "{losses:?}");
    ensure!(losses[3] < losses[0], "the warm start lowers the token nll: {losses:?}");
    let rec = t.step()?;
    ensure!(rec.rollouts.train == 4 * cfg.rl.group_size as u64);
    ensure!(!rec.updates.is_empty() || rec.batch_groups == 0);
    for u in &rec.updates {
        ensure!(u.grad_norm.is_finite() && u.loss.loss.is_finite());
    }
    let after = weights(&t);
    ensure!(before.iter().zip(&after).any(|((_, a), (_, b))| !a.equal(b)), "training changed no weight");

    // Checkpoint after one step, continue both: identical weights.
    let dir = tempfile::tempdir()?;
    t.save_checkpoint(dir.path())?;
    let mut resumed = Trainer::resume(dir.path())?;
    ensure!(resumed.steps_done() == 1);
    let (a, b) = (t.step()?, resumed.step()?);
    ensure!(a.reward_mean == b.reward_mean && a.rollouts == b.rollouts);
    for ((n, x), (_, y)) in weights(&t).iter().zip(&weights(&resumed)) {
        ensure!(x.equal(y), "{n} differs after resuming");
    }

    // The trained model in transformers' layout loads back with the trained weights.
    let out = tempfile::tempdir()?;
    t.policy().save(out.path())?;
    ensure!(out.path().join("tokenizer.json").is_file());
    let back = HfModel::from_pretrained(out.path(), Device::Cpu, HfDtype::F32)?;
    let loaded = back.var_store().variables();
    for (n, x) in weights(&t) {
        ensure!(loaded[&n].equal(&x), "{n} differs after save_pretrained");
    }
    Ok(())
}

#[test]
fn hf_policy_logprobs_and_gradients_equal_the_plain_computation() -> Result<()> {
    // The trainer's path (packed batch, deferred head backward) against the model's own
    // token_logprobs with autograd through every chunk.
    let cfg = HfPolicyConfig { logprob_chunk: 3, ..HfPolicyConfig::new(fixture()) };
    let policy = HfPolicy::load(&cfg, Device::Cpu)?;
    let prompts: Vec<Vec<i64>> = vec![policy.encode_prompt("12+30=")?, policy.encode_prompt("7")?];
    let responses: Vec<Vec<i64>> = vec![vec![40, 41, 2], vec![50, 51, 52, 53, 2]];
    let p: Vec<&[i64]> = prompts.iter().map(Vec::as_slice).collect();
    let r: Vec<&[i64]> = responses.iter().map(Vec::as_slice).collect();
    let out = policy.response_logprobs(&p, &r, 0.7, true)?;
    ensure!(out.logprobs.size() == [2, 5]);
    let coef = Tensor::from_slice(&[0.3f32, -1.0, 0.5, 2.0, -0.2, 1.0, 0.1, -0.4, 0.9, 0.6]).view([2, 5]);
    let ent = out.entropy.as_ref().map(|e| e.sum(Kind::Float) * 0.05).unwrap_or_else(|| Tensor::from(0.0f32));
    let loss = (&out.logprobs * &coef).sum(Kind::Float) + ent;
    policy.backward(out, &loss)?;
    let deferred: Vec<(String, Tensor)> =
        policy.var_store().variables().into_iter().map(|(n, v)| (n, v.grad().copy())).collect();

    // Plain: the same packed batch by hand (prompts left-padded, responses right-padded).
    let model = HfModel::from_pretrained(fixture(), Device::Cpu, HfDtype::F32)?;
    let pad = policy.pad_id();
    let pw = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let (mut ids, mut mask, mut rmask) = (Vec::new(), Vec::new(), Vec::new());
    for (pr, rs) in prompts.iter().zip(&responses) {
        for _ in pr.len()..pw {
            ids.push(pad);
            mask.push(0i64);
        }
        ids.extend(pr);
        mask.extend(std::iter::repeat_n(1i64, pr.len()));
        ids.extend(rs);
        mask.extend(std::iter::repeat_n(1i64, rs.len()));
        for _ in rs.len()..5 {
            ids.push(pad);
            mask.push(0);
        }
        rmask.extend((0..5).map(|j| if j < rs.len() { 1.0f32 } else { 0.0 }));
    }
    let w = (pw + 5) as i64;
    let ids = Tensor::from_slice(&ids).view([2, w]);
    let mask = Tensor::from_slice(&mask).view([2, w]);
    let rmask = Tensor::from_slice(&rmask).view([2, 5]);
    let params = LogProbParams::default().temperature(0.7).chunk(256).entropy(true).check()?;
    let plain = model.token_logprobs(&ids, Some(&mask), pw as i64, &params)?;
    let lp = &plain.logprobs * &rmask;
    let loss2 =
        (&lp * &coef).sum(Kind::Float) + (plain.entropy.as_ref().map(|e| e * &rmask)).unwrap().sum(Kind::Float) * 0.05;
    loss2.backward();
    let plain_vars = model.var_store().variables();
    for (name, g) in &deferred {
        let want = plain_vars[name].grad();
        let scale = want.abs().max().double_value(&[]).max(1e-12);
        let rel = (g - &want).abs().max().double_value(&[]) / scale;
        ensure!(rel < 1e-4, "gradient of {name}: relative error {rel}");
    }
    ensure!((loss.double_value(&[]) - loss2.double_value(&[])).abs() < 1e-5);
    Ok(())
}

#[test]
fn bad_hf_configs_are_typed_errors() -> Result<()> {
    let mut c = tiny_hf()?;
    c.hf = Some(HfPolicyConfig::new("/nonexistent/model"));
    ensure!(matches!(Trainer::new(c.clone()), Err(TrainError::Hf(_))), "a missing directory");
    c.hf = Some(HfPolicyConfig { stop: vec!["<nope>".into()], ..HfPolicyConfig::new(fixture()) });
    match Trainer::new(c.clone()) {
        Err(TrainError::InvalidConfig { field, .. }) => ensure!(field == "hf.stop"),
        other => anyhow::bail!("unknown stop token: {other:?}"),
    }
    c.hf = Some(HfPolicyConfig { logprob_chunk: 0, ..HfPolicyConfig::new(fixture()) });
    match c.validate() {
        Err(TrainError::InvalidConfig { field, .. }) => ensure!(field == "hf.logprob_chunk"),
        other => anyhow::bail!("chunk 0: {other:?}"),
    }
    let err = RunConfig::from_toml_str("[hf]\ndir = \"x\"\nchunk = 3\n").unwrap_err();
    ensure!(err.to_string().contains("hf"), "unknown [hf] key: {err}");
    // A tokenizer larger than the model's vocabulary.
    let small = HfModel::from_pretrained(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rl-hf/tests/fixtures/qwen2_tied"),
        Device::Cpu,
        HfDtype::F32,
    )?;
    let tok = HfTokenizer::from_dir(fixture())?;
    ensure!(matches!(HfPolicy::new(small, tok, HfPolicyConfig::new(fixture())), Err(TrainError::InvalidConfig { .. })));
    // Generation that never stops is malformed, not a panic.
    let policy = HfPolicy::load(&HfPolicyConfig::new(fixture()), Device::Cpu)?;
    // Warm-start targets end with the tokenizer's eos_token (<|im_end|>, id 2), whatever the
    // other stop ids.
    ensure!(policy.encode_completion("3+4")?.last() == Some(&2));
    ensure!(policy.stop_ids().contains(&2));
    ensure!(policy.completion_text(&[40, 41]).is_err());
    ensure!(policy.completion_text(&[40, 41, 2]).is_ok());
    ensure!(policy.completion_text(&[40, 100_000, 2]).is_err());
    Ok(())
}

#[test]
fn a_lora_run_trains_the_adapter_only_resumes_and_saves_both_layouts() -> Result<()> {
    let mut cfg = tiny_hf()?;
    let lora = rl_hf::LoraParams::default().r(4).alpha(8.0).targets(rl_hf::LoraTarget::ALL);
    cfg.hf = Some(HfPolicyConfig { lora: Some(lora.clone()), lora_seed: 5, ..cfg.hf.clone().unwrap() });
    // The TOML form of the same table.
    let toml = "[hf]\ndir = \"d\"\nlora_seed = 5\n[hf.lora]\nr = 4\nalpha = 8.0\ntargets = [\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", \"down_proj\"]\n";
    ensure!(RunConfig::from_toml_str(toml)?.hf.unwrap().lora == Some(lora.clone()));
    let mut t = Trainer::new(cfg.clone())?;
    let base = HfModel::from_pretrained(fixture(), Device::Cpu, HfDtype::F32)?;
    let names: Vec<String> = weights(&t).into_iter().map(|(n, _)| n).collect();
    ensure!(names.len() == 2 * 7 * base.config().num_hidden_layers as usize, "the optimiser holds A and B only");
    ensure!(names.iter().all(|n| n.ends_with("lora_A.weight") || n.ends_with("lora_B.weight")), "{names:?}");
    let before = weights(&t);
    let losses = t.warm_start(&mut |_, _| {})?;
    ensure!(losses[3] < losses[0], "the adapter's warm start lowers the token nll: {losses:?}");
    t.step()?;
    let after = weights(&t);
    ensure!(before.iter().zip(&after).any(|((_, a), (_, b))| !a.equal(b)), "training changed no adapter matrix");
    // Resume: the checkpoint holds the adapter; the base comes from hf.dir again.
    let dir = tempfile::tempdir()?;
    t.save_checkpoint(dir.path())?;
    let mut resumed = Trainer::resume(dir.path())?;
    let (a, b) = (t.step()?, resumed.step()?);
    ensure!(a.reward_mean == b.reward_mean && a.rollouts == b.rollouts);
    for ((n, x), (_, y)) in weights(&t).iter().zip(&weights(&resumed)) {
        ensure!(x.equal(y), "{n} differs after resuming");
    }

    // save: the merged model (transformers' layout) plus the PEFT adapter under adapter/.
    let out = tempfile::tempdir()?;
    t.policy().save(out.path())?;
    let lp = |p: &dyn Policy| -> Result<Tensor> {
        let (prompts, responses): (Vec<i64>, Vec<i64>) = (vec![5, 9, 14], vec![3, 7, 2]);
        tch::no_grad(|| Ok(p.response_logprobs(&[&prompts], &[&responses], 1.0, false)?.logprobs))
    };
    let want = lp(t.policy())?;
    // The merged directory is a plain model with the trained policy's outputs.
    let merged = HfModel::from_pretrained(out.path(), Device::Cpu, HfDtype::F32)?;
    ensure!(merged.lora().is_none());
    let merged = HfPolicy::new(merged, HfTokenizer::from_dir(out.path())?, HfPolicyConfig::new(out.path()))?;
    ensure!((&lp(&merged)? - &want).abs().max().double_value(&[]) < 1e-4, "merged model = trained policy");
    // A warm start from that directory loads the adapter into a fresh LoRA policy on hf.dir's
    // base: exactly the trained policy (so the base weights did not move either).
    let mut p = HfPolicy::load(cfg.hf.as_ref().unwrap(), Device::Cpu)?;
    p.load(out.path())?;
    ensure!(lp(&p)?.equal(&want), "saved adapter on the fixture base = trained policy");
    // Another rank in the config than in the saved adapter: a typed error.
    let other = HfPolicyConfig { lora: Some(lora.clone().r(2)), ..cfg.hf.clone().unwrap() };
    let mut q = HfPolicy::load(&other, Device::Cpu)?;
    ensure!(q.load(out.path()).is_err());
    // A bad adapter config is refused before anything loads.
    let bad = HfPolicyConfig { lora: Some(lora.r(0)), ..cfg.hf.clone().unwrap() };
    ensure!(matches!(bad.validate(), Err(TrainError::InvalidConfig { field, .. }) if field == "hf.lora"));
    Ok(())
}
