//! Domain randomisation over task parameters.

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Space, Step};
use serde::{Deserialize, Serialize};

use crate::error::{check_len, EnvError, Result};
use crate::rng::{integers, uniform};
use crate::traits::{check_task, Snapshot, TaskParam, TaskParams};

/// Where [`DomainRandomization`] takes each episode's task vector from (when no task was queued
/// with [`DomainRandomization::set_next_task`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskDistribution {
    /// Each entry uniform in `[low[i], high[i]]` (equal bounds fix an entry).
    Uniform {
        /// Lower bounds, one per task parameter.
        low: Vec<f64>,
        /// Upper bounds, one per task parameter.
        high: Vec<f64>,
    },
    /// One of a finite set of task vectors, uniformly.
    Choice(Vec<Vec<f64>>),
    /// The environment's current task, unchanged (only queued tasks change it).
    Fixed,
}

impl TaskDistribution {
    /// Scales every default by `[1 - spread, 1 + spread]` (a common robust-RL range, e.g.
    /// masses ±30%), clamped to each parameter's valid range.
    pub fn relative(spec: &[TaskParam], spread: f64) -> Self {
        let low = spec.iter().map(|p| (p.default * (1.0 - spread)).clamp(p.min, p.max)).collect();
        let high = spec.iter().map(|p| (p.default * (1.0 + spread)).clamp(p.min, p.max)).collect();
        TaskDistribution::Uniform { low, high }
    }

    fn validate(&self, spec: &[TaskParam]) -> Result<()> {
        match self {
            TaskDistribution::Uniform { low, high } => {
                check_len("distribution.low", spec.len(), low.len())?;
                check_len("distribution.high", spec.len(), high.len())?;
                check_task(spec, low)?;
                check_task(spec, high)?;
                if let Some(i) = (0..low.len()).find(|&i| low[i] > high[i]) {
                    return Err(EnvError::invalid(
                        format!("distribution.low[{i}]"),
                        low[i],
                        format!("must be <= high[{i}] = {}", high[i]),
                    ));
                }
            }
            TaskDistribution::Choice(tasks) => {
                if tasks.is_empty() {
                    return Err(EnvError::invalid("distribution.choice", "[]", "needs at least one task"));
                }
                for t in tasks {
                    check_task(spec, t)?;
                }
            }
            TaskDistribution::Fixed => {}
        }
        Ok(())
    }

    fn sample(&self, rng: &mut dyn RngCore) -> Option<Vec<f64>> {
        match self {
            TaskDistribution::Uniform { low, high } => {
                Some(low.iter().zip(high).map(|(&l, &h)| if l == h { l } else { uniform(rng, l, h) }).collect())
            }
            TaskDistribution::Choice(tasks) => tasks.get(integers(rng, tasks.len())).cloned(),
            TaskDistribution::Fixed => None,
        }
    }
}

/// Domain randomisation: each [`reset`](Env::reset) sets the inner environment's task vector
/// (see [`TaskParams`]) before resetting it: a task queued by a task sampler through
/// [`set_next_task`](Self::set_next_task) if there is one, otherwise a draw from the
/// [`TaskDistribution`] (from the generator passed to `reset`). [`current_task`](Self::current_task)
/// is the vector of the running episode, for the sampler's bookkeeping.
///
/// ```
/// use rl_core::{Env, Params};
/// use rl_envs::classic::{Pendulum, PendulumParams};
/// use rl_envs::wrappers::{DomainRandomization, TaskDistribution};
/// use rl_envs::TaskParams;
/// let env = Pendulum::new(PendulumParams::default().check()?)?;
/// let dist = TaskDistribution::relative(&env.task_spec(), 0.3); // g, m, l within ±30%
/// let mut env = DomainRandomization::new(env, dist)?;
/// let mut rng = rl_core::rng_from_seed(0);
/// env.reset(&mut rng)?;
/// let g = env.current_task()[0];
/// assert!((7.0..=13.0).contains(&g));
/// env.set_next_task(&[9.81, 1.0, 1.0])?; // e.g. chosen by a task sampler
/// env.reset(&mut rng)?;
/// assert_eq!(env.current_task(), &[9.81, 1.0, 1.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct DomainRandomization<E> {
    inner: E,
    distribution: TaskDistribution,
    state: DomainRandomizationState,
}

