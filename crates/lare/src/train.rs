//! Training loops on episodic rewards: an off-policy agent (SAC, TD3 from `rl-agents`) whose
//! every batch is relabelled by a [`RewardRedistributor`], and PPO with parameter sharing over
//! the agents of a cooperative multi-agent task with agent-level credit.
//!
//! Off-policy (LaRe's `mujoco/main.py` + `algos/TD3.py`): uniform random actions for the first
//! `start_steps`; an episode enters the buffer when it ends, with its features; after
//! `start_steps`, every environment step takes `updates_per_step` agent updates, each on a batch
//! sampled by the method and relabelled with its current rewards, followed by
//! `decoder_updates` decoder steps (LaRe: one per agent update). The hidden dense reward is used
//! only for `reward/pred_err` (LaRe's `reward_pred_err`, MSE of the relabelled rewards against
//! it) and for evaluation.
//!
//! Multi-agent (LaRe's `mpe/` PPO): one PPO policy shared by all agents on their local
//! observations (each agent is one row of PPO's batch). At every step each agent's reward is
//! relabelled by the credit decoder from its factors `φ(o^i_{t+1})` and scaled by
//! `reward_scale` (LaRe: `T·N`); the decoder trains every `decoder_every` PPO iterations for
//! `decoder_updates` steps on the last `buffer_episodes` episodes, so one rollout sees one decoder.
//!
//! Resuming: [`OffPolicyRun`] and [`MultiAgentRun`] are the same loops one environment step at a
//! time; `save` writes everything that carries between steps (generators, buffers, the episode
//! being collected, counters, the summary so far, both environments' states, the agent and the
//! method or credit decoder) into one checkpoint unit, `load` restores it into freshly built
//! objects, and [`run_off_policy`] / [`run_multi_agent_ppo`] continue a run with periodic
//! checkpoints ([`Checkpointing`]). A resumed run ends bit for bit as the uninterrupted one.

use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, ArrayView1, Axis};
use rand::RngCore;
use rl_agents::{Batch, BatchLearner, BatchPolicy, OnlineAgent, VecTransition};
use rl_core::{ActMode, Env, Metrics, MetricsSink, Params, SeededRng, Valid};
use rl_envs::wrappers::EpisodicReward;
use rl_envs::{MultiAgentEnv, Snapshot};
use serde::{Deserialize, Serialize};

use crate::credit::{AgentCreditDecoder, MultiEpisode, MultiEpisodeBuffer};
use crate::encoder::LatentEncoder;
use crate::episode::{EpisodeBuffer, EpisodeBuilder};
use crate::error::{LareError, Result};
use crate::redistribute::{store_episode, RewardRedistributor};

/// Parameters of [`train_off_policy`]; defaults are LaRe's MuJoCo loop.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `total_steps` | 1 000 000 | environment steps | `>= 1` |
/// | `start_steps` | 10 000 | uniform random actions first (`start_timesteps`) | any |
/// | `batch_size` | 256 | transitions per agent update | `>= 1` |
/// | `updates_per_step` | 1 | agent updates per environment step | `>= 1` |
/// | `decoder_updates` | 1 | decoder steps per agent update | any |
/// | `buffer_capacity` | 1 000 000 | steps kept (whole episodes) | `>= 1` |
/// | `eval_every` | 5 000 | environment steps between evaluations | `>= 1` |
/// | `eval_episodes` | 10 | dense-return episodes per evaluation | `>= 1` |
/// | `log_every` | 1 000 | environment steps between training-metric records | `>= 1` |
/// | `seed` | 0 | master seed (streams `env`, `explore`, `sample`, `eval`) | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffPolicyLoopParams {
    /// Environment steps.
    pub total_steps: u64,
    /// Random steps first.
    pub start_steps: u64,
    /// Batch size.
    pub batch_size: usize,
    /// Agent updates per step.
    pub updates_per_step: usize,
    /// Decoder steps per agent update.
    pub decoder_updates: usize,
    /// Buffer capacity (steps).
    pub buffer_capacity: usize,
    /// Evaluation period.
    pub eval_every: u64,
    /// Evaluation episodes.
    pub eval_episodes: usize,
    /// Metric period.
    pub log_every: u64,
    /// Master seed.
    pub seed: u64,
}

impl Default for OffPolicyLoopParams {
    fn default() -> Self {
        Self {
            total_steps: 1_000_000,
            start_steps: 10_000,
            batch_size: 256,
            updates_per_step: 1,
            decoder_updates: 1,
            buffer_capacity: 1_000_000,
            eval_every: 5_000,
            eval_episodes: 10,
            log_every: 1_000,
            seed: 0,
        }
    }
}

impl Params for OffPolicyLoopParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("total_steps", self.total_steps),
            ("batch_size", self.batch_size as u64),
            ("updates_per_step", self.updates_per_step as u64),
            ("buffer_capacity", self.buffer_capacity as u64),
            ("eval_every", self.eval_every),
            ("eval_episodes", self.eval_episodes as u64),
            ("log_every", self.log_every),
        ] {
            if v == 0 {
                return Err(LareError::invalid(name, 0, "must be >= 1"));
            }
        }
        Ok(())
    }
}

/// What a training run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// `(env steps, mean dense return)` of every evaluation.
    pub evals: Vec<(u64, f64)>,
    /// `(env steps, dense return)` of every training episode.
    pub train_returns: Vec<(u64, f64)>,
    /// Mean of the last evaluation.
    pub final_return: f64,
}

/// Mean dense return of `episodes` deterministic episodes of `policy` in `env`.
///
/// # Errors
/// Environment and policy failures.
pub fn evaluate_policy(
    env: &mut dyn Env,
    policy: &dyn BatchPolicy,
    episodes: usize,
    rng: &mut dyn RngCore,
) -> Result<f64> {
    let mut total = 0.0;
    for _ in 0..episodes {
        let mut obs = env.reset(rng)?;
        loop {
            let a = policy.act_batch(obs.view().insert_axis(Axis(0)), ActMode::Deterministic, rng)?;
            let step = env.step(a.row(0))?;
            total += f64::from(step.reward);
            if step.done() {
                break;
            }
            obs = step.obs;
        }
    }
    Ok(total / episodes.max(1) as f64)
}

/// Where and how often a resumable run writes its checkpoint unit ([`run_off_policy`],
/// [`run_multi_agent_ppo`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointing {
    /// The checkpoint unit directory (replaced at every save; a crash leaves the previous one).
    pub dir: PathBuf,
    /// Environment steps between checkpoints (`>= 1`); the last step is always saved.
    pub every: u64,
}

