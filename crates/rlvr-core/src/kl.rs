//! KL-to-reference estimators, per-token entropy and token log-probs from logits.
//!
//! With `log r = logp − ref_logp` (Schulman's estimators, as in verl `kl_penalty_forward`):
//!
//! | estimator | value | d/d logp | verl name |
//! |---|---|---|---|
//! | [`KlEstimator::K1`] | `log r` | `1` | `kl`, `k1` |
//! | [`KlEstimator::Abs`] | `|log r|` | `sign(log r)` | `abs` |
//! | [`KlEstimator::K2`] | `½ (log r)²` | `log r` | `mse`, `k2` |
//! | [`KlEstimator::K3`] | `clamp(e^x − x − 1, −10, 10)`, `x = clamp(ref − logp, ±20)` | `1 − e^x` inside the clamps, else 0 | `low_var_kl`, `k3` |
//!
//! The straight-through variants (verl suffix `+`, e.g. `k3+`) keep the estimator's value in
//! the forward pass and use the gradient of `k2`, `log r`, which is the unbiased gradient of
//! the sequence KL.

use serde::{Deserialize, Serialize};
#[cfg(feature = "tch")]
use tch::{Kind, Tensor};

#[cfg(feature = "tch")]
use crate::error::RlvrCoreError;
use crate::error::{invalid, Result};

/// A per-token KL estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KlEstimator {
    /// `log r`.
    K1,
    /// `|log r|`.
    Abs,
    /// `½ (log r)²`.
    K2,
    /// `e^{ref−logp} − (ref−logp) − 1`, verl's `low_var_kl` with its clamps. Default (verl
    /// `kl_loss_type: low_var_kl`; TRL's only estimator).
    #[default]
    K3,
}

/// KL-in-loss configuration: `loss += coef · agg(kl)`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `estimator` | `K3` | the per-token estimator (verl `kl_loss_type: low_var_kl`) | see [`KlEstimator`] |
/// | `straight_through` | `false` | forward value of `estimator`, gradient of `k2` (verl suffix `+`) | |
/// | `coef` | `0.001` | β (verl `kl_loss_coef`) | ≥ 0 |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KlParams {
    /// The estimator.
    pub estimator: KlEstimator,
    /// Forward value of `estimator`, gradient of `k2`.
    pub straight_through: bool,
    /// Coefficient β.
    pub coef: f64,
}

impl Default for KlParams {
    fn default() -> Self {
        Self { estimator: KlEstimator::K3, straight_through: false, coef: 1e-3 }
    }
}

impl KlParams {
    /// Parses verl's `kl_loss_type` names: `kl`/`k1`, `abs`, `mse`/`k2`, `low_var_kl`/`k3`,
    /// each optionally with the straight-through suffix `+`.
    ///
    /// # Errors
    /// [`crate::RlvrCoreError::InvalidParameter`] for an unknown name.
    pub fn from_verl_name(name: &str, coef: f64) -> Result<Self> {
        let (base, st) = match name.strip_suffix('+') {
            Some(b) => (b, true),
            None => (name, false),
        };
        let estimator = match base {
            "kl" | "k1" => KlEstimator::K1,
            "abs" => KlEstimator::Abs,
            "mse" | "k2" => KlEstimator::K2,
            "low_var_kl" | "k3" => KlEstimator::K3,
            _ => {
                return Err(invalid(
                    "kl.estimator",
                    name,
                    "expected kl|k1|abs|mse|k2|low_var_kl|k3, optionally with `+`",
                ))
            }
        };
        Ok(Self { estimator, straight_through: st, coef })
    }

    /// Sets the estimator.
    #[must_use]
    pub fn estimator(mut self, e: KlEstimator) -> Self {
        self.estimator = e;
        self
    }
    /// Sets the straight-through flag.
    #[must_use]
    pub fn straight_through(mut self, on: bool) -> Self {
        self.straight_through = on;
        self
    }
    /// Sets the coefficient β.
    #[must_use]
    pub fn coef(mut self, c: f64) -> Self {
        self.coef = c;
        self
    }

    /// Checks the coefficient (finite, `≥ 0`), naming it under `prefix`.
    ///
    /// # Errors
    /// [`crate::RlvrCoreError::InvalidParameter`].
    pub fn validate_at(&self, prefix: &str) -> Result<()> {
        if self.coef.is_finite() && self.coef >= 0.0 {
            Ok(())
        } else {
            Err(invalid(&format!("{prefix}.coef"), self.coef, "must be finite and >= 0"))
        }
    }
}

impl rl_core::Params for KlParams {
    type Error = crate::RlvrCoreError;
    fn validate(&self) -> Result<()> {
        self.validate_at("kl")
    }
}

