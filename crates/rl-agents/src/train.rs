//! The online training loop, evaluation, and what they log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ndarray::Array2;
use rl_core::{ActMode, Env, EpisodeStats, EpisodeSummary, Metrics, MetricsSink, Params, Valid};
use rl_envs::wrappers::{VecEnv, VecEnvState};
use rl_envs::Snapshot;
use serde::{Deserialize, Serialize};

use crate::agent::{BatchPolicy, OnlineAgent, UpdateMetrics, VecTransition};
use crate::error::{check, AgentError, Result};

/// Runs one episode in each of `envs` with `policy`, all in lock step (one batched forward per
/// step); environment `i` is reset with gymnasium's seeding `reset(seed = seed + i)`
/// ([`rl_envs::rng::NumpyRng`]). An episode still running after `max_steps` steps counts as
/// truncated.
///
/// # Errors
/// [`AgentError::Empty`] for no environment; environment and policy failures.
pub fn evaluate<E: Env>(
    policy: &dyn BatchPolicy,
    envs: &mut [E],
    seed: u64,
    mode: ActMode,
    max_steps: usize,
) -> Result<Vec<EpisodeStats>> {
    if envs.is_empty() {
        return Err(AgentError::Empty { what: "evaluation environments".into() });
    }
    let n = envs.len();
    let obs_dim = policy.obs_dim();
    let mut obs = Array2::<f32>::zeros((n, obs_dim));
    let mut rngs: Vec<rl_envs::rng::NumpyRng> = Vec::with_capacity(n);
    for (i, env) in envs.iter_mut().enumerate() {
        let mut rng = rl_envs::rng::NumpyRng::new(seed.wrapping_add(i as u64));
        let o = env.reset(&mut rng)?;
        if o.len() != obs_dim {
            return Err(AgentError::shape("observation", format!("[{obs_dim}]"), format!("[{}]", o.len())));
        }
        obs.row_mut(i).assign(&o);
        rngs.push(rng);
    }
    let mut stats = vec![EpisodeStats::default(); n];
    let mut live: Vec<usize> = (0..n).collect();
    let mut noise = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "eval-policy"));
    for _ in 0..max_steps {
        if live.is_empty() {
            break;
        }
        let batch = obs.select(ndarray::Axis(0), &live);
        let actions = policy.act_batch(batch.view(), mode, &mut noise)?;
        let mut still = Vec::with_capacity(live.len());
        for (k, &i) in live.iter().enumerate() {
            let step = envs[i].step(actions.row(k))?;
            stats[i].record(step.reward);
            if step.done() {
                stats[i].terminated = step.terminated;
            } else {
                obs.row_mut(i).assign(&step.obs);
                still.push(i);
            }
        }
        live = still;
    }
    Ok(stats)
}

/// A fixed set of evaluation environments and a seed: [`Evaluator::run`] evaluates a policy on
/// the same `episodes` initial states every time (CORL's `eval_actor` with a fixed seed).
#[derive(Debug)]
pub struct Evaluator<E> {
    envs: Vec<E>,
    seed: u64,
    max_steps: usize,
}

impl<E: Env> Evaluator<E> {
    /// `episodes` environments built by `make(i)`, reset with seeds `seed + i`.
    ///
    /// # Errors
    /// [`AgentError::InvalidParameter`] for zero episodes; the first error of `make`.
    pub fn new(episodes: usize, seed: u64, make: impl FnMut(usize) -> Result<E>) -> Result<Self> {
        check::at_least("episodes", episodes, 1)?;
        let envs = (0..episodes).map(make).collect::<Result<Vec<E>>>()?;
        Ok(Self { envs, seed, max_steps: 1_000_000 })
    }

