//! LPO — Listwise Policy Optimization (Qu et al., arXiv 2605.06139): group-based RLVR as
//! target-projection on the response simplex.
//!
//! For each group of `K` responses, with `base` the behaviour policy (or the proximal policy
//! when no behaviour log-probs are given, i.e. on-policy data):
//!
//! ```text
//! s_θ,k = Σ_t m_kt (logp_kt − base_kt)              sequence log-ratio (f64 sum)
//! s_t,k = Σ_t m_kt (prox_kt − base_kt)              pre-update log-ratio (0 on-policy)
//! P_θ   = softmax_k(s_θ)                            listwise policy (log-sum-exp, f64)
//! φ_k   = A_k / τ + s_t,k                           target logits from any advantage A
//! w*    = softmax_k(φ)                              listwise Gibbs target (Theorem 1)
//! forward KL  (LPO_fwd, Eq. 10): c_k = P_θ,k − w*_k
//! reverse KL  (LPO_rev, Eq. 11): d = s_θ − φ, d̄ = Σ_j P_θ,j d_j, c_k = P_θ,k (d_k − d̄)
//! pointwise ablation (§5.4.1):   c_k = −w*_k
//! ```
//!
//! The loss is the stop-gradient surrogate `Σ_k sg(c_k) log π_θ(y_k)` with the token clip of
//! §4.3: per token `ℓ_kt = K · sg(c_k) · clip(logp_kt − base_kt, log(1−ε), log(1+ε))`, then any
//! [`crate::Aggregation`]. The factor `K` (option `scale_by_group_size`, default on) makes the
//! per-sequence coefficient comparable to an advantage: on-policy `K·c_rev = −A` for
//! zero-mean A, so LPO_rev equals the PG loss there (Proposition 1), and with
//! `seq-mean-token-sum` aggregation the loss is the paper's `(1/B) Σ_x Σ_k c_k log π(y_k|x)`
//! (Algorithm 1).
//!
//! Open choices of the paper, configurable here: whether `s_θ` uses the clipped or the raw
//! token log-ratios (`listwise_uses_clipped`, default raw), the temperature multiplier `τ`
//! (default 1: the temperature is inherited from the advantage estimator — GRPO `σ_G`,
//! Dr.GRPO 1, MaxRL `μ_G`), the token clip `ε` (default 0.2, `None` disables it) and the
//! normalisation (any aggregation mode). Micro-batches must contain whole groups (the softmax
//! couples a group's members). Groups of one response have no listwise signal and are an
//! error. Off-policy data: pass behaviour log-probs; the listwise normalisation acts as
//! self-normalised importance sampling (App. C.2), so the decoupled correction is usually left
//! off for LPO (it composes, multiplying the surrogate, if configured).

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result, RlvrCoreError};
use crate::groups::Groups;
use crate::stats::check_finite_values;

/// Which divergence is projected onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Projection {
    /// `D_KL(w* ‖ P_θ)`: `c = P_θ − w*` (bounded, mode-covering). Default: the paper's best on
    /// Pass@k.
    #[default]
    Forward,
    /// `D_KL(P_θ ‖ w*)`: `c = P_θ (d − d̄)` (PG at the on-policy point).
    Reverse,
    /// The pointwise MPO/AWR-style ablation `c = −w*` (no self-correction).
    Pointwise,
}

/// LPO configuration.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `projection` | `Forward` | LPO_fwd, Eq. 10 | see [`Projection`] |
/// | `temperature` | `1.0` | τ multiplier on the advantage (τ inherited from the estimator, Table 1) | > 0 |
/// | `clip_eps` | `Some(0.2)` | token log-ratio clip `[log 0.8, log 1.2]`, §4.3 | (0, 1) |
/// | `listwise_uses_clipped` | `false` | open choice: clipped δ inside `s_θ` | |
/// | `scale_by_group_size` | `true` | per-token coefficient `K·c` (see module docs) | |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LpoParams {
    /// Divergence.
    pub projection: Projection,
    /// Temperature multiplier: `φ = A/τ + s_t`.
    pub temperature: f64,
    /// Token log-ratio clip ε (`None`: no clip).
    pub clip_eps: Option<f64>,
    /// Use the clipped token log-ratios inside `s_θ`.
    pub listwise_uses_clipped: bool,
    /// Multiply the coefficient by the group size `K`.
    pub scale_by_group_size: bool,
}

