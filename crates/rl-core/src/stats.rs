//! Small statistics: moments, running mean/std, quantiles, CVaR, correlations.
//!
//! Conventions (documented because the literature varies):
//! - [`quantile`] interpolates linearly between order statistics (NumPy's default, Hyndman & Fan
//!   type 7).
//! - [`cvar_upper`] (for losses) is the mean of the worst, i.e. largest, `ceil((1 - alpha) * n)`
//!   values; [`cvar_lower`] (for returns) the mean of the smallest ones. This is the empirical
//!   CVaR used by MPTS/PDTS ("CVaR_alpha = mean of the worst (1 - alpha) fraction").

use serde::{Deserialize, Serialize};

use crate::error::{check_finite_f64, Result, RlCoreError};

/// Arithmetic mean; 0 for an empty slice.
pub fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// Variance with `ddof` delta degrees of freedom (0: population, 1: Bessel); 0 when
/// `x.len() <= ddof`.
pub fn variance(x: &[f64], ddof: usize) -> f64 {
    if x.len() <= ddof {
        return 0.0;
    }
    let m = mean(x);
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - ddof) as f64
}

/// Standard deviation with `ddof` delta degrees of freedom.
pub fn std_dev(x: &[f64], ddof: usize) -> f64 {
    variance(x, ddof).sqrt()
}

/// Running mean and variance over a stream of vectors (Chan et al.'s parallel update), as used
/// for observation normalisation. Starts with `count = epsilon` like the common RL
/// implementations so the first normalisation does not divide by zero.
///
/// Always consistent: `mean` and `var` have the same length, every value is finite, variances
/// are `>= 0` and the count is finite and `> 0` ([`RunningMeanStd::from_parts`] and
/// deserialisation check it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "MeanStdParts", into = "MeanStdParts")]
pub struct RunningMeanStd {
    mean: Vec<f64>,
    var: Vec<f64>,
    count: f64,
}

/// The serialised form, checked by `TryFrom`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeanStdParts {
    mean: Vec<f64>,
    var: Vec<f64>,
    count: f64,
}

impl TryFrom<MeanStdParts> for RunningMeanStd {
    type Error = RlCoreError;
    fn try_from(p: MeanStdParts) -> Result<Self> {
        RunningMeanStd::from_parts(p.mean, p.var, p.count)
    }
}

impl From<RunningMeanStd> for MeanStdParts {
    fn from(r: RunningMeanStd) -> Self {
        MeanStdParts { mean: r.mean, var: r.var, count: r.count }
    }
}

impl RunningMeanStd {
    /// A tracker of `dim` dimensions, mean 0, variance 1 and count `1e-4`.
    pub fn new(dim: usize) -> Self {
        Self { mean: vec![0.0; dim], var: vec![1.0; dim], count: 1e-4 }
    }

    /// A tracker with the given statistics (e.g. restored from a snapshot).
    ///
    /// # Errors
    /// [`RlCoreError::ShapeMismatch`] when the lengths differ, [`RlCoreError::NonFinite`] for a
    /// non-finite mean or variance, [`RlCoreError::InvalidParameter`] for a negative variance or
    /// a count that is not finite and `> 0`.
    pub fn from_parts(mean: Vec<f64>, var: Vec<f64>, count: f64) -> Result<Self> {
        if mean.len() != var.len() {
            return Err(RlCoreError::ShapeMismatch {
                what: "var".into(),
                expected: format!("[{}] (= mean)", mean.len()),
                got: format!("[{}]", var.len()),
            });
        }
        check_finite_f64("mean", &mean)?;
        check_finite_f64("var", &var)?;
        if let Some((i, v)) = var.iter().enumerate().find(|(_, v)| **v < 0.0) {
            return Err(RlCoreError::invalid(format!("var[{i}]"), v, "variances must be >= 0"));
        }
        if !(count.is_finite() && count > 0.0) {
            return Err(RlCoreError::invalid("count", count, "must be finite and > 0"));
        }
        Ok(Self { mean, var, count })
    }

    /// Per-dimension mean.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Per-dimension population variance.
    pub fn var(&self) -> &[f64] {
        &self.var
    }

