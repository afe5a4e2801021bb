//! The error type of `offline-rl`.

/// Errors returned by `offline-rl`. Every variant names what was wrong and, for files, which
/// file; a call that returns an error leaves its receiver as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OfflineError {
    /// A parameter is outside its valid range (dotted name for nested parameters).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Field name, e.g. `nu` or `actor.hidden[0]`.
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An input has the wrong shape.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got}")]
    Shape {
        /// What was checked.
        what: String,
        /// The expected shape, described.
        expected: String,
        /// The shape passed, described.
        got: String,
    },
    /// A value that must be finite is NaN or infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was checked (a dataset key, a loss).
        what: String,
        /// The first offending index (row for a column, flattened otherwise).
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
    /// An unknown name (an environment for D4RL scores, an algorithm, a dataset kind).
    #[error("unknown {what} `{id}`")]
    UnknownId {
        /// What kind of name.
        what: String,
        /// The name given.
        id: String,
    },
    /// A dataset file lacks a key the layout requires.
    #[error("{path}: missing `{key}`")]
    MissingKey {
        /// The file.
        path: String,
        /// The key (HDF5 path) that is missing.
        key: String,
    },
    /// Columns of a dataset file have different numbers of rows.
    #[error("{path}: `{key}` has {got} rows, expected {expected}")]
    Length {
        /// The file.
        path: String,
        /// The column.
        key: String,
        /// Rows of the reference column (`rewards`).
        expected: usize,
        /// Rows of this column.
        got: usize,
    },
    /// A flag column (`terminals`, `timeouts`) holds a value other than 0 or 1.
    #[error("{path}: `{key}`[{index}] = {value} is not a 0/1 flag")]
    InvalidFlag {
        /// The file.
        path: String,
        /// The column.
        key: String,
        /// The first bad row.
        index: usize,
        /// The value found.
        value: f64,
    },
    /// A file is structurally valid but uses something this crate does not read (a string
    /// column, a dictionary observation without a key list, another format version).
    #[error("{path}: unsupported {what}: {reason}")]
    Unsupported {
        /// The file.
        path: String,
        /// What is unsupported.
        what: String,
        /// Details and what to do.
        reason: String,
    },
    /// A file or checkpoint that cannot be parsed.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file or directory.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An operation needs consecutive transitions of an episode to chain (`next_obs[t] ==
    /// obs[t + 1]`), e.g. writing Minari's per-episode observation arrays.
    #[error("transitions are not episodic at row {index}: {reason}")]
    NotEpisodic {
        /// The first row where the chain breaks.
        index: usize,
        /// What was found.
        reason: String,
    },
    /// An error from `rl-core` (transitions, spaces, environment steps).
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
    /// An error from `rl-nn` (tensors, checkpoints, optimiser).
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// An error from `rl-agents` (networks, batches, buffers, the online loop).
    #[error(transparent)]
    Agent(#[from] rl_agents::AgentError),
    /// An error from `rl-envs`.
    #[error(transparent)]
    Env(#[from] rl_envs::EnvError),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON (de)serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl OfflineError {
    /// [`OfflineError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        OfflineError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }

    /// [`OfflineError::Shape`].
    pub fn shape(what: impl Into<String>, expected: impl Into<String>, got: impl Into<String>) -> Self {
        OfflineError::Shape { what: what.into(), expected: expected.into(), got: got.into() }
    }

    /// [`OfflineError::Corrupt`] for `path`.
    pub fn corrupt(path: impl AsRef<std::path::Path>, reason: impl std::fmt::Display) -> Self {
        OfflineError::Corrupt { path: path.as_ref().display().to_string(), reason: reason.to_string() }
    }

    /// Prefixes the parameter name of an [`OfflineError::InvalidParameter`] (nested params).
    pub(crate) fn prefixed(self, prefix: &str) -> Self {
        match self {
            OfflineError::InvalidParameter { name, value, reason } => {
                OfflineError::InvalidParameter { name: format!("{prefix}.{name}"), value, reason }
            }
            OfflineError::Nn(rl_nn::RlNnError::InvalidParameter { name, value, reason }) => {
                OfflineError::InvalidParameter { name: format!("{prefix}.{name}"), value, reason }
            }
            other => other,
        }
    }
}

/// `Result` with [`OfflineError`].
pub type Result<T, E = OfflineError> = std::result::Result<T, E>;

/// Parameter checks shared by every params struct: [`rl_core::check`], converted by `From`.
pub(crate) use rl_core::check;

impl From<rl_core::check::InvalidParam> for OfflineError {
    fn from(e: rl_core::check::InvalidParam) -> Self {
        OfflineError::InvalidParameter { name: e.name, value: e.value, reason: e.reason }
    }
}
