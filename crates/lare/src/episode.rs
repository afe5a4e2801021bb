//! Episodes with an episodic reward, and the buffer that keeps them whole.
//!
//! Return-decomposition methods learn from whole trajectories (`R_ep` belongs to the episode,
//! not to a step), so the buffer stores episodes, evicts whole episodes, and samples both
//! transitions (for the agent) and episodes (for the reward decoder). Per-step latent factors
//! `φ(s, a)` are computed once when an episode is stored ([`EpisodeBuffer::push`]), not on
//! every batch as LaRe's reference code re-executes its Python encoder: the encoder is a pure
//! function, so the factors are the same and relabelling costs one decoder forward.

use std::collections::VecDeque;
use std::path::Path;

use ndarray::{Array1, Array2, ArrayView1, Axis};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use crate::error::{check_finite, check_len, LareError, Result};

/// One finished episode of an episodic-reward task.
///
/// `dense_rewards` are the hidden per-step rewards of the underlying task. Learners never read
/// them (they see only `episodic_return`); they are kept for diagnostics (LaRe's
/// `reward_pred_err`) and for the dense-reward oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// Observations `s_t`, `[T, obs_dim]`.
    pub obs: Array2<f32>,
    /// Actions `a_t`, `[T, act_dim]`.
    pub actions: Array2<f32>,
    /// Next observations `s_{t+1}`, `[T, obs_dim]`.
    pub next_obs: Array2<f32>,
    /// The hidden dense rewards `r_t`, `[T]` (diagnostics only).
    pub dense_rewards: Array1<f32>,
    /// The episode ended in a terminal state (rather than a time limit).
    pub terminated: bool,
    /// The episodic return `R_ep` given at the last step.
    pub episodic_return: f32,
}

impl Episode {
    /// Number of steps `T`.
    pub fn len(&self) -> usize {
        self.dense_rewards.len()
    }

    /// Whether the episode has no step (never true for a validated episode).
    pub fn is_empty(&self) -> bool {
        self.dense_rewards.is_empty()
    }

    /// Checks lengths (all columns `T >= 1` rows, `next_obs` as wide as `obs`) and finiteness.
    ///
    /// # Errors
    /// [`LareError::Empty`], [`LareError::Shape`] naming the column, [`LareError::NonFinite`].
    pub fn validate(&self) -> Result<()> {
        let t = self.len();
        if t == 0 {
            return Err(LareError::Empty { what: "episode".into() });
        }
        check_len("episode obs rows", t, self.obs.nrows())?;
        check_len("episode actions rows", t, self.actions.nrows())?;
        check_len("episode next_obs rows", t, self.next_obs.nrows())?;
        check_len("episode next_obs columns", self.obs.ncols(), self.next_obs.ncols())?;
        check_finite("episode obs", self.obs.iter().copied())?;
        check_finite("episode actions", self.actions.iter().copied())?;
        check_finite("episode next_obs", self.next_obs.iter().copied())?;
        check_finite("episode dense_rewards", self.dense_rewards.iter().copied())?;
        check_finite("episodic_return", [self.episodic_return])?;
        Ok(())
    }
}

/// Collects one episode step by step.
#[derive(Debug, Clone)]
pub struct EpisodeBuilder {
    obs_dim: usize,
    act_dim: usize,
    obs: Vec<f32>,
    actions: Vec<f32>,
    next_obs: Vec<f32>,
    dense: Vec<f32>,
}

impl EpisodeBuilder {
    /// An empty builder for the given dimensions.
    pub fn new(obs_dim: usize, act_dim: usize) -> Self {
        Self { obs_dim, act_dim, obs: vec![], actions: vec![], next_obs: vec![], dense: vec![] }
    }

    /// Steps so far.
    pub fn len(&self) -> usize {
        self.dense.len()
    }

    /// Whether no step was pushed.
    pub fn is_empty(&self) -> bool {
        self.dense.is_empty()
    }

