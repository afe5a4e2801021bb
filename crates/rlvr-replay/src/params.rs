//! Configuration of the group replay buffer.

use rlvr_core::{AdvantageEstimator, EffectivenessRule};
use serde::{Deserialize, Serialize};

use crate::error::{ReplayError, Result};

/// Which stored groups are replayed first. In a config: `"recency"`,
/// `{"quality_recency": {"decay": 0.9}}`, `"advantage_std"`, `"kl"`.
///
/// `age` is `current_version − group.policy_version`; σ is the unbiased standard deviation of
/// the group's rewards; `A` its stored advantages.
///
/// | variant | priority (highest first) | reference |
/// |---|---|---|
/// | `Recency` (default) | newest stored group first | POPO's recency replay |
/// | `QualityRecency { decay }` | `σ · decay^age` | POPO's "quality and off-policiness" jointly |
/// | `AdvantageStd` | `Σ_k |A_k| · σ` | TRL `grpo_with_replay_buffer` |
/// | `Kl` | lowest divergence first, from an [`OffPolicyScorer`](crate::OffPolicyScorer) | POPO-KL ablation |
///
/// Ties go to the newer group.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Priority {
    /// Newest first.
    #[default]
    Recency,
    /// Reward σ times `decay^age`.
    QualityRecency {
        /// Per-version decay in `(0, 1]` (default `0.5`).
        #[serde(default = "half")]
        decay: f64,
    },
    /// `Σ|A|·σ`.
    AdvantageStd,
    /// Smallest caller-estimated divergence to the current policy first.
    Kl,
}

fn half() -> f64 {
    0.5
}

/// How replayed groups are drawn given their priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sampling {
    /// Highest priority first, deterministically (default).
    #[default]
    Greedy,
    /// Without replacement, with probability proportional to the priority (TRL); only for
    /// the non-negative priorities `QualityRecency` and `AdvantageStd`. Uses the buffer's
    /// seeded generator, which checkpoints restore.
    Proportional,
}

/// What advantages a replayed group trains with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageMode {
    /// The advantages stored with the group (default).
    #[default]
    Reuse,
    /// Recomputed from the stored rewards with the buffer's estimator.
    Recompute,
}

/// What `fill` does with slots it cannot fill because the buffer ran dry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shortfall {
    /// Drop the slot: the batch is shorter and the fill ratio below one (default).
    #[default]
    Drop,
    /// Keep the ineffective group in its slot with all-zero advantages, so tensor shapes stay
    /// static (it contributes no policy gradient).
    KeepIneffective,
}

/// Parameters of a [`GroupReplayBuffer`](crate::GroupReplayBuffer).
///
/// The POPO paper fixes the rules (store only effective groups, whole groups, replay the
/// newest first, correct with decoupled importance sampling) but not the numbers; defaults
/// below are this crate's choices, explained in `docs/rlvr-replay.md`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `group_size` | 8 | responses per group `K` (TRL `num_generations`) | ≥ 1 |
/// | `capacity_groups` | 64 | most stored groups (TRL `replay_buffer_size`) | ≥ 1 |
/// | `capacity_bytes` | 1 GiB | most stored bytes ([`Group::stored_bytes`](crate::Group::stored_bytes)) | ≥ 1 |
/// | `max_age` | 4 | oldest replayable group, in policy versions (POPO-stale(10) collapses; AReaL uses 2–8) | any |
/// | `max_replays` | 1 | times one stored group may be replayed | ≥ 1 |
/// | `priority` | `Recency` | replay order | see [`Priority`] |
/// | `sampling` | `Greedy` | draw rule | see [`Sampling`] |
/// | `effectiveness` | by outcome: `Outcome { success_threshold: 1.0 }` | which groups carry signal (`rlvr-core`'s one rule; `RewardStd { tol }` for the variance gate) | see [`EffectivenessRule`] |
/// | `advantage_mode` | `Reuse` | replayed advantages reused or recomputed | see [`AdvantageMode`] |
/// | `estimator` | GRPO, eps 1e-6, Bessel σ (verl) | advantages of groups that come without; any `rlvr-core` outcome estimator but ReMax (which needs greedy baselines: attach those advantages with `Group::with_advantages`) | see [`AdvantageEstimator`] |
/// | `shortfall` | `Drop` | unfillable slots | see [`Shortfall`] |
/// | `seed` | 0 | seed of the generator used by proportional sampling | any |
///
/// Advantages the buffer computes (fresh groups that come without, replayed groups under
/// [`AdvantageMode::Recompute`]) are computed in one call per `fill` over those groups, with
/// the groups' response lengths (OPO, REINFORCE++ whitening weights); the batch-level
/// estimators (REINFORCE++, REINFORCE++-baseline, batch std, GPG) take their batch statistics
/// over exactly those groups. The groups were already judged effective by `fill`, so the
/// estimator does not zero any of them again.
///
/// ```
/// use rl_core::Params;
/// use rlvr_replay::{Priority, ReplayParams};
/// let p = ReplayParams::new(16).capacity_groups(256).max_age(2).priority(Priority::AdvantageStd).check()?;
/// assert_eq!(p.group_size, 16);
/// assert!(ReplayParams::new(0).check().is_err());
/// // from a config: fields default, misspelt fields are errors
/// let p: ReplayParams = serde_json::from_str(r#"{"group_size": 4, "priority": {"quality_recency": {}}}"#)?;
/// assert_eq!(p.priority, Priority::QualityRecency { decay: 0.5 });
/// assert!(serde_json::from_str::<ReplayParams>(r#"{"max_ages": 2}"#).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayParams {
    /// Responses per group `K`.
    pub group_size: usize,
    /// Most stored groups.
    pub capacity_groups: usize,
    /// Most stored bytes.
    pub capacity_bytes: u64,
    /// Oldest replayable group, in policy versions.
    pub max_age: u64,
    /// Times one stored group may be replayed before it is evicted.
    pub max_replays: u32,
    /// Replay order.
    pub priority: Priority,
    /// Draw rule.
    pub sampling: Sampling,
    /// Effectiveness predicate used by `fill`.
    pub effectiveness: EffectivenessRule,
    /// Replayed advantages reused or recomputed.
    pub advantage_mode: AdvantageMode,
    /// Estimator for groups without advantages and for [`AdvantageMode::Recompute`].
    pub estimator: AdvantageEstimator,
    /// What to do with slots that cannot be filled.
    pub shortfall: Shortfall,
    /// Seed of the buffer's generator.
    pub seed: u64,
}

