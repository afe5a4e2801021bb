//! Observation normalisation.

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::stats::RunningMeanStd;
use rl_core::{Env, Params, Space, Step, Valid};
use serde::{Deserialize, Serialize};

use crate::error::{EnvError, Result};
use crate::traits::{Snapshot, TaskParam, TaskParams};
use crate::wrappers::episodic::Wrapped;

/// Parameters of [`NormalizeObservation`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `epsilon` | 1e-8 | added to the variance (gymnasium's `NormalizeObservation`) | `> 0` |
/// | `clip` | 10.0 | normalised values are clipped to `[-clip, clip]` (CleanRL's PPO); 0 = no clip | `>= 0` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormalizeObservationParams {
    /// Variance floor.
    pub epsilon: f64,
    /// Clip bound (0 = none).
    pub clip: f64,
}

impl Default for NormalizeObservationParams {
    fn default() -> Self {
        Self { epsilon: 1e-8, clip: 10.0 }
    }
}

impl NormalizeObservationParams {
    /// Sets `epsilon`.
    #[must_use]
    pub fn epsilon(mut self, v: f64) -> Self {
        self.epsilon = v;
        self
    }
    /// Sets `clip` (0 = none).
    #[must_use]
    pub fn clip(mut self, v: f64) -> Self {
        self.clip = v;
        self
    }
}

impl Params for NormalizeObservationParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        crate::common::positive("epsilon", self.epsilon)?;
        crate::common::non_negative("clip", self.clip)?;
        Ok(())
    }
}

/// The wrapper state of [`NormalizeObservation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizeState {
    /// Running statistics of the raw observations.
    pub rms: RunningMeanStd,
    /// Whether observations still update the statistics.
    pub training: bool,
}

/// Normalises observations by a running mean and standard deviation (gymnasium's
/// `NormalizeObservation`: each raw observation first updates the statistics, count starting at
/// 1e-4), then clips to `[-clip, clip]`. [`set_training(false)`](Self::set_training) freezes the
/// statistics for evaluation; they are part of the snapshot, so a resumed agent sees the same
/// normalisation.
#[derive(Debug, Clone)]
pub struct NormalizeObservation<E> {
    inner: E,
    params: NormalizeObservationParams,
    space: Space,
    state: NormalizeState,
}

impl<E: Env> NormalizeObservation<E> {
    /// Wraps `inner`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(inner: E, params: Valid<NormalizeObservationParams>) -> Result<Self> {
        let params = params.into_inner();
        let dim = inner.observation_space().dim();
        let bound = if params.clip > 0.0 { params.clip as f32 } else { f32::INFINITY };
        Ok(Self {
            space: Space::symmetric(dim, bound)?,
            inner,
            params,
            state: NormalizeState { rms: RunningMeanStd::new(dim), training: true },
        })
    }

    /// Freezes (`false`) or resumes (`true`) the statistics.
    pub fn set_training(&mut self, training: bool) {
        self.state.training = training;
    }

    /// The running statistics.
    pub fn stats(&self) -> &RunningMeanStd {
        &self.state.rms
    }

    /// The wrapped environment.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    fn process(&mut self, obs: &Array1<f32>) -> rl_core::Result<Array1<f32>> {
        let rms = &mut self.state.rms;
        if self.state.training && obs.iter().all(|v| v.is_finite()) {
            // Chan et al.'s update with a batch of one (batch variance 0), as gymnasium.
            let row: Vec<f64> = obs.iter().map(|&x| f64::from(x)).collect();
            rms.update(&[row])?;
        }
        let clip = if self.params.clip > 0.0 { self.params.clip } else { f64::INFINITY };
        Ok(obs
            .iter()
            .zip(rms.mean().iter().zip(rms.var()))
            .map(|(&x, (m, v))| {
                let z = (f64::from(x) - m) / (v + self.params.epsilon).sqrt();
                z.clamp(-clip, clip) as f32
            })
            .collect())
    }
}

impl<E: Env> Env for NormalizeObservation<E> {
    fn observation_space(&self) -> &Space {
        &self.space
    }
    fn action_space(&self) -> &Space {
        self.inner.action_space()
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let obs = self.inner.reset(rng)?;
        self.process(&obs)
    }
    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        let mut step = self.inner.step(action)?;
        step.obs = self.process(&step.obs)?;
        Ok(step)
    }
}

impl<E: Env + Snapshot> Snapshot for NormalizeObservation<E> {
    type State = Wrapped<E::State, NormalizeState>;
    fn snapshot(&self) -> Self::State {
        Wrapped { inner: self.inner.snapshot(), wrapper: self.state.clone() }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        let rms = &state.wrapper.rms;
        // RunningMeanStd checks finiteness, variances and count itself (also when deserialised).
        let dim = self.state.rms.dim();
        if rms.dim() != dim {
            return Err(EnvError::snapshot(format!(
                "normalisation statistics of dimension {}, expected {dim}",
                rms.dim()
            )));
        }
        self.inner.restore(&state.inner)?;
        self.state = state.wrapper.clone();
        Ok(())
    }
}

impl<E: TaskParams> TaskParams for NormalizeObservation<E> {
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
