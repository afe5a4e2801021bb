//! Policy-loss variants and their parameters (tch-free; the losses themselves need feature
//! `tch`).
//!
//! All ratio losses use the token log-ratio `δ = logp − old_logp` against the proximal policy
//! and `r = exp(δ)`; `A` is the advantage of the token's sequence (or the token).
//!
//! | loss | per-token loss ℓ | defaults (reference) |
//! |---|---|---|
//! | [`PolicyLoss::Ppo`] | `max(−A r, −A clip(r, 1−ε_l, 1+ε_h))`; dual clip for `A<0`: `min(·, −A c)`; optional ratio cap δ on the unclipped branch | ε 0.2/0.2, c 3.0 (verl `vanilla`); DAPO clip-higher ε_h 0.28; cap off (TRL `delta`) |
//! | [`PolicyLoss::Gspo`] | PPO clip on the sequence ratio `s = exp(mean_t δ)`, token form `log s_t = sg(log s) + logp − sg(logp)`, `log s ≤ 10` | ε 3e-4/4e-4 (GSPO paper, verl recipe) |
//! | [`PolicyLoss::Cispo`] | `−sg(clip(r, 1−ε_l, 1+ε_h)) A logp` | ε 0.2/0.2 (verl `cispo`; TRL/ScaleRL: no lower bound, ε_h 4.0) |
//! | [`PolicyLoss::Sapo`] | `−A σ(τ (r−1)) 4/τ`, τ = τ_pos if `A>0` else τ_neg | 1.0/1.05 (verl, TRL) |
//! | [`PolicyLoss::Reinforce`] | `−A logp` | (verl `gpg`) |
//! | [`PolicyLoss::Gmpo`] | per sequence `−Ā exp(mean_t clip_sign(δ, −ε_l, ε_h))`, broadcast to its tokens | ε 0.4/0.4 (GMPO paper; verl `geo_mean`) |
//! | [`PolicyLoss::ClipCov`] | PPO clip (no dual clip), and the gradient of a random `ratio · N` tokens with covariance `(A − Ā)(logp − mean logp)` in `(lb, ub)` is cut | ratio 2e-4, bounds (1, 5) (Cui et al. 2025, verl `clip_cov`) |
//! | [`PolicyLoss::KlCov`] | `−A r`, plus `β |δ|` on the top `ratio · N` tokens by that covariance | ratio 2e-4, β 0.1 (verl yaml `ppo_kl_coef`; `kl_cov`) |
//! | [`PolicyLoss::Lpo`] | `K sg(c_k) clip(δ_b, log(1−ε), log(1+ε))` | see [`crate::lpo`] |
//!
//! Numerical guards as in the references: PPO/CISPO/SAPO ratios behave as if `δ` were clamped
//! to ±20 (verl); GSPO's log sequence ratio is capped at 10 (verl); GMPO's mean log-ratio is
//! clamped to ±20. Clip-Cov and KL-Cov exponentiate `δ` unclamped, as verl does.
//!
//! Every params struct reads from a config with every field optional and misspelt fields
//! rejected (`#[serde(default, deny_unknown_fields)]`), and is checked by the parent
//! [`crate::LossParams`], which names the field (`policy.eps_low`).

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result, RlvrCoreError};
use crate::lpo::LpoParams;

fn check_eps(prefix: &str, low: f64, high: f64) -> Result<()> {
    if !(low.is_finite() && (0.0..=1.0).contains(&low)) {
        return Err(invalid(&format!("{prefix}.eps_low"), low, "must be in [0, 1]"));
    }
    if !(high.is_finite() && high >= 0.0) {
        return Err(invalid(&format!("{prefix}.eps_high"), high, "must be finite and >= 0"));
    }
    Ok(())
}

fn check_cap(prefix: &str, cap: Option<f64>, eps_high: f64) -> Result<()> {
    match cap {
        Some(d) if !(d.is_finite() && d > 1.0 + eps_high) => {
            Err(invalid(&format!("{prefix}.ratio_cap"), d, "must be finite and > 1 + eps_high"))
        }
        _ => Ok(()),
    }
}

