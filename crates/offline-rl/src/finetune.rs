//! Offline-to-online fine-tuning (DMG §5.3, `thu-rllab/DMG:train_finetune.py`): the offline
//! algorithm keeps training, one update per environment step (UTD 1, no warm-up), on a buffer
//! that starts with the dataset and grows with the online transitions; it acts with its
//! exploration noise (DMG: `π(s) + N(0, 0.1²)`, clipped) and switches to its online schedule
//! ([`OfflineAlgorithm::set_online`]: DMG's `λ`, `ν` decay).

use rl_agents::Evaluator;
use rl_core::{Env, Metrics, MetricsSink, Params, SeededRng, Valid};
use serde::{Deserialize, Serialize};

use crate::algo::OfflineAlgorithm;
use crate::error::{check, OfflineError, Result};
use crate::train::{evaluate, log_eval, Evaluation, FitSummary, OfflineData};

/// Parameters of [`finetune`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `steps` | 1,000,000 | online environment steps, one update each (DMG: 10^6) | `>= 1` |
/// | `batch_size` | 256 | transitions per update (uniform over dataset + online data) | `>= 1` |
/// | `eval_every` | 20,000 | environment steps between evaluations (and one before the first step and at the end) | `>= 1` |
/// | `progress` | true | progress bar | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FinetuneParams {
    /// Online steps.
    pub steps: u64,
    /// Batch size.
    pub batch_size: usize,
    /// Steps between evaluations.
    pub eval_every: u64,
    /// Progress bar.
    pub progress: bool,
}

impl Default for FinetuneParams {
    fn default() -> Self {
        Self { steps: 1_000_000, batch_size: 256, eval_every: 20_000, progress: true }
    }
}

crate::algo::common::setters!(FinetuneParams { steps: u64, batch_size: usize, eval_every: u64, progress: bool });

impl Params for FinetuneParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        check::at_least("steps", self.steps as usize, 1)?;
        check::at_least("batch_size", self.batch_size, 1)?;
        check::at_least("eval_every", self.eval_every as usize, 1)?;
        Ok(())
    }
}

/// Fine-tunes `algo` online in `env`. `data` must have room for the online transitions
/// ([`OfflineData::with_room`]); observations are normalised with the dataset's statistics
/// before the algorithm sees them and before they enter the buffer. Logs
/// `train/episode_return` per finished episode and the evaluation metrics of
/// [`crate::train::Trainer::run`]; the first evaluation (step 0) is the offline policy.
///
/// # Errors
/// [`OfflineError::InvalidParameter`] when the buffer lacks room; environment and algorithm
/// failures.
pub fn finetune<E: Env, V: Env>(
    algo: &mut dyn OfflineAlgorithm,
    data: &mut OfflineData,
    env: &mut E,
    params: &Valid<FinetuneParams>,
    mut evaluator: Option<&mut Evaluator<V>>,
    sink: &mut dyn MetricsSink,
    seed: u64,
) -> Result<FitSummary> {
    let t0 = std::time::Instant::now();
    let p = params.get().clone();
    let room = data.buffer().params().capacity - data.buffer().len();
    if (room as u64) < p.steps {
        return Err(OfflineError::invalid(
            "steps",
            p.steps,
            format!("the buffer has room for {room} online transitions (OfflineData::with_room)"),
        ));
    }
    algo.set_online(true)?;
    let mut rng: SeededRng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "finetune"));
    let mut reset_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "finetune-resets"));
    let mut evaluations: Vec<Evaluation> = Vec::new();
    if let Some(ev) = evaluator.as_deref_mut() {
        let e = evaluate(algo, data, ev, 0)?;
        log_eval(sink, 0, &e)?;
        evaluations.push(e);
    }
    let bar = crate::progress::progress_bar(p.steps, 0, p.progress, &format!("{} online", algo.name()));
    let device = algo.device();
    let mut obs = env.reset(&mut reset_rng)?;
    let mut ret = 0.0;
    let mut train_secs = 0.0;
    for step in 1..=p.steps {
        let z = data.norm().normalize(obs.view().insert_axis(ndarray::Axis(0)))?;
        let a = algo.explore(z.view())?;
        let s = env.step(a.row(0))?;
        ret += f64::from(s.reward);
        let z_next = data.norm().normalize(s.obs.view().insert_axis(ndarray::Axis(0)))?;
        let timeout = s.truncated && !s.terminated;
        data.push_online(z.row(0), a.row(0), s.reward, z_next.row(0), s.terminated, timeout)?;
        if s.done() {
            sink.log(step, &Metrics::new().with("train/episode_return", ret))?;
            ret = 0.0;
            obs = env.reset(&mut reset_rng)?;
        } else {
            obs = s.obs;
        }
        let t = std::time::Instant::now();
        let batch = data.buffer().sample(p.batch_size, device, &mut rng)?;
        let m = algo.update(&batch)?;
        train_secs += t.elapsed().as_secs_f64();
        bar.set_position(step);
        if step % 1000 == 0 || step == p.steps {
            sink.log(step, &m.to_metrics()?)?;
        }
        if let Some(ev) = evaluator.as_deref_mut() {
            if step % p.eval_every == 0 || step == p.steps {
                let e = evaluate(algo, data, ev, step)?;
                log_eval(sink, step, &e)?;
                bar.set_message(format!("eval {:.1}", e.returns.mean_return));
                evaluations.push(e);
            }
        }
    }
    bar.finish_and_clear();
    sink.flush()?;
    Ok(FitSummary {
        steps: p.steps,
        evaluations,
        prepare: Metrics::new(),
        seconds: t0.elapsed().as_secs_f64(),
        updates_per_second: p.steps as f64 / train_secs.max(1e-9),
    })
}