impl Checkpointing {
    /// Saves into `dir` every `every` environment steps and at the end.
    ///
    /// # Errors
    /// [`LareError::InvalidParameter`] for `every == 0`.
    pub fn new(dir: impl Into<PathBuf>, every: u64) -> Result<Self> {
        if every == 0 {
            return Err(LareError::invalid("checkpoint every", 0, "must be >= 1"));
        }
        Ok(Self { dir: dir.into(), every })
    }

    fn due(&self, steps: u64, finished: bool) -> bool {
        finished || steps % self.every == 0
    }
}

/// One step of the episode being collected (a checkpoint rebuilds the episode builder from them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepRow {
    obs: Vec<f32>,
    action: Vec<f32>,
    next_obs: Vec<f32>,
    dense: f32,
}

/// The state of an [`OffPolicyRun`] between two steps: everything of the loop that carries from
/// one environment step to the next, except the episode buffer (its own checkpoint directory),
/// the agent and the method.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffPolicyState<S, V> {
    params: OffPolicyLoopParams,
    method: String,
    steps: u64,
    env_rng: SeededRng,
    explore_rng: SeededRng,
    sample_rng: SeededRng,
    eval_rng: SeededRng,
    obs: Vec<f32>,
    current: Vec<StepRow>,
    pending: Metrics,
    summary: RunSummary,
    env: S,
    eval_env: V,
}

/// The checkpoint unit of an off-policy run ([`OffPolicyRun::save`]).
pub const OFF_POLICY_RUN_KIND: &str = "lare.off_policy_run";
/// Format version of [`OFF_POLICY_RUN_KIND`] units.
pub const OFF_POLICY_RUN_FORMAT: u32 = 1;
const OFF_POLICY_LOOP_KIND: &str = "lare.off_policy_loop";
const MULTI_AGENT_LOOP_KIND: &str = "lare.multi_agent_loop";
const LOOP_FORMAT: u32 = 1;
/// The checkpoint unit of a multi-agent run ([`MultiAgentRun::save`]).
pub const MULTI_AGENT_RUN_KIND: &str = "lare.multi_agent_run";
/// Format version of [`MULTI_AGENT_RUN_KIND`] units.
pub const MULTI_AGENT_RUN_FORMAT: u32 = 1;

/// The loop of [`train_off_policy`] one environment step at a time, with checkpoints: the
/// generators (`env`, `explore`, `sample`, `eval` streams), the episode buffer, the episode being
/// collected, the current observation, the metrics waiting for the next record, the
/// [`RunSummary`] so far and the step count. [`OffPolicyRun::save`] writes them with the
/// environments' exact states, the agent ([`Agent::save`](rl_agents::Agent::save)) and the method
/// ([`RewardRedistributor::save`]) into one checkpoint unit; [`OffPolicyRun::load`] restores
/// all of it into freshly built objects, and the resumed run draws the same numbers as an
/// uninterrupted one.
#[derive(Debug)]
pub struct OffPolicyRun {
    params: OffPolicyLoopParams,
    steps: u64,
    env_rng: SeededRng,
    explore_rng: SeededRng,
    sample_rng: SeededRng,
    eval_rng: SeededRng,
    buffer: EpisodeBuffer,
    builder: EpisodeBuilder,
    current: Vec<StepRow>,
    obs: Array1<f32>,
    pending: Metrics,
    summary: RunSummary,
}

impl OffPolicyRun {
    /// Starts a run: derives the generators from `params.seed`, makes the buffer and resets
    /// `env` (with the `env` stream).
    ///
    /// # Errors
    /// Environment failures; a buffer capacity of zero.
    pub fn new<E: Env>(
        env: &mut EpisodicReward<E>,
        method: &dyn RewardRedistributor,
        params: &Valid<OffPolicyLoopParams>,
    ) -> Result<Self> {
        let p = params.get();
        let od = env.observation_space().dim();
        let ad = env.action_space().dim();
        let seed = |name: &str| rl_core::rng_from_seed(rl_core::derive_seed_named(p.seed, name));
        let (mut env_rng, explore_rng, sample_rng, eval_rng) =
            (seed("env"), seed("explore"), seed("sample"), seed("eval"));
        let buffer = EpisodeBuffer::new(od, ad, method.feature_dim(), p.buffer_capacity)?;
        let obs = env.reset(&mut env_rng)?;
        Ok(Self {
            params: p.clone(),
            steps: 0,
            env_rng,
            explore_rng,
            sample_rng,
            eval_rng,
            buffer,
            builder: EpisodeBuilder::new(od, ad),
            current: Vec::new(),
            obs,
            pending: Metrics::new(),
            summary: RunSummary::default(),
        })
    }

    /// Environment steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Whether `total_steps` steps are done.
    pub fn is_finished(&self) -> bool {
        self.steps >= self.params.total_steps
    }

    /// What the run measured so far.
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// The episode buffer.
    pub fn buffer(&self) -> &EpisodeBuffer {
        &self.buffer
    }

    /// The loop parameters.
    pub fn params(&self) -> &OffPolicyLoopParams {
        &self.params
    }