macro_rules! params_impl {
    ($ty:ty, $name:literal) => {
        impl rl_core::Params for $ty {
            type Error = RlvrCoreError;
            fn validate(&self) -> Result<()> {
                self.validate_at($name)
            }
        }
    };
}

/// PPO clip (verl `vanilla`, TRL `grpo`/`dapo`, OpenRLHF `ppo`, AReaL).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `eps_low` | `0.2` | lower clip ε_l (verl `clip_ratio_low`) | [0, 1] |
/// | `eps_high` | `0.2` | upper clip ε_h (verl `clip_ratio_high`; DAPO: 0.28) | ≥ 0 |
/// | `dual_clip` | `Some(3.0)` | dual-clip constant c for `A < 0` (verl `clip_ratio_c`) | > 1 |
/// | `ratio_cap` | `None` | TRL `delta`: two-sided cap δ on the unclipped ratio (INTELLECT-2) | > 1 + eps_high |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoParams {
    /// Lower clip ε_l.
    pub eps_low: f64,
    /// Upper clip ε_h.
    pub eps_high: f64,
    /// Dual-clip constant c for negative advantages.
    pub dual_clip: Option<f64>,
    /// Two-sided cap δ on the unclipped ratio.
    pub ratio_cap: Option<f64>,
}

impl Default for PpoParams {
    fn default() -> Self {
        Self { eps_low: 0.2, eps_high: 0.2, dual_clip: Some(3.0), ratio_cap: None }
    }
}

impl PpoParams {
    /// DAPO's clip-higher: ε_l 0.2, ε_h 0.28, no dual clip.
    pub fn dapo() -> Self {
        Self { eps_low: 0.2, eps_high: 0.28, dual_clip: None, ratio_cap: None }
    }
    /// Sets both clip bounds.
    #[must_use]
    pub fn eps(mut self, low: f64, high: f64) -> Self {
        self.eps_low = low;
        self.eps_high = high;
        self
    }
    /// Sets `eps_low`.
    #[must_use]
    pub fn eps_low(mut self, v: f64) -> Self {
        self.eps_low = v;
        self
    }
    /// Sets `eps_high`.
    #[must_use]
    pub fn eps_high(mut self, v: f64) -> Self {
        self.eps_high = v;
        self
    }
    /// Sets the dual-clip constant.
    #[must_use]
    pub fn dual_clip(mut self, c: Option<f64>) -> Self {
        self.dual_clip = c;
        self
    }
    /// Sets the two-sided ratio cap.
    #[must_use]
    pub fn ratio_cap(mut self, delta: Option<f64>) -> Self {
        self.ratio_cap = delta;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        check_eps(prefix, self.eps_low, self.eps_high)?;
        if let Some(c) = self.dual_clip {
            if !(c.is_finite() && c > 1.0) {
                return Err(invalid(&format!("{prefix}.dual_clip"), c, "must be finite and > 1"));
            }
        }
        check_cap(prefix, self.ratio_cap, self.eps_high)
    }
}
params_impl!(PpoParams, "ppo");

/// GSPO (Zheng et al. 2025, arXiv 2507.18071; verl `gspo`, TRL `importance_sampling_level="sequence"`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `eps_low` | `3e-4` | lower clip (GSPO paper / verl GSPO recipe `clip_ratio_low`) | [0, 1] |
/// | `eps_high` | `4e-4` | upper clip (`clip_ratio_high`) | ≥ 0 |
/// | `ratio_cap` | `None` | TRL `delta` | > 1 + eps_high |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GspoParams {
    /// Lower clip ε_l.
    pub eps_low: f64,
    /// Upper clip ε_h.
    pub eps_high: f64,
    /// Two-sided cap δ on the unclipped ratio.
    pub ratio_cap: Option<f64>,
}

