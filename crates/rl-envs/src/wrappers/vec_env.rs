//! A batch of environments stepped together.

use ndarray::{Array1, Array2, ArrayView2};
use rl_core::{derive_seed, rng_from_seed, Env, Info, SeededRng, Space, SpaceKind};
use serde::{Deserialize, Serialize};

use crate::error::{EnvError, Result};
use crate::traits::Snapshot;

/// The outcome of one [`VecEnv::step`]: row `i` belongs to environment `i`.
#[derive(Debug, Clone, PartialEq)]
pub struct VecStep {
    /// Observations `[n, obs_dim]`; for an environment whose episode just ended, the first
    /// observation of its next episode (same-step auto-reset).
    pub obs: Array2<f32>,
    /// Rewards `[n]`.
    pub rewards: Array1<f32>,
    /// Terminated flags.
    pub terminated: Vec<bool>,
    /// Truncated flags.
    pub truncated: Vec<bool>,
    /// For each environment whose episode ended at this step, its last observation (what a
    /// learner bootstraps from after a truncation).
    pub final_obs: Vec<Option<Array1<f32>>>,
    /// Each environment's step [`Info`]; for an environment that was just reset, its reset
    /// info (empty: `reset` returns none), the step's info being in [`VecStep::final_info`]
    /// (gymnasium's same-step auto-reset). Empty infos allocate nothing.
    pub infos: Vec<Info>,
    /// For each environment whose episode ended at this step, the info of that last step.
    pub final_info: Vec<Option<Info>>,
}

/// The state of a [`VecEnv`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VecEnvState<S> {
    /// Each environment's state.
    pub envs: Vec<S>,
    /// Each environment's generator (used by its resets).
    pub rngs: Vec<SeededRng>,
}

/// `n` environments stepped together with same-step auto-reset (gymnasium's `SyncVectorEnv`
/// with `AutoresetMode.SAME_STEP`): when an episode ends, the environment is reset at once, its
/// final observation goes to [`VecStep::final_obs`] and its row of [`VecStep::obs`] holds the
/// new episode's first observation. Environment `i` resets from its own generator
/// `SeededRng(derive_seed(seed, i))`, so the batch is deterministic and snapshots exactly.
///
/// ```
/// use rl_core::Params;
/// use rl_envs::classic::{Pendulum, PendulumParams};
/// use rl_envs::wrappers::VecEnv;
/// let mut batch = VecEnv::from_fn(64, 7, |_| Pendulum::new(PendulumParams::default().check()?))?;
/// let obs = batch.reset()?;
/// assert_eq!(obs.dim(), (64, 3));
/// let step = batch.step(ndarray::Array2::zeros((64, 1)).view())?;
/// assert_eq!(step.rewards.len(), 64);
/// # Ok::<(), rl_envs::EnvError>(())
/// ```
#[derive(Debug, Clone)]
pub struct VecEnv<E> {
    envs: Vec<E>,
    rngs: Vec<SeededRng>,
    obs_dim: usize,
    act_dim: usize,
}

impl<E: Env> VecEnv<E> {
    /// A batch of `envs`; environment `i` resets from `derive_seed(seed, i)`.
    ///
    /// # Errors
    /// [`EnvError::InvalidParameter`] for an empty batch, [`EnvError::Shape`] when the
    /// environments' observation or action dimensions differ.
    pub fn new(envs: Vec<E>, seed: u64) -> Result<Self> {
        let first =
            envs.first().ok_or_else(|| EnvError::invalid("envs", 0, "a batch needs at least one environment"))?;
        let obs_dim = first.observation_space().dim();
        let act_dim = first.action_space().dim();
        for (i, e) in envs.iter().enumerate() {
            crate::error::check_len(&format!("observation of env {i}"), obs_dim, e.observation_space().dim())?;
            crate::error::check_len(&format!("action of env {i}"), act_dim, e.action_space().dim())?;
        }
        let rngs = (0..envs.len()).map(|i| rng_from_seed(derive_seed(seed, i as u64))).collect();
        Ok(Self { envs, rngs, obs_dim, act_dim })
    }

    /// A batch of `n` environments built by `make(i)`.
    ///
    /// # Errors
    /// The first error of `make`, or as [`VecEnv::new`].
    pub fn from_fn(n: usize, seed: u64, make: impl FnMut(usize) -> Result<E>) -> Result<Self> {
        let envs = (0..n).map(make).collect::<Result<Vec<E>>>()?;
        Self::new(envs, seed)
    }

    /// Number of environments.
    pub fn len(&self) -> usize {
        self.envs.len()
    }

