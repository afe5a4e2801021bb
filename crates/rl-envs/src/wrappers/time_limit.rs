//! Time limit.

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Space, Step};
use serde::{Deserialize, Serialize};

use crate::error::{EnvError, Result};
use crate::traits::{Snapshot, TaskParam, TaskParams};

/// Truncates episodes after `max_steps` steps (gymnasium's `TimeLimit`: `truncated` is set on
/// the `max_steps`-th step, also when that step terminates). The inner environment's own limit,
/// if any, still applies: whichever comes first ends the episode.
#[derive(Debug, Clone)]
pub struct TimeLimit<E> {
    inner: E,
    max_steps: usize,
    steps: usize,
}

/// The state of a [`TimeLimit`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeLimitState<S> {
    /// The inner environment's state.
    pub inner: S,
    /// Steps taken in this episode.
    pub steps: usize,
}

impl<E: Env> TimeLimit<E> {
    /// Wraps `inner`.
    ///
    /// # Errors
    /// [`EnvError::InvalidParameter`] if `max_steps == 0`.
    pub fn new(inner: E, max_steps: usize) -> Result<Self> {
        if max_steps == 0 {
            return Err(EnvError::invalid("max_steps", 0, "must be >= 1"));
        }
        Ok(Self { inner, max_steps, steps: 0 })
    }

    /// The limit.
    pub fn max_steps(&self) -> usize {
        self.max_steps
    }

    /// The wrapped environment.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The wrapped environment, mutably.
    pub fn inner_mut(&mut self) -> &mut E {
        &mut self.inner
    }

    /// Unwraps.
    pub fn into_inner(self) -> E {
        self.inner
    }
}

impl<E: Env> Env for TimeLimit<E> {
    fn observation_space(&self) -> &Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let obs = self.inner.reset(rng)?;
        self.steps = 0;
        Ok(obs)
    }
    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        if self.steps >= self.max_steps {
            return Err(rl_core::RlCoreError::NeedsReset);
        }
        let mut step = self.inner.step(action)?;
        self.steps += 1;
        if self.steps >= self.max_steps {
            step.truncated = true;
        }
        Ok(step)
    }
}

impl<E: Env + Snapshot> Snapshot for TimeLimit<E> {
    type State = TimeLimitState<E::State>;
    fn snapshot(&self) -> Self::State {
        TimeLimitState { inner: self.inner.snapshot(), steps: self.steps }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        self.inner.restore(&state.inner)?;
        self.steps = state.steps;
        Ok(())
    }
}

impl<E: TaskParams> TaskParams for TimeLimit<E> {
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
