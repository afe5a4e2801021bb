//! Observation and action spaces.

use ndarray::{Array1, ArrayView1};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use crate::error::{check_finite, Result, RlCoreError};

/// The set of valid observations or actions of an environment.
///
/// Observations and actions are `f32` vectors. A discrete value is a one-element vector holding
/// the action index (`0.0, 1.0, ...`), which keeps one array type for every environment.
///
/// A `Space` is always valid: it is built by [`Space::discrete`] (`n >= 1`), [`Space::boxed`] or
/// [`Space::symmetric`] (matching non-empty bounds, no NaN, `low <= high`), and deserialising
/// runs the same checks. Read it through [`Space::kind`]:
///
/// ```
/// use rl_core::space::{Space, SpaceKind};
/// let s = Space::discrete(3)?;
/// match s.kind() {
///     SpaceKind::Discrete { n } => assert_eq!(n, 3),
///     SpaceKind::Box { .. } => unreachable!(),
/// }
/// // deserialising checks the invariants too
/// assert!(serde_json::from_str::<Space>(r#"{"Discrete": {"n": 0}}"#).is_err());
/// # Ok::<(), rl_core::RlCoreError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SpaceRepr", into = "SpaceRepr")]
pub struct Space(SpaceRepr);

/// The serialised form (the enum the space used to be): checked by `TryFrom`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum SpaceRepr {
    Discrete { n: usize },
    Box { low: Array1<f32>, high: Array1<f32> },
}

impl TryFrom<SpaceRepr> for Space {
    type Error = RlCoreError;
    fn try_from(r: SpaceRepr) -> Result<Self> {
        match r {
            SpaceRepr::Discrete { n } => Space::discrete(n),
            SpaceRepr::Box { low, high } => Space::boxed(low, high),
        }
    }
}

impl From<Space> for SpaceRepr {
    fn from(s: Space) -> Self {
        s.0
    }
}

