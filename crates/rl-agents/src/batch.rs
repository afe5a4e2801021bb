//! Checked tensor batches of transitions, the input of [`BatchLearner::update`](crate::BatchLearner::update).

use rl_core::Transitions;
use tch::{Device, Kind, Tensor};

use crate::error::{AgentError, Result};

/// A batch of `B` transitions as tensors on one device, checked once at construction.
///
/// | field | shape | meaning |
/// |---|---|---|
/// | `obs` | `[B, obs_dim]` | observations |
/// | `action` | `[B, act_dim]` | actions taken |
/// | `reward` | `[B]` | rewards (an `n`-step batch: the discounted sum of `n` rewards) |
/// | `next_obs` | `[B, obs_dim]` | the observation to bootstrap from |
/// | `terminal` | `[B]` | `1` where the episode reached a terminal state: no bootstrap |
/// | `discount` | `[B]` or none | the bootstrap factor per row (`γ^k` of an `n`-step batch); none: the agent's `γ` |
///
/// Time-limit truncations are *not* terminal: their `next_obs` is the last observation of the
/// episode and the target bootstraps from it (the D4RL / gymnasium convention).
///
/// Every tensor is `f32` on the same device. Constructors check shapes, kinds, devices and
/// finiteness, so agents can use a `Batch` without checking it again.
#[derive(Debug)]
pub struct Batch {
    obs: Tensor,
    action: Tensor,
    reward: Tensor,
    next_obs: Tensor,
    terminal: Tensor,
    discount: Option<Tensor>,
}

fn dims(t: &Tensor) -> String {
    format!("{:?}", t.size())
}

fn check_rank(what: &str, t: &Tensor, rank: usize, rows: Option<i64>, cols: Option<i64>) -> Result<()> {
    if !t.defined() {
        return Err(AgentError::Empty { what: what.into() });
    }
    let s = t.size();
    let ok = s.len() == rank
        && rows.is_none_or(|r| s.first() == Some(&r))
        && (rank < 2 || cols.is_none_or(|c| s.get(1) == Some(&c)));
    if !ok {
        let want = match rank {
            1 => format!("[{}]", rows.map_or("B".into(), |r| r.to_string())),
            _ => format!(
                "[{}, {}]",
                rows.map_or("B".into(), |r| r.to_string()),
                cols.map_or("D".into(), |c| c.to_string())
            ),
        };
        return Err(AgentError::shape(what, want, dims(t)));
    }
    Ok(())
}

fn check_finite(what: &str, t: &Tensor) -> Result<()> {
    rl_nn::check::finite(what, t).map_err(AgentError::from)
}

impl Batch {
    /// A batch from tensors (see the type docs for shapes); `discount`, if given, overrides the
    /// agent's `γ` row by row.
    ///
    /// # Errors
    /// [`AgentError::Shape`] naming the first column of the wrong shape,
    /// [`AgentError::Nn`] with a kind/device error (every column must be `f32` on the device of
    /// `obs`) or a non-finite value, [`AgentError::Empty`] for an undefined tensor or `B = 0`.
    pub fn from_tensors(
        obs: Tensor,
        action: Tensor,
        reward: Tensor,
        next_obs: Tensor,
        terminal: Tensor,
        discount: Option<Tensor>,
    ) -> Result<Self> {
        check_rank("obs", &obs, 2, None, None)?;
        let s = obs.size();
        let (b, o) = (s[0], s[1]);
        if b == 0 {
            return Err(AgentError::Empty { what: "batch".into() });
        }
        check_rank("action", &action, 2, Some(b), None)?;
        check_rank("reward", &reward, 1, Some(b), None)?;
        check_rank("next_obs", &next_obs, 2, Some(b), Some(o))?;
        check_rank("terminal", &terminal, 1, Some(b), None)?;
        if let Some(d) = &discount {
            check_rank("discount", d, 1, Some(b), None)?;
        }
        let device = obs.device();
        let mut cols: Vec<(&str, &Tensor)> = vec![
            ("obs", &obs),
            ("action", &action),
            ("reward", &reward),
            ("next_obs", &next_obs),
            ("terminal", &terminal),
        ];
        if let Some(d) = &discount {
            cols.push(("discount", d));
        }
        for (what, t) in &cols {
            rl_nn::check::kind(what, t, Kind::Float)?;
            rl_nn::check::device(what, t, device)?;
            check_finite(what, t)?;
        }
        let flags = terminal.f_ne(0.0)?.f_logical_and(&terminal.f_ne(1.0)?)?;
        if bool::try_from(&flags.f_any()?)? {
            let v = Vec::<f32>::try_from(&terminal.f_to_device(Device::Cpu)?)?;
            let index = v.iter().position(|x| *x != 0.0 && *x != 1.0).unwrap_or(0);
            return Err(AgentError::invalid(
                format!("terminal[{index}]"),
                v.get(index).copied().unwrap_or(f32::NAN),
                "flags must be 0 or 1",
            ));
        }
        Ok(Self { obs, action, reward, next_obs, terminal, discount })
    }

