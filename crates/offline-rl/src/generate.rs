//! D4RL-style dataset generation from our own agents (Fu et al. 2020, arXiv 2004.07219, §5):
//! an online SAC run (rl-agents) with policy snapshots; `expert` = rollouts of its best
//! snapshot, `medium` = rollouts of the snapshot whose return is closest to a third of the way
//! from random to expert, `medium-replay` = every transition the run stored up to the medium
//! snapshot, `medium-expert` = `medium` then `expert`, `random` = uniformly random actions.
//! Maze2d-style data comes from D4RL's waypoint controller ([`generate_maze2d`]).

use std::path::{Path, PathBuf};

use ndarray::{Array2, ArrayView2};
use rand::{Rng, RngCore};
use rl_agents::{
    Agent, BatchPolicy, Evaluator, OffPolicy, OffPolicyParams, OnlineTrainer, ReplayBufferParams, Sac, SacParams,
    TrainParams,
};
use rl_core::{ActMode, Env, EpisodeSummary, MemorySink, Params, Space, Transitions};
use rl_envs::maze::{WaypointController, WaypointParams};
use rl_envs::wrappers::VecEnv;
use serde::{Deserialize, Serialize};

use crate::algo::DatasetKind;
use crate::data::{Dataset, DatasetInfo};
use crate::error::{check, OfflineError, Result};
use crate::tasks::{Task, TaskEnv};

/// Uniformly random actions in a box (D4RL's `random` datasets).
#[derive(Debug, Clone)]
pub struct UniformPolicy {
    obs_dim: usize,
    space: Space,
}

impl UniformPolicy {
    /// Uniform actions of `space` for observations of width `obs_dim`.
    pub fn new(obs_dim: usize, space: Space) -> Self {
        Self { obs_dim, space }
    }
}

impl BatchPolicy for UniformPolicy {
    fn obs_dim(&self) -> usize {
        self.obs_dim
    }

    fn act_dim(&self) -> usize {
        self.space.dim()
    }

    fn act_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        _mode: ActMode,
        rng: &mut dyn RngCore,
    ) -> rl_agents::Result<Array2<f32>> {
        let mut a = Array2::zeros((obs.nrows(), self.space.dim()));
        for mut row in a.rows_mut() {
            row.assign(&self.space.sample(rng));
        }
        Ok(a)
    }
}

/// Rolls out `policy` in `env` until exactly `n` transitions are recorded (D4RL flags:
/// `terminal` where the environment terminated, `timeout` where its time limit cut the
/// episode; the last transition gets a timeout flag when the budget cuts an episode). Resets
/// draw from `seed`; stochastic actions from a stream derived from it. Returns the dataset
/// and the returns of the episodes that ended.
///
/// # Errors
/// [`OfflineError::InvalidParameter`] for `n = 0`; environment and policy failures.
pub fn collect(
    env: &mut TaskEnv,
    policy: &dyn BatchPolicy,
    mode: ActMode,
    n: usize,
    seed: u64,
    info: DatasetInfo,
) -> Result<(Dataset, Vec<f64>)> {
    check::at_least("transitions", n, 1)?;
    let mut reset_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "collect-resets"));
    let mut act_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "collect-actions"));
    let obs_dim = env.observation_space().dim();
    let mut t = Transitions::empty(obs_dim, env.action_space().dim());
    let mut obs = env.reset(&mut reset_rng)?;
    let mut ret = 0.0;
    let mut returns = Vec::new();
    while t.len() < n {
        let row = obs.view().insert_axis(ndarray::Axis(0));
        let a = policy.act_batch(row, mode, &mut act_rng)?;
        let step = env.step(a.row(0))?;
        ret += f64::from(step.reward);
        let last = t.len() + 1 == n;
        let cut = step.truncated && !step.terminated;
        t.push(obs.view(), a.row(0), step.reward, step.obs.view(), step.terminated, cut || (last && !step.terminated))?;
        if step.done() {
            returns.push(ret);
            ret = 0.0;
            obs = env.reset(&mut reset_rng)?;
        } else {
            obs = step.obs;
        }
    }
    Ok((Dataset::new(t, info)?, returns))
}

