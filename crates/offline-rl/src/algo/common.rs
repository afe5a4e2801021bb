//! Pieces the algorithms share: parameter setters, the construction of the TD3 family's
//! actor–critic core ([`rl_agents::ActorCritic`]), the cosine
//! learning-rate schedule, checkpoint writing (the parts are [`rl_nn::parts`]), and small
//! tensor helpers.

use std::path::Path;

use rand::Rng;
use rl_agents::{ActionBounds, ActorCritic, ActorCriticSpec, AgentError};
use rl_core::{Params, Valid};
use rl_nn::optim::AdamParams;
use rl_nn::MlpConfig;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::error::{OfflineError, Result};

/// `rl_agents::Result`: the result type of [`rl_agents::Agent`] methods.
pub(crate) type AResult<T> = std::result::Result<T, AgentError>;

/// One `#[must_use]` setter per field.
macro_rules! setters {
    ($t:ty { $($field:ident : $ty:ty),* $(,)? }) => {
        impl $t {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, v: $ty) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }
    };
}
pub(crate) use setters;

/// Checks a network configuration (identity output; the algorithms add their own output
/// transforms), naming it `name`.
pub(crate) fn check_mlp(name: &str, cfg: &MlpConfig) -> Result<Valid<MlpConfig>> {
    let v = cfg.clone().check().map_err(|e| OfflineError::from(e).prefixed(name))?;
    if cfg.output_activation != rl_nn::Activation::Identity {
        return Err(OfflineError::invalid(
            format!("{name}.output_activation"),
            format!("{:?}", cfg.output_activation),
            "must be identity",
        ));
    }
    Ok(v)
}

/// `torch.optim.Adam(lr)`.
pub(crate) fn adam(lr: f64) -> Result<Valid<AdamParams>> {
    Ok(AdamParams::default().lr(lr).check()?)
}

/// PyTorch's `CosineAnnealingLR(T_max, eta_min = 0)` after `t` scheduler steps, closed form:
/// `lr_t = base · (1 + cos(π t / T_max)) / 2` (`T_max = 0`: constant `base`). Past `T_max` the
/// cosine continues (PyTorch's schedule is periodic); the algorithms stop there at 0 instead.
pub fn cosine_lr(base: f64, t: u64, t_max: u64) -> f64 {
    if t_max == 0 {
        return base;
    }
    let t = t.min(t_max) as f64;
    base * (1.0 + (std::f64::consts::PI * t / t_max as f64).cos()) / 2.0
}

/// [`rl_agents::ActorCritic::new`] with the targets built from a stream seeded by one draw of
/// `init` (taken first), the order offline-rl's algorithms have always drawn their weights in.
pub(crate) fn actor_critic<R: Rng + ?Sized>(
    spec: ActorCriticSpec<'_>,
    device: Device,
    init: &mut R,
) -> AResult<ActorCritic> {
    // the targets' own draws are overwritten by the copy; a separate stream keeps `init` clean
    let mut scratch = rl_core::rng_from_seed(init.random::<u64>());
    ActorCritic::new(spec, device, init, &mut scratch)
}

/// `AgentError::Shape` unless `t` is a `[rows, cols]` float tensor on `device` (an injected
/// noise draw).
pub(crate) fn check_noise(what: &str, t: &Tensor, rows: usize, cols: usize, device: Device) -> AResult<()> {
    let want = [rows as i64, cols as i64];
    if t.size() != want || t.kind() != Kind::Float || t.device() != device {
        return Err(AgentError::Shape {
            what: what.into(),
            expected: format!("float tensor {want:?} on {device:?}"),
            got: format!("{:?} tensor {:?} on {:?}", t.kind(), t.size(), t.device()),
        });
    }
    Ok(())
}

pub(crate) use rl_agents::ensemble_mse;

/// IQL's expectile loss `mean(|τ − 1[d < 0]| · d²)` of `d = target − prediction`.
pub(crate) fn expectile_loss(diff: &Tensor, tau: f64) -> AResult<Tensor> {
    let w = diff.f_lt(0.0)?.f_to_kind(Kind::Float)?.f_mul_scalar(1.0 - 2.0 * tau)?.f_add_scalar(tau)?;
    Ok(w.f_mul(&diff.f_square()?)?.f_mean(Kind::Float)?)
}

pub(crate) use rl_nn::parts::Parts;

/// The widths and bounds every algorithm checkpoint records and checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Shape {
    pub(crate) obs_dim: usize,
    pub(crate) act_dim: usize,
    pub(crate) low: Vec<f32>,
    pub(crate) high: Vec<f32>,
}

impl Shape {
    pub(crate) fn of(obs_dim: usize, bounds: &ActionBounds) -> Self {
        Self { obs_dim, act_dim: bounds.dim(), low: bounds.low().to_vec(), high: bounds.high().to_vec() }
    }
}

/// Refuses a checkpoint of other parameters or another shape (`AgentError::Corrupt` naming the
/// field), before anything is copied.
pub(crate) fn check_saved<P: PartialEq + std::fmt::Debug>(
    path: &str,
    saved: (&P, &Shape),
    ours: (&P, &Shape),
) -> AResult<()> {
    AgentError::ensure_same(path, "params", saved.0, ours.0)?;
    AgentError::ensure_same(path, "shape", saved.1, ours.1)
}

/// Writes a checkpoint directory for an algorithm.
pub(crate) fn save<S: Serialize>(dir: &Path, kind: &str, version: u32, state: &S, parts: &Parts<'_>) -> AResult<()> {
    rl_nn::checkpoint::save_dir(dir, kind, version, state, &parts.collect()?)?;
    Ok(())
}

/// A scalar tensor's value (a host round trip).
pub(crate) fn scalar(t: &Tensor) -> AResult<f64> {
    Ok(t.f_to_kind(Kind::Double)?.f_double_value(&[])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_losses() {
        // d = [1, -2]: (0.7·1² + 0.3·2²) / 2 = 0.95
        let d = Tensor::from_slice(&[1.0f32, -2.0]);
        assert!((scalar(&expectile_loss(&d, 0.7).unwrap()).unwrap() - 0.95).abs() < 1e-6);
        // τ = 0.5 is half the mean squared error
        assert!((scalar(&expectile_loss(&d, 0.5).unwrap()).unwrap() - 1.25).abs() < 1e-6);
        // two critics [[1, 2], [3, 5]] against y = [1, 1]: mean(0, 1) + mean(4, 16) = 0.5 + 10
        let q = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 5.0]).view([2, 2]);
        let y = Tensor::from_slice(&[1.0f32, 1.0]);
        assert!((scalar(&ensemble_mse(&q, &y).unwrap()).unwrap() - 10.5).abs() < 1e-6);
    }

    #[test]
    fn cosine_schedule_matches_pytorch() {
        assert_eq!(cosine_lr(3e-4, 0, 100), 3e-4);
        assert!((cosine_lr(3e-4, 50, 100) - 1.5e-4).abs() < 1e-12);
        assert!(cosine_lr(3e-4, 100, 100).abs() < 1e-12);
        assert!(cosine_lr(3e-4, 150, 100).abs() < 1e-12); // stays at 0 past T_max
        assert_eq!(cosine_lr(3e-4, 7, 0), 3e-4);
        // PyTorch: lr_t = eta_min + (base - eta_min)(1 + cos(pi t / T)) / 2
        let t = 17.0f64;
        assert!((cosine_lr(1.0, 17, 40) - (1.0 + (std::f64::consts::PI * t / 40.0).cos()) / 2.0).abs() < 1e-15);
    }
}
