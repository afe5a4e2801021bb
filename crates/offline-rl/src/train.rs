//! The offline training loop and its evaluation protocol: `steps` gradient updates on uniform
//! batches of the (preprocessed) dataset, `N` deterministic evaluation episodes every `M`
//! updates and at the end, final and best normalised scores, JSONL metrics, checkpoints that
//! resume bit for bit.

use std::path::Path;
use std::time::Instant;

use rl_agents::{Evaluator, ReplayBuffer, ReplayBufferParams};
use rl_core::{Env, EpisodeSummary, Metrics, MetricsSink, Params, SeededRng, Valid};
use serde::{Deserialize, Serialize};

use crate::algo::{NormalizedPolicy, OfflineAlgorithm};
use crate::data::{Dataset, DatasetInfo, RewardTransform, StateNorm};
use crate::error::{check, OfflineError, Result};

/// How a dataset is prepared for training.
///
/// | name | default | purpose |
/// |---|---|---|
/// | `normalize_states` | true | [`StateNorm`] on `obs` and `next_obs` (TD3+BC, DMG, SCAS, CORL); evaluation normalises observations the same way |
/// | `state_eps` | 1e-3 | the `eps` added to the standard deviation |
/// | `reward` | `none` | [`RewardTransform`] (IQL/CORL locomotion: `return_range`; AntMaze: `sparse_minus_one`) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Preprocess {
    /// Normalise states.
    pub normalize_states: bool,
    /// Standard deviation floor.
    pub state_eps: f64,
    /// Reward transform.
    pub reward: RewardTransform,
}

impl Default for Preprocess {
    fn default() -> Self {
        Self { normalize_states: true, state_eps: StateNorm::EPS, reward: RewardTransform::None }
    }
}

/// A dataset ready for training: preprocessed transitions in a [`ReplayBuffer`], the state
/// statistics evaluation needs, the description (for scores) and a fingerprint (checked when a
/// run resumes).
#[derive(Debug)]
pub struct OfflineData {
    buffer: ReplayBuffer,
    norm: StateNorm,
    info: DatasetInfo,
    preprocess: Preprocess,
    fingerprint: u64,
}

