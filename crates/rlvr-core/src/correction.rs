//! Decoupled off-policy correction (POPO's decoupled importance sampling; AReaL decoupled PPO;
//! verl rollout correction; Hilton et al., "Batch size-invariance for policy optimization").
//!
//! Three policies: the behaviour policy π_b that generated the tokens (a replayed group's
//! checkpoint, an inference engine), the proximal policy π_prox (the snapshot at the start of
//! this step, the same for every group), and π_θ. The trust region of every loss stays around
//! π_prox (ratio `u = π_θ/π_prox`), and the off-policy bias is corrected by a *detached*
//! behaviour weight multiplying the per-token policy loss:
//!
//! ```text
//! token level:     w_t = π_prox(y_t)/π_b(y_t) = exp(prox_logp_t − behave_logp_t)
//! sequence level:  w   = exp( Σ_t m_t (prox_logp_t − behave_logp_t) / Σ_t m_t )   (geometric mean)
//! truncate:        w ← clamp(w, lower, upper)                     (verl TIS, OpenRLHF `tis`)
//! mask:            w ← w · 1[lower ≤ w ≤ upper]                   (AReaL, OpenRLHF `icepop`)
//! ```
//!
//! The log-ratio is clamped to ±20 before `exp`. On on-policy data the weight is exactly 1:
//! without behaviour log-probs no weight is applied, and when `behave_logp == prox_logp` the
//! log-ratio is exactly 0 and `exp(0) = 1`. Masked tokens keep their place in the global token
//! count (the normaliser is taken before rejection, as AReaL does).
//!
//! | field | default | reference |
//! |---|---|---|
//! | `level` | `Sequence` | verl `rollout_is="sequence"` |
//! | `mode` | `Truncate` | verl truncated IS |
//! | `upper` | `2.0` | verl `rollout_is_threshold` |
//! | `lower` | `None` (0) | verl/OpenRLHF lower threshold |
//!
//! [`DecoupledParams::areal`] gives AReaL's former default (token level, mask, upper 5.0).

use serde::{Deserialize, Serialize};
#[cfg(feature = "tch")]
use tch::{Kind, Tensor};

#[cfg(feature = "tch")]
use crate::error::RlvrCoreError;
use crate::error::{invalid, Result};

/// Where the behaviour weight is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsLevel {
    /// One weight per token.
    Token,
    /// One weight per sequence: the geometric mean of the token weights. Default.
    #[default]
    Sequence,
}

/// What happens to weights outside `[lower, upper]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsMode {
    /// Clamp into the bounds. Default.
    #[default]
    Truncate,
    /// Set to zero (reject the token or sequence).
    Mask,
}

/// Decoupled-correction configuration (see the module docs for formulas and defaults).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `level` | `Sequence` | token or sequence weight (verl `rollout_is="sequence"`) | see [`IsLevel`] |
/// | `mode` | `Truncate` | clamp or reject out-of-bounds weights | see [`IsMode`] |
/// | `upper` | `2.0` | upper bound (verl `rollout_is_threshold`) | ≥ 1 |
/// | `lower` | `None` (0) | lower bound | [0, 1] |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DecoupledParams {
    /// Token or sequence level.
    pub level: IsLevel,
    /// Truncate or mask.
    pub mode: IsMode,
    /// Upper bound on the weight.
    pub upper: f64,
    /// Lower bound on the weight (`None` = 0).
    pub lower: Option<f64>,
}

impl Default for DecoupledParams {
    fn default() -> Self {
        Self { level: IsLevel::Sequence, mode: IsMode::Truncate, upper: 2.0, lower: None }
    }
}

impl DecoupledParams {
    /// AReaL's former decoupled-loss default: token level, mask, upper `5.0`.
    pub fn areal() -> Self {
        Self { level: IsLevel::Token, mode: IsMode::Mask, upper: 5.0, lower: None }
    }
    /// Sets the level.
    #[must_use]
    pub fn level(mut self, level: IsLevel) -> Self {
        self.level = level;
        self
    }
    /// Sets the mode.
    #[must_use]
    pub fn mode(mut self, mode: IsMode) -> Self {
        self.mode = mode;
        self
    }
    /// Sets both bounds.
    #[must_use]
    pub fn bounds(mut self, lower: Option<f64>, upper: f64) -> Self {
        self.lower = lower;
        self.upper = upper;
        self
    }
    /// Sets the upper bound.
    #[must_use]
    pub fn upper(mut self, upper: f64) -> Self {
        self.upper = upper;
        self
    }
    /// Sets the lower bound.
    #[must_use]
    pub fn lower(mut self, lower: Option<f64>) -> Self {
        self.lower = lower;
        self
    }

