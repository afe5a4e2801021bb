//! The error type of `rl-agents`.

/// Errors returned by `rl-agents`. Every variant names what was wrong; a call that returns an
/// error leaves the agent, buffer or trainer as it was (except where documented: a libtorch
/// failure in the middle of an update).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A parameter is outside its valid range (dotted name for nested parameters).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Field name, e.g. `tau` or `actor.hidden[0]`.
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An input has the wrong shape or length.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got}")]
    Shape {
        /// What was checked.
        what: String,
        /// The expected shape, described.
        expected: String,
        /// The shape passed, described.
        got: String,
    },
    /// A value that must be finite is NaN or infinite (an input, or a loss read back from an
    /// update).
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was checked.
        what: String,
        /// The first offending index (flattened).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// An input that must be non-empty is empty (e.g. sampling from an empty buffer).
    #[error("`{what}` is empty")]
    Empty {
        /// What was empty.
        what: String,
    },
    /// The environment's action or observation space does not suit the agent (e.g. SAC on a
    /// discrete space, an unbounded action box).
    #[error("unsupported space for `{what}`: {reason}")]
    UnsupportedSpace {
        /// Which space.
        what: String,
        /// Why it does not fit.
        reason: String,
    },
    /// A call out of protocol (e.g. `observe` without a preceding `explore`).
    #[error("out of protocol: {0}")]
    Protocol(String),
    /// A checkpoint does not fit this object (other dimensions, other algorithm, corrupt state).
    #[error("checkpoint {path}: {reason}")]
    Corrupt {
        /// The checkpoint directory or file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An error from `rl-nn` (tensors, checkpoints, optimiser).
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// An error from `rl-core` (spaces, transitions, environments' steps).
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
    /// An error from `rl-envs` (batches of environments, snapshots).
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

impl AgentError {
    /// [`AgentError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        AgentError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }

    /// [`AgentError::Shape`].
    pub fn shape(what: impl Into<String>, expected: impl Into<String>, got: impl Into<String>) -> Self {
        AgentError::Shape { what: what.into(), expected: expected.into(), got: got.into() }
    }

    /// `Ok` when a field read from the checkpoint at `path` equals this object's, else
    /// [`AgentError::Corrupt`] naming the field and both values (a checkpoint of another
    /// configuration is refused before anything is copied).
    ///
    /// # Errors
    /// [`AgentError::Corrupt`] when `saved != ours`.
    pub fn ensure_same<T: PartialEq + std::fmt::Debug + ?Sized>(
        path: &str,
        what: &str,
        saved: &T,
        ours: &T,
    ) -> Result<()> {
        if saved != ours {
            return Err(AgentError::Corrupt {
                path: path.into(),
                reason: format!("{what} differs: checkpoint {saved:?}, this object {ours:?}"),
            });
        }
        Ok(())
    }

    /// Prefixes the parameter name of an [`AgentError::InvalidParameter`] (nested params).
    pub(crate) fn prefixed(self, prefix: &str) -> Self {
        match self {
            AgentError::InvalidParameter { name, value, reason } => {
                AgentError::InvalidParameter { name: format!("{prefix}.{name}"), value, reason }
            }
            AgentError::Nn(rl_nn::RlNnError::InvalidParameter { name, value, reason }) => {
                AgentError::InvalidParameter { name: format!("{prefix}.{name}"), value, reason }
            }
            other => other,
        }
    }
}

/// `Result` with [`AgentError`].
pub type Result<T, E = AgentError> = std::result::Result<T, E>;

/// Parameter checks shared by every params struct: [`rl_core::check`], converted by `From`.
pub(crate) use rl_core::check;

impl From<rl_core::check::InvalidParam> for AgentError {
    fn from(e: rl_core::check::InvalidParam) -> Self {
        AgentError::InvalidParameter { name: e.name, value: e.value, reason: e.reason }
    }
}