/// FNV-1a over the bytes of every column: a cheap identity check for resumed runs.
fn fingerprint(d: &Dataset) -> u64 {
    let t = d.transitions();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: f32| {
        for b in x.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    t.obs().iter().chain(t.action().iter()).chain(t.reward().iter()).chain(t.next_obs().iter()).for_each(|x| eat(*x));
    t.terminal().iter().chain(t.timeout().iter()).for_each(|x| eat(*x));
    h
}

impl OfflineData {
    /// Preprocesses `dataset` (statistics from its observations) into a buffer.
    ///
    /// # Errors
    /// The errors of [`StateNorm::fit`] and [`RewardTransform::apply`].
    pub fn new(dataset: &Dataset, preprocess: &Preprocess) -> Result<Self> {
        Self::with_room(dataset, preprocess, 0)
    }

    /// As [`OfflineData::new`], with room for `extra` more transitions (online fine-tuning,
    /// [`crate::finetune::finetune`]).
    ///
    /// # Errors
    /// As [`OfflineData::new`].
    pub fn with_room(dataset: &Dataset, preprocess: &Preprocess, extra: usize) -> Result<Self> {
        let fingerprint = fingerprint(dataset);
        let norm = if preprocess.normalize_states {
            StateNorm::fit(dataset, preprocess.state_eps)?
        } else {
            StateNorm::identity(dataset.obs_dim())?
        };
        let d = preprocess.reward.apply(dataset)?;
        let d = if preprocess.normalize_states { norm.apply(&d)? } else { d };
        let params = ReplayBufferParams::default().capacity(d.len() + extra);
        let buffer = ReplayBuffer::from_transitions(params, d.transitions())?;
        Ok(Self { buffer, norm, info: dataset.info().clone(), preprocess: preprocess.clone(), fingerprint })
    }

    /// The preprocessed transitions.
    pub fn buffer(&self) -> &ReplayBuffer {
        &self.buffer
    }

    /// Appends an online transition (already preprocessed: normalised observations) as stream
    /// 1 of the buffer.
    ///
    /// # Errors
    /// Shape and finiteness errors of [`ReplayBuffer::push`].
    #[allow(clippy::too_many_arguments)]
    pub fn push_online(
        &mut self,
        obs: ndarray::ArrayView1<'_, f32>,
        action: ndarray::ArrayView1<'_, f32>,
        reward: f32,
        next_obs: ndarray::ArrayView1<'_, f32>,
        terminal: bool,
        timeout: bool,
    ) -> Result<()> {
        self.buffer.push(obs, action, reward, next_obs, terminal, timeout, 1)?;
        Ok(())
    }

    /// The state statistics (identity when not normalising).
    pub fn norm(&self) -> &StateNorm {
        &self.norm
    }

    /// The dataset's description.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// How the data was prepared.
    pub fn preprocess(&self) -> &Preprocess {
        &self.preprocess
    }

    /// Identity of the raw dataset.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The normalised score of an undiscounted return, if the dataset has references.
    pub fn score(&self, ret: f64) -> Option<f64> {
        self.info.normalized_score(ret).ok()
    }
}

/// Parameters of [`Trainer`] (the protocol of DMG and SCAS: 10^6 updates of batch 256, 10
/// evaluation episodes every 2·10^4 updates).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `steps` | 1,000,000 | gradient updates | `>= 1` |
/// | `batch_size` | 256 | transitions per update, uniform with replacement | `>= 1` |
/// | `eval_every` | 20,000 | updates between evaluations (0: only at the end); there is always one at the end | `>= 0` |
/// | `log_every` | 1,000 | updates between training-metric records | `>= 1` |
/// | `checkpoint_every` | 0 | updates between checkpoints into the run directory (0: only at the end, when a run directory is given) | `>= 0` |
/// | `progress` | true | progress bar on the terminal | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FitParams {
    /// Gradient updates.
    pub steps: u64,
    /// Batch size.
    pub batch_size: usize,
    /// Updates between evaluations.
    pub eval_every: u64,
    /// Updates between log records.
    pub log_every: u64,
    /// Updates between checkpoints.
    pub checkpoint_every: u64,
    /// Progress bar.
    pub progress: bool,
}

impl Default for FitParams {
    fn default() -> Self {
        Self {
            steps: 1_000_000,
            batch_size: 256,
            eval_every: 20_000,
            log_every: 1_000,
            checkpoint_every: 0,
            progress: true,
        }
    }
}

crate::algo::common::setters!(FitParams {
    steps: u64,
    batch_size: usize,
    eval_every: u64,
    log_every: u64,
    checkpoint_every: u64,
    progress: bool,
});

impl Params for FitParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        check::at_least("steps", self.steps as usize, 1)?;
        check::at_least("batch_size", self.batch_size, 1)?;
        check::at_least("log_every", self.log_every as usize, 1)?;
        Ok(())
    }
}

/// One evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Updates done when it ran.
    pub step: u64,
    /// Episode returns summary.
    pub returns: EpisodeSummary,
    /// Normalised score of the mean return (when the dataset has references).
    pub score: Option<f64>,
    /// Standard deviation of the episodes' normalised scores.
    pub score_std: Option<f64>,
}

/// What a run returns.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FitSummary {
    /// Updates at the end.
    pub steps: u64,
    /// Every evaluation, in order.
    pub evaluations: Vec<Evaluation>,
    /// What preparation measured (e.g. SCAS's dynamics error).
    pub prepare: Metrics,
    /// Wall-clock seconds of this call.
    pub seconds: f64,
    /// Gradient updates per second during this call (evaluations excluded).
    pub updates_per_second: f64,
}

impl FitSummary {
    /// The last evaluation ("final" score, CORL's "last").
    pub fn last(&self) -> Option<&Evaluation> {
        self.evaluations.last()
    }

