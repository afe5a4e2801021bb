//! Which groups carry a learning signal ("effective") and why the others do not — the one
//! definition shared by the advantage estimators, `rlvr-replay` and `rlvr-train` (tch-free).
//!
//! A group is the `K` responses sampled for one prompt. A group-relative advantage is zero on a
//! group whose responses all succeeded or all failed, so such a group only costs compute
//! (POPO's "ineffective samples"; DAPO's dynamic sampling drops it). The default rule judges a
//! group **by outcome**: it is effective when some responses are correct and some are not
//! ([`EffectivenessRule::Outcome`]). Judging by reward variance
//! ([`EffectivenessRule::RewardStd`]) is the explicit alternative; it counts shaped partial
//! credit (`0.1` for a well-formatted wrong answer) as signal, which gives an all-fail group
//! phantom advantages (verl-recipe #125, NVIDIA-NeMo/RL #4158, OpenRLHF PR #1272; see
//! `research/rlvr.md` §6).
//!
//! | rule | effective iff | reason when not |
//! |---|---|---|
//! | `Outcome { success_threshold = 1.0 }` (default) | some responses succeed and some fail; success = the attached binary outcome if given, else `reward ≥ success_threshold` | `AllSuccess`, `AllFailure` |
//! | `RewardStd { tol = 1e-6 }` | population σ of the rewards `> tol` (the tolerance absorbs fp32 noise) | `ZeroVariance` |
//! | `MeanBand { low = 0, high = 1 }` | `low < mean reward < high` (OpenRLHF's dynamic filter) | `MeanBelowBand`, `MeanAboveBand` |
//! | `AllOf(rules)` | every rule says effective (e.g. a band AND a σ gate, OpenRLHF #1272) | the first failing rule's |
//!
//! Every rule judges a group of one response `Singleton` (there is no group baseline).
//!
//! ```
//! use rlvr_core::{EffectivenessRule, IneffectiveReason, Verdict};
//! let rule = EffectivenessRule::default(); // by outcome, success = reward >= 1
//! assert!(rule.classify(&[1.0, 0.0, 0.1], None).is_effective());
//! // shaped all-fail group: variance > 0, but nobody solved it
//! assert_eq!(rule.classify(&[0.1, 0.0, 0.1], None), Verdict::Ineffective(IneffectiveReason::AllFailure));
//! assert!(EffectivenessRule::reward_std().classify(&[0.1, 0.0, 0.1], None).is_effective());
//! ```

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{invalid, Result, RlvrCoreError};
use crate::stats::mean_std;

/// Why a group was judged ineffective (reported per reason in the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IneffectiveReason {
    /// Reward standard deviation at or below the tolerance ([`EffectivenessRule::RewardStd`]).
    ZeroVariance,
    /// Every response succeeded ([`EffectivenessRule::Outcome`]).
    AllSuccess,
    /// Every response failed ([`EffectivenessRule::Outcome`]), whatever shaped partial credit
    /// it got.
    AllFailure,
    /// Mean reward at or below the band's lower bound.
    MeanBelowBand,
    /// Mean reward at or above the band's upper bound.
    MeanAboveBand,
    /// The group has a single response (no group baseline).
    Singleton,
    /// A caller-defined predicate rejected the group.
    Custom,
}

impl IneffectiveReason {
    /// Every reason, in a fixed order (the order of [`ReasonCounts`]).
    pub const ALL: [IneffectiveReason; 7] = [
        IneffectiveReason::ZeroVariance,
        IneffectiveReason::AllSuccess,
        IneffectiveReason::AllFailure,
        IneffectiveReason::MeanBelowBand,
        IneffectiveReason::MeanAboveBand,
        IneffectiveReason::Singleton,
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
            IneffectiveReason::Singleton => "singleton",
            IneffectiveReason::Custom => "custom",
        }
    }

    /// Position in [`IneffectiveReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for IneffectiveReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The verdict on one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The group carries a learning signal.
    Effective,
    /// The group carries none, for this reason.
    Ineffective(IneffectiveReason),
}

impl Verdict {
    /// Whether the verdict is [`Verdict::Effective`].
    pub fn is_effective(self) -> bool {
        matches!(self, Verdict::Effective)
    }

    /// The reason of an ineffective verdict.
    pub fn reason(self) -> Option<IneffectiveReason> {
        match self {
            Verdict::Effective => None,
            Verdict::Ineffective(r) => Some(r),
        }
    }
}

/// Counts of ineffective groups per [`IneffectiveReason`]. Serialised as a map from reason
/// name to count (reasons with a zero count may be omitted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasonCounts([u64; 7]);

