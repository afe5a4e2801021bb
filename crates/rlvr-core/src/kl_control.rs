//! The KL coefficient controller (tch-free): fixed, or adaptive toward a target KL (Ziegler et
//! al., *Fine-Tuning Language Models from Human Preferences*, arXiv 1909.08593; verl
//! `AdaptiveKLController`, `algorithm.kl_ctrl`).
//!
//! ```text
//! adaptive:  e = clip(KL / target − 1, −0.2, 0.2);   β ← β · (1 + e · n_steps / horizon)
//! ```
//!
//! `KL` is the measured KL of the step (e.g. the mean `kl_ref` metric, or the in-reward KL) and
//! `n_steps` the number of samples (verl passes the batch size). The controller's state is the
//! current `β`; it serialises, so a checkpoint resumes exactly.
//!
//! ```
//! use rlvr_core::{KlControlParams, KlController, Params};
//! let mut c = KlController::new(KlControlParams::adaptive(0.001, 0.1, 10_000).check()?);
//! c.update(0.15, 512)?; // KL above target: β grows by (1 + 0.2 · 512/10000)
//! assert!((c.value() - 0.001 * 1.01024).abs() < 1e-15);
//! # Ok::<(), rlvr_core::RlvrCoreError>(())
//! ```

use rl_core::Valid;
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result, RlvrCoreError};

/// Fixed or adaptive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KlControlKind {
    /// `β` stays at `kl_coef` (verl default).
    #[default]
    Fixed,
    /// `β` moves toward the KL target.
    Adaptive,
}

/// Parameters of the KL controller (verl `algorithm.kl_ctrl`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `kind` | `Fixed` | fixed or adaptive (verl `type`) | |
/// | `kl_coef` | `0.001` | initial `β` (verl `kl_coef`) | ≥ 0 |
/// | `target_kl` | `0.1` | the KL the adaptive controller steers to (verl `target_kl`) | > 0 |
/// | `horizon` | `10000` | samples over which a 20% error moves `β` by 20% (verl `horizon`) | > 0 |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KlControlParams {
    /// Fixed or adaptive.
    pub kind: KlControlKind,
    /// Initial coefficient `β`.
    pub kl_coef: f64,
    /// Target KL.
    pub target_kl: f64,
    /// Horizon in samples.
    pub horizon: f64,
}

impl Default for KlControlParams {
    fn default() -> Self {
        Self { kind: KlControlKind::Fixed, kl_coef: 0.001, target_kl: 0.1, horizon: 10_000.0 }
    }
}

impl KlControlParams {
    /// An adaptive controller.
    pub fn adaptive(kl_coef: f64, target_kl: f64, horizon: u64) -> Self {
        Self { kind: KlControlKind::Adaptive, kl_coef, target_kl, horizon: horizon as f64 }
    }
    /// Sets `kind`.
    #[must_use]
    pub fn kind(mut self, kind: KlControlKind) -> Self {
        self.kind = kind;
        self
    }
    /// Sets `kl_coef`.
    #[must_use]
    pub fn kl_coef(mut self, v: f64) -> Self {
        self.kl_coef = v;
        self
    }
    /// Sets `target_kl`.
    #[must_use]
    pub fn target_kl(mut self, v: f64) -> Self {
        self.target_kl = v;
        self
    }
    /// Sets `horizon`.
    #[must_use]
    pub fn horizon(mut self, v: f64) -> Self {
        self.horizon = v;
        self
    }
}

impl rl_core::Params for KlControlParams {
    type Error = RlvrCoreError;
    fn validate(&self) -> Result<()> {
        if !(self.kl_coef.is_finite() && self.kl_coef >= 0.0) {
            return Err(invalid("kl_ctrl.kl_coef", self.kl_coef, "must be finite and >= 0"));
        }
        if !(self.target_kl.is_finite() && self.target_kl > 0.0) {
            return Err(invalid("kl_ctrl.target_kl", self.target_kl, "must be finite and > 0"));
        }
        if !(self.horizon.is_finite() && self.horizon > 0.0) {
            return Err(invalid("kl_ctrl.horizon", self.horizon, "must be finite and > 0"));
        }
        Ok(())
    }
}

/// The KL coefficient `β` over training (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "KlControllerState", into = "KlControllerState")]
pub struct KlController {
    params: Valid<KlControlParams>,
    value: f64,
}

/// Serialised form of a [`KlController`]; deserialisation re-checks it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KlControllerState {
    params: KlControlParams,
    value: f64,
}