    /// Appends one step (`dense_reward` is the hidden per-step reward, for diagnostics).
    ///
    /// # Errors
    /// Wrong lengths or non-finite values; the builder is unchanged on error.
    pub fn push(
        &mut self,
        obs: ArrayView1<'_, f32>,
        action: ArrayView1<'_, f32>,
        next_obs: ArrayView1<'_, f32>,
        dense_reward: f32,
    ) -> Result<()> {
        check_len("obs", self.obs_dim, obs.len())?;
        check_len("action", self.act_dim, action.len())?;
        check_len("next_obs", self.obs_dim, next_obs.len())?;
        check_finite("obs", obs.iter().copied())?;
        check_finite("action", action.iter().copied())?;
        check_finite("next_obs", next_obs.iter().copied())?;
        check_finite("dense_reward", [dense_reward])?;
        self.obs.extend(obs.iter());
        self.actions.extend(action.iter());
        self.next_obs.extend(next_obs.iter());
        self.dense.push(dense_reward);
        Ok(())
    }

    /// Finishes the episode with its episodic return and resets the builder.
    ///
    /// # Errors
    /// [`LareError::Empty`] for an episode without steps; a non-finite return.
    pub fn finish(&mut self, episodic_return: f32, terminated: bool) -> Result<Episode> {
        let t = self.dense.len();
        if t == 0 {
            return Err(LareError::Empty { what: "episode".into() });
        }
        check_finite("episodic_return", [episodic_return])?;
        let shape = |e: ndarray::ShapeError| LareError::shape("episode", "consistent rows", e);
        let ep = Episode {
            obs: Array2::from_shape_vec((t, self.obs_dim), std::mem::take(&mut self.obs)).map_err(shape)?,
            actions: Array2::from_shape_vec((t, self.act_dim), std::mem::take(&mut self.actions)).map_err(shape)?,
            next_obs: Array2::from_shape_vec((t, self.obs_dim), std::mem::take(&mut self.next_obs)).map_err(shape)?,
            dense_rewards: Array1::from(std::mem::take(&mut self.dense)),
            terminated,
            episodic_return,
        };
        Ok(ep)
    }
}

/// An episode in the buffer, with its latent factors `[T, feature_dim]`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEpisode {
    /// The episode.
    pub episode: Episode,
    /// Per-step features (latent factors or raw features of the redistributor).
    pub features: Array2<f32>,
    /// The episode's serial number (0 for the first episode ever pushed).
    pub serial: u64,
}

impl StoredEpisode {
    /// Number of steps.
    pub fn len(&self) -> usize {
        self.episode.len()
    }

    /// Whether the episode is empty (never, once stored).
    pub fn is_empty(&self) -> bool {
        self.episode.is_empty()
    }

    /// The episode's episodic return.
    pub fn episodic_return(&self) -> f32 {
        self.episode.episodic_return
    }
}

/// A batch of transitions sampled from an [`EpisodeBuffer`], with what redistributors need to
/// relabel them.
#[derive(Debug, Clone, PartialEq)]
pub struct StepBatch {
    /// `s_t`, `[B, obs_dim]`.
    pub obs: Array2<f32>,
    /// `a_t`, `[B, act_dim]`.
    pub actions: Array2<f32>,
    /// `s_{t+1}`, `[B, obs_dim]`.
    pub next_obs: Array2<f32>,
    /// Stored features of each step, `[B, feature_dim]`.
    pub features: Array2<f32>,
    /// 1 where `s_{t+1}` is terminal (no bootstrap), `[B]`.
    pub terminal: Array1<f32>,
    /// 1 where the step is the last of its episode, `[B]`.
    pub last: Array1<f32>,
    /// The hidden dense rewards (diagnostics only), `[B]`.
    pub dense_rewards: Array1<f32>,
    /// The episodic return of each step's episode, `[B]`.
    pub episode_return: Array1<f32>,
    /// The length of each step's episode, `[B]`.
    pub episode_length: Array1<f32>,
}

impl StepBatch {
    /// Number of transitions.
    pub fn len(&self) -> usize {
        self.terminal.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.terminal.is_empty()
    }

    /// The raw episodic reward of each step: `R_ep` at the last step of an episode, 0 elsewhere.
    pub fn episodic_rewards(&self) -> Array1<f32> {
        &self.last * &self.episode_return
    }

