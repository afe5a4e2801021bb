//! The error type of `rlvr-select`.

use crate::ItemId;

/// Errors returned by `rlvr-select`. Every variant names the offending value; a call that
/// returns an error leaves the selector's state exactly as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// A hyper-parameter was outside its valid range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name (dotted for nested parameters: `learner.lr`).
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// `batch_size` was zero.
    #[error("batch size must be at least 1")]
    ZeroBatch,
    /// The batch asked for is larger than the candidate set.
    #[error("batch size {batch_size} is larger than the {candidates} candidates")]
    BatchTooLarge {
        /// The batch size asked for.
        batch_size: usize,
        /// The number of candidates passed.
        candidates: usize,
    },
    /// An id occurred twice in one candidate set or one batch of outcomes.
    #[error("duplicate id {id} in {context}")]
    DuplicateId {
        /// The repeated id.
        id: ItemId,
        /// Where (`"candidates"` or `"outcomes"`).
        context: &'static str,
    },
    /// An id outside the pool the selector was built for.
    #[error("unknown id {id}: this selector tracks ids 0..{n_items}")]
    UnknownId {
        /// The id.
        id: ItemId,
        /// The pool size the selector was built for.
        n_items: usize,
    },
    /// A reward was NaN or infinite.
    #[error("non-finite reward {value} for id {id} at rollout {index}")]
    NonFiniteReward {
        /// The prompt id.
        id: ItemId,
        /// The rollout index inside the group.
        index: usize,
        /// The offending value.
        value: f32,
    },
    /// A reward was outside `[0, 1]` (rewards are verifiable correctness scores).
    #[error("reward {value} for id {id} at rollout {index} is outside [0, 1]")]
    RewardOutOfRange {
        /// The prompt id.
        id: ItemId,
        /// The rollout index inside the group.
        index: usize,
        /// The offending value.
        value: f32,
    },
    /// An outcome carried no rewards.
    #[error("outcome for id {id} has no rewards (group size 0)")]
    EmptyGroup {
        /// The prompt id.
        id: ItemId,
    },
    /// Outcomes of one call had different group sizes.
    #[error("inconsistent group size for id {id}: expected {expected} rollouts, got {got}")]
    GroupSizeMismatch {
        /// The prompt id.
        id: ItemId,
        /// The group size of the first outcome (or the configured one).
        expected: usize,
        /// The group size of this outcome.
        got: usize,
    },
    /// Candidate features did not have `len * dim` entries, or a feature was not finite.
    #[error("bad candidate features: {0}")]
    Features(String),
    /// A rollout-based selector was given an oracle that cannot roll out.
    #[error("this oracle cannot generate rollouts (selector `{selector}` needs one)")]
    OracleUnavailable {
        /// The selector that asked.
        selector: &'static str,
    },
    /// The oracle answered with outcomes for other ids than asked.
    #[error("oracle returned an outcome for id {got} where id {expected} was asked")]
    OracleMismatch {
        /// The id asked for.
        expected: ItemId,
        /// The id returned.
        got: ItemId,
    },
    /// The caller's rollout oracle failed to generate or score (its message; e.g. a policy or
    /// verifier error in a trainer's oracle).
    #[error("rollout oracle failed: {0}")]
    Oracle(String),
    /// A saved state was inconsistent (wrong lengths, invalid values).
    #[error("invalid saved state: {0}")]
    InvalidState(String),
    /// JSON (de)serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A libtorch / `rl-nn` failure inside a neural selector (feature `neural`).
    #[cfg(feature = "neural")]
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// An error from `rl-core`.
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
}

/// `Result` with [`SelectError`].
pub type Result<T, E = SelectError> = std::result::Result<T, E>;

/// An [`SelectError::InvalidParameter`] for `name`.
pub(crate) fn invalid(
    name: impl Into<String>,
    value: impl std::fmt::Display,
    reason: impl Into<String>,
) -> SelectError {
    SelectError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
}

/// Prefixes the parameter name of an [`SelectError::InvalidParameter`] with `prefix.` (nested
/// parameters are validated by their parent: `learner.lr`).
pub(crate) fn nested(prefix: &str, e: SelectError) -> SelectError {
    match e {
        SelectError::InvalidParameter { name, value, reason } => {
            SelectError::InvalidParameter { name: format!("{prefix}.{name}"), value, reason }
        }
        other => other,
    }
}