    /// The evaluation with the highest score (or mean return), CORL's "best".
    pub fn best(&self) -> Option<&Evaluation> {
        self.evaluations.iter().max_by(|a, b| {
            let ka = a.score.unwrap_or(a.returns.mean_return);
            let kb = b.score.unwrap_or(b.returns.mean_return);
            ka.total_cmp(&kb)
        })
    }
}

/// The state of an offline run: updates done, the batch sampler's generator, evaluations so far.
#[derive(Debug)]
pub struct Trainer {
    params: Valid<FitParams>,
    rng: SeededRng,
    steps: u64,
    evaluations: Vec<Evaluation>,
    prepare: Metrics,
    prepared: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainerState {
    params: FitParams,
    rng: SeededRng,
    steps: u64,
    evaluations: Vec<Evaluation>,
    prepare: Metrics,
    prepared: bool,
    fingerprint: u64,
    algo: String,
}

const KIND: &str = "offline_rl.trainer";
const FORMAT: u32 = 1;
/// The checkpoint unit of a run: parts `algo` (at the algorithm's update count) and `trainer`
/// (at the trainer's step count), committed together.
const RUN_KIND: &str = "offline_rl.run";
const RUN_FORMAT: u32 = 1;

/// Evaluates `policy` (trained on normalised observations) with `evaluator`; scores from
/// `data`'s references.
///
/// # Errors
/// Environment and policy failures.
pub fn evaluate<E: Env>(
    algo: &dyn OfflineAlgorithm,
    data: &OfflineData,
    evaluator: &mut Evaluator<E>,
    step: u64,
) -> Result<Evaluation> {
    let policy = NormalizedPolicy { inner: algo.policy(), norm: data.norm() };
    let episodes = evaluator.run(&policy)?;
    let returns = EpisodeSummary::from_episodes(&episodes);
    let scores: Option<Vec<f64>> = episodes.iter().map(|e| data.score(e.ret)).collect();
    let score_std = scores.as_ref().map(|s| {
        let n = s.len().max(1) as f64;
        let m = s.iter().sum::<f64>() / n;
        (s.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt()
    });
    Ok(Evaluation { step, score: data.score(returns.mean_return), score_std, returns })
}

pub(crate) fn log_eval(sink: &mut dyn MetricsSink, step: u64, e: &Evaluation) -> Result<()> {
    let mut m = Metrics::new()
        .with("eval/return_mean", e.returns.mean_return)
        .with("eval/return_std", e.returns.std_return)
        .with("eval/length_mean", e.returns.mean_length);
    if let (Some(s), Some(sd)) = (e.score, e.score_std) {
        m.insert("eval/score", s);
        m.insert("eval/score_std", sd);
    }
    sink.log(step, &m)?;
    Ok(())
}

fn next_multiple(steps: u64, every: u64) -> u64 {
    (steps / every + 1) * every
}

impl Trainer {
    /// A new run; `seed` seeds the batch sampler (`derive_seed_named(seed, "offline-batches")`).
    pub fn new(params: Valid<FitParams>, seed: u64) -> Self {
        Self {
            params,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "offline-batches")),
            steps: 0,
            evaluations: Vec::new(),
            prepare: Metrics::new(),
            prepared: false,
        }
    }

    /// Updates done.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Evaluations so far.
    pub fn evaluations(&self) -> &[Evaluation] {
        &self.evaluations
    }