    /// A batch from host transitions (valid by construction: lengths, finite values, 0/1
    /// flags), copied to `device`. The `timeout` column is dropped (truncation is not
    /// terminal).
    ///
    /// # Errors
    /// [`AgentError::Empty`] for no transition; device errors.
    pub fn from_transitions(t: &Transitions, device: Device) -> Result<Self> {
        if t.is_empty() {
            return Err(AgentError::Empty { what: "transitions".into() });
        }
        rl_nn::check::available(device)?;
        use rl_nn::convert::array_to_tensor_on as to;
        Ok(Self {
            obs: to(t.obs(), device)?,
            action: to(t.action(), device)?,
            reward: to(t.reward(), device)?,
            next_obs: to(t.next_obs(), device)?,
            terminal: to(t.terminal(), device)?,
            discount: None,
        })
    }

    /// A batch from row-major host columns already checked by the caller (the replay buffer
    /// checks at insertion).
    pub(crate) fn from_host(
        b: usize,
        obs_dim: usize,
        act_dim: usize,
        cols: HostColumns,
        device: Device,
    ) -> Result<Self> {
        let (b, o, a) = (b as i64, obs_dim as i64, act_dim as i64);
        let t = |v: &[f32], shape: &[i64]| -> Result<Tensor> {
            let x = Tensor::f_from_slice(v)?.f_reshape(shape)?;
            Ok(if device == Device::Cpu { x } else { x.f_to_device(device)? })
        };
        Ok(Self {
            obs: t(&cols.obs, &[b, o])?,
            action: t(&cols.action, &[b, a])?,
            reward: t(&cols.reward, &[b])?,
            next_obs: t(&cols.next_obs, &[b, o])?,
            terminal: t(&cols.terminal, &[b])?,
            discount: match &cols.discount {
                Some(d) => Some(t(d, &[b])?),
                None => None,
            },
        })
    }

    /// Replaces the rewards (e.g. by a learned reward model's predictions, LaRe), keeping the
    /// other columns (shared, not copied).
    ///
    /// # Errors
    /// As [`Batch::from_tensors`] for the new `reward`.
    pub fn with_reward(&self, reward: Tensor) -> Result<Self> {
        check_rank("reward", &reward, 1, Some(self.len() as i64), None)?;
        rl_nn::check::kind("reward", &reward, Kind::Float)?;
        rl_nn::check::device("reward", &reward, self.device())?;
        check_finite("reward", &reward)?;
        Ok(Self {
            obs: self.obs.shallow_clone(),
            action: self.action.shallow_clone(),
            reward,
            next_obs: self.next_obs.shallow_clone(),
            terminal: self.terminal.shallow_clone(),
            discount: self.discount.as_ref().map(Tensor::shallow_clone),
        })
    }

    /// Number of transitions `B`.
    pub fn len(&self) -> usize {
        self.obs.size()[0] as usize
    }

    /// Always false (a batch holds at least one transition).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Observation width.
    pub fn obs_dim(&self) -> usize {
        self.obs.size()[1] as usize
    }

    /// Action width.
    pub fn act_dim(&self) -> usize {
        self.action.size()[1] as usize
    }

    /// The device of every column.
    pub fn device(&self) -> Device {
        self.obs.device()
    }

    /// Observations `[B, obs_dim]`.
    pub fn obs(&self) -> &Tensor {
        &self.obs
    }

    /// Actions `[B, act_dim]`.
    pub fn action(&self) -> &Tensor {
        &self.action
    }

    /// Rewards `[B]`.
    pub fn reward(&self) -> &Tensor {
        &self.reward
    }

    /// Next observations `[B, obs_dim]`.
    pub fn next_obs(&self) -> &Tensor {
        &self.next_obs
    }

    /// Terminal flags `[B]`.
    pub fn terminal(&self) -> &Tensor {
        &self.terminal
    }

    /// Per-row bootstrap factors `[B]`, if the batch carries them.
    pub fn discount(&self) -> Option<&Tensor> {
        self.discount.as_ref()
    }

