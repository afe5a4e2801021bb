//! MPTS: model-predictive task sampling with an upper-confidence-bound acquisition.

use super::learner::{mean_std, RiskLearner, RiskLearnerParams};
use super::risk::{risk_selector, validate_common, RiskCore, RiskFromRewards, RiskSelectorParams};
use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{pack_key, top_b, Candidates, Outcome, Prediction, Selection};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// Parameters of [`Mpts`]. `Default` = the reference sinusoid configuration (thu-rllab/MPTS
/// `sinusoid/main.py`, `trainer_risklearner.py`). A config file may give any subset of the
/// fields; a misspelt field is an error.
///
/// | name | default | reference |
/// |---|---|---|
/// | `learner` | [`RiskLearnerParams::sinusoid`] | Meta-RL / DR: lr 5e-3, 10 steps, 1 draw, standardised |
/// | `samples` (`M`) | 20 | Meta-RL / DR 50 |
/// | `gamma_mean` (`γ0`) | 1 | all |
/// | `gamma_std` (`γ1`) | 3 | Meta-RL / DR 5 |
/// | `random_ratio` | 0 | DR 0.5 (`add_random`, default on), Meta-RL 0.5 with `--add_random` |
/// | `warmup_steps` | 0 | Meta-RL 50 iterations; DR the first 10% of time steps |
/// | `risk_from_rewards` | `one_minus_success` | see [`RiskFromRewards`] |
/// | `seed` | 0 | initial weights and `predict`'s latent draws |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MptsParams {
    /// Risk-learner parameters.
    pub learner: RiskLearnerParams,
    /// Latent draws `M ≥ 2` for the UCB (mean and std over draws).
    pub samples: usize,
    /// Weight of the predicted mean risk.
    pub gamma_mean: f64,
    /// Weight of the predictive std (exploration).
    pub gamma_std: f64,
    /// Fraction of the batch filled uniformly from the candidates not picked by the UCB.
    pub random_ratio: f64,
    /// Steps `step < warmup_steps` select uniformly at random.
    pub warmup_steps: u64,
    /// Risk of outcomes without an explicit risk.
    pub risk_from_rewards: RiskFromRewards,
    /// Seed of the initial weights.
    pub seed: u64,
}

impl Default for MptsParams {
    fn default() -> Self {
        Self::sinusoid()
    }
}

impl MptsParams {
    /// The reference sinusoid configuration (the default).
    pub fn sinusoid() -> Self {
        Self {
            learner: RiskLearnerParams::sinusoid(),
            samples: 20,
            gamma_mean: 1.0,
            gamma_std: 3.0,
            random_ratio: 0.0,
            warmup_steps: 0,
            risk_from_rewards: RiskFromRewards::OneMinusSuccess,
            seed: 0,
        }
    }

    /// The reference domain-randomisation configuration (`M = 50`, `γ1 = 5`, random half).
    pub fn domain_randomisation() -> Self {
        Self {
            learner: RiskLearnerParams::domain_randomisation(),
            samples: 50,
            gamma_std: 5.0,
            random_ratio: 0.5,
            ..Self::sinusoid()
        }
    }

    /// The reference Meta-RL configuration (`M = 50`, `γ1 = 5`, KL 1e-4, random half, 50
    /// warm-up iterations).
    pub fn meta_rl() -> Self {
        Self { learner: RiskLearnerParams::meta_rl(), warmup_steps: 50, ..Self::domain_randomisation() }
    }

    /// Sets the learner's parameters.
    #[must_use]
    pub fn learner(mut self, learner: RiskLearnerParams) -> Self {
        self.learner = learner;
        self
    }

    /// Sets `samples`.
    #[must_use]
    pub fn samples(mut self, m: usize) -> Self {
        self.samples = m;
        self
    }

    /// Sets the UCB weights `γ0` (mean) and `γ1` (std).
    #[must_use]
    pub fn gammas(mut self, gamma_mean: f64, gamma_std: f64) -> Self {
        self.gamma_mean = gamma_mean;
        self.gamma_std = gamma_std;
        self
    }

    /// Sets `random_ratio`.
    #[must_use]
    pub fn random_ratio(mut self, ratio: f64) -> Self {
        self.random_ratio = ratio;
        self
    }

    /// Sets `warmup_steps`.
    #[must_use]
    pub fn warmup_steps(mut self, steps: u64) -> Self {
        self.warmup_steps = steps;
        self
    }

    /// Sets `risk_from_rewards`.
    #[must_use]
    pub fn risk_from_rewards(mut self, mode: RiskFromRewards) -> Self {
        self.risk_from_rewards = mode;
        self
    }

    /// Sets the seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

impl Params for MptsParams {
    type Error = SelectError;

