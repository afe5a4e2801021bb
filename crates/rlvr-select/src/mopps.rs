//! MoPPS: model-predictive prompt selection with a discounted Beta posterior per prompt.

use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{
    check_in_pool, check_select_args, pack_key, top_b, validate_outcomes, Candidates, ItemId, Outcome, Prediction,
    Selection,
};
use crate::Selector;
use rand::RngCore;
use rand_distr::{Beta, Distribution};
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// How MoPPS turns Thompson draws into a batch. In a config file: `acquisition = "top_k"` or
/// `acquisition = { threshold = { lo = 0.3, hi = 0.7 } }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoppsAcquisition {
    /// Top-`B` closest to the target: `argsort (draw - target)^2` (the reference default).
    TopK,
    /// Keep draws inside `[lo, hi]`, uniformly among them when at least `B` are inside,
    /// otherwise ranked by distance to the interval (reference `threshold` mode, `[0.3, 0.7]`).
    Threshold {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
}

/// Parameters of [`Mopps`] (defaults: the released code, MATH recipe). A config file may give
/// any subset; a misspelt field is an error.
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `prior_alpha`, `prior_beta` | 1, 1 | Beta prior `Beta(α0, β0)` | finite, `> 0` |
/// | `decay` | 1.0 | retention `λ` (1 = plain conjugate updates; Countdown/Geo3k recipes: 0.5) | `[0, 1]` |
/// | `target` | 0.5 | target success rate `γ*` | `[0, 1]` |
/// | `acquisition` | `top_k` | see [`MoppsAcquisition`] | threshold: `0 <= lo <= hi <= 1` |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MoppsParams {
    /// Prior successes `α0 > 0`.
    pub prior_alpha: f32,
    /// Prior failures `β0 > 0`.
    pub prior_beta: f32,
    /// Retention `λ ∈ [0, 1]`.
    pub decay: f32,
    /// Target success rate `γ* ∈ [0, 1]`.
    pub target: f64,
    /// Acquisition rule.
    pub acquisition: MoppsAcquisition,
}

impl Default for MoppsParams {
    fn default() -> Self {
        Self { prior_alpha: 1.0, prior_beta: 1.0, decay: 1.0, target: 0.5, acquisition: MoppsAcquisition::TopK }
    }
}

impl MoppsParams {
    /// Sets `decay`.
    #[must_use]
    pub fn decay(mut self, decay: f32) -> Self {
        self.decay = decay;
        self
    }

    /// Sets `target`.
    #[must_use]
    pub fn target(mut self, target: f64) -> Self {
        self.target = target;
        self
    }

    /// Sets the prior `Beta(alpha, beta)`.
    #[must_use]
    pub fn prior(mut self, alpha: f32, beta: f32) -> Self {
        self.prior_alpha = alpha;
        self.prior_beta = beta;
        self
    }

    /// Sets `prior_alpha`.
    #[must_use]
    pub fn prior_alpha(mut self, alpha: f32) -> Self {
        self.prior_alpha = alpha;
        self
    }

    /// Sets `prior_beta`.
    #[must_use]
    pub fn prior_beta(mut self, beta: f32) -> Self {
        self.prior_beta = beta;
        self
    }

    /// Sets the acquisition rule.
    #[must_use]
    pub fn acquisition(mut self, acquisition: MoppsAcquisition) -> Self {
        self.acquisition = acquisition;
        self
    }
}

impl Params for MoppsParams {
    type Error = SelectError;