    /// One environment step of the loop (see the module docs), with the updates and the
    /// evaluation it is due; nothing once the run is finished.
    ///
    /// # Errors
    /// Environment, agent and method failures; an agent of other widths than the environment.
    pub fn step<E: Env>(
        &mut self,
        env: &mut EpisodicReward<E>,
        eval_env: &mut dyn Env,
        agent: &mut dyn BatchLearner,
        method: &mut dyn RewardRedistributor,
        sink: &mut dyn MetricsSink,
    ) -> Result<()> {
        if self.is_finished() {
            return Ok(());
        }
        let p = &self.params;
        let t = self.steps;
        let device = agent.device();
        let action: Array1<f32> = if t < p.start_steps {
            env.action_space().sample(&mut self.explore_rng)
        } else {
            agent.explore(self.obs.view().insert_axis(Axis(0)))?.row(0).to_owned()
        };
        let step = env.step(action.view())?;
        let dense = env.last_dense_reward();
        self.builder.push(self.obs.view(), action.view(), step.obs.view(), dense)?;
        self.current.push(StepRow {
            obs: self.obs.to_vec(),
            action: action.to_vec(),
            next_obs: step.obs.to_vec(),
            dense,
        });
        if step.done() {
            let dense_return = env.return_so_far();
            let ep = self.builder.finish(step.reward, step.terminated)?;
            self.current.clear();
            store_episode(&mut self.buffer, method, ep)?;
            self.summary.train_returns.push((t + 1, dense_return));
            sink.log(t + 1, &Metrics::new().with("train/episode_return", dense_return))?;
            self.obs = env.reset(&mut self.env_rng)?;
        } else {
            self.obs = step.obs;
        }
        if t + 1 >= p.start_steps && !self.buffer.is_empty() {
            for _ in 0..p.updates_per_step {
                let batch = method.sample(&self.buffer, p.batch_size, &mut self.sample_rng)?;
                let rewards = method.relabel(&batch)?;
                let tr = batch.to_transitions(&rewards)?;
                let m = agent.update(&Batch::from_transitions(&tr, device)?)?;
                for _ in 0..p.decoder_updates {
                    let dm = method.update(&self.buffer)?;
                    if (t + 1) % p.log_every == 0 {
                        self.pending.extend_prefixed("", &dm);
                    }
                }
                if (t + 1) % p.log_every == 0 {
                    self.pending.extend_prefixed("", &m.to_metrics()?);
                    let err = (&rewards - &batch.dense_rewards).mapv(|e| f64::from(e * e)).mean().unwrap_or(0.0);
                    self.pending.insert("reward/pred_err", err);
                }
            }
        }
        if (t + 1) % p.log_every == 0 && !self.pending.is_empty() {
            sink.log(t + 1, &std::mem::take(&mut self.pending))?;
        }
        if (t + 1) % p.eval_every == 0 || t + 1 == p.total_steps {
            let r = evaluate_policy(eval_env, agent.policy(), p.eval_episodes, &mut self.eval_rng)?;
            self.summary.evals.push((t + 1, r));
            self.summary.final_return = r;
            sink.log(t + 1, &Metrics::new().with("eval/return_mean", r))?;
        }
        self.steps = t + 1;
        Ok(())
    }

    /// Writes the checkpoint unit `dir` ([`rl_nn::checkpoint::UnitWriter`], kind
    /// [`OFF_POLICY_RUN_KIND`]): part `loop` (this run's state and the exact states of `env`
    /// and `eval_env`), `buffer` ([`EpisodeBuffer::save`]), `agent` ([`Agent::save`](rl_agents::Agent::save), at its
    /// update count) and `method` ([`RewardRedistributor::save`] under `method/state`),
    /// committed together: a crash leaves the previous checkpoint or this one.
    ///
    /// # Errors
    /// I/O, JSON and libtorch failures; [`rl_nn::RlNnError::InvalidName`] when `dir` holds
    /// something else than a checkpoint unit.
    pub fn save<E: Env + Snapshot, V: Env + Snapshot>(
        &self,
        dir: &Path,
        env: &EpisodicReward<E>,
        eval_env: &V,
        agent: &dyn BatchLearner,
        method: &dyn RewardRedistributor,
    ) -> Result<()> {
        let state = OffPolicyState {
            params: self.params.clone(),
            method: method.name(),
            steps: self.steps,
            env_rng: self.env_rng.clone(),
            explore_rng: self.explore_rng.clone(),
            sample_rng: self.sample_rng.clone(),
            eval_rng: self.eval_rng.clone(),
            obs: self.obs.to_vec(),
            current: self.current.clone(),
            pending: self.pending.clone(),
            summary: self.summary.clone(),
            env: env.snapshot(),
            eval_env: eval_env.snapshot(),
        };
        let mut unit = rl_nn::checkpoint::UnitWriter::new(dir, OFF_POLICY_RUN_KIND, OFF_POLICY_RUN_FORMAT)?;
        let no_tensors: &[(&str, tch::Tensor)] = &[];
        rl_nn::checkpoint::save_dir(
            unit.part("loop", self.steps)?,
            OFF_POLICY_LOOP_KIND,
            LOOP_FORMAT,
            &state,
            no_tensors,
        )?;
        self.buffer.save(unit.part("buffer", self.steps)?)?;
        agent.save(&unit.part("agent", agent.updates())?)?;
        save_method_part(&unit.part("method", self.steps)?, &method.name(), |d| method.save(d))?;
        unit.commit()?;
        Ok(())
    }

    /// Restores a run written by [`OffPolicyRun::save`] into freshly built objects: `env`,
    /// `eval_env`, `agent` and `method` must be built as the saved ones were (same widths,
    /// parameters and method); their states are replaced. `params` may differ from the saved
    /// parameters only in `total_steps` (to extend a run).
    ///
    /// The unit is verified before anything is read (every file's SHA-256 and size); the
    /// loop state and the buffer are checked before any object is touched. A failure while
    /// loading the agent, the method or the environments can leave those partly restored:
    /// build them again before retrying.
    ///
    /// # Errors
    /// [`LareError::Nn`] for a missing, corrupt or foreign checkpoint (another kind or format
    /// version), [`LareError::Corrupt`] for one saved with other loop parameters, another
    /// method or other widths; the agent's, method's and environments' load errors.
    pub fn load<E: Env + Snapshot, V: Env + Snapshot>(
        dir: &Path,
        env: &mut EpisodicReward<E>,
        eval_env: &mut V,
        agent: &mut dyn BatchLearner,
        method: &mut dyn RewardRedistributor,
        params: &Valid<OffPolicyLoopParams>,
    ) -> Result<Self> {
        let unit = rl_nn::checkpoint::open_unit(dir, OFF_POLICY_RUN_KIND, OFF_POLICY_RUN_FORMAT)?;
        let ck = rl_nn::checkpoint::load_dir::<OffPolicyState<<EpisodicReward<E> as Snapshot>::State, V::State>>(
            unit.part("loop")?,
            OFF_POLICY_LOOP_KIND,
            LOOP_FORMAT,
        )?;
        let s = ck.state;
        let corrupt = |reason: String| LareError::Corrupt { path: ck.path.clone(), reason };
        unit.check_step("loop", s.steps)?;
        let p = params.get();
        let saved = OffPolicyLoopParams { total_steps: p.total_steps, ..s.params.clone() };
        if &saved != p {
            return Err(corrupt(format!("saved with other loop parameters ({:?}, resuming with {p:?})", s.params)));
        }
        if s.method != method.name() {
            return Err(corrupt(format!("saved by method `{}`, resuming with `{}`", s.method, method.name())));
        }
        let (od, ad) = (env.observation_space().dim(), env.action_space().dim());
        if s.obs.len() != od {
            return Err(corrupt(format!("observation of width {}, the environment's is {od}", s.obs.len())));
        }
        let buffer = EpisodeBuffer::load(unit.part("buffer")?)?;
        unit.check_step("buffer", s.steps)?;
        let widths = (buffer.obs_dim(), buffer.act_dim(), buffer.feature_dim(), buffer.capacity());
        if widths != (od, ad, method.feature_dim(), p.buffer_capacity) {
            return Err(corrupt(format!(
                "buffer of (obs, act, feature) widths and capacity {widths:?}, expected {:?}",
                (od, ad, method.feature_dim(), p.buffer_capacity)
            )));
        }
        let mut builder = EpisodeBuilder::new(od, ad);
        for r in &s.current {
            builder.push(
                ArrayView1::from(&r.obs),
                ArrayView1::from(&r.action),
                ArrayView1::from(&r.next_obs),
                r.dense,
            )?;
        }
        agent.load(&unit.part("agent")?)?;
        unit.check_step("agent", agent.updates())?;
        load_method_part(&unit.part("method")?, &s.method, |d| method.load(d))?;
        env.restore(&s.env)?;
        eval_env.restore(&s.eval_env)?;
        Ok(Self {
            params: p.clone(),
            steps: s.steps,
            env_rng: s.env_rng,
            explore_rng: s.explore_rng,
            sample_rng: s.sample_rng,
            eval_rng: s.eval_rng,
            buffer,
            builder,
            current: s.current,
            obs: Array1::from(s.obs),
            pending: s.pending,
            summary: s.summary,
        })
    }
}

