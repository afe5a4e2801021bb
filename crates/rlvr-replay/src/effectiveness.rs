//! Group effectiveness for the buffer: the one rule of `rlvr-core`
//! ([`EffectivenessRule`], by outcome by default, with reward σ,
//! a mean band and conjunctions as alternatives) applied to a stored [`Group`] (its attached
//! binary outcomes win over the reward threshold), plus a trait for caller-defined predicates.

use std::fmt;

use rlvr_core::{EffectivenessRule, Verdict};

use crate::group::Group;

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

impl GroupEffectiveness for EffectivenessRule {
    fn classify(&self, group: &Group) -> Verdict {
        EffectivenessRule::classify(self, group.rewards(), group.outcomes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::FlatResponses;
    use crate::ReplayError;
    use rlvr_core::IneffectiveReason;

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
    fn the_core_rule_applies_to_groups_with_their_outcomes() -> Result<(), ReplayError> {
        let rule = EffectivenessRule::default();
        let shaped = group(&[0.1, 0.3, 0.2])?;
        assert_eq!(GroupEffectiveness::classify(&rule, &shaped), Verdict::Ineffective(IneffectiveReason::AllFailure));
        assert!(GroupEffectiveness::classify(&EffectivenessRule::reward_std(), &shaped).is_effective());
        // attached outcomes win over the reward threshold
        let g = group(&[0.1, 0.3])?.with_outcomes(vec![true, false])?;
        assert!(GroupEffectiveness::classify(&rule, &g).is_effective());
        let g = group(&[1.0, 1.0])?.with_outcomes(vec![false, false])?;
        assert_eq!(GroupEffectiveness::classify(&rule, &g), Verdict::Ineffective(IneffectiveReason::AllFailure));
        Ok(())
    }
}
