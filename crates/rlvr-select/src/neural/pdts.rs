//! PDTS: posterior sampling plus diversity over the MPTS risk learner.

use super::learner::{RiskLearner, RiskLearnerParams};
use super::mpts::fill_uniform;
use super::risk::{RiskCore, RiskCoreState, RiskFromRewards};
use crate::diversity::{greedy_msd, Diversity, MsdProblem};
use crate::error::{invalid, Result};
use crate::oracle::RolloutOracle;
use crate::types::{check_select_args, Candidates, ItemId, Outcome, Prediction, Selection};
use crate::Selector;
use rand::RngCore;
use serde::{Deserialize, Serialize};

/// The diversity term of PDTS's greedy max-sum diversification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
/// | `diversity` | `SumDistance` | DR `MinDistance` |
/// | `gamma_div` | 1.0 | DR 0.05 (Pusher), 8 (LunarLander), 1 (ErgoReacher) |
/// | `predict_samples` | 20 | draws for [`Selector::predict`] only (selection uses one draw) |
/// | `random_ratio` | 0 | DR keeps MPTS's random half |
/// | `warmup_steps` | 0 | DR: uniform for the first 10% of time steps |
/// | `risk_from_rewards` | `OneMinusSuccess` | see [`RiskFromRewards`] |
/// | `seed` | 0 | initial weights |
///
/// Candidate sets are meant to be large: 32× the batch in the sinusoid, 64× in DR.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

    /// Sets the seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Validates the parameters.
    ///
    /// # Errors
    /// Negative or non-finite `gamma_div`, `predict_samples == 0`, `random_ratio` outside
    /// `[0, 1]`, invalid learner parameters.
    pub fn check(self) -> Result<Self> {
        self.learner.check()?;
        if !(self.gamma_div.is_finite() && self.gamma_div >= 0.0) {
            return Err(invalid("gamma_div", self.gamma_div, "must be finite and >= 0"));
        }
        if self.predict_samples == 0 || self.predict_samples > 1 << 16 {
            return Err(invalid("predict_samples", self.predict_samples, "must lie in 1..=65536"));
        }
        if !(0.0..=1.0).contains(&self.random_ratio) {
            return Err(invalid("random_ratio", self.random_ratio, "must lie in [0, 1]"));
        }
        Ok(self)
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
/// Cost: one decoder pass per candidate plus `O(B · N · d)` for the greedy batch.
/// Features, outcomes and `predict` as [`super::Mpts`].
///
/// # Errors
/// As [`super::Mpts`].
///
/// # Example
/// ```
/// use rlvr_select::neural::{Pdts, PdtsParams};
/// use rlvr_select::{Candidates, NoRollouts, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut pdts = Pdts::new(PdtsParams::default(), 2)?;
/// let ids: Vec<u64> = (0..512).collect();
/// let x: Vec<f32> = (0..1024).map(|i| (i % 13) as f32 * 0.3).collect();
/// let sel = pdts.select(0, Candidates::with_features(&ids, &x, 2)?, 16, &mut NoRollouts, &mut rng)?;
/// assert_eq!(sel.ids.len(), 16);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug)]
pub struct Pdts {
    params: PdtsParams,
    core: RiskCore,
}

#[derive(Serialize, Deserialize)]
struct PdtsState {
    params: PdtsParams,
    core: RiskCoreState,
}

impl Pdts {
    /// A PDTS selector for `feature_dim`-dimensional identifiers.
    ///
    /// # Errors
    /// Invalid parameters or `feature_dim == 0`.
    pub fn new(params: PdtsParams, feature_dim: usize) -> Result<Self> {
        let params = params.check()?;
        Ok(Self { core: RiskCore::new(feature_dim, params.learner, params.seed)?, params })
    }

    /// Attaches a feature table (row `i` = features of id `i`). Not part of the saved state.
    ///
    /// # Errors
    /// A table whose length is not a multiple of the feature dimension, or non-finite values.
    pub fn with_feature_table(mut self, table: Vec<f32>) -> Result<Self> {
        self.core.features.set_table(table)?;
        Ok(self)
    }

    /// The parameters.
    pub fn params(&self) -> &PdtsParams {
        &self.params
    }

    /// The risk learner.
    pub fn learner(&self) -> &RiskLearner {
        &self.core.learner
    }

    /// Greedy diversified positions of `b` picks given scores and row-major features.
    ///
    /// # Errors
    /// As [`greedy_msd`].
    pub fn diversify(&self, scores: &[f64], features: &[f32], b: usize) -> Result<Vec<usize>> {
        let diversity = match self.params.diversity {
            PdtsDiversity::SumDistance => {
                let denom = (b as f64) * (b.saturating_sub(1) as f64);
                Diversity::Sum { scale: if denom > 0.0 { 1.0 / denom } else { 0.0 } }
            }
            PdtsDiversity::MinDistance => Diversity::Min,
        };
        greedy_msd(
            &MsdProblem {
                scores,
                features,
                dim: self.core.features.dim,
                score_coef: 0.5,
                weight: self.params.gamma_div,
                diversity,
                bonus: None,
            },
            b,
        )
    }
}

impl Selector for Pdts {
    fn name(&self) -> &'static str {
        "pdts"
    }

    fn select(
        &mut self,
        step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.core.scratch)?;
        let feats = self.core.features.gather_candidates(&candidates)?;
        let n = candidates.len();
        let (chosen, scores): (Vec<usize>, Vec<f64>) = if step < self.params.warmup_steps {
            (rand::seq::index::sample(rng, n, batch_size).into_vec(), vec![0.0; n])
        } else {
            let a: Vec<f64> = self.core.learner.sample_risks(&feats, 1, rng)?.into_iter().map(f64::from).collect();
            let n_random = ((self.params.random_ratio * batch_size as f64).round() as usize).min(batch_size);
            let mut chosen =
                if batch_size > n_random { self.diversify(&a, &feats, batch_size - n_random)? } else { Vec::new() };
            let fill = fill_uniform(n, &chosen, n_random, rng);
            chosen.extend(fill);
            (chosen, a)
        };
        let ids: Vec<ItemId> = chosen.iter().map(|&p| candidates.ids()[p]).collect();
        self.core.features.remember(candidates.ids(), &feats, &chosen);
        Ok(Selection { scores: chosen.iter().map(|&p| scores[p]).collect(), ids, ..Selection::default() })
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], rng: &mut dyn RngCore) -> Result<()> {
        self.core.observe(outcomes, self.params.risk_from_rewards, rng)
    }

    fn predict(&self, candidates: Candidates<'_>) -> Result<Option<Vec<Prediction>>> {
        self.core.predict(&candidates, self.params.predict_samples, self.params.seed).map(Some)
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(PdtsState { params: self.params, core: self.core.state()? })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: PdtsState = serde_json::from_value(state.clone())?;
        let params = s.params.check()?;
        if s.core.learner.params != params.learner {
            return Err(crate::SelectError::InvalidState("learner parameters differ from the PDTS parameters".into()));
        }
        let core = self.core.restore(s.core)?;
        self.params = params;
        self.core = core;
        Ok(())
    }
}