    /// The bootstrap factor `discount · (1 − terminal)` per row, with `gamma` where the batch
    /// carries no discount column.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn bootstrap(&self, gamma: f64) -> Result<Tensor> {
        let live = self.terminal.f_neg()?.f_add_scalar(1.0)?;
        Ok(match &self.discount {
            Some(d) => live.f_mul(d)?,
            None => live.f_mul_scalar(gamma)?,
        })
    }

    /// Checks that the batch has the widths an agent was built for.
    ///
    /// # Errors
    /// [`AgentError::Shape`] naming `batch.obs` or `batch.action`.
    pub fn check_dims(&self, obs_dim: usize, act_dim: usize, device: Device) -> Result<()> {
        if self.obs_dim() != obs_dim {
            return Err(AgentError::shape("batch.obs", format!("[B, {obs_dim}]"), dims(&self.obs)));
        }
        if self.act_dim() != act_dim {
            return Err(AgentError::shape("batch.action", format!("[B, {act_dim}]"), dims(&self.action)));
        }
        rl_nn::check::device("batch", &self.obs, device)?;
        Ok(())
    }
}

/// Row-major host columns of a sampled batch (internal: the replay buffer's gather target).
#[derive(Debug, Default)]
pub(crate) struct HostColumns {
    pub(crate) obs: Vec<f32>,
    pub(crate) action: Vec<f32>,
    pub(crate) reward: Vec<f32>,
    pub(crate) next_obs: Vec<f32>,
    pub(crate) terminal: Vec<f32>,
    pub(crate) discount: Option<Vec<f32>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array1, Array2};

    fn opts() -> (Kind, Device) {
        (Kind::Float, Device::Cpu)
    }

    #[test]
    fn checked_construction() {
        let b = Batch::from_tensors(
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4, 1], opts()),
            Tensor::ones([4], opts()),
            Tensor::zeros([4, 3], opts()),
            Tensor::from_slice(&[0.0f32, 1.0, 0.0, 0.0]),
            None,
        )
        .unwrap();
        assert_eq!((b.len(), b.obs_dim(), b.act_dim()), (4, 3, 1));
        let boot = Vec::<f32>::try_from(&b.bootstrap(0.5).unwrap()).unwrap();
        assert_eq!(boot, vec![0.5, 0.0, 0.5, 0.5]);
        assert!(b.check_dims(3, 1, Device::Cpu).is_ok());
        assert!(matches!(b.check_dims(2, 1, Device::Cpu), Err(AgentError::Shape { .. })));
        let e = Batch::from_tensors(
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4, 1], opts()),
            Tensor::ones([5], opts()),
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4], opts()),
            None,
        )
        .unwrap_err();
        assert!(matches!(e, AgentError::Shape { ref what, .. } if what == "reward"), "{e}");
        let e = Batch::from_tensors(
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4, 1], opts()),
            Tensor::from_slice(&[0.0f32, f32::NAN, 0.0, 0.0]),
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4], opts()),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("reward"), "{e}");
        let e = Batch::from_tensors(
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4, 1], opts()),
            Tensor::zeros([4], opts()),
            Tensor::zeros([4, 3], opts()),
            Tensor::from_slice(&[0.0f32, 0.5, 0.0, 0.0]),
            None,
        )
        .unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "terminal[1]"), "{e}");
        let e = Batch::from_tensors(
            Tensor::zeros([4, 3], (Kind::Double, Device::Cpu)),
            Tensor::zeros([4, 1], opts()),
            Tensor::zeros([4], opts()),
            Tensor::zeros([4, 3], opts()),
            Tensor::zeros([4], opts()),
            None,
        );
        assert!(e.is_err());
        let r = b.with_reward(Tensor::full([4], 2.0, opts())).unwrap();
        assert_eq!(Vec::<f32>::try_from(r.reward()).unwrap(), vec![2.0; 4]);
        assert!(b.with_reward(Tensor::zeros([3], opts())).is_err());
    }

    #[test]
    fn from_host_transitions() {
        let t = Transitions::from_columns(
            array![[1.0f32, 2.0], [3.0, 4.0]],
            Array2::zeros((2, 1)),
            array![1.0f32, -1.0],
            array![[0.0f32, 0.0], [1.0, 1.0]],
            array![0.0f32, 1.0],
            Array1::zeros(2),
        )
        .unwrap();
        let b = Batch::from_transitions(&t, Device::Cpu).unwrap();
        assert_eq!(b.obs().size(), [2, 2]);
        assert_eq!(Vec::<f32>::try_from(b.terminal()).unwrap(), vec![0.0, 1.0]);
        assert!(Batch::from_transitions(&Transitions::empty(2, 1), Device::Cpu).is_err());
    }
}