    /// # Errors
    /// A non-positive or non-finite prior, `decay` outside `[0, 1]`, `target` outside `[0, 1]`,
    /// or an invalid threshold interval.
    fn validate(&self) -> Result<()> {
        if !(self.prior_alpha.is_finite() && self.prior_alpha > 0.0) {
            return Err(invalid("prior_alpha", self.prior_alpha, "must be finite and > 0"));
        }
        if !(self.prior_beta.is_finite() && self.prior_beta > 0.0) {
            return Err(invalid("prior_beta", self.prior_beta, "must be finite and > 0"));
        }
        if !(0.0..=1.0).contains(&self.decay) {
            return Err(invalid("decay", self.decay, "the retention factor must lie in [0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.target) {
            return Err(invalid("target", self.target, "the target success rate must lie in [0, 1]"));
        }
        if let MoppsAcquisition::Threshold { lo, hi } = self.acquisition {
            if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
                return Err(invalid("acquisition.threshold", format!("[{lo}, {hi}]"), "need 0 <= lo <= hi <= 1"));
            }
        }
        Ok(())
    }
}

/// MoPPS (Model Predictive Prompt Selection): each prompt's success rate `γ` has a Beta
/// posterior, discounted towards the prior at each observation; selection draws one Thompson
/// sample per candidate and keeps the `B` draws closest to the target rate.
///
/// ```text
/// observe (prompt rolled out, s successes of k):
///   α ← λ α + (1 − λ) α0 + s
///   β ← λ β + (1 − λ) β0 + (k − s)          (prompts not rolled out are untouched)
/// select:
///   γ̃_τ ~ Beta(α_τ, β_τ) for τ in candidates;  B = argsort_τ (γ̃_τ − γ*)²  [:B]
/// ```
///
/// State: two `f32` and one `u32` per prompt of the pool (12 bytes). See [`MoppsParams`] for
/// the parameters. Selection scores are the Thompson draws `γ̃` (the reference's acquisition
/// score).
///
/// # Errors
/// Candidate/outcome ids outside `0..n_items` ([`SelectError::UnknownId`]), and the common
/// input errors (duplicates, batch too large, bad rewards); the state is untouched on error.
///
/// # Example
/// ```
/// use rl_core::Params;
/// use rlvr_select::{Candidates, Mopps, MoppsParams, NoRollouts, Outcome, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut mopps = Mopps::new(MoppsParams::default().check()?, 100)?;
/// let ids: Vec<u64> = (0..32).collect();
/// let sel = mopps.select(0, Candidates::new(&ids), 8, &mut NoRollouts, &mut rng)?;
/// let outcomes: Vec<Outcome> = sel.ids.iter().map(|&id| Outcome::from_successes(id, 3, 8)).collect::<Result<_, _>>()?;
/// mopps.observe(0, &outcomes, &mut rng)?;
/// assert_eq!(mopps.posterior(sel.ids[0])?, (4.0, 6.0));
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
///
/// ## References
/// Qu et al., "Can Prompt Difficulty be Online Predicted for Accelerating RL Finetuning of
/// Reasoning Models?" (KDD 2026, arXiv:2507.04632); code `thu-rllab/MoPPS`
/// (`recipe/ours/mopps.py`).
#[derive(Debug, Clone)]
pub struct Mopps {
    params: Valid<MoppsParams>,
    n_items: usize,
    alpha: Vec<f32>,
    beta: Vec<f32>,
    n_sampled: Vec<u32>,
    scratch: Vec<u64>,
    draws: Vec<f32>,
}

/// The saved state of a [`Mopps`]; restored only through [`Selector::load_state`], which checks
/// it.
#[derive(Serialize)]
struct MoppsStateRef<'a> {
    params: &'a MoppsParams,
    n_items: usize,
    alpha: &'a [f32],
    beta: &'a [f32],
    n_sampled: &'a [u32],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoppsState {
    params: Valid<MoppsParams>,
    n_items: usize,
    alpha: Vec<f32>,
    beta: Vec<f32>,
    n_sampled: Vec<u32>,
}

