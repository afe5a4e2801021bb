//! End to end with `rlvr-core` (feature `tch`): replay -> tensors -> decoupled loss -> update.
#![cfg(feature = "tch")]

use anyhow::{ensure, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rlvr_core::{token_log_probs, DecoupledParams, IsLevel, LossConfig, LossParams, PolicyLoss};
use rlvr_replay::tensor::TensorBatch;
use rlvr_replay::{FilledBatch, Group, GroupBuilder, GroupReplayBuffer, Origin, Params, ReplayParams};
use tch::nn::{self, OptimizerConfig};
use tch::{Device, Kind, Tensor};

const PROMPTS: i64 = 16;
const LEN: i64 = 3;
const VOCAB: i64 = 4;
const K: usize = 4;

/// A tabular policy: independent logits per (prompt, position).
struct Toy {
    vs: nn::VarStore,
    table: Tensor,
}

impl Toy {
    /// Initial logits drawn from our own seeded generator: libtorch's global generator is shared
    /// by the tests that run in parallel threads, so `tch::manual_seed` would race.
    fn new() -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let init: Vec<f32> = (0..PROMPTS * LEN * VOCAB).map(|_| rng.random_range(-0.2f32..0.2)).collect();
        let vs = nn::VarStore::new(Device::Cpu);
        let table = vs.root().var_copy("table", &Tensor::from_slice(&init).view([PROMPTS, LEN, VOCAB]));
        Self { vs, table }
    }

    /// `[B, T]` log-probs of the batch's tokens under the current policy.
    fn logp(&self, tb: &TensorBatch) -> Result<Tensor> {
        let rows: Vec<i64> = tb.prompt_ids.iter().map(|&p| p as i64).collect();
        let logits = self.table.index_select(0, &Tensor::from_slice(&rows));
        let t = tb.tokens.size()[1];
        Ok(token_log_probs(&logits.narrow(1, 0, t), &tb.tokens)?)
    }

    /// K sampled responses of `prompt` with their behaviour log-probs; rewards from `reward`.
    fn group(&self, prompt: u64, version: u64, rng: &mut ChaCha8Rng, reward: impl Fn(usize) -> f32) -> Result<Group> {
        let lp = tch::no_grad(|| self.table.get(prompt as i64).log_softmax(-1, Kind::Float));
        let lp = Vec::<f32>::try_from(lp.flatten(0, -1))?;
        let mut b = GroupBuilder::new(prompt, version);
        for k in 0..K {
            let (mut toks, mut lps) = (Vec::new(), Vec::new());
            for t in 0..LEN as usize {
                let row = &lp[t * VOCAB as usize..(t + 1) * VOCAB as usize];
                let u: f32 = rng.random();
                let mut acc = 0.0;
                let tok = row.iter().position(|&l| {
                    acc += l.exp();
                    u < acc
                });
                let tok = tok.unwrap_or(VOCAB as usize - 1);
                toks.push(tok as u32);
                lps.push(row[tok]);
            }
            b.push_response(&toks, &lps, None, reward(k))?;
        }
        Ok(b.finish()?)
    }

    /// One decoupled-loss update on `batch` (token-level truncated correction); returns the
    /// batch tensors, the per-token weights the *loss* applied (its gradient with respect to
    /// `logp` divided by the gradient of the same loss without correction; NaN where the
    /// latter is 0), the weights the correction should apply (`π_old/π_behave` truncated at 2),
    /// and the loss value.
    fn train(&mut self, batch: &FilledBatch) -> Result<(TensorBatch, Tensor, Tensor, f64)> {
        let tb = TensorBatch::new(batch, 0, Device::Cpu)?;
        let logp = self.logp(&tb)?;
        let old = logp.detach();
        let behave = tb.behaviour_logp_for(&old)?;
        let corr = DecoupledParams::default().level(IsLevel::Token);
        let loss = LossConfig::new(LossParams::new(PolicyLoss::default()).correction(Some(corr)).check()?);
        let plain = LossConfig::new(LossParams::new(PolicyLoss::default()).check()?);
        let grad_of = |cfg: &LossConfig| -> Result<Tensor> {
            let x = old.copy().set_requires_grad(true);
            let out = cfg.loss(&tb.loss_inputs(&x, &old, &behave), &tb.counts()?)?;
            Ok(Tensor::run_backward(&[&out.loss], &[&x], false, false).remove(0))
        };
        let (g_corr, g_plain) = (grad_of(&loss)?, grad_of(&plain)?);
        let applied = g_corr.where_self(&g_plain.abs().gt(1e-12), &Tensor::from(f32::NAN)) / &g_plain;
        let out = loss.loss(&tb.loss_inputs(&logp, &old, &behave), &tb.counts()?)?;
        let mut opt = nn::Sgd::default().build(&self.vs, 1.0)?;
        opt.zero_grad();
        out.loss.backward();
        opt.step();
        let expected = (&old - &behave).exp().clamp(0.0, 2.0);
        Ok((tb, applied, expected, out.metrics.loss))
    }
}

fn mixed(k: usize) -> f32 {
    (k % 2) as f32
}