    /// Trains `algo` on `data` until `params.steps` updates (a resumed trainer continues from
    /// its count): [`OfflineAlgorithm::prepare`] once, then updates on uniform batches; every
    /// `log_every` updates the algorithm's latest metrics and `time/updates_per_second` go to
    /// `sink`; every `eval_every` updates and at the end, `evaluator` (if any) runs its
    /// episodes with the deterministic policy on normalised observations and `eval/return_mean`,
    /// `eval/return_std`, `eval/score`, `eval/score_std`, `eval/length_mean` are logged; with a
    /// `run_dir`, checkpoints go to `run_dir/checkpoint` every `checkpoint_every` updates and
    /// at the end.
    ///
    /// # Errors
    /// Algorithm, environment, sink and checkpoint failures; [`OfflineError::Agent`] with a
    /// `NonFinite` error when a logged loss is NaN or infinite.
    pub fn run<E: Env>(
        &mut self,
        algo: &mut dyn OfflineAlgorithm,
        data: &OfflineData,
        mut evaluator: Option<&mut Evaluator<E>>,
        sink: &mut dyn MetricsSink,
        run_dir: Option<&Path>,
    ) -> Result<FitSummary> {
        let t0 = Instant::now();
        let p = self.params.get().clone();
        if !self.prepared {
            self.prepare = algo.prepare(data.buffer(), p.progress)?;
            self.prepared = true;
            if !self.prepare.is_empty() {
                sink.log(0, &self.prepare)?;
            }
        }
        let bar = crate::progress::progress_bar(p.steps, self.steps, p.progress, algo.name());
        let device = algo.device();
        let mut next_log = next_multiple(self.steps, p.log_every);
        let mut next_eval = if p.eval_every > 0 { next_multiple(self.steps, p.eval_every) } else { u64::MAX };
        let mut next_ckpt =
            if p.checkpoint_every > 0 { next_multiple(self.steps, p.checkpoint_every) } else { u64::MAX };
        let mut train_secs = 0.0;
        let start_steps = self.steps;
        let mut log_t = Instant::now();
        let mut log_steps = self.steps;
        while self.steps < p.steps {
            let t = Instant::now();
            let batch = data.buffer().sample(p.batch_size, device, &mut self.rng)?;
            let metrics = algo.update(&batch)?;
            self.steps += 1;
            train_secs += t.elapsed().as_secs_f64();
            bar.set_position(self.steps);
            let at_end = self.steps >= p.steps;
            if self.steps >= next_log || at_end {
                next_log = next_multiple(self.steps, p.log_every);
                let mut m = metrics.to_metrics()?;
                let dt = log_t.elapsed().as_secs_f64().max(1e-9);
                m.insert("time/updates_per_second", (self.steps - log_steps) as f64 / dt);
                log_t = Instant::now();
                log_steps = self.steps;
                sink.log(self.steps, &m)?;
            }
            if let Some(ev) = evaluator.as_deref_mut() {
                if self.steps >= next_eval || at_end {
                    next_eval = if p.eval_every > 0 { next_multiple(self.steps, p.eval_every) } else { u64::MAX };
                    let e = evaluate(algo, data, ev, self.steps)?;
                    log_eval(sink, self.steps, &e)?;
                    bar.set_message(match e.score {
                        Some(s) => format!("score {s:.1}"),
                        None => format!("return {:.1}", e.returns.mean_return),
                    });
                    self.evaluations.push(e);
                }
            }
            if let Some(dir) = run_dir {
                if self.steps >= next_ckpt || at_end {
                    next_ckpt =
                        if p.checkpoint_every > 0 { next_multiple(self.steps, p.checkpoint_every) } else { u64::MAX };
                    self.save(&dir.join("checkpoint"), algo, data)?;
                }
            }
        }
        sink.flush()?;
        bar.finish_and_clear();
        Ok(FitSummary {
            steps: self.steps,
            evaluations: self.evaluations.clone(),
            prepare: self.prepare.clone(),
            seconds: t0.elapsed().as_secs_f64(),
            updates_per_second: (self.steps - start_steps) as f64 / train_secs.max(1e-9),
        })
    }