/// A view of a [`Space`] for matching on its kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SpaceKind<'a> {
    /// `n` discrete choices `0..n` (`n >= 1`), encoded as a one-element vector.
    Discrete {
        /// Number of choices.
        n: usize,
    },
    /// A box `low <= x <= high`, element-wise (infinite bounds are allowed for observations).
    Box {
        /// Lower bounds (one per dimension).
        low: &'a Array1<f32>,
        /// Upper bounds (one per dimension).
        high: &'a Array1<f32>,
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
        Ok(Space(SpaceRepr::Discrete { n }))
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
        Ok(Space(SpaceRepr::Box { low, high }))
    }

    /// A box `[-bound, bound]^dim`.
    ///
    /// # Errors
    /// As [`Space::boxed`].
    pub fn symmetric(dim: usize, bound: f32) -> Result<Self> {
        Space::boxed(Array1::from_elem(dim, -bound), Array1::from_elem(dim, bound))
    }

    /// The kind of space, for matching.
    pub fn kind(&self) -> SpaceKind<'_> {
        match &self.0 {
            SpaceRepr::Discrete { n } => SpaceKind::Discrete { n: *n },
            SpaceRepr::Box { low, high } => SpaceKind::Box { low, high },
        }
    }

    /// Whether this is a discrete space.
    pub fn is_discrete(&self) -> bool {
        matches!(self.0, SpaceRepr::Discrete { .. })
    }

    /// The number of choices of a discrete space (`None` for a box).
    pub fn n(&self) -> Option<usize> {
        match self.0 {
            SpaceRepr::Discrete { n } => Some(n),
            SpaceRepr::Box { .. } => None,
        }
    }

    /// The bounds `(low, high)` of a box (`None` for a discrete space).
    pub fn bounds(&self) -> Option<(&Array1<f32>, &Array1<f32>)> {
        match &self.0 {
            SpaceRepr::Box { low, high } => Some((low, high)),
            SpaceRepr::Discrete { .. } => None,
        }
    }

    /// Length of the vectors in this space (1 for discrete spaces).
    pub fn dim(&self) -> usize {
        match &self.0 {
            SpaceRepr::Discrete { .. } => 1,
            SpaceRepr::Box { low, .. } => low.len(),
        }
    }

    /// Whether `x` lies in the space.
    pub fn contains(&self, x: ArrayView1<'_, f32>) -> bool {
        match &self.0 {
            SpaceRepr::Discrete { n } => x.len() == 1 && x[0] >= 0.0 && x[0].fract() == 0.0 && (x[0] as usize) < *n,
            SpaceRepr::Box { low, high } => {
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
        if self.is_discrete() {
            check_finite(what, x.iter())?;
        }
        if !self.contains(x) {
            return Err(RlCoreError::OutOfSpace(format!("{what} = {x} not in {self:?}")));
        }
        Ok(())
    }

    /// Projects `x` into a box space (element-wise clamp); discrete values are rounded and clamped.
    pub fn clip(&self, x: ArrayView1<'_, f32>) -> Array1<f32> {
        match &self.0 {
            SpaceRepr::Discrete { n } => x.mapv(|v| v.round().clamp(0.0, n.saturating_sub(1) as f32)),
            SpaceRepr::Box { low, high } => {
                let mut out = x.to_owned();
                for ((v, l), h) in out.iter_mut().zip(low.iter()).zip(high.iter()) {
                    *v = v.clamp(*l, *h);
                }
                out
            }
        }
    }

    /// Draws a sample: uniform over the choices of a discrete space and over each finite box
    /// interval (computed in `f64`, so even `[-f32::MAX, f32::MAX]` gives finite values inside
    /// the bounds). A dimension with one infinite bound draws from the unit interval next to the
    /// finite bound; a dimension with none from `[-1, 1)`.
    pub fn sample(&self, rng: &mut dyn RngCore) -> Array1<f32> {
        match &self.0 {
            SpaceRepr::Discrete { n } => Array1::from_elem(1, rng.random_range(0..(*n).max(1)) as f32),
            SpaceRepr::Box { low, high } => low
                .iter()
                .zip(high.iter())
                .map(|(&l, &h)| match (l.is_finite(), h.is_finite()) {
                    (true, true) => {
                        let (l64, h64) = (f64::from(l), f64::from(h));
                        ((l64 + (h64 - l64) * rng.random::<f64>()) as f32).clamp(l, h)
                    }
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
        // the widest finite box samples finite values inside it
        let wide = Space::symmetric(3, f32::MAX).unwrap();
        for _ in 0..100 {
            let x = wide.sample(&mut rng);
            assert!(x.iter().all(|v| v.is_finite()) && wide.contains(x.view()), "{x}");
        }
        let half =
            Space::boxed(array![0.0, f32::NEG_INFINITY, f32::NEG_INFINITY], array![f32::INFINITY, 2.0, f32::INFINITY])
                .unwrap();
        for _ in 0..100 {
            let x = half.sample(&mut rng);
            assert!((0.0..1.0).contains(&x[0]) && (1.0..=2.0).contains(&x[1]) && (-1.0..1.0).contains(&x[2]), "{x}");
        }
        assert!(Space::boxed(array![f32::NAN], array![1.0]).is_err());
        assert!(Space::boxed(array![], array![]).is_err());
    }

    #[test]
    fn kind_accessors_and_checked_serde() {
        let d = Space::discrete(4).unwrap();
        assert_eq!(d.kind(), SpaceKind::Discrete { n: 4 });
        assert_eq!((d.n(), d.bounds(), d.is_discrete(), d.dim()), (Some(4), None, true, 1));
        let b = Space::boxed(array![-1.0, 0.0], array![1.0, 2.0]).unwrap();
        assert_eq!(b.kind(), SpaceKind::Box { low: &array![-1.0, 0.0], high: &array![1.0, 2.0] });
        assert_eq!((b.n(), b.is_discrete(), b.dim()), (None, false, 2));
        assert_eq!(b.bounds().unwrap().1, &array![1.0, 2.0]);
        for s in [&d, &b] {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(&serde_json::from_str::<Space>(&json).unwrap(), s);
        }
        assert_eq!(serde_json::to_string(&d).unwrap(), r#"{"Discrete":{"n":4}}"#);
        for bad in [
            r#"{"Discrete":{"n":0}}"#,
            r#"{"Box":{"low":{"v":1,"dim":[1],"data":[1.0]},"high":{"v":1,"dim":[1],"data":[0.0]}}}"#,
            r#"{"Box":{"low":{"v":1,"dim":[2],"data":[0.0,0.0]},"high":{"v":1,"dim":[1],"data":[1.0]}}}"#,
        ] {
            assert!(serde_json::from_str::<Space>(bad).is_err(), "{bad}");
        }
        // discrete clipping rounds into 0..n
        assert_eq!(d.clip(array![7.6].view()), array![3.0]);
        assert_eq!(d.clip(array![-2.0].view()), array![0.0]);
        let err = d.check("a", array![4.0].view()).unwrap_err();
        assert!(matches!(err, RlCoreError::OutOfSpace(_)));
        assert!(matches!(d.check("a", array![f32::NAN].view()), Err(RlCoreError::NonFinite { .. })));
        assert!(d.check("a", array![3.0].view()).is_ok());
        assert!(!d.contains(array![1.0, 1.0].view()) && !d.contains(array![-1.0].view()));
    }
}