    /// Checks the bounds (`upper ≥ 1` finite, `0 ≤ lower ≤ 1`), naming them under `prefix`.
    ///
    /// # Errors
    /// [`crate::RlvrCoreError::InvalidParameter`] naming the bound.
    pub fn validate_at(&self, prefix: &str) -> Result<()> {
        if !(self.upper.is_finite() && self.upper >= 1.0) {
            return Err(invalid(
                &format!("{prefix}.upper"),
                self.upper,
                "must be finite and >= 1 (on-policy weights are 1)",
            ));
        }
        if let Some(l) = self.lower {
            if !(l.is_finite() && (0.0..=1.0).contains(&l)) {
                return Err(invalid(&format!("{prefix}.lower"), l, "must be in [0, 1]"));
            }
        }
        Ok(())
    }

    /// The weight applied for a log-weight `log_w` (already the token value or the sequence
    /// mean): `(applied, raw, inside_bounds)` with `raw = exp(clamp(log_w, ±20))`.
    #[inline]
    pub fn weight(&self, log_w: f64) -> (f64, f64, bool) {
        let raw = log_w.clamp(-20.0, 20.0).exp();
        let lower = self.lower.unwrap_or(0.0);
        let inside = raw >= lower && raw <= self.upper;
        let applied = match self.mode {
            IsMode::Truncate => raw.clamp(lower, self.upper),
            IsMode::Mask => {
                if inside {
                    raw
                } else {
                    0.0
                }
            }
        };
        (applied, raw, inside)
    }
}

impl rl_core::Params for DecoupledParams {
    type Error = crate::RlvrCoreError;
    fn validate(&self) -> Result<()> {
        self.validate_at("correction")
    }
}

/// Behaviour weights and their statistics (feature `tch`).
#[cfg(feature = "tch")]
#[derive(Debug)]
pub struct IsWeights {
    /// Detached weights: `[B, T]` (token level) or `[B, 1]` (sequence level).
    pub weights: Tensor,
    /// Mean weight over response tokens (token level) or non-empty sequences (sequence level),
    /// before truncation/masking.
    pub raw_mean: f64,
    /// Mean weight after truncation/masking.
    pub mean: f64,
    /// Minimum raw weight.
    pub min: f64,
    /// Maximum raw weight.
    pub max: f64,
    /// Fraction of tokens/sequences whose raw weight lay outside the bounds (truncated or masked).
    pub out_of_bounds_frac: f64,
    /// Approximate KL(π_b‖π_prox) per token: masked mean of `behave_logp − prox_logp`.
    pub behave_approx_kl: f64,
}

