//! Greedy max-sum diversification (MSD): pick a batch that scores well *and* is spread out in
//! feature space. Used by PDTS (posterior sample + diversity) and GPS (intermediate difficulty +
//! intra-batch and inter-step diversity). Pure Rust, no libtorch.
//!
//! ```text
//! repeat B times:  u* = argmax_{u ∉ S}  c · score(u) + w · D_S(u) + anchor(u);   S ← S ∪ {u*}
//!   D_S(u) = scale · Σ_{v∈S} ‖x_u − x_v‖₂        (Sum; PDTS sinusoid: c = 1/2, scale = 1/(B(B−1)))
//!   D_S(u) = min_{v∈S} ‖x_u − x_v‖₂, 0 if S = ∅  (Min; PDTS domain randomisation: c = 1/2)
//! ```
//! Each round costs `O(N·d)` (running sums/minima are updated with the distances to the newest
//! pick), so a batch costs `O(B·N·d)`; ties go to the lowest position (as `np.argmax`).

use crate::error::{invalid, Result, SelectError};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

/// The diversity term of a greedy MSD round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Diversity {
    /// `scale · Σ_{v∈S} d(u, v)` (max-sum; PDTS sinusoid uses `scale = 1/(B(B−1))`).
    Sum {
        /// Multiplier of the distance sum.
        scale: f64,
    },
    /// `min_{v∈S} d(u, v)` (max-min; PDTS domain randomisation); 0 for the first pick.
    Min,
}

/// One greedy MSD problem: per-candidate scores, row-major features (`dim` per candidate).
#[derive(Debug, Clone, Copy)]
pub struct MsdProblem<'a> {
    /// Acquisition score per candidate (higher = better).
    pub scores: &'a [f64],
    /// Features, row-major, `scores.len() * dim` values.
    pub features: &'a [f32],
    /// Feature dimension.
    pub dim: usize,
    /// Multiplier `c` of the scores (PDTS: 1/2).
    pub score_coef: f64,
    /// Weight `w` of the diversity term.
    pub weight: f64,
    /// The diversity term.
    pub diversity: Diversity,
    /// Optional fixed per-candidate bonus (GPS inter-step term), `scores.len()` values.
    pub bonus: Option<&'a [f64]>,
}

/// Euclidean distance of two rows.
#[inline]
pub fn euclidean(a: &[f32], b: &[f32]) -> f64 {
    let mut s = 0f32;
    for (x, y) in a.iter().zip(b) {
        let d = x - y;
        s += d * d;
    }
    f64::from(s).sqrt()
}

/// Greedy MSD: positions of the `b` picks in pick order.
///
/// # Errors
/// `b` of zero or above the candidate count, feature/bonus length mismatch, non-finite scores,
/// weights or bonuses.
pub fn greedy_msd(p: &MsdProblem<'_>, b: usize) -> Result<Vec<usize>> {
    let n = p.scores.len();
    if b == 0 {
        return Err(SelectError::ZeroBatch);
    }
    if b > n {
        return Err(SelectError::BatchTooLarge { batch_size: b, candidates: n });
    }
    if p.dim == 0 || p.features.len() != n * p.dim {
        return Err(SelectError::Features(format!("expected {n} x {} features, got {}", p.dim, p.features.len())));
    }
    if let Some(i) = p.scores.iter().position(|s| !s.is_finite()) {
        return Err(invalid("score", format!("{} at position {i}", p.scores[i]), "acquisition scores must be finite"));
    }
    if !p.weight.is_finite() || !p.score_coef.is_finite() {
        return Err(invalid("weight", p.weight, "diversity weight and score coefficient must be finite"));
    }
    if let Diversity::Sum { scale } = p.diversity {
        if !scale.is_finite() {
            return Err(invalid("scale", scale, "must be finite"));
        }
    }
    if let Some(bonus) = p.bonus {
        if bonus.len() != n || bonus.iter().any(|x| !x.is_finite()) {
            return Err(invalid("bonus", bonus.len(), "need one finite bonus per candidate"));
        }
    }
    let mut base: Vec<f64> = p.scores.iter().map(|s| p.score_coef * s).collect();
    if let Some(bonus) = p.bonus {
        for (v, x) in base.iter_mut().zip(bonus) {
            *v += x;
        }
    }
    let mut acc = vec![0f64; n]; // running sum or min of distances to S
    let mut taken = vec![false; n];
    let mut picks = Vec::with_capacity(b);
    let row = |i: usize| &p.features[i * p.dim..(i + 1) * p.dim];
    for round in 0..b {
        let mut best = usize::MAX;
        let mut best_val = f64::NEG_INFINITY;
        for i in 0..n {
            if taken[i] {
                continue;
            }
            let div = match p.diversity {
                Diversity::Sum { scale } => scale * acc[i],
                Diversity::Min => {
                    if round == 0 {
                        0.0
                    } else {
                        acc[i]
                    }
                }
            };
            let v = base[i] + p.weight * div;
            if best == usize::MAX || v > best_val {
                best = i;
                best_val = v;
            }
        }
        taken[best] = true;
        picks.push(best);
        if round + 1 == b {
            break;
        }
        let xb = row(best);
        for i in 0..n {
            if taken[i] {
                continue;
            }
            let d = euclidean(row(i), xb);
            match p.diversity {
                Diversity::Sum { .. } => acc[i] += d,
                Diversity::Min => acc[i] = if round == 0 { d } else { acc[i].min(d) },
            }
        }
    }
    Ok(picks)
}

