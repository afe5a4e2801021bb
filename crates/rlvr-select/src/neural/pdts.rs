//! PDTS: posterior sampling plus diversity over the MPTS risk learner.

use super::learner::{RiskLearner, RiskLearnerParams};
use super::risk::{risk_selector, validate_common, RiskCore, RiskFromRewards, RiskSelectorParams};
use crate::diversity::{greedy_msd, Diversity, MsdProblem};
use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{Candidates, Outcome, Prediction, Selection};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// The diversity term of PDTS's greedy max-sum diversification (`"sum_distance"` /
/// `"min_distance"` in a config file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PdtsDiversity {
    /// `γ · Σ_{v∈S} ‖x_u − x_v‖ / (B(B−1))` (reference sinusoid, `msd_diversified_score`).
    SumDistance,
    /// `γ · min_{v∈S} ‖x_u − x_v‖`, first pick by score alone (reference domain randomisation).
    MinDistance,
}

/// Parameters of [`Pdts`]. `Default` = the reference sinusoid configuration (thu-rllab/PDTS
/// `sinusoid/`: `ps_msd_diverse_mpts`, `gamma_diverse = 1`, 512 candidates for `B = 16`).
///
/// | name | default | reference |
/// |---|---|---|
/// | `learner` | [`RiskLearnerParams::sinusoid`] | DR: [`RiskLearnerParams::domain_randomisation`] |
/// | `diversity` | `sum_distance` | DR `min_distance` |
/// | `gamma_div` | 1.0 | DR 0.05 (Pusher), 8 (LunarLander), 1 (ErgoReacher) |
/// | `predict_samples` | 20 | draws for [`Selector::predict`] only (selection uses one draw) |
/// | `random_ratio` | 0 | DR keeps MPTS's random half |
/// | `warmup_steps` | 0 | DR: uniform for the first 10% of time steps |
/// | `risk_from_rewards` | `one_minus_success` | see [`RiskFromRewards`] |
/// | `seed` | 0 | initial weights |
///
/// Candidate sets are meant to be large: 32× the batch in the sinusoid, 64× in DR. A config
/// file may give any subset of the fields; a misspelt field is an error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PdtsParams {
    /// Risk-learner parameters.
    pub learner: RiskLearnerParams,
    /// Diversity variant.
    pub diversity: PdtsDiversity,
    /// Diversity weight `γ_div ≥ 0`.
    pub gamma_div: f64,
    /// Latent draws used by `predict`.
    pub predict_samples: usize,
    /// Fraction of the batch filled uniformly from the candidates not picked.
    pub random_ratio: f64,
    /// Steps `step < warmup_steps` select uniformly at random.
    pub warmup_steps: u64,
    /// Risk of outcomes without an explicit risk.
    pub risk_from_rewards: RiskFromRewards,
    /// Seed of the initial weights.
    pub seed: u64,
}

impl Default for PdtsParams {
    fn default() -> Self {
        Self::sinusoid()
    }
}

impl PdtsParams {
    /// The reference sinusoid configuration (the default).
    pub fn sinusoid() -> Self {
        Self {
            learner: RiskLearnerParams::sinusoid(),
            diversity: PdtsDiversity::SumDistance,
            gamma_div: 1.0,
            predict_samples: 20,
            random_ratio: 0.0,
            warmup_steps: 0,
            risk_from_rewards: RiskFromRewards::OneMinusSuccess,
            seed: 0,
        }
    }

    /// The reference domain-randomisation configuration with diversity weight `gamma_div`
    /// (min-distance variant, random half).
    pub fn domain_randomisation(gamma_div: f64) -> Self {
        Self {
            learner: RiskLearnerParams::domain_randomisation(),
            diversity: PdtsDiversity::MinDistance,
            gamma_div,
            random_ratio: 0.5,
            ..Self::sinusoid()
        }
    }

    /// Sets the learner's parameters.
    #[must_use]
    pub fn learner(mut self, learner: RiskLearnerParams) -> Self {
        self.learner = learner;
        self
    }

    /// Sets the diversity variant.
    #[must_use]
    pub fn diversity(mut self, diversity: PdtsDiversity) -> Self {
        self.diversity = diversity;
        self
    }

    /// Sets `gamma_div`.
    #[must_use]
    pub fn gamma_div(mut self, gamma: f64) -> Self {
        self.gamma_div = gamma;
        self
    }

