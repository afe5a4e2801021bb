//! Mean/standard deviation and finiteness checks on slices (tch-free), shared by every
//! estimator and effectiveness rule of `rlvr-core` and by `rlvr-replay`.

use crate::error::{Result, RlvrCoreError};

/// Mean, Bessel-corrected and population standard deviation of a sample, in f64.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MeanStd {
    /// Arithmetic mean (0 for an empty sample).
    pub mean: f64,
    /// Bessel-corrected standard deviation, `sqrt(Σ(x−μ)²/(n−1))` (verl, TRL, OpenRLHF; `torch.std`);
    /// 0 when `n ≤ 1`.
    pub std_unbiased: f64,
    /// Population standard deviation `sqrt(Σ(x−μ)²/n)` (the LPO paper's σ_G); 0 when `n = 0`.
    pub std_pop: f64,
}

/// Mean and both standard deviations of `x` (two passes, f64 accumulation). Accepts `f32` or
/// `f64` values. An empty slice gives all zeros.
///
/// ```
/// let s = rlvr_core::stats::mean_std(&[1.0f32, 3.0]);
/// assert_eq!((s.mean, s.std_unbiased, s.std_pop), (2.0, 2f64.sqrt(), 1.0));
/// ```
pub fn mean_std<T: Copy + Into<f64>>(x: &[T]) -> MeanStd {
    if x.is_empty() {
        return MeanStd::default();
    }
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v.into()).sum::<f64>() / n;
    let ss: f64 = x.iter().map(|&v| (v.into() - mean) * (v.into() - mean)).sum();
    let std_unbiased = if x.len() > 1 { (ss / (n - 1.0)).sqrt() } else { 0.0 };
    MeanStd { mean, std_unbiased, std_pop: (ss / n).sqrt() }
}

/// Index and value of the first NaN or infinite entry of `x`, if any.
///
/// ```
/// assert_eq!(rlvr_core::stats::first_non_finite(&[0.0f32, f32::NAN]).map(|(i, _)| i), Some(1));
/// ```
pub fn first_non_finite<T: Copy + Into<f64>>(x: &[T]) -> Option<(usize, f64)> {
    x.iter().map(|&v| v.into()).enumerate().find(|(_, v)| !v.is_finite())
}

/// [`RlvrCoreError::NonFinite`] naming `what` and the first NaN/infinite entry of `x`.
///
/// # Errors
/// As described.
pub fn check_finite_values<T: Copy + Into<f64>>(what: &str, x: &[T]) -> Result<()> {
    match first_non_finite(x) {
        Some((index, value)) => Err(RlvrCoreError::NonFinite { what: what.into(), index, value }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_std_matches_hand_values() {
        // R = [1,0,0,0,0,0,0,0]: μ = 0.125, σ_unb = 0.353553, σ_pop = 0.330719 (research/rlvr.md §8)
        let s = mean_std(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(s.mean, 0.125);
        assert!((s.std_unbiased - 0.353_553_390_593_273_8).abs() < 1e-15);
        assert!((s.std_pop - 0.330_718_913_883_074).abs() < 1e-15);
        assert_eq!(mean_std(&[4.0f32]), MeanStd { mean: 4.0, std_unbiased: 0.0, std_pop: 0.0 });
        assert_eq!(mean_std::<f64>(&[]), MeanStd::default());
    }

    #[test]
    fn finiteness_names_the_first_bad_entry() {
        assert_eq!(first_non_finite(&[1.0f64, 2.0]), None);
        let (i, v) = first_non_finite(&[1.0f32, f32::INFINITY, f32::NAN]).unwrap();
        assert_eq!((i, v), (1, f64::INFINITY));
        match check_finite_values("rewards", &[0.0, f64::NAN]).unwrap_err() {
            RlvrCoreError::NonFinite { what, index, value } => {
                assert_eq!((what.as_str(), index), ("rewards", 1));
                assert!(value.is_nan());
            }
            e => panic!("{e:?}"),
        }
    }
}