/// Parameters of [`generate_suite`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `online_steps` | 1,000,000 | environment steps of the online SAC run (D4RL: 10^6) | `>= 1` |
/// | `snapshot_every` | 10,000 | steps between policy snapshots (each evaluated) | `>= 1` |
/// | `random_steps` | 5,000 | uniform warm-up steps of SAC | `>= 1` |
/// | `hidden` | `[256, 256]` | SAC's hidden widths | each `>= 1` |
/// | `transitions` | 1,000,000 | transitions of `random`, `medium` and `expert` (D4RL: 10^6; `medium-expert` has twice as many, `medium-replay` what the run stored) | `>= 1` |
/// | `eval_episodes` | 10 | deterministic episodes per snapshot evaluation | `>= 1` |
/// | `medium_fraction` | 1/3 | the medium snapshot's return target: `random + fraction · (expert − random)` | `(0, 1)` |
/// | `stochastic` | true | collect with the SAC policy's sampled actions (false: its mean) | |
/// | `progress` | true | progress bars | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SuiteParams {
    /// Online environment steps.
    pub online_steps: u64,
    /// Snapshot interval.
    pub snapshot_every: u64,
    /// SAC warm-up.
    pub random_steps: u64,
    /// Hidden widths.
    pub hidden: Vec<i64>,
    /// Transitions per dataset.
    pub transitions: usize,
    /// Episodes per evaluation.
    pub eval_episodes: usize,
    /// Medium target.
    pub medium_fraction: f64,
    /// Sampled actions.
    pub stochastic: bool,
    /// Progress bars.
    pub progress: bool,
}

impl Default for SuiteParams {
    fn default() -> Self {
        Self {
            online_steps: 1_000_000,
            snapshot_every: 10_000,
            random_steps: 5_000,
            hidden: vec![256, 256],
            transitions: 1_000_000,
            eval_episodes: 10,
            medium_fraction: 1.0 / 3.0,
            stochastic: true,
            progress: true,
        }
    }
}

crate::algo::common::setters!(SuiteParams {
    online_steps: u64,
    snapshot_every: u64,
    random_steps: u64,
    hidden: Vec<i64>,
    transitions: usize,
    eval_episodes: usize,
    medium_fraction: f64,
    stochastic: bool,
    progress: bool,
});

impl Params for SuiteParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        check::at_least("online_steps", self.online_steps as usize, 1)?;
        check::at_least("snapshot_every", self.snapshot_every as usize, 1)?;
        check::at_least("random_steps", self.random_steps as usize, 1)?;
        if self.hidden.is_empty() || self.hidden.iter().any(|h| *h < 1) {
            return Err(OfflineError::invalid("hidden", format!("{:?}", self.hidden), "needs widths >= 1"));
        }
        check::at_least("transitions", self.transitions, 1)?;
        check::at_least("eval_episodes", self.eval_episodes, 1)?;
        check::unit_open("medium_fraction", self.medium_fraction)?;
        Ok(())
    }
}

/// One evaluated snapshot of the online run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Environment steps when it was taken.
    pub step: u64,
    /// Its deterministic evaluation.
    pub eval: EpisodeSummary,
}

/// What [`generate_suite`] did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteReport {
    /// The task.
    pub task: Task,
    /// The parameters.
    pub params: SuiteParams,
    /// The seed.
    pub seed: u64,
    /// Every snapshot.
    pub snapshots: Vec<Snapshot>,
    /// Mean return of the random policy (the `random` dataset's finished episodes).
    pub random_return: f64,
    /// Index of the expert snapshot (best evaluation).
    pub expert: usize,
    /// Index of the medium snapshot.
    pub medium: usize,
    /// The files written, by kind.
    pub files: Vec<(DatasetKind, PathBuf)>,
    /// Transitions per file.
    pub sizes: Vec<(DatasetKind, usize)>,
    /// Mean episode return per file.
    pub returns: Vec<(DatasetKind, f64)>,
}

