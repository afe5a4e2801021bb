//! Group layout (which sequences answer the same prompt) and per-group statistics (tch-free
//! apart from the two tensor helpers of feature `tch`).
//!
//! A group is the `K` responses sampled for one prompt. [`Groups`] maps every sequence of a
//! batch to a dense group index, built either from a `[G, K]` row-major layout
//! ([`Groups::uniform`]) or from per-sequence prompt ids ([`Groups::from_ids`], any hashable id,
//! groups numbered in order of first appearance, sizes may differ). [`group_stats`] gives each
//! group's mean, standard deviations and [`Verdict`] under an [`EffectivenessRule`].

use std::collections::HashMap;
use std::hash::Hash;

use serde::{Deserialize, Serialize};
#[cfg(feature = "tch")]
use tch::{Device, Kind, Tensor};

use crate::effectiveness::{EffectivenessRule, Verdict};
use crate::error::{Result, RlvrCoreError};
use crate::stats::{check_finite_values, mean_std};

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

    /// The dense group ids as an `i64` tensor `[B]` on `device` (feature `tch`).
    #[cfg(feature = "tch")]
    pub fn ids_tensor(&self, device: Device) -> Tensor {
        let v: Vec<i64> = self.ids.iter().map(|&g| g as i64).collect();
        Tensor::from_slice(&v).to_device(device)
    }

    /// The size of each sequence's group as an `f32` tensor `[B]` on `device` (feature `tch`).
    #[cfg(feature = "tch")]
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
    /// The group's verdict under the effectiveness rule.
    pub verdict: Verdict,
}

/// Statistics and verdict of every group of `rewards`. `outcomes` (one binary outcome per
/// sequence, optional) are used by [`EffectivenessRule::Outcome`] instead of its threshold.
///
/// # Errors
/// [`RlvrCoreError::Groups`] when `groups` does not describe `rewards.len()` sequences (or
/// `outcomes` has another length); [`RlvrCoreError::NonFinite`] for a NaN or infinite reward.
pub fn group_stats(
    rewards: &[f64],
    outcomes: Option<&[bool]>,
    groups: &Groups,
    rule: &EffectivenessRule,
) -> Result<Vec<GroupStats>> {
    groups.check_len(rewards.len(), "rewards")?;
    if let Some(o) = outcomes {
        groups.check_len(o.len(), "outcomes")?;
    }
    check_finite_values("rewards", rewards)?;
    let mut buf = Vec::new();
    let mut obuf = Vec::new();
    Ok(groups
        .iter()
        .map(|m| {
            buf.clear();
            buf.extend(m.iter().map(|&i| rewards[i]));
            let o = outcomes.map(|o| {
                obuf.clear();
                obuf.extend(m.iter().map(|&i| o[i]));
                obuf.as_slice()
            });
            let s = mean_std(&buf);
            GroupStats {
                size: m.len(),
                mean: s.mean,
                std_unbiased: s.std_unbiased,
                std_pop: s.std_pop,
                verdict: rule.classify(&buf, o),
            }
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
    fn stats_and_verdicts_per_group() {
        let g = Groups::from_ids(&[7, 7, 3, 3, 3]).unwrap();
        let st = group_stats(&[1.0, 0.0, 0.1, 0.0, 0.1], None, &g, &EffectivenessRule::default()).unwrap();
        assert_eq!((st[0].size, st[0].mean, st[0].verdict), (2, 0.5, Verdict::Effective));
        assert_eq!(st[1].verdict, Verdict::Ineffective(crate::IneffectiveReason::AllFailure));
        assert!((st[0].std_unbiased - 0.5f64.sqrt()).abs() < 1e-15 && st[0].std_pop == 0.5);
        // outcomes override the threshold, per sequence
        let o = [true, false, true, false, false];
        let st = group_stats(&[1.0, 0.0, 0.1, 0.0, 0.1], Some(&o), &g, &EffectivenessRule::default()).unwrap();
        assert!(st[1].verdict.is_effective());
        assert!(group_stats(&[1.0, 0.0], None, &g, &EffectivenessRule::default()).is_err());
        assert!(group_stats(&[1.0; 5], Some(&[true]), &g, &EffectivenessRule::default()).is_err());
        assert!(matches!(
            group_stats(&[1.0, f64::NAN, 0.0, 0.0, 0.0], None, &g, &EffectivenessRule::default()),
            Err(RlvrCoreError::NonFinite { index: 1, .. })
        ));
    }
}
