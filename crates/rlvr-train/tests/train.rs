//! The RL loop at a tiny size: it must improve the reward, count rollouts honestly, and turn
//! bad input into typed errors.

use anyhow::{ensure, Result};
use rl_lm::LmConfig;
use rlvr_replay::ReplayParams;
use rlvr_select::DpsParams;
use rlvr_tasks::{CharTokenizer, Family, PoolParams};
use std::collections::HashSet;

use rl_lm::TransformerLm;
use rlvr_select::{Candidates, Outcome, RolloutOracle, SelectError, Selection, Selector};
use rlvr_tasks::{PoolRequest, PromptPool, RewardParams};
use rlvr_train::{RunConfig, SelectorConfig, TaskSet, TrainError, Trainer};

/// Countdown with two numbers from 1-9 (level 0: 138 problems; 100 train, 32 held out, none
/// shared), a 2-layer 48-wide model, a short warm start.
fn tiny(seed: u64) -> RunConfig {
    let mut c = RunConfig { seed, device: "cpu".into(), ..RunConfig::default() };
    c.task.pool = PoolParams::new(Family::Countdown, 5).levels([0]);
    c.task.train_prompts = 100;
    c.task.eval_prompts = 32;
    c.model = LmConfig::new(CharTokenizer::VOCAB_SIZE, 32).d_model(48).n_layers(2).n_heads(4).d_ff(192);
    c.sft.steps = 60;
    c.sft.batch_size = 32;
    c.rl.steps = 40;
    c.rl.batch_prompts = 16;
    c.rl.group_size = 8;
    c.rl.lr = 1e-3;
    c.rl.max_new_tokens = 10;
    c.eval.every = 40;
    c.eval.samples = 4;
    c.eval.k = 4;
    c.replay = Some(ReplayParams::new(8));
    c.selector = SelectorConfig::Dps { params: DpsParams::default() };
    c
}

#[test]
fn a_tiny_rl_run_improves_reward() -> Result<()> {
    // Seeds 0-5 of this config raise the mean training reward by 0.24-0.28 (first vs last ten
    // steps) and held-out pass@1 by 0.05-0.20; seed 2: 0.33 -> 0.58 and 0.12 -> 0.32.
    let mut t = Trainer::new(tiny(2))?;
    let losses = t.warm_start(&mut |_, _| {})?;
    ensure!(losses.len() == 60 && losses[59] < losses[0] * 0.5, "warm start did not learn: {losses:?}");
    let mut rewards = Vec::new();
    let summary = t.run(&mut |rec| rewards.push(rec.reward_mean), &mut |_| {})?;
    ensure!(summary.steps == 40 && rewards.len() == 40);
    let first = rewards[..10].iter().sum::<f64>() / 10.0;
    let last = rewards[30..].iter().sum::<f64>() / 10.0;
    ensure!(last > first + 0.05, "training reward did not rise: first 10 steps {first:.3}, last 10 {last:.3}");
    ensure!(
        summary.last.pass_at_1 > summary.initial.pass_at_1,
        "held-out pass@1 {:.3} -> {:.3}",
        summary.initial.pass_at_1,
        summary.last.pass_at_1
    );
    // Rollout accounting: 16 prompts x 8 responses per step, no selection rollouts for DPS.
    ensure!(summary.rollouts.train == 40 * 16 * 8 && summary.rollouts.selection == 0);
    // POPO keeps the batch effective.
    ensure!(summary.batch_effective_ratio >= summary.generated_effective_ratio);
    Ok(())
}

#[test]
fn dynamic_sampling_spends_selection_rollouts_and_trains_on_them() -> Result<()> {
    let mut c = tiny(1);
    c.selector = SelectorConfig::DynamicSampling { max_gen_batches: 3 };
    c.replay = None;
    c.loss.correction = None;
    c.rl.steps = 3;
    c.sft.steps = 20;
    let mut t = Trainer::new(c)?;
    t.warm_start(&mut |_, _| {})?;
    for _ in 0..3 {
        let rec = t.step()?;
        // Everything DS kept was generated inside selection: the trainer generates nothing.
        ensure!(rec.rollouts.train == 0, "{:?}", rec.rollouts);
        ensure!(rec.rollouts.selection % 8 == 0 && rec.rollouts.selection > 0);
        ensure!(rec.batch_groups == rec.batch_effective, "DS trains only mixed groups");
        for key in ["time/generation", "time/scoring", "time/selection", "time/loss", "rollouts/total"] {
            ensure!(rec.metrics.get(key).is_some(), "missing metric {key}");
        }
    }
    Ok(())
}

