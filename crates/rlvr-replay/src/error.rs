//! The error type of `rlvr-replay`.

/// Errors returned by `rlvr-replay`. Every variant names the offending value. A call that
/// returns an error leaves the buffer exactly as it was (nothing stored is lost).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A group had a different number of responses than the buffer's group size `K`.
    #[error("group {index} has {got} responses, the buffer's group size is {expected}")]
    GroupSize {
        /// Position of the group in the call's input.
        index: usize,
        /// The buffer's `K`.
        expected: usize,
        /// The group's number of responses.
        got: usize,
    },
    /// Two per-token or per-response arrays that must have the same length did not.
    #[error("length mismatch for `{what}`: expected {expected}, got {got}")]
    Length {
        /// What was being checked.
        what: &'static str,
        /// The required length.
        expected: usize,
        /// The length that was passed.
        got: usize,
    },
    /// A value that must be finite (reward, log-probability, advantage, score) was NaN or
    /// infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was being checked.
        what: &'static str,
        /// The first offending index (flattened).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A behaviour log-probability was positive (a probability above one).
    #[error("behaviour log-probability {value} > 0 at token {index}")]
    PositiveLogProb {
        /// Flattened token index.
        index: usize,
        /// The offending value.
        value: f32,
    },
    /// The current policy version passed to `fill` is older than one seen before.
    #[error("policy version went backwards: {got} < previously seen {last}")]
    VersionRegressed {
        /// The newest version seen so far.
        last: u64,
        /// The version passed.
        got: u64,
    },
    /// A group claims to come from a policy newer than the current one.
    #[error("group {index} has policy version {group_version} > current version {current}")]
    FutureVersion {
        /// Position of the group in the call's input.
        index: usize,
        /// The group's policy version.
        group_version: u64,
        /// The current policy version.
        current: u64,
    },
    /// A group (or a batch) was empty where responses are required.
    #[error("`{what}` is empty")]
    Empty {
        /// What was empty.
        what: &'static str,
    },
    /// A size did not fit the compact storage (token offsets are `u32`).
    #[error("`{what}` = {value} exceeds the storage limit {limit}")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// The requested size.
        value: u64,
        /// The limit.
        limit: u64,
    },
    /// A parameter was outside its valid range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name (dotted path inside the params).
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// [`Priority::Kl`](crate::Priority::Kl) needs an
    /// [`OffPolicyScorer`](crate::OffPolicyScorer); none was passed to `fill_with`.
    #[error("priority `kl` needs an OffPolicyScorer: call fill_with(.., Some(scorer))")]
    MissingScorer,
    /// A checkpoint was internally inconsistent.
    #[error("invalid checkpoint: {0}")]
    Checkpoint(String),
    /// Error from `rl-core`.
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
    /// Error from `rlvr-core` (advantage computation; the tensor side).
    #[error(transparent)]
    Rlvr(#[from] rlvr_core::RlvrCoreError),
    /// libtorch error (feature `tch`).
    #[cfg(feature = "tch")]
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// `Result` with [`ReplayError`].
pub type Result<T, E = ReplayError> = std::result::Result<T, E>;

/// First non-finite entry of `values` (`rlvr-core`'s check) as this crate's typed error.
pub(crate) fn check_finite(what: &'static str, values: &[f32]) -> Result<()> {
    match rlvr_core::stats::first_non_finite(values) {
        Some((index, value)) => Err(ReplayError::NonFinite { what, index, value }),
        None => Ok(()),
    }
}
