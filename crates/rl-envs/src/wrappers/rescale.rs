//! Action rescaling.

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Space, SpaceKind, Step};

use crate::error::{EnvError, Result};
use crate::traits::{Snapshot, TaskParam, TaskParams};

/// The agent acts in `[min, max]^d` (default `[-1, 1]`, a tanh policy's range); each action is
/// mapped linearly onto the inner box `[low, high]`:
/// `low + (high - low) · (a - min) / (max - min)` (gymnasium's `RescaleAction`). Values outside
/// `[min, max]` map outside `[low, high]` and are then handled by the inner environment.
#[derive(Debug, Clone)]
pub struct RescaleAction<E> {
    inner: E,
    space: Space,
    min: f64,
    max: f64,
    low: Vec<f64>,
    high: Vec<f64>,
}

impl<E: Env> RescaleAction<E> {
    /// Wraps `inner`, whose action space must be a box with finite bounds.
    ///
    /// # Errors
    /// [`EnvError::InvalidParameter`] for a discrete or unbounded inner action space or for
    /// `min >= max`.
    pub fn new(inner: E, min: f32, max: f32) -> Result<Self> {
        if !(min.is_finite() && max.is_finite() && min < max) {
            return Err(EnvError::invalid("min", min, format!("need finite min < max (= {max})")));
        }
        let (low, high) = match inner.action_space().kind() {
            SpaceKind::Box { low, high } => (low.clone(), high.clone()),
            SpaceKind::Discrete { n } => {
                return Err(EnvError::invalid("action_space", format!("Discrete({n})"), "RescaleAction needs a box"))
            }
        };
        if let Some(i) = (0..low.len()).find(|&i| !(low[i].is_finite() && high[i].is_finite())) {
            return Err(EnvError::invalid(
                format!("action_space[{i}]"),
                format!("[{}, {}]", low[i], high[i]),
                "bounds must be finite",
            ));
        }
        let dim = low.len();
        Ok(Self {
            space: Space::boxed(Array1::from_elem(dim, min), Array1::from_elem(dim, max))?,
            inner,
            min: f64::from(min),
            max: f64::from(max),
            low: low.iter().map(|&v| f64::from(v)).collect(),
            high: high.iter().map(|&v| f64::from(v)).collect(),
        })
    }

    /// The wrapped environment.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// The inner action for agent action `a` (no checks).
    pub fn to_inner(&self, a: ArrayView1<'_, f32>) -> Array1<f32> {
        a.iter()
            .zip(self.low.iter().zip(&self.high))
            .map(|(&v, (&l, &h))| (l + (h - l) * ((f64::from(v) - self.min) / (self.max - self.min))) as f32)
            .collect()
    }
}

impl<E: Env> Env for RescaleAction<E> {
    fn observation_space(&self) -> &Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &Space {
        &self.space
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        self.inner.reset(rng)
    }
    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        crate::common::check_box_action(&self.space, action)?;
        let a = self.to_inner(action);
        self.inner.step(a.view())
    }
}

impl<E: Env + Snapshot> Snapshot for RescaleAction<E> {
    type State = E::State;
    fn snapshot(&self) -> E::State {
        self.inner.snapshot()
    }
    fn restore(&mut self, state: &E::State) -> Result<()> {
        self.inner.restore(state)
    }
}

impl<E: TaskParams> TaskParams for RescaleAction<E> {
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