    /// The batch as [`rl_core::Transitions`] with `rewards` (e.g. relabelled by a redistributor).
    /// Time-limit ends are marked as timeouts (bootstrapping past them is correct).
    ///
    /// # Errors
    /// [`LareError::Shape`] when `rewards` has another length; non-finite rewards.
    pub fn to_transitions(&self, rewards: &Array1<f32>) -> Result<rl_core::Transitions> {
        check_len("rewards", self.len(), rewards.len())?;
        let timeout = Array1::from_iter(self.last.iter().zip(&self.terminal).map(|(l, t)| l * (1.0 - t)));
        Ok(rl_core::Transitions::from_columns(
            self.obs.clone(),
            self.actions.clone(),
            rewards.clone(),
            self.next_obs.clone(),
            self.terminal.clone(),
            timeout,
        )?)
    }

    pub(crate) fn with_capacity(n: usize, obs_dim: usize, act_dim: usize, feat_dim: usize) -> Self {
        Self {
            obs: Array2::zeros((n, obs_dim)),
            actions: Array2::zeros((n, act_dim)),
            next_obs: Array2::zeros((n, obs_dim)),
            features: Array2::zeros((n, feat_dim)),
            terminal: Array1::zeros(n),
            last: Array1::zeros(n),
            dense_rewards: Array1::zeros(n),
            episode_return: Array1::zeros(n),
            episode_length: Array1::zeros(n),
        }
    }

    pub(crate) fn set_row(&mut self, row: usize, ep: &StoredEpisode, t: usize) {
        let e = &ep.episode;
        let len = e.len();
        self.obs.row_mut(row).assign(&e.obs.row(t));
        self.actions.row_mut(row).assign(&e.actions.row(t));
        self.next_obs.row_mut(row).assign(&e.next_obs.row(t));
        self.features.row_mut(row).assign(&ep.features.row(t));
        let is_last = t + 1 == len;
        self.terminal[row] = if is_last && e.terminated { 1.0 } else { 0.0 };
        self.last[row] = if is_last { 1.0 } else { 0.0 };
        self.dense_rewards[row] = e.dense_rewards[t];
        self.episode_return[row] = e.episodic_return;
        self.episode_length[row] = len as f32;
    }

    /// Concatenates two batches (IRCR's half-and-half sampling).
    ///
    /// # Errors
    /// [`LareError::Shape`] when the widths differ.
    pub fn concat(&self, other: &StepBatch) -> Result<StepBatch> {
        let cat2 = |a: &Array2<f32>, b: &Array2<f32>, what: &str| {
            ndarray::concatenate(Axis(0), &[a.view(), b.view()]).map_err(|e| LareError::shape(what, "equal widths", e))
        };
        let cat1 = |a: &Array1<f32>, b: &Array1<f32>| ndarray::concatenate(Axis(0), &[a.view(), b.view()]);
        let err = |e: ndarray::ShapeError| LareError::shape("batch", "equal lengths", e);
        Ok(StepBatch {
            obs: cat2(&self.obs, &other.obs, "obs")?,
            actions: cat2(&self.actions, &other.actions, "actions")?,
            next_obs: cat2(&self.next_obs, &other.next_obs, "next_obs")?,
            features: cat2(&self.features, &other.features, "features")?,
            terminal: cat1(&self.terminal, &other.terminal).map_err(err)?,
            last: cat1(&self.last, &other.last).map_err(err)?,
            dense_rewards: cat1(&self.dense_rewards, &other.dense_rewards).map_err(err)?,
            episode_return: cat1(&self.episode_return, &other.episode_return).map_err(err)?,
            episode_length: cat1(&self.episode_length, &other.episode_length).map_err(err)?,
        })
    }
}

/// A buffer of whole episodes, holding at most `capacity` steps (the oldest whole episodes are
/// evicted first; an episode longer than the capacity is kept alone).
#[derive(Debug, Clone)]
pub struct EpisodeBuffer {
    obs_dim: usize,
    act_dim: usize,
    feature_dim: usize,
    capacity: usize,
    episodes: VecDeque<StoredEpisode>,
    /// Global step offset of each episode's first step (parallel to `episodes`).
    starts: VecDeque<u64>,
    /// Steps held.
    steps: usize,
    /// Global offset of the next step pushed.
    next_start: u64,
    next_serial: u64,
}