impl Mopps {
    /// MoPPS over the pool `0..n_items`, every prompt at the prior.
    ///
    /// # Errors
    /// None today (the parameters are checked); kept fallible for pool-size limits.
    pub fn new(params: Valid<MoppsParams>, n_items: usize) -> Result<Self> {
        Ok(Self {
            alpha: vec![params.prior_alpha; n_items],
            beta: vec![params.prior_beta; n_items],
            params,
            n_items,
            n_sampled: vec![0; n_items],
            scratch: Vec::new(),
            draws: Vec::new(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &MoppsParams {
        &self.params
    }

    /// Pool size.
    pub fn n_items(&self) -> usize {
        self.n_items
    }

    /// Bytes of per-prompt state.
    pub const fn bytes_per_prompt() -> usize {
        2 * std::mem::size_of::<f32>() + std::mem::size_of::<u32>()
    }

    /// The posterior `(α, β)` of `id`.
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn posterior(&self, id: ItemId) -> Result<(f32, f32)> {
        check_in_pool([id], self.n_items)?;
        Ok((self.alpha[id as usize], self.beta[id as usize]))
    }

    /// Times `id` was observed.
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn times_sampled(&self, id: ItemId) -> Result<u32> {
        check_in_pool([id], self.n_items)?;
        Ok(self.n_sampled[id as usize])
    }

    /// Warm start from offline statistics (the reference's `bandit_init`):
    /// `α = weight · successes + α0`, `β = weight · failures + β0` (reference weight: 3).
    ///
    /// # Errors
    /// Unknown id, or a negative / non-finite argument.
    pub fn warm_start(&mut self, id: ItemId, successes: f32, failures: f32, weight: f32) -> Result<()> {
        check_in_pool([id], self.n_items)?;
        for (name, v) in [("successes", successes), ("failures", failures), ("weight", weight)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(invalid(name, v, "must be finite and >= 0"));
            }
        }
        self.alpha[id as usize] = weight * successes + self.params.prior_alpha;
        self.beta[id as usize] = weight * failures + self.params.prior_beta;
        Ok(())
    }

    fn draw(&self, i: usize, rng: &mut dyn RngCore) -> f32 {
        // α, β > 0 always (α0, β0 > 0 and the updates only add non-negative amounts).
        match Beta::new(f64::from(self.alpha[i]), f64::from(self.beta[i])) {
            Ok(b) => b.sample(rng) as f32,
            Err(_) => (self.alpha[i] / (self.alpha[i] + self.beta[i])).clamp(0.0, 1.0),
        }
    }
}

impl Selector for Mopps {
    fn name(&self) -> &'static str {
        "mopps"
    }

    fn select(
        &mut self,
        _step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.scratch)?;
        check_in_pool(candidates.ids().iter().copied(), self.n_items)?;
        let salt = rng.next_u64();
        let mut draws = std::mem::take(&mut self.draws);
        draws.clear();
        draws.extend(candidates.ids().iter().map(|&id| self.draw(id as usize, rng)));
        let target = self.params.target as f32;
        let score = |g: f32| -> f32 {
            match self.params.acquisition {
                MoppsAcquisition::TopK => -(g - target) * (g - target),
                MoppsAcquisition::Threshold { lo, hi } => {
                    let d = (lo as f32 - g).max(g - hi as f32).max(0.0);
                    -d * d
                }
            }
        };
        let ids = candidates.ids();
        let best = top_b(ids.len(), batch_size, |p| pack_key(score(draws[p]), ids[p], salt));
        let sel = Selection {
            ids: best.iter().map(|&p| ids[p]).collect(),
            scores: best.iter().map(|&p| f64::from(draws[p])).collect(),
            ..Selection::default()
        };
        self.draws = draws;
        Ok(sel)
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
        let k = validate_outcomes(outcomes, Some(self.n_items), &mut self.scratch)? as f32;
        let p = *self.params;
        let lam = p.decay;
        for o in outcomes {
            let i = o.id as usize;
            let s = o.successes() as f32;
            self.alpha[i] = lam * self.alpha[i] + (1.0 - lam) * p.prior_alpha + s;
            self.beta[i] = lam * self.beta[i] + (1.0 - lam) * p.prior_beta + (k - s);
            self.n_sampled[i] = self.n_sampled[i].saturating_add(1);
        }
        Ok(())
    }

    fn predict(&self, candidates: Candidates<'_>) -> Result<Option<Vec<Prediction>>> {
        check_in_pool(candidates.ids().iter().copied(), self.n_items)?;
        Ok(Some(
            candidates
                .ids()
                .iter()
                .map(|&id| {
                    let (a, b) = (f64::from(self.alpha[id as usize]), f64::from(self.beta[id as usize]));
                    let n = a + b;
                    Prediction { mean: a / n, std: Some((a * b / (n * n * (n + 1.0))).sqrt()), class_probs: None }
                })
                .collect(),
        ))
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(MoppsStateRef {
            params: &self.params,
            n_items: self.n_items,
            alpha: &self.alpha,
            beta: &self.beta,
            n_sampled: &self.n_sampled,
        })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: MoppsState = serde_json::from_value(state.clone())?;
        let new = Mopps {
            params: s.params,
            n_items: s.n_items,
            alpha: s.alpha,
            beta: s.beta,
            n_sampled: s.n_sampled,
            scratch: Vec::new(),
            draws: Vec::new(),
        };
        let n = new.n_items;
        if new.alpha.len() != n || new.beta.len() != n || new.n_sampled.len() != n {
            return Err(SelectError::InvalidState(format!("MoPPS arrays must have n_items = {n} entries")));
        }
        if new.alpha.iter().chain(&new.beta).any(|x| !(x.is_finite() && *x > 0.0)) {
            return Err(SelectError::InvalidState("MoPPS alpha/beta must be finite and > 0".into()));
        }
        *self = new;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoRollouts;

    /// Hand-computed from the update equations (λ = 0.5, α0 = β0 = 1, k = 8):
    ///   start (1, 1); s = 6: α = 0.5·1 + 0.5·1 + 6 = 7,      β = 0.5·1 + 0.5·1 + 2 = 3
    ///                 s = 0: α = 0.5·7 + 0.5 + 0 = 4,        β = 0.5·3 + 0.5 + 8 = 10
    ///                 s = 8: α = 0.5·4 + 0.5 + 8 = 10.5,     β = 0.5·10 + 0.5 + 0 = 5.5
    #[test]
    fn discounted_beta_updates_match_hand_computation() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(0);
        let mut m = Mopps::new(MoppsParams::default().decay(0.5).check()?, 4)?;
        for (s, want) in [(6, (7.0, 3.0)), (0, (4.0, 10.0)), (8, (10.5, 5.5))] {
            m.observe(0, &[Outcome::from_successes(2, s, 8)?], &mut rng)?;
            assert_eq!(m.posterior(2)?, want);
        }
        assert_eq!(m.posterior(1)?, (1.0, 1.0));
        assert_eq!(m.times_sampled(2)?, 3);
        // λ = 1: plain conjugate accumulation.
        let mut m = Mopps::new(MoppsParams::default().check()?, 4)?;
        m.observe(0, &[Outcome::from_successes(0, 3, 8)?], &mut rng)?;
        m.observe(1, &[Outcome::from_successes(0, 5, 8)?], &mut rng)?;
        assert_eq!(m.posterior(0)?, (9.0, 9.0));
        Ok(())
    }

    #[test]
    fn selects_prompts_near_the_target() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(3);
        let mut m = Mopps::new(MoppsParams::default().check()?, 30)?;
        // 0..10 easy (always solved), 10..20 medium, 20..30 hard.
        for _ in 0..20 {
            let o: Vec<Outcome> = (0..30u64)
                .map(|id| {
                    Outcome::from_successes(
                        id,
                        if id < 10 {
                            8
                        } else if id < 20 {
                            4
                        } else {
                            0
                        },
                        8,
                    )
                })
                .collect::<Result<_>>()?;
            m.observe(0, &o, &mut rng)?;
        }
        let ids: Vec<u64> = (0..30).collect();
        let sel = m.select(0, Candidates::new(&ids), 10, &mut NoRollouts, &mut rng)?;
        assert!(sel.ids.iter().all(|&id| (10..20).contains(&id)), "{:?}", sel.ids);
        Ok(())
    }

    #[test]
    fn bad_input_leaves_state_untouched() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(0);
        let mut m = Mopps::new(MoppsParams::default().check()?, 4)?;
        let before = m.save_state()?;
        let bad = [Outcome::from_successes(0, 3, 8)?, Outcome::new(1, vec![f32::NAN; 8])];
        assert!(matches!(m.observe(0, &bad, &mut rng), Err(SelectError::NonFiniteReward { id: 1, .. })));
        let bad = [Outcome::from_successes(0, 3, 8)?, Outcome::from_successes(9, 3, 8)?];
        assert!(matches!(m.observe(0, &bad, &mut rng), Err(SelectError::UnknownId { id: 9, .. })));
        let bad = [Outcome::from_successes(0, 3, 8)?, Outcome::from_successes(1, 3, 4)?];
        assert!(matches!(m.observe(0, &bad, &mut rng), Err(SelectError::GroupSizeMismatch { id: 1, .. })));
        assert_eq!(m.save_state()?, before);
        Ok(())
    }
}