impl Default for LpoParams {
    fn default() -> Self {
        Self {
            projection: Projection::Forward,
            temperature: 1.0,
            clip_eps: Some(0.2),
            listwise_uses_clipped: false,
            scale_by_group_size: true,
        }
    }
}

impl LpoParams {
    /// Defaults with `projection`.
    pub fn new(projection: Projection) -> Self {
        Self { projection, ..Self::default() }
    }
    /// Sets the temperature multiplier.
    #[must_use]
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }
    /// Sets the token clip ε.
    #[must_use]
    pub fn clip_eps(mut self, eps: Option<f64>) -> Self {
        self.clip_eps = eps;
        self
    }

    /// Sets the projection.
    #[must_use]
    pub fn projection(mut self, p: Projection) -> Self {
        self.projection = p;
        self
    }
    /// Sets whether `s_θ` uses the clipped token log-ratios.
    #[must_use]
    pub fn listwise_uses_clipped(mut self, on: bool) -> Self {
        self.listwise_uses_clipped = on;
        self
    }
    /// Sets whether the coefficient is multiplied by the group size `K`.
    #[must_use]
    pub fn scale_by_group_size(mut self, on: bool) -> Self {
        self.scale_by_group_size = on;
        self
    }

    /// Checks `temperature > 0` and `0 < clip_eps < 1`, naming the field under `prefix`.
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`].
    pub fn validate_at(&self, prefix: &str) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(invalid(&format!("{prefix}.temperature"), self.temperature, "must be finite and > 0"));
        }
        if let Some(e) = self.clip_eps {
            if !(e.is_finite() && e > 0.0 && e < 1.0) {
                return Err(invalid(&format!("{prefix}.clip_eps"), e, "must be in (0, 1)"));
            }
        }
        Ok(())
    }
}

impl rl_core::Params for LpoParams {
    type Error = RlvrCoreError;
    fn validate(&self) -> Result<()> {
        self.validate_at("lpo")
    }
}

/// Listwise quantities of one call, per sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct LpoCoefficients {
    /// Projection coefficients `c_k` (without the `K` factor).
    pub coef: Vec<f64>,
    /// Target `w*_k`.
    pub target: Vec<f64>,
    /// Listwise policy `P_θ,k`.
    pub p_theta: Vec<f64>,
}

impl LpoCoefficients {
    /// Mean over groups of `Σ_k |c_k|`, max `|c_k|`, mean target entropy `H(w*)`, mean listwise
    /// entropy `H(P_θ)`, and the fraction of groups whose coefficients are all zero.
    pub fn summary(&self, groups: &Groups) -> (f64, f64, f64, f64, f64) {
        let g = groups.num_groups() as f64;
        let (mut l1, mut maxabs, mut ht, mut hp, mut zero) = (0.0, 0.0f64, 0.0, 0.0, 0.0);
        let ent = |p: f64| if p > 0.0 { -p * p.ln() } else { 0.0 };
        for m in groups.iter() {
            let s: f64 = m.iter().map(|&i| self.coef[i].abs()).sum();
            l1 += s;
            if s == 0.0 {
                zero += 1.0;
            }
            for &i in m {
                maxabs = maxabs.max(self.coef[i].abs());
                ht += ent(self.target[i]);
                hp += ent(self.p_theta[i]);
            }
        }
        (l1 / g, maxabs, ht / g, hp / g, zero / g)
    }
}

/// Log-softmax of `x` within each group, in f64 with log-sum-exp.
fn group_log_softmax(x: &[f64], groups: &Groups) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for m in groups.iter() {
        let mx = m.iter().map(|&i| x[i]).fold(f64::NEG_INFINITY, f64::max);
        let lse = mx + m.iter().map(|&i| (x[i] - mx).exp()).sum::<f64>().ln();
        for &i in m {
            out[i] = x[i] - lse;
        }
    }
    out
}

/// The LPO projection coefficients from per-sequence log-ratio sums and advantages.
///
/// `s_theta[k] = Σ_t m (logp − base)`, `s_t[k] = Σ_t m (prox − base)` (all zeros on-policy),
/// `advantages[k]` from any estimator.
///
/// # Errors
/// [`RlvrCoreError::Groups`] when the lengths differ from the groups;
/// [`RlvrCoreError::NonFinite`] for NaN/inf inputs; [`RlvrCoreError::GroupTooSmall`] for a
/// group of one; bad parameters.
pub fn lpo_coefficients(
    s_theta: &[f64],
    s_t: &[f64],
    advantages: &[f64],
    groups: &Groups,
    params: &LpoParams,
) -> Result<LpoCoefficients> {
    params.validate_at("lpo")?;
    groups.check_len(s_theta.len(), "s_theta")?;
    groups.check_len(s_t.len(), "s_t")?;
    groups.check_len(advantages.len(), "advantages")?;
    check_finite_values("s_theta", s_theta)?;
    check_finite_values("s_t", s_t)?;
    check_finite_values("advantages", advantages)?;
    for (g, m) in groups.iter().enumerate() {
        if m.len() < 2 {
            return Err(RlvrCoreError::GroupTooSmall { group: g, size: m.len(), method: "lpo".into(), min: 2 });
        }
    }
    let phi: Vec<f64> = advantages.iter().zip(s_t).map(|(a, s)| a / params.temperature + s).collect();
    let log_w = group_log_softmax(&phi, groups);
    let log_p = group_log_softmax(s_theta, groups);
    let target: Vec<f64> = log_w.iter().map(|v| v.exp()).collect();
    let p_theta: Vec<f64> = log_p.iter().map(|v| v.exp()).collect();
    let coef = match params.projection {
        Projection::Forward => p_theta.iter().zip(&target).map(|(p, w)| p - w).collect(),
        Projection::Pointwise => target.iter().map(|w| -w).collect(),
        Projection::Reverse => {
            // d_k = s_θ,k − φ_k; shift-invariant within a group, so use log P − log w* (bounded)
            let d: Vec<f64> = log_p.iter().zip(&log_w).map(|(p, w)| p - w).collect();
            let mut c = vec![0.0; d.len()];
            for m in groups.iter() {
                let dbar: f64 = m.iter().map(|&i| p_theta[i] * d[i]).sum();
                for &i in m {
                    c[i] = p_theta[i] * (d[i] - dbar);
                }
            }
            c
        }
    };
    Ok(LpoCoefficients { coef, target, p_theta })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn setters_and_validation() {
        let p = LpoParams::new(Projection::Reverse)
            .temperature(0.5)
            .clip_eps(None)
            .listwise_uses_clipped(true)
            .scale_by_group_size(false)
            .projection(Projection::Pointwise);
        assert_eq!(
            p,
            LpoParams {
                projection: Projection::Pointwise,
                temperature: 0.5,
                clip_eps: None,
                listwise_uses_clipped: true,
                scale_by_group_size: false
            }
        );
        assert!(p.check().is_ok());
        for (q, name) in [
            (LpoParams::default().temperature(0.0), "lpo.temperature"),
            (LpoParams::default().temperature(f64::NAN), "lpo.temperature"),
            (LpoParams::default().clip_eps(Some(0.0)), "lpo.clip_eps"),
            (LpoParams::default().clip_eps(Some(1.0)), "lpo.clip_eps"),
        ] {
            match q.check() {
                Err(RlvrCoreError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{q:?}: {other:?}"),
            }
        }
        assert!(LpoParams::default().clip_eps(Some(0.999)).check().is_ok());
        assert!(serde_json::from_str::<LpoParams>(r#"{"projection": "reverse", "temprature": 2}"#).is_err());
    }

    #[test]
    fn summary_figures() {
        let g = Groups::uniform(2, 2).unwrap();
        let c = LpoCoefficients {
            coef: vec![0.25, -0.25, 0.0, 0.0],
            target: vec![0.75, 0.25, 0.5, 0.5],
            p_theta: vec![0.5; 4],
        };
        let (l1, maxabs, ht, hp, zero) = c.summary(&g);
        assert_eq!((l1, maxabs, zero), (0.25, 0.25, 0.5));
        let h = |p: f64| -p * p.ln();
        assert!((ht - (h(0.75) + h(0.25) + 2.0 * h(0.5)) / 2.0).abs() < 1e-15);
        assert!((hp - 2.0 * h(0.5)).abs() < 1e-15);
    }
}