/// The wrapper state of [`DomainRandomization`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainRandomizationState {
    /// The task vector of the running episode.
    pub current: Vec<f64>,
    /// A task queued for the next reset.
    pub next: Option<Vec<f64>>,
}

/// A snapshot of [`DomainRandomization`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainRandomizationSnapshot<S> {
    /// The inner environment's state.
    pub inner: S,
    /// The wrapper's state (the task vector is re-applied to the inner environment on restore).
    pub wrapper: DomainRandomizationState,
}

impl<E: Env + TaskParams> DomainRandomization<E> {
    /// Wraps `inner`.
    ///
    /// # Errors
    /// [`EnvError::InvalidParameter`] or [`EnvError::Shape`] naming the first bound or task
    /// that does not fit the inner environment's [`TaskParams::task_spec`].
    pub fn new(inner: E, distribution: TaskDistribution) -> Result<Self> {
        distribution.validate(&inner.task_spec())?;
        let current = inner.task();
        Ok(Self { inner, distribution, state: DomainRandomizationState { current, next: None } })
    }

    /// Queues `task` for the next reset.
    ///
    /// # Errors
    /// As [`TaskParams::set_task`]; nothing is queued then.
    pub fn set_next_task(&mut self, task: &[f64]) -> Result<()> {
        check_task(&self.inner.task_spec(), task)?;
        self.state.next = Some(task.to_vec());
        Ok(())
    }

    /// The task vector of the running episode.
    pub fn current_task(&self) -> &[f64] {
        &self.state.current
    }

    /// The distribution tasks are drawn from.
    pub fn distribution(&self) -> &TaskDistribution {
        &self.distribution
    }

    /// The wrapped environment.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: Env + TaskParams> Env for DomainRandomization<E> {
    fn observation_space(&self) -> &Space {
        self.inner.observation_space()
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let task = match self.state.next.take() {
            Some(t) => Some(t),
            None => self.distribution.sample(rng),
        };
        if let Some(task) = task {
            // Validated when queued / at construction; a failure here is a bug of the inner env.
            self.inner
                .set_task(&task)
                .map_err(|e| rl_core::RlCoreError::invalid("task", format!("{task:?}"), e.to_string()))?;
        }
        self.state.current = self.inner.task();
        self.inner.reset(rng)
    }
    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.inner.step(action)
    }
}

impl<E: Env + TaskParams> TaskParams for DomainRandomization<E> {
    fn task_spec(&self) -> Vec<TaskParam> {
        self.inner.task_spec()
    }
    fn task(&self) -> Vec<f64> {
        self.inner.task()
    }
    /// Sets the task immediately (mid-episode); [`Self::set_next_task`] waits for the reset.
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        self.inner.set_task(task)?;
        self.state.current = task.to_vec();
        Ok(())
    }
}

impl<E: Env + TaskParams + Snapshot> Snapshot for DomainRandomization<E> {
    type State = DomainRandomizationSnapshot<E::State>;
    fn snapshot(&self) -> Self::State {
        DomainRandomizationSnapshot { inner: self.inner.snapshot(), wrapper: self.state.clone() }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        let spec = self.inner.task_spec();
        check_task(&spec, &state.wrapper.current)?;
        if let Some(next) = &state.wrapper.next {
            check_task(&spec, next)?;
        }
        let old_task = self.inner.task();
        self.inner.set_task(&state.wrapper.current)?;
        if let Err(e) = self.inner.restore(&state.inner) {
            // leave the environment unchanged
            self.inner.set_task(&old_task)?;
            return Err(e);
        }
        self.state = state.wrapper.clone();
        Ok(())
    }
}