impl TryFrom<KlControllerState> for KlController {
    type Error = RlvrCoreError;
    fn try_from(s: KlControllerState) -> Result<Self> {
        let params = rl_core::Params::check(s.params)?;
        if !(s.value.is_finite() && s.value >= 0.0) {
            return Err(invalid("kl_ctrl.value", s.value, "must be finite and >= 0"));
        }
        Ok(Self { params, value: s.value })
    }
}

impl From<KlController> for KlControllerState {
    fn from(c: KlController) -> Self {
        Self { params: c.params.into_inner(), value: c.value }
    }
}

impl KlController {
    /// A controller at `β = kl_coef`.
    pub fn new(params: Valid<KlControlParams>) -> Self {
        let value = params.kl_coef;
        Self { params, value }
    }

    /// The current coefficient `β`.
    pub fn value(&self) -> f64 {
        self.value
    }

    /// The parameters.
    pub fn params(&self) -> &Valid<KlControlParams> {
        &self.params
    }

    /// Updates `β` from the step's measured KL over `n_steps` samples (a no-op when fixed).
    ///
    /// # Errors
    /// [`RlvrCoreError::NonFinite`] for a NaN or infinite KL (the controller is unchanged).
    pub fn update(&mut self, current_kl: f64, n_steps: u64) -> Result<f64> {
        if !current_kl.is_finite() {
            return Err(RlvrCoreError::NonFinite { what: "current_kl".into(), index: 0, value: current_kl });
        }
        if self.params.kind == KlControlKind::Adaptive {
            let e = (current_kl / self.params.target_kl - 1.0).clamp(-0.2, 0.2);
            self.value *= 1.0 + e * n_steps as f64 / self.params.horizon;
        }
        Ok(self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn adaptive_update_follows_verl() {
        let mut c = KlController::new(KlControlParams::adaptive(0.2, 0.1, 1000).check().unwrap());
        // KL 0.05: e = −0.5 → clipped −0.2; β = 0.2 (1 − 0.2 · 100/1000) = 0.196
        assert!((c.update(0.05, 100).unwrap() - 0.196).abs() < 1e-15);
        // KL 0.11: e = 0.1; β = 0.196 · (1 + 0.1 · 500/1000) = 0.2058
        assert!((c.update(0.11, 500).unwrap() - 0.2058).abs() < 1e-15);
        // on target: unchanged
        assert!((c.update(0.1, 500).unwrap() - 0.2058).abs() < 1e-15);
        assert!(c.update(f64::NAN, 1).is_err());
        assert!((c.value() - 0.2058).abs() < 1e-15);
        let mut f = KlController::new(KlControlParams::default().kl_coef(0.3).check().unwrap());
        assert_eq!(f.update(5.0, 1000).unwrap(), 0.3);
        assert_eq!(f.params().kind, KlControlKind::Fixed);
    }

    #[test]
    fn params_checkpoint_and_validation() {
        let p = KlControlParams::default().kind(KlControlKind::Adaptive).kl_coef(0.5).target_kl(2.0).horizon(7.0);
        assert_eq!(p, KlControlParams { kind: KlControlKind::Adaptive, kl_coef: 0.5, target_kl: 2.0, horizon: 7.0 });
        for (q, name) in [
            (KlControlParams::default().kl_coef(-1.0), "kl_ctrl.kl_coef"),
            (KlControlParams::default().target_kl(0.0), "kl_ctrl.target_kl"),
            (KlControlParams::default().horizon(0.0), "kl_ctrl.horizon"),
            (KlControlParams::default().horizon(f64::NAN), "kl_ctrl.horizon"),
        ] {
            match q.check() {
                Err(RlvrCoreError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{other:?}"),
            }
        }
        let mut a = KlController::new(p.check().unwrap());
        a.update(3.0, 2).unwrap();
        let json = serde_json::to_string(&a).unwrap();
        let mut b: KlController = serde_json::from_str(&json).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.update(1.0, 3).unwrap(), b.update(1.0, 3).unwrap());
        assert!(serde_json::from_str::<KlController>(&json.replace("\"value\":", "\"value\":-")).is_err());
        let p: KlControlParams = serde_json::from_str(r#"{"kind": "adaptive"}"#).unwrap();
        assert_eq!((p.kl_coef, p.target_kl, p.horizon), (0.001, 0.1, 10_000.0));
        assert!(serde_json::from_str::<KlControlParams>(r#"{"type": "adaptive"}"#).is_err());
    }
}
