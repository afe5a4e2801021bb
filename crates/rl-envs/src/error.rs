//! The error type of `rl-envs`.
//!
//! [`rl_core::Env::step`] and [`rl_core::Env::reset`] return [`RlCoreError`] (the trait is
//! shared with every crate): a wrong action length is [`RlCoreError::ShapeMismatch`], a NaN or
//! infinite action [`RlCoreError::NonFinite`], a discrete action outside its range
//! [`RlCoreError::OutOfSpace`] and a step after the end of an episode
//! [`RlCoreError::NeedsReset`]. Everything else in this crate (constructors, snapshots, task
//! parameters, multi-agent environments, MuJoCo assets) returns [`EnvError`], which wraps
//! [`RlCoreError`].

use rl_core::RlCoreError;

/// Errors returned by `rl-envs`. Every variant names the offending value; a call that returns
/// an error leaves the environment as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A parameter (or task-parameter value) was outside its valid range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name (dotted for nested parameters).
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An input had the wrong length or shape.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got}")]
    Shape {
        /// What was checked.
        what: String,
        /// The expected shape, formatted.
        expected: String,
        /// The shape that was passed, formatted.
        got: String,
    },
    /// A value that must be finite was NaN or infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was checked.
        what: String,
        /// The first offending index (flattened).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A snapshot that does not fit this environment (other layout, other number of agents,
    /// a state outside the environment's domain).
    #[error("snapshot does not fit: {reason}")]
    BadSnapshot {
        /// What does not fit.
        reason: String,
    },
    /// A file or resource this environment needs is missing (a MuJoCo model XML, the MuJoCo
    /// library). `hint` says how to provide it.
    #[error("missing {what} (looked in {looked_in}); {hint}")]
    Missing {
        /// What is missing (e.g. "MuJoCo model `hopper.xml`").
        what: String,
        /// Where it was looked for.
        looked_in: String,
        /// How to fix it.
        hint: String,
    },
    /// MuJoCo rejected a model or failed during simulation.
    #[error("MuJoCo: {0}")]
    Mujoco(String),
    /// An environment of a [`VecEnv`](crate::wrappers::VecEnv) failed.
    #[error("environment {index} of the batch: {source}")]
    InBatch {
        /// Index of the environment in the batch.
        index: usize,
        /// What it returned.
        #[source]
        source: RlCoreError,
    },
    /// An error from `rl-core` (spaces, actions, stepping after the end of an episode).
    #[error(transparent)]
    Core(#[from] RlCoreError),
    /// JSON (de)serialisation of a snapshot failed.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// I/O failure (reading a model file).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<rl_core::check::InvalidParam> for EnvError {
    fn from(e: rl_core::check::InvalidParam) -> Self {
        EnvError::InvalidParameter { name: e.name, value: e.value, reason: e.reason }
    }
}

impl EnvError {
    /// [`EnvError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        EnvError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }

    /// [`EnvError::BadSnapshot`] with `reason`.
    pub fn snapshot(reason: impl Into<String>) -> Self {
        EnvError::BadSnapshot { reason: reason.into() }
    }
}

/// `Result` with [`EnvError`].
pub type Result<T, E = EnvError> = std::result::Result<T, E>;

/// Checks that every value of `values` is finite, naming the first one that is not.
pub(crate) fn check_finite_f64(what: &str, values: &[f64]) -> Result<()> {
    for (index, v) in values.iter().enumerate() {
        if !v.is_finite() {
            return Err(EnvError::NonFinite { what: what.to_owned(), index, value: *v });
        }
    }
    Ok(())
}

/// Checks that `got == expected` for the length of `what`.
pub(crate) fn check_len(what: &str, expected: usize, got: usize) -> Result<()> {
    if expected != got {
        return Err(EnvError::Shape {
            what: what.to_owned(),
            expected: format!("[{expected}]"),
            got: format!("[{got}]"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let e = EnvError::invalid("g", -1.0, "must be > 0");
        assert_eq!(e.to_string(), "invalid parameter `g` = -1: must be > 0");
        let e = check_finite_f64("task", &[1.0, f64::NAN]).unwrap_err();
        assert!(matches!(e, EnvError::NonFinite { index: 1, .. }), "{e}");
        assert!(check_len("task", 3, 2).unwrap_err().to_string().contains("expected [3], got [2]"));
        let e: EnvError = RlCoreError::NeedsReset.into();
        assert!(e.to_string().contains("reset"));
    }
}