#[test]
fn every_configured_selector_runs_a_step() -> Result<()> {
    let mut seen = Vec::new();
    for name in SelectorConfig::SHORT_NAMES {
        let sel = SelectorConfig::from_short_name(name).ok_or_else(|| anyhow::anyhow!("{name}"))?;
        ensure!(sel.short_name() == name);
        let mut c = tiny(2);
        c.selector = sel.clone();
        c.sft.steps = 20;
        c.rl.candidate_ratio = 2;
        if let SelectorConfig::DynamicSampling { max_gen_batches }
        | SelectorConfig::OnlineDifficulty { max_gen_batches, .. } = &mut c.selector
        {
            *max_gen_batches = 2;
        }
        let mut t = Trainer::new(c)?;
        t.warm_start(&mut |_, _| {})?;
        let rec = t.step()?;
        ensure!(rec.rollouts.train + rec.rollouts.selection > 0, "{name}: {:?}", rec.rollouts);
        ensure!(rec.rollouts.total() % 8 == 0, "{name}: {:?}", rec.rollouts);
        seen.push(t.selector().name());
        // Round trip through TOML.
        let text = t.config().to_toml()?;
        ensure!(RunConfig::from_toml_str(&text)?.selector == t.config().selector, "{name}: {text}");
    }
    ensure!(seen.len() == 11, "{seen:?}");
    Ok(())
}

/// A caller's selector: the smallest candidate ids, recording what it was told.
#[derive(Debug, Default)]
struct SmallestIds {
    log: std::sync::Arc<std::sync::Mutex<(Vec<u64>, Vec<u64>)>>,
}

impl Selector for SmallestIds {
    fn name(&self) -> &'static str {
        "smallest-ids"
    }
    fn select(
        &mut self,
        _step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        _rng: &mut dyn rand::RngCore,
    ) -> rlvr_select::Result<Selection> {
        let mut ids = candidates.ids().to_vec();
        ids.sort_unstable();
        ids.truncate(batch_size);
        self.log.lock().map_err(|e| SelectError::Oracle(e.to_string()))?.0.extend(&ids);
        Ok(Selection { scores: vec![0.0; ids.len()], ids, ..Selection::default() })
    }
    fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn rand::RngCore) -> rlvr_select::Result<()> {
        self.log.lock().map_err(|e| SelectError::Oracle(e.to_string()))?.1.extend(outcomes.iter().map(|o| o.id));
        Ok(())
    }
    fn save_state(&self) -> rlvr_select::Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    fn load_state(&mut self, _state: &serde_json::Value) -> rlvr_select::Result<()> {
        Ok(())
    }
}

