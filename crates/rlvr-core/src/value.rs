//! The clipped value loss of a critic / value head (feature `tch`; PPO, Schulman et al. 2017;
//! verl `compute_value_loss`), the companion of [`crate::token::gae`].
//!
//! ```text
//! v_clip = clamp(v, v_old − c, v_old + c)
//! L      = ½ · agg( max((v − R)², (v_clip − R)²) )            clipfrac = mean(1[(v_clip − R)² > (v − R)²])
//! ```
//!
//! `v` are the value head's predictions `[B, T]` (with gradient), `v_old` the predictions of the
//! rollout-time head, `R` the returns from [`crate::token::gae`]. The aggregation and global
//! counts are the policy loss's ([`crate::Aggregation`], [`GlobalCounts`]).
//!
//! ```
//! use rlvr_core::{value_loss, GlobalCounts, Params, ValueLossParams};
//! use tch::Tensor;
//! let v = Tensor::from_slice(&[0.5f32, 2.0]).view([1, 2]).set_requires_grad(true);
//! let v_old = Tensor::from_slice(&[0.5f32, 1.0]).view([1, 2]);
//! let ret = Tensor::from_slice(&[1.0f32, 0.0]).view([1, 2]);
//! let mask = Tensor::from_slice(&[1.0f32, 1.0]).view([1, 2]);
//! let out = value_loss(&v, &v_old, &ret, &mask, &GlobalCounts::local(&mask)?, &ValueLossParams::default().check()?)?;
//! // token 0: ½(0.5−1)² = 0.125; token 1: v_clip = 1.5, max(4, 2.25) = 4 → 2; token mean 1.0625
//! assert!((f64::try_from(&out.loss)? - 1.0625).abs() < 1e-6);
//! assert_eq!(out.clipfrac, 0.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::aggregate::{float_mask, Aggregation, Compat, GlobalCounts};
use crate::error::{invalid, Result, RlvrCoreError};

/// Parameters of [`value_loss`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `clip` | `0.5` | value clip range `c` (verl `critic.cliprange_value`) | > 0 |
/// | `aggregation` | `token-mean` | as the policy loss (verl `critic.loss_agg_mode`) | |
/// | `compat` | `Native` | see [`Compat`] | |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValueLossParams {
    /// Value clip range.
    pub clip: f64,
    /// Aggregation mode.
    pub aggregation: Aggregation,
    /// Compatibility mode of the aggregation.
    pub compat: Compat,
}

impl Default for ValueLossParams {
    fn default() -> Self {
        Self { clip: 0.5, aggregation: Aggregation::TokenMean, compat: Compat::Native }
    }
}

impl ValueLossParams {
    /// Sets `clip`.
    #[must_use]
    pub fn clip(mut self, c: f64) -> Self {
        self.clip = c;
        self
    }
    /// Sets `aggregation`.
    #[must_use]
    pub fn aggregation(mut self, a: Aggregation) -> Self {
        self.aggregation = a;
        self
    }
    /// Sets `compat`.
    #[must_use]
    pub fn compat(mut self, c: Compat) -> Self {
        self.compat = c;
        self
    }
}

impl rl_core::Params for ValueLossParams {
    type Error = RlvrCoreError;
    fn validate(&self) -> Result<()> {
        if !(self.clip.is_finite() && self.clip > 0.0) {
            return Err(invalid("value.clip", self.clip, "must be finite and > 0"));
        }
        self.aggregation.validate_at("value.aggregation")
    }
}

/// The value loss and its clip fraction.
#[derive(Debug)]
pub struct ValueLossOutput {
    /// Scalar loss (differentiable with respect to `values`).
    pub loss: Tensor,
    /// Share of response tokens where the clipped branch is larger.
    pub clipfrac: f64,
}

/// The clipped value loss (see the module docs).
///
/// # Errors
/// [`RlvrCoreError::Shape`] unless every tensor is `[B, T]` like `values`;
/// [`RlvrCoreError::NonFinite`] for NaN/inf inputs; invalid counts; libtorch failures.
pub fn value_loss(
    values: &Tensor,
    old_values: &Tensor,
    returns: &Tensor,
    mask: &Tensor,
    counts: &GlobalCounts,
    params: &rl_core::Valid<ValueLossParams>,
) -> Result<ValueLossOutput> {
    counts.check()?;
    let s = values.size();
    if s.len() != 2 {
        return Err(RlvrCoreError::Shape { what: "values".into(), expected: "[B, T]".into(), got: s });
    }
    for (what, x) in [("old_values", old_values), ("returns", returns), ("mask", mask)] {
        if x.size() != s {
            return Err(RlvrCoreError::Shape {
                what: what.into(),
                expected: format!("{s:?} like values"),
                got: x.size(),
            });
        }
    }
    for (what, x) in [("values", values), ("old_values", old_values), ("returns", returns)] {
        crate::inputs::check_finite(what, x)?;
    }
    let kind = if values.kind() == Kind::Double { Kind::Double } else { Kind::Float };
    let v = values.f_to_kind(kind)?;
    let old = old_values.f_detach()?.f_to_kind(kind)?;
    let ret = returns.f_detach()?.f_to_kind(kind)?;
    let m = float_mask(mask)?.f_to_kind(kind)?;
    let c = params.clip;
    let vc = v.f_clamp_tensor(Some(&old.f_sub_scalar(c)?), Some(&old.f_add_scalar(c)?))?;
    let l1 = v.f_sub(&ret)?.f_square()?;
    let l2 = vc.f_sub(&ret)?.f_square()?;
    let loss = params.aggregation.aggregate(&l1.f_maximum(&l2)?, &m, counts, params.compat)?.f_mul_scalar(0.5)?;
    let _g = tch::no_grad_guard();
    let n = f64::try_from(m.f_sum(Kind::Double)?)?;
    let clipped = l2.f_gt_tensor(&l1)?.f_to_kind(kind)?.f_mul(&m)?.f_sum(Kind::Double)?;
    let clipfrac = if n > 0.0 { f64::try_from(clipped)? / n } else { 0.0 };
    Ok(ValueLossOutput { loss, clipfrac })
}