impl Default for GspoParams {
    fn default() -> Self {
        Self { eps_low: 3e-4, eps_high: 4e-4, ratio_cap: None }
    }
}

impl GspoParams {
    /// Sets both clip bounds.
    #[must_use]
    pub fn eps(mut self, low: f64, high: f64) -> Self {
        self.eps_low = low;
        self.eps_high = high;
        self
    }
    /// Sets `eps_low`.
    #[must_use]
    pub fn eps_low(mut self, v: f64) -> Self {
        self.eps_low = v;
        self
    }
    /// Sets `eps_high`.
    #[must_use]
    pub fn eps_high(mut self, v: f64) -> Self {
        self.eps_high = v;
        self
    }
    /// Sets the two-sided ratio cap.
    #[must_use]
    pub fn ratio_cap(mut self, delta: Option<f64>) -> Self {
        self.ratio_cap = delta;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        check_eps(prefix, self.eps_low, self.eps_high)?;
        check_cap(prefix, self.ratio_cap, self.eps_high)
    }
}
params_impl!(GspoParams, "gspo");

/// CISPO (MiniMax-M1, arXiv 2506.13585; verl `cispo`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `eps_low` | `Some(0.2)` | lower clip on the IS weight (verl `clip_ratio_low`; `None`: no lower bound, as TRL) | [0, 1] |
/// | `eps_high` | `0.2` | upper clip (verl `clip_ratio_high`; TRL/ScaleRL use an upper bound of 5.0, i.e. 4.0 here) | ≥ 0 |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CispoParams {
    /// Lower clip ε_l on the IS weight.
    pub eps_low: Option<f64>,
    /// Upper clip ε_h on the IS weight.
    pub eps_high: f64,
}

impl Default for CispoParams {
    fn default() -> Self {
        Self { eps_low: Some(0.2), eps_high: 0.2 }
    }
}

impl CispoParams {
    /// TRL's / ScaleRL's CISPO: no lower bound, IS weight capped at 5 (`eps_high = 4`).
    pub fn trl() -> Self {
        Self { eps_low: None, eps_high: 4.0 }
    }
    /// Sets `eps_low`.
    #[must_use]
    pub fn eps_low(mut self, v: Option<f64>) -> Self {
        self.eps_low = v;
        self
    }
    /// Sets `eps_high`.
    #[must_use]
    pub fn eps_high(mut self, v: f64) -> Self {
        self.eps_high = v;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        check_eps(prefix, self.eps_low.unwrap_or(0.0), self.eps_high)
    }
}
params_impl!(CispoParams, "cispo");

/// SAPO soft gate (arXiv 2511.20347; verl `sapo`, TRL `sapo`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `tau_pos` | `1.0` | gate temperature for `A > 0` (verl `tau_pos`) | > 0 |
/// | `tau_neg` | `1.05` | gate temperature for `A ≤ 0` (verl `tau_neg`) | > 0 |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SapoParams {
    /// Gate temperature for positive advantages.
    pub tau_pos: f64,
    /// Gate temperature for negative advantages.
    pub tau_neg: f64,
}

impl Default for SapoParams {
    fn default() -> Self {
        Self { tau_pos: 1.0, tau_neg: 1.05 }
    }
}

impl SapoParams {
    /// Sets both temperatures.
    #[must_use]
    pub fn tau(mut self, pos: f64, neg: f64) -> Self {
        self.tau_pos = pos;
        self.tau_neg = neg;
        self
    }
    /// Sets `tau_pos`.
    #[must_use]
    pub fn tau_pos(mut self, v: f64) -> Self {
        self.tau_pos = v;
        self
    }
    /// Sets `tau_neg`.
    #[must_use]
    pub fn tau_neg(mut self, v: f64) -> Self {
        self.tau_neg = v;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        for (name, v) in [("tau_pos", self.tau_pos), ("tau_neg", self.tau_neg)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(invalid(&format!("{prefix}.{name}"), v, "must be finite and > 0"));
            }
        }
        Ok(())
    }
}
params_impl!(SapoParams, "sapo");

