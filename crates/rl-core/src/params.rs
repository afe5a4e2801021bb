//! One validation shape for every parameter set of frugal-rl.
//!
//! A parameter struct `FooParams` is plain, serialisable input: `#[serde(default,
//! deny_unknown_fields)]`, `Default` = the paper's values, `#[must_use]` setters. It implements
//! [`Params`] by writing one [`Params::validate`] that names the first bad field; the provided
//! [`Params::check`] turns it into a [`Valid<FooParams>`], the only form algorithms accept.
//! `Valid<P>` derefs to `P` for reading, cannot be mutated, and deserialises through `check`,
//! so a config file can never produce an unchecked value.
//!
//! ```
//! use rl_core::params::{Params, Valid};
//! use rl_core::RlCoreError;
//! use serde::{Deserialize, Serialize};
//!
//! /// Parameters of a toy learner.
//! #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
//! #[serde(default, deny_unknown_fields)]
//! pub struct LearnerParams {
//!     /// Step size, > 0.
//!     pub lr: f64,
//! }
//! impl Default for LearnerParams {
//!     fn default() -> Self { Self { lr: 3e-4 } }
//! }
//! impl Params for LearnerParams {
//!     type Error = RlCoreError;
//!     fn validate(&self) -> Result<(), RlCoreError> {
//!         if !(self.lr > 0.0 && self.lr.is_finite()) {
//!             return Err(RlCoreError::invalid("lr", self.lr, "must be finite and > 0"));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let p: Valid<LearnerParams> = LearnerParams::default().check()?;
//! assert_eq!(p.lr, 3e-4);
//! // From a file: unknown fields and invalid values are both errors.
//! assert!(serde_json::from_str::<Valid<LearnerParams>>(r#"{"lr": -1}"#).is_err());
//! assert!(serde_json::from_str::<LearnerParams>(r#"{"lrr": 1}"#).is_err());
//! let q: Valid<LearnerParams> = serde_json::from_str("{}")?;
//! assert_eq!(*q, LearnerParams::default());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A parameter set with one validation point.
pub trait Params: Sized {
    /// The crate's error type (each crate's one error enum).
    type Error;

    /// Checks every field and every cross-field rule, naming the first bad field.
    ///
    /// # Errors
    /// The crate's "invalid parameter" error for the first violated rule.
    fn validate(&self) -> Result<(), Self::Error>;

    /// Validates and wraps the parameters; algorithms take only [`Valid`] parameters.
    ///
    /// # Errors
    /// As [`Params::validate`].
    fn check(self) -> Result<Valid<Self>, Self::Error> {
        self.validate()?;
        Ok(Valid(self))
    }

    /// Validates a copy of the parameters.
    ///
    /// # Errors
    /// As [`Params::validate`].
    fn check_ref(&self) -> Result<Valid<Self>, Self::Error>
    where
        Self: Clone,
    {
        self.clone().check()
    }
}

/// Parameters that passed [`Params::check`]. Read them through `Deref`; change them by
/// [`Valid::into_inner`], the setters, and `check` again.
#[derive(Debug, Clone, PartialEq)]
pub struct Valid<P>(P);

impl<P> Valid<P> {
    /// The unchecked parameters back (to modify and re-check).
    pub fn into_inner(self) -> P {
        self.0
    }

    /// The parameters, by reference.
    pub fn get(&self) -> &P {
        &self.0
    }
}

impl<P> Deref for Valid<P> {
    type Target = P;
    fn deref(&self) -> &P {
        &self.0
    }
}

impl<P> AsRef<P> for Valid<P> {
    fn as_ref(&self) -> &P {
        &self.0
    }
}

impl<P: Serialize> Serialize for Valid<P> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, P> Deserialize<'de> for Valid<P>
where
    P: Params + Deserialize<'de>,
    P::Error: fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        P::deserialize(d)?.check().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RlCoreError;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct P {
        n: usize,
        tau: f64,
    }
    impl Default for P {
        fn default() -> Self {
            Self { n: 2, tau: 0.5 }
        }
    }
    impl Params for P {
        type Error = RlCoreError;
        fn validate(&self) -> Result<(), RlCoreError> {
            if self.n == 0 {
                return Err(RlCoreError::invalid("n", self.n, "must be >= 1"));
            }
            if !(0.0..=1.0).contains(&self.tau) {
                return Err(RlCoreError::invalid("tau", self.tau, "must be in [0, 1]"));
            }
            Ok(())
        }
    }

    #[test]
    fn check_names_the_field_and_serde_goes_through_it() {
        let e = P { n: 0, tau: 0.5 }.check().unwrap_err();
        assert!(e.to_string().contains("`n`"), "{e}");
        let e = P { n: 1, tau: 2.0 }.check_ref().unwrap_err();
        assert!(e.to_string().contains("`tau`"), "{e}");
        let v = P::default().check().unwrap();
        assert_eq!(v.n, 2);
        let json = serde_json::to_string(&v).unwrap();
        let back: Valid<P> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
        let err = serde_json::from_str::<Valid<P>>(r#"{"n": 0}"#).unwrap_err();
        assert!(err.to_string().contains("`n`"), "{err}");
        assert!(serde_json::from_str::<Valid<P>>(r#"{"m": 1}"#).is_err());
        assert_eq!(v.into_inner(), P::default());
    }
}
