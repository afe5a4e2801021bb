//! Episodic (delayed) rewards.

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Space, Step};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::traits::{MultiAgentEnv, MultiStep, Snapshot, TaskParam, TaskParams};

/// Episodic reward: every step's reward is 0 except the last step of the episode (terminated
/// or truncated), which carries the sum of the episode's rewards.
///
/// This is the episodic setting of return-decomposition methods (RUDDER, IRCR, RRD, LaRe:
/// "reward only at episode end, `R_ep = Σ_t r_t`"). The hidden per-step reward stays available
/// through [`EpisodicReward::last_dense_reward`] for diagnostics (e.g. the reward-prediction
/// error LaRe logs). Put this wrapper outside any [`TimeLimit`](super::TimeLimit) so it sees
/// truncations.
#[derive(Debug, Clone)]
pub struct EpisodicReward<E> {
    inner: E,
    state: EpisodicState,
}

/// The wrapper state of [`EpisodicReward`] and [`EpisodicRewardMulti`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EpisodicState {
    /// Per-agent sums of this episode's rewards so far (one entry for a single-agent env).
    pub sums: Vec<f64>,
    /// The hidden rewards of the last step.
    pub last_dense: Vec<f32>,
}

/// A snapshot of a wrapper around an inner environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wrapped<S, W> {
    /// The inner environment's state.
    pub inner: S,
    /// The wrapper's own state.
    pub wrapper: W,
}

impl<E: Env> EpisodicReward<E> {
    /// Wraps `inner`.
    pub fn new(inner: E) -> Self {
        Self { inner, state: EpisodicState { sums: vec![0.0], last_dense: vec![0.0] } }
    }

    /// The dense reward of the last step (what the inner environment returned).
    pub fn last_dense_reward(&self) -> f32 {
        self.state.last_dense.first().copied().unwrap_or(0.0)
    }

    /// The sum of this episode's dense rewards so far.
    pub fn return_so_far(&self) -> f64 {
        self.state.sums.first().copied().unwrap_or(0.0)
    }

    /// The wrapped environment.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The wrapped environment, mutably.
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }
}

impl<E: Env> Env for EpisodicReward<E> {
    fn observation_space(&self) -> &Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let obs = self.inner.reset(rng)?;
        self.state = EpisodicState { sums: vec![0.0], last_dense: vec![0.0] };
        Ok(obs)
    }
    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        let mut step = self.inner.step(action)?;
        self.state.last_dense = vec![step.reward];
        self.state.sums[0] += f64::from(step.reward);
        step.reward = if step.done() { self.state.sums[0] as f32 } else { 0.0 };
        Ok(step)
    }
}

fn check_state(state: &EpisodicState, n: usize) -> Result<()> {
    if state.sums.len() != n || state.last_dense.len() != n {
        return Err(crate::EnvError::snapshot(format!(
            "episodic reward state has {} sums / {} rewards, this environment has {n} agents",
            state.sums.len(),
            state.last_dense.len()
        )));
    }
    crate::common::snapshot_finite("episodic reward sums", &state.sums)
}

impl<E: Env + Snapshot> Snapshot for EpisodicReward<E> {
    type State = Wrapped<E::State, EpisodicState>;
    fn snapshot(&self) -> Self::State {
        Wrapped { inner: self.inner.snapshot(), wrapper: self.state.clone() }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        check_state(&state.wrapper, 1)?;
        self.inner.restore(&state.inner)?;
        self.state = state.wrapper.clone();
        Ok(())
    }
}

impl<E: TaskParams> TaskParams for EpisodicReward<E> {
    fn task_spec(&self) -> Vec<TaskParam> {
        self.inner.task_spec()
    }
    fn task(&self) -> Vec<f64> {
        self.inner.task()
    }
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        self.inner.set_task(task)
    }
}

/// How [`EpisodicRewardMulti`] hands out the episode's return at its last step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MultiRewardSplit {
    /// Every agent gets the team return divided by the number of agents (LaRe's MPE setting:
    /// `episode_reward / n_agents` at the last step of every agent).
    #[default]
    TeamMean,
    /// Every agent gets the whole team return `Σ_i Σ_t r_{i,t}`.
    TeamSum,
    /// Each agent gets its own return `Σ_t r_{i,t}`.
    PerAgent,
}

/// Episodic reward for a [`MultiAgentEnv`]: all rewards are 0 except at the step that ends the
/// episode (every agent done), which carries the return split by [`MultiRewardSplit`].
#[derive(Debug, Clone)]
pub struct EpisodicRewardMulti<E> {
    inner: E,
    split: MultiRewardSplit,
    state: EpisodicState,
}

impl<E: MultiAgentEnv> EpisodicRewardMulti<E> {
    /// Wraps `inner`.
    pub fn new(inner: E, split: MultiRewardSplit) -> Self {
        let n = inner.n_agents();
        Self { inner, split, state: EpisodicState { sums: vec![0.0; n], last_dense: vec![0.0; n] } }
    }

    /// The dense per-agent rewards of the last step.
    pub fn last_dense_rewards(&self) -> &[f32] {
        &self.state.last_dense
    }

    /// Per-agent sums of this episode's dense rewards so far.
    pub fn returns_so_far(&self) -> &[f64] {
        &self.state.sums
    }

    /// The wrapped environment.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: MultiAgentEnv> MultiAgentEnv for EpisodicRewardMulti<E> {
    fn n_agents(&self) -> usize {
        self.inner.n_agents()
    }
    fn agent_names(&self) -> &[String] {
        self.inner.agent_names()
    }
    fn observation_spaces(&self) -> &[Space] {
        self.inner.observation_spaces()
    }
    fn action_spaces(&self) -> &[Space] {
        self.inner.action_spaces()
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> Result<Vec<Array1<f32>>> {
        let obs = self.inner.reset(rng)?;
        let n = self.inner.n_agents();
        self.state = EpisodicState { sums: vec![0.0; n], last_dense: vec![0.0; n] };
        Ok(obs)
    }
    fn step(&mut self, actions: &[Array1<f32>]) -> Result<MultiStep> {
        let mut step = self.inner.step(actions)?;
        for (s, r) in self.state.sums.iter_mut().zip(&step.rewards) {
            *s += f64::from(*r);
        }
        self.state.last_dense.clone_from(&step.rewards);
        if step.done() {
            let team: f64 = self.state.sums.iter().sum();
            let n = self.state.sums.len().max(1) as f64;
            for (i, r) in step.rewards.iter_mut().enumerate() {
                *r = match self.split {
                    MultiRewardSplit::TeamMean => (team / n) as f32,
                    MultiRewardSplit::TeamSum => team as f32,
                    MultiRewardSplit::PerAgent => self.state.sums[i] as f32,
                };
            }
        } else {
            step.rewards.iter_mut().for_each(|r| *r = 0.0);
        }
        Ok(step)
    }
}

impl<E: MultiAgentEnv + Snapshot> Snapshot for EpisodicRewardMulti<E> {
    type State = Wrapped<E::State, EpisodicState>;
    fn snapshot(&self) -> Self::State {
        Wrapped { inner: self.inner.snapshot(), wrapper: self.state.clone() }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        check_state(&state.wrapper, self.inner.n_agents())?;
        self.inner.restore(&state.inner)?;
        self.state = state.wrapper.clone();
        Ok(())
    }
}
