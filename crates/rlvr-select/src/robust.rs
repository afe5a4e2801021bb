//! Robust baselines of MPTS/PDTS: DRM (CVaR by exhaustive evaluation) and GDRM (group-DRO
//! exponentiated loss weights). Pure Rust, no libtorch.

use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{check_select_args, pack_key, top_b, Candidates, ItemId, Outcome, Selection, Shortfall};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// The risk an [`Outcome`] without an explicit [`Outcome::risk`] stands for. In a config file:
/// `"one_minus_success"` or `"informativeness"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskFromRewards {
    /// `1 − success rate` (the crate-wide convention of [`Outcome::risk`]): high risk = hard
    /// task. The robust-adaptation setting of MPTS/PDTS/DRM/GDRM.
    #[default]
    OneMinusSuccess,
    /// `4 p (1 − p)` with `p` the success rate: the normalised Bernoulli variance, maximal at
    /// `p = 1/2`. Selecting high "risk" then means selecting informative prompts (non-zero GRPO
    /// advantage), which is how MPTS/PDTS are run on the RLVR prompt-pool simulator. (ours)
    Informativeness,
}

impl RiskFromRewards {
    /// The risk of success rate `p`.
    pub fn apply(self, p: f64) -> f64 {
        match self {
            Self::OneMinusSuccess => 1.0 - p,
            Self::Informativeness => 4.0 * p * (1.0 - p),
        }
    }
}

/// Validated risks of outcomes: `risk` when set (finite), else `mode(success rate)` of
/// non-empty, finite rewards in `[0, 1]`; ids must be unique.
pub(crate) fn risks(outcomes: &[Outcome], mode: RiskFromRewards) -> Result<Vec<f64>> {
    let mut ids: Vec<ItemId> = Vec::with_capacity(outcomes.len());
    let mut out = Vec::with_capacity(outcomes.len());
    for o in outcomes {
        ids.push(o.id);
        if let Some(r) = o.risk {
            if !r.is_finite() {
                return Err(invalid("risk", format!("{r} (id {})", o.id), "risks must be finite"));
            }
            out.push(f64::from(r));
            continue;
        }
        if o.rewards.is_empty() {
            return Err(SelectError::EmptyGroup { id: o.id });
        }
        for (index, &value) in o.rewards.iter().enumerate() {
            if !value.is_finite() {
                return Err(SelectError::NonFiniteReward { id: o.id, index, value });
            }
            if !(0.0..=1.0).contains(&value) {
                return Err(SelectError::RewardOutOfRange { id: o.id, index, value });
            }
        }
        out.push(mode.apply(o.success_rate()));
    }
    let mut scratch = Vec::new();
    crate::types::ensure_unique(&ids, "outcomes", &mut scratch)?;
    Ok(out)
}

/// Parameters of [`Drm`].
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `group_size` | 1 | rollouts (evaluations) per candidate; the sinusoid evaluates each task once | `>= 1` |
/// | `risk_from_rewards` | `one_minus_success` | risk of outcomes without an explicit risk | |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DrmParams {
    /// Rollouts per candidate.
    pub group_size: usize,
    /// Risk of outcomes without an explicit risk.
    pub risk_from_rewards: RiskFromRewards,
}

impl Default for DrmParams {
    fn default() -> Self {
        Self { group_size: 1, risk_from_rewards: RiskFromRewards::OneMinusSuccess }
    }
}

impl DrmParams {
    /// Sets `group_size`.
    #[must_use]
    pub fn group_size(mut self, k: usize) -> Self {
        self.group_size = k;
        self
    }

    /// Sets `risk_from_rewards`.
    #[must_use]
    pub fn risk_from_rewards(mut self, mode: RiskFromRewards) -> Self {
        self.risk_from_rewards = mode;
        self
    }
}

impl Params for DrmParams {
    type Error = SelectError;

    /// # Errors
    /// `group_size == 0`.
    fn validate(&self) -> Result<()> {
        if self.group_size == 0 {
            return Err(invalid("group_size", 0, "need at least one rollout per candidate"));
        }
        Ok(())
    }
}