fn to_tensor(a: ndarray::ArrayViewD<'_, f32>) -> Result<tch::Tensor> {
    let shape: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
    let data: Vec<f32> = a.iter().copied().collect();
    Ok(tch::Tensor::from_slice(&data).f_reshape(shape)?)
}

fn from_tensor(t: &tch::Tensor) -> std::result::Result<ndarray::ArrayD<f32>, String> {
    if t.kind() != tch::Kind::Float {
        return Err(format!("kind {:?}, expected Float", t.kind()));
    }
    let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
    let data = Vec::<f32>::try_from(t.f_flatten(0, -1).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    ndarray::ArrayD::from_shape_vec(shape, data).map_err(|e| e.to_string())
}

const METHOD_FILE: &str = "method.json";

/// The `method` part: `method.json` (the name) and the method's own checkpoint under `state`
/// (absent for a stateless method).
fn save_method_part(dir: &Path, name: &str, save: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(METHOD_FILE), serde_json::to_vec(&serde_json::json!({ "method": name }))?)?;
    save(&dir.join("state"))
}

fn load_method_part(dir: &Path, name: &str, load: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let file = dir.join(METHOD_FILE);
    let corrupt = |reason: String| LareError::Corrupt { path: file.display().to_string(), reason };
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file)?).map_err(|e| corrupt(e.to_string()))?;
    if v.get("method").and_then(|m| m.as_str()) != Some(name) {
        return Err(corrupt(format!("does not name method `{name}`: {v}")));
    }
    load(&dir.join("state"))
}

/// Trains `agent` on the episodic-reward environment `env` with the per-step rewards of
/// `method`, evaluating the dense return on `eval_env` (see the module docs). Metrics go to
/// `sink` (`eval/return_mean`, `train/episode_return`, `reward/pred_err`, the agent's and the
/// decoder's losses); `progress` is called with the step count after every step. A run that
/// can resume: [`OffPolicyRun`] and [`run_off_policy`].
///
/// # Errors
/// Environment, agent and method failures; an agent of other widths than the environment.
pub fn train_off_policy<E: Env>(
    env: &mut EpisodicReward<E>,
    eval_env: &mut dyn Env,
    agent: &mut dyn BatchLearner,
    method: &mut dyn RewardRedistributor,
    params: &Valid<OffPolicyLoopParams>,
    sink: &mut dyn MetricsSink,
    progress: &mut dyn FnMut(u64),
) -> Result<RunSummary> {
    let mut run = OffPolicyRun::new(env, method, params)?;
    while !run.is_finished() {
        run.step(env, eval_env, agent, method, sink)?;
        progress(run.steps());
    }
    sink.flush()?;
    Ok(run.summary)
}

/// Continues `run` (new, or restored by [`OffPolicyRun::load`]) to its `total_steps`, as
/// [`train_off_policy`] does, writing a checkpoint ([`OffPolicyRun::save`]) every
/// `checkpoint.every` steps and after the last one. Numbers do not depend on where a run was
/// interrupted: a resumed run ends as the uninterrupted one (bit for bit on one device and
/// thread count).
///
/// # Errors
/// As [`OffPolicyRun::step`] and [`OffPolicyRun::save`].
#[allow(clippy::too_many_arguments)]
pub fn run_off_policy<E: Env + Snapshot, V: Env + Snapshot>(
    run: &mut OffPolicyRun,
    env: &mut EpisodicReward<E>,
    eval_env: &mut V,
    agent: &mut dyn BatchLearner,
    method: &mut dyn RewardRedistributor,
    sink: &mut dyn MetricsSink,
    progress: &mut dyn FnMut(u64),
    checkpoint: Option<&Checkpointing>,
) -> Result<RunSummary> {
    while !run.is_finished() {
        run.step(env, eval_env, agent, method, sink)?;
        progress(run.steps());
        if let Some(c) = checkpoint {
            if c.due(run.steps(), run.is_finished()) {
                sink.flush()?;
                run.save(&c.dir, env, eval_env, agent, method)?;
            }
        }
    }
    sink.flush()?;
    Ok(run.summary.clone())
}

/// How the multi-agent loop turns the team's episodic return into per-agent rewards.
#[derive(Debug)]
pub enum MultiAgentMethod {
    /// The raw episodic reward: `R_team / N` to every agent at the last step (LaRe's sparse PPO).
    Episodic,
    /// The hidden dense per-agent rewards (a reference).
    Dense,
    /// A shared credit decoder over the factors of `encoder` (LaRe with an LLM or hand-written
    /// encoder; RD with [`RawEncoder`](crate::encoder::RawEncoder) on `o'`).
    Credit {
        /// Name in logs.
        name: String,
        /// The factors.
        encoder: Box<dyn LatentEncoder>,
        /// The decoder.
        decoder: Box<AgentCreditDecoder>,
    },
}

impl MultiAgentMethod {
    /// The method's name.
    pub fn name(&self) -> String {
        match self {
            MultiAgentMethod::Episodic => "episodic".into(),
            MultiAgentMethod::Dense => "dense".into(),
            MultiAgentMethod::Credit { name, .. } => name.clone(),
        }
    }
}