/// For each row of `features`, the distance to the nearest row of `anchors` (both row-major
/// with `dim` columns); all zeros when there are no anchors.
pub fn min_distance_to(features: &[f32], anchors: &[f32], dim: usize) -> Vec<f64> {
    if dim == 0 {
        return Vec::new();
    }
    let n = features.len() / dim;
    let a = anchors.len() / dim;
    (0..n)
        .map(|i| {
            let x = &features[i * dim..(i + 1) * dim];
            (0..a)
                .map(|j| euclidean(x, &anchors[j * dim..(j + 1) * dim]))
                .fold(if a == 0 { 0.0 } else { f64::INFINITY }, f64::min)
        })
        .collect()
}

/// Mean Euclidean distance between `pairs` random pairs of distinct rows (a scale for
/// distances; 1 when fewer than two rows or all rows coincide).
pub fn mean_pair_distance(features: &[f32], dim: usize, pairs: usize, rng: &mut dyn RngCore) -> f64 {
    if dim == 0 {
        return 1.0;
    }
    let n = features.len() / dim;
    if n < 2 || pairs == 0 {
        return 1.0;
    }
    let mut s = 0.0;
    for _ in 0..pairs {
        let i = rng.random_range(0..n);
        let mut j = rng.random_range(0..n - 1);
        if j >= i {
            j += 1;
        }
        s += euclidean(&features[i * dim..(i + 1) * dim], &features[j * dim..(j + 1) * dim]);
    }
    let m = s / pairs as f64;
    if m > 0.0 && m.is_finite() {
        m
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_diversity_msd_is_top_b() -> anyhow::Result<()> {
        let scores = [0.1, 0.9, 0.5, 0.7, 0.3];
        let f = [0.0f32; 5];
        let p = MsdProblem {
            scores: &scores,
            features: &f,
            dim: 1,
            score_coef: 0.5,
            weight: 0.0,
            diversity: Diversity::Min,
            bonus: None,
        };
        assert_eq!(greedy_msd(&p, 3)?, vec![1, 3, 2]);
        Ok(())
    }

    #[test]
    fn diversity_only_spreads_points() -> anyhow::Result<()> {
        // points on a line, equal scores: max-min picks the ends then the middle
        let f: Vec<f32> = (0..11).map(|i| i as f32).collect();
        let scores = vec![0.0; 11];
        let mut p = MsdProblem {
            scores: &scores,
            features: &f,
            dim: 1,
            score_coef: 0.5,
            weight: 1.0,
            diversity: Diversity::Min,
            bonus: None,
        };
        let picks = greedy_msd(&p, 3)?;
        assert_eq!(picks, vec![0, 10, 5]);
        p.diversity = Diversity::Sum { scale: 1.0 };
        let picks = greedy_msd(&p, 2)?;
        assert_eq!(picks, vec![0, 10]);
        Ok(())
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let scores = [0.1, f64::NAN];
        let f = [0.0f32; 2];
        let p = MsdProblem {
            scores: &scores,
            features: &f,
            dim: 1,
            score_coef: 1.0,
            weight: 1.0,
            diversity: Diversity::Min,
            bonus: None,
        };
        assert!(greedy_msd(&p, 1).is_err());
        let scores = [0.1, 0.2];
        let p = MsdProblem { scores: &scores, ..p };
        assert!(matches!(greedy_msd(&p, 3), Err(SelectError::BatchTooLarge { .. })));
        assert!(matches!(greedy_msd(&p, 0), Err(SelectError::ZeroBatch)));
    }

    #[test]
    fn min_distance_to_anchors() {
        let f = [0.0f32, 3.0, 10.0];
        let a = [2.0f32, 9.0];
        assert_eq!(min_distance_to(&f, &a, 1), vec![2.0, 1.0, 1.0]);
        assert_eq!(min_distance_to(&f, &[], 1), vec![0.0, 0.0, 0.0]);
        // two columns: rows (0, 0), (3, 4), (6, 8); anchors (3, 0), (6, 4)
        let f2 = [0.0f32, 0.0, 3.0, 4.0, 6.0, 8.0];
        let a2 = [3.0f32, 0.0, 6.0, 4.0];
        assert_eq!(min_distance_to(&f2, &a2, 2), vec![3.0, 3.0, 4.0]);
        assert!(min_distance_to(&f2, &a2, 0).is_empty());
    }

    #[test]
    fn mean_pair_distance_of_known_sets() {
        let mut rng = rl_core::rng_from_seed(0);
        // two rows: every pair is the one pair of distinct rows, at distance 5
        let two = [0.0f32, 0.0, 3.0, 4.0];
        assert_eq!(mean_pair_distance(&two, 2, 50, &mut rng), 5.0);
        // three rows (0, 0), (3, 0), (3, 4): pair distances 3, 5, 4, mean 4 (both coordinates
        // of every row matter)
        let three = [0.0f32, 0.0, 3.0, 0.0, 3.0, 4.0];
        let m = mean_pair_distance(&three, 2, 20_000, &mut rng);
        assert!((m - 4.0).abs() < 0.05, "{m}");
        // degenerate inputs give the neutral scale 1
        assert_eq!(mean_pair_distance(&[1.0, 1.0, 1.0, 1.0], 2, 10, &mut rng), 1.0);
        assert_eq!(mean_pair_distance(&[1.0, 2.0], 2, 10, &mut rng), 1.0);
        assert_eq!(mean_pair_distance(&two, 2, 0, &mut rng), 1.0);
        assert_eq!(mean_pair_distance(&two, 0, 10, &mut rng), 1.0);
        assert_eq!(euclidean(&[1.0, 1.0], &[4.0, 5.0]), 5.0);
    }
}