impl ReasonCounts {
    /// The count for `reason`.
    pub fn get(&self, reason: IneffectiveReason) -> u64 {
        self.0[reason.index()]
    }

    /// Sum over all reasons.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds one group with `reason`.
    pub fn add(&mut self, reason: IneffectiveReason) {
        self.0[reason.index()] += 1;
    }

    /// Adds the verdict's reason (nothing for an effective verdict).
    pub fn record(&mut self, verdict: Verdict) {
        if let Some(r) = verdict.reason() {
            self.add(r);
        }
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &ReasonCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// `(reason, count)` for every reason, in [`IneffectiveReason::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (IneffectiveReason, u64)> + '_ {
        IneffectiveReason::ALL.iter().map(move |&r| (r, self.get(r)))
    }
}

impl Serialize for ReasonCounts {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(IneffectiveReason::ALL.len()))?;
        for (r, n) in self.iter() {
            m.serialize_entry(r.name(), &n)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for ReasonCounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<IneffectiveReason, u64>::deserialize(d)?;
        let mut c = ReasonCounts::default();
        for (r, n) in map {
            c.0[r.index()] = n;
        }
        Ok(c)
    }
}

fn default_success_threshold() -> f64 {
    1.0
}
fn default_tol() -> f64 {
    1e-6
}
fn default_band_high() -> f64 {
    1.0
}

/// The built-in effectiveness rules (see the [module docs](self) for the table). Serialised
/// externally tagged in snake case, every field defaulted:
/// `{"outcome": {"success_threshold": 1.0}}`, `{"reward_std": {}}`,
/// `{"mean_band": {"low": 0, "high": 1}}`, `{"all_of": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EffectivenessRule {
    /// Mixed success and failure. Default.
    Outcome {
        /// A response succeeds when its reward is at least this (used when the group has no
        /// attached binary outcomes). Default `1.0` (a correct answer's reward).
        #[serde(default = "default_success_threshold")]
        success_threshold: f64,
    },
    /// Population standard deviation of the rewards strictly above `tol`.
    RewardStd {
        /// Tolerance (default `1e-6`); `0.0` means "any variance".
        #[serde(default = "default_tol")]
        tol: f64,
    },
    /// Mean reward strictly inside `(low, high)`.
    MeanBand {
        /// Lower bound, exclusive (default `0`).
        #[serde(default)]
        low: f64,
        /// Upper bound, exclusive (default `1`).
        #[serde(default = "default_band_high")]
        high: f64,
    },
    /// Conjunction of rules (at least one).
    AllOf(Vec<EffectivenessRule>),
}

impl Default for EffectivenessRule {
    fn default() -> Self {
        Self::outcome()
    }
}

impl EffectivenessRule {
    /// By outcome with success = `reward ≥ 1` (the default).
    pub fn outcome() -> Self {
        Self::Outcome { success_threshold: default_success_threshold() }
    }

    /// By reward standard deviation with tolerance `1e-6` (the variance alternative).
    pub fn reward_std() -> Self {
        Self::RewardStd { tol: default_tol() }
    }

