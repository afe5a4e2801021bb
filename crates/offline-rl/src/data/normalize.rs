//! State normalisation statistics and reward transforms (the preprocessing of DMG, SCAS,
//! TD3+BC and CORL).

use ndarray::{Array1, Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::Dataset;
use crate::error::{OfflineError, Result};

/// Per-dimension state normalisation `s' = (s − mean) / std`, as in TD3+BC, DMG and SCAS
/// (`utils.normalize_states`: `mean` and population `std` of the dataset's observations, then
/// `std + eps`, `eps = 1e-3`) and CORL (`compute_mean_std(eps=1e-3)`). Applied to `obs` and
/// `next_obs` of the dataset and to every observation at evaluation.
///
/// Statistics are accumulated in `f64` and stored as `f32`. Always valid: finite means, finite
/// positive standard deviations (checked on construction and when deserialised).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StateNormRepr", into = "StateNormRepr")]
pub struct StateNorm {
    mean: Vec<f32>,
    std: Vec<f32>,
}

/// The serialised form of [`StateNorm`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateNormRepr {
    /// Means.
    pub mean: Vec<f32>,
    /// Standard deviations (eps included).
    pub std: Vec<f32>,
}

impl TryFrom<StateNormRepr> for StateNorm {
    type Error = OfflineError;
    fn try_from(r: StateNormRepr) -> Result<Self> {
        StateNorm::new(r.mean, r.std)
    }
}

impl From<StateNorm> for StateNormRepr {
    fn from(s: StateNorm) -> Self {
        StateNormRepr { mean: s.mean, std: s.std }
    }
}

impl StateNorm {
    /// The default `eps` of DMG, SCAS, TD3+BC and CORL.
    pub const EPS: f64 = 1e-3;

    /// Statistics from explicit values.
    ///
    /// # Errors
    /// [`OfflineError::Shape`] for lengths that differ or are zero, [`OfflineError::NonFinite`]
    /// for a non-finite mean, [`OfflineError::InvalidParameter`] for a `std` that is not
    /// finite and positive.
    pub fn new(mean: Vec<f32>, std: Vec<f32>) -> Result<Self> {
        if mean.len() != std.len() || mean.is_empty() {
            return Err(OfflineError::shape(
                "state norm",
                format!("mean and std of one length >= 1 (mean {})", mean.len()),
                format!("std {}", std.len()),
            ));
        }
        rl_core::check_finite("state norm mean", mean.iter())?;
        if let Some((i, s)) = std.iter().enumerate().find(|(_, s)| !(s.is_finite() && **s > 0.0)) {
            return Err(OfflineError::invalid(format!("std[{i}]"), s, "must be finite and > 0"));
        }
        Ok(Self { mean, std })
    }

    /// No normalisation for `dim` dimensions (mean 0, std 1).
    ///
    /// # Errors
    /// [`OfflineError::Shape`] for `dim = 0`.
    pub fn identity(dim: usize) -> Result<Self> {
        Self::new(vec![0.0; dim], vec![1.0; dim])
    }

    /// Mean and population standard deviation (+ `eps`) of the dataset's `obs` column.
    ///
    /// # Errors
    /// [`OfflineError::InvalidParameter`] for a negative or non-finite `eps`, or a dimension
    /// whose `std + eps` is zero.
    pub fn fit(dataset: &Dataset, eps: f64) -> Result<Self> {
        crate::error::check::non_negative("eps", eps)?;
        Self::fit_array(dataset.transitions().obs().view(), eps)
    }

    /// As [`StateNorm::fit`] for any observation matrix `[N, O]`.
    ///
    /// # Errors
    /// As [`StateNorm::fit`]; [`OfflineError::Empty`] for no row.
    pub fn fit_array(obs: ArrayView2<'_, f32>, eps: f64) -> Result<Self> {
        let n = obs.nrows();
        if n == 0 {
            return Err(OfflineError::Empty { what: "observations".into() });
        }
        let mut mean = vec![0f64; obs.ncols()];
        for row in obs.rows() {
            for (m, x) in mean.iter_mut().zip(row) {
                *m += f64::from(*x);
            }
        }
        mean.iter_mut().for_each(|m| *m /= n as f64);
        let mut var = vec![0f64; obs.ncols()];
        for row in obs.rows() {
            for ((v, m), x) in var.iter_mut().zip(&mean).zip(row) {
                let d = f64::from(*x) - m;
                *v += d * d;
            }
        }
        let std: Vec<f32> = var.iter().map(|v| ((v / n as f64).sqrt() + eps) as f32).collect();
        Self::new(mean.iter().map(|m| *m as f32).collect(), std)
    }