impl Default for ReplayParams {
    fn default() -> Self {
        Self {
            group_size: 8,
            capacity_groups: 64,
            capacity_bytes: 1 << 30,
            max_age: 4,
            max_replays: 1,
            priority: Priority::Recency,
            sampling: Sampling::Greedy,
            effectiveness: EffectivenessRule::default(),
            advantage_mode: AdvantageMode::Reuse,
            estimator: AdvantageEstimator::default(),
            shortfall: Shortfall::Drop,
            seed: 0,
        }
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, $name: $ty) -> Self {
            self.$name = $name;
            self
        }
    };
}

impl ReplayParams {
    /// Defaults with group size `k`.
    pub fn new(group_size: usize) -> Self {
        Self { group_size, ..Self::default() }
    }

    setter!(
        /// Sets `group_size`.
        group_size: usize
    );
    setter!(
        /// Sets `capacity_groups`.
        capacity_groups: usize
    );
    setter!(
        /// Sets `capacity_bytes`.
        capacity_bytes: u64
    );
    setter!(
        /// Sets `max_age`.
        max_age: u64
    );
    setter!(
        /// Sets `max_replays`.
        max_replays: u32
    );
    setter!(
        /// Sets `priority`.
        priority: Priority
    );
    setter!(
        /// Sets `sampling`.
        sampling: Sampling
    );
    setter!(
        /// Sets `effectiveness`.
        effectiveness: EffectivenessRule
    );
    setter!(
        /// Sets `advantage_mode`.
        advantage_mode: AdvantageMode
    );
    setter!(
        /// Sets `estimator`.
        estimator: AdvantageEstimator
    );
    setter!(
        /// Sets `shortfall`.
        shortfall: Shortfall
    );
    setter!(
        /// Sets `seed`.
        seed: u64
    );
}