#[test]
fn the_builder_takes_a_callers_selector_tasks_and_policy() -> Result<()> {
    let c = tiny(2);
    let sel = SmallestIds::default();
    let log = sel.log.clone();
    let mut t = Trainer::builder(c.clone()).selector(Box::new(sel)).build()?;
    ensure!(t.selector().name() == "smallest-ids");
    t.warm_start(&mut |_, _| {})?;
    let rec = t.step()?;
    ensure!(rec.rollouts.train == 16 * 8);
    let (selected, observed) = log.lock().map_err(|e| anyhow::anyhow!("{e}"))?.clone();
    ensure!(selected.len() == 16 && observed == selected, "selected {selected:?}, observed {observed:?}");
    ensure!(selected.windows(2).all(|w| w[0] < w[1]));

    // Own pools: disjoint ones are accepted (training ids renumbered), overlapping ones refused.
    let held = PoolParams::new(Family::Countdown, 9).levels([1]);
    let train = PoolParams::new(Family::Countdown, 8).levels([1]).first_id(500);
    let pools = PromptPool::generate_disjoint(&[
        PoolRequest { name: "held-out", params: &held, n: 20 },
        PoolRequest { name: "train", params: &train, n: 50 },
    ])?;
    let tasks = TaskSet::from_pools(pools[1].clone(), pools[0].clone(), RewardParams::default())?;
    ensure!(tasks.train.pool().prompts()[3].id == 3 && tasks.overlap() == 0);
    let mut t = Trainer::builder(c.clone()).tasks(tasks).build()?;
    ensure!(t.tasks().train.len() == 50);
    t.step()?;
    match TaskSet::from_pools(pools[1].clone(), pools[1].clone(), RewardParams::default()) {
        Err(TrainError::InvalidConfig { field, .. }) if field == "tasks.eval" => {}
        other => anyhow::bail!("overlapping pools accepted: {:?}", other.map(|_| ())),
    }

    // Own policy: its weights are the ones trained; a foreign vocabulary is refused.
    let lm = TransformerLm::new(&c.model.clone().d_model(32), tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    let want = lm.var_store().variables()["tok_emb.weight"].copy();
    let t = Trainer::builder(c.clone()).policy(lm).build()?;
    ensure!(t.policy().var_store().variables()["tok_emb.weight"].equal(&want));
    ensure!(t.config().model.d_model == 32);
    let foreign = TransformerLm::new(
        &LmConfig::new(30, 32).d_model(32).n_layers(1),
        tch::Device::Cpu,
        &mut rl_core::rng_from_seed(0),
    )?;
    match Trainer::builder(c).policy(foreign).build() {
        Err(TrainError::InvalidConfig { field, .. }) if field == "policy.vocab_size" => {}
        other => anyhow::bail!("foreign vocabulary accepted: {:?}", other.map(|_| ())),
    }
    Ok(())
}

/// LPO must train: a batch with mixed groups, a finite loss, and weights that move.
#[test]
fn lpo_trains_a_batch() -> Result<()> {
    use rlvr_core::{LpoParams, PolicyLoss};
    let mut c = tiny(2);
    c.loss.policy = PolicyLoss::Lpo(LpoParams::default());
    c.replay = None;
    c.loss.correction = None;
    let mut t = Trainer::new(c)?;
    t.warm_start(&mut |_, _| {})?;
    let before = t.policy().var_store().variables();
    let before: Vec<(String, tch::Tensor)> = before.iter().map(|(k, v)| (k.clone(), v.copy())).collect();
    let rec = t.step()?;
    ensure!(rec.batch_groups == 16 && rec.batch_effective > 0, "nothing to train: {} effective", rec.batch_effective);
    ensure!(rec.updates.len() == 4, "{} updates", rec.updates.len());
    ensure!(rec.metrics.get("loss/lpo_coef_l1").is_some_and(|v| v.is_finite() && v > 0.0), "{:?}", rec.metrics);
    let after = t.policy().var_store().variables();
    let moved = before.iter().filter(|(k, v)| after.get(k).is_some_and(|a| !a.equal(v))).count();
    ensure!(moved > 0, "no weight changed");
    Ok(())
}

/// PPO mini-batches: the first update of a batch is on-policy (ratio 1, nothing clipped); the
/// later ones see the policy moved by the earlier ones, so the clip acts.
#[test]
fn ppo_mini_batches_make_the_clip_act() -> Result<()> {
    let mut c = tiny(2);
    c.rl.ppo_mini_batches = 4;
    c.replay = None;
    c.loss.correction = None;
    let mut t = Trainer::new(c)?;
    t.warm_start(&mut |_, _| {})?;
    let mut later_clipped = 0.0;
    for _ in 0..4 {
        let rec = t.step()?;
        ensure!(rec.updates.len() == 4 && rec.updates.iter().map(|u| u.groups).sum::<usize>() == 16);
        let first = &rec.updates[0].loss;
        ensure!(
            (first.ratio_mean - 1.0).abs() < 1e-5 && first.ppo_kl.abs() < 1e-6,
            "first update off-policy: {first:?}"
        );
        ensure!(first.clipfrac == Some(0.0), "first update clipped: {first:?}");
        later_clipped += rec.updates[1..].iter().filter_map(|u| u.loss.clipfrac).sum::<f64>();
        ensure!(rec.updates[1..].iter().any(|u| (u.loss.ratio_mean - 1.0).abs() > 1e-6), "later updates on-policy");
    }
    ensure!(later_clipped > 0.0, "the clip never acted after the first mini-batch");
    Ok(())
}

/// POPO with several mini-batches and epochs: a replayed group's correction weight
/// `pi_prox / pi_behave` uses the proximal policy of the batch (computed once), so it is the
/// same in every epoch while the PPO ratio moves.
#[test]
fn popo_proximal_policy_is_fixed_across_updates() -> Result<()> {
    let mut c = tiny(2);
    c.rl.ppo_mini_batches = 2;
    c.rl.ppo_epochs = 2;
    let mut t = Trainer::new(c)?;
    t.warm_start(&mut |_, _| {})?;
    let mut checked = 0;
    for _ in 0..12 {
        let rec = t.step()?;
        if rec.metrics.get("replay/replayed").unwrap_or(0.0) == 0.0 {
            continue;
        }
        ensure!(rec.updates.len() == 4);
        for i in 0..2 {
            let (e0, e1) = (&rec.updates[i].loss, &rec.updates[i + 2].loss);
            ensure!(e0.is_weight_raw_mean == e1.is_weight_raw_mean, "weight moved between epochs: {e0:?} {e1:?}");
            ensure!(e1.ratio_mean != 1.0, "second epoch on-policy");
        }
        ensure!(rec.updates.iter().any(|u| u.loss.is_weight_raw_mean.is_some_and(|w| w != 1.0)), "no replayed row");
        checked += 1;
    }
    ensure!(checked > 0, "no step replayed a group");
    Ok(())
}

#[test]
fn bad_configs_and_checkpoints_are_typed_errors() -> Result<()> {
    let bad = |f: &dyn Fn(&mut RunConfig), field: &str| -> Result<()> {
        let mut c = tiny(0);
        f(&mut c);
        match Trainer::new(c) {
            Err(TrainError::InvalidConfig { field: got, .. }) => {
                ensure!(got == field, "expected {field}, got {got}");
                Ok(())
            }
            other => anyhow::bail!("{field}: expected InvalidConfig, got {:?}", other.map(|_| ())),
        }
    };
    bad(&|c| c.rl.group_size = 1, "rl.group_size")?;
    bad(&|c| c.rl.temperature = f64::NAN, "rl.temperature")?;
    bad(&|c| c.task.eval_seed = c.task.pool.seed, "task.eval_seed")?;
    bad(&|c| c.eval.k = 9, "eval.k")?;
    bad(&|c| c.model.vocab_size = 30, "model.vocab_size")?;
    bad(&|c| c.replay = Some(ReplayParams::new(4)), "replay.group_size")?;
    ensure!(
        matches!(RunConfig::from_toml_str("[rl]\nstepz = 3\n"), Err(TrainError::ConfigParse { key, .. }) if key == "rl.stepz")
    );
    ensure!(matches!(
        RunConfig::from_toml_str("[selector]\nkind = \"oracle\"\n"),
        Err(TrainError::ConfigParse { key, .. }) if key == "selector.kind"
    ));

    // A corrupt warm-start checkpoint and one of another shape.
    let dir = tempfile::tempdir()?;
    let corrupt = dir.path().join("corrupt.safetensors");
    std::fs::write(&corrupt, b"not a safetensors file")?;
    let mut c = tiny(0);
    c.sft.init_checkpoint = Some(corrupt);
    let mut t = Trainer::new(c)?;
    ensure!(matches!(t.warm_start(&mut |_, _| {}), Err(TrainError::Lm(_))));
    let other = dir.path().join("other.safetensors");
    let mut c = tiny(0);
    c.model = c.model.clone().d_model(32);
    Trainer::new(c)?.policy().save(&other)?;
    let mut c = tiny(0);
    c.sft.init_checkpoint = Some(other);
    let mut t = Trainer::new(c)?;
    let err = t.warm_start(&mut |_, _| {}).err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(err.contains("shape"), "{err}");
    Ok(())
}

#[test]
fn held_out_is_disjoint_from_training_for_the_default_and_every_example_config() -> Result<()> {
    let mut configs = vec![("default".to_string(), RunConfig::default())];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/configs");
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            configs.push((path.display().to_string(), RunConfig::from_toml_file(&path)?));
        }
    }
    ensure!(configs.len() >= 2, "no example configs found in {}", dir.display());
    for (name, cfg) in &configs {
        let tasks = TaskSet::new(&cfg.task)?;
        ensure!(tasks.train.len() == cfg.task.train_prompts && tasks.eval.len() == cfg.task.eval_prompts, "{name}");
        // By canonical form (numbers in any order), in both directions, and no repeats inside a pool.
        let train: HashSet<_> = tasks.train.pool().iter().map(|p| p.task.key()).collect();
        let shared = tasks.eval.pool().iter().filter(|p| train.contains(&p.task.key())).count();
        ensure!(shared == 0 && tasks.overlap() == 0, "{name}: {shared} held-out prompts are training prompts");
        ensure!(train.len() == tasks.train.len(), "{name}: repeated training prompts");
        ensure!(tasks.eval.pool().duplicates() == 0, "{name}: repeated held-out prompts");
    }
    // A pool asking a level for more prompts than exist is a typed error, not a silent overlap.
    let mut c = tiny(0);
    c.task.pool = PoolParams::new(Family::Countdown, 5).levels([0]);
    (c.task.train_prompts, c.task.eval_prompts) = (200, 64);
    match TaskSet::new(&c.task) {
        Err(TrainError::Task(rlvr_tasks::TaskError::NotEnoughPrompts { level: 0, requested: 264, available: 138 })) => {
        }
        other => anyhow::bail!("expected NotEnoughPrompts, got {:?}", other.map(|_| ())),
    }
    Ok(())
}