    /// Observation width.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Means.
    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    /// Standard deviations.
    pub fn std(&self) -> &[f32] {
        &self.std
    }

    fn check_width(&self, got: usize) -> Result<()> {
        if got != self.dim() {
            return Err(OfflineError::shape("observation", format!("width {}", self.dim()), format!("width {got}")));
        }
        Ok(())
    }

    /// `(obs − mean) / std` row by row.
    ///
    /// # Errors
    /// [`OfflineError::Shape`] for another width.
    pub fn normalize(&self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>> {
        self.check_width(obs.ncols())?;
        let mut out = obs.to_owned();
        for mut row in out.rows_mut() {
            for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *x = (*x - m) / s;
            }
        }
        Ok(out)
    }

    /// `obs · std + mean` row by row (the inverse of [`StateNorm::normalize`]).
    ///
    /// # Errors
    /// [`OfflineError::Shape`] for another width.
    pub fn denormalize(&self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>> {
        self.check_width(obs.ncols())?;
        let mut out = obs.to_owned();
        for mut row in out.rows_mut() {
            for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *x = *x * s + m;
            }
        }
        Ok(out)
    }

    /// The dataset with `obs` and `next_obs` normalised.
    ///
    /// # Errors
    /// [`OfflineError::Shape`] for another observation width.
    pub fn apply(&self, dataset: &Dataset) -> Result<Dataset> {
        self.check_width(dataset.obs_dim())?;
        dataset.map_observations(|row| {
            for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *x = (*x - m) / s;
            }
        })
    }
}

/// A reward transform applied to a dataset before training.
///
/// | variant | `r'` | used by |
/// |---|---|---|
/// | `none` | `r` | DMG, SCAS, TD3+BC on Gym-MuJoCo |
/// | `affine { scale, shift }` | `scale · r + shift` | CQL's `reward_scale`/`reward_bias` |
/// | `return_range { target = 1000 }` | `r · target / (max_return − min_return)` over the dataset's episodes | IQL and CORL on Gym-MuJoCo |
/// | `sparse_minus_one` | `0` if `r = 1`, else `−1` | DMG and SCAS on AntMaze (`np.where(r == 1, 0, -1)`) |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RewardTransform {
    /// Rewards as stored.
    #[default]
    None,
    /// `scale · r + shift`.
    Affine {
        /// Multiplier.
        scale: f64,
        /// Offset.
        #[serde(default)]
        shift: f64,
    },
    /// `r · target / (max episode return − min episode return)`.
    ReturnRange {
        /// Return span after the transform (IQL: 1000).
        #[serde(default = "default_return_target")]
        target: f64,
    },
    /// `0` where `r = 1`, `−1` elsewhere.
    SparseMinusOne,
}

fn default_return_target() -> f64 {
    1000.0
}

