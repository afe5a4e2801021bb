//! Policy-loss variants and their parameters.
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
//! | [`PolicyLoss::Lpo`] | `K sg(c_k) clip(δ_b, log(1−ε), log(1+ε))` | see [`crate::lpo`] |
//!
//! Numerical guards as in the references: PPO/CISPO/SAPO ratios behave as if `δ` were clamped
//! to ±20 (verl); GSPO's log sequence ratio is capped at 10 (verl); GMPO's mean log-ratio is
//! clamped to ±20.

use serde::{Deserialize, Serialize};

use crate::error::{check_range, invalid, Result};
use crate::lpo::LpoParams;

/// PPO clip (verl `vanilla`, TRL `grpo`/`dapo`, OpenRLHF `ppo`, AReaL).
///
/// | field | default | reference |
/// |---|---|---|
/// | `eps_low` | `0.2` | verl `clip_ratio_low` |
/// | `eps_high` | `0.2` | verl `clip_ratio_high` (DAPO: 0.28) |
/// | `dual_clip` | `Some(3.0)` | verl `clip_ratio_c` (must be > 1) |
/// | `ratio_cap` | `None` | TRL `delta` (INTELLECT-2 two-sided clip; must be > 1 + eps_high) |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// Sets the clip range.
    #[must_use]
    pub fn eps(mut self, low: f64, high: f64) -> Self {
        self.eps_low = low;
        self.eps_high = high;
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
    fn check(&self, prefix: &str) -> Result<()> {
        check_eps(prefix, self.eps_low, self.eps_high)?;
        if let Some(c) = self.dual_clip {
            if !(c.is_finite() && c > 1.0) {
                return Err(invalid(&format!("{prefix}.dual_clip"), c, "must be finite and > 1"));
            }
        }
        if let Some(d) = self.ratio_cap {
            if !(d.is_finite() && d > 1.0 + self.eps_high) {
                return Err(invalid(&format!("{prefix}.ratio_cap"), d, "must be finite and > 1 + eps_high"));
            }
        }
        Ok(())
    }
}

fn check_eps(prefix: &str, low: f64, high: f64) -> Result<()> {
    check_range(&format!("{prefix}.eps_low"), low, Some(0.0), Some(1.0), "must be in [0, 1]")?;
    check_range(&format!("{prefix}.eps_high"), high, Some(0.0), None, "must be finite and >= 0")
}

/// GSPO (Zheng et al. 2025; verl `gspo`, TRL `importance_sampling_level="sequence"`).
///
/// | field | default | reference |
/// |---|---|---|
/// | `eps_low` | `3e-4` | GSPO paper / verl GSPO recipe `clip_ratio_low` |
/// | `eps_high` | `4e-4` | `clip_ratio_high` |
/// | `ratio_cap` | `None` | TRL `delta` |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

/// CISPO (MiniMax-M1; verl `cispo`).
///
/// | field | default | reference |
/// |---|---|---|
/// | `eps_low` | `Some(0.2)` | verl `clip_ratio_low` (`None`: no lower bound, as TRL) |
/// | `eps_high` | `0.2` | verl `clip_ratio_high` (TRL/ScaleRL use an upper bound of 5.0, i.e. 4.0 here) |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

/// SAPO soft gate (verl `sapo`, TRL `sapo`).
///
/// | field | default | reference |
/// |---|---|---|
/// | `tau_pos` | `1.0` | verl `tau_pos` |
/// | `tau_neg` | `1.05` | verl `tau_neg` |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

/// GMPO geometric-mean policy optimisation (Zhao et al. 2025; verl `geo_mean`).
///
/// | field | default | reference |
/// |---|---|---|
/// | `eps_low` | `0.4` | GMPO paper: clip log-ratios to `(−0.4, 0.4)` |
/// | `eps_high` | `0.4` | |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

/// The policy loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    /// LPO listwise target-projection.
    Lpo(LpoParams),
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
            Self::Lpo(_) => "lpo",
        }
    }

    /// Validates the variant's parameters.
    ///
    /// # Errors
    /// [`crate::RlvrCoreError::InvalidParameter`] naming the field.
    pub fn check(&self) -> Result<()> {
        match self {
            Self::Ppo(p) => p.check("ppo"),
            Self::Gspo(p) => {
                check_eps("gspo", p.eps_low, p.eps_high)?;
                if let Some(d) = p.ratio_cap {
                    if !(d.is_finite() && d > 1.0 + p.eps_high) {
                        return Err(invalid("gspo.ratio_cap", d, "must be finite and > 1 + eps_high"));
                    }
                }
                Ok(())
            }
            Self::Cispo(p) => {
                check_eps("cispo", p.eps_low.unwrap_or(0.0), p.eps_high)?;
                Ok(())
            }
            Self::Sapo(p) => {
                crate::error::check_positive("sapo.tau_pos", p.tau_pos)?;
                crate::error::check_positive("sapo.tau_neg", p.tau_neg)
            }
            Self::Reinforce => Ok(()),
            Self::Gmpo(p) => {
                check_range("gmpo.eps_low", p.eps_low, Some(0.0), None, "must be finite and >= 0")?;
                check_range("gmpo.eps_high", p.eps_high, Some(0.0), None, "must be finite and >= 0")
            }
            Self::Lpo(p) => p.check(),
        }
    }
}