    /// # Errors
    /// `samples` outside `2..=65536` (the std of one draw is undefined), non-finite weights,
    /// `random_ratio` outside `[0, 1]`, invalid learner parameters (`learner.<field>`).
    fn validate(&self) -> Result<()> {
        validate_common(&self.learner, self.random_ratio)?;
        if self.samples < 2 || self.samples > 1 << 16 {
            return Err(invalid("samples", self.samples, "the UCB needs 2..=65536 latent draws"));
        }
        if !self.gamma_mean.is_finite() {
            return Err(invalid("gamma_mean", self.gamma_mean, "must be finite"));
        }
        if !self.gamma_std.is_finite() {
            return Err(invalid("gamma_std", self.gamma_std, "must be finite"));
        }
        Ok(())
    }
}

impl RiskSelectorParams for MptsParams {
    fn learner(&self) -> RiskLearnerParams {
        self.learner
    }
    fn random_ratio(&self) -> f64 {
        self.random_ratio
    }
    fn warmup_steps(&self) -> u64 {
        self.warmup_steps
    }
    fn predict_samples(&self) -> usize {
        self.samples
    }
}

/// MPTS (Model Predictive Task Sampling; "Beyond Any-Shot Adaptation: Predicting Optimization
/// Outcome for Robustness Gains without Extra Pay", arXiv 2501.11039): a [`RiskLearner`] predicts
/// each candidate's adaptation risk from its identifier, and the batch is the top-`B` by an
/// upper confidence bound over `M` latent draws.
///
/// ```text
/// select:   z_m ~ q(z | H_{t−1}),  ℓ̂_m(τ) = decoder(x_τ, z_m),  m = 1..M
///           a(τ) = γ0 · mean_m ℓ̂_m(τ) + γ1 · std_m ℓ̂_m(τ)
///           B_t = top_{(1−ρ)B} a  ∪  ρB uniformly from the rest     (ρ = random_ratio)
/// observe:  one streaming-VI update of the learner on H_t = {(x_τ, ℓ_τ)}
/// ```
///
/// Features, outcomes, predictions, warm-up, errors and saved state: see
/// [the MPTS/PDTS section of the module docs](super#mpts-and-pdts). [`Selection::scores`] holds
/// the UCB `a(τ)` of the selected tasks.
///
/// # Example
/// ```
/// use rl_core::Params;
/// use rlvr_select::neural::{Mpts, MptsParams};
/// use rlvr_select::{Candidates, NoRollouts, Outcome, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut mpts = Mpts::new(MptsParams::default().check()?, 2)?;
/// let ids: Vec<u64> = (0..32).collect();
/// let x: Vec<f32> = (0..64).map(|i| (i % 7) as f32 * 0.5).collect();
/// let sel = mpts.select(0, Candidates::with_features(&ids, &x, 2)?, 16, &mut NoRollouts, &mut rng)?;
/// let outcomes: Vec<Outcome> =
///     sel.ids.iter().map(|&id| Outcome { risk: Some(id as f32 / 32.0), ..Outcome::new(id, vec![]) }).collect();
/// mpts.observe(0, &outcomes, &mut rng)?;
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug)]
pub struct Mpts {
    params: Valid<MptsParams>,
    core: RiskCore,
}

impl Mpts {
    /// UCB scores `γ0 · mean + γ1 · std` of row-major identifiers over `M` fresh draws.
    ///
    /// # Errors
    /// As [`RiskLearner::sample_risks`].
    pub fn acquisition_scores(&self, features: &[f32], rng: &mut dyn RngCore) -> Result<Vec<f64>> {
        ucb(&self.core.learner, &self.params, features, rng)
    }

    fn select_impl(
        &mut self,
        step: u64,
        candidates: &Candidates<'_>,
        batch_size: usize,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        let p = *self.params;
        let ids = candidates.ids();
        self.core.select_with(&p, step, candidates, batch_size, rng, |core, feats, b, rng| {
            let a = ucb(&core.learner, &p, feats, rng)?;
            let salt = rng.next_u64();
            let chosen = top_b(a.len(), b, |q| pack_key(a[q] as f32, ids[q], salt));
            Ok((chosen, a))
        })
    }
}

/// `γ0 · mean + γ1 · std` over `M` latent draws.
fn ucb(learner: &RiskLearner, p: &MptsParams, features: &[f32], rng: &mut dyn RngCore) -> Result<Vec<f64>> {
    let draws = learner.sample_risks(features, p.samples, rng)?;
    let (m, s) = mean_std(&draws, p.samples);
    Ok(m.iter().zip(&s).map(|(&m, &s)| p.gamma_mean * f64::from(m) + p.gamma_std * f64::from(s)).collect())
}

risk_selector!(Mpts, MptsParams, "mpts", "MPTS");
