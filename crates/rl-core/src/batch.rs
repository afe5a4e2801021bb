//! Column batches of transitions.

use ndarray::{Array1, Array2, ArrayView1, Axis};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use crate::error::{check_finite, Result, RlCoreError};

/// Transitions stored column-wise: row `i` of every column is transition `i`.
///
/// `terminal` marks true terminal states (no bootstrap); `timeout` marks time-limit cuts
/// (bootstrapping is still correct there). Both are `f32` in `{0, 1}` so they can go straight
/// into tensors.
///
/// A `Transitions` is always consistent: every column has `len()` rows, `next_obs` has `obs`'s
/// width, every value is finite and every flag is 0 or 1. It is built by [`Transitions::empty`]
/// and [`Transitions::push`], or by [`Transitions::from_columns`], and deserialising runs the
/// same checks; the columns are read through accessors and taken back by
/// [`Transitions::into_columns`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TransitionColumns", into = "TransitionColumns")]
pub struct Transitions {
    obs: Array2<f32>,
    action: Array2<f32>,
    reward: Array1<f32>,
    next_obs: Array2<f32>,
    terminal: Array1<f32>,
    timeout: Array1<f32>,
}

/// The columns of a [`Transitions`] as plain, unchecked data: what
/// [`Transitions::into_columns`] gives back, and the serialised form (turned back into a
/// `Transitions` only through [`Transitions::from_columns`]'s checks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransitionColumns {
    /// Observations `[N, obs_dim]`.
    pub obs: Array2<f32>,
    /// Actions `[N, act_dim]`.
    pub action: Array2<f32>,
    /// Rewards `[N]`.
    pub reward: Array1<f32>,
    /// Next observations `[N, obs_dim]`.
    pub next_obs: Array2<f32>,
    /// Terminal flags `[N]`.
    pub terminal: Array1<f32>,
    /// Time-limit flags `[N]`.
    pub timeout: Array1<f32>,
}

impl TryFrom<TransitionColumns> for Transitions {
    type Error = RlCoreError;
    fn try_from(c: TransitionColumns) -> Result<Self> {
        Transitions::from_columns(c.obs, c.action, c.reward, c.next_obs, c.terminal, c.timeout)
    }
}

impl From<Transitions> for TransitionColumns {
    fn from(t: Transitions) -> Self {
        TransitionColumns {
            obs: t.obs,
            action: t.action,
            reward: t.reward,
            next_obs: t.next_obs,
            terminal: t.terminal,
            timeout: t.timeout,
        }
    }
}

fn mismatch(what: &str, expected: String, got: String) -> RlCoreError {
    RlCoreError::ShapeMismatch { what: what.into(), expected, got }
}

impl Transitions {
    /// An empty batch for the given dimensions.
    pub fn empty(obs_dim: usize, act_dim: usize) -> Self {
        Self {
            obs: Array2::zeros((0, obs_dim)),
            action: Array2::zeros((0, act_dim)),
            reward: Array1::zeros(0),
            next_obs: Array2::zeros((0, obs_dim)),
            terminal: Array1::zeros(0),
            timeout: Array1::zeros(0),
        }
    }

    /// Builds a batch from columns after checking that all columns have `reward.len()` rows,
    /// `next_obs` matches `obs`, every value is finite and flags are 0 or 1.
    ///
    /// # Errors
    /// [`RlCoreError::ShapeMismatch`] naming the column, [`RlCoreError::NonFinite`], or
    /// [`RlCoreError::InvalidParameter`] for a flag that is not 0/1.
    pub fn from_columns(
        obs: Array2<f32>,
        action: Array2<f32>,
        reward: Array1<f32>,
        next_obs: Array2<f32>,
        terminal: Array1<f32>,
        timeout: Array1<f32>,
    ) -> Result<Self> {
        let t = Self { obs, action, reward, next_obs, terminal, timeout };
        t.validate()?;
        Ok(t)
    }

    /// Observations `[N, obs_dim]`.
    pub fn obs(&self) -> &Array2<f32> {
        &self.obs
    }

    /// Actions `[N, act_dim]`.
    pub fn action(&self) -> &Array2<f32> {
        &self.action
    }

    /// Rewards `[N]`.
    pub fn reward(&self) -> &Array1<f32> {
        &self.reward
    }

    /// Next observations `[N, obs_dim]`.
    pub fn next_obs(&self) -> &Array2<f32> {
        &self.next_obs
    }

