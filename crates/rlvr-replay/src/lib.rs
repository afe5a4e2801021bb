//! # rlvr-replay
//!
//! POPO's prioritized group replay for RLVR (Mao, Qu, Wang, Zou, Ji, "RLVR without
//! Ineffective Samples: Group Prioritized Off-Policy Optimization for LLM Reasoning", 2026):
//! no training batch carries an ineffective group. Groups whose rewards are all right or all
//! wrong carry no signal; [`GroupReplayBuffer::fill`] keeps the effective on-policy groups,
//! stores them, and puts a recent effective off-policy group into each ineffective slot, so
//! the batch size stays constant without extra rollouts. Replayed groups are marked
//! ([`Origin::Replayed`]) and carry their behaviour log-probs, so the loss (`rlvr-core`)
//! applies the decoupled importance-sampling correction to them and to them only.
//!
//! - [`Group`] / [`GroupBuilder`]: one prompt's `K` responses (token ids, behaviour
//!   log-probs, mask), rewards, optional outcomes and advantages, and the one policy version
//!   that sampled them; flat storage within 1% of the raw data.
//! - [`EffectivenessRule`] (from `rlvr-core`, the one definition every crate uses): by default
//!   a group is effective when some responses succeed and some fail (attached binary outcomes,
//!   else `reward ≥ 1`); reward σ above a tolerance, a mean band and conjunctions are the
//!   alternatives. [`GroupEffectiveness`] takes caller-defined predicates. Every ineffective
//!   group is counted by [`IneffectiveReason`].
//! - [`GroupReplayBuffer`] with [`ReplayParams`]: capacity in groups and bytes, newest-first
//!   replay, maximum age in policy versions, maximum replays per group, other
//!   [`Priority`]s (quality × recency decay, Σ|A|·σ, KL through an [`OffPolicyScorer`]),
//!   advantages reused or recomputed with any of `rlvr-core`'s outcome estimators
//!   ([`AdvantageEstimator`]), exact [`ReplayCheckpoint`]s.
//! - [`FillReport`] / [`GroupReplayBuffer::metrics`]: occupancy, ages, replay fraction,
//!   stale rejections, ineffective counts per reason, fill ratio.
//! - Feature `tch`: `tensor::TensorBatch` turns a [`FilledBatch`] into `rlvr-core`'s loss
//!   input, with the behaviour log-probs that make the decoupled correction apply to replayed
//!   groups only.
//!
//! Nothing here links libtorch unless the `tch` feature is on (`rlvr-core` is used without
//! its `tch` feature).
//!
//! ```
//! use rlvr_replay::{GroupBuilder, GroupReplayBuffer, Origin, ReplayParams};
//!
//! use rl_core::Params;
//! let mut buffer = GroupReplayBuffer::new(ReplayParams::new(4).max_age(2).check()?)?;
//! for step in 0..3u64 {
//!     // One step's rollouts: prompt p gets 4 responses; prompt 0 always fails after step 0.
//!     let groups = (0..2u64)
//!         .map(|p| {
//!             let mut b = GroupBuilder::new(p, step);
//!             for k in 0..4 {
//!                 let reward = if step > 0 && p == 0 { 0.0 } else { (k % 2) as f32 };
//!                 b.push_response(&[1, 2, 3], &[-0.5, -0.1, -0.9], None, reward)?;
//!             }
//!             b.finish()
//!         })
//!         .collect::<rlvr_replay::Result<Vec<_>>>()?;
//!     let batch = buffer.fill(groups, step)?;
//!     assert_eq!(batch.len(), 2); // batch size kept
//!     for g in batch.iter() {
//!         if let Origin::Replayed { age, .. } = g.origin() {
//!             assert!(age >= 1 && age <= 2);
//!         }
//!     }
//! }
//! assert!(buffer.totals().replayed >= 2);
//! # Ok::<(), rlvr_replay::ReplayError>(())
//! ```
//!
//! See `docs/rlvr-replay.md` for the design choices the paper leaves open.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod buffer;
pub mod effectiveness;
pub mod error;
pub mod group;
pub mod params;
#[cfg(feature = "tch")]
pub mod tensor;

/// `rlvr-core`, re-exported (its tensor side with feature `tch`).
pub use rlvr_core;
/// `tch`, re-exported for the tensor side (feature `tch`).
#[cfg(feature = "tch")]
pub use tch;

pub use buffer::{
    BatchGroup, FillReport, FilledBatch, GroupReplayBuffer, OffPolicyScorer, Origin, ReplayCheckpoint, ReplayTotals,
    StoredGroup,
};
pub use effectiveness::GroupEffectiveness;
pub use error::{ReplayError, Result};
pub use group::{FlatResponses, Group, GroupBuilder, Response, LOGP_TOLERANCE};
pub use params::{AdvantageMode, Priority, ReplayParams, Sampling, Shortfall};
/// The parameter convention (`ReplayParams::check()` → [`Valid`]).
pub use rl_core::{Params, Valid};
/// The shared definitions of `rlvr-core`, re-exported under their old paths.
pub use rlvr_core::{AdvantageEstimator, EffectivenessRule, IneffectiveReason, ReasonCounts, Verdict};

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<super::GroupReplayBuffer>();
        has_autotraits::<super::ReplayCheckpoint>();
        has_autotraits::<super::FilledBatch>();
        has_autotraits::<super::Group>();
        has_autotraits::<super::ReplayParams>();
        has_autotraits::<super::ReplayError>();
    }
}