/// GMPO geometric-mean policy optimisation (Zhao et al. 2025, arXiv 2507.20673; verl `geo_mean`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `eps_low` | `0.4` | lower log-ratio clip (GMPO paper: `(−0.4, 0.4)`) | ≥ 0 |
/// | `eps_high` | `0.4` | upper log-ratio clip | ≥ 0 |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GmpoParams {
    /// Lower log-ratio clip.
    pub eps_low: f64,
    /// Upper log-ratio clip.
    pub eps_high: f64,
}

impl Default for GmpoParams {
    fn default() -> Self {
        Self { eps_low: 0.4, eps_high: 0.4 }
    }
}

impl GmpoParams {
    /// Sets both clip bounds.
    #[must_use]
    pub fn eps(mut self, low: f64, high: f64) -> Self {
        self.eps_low = low;
        self.eps_high = high;
        self
    }
    /// Sets `eps_low`.
    #[must_use]
    pub fn eps_low(mut self, v: f64) -> Self {
        self.eps_low = v;
        self
    }
    /// Sets `eps_high`.
    #[must_use]
    pub fn eps_high(mut self, v: f64) -> Self {
        self.eps_high = v;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        for (name, v) in [("eps_low", self.eps_low), ("eps_high", self.eps_high)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(invalid(&format!("{prefix}.{name}"), v, "must be finite and >= 0"));
            }
        }
        Ok(())
    }
}
params_impl!(GmpoParams, "gmpo");

/// Clip-Cov (Cui et al., *The Entropy Mechanism of Reinforcement Learning for Reasoning
/// Language Models*, arXiv 2505.22617; verl `clip_cov`).
///
/// Per token `cov = (A − Ā)(logp − mean logp)` (means over the micro-batch's response tokens).
/// Among the tokens that the PPO clip has not clipped and whose `cov` lies strictly inside
/// `(cov_lb, cov_ub)`, `max(⌊ratio · N⌋, 1)` are drawn uniformly without replacement (from the
/// per-call seed, see `LossInputs::seed`) and lose their gradient (their loss is set to 0).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `eps_low` | `0.2` | PPO lower clip (verl `clip_ratio_low`) | [0, 1] |
/// | `eps_high` | `0.2` | PPO upper clip (verl `clip_ratio_high`) | ≥ 0 |
/// | `ratio` | `2e-4` | share of tokens cut (verl `clip_cov_ratio`) | (0, 1] |
/// | `cov_lb` | `1.0` | covariance lower bound (verl `clip_cov_lb`) | finite |
/// | `cov_ub` | `5.0` | covariance upper bound (verl `clip_cov_ub`) | > cov_lb |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClipCovParams {
    /// PPO lower clip ε_l.
    pub eps_low: f64,
    /// PPO upper clip ε_h.
    pub eps_high: f64,
    /// Share of response tokens whose gradient is cut.
    pub ratio: f64,
    /// Covariance lower bound (exclusive).
    pub cov_lb: f64,
    /// Covariance upper bound (exclusive).
    pub cov_ub: f64,
}

impl Default for ClipCovParams {
    fn default() -> Self {
        Self { eps_low: 0.2, eps_high: 0.2, ratio: 2e-4, cov_lb: 1.0, cov_ub: 5.0 }
    }
}

