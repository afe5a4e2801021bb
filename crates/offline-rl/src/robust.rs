//! Evaluation under perturbations (SCAS §5, "robustness against environmental perturbations").
//!
//! The SCAS paper evaluates trained policies in perturbed test environments; its exact
//! protocol (perturbation type, magnitudes, schedule) could not be retrieved here, so this
//! module implements the two usual test-time perturbations as a reconstruction, each a
//! parameter: Gaussian noise on the observation the policy sees (in units of the dataset's
//! per-dimension state standard deviation), and Gaussian noise on the executed action (in
//! units of the action half-range, clipped to the box). Noise is drawn from the evaluator's
//! seeded generator, so every algorithm meets the same perturbation sequence for the same
//! seed only when it takes the same actions (the draws are per step, not per state).

use ndarray::{Array2, ArrayView2};
use rand::RngCore;
use rl_agents::BatchPolicy;
use rl_core::ActMode;
use serde::{Deserialize, Serialize};

use crate::data::StateNorm;

/// A test-time perturbation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Perturbation {
    /// None.
    None,
    /// `s̃ = s + σ · std_data ⊙ ε`, `ε ~ N(0, I)`: the policy acts on `s̃`.
    Observation {
        /// `σ` in dataset standard deviations.
        std: f64,
    },
    /// `ã = clip(a + σ · scale ⊙ ε)`: the environment executes `ã`.
    Action {
        /// `σ` in action half-ranges.
        std: f64,
    },
}

impl Perturbation {
    /// A short label (`obs 0.1`, `act 0.2`, `none`).
    pub fn label(&self) -> String {
        match self {
            Perturbation::None => "none".into(),
            Perturbation::Observation { std } => format!("obs {std}"),
            Perturbation::Action { std } => format!("act {std}"),
        }
    }
}

/// A policy (acting on raw observations, e.g. [`crate::algo::NormalizedPolicy`]) evaluated
/// under a [`Perturbation`].
#[derive(Clone)]
pub struct PerturbedPolicy<'a> {
    inner: &'a dyn BatchPolicy,
    perturbation: Perturbation,
    state_std: Vec<f32>,
    low: Vec<f32>,
    high: Vec<f32>,
}

impl<'a> PerturbedPolicy<'a> {
    /// `inner` under `perturbation`; `norm` gives the observation scale, `low`/`high` the
    /// action box.
    pub fn new(
        inner: &'a dyn BatchPolicy,
        perturbation: Perturbation,
        norm: &StateNorm,
        low: Vec<f32>,
        high: Vec<f32>,
    ) -> Self {
        Self { inner, perturbation, state_std: norm.std().to_vec(), low, high }
    }
}

fn normals(n: usize, rng: &mut dyn RngCore) -> Vec<f32> {
    (0..n).map(|_| rand_distr::Distribution::<f64>::sample(&rand_distr::StandardNormal, rng) as f32).collect()
}

impl std::fmt::Debug for PerturbedPolicy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PerturbedPolicy({:?})", self.perturbation)
    }
}

impl BatchPolicy for PerturbedPolicy<'_> {
    fn obs_dim(&self) -> usize {
        self.inner.obs_dim()
    }

    fn act_dim(&self) -> usize {
        self.inner.act_dim()
    }

    fn act_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        mode: ActMode,
        rng: &mut dyn RngCore,
    ) -> rl_agents::Result<Array2<f32>> {
        match self.perturbation {
            Perturbation::None => self.inner.act_batch(obs, mode, rng),
            Perturbation::Observation { std } => {
                let mut o = obs.to_owned();
                let eps = normals(o.len(), rng);
                for (k, x) in o.iter_mut().enumerate() {
                    let j = k % self.state_std.len().max(1);
                    *x += std as f32 * self.state_std.get(j).copied().unwrap_or(1.0) * eps[k];
                }
                self.inner.act_batch(o.view(), mode, rng)
            }
            Perturbation::Action { std } => {
                let mut a = self.inner.act_batch(obs, mode, rng)?;
                let eps = normals(a.len(), rng);
                let d = self.low.len().max(1);
                for (k, x) in a.iter_mut().enumerate() {
                    let j = k % d;
                    let (lo, hi) = (self.low.get(j).copied().unwrap_or(-1.0), self.high.get(j).copied().unwrap_or(1.0));
                    *x = (*x + std as f32 * (hi - lo) / 2.0 * eps[k]).clamp(lo, hi);
                }
                Ok(a)
            }
        }
    }
}
