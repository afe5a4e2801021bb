//! Configuration of the group replay buffer.

use serde::{Deserialize, Serialize};

use crate::advantage::AdvantageEstimator;
use crate::effectiveness::EffectivenessRule;
use crate::error::{ReplayError, Result};

/// Which stored groups are replayed first.
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
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Newest first.
    #[default]
    Recency,
    /// Reward σ times `decay^age`.
    QualityRecency {
        /// Per-version decay in `(0, 1]`.
        decay: f64,
    },
    /// `Σ|A|·σ`.
    AdvantageStd,
    /// Smallest caller-estimated divergence to the current policy first.
    Kl,
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
/// | `effectiveness` | `RewardStd { tol: 1e-6 }` | which groups carry signal | see [`EffectivenessRule`] |
/// | `advantage_mode` | `Reuse` | replayed advantages reused or recomputed | see [`AdvantageMode`] |
/// | `estimator` | GRPO, eps 1e-6, unbiased σ | advantages of groups that come without | see [`AdvantageEstimator`] |
/// | `shortfall` | `Drop` | unfillable slots | see [`Shortfall`] |
/// | `seed` | 0 | seed of the generator used by proportional sampling | any |
///
/// ```
/// use rlvr_replay::{Priority, ReplayParams};
/// let p = ReplayParams::new(16).capacity_groups(256).max_age(2).priority(Priority::AdvantageStd).check()?;
/// assert_eq!(p.group_size, 16);
/// assert!(ReplayParams::new(0).check().is_err());
/// # Ok::<(), rlvr_replay::ReplayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

    /// Validates the parameters and returns them.
    ///
    /// # Errors
    /// [`ReplayError::InvalidParameter`] naming the first bad field.
    pub fn check(self) -> Result<Self> {
        let bad = |name, value: String, reason| Err(ReplayError::InvalidParameter { name, value, reason });
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
        if let AdvantageEstimator::Grpo { eps, .. } = self.estimator {
            if !(eps.is_finite() && eps >= 0.0) {
                return bad("estimator.eps", eps.to_string(), "must be finite and >= 0");
            }
        }
        if let Err((name, value, reason)) = self.effectiveness.check() {
            return bad(name, value, reason);
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_rejects_bad_fields() {
        assert!(ReplayParams::default().check().is_ok());
        for p in [
            ReplayParams::new(4).capacity_groups(0),
            ReplayParams::new(4).capacity_bytes(0),
            ReplayParams::new(4).max_replays(0),
            ReplayParams::new(4).priority(Priority::QualityRecency { decay: 0.0 }),
            ReplayParams::new(4).priority(Priority::QualityRecency { decay: f64::NAN }),
            ReplayParams::new(4).sampling(Sampling::Proportional),
            ReplayParams::new(4).estimator(AdvantageEstimator::Grpo { eps: -1.0, unbiased: true }),
            ReplayParams::new(4).effectiveness(EffectivenessRule::RewardStd { tol: -1.0 }),
        ] {
            assert!(matches!(p.check(), Err(ReplayError::InvalidParameter { .. })));
        }
    }

    #[test]
    fn params_load_from_json_with_defaults() -> anyhow::Result<()> {
        let p: ReplayParams =
            serde_json::from_str(r#"{"group_size": 4, "priority": {"quality_recency": {"decay": 0.5}}}"#)?;
        assert_eq!(p.group_size, 4);
        assert_eq!(p.priority, Priority::QualityRecency { decay: 0.5 });
        assert_eq!(p.capacity_groups, 64);
        Ok(())
    }
}
