//! The crate's error type.

use thiserror::Error;

/// Errors of `rlvr-train`. Each upstream crate's error is wrapped whole, so the original
/// variant (a bad shape, an unknown id, a corrupt checkpoint, ...) stays visible.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TrainError {
    /// A configuration field is out of range; names the field and says why.
    #[error("invalid config `{field}` = {value}: {reason}")]
    InvalidConfig {
        /// Dotted field name, e.g. `rl.group_size`.
        field: String,
        /// The rejected value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A prompt of the pool has no solution the warm-start solver can print.
    #[error("prompt {id} has no solver solution for the warm start: {source}")]
    Unsolvable {
        /// Prompt id.
        id: u64,
        /// The solver's error.
        source: rlvr_tasks::TaskError,
    },
    /// An id handed to the trainer's rollout oracle is not a training prompt.
    #[error("unknown prompt id {id} (the training pool has ids 0..{n})")]
    UnknownPrompt {
        /// The id.
        id: u64,
        /// Pool size.
        n: usize,
    },
    /// Two tensors that must describe the same rows disagree.
    #[error("shape mismatch for {what}: expected {expected:?}, got {got:?}")]
    Shape {
        /// What was compared.
        what: String,
        /// Expected shape.
        expected: Vec<i64>,
        /// Actual shape.
        got: Vec<i64>,
    },
    /// Training produced a non-finite loss (diverged); names the step.
    #[error("non-finite {what} at step {step}")]
    NonFinite {
        /// What went non-finite.
        what: String,
        /// RL step (or SFT step).
        step: u64,
    },
    /// A checkpoint that cannot resume this trainer: another run's config or selector, or
    /// contents that contradict each other. Names the directory and what is wrong.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint directory.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Tasks, verifier or tokenizer.
    #[error(transparent)]
    Task(#[from] rlvr_tasks::TaskError),
    /// The transformer policy.
    #[error(transparent)]
    Lm(#[from] rl_lm::LmError),
    /// A Hugging Face model, tokenizer or parameter error (`rl-hf`).
    #[error(transparent)]
    Hf(#[from] rl_hf::HfError),
    /// Losses.
    #[error(transparent)]
    Loss(#[from] rlvr_core::RlvrCoreError),
    /// Replay buffer.
    #[error(transparent)]
    Replay(#[from] rlvr_replay::ReplayError),
    /// Selectors.
    #[error(transparent)]
    Select(#[from] rlvr_select::SelectError),
    /// Devices, checkpoints.
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// Metrics sink and foundations.
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
    /// libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// Reading a config or writing outputs.
    #[error("{context}: {source}")]
    Io {
        /// The path or operation.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A config file that does not parse: TOML syntax, an unknown or stray key, a value of the
    /// wrong type. Names the key by its dotted path (`selector.params.decay`).
    #[error("config `{key}`: {message}")]
    ConfigParse {
        /// Dotted path of the key (`(top level)` for a syntax error outside any table).
        key: String,
        /// What is wrong, with the line and column where the file has them.
        message: String,
    },
    /// TOML parse error from a reader without key paths.
    #[error("config: {0}")]
    Toml(#[from] toml::de::Error),
    /// JSON (de)serialisation.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Plot rendering.
    #[error("plot: {0}")]
    Plot(String),
    /// A rollout engine ([`rlvr_rollout::RolloutEngine`]) failed: a server down or slow, a
    /// malformed answer, a weight sync whose probe found stale weights.
    #[error(transparent)]
    Rollout(#[from] rlvr_rollout::RolloutError),
}

/// `Result` with [`TrainError`].
pub type Result<T, E = TrainError> = std::result::Result<T, E>;

pub(crate) fn invalid(field: &str, value: impl std::fmt::Display, reason: &str) -> TrainError {
    TrainError::InvalidConfig { field: field.into(), value: value.to_string(), reason: reason.into() }
}

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TrainError {
    let context = context.into();
    move |source| TrainError::Io { context, source }
}
