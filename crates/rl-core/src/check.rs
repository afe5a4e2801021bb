//! Range checks for parameter fields, shared by every crate's `FooParams::check()`.
//!
//! Each returns [`InvalidParam`] naming the field, its value and the rule; every crate's
//! error type converts it into its own `InvalidParameter` variant (`From`), so a check reads
//! `check::positive("tau", self.tau)?` whatever the crate.
//!
//! ```
//! use rl_core::check;
//! assert!(check::positive("lr", 3e-4).is_ok());
//! let e = check::unit_closed("tau", 1.5).unwrap_err();
//! assert_eq!(e.to_string(), "invalid parameter `tau` = 1.5: must lie in [0, 1]");
//! ```

/// A parameter field outside its range: the field, its value and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid parameter `{name}` = {value}: {reason}")]
pub struct InvalidParam {
    /// The field (dotted for nested params).
    pub name: String,
    /// Its value, as written by `Display`.
    pub value: String,
    /// The rule (e.g. `must be finite and > 0`).
    pub reason: String,
}

impl InvalidParam {
    fn new(name: &str, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        Self { name: name.to_owned(), value: value.to_string(), reason: reason.into() }
    }
}

impl From<InvalidParam> for crate::RlCoreError {
    fn from(e: InvalidParam) -> Self {
        crate::RlCoreError::InvalidParameter { name: e.name, value: e.value, reason: e.reason }
    }
}

/// `Ok` when `v` is finite and `> 0`.
///
/// # Errors
/// [`InvalidParam`] otherwise (`must be finite and > 0`).
pub fn positive(name: &str, v: f64) -> Result<(), InvalidParam> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(InvalidParam::new(name, v, "must be finite and > 0"))
    }
}

/// `Ok` when `v` is finite and `>= 0`.
///
/// # Errors
/// [`InvalidParam`] otherwise (`must be finite and >= 0`).
pub fn non_negative(name: &str, v: f64) -> Result<(), InvalidParam> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(InvalidParam::new(name, v, "must be finite and >= 0"))
    }
}

/// `Ok` when `0 <= v <= 1`.
///
/// # Errors
/// [`InvalidParam`] otherwise (`must lie in [0, 1]`; NaN included).
pub fn unit_closed(name: &str, v: f64) -> Result<(), InvalidParam> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(InvalidParam::new(name, v, "must lie in [0, 1]"))
    }
}

/// `Ok` when `0 < v < 1`.
///
/// # Errors
/// [`InvalidParam`] otherwise (`must lie in (0, 1)`; NaN included).
pub fn unit_open(name: &str, v: f64) -> Result<(), InvalidParam> {
    if v > 0.0 && v < 1.0 {
        Ok(())
    } else {
        Err(InvalidParam::new(name, v, "must lie in (0, 1)"))
    }
}

/// `Ok` when `v >= min`.
///
/// # Errors
/// [`InvalidParam`] otherwise (`must be >= {min}`).
pub fn at_least(name: &str, v: usize, min: usize) -> Result<(), InvalidParam> {
    if v >= min {
        Ok(())
    } else {
        Err(InvalidParam::new(name, v, format!("must be >= {min}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_messages() {
        assert!(positive("x", 0.0).is_err() && positive("x", f64::INFINITY).is_err() && positive("x", 1e-9).is_ok());
        assert!(
            non_negative("x", 0.0).is_ok() && non_negative("x", -1e-9).is_err() && non_negative("x", f64::NAN).is_err()
        );
        assert!(unit_closed("x", 0.0).is_ok() && unit_closed("x", 1.0).is_ok() && unit_closed("x", f64::NAN).is_err());
        assert!(unit_open("x", 0.0).is_err() && unit_open("x", 0.5).is_ok() && unit_open("x", 1.0).is_err());
        assert!(at_least("n", 2, 2).is_ok() && at_least("n", 1, 2).is_err());
        let e = at_least("n", 1, 2).unwrap_err();
        assert_eq!((e.name.as_str(), e.value.as_str(), e.reason.as_str()), ("n", "1", "must be >= 2"));
        let core: crate::RlCoreError = e.into();
        assert!(matches!(core, crate::RlCoreError::InvalidParameter { ref name, .. } if name == "n"));
    }
}
