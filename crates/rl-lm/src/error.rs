//! The error type of `rl-lm`.

/// Errors returned by `rl-lm`. Every variant names the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LmError {
    /// A field of [`LmConfig`](crate::LmConfig) is invalid.
    #[error("invalid config `{name}` = {value}: {reason}")]
    InvalidConfig {
        /// Field name.
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A generation or log-prob parameter is invalid.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A batch with no sequences was passed.
    #[error("empty batch: at least one sequence is required")]
    EmptyBatch,
    /// A sequence (prompt) with no tokens was passed.
    #[error("sequence {row} is empty")]
    EmptySequence {
        /// Index of the empty sequence in the batch.
        row: usize,
    },
    /// A token id is negative or not below the vocabulary size.
    #[error("token id {id} at row {row}, position {position} is outside the vocabulary [0, {vocab_size})")]
    TokenOutOfRange {
        /// Row of the batch.
        row: usize,
        /// Position in the row.
        position: usize,
        /// The offending id.
        id: i64,
        /// The model's vocabulary size.
        vocab_size: i64,
    },
    /// A sequence would be longer than the model's `max_len` (its position table).
    #[error("sequence length {len} exceeds the model's max_len {max_len}")]
    SequenceTooLong {
        /// The length that was requested.
        len: i64,
        /// The model's maximum length.
        max_len: i64,
    },
    /// A tensor passed in has the wrong shape or kind.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got:?}")]
    Shape {
        /// What was checked.
        what: String,
        /// Expected shape, described.
        expected: String,
        /// The shape passed.
        got: Vec<i64>,
    },
    /// An error from `rl-nn` (checkpoints: missing, misshaped or unexpected tensors; devices).
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON (de)serialisation failure (`config.json`).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// `Result` with [`LmError`].
pub type Result<T, E = LmError> = std::result::Result<T, E>;

pub(crate) fn invalid_param(name: &str, value: impl ToString, reason: &str) -> LmError {
    LmError::InvalidParameter { name: name.to_owned(), value: value.to_string(), reason: reason.to_owned() }
}
