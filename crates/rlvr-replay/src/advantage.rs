//! Group advantage estimators computed without libtorch (for groups the buffer stores or
//! recomputes; `rlvr-core` has the tensor versions).

use serde::{Deserialize, Serialize};

/// How a group's per-response advantages are computed from its `K` rewards `R`.
///
/// | variant | formula | reference |
/// |---|---|---|
/// | `Grpo { eps, unbiased }` | `(R_k − μ) / (σ + eps)`, σ with `K − 1` (unbiased) or `K` | DeepSeekMath; verl `grpo` (eps 1e-6, unbiased) |
/// | `DrGrpo` | `R_k − μ` | Dr.GRPO; OpenRLHF `dr_grpo` |
/// | `Rloo` | `R_k − (Σ R − R_k) / (K − 1)` (0 when `K = 1`) | RLOO; OpenRLHF `rloo` |
///
/// Sums are taken in `f64`. The default is verl's GRPO (`eps = 1e-6`, unbiased σ).
///
/// ```
/// use rlvr_replay::AdvantageEstimator;
/// let a = AdvantageEstimator::default().compute(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
/// assert!((a[0] - 2.474867).abs() < 1e-5 && (a[1] + 0.353552).abs() < 1e-5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageEstimator {
    /// Group-normalised: `(R − μ) / (σ + eps)`.
    Grpo {
        /// Added to σ (verl 1e-6, TRL 1e-4, OpenRLHF 1e-9).
        eps: f32,
        /// σ with Bessel's correction (`K − 1`), as verl, TRL and OpenRLHF.
        unbiased: bool,
    },
    /// Mean-centred only: `R − μ`.
    DrGrpo,
    /// Leave-one-out baseline: `R_k − mean of the other K − 1 rewards`.
    Rloo,
}

impl Default for AdvantageEstimator {
    fn default() -> Self {
        AdvantageEstimator::Grpo { eps: 1e-6, unbiased: true }
    }
}

impl AdvantageEstimator {
    /// Advantages of one group's rewards (empty in, empty out).
    pub fn compute(&self, rewards: &[f32]) -> Vec<f32> {
        let k = rewards.len();
        if k == 0 {
            return Vec::new();
        }
        let sum: f64 = rewards.iter().map(|&r| f64::from(r)).sum();
        let mean = sum / k as f64;
        match *self {
            AdvantageEstimator::Grpo { eps, unbiased } => {
                let ss: f64 = rewards.iter().map(|&r| (f64::from(r) - mean).powi(2)).sum();
                let denom = if unbiased { k.saturating_sub(1) } else { k };
                let std = if denom == 0 { 0.0 } else { (ss / denom as f64).sqrt() };
                let scale = std + f64::from(eps);
                rewards
                    .iter()
                    .map(|&r| {
                        let c = f64::from(r) - mean;
                        // A constant group has c == 0 exactly for any eps (also eps == 0).
                        if c == 0.0 {
                            0.0
                        } else {
                            (c / scale) as f32
                        }
                    })
                    .collect()
            }
            AdvantageEstimator::DrGrpo => rewards.iter().map(|&r| (f64::from(r) - mean) as f32).collect(),
            AdvantageEstimator::Rloo => {
                if k == 1 {
                    return vec![0.0];
                }
                rewards.iter().map(|&r| (f64::from(r) - (sum - f64::from(r)) / (k - 1) as f64) as f32).collect()
            }
        }
    }
}

/// Mean and standard deviation (`ddof` = 0 population, 1 unbiased) of rewards, in `f64`.
pub(crate) fn mean_std(rewards: &[f32], ddof: usize) -> (f64, f64) {
    let k = rewards.len();
    if k == 0 {
        return (0.0, 0.0);
    }
    let mean = rewards.iter().map(|&r| f64::from(r)).sum::<f64>() / k as f64;
    if k <= ddof {
        return (mean, 0.0);
    }
    let ss: f64 = rewards.iter().map(|&r| (f64::from(r) - mean).powi(2)).sum();
    (mean, (ss / (k - ddof) as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
    }

    // Reference vectors (research/rlvr.md §8), from
    //   R = [1,0,0,0,0,0,0,0]; mu = 0.125; std_unbiased = 0.353553
    //   GRPO (eps 1e-6): (R - mu) / (std + 1e-6) = [2.474867, -0.353552 x 7]
    #[test]
    fn golden_vectors() {
        let r = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let mut want = vec![-0.353552; 8];
        want[0] = 2.474867;
        assert!(close(&AdvantageEstimator::default().compute(&r), &want));
        let mut want = vec![-0.125; 8];
        want[0] = 0.875;
        assert!(close(&AdvantageEstimator::DrGrpo.compute(&r), &want));
        // RLOO: 1 - 0/7 = 1; 0 - 1/7 = -0.142857
        let mut want = vec![-1.0 / 7.0; 8];
        want[0] = 1.0;
        assert!(close(&AdvantageEstimator::Rloo.compute(&r), &want));
        // population sigma = 0.330719
        let pop = AdvantageEstimator::Grpo { eps: 0.0, unbiased: false }.compute(&r);
        assert!((pop[0] - 0.875 / 0.330719).abs() < 1e-4);
    }

    #[test]
    fn constant_groups_have_zero_advantage() {
        for est in [AdvantageEstimator::default(), AdvantageEstimator::DrGrpo, AdvantageEstimator::Rloo] {
            assert!(est.compute(&[0.5; 4]).iter().all(|&a| a == 0.0));
            assert_eq!(est.compute(&[1.0]), vec![0.0]);
        }
        assert!(AdvantageEstimator::Grpo { eps: 0.0, unbiased: true }.compute(&[1.0; 3]).iter().all(|&a| a == 0.0));
        assert!(AdvantageEstimator::Rloo.compute(&[]).is_empty());
        assert_eq!(mean_std(&[1.0, 3.0], 1), (2.0, 2f64.sqrt()));
    }
}
