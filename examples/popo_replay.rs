//! POPO on a toy verifiable task: a tabular policy answers prompts, a verifier checks the
//! answer, and every step's ineffective groups (all right or all wrong) are replaced by recent
//! effective groups from the replay buffer, trained with `rlvr-core`'s decoupled loss. The same
//! run with replay switched off (GRPO-filter: ineffective groups dropped) is the baseline.
//!
//! `cargo run --release --example popo_replay --features rlvr-replay-tch [-- STEPS]`
//!
//! Task: prompt `p` (of 64) asks for token `p mod 8` first; reward 1 when the response's first
//! token is right. A response is 4 tokens from a vocabulary of 8; a group is K = 8 responses.
//! Runs in seconds on a CPU.
use anyhow::Result;
use rand::Rng;
use rl_core::seed::{derive_seed_named, rng_from_seed, torch_seed, SeededRng};
use rlvr_replay::rlvr_core::{token_log_probs, DecoupledParams, LossConfig, LossParams, PolicyLoss};
use rlvr_replay::tensor::TensorBatch;
use rlvr_replay::{EffectivenessRule, Group, GroupBuilder, GroupReplayBuffer, Params, ReplayParams};
use tch::nn::{self, OptimizerConfig};
use tch::{Device, Kind, Tensor};

const PROMPTS: i64 = 64;
const LEN: i64 = 4;
const VOCAB: i64 = 8;
const K: usize = 8;
const BATCH: usize = 8;

struct Policy {
    /// Owns the parameters.
    _vs: nn::VarStore,
    table: Tensor,
    opt: nn::Optimizer,
}

impl Policy {
    fn new(seed: u64) -> Result<Self> {
        tch::manual_seed(torch_seed(seed));
        let vs = nn::VarStore::new(Device::Cpu);
        let table = vs.root().zeros("logits", &[PROMPTS, LEN, VOCAB]);
        let opt = nn::Adam::default().build(&vs, 0.05)?;
        Ok(Self { _vs: vs, table, opt })
    }

    /// Samples K responses to `prompt`, verifies them, returns the group.
    fn rollout(&self, prompt: u64, version: u64, rng: &mut SeededRng) -> Result<Group> {
        let lp = tch::no_grad(|| self.table.get(prompt as i64).log_softmax(-1, Kind::Float));
        let lp = Vec::<f32>::try_from(lp.flatten(0, -1))?;
        let mut b = GroupBuilder::new(prompt, version).with_capacity(K, K * LEN as usize);
        for _ in 0..K {
            let (mut toks, mut lps) = (Vec::new(), Vec::new());
            for t in 0..LEN as usize {
                let row = &lp[t * VOCAB as usize..(t + 1) * VOCAB as usize];
                let u: f32 = rng.random();
                let mut acc = 0.0;
                let tok = row
                    .iter()
                    .position(|&l| {
                        acc += l.exp();
                        u < acc
                    })
                    .unwrap_or(VOCAB as usize - 1);
                toks.push(tok as u32);
                lps.push(row[tok]);
            }
            let reward = f32::from(u8::from(i64::from(toks[0]) == prompt as i64 % VOCAB));
            b.push_response(&toks, &lps, None, reward)?;
        }
        Ok(b.finish()?)
    }

    /// One decoupled-loss update; returns (loss, mean behaviour weight).
    fn update(&mut self, tb: &TensorBatch) -> Result<(f64, f64)> {
        let rows: Vec<i64> = tb.prompt_ids.iter().map(|&p| p as i64).collect();
        let logits = self.table.index_select(0, &Tensor::from_slice(&rows));
        let logp = token_log_probs(&logits.narrow(1, 0, tb.tokens.size()[1]), &tb.tokens)?;
        let old = logp.detach();
        let behave = tb.behaviour_logp_for(&old)?;
        let cfg = LossConfig::new(
            LossParams::new(PolicyLoss::default()).correction(Some(DecoupledParams::default())).check()?,
        );
        let out = cfg.loss(&tb.loss_inputs(&logp, &old, &behave), &tb.counts()?)?;
        self.opt.zero_grad();
        out.loss.backward();
        self.opt.step();
        Ok((out.metrics.loss, out.metrics.is_weight_mean.unwrap_or(1.0)))
    }

    /// Expected accuracy: the policy's probability of the right first token, averaged over
    /// all prompts.
    fn accuracy(&self) -> Result<f64> {
        let p = tch::no_grad(|| self.table.narrow(1, 0, 1).squeeze_dim(1).softmax(-1, Kind::Float));
        let want = Tensor::arange(PROMPTS, (Kind::Int64, Device::Cpu)).remainder(VOCAB).unsqueeze(1);
        Ok(f64::try_from(p.gather(1, &want, false).mean(Kind::Double))?)
    }
}

/// Runs `steps` steps; `replay = false` is GRPO-filter (ineffective groups dropped).
fn run(steps: u64, replay: bool, seed: u64) -> Result<(f64, u64)> {
    let mut policy = Policy::new(seed)?;
    let mut rng = rng_from_seed(derive_seed_named(seed, "rollouts"));
    // max_age 0 makes every stored group too old by the next step: nothing is ever replayed.
    let params = ReplayParams::new(K)
        .capacity_groups(64)
        .max_age(if replay { 2 } else { 0 })
        .effectiveness(EffectivenessRule::Outcome { success_threshold: 1.0 });
    let mut buffer = GroupReplayBuffer::new(params.check()?)?;
    let mut rollouts = 0;
    println!("{:>4} {:>8} {:>6} {:>7} {:>7} {:>8} {:>7}", "step", "reward", "fill", "replay", "loss", "is_w", "acc");
    for step in 0..steps {
        let groups = (0..BATCH)
            .map(|_| policy.rollout(rng.random_range(0..PROMPTS as u64), step, &mut rng))
            .collect::<Result<Vec<_>>>()?;
        rollouts += (BATCH * K) as u64;
        let reward = groups.iter().flat_map(|g| g.rewards()).sum::<f32>() / (BATCH * K) as f32;
        let batch = buffer.fill(groups, step)?;
        let (loss, is_w) =
            if batch.is_empty() { (0.0, 1.0) } else { policy.update(&TensorBatch::new(&batch, 0, Device::Cpu)?)? };
        if step % 5 == 0 || step + 1 == steps {
            let r = &batch.report;
            println!(
                "{step:>4} {reward:>8.3} {:>6.2} {:>7.2} {loss:>7.3} {is_w:>8.3} {:>7.3}",
                r.fill_ratio(),
                r.replay_fraction(),
                policy.accuracy()?
            );
        }
    }
    let m = buffer.metrics();
    println!(
        "totals: fill ratio {:.3}, replayed {}, all-fail {}, all-success {}",
        m.get("replay/total/fill_ratio").unwrap_or(0.0),
        buffer.totals().replayed,
        buffer.totals().ineffective.get(rlvr_replay::IneffectiveReason::AllFailure),
        buffer.totals().ineffective.get(rlvr_replay::IneffectiveReason::AllSuccess),
    );
    Ok((policy.accuracy()?, rollouts))
}

fn main() -> Result<()> {
    let steps: u64 = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(60);
    println!("== POPO (replay + decoupled correction) ==");
    let (popo, n) = run(steps, true, 0)?;
    println!("\n== GRPO-filter (ineffective groups dropped) ==");
    let (filter, _) = run(steps, false, 0)?;
    println!("\nexpected accuracy after {n} rollouts: POPO {popo:.3}, GRPO-filter {filter:.3}");
    Ok(())
}
