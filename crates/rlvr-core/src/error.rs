//! The error type of `rlvr-core`.

/// Errors returned by `rlvr-core`. Every variant names the offending input or parameter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RlvrCoreError {
    /// A tensor or slice had another shape than required.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got:?}")]
    Shape {
        /// The argument that was checked (`"logp"`, `"mask"`, `"rewards"`, ...).
        what: String,
        /// The expected shape, described.
        expected: String,
        /// The shape that was passed.
        got: Vec<i64>,
    },
    /// A tensor had an unsupported element type.
    #[error("`{what}` has element type {got}, expected {expected}")]
    Kind {
        /// The argument that was checked.
        what: String,
        /// The expected element types, described.
        expected: String,
        /// The element type that was passed.
        got: String,
    },
    /// A value that must be finite was NaN or infinite.
    #[error("non-finite value {value} in `{what}` at flat index {index}")]
    NonFinite {
        /// The argument that held the value.
        what: String,
        /// The first offending index (row-major, flattened).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// An input that must be non-empty was empty.
    #[error("`{what}` is empty")]
    Empty {
        /// What was empty.
        what: String,
    },
    /// A group had fewer members than the method needs.
    #[error("group {group} has {size} member(s); `{method}` needs at least {min}")]
    GroupTooSmall {
        /// Dense index of the group (order of first appearance).
        group: usize,
        /// Its number of members.
        size: usize,
        /// The method that needs the larger group.
        method: String,
        /// The minimum group size of that method.
        min: usize,
    },
    /// Group ids or a group layout that does not fit the batch.
    #[error("bad group layout: {0}")]
    Groups(String),
    /// An input the chosen loss needs was not given.
    #[error("`{loss}` needs `{input}`, which was not given")]
    MissingInput {
        /// The loss or feature that needs the input.
        loss: String,
        /// The missing input.
        input: String,
    },
    /// A configuration value is outside its valid range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name (dotted path inside the config).
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Global normalisation counts that cannot normalise this micro-batch.
    #[error("invalid global counts: {0}")]
    Counts(String),
    /// An error from libtorch (feature `tch`).
    #[cfg(feature = "tch")]
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// An error from `rl-core`.
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
}

/// `Result` with [`RlvrCoreError`].
pub type Result<T, E = RlvrCoreError> = std::result::Result<T, E>;

pub(crate) fn invalid(name: &str, value: impl std::fmt::Display, reason: &str) -> RlvrCoreError {
    RlvrCoreError::InvalidParameter { name: name.to_owned(), value: value.to_string(), reason: reason.to_owned() }
}
