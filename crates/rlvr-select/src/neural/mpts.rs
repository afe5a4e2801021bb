//! MPTS: model-predictive task sampling with an upper-confidence-bound acquisition.

use super::learner::{mean_std, RiskLearner, RiskLearnerParams};
use super::risk::{RiskCore, RiskCoreState, RiskFromRewards};
use crate::error::{invalid, Result};
use crate::oracle::RolloutOracle;
use crate::types::{check_select_args, pack_key, top_b, Candidates, ItemId, Outcome, Prediction, Selection};
use crate::Selector;
use rand::RngCore;
use serde::{Deserialize, Serialize};

/// Parameters of [`Mpts`]. `Default` = the reference sinusoid configuration (thu-rllab/MPTS
/// `sinusoid/main.py`, `trainer_risklearner.py`).
///
/// | name | default | reference |
/// |---|---|---|
/// | `learner` | [`RiskLearnerParams::sinusoid`] | Meta-RL / DR: lr 5e-3, 10 steps, 1 draw, standardised |
/// | `samples` (`M`) | 20 | Meta-RL / DR 50 |
/// | `gamma_mean` (`γ0`) | 1 | all |
/// | `gamma_std` (`γ1`) | 3 | Meta-RL / DR 5 |
/// | `random_ratio` | 0 | DR 0.5 (`add_random`, default on), Meta-RL 0.5 with `--add_random` |
/// | `warmup_steps` | 0 | Meta-RL 50 iterations; DR the first 10% of time steps |
/// | `risk_from_rewards` | `OneMinusSuccess` | see [`RiskFromRewards`] |
/// | `seed` | 0 | initial weights and `predict`'s latent draws |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

    /// Sets the seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Validates the parameters.
    ///
    /// # Errors
    /// `samples < 2` (the std of one draw is undefined), non-finite weights, `random_ratio`
    /// outside `[0, 1]`, invalid learner parameters.
    pub fn check(self) -> Result<Self> {
        self.learner.check()?;
        if self.samples < 2 || self.samples > 1 << 16 {
            return Err(invalid("samples", self.samples, "the UCB needs 2..=65536 latent draws"));
        }
        if !self.gamma_mean.is_finite() || !self.gamma_std.is_finite() {
            return Err(invalid("gamma", format!("{}/{}", self.gamma_mean, self.gamma_std), "must be finite"));
        }
        if !(0.0..=1.0).contains(&self.random_ratio) {
            return Err(invalid("random_ratio", self.random_ratio, "must lie in [0, 1]"));
        }
        Ok(self)
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
/// Features: candidates carry their identifiers ([`Candidates::with_features`]), or a table is
/// attached ([`Mpts::with_feature_table`]); outcomes may omit them (the features of the latest
/// selection are remembered). The risk of an outcome is [`Outcome::risk`], or
/// [`MptsParams::risk_from_rewards`] of its success rate. [`Selector::predict`] returns the
/// predicted *risk* in [`Prediction::mean`] and its std.
///
/// # Errors
/// Missing or mis-sized features ([`crate::SelectError::Features`]), the common input errors,
/// libtorch failures ([`crate::SelectError::Nn`]); the state is unchanged on error.
///
/// # Example
/// ```
/// use rlvr_select::neural::{Mpts, MptsParams};
/// use rlvr_select::{Candidates, NoRollouts, Outcome, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut mpts = Mpts::new(MptsParams::default(), 2)?;
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
    params: MptsParams,
    core: RiskCore,
}

#[derive(Serialize, Deserialize)]
struct MptsState {
    params: MptsParams,
    core: RiskCoreState,
}

impl Mpts {
    /// An MPTS selector for `feature_dim`-dimensional identifiers.
    ///
    /// # Errors
    /// Invalid parameters or `feature_dim == 0`.
    pub fn new(params: MptsParams, feature_dim: usize) -> Result<Self> {
        let params = params.check()?;
        Ok(Self { core: RiskCore::new(feature_dim, params.learner, params.seed)?, params })
    }

    /// Attaches a feature table (row `i` = features of id `i`), used for ids whose features
    /// are not passed. Not part of the saved state.
    ///
    /// # Errors
    /// A table whose length is not a multiple of the feature dimension, or non-finite values.
    pub fn with_feature_table(mut self, table: Vec<f32>) -> Result<Self> {
        self.core.features.set_table(table)?;
        Ok(self)
    }

    /// The parameters.
    pub fn params(&self) -> &MptsParams {
        &self.params
    }

    /// The risk learner.
    pub fn learner(&self) -> &RiskLearner {
        &self.core.learner
    }

    /// UCB scores `γ0 · mean + γ1 · std` of row-major identifiers over `M` fresh draws.
    ///
    /// # Errors
    /// As [`RiskLearner::sample_risks`].
    pub fn acquisition_scores(&self, features: &[f32], rng: &mut dyn RngCore) -> Result<Vec<f64>> {
        let draws = self.core.learner.sample_risks(features, self.params.samples, rng)?;
        let (m, s) = mean_std(&draws, self.params.samples);
        Ok(m.iter()
            .zip(&s)
            .map(|(&m, &s)| self.params.gamma_mean * f64::from(m) + self.params.gamma_std * f64::from(s))
            .collect())
    }
}

/// Positions of `b` uniform picks among `n`, excluding `taken`.
pub(crate) fn fill_uniform(n: usize, taken: &[usize], b: usize, rng: &mut dyn RngCore) -> Vec<usize> {
    let mut mask = vec![false; n];
    for &t in taken {
        mask[t] = true;
    }
    let rest: Vec<usize> = (0..n).filter(|&i| !mask[i]).collect();
    let b = b.min(rest.len());
    rand::seq::index::sample(rng, rest.len(), b).into_iter().map(|j| rest[j]).collect()
}

impl Selector for Mpts {
    fn name(&self) -> &'static str {
        "mpts"
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
            let a = self.acquisition_scores(&feats, rng)?;
            let n_random = ((self.params.random_ratio * batch_size as f64).round() as usize).min(batch_size);
            let salt = rng.next_u64();
            let ids = candidates.ids();
            let mut chosen = top_b(n, batch_size - n_random, |p| pack_key(a[p] as f32, ids[p], salt));
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
        self.core.predict(&candidates, self.params.samples, self.params.seed).map(Some)
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(MptsState { params: self.params, core: self.core.state()? })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: MptsState = serde_json::from_value(state.clone())?;
        let params = s.params.check()?;
        if s.core.learner.params != params.learner {
            return Err(crate::SelectError::InvalidState("learner parameters differ from the MPTS parameters".into()));
        }
        let core = self.core.restore(s.core)?;
        self.params = params;
        self.core = core;
        Ok(())
    }
}