/// Computes the detached behaviour weights `π_prox/π_b` of the decoupled correction.
///
/// `mask` is the response mask (`[B, T]`); the weight is returned in `prox_logp`'s float type.
///
/// # Errors
/// [`RlvrCoreError::Shape`] for mismatched shapes; [`RlvrCoreError::Empty`] when no token is
/// unmasked; bad parameters; libtorch failures.
#[cfg(feature = "tch")]
pub fn behaviour_weights(
    prox_logp: &Tensor,
    behave_logp: &Tensor,
    mask: &Tensor,
    p: &DecoupledParams,
) -> Result<IsWeights> {
    p.validate_at("correction")?;
    let _g = tch::no_grad_guard();
    for (what, x) in [("behave_logp", behave_logp), ("mask", mask)] {
        if x.size() != prox_logp.size() || prox_logp.dim() != 2 {
            return Err(RlvrCoreError::Shape {
                what: what.into(),
                expected: format!("{:?} like prox_logp, 2-D", prox_logp.size()),
                got: x.size(),
            });
        }
    }
    let m = crate::aggregate::float_mask(mask)?.f_to_kind(prox_logp.kind())?;
    let lr = prox_logp.f_sub(behave_logp)?;
    let (log_w, unit_mask) = match p.level {
        IsLevel::Token => (lr.f_clamp(-20.0, 20.0)?, m.shallow_clone()),
        IsLevel::Sequence => {
            let n = m.f_sum_dim_intlist(1, true, m.kind())?;
            let s = lr.f_mul(&m)?.f_sum_dim_intlist(1, true, m.kind())?;
            (s.f_div(&n.f_clamp_min(1e-12)?)?.f_clamp(-20.0, 20.0)?, n.f_gt(0.0)?.f_to_kind(m.kind())?)
        }
    };
    let raw = log_w.f_exp()?;
    let lower = p.lower.unwrap_or(0.0);
    let inside = raw.f_ge(lower)?.f_logical_and(&raw.f_le(p.upper)?)?;
    let weights = match p.mode {
        IsMode::Truncate => raw.f_clamp(lower, p.upper)?,
        IsMode::Mask => raw.f_mul(&inside)?,
    };
    let units = f64::try_from(unit_mask.f_sum(unit_mask.kind())?)?;
    if units <= 0.0 {
        return Err(RlvrCoreError::Empty { what: "response tokens (every row is masked)".into() });
    }
    let bm = unit_mask.f_gt(0.0)?;
    let sel = |x: &Tensor| x.f_masked_select(&bm);
    let raw_sel = sel(&raw.f_expand_as(&unit_mask)?)?;
    let stats = Tensor::f_stack(
        &[
            raw.f_mul(&unit_mask)?.f_sum(unit_mask.kind())?.f_to_kind(Kind::Double)?,
            weights.f_mul(&unit_mask)?.f_sum(unit_mask.kind())?.f_to_kind(Kind::Double)?,
            raw_sel.f_min()?.f_to_kind(Kind::Double)?,
            raw_sel.f_max()?.f_to_kind(Kind::Double)?,
            inside.f_logical_not()?.f_logical_and(&bm)?.f_count_nonzero(None)?.f_to_kind(Kind::Double)?,
            lr.f_neg()?.f_mul(&m)?.f_sum(m.kind())?.f_to_kind(Kind::Double)?,
        ],
        0,
    )?;
    let v = Vec::<f64>::try_from(stats)?;
    let tokens = f64::try_from(m.f_sum(m.kind())?)?.max(1e-12);
    Ok(IsWeights {
        weights,
        raw_mean: v[0] / units,
        mean: v[1] / units,
        min: v[2],
        max: v[3],
        out_of_bounds_frac: v[4] / units,
        behave_approx_kl: v[5] / tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn setters_validation_and_scalar_weight() {
        let p = DecoupledParams::default().level(IsLevel::Token).mode(IsMode::Mask).upper(3.0).lower(Some(0.5));
        assert_eq!(p, DecoupledParams { level: IsLevel::Token, mode: IsMode::Mask, upper: 3.0, lower: Some(0.5) });
        assert_eq!(DecoupledParams::default().bounds(Some(0.1), 4.0).upper, 4.0);
        assert_eq!(
            DecoupledParams::areal(),
            DecoupledParams { level: IsLevel::Token, mode: IsMode::Mask, upper: 5.0, lower: None }
        );
        for (q, name) in [
            (DecoupledParams::default().upper(0.99), "correction.upper"),
            (DecoupledParams::default().upper(f64::INFINITY), "correction.upper"),
            (DecoupledParams::default().lower(Some(1.5)), "correction.lower"),
            (DecoupledParams::default().lower(Some(-0.1)), "correction.lower"),
        ] {
            match q.check() {
                Err(crate::RlvrCoreError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{q:?}: {other:?}"),
            }
        }
        assert!(DecoupledParams::default().upper(1.0).lower(Some(1.0)).check().is_ok());
        // truncate: clamp into [lower, upper]; mask: zero outside; raw = exp(clamp(log_w, ±20))
        let t = DecoupledParams::default().bounds(Some(0.5), 2.0);
        assert_eq!(t.weight(0.0), (1.0, 1.0, true));
        let (a, raw, inside) = t.weight(1.0);
        assert_eq!((a, inside), (2.0, false));
        assert!((raw - 1f64.exp()).abs() < 1e-15);
        assert_eq!(t.weight(-1.0).0, 0.5);
        let m = t.mode(IsMode::Mask);
        assert_eq!(m.weight(1.0).0, 0.0);
        assert_eq!(m.weight(-1.0).0, 0.0);
        assert!((m.weight(0.5).0 - 0.5f64.exp()).abs() < 1e-15);
        assert!(m.weight(2f64.ln()).2); // the bounds are inclusive
        assert!((t.weight(100.0).1 - 20f64.exp()).abs() < 1e-3);
    }
}
