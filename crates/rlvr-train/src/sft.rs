//! Supervised warm start: maximum likelihood of the solver's solutions, so the RL phase starts
//! from a policy with partial accuracy (mixed groups), as it would from a real base model.

use rand::Rng;
use rl_core::Params;
use rl_nn::{Adam, AdamParams};
use tch::{Kind, Tensor};

use crate::config::SftConfig;
use crate::error::{Result, TrainError};
use crate::policy::Policy;
use crate::TaskSet;

/// Trains `policy` for `cfg.steps` Adam steps on random batches of (prompt, solution) pairs and
/// calls `on_step(step, loss)` after each. Returns the per-step mean token negative
/// log-likelihood.
///
/// # Errors
/// Unsolvable prompts, libtorch errors, a non-finite loss ([`TrainError::NonFinite`]).
pub fn warm_start<R: Rng + ?Sized>(
    policy: &mut dyn Policy,
    tasks: &TaskSet,
    cfg: &SftConfig,
    rng: &mut R,
    on_step: &mut dyn FnMut(usize, f64),
) -> Result<Vec<f64>> {
    if cfg.steps == 0 {
        return Ok(Vec::new());
    }
    let solutions = tasks.solution_texts()?.iter().map(|t| policy.encode_completion(t)).collect::<Result<Vec<_>>>()?;
    let n = tasks.train.len();
    let mut opt = Adam::for_var_store(AdamParams::default().lr(cfg.lr).check()?, policy.var_store())?;
    let mut losses = Vec::with_capacity(cfg.steps);
    let mut prompts: Vec<&[i64]> = Vec::with_capacity(cfg.batch_size);
    let mut targets: Vec<&[i64]> = Vec::with_capacity(cfg.batch_size);
    for step in 0..cfg.steps {
        prompts.clear();
        targets.clear();
        for _ in 0..cfg.batch_size {
            let i = rng.random_range(0..n);
            prompts.push(tasks.train.tokens(i).ok_or(TrainError::UnknownPrompt { id: i as u64, n })?);
            targets.push(&solutions[i]);
        }
        let lp = policy.response_logprobs(&prompts, &targets, 1.0, false)?;
        let lengths: Vec<f32> = targets.iter().map(|t| t.len() as f32).collect();
        let tokens = Tensor::f_from_slice(&lengths)?.f_sum(Kind::Float)?.f_to_device(lp.logprobs.device())?;
        let loss = lp.logprobs.f_sum(Kind::Float)?.f_neg()?.f_div(&tokens)?;
        let value = loss.f_double_value(&[])?;
        if !value.is_finite() {
            return Err(TrainError::NonFinite { what: "warm-start loss".into(), step: step as u64 });
        }
        opt.zero_grad()?;
        policy.backward(lp, &loss)?;
        opt.step()?;
        losses.push(value);
        on_step(step, value);
    }
    Ok(losses)
}
