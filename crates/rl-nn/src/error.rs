//! The error type of `rl-nn`.

/// Errors returned by `rl-nn`. Every variant names what was wrong, so a user can fix the input.
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
    /// A checkpoint file could not be read or parsed (truncated, not safetensors, bad JSON,
    /// a value that fails its checks).
    #[error("checkpoint {path}: cannot read: {reason}")]
    CorruptCheckpoint {
        /// Checkpoint file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A checkpoint file or directory does not exist.
    #[error("checkpoint {path}: no such file or directory")]
    MissingFile {
        /// The missing path.
        path: String,
    },
    /// A checkpoint was written by another component or another format version.
    #[error("checkpoint {path}: {what} is `{got}`, expected `{expected}`")]
    FormatMismatch {
        /// The `state.json` file.
        path: String,
        /// `kind` or `format_version`.
        what: String,
        /// What this code reads.
        expected: String,
        /// What the file holds.
        got: String,
    },
    /// A checkpoint tensor holds a NaN or an infinite value (refused on every load: a
    /// diverged or corrupted weight would otherwise load silently and poison every output).
    #[error("checkpoint {path}: tensor `{name}` holds the non-finite value {value} at flat index {index}")]
    NonFiniteTensor {
        /// Checkpoint file.
        path: String,
        /// Tensor name.
        name: String,
        /// The first offending flat index.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// One part of a checkpoint unit disagrees with the unit's manifest (a file whose content
    /// hash or size differs, a missing or unexpected file, a step count that differs), so the
    /// parts were not written together.
    #[error("checkpoint {path}: part `{part}` does not match the manifest: {reason}")]
    CheckpointPart {
        /// The unit's directory.
        path: String,
        /// The part that disagrees.
        part: String,
        /// What disagrees.
        reason: String,
    },
    /// Two variable stores that must match (target networks) do not.
    #[error("variable stores differ: {0}")]
    StoreMismatch(String),
    /// A parameter value is invalid.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Field name.
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A variable or tensor name cannot be used (empty, duplicated, or holding a `.` where the
    /// variable store forbids it).
    #[error("invalid name `{name}`: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why it cannot be used.
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
    /// A tensor passed in has the wrong element kind (dtype).
    #[error("kind mismatch for `{what}`: expected {expected}, got {got}")]
    Kind {
        /// What was checked.
        what: String,
        /// Expected kind(s), described.
        expected: String,
        /// The kind passed.
        got: String,
    },
    /// A tensor passed in lives on another device than the model.
    #[error("device mismatch for `{what}`: expected {expected}, got {got}")]
    Device {
        /// What was checked.
        what: String,
        /// The model's device.
        expected: String,
        /// The tensor's device.
        got: String,
    },
    /// A value that must be finite is NaN or infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was checked.
        what: String,
        /// The first offending index (flattened).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// An input that must be non-empty is empty.
    #[error("`{what}` is empty")]
    Empty {
        /// What was empty.
        what: String,
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
    /// JSON (de)serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl RlNnError {
    /// [`RlNnError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        RlNnError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }
}

/// `Result` with [`RlNnError`].
pub type Result<T, E = RlNnError> = std::result::Result<T, E>;
