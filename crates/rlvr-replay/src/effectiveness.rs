//! Which groups carry a learning signal ("effective") and why the others do not.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::advantage::mean_std;
use crate::group::Group;

/// Why a group was judged ineffective (reported per reason in the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IneffectiveReason {
    /// Reward standard deviation at or below the tolerance.
    ZeroVariance,
    /// Every response succeeded.
    AllSuccess,
    /// Every response failed.
    AllFailure,
    /// Mean reward at or below the band's lower bound.
    MeanBelowBand,
    /// Mean reward at or above the band's upper bound.
    MeanAboveBand,
    /// A caller-defined predicate rejected the group.
    Custom,
}

impl IneffectiveReason {
    /// Every reason, in a fixed order.
    pub const ALL: [IneffectiveReason; 6] = [
        IneffectiveReason::ZeroVariance,
        IneffectiveReason::AllSuccess,
        IneffectiveReason::AllFailure,
        IneffectiveReason::MeanBelowBand,
        IneffectiveReason::MeanAboveBand,
        IneffectiveReason::Custom,
    ];

    /// Snake-case name used in metric keys.
    pub fn name(self) -> &'static str {
        match self {
            IneffectiveReason::ZeroVariance => "zero_variance",
            IneffectiveReason::AllSuccess => "all_success",
            IneffectiveReason::AllFailure => "all_failure",
            IneffectiveReason::MeanBelowBand => "mean_below_band",
            IneffectiveReason::MeanAboveBand => "mean_above_band",
            IneffectiveReason::Custom => "custom",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for IneffectiveReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The verdict of a [`GroupEffectiveness`] predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The group carries signal: train on it and store it for replay.
    Effective,
    /// The group carries no signal: replace it by a replayed group.
    Ineffective(IneffectiveReason),
}

impl Verdict {
    /// Whether the verdict is [`Verdict::Effective`].
    pub fn is_effective(self) -> bool {
        matches!(self, Verdict::Effective)
    }
}

/// A pluggable effectiveness predicate. Implement it for predicates the built-in
/// [`EffectivenessRule`]s do not cover and pass it to
/// [`GroupReplayBuffer::fill_with`](crate::GroupReplayBuffer::fill_with).
///
/// ```
/// use rlvr_replay::{Group, GroupEffectiveness, IneffectiveReason, Verdict};
/// /// Effective when at least two responses are long enough to be worth training on.
/// #[derive(Debug)]
/// struct LongEnough(usize);
/// impl GroupEffectiveness for LongEnough {
///     fn classify(&self, g: &Group) -> Verdict {
///         if g.responses().filter(|r| r.tokens.len() >= self.0).count() >= 2 {
///             Verdict::Effective
///         } else {
///             Verdict::Ineffective(IneffectiveReason::Custom)
///         }
///     }
/// }
/// ```
pub trait GroupEffectiveness: fmt::Debug {
    /// Classifies one group.
    fn classify(&self, group: &Group) -> Verdict;
}

/// The built-in effectiveness predicates (serialisable, so they live in
/// [`ReplayParams`](crate::ReplayParams)).
///
/// | rule | effective iff | use when |
/// |---|---|---|
/// | `RewardStd { tol }` (default, `tol = 1e-6`) | population σ of rewards `> tol` | POPO's "Var > 0"; the tolerance absorbs fp32 noise (NeMo-RL #4158) |
/// | `Outcome { success_threshold }` | some responses succeed and some fail; success = the group's binary outcome if attached, else `reward ≥ success_threshold` | shaped rewards, where an all-fail group has σ > 0 (verl-recipe #125) |
/// | `MeanBand { low, high }` | `low < mean reward < high` (strict) | OpenRLHF's dynamic filter; band-pass filters (verl #6155) |
/// | `AllOf(rules)` | every rule says effective; the first failing rule's reason is reported | combining a band with a σ gate (OpenRLHF #1272) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectivenessRule {
    /// Reward standard deviation (population) strictly above `tol`.
    RewardStd {
        /// Tolerance; `0.0` means "any variance".
        tol: f32,
    },
    /// Mixed success and failure on a binary outcome.
    Outcome {
        /// A response succeeds when its reward is at least this (used when the group has no
        /// attached outcomes).
        success_threshold: f32,
    },
    /// Mean reward strictly inside `(low, high)`.
    MeanBand {
        /// Lower bound (exclusive).
        low: f32,
        /// Upper bound (exclusive).
        high: f32,
    },
    /// Conjunction of rules.
    AllOf(Vec<EffectivenessRule>),
}

impl Default for EffectivenessRule {
    fn default() -> Self {
        EffectivenessRule::RewardStd { tol: 1e-6 }
    }
}