#[test]
fn config_round_trips_through_toml() -> Result<()> {
    let c = tiny(3);
    let text = c.to_toml()?;
    let back = RunConfig::from_toml_str(&text)?;
    ensure!(back == c, "{text}");
    let mut off = tiny(3);
    off.replay = None;
    let text = off.to_toml()?;
    ensure!(RunConfig::from_toml_str(&text)? == off, "{text}");
    ensure!(RunConfig::from_toml_str("replay = false\n")?.replay.is_none());
    ensure!(RunConfig::from_toml_str("replay = true\n")?.replay == Some(ReplayParams::default()));
    let with_age = RunConfig::from_toml_str("[replay]\nmax_age = 2\n")?;
    ensure!(with_age.replay.as_ref().map(|r| r.max_age) == Some(2));
    let partial = RunConfig::from_toml_str("seed = 9\n[selector]\nkind = \"dynamic_sampling\"\n")?;
    ensure!(partial.seed == 9 && partial.selector == SelectorConfig::DynamicSampling { max_gen_batches: 10 });
    Ok(())
}

/// The model is drawn from the run's own stream: two trainers built at once in two threads
/// from one seed have bit-identical weights (libtorch's global generator would race), and
/// another seed gives other weights.
#[test]
fn trainers_built_concurrently_have_identical_initial_weights() -> Result<()> {
    let weights = |seed: u64| -> Result<Vec<(String, tch::Tensor)>> {
        let t = Trainer::new(tiny(seed))?;
        let mut v: Vec<(String, tch::Tensor)> = t.policy().var_store().variables().into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(v)
    };
    let handles: Vec<_> = (0..4).map(|i| std::thread::spawn(move || weights(if i < 3 { 7 } else { 8 }))).collect();
    let mut all = Vec::new();
    for h in handles {
        all.push(h.join().map_err(|_| anyhow::anyhow!("thread panicked"))??);
    }
    for other in &all[1..3] {
        ensure!(other.len() == all[0].len());
        for ((na, a), (nb, b)) in all[0].iter().zip(other) {
            ensure!(na == nb && a.equal(b), "{na} differs between threads");
        }
    }
    ensure!(all[0].iter().zip(&all[3]).any(|((_, a), (_, b))| !a.equal(b)), "seed 8 gave seed 7's weights");
    Ok(())
}