impl ClipCovParams {
    /// Sets both PPO clip bounds.
    #[must_use]
    pub fn eps(mut self, low: f64, high: f64) -> Self {
        self.eps_low = low;
        self.eps_high = high;
        self
    }
    /// Sets the share of tokens cut.
    #[must_use]
    pub fn ratio(mut self, ratio: f64) -> Self {
        self.ratio = ratio;
        self
    }
    /// Sets the covariance band.
    #[must_use]
    pub fn cov_bounds(mut self, lb: f64, ub: f64) -> Self {
        self.cov_lb = lb;
        self.cov_ub = ub;
        self
    }
    /// Sets `eps_low`.
    #[must_use]
    pub fn eps_low(mut self, v: f64) -> Self {
        self.eps_low = v;
        self
    }
    /// Sets `eps_high`.
    #[must_use]
    pub fn eps_high(mut self, v: f64) -> Self {
        self.eps_high = v;
        self
    }
    /// Sets `cov_lb`.
    #[must_use]
    pub fn cov_lb(mut self, v: f64) -> Self {
        self.cov_lb = v;
        self
    }
    /// Sets `cov_ub`.
    #[must_use]
    pub fn cov_ub(mut self, v: f64) -> Self {
        self.cov_ub = v;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        check_eps(prefix, self.eps_low, self.eps_high)?;
        if !(self.ratio.is_finite() && self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(invalid(&format!("{prefix}.ratio"), self.ratio, "must be in (0, 1]"));
        }
        if !(self.cov_lb.is_finite() && self.cov_ub.is_finite() && self.cov_lb < self.cov_ub) {
            return Err(invalid(
                &format!("{prefix}.cov_ub"),
                format!("({}, {})", self.cov_lb, self.cov_ub),
                "needs finite cov_lb < cov_ub",
            ));
        }
        Ok(())
    }
}
params_impl!(ClipCovParams, "clip_cov");

/// KL-Cov (Cui et al., arXiv 2505.22617; verl `kl_cov`).
///
/// Per token `ℓ = −A r`, except on the `max(⌊ratio · N⌋, 1)` response tokens with the largest
/// covariance `(A − Ā)(logp − mean logp)` (means over the micro-batch; ties to the lower flat
/// index), where `ℓ = −A r + kl_coef · |δ|`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `ratio` | `2e-4` | share of tokens penalised (verl `kl_cov_ratio`) | (0, 1] |
/// | `kl_coef` | `0.1` | β of `β |δ|` (verl yaml `ppo_kl_coef`; the code's fallback is 1.0) | ≥ 0 |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KlCovParams {
    /// Share of response tokens penalised.
    pub ratio: f64,
    /// Penalty coefficient β.
    pub kl_coef: f64,
}

impl Default for KlCovParams {
    fn default() -> Self {
        Self { ratio: 2e-4, kl_coef: 0.1 }
    }
}

impl KlCovParams {
    /// Sets the share of tokens penalised.
    #[must_use]
    pub fn ratio(mut self, ratio: f64) -> Self {
        self.ratio = ratio;
        self
    }
    /// Sets the penalty coefficient.
    #[must_use]
    pub fn kl_coef(mut self, c: f64) -> Self {
        self.kl_coef = c;
        self
    }
    pub(crate) fn validate_at(&self, prefix: &str) -> Result<()> {
        if !(self.ratio.is_finite() && self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(invalid(&format!("{prefix}.ratio"), self.ratio, "must be in (0, 1]"));
        }
        if !(self.kl_coef.is_finite() && self.kl_coef >= 0.0) {
            return Err(invalid(&format!("{prefix}.kl_coef"), self.kl_coef, "must be finite and >= 0"));
        }
        Ok(())
    }
}
params_impl!(KlCovParams, "kl_cov");

/// The policy loss. In a config: `{"kind": "ppo", "eps_high": 0.28}` (the variant's fields
/// next to `kind`, all optional).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PolicyLoss {
    /// PPO clip with asymmetric ε, dual clip and optional ratio cap.
    Ppo(PpoParams),
    /// GSPO sequence-ratio clip.
    Gspo(GspoParams),
    /// CISPO clipped stop-gradient IS weight.
    Cispo(CispoParams),
    /// SAPO soft gate.
    Sapo(SapoParams),
    /// Plain REINFORCE / GPG: `−A logp`.
    Reinforce,
    /// GMPO geometric-mean ratio.
    Gmpo(GmpoParams),
    /// Clip-Cov: PPO with the gradient of random high-covariance tokens cut.
    ClipCov(ClipCovParams),
    /// KL-Cov: `−A r` with an `|δ|` penalty on the highest-covariance tokens.
    KlCov(KlCovParams),
    /// LPO listwise target-projection.
    Lpo(LpoParams),
}