fn sac_params(hidden: &[i64]) -> SacParams {
    let mut p = SacParams::default();
    p.actor.hidden = hidden.to_vec();
    p.critic.hidden = hidden.to_vec();
    p
}

fn info(task: Task, kind: DatasetKind, source: String) -> DatasetInfo {
    DatasetInfo {
        name: format!("{}-{}", task.name(), kind.as_str()),
        env: task.env_id().into(),
        score_env: task.d4rl_family().unwrap_or_default().into(),
        source,
        ..Default::default()
    }
}

/// Generates the five D4RL datasets of `task` into `out_dir` (`{task}-{kind}.safetensors`,
/// plus `{task}-suite.json` with the [`SuiteReport`]); snapshots of the online run go to
/// `out_dir/{task}-online/`. Tasks without published references get `ref_min` = the random
/// return and `ref_max` = the expert snapshot's evaluation in every dataset's info.
///
/// # Errors
/// Parameter, environment, agent and I/O failures.
pub fn generate_suite(
    task: Task,
    params: &rl_core::Valid<SuiteParams>,
    seed: u64,
    out_dir: &Path,
) -> Result<SuiteReport> {
    let p = params.get().clone();
    std::fs::create_dir_all(out_dir)?;
    let snap_dir = out_dir.join(format!("{}-online", task.name()));
    let device = tch::Device::Cpu;
    let envs = VecEnv::from_fn(1, seed, |_| {
        task.make().map_err(|e| rl_envs::EnvError::invalid("task", task.name(), e.to_string()))
    })?;
    let (obs_space, act_space) = (envs.observation_space().clone(), envs.action_space().clone());
    let sac = Sac::new(sac_params(&p.hidden).check()?, &obs_space, &act_space, device, seed)?;
    let sched = OffPolicyParams::default()
        .buffer(ReplayBufferParams::default().capacity(p.online_steps as usize))
        .random_steps(p.random_steps)
        .learning_starts(p.random_steps);
    let mut agent = OffPolicy::new(sched.check()?, sac, &obs_space, &act_space, seed)?;
    let mut trainer = OnlineTrainer::new(envs)?;
    let mut evaluator = Evaluator::new(p.eval_episodes, seed.wrapping_add(10_000), |_| {
        task.make().map_err(|e| rl_agents::AgentError::Protocol(e.to_string()))
    })?;
    let mut sink = MemorySink::default();
    let mut snapshots = Vec::new();
    let mut k = 0u64;
    let bar = crate::progress::progress_bar(p.online_steps, 0, p.progress, &format!("{} SAC", task.name()));
    while trainer.steps() < p.online_steps {
        k += 1;
        let until = (k * p.snapshot_every).min(p.online_steps);
        let tp = TrainParams::default().total_steps(until).eval_every(0).log_every(p.snapshot_every).progress(false);
        rl_agents::train::<TaskEnv, TaskEnv>(&mut agent, &mut trainer, &tp.check()?, None, &mut sink, None)?;
        let eval = EpisodeSummary::from_episodes(&evaluator.run(agent.policy())?);
        agent.agent().save(&snap_dir.join(format!("step-{}", trainer.steps())))?;
        snapshots.push(Snapshot { step: trainer.steps(), eval });
        bar.set_position(trainer.steps());
        bar.set_message(format!("eval {:.1}", eval.mean_return));
    }
    bar.finish_and_clear();
    // random
    let mut env = task.make()?;
    let uniform = UniformPolicy::new(obs_space.dim(), act_space.clone());
    let src = |what: &str| {
        format!("{what}; online SAC {} steps, seed {seed} (frugal-rl offline-rl generate_suite)", p.online_steps)
    };
    let (random, random_returns) = collect(
        &mut env,
        &uniform,
        ActMode::Stochastic,
        p.transitions,
        seed ^ 0x5eed_0001,
        info(task, DatasetKind::Random, src("uniform random actions")),
    )?;
    let random_return = if random_returns.is_empty() {
        random.episode_returns().iter().sum::<f64>() / random.episodes().len().max(1) as f64
    } else {
        random_returns.iter().sum::<f64>() / random_returns.len() as f64
    };
    let expert = (0..snapshots.len())
        .max_by(|&a, &b| snapshots[a].eval.mean_return.total_cmp(&snapshots[b].eval.mean_return))
        .ok_or_else(|| OfflineError::Empty { what: "snapshots".into() })?;
    let expert_return = snapshots[expert].eval.mean_return;
    let target = random_return + p.medium_fraction * (expert_return - random_return);
    let medium = (0..=expert)
        .min_by(|&a, &b| {
            (snapshots[a].eval.mean_return - target).abs().total_cmp(&(snapshots[b].eval.mean_return - target).abs())
        })
        .unwrap_or(0);
    let load = |i: usize| -> Result<Sac> {
        let mut s = Sac::new(sac_params(&p.hidden).check()?, &obs_space, &act_space, device, seed)?;
        s.load(&snap_dir.join(format!("step-{}", snapshots[i].step)))?;
        Ok(s)
    };
    let mode = if p.stochastic { ActMode::Stochastic } else { ActMode::Deterministic };
    let medium_sac = load(medium)?;
    let (medium_ds, _) = collect(
        &mut env,
        medium_sac.policy(),
        mode,
        p.transitions,
        seed ^ 0x5eed_0002,
        info(
            task,
            DatasetKind::Medium,
            src(&format!(
                "SAC snapshot at {} steps (eval return {:.1})",
                snapshots[medium].step, snapshots[medium].eval.mean_return
            )),
        ),
    )?;
    let expert_sac = load(expert)?;
    let (expert_ds, _) = collect(
        &mut env,
        expert_sac.policy(),
        mode,
        p.transitions,
        seed ^ 0x5eed_0003,
        info(
            task,
            DatasetKind::Expert,
            src(&format!(
                "SAC snapshot at {} steps (eval return {:.1})",
                snapshots[expert].step, snapshots[expert].eval.mean_return
            )),
        ),
    )?;
    let stored = agent.buffer().transitions()?;
    let upto = (snapshots[medium].step as usize).min(stored.len());
    let rows: Vec<usize> = (0..upto).collect();
    let mut replay_t = stored.gather(&rows)?.into_columns();
    if let Some(last) = replay_t.timeout.len().checked_sub(1) {
        if replay_t.terminal[last] == 0.0 {
            replay_t.timeout[last] = 1.0;
        }
    }
    let replay = Dataset::new(
        Transitions::try_from(replay_t)?,
        info(
            task,
            DatasetKind::MediumReplay,
            src(&format!(
                "the online run's replay buffer up to {} steps (the medium snapshot)",
                snapshots[medium].step
            )),
        ),
    )?;
    let medium_expert =
        Dataset::concat(&[&medium_ds, &expert_ds], info(task, DatasetKind::MediumExpert, src("medium then expert")))?;
    let mut out = vec![
        (DatasetKind::Random, random),
        (DatasetKind::Medium, medium_ds),
        (DatasetKind::MediumReplay, replay),
        (DatasetKind::MediumExpert, medium_expert),
        (DatasetKind::Expert, expert_ds),
    ];
    let lo = act_space_bounds(&act_space);
    let mut report = SuiteReport {
        task,
        params: p.clone(),
        seed,
        snapshots: snapshots.clone(),
        random_return,
        expert,
        medium,
        files: vec![],
        sizes: vec![],
        returns: vec![],
    };
    for (kind, ds) in &mut out {
        let i = ds.info_mut();
        if task.d4rl_family().is_none() {
            i.ref_min = Some(random_return);
            i.ref_max = Some(expert_return);
        }
        i.extra.insert("seed".into(), seed.into());
        i.extra.insert("online_steps".into(), p.online_steps.into());
        i.extra.insert("medium_snapshot_step".into(), snapshots[medium].step.into());
        i.extra.insert("expert_snapshot_step".into(), snapshots[expert].step.into());
        i.extra.insert("expert_eval_return".into(), expert_return.into());
        i.extra.insert("random_return".into(), random_return.into());
        if let Some((l, h)) = &lo {
            i.extra.insert("action_low".into(), serde_json::json!(l));
            i.extra.insert("action_high".into(), serde_json::json!(h));
        }
        let path = out_dir.join(format!("{}-{}.safetensors", task.name(), kind.as_str()));
        crate::data::write_native(ds, &path)?;
        let s = ds.summary();
        report.files.push((*kind, path));
        report.sizes.push((*kind, s.transitions));
        report.returns.push((*kind, s.return_mean));
    }
    std::fs::write(out_dir.join(format!("{}-suite.json", task.name())), serde_json::to_string_pretty(&report)?)?;
    Ok(report)
}

