//! The error type of `rlvr-tasks`.
//!
//! Verification never returns an error: a bad completion is a [`Verdict`](crate::Verdict) with
//! reward 0 and a [`MalformedReason`](crate::MalformedReason). `TaskError` is for callers'
//! mistakes (bad parameters, text outside the tokenizer's alphabet) and unsolvable tasks.

/// Errors returned by `rlvr-tasks`. Every variant names the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// A parameter is outside its valid range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Text to encode holds a character outside the tokenizer's alphabet.
    #[error("character {ch:?} at position {position} is not in the tokenizer's alphabet")]
    UnknownChar {
        /// The character.
        ch: char,
        /// Its index (in characters).
        position: usize,
    },
    /// A token id to decode is not in the vocabulary, or is a special token where text is
    /// expected.
    #[error("token id {id} at position {position} is not a text token")]
    NotATextToken {
        /// The id.
        id: i64,
        /// Its index.
        position: usize,
    },
    /// A difficulty level beyond the configured table was requested.
    #[error("difficulty level {level} out of range: {levels} levels are configured")]
    LevelOutOfRange {
        /// The requested level.
        level: usize,
        /// Number of configured levels.
        levels: usize,
    },
    /// The generator did not find a task satisfying the level's constraints.
    #[error("no task found for level {level} after {attempts} attempts; loosen its constraints")]
    GenerationFailed {
        /// The level.
        level: usize,
        /// Attempts made.
        attempts: usize,
    },
    /// Pools ask a level for more distinct prompts than its generator can produce.
    #[error("level {level} can produce only {available} distinct prompts but the pools ask for {requested}")]
    NotEnoughPrompts {
        /// The level.
        level: usize,
        /// Prompts the pools ask for (all pools together).
        requested: usize,
        /// Distinct prompts the level can produce.
        available: u64,
    },
    /// Every one of `draws` draws repeated a problem already taken by an earlier prompt.
    #[error("pool `{pool}`: {draws} draws at level {level} all repeated problems already taken; ask for fewer prompts of this level")]
    LevelExhausted {
        /// The pool's name.
        pool: String,
        /// The level.
        level: usize,
        /// Draws made for the prompt.
        draws: usize,
    },
    /// The solver proved that a task has no solution.
    #[error("task `{task}` has no solution")]
    NoSolution {
        /// The task's prompt text.
        task: String,
    },
    /// The solver gave up after its node budget.
    #[error("solver gave up on `{task}` after {nodes} nodes")]
    SearchBudgetExceeded {
        /// The task's prompt text.
        task: String,
        /// Nodes explored.
        nodes: u64,
    },
}

/// `Result` with [`TaskError`].
pub type Result<T, E = TaskError> = std::result::Result<T, E>;

pub(crate) fn invalid(name: &str, value: impl ToString, reason: &str) -> TaskError {
    TaskError::InvalidParameter { name: name.to_owned(), value: value.to_string(), reason: reason.to_owned() }
}