/// Every metric of a step but the wall times.
fn timeless(m: &rl_core::Metrics) -> Vec<(String, f64)> {
    m.iter().filter(|(k, _)| !k.starts_with("time/")).map(|(k, v)| (k.to_string(), v)).collect()
}

/// Interrupt a run (DPS + POPO replay, PPO mini-batches) after 4 of 8 steps, save, build a
/// fresh trainer, load, finish: every step's metrics, every evaluation and the final weights
/// equal the uninterrupted run's, bit for bit.
#[test]
fn an_interrupted_run_resumed_from_its_checkpoint_ends_identically() -> Result<()> {
    let mut cfg = tiny(2);
    cfg.rl.steps = 8;
    cfg.eval.every = 4;
    cfg.sft.steps = 30;

    let mut a = Trainer::new(cfg.clone())?;
    a.warm_start(&mut |_, _| {})?;
    let mut steps_a = Vec::new();
    let sa = a.run(&mut |r| steps_a.push(timeless(&r.metrics)), &mut |_| {})?;

    let dir = tempfile::tempdir()?;
    let ckpt = dir.path().join("ckpt");
    let mut first = cfg.clone();
    first.rl.steps = 4;
    let mut b = Trainer::new(first)?;
    b.warm_start(&mut |_, _| {})?;
    let mut steps_b = Vec::new();
    b.run(&mut |r| steps_b.push(timeless(&r.metrics)), &mut |_| {})?;
    b.save_checkpoint(&ckpt)?;
    drop(b);
    let mut b = Trainer::new(cfg.clone())?;
    ensure!(!b.warm_started());
    b.load_checkpoint(&ckpt)?;
    ensure!(b.warm_started() && b.steps_done() == 4);
    let sb = b.run(&mut |r| steps_b.push(timeless(&r.metrics)), &mut |_| {})?;
    // The same through Trainer::resume (config from the checkpoint, then extended).
    let mut c = Trainer::resume(&ckpt)?;
    ensure!(c.steps_done() == 4 && c.config().rl.steps == 4);

    ensure!(steps_a.len() == 8 && steps_a == steps_b, "per-step metrics differ");
    ensure!(sa.curve == sb.curve, "evaluations differ: {:?} vs {:?}", sa.curve, sb.curve);
    ensure!(sa.rollouts == sb.rollouts && sa.generated_effective_ratio == sb.generated_effective_ratio);
    ensure!(sa.batch_effective_ratio == sb.batch_effective_ratio);
    let (wa, wb) = (a.policy().var_store().variables(), b.policy().var_store().variables());
    ensure!(wa.iter().all(|(k, v)| wb.get(k).is_some_and(|w| w.equal(v))), "final weights differ");

    // A checkpoint of another config or selector is refused and leaves the trainer unchanged.
    let mut other = cfg.clone();
    other.rl.lr = 5e-4;
    let mut t = Trainer::new(other)?;
    match t.load_checkpoint(&ckpt) {
        Err(TrainError::Checkpoint { reason, .. }) if reason.contains("rl.lr") => {}
        r => anyhow::bail!("another config accepted: {:?}", r.map(|_| ())),
    }
    ensure!(t.steps_done() == 0 && !t.warm_started());
    let mut uniform = cfg.clone();
    uniform.selector = SelectorConfig::Uniform;
    match Trainer::new(uniform)?.load_checkpoint(&ckpt) {
        Err(TrainError::Checkpoint { reason, .. }) if reason.contains("selector") => {}
        r => anyhow::bail!("another selector accepted: {:?}", r.map(|_| ())),
    }
    std::fs::write(ckpt.join("tensors.safetensors"), b"truncated")?;
    ensure!(matches!(c.load_checkpoint(&ckpt), Err(TrainError::Nn(_))));
    ensure!(c.steps_done() == 4);
    Ok(())
}