/// The `kind` of every variant of [`PolicyLoss`], in the order of the variants.
const POLICY_LOSS_KINDS: [&str; 9] = ["ppo", "gspo", "cispo", "sapo", "reinforce", "gmpo", "clip_cov", "kl_cov", "lpo"];

/// [`PolicyLoss`] externally tagged, for [`rl_core::de::internally_tagged`]: a variant without
/// fields refuses any key next to `kind`, and errors keep their paths.
#[derive(Deserialize)]
#[serde(remote = "PolicyLoss", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)] // read only by the derived deserializer
enum PolicyLossDe {
    Ppo(PpoParams),
    Gspo(GspoParams),
    Cispo(CispoParams),
    Sapo(SapoParams),
    Reinforce,
    Gmpo(GmpoParams),
    ClipCov(ClipCovParams),
    KlCov(KlCovParams),
    Lpo(LpoParams),
}

#[derive(Deserialize)]
struct PolicyLossTagged(#[serde(with = "PolicyLossDe")] PolicyLoss);

impl<'de> Deserialize<'de> for PolicyLoss {
    /// A table with `kind` and the variant's fields; any other key is an error naming it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(rl_core::de::internally_tagged::<D, PolicyLossTagged>(d, "kind", &POLICY_LOSS_KINDS)?.0)
    }
}

impl Default for PolicyLoss {
    fn default() -> Self {
        Self::Ppo(PpoParams::default())
    }
}