/// Value and derivative with respect to `logp` of one token's KL estimate, `lr = logp − ref`
/// (the scalar form of the table above; the fused kernels use it).
#[inline]
pub fn kl_token(lr: f64, estimator: KlEstimator, straight_through: bool) -> (f64, f64) {
    let (v, g) = match estimator {
        KlEstimator::K1 => (lr, 1.0),
        KlEstimator::Abs => (
            lr.abs(),
            if lr > 0.0 {
                1.0
            } else if lr < 0.0 {
                -1.0
            } else {
                0.0
            },
        ),
        KlEstimator::K2 => (0.5 * lr * lr, lr),
        KlEstimator::K3 => {
            let x = (-lr).clamp(-20.0, 20.0);
            let ex = x.exp();
            let raw = ex - x - 1.0;
            let active = lr.abs() < 20.0 && raw < 10.0;
            (raw.clamp(-10.0, 10.0), if active { 1.0 - ex } else { 0.0 })
        }
    };
    if straight_through {
        (v, lr)
    } else {
        (v, g)
    }
}

/// Per-token KL value and its derivative with respect to `logp` (no gradient recorded).
#[cfg(feature = "tch")]
pub(crate) fn kl_value_grad(logp: &Tensor, ref_logp: &Tensor, p: &KlParams) -> Result<(Tensor, Tensor)> {
    let _g = tch::no_grad_guard();
    let lr = logp.f_sub(ref_logp)?; // log r = logp − ref
    let (value, grad) = match p.estimator {
        KlEstimator::K1 => (lr.shallow_clone(), lr.f_ones_like()?),
        KlEstimator::Abs => (lr.f_abs()?, lr.f_sign()?),
        KlEstimator::K2 => (lr.f_square()?.f_mul_scalar(0.5)?, lr.shallow_clone()),
        KlEstimator::K3 => {
            // x = clamp(ref − logp, ±20); k3 = clamp(e^x − x − 1, −10, 10)
            let x_raw = lr.f_neg()?;
            let x = x_raw.f_clamp(-20.0, 20.0)?;
            let ex = x.f_exp()?;
            let raw = ex.f_sub(&x)?.f_sub_scalar(1.0)?;
            let value = raw.f_clamp(-10.0, 10.0)?;
            // d/dlogp (e^x − x − 1) = 1 − e^x, zero where either clamp is active
            let active = x_raw.f_abs()?.f_lt(20.0)?.f_logical_and(&raw.f_lt(10.0)?)?;
            let grad = ex.f_neg()?.f_add_scalar(1.0)?.f_mul(&active)?;
            (value, grad)
        }
    };
    if p.straight_through {
        Ok((value, lr))
    } else {
        Ok((value, grad))
    }
}

/// Per-token KL penalty `[B, T]` as a differentiable tensor: its value is the estimator's, its
/// gradient with respect to `logp` is the estimator's derivative (or `k2`'s for the
/// straight-through variants), built as `v + g · (logp − sg(logp))`.
///
/// # Errors
/// [`RlvrCoreError::Shape`] when the shapes differ; libtorch failures.
#[cfg(feature = "tch")]
pub fn kl_penalty(logp: &Tensor, ref_logp: &Tensor, params: &KlParams) -> Result<Tensor> {
    if logp.size() != ref_logp.size() {
        return Err(RlvrCoreError::Shape {
            what: "ref_logp".into(),
            expected: format!("{:?} like logp", logp.size()),
            got: ref_logp.size(),
        });
    }
    let (v, g) = kl_value_grad(logp, ref_logp, params)?;
    let delta = logp.f_sub(&logp.f_detach()?)?;
    Ok(v.f_add(&g.f_mul(&delta)?)?)
}

/// Per-token entropy `H = logsumexp(z) − Σ_v softmax(z)_v z_v` of logits `[.., V]` over the
/// last dimension, computed in fp32 (or f64 for f64 logits); differentiable.
///
/// # Errors
/// [`RlvrCoreError::Shape`] for 0-D logits or an empty vocabulary; libtorch failures.
#[cfg(feature = "tch")]
pub fn entropy_from_logits(logits: &Tensor) -> Result<Tensor> {
    let s = logits.size();
    if s.is_empty() || s[s.len() - 1] == 0 {
        return Err(RlvrCoreError::Shape { what: "logits".into(), expected: "[.., V] with V > 0".into(), got: s });
    }
    let z = to_compute_kind(logits)?;
    let lse = z.f_logsumexp([-1i64].as_slice(), false)?;
    let p = z.f_softmax(-1, z.kind())?;
    let pz = p.f_mul(&z)?.f_sum_dim_intlist([-1i64].as_slice(), false, z.kind())?;
    Ok(lse.f_sub(&pz)?)
}