impl RewardTransform {
    /// The dataset with transformed rewards (episodes from [`Dataset::episodes`]).
    ///
    /// # Errors
    /// [`OfflineError::InvalidParameter`] for non-finite parameters or a dataset whose
    /// episode returns are all equal (`return_range`); [`OfflineError::NonFinite`] for a
    /// non-finite result.
    pub fn apply(&self, dataset: &Dataset) -> Result<Dataset> {
        let r = dataset.transitions().reward();
        let out: Array1<f32> = match *self {
            RewardTransform::None => return Ok(dataset.clone()),
            RewardTransform::Affine { scale, shift } => {
                rl_core::check_finite_f64("reward transform", [scale, shift].iter())?;
                r.mapv(|x| (scale * f64::from(x) + shift) as f32)
            }
            RewardTransform::ReturnRange { target } => {
                crate::error::check::positive("target", target)?;
                let returns = dataset.episode_returns();
                let hi = returns.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let lo = returns.iter().copied().fold(f64::INFINITY, f64::min);
                if (hi - lo).partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                    return Err(OfflineError::invalid(
                        "return_range",
                        format!("[{lo}, {hi}]"),
                        "episode returns must span a positive range",
                    ));
                }
                let k = target / (hi - lo);
                r.mapv(|x| (f64::from(x) * k) as f32)
            }
            RewardTransform::SparseMinusOne => r.mapv(|x| if x == 1.0 { 0.0 } else { -1.0 }),
        };
        dataset.with_rewards(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tests::toy;
    use ndarray::array;

    #[test]
    fn fit_matches_hand_statistics() {
        let obs = array![[1.0f32, 10.0], [3.0, 10.0]];
        let n = StateNorm::fit_array(obs.view(), 1e-3).unwrap();
        assert_eq!(n.mean(), &[2.0, 10.0]);
        // population std: 1 and 0, plus eps
        assert!((n.std()[0] - 1.001).abs() < 1e-6);
        assert!((n.std()[1] - 0.001).abs() < 1e-9);
        let z = n.normalize(obs.view()).unwrap();
        assert!((z[[0, 0]] + 1.0 / 1.001).abs() < 1e-6);
        assert_eq!(z[[1, 1]], 0.0);
        let back = n.denormalize(z.view()).unwrap();
        assert!((back[[0, 0]] - 1.0).abs() < 1e-6);
        assert!(n.normalize(array![[1.0f32]].view()).is_err());
        assert!(StateNorm::fit_array(Array2::<f32>::zeros((0, 2)).view(), 1e-3).is_err());
        // zero spread without eps is refused
        assert!(StateNorm::fit_array(obs.view(), 0.0).is_err());
    }

    #[test]
    fn checked_construction_and_serde() {
        assert!(StateNorm::new(vec![0.0], vec![0.0]).is_err());
        assert!(StateNorm::new(vec![f32::NAN], vec![1.0]).is_err());
        assert!(StateNorm::new(vec![0.0, 1.0], vec![1.0]).is_err());
        let s = StateNorm::new(vec![0.5, -1.0], vec![2.0, 0.25]).unwrap();
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<StateNorm>(&j).unwrap(), s);
        assert!(serde_json::from_str::<StateNorm>(r#"{"mean":[0.0],"std":[-1.0]}"#).is_err());
    }

    #[test]
    fn apply_normalises_obs_and_next_obs() {
        let d = toy();
        let n = StateNorm::fit(&d, StateNorm::EPS).unwrap();
        let z = n.apply(&d).unwrap();
        let col: f32 = z.transitions().obs().column(0).sum();
        assert!(col.abs() < 1e-4, "{col}");
        let want = (d.transitions().next_obs()[[0, 0]] - n.mean()[0]) / n.std()[0];
        assert_eq!(z.transitions().next_obs()[[0, 0]], want);
    }

    #[test]
    fn reward_transforms() {
        let d = toy(); // rewards 0..4, episode returns 3 and 7
        let a = RewardTransform::Affine { scale: 2.0, shift: -1.0 }.apply(&d).unwrap();
        assert_eq!(a.transitions().reward().to_vec(), vec![-1.0, 1.0, 3.0, 5.0, 7.0]);
        let r = RewardTransform::ReturnRange { target: 1000.0 }.apply(&d).unwrap();
        assert_eq!(r.transitions().reward()[1], 250.0); // 1 * 1000 / (7 - 3)
        let s = RewardTransform::SparseMinusOne.apply(&d).unwrap();
        assert_eq!(s.transitions().reward().to_vec(), vec![-1.0, 0.0, -1.0, -1.0, -1.0]);
        assert_eq!(RewardTransform::None.apply(&d).unwrap(), d);
        let flat = d.select_episodes(&[0]).unwrap();
        assert!(RewardTransform::ReturnRange { target: 1000.0 }.apply(&flat).is_err());
        let t: RewardTransform = serde_json::from_str(r#"{"kind":"return_range"}"#).unwrap();
        assert_eq!(t, RewardTransform::ReturnRange { target: 1000.0 });
    }
}
