//! Group layout (which sequences answer the same prompt) and group effectiveness.
//!
//! A group is the `K` responses sampled for one prompt. [`Groups`] maps every sequence of a
//! batch to a dense group index, built either from a `[G, K]` row-major layout
//! ([`Groups::uniform`]) or from per-sequence prompt ids ([`Groups::from_ids`], any hashable id,
//! groups numbered in order of first appearance, sizes may differ).
//!
//! [`EffectivenessRule`] classifies a group's rewards into a [`GroupKind`]: `Mixed` groups carry
//! a learning signal, the others (all-success, all-fail, zero-variance, singleton) do not. The
//! rule has a tolerance so that fp32 noise on a constant group does not count as variance, and
//! an optional outcome threshold so that shaped rewards (`0.1` for well-formatted but wrong) do
//! not turn an all-fail group into a "mixed" one with phantom advantages (verl-recipe #125,
//! NVIDIA-NeMo/RL #4158, OpenRLHF PR #1272; see `research/rlvr.md` section 6).

use std::collections::HashMap;
use std::hash::Hash;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::error::{check_range, Result, RlvrCoreError};

/// The group structure of a batch of sequences.
///
/// Invariants (checked by the constructors): at least one sequence, every group non-empty,
/// `ids[i] < num_groups()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Groups {
    ids: Vec<usize>,
    members: Vec<Vec<usize>>,
}

impl Groups {
    /// `num_groups` groups of `group_size` consecutive sequences: sequence `i` belongs to group
    /// `i / group_size` (the `[G, K]` row-major layout every framework uses).
    ///
    /// # Errors
    /// [`RlvrCoreError::Empty`] when `num_groups` or `group_size` is zero.
    pub fn uniform(num_groups: usize, group_size: usize) -> Result<Self> {
        if num_groups == 0 || group_size == 0 {
            return Err(RlvrCoreError::Empty { what: format!("groups ({num_groups} x {group_size})") });
        }
        let ids: Vec<usize> = (0..num_groups * group_size).map(|i| i / group_size).collect();
        let members = (0..num_groups).map(|g| (g * group_size..(g + 1) * group_size).collect()).collect();
        Ok(Self { ids, members })
    }

    /// Groups from one prompt id per sequence. Groups are numbered densely in order of first
    /// appearance; members need not be contiguous and sizes may differ.
    ///
    /// # Errors
    /// [`RlvrCoreError::Empty`] when `ids` is empty.
    pub fn from_ids<T: Eq + Hash>(ids: &[T]) -> Result<Self> {
        if ids.is_empty() {
            return Err(RlvrCoreError::Empty { what: "group ids".into() });
        }
        let mut map: HashMap<&T, usize> = HashMap::with_capacity(ids.len());
        let mut dense = Vec::with_capacity(ids.len());
        let mut members: Vec<Vec<usize>> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let next = members.len();
            let g = *map.entry(id).or_insert(next);
            if g == next {
                members.push(Vec::new());
            }
            members[g].push(i);
            dense.push(g);
        }
        Ok(Self { ids: dense, members })
    }

    /// Number of sequences.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Always `false` (a `Groups` holds at least one sequence); provided for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Number of groups.
    pub fn num_groups(&self) -> usize {
        self.members.len()
    }

    /// Dense group index of every sequence.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// Sequence indices of group `g`, or `None` when `g` is out of range.
    pub fn members(&self, g: usize) -> Option<&[usize]> {
        self.members.get(g).map(Vec::as_slice)
    }

    /// Iterates over the member lists of all groups.
    pub fn iter(&self) -> impl Iterator<Item = &[usize]> {
        self.members.iter().map(Vec::as_slice)
    }

    /// The size of every group, in group order.
    pub fn sizes(&self) -> Vec<usize> {
        self.members.iter().map(Vec::len).collect()
    }

    /// `Some(k)` when every group has exactly `k` members.
    pub fn uniform_size(&self) -> Option<usize> {
        let k = self.members.first()?.len();
        self.members.iter().all(|m| m.len() == k).then_some(k)
    }

    /// The dense group ids as an `i64` tensor `[B]` on `device`.
    pub fn ids_tensor(&self, device: Device) -> Tensor {
        let v: Vec<i64> = self.ids.iter().map(|&g| g as i64).collect();
        Tensor::from_slice(&v).to_device(device)
    }

    /// The size of each sequence's group as an `f32` tensor `[B]` on `device`.
    pub fn member_sizes_tensor(&self, device: Device) -> Tensor {
        let v: Vec<f32> = self.ids.iter().map(|&g| self.members[g].len() as f32).collect();
        Tensor::from_slice(&v).to_device(device).to_kind(Kind::Float)
    }

    /// Checks that these groups describe `n` sequences.
    ///
    /// # Errors
    /// [`RlvrCoreError::Groups`] naming both lengths.
    pub fn check_len(&self, n: usize, what: &str) -> Result<()> {
        if self.ids.len() == n {
            Ok(())
        } else {
            Err(RlvrCoreError::Groups(format!("groups describe {} sequences but `{what}` has {n}", self.ids.len())))
        }
    }
}

/// Why a group does or does not carry a learning signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Rewards differ (or, with an outcome threshold, both successes and failures occur).
    Mixed,
    /// Every response succeeded (outcome threshold set).
    AllSuccess,
    /// Every response failed (outcome threshold set), whatever shaped partial credit they got.
    AllFail,
    /// No outcome threshold set and the rewards' range is within the tolerance.
    ZeroVariance,
    /// The group has a single response.
    Singleton,
}

impl GroupKind {
    /// Whether the group carries a learning signal (only [`GroupKind::Mixed`] does).
    pub fn is_effective(self) -> bool {
        self == GroupKind::Mixed
    }
}