/// One definition of "effective": by outcome. An all-wrong group whose rewards vary only by the
/// format reward (0.1 well-formed, 0 malformed) is ineffective for the trainer's buffer — with
/// replay it is replaced, without replay it trains with zero advantages — while the reward-
/// variance alternative, when asked for, counts it.
#[test]
fn a_format_only_variance_group_is_ineffective_by_outcome() -> Result<()> {
    use rlvr_core::{EffectivenessRule, IneffectiveReason, Verdict};
    use rlvr_replay::{GroupReplayBuffer, Origin, Params};
    use rlvr_train::RolloutGroup;
    let k = 8;
    let group = |index: usize, rewards: Vec<f32>, correct: Vec<bool>| RolloutGroup {
        index,
        responses: vec![vec![5, 2]; k],
        logprobs: vec![vec![-0.5, -0.1]; k],
        malformed: rewards.iter().map(|&r| r == 0.0).collect(),
        rewards,
        correct,
    };
    let format_only = group(0, vec![0.1, 0.0, 0.1, 0.0, 0.1, 0.1, 0.0, 0.1], vec![false; k]);
    let mixed = group(
        1,
        vec![1.0, 0.1, 0.0, 0.1, 1.0, 0.1, 0.1, 0.1],
        vec![true, false, false, false, true, false, false, false],
    );
    ensure!(format_only.has_reward_variance() && !format_only.has_mixed_outcome());
    let cfg = tiny(0);
    ensure!(cfg.effectiveness == EffectivenessRule::default());
    ensure!(format_only.verdict(&cfg.effectiveness) == Verdict::Ineffective(IneffectiveReason::AllFailure));
    ensure!(mixed.verdict(&cfg.effectiveness).is_effective());
    ensure!(format_only.verdict(&EffectivenessRule::reward_std()).is_effective());

    let prompt = [1i64, 5, 6];
    for replay in [true, false] {
        let mut c = tiny(0);
        if !replay {
            c.replay = None;
        }
        let mut buffer = GroupReplayBuffer::new(c.replay_params().check()?)?;
        // Step 0 stores the mixed group; at step 1 the format-only group's slot is refilled
        // (replay) or kept with zero advantages (no replay).
        buffer.fill(vec![mixed.to_replay_group(&prompt, 0)?], 0)?;
        let filled = buffer.fill(vec![format_only.to_replay_group(&prompt, 1)?], 1)?;
        let bg = &filled.groups[0];
        if replay {
            ensure!(bg.is_replayed() && bg.group().prompt_id() == 1, "not replaced: {:?}", bg.origin());
        } else {
            ensure!(matches!(bg.origin(), Origin::Unfilled { .. }), "{:?}", bg.origin());
            ensure!(bg.advantages().iter().all(|&a| a == 0.0), "format-only advantages {:?}", bg.advantages());
        }
        // The variance alternative trains on it.
        let mut v = c.clone();
        v.effectiveness = EffectivenessRule::reward_std();
        let mut buffer = GroupReplayBuffer::new(v.replay_params().check()?)?;
        let filled = buffer.fill(vec![format_only.to_replay_group(&prompt, 0)?], 0)?;
        ensure!(matches!(filled.groups[0].origin(), Origin::Fresh));
        ensure!(filled.groups[0].advantages().iter().any(|&a| a != 0.0));
    }
    // A [replay] table with another rule than the run's is refused, naming the field.
    let mut c = tiny(0);
    c.replay = c.replay.map(|r| r.effectiveness(EffectivenessRule::reward_std()));
    match Trainer::new(c) {
        Err(TrainError::InvalidConfig { field, .. }) if field == "replay.effectiveness" => {}
        other => anyhow::bail!("conflicting rules accepted: {:?}", other.map(|_| ())),
    }
    // Metrics report both definitions.
    let mut t = Trainer::new(tiny(2))?;
    t.warm_start(&mut |_, _| {})?;
    let rec = t.step()?;
    for key in ["rollout/effective", "rollout/mixed_outcome", "rollout/reward_variance"] {
        ensure!(rec.metrics.get(key).is_some(), "missing {key}");
    }
    ensure!(rec.metrics.get("rollout/effective") == rec.metrics.get("rollout/mixed_outcome"));
    Ok(())
}
