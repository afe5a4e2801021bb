//! Observation and action spaces.

use ndarray::{Array1, ArrayView1};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use crate::error::{check_finite, Result, RlCoreError};

/// The set of valid observations or actions of an environment.
///
/// Observations and actions are `f32` vectors. A [`Space::Discrete`] value is a one-element
/// vector holding the action index (`0.0, 1.0, ...`), which keeps one array type for every
/// environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Space {
    /// `n` discrete choices `0..n`, encoded as a one-element vector.
    Discrete {
        /// Number of choices (at least 1).
        n: usize,
    },
    /// A box `low <= x <= high`, element-wise. Infinite bounds are allowed for observations.
    Box {
        /// Lower bounds (one per dimension).
        low: Array1<f32>,
        /// Upper bounds (one per dimension).
        high: Array1<f32>,
    },
}

impl Space {
    /// A discrete space of `n` choices.
    ///
    /// # Errors
    /// [`RlCoreError::InvalidParameter`] if `n == 0`.
    pub fn discrete(n: usize) -> Result<Self> {
        if n == 0 {
            return Err(RlCoreError::InvalidParameter {
                name: "n".into(),
                value: "0".into(),
                reason: "a discrete space needs at least one choice".into(),
            });
        }
        Ok(Space::Discrete { n })
    }

    /// A box with the given bounds.
    ///
    /// # Errors
    /// Shape mismatch between `low` and `high`, an empty box, NaN bounds or `low > high`.
    pub fn boxed(low: Array1<f32>, high: Array1<f32>) -> Result<Self> {
        if low.len() != high.len() {
            return Err(RlCoreError::ShapeMismatch {
                what: "box high".into(),
                expected: format!("[{}]", low.len()),
                got: format!("[{}]", high.len()),
            });
        }
        if low.is_empty() {
            return Err(RlCoreError::Empty { what: "box bounds".into() });
        }
        for (i, (l, h)) in low.iter().zip(high.iter()).enumerate() {
            if l.is_nan() || h.is_nan() || l > h {
                return Err(RlCoreError::InvalidParameter {
                    name: format!("bounds[{i}]"),
                    value: format!("[{l}, {h}]"),
                    reason: "need low <= high and no NaN".into(),
                });
            }
        }
        Ok(Space::Box { low, high })
    }

    /// A box `[-bound, bound]^dim`.
    ///
    /// # Errors
    /// As [`Space::boxed`].
    pub fn symmetric(dim: usize, bound: f32) -> Result<Self> {
        Space::boxed(Array1::from_elem(dim, -bound), Array1::from_elem(dim, bound))
    }

    /// Length of the vectors in this space (1 for discrete spaces).
    pub fn dim(&self) -> usize {
        match self {
            Space::Discrete { .. } => 1,
            Space::Box { low, .. } => low.len(),
        }
    }

    /// Whether `x` lies in the space.
    pub fn contains(&self, x: ArrayView1<'_, f32>) -> bool {
        match self {
            Space::Discrete { n } => x.len() == 1 && x[0] >= 0.0 && x[0].fract() == 0.0 && (x[0] as usize) < *n,
            Space::Box { low, high } => {
                x.len() == low.len()
                    && x.iter().zip(low.iter().zip(high.iter())).all(|(v, (l, h))| !v.is_nan() && v >= l && v <= h)
            }
        }
    }

    /// Checks that `x` lies in the space.
    ///
    /// # Errors
    /// [`RlCoreError::ShapeMismatch`], [`RlCoreError::NonFinite`] or [`RlCoreError::OutOfSpace`].
    pub fn check(&self, what: &str, x: ArrayView1<'_, f32>) -> Result<()> {
        if x.len() != self.dim() {
            return Err(RlCoreError::ShapeMismatch {
                what: what.into(),
                expected: format!("[{}]", self.dim()),
                got: format!("[{}]", x.len()),
            });
        }
        if matches!(self, Space::Discrete { .. }) {
            check_finite(what, x.iter())?;
        }
        if !self.contains(x) {
            return Err(RlCoreError::OutOfSpace(format!("{what} = {x} not in {self:?}")));
        }
        Ok(())
    }

    /// Projects `x` into a box space (element-wise clamp); discrete values are rounded and clamped.
    pub fn clip(&self, x: ArrayView1<'_, f32>) -> Array1<f32> {
        match self {
            Space::Discrete { n } => x.mapv(|v| v.round().clamp(0.0, (*n - 1) as f32)),
            Space::Box { low, high } => {
                let mut out = x.to_owned();
                for ((v, l), h) in out.iter_mut().zip(low.iter()).zip(high.iter()) {
                    *v = v.clamp(*l, *h);
                }
                out
            }
        }
    }

    /// Draws a uniform sample. Unbounded box dimensions are sampled from a standard normal-like
    /// range `[-1, 1]` shifted to stay inside the finite bound, if any.
    pub fn sample(&self, rng: &mut dyn RngCore) -> Array1<f32> {
        match self {
            Space::Discrete { n } => Array1::from_elem(1, rng.random_range(0..*n) as f32),
            Space::Box { low, high } => low
                .iter()
                .zip(high.iter())
                .map(|(&l, &h)| match (l.is_finite(), h.is_finite()) {
                    (true, true) => l + (h - l) * rng.random::<f32>(),
                    (true, false) => l + rng.random::<f32>(),
                    (false, true) => h - rng.random::<f32>(),
                    (false, false) => rng.random_range(-1.0..1.0),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use rand::SeedableRng;

    #[test]
    fn discrete_contains_and_samples() {
        let s = Space::discrete(3).unwrap();
        assert!(s.contains(array![2.0].view()));
        assert!(!s.contains(array![3.0].view()));
        assert!(!s.contains(array![0.5].view()));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        for _ in 0..100 {
            assert!(s.contains(s.sample(&mut rng).view()));
        }
        assert!(Space::discrete(0).is_err());
    }

    #[test]
    fn box_bounds_checked() {
        assert!(Space::boxed(array![1.0], array![0.0]).is_err());
        assert!(Space::boxed(array![0.0, 0.0], array![1.0]).is_err());
        let s = Space::symmetric(2, 1.0).unwrap();
        assert_eq!(s.clip(array![2.0, -3.0].view()), array![1.0, -1.0]);
        let err = s.check("action", array![0.0].view()).unwrap_err();
        assert!(matches!(err, RlCoreError::ShapeMismatch { .. }));
        assert!(s.check("action", array![0.5, f32::NAN].view()).is_err());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for _ in 0..100 {
            assert!(s.contains(s.sample(&mut rng).view()));
        }
    }
}