    /// Sets `predict_samples`.
    #[must_use]
    pub fn predict_samples(mut self, m: usize) -> Self {
        self.predict_samples = m;
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

impl Params for PdtsParams {
    type Error = SelectError;

    /// # Errors
    /// Negative or non-finite `gamma_div`, `predict_samples` outside `1..=65536`, `random_ratio`
    /// outside `[0, 1]`, invalid learner parameters (`learner.<field>`).
    fn validate(&self) -> Result<()> {
        validate_common(&self.learner, self.random_ratio)?;
        if !(self.gamma_div.is_finite() && self.gamma_div >= 0.0) {
            return Err(invalid("gamma_div", self.gamma_div, "must be finite and >= 0"));
        }
        if self.predict_samples == 0 || self.predict_samples > 1 << 16 {
            return Err(invalid("predict_samples", self.predict_samples, "must lie in 1..=65536"));
        }
        Ok(())
    }
}

impl RiskSelectorParams for PdtsParams {
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
        self.predict_samples
    }
}

/// PDTS (Posterior and Diversity Synergized Task Sampling; "Fast and Robust: Task Sampling with
/// Posterior and Diversity Synergies for Adaptive Decision-Makers in Randomized Environments",
/// ICML 2025, arXiv 2504.19139): the [`RiskLearner`] of MPTS scored with **one** posterior draw
/// (Thompson-style, no exploration weight), and a greedy max-sum-diversified batch so that
/// large candidate pools do not collapse onto one hard region.
///
/// ```text
/// select:   z ~ q(z | H_{t−1}),  a(τ) = decoder(x_τ, z)
///           repeat B times: u* = argmax_{u∉S} a(u)/2 + γ_div · D_S(u);  S ← S ∪ {u*}
///             SumDistance: D_S(u) = Σ_{v∈S} ‖x_u − x_v‖ / (B(B−1));  MinDistance: min_{v∈S} ‖x_u − x_v‖
/// observe:  one streaming-VI update of the learner (as MPTS)
/// ```
///
/// Cost: one decoder pass per candidate plus `O(B · N · d)` for the greedy batch. Features,
/// outcomes, predictions, warm-up, errors and saved state: see
/// [the MPTS/PDTS section of the module docs](super#mpts-and-pdts). [`Selection::scores`] holds
/// the sampled risk `a(τ)` of the selected tasks.
///
/// # Example
/// ```
/// use rl_core::Params;
/// use rlvr_select::neural::{Pdts, PdtsParams};
/// use rlvr_select::{Candidates, NoRollouts, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut pdts = Pdts::new(PdtsParams::default().check()?, 2)?;
/// let ids: Vec<u64> = (0..512).collect();
/// let x: Vec<f32> = (0..1024).map(|i| (i % 13) as f32 * 0.3).collect();
/// let sel = pdts.select(0, Candidates::with_features(&ids, &x, 2)?, 16, &mut NoRollouts, &mut rng)?;
/// assert_eq!(sel.ids.len(), 16);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug)]
pub struct Pdts {
    params: Valid<PdtsParams>,
    core: RiskCore,
}

impl Pdts {
    /// Greedy diversified positions of `b` picks given scores and row-major features.
    ///
    /// # Errors
    /// As [`greedy_msd`].
    pub fn diversify(&self, scores: &[f64], features: &[f32], b: usize) -> Result<Vec<usize>> {
        diversify(&self.params, self.core.features.dim, scores, features, b)
    }

    fn select_impl(
        &mut self,
        step: u64,
        candidates: &Candidates<'_>,
        batch_size: usize,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        let p = *self.params;
        let dim = self.core.features.dim;
        self.core.select_with(&p, step, candidates, batch_size, rng, |core, feats, b, rng| {
            let a: Vec<f64> = core.learner.sample_risks(feats, 1, rng)?.into_iter().map(f64::from).collect();
            let chosen = if b > 0 { diversify(&p, dim, &a, feats, b)? } else { Vec::new() };
            Ok((chosen, a))
        })
    }
}

fn diversify(p: &PdtsParams, dim: usize, scores: &[f64], features: &[f32], b: usize) -> Result<Vec<usize>> {
    let diversity = match p.diversity {
        PdtsDiversity::SumDistance => {
            let denom = (b as f64) * (b.saturating_sub(1) as f64);
            Diversity::Sum { scale: if denom > 0.0 { 1.0 / denom } else { 0.0 } }
        }
        PdtsDiversity::MinDistance => Diversity::Min,
    };
    greedy_msd(&MsdProblem { scores, features, dim, score_coef: 0.5, weight: p.gamma_div, diversity, bonus: None }, b)
}

risk_selector!(Pdts, PdtsParams, "pdts", "PDTS");