fn act_space_bounds(space: &Space) -> Option<(Vec<f32>, Vec<f32>)> {
    match space.kind() {
        rl_core::SpaceKind::Box { low, high } => Some((low.to_vec(), high.to_vec())),
        _ => None,
    }
}

/// Parameters of [`generate_maze2d`] (D4RL `scripts/generation/generate_maze2d_datasets.py`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `transitions` | 1,000,000 | steps of the single stream | `>= 1` |
/// | `action_noise` | 0.5 | std of the Gaussian noise added to the controller's action before clipping (D4RL's `--noisy`) | `>= 0` |
/// | `controller` | D4RL's | [`WaypointParams`] | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Maze2dParams {
    /// Steps.
    pub transitions: usize,
    /// Action noise.
    pub action_noise: f64,
    /// Controller parameters.
    pub controller: WaypointParams,
}

impl Default for Maze2dParams {
    fn default() -> Self {
        Self { transitions: 1_000_000, action_noise: 0.5, controller: WaypointParams::default() }
    }
}

impl Params for Maze2dParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        check::at_least("transitions", self.transitions, 1)?;
        check::non_negative("action_noise", self.action_noise)?;
        self.controller.validate().map_err(|e| OfflineError::from(e).prefixed("controller"))?;
        Ok(())
    }
}

