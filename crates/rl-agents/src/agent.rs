//! The traits every agent implements: [`Agent`] (learns from batches: off-policy online
//! agents and offline algorithms), [`OnlineAgent`] (acts in a batch of environments and learns
//! from what it observes), [`BatchPolicy`] (acts on a batch of observations), and lazily read
//! [`UpdateMetrics`].

use std::path::Path;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use rand::RngCore;
use rl_core::{ActMode, Metrics};
use tch::{Device, Tensor};

use crate::batch::Batch;
use crate::error::{AgentError, Result};

/// A policy acting on a batch of observations `[n, obs_dim]` (evaluation, data collection).
///
/// `Deterministic` is the mode / mean action; `Stochastic` samples with noise from `rng`
/// (a deterministic actor returns its action in both modes).
pub trait BatchPolicy {
    /// Observation width.
    fn obs_dim(&self) -> usize;

    /// Action width (1 for a discrete action, which holds the index as `f32`).
    fn act_dim(&self) -> usize;

    /// Actions for `obs` `[n, obs_dim]` → `[n, act_dim]`.
    ///
    /// # Errors
    /// [`AgentError::Shape`] for a wrong observation width, [`AgentError::Core`] for a
    /// non-finite observation, model failures.
    fn act_batch(&self, obs: ArrayView2<'_, f32>, mode: ActMode, rng: &mut dyn RngCore) -> Result<Array2<f32>>;
}

/// Adapts a [`BatchPolicy`] to [`rl_core::Policy`] (one observation at a time), e.g. for
/// [`rl_core::rollout_episode`].
#[derive(Clone, Copy)]
pub struct PolicyRef<'a>(pub &'a dyn BatchPolicy);

impl std::fmt::Debug for PolicyRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PolicyRef(obs {}, act {})", self.0.obs_dim(), self.0.act_dim())
    }
}

impl rl_core::Policy for PolicyRef<'_> {
    fn act(&self, obs: ArrayView1<'_, f32>, mode: ActMode, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let row = obs.insert_axis(ndarray::Axis(0));
        let a = self
            .0
            .act_batch(row, mode, rng)
            .map_err(|e| rl_core::RlCoreError::invalid("policy", "act", e.to_string()))?;
        Ok(a.row(0).to_owned())
    }
}

/// Checks a host observation batch and moves it to `device` as `[n, obs_dim]` `f32`.
pub(crate) fn obs_tensor(obs: ArrayView2<'_, f32>, obs_dim: usize, device: Device) -> Result<Tensor> {
    if obs.ncols() != obs_dim || obs.nrows() == 0 {
        return Err(AgentError::shape("obs", format!("[n >= 1, {obs_dim}]"), format!("{:?}", obs.shape())));
    }
    rl_core::check_finite("obs", obs.iter())?;
    Ok(rl_nn::convert::array_to_tensor_on(&obs, device)?)
}

/// Copies an `[n, d]` tensor back to the host.
pub(crate) fn to_array2(t: &Tensor) -> Result<Array2<f32>> {
    Ok(rl_nn::convert::tensor_to_array2(t)?)
}

/// The scalars one update produced, kept as detached device tensors until read: reading them
/// is the only host round trip, so a training loop reads them every `log_every` updates, not
/// at every step.
#[derive(Debug, Default)]
pub struct UpdateMetrics {
    items: Vec<(String, Tensor)>,
}

impl UpdateMetrics {
    /// No metric.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records scalar `value` (a one-element tensor; detached here) under `name`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn push(&mut self, name: &str, value: &Tensor) -> Result<()> {
        self.items.push((name.to_owned(), value.f_detach()?));
        Ok(())
    }

    /// Records a value already on the host.
    pub fn push_value(&mut self, name: &str, value: f64) {
        self.items.push((name.to_owned(), Tensor::from(value)));
    }

    /// Adds every entry of `other` (names kept).
    pub fn extend(&mut self, other: UpdateMetrics) {
        self.items.extend(other.items);
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Reads every value (the host round trip).
    ///
    /// # Errors
    /// [`AgentError::NonFinite`] naming the first NaN or infinite value (a diverged loss is
    /// never logged silently); libtorch failures.
    pub fn to_metrics(&self) -> Result<Metrics> {
        let mut m = Metrics::new();
        for (name, t) in &self.items {
            let v = t.f_to_kind(tch::Kind::Double)?.f_double_value(&[])?;
            if !v.is_finite() {
                return Err(AgentError::NonFinite { what: name.clone(), index: 0, value: v });
            }
            m.insert(name.clone(), v);
        }
        Ok(m)
    }
}

/// Every agent of the workspace: it acts (exploration actions, the evaluation policy) and
/// checkpoints. How it learns is one of the two subtraits: [`BatchLearner`] (from batches of
/// transitions: SAC, TD3 and the offline algorithms) or [`OnlineAgent`] (from the steps of a
/// batch of environments: PPO, and any `BatchLearner` inside an [`OffPolicy`](crate::OffPolicy)
/// loop). Object safe, like both subtraits.
pub trait Agent: std::fmt::Debug {
    /// A short stable name (`"sac"`, `"td3"`, `"ppo"`).
    fn name(&self) -> &'static str;

    /// Exploration actions for `obs` `[n, obs_dim]` → `[n, act_dim]`, with noise from the
    /// agent's own stream (an [`OnlineAgent`] then expects the outcome in
    /// [`observe`](OnlineAgent::observe)).
    ///
    /// # Errors
    /// As [`BatchPolicy::act_batch`].
    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>>;