    /// Caps each episode at `max_steps` steps (default 10^6).
    #[must_use]
    pub fn max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps.max(1);
        self
    }

    /// One deterministic episode per environment.
    ///
    /// # Errors
    /// As [`evaluate`].
    pub fn run(&mut self, policy: &dyn BatchPolicy) -> Result<Vec<EpisodeStats>> {
        evaluate(policy, &mut self.envs, self.seed, ActMode::Deterministic, self.max_steps)
    }

    /// The environments (e.g. to set task parameters).
    pub fn envs_mut(&mut self) -> &mut [E] {
        &mut self.envs
    }
}

/// Parameters of [`train`].
///
/// | name | default | purpose |
/// |---|---|---|
/// | `total_steps` | 1,000,000 | environment steps (transitions) to train for |
/// | `log_every` | 1,000 | environment steps between log records |
/// | `eval_every` | 5,000 | environment steps between evaluations (0: only at the end), CORL's `eval_freq` |
/// | `checkpoint_every` | 0 | environment steps between checkpoints into the run directory (0: none) |
/// | `progress` | true | show a progress bar on the terminal |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainParams {
    /// Environment steps.
    pub total_steps: u64,
    /// Steps between logs.
    pub log_every: u64,
    /// Steps between evaluations.
    pub eval_every: u64,
    /// Steps between checkpoints.
    pub checkpoint_every: u64,
    /// Progress bar.
    pub progress: bool,
}

impl Default for TrainParams {
    fn default() -> Self {
        Self { total_steps: 1_000_000, log_every: 1_000, eval_every: 5_000, checkpoint_every: 0, progress: true }
    }
}

crate::sac::setters!(TrainParams {
    total_steps: u64,
    log_every: u64,
    eval_every: u64,
    checkpoint_every: u64,
    progress: bool
});

impl Params for TrainParams {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        check::at_least("total_steps", self.total_steps as usize, 1)?;
        check::at_least("log_every", self.log_every as usize, 1)?;
        Ok(())
    }
}

/// A batch of environments being trained on: current observations, running episode
/// statistics and counters. One [`step`](OnlineTrainer::step) = one action per environment.
#[derive(Debug)]
pub struct OnlineTrainer<E> {
    envs: VecEnv<E>,
    obs: Array2<f32>,
    running: Vec<EpisodeStats>,
    steps: u64,
    episodes: u64,
}

/// The state of an [`OnlineTrainer`] (checkpoints).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainerState<S> {
    envs: VecEnvState<S>,
    obs: Vec<Vec<f32>>,
    running: Vec<EpisodeStats>,
    steps: u64,
    episodes: u64,
}

const TRAINER_KIND: &str = "rl_agents.online_trainer";
const TRAINER_FORMAT: u32 = 1;
/// The checkpoint unit of a run ([`save_run`]): parts `agent` (at the agent's environment
/// step count) and `trainer` (at the trainer's), committed together.
const RUN_KIND: &str = "rl_agents.run";
const RUN_FORMAT: u32 = 1;

impl<E: Env> OnlineTrainer<E> {
    /// Resets every environment of `envs` and starts counting.
    ///
    /// # Errors
    /// Environment failures.
    pub fn new(mut envs: VecEnv<E>) -> Result<Self> {
        let obs = envs.reset()?;
        let running = vec![EpisodeStats::default(); envs.len()];
        Ok(Self { envs, obs, running, steps: 0, episodes: 0 })
    }

    /// Environment steps taken (transitions, summed over the batch).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Episodes finished.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }

    /// The environments.
    pub fn envs(&self) -> &VecEnv<E> {
        &self.envs
    }

    /// The environments, mutably (e.g. to queue task parameters).
    pub fn envs_mut(&mut self) -> &mut VecEnv<E> {
        &mut self.envs
    }