impl EffectivenessRule {
    /// Checks the rule's parameters.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        match self {
            EffectivenessRule::RewardStd { tol } if !(tol.is_finite() && *tol >= 0.0) => {
                Err(("effectiveness.tol", tol.to_string(), "must be finite and >= 0"))
            }
            EffectivenessRule::Outcome { success_threshold } if !success_threshold.is_finite() => {
                Err(("effectiveness.success_threshold", success_threshold.to_string(), "must be finite"))
            }
            EffectivenessRule::MeanBand { low, high } if !(low.is_finite() && high.is_finite() && low < high) => {
                Err(("effectiveness.band", format!("({low}, {high})"), "needs finite low < high"))
            }
            EffectivenessRule::AllOf(rules) => rules.iter().try_for_each(EffectivenessRule::check),
            _ => Ok(()),
        }
    }
}

impl GroupEffectiveness for EffectivenessRule {
    fn classify(&self, group: &Group) -> Verdict {
        let rewards = group.rewards();
        match self {
            EffectivenessRule::RewardStd { tol } => {
                let (_, std) = mean_std(rewards, 0);
                if std > f64::from(*tol) {
                    Verdict::Effective
                } else {
                    Verdict::Ineffective(IneffectiveReason::ZeroVariance)
                }
            }
            EffectivenessRule::Outcome { success_threshold } => {
                let successes = match group.outcomes() {
                    Some(o) => o.iter().filter(|&&s| s).count(),
                    None => rewards.iter().filter(|&&r| r >= *success_threshold).count(),
                };
                if successes == 0 {
                    Verdict::Ineffective(IneffectiveReason::AllFailure)
                } else if successes == group.k() {
                    Verdict::Ineffective(IneffectiveReason::AllSuccess)
                } else {
                    Verdict::Effective
                }
            }
            EffectivenessRule::MeanBand { low, high } => {
                let (mean, _) = mean_std(rewards, 0);
                if mean <= f64::from(*low) {
                    Verdict::Ineffective(IneffectiveReason::MeanBelowBand)
                } else if mean >= f64::from(*high) {
                    Verdict::Ineffective(IneffectiveReason::MeanAboveBand)
                } else {
                    Verdict::Effective
                }
            }
            EffectivenessRule::AllOf(rules) => {
                rules.iter().map(|r| r.classify(group)).find(|v| !v.is_effective()).unwrap_or(Verdict::Effective)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::FlatResponses;
    use crate::ReplayError;

    fn group(rewards: &[f32]) -> Result<Group, ReplayError> {
        let k = rewards.len();
        Group::from_flat(
            0,
            0,
            FlatResponses {
                tokens: vec![1; k],
                behaviour_logp: vec![-1.0; k],
                mask: Vec::new(),
                lengths: vec![1; k],
                rewards: rewards.to_vec(),
            },
        )
    }

    #[test]
    fn reward_std_gate() -> Result<(), ReplayError> {
        let rule = EffectivenessRule::default();
        assert_eq!(rule.classify(&group(&[1.0, 0.0])?), Verdict::Effective);
        assert_eq!(rule.classify(&group(&[1.0, 1.0])?), Verdict::Ineffective(IneffectiveReason::ZeroVariance));
        // fp32 noise on a constant group stays ineffective
        assert!(!rule.classify(&group(&[0.1, 0.1 + 1e-8, 0.1])?).is_effective());
        Ok(())
    }

    #[test]
    fn outcome_gate_handles_shaped_rewards() -> Result<(), ReplayError> {
        let rule = EffectivenessRule::Outcome { success_threshold: 1.0 };
        // shaped all-fail group: std > 0 but no success
        let shaped = group(&[0.1, 0.3, 0.2])?;
        assert!(EffectivenessRule::default().classify(&shaped).is_effective());
        assert_eq!(rule.classify(&shaped), Verdict::Ineffective(IneffectiveReason::AllFailure));
        assert_eq!(rule.classify(&group(&[1.0, 1.5])?), Verdict::Ineffective(IneffectiveReason::AllSuccess));
        assert!(rule.classify(&group(&[1.0, 0.2])?).is_effective());
        // attached outcomes win over rewards
        let g = group(&[0.1, 0.3])?.with_outcomes(vec![true, false])?;
        assert!(rule.classify(&g).is_effective());
        Ok(())
    }

    #[test]
    fn band_and_conjunction() -> Result<(), ReplayError> {
        let band = EffectivenessRule::MeanBand { low: 0.0, high: 1.0 };
        assert_eq!(band.classify(&group(&[0.0, 0.0])?), Verdict::Ineffective(IneffectiveReason::MeanBelowBand));
        assert_eq!(band.classify(&group(&[1.0, 1.0])?), Verdict::Ineffective(IneffectiveReason::MeanAboveBand));
        // continuous constant group slips through a band (OpenRLHF #1272) ...
        assert!(band.classify(&group(&[0.5, 0.5])?).is_effective());
        // ... but not through band AND std
        let both = EffectivenessRule::AllOf(vec![band, EffectivenessRule::default()]);
        assert_eq!(both.classify(&group(&[0.5, 0.5])?), Verdict::Ineffective(IneffectiveReason::ZeroVariance));
        assert!(EffectivenessRule::MeanBand { low: 1.0, high: 0.0 }.check().is_err());
        assert!(EffectivenessRule::RewardStd { tol: f32::NAN }.check().is_err());
        Ok(())
    }
}