/// DRM (distributionally robust meta-learning by CVaR task sampling): evaluate **every**
/// candidate through the oracle and train on the `B` with the highest risk — the empirical
/// CVaR_α objective with `α = 1 − B/|C|` (reference sinusoid: 32 candidates, the worst 16,
/// `α = 0.5`). The evaluations are returned as [`Selection::prefetched`] (the trainer reuses
/// them, as the reference reuses the computed meta-losses) and counted in
/// [`Selection::selection_rollouts`]: this is the cost MPTS/PDTS avoid.
///
/// # Errors
/// [`SelectError::OracleUnavailable`] with a [`crate::NoRollouts`] oracle, oracle errors, the
/// common input errors. A dry oracle gives a short batch with [`Shortfall::OracleDry`].
///
/// # Example
/// ```
/// use rl_core::Params;
/// use rlvr_select::{Candidates, Drm, DrmParams, FnOracle, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// // task i fails with probability i / 10
/// let mut oracle = FnOracle::new(|id, k, _rng: &mut dyn rand::RngCore| Ok(vec![if id < 5 { 1.0 } else { 0.0 }; k]));
/// let ids: Vec<u64> = (0..10).collect();
/// let sel = Drm::new(DrmParams::default().check()?)?.select(0, Candidates::new(&ids), 5, &mut oracle, &mut rng)?;
/// assert!(sel.ids.iter().all(|&id| id >= 5));
/// assert_eq!(sel.selection_rollouts, 10);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Drm {
    params: Valid<DrmParams>,
    scratch: Vec<u64>,
}

/// The saved state of [`Drm`] and [`Gdrm`]: checked parameters (and GDRM's weights).
#[derive(Serialize)]
struct RobustStateRef<'a, P> {
    params: &'a P,
    #[serde(skip_serializing_if = "Option::is_none")]
    q: Option<&'a [f32]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DrmState {
    params: Valid<DrmParams>,
}

impl Drm {
    /// A DRM selector.
    ///
    /// # Errors
    /// None today (the parameters are checked); fallible like every constructor.
    pub fn new(params: Valid<DrmParams>) -> Result<Self> {
        Ok(Self { params, scratch: Vec::new() })
    }
}

impl Selector for Drm {
    fn name(&self) -> &'static str {
        "drm"
    }

    fn select(
        &mut self,
        _step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.scratch)?;
        let before = oracle.rollouts_spent();
        let outcomes = match oracle.rollout(candidates.ids(), self.params.group_size, rng) {
            Err(SelectError::OracleUnavailable { .. }) => {
                return Err(SelectError::OracleUnavailable { selector: "drm" })
            }
            other => other?,
        };
        for (o, &id) in outcomes.iter().zip(candidates.ids()) {
            if o.id != id {
                return Err(SelectError::OracleMismatch { expected: id, got: o.id });
            }
        }
        let r = risks(&outcomes, self.params.risk_from_rewards)?;
        let salt = rng.next_u64();
        let chosen = top_b(outcomes.len(), batch_size, |p| pack_key(r[p] as f32, outcomes[p].id, salt));
        let shortfall = if chosen.len() < batch_size { Some(Shortfall::OracleDry) } else { None };
        Ok(Selection {
            ids: chosen.iter().map(|&p| outcomes[p].id).collect(),
            scores: chosen.iter().map(|&p| r[p]).collect(),
            weights: None,
            prefetched: chosen.iter().map(|&p| outcomes[p].clone()).collect(),
            selection_rollouts: oracle.rollouts_spent().saturating_sub(before),
            shortfall,
        })
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
        risks(outcomes, self.params.risk_from_rewards).map(|_| ())
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(RobustStateRef { params: self.params.get(), q: None })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: DrmState = serde_json::from_value(state.clone())?;
        *self = Self::new(s.params)?;
        Ok(())
    }
}

/// Parameters of [`Gdrm`].
///
/// | name | default | reference | range |
/// |---|---|---|---|
/// | `step_size` (`η`) | 1e-3 | sinusoid `robust_step_size`; DR `gdroweight` 0.01 | finite, `>= 0` |
/// | `risk_from_rewards` | `one_minus_success` | risk of outcomes without an explicit risk | |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GdrmParams {
    /// Exponentiated-gradient step size `η ≥ 0`.
    pub step_size: f64,
    /// Risk of outcomes without an explicit risk.
    pub risk_from_rewards: RiskFromRewards,
}

impl Default for GdrmParams {
    fn default() -> Self {
        Self { step_size: 1e-3, risk_from_rewards: RiskFromRewards::OneMinusSuccess }
    }
}

impl GdrmParams {
    /// Sets `step_size`.
    #[must_use]
    pub fn step_size(mut self, step_size: f64) -> Self {
        self.step_size = step_size;
        self
    }