/// Parameters of [`train_multi_agent_ppo`]; defaults are LaRe's MPE setup where it has one.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `total_steps` | 2 000 000 | environment steps (each moves every agent) | `>= 1` |
/// | `decoder_every` | 10 | PPO iterations between decoder rounds (`reward_model_update_freq`) | `>= 1` |
/// | `decoder_updates` | 50 | decoder steps per round (`updates_per_step`) | any |
/// | `buffer_episodes` | 5 000 | episodes kept for the decoder | `>= 1` |
/// | `reward_scale` | 1 | multiplies relabelled rewards (LaRe: `T·N`, 75 for 3 agents and 25 steps) | `> 0` |
/// | `eval_every` | 25 000 | environment steps between evaluations | `>= 1` |
/// | `eval_episodes` | 20 | evaluation episodes (dense team return, greedy actions) | `>= 1` |
/// | `seed` | 0 | master seed | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MultiAgentLoopParams {
    /// Environment steps.
    pub total_steps: u64,
    /// PPO iterations between decoder rounds.
    pub decoder_every: u64,
    /// Decoder steps per round.
    pub decoder_updates: usize,
    /// Episodes kept.
    pub buffer_episodes: usize,
    /// Reward scale of relabelled rewards.
    pub reward_scale: f64,
    /// Evaluation period.
    pub eval_every: u64,
    /// Evaluation episodes.
    pub eval_episodes: usize,
    /// Master seed.
    pub seed: u64,
}

impl Default for MultiAgentLoopParams {
    fn default() -> Self {
        Self {
            total_steps: 2_000_000,
            decoder_every: 10,
            decoder_updates: 50,
            buffer_episodes: 5_000,
            reward_scale: 1.0,
            eval_every: 25_000,
            eval_episodes: 20,
            seed: 0,
        }
    }
}

impl Params for MultiAgentLoopParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("total_steps", self.total_steps),
            ("decoder_every", self.decoder_every),
            ("buffer_episodes", self.buffer_episodes as u64),
            ("eval_every", self.eval_every),
            ("eval_episodes", self.eval_episodes as u64),
        ] {
            if v == 0 {
                return Err(LareError::invalid(name, 0, "must be >= 1"));
            }
        }
        if !(self.reward_scale > 0.0 && self.reward_scale.is_finite()) {
            return Err(LareError::invalid("reward_scale", self.reward_scale, "must be finite and > 0"));
        }
        Ok(())
    }
}

fn stack(rows: &[Array1<f32>]) -> Result<Array2<f32>> {
    let views: Vec<_> = rows.iter().map(|r| r.view()).collect();
    ndarray::stack(Axis(0), &views).map_err(|e| LareError::shape("observations", "equal widths", e))
}

/// Mean dense team return of `episodes` greedy episodes of the shared `policy`.
///
/// # Errors
/// Environment and policy failures.
pub fn evaluate_multi_agent(
    env: &mut dyn MultiAgentEnv,
    policy: &dyn BatchPolicy,
    episodes: usize,
    rng: &mut dyn RngCore,
) -> Result<f64> {
    let mut total = 0.0;
    for _ in 0..episodes {
        let mut obs = env.reset(rng)?;
        loop {
            let a = policy.act_batch(stack(&obs)?.view(), ActMode::Deterministic, rng)?;
            let actions: Vec<Array1<f32>> = a.rows().into_iter().map(|r| r.to_owned()).collect();
            let step = env.step(&actions)?;
            total += f64::from(step.team_reward());
            if step.done() {
                break;
            }
            obs = step.obs;
        }
    }
    Ok(total / episodes.max(1) as f64)
}

/// The state of a [`MultiAgentRun`] between two steps (the PPO agent and the credit decoder
/// have their own checkpoint directories).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MultiAgentState<S, V> {
    params: MultiAgentLoopParams,
    method: String,
    steps: u64,
    env_rng: SeededRng,
    eval_rng: SeededRng,
    obs: Vec<Vec<f32>>,
    ep_obs: Vec<Array2<f32>>,
    ep_act: Vec<Array2<f32>>,
    ep_next: Vec<Array2<f32>>,
    ep_dense: Vec<Array1<f32>>,
    iterations: u64,
    team_return: f64,
    summary: RunSummary,
    /// Team return of each buffered episode; their arrays are the part's tensors
    /// `buffer.<i>.{obs,actions,next_obs,dense_rewards,features}`.
    buffer_team_returns: Vec<f32>,
    env: S,
    eval_env: V,
}

/// The loop of [`train_multi_agent_ppo`] one environment step at a time, with checkpoints:
/// generators (`env`, `eval` streams), the decoder's episode buffer, the episode being collected,
/// the current observations, the PPO iteration count, the team return so far, the
/// [`RunSummary`] and the step count. [`MultiAgentRun::save`] writes them with the
/// environments' exact states, the PPO agent ([`Agent::save`](rl_agents::Agent::save): weights, optimiser,
/// rollout, generator) and the credit decoder ([`AgentCreditDecoder::save`]) into one
/// checkpoint unit; [`MultiAgentRun::load`] restores them into freshly built objects.
#[derive(Debug)]
pub struct MultiAgentRun {
    params: MultiAgentLoopParams,
    steps: u64,
    env_rng: SeededRng,
    eval_rng: SeededRng,
    buffer: MultiEpisodeBuffer,
    obs: Vec<Array1<f32>>,
    ep_obs: Vec<Array2<f32>>,
    ep_act: Vec<Array2<f32>>,
    ep_next: Vec<Array2<f32>>,
    ep_dense: Vec<Array1<f32>>,
    iterations: u64,
    team_return: f64,
    summary: RunSummary,
}

fn feature_dim(method: &MultiAgentMethod) -> usize {
    match method {
        MultiAgentMethod::Credit { encoder, .. } => encoder.dim(),
        _ => 0,
    }
}

impl MultiAgentRun {
    /// Starts a run: derives the generators from `params.seed`, makes the decoder's buffer and
    /// resets `env`.
    ///
    /// # Errors
    /// Environment failures.
    pub fn new(
        env: &mut dyn MultiAgentEnv,
        method: &MultiAgentMethod,
        params: &Valid<MultiAgentLoopParams>,
    ) -> Result<Self> {
        let p = params.get();
        let seed = |name: &str| rl_core::rng_from_seed(rl_core::derive_seed_named(p.seed, name));
        let (mut env_rng, eval_rng) = (seed("env"), seed("eval"));
        let buffer = MultiEpisodeBuffer::new(p.buffer_episodes, feature_dim(method))?;
        let obs = env.reset(&mut env_rng)?;
        Ok(Self {
            params: p.clone(),
            steps: 0,
            env_rng,
            eval_rng,
            buffer,
            obs,
            ep_obs: vec![],
            ep_act: vec![],
            ep_next: vec![],
            ep_dense: vec![],
            iterations: 0,
            team_return: 0.0,
            summary: RunSummary::default(),
        })
    }

