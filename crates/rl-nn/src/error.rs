//! The error type of `rl-nn`.

/// Errors returned by `rl-nn`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RlNnError {
    /// A checkpoint lacks a tensor the model needs.
    #[error("checkpoint {path}: missing tensor `{name}`")]
    MissingTensor {
        /// Checkpoint file.
        path: String,
        /// Name of the missing tensor.
        name: String,
    },
    /// A checkpoint tensor has another shape than the model's variable.
    #[error("checkpoint {path}: tensor `{name}` has shape {got:?}, the model expects {expected:?}")]
    TensorShape {
        /// Checkpoint file (or `"<source>"` for in-memory copies).
        path: String,
        /// Tensor name.
        name: String,
        /// The model's shape.
        expected: Vec<i64>,
        /// The checkpoint's shape.
        got: Vec<i64>,
    },
    /// A checkpoint holds tensors the model does not have (strict loading only).
    #[error("checkpoint {path}: unexpected tensors {names:?}")]
    UnexpectedTensors {
        /// Checkpoint file.
        path: String,
        /// The unexpected names (sorted).
        names: Vec<String>,
    },
    /// A checkpoint file could not be read or parsed (missing, truncated, not safetensors).
    #[error("checkpoint {path}: cannot read: {reason}")]
    CorruptCheckpoint {
        /// Checkpoint file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Two variable stores that must match (target networks) do not.
    #[error("variable stores differ: {0}")]
    StoreMismatch(String),
    /// A configuration value is invalid.
    #[error("invalid config `{name}` = {value}: {reason}")]
    InvalidConfig {
        /// Field name.
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A tensor passed in has the wrong shape.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got:?}")]
    Shape {
        /// What was checked.
        what: String,
        /// Expected shape, described.
        expected: String,
        /// The shape passed.
        got: Vec<i64>,
    },
    /// A requested device is not available.
    #[error("device `{0}` is not available on this machine")]
    DeviceUnavailable(String),
    /// A device name could not be parsed.
    #[error("cannot parse device `{0}` (expected `auto`, `cpu`, `cuda` or `cuda:N`)")]
    BadDeviceName(String),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// An error from `rl-core`.
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
    /// I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `Result` with [`RlNnError`].
pub type Result<T, E = RlNnError> = std::result::Result<T, E>;