    /// Sets `risk_from_rewards`.
    #[must_use]
    pub fn risk_from_rewards(mut self, mode: RiskFromRewards) -> Self {
        self.risk_from_rewards = mode;
        self
    }
}

impl Params for GdrmParams {
    type Error = SelectError;

    /// # Errors
    /// Negative or non-finite `step_size`.
    fn validate(&self) -> Result<()> {
        if !(self.step_size.is_finite() && self.step_size >= 0.0) {
            return Err(invalid("step_size", self.step_size, "must be finite and >= 0"));
        }
        Ok(())
    }
}

/// GDRM (group distributionally robust optimisation, Sagawa et al. 2020, as the MPTS/PDTS
/// baseline): not a selector proper but a reweighting. It takes the first `B` candidates and
/// keeps one weight per batch slot, updated by exponentiated gradient ascent on the observed
/// risks:
///
/// ```text
/// observe:  q_i ← q_i · exp(η ℓ_i);   q ← B · q / Σ q          (q_0 = 1)
/// loss   =  Σ_i q_i ℓ_i
/// ```
///
/// The reference updates `q` with the batch's own losses *before* weighting them; a trainer
/// reproduces that by calling [`Selector::observe`] and then reading [`Gdrm::weights`].
/// [`Selection::weights`] holds the weights as they are at selection time.
///
/// # Errors
/// Outcome batches whose size differs from the weight vector's (once set), bad risks.
///
/// # Example
/// ```
/// use rl_core::Params;
/// use rlvr_select::{Candidates, Gdrm, GdrmParams, NoRollouts, Outcome, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut g = Gdrm::new(GdrmParams::default().step_size(1.0).check()?)?;
/// let ids = [3u64, 4];
/// let sel = g.select(0, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?;
/// assert_eq!(sel.weights, Some(vec![1.0, 1.0]));
/// let o = |id, r| Outcome { risk: Some(r), ..Outcome::new(id, vec![]) };
/// g.observe(0, &[o(3, 0.0), o(4, 1.0)], &mut rng)?;
/// let w = g.weights();
/// assert!((w[0] + w[1] - 2.0).abs() < 1e-6 && w[1] > w[0]);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gdrm {
    params: Valid<GdrmParams>,
    /// Stored as `f32` so the state round-trips exactly through JSON text.
    q: Vec<f32>,
    scratch: Vec<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GdrmState {
    params: Valid<GdrmParams>,
    q: Vec<f32>,
}

impl Gdrm {
    /// A GDRM reweighter.
    ///
    /// # Errors
    /// None today (the parameters are checked); fallible like every constructor.
    pub fn new(params: Valid<GdrmParams>) -> Result<Self> {
        Ok(Self { params, q: Vec::new(), scratch: Vec::new() })
    }

    /// The current per-slot weights (empty before the first batch; they sum to the batch size).
    pub fn weights(&self) -> &[f32] {
        &self.q
    }
}

impl Selector for Gdrm {
    fn name(&self) -> &'static str {
        "gdrm"
    }

    fn select(
        &mut self,
        _step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        _rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.scratch)?;
        if self.q.len() != batch_size {
            self.q = vec![1.0; batch_size];
        }
        Ok(Selection {
            ids: candidates.ids()[..batch_size].to_vec(),
            scores: vec![0.0; batch_size],
            weights: Some(self.q.clone()),
            ..Selection::default()
        })
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let r = risks(outcomes, self.params.risk_from_rewards)?;
        if !self.q.is_empty() && self.q.len() != r.len() {
            return Err(SelectError::GroupSizeMismatch { id: outcomes[0].id, expected: self.q.len(), got: r.len() });
        }
        let mut q = if self.q.is_empty() { vec![1.0; r.len()] } else { self.q.clone() };
        // log-domain update keeps large η·ℓ finite
        let logs: Vec<f64> = q.iter().zip(&r).map(|(w, l)| f64::from(*w).ln() + self.params.step_size * l).collect();
        let mx = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = logs.iter().map(|l| (l - mx).exp()).sum();
        for (w, l) in q.iter_mut().zip(&logs) {
            *w = ((l - mx).exp() / s * r.len() as f64) as f32;
        }
        self.q = q;
        Ok(())
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(RobustStateRef { params: self.params.get(), q: Some(&self.q) })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: GdrmState = serde_json::from_value(state.clone())?;
        if s.q.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(SelectError::InvalidState("GDRM weights must be finite and > 0".into()));
        }
        let mut g = Self::new(s.params)?;
        g.q = s.q;
        *self = g;
        Ok(())
    }
}