    /// One step of every environment: `agent.explore`, the environments' step (same-step
    /// auto-reset), `agent.observe`. Returns the episodes that finished and the metrics of the
    /// updates the agent made.
    ///
    /// # Errors
    /// Agent and environment failures.
    pub fn step(&mut self, agent: &mut dyn OnlineAgent) -> Result<(Vec<EpisodeStats>, Option<UpdateMetrics>)> {
        let actions = agent.explore(self.obs.view())?;
        let out = self.envs.step(actions.view())?;
        let mut next_obs = out.obs.clone();
        let mut finished = Vec::new();
        for i in 0..self.envs.len() {
            self.running[i].record(out.rewards[i]);
            if let Some(f) = &out.final_obs[i] {
                next_obs.row_mut(i).assign(f);
                let mut s = std::mem::take(&mut self.running[i]);
                s.terminated = out.terminated[i];
                finished.push(s);
            }
        }
        let metrics = agent.observe(&VecTransition {
            obs: self.obs.view(),
            action: actions.view(),
            reward: out.rewards.view(),
            next_obs: next_obs.view(),
            continue_obs: out.obs.view(),
            terminated: &out.terminated,
            truncated: &out.truncated,
        })?;
        self.obs = out.obs;
        self.steps += self.envs.len() as u64;
        self.episodes += finished.len() as u64;
        Ok((finished, metrics))
    }
}

impl<E: Env + Snapshot> OnlineTrainer<E> {
    /// Writes the environments' exact state, the current observations and counters to the
    /// checkpoint directory `dir`.
    ///
    /// # Errors
    /// I/O failures.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let state = TrainerState {
            envs: self.envs.snapshot(),
            obs: self.obs.rows().into_iter().map(|r| r.to_vec()).collect(),
            running: self.running.clone(),
            steps: self.steps,
            episodes: self.episodes,
        };
        rl_nn::checkpoint::save_dir::<_, &str>(dir, TRAINER_KIND, TRAINER_FORMAT, &state, &[])?;
        Ok(())
    }

    /// Restores what [`OnlineTrainer::save`] wrote; on error nothing changes.
    ///
    /// # Errors
    /// [`AgentError::Nn`] for a missing or foreign checkpoint, [`AgentError::Corrupt`] /
    /// [`AgentError::Env`] for a state that does not fit these environments.
    pub fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<TrainerState<E::State>>(dir, TRAINER_KIND, TRAINER_FORMAT)?;
        let s = ck.state;
        let (n, d) = self.obs.dim();
        if s.obs.len() != n || s.obs.iter().any(|r| r.len() != d) || s.running.len() != n {
            return Err(AgentError::Corrupt { path: ck.path, reason: format!("observations do not fit {n} x {d}") });
        }
        let obs = Array2::from_shape_vec((n, d), s.obs.concat())
            .map_err(|e| AgentError::Corrupt { path: ck.path.clone(), reason: e.to_string() })?;
        self.envs.restore(&s.envs)?;
        self.obs = obs;
        self.running = s.running;
        self.steps = s.steps;
        self.episodes = s.episodes;
        Ok(())
    }
}

/// What [`train`] returns.
#[derive(Debug, Clone, Default)]
pub struct TrainSummary {
    /// Environment steps at the end.
    pub env_steps: u64,
    /// Gradient updates at the end.
    pub updates: u64,
    /// Episodes finished during training.
    pub episodes: u64,
    /// `(env step, summary)` of every evaluation.
    pub evaluations: Vec<(u64, EpisodeSummary)>,
    /// Wall-clock seconds of this call.
    pub seconds: f64,
}