    /// Effective number of samples seen (including the prior count).
    pub fn count(&self) -> f64 {
        self.count
    }

    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Folds in a batch of rows (each of length `dim`).
    ///
    /// # Errors
    /// A row of the wrong length or a non-finite value; the tracker is left unchanged.
    pub fn update<R: AsRef<[f64]>>(&mut self, rows: &[R]) -> Result<()> {
        let dim = self.mean.len();
        if rows.is_empty() {
            return Ok(());
        }
        for (i, r) in rows.iter().enumerate() {
            let r = r.as_ref();
            if r.len() != dim {
                return Err(RlCoreError::ShapeMismatch {
                    what: format!("row {i}"),
                    expected: format!("[{dim}]"),
                    got: format!("[{}]", r.len()),
                });
            }
            check_finite_f64(&format!("row {i}"), r)?;
        }
        let n = rows.len() as f64;
        for d in 0..dim {
            let col: Vec<f64> = rows.iter().map(|r| r.as_ref()[d]).collect();
            let bm = mean(&col);
            let bv = variance(&col, 0);
            let delta = bm - self.mean[d];
            let tot = self.count + n;
            let m2 = self.var[d] * self.count + bv * n + delta * delta * self.count * n / tot;
            self.mean[d] += delta * n / tot;
            self.var[d] = m2 / tot;
        }
        self.count += n;
        Ok(())
    }

    /// `(x - mean) / sqrt(var + eps)` per dimension (extra or missing entries are ignored).
    pub fn normalize(&self, x: &[f64], eps: f64) -> Vec<f64> {
        x.iter().zip(self.mean.iter().zip(self.var.iter())).map(|(v, (m, s2))| (v - m) / (s2 + eps).sqrt()).collect()
    }
}

fn sorted_finite(what: &str, x: &[f64]) -> Result<Vec<f64>> {
    if x.is_empty() {
        return Err(RlCoreError::Empty { what: what.into() });
    }
    check_finite_f64(what, x)?;
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    Ok(v)
}

fn check_level(name: &str, q: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&q) {
        return Err(RlCoreError::InvalidParameter {
            name: name.into(),
            value: q.to_string(),
            reason: "must lie in [0, 1]".into(),
        });
    }
    Ok(())
}

/// The `q`-quantile of `x` with linear interpolation (type 7).
///
/// # Errors
/// Empty input, non-finite values, or `q` outside `[0, 1]`.
pub fn quantile(x: &[f64], q: f64) -> Result<f64> {
    check_level("q", q)?;
    let v = sorted_finite("quantile input", x)?;
    let h = (v.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Ok(v[lo] + (h - lo as f64) * (v[hi] - v[lo]))
}

fn tail_count(n: usize, alpha: f64) -> usize {
    // the small tolerance keeps e.g. (1 - 0.9) * 10 = 1.0000000000000002 from rounding up to 2
    (((1.0 - alpha) * n as f64 - 1e-9).ceil() as usize).clamp(1, n)
}

/// Empirical CVaR of losses: mean of the largest `ceil((1 - alpha) n)` values (at least one).
/// `alpha = 0` is the mean, `alpha -> 1` the maximum.
///
/// # Errors
/// Empty input, non-finite values, or `alpha` outside `[0, 1]`.
pub fn cvar_upper(x: &[f64], alpha: f64) -> Result<f64> {
    check_level("alpha", alpha)?;
    let v = sorted_finite("cvar input", x)?;
    let k = tail_count(v.len(), alpha);
    Ok(mean(&v[v.len() - k..]))
}

/// Empirical CVaR of returns: mean of the smallest `ceil((1 - alpha) n)` values (at least one).
///
/// # Errors
/// Empty input, non-finite values, or `alpha` outside `[0, 1]`.
pub fn cvar_lower(x: &[f64], alpha: f64) -> Result<f64> {
    check_level("alpha", alpha)?;
    let v = sorted_finite("cvar input", x)?;
    let k = tail_count(v.len(), alpha);
    Ok(mean(&v[..k]))
}

/// Pearson correlation; `None` if the lengths differ, fewer than two points, or a constant input.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (mx, my) = (mean(x), mean(y));
    let mut sxy = 0.0;
    let mut sxx = 0.0;
    let mut syy = 0.0;
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    Some(sxy / (sxx.sqrt() * syy.sqrt()))
}