#[test]
fn replayed_rows_are_corrected_fresh_rows_have_weight_exactly_one() -> Result<()> {
    let mut toy = Toy::new();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut buf = GroupReplayBuffer::new(ReplayParams::new(K).max_age(2).check()?)?;
    // Step 0: four effective groups, stored; one update moves the policy away from version 0.
    let groups = (0..4).map(|p| toy.group(p, 0, &mut rng, mixed)).collect::<Result<Vec<_>>>()?;
    let b0 = buf.fill(groups, 0)?;
    ensure!(b0.len() == 4 && b0.iter().all(|g| g.origin() == Origin::Fresh));
    let (tb0, w0, _, _) = toy.train(&b0)?;
    let defined = w0.isnan().logical_not().logical_and(&tb0.mask);
    ensure!(defined.sum(Kind::Int64).int64_value(&[]) > 0, "no token has a gradient");
    ensure!(
        w0.masked_select(&defined).eq(1.0).all().int64_value(&[]) == 1,
        "on-policy rows: the loss's gradient must equal the uncorrected one exactly"
    );

    // Step 1: two ineffective groups (all fail, all succeed) replaced by replayed ones.
    let groups = vec![
        toy.group(4, 1, &mut rng, |_| 0.0)?,
        toy.group(5, 1, &mut rng, mixed)?,
        toy.group(6, 1, &mut rng, |_| 1.0)?,
        toy.group(7, 1, &mut rng, mixed)?,
    ];
    let b1 = buf.fill(groups, 1)?;
    ensure!(b1.len() == 4 && b1.report.replayed == 2 && b1.fill_ratio() == 1.0);
    let (tb, w, expected, loss) = toy.train(&b1)?;
    ensure!(loss.is_finite());
    let mask = Vec::<bool>::try_from(tb.mask.flatten(0, -1))?;
    let w = Vec::<f32>::try_from(w.flatten(0, -1))?;
    let expected = Vec::<f32>::try_from(expected.flatten(0, -1))?;
    let t = tb.tokens.size()[1] as usize;
    let mut replayed_moved = false;
    for (g, origin) in tb.origins.iter().enumerate() {
        for row in g * K..(g + 1) * K {
            // tokens with a gradient (the uncorrected loss's is 0 only where A = 0)
            let has = |j: &usize| mask[row * t + j] && !w[row * t + j].is_nan();
            let ws: Vec<f32> = (0..t).filter(has).map(|j| w[row * t + j]).collect();
            match origin {
                Origin::Fresh => ensure!(ws.iter().all(|&x| x == 1.0), "fresh row {row}: {ws:?}"),
                Origin::Replayed { age, .. } => {
                    ensure!(*age == 1);
                    // Each weight is pi_old / pi_behave, truncated at 2. A position whose logits the
                    // step-0 update left unchanged (its K sampled tokens agreed, so the zero-mean
                    // advantages cancelled) legitimately has weight 1.
                    for j in (0..t).filter(has) {
                        let (got, want) = (w[row * t + j], expected[row * t + j]);
                        ensure!((got - want).abs() < 1e-5 * want, "replayed row {row} token {j}: {got} != {want}");
                    }
                    replayed_moved |= ws.iter().any(|&x| (x - 1.0).abs() > 1e-4);
                }
                Origin::Unfilled { .. } => unreachable!("no unfilled slot"),
            }
        }
    }
    ensure!(
        replayed_moved,
        "the step-0 update moved no replayed token's probability: the correction was never exercised"
    );
    Ok(())
}

#[test]
fn all_ineffective_step_still_trains_on_a_full_batch() -> Result<()> {
    let mut toy = Toy::new();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut buf = GroupReplayBuffer::new(ReplayParams::new(K).check()?)?;
    let groups = (0..6).map(|p| toy.group(p, 0, &mut rng, mixed)).collect::<Result<Vec<_>>>()?;
    let _trained = toy.train(&buf.fill(groups, 0)?)?;

    // Every group of step 1 is ineffective.
    let groups = (8..12).map(|p| toy.group(p, 1, &mut rng, |_| 0.0)).collect::<Result<Vec<_>>>()?;
    let batch = buf.fill(groups, 1)?;
    ensure!(batch.len() == 4 && batch.fill_ratio() == 1.0);
    ensure!(batch.iter().all(|g| g.is_replayed()));
    // Newest first: step 0's groups 5, 4, 3, 2 (stored in slot order).
    let prompts: Vec<u64> = batch.iter().map(|g| g.group().prompt_id()).collect();
    ensure!(prompts == vec![5, 4, 3, 2], "{prompts:?}");
    let before = toy.table.detach().copy();
    let (tb, _, _, loss) = toy.train(&batch)?;
    ensure!(tb.rows() == (4 * K) as i64 && loss.is_finite());
    let moved = f64::try_from((&toy.table - &before).abs().sum(Kind::Double))?;
    ensure!(moved > 0.0, "the update on the replayed batch changed nothing");
    Ok(())
}

#[test]
fn tensor_layout_matches_the_groups() -> Result<()> {
    let toy = Toy::new();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut buf = GroupReplayBuffer::new(ReplayParams::new(K).check()?)?;
    let mut b = GroupBuilder::new(9, 0);
    for (k, len) in [1usize, 3, 2, 3].into_iter().enumerate() {
        b.push_response(&vec![1; len], &vec![-0.25; len], None, mixed(k))?;
    }
    let groups = vec![b.finish()?, toy.group(1, 0, &mut rng, mixed)?];
    let tb = TensorBatch::new(&buf.fill(groups, 0)?, 0, Device::Cpu)?;
    ensure!(tb.tokens.size() == vec![8, 3]);
    let row_tokens = Vec::<i64>::try_from(tb.mask.sum_dim_intlist(1, false, Kind::Int64))?;
    ensure!(row_tokens[..4] == [1, 3, 2, 3], "{row_tokens:?}");
    let adv = Vec::<f32>::try_from(&tb.advantages)?;
    ensure!(adv.len() == 8 && adv[0] < 0.0 && adv[1] > 0.0);
    ensure!(TensorBatch::new(&buf.fill(Vec::new(), 1)?, 0, Device::Cpu).is_err());
    let wrong = Tensor::zeros([2, 2], (Kind::Float, Device::Cpu));
    ensure!(tb.behaviour_logp_for(&wrong).is_err());
    Ok(())
}
