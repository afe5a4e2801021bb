//! The traits this crate adds to [`rl_core::Env`]: exact snapshots, task parameters,
//! multi-agent environments.

use ndarray::Array1;
use rand::RngCore;
use rl_core::Space;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Exact save and restore of an environment's dynamic state (positions, velocities, step
/// counter, goal, episode flags; wrappers add their own state around their inner one).
///
/// A restored environment continues bit-identically: after `b.restore(&a.snapshot())`, the
/// same actions give the same observations, rewards and flags in `a` and `b`. States are
/// serde values, so they go into a checkpoint's `state.json` (JSON floats read back exactly).
/// Parameters are not part of the state: restore into an environment built with the same
/// parameters (task parameters changed through [`TaskParams`] are part of the state of the
/// [`DomainRandomization`](crate::wrappers::DomainRandomization) wrapper).
pub trait Snapshot {
    /// The state.
    type State: Clone + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned;

    /// The current state.
    fn snapshot(&self) -> Self::State;

    /// Sets the state.
    ///
    /// # Errors
    /// [`EnvError::BadSnapshot`](crate::EnvError::BadSnapshot) when the state does not fit
    /// this environment (another layout, number of agents, a non-finite value); the
    /// environment is then unchanged.
    fn restore(&mut self, state: &Self::State) -> Result<()>;
}

/// One physical parameter of a task (for domain randomisation and task samplers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskParam {
    /// Name, e.g. `"g"` or `"mass_scale"`.
    pub name: String,
    /// The value of the unmodified environment.
    pub default: f64,
    /// Smallest value the environment accepts.
    pub min: f64,
    /// Largest value the environment accepts.
    pub max: f64,
}

impl TaskParam {
    pub(crate) fn new(name: &str, default: f64, min: f64, max: f64) -> Self {
        Self { name: name.to_owned(), default, min, max }
    }
}

/// An environment whose physics is parameterised by a vector of task parameters (gravity,
/// masses, friction), which task samplers and domain randomisation set.
pub trait TaskParams {
    /// Names, defaults and valid ranges, one per entry of the task vector.
    fn task_spec(&self) -> Vec<TaskParam>;

    /// The current task vector.
    fn task(&self) -> Vec<f64>;

    /// Sets the task vector; takes effect from the next step.
    ///
    /// # Errors
    /// [`EnvError::Shape`](crate::EnvError::Shape) for a wrong length,
    /// [`EnvError::NonFinite`](crate::EnvError::NonFinite), or
    /// [`EnvError::InvalidParameter`](crate::EnvError::InvalidParameter) naming the first
    /// value outside its range; the environment is then unchanged.
    fn set_task(&mut self, task: &[f64]) -> Result<()>;
}

/// Checks a task vector against its spec (length, finiteness, ranges).
pub(crate) fn check_task(spec: &[TaskParam], task: &[f64]) -> Result<()> {
    crate::error::check_len("task", spec.len(), task.len())?;
    crate::error::check_finite_f64("task", task)?;
    for (p, &v) in spec.iter().zip(task) {
        if !(p.min..=p.max).contains(&v) {
            return Err(crate::EnvError::invalid(&p.name, v, format!("must be in [{}, {}]", p.min, p.max)));
        }
    }
    Ok(())
}

/// The outcome of one step of a multi-agent environment: one entry per agent, in the order of
/// [`MultiAgentEnv::agent_names`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiStep {
    /// Each agent's observation after the step.
    pub obs: Vec<Array1<f32>>,
    /// Each agent's reward.
    pub rewards: Vec<f32>,
    /// Each agent reached a terminal state.
    pub terminated: Vec<bool>,
    /// Each agent's episode was cut by a time limit.
    pub truncated: Vec<bool>,
}

impl MultiStep {
    /// Whether every agent is done (terminated or truncated): the episode is over.
    pub fn done(&self) -> bool {
        self.terminated.iter().zip(&self.truncated).all(|(a, b)| *a || *b)
    }

    /// Sum of the agents' rewards.
    pub fn team_reward(&self) -> f32 {
        self.rewards.iter().sum()
    }
}

/// A multi-agent environment with simultaneous moves (PettingZoo's parallel API): each agent
/// has its own observation and action space, every step takes one action per agent.
///
/// Object safe, like [`rl_core::Env`].
pub trait MultiAgentEnv {
    /// Number of agents.
    fn n_agents(&self) -> usize;

    /// Agent names (PettingZoo's, e.g. `adversary_0`, `agent_0`).
    fn agent_names(&self) -> &[String];

    /// Each agent's observation space.
    fn observation_spaces(&self) -> &[Space];

    /// Each agent's action space.
    fn action_spaces(&self) -> &[Space];

    /// Starts an episode and returns each agent's first observation.
    ///
    /// # Errors
    /// Implementation specific (none for the particle worlds).
    fn reset(&mut self, rng: &mut dyn RngCore) -> Result<Vec<Array1<f32>>>;

    /// Applies one action per agent.
    ///
    /// # Errors
    /// [`EnvError::Shape`](crate::EnvError::Shape) for a wrong number of actions, and the
    /// [`RlCoreError`](rl_core::RlCoreError) of the agent's space for a wrong length, NaN or
    /// out-of-range action (naming the agent); [`rl_core::RlCoreError::NeedsReset`] after the
    /// episode ended.
    fn step(&mut self, actions: &[Array1<f32>]) -> Result<MultiStep>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn multistep_done_and_team_reward() {
        let s = MultiStep {
            obs: vec![array![0.0], array![1.0]],
            rewards: vec![1.0, -0.5],
            terminated: vec![false, true],
            truncated: vec![true, false],
        };
        assert!(s.done());
        assert_eq!(s.team_reward(), 0.5);
        let t = MultiStep { truncated: vec![false, false], ..s };
        assert!(!t.done());
    }

    #[test]
    fn task_check_names_field() {
        let spec = vec![TaskParam::new("g", 10.0, 0.1, 100.0)];
        assert!(check_task(&spec, &[9.8]).is_ok());
        let e = check_task(&spec, &[0.0]).unwrap_err();
        assert!(e.to_string().contains("`g`"), "{e}");
        assert!(check_task(&spec, &[]).is_err());
        assert!(check_task(&spec, &[f64::NAN]).is_err());
    }
}