/// The serialisable part of an [`EpisodeBuffer`] checkpoint (tensors hold the arrays).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeBufferState {
    /// Observation width.
    pub obs_dim: usize,
    /// Action width.
    pub act_dim: usize,
    /// Feature width.
    pub feature_dim: usize,
    /// Capacity in steps.
    pub capacity: usize,
    /// Per episode: length, terminated, episodic return, serial, global start offset.
    pub episodes: Vec<(usize, bool, f32, u64, u64)>,
    /// Global offset of the next step.
    pub next_start: u64,
    /// Serial of the next episode.
    pub next_serial: u64,
}

impl EpisodeBuffer {
    /// An empty buffer holding at most `capacity` steps of episodes with the given widths.
    ///
    /// # Errors
    /// [`LareError::InvalidParameter`] for `capacity == 0` or `obs_dim == 0`.
    pub fn new(obs_dim: usize, act_dim: usize, feature_dim: usize, capacity: usize) -> Result<Self> {
        if capacity == 0 {
            return Err(LareError::invalid("capacity", 0, "must be >= 1"));
        }
        if obs_dim == 0 {
            return Err(LareError::invalid("obs_dim", 0, "must be >= 1"));
        }
        Ok(Self {
            obs_dim,
            act_dim,
            feature_dim,
            capacity,
            episodes: VecDeque::new(),
            starts: VecDeque::new(),
            steps: 0,
            next_start: 0,
            next_serial: 0,
        })
    }

    /// Observation width.
    pub fn obs_dim(&self) -> usize {
        self.obs_dim
    }
    /// Action width.
    pub fn act_dim(&self) -> usize {
        self.act_dim
    }
    /// Feature width.
    pub fn feature_dim(&self) -> usize {
        self.feature_dim
    }
    /// Capacity in steps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Steps held.
    pub fn steps(&self) -> usize {
        self.steps
    }
    /// Episodes held.
    pub fn n_episodes(&self) -> usize {
        self.episodes.len()
    }
    /// Whether the buffer holds nothing.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }
    /// The episodes, oldest first.
    pub fn episodes(&self) -> impl Iterator<Item = &StoredEpisode> {
        self.episodes.iter()
    }
    /// Episode `i` (0 = oldest held).
    pub fn episode(&self, i: usize) -> Option<&StoredEpisode> {
        self.episodes.get(i)
    }
    /// The most recently pushed episode.
    pub fn last(&self) -> Option<&StoredEpisode> {
        self.episodes.back()
    }
    /// Mean episode length over the buffer (0 when empty).
    pub fn mean_length(&self) -> f64 {
        if self.episodes.is_empty() {
            0.0
        } else {
            self.steps as f64 / self.episodes.len() as f64
        }
    }

    /// Stores `episode` with its per-step `features` (`[T, feature_dim]`), evicting the oldest
    /// episodes beyond the capacity. Returns the episode's serial number.
    ///
    /// # Errors
    /// An invalid episode ([`Episode::validate`]), widths that differ from the buffer's, or
    /// non-finite features; the buffer is unchanged on error.
    pub fn push(&mut self, episode: Episode, features: Array2<f32>) -> Result<u64> {
        episode.validate()?;
        check_len("episode obs width", self.obs_dim, episode.obs.ncols())?;
        check_len("episode action width", self.act_dim, episode.actions.ncols())?;
        check_len("features rows", episode.len(), features.nrows())?;
        check_len("features width", self.feature_dim, features.ncols())?;
        check_finite("features", features.iter().copied())?;
        let t = episode.len();
        let serial = self.next_serial;
        self.episodes.push_back(StoredEpisode { episode, features, serial });
        self.starts.push_back(self.next_start);
        self.next_start += t as u64;
        self.next_serial += 1;
        self.steps += t;
        while self.steps > self.capacity && self.episodes.len() > 1 {
            if let Some(old) = self.episodes.pop_front() {
                self.steps -= old.len();
                self.starts.pop_front();
            }
        }
        Ok(serial)
    }

    fn locate(&self, u: u64) -> (usize, usize) {
        // u is a global offset within [starts.front, next_start)
        let i = self.starts.partition_point(|&s| s <= u).saturating_sub(1);
        let t = (u - self.starts[i]) as usize;
        (i, t)
    }