impl rl_core::Params for ReplayParams {
    type Error = ReplayError;
    /// Checks every field, naming the first bad one.
    fn validate(&self) -> Result<()> {
        let bad = |name: &str, value: String, reason: &str| {
            Err(ReplayError::InvalidParameter { name: name.into(), value, reason: reason.into() })
        };
        if self.group_size == 0 {
            return bad("group_size", "0".into(), "must be >= 1");
        }
        if self.capacity_groups == 0 {
            return bad("capacity_groups", "0".into(), "must be >= 1");
        }
        if self.capacity_bytes == 0 {
            return bad("capacity_bytes", "0".into(), "must be >= 1");
        }
        if self.max_replays == 0 {
            return bad("max_replays", "0".into(), "must be >= 1");
        }
        if let Priority::QualityRecency { decay } = self.priority {
            if !(decay > 0.0 && decay <= 1.0) {
                return bad("priority.decay", decay.to_string(), "must be in (0, 1]");
            }
        }
        if self.sampling == Sampling::Proportional && matches!(self.priority, Priority::Recency | Priority::Kl) {
            return bad(
                "sampling",
                "proportional".into(),
                "needs a non-negative priority (quality_recency or advantage_std)",
            );
        }
        if self.estimator == AdvantageEstimator::ReMax {
            return bad(
                "estimator",
                "remax".into(),
                "needs greedy baselines the buffer does not have; attach advantages with Group::with_advantages",
            );
        }
        rlvr_core::AdvantageParams::new(self.estimator).validate()?;
        self.effectiveness.validate_at("effectiveness")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;
    use rlvr_core::RlvrCoreError;

    fn field(e: ReplayError) -> String {
        match e {
            ReplayError::InvalidParameter { name, .. } => name,
            ReplayError::Rlvr(RlvrCoreError::InvalidParameter { name, .. }) => name,
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn quality_recency_decay_defaults_to_a_half() {
        let p: ReplayParams =
            serde_json::from_str(r#"{"group_size": 4, "priority": {"quality_recency": {}}}"#).unwrap();
        assert_eq!(p.priority, Priority::QualityRecency { decay: 0.5 });
    }

    #[test]
    fn check_rejects_bad_fields_by_name() {
        assert!(ReplayParams::default().check().is_ok());
        let cases = [
            (ReplayParams::new(4).group_size(0), "group_size"),
            (ReplayParams::new(4).capacity_groups(0), "capacity_groups"),
            (ReplayParams::new(4).capacity_bytes(0), "capacity_bytes"),
            (ReplayParams::new(4).max_replays(0), "max_replays"),
            (ReplayParams::new(4).priority(Priority::QualityRecency { decay: 0.0 }), "priority.decay"),
            (ReplayParams::new(4).priority(Priority::QualityRecency { decay: 1.5 }), "priority.decay"),
            (ReplayParams::new(4).priority(Priority::QualityRecency { decay: f64::NAN }), "priority.decay"),
            (ReplayParams::new(4).sampling(Sampling::Proportional), "sampling"),
            (ReplayParams::new(4).priority(Priority::Kl).sampling(Sampling::Proportional), "sampling"),
            (ReplayParams::new(4).estimator(AdvantageEstimator::ReMax), "estimator"),
            (
                ReplayParams::new(4).estimator(AdvantageEstimator::Grpo { eps: -1.0, std: Default::default() }),
                "estimator.eps",
            ),
            (ReplayParams::new(4).effectiveness(EffectivenessRule::RewardStd { tol: -1.0 }), "effectiveness.tol"),
        ];
        for (p, name) in cases {
            assert_eq!(field(p.clone().check().unwrap_err()), name, "{p:?}");
        }
        // the boundaries that are allowed, and every setter with a non-default value
        let p = ReplayParams::new(3)
            .capacity_groups(1)
            .capacity_bytes(1)
            .max_age(0)
            .max_replays(1)
            .priority(Priority::QualityRecency { decay: 1.0 })
            .sampling(Sampling::Proportional)
            .effectiveness(EffectivenessRule::reward_std())
            .advantage_mode(AdvantageMode::Recompute)
            .estimator(AdvantageEstimator::Rloo)
            .shortfall(Shortfall::KeepIneffective)
            .seed(9);
        let v = p.clone().check().unwrap();
        assert_eq!(
            *v,
            ReplayParams {
                group_size: 3,
                capacity_groups: 1,
                capacity_bytes: 1,
                max_age: 0,
                max_replays: 1,
                priority: Priority::QualityRecency { decay: 1.0 },
                sampling: Sampling::Proportional,
                effectiveness: EffectivenessRule::reward_std(),
                advantage_mode: AdvantageMode::Recompute,
                estimator: AdvantageEstimator::Rloo,
                shortfall: Shortfall::KeepIneffective,
                seed: 9,
            }
        );
        assert!(ReplayParams::new(4).priority(Priority::AdvantageStd).sampling(Sampling::Proportional).check().is_ok());
    }

    #[test]
    fn params_load_from_json_with_defaults() -> anyhow::Result<()> {
        let p: ReplayParams =
            serde_json::from_str(r#"{"group_size": 4, "priority": {"quality_recency": {"decay": 0.25}}}"#)?;
        assert_eq!(p.group_size, 4);
        assert_eq!(p.priority, Priority::QualityRecency { decay: 0.25 });
        assert_eq!(p.capacity_groups, 64);
        assert_eq!(p.effectiveness, EffectivenessRule::outcome());
        let p: ReplayParams = serde_json::from_str(
            r#"{"effectiveness": {"reward_std": {}}, "estimator": {"kind": "rloo"}, "shortfall": "keep_ineffective"}"#,
        )?;
        assert_eq!((p.effectiveness, p.estimator), (EffectivenessRule::reward_std(), AdvantageEstimator::Rloo));
        assert!(serde_json::from_str::<ReplayParams>(r#"{"group_sise": 4}"#).is_err());
        assert!(serde_json::from_str::<Priority>(r#"{"quality_recency": {"decay": 0.5, "dekay": 1}}"#).is_err());
        assert!(serde_json::from_str::<rl_core::Valid<ReplayParams>>(r#"{"group_size": 0}"#).is_err());
        Ok(())
    }
}