/// A maze2d-style dataset, as D4RL made them: one stream that follows the waypoint controller
/// (plus `N(0, σ²)` action noise, clipped to [−1, 1]) towards a goal; every `max_episode_steps`
/// steps (300 / 600 / 800) the step gets a timeout flag and a new goal is drawn uniformly from
/// the maze's goal cells (with gymnasium-robotics' ±0.25 cell noise) without resetting the
/// ball; no step is terminal. Rewards are the task's (sparse: 1 within 0.5 of the goal).
///
/// The returned info records the task's references: `ref_min` = mean return of uniformly
/// random actions and `ref_max` = mean return of the noiseless controller, each over
/// `eval_episodes` episodes from the environment's own resets (seeded).
///
/// # Errors
/// [`OfflineError::InvalidParameter`] for a task that is not a maze; environment failures.
pub fn generate_maze2d(
    task: Task,
    params: &rl_core::Valid<Maze2dParams>,
    eval_episodes: usize,
    seed: u64,
) -> Result<Dataset> {
    let mut maze_params =
        task.maze_params().ok_or_else(|| OfflineError::invalid("task", task.name(), "not a maze task"))?;
    let episode = maze_params.layout.registered_max_steps();
    maze_params.max_episode_steps = Some(usize::MAX / 2);
    let mut env = rl_envs::maze::PointMaze::new(maze_params.check()?)?;
    let mut ctrl = WaypointController::new(params.controller.clone().check()?, env.maze().clone());
    let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "maze2d"));
    let goals = env.maze().goal_locations().to_vec();
    let mut obs = env.reset(&mut rng)?;
    let mut t = Transitions::empty(obs.len(), 2);
    let mut ts = 0usize;
    while t.len() < params.transitions {
        let (a, _) = ctrl.act(env.position(), env.velocity(), env.goal(), &mut rng)?;
        let mut act = [f64::from(a[0]), f64::from(a[1])];
        if params.action_noise > 0.0 {
            for x in &mut act {
                let e: f64 = rand_distr::Distribution::sample(&rand_distr::StandardNormal, &mut rng);
                *x = (*x + params.action_noise * e).clamp(-1.0, 1.0);
            }
        }
        let action = ndarray::arr1(&[act[0] as f32, act[1] as f32]);
        let step = env.step(action.view())?;
        ts += 1;
        let timeout = ts >= episode || t.len() + 1 == params.transitions;
        t.push(obs.view(), action.view(), step.reward, step.obs.view(), false, timeout)?;
        obs = step.obs;
        if ts >= episode {
            ts = 0;
            let g = goals[rng.random_range(0..goals.len())];
            let noise = |r: &mut rl_core::SeededRng| (r.random::<f64>() - 0.5) * 0.5 * env.maze().scaling();
            let goal = [g[0] + noise(&mut rng), g[1] + noise(&mut rng)];
            env.set_goal(goal)?;
        }
    }
    let (lo, hi) = maze_references(task, &params.controller, eval_episodes, seed)?;
    let info = DatasetInfo {
        name: task.name().into(),
        env: task.env_id().into(),
        ref_min: Some(lo),
        ref_max: Some(hi),
        source: format!(
            "D4RL maze2d recipe: waypoint controller + N(0, {}²) action noise, new goal every {episode} steps without reset; seed {seed}",
            params.action_noise
        ),
        ..Default::default()
    };
    Dataset::new(t, info)
}

