//! The shortest honest way to put frugal-rl into *your* RLVR training loop: your policy, your
//! verifier, our selector (DPS), replay buffer (POPO) and loss (`rlvr-core`).
//!
//! `cargo run --release --features full --example embed_trainer`
//!
//! "Your" policy here is a table of answer logits per prompt for `a + b = ?` with digits `a, b`
//! (one token, 0..=18); "your" verifier is a function. Swap in an LLM and a math checker: the calls into
//! frugal-rl stay the same. What frugal-rl needs from your side each step:
//!
//! 1. prompt ids to choose from (`Candidates`);
//! 2. `K` sampled responses per chosen prompt with their behaviour log-probs and rewards
//!    (`GroupBuilder`);
//! 3. a forward pass giving the current log-probs of a batch of responses (`[B, T]`).
use anyhow::Result;
use rand::Rng;
use rl_core::{rng_from_seed, Params, SeededRng};
use rlvr_core::{DecoupledParams, LossConfig, LossParams, PolicyLoss};
use rlvr_replay::tensor::TensorBatch;
use rlvr_replay::{GroupBuilder, GroupReplayBuffer, ReplayParams};
use rlvr_select::{CandidateSource, Dps, DpsParams, EpochWindow, NoRollouts, Outcome, Selector};
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

use frugal_rl::{core as rl_core, rlvr_core, rlvr_replay, rlvr_select};

const K: usize = 8; // responses per prompt
const B: usize = 16; // prompts per step
const ANSWERS: i64 = 19;

/// Your policy: answer logits per prompt (uniform at the start).
struct MyPolicy {
    vs: nn::VarStore,
    table: nn::Embedding,
}

impl MyPolicy {
    fn new(n_prompts: i64) -> Self {
        let vs = nn::VarStore::new(Device::Cpu);
        let cfg = nn::EmbeddingConfig { ws_init: nn::Init::Const(0.0), ..Default::default() };
        let table = nn::embedding(vs.root() / "logits", n_prompts, ANSWERS, cfg);
        Self { vs, table }
    }
    /// `[len(prompts), ANSWERS]` log-probs.
    fn log_probs(&self, prompts: &[i64]) -> Tensor {
        self.table.forward(&Tensor::from_slice(prompts)).log_softmax(-1, Kind::Float)
    }
}

/// Your verifier.
fn verify(prompt: i64, answer: u32) -> f32 {
    f32::from(u8::from(i64::from(answer) == prompt / 10 + prompt % 10))
}

fn main() -> Result<()> {
    let mut rng: SeededRng = rng_from_seed(0);
    let n_prompts = 100; // prompt id p asks for (p / 10) + (p % 10)
    let policy = MyPolicy::new(n_prompts as i64);
    let mut opt = nn::Adam::default().build(&policy.vs, 0.1)?;

    // frugal-rl: a selector over prompt ids, a candidate source, a replay buffer, a loss.
    let mut selector = Dps::new(DpsParams::default().check()?, n_prompts)?;
    let mut candidates = EpochWindow::new(n_prompts, 4)?;
    let mut buffer = GroupReplayBuffer::new(ReplayParams::new(K).check()?)?;
    let loss =
        LossConfig::new(LossParams::new(PolicyLoss::default()).correction(Some(DecoupledParams::default())).check()?);

    for step in 0..80u64 {
        // 1. Choose prompts (DPS predicts which are partially solved; no rollouts spent).
        let chosen = selector.select(step, candidates.next_candidates(B, &mut rng)?, B, &mut NoRollouts, &mut rng)?.ids;

        // 2. Your rollouts: K answers per prompt with behaviour log-probs, scored by your verifier.
        let prompts: Vec<i64> = chosen.iter().map(|&id| id as i64).collect();
        let lp = Vec::<f32>::try_from(tch::no_grad(|| policy.log_probs(&prompts)).flatten(0, -1))?;
        let mut groups = Vec::new();
        let mut outcomes = Vec::new();
        for (i, &p) in prompts.iter().enumerate() {
            let row = &lp[i * ANSWERS as usize..(i + 1) * ANSWERS as usize];
            let mut g = GroupBuilder::new(p as u64, step);
            let mut rewards = Vec::new();
            for _ in 0..K {
                let answer = sample(row, &mut rng);
                let r = verify(p, answer);
                g.push_response(&[answer], &[row[answer as usize]], None, r)?;
                rewards.push(r);
            }
            groups.push(g.finish()?);
            outcomes.push(Outcome::new(p as u64, rewards));
        }

        // 3. POPO: ineffective groups (all right / all wrong) are swapped for stored effective ones.
        let batch = buffer.fill(groups, step)?;
        if !batch.is_empty() {
            let tb = TensorBatch::new(&batch, 0, Device::Cpu)?;
            // Your forward pass: current log-probs of the batch's tokens, [B*K, T] (T = 1 here).
            let rows: Vec<i64> = tb.prompt_ids.iter().map(|&p| p as i64).collect();
            let logp = policy.log_probs(&rows).gather(1, &tb.tokens, false);
            let old = logp.detach();
            let behave = tb.behaviour_logp_for(&old)?; // stored pi_b on replayed rows
            let out = loss.loss(&tb.loss_inputs(&logp, &old, &behave), &tb.counts()?)?;
            opt.zero_grad();
            out.loss.backward();
            opt.step();
        }

        // 4. Tell the selector what happened.
        selector.observe(step, &outcomes, &mut rng)?;
        if step % 10 == 9 {
            let all: Vec<i64> = (0..n_prompts as i64).collect();
            let lp = tch::no_grad(|| policy.log_probs(&all));
            let targets = Tensor::from_slice(&all.iter().map(|p| p / 10 + p % 10).collect::<Vec<_>>());
            let acc = lp.gather(1, &targets.unsqueeze(1), false).exp().mean(Kind::Float).double_value(&[]);
            println!(
                "step {:>2}: expected accuracy {acc:.3}, replayed {} of {} groups",
                step + 1,
                batch.report.replayed,
                batch.len()
            );
        }
    }
    Ok(())
}

/// Inverse-CDF draw from log-probs.
fn sample(logp: &[f32], rng: &mut SeededRng) -> u32 {
    let u: f32 = rng.random();
    let mut acc = 0.0;
    for (i, l) in logp.iter().enumerate() {
        acc += l.exp();
        if u < acc {
            return i as u32;
        }
    }
    (logp.len() - 1) as u32
}