    /// Environment steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// PPO iterations done.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// Whether `total_steps` steps are done.
    pub fn is_finished(&self) -> bool {
        self.steps >= self.params.total_steps
    }

    /// What the run measured so far.
    pub fn summary(&self) -> &RunSummary {
        &self.summary
    }

    /// The credit decoder's episode buffer.
    pub fn buffer(&self) -> &MultiEpisodeBuffer {
        &self.buffer
    }

    /// One environment step of the loop (module docs); nothing once the run is finished.
    ///
    /// # Errors
    /// Environment, agent and decoder failures; agents of different widths.
    pub fn step(
        &mut self,
        env: &mut dyn MultiAgentEnv,
        eval_env: &mut dyn MultiAgentEnv,
        ppo: &mut dyn OnlineAgent,
        method: &mut MultiAgentMethod,
        sink: &mut dyn MetricsSink,
    ) -> Result<()> {
        if self.is_finished() {
            return Ok(());
        }
        let p = &self.params;
        let t = self.steps;
        let n = env.n_agents();
        let o = stack(&self.obs)?;
        let a = ppo.explore(o.view())?;
        let actions: Vec<Array1<f32>> = a.rows().into_iter().map(|r| r.to_owned()).collect();
        let step = env.step(&actions)?;
        let next = stack(&step.obs)?;
        let dense = Array1::from(step.rewards.clone());
        self.team_return += f64::from(step.team_reward());
        let done = step.done();
        let rewards: Array1<f32> = match method {
            MultiAgentMethod::Dense => dense.clone(),
            MultiAgentMethod::Episodic => {
                if done {
                    Array1::from_elem(n, (self.team_return / n as f64) as f32)
                } else {
                    Array1::zeros(n)
                }
            }
            MultiAgentMethod::Credit { encoder, decoder, .. } => {
                let f = encoder.encode_batch(o.view(), a.view(), next.view())?;
                let f3 = f.insert_axis(Axis(1));
                let r = decoder.relabel(&f3)?.remove_axis(Axis(1));
                r.mapv(|x| x * p.reward_scale as f32)
            }
        };
        let terminated: Vec<bool> = step.terminated.clone();
        let truncated: Vec<bool> = step.truncated.clone();
        let continue_obs = if done {
            let reset = env.reset(&mut self.env_rng)?;
            stack(&reset)?
        } else {
            next.clone()
        };
        let tr = VecTransition {
            obs: o.view(),
            action: a.view(),
            reward: rewards.view(),
            next_obs: next.view(),
            continue_obs: continue_obs.view(),
            terminated: &terminated,
            truncated: &truncated,
        };
        let learned = ppo.observe(&tr)?;
        self.ep_obs.push(o);
        self.ep_act.push(a);
        self.ep_next.push(next);
        self.ep_dense.push(dense);
        if done {
            let to3 = |v: &[Array2<f32>]| -> Result<ndarray::Array3<f32>> {
                let views: Vec<_> = v.iter().map(|x| x.view()).collect();
                let s = ndarray::stack(Axis(1), &views).map_err(|e| LareError::shape("episode", "equal widths", e))?;
                Ok(s)
            };
            let dv: Vec<_> = self.ep_dense.iter().map(|x| x.view()).collect();
            let dense_rewards =
                ndarray::stack(Axis(1), &dv).map_err(|e| LareError::shape("episode rewards", "equal widths", e))?;
            let episode = MultiEpisode {
                obs: to3(&self.ep_obs)?,
                actions: to3(&self.ep_act)?,
                next_obs: to3(&self.ep_next)?,
                dense_rewards,
                team_return: self.team_return as f32,
            };
            if let MultiAgentMethod::Credit { encoder, .. } = method {
                let f = episode.featurize(encoder.as_ref())?;
                self.buffer.push(episode, f)?;
            }
            self.summary.train_returns.push((t + 1, self.team_return));
            sink.log(t + 1, &Metrics::new().with("train/episode_return", self.team_return))?;
            self.ep_obs.clear();
            self.ep_act.clear();
            self.ep_next.clear();
            self.ep_dense.clear();
            self.team_return = 0.0;
            self.obs = continue_obs.rows().into_iter().map(|r| r.to_owned()).collect();
        } else {
            self.obs = step.obs;
        }
        if let Some(m) = learned {
            self.iterations += 1;
            let mut metrics = m.to_metrics()?;
            if let MultiAgentMethod::Credit { decoder, .. } = method {
                if self.iterations % p.decoder_every == 0 && !self.buffer.is_empty() {
                    for _ in 0..p.decoder_updates {
                        let dm = decoder.update(&self.buffer)?;
                        metrics.extend_prefixed("", &dm);
                    }
                }
            }
            sink.log(t + 1, &metrics)?;
        }
        if (t + 1) % p.eval_every == 0 || t + 1 == p.total_steps {
            let r = evaluate_multi_agent(eval_env, ppo.policy(), p.eval_episodes, &mut self.eval_rng)?;
            self.summary.evals.push((t + 1, r));
            self.summary.final_return = r;
            sink.log(t + 1, &Metrics::new().with("eval/return_mean", r))?;
        }
        self.steps = t + 1;
        Ok(())
    }