/// Log-probabilities `[B, T]` of `tokens` (`[B, T]`, int64) under `logits` (`[B, T, V]`),
/// via an fp32 log-softmax; differentiable.
///
/// # Errors
/// [`RlvrCoreError::Shape`] for mismatched shapes; [`RlvrCoreError::Kind`] for non-integer
/// tokens; libtorch failures (e.g. a token id outside the vocabulary).
#[cfg(feature = "tch")]
pub fn token_log_probs(logits: &Tensor, tokens: &Tensor) -> Result<Tensor> {
    let s = logits.size();
    if s.len() != 3 || tokens.size() != s[..2] {
        return Err(RlvrCoreError::Shape {
            what: "logits/tokens".into(),
            expected: "logits [B, T, V] and tokens [B, T]".into(),
            got: [s, tokens.size()].concat(),
        });
    }
    if tokens.kind() != Kind::Int64 {
        return Err(RlvrCoreError::Kind {
            what: "tokens".into(),
            expected: "Int64".into(),
            got: format!("{:?}", tokens.kind()),
        });
    }
    let z = to_compute_kind(logits)?;
    let lp = z.f_log_softmax(-1, z.kind())?;
    Ok(lp.f_gather(-1, &tokens.f_unsqueeze(-1)?, false)?.f_squeeze_dim(-1)?)
}

/// f64 stays f64; every other float type is computed in f32.
#[cfg(feature = "tch")]
pub(crate) fn to_compute_kind(x: &Tensor) -> Result<Tensor> {
    Ok(if matches!(x.kind(), Kind::Double | Kind::Float) { x.shallow_clone() } else { x.f_to_kind(Kind::Float)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn scalar_estimators_hand_values() {
        // lr = logp − ref = 0.5
        assert_eq!(kl_token(0.5, KlEstimator::K1, false), (0.5, 1.0));
        assert_eq!(kl_token(-0.5, KlEstimator::Abs, false), (0.5, -1.0));
        assert_eq!(kl_token(0.5, KlEstimator::Abs, false), (0.5, 1.0));
        assert_eq!(kl_token(0.0, KlEstimator::Abs, false), (0.0, 0.0));
        assert_eq!(kl_token(0.5, KlEstimator::K2, false), (0.125, 0.5));
        // k3: x = −0.5, e^x − x − 1 = 0.106530659..., d/dlogp = 1 − e^x = 0.393469340...
        let (v, g) = kl_token(0.5, KlEstimator::K3, false);
        assert!((v - ((-0.5f64).exp() + 0.5 - 1.0)).abs() < 1e-15);
        assert!((g - (1.0 - (-0.5f64).exp())).abs() < 1e-15);
        // straight-through: value of the estimator, gradient of k2 (= lr)
        let (v2, g2) = kl_token(0.5, KlEstimator::K3, true);
        assert_eq!((v2, g2), (v, 0.5));
        // clamps: |lr| > 20 or a value above 10 stop the gradient
        assert_eq!(kl_token(-30.0, KlEstimator::K3, false), (10.0, 0.0));
        assert_eq!(kl_token(-5.0, KlEstimator::K3, false).0, 10.0);
        assert_eq!(kl_token(-5.0, KlEstimator::K3, false).1, 0.0);
        let (v, g) = kl_token(25.0, KlEstimator::K3, false);
        assert!((v - ((-20f64).exp() + 20.0 - 1.0).min(10.0)).abs() < 1e-12 && g == 0.0);
    }

    #[test]
    fn params_setters_names_and_validation() {
        let p = KlParams::default().estimator(KlEstimator::Abs).straight_through(true).coef(0.5);
        assert_eq!(p, KlParams { estimator: KlEstimator::Abs, straight_through: true, coef: 0.5 });
        assert!(p.check().is_ok());
        assert!(KlParams::default().coef(0.0).check().is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            match KlParams::default().coef(bad).check() {
                Err(crate::RlvrCoreError::InvalidParameter { name, .. }) => assert_eq!(name, "kl.coef"),
                other => panic!("{other:?}"),
            }
        }
        for (name, est, st) in [
            ("kl", KlEstimator::K1, false),
            ("k1+", KlEstimator::K1, true),
            ("abs", KlEstimator::Abs, false),
            ("mse", KlEstimator::K2, false),
            ("k2", KlEstimator::K2, false),
            ("low_var_kl", KlEstimator::K3, false),
            ("k3+", KlEstimator::K3, true),
        ] {
            let p = KlParams::from_verl_name(name, 0.2).unwrap();
            assert_eq!((p.estimator, p.straight_through, p.coef), (est, st, 0.2), "{name}");
        }
        assert!(KlParams::from_verl_name("full", 0.1).is_err());
    }
}