    /// The current policy (evaluation: `ActMode::Deterministic`).
    fn policy(&self) -> &dyn BatchPolicy;

    /// The device of the networks.
    fn device(&self) -> Device;

    /// Gradient updates done so far.
    fn updates(&self) -> u64;

    /// Writes a checkpoint directory with the whole learning state (parameters, counters,
    /// generators, every weight, target network and optimiser moment; an online agent's buffer
    /// or rollout and schedule too).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    fn save(&self, dir: &Path) -> Result<()>;

    /// Restores a checkpoint written by [`Agent::save`] of an agent with the same parameters
    /// and widths; on error the agent is unchanged.
    ///
    /// # Errors
    /// [`AgentError::Nn`] (missing/corrupt/foreign files, missing tensors, shapes),
    /// [`AgentError::Corrupt`] (other parameters or widths).
    fn load(&mut self, dir: &Path) -> Result<()>;
}

/// An agent that learns from batches of transitions: the off-policy agents (SAC, TD3) and the
/// offline algorithms built on them. Object safe.
///
/// The online loop around it ([`OffPolicy`](crate::OffPolicy)) owns the replay buffer; an
/// offline trainer samples its dataset; a credit-assignment method (LaRe) may replace the
/// rewards of a batch ([`Batch::with_reward`]) before `update`.
pub trait BatchLearner: Agent {
    /// One gradient update (critic, and actor/temperature when due) on `batch`.
    ///
    /// # Errors
    /// [`AgentError::Shape`] / [`AgentError::Nn`] when the batch does not fit the agent's
    /// widths or device; libtorch failures.
    fn update(&mut self, batch: &Batch) -> Result<UpdateMetrics>;
}

/// What one step of a batch of `n` environments produced, handed to [`OnlineAgent::observe`].
#[derive(Debug, Clone, Copy)]
pub struct VecTransition<'a> {
    /// The observations acted on, `[n, obs_dim]`.
    pub obs: ArrayView2<'a, f32>,
    /// The actions taken (as returned by [`Agent::explore`]), `[n, act_dim]`.
    pub action: ArrayView2<'a, f32>,
    /// Rewards `[n]`.
    pub reward: ArrayView1<'a, f32>,
    /// The true next observations `[n, obs_dim]` (for an environment whose episode ended: its
    /// last observation).
    pub next_obs: ArrayView2<'a, f32>,
    /// The observations the agent acts on next (equal to `next_obs` except where an episode
    /// ended and the environment was reset).
    pub continue_obs: ArrayView2<'a, f32>,
    /// Terminal flags.
    pub terminated: &'a [bool],
    /// Time-limit flags.
    pub truncated: &'a [bool],
}

impl VecTransition<'_> {
    /// Number of environments.
    pub fn len(&self) -> usize {
        self.reward.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.reward.is_empty()
    }

    pub(crate) fn check(&self, obs_dim: usize, act_dim: usize) -> Result<()> {
        let n = self.len();
        for (what, shape, want) in [
            ("obs", self.obs.dim(), (n, obs_dim)),
            ("action", self.action.dim(), (n, act_dim)),
            ("next_obs", self.next_obs.dim(), (n, obs_dim)),
            ("continue_obs", self.continue_obs.dim(), (n, obs_dim)),
        ] {
            if shape != want {
                return Err(AgentError::shape(what, format!("{want:?}"), format!("{shape:?}")));
            }
        }
        if self.terminated.len() != n || self.truncated.len() != n {
            return Err(AgentError::shape(
                "terminated/truncated",
                format!("{n} flags"),
                format!("{}/{}", self.terminated.len(), self.truncated.len()),
            ));
        }
        rl_core::check_finite("reward", self.reward.iter())?;
        rl_core::check_finite("next_obs", self.next_obs.iter())?;
        rl_core::check_finite("continue_obs", self.continue_obs.iter())?;
        Ok(())
    }
}

/// An [`Agent`] that interacts with a batch of environments: [`explore`](Agent::explore)
/// chooses actions, [`observe`](OnlineAgent::observe) receives what they produced and learns
/// when learning is due (every step for SAC/TD3 after the warm-up, after each rollout for PPO).
/// [`OnlineTrainer`](crate::OnlineTrainer) drives any `OnlineAgent`.
pub trait OnlineAgent: Agent {
    /// The outcome of the actions of the last [`explore`](Agent::explore); returns the
    /// metrics of the updates it triggered, if any.
    ///
    /// # Errors
    /// [`AgentError::Shape`] / [`AgentError::Core`] for a malformed transition,
    /// [`AgentError::Protocol`] when it does not follow an `explore` of the same batch size;
    /// update failures.
    fn observe(&mut self, step: &VecTransition<'_>) -> Result<Option<UpdateMetrics>>;

    /// Environment steps observed (transitions, summed over the batch).
    fn env_steps(&self) -> u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_lazily_and_non_finite_is_an_error() {
        let mut m = UpdateMetrics::new();
        m.push("loss/a", &Tensor::from(0.5f32)).unwrap();
        m.push_value("train/b", 2.0);
        let r = m.to_metrics().unwrap();
        assert_eq!(r.get("loss/a"), Some(0.5));
        assert_eq!(r.get("train/b"), Some(2.0));
        m.push("loss/c", &Tensor::from(f32::NAN)).unwrap();
        assert!(matches!(m.to_metrics(), Err(AgentError::NonFinite { ref what, .. }) if what == "loss/c"));
    }
}