    /// Writes the checkpoint unit `dir` (kind [`MULTI_AGENT_RUN_KIND`]): part `loop` (this
    /// run's state, the decoder's episode buffer and the exact states of `env` and
    /// `eval_env`), `agent` ([`Agent::save`](rl_agents::Agent::save), at its environment step count) and
    /// `method` (the credit decoder's checkpoint under `method/state`; only the name for the
    /// episodic and dense methods), committed together.
    ///
    /// # Errors
    /// I/O, JSON and libtorch failures; [`rl_nn::RlNnError::InvalidName`] when `dir` holds
    /// something else than a checkpoint unit.
    pub fn save<M: MultiAgentEnv + Snapshot, V: MultiAgentEnv + Snapshot>(
        &self,
        dir: &Path,
        env: &M,
        eval_env: &V,
        ppo: &dyn OnlineAgent,
        method: &MultiAgentMethod,
    ) -> Result<()> {
        let mut tensors: Vec<(String, tch::Tensor)> = Vec::new();
        let mut buffer_team_returns = Vec::with_capacity(self.buffer.len());
        for i in 0..self.buffer.len() {
            let Some((ep, features)) = self.buffer.get(i) else { break };
            buffer_team_returns.push(ep.team_return);
            for (name, a) in [
                ("obs", ep.obs.view().into_dyn()),
                ("actions", ep.actions.view().into_dyn()),
                ("next_obs", ep.next_obs.view().into_dyn()),
                ("dense_rewards", ep.dense_rewards.view().into_dyn()),
                ("features", features.view().into_dyn()),
            ] {
                tensors.push((format!("buffer.{i}.{name}"), to_tensor(a)?));
            }
        }
        let state = MultiAgentState {
            params: self.params.clone(),
            method: method.name(),
            steps: self.steps,
            env_rng: self.env_rng.clone(),
            eval_rng: self.eval_rng.clone(),
            obs: self.obs.iter().map(|o| o.to_vec()).collect(),
            ep_obs: self.ep_obs.clone(),
            ep_act: self.ep_act.clone(),
            ep_next: self.ep_next.clone(),
            ep_dense: self.ep_dense.clone(),
            iterations: self.iterations,
            team_return: self.team_return,
            summary: self.summary.clone(),
            buffer_team_returns,
            env: env.snapshot(),
            eval_env: eval_env.snapshot(),
        };
        let mut unit = rl_nn::checkpoint::UnitWriter::new(dir, MULTI_AGENT_RUN_KIND, MULTI_AGENT_RUN_FORMAT)?;
        rl_nn::checkpoint::save_dir(
            unit.part("loop", self.steps)?,
            MULTI_AGENT_LOOP_KIND,
            LOOP_FORMAT,
            &state,
            &tensors,
        )?;
        ppo.save(&unit.part("agent", ppo.env_steps())?)?;
        save_method_part(&unit.part("method", self.steps)?, &method.name(), |d| match method {
            MultiAgentMethod::Credit { decoder, .. } => decoder.save(d),
            _ => Ok(()),
        })?;
        unit.commit()?;
        Ok(())
    }

    /// Restores a run written by [`MultiAgentRun::save`] into freshly built objects (built as
    /// the saved ones were; `params` may differ only in `total_steps`). As
    /// [`OffPolicyRun::load`]: the unit and the loop state are checked before any object is
    /// touched; a failure while loading the agent, the decoder or the environments can leave
    /// them partly restored.
    ///
    /// # Errors
    /// [`LareError::Nn`] for a missing, corrupt or foreign checkpoint, [`LareError::Corrupt`]
    /// for other loop parameters, another method or other widths; the agent's, decoder's and
    /// environments' load errors.
    pub fn load<M: MultiAgentEnv + Snapshot, V: MultiAgentEnv + Snapshot>(
        dir: &Path,
        env: &mut M,
        eval_env: &mut V,
        ppo: &mut dyn OnlineAgent,
        method: &mut MultiAgentMethod,
        params: &Valid<MultiAgentLoopParams>,
    ) -> Result<Self> {
        let unit = rl_nn::checkpoint::open_unit(dir, MULTI_AGENT_RUN_KIND, MULTI_AGENT_RUN_FORMAT)?;
        let ck = rl_nn::checkpoint::load_dir::<MultiAgentState<M::State, V::State>>(
            unit.part("loop")?,
            MULTI_AGENT_LOOP_KIND,
            LOOP_FORMAT,
        )?;
        let s = ck.state;
        let corrupt = |reason: String| LareError::Corrupt { path: ck.path.clone(), reason };
        unit.check_step("loop", s.steps)?;
        let p = params.get();
        let saved = MultiAgentLoopParams { total_steps: p.total_steps, ..s.params.clone() };
        if &saved != p {
            return Err(corrupt(format!("saved with other loop parameters ({:?}, resuming with {p:?})", s.params)));
        }
        if s.method != method.name() {
            return Err(corrupt(format!("saved by method `{}`, resuming with `{}`", s.method, method.name())));
        }
        let widths: Vec<usize> = env.observation_spaces().iter().map(|sp| sp.dim()).collect();
        if s.obs.len() != widths.len() || s.obs.iter().zip(&widths).any(|(o, &w)| o.len() != w) {
            return Err(corrupt(format!("observations do not fit {} agents of widths {widths:?}", widths.len())));
        }
        let mut buffer = MultiEpisodeBuffer::new(p.buffer_episodes, feature_dim(method))?;
        for (i, &team_return) in s.buffer_team_returns.iter().enumerate() {
            let get = |name: &str| -> Result<ndarray::ArrayD<f32>> {
                let key = format!("buffer.{i}.{name}");
                let t = ck.tensors.get(&key).ok_or_else(|| corrupt(format!("no tensor `{key}`")))?;
                from_tensor(t).map_err(|e| corrupt(format!("tensor `{key}`: {e}")))
            };
            let dim3 = |a: ndarray::ArrayD<f32>, name: &str| {
                a.into_dimensionality::<ndarray::Ix3>().map_err(|e| corrupt(format!("tensor `buffer.{i}.{name}`: {e}")))
            };
            let episode = MultiEpisode {
                obs: dim3(get("obs")?, "obs")?,
                actions: dim3(get("actions")?, "actions")?,
                next_obs: dim3(get("next_obs")?, "next_obs")?,
                dense_rewards: get("dense_rewards")?
                    .into_dimensionality::<ndarray::Ix2>()
                    .map_err(|e| corrupt(format!("tensor `buffer.{i}.dense_rewards`: {e}")))?,
                team_return,
            };
            let features = dim3(get("features")?, "features")?;
            buffer.push(episode, features)?;
        }
        ppo.load(&unit.part("agent")?)?;
        unit.check_step("agent", ppo.env_steps())?;
        load_method_part(&unit.part("method")?, &s.method, |d| match method {
            MultiAgentMethod::Credit { decoder, .. } => decoder.load(d),
            _ => Ok(()),
        })?;
        env.restore(&s.env)?;
        eval_env.restore(&s.eval_env)?;
        Ok(Self {
            params: p.clone(),
            steps: s.steps,
            env_rng: s.env_rng,
            eval_rng: s.eval_rng,
            buffer,
            obs: s.obs.into_iter().map(Array1::from).collect(),
            ep_obs: s.ep_obs,
            ep_act: s.ep_act,
            ep_next: s.ep_next,
            ep_dense: s.ep_dense,
            iterations: s.iterations,
            team_return: s.team_return,
            summary: s.summary,
        })
    }
}