    /// Always false (a batch holds at least one environment).
    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
    }

    /// The environments.
    pub fn envs(&self) -> &[E] {
        &self.envs
    }

    /// The environments, mutably (e.g. to set task parameters).
    pub fn envs_mut(&mut self) -> &mut [E] {
        &mut self.envs
    }

    /// The observation space of one environment.
    pub fn observation_space(&self) -> &Space {
        self.envs[0].observation_space()
    }

    /// The action space of one environment.
    pub fn action_space(&self) -> &Space {
        self.envs[0].action_space()
    }

    /// Resets every environment; returns `[n, obs_dim]`.
    ///
    /// # Errors
    /// [`EnvError::InBatch`] naming the environment that failed.
    pub fn reset(&mut self) -> Result<Array2<f32>> {
        let mut obs = Array2::zeros((self.envs.len(), self.obs_dim));
        for (i, (env, rng)) in self.envs.iter_mut().zip(&mut self.rngs).enumerate() {
            let o = env.reset(rng).map_err(|source| EnvError::InBatch { index: i, source })?;
            obs.row_mut(i).assign(&o);
        }
        Ok(obs)
    }

    /// Steps every environment with its row of `actions` (`[n, act_dim]`).
    ///
    /// Every row is checked against the action space before any environment moves, so a bad
    /// action leaves the whole batch unchanged.
    ///
    /// # Errors
    /// [`EnvError::Shape`] for a wrong `actions` shape; [`EnvError::InBatch`] naming the
    /// environment whose action was rejected or which failed (e.g. stepped before `reset`).
    pub fn step(&mut self, actions: ArrayView2<'_, f32>) -> Result<VecStep> {
        let n = self.envs.len();
        if actions.dim() != (n, self.act_dim) {
            return Err(EnvError::Shape {
                what: "actions".into(),
                expected: format!("[{n}, {}]", self.act_dim),
                got: format!("{:?}", actions.shape()),
            });
        }
        for (i, (env, a)) in self.envs.iter().zip(actions.rows()).enumerate() {
            let space = env.action_space();
            let res = match space.kind() {
                SpaceKind::Discrete { .. } => space.check("action", a),
                SpaceKind::Box { .. } => crate::common::check_box_action(space, a),
            };
            res.map_err(|source| EnvError::InBatch { index: i, source })?;
        }
        let mut obs = Array2::zeros((n, self.obs_dim));
        let mut rewards = Array1::zeros(n);
        let mut terminated = vec![false; n];
        let mut truncated = vec![false; n];
        let mut final_obs = vec![None; n];
        let mut infos = Vec::with_capacity(n);
        let mut final_info = vec![None; n];
        for (i, ((env, rng), a)) in self.envs.iter_mut().zip(&mut self.rngs).zip(actions.rows()).enumerate() {
            let step = env.step(a).map_err(|source| EnvError::InBatch { index: i, source })?;
            rewards[i] = step.reward;
            terminated[i] = step.terminated;
            truncated[i] = step.truncated;
            if step.done() {
                let o = env.reset(rng).map_err(|source| EnvError::InBatch { index: i, source })?;
                obs.row_mut(i).assign(&o);
                final_obs[i] = Some(step.obs);
                final_info[i] = Some(step.info);
                infos.push(Info::new());
            } else {
                obs.row_mut(i).assign(&step.obs);
                infos.push(step.info);
            }
        }
        Ok(VecStep { obs, rewards, terminated, truncated, final_obs, infos, final_info })
    }
}

impl<E: Env + Snapshot> Snapshot for VecEnv<E> {
    type State = VecEnvState<E::State>;
    fn snapshot(&self) -> Self::State {
        VecEnvState { envs: self.envs.iter().map(Snapshot::snapshot).collect(), rngs: self.rngs.clone() }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        let n = self.envs.len();
        if state.envs.len() != n || state.rngs.len() != n {
            return Err(EnvError::snapshot(format!(
                "batch snapshot of {} environments / {} generators, this batch has {n}",
                state.envs.len(),
                state.rngs.len()
            )));
        }
        // Restore into copies first so a failure leaves the batch unchanged.
        let mut saved = Vec::with_capacity(n);
        for (i, (env, s)) in self.envs.iter_mut().zip(&state.envs).enumerate() {
            let before = env.snapshot();
            if let Err(e) = env.restore(s) {
                for (env, b) in self.envs.iter_mut().zip(&saved) {
                    let _ = env.restore(b);
                }
                return Err(EnvError::snapshot(format!("environment {i}: {e}")));
            }
            saved.push(before);
        }
        self.rngs.clone_from(&state.rngs);
        Ok(())
    }
}