/// Trains `agent` on the environments of `trainer` until `params.total_steps` environment steps
/// (a resumed trainer continues from its count), logging to `sink` every `log_every` steps
/// (`train/episode_return`: mean return of the episodes finished since the last record,
/// `train/episode_length`, `time/env_steps`, `time/updates`, `time/steps_per_second`, and the
/// agent's latest update metrics, e.g. `loss/critic`), evaluating with `evaluator` every
/// `eval_every` steps and at the end (`eval/return_mean`, `eval/return_std`,
/// `eval/return_min`, `eval/return_max`, `eval/length_mean`), and writing checkpoints
/// (the unit `run_dir` of [`save_run`]) every `checkpoint_every` steps when `run_dir` is given.
/// The sink is flushed after every record, so a running job's progress is on disk.
///
/// # Errors
/// Agent, environment, sink and checkpoint failures; [`AgentError::NonFinite`] when an
/// update's loss is NaN or infinite (detected when it is logged).
pub fn train<E, V>(
    agent: &mut dyn OnlineAgent,
    trainer: &mut OnlineTrainer<E>,
    params: &Valid<TrainParams>,
    mut evaluator: Option<&mut Evaluator<V>>,
    sink: &mut dyn MetricsSink,
    run_dir: Option<&Path>,
) -> Result<TrainSummary>
where
    E: Env + Snapshot,
    V: Env,
{
    let t0 = Instant::now();
    let bar = progress_bar(params.total_steps, trainer.steps(), params.progress);
    let mut summary = TrainSummary::default();
    let mut since_log: Vec<EpisodeStats> = Vec::new();
    let mut last_metrics: Option<UpdateMetrics> = None;
    let mut next_log = next_multiple(trainer.steps(), params.log_every);
    let mut next_eval =
        if params.eval_every > 0 { next_multiple(trainer.steps(), params.eval_every) } else { u64::MAX };
    let mut next_ckpt =
        if params.checkpoint_every > 0 { next_multiple(trainer.steps(), params.checkpoint_every) } else { u64::MAX };
    let mut last_return = f64::NAN;
    let mut last_eval = f64::NAN;
    let mut log_t = Instant::now();
    let mut log_steps = trainer.steps();
    while trainer.steps() < params.total_steps {
        let (finished, metrics) = trainer.step(agent)?;
        since_log.extend(finished);
        if metrics.is_some() {
            last_metrics = metrics;
        }
        let steps = trainer.steps();
        bar.set_position(steps.min(params.total_steps));
        if steps >= next_log {
            next_log = next_multiple(steps, params.log_every);
            let mut m = match &last_metrics {
                Some(u) => u.to_metrics()?,
                None => Metrics::new(),
            };
            if !since_log.is_empty() {
                let s = EpisodeSummary::from_episodes(&since_log);
                m.insert("train/episode_return", s.mean_return);
                m.insert("train/episode_length", s.mean_length);
                last_return = s.mean_return;
                since_log.clear();
            }
            let dt = log_t.elapsed().as_secs_f64().max(1e-9);
            m.insert("time/steps_per_second", (steps - log_steps) as f64 / dt);
            m.insert("time/env_steps", steps as f64);
            m.insert("time/updates", agent.updates() as f64);
            log_t = Instant::now();
            log_steps = steps;
            sink.log(steps, &m)?;
            sink.flush()?;
            bar.set_message(format!("return {last_return:.1}  eval {last_eval:.1}"));
        }
        let at_end = steps >= params.total_steps;
        if let Some(ev) = evaluator.as_deref_mut() {
            if steps >= next_eval || at_end {
                next_eval = if params.eval_every > 0 { next_multiple(steps, params.eval_every) } else { u64::MAX };
                let s = EpisodeSummary::from_episodes(&ev.run(agent.policy())?);
                let m = Metrics::new()
                    .with("eval/return_mean", s.mean_return)
                    .with("eval/return_std", s.std_return)
                    .with("eval/return_min", s.min_return)
                    .with("eval/return_max", s.max_return)
                    .with("eval/length_mean", s.mean_length);
                sink.log(steps, &m)?;
                sink.flush()?;
                last_eval = s.mean_return;
                summary.evaluations.push((steps, s));
                bar.set_message(format!("return {last_return:.1}  eval {last_eval:.1}"));
            }
        }
        if let Some(dir) = run_dir {
            if steps >= next_ckpt || (at_end && params.checkpoint_every > 0) {
                next_ckpt = next_multiple(steps, params.checkpoint_every);
                save_run(dir, agent, trainer)?;
            }
        }
    }
    sink.flush()?;
    bar.finish_and_clear();
    summary.env_steps = trainer.steps();
    summary.updates = agent.updates();
    summary.episodes = trainer.episodes();
    summary.seconds = t0.elapsed().as_secs_f64();
    Ok(summary)
}