    /// Writes the run's checkpoint unit `dir` ([`rl_nn::checkpoint::UnitWriter`]): part
    /// `algo` ([`rl_agents::Agent::save`], at the algorithm's update count) and part `trainer`
    /// (counters, sampler generator, evaluations, the dataset's fingerprint, at the trainer's
    /// step count), committed together by one rename of the manifest. A crash at any point
    /// leaves the previous checkpoint or this one, never parts of both.
    ///
    /// # Errors
    /// I/O and libtorch failures; [`rl_nn::RlNnError::InvalidName`] when `dir` holds something
    /// else than a checkpoint unit (e.g. a checkpoint of the layout before units).
    pub fn save(&self, dir: &Path, algo: &dyn OfflineAlgorithm, data: &OfflineData) -> Result<()> {
        let mut unit = rl_nn::checkpoint::UnitWriter::new(dir, RUN_KIND, RUN_FORMAT)?;
        algo.save(&unit.part("algo", algo.updates())?)?;
        let state = TrainerState {
            params: self.params.get().clone(),
            rng: self.rng.clone(),
            steps: self.steps,
            evaluations: self.evaluations.clone(),
            prepare: self.prepare.clone(),
            prepared: self.prepared,
            fingerprint: data.fingerprint(),
            algo: algo.name().to_owned(),
        };
        rl_nn::checkpoint::save_dir::<_, &str>(unit.part("trainer", self.steps)?, KIND, FORMAT, &state, &[])?;
        unit.commit()?;
        Ok(())
    }

    /// Restores what [`Trainer::save`] wrote, into this trainer and `algo`. The unit is
    /// verified first (every file's SHA-256 and size as the manifest recorded them), then the
    /// trainer's step count and, after the algorithm has read its part, its update count are
    /// checked against the steps the manifest recorded for each part. The run's parameters may
    /// differ in `steps` (to extend a run) and `progress`, nothing else; the dataset must be
    /// the same. On error this trainer is unchanged, and `algo` too unless the last check (the
    /// algorithm's update count, which only a manifest rewritten to match other files can
    /// fail) is the one that fails.
    ///
    /// # Errors
    /// [`OfflineError::Corrupt`] for another dataset, algorithm or parameters;
    /// [`rl_nn::RlNnError::CheckpointPart`] (wrapped) naming the part that disagrees with the
    /// manifest; other checkpoint errors.
    pub fn load(&mut self, dir: &Path, algo: &mut dyn OfflineAlgorithm, data: &OfflineData) -> Result<()> {
        let unit = rl_nn::checkpoint::open_unit(dir, RUN_KIND, RUN_FORMAT)?;
        let ck = rl_nn::checkpoint::load_dir::<TrainerState>(unit.part("trainer")?, KIND, FORMAT)?;
        unit.check_step("trainer", ck.state.steps)?;
        let s = ck.state;
        if s.fingerprint != data.fingerprint() {
            return Err(OfflineError::corrupt(&ck.path, "the checkpoint was trained on another dataset"));
        }
        if s.algo != algo.name() {
            return Err(OfflineError::corrupt(&ck.path, format!("checkpoint of `{}`, not `{}`", s.algo, algo.name())));
        }
        let ours = FitParams { steps: s.params.steps, progress: s.params.progress, ..self.params.get().clone() };
        if ours != s.params {
            return Err(OfflineError::corrupt(&ck.path, format!("run parameters differ: checkpoint {:?}", s.params)));
        }
        algo.load(&unit.part("algo")?)?;
        unit.check_step("algo", algo.updates())?;
        self.rng = s.rng;
        self.steps = s.steps;
        self.evaluations = s.evaluations;
        self.prepare = s.prepare;
        self.prepared = s.prepared;
        Ok(())
    }
}

/// Trains a fresh run (see [`Trainer::run`]).
///
/// # Errors
/// As [`Trainer::run`].
pub fn fit<E: Env>(
    algo: &mut dyn OfflineAlgorithm,
    data: &OfflineData,
    params: Valid<FitParams>,
    evaluator: Option<&mut Evaluator<E>>,
    sink: &mut dyn MetricsSink,
    run_dir: Option<&Path>,
    seed: u64,
) -> Result<FitSummary> {
    Trainer::new(params, seed).run(algo, data, evaluator, sink, run_dir)
}