/// Trains a PPO policy shared by the agents of `env` (its hidden rewards are the dense ones; the
/// learner sees only what `method` hands out), evaluating the dense team return on `eval_env`.
/// A run that can resume: [`MultiAgentRun`] and [`run_multi_agent_ppo`].
///
/// # Errors
/// Environment, agent and decoder failures; agents of different widths.
pub fn train_multi_agent_ppo(
    env: &mut dyn MultiAgentEnv,
    eval_env: &mut dyn MultiAgentEnv,
    ppo: &mut dyn OnlineAgent,
    method: &mut MultiAgentMethod,
    params: &Valid<MultiAgentLoopParams>,
    sink: &mut dyn MetricsSink,
    progress: &mut dyn FnMut(u64),
) -> Result<RunSummary> {
    let mut run = MultiAgentRun::new(env, method, params)?;
    while !run.is_finished() {
        run.step(env, eval_env, ppo, method, sink)?;
        progress(run.steps());
    }
    sink.flush()?;
    Ok(run.summary)
}

/// Continues `run` (new, or restored by [`MultiAgentRun::load`]) to its `total_steps`, as
/// [`train_multi_agent_ppo`] does, writing a checkpoint ([`MultiAgentRun::save`]) every
/// `checkpoint.every` steps and after the last one.
///
/// # Errors
/// As [`MultiAgentRun::step`] and [`MultiAgentRun::save`].
#[allow(clippy::too_many_arguments)]
pub fn run_multi_agent_ppo<M: MultiAgentEnv + Snapshot, V: MultiAgentEnv + Snapshot>(
    run: &mut MultiAgentRun,
    env: &mut M,
    eval_env: &mut V,
    ppo: &mut dyn OnlineAgent,
    method: &mut MultiAgentMethod,
    sink: &mut dyn MetricsSink,
    progress: &mut dyn FnMut(u64),
    checkpoint: Option<&Checkpointing>,
) -> Result<RunSummary> {
    while !run.is_finished() {
        run.step(env, eval_env, ppo, method, sink)?;
        progress(run.steps());
        if let Some(c) = checkpoint {
            if c.due(run.steps(), run.is_finished()) {
                sink.flush()?;
                run.save(&c.dir, env, eval_env, ppo, method)?;
            }
        }
    }
    sink.flush()?;
    Ok(run.summary.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credit::CreditParams;
    use crate::encoder::{RawEncoder, RawFeatures};
    use rl_agents::{Ppo, PpoParams};
    use rl_core::MemorySink;
    use rl_envs::mpe::{SimpleSpread, SimpleSpreadParams};

    #[test]
    fn checkpointing_rejects_a_zero_period() {
        assert!(Checkpointing::new("x", 0).is_err());
        let c = Checkpointing::new("x", 10).unwrap();
        assert!(c.due(20, false) && !c.due(21, false) && c.due(21, true));
    }

    #[test]
    fn loop_params_reject_zero_and_bad_scale() {
        assert!(OffPolicyLoopParams::default().check().is_ok());
        assert!(OffPolicyLoopParams { batch_size: 0, ..Default::default() }.check().is_err());
        assert!(OffPolicyLoopParams { eval_episodes: 0, ..Default::default() }.check().is_err());
        assert!(MultiAgentLoopParams::default().check().is_ok());
        assert!(MultiAgentLoopParams { decoder_every: 0, ..Default::default() }.check().is_err());
        assert!(MultiAgentLoopParams { reward_scale: f64::NAN, ..Default::default() }.check().is_err());
        assert!(MultiAgentLoopParams { reward_scale: 0.0, ..Default::default() }.check().is_err());
    }

    fn spread() -> SimpleSpread {
        SimpleSpread::new(SimpleSpreadParams::default().n_agents(2).check().unwrap()).unwrap()
    }

    fn tiny_run(method: &mut MultiAgentMethod) -> (RunSummary, MemorySink) {
        tch::set_num_threads(1);
        let (mut env, mut eval) = (spread(), spread());
        let (os, acts) = (env.observation_spaces()[0].clone(), env.action_spaces()[0].clone());
        let pp = PpoParams::default().num_steps(25).num_minibatches(2).update_epochs(1).check().unwrap();
        let mut ppo = Ppo::new(pp, &os, &acts, tch::Device::Cpu, 0).unwrap();
        let params = MultiAgentLoopParams {
            total_steps: 100,
            decoder_every: 1,
            decoder_updates: 2,
            reward_scale: 50.0,
            eval_every: 50,
            eval_episodes: 1,
            ..Default::default()
        }
        .check()
        .unwrap();
        let mut sink = MemorySink::default();
        let s = train_multi_agent_ppo(&mut env, &mut eval, &mut ppo, method, &params, &mut sink, &mut |_| {}).unwrap();
        (s, sink)
    }

    #[test]
    fn multi_agent_loop_trains_the_credit_decoder_and_evaluates() {
        let od = spread().observation_spaces()[0].dim();
        let cp = CreditParams::default().batch_episodes(2).check().unwrap();
        let mut m = MultiAgentMethod::Credit {
            name: "rd".into(),
            encoder: Box::new(RawEncoder::new(od, 1, RawFeatures::NextState)),
            decoder: Box::new(AgentCreditDecoder::new(cp, od, tch::Device::Cpu).unwrap()),
        };
        let (s, sink) = tiny_run(&mut m);
        // 100 steps of 25-step episodes: 4 training episodes, evaluations at 50 and 100
        assert_eq!(s.train_returns.len(), 4);
        assert_eq!(s.evals.iter().map(|e| e.0).collect::<Vec<_>>(), vec![50, 100]);
        assert!(s.evals.iter().all(|e| e.1.is_finite() && e.1 < 0.0), "{:?}", s.evals);
        // four PPO iterations, each followed by a decoder round (the buffer is never empty then)
        // logged with the iteration's record (the last of its two decoder steps)
        assert_eq!(sink.series("reward_model/loss").len(), 4);
        assert!(sink.series("reward_model/loss").iter().all(|(_, l)| l.is_finite()));
    }

    #[test]
    fn multi_agent_episodic_and_dense_methods_run() {
        for mut m in [MultiAgentMethod::Episodic, MultiAgentMethod::Dense] {
            let (s, sink) = tiny_run(&mut m);
            assert_eq!(s.evals.len(), 2, "{}", m.name());
            assert!(sink.series("reward_model/loss").is_empty());
        }
    }
}