    /// `batch_size` transitions drawn uniformly (with replacement) over the steps held.
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer.
    pub fn sample_steps(&self, batch_size: usize, rng: &mut dyn RngCore) -> Result<StepBatch> {
        let Some(&first) = self.starts.front() else {
            return Err(LareError::Empty { what: "episode buffer".into() });
        };
        let mut batch = StepBatch::with_capacity(batch_size, self.obs_dim, self.act_dim, self.feature_dim);
        for row in 0..batch_size {
            let u = first + rng.random_range(0..self.steps as u64);
            let (i, t) = self.locate(u);
            batch.set_row(row, &self.episodes[i], t);
        }
        Ok(batch)
    }

    /// Indices of `n` episodes drawn uniformly with replacement (LaRe's `sample_traj`).
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer.
    pub fn sample_episode_indices(&self, n: usize, rng: &mut dyn RngCore) -> Result<Vec<usize>> {
        if self.episodes.is_empty() {
            return Err(LareError::Empty { what: "episode buffer".into() });
        }
        Ok((0..n).map(|_| rng.random_range(0..self.episodes.len())).collect())
    }

    /// Every step of the episodes held, in order, as one batch (evaluation of a redistributor).
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer.
    pub fn all_steps(&self) -> Result<StepBatch> {
        if self.episodes.is_empty() {
            return Err(LareError::Empty { what: "episode buffer".into() });
        }
        let mut batch = StepBatch::with_capacity(self.steps, self.obs_dim, self.act_dim, self.feature_dim);
        let mut row = 0;
        for ep in &self.episodes {
            for t in 0..ep.len() {
                batch.set_row(row, ep, t);
                row += 1;
            }
        }
        Ok(batch)
    }