/// Mean returns of uniform random actions and of the noiseless waypoint controller on a maze
/// task's evaluation episodes.
///
/// # Errors
/// Environment failures.
pub fn maze_references(task: Task, controller: &WaypointParams, episodes: usize, seed: u64) -> Result<(f64, f64)> {
    let mut env = task.make()?;
    let space = env.action_space().clone();
    let mut random = 0.0;
    let mut expert = 0.0;
    for e in 0..episodes {
        let mut rng = rl_envs::rng::NumpyRng::new(seed.wrapping_add(e as u64));
        env.reset(&mut rng)?;
        let mut act_rng = rl_core::rng_from_seed(rl_core::derive_seed(seed, e as u64));
        loop {
            let s = env.step(space.sample(&mut act_rng).view())?;
            random += f64::from(s.reward);
            if s.done() {
                break;
            }
        }
        let mut rng = rl_envs::rng::NumpyRng::new(seed.wrapping_add(e as u64));
        env.reset(&mut rng)?;
        let m = env.maze().ok_or_else(|| OfflineError::invalid("task", task.name(), "not a maze task"))?;
        let mut ctrl = WaypointController::new(controller.clone().check()?, m.maze().clone());
        loop {
            let m = env.maze().ok_or_else(|| OfflineError::invalid("task", task.name(), "not a maze task"))?;
            let (a, _) = ctrl.act(m.position(), m.velocity(), m.goal(), &mut act_rng)?;
            let s = env.step(ndarray::arr1(&a).view())?;
            expert += f64::from(s.reward);
            if s.done() {
                break;
            }
        }
    }
    Ok((random / episodes.max(1) as f64, expert / episodes.max(1) as f64))
}