/// Writes the run's checkpoint unit `dir` ([`rl_nn::checkpoint::UnitWriter`]): part `agent`
/// ([`Agent::save`](crate::Agent::save), at the agent's environment step count) and part `trainer`
/// ([`OnlineTrainer::save`], at the trainer's), committed together by one rename of the
/// manifest: a crash leaves the previous checkpoint or this one, never parts of both.
///
/// # Errors
/// I/O and libtorch failures; [`rl_nn::RlNnError::InvalidName`] when `dir` holds something
/// else than a checkpoint unit (e.g. a checkpoint of the layout before units).
pub fn save_run<E: Env + Snapshot>(dir: &Path, agent: &dyn OnlineAgent, trainer: &OnlineTrainer<E>) -> Result<()> {
    let mut unit = rl_nn::checkpoint::UnitWriter::new(dir, RUN_KIND, RUN_FORMAT)?;
    agent.save(&unit.part("agent", agent.env_steps())?)?;
    trainer.save(&unit.part("trainer", trainer.steps())?)?;
    unit.commit()?;
    Ok(())
}

/// Restores what [`save_run`] wrote. The unit is verified first (every file's SHA-256 and
/// size as the manifest recorded them); after each part is loaded its step count is checked
/// against the manifest ([`rl_nn::RlNnError::CheckpointPart`] names the part that disagrees).
///
/// # Errors
/// As [`Agent::load`](crate::Agent::load) and [`OnlineTrainer::load`]; the unit's errors
/// ([`rl_nn::checkpoint::open_unit`]).
pub fn load_run<E: Env + Snapshot>(
    dir: &Path,
    agent: &mut dyn OnlineAgent,
    trainer: &mut OnlineTrainer<E>,
) -> Result<()> {
    let unit = rl_nn::checkpoint::open_unit(dir, RUN_KIND, RUN_FORMAT)?;
    trainer.load(&unit.part("trainer")?)?;
    unit.check_step("trainer", trainer.steps())?;
    agent.load(&unit.part("agent")?)?;
    unit.check_step("agent", agent.env_steps())?;
    Ok(())
}

fn next_multiple(steps: u64, every: u64) -> u64 {
    (steps / every + 1) * every
}

fn progress_bar(total: u64, pos: u64, show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} steps ({per_sec}, eta {eta}) {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_position(pos);
    bar
}

/// Reads a JSONL metrics file written by [`rl_core::JsonlSink`]: `(step, metrics)` per line.
///
/// # Errors
/// I/O failures, [`AgentError::Corrupt`] for a line that is not a JSON object with a `step`.
pub fn read_jsonl(path: impl AsRef<Path>) -> Result<Vec<(u64, BTreeMap<String, f64>)>> {
    let path: PathBuf = path.as_ref().to_path_buf();
    let text = std::fs::read_to_string(&path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let corrupt = |r: String| AgentError::Corrupt {
            path: path.display().to_string(),
            reason: format!("line {}: {r}", i + 1),
        };
        let v: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(line).map_err(|e| corrupt(e.to_string()))?;
        let step = v.get("step").and_then(serde_json::Value::as_u64).ok_or_else(|| corrupt("no `step`".into()))?;
        let m = v
            .iter()
            .filter(|(k, _)| k.as_str() != "step")
            .filter_map(|(k, x)| x.as_f64().map(|f| (k.clone(), f)))
            .collect();
        out.push((step, m));
    }
    Ok(out)
}