/// Classifies a group's rewards into a [`GroupKind`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `tolerance` | `1e-6` | a group whose reward range `max − min` is `≤ tolerance` is zero-variance |
/// | `success_threshold` | `None` | when set, a reward `≥ threshold` is a success, and a group is `Mixed` only if it has both successes and failures (the outcome gate for shaped rewards) |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EffectivenessRule {
    /// Range tolerance (default `1e-6`).
    pub tolerance: f64,
    /// Outcome threshold (default `None`).
    pub success_threshold: Option<f64>,
}

impl Default for EffectivenessRule {
    fn default() -> Self {
        Self { tolerance: 1e-6, success_threshold: None }
    }
}

impl EffectivenessRule {
    /// Sets the range tolerance.
    #[must_use]
    pub fn tolerance(mut self, tolerance: f64) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Sets the outcome threshold (a reward `≥ t` is a success).
    #[must_use]
    pub fn success_threshold(mut self, t: Option<f64>) -> Self {
        self.success_threshold = t;
        self
    }

    /// Validates the rule.
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`] for a negative or non-finite tolerance or a
    /// non-finite threshold.
    pub fn check(&self) -> Result<()> {
        check_range("effectiveness.tolerance", self.tolerance, Some(0.0), None, "must be finite and >= 0")?;
        if let Some(t) = self.success_threshold {
            check_range("effectiveness.success_threshold", t, None, None, "must be finite")?;
        }
        Ok(())
    }

    /// Classifies one group's rewards (assumed finite and non-empty; an empty slice is
    /// reported as [`GroupKind::Singleton`]).
    pub fn classify(&self, rewards: &[f64]) -> GroupKind {
        if rewards.len() <= 1 {
            return GroupKind::Singleton;
        }
        if let Some(t) = self.success_threshold {
            let wins = rewards.iter().filter(|&&r| r >= t).count();
            return if wins == rewards.len() {
                GroupKind::AllSuccess
            } else if wins == 0 {
                GroupKind::AllFail
            } else {
                GroupKind::Mixed
            };
        }
        let (lo, hi) = rewards.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        if hi - lo <= self.tolerance {
            GroupKind::ZeroVariance
        } else {
            GroupKind::Mixed
        }
    }
}

/// Per-group reward statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// Number of responses `K`.
    pub size: usize,
    /// Mean reward `μ_G`.
    pub mean: f64,
    /// Bessel-corrected standard deviation (verl, TRL, OpenRLHF); `0` for a singleton.
    pub std_unbiased: f64,
    /// Population standard deviation (the LPO paper's `σ_G`).
    pub std_pop: f64,
    /// The group's classification.
    pub kind: GroupKind,
}

/// Mean, Bessel std and population std of `x` (non-empty), in f64.
pub(crate) fn mean_std(x: &[f64]) -> (f64, f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let ss: f64 = x.iter().map(|v| (v - mean) * (v - mean)).sum();
    let unb = if x.len() > 1 { (ss / (n - 1.0)).sqrt() } else { 0.0 };
    (mean, unb, (ss / n).sqrt())
}

/// Statistics of every group of `rewards`.
///
/// # Errors
/// [`RlvrCoreError::Groups`] when `groups` does not describe `rewards.len()` sequences;
/// [`RlvrCoreError::NonFinite`] for a NaN or infinite reward.
pub fn group_stats(rewards: &[f64], groups: &Groups, rule: &EffectivenessRule) -> Result<Vec<GroupStats>> {
    groups.check_len(rewards.len(), "rewards")?;
    rl_core::check_finite_f64("rewards", rewards)?;
    let mut buf = Vec::new();
    Ok(groups
        .iter()
        .map(|m| {
            buf.clear();
            buf.extend(m.iter().map(|&i| rewards[i]));
            let (mean, std_unbiased, std_pop) = mean_std(&buf);
            GroupStats { size: m.len(), mean, std_unbiased, std_pop, kind: rule.classify(&buf) }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_ids_is_dense_in_first_appearance_order() {
        let g = Groups::from_ids(&["b", "a", "b", "c", "a"]).unwrap();
        assert_eq!(g.ids(), &[0, 1, 0, 2, 1]);
        assert_eq!(g.members(0).unwrap(), &[0, 2]);
        assert_eq!(g.sizes(), vec![2, 2, 1]);
        assert_eq!(g.uniform_size(), None);
        assert!(Groups::from_ids::<u32>(&[]).is_err());
    }

    #[test]
    fn uniform_layout() {
        let g = Groups::uniform(2, 3).unwrap();
        assert_eq!(g.ids(), &[0, 0, 0, 1, 1, 1]);
        assert_eq!(g.uniform_size(), Some(3));
        assert!(Groups::uniform(0, 3).is_err());
    }

    #[test]
    fn classification_with_tolerance_and_outcome_gate() {
        let r = EffectivenessRule::default();
        assert_eq!(r.classify(&[1.0, 1.0 + 1e-9, 1.0]), GroupKind::ZeroVariance);
        assert_eq!(r.classify(&[0.0, 0.1, 0.0]), GroupKind::Mixed);
        assert_eq!(r.classify(&[0.5]), GroupKind::Singleton);
        let gate = r.success_threshold(Some(1.0));
        assert_eq!(gate.classify(&[0.0, 0.1, 0.0]), GroupKind::AllFail);
        assert_eq!(gate.classify(&[1.0, 1.0]), GroupKind::AllSuccess);
        assert_eq!(gate.classify(&[1.0, 0.1]), GroupKind::Mixed);
        assert!(EffectivenessRule::default().tolerance(-1.0).check().is_err());
    }
}