impl PolicyLoss {
    /// A short name (`"ppo"`, `"gspo"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Ppo(_) => "ppo",
            Self::Gspo(_) => "gspo",
            Self::Cispo(_) => "cispo",
            Self::Sapo(_) => "sapo",
            Self::Reinforce => "reinforce",
            Self::Gmpo(_) => "gmpo",
            Self::ClipCov(_) => "clip_cov",
            Self::KlCov(_) => "kl_cov",
            Self::Lpo(_) => "lpo",
        }
    }

    /// verl's `loss_mode` name of the loss (`"vanilla"`, `"geo_mean"`, ...; LPO has none).
    pub fn verl_name(&self) -> Option<&'static str> {
        Some(match self {
            Self::Ppo(_) => "vanilla",
            Self::Gspo(_) => "gspo",
            Self::Cispo(_) => "cispo",
            Self::Sapo(_) => "sapo",
            Self::Reinforce => "gpg",
            Self::Gmpo(_) => "geo_mean",
            Self::ClipCov(_) => "clip_cov",
            Self::KlCov(_) => "kl_cov",
            Self::Lpo(_) => return None,
        })
    }

    /// Checks the variant's parameters, naming the field under `prefix`.
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`] naming the field.
    pub fn validate_at(&self, prefix: &str) -> Result<()> {
        match self {
            Self::Ppo(p) => p.validate_at(prefix),
            Self::Gspo(p) => p.validate_at(prefix),
            Self::Cispo(p) => p.validate_at(prefix),
            Self::Sapo(p) => p.validate_at(prefix),
            Self::Reinforce => Ok(()),
            Self::Gmpo(p) => p.validate_at(prefix),
            Self::ClipCov(p) => p.validate_at(prefix),
            Self::KlCov(p) => p.validate_at(prefix),
            Self::Lpo(p) => p.validate_at(prefix),
        }
    }
}

impl rl_core::Params for PolicyLoss {
    type Error = RlvrCoreError;
    fn validate(&self) -> Result<()> {
        self.validate_at("policy")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    fn field(e: RlvrCoreError) -> String {
        match e {
            RlvrCoreError::InvalidParameter { name, .. } => name,
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn setters_set_and_checks_name_the_field() {
        let p = PpoParams::default().eps_low(0.1).eps_high(0.3).dual_clip(Some(2.0)).ratio_cap(Some(4.0));
        assert_eq!(p, PpoParams { eps_low: 0.1, eps_high: 0.3, dual_clip: Some(2.0), ratio_cap: Some(4.0) });
        assert_eq!(PpoParams::default().eps(0.1, 0.3).eps_low, 0.1);
        assert!(p.check().is_ok());
        let cases: Vec<(PolicyLoss, &str)> = vec![
            (PolicyLoss::Ppo(PpoParams::default().eps_low(1.5)), "policy.eps_low"),
            (PolicyLoss::Ppo(PpoParams::default().eps_low(-0.1)), "policy.eps_low"),
            (PolicyLoss::Ppo(PpoParams::default().eps_high(-0.1)), "policy.eps_high"),
            (PolicyLoss::Ppo(PpoParams::default().eps_high(f64::NAN)), "policy.eps_high"),
            (PolicyLoss::Ppo(PpoParams::default().dual_clip(Some(1.0))), "policy.dual_clip"),
            (PolicyLoss::Ppo(PpoParams::default().ratio_cap(Some(1.2))), "policy.ratio_cap"),
            (PolicyLoss::Gspo(GspoParams::default().ratio_cap(Some(1.0))), "policy.ratio_cap"),
            (PolicyLoss::Gspo(GspoParams::default().eps(2.0, 0.1)), "policy.eps_low"),
            (PolicyLoss::Cispo(CispoParams::default().eps_high(-1.0)), "policy.eps_high"),
            (PolicyLoss::Cispo(CispoParams::default().eps_low(Some(1.1))), "policy.eps_low"),
            (PolicyLoss::Sapo(SapoParams::default().tau(0.0, 1.0)), "policy.tau_pos"),
            (PolicyLoss::Sapo(SapoParams::default().tau(1.0, -1.0)), "policy.tau_neg"),
            (PolicyLoss::Gmpo(GmpoParams::default().eps(-0.1, 0.4)), "policy.eps_low"),
            (PolicyLoss::Gmpo(GmpoParams::default().eps(0.4, f64::INFINITY)), "policy.eps_high"),
            (PolicyLoss::ClipCov(ClipCovParams::default().ratio(0.0)), "policy.ratio"),
            (PolicyLoss::ClipCov(ClipCovParams::default().ratio(1.5)), "policy.ratio"),
            (PolicyLoss::ClipCov(ClipCovParams::default().cov_bounds(5.0, 1.0)), "policy.cov_ub"),
            (PolicyLoss::ClipCov(ClipCovParams::default().eps(0.2, -1.0)), "policy.eps_high"),
            (PolicyLoss::KlCov(KlCovParams::default().ratio(-1.0)), "policy.ratio"),
            (PolicyLoss::KlCov(KlCovParams::default().kl_coef(-0.1)), "policy.kl_coef"),
        ];
        for (loss, name) in cases {
            assert_eq!(field(loss.check().unwrap_err()), name, "{loss:?}");
        }
        // boundary values that are allowed
        assert!(PolicyLoss::Ppo(PpoParams::default().eps(0.0, 0.0).dual_clip(None)).check().is_ok());
        assert!(PolicyLoss::Ppo(PpoParams::default().eps_low(1.0).ratio_cap(Some(1.21))).check().is_ok());
        assert!(PolicyLoss::Cispo(CispoParams::trl()).check().is_ok());
        assert!(PolicyLoss::ClipCov(ClipCovParams::default().ratio(1.0)).check().is_ok());
        assert!(PolicyLoss::KlCov(KlCovParams::default().kl_coef(0.0)).check().is_ok());
        assert!(PolicyLoss::Reinforce.check().is_ok());
        assert_eq!(field(PpoParams::default().eps_low(2.0).check().unwrap_err()), "ppo.eps_low");
        assert_eq!(field(SapoParams::default().tau(0.0, 1.0).check().unwrap_err()), "sapo.tau_pos");
        assert_eq!(field(KlCovParams::default().ratio(0.0).check().unwrap_err()), "kl_cov.ratio");
    }

    #[test]
    fn every_setter_sets_its_field() {
        let g = GspoParams::default().eps_low(0.1).eps_high(0.2).ratio_cap(Some(2.0));
        assert_eq!(g, GspoParams { eps_low: 0.1, eps_high: 0.2, ratio_cap: Some(2.0) });
        assert_eq!(GspoParams::default().eps(0.3, 0.4), GspoParams { eps_low: 0.3, eps_high: 0.4, ratio_cap: None });
        assert_eq!(SapoParams::default().tau_pos(2.0).tau_neg(3.0), SapoParams { tau_pos: 2.0, tau_neg: 3.0 });
        assert_eq!(SapoParams::default().tau(4.0, 5.0), SapoParams { tau_pos: 4.0, tau_neg: 5.0 });
        assert_eq!(GmpoParams::default().eps_low(0.1).eps_high(0.3), GmpoParams { eps_low: 0.1, eps_high: 0.3 });
        assert_eq!(GmpoParams::default().eps(0.2, 0.5), GmpoParams { eps_low: 0.2, eps_high: 0.5 });
        assert_eq!(CispoParams::default().eps_low(None).eps_high(3.0), CispoParams { eps_low: None, eps_high: 3.0 });
        let c = ClipCovParams::default().eps_low(0.1).eps_high(0.3).ratio(0.5).cov_lb(-1.0).cov_ub(2.0);
        assert_eq!(c, ClipCovParams { eps_low: 0.1, eps_high: 0.3, ratio: 0.5, cov_lb: -1.0, cov_ub: 2.0 });
        let c = ClipCovParams::default().eps(0.05, 0.06).cov_bounds(0.5, 0.7);
        assert_eq!((c.eps_low, c.eps_high, c.cov_lb, c.cov_ub), (0.05, 0.06, 0.5, 0.7));
        assert_eq!(KlCovParams::default().ratio(0.1).kl_coef(2.0), KlCovParams { ratio: 0.1, kl_coef: 2.0 });
    }

    #[test]
    fn names_and_serde() {
        let all = [
            PolicyLoss::Ppo(PpoParams::dapo()),
            PolicyLoss::Gspo(GspoParams::default()),
            PolicyLoss::Cispo(CispoParams::trl()),
            PolicyLoss::Sapo(SapoParams::default()),
            PolicyLoss::Reinforce,
            PolicyLoss::Gmpo(GmpoParams::default()),
            PolicyLoss::ClipCov(ClipCovParams::default()),
            PolicyLoss::KlCov(KlCovParams::default()),
            PolicyLoss::Lpo(LpoParams::default()),
        ];
        let names: Vec<_> = all.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["ppo", "gspo", "cispo", "sapo", "reinforce", "gmpo", "clip_cov", "kl_cov", "lpo"]);
        assert_eq!(all[0].verl_name(), Some("vanilla"));
        assert_eq!(all[4].verl_name(), Some("gpg"));
        assert_eq!(all[5].verl_name(), Some("geo_mean"));
        assert_eq!(all[8].verl_name(), None);
        for p in all {
            let back: PolicyLoss = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
            assert_eq!(back, p);
        }
        let p: PolicyLoss = serde_json::from_str(r#"{"kind": "ppo", "eps_high": 0.28}"#).unwrap();
        assert_eq!(p, PolicyLoss::Ppo(PpoParams::default().eps_high(0.28)));
        assert!(serde_json::from_str::<PolicyLoss>(r#"{"kind": "ppo", "eps_hi": 0.28}"#).is_err());
        let p: PolicyLoss = serde_json::from_str(r#"{"kind": "kl_cov"}"#).unwrap();
        assert_eq!(p, PolicyLoss::KlCov(KlCovParams::default()));
    }
}