    /// Writes the buffer as a checkpoint directory (`state.json` + `tensors.safetensors`).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let state = self.state();
        let tensors = self.tensors()?;
        rl_nn::checkpoint::save_dir(dir, BUFFER_KIND, BUFFER_FORMAT, &state, &tensors)?;
        Ok(())
    }

    /// Reads a buffer written by [`EpisodeBuffer::save`].
    ///
    /// # Errors
    /// Missing, corrupt or mismatched files ([`LareError::Nn`], [`LareError::Corrupt`]).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        let ck = rl_nn::checkpoint::load_dir::<EpisodeBufferState>(dir, BUFFER_KIND, BUFFER_FORMAT)?;
        Self::from_parts(&ck.state, &ck.tensors, &ck.path)
    }

    pub(crate) fn state(&self) -> EpisodeBufferState {
        EpisodeBufferState {
            obs_dim: self.obs_dim,
            act_dim: self.act_dim,
            feature_dim: self.feature_dim,
            capacity: self.capacity,
            episodes: self
                .episodes
                .iter()
                .zip(&self.starts)
                .map(|(e, &s)| (e.len(), e.episode.terminated, e.episode.episodic_return, e.serial, s))
                .collect(),
            next_start: self.next_start,
            next_serial: self.next_serial,
        }
    }

    pub(crate) fn tensors(&self) -> Result<Vec<(String, tch::Tensor)>> {
        let cat2 = |f: &dyn Fn(&StoredEpisode) -> &Array2<f32>, w: usize| -> Result<tch::Tensor> {
            let mut all = Array2::<f32>::zeros((self.steps, w));
            let mut r = 0;
            for e in &self.episodes {
                let a = f(e);
                all.slice_axis_mut(Axis(0), (r..r + a.nrows()).into()).assign(a);
                r += a.nrows();
            }
            Ok(rl_nn::convert::array_to_tensor(&all)?)
        };
        let dense: Vec<f32> = self.episodes.iter().flat_map(|e| e.episode.dense_rewards.iter().copied()).collect();
        Ok(vec![
            ("buffer.obs".into(), cat2(&|e| &e.episode.obs, self.obs_dim)?),
            ("buffer.actions".into(), cat2(&|e| &e.episode.actions, self.act_dim)?),
            ("buffer.next_obs".into(), cat2(&|e| &e.episode.next_obs, self.obs_dim)?),
            ("buffer.features".into(), cat2(&|e| &e.features, self.feature_dim)?),
            ("buffer.dense".into(), rl_nn::convert::array_to_tensor(&Array1::from(dense))?),
        ])
    }

    pub(crate) fn from_parts(
        state: &EpisodeBufferState,
        tensors: &std::collections::BTreeMap<String, tch::Tensor>,
        path: &str,
    ) -> Result<Self> {
        let corrupt = |reason: String| LareError::Corrupt { path: path.to_owned(), reason };
        let get2 = |name: &str, w: usize, rows: usize| -> Result<Array2<f32>> {
            let t = tensors.get(name).ok_or_else(|| corrupt(format!("missing tensor `{name}`")))?;
            let a = rl_nn::convert::tensor_to_array(t)?;
            let shape = a.shape().to_vec();
            let a = if shape.len() == 2 && shape[0] == rows && shape[1] == w {
                a.into_dimensionality::<ndarray::Ix2>().map_err(|e| corrupt(e.to_string()))?
            } else if rows == 0 || w == 0 {
                Array2::zeros((rows, w))
            } else {
                return Err(corrupt(format!("tensor `{name}` has shape {shape:?}, expected [{rows}, {w}]")));
            };
            Ok(a)
        };
        let steps: usize = state.episodes.iter().map(|e| e.0).sum();
        let obs = get2("buffer.obs", state.obs_dim, steps)?;
        let actions = get2("buffer.actions", state.act_dim, steps)?;
        let next_obs = get2("buffer.next_obs", state.obs_dim, steps)?;
        let features = get2("buffer.features", state.feature_dim, steps)?;
        let dense = tensors.get("buffer.dense").ok_or_else(|| corrupt("missing tensor `buffer.dense`".into()))?;
        let dense = rl_nn::convert::tensor_to_array(dense)?;
        if dense.len() != steps {
            return Err(corrupt(format!("`buffer.dense` has {} values, expected {steps}", dense.len())));
        }
        let dense: Vec<f32> = dense.iter().copied().collect();
        let mut buf = EpisodeBuffer::new(state.obs_dim, state.act_dim, state.feature_dim, state.capacity)
            .map_err(|e| corrupt(e.to_string()))?;
        let mut r = 0;
        for &(len, terminated, ret, serial, start) in &state.episodes {
            if len == 0 {
                return Err(corrupt("an episode of length 0".into()));
            }
            let episode = Episode {
                obs: obs.slice_axis(Axis(0), (r..r + len).into()).to_owned(),
                actions: actions.slice_axis(Axis(0), (r..r + len).into()).to_owned(),
                next_obs: next_obs.slice_axis(Axis(0), (r..r + len).into()).to_owned(),
                dense_rewards: Array1::from(dense[r..r + len].to_vec()),
                terminated,
                episodic_return: ret,
            };
            episode.validate().map_err(|e| corrupt(e.to_string()))?;
            let f = features.slice_axis(Axis(0), (r..r + len).into()).to_owned();
            buf.episodes.push_back(StoredEpisode { episode, features: f, serial });
            buf.starts.push_back(start);
            buf.steps += len;
            r += len;
        }
        buf.next_start = state.next_start;
        buf.next_serial = state.next_serial;
        Ok(buf)
    }
}

const BUFFER_KIND: &str = "lare.episode_buffer";
const BUFFER_FORMAT: u32 = 1;