/// Average ranks (1-based, ties share their mean rank).
pub fn ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in &idx[i..=j] {
            r[*k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman rank correlation (Pearson of average ranks); `None` as for [`pearson`].
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() {
        return None;
    }
    pearson(&ranks(x), &ranks(y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quantile_matches_numpy_type7() {
        // numpy.quantile([1, 2, 3, 4], [0, 0.25, 0.5, 0.9, 1]) = [1, 1.75, 2.5, 3.7, 4]
        let x = [4.0, 1.0, 3.0, 2.0];
        for (q, want) in [(0.0, 1.0), (0.25, 1.75), (0.5, 2.5), (0.9, 3.7), (1.0, 4.0)] {
            assert!((quantile(&x, q).unwrap() - want).abs() < 1e-12, "q={q}");
        }
        assert!(quantile(&[], 0.5).is_err());
        assert!(quantile(&x, 1.5).is_err());
        assert!(quantile(&[f64::NAN], 0.5).is_err());
    }

    #[test]
    fn cvar_tails() {
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!((cvar_upper(&x, 0.9).unwrap() - 10.0).abs() < 1e-12);
        assert!((cvar_upper(&x, 0.5).unwrap() - 8.0).abs() < 1e-12);
        assert!((cvar_upper(&x, 0.0).unwrap() - 5.5).abs() < 1e-12);
        assert!((cvar_lower(&x, 0.7).unwrap() - 2.0).abs() < 1e-12);
        assert!(cvar_upper(&[], 0.5).is_err());
    }

    #[test]
    fn correlations() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let y = [1.0, 4.0, 9.0, 16.0];
        assert!((spearman(&x, &y).unwrap() - 1.0).abs() < 1e-12);
        assert!(pearson(&x, &y).unwrap() < 1.0);
        assert!(pearson(&x, &[1.0, 1.0, 1.0, 1.0]).is_none());
        assert_eq!(ranks(&[3.0, 1.0, 3.0]), vec![2.5, 1.0, 2.5]);
        assert!((std_dev(&[1.0, 3.0], 1) - 2f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn running_mean_std_rejects_bad_rows_without_change() {
        let mut r = RunningMeanStd::new(2);
        let before = r.clone();
        assert!(r.update(&[vec![1.0]]).is_err());
        assert!(r.update(&[vec![1.0, f64::NAN]]).is_err());
        assert_eq!(r, before);
        r.update(&[vec![1.0, 3.0]]).unwrap();
        assert_eq!((r.dim(), r.count()), (2, 1.0001));
        // from_parts and serde check every invariant
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<RunningMeanStd>(&json).unwrap(), r);
        for bad in [
            r#"{"mean":[0.0],"var":[1.0,1.0],"count":1.0}"#,
            r#"{"mean":[0.0],"var":[-1.0],"count":1.0}"#,
            r#"{"mean":[0.0],"var":[1.0],"count":0.0}"#,
            r#"{"mean":[0.0],"var":[1.0],"count":1.0,"extra":1}"#,
        ] {
            assert!(serde_json::from_str::<RunningMeanStd>(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            RunningMeanStd::from_parts(vec![f64::NAN], vec![1.0], 1.0),
            Err(RlCoreError::NonFinite { .. })
        ));
        assert!(matches!(
            RunningMeanStd::from_parts(vec![0.0], vec![1.0], f64::INFINITY),
            Err(RlCoreError::InvalidParameter { .. })
        ));
        let p = RunningMeanStd::from_parts(vec![1.0, -1.0], vec![3.0, 0.0], 3.0).unwrap();
        assert_eq!(p.normalize(&[3.0, -1.0], 1.0), vec![1.0, 0.0]);
        assert_eq!((p.mean(), p.var()), (&[1.0, -1.0][..], &[3.0, 0.0][..]));
    }

    proptest! {
        #[test]
        fn running_mean_std_matches_batch(rows in prop::collection::vec(prop::collection::vec(-100.0f64..100.0, 3), 2..40), split in 1usize..39) {
            let split = split.min(rows.len() - 1);
            let mut r = RunningMeanStd::new(3);
            r.update(&rows[..split]).unwrap();
            r.update(&rows[split..]).unwrap();
            for d in 0..3 {
                let col: Vec<f64> = rows.iter().map(|x| x[d]).collect();
                // exact pooled moments of the prior (mean 0, var 1, count c0) and the data
                let (c0, n) = (1e-4, col.len() as f64);
                let (m, v) = (mean(&col), variance(&col, 0));
                let tot = c0 + n;
                let want_mean = n * m / tot;
                let want_var = (c0 + n * v + m * m * c0 * n / tot) / tot;
                prop_assert!((r.mean()[d] - want_mean).abs() <= 1e-9 * (1.0 + want_mean.abs()));
                prop_assert!((r.var()[d] - want_var).abs() <= 1e-9 * (1.0 + want_var));
            }
        }

        #[test]
        fn quantile_is_monotone(x in prop::collection::vec(-1e3f64..1e3, 1..50), a in 0.0f64..1.0, b in 0.0f64..1.0) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(quantile(&x, lo).unwrap() <= quantile(&x, hi).unwrap() + 1e-9);
            prop_assert!(cvar_upper(&x, lo).unwrap() <= cvar_upper(&x, hi).unwrap() + 1e-9);
        }
    }
}
