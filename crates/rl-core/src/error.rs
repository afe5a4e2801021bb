//! The error type of `rl-core`.

/// Errors returned by `rl-core`. Every variant names the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RlCoreError {
    /// An array had a different shape or length than required.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got}")]
    ShapeMismatch {
        /// What was being checked (a column name, a function argument).
        what: String,
        /// The expected shape, formatted.
        expected: String,
        /// The shape that was passed, formatted.
        got: String,
    },
    /// A value that must be finite was NaN or infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was being checked.
        what: String,
        /// The first offending index (flattened).
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
    /// A parameter was outside its valid range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An action or observation was outside its space.
    #[error("value outside space: {0}")]
    OutOfSpace(String),
    /// An environment was stepped after its episode ended, before `reset`.
    #[error("environment stepped after the episode ended; call reset first")]
    NeedsReset,
    /// An index was out of range.
    #[error("index {index} out of range for `{what}` of length {len}")]
    IndexOutOfRange {
        /// What was indexed.
        what: String,
        /// The index.
        index: usize,
        /// The length of the indexed collection.
        len: usize,
    },
    /// An input declared a size beyond the caller's memory budget ([`crate::MemoryBudget`]); nothing
    /// was allocated.
    #[error("`{what}` would need {bytes} bytes, above the memory budget of {limit} bytes")]
    TooLarge {
        /// What would have been allocated (a dataset column, a parameter).
        what: String,
        /// The bytes the declared size needs (saturated at `u64::MAX` on overflow).
        bytes: u64,
        /// The budget in force.
        limit: u64,
    },
    /// I/O failure (metrics sink, files).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON (de)serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl RlCoreError {
    /// [`RlCoreError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        RlCoreError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }
}

/// `Result` with [`RlCoreError`].
pub type Result<T, E = RlCoreError> = std::result::Result<T, E>;

/// Returns an error naming the first non-finite entry of `values`, if any.
///
/// # Errors
/// [`RlCoreError::NonFinite`] with the index and the value of the first NaN or infinity.
pub fn check_finite<'a, I>(what: &str, values: I) -> Result<()>
where
    I: IntoIterator<Item = &'a f32>,
{
    for (index, v) in values.into_iter().enumerate() {
        if !v.is_finite() {
            return Err(RlCoreError::NonFinite { what: what.to_owned(), index, value: f64::from(*v) });
        }
    }
    Ok(())
}

/// Like [`check_finite`] for `f64` values.
///
/// # Errors
/// [`RlCoreError::NonFinite`] with the index and the value of the first NaN or infinity.
pub fn check_finite_f64<'a, I>(what: &str, values: I) -> Result<()>
where
    I: IntoIterator<Item = &'a f64>,
{
    for (index, v) in values.into_iter().enumerate() {
        if !v.is_finite() {
            return Err(RlCoreError::NonFinite { what: what.to_owned(), index, value: *v });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_finite_names_first_bad_index() {
        let err = check_finite("reward", &[1.0, f32::NAN, f32::INFINITY]).unwrap_err();
        match err {
            RlCoreError::NonFinite { what, index, .. } => {
                assert_eq!(what, "reward");
                assert_eq!(index, 1);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(check_finite_f64("x", &[0.0, -1.0]).is_ok());
        assert!(check_finite_f64("x", &[f64::NEG_INFINITY]).is_err());
    }
}