/// Samples `k` indices from `0..len` uniformly: without replacement when `k <= len`, with
/// replacement otherwise (RRD's subsampling, as `np.random.choice(len, k, replace=k > len)`).
pub fn subsample_indices<R: Rng + ?Sized>(len: usize, k: usize, rng: &mut R) -> Vec<usize> {
    if k > len {
        (0..k).map(|_| rng.random_range(0..len)).collect()
    } else {
        rand::seq::index::sample(rng, len, k).into_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    pub(crate) fn toy_episode(t: usize, x0: f32) -> Episode {
        let mut b = EpisodeBuilder::new(2, 1);
        let mut ret = 0.0;
        for i in 0..t {
            let x = x0 + i as f32;
            b.push(array![x, 1.0].view(), array![0.5].view(), array![x + 1.0, 1.0].view(), x).unwrap();
            ret += x;
        }
        b.finish(ret, t % 2 == 0).unwrap()
    }

    #[test]
    fn builder_rejects_bad_steps_and_keeps_state() {
        let mut b = EpisodeBuilder::new(2, 1);
        assert!(b.finish(0.0, false).is_err());
        assert!(b.push(array![1.0].view(), array![0.0].view(), array![1.0, 1.0].view(), 0.0).is_err());
        assert!(b.push(array![1.0, f32::NAN].view(), array![0.0].view(), array![1.0, 1.0].view(), 0.0).is_err());
        assert!(b.is_empty());
        b.push(array![1.0, 1.0].view(), array![0.0].view(), array![1.0, 1.0].view(), 0.0).unwrap();
        assert!(b.finish(f32::INFINITY, false).is_err());
        assert_eq!(b.finish(3.0, true).unwrap().len(), 1);
    }

    #[test]
    fn buffer_evicts_whole_episodes_and_samples_consistently() {
        let mut buf = EpisodeBuffer::new(2, 1, 1, 10).unwrap();
        for k in 0..4 {
            let ep = toy_episode(4, 10.0 * k as f32);
            let f = ep.obs.column(0).to_owned().insert_axis(Axis(1));
            buf.push(ep, f).unwrap();
        }
        // 4 episodes of 4 steps, capacity 10: the two newest remain
        assert_eq!((buf.n_episodes(), buf.steps()), (2, 8));
        assert_eq!(buf.episode(0).unwrap().serial, 2);
        let mut rng = rl_core::rng_from_seed(0);
        let b = buf.sample_steps(200, &mut rng).unwrap();
        for i in 0..b.len() {
            // features are obs[0]; dense reward equals obs[0] in the toy episode
            assert_eq!(b.features[[i, 0]], b.obs[[i, 0]]);
            assert_eq!(b.dense_rewards[i], b.obs[[i, 0]]);
            assert!(b.obs[[i, 0]] >= 20.0);
            let t = (b.obs[[i, 0]] as usize) % 10;
            assert_eq!(b.last[i], if t == 3 { 1.0 } else { 0.0 });
            assert_eq!(b.episode_length[i], 4.0);
        }
        let er = b.episodic_rewards();
        assert!(er.iter().zip(&b.last).all(|(r, l)| (*l == 0.0) == (*r == 0.0) || *r == 0.0));
        let tr = b.to_transitions(&er).unwrap();
        assert_eq!(tr.len(), 200);
        // the toy episodes have even length: terminated, not timeouts
        assert_eq!(tr.timeout().sum(), 0.0);
        assert!(buf.push(toy_episode(2, 0.0), Array2::zeros((3, 1))).is_err());
        assert_eq!(buf.n_episodes(), 2);
    }

    #[test]
    fn buffer_checkpoint_roundtrip() {
        let mut buf = EpisodeBuffer::new(2, 1, 1, 100).unwrap();
        for k in 0..3 {
            let ep = toy_episode(3 + k, k as f32);
            let f = Array2::from_elem((ep.len(), 1), k as f32);
            buf.push(ep, f).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        buf.save(dir.path().join("buf")).unwrap();
        let back = EpisodeBuffer::load(dir.path().join("buf")).unwrap();
        assert_eq!(back.state(), buf.state());
        let (mut r1, mut r2) = (rl_core::rng_from_seed(3), rl_core::rng_from_seed(3));
        assert_eq!(buf.sample_steps(50, &mut r1).unwrap(), back.sample_steps(50, &mut r2).unwrap());
        std::fs::write(dir.path().join("buf/tensors.safetensors"), b"garbage").unwrap();
        assert!(EpisodeBuffer::load(dir.path().join("buf")).is_err());
    }

    #[test]
    fn subsample_without_replacement_when_possible() {
        let mut rng = rl_core::rng_from_seed(1);
        let mut idx = subsample_indices(10, 10, &mut rng);
        idx.sort_unstable();
        assert_eq!(idx, (0..10).collect::<Vec<_>>());
        assert_eq!(subsample_indices(3, 8, &mut rng).len(), 8);
    }
}