    /// Checks the rule's numbers, naming the field under `prefix` (e.g. `"effectiveness"`).
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`] for a non-finite threshold, a negative or
    /// non-finite tolerance, a band without `low < high`, or an empty `all_of`.
    pub fn validate_at(&self, prefix: &str) -> Result<()> {
        match self {
            Self::Outcome { success_threshold: t } if !t.is_finite() => {
                Err(invalid(&format!("{prefix}.success_threshold"), t, "must be finite"))
            }
            Self::RewardStd { tol } if !(tol.is_finite() && *tol >= 0.0) => {
                Err(invalid(&format!("{prefix}.tol"), tol, "must be finite and >= 0"))
            }
            Self::MeanBand { low, high } if !(low.is_finite() && high.is_finite() && low < high) => {
                Err(invalid(&format!("{prefix}.mean_band"), format!("({low}, {high})"), "needs finite low < high"))
            }
            Self::AllOf(rules) if rules.is_empty() => {
                Err(invalid(&format!("{prefix}.all_of"), "[]", "needs at least one rule"))
            }
            Self::AllOf(rules) => {
                rules.iter().enumerate().try_for_each(|(i, r)| r.validate_at(&format!("{prefix}.all_of[{i}]")))
            }
            _ => Ok(()),
        }
    }

    /// Classifies one group from its rewards and, optionally, its binary outcomes (which the
    /// outcome rule uses instead of the threshold). Rewards are assumed finite.
    ///
    /// A group of fewer than two responses is [`IneffectiveReason::Singleton`] under every
    /// rule. `outcomes` of another length than `rewards` are ignored.
    pub fn classify<R: Copy + Into<f64>>(&self, rewards: &[R], outcomes: Option<&[bool]>) -> Verdict {
        if rewards.len() < 2 {
            return Verdict::Ineffective(IneffectiveReason::Singleton);
        }
        match self {
            Self::Outcome { success_threshold } => {
                let wins = match outcomes.filter(|o| o.len() == rewards.len()) {
                    Some(o) => o.iter().filter(|&&s| s).count(),
                    None => rewards.iter().filter(|&&r| r.into() >= *success_threshold).count(),
                };
                if wins == 0 {
                    Verdict::Ineffective(IneffectiveReason::AllFailure)
                } else if wins == rewards.len() {
                    Verdict::Ineffective(IneffectiveReason::AllSuccess)
                } else {
                    Verdict::Effective
                }
            }
            Self::RewardStd { tol } => {
                if mean_std(rewards).std_pop > *tol {
                    Verdict::Effective
                } else {
                    Verdict::Ineffective(IneffectiveReason::ZeroVariance)
                }
            }
            Self::MeanBand { low, high } => {
                let mean = mean_std(rewards).mean;
                if mean <= *low {
                    Verdict::Ineffective(IneffectiveReason::MeanBelowBand)
                } else if mean >= *high {
                    Verdict::Ineffective(IneffectiveReason::MeanAboveBand)
                } else {
                    Verdict::Effective
                }
            }
            Self::AllOf(rules) => rules
                .iter()
                .map(|r| r.classify(rewards, outcomes))
                .find(|v| !v.is_effective())
                .unwrap_or(Verdict::Effective),
        }
    }
}

impl rl_core::Params for EffectivenessRule {
    type Error = RlvrCoreError;
    fn validate(&self) -> Result<()> {
        self.validate_at("effectiveness")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    const FAIL: IneffectiveReason = IneffectiveReason::AllFailure;

    #[test]
    fn outcome_rule_judges_success_not_variance() {
        let r = EffectivenessRule::default();
        assert_eq!(r, EffectivenessRule::Outcome { success_threshold: 1.0 });
        assert_eq!(r.classify(&[1.0, 0.0], None), Verdict::Effective);
        assert_eq!(r.classify(&[0.1, 0.3, 0.2], None), Verdict::Ineffective(FAIL));
        assert_eq!(r.classify(&[1.0f32, 1.5], None), Verdict::Ineffective(IneffectiveReason::AllSuccess));
        // the threshold is inclusive
        let half = EffectivenessRule::Outcome { success_threshold: 0.5 };
        assert!(half.classify(&[0.5, 0.49], None).is_effective());
        // attached outcomes win over the threshold; a wrong-length list is ignored
        assert!(r.classify(&[0.1, 0.3], Some(&[true, false])).is_effective());
        assert_eq!(r.classify(&[1.0, 1.0], Some(&[false, false])), Verdict::Ineffective(FAIL));
        assert_eq!(r.classify(&[1.0, 0.0], Some(&[false])), Verdict::Effective);
        assert_eq!(r.classify(&[1.0], None), Verdict::Ineffective(IneffectiveReason::Singleton));
        assert_eq!(r.classify::<f64>(&[], None), Verdict::Ineffective(IneffectiveReason::Singleton));
    }

    #[test]
    fn variance_band_and_conjunction() {
        let sd = EffectivenessRule::reward_std();
        assert!(sd.classify(&[0.1, 0.3, 0.2], None).is_effective());
        // fp32 noise on a constant group stays ineffective; the tolerance is a strict bound
        assert_eq!(sd.classify(&[0.1, 0.1 + 1e-8, 0.1], None), Verdict::Ineffective(IneffectiveReason::ZeroVariance));
        let tight = EffectivenessRule::RewardStd { tol: 0.5 };
        assert!(!tight.classify(&[0.0, 1.0], None).is_effective()); // σ_pop = 0.5, not > 0.5
        assert!(tight.classify(&[0.0, 1.1], None).is_effective());
        let band = EffectivenessRule::MeanBand { low: 0.0, high: 1.0 };
        assert_eq!(band.classify(&[0.0, 0.0], None), Verdict::Ineffective(IneffectiveReason::MeanBelowBand));
        assert_eq!(band.classify(&[1.0, 1.0], None), Verdict::Ineffective(IneffectiveReason::MeanAboveBand));
        // a continuous constant group slips through a band (OpenRLHF #1272) ...
        assert!(band.classify(&[0.5, 0.5], None).is_effective());
        // ... but not through band AND σ, which reports the first failing rule's reason
        let both = EffectivenessRule::AllOf(vec![band.clone(), sd.clone()]);
        assert_eq!(both.classify(&[0.5, 0.5], None), Verdict::Ineffective(IneffectiveReason::ZeroVariance));
        let both = EffectivenessRule::AllOf(vec![sd, band]);
        assert_eq!(both.classify(&[0.0, 0.0], None), Verdict::Ineffective(IneffectiveReason::ZeroVariance));
        assert!(both.classify(&[0.2, 0.6], None).is_effective());
    }

    #[test]
    fn validation_names_the_field() {
        assert!(EffectivenessRule::default().check().is_ok());
        let bad = [
            (EffectivenessRule::Outcome { success_threshold: f64::NAN }, "effectiveness.success_threshold"),
            (EffectivenessRule::RewardStd { tol: -1.0 }, "effectiveness.tol"),
            (EffectivenessRule::RewardStd { tol: f64::INFINITY }, "effectiveness.tol"),
            (EffectivenessRule::MeanBand { low: 1.0, high: 0.0 }, "effectiveness.mean_band"),
            (EffectivenessRule::MeanBand { low: 0.5, high: 0.5 }, "effectiveness.mean_band"),
            (EffectivenessRule::AllOf(vec![]), "effectiveness.all_of"),
            (
                EffectivenessRule::AllOf(vec![
                    EffectivenessRule::outcome(),
                    EffectivenessRule::RewardStd { tol: -1.0 },
                ]),
                "effectiveness.all_of[1].tol",
            ),
        ];
        for (rule, name) in bad {
            match rule.check_ref() {
                Err(RlvrCoreError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{rule:?}: {other:?}"),
            }
        }
        assert!(EffectivenessRule::RewardStd { tol: 0.0 }.check().is_ok());
    }

    #[test]
    fn serde_defaults_every_field_and_rejects_unknown_ones() {
        let r: EffectivenessRule = serde_json::from_str(r#"{"outcome": {}}"#).unwrap();
        assert_eq!(r, EffectivenessRule::outcome());
        let r: EffectivenessRule = serde_json::from_str(r#"{"reward_std": {}}"#).unwrap();
        assert_eq!(r, EffectivenessRule::reward_std());
        let r: EffectivenessRule = serde_json::from_str(r#"{"mean_band": {"high": 0.9}}"#).unwrap();
        assert_eq!(r, EffectivenessRule::MeanBand { low: 0.0, high: 0.9 });
        assert!(serde_json::from_str::<EffectivenessRule>(r#"{"outcome": {"threshold": 1}}"#).is_err());
        let all = EffectivenessRule::AllOf(vec![EffectivenessRule::outcome(), EffectivenessRule::reward_std()]);
        let back: EffectivenessRule = serde_json::from_str(&serde_json::to_string(&all).unwrap()).unwrap();
        assert_eq!(back, all);
    }

    #[test]
    fn reason_counts_total_merge_and_serde() {
        let mut a = ReasonCounts::default();
        a.add(FAIL);
        a.add(FAIL);
        a.record(Verdict::Ineffective(IneffectiveReason::Singleton));
        a.record(Verdict::Effective);
        assert_eq!((a.get(FAIL), a.get(IneffectiveReason::Singleton), a.total()), (2, 1, 3));
        let mut b = ReasonCounts::default();
        b.add(IneffectiveReason::AllSuccess);
        b.add(FAIL);
        a.merge(&b);
        assert_eq!((a.get(FAIL), a.get(IneffectiveReason::AllSuccess), a.total()), (3, 1, 5));
        assert_eq!(a.iter().map(|(_, n)| n).sum::<u64>(), 5);
        let json = serde_json::to_string(&a).unwrap();
        assert!(json.contains("\"all_failure\":3"), "{json}");
        assert_eq!(serde_json::from_str::<ReasonCounts>(&json).unwrap(), a);
        assert_eq!(serde_json::from_str::<ReasonCounts>(r#"{"custom": 2}"#).unwrap().get(IneffectiveReason::Custom), 2);
        for (i, r) in IneffectiveReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(r.to_string(), r.name());
        }
        assert_eq!(Verdict::Ineffective(FAIL).reason(), Some(FAIL));
        assert_eq!(Verdict::Effective.reason(), None);
    }
}