    /// Terminal flags `[N]` (1.0 = terminal).
    pub fn terminal(&self) -> &Array1<f32> {
        &self.terminal
    }

    /// Time-limit flags `[N]` (1.0 = episode cut by a time limit after this transition).
    pub fn timeout(&self) -> &Array1<f32> {
        &self.timeout
    }

    /// The columns, by value.
    pub fn into_columns(self) -> TransitionColumns {
        self.into()
    }

    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.reward.len()
    }

    /// Whether the batch holds no transition.
    pub fn is_empty(&self) -> bool {
        self.reward.is_empty()
    }

    /// Observation dimension.
    pub fn obs_dim(&self) -> usize {
        self.obs.ncols()
    }

    /// Action dimension.
    pub fn act_dim(&self) -> usize {
        self.action.ncols()
    }

    fn validate(&self) -> Result<()> {
        let n = self.len();
        let rows = [
            ("obs", self.obs.nrows()),
            ("action", self.action.nrows()),
            ("next_obs", self.next_obs.nrows()),
            ("terminal", self.terminal.len()),
            ("timeout", self.timeout.len()),
        ];
        for (what, r) in rows {
            if r != n {
                return Err(mismatch(what, format!("{n} rows (= reward length)"), format!("{r} rows")));
            }
        }
        if self.next_obs.ncols() != self.obs.ncols() {
            return Err(mismatch(
                "next_obs",
                format!("{} columns (= obs)", self.obs.ncols()),
                format!("{} columns", self.next_obs.ncols()),
            ));
        }
        check_finite("obs", self.obs.iter())?;
        check_finite("action", self.action.iter())?;
        check_finite("reward", self.reward.iter())?;
        check_finite("next_obs", self.next_obs.iter())?;
        for (what, col) in [("terminal", &self.terminal), ("timeout", &self.timeout)] {
            if let Some((i, v)) = col.iter().enumerate().find(|(_, v)| **v != 0.0 && **v != 1.0) {
                return Err(RlCoreError::InvalidParameter {
                    name: format!("{what}[{i}]"),
                    value: v.to_string(),
                    reason: "flags must be 0 or 1".into(),
                });
            }
        }
        Ok(())
    }

    /// Appends one transition.
    ///
    /// # Errors
    /// Wrong lengths or non-finite values; the batch is unchanged on error.
    pub fn push(
        &mut self,
        obs: ArrayView1<'_, f32>,
        action: ArrayView1<'_, f32>,
        reward: f32,
        next_obs: ArrayView1<'_, f32>,
        terminal: bool,
        timeout: bool,
    ) -> Result<()> {
        for (what, got, want) in [
            ("obs", obs.len(), self.obs_dim()),
            ("action", action.len(), self.act_dim()),
            ("next_obs", next_obs.len(), self.obs_dim()),
        ] {
            if got != want {
                return Err(mismatch(what, format!("[{want}]"), format!("[{got}]")));
            }
        }
        check_finite("obs", obs.iter())?;
        check_finite("action", action.iter())?;
        check_finite("reward", std::iter::once(&reward))?;
        check_finite("next_obs", next_obs.iter())?;
        // Shapes were checked above, so these appends cannot fail; map defensively anyway.
        let shape_err = |e: ndarray::ShapeError| mismatch("push", "row".into(), e.to_string());
        self.obs.push_row(obs).map_err(shape_err)?;
        self.action.push_row(action).map_err(shape_err)?;
        self.next_obs.push_row(next_obs).map_err(shape_err)?;
        self.reward.append(Axis(0), ArrayView1::from(&[reward])).map_err(shape_err)?;
        self.terminal.append(Axis(0), ArrayView1::from(&[f32::from(u8::from(terminal))])).map_err(shape_err)?;
        self.timeout.append(Axis(0), ArrayView1::from(&[f32::from(u8::from(timeout))])).map_err(shape_err)?;
        Ok(())
    }

    /// The transitions at `indices`, in that order.
    ///
    /// # Errors
    /// [`RlCoreError::IndexOutOfRange`] for an index `>= len()`.
    pub fn gather(&self, indices: &[usize]) -> Result<Self> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.len()) {
            return Err(RlCoreError::IndexOutOfRange { what: "transitions".into(), index: bad, len: self.len() });
        }
        Ok(Self {
            obs: self.obs.select(Axis(0), indices),
            action: self.action.select(Axis(0), indices),
            reward: self.reward.select(Axis(0), indices),
            next_obs: self.next_obs.select(Axis(0), indices),
            terminal: self.terminal.select(Axis(0), indices),
            timeout: self.timeout.select(Axis(0), indices),
        })
    }

    /// A batch of `batch_size` transitions drawn uniformly with replacement.
    ///
    /// # Errors
    /// [`RlCoreError::Empty`] when the batch holds no transition.
    pub fn sample(&self, batch_size: usize, rng: &mut dyn RngCore) -> Result<Self> {
        if self.is_empty() {
            return Err(RlCoreError::Empty { what: "transitions".into() });
        }
        let idx: Vec<usize> = (0..batch_size).map(|_| rng.random_range(0..self.len())).collect();
        self.gather(&idx)
    }

    /// Discounted returns-to-go, restarting at every terminal or timeout flag.
    pub fn returns_to_go(&self, gamma: f32) -> Array1<f32> {
        let mut out = Array1::zeros(self.len());
        let mut acc = 0.0f32;
        for i in (0..self.len()).rev() {
            if self.terminal[i] == 1.0 || self.timeout[i] == 1.0 {
                acc = 0.0;
            }
            acc = self.reward[i] + gamma * acc;
            out[i] = acc;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use rand::SeedableRng;

    fn small() -> Transitions {
        let mut t = Transitions::empty(2, 1);
        for i in 0..4 {
            let x = i as f32;
            t.push(array![x, x].view(), array![0.5].view(), 1.0, array![x + 1.0, x].view(), i == 1, i == 3).unwrap();
        }
        t
    }

    #[test]
    fn push_gather_sample() {
        let t = small();
        assert_eq!(t.len(), 4);
        let g = t.gather(&[3, 0]).unwrap();
        assert_eq!(g.obs().row(0), array![3.0, 3.0]);
        assert_eq!(g.terminal(), &array![0.0, 0.0]);
        assert_eq!(g.timeout(), &array![1.0, 0.0]);
        assert_eq!(g.next_obs().row(0), array![4.0, 3.0]);
        assert_eq!((g.action()[[0, 0]], g.reward()[0]), (0.5, 1.0));
        assert_eq!((t.obs_dim(), t.act_dim(), t.is_empty()), (2, 1, false));
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<Transitions>(&json).unwrap(), t);
        // a deserialised batch is checked like a built one
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["terminal"]["data"][0] = serde_json::json!(0.5);
        assert!(serde_json::from_value::<Transitions>(v).is_err());
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["reward"] = serde_json::json!({"v": 1, "dim": [3], "data": [1.0, 1.0, 1.0]});
        assert!(serde_json::from_value::<Transitions>(v).is_err());
        let c = t.clone().into_columns();
        assert_eq!(c.reward, array![1.0, 1.0, 1.0, 1.0]);
        assert_eq!(Transitions::try_from(c).unwrap(), t);
        assert!(t.gather(&[4]).is_err());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        assert_eq!(t.sample(16, &mut rng).unwrap().len(), 16);
        assert!(Transitions::empty(2, 1).sample(1, &mut rng).is_err());
    }

    #[test]
    fn bad_input_is_rejected_and_batch_unchanged() {
        let mut t = small();
        let before = t.clone();
        assert!(t.push(array![1.0].view(), array![0.5].view(), 0.0, array![1.0, 1.0].view(), false, false).is_err());
        assert!(t
            .push(array![1.0, 1.0].view(), array![0.5].view(), f32::NAN, array![1.0, 1.0].view(), false, false)
            .is_err());
        assert_eq!(t, before);
        let bad = Transitions::from_columns(
            Array2::zeros((2, 1)),
            Array2::zeros((3, 1)),
            Array1::zeros(2),
            Array2::zeros((2, 1)),
            Array1::zeros(2),
            Array1::zeros(2),
        );
        assert!(matches!(bad, Err(RlCoreError::ShapeMismatch { ref what, .. }) if what == "action"));
        let flags = Transitions::from_columns(
            Array2::zeros((1, 1)),
            Array2::zeros((1, 1)),
            Array1::zeros(1),
            Array2::zeros((1, 1)),
            array![0.5],
            Array1::zeros(1),
        );
        assert!(flags.is_err());
    }

    #[test]
    fn returns_to_go_restart_at_episode_ends() {
        let t = small();
        // rewards all 1; terminal after index 1, timeout after index 3
        let r = t.returns_to_go(0.5);
        assert_eq!(r, array![1.5, 1.0, 1.5, 1.0]);
    }
}
