//! A transition replay buffer over [`rl_core::Transitions`]: a ring of fixed capacity, uniform
//! sampling with replacement, optional `n`-step returns computed at sampling time.

use std::collections::BTreeMap;
use std::path::Path;

use ndarray::{Array1, Array2, ArrayView1, Axis, Slice};
use rand::{Rng, RngCore};
use rl_core::{Params, Transitions, Valid};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::batch::{Batch, HostColumns};
use crate::error::{check, AgentError, Result};

/// Parameters of a [`ReplayBuffer`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `capacity` | 1,000,000 | transitions kept (the oldest are overwritten); SAC (Haarnoja et al. 2018, Table 1), TD3 code, CORL `buffer_size` | `>= 1` |
/// | `n_step` | 1 | rewards summed per sampled transition (`1`: plain one-step transitions) | `>= 1` |
/// | `gamma` | 0.99 | discount of the `n`-step sums and of the returned per-row bootstrap factor `γ^k` (only used when `n_step > 1`) | `[0, 1]` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayBufferParams {
    /// Maximum number of stored transitions.
    pub capacity: usize,
    /// Steps per sampled return.
    pub n_step: usize,
    /// Discount of `n`-step returns.
    pub gamma: f64,
}

impl Default for ReplayBufferParams {
    fn default() -> Self {
        Self { capacity: 1_000_000, n_step: 1, gamma: 0.99 }
    }
}

impl ReplayBufferParams {
    /// Sets `capacity`.
    #[must_use]
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }
    /// Sets `n_step`.
    #[must_use]
    pub fn n_step(mut self, n_step: usize) -> Self {
        self.n_step = n_step;
        self
    }
    /// Sets `gamma`.
    #[must_use]
    pub fn gamma(mut self, gamma: f64) -> Self {
        self.gamma = gamma;
        self
    }
}

impl Params for ReplayBufferParams {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        check::at_least("capacity", self.capacity, 1)?;
        check::at_least("n_step", self.n_step, 1)?;
        check::unit_closed("gamma", self.gamma)?;
        if self.capacity > (u32::MAX as usize) * 16 {
            return Err(AgentError::invalid("capacity", self.capacity, "is unreasonably large"));
        }
        Ok(())
    }
}

const NO_LINK: i64 = -1;

/// The ring's storage: the columns of a `Transitions`, `capacity` rows each.
#[derive(Debug, Clone)]
struct Columns {
    obs: Array2<f32>,
    action: Array2<f32>,
    reward: Array1<f32>,
    next_obs: Array2<f32>,
    terminal: Array1<f32>,
    timeout: Array1<f32>,
}

/// A ring buffer of transitions with uniform sampling, the replay memory of SAC/TD3 and the
/// dataset container offline algorithms sample from.
///
/// Each transition belongs to a *stream* (the index of the environment in a batch of
/// environments): consecutive transitions of one stream are linked until the episode ends, so
/// `n`-step returns follow the right episode even when several environments write interleaved.
/// With `n_step = n > 1`, a sampled row `i` holds `R = Σ_{j<k} γ^j r_{i+j}` over the next
/// `k ≤ n` transitions of its stream (stopping at a terminal state, a time-limit truncation, or
/// the newest stored transition), `next_obs` and `terminal` of the `k`-th transition, and the
/// bootstrap factor `γ^k` in [`Batch::discount`].
///
/// Values are checked at insertion (lengths, finiteness, 0/1 flags), so sampled batches need
/// no check. The state (every stored row, links, counters) saves to a checkpoint directory and
/// loads back exactly.
///
/// ```
/// use rl_agents::{ReplayBuffer, ReplayBufferParams};
/// use rl_core::Params;
/// let mut buf = ReplayBuffer::new(ReplayBufferParams::default().capacity(1000).check()?, 3, 1)?;
/// let o = ndarray::array![0.0f32, 1.0, 0.0];
/// buf.push(o.view(), ndarray::array![0.5f32].view(), -1.0, o.view(), false, false, 0)?;
/// let mut rng = rl_core::rng_from_seed(0);
/// let batch = buf.sample(256, tch::Device::Cpu, &mut rng)?;
/// assert_eq!(batch.len(), 256);
/// # Ok::<(), rl_agents::AgentError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ReplayBuffer {
    params: Valid<ReplayBufferParams>,
    data: Columns,
    /// Insertion id of the next transition of the same stream (`NO_LINK` if none yet / none).
    next: Vec<i64>,
    len: usize,
    pushed: u64,
    /// Per stream: the insertion id of its latest transition, while its episode is running.
    open: BTreeMap<u32, u64>,
}

impl ReplayBuffer {
    /// An empty buffer for transitions of the given widths; storage for `capacity` rows is
    /// allocated at once.
    ///
    /// # Errors
    /// [`AgentError::InvalidParameter`] for a zero width.
    pub fn new(params: Valid<ReplayBufferParams>, obs_dim: usize, act_dim: usize) -> Result<Self> {
        check::at_least("obs_dim", obs_dim, 1)?;
        check::at_least("act_dim", act_dim, 1)?;
        let cap = params.capacity;
        let data = Columns {
            obs: Array2::zeros((cap, obs_dim)),
            action: Array2::zeros((cap, act_dim)),
            reward: Array1::zeros(cap),
            next_obs: ndarray::Array2::zeros((cap, obs_dim)),
            terminal: Array1::zeros(cap),
            timeout: Array1::zeros(cap),
        };
        Ok(Self { params, data, next: vec![NO_LINK; cap], len: 0, pushed: 0, open: BTreeMap::new() })
    }

    /// A buffer holding `transitions` in order (a dataset): consecutive rows are linked as one
    /// stream until a terminal or timeout flag. `capacity` is raised to the dataset's length if
    /// it is smaller.
    ///
    /// # Errors
    /// [`AgentError::Empty`] for an empty dataset.
    pub fn from_transitions(params: ReplayBufferParams, transitions: &Transitions) -> Result<Self> {
        if transitions.is_empty() {
            return Err(AgentError::Empty { what: "transitions".into() });
        }
        let capacity = params.capacity.max(transitions.len());
        let mut buf = Self::new(params.capacity(capacity).check()?, transitions.obs_dim(), transitions.act_dim())?;
        buf.extend(transitions, 0)?;
        Ok(buf)
    }

    /// The parameters.
    pub fn params(&self) -> &ReplayBufferParams {
        &self.params
    }

    /// Number of stored transitions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Transitions pushed since creation (including overwritten ones).
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Observation width.
    pub fn obs_dim(&self) -> usize {
        self.data.obs.ncols()
    }

    /// Action width.
    pub fn act_dim(&self) -> usize {
        self.data.action.ncols()
    }

    fn row_of(&self, id: u64) -> usize {
        (id % self.params.capacity as u64) as usize
    }

    fn alive(&self, id: u64) -> bool {
        id < self.pushed && self.pushed - id <= self.len as u64
    }

    /// Appends one transition of `stream` (overwriting the oldest when full). `terminal`: the
    /// episode reached a terminal state; `timeout`: it was cut by a time limit after this step
    /// (`next_obs` is then the last observation, which targets bootstrap from).
    ///
    /// # Errors
    /// [`AgentError::Shape`] for a wrong length, [`AgentError::Core`] for a non-finite value;
    /// the buffer is unchanged then.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        obs: ArrayView1<'_, f32>,
        action: ArrayView1<'_, f32>,
        reward: f32,
        next_obs: ArrayView1<'_, f32>,
        terminal: bool,
        timeout: bool,
        stream: u32,
    ) -> Result<()> {
        for (what, got, want) in [
            ("obs", obs.len(), self.obs_dim()),
            ("action", action.len(), self.act_dim()),
            ("next_obs", next_obs.len(), self.obs_dim()),
        ] {
            if got != want {
                return Err(AgentError::shape(what, format!("[{want}]"), format!("[{got}]")));
            }
        }
        rl_core::check_finite("obs", obs.iter())?;
        rl_core::check_finite("action", action.iter())?;
        rl_core::check_finite("reward", std::iter::once(&reward))?;
        rl_core::check_finite("next_obs", next_obs.iter())?;
        self.push_unchecked(obs, action, reward, next_obs, terminal, timeout, stream);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn push_unchecked(
        &mut self,
        obs: ArrayView1<'_, f32>,
        action: ArrayView1<'_, f32>,
        reward: f32,
        next_obs: ArrayView1<'_, f32>,
        terminal: bool,
        timeout: bool,
        stream: u32,
    ) {
        let id = self.pushed;
        let row = self.row_of(id);
        self.data.obs.row_mut(row).assign(&obs);
        self.data.action.row_mut(row).assign(&action);
        self.data.reward[row] = reward;
        self.data.next_obs.row_mut(row).assign(&next_obs);
        self.data.terminal[row] = f32::from(u8::from(terminal));
        self.data.timeout[row] = f32::from(u8::from(timeout));
        self.next[row] = NO_LINK;
        self.pushed += 1;
        self.len = (self.len + 1).min(self.params.capacity);
        if let Some(prev) = self.open.remove(&stream) {
            if self.alive(prev) {
                let prow = self.row_of(prev);
                self.next[prow] = id as i64;
            }
        }
        if !(terminal || timeout) {
            self.open.insert(stream, id);
        }
    }

    /// Appends every row of `transitions` as one stream (`stream`), linking consecutive rows
    /// until a terminal or timeout flag.
    ///
    /// # Errors
    /// [`AgentError::Shape`] for other widths; the buffer is unchanged then.
    pub fn extend(&mut self, transitions: &Transitions, stream: u32) -> Result<()> {
        if transitions.obs_dim() != self.obs_dim() || transitions.act_dim() != self.act_dim() {
            return Err(AgentError::shape(
                "transitions",
                format!("obs {} / action {}", self.obs_dim(), self.act_dim()),
                format!("obs {} / action {}", transitions.obs_dim(), transitions.act_dim()),
            ));
        }
        let t = transitions;
        for i in 0..t.len() {
            self.push_unchecked(
                t.obs().row(i),
                t.action().row(i),
                t.reward()[i],
                t.next_obs().row(i),
                t.terminal()[i] == 1.0,
                t.timeout()[i] == 1.0,
                stream,
            );
        }
        Ok(())
    }

    /// The stored transitions in storage order (a copy; the oldest row first once the ring has
    /// wrapped).
    ///
    /// # Errors
    /// None in practice (the stored rows satisfy `Transitions`' invariants); the error of
    /// [`Transitions::from_columns`] is passed on.
    pub fn transitions(&self) -> Result<Transitions> {
        let order = self.storage_order();
        self.select(&order)
    }

    fn select(&self, rows: &[usize]) -> Result<Transitions> {
        let d = &self.data;
        Ok(Transitions::from_columns(
            d.obs.select(Axis(0), rows),
            d.action.select(Axis(0), rows),
            d.reward.select(Axis(0), rows),
            d.next_obs.select(Axis(0), rows),
            d.terminal.select(Axis(0), rows),
            d.timeout.select(Axis(0), rows),
        )?)
    }

    fn storage_order(&self) -> Vec<usize> {
        let first = self.pushed - self.len as u64;
        (first..self.pushed).map(|id| self.row_of(id)).collect()
    }

    /// Draws `batch_size` row indices uniformly with replacement.
    fn indices(&self, batch_size: usize, rng: &mut dyn RngCore) -> Result<Vec<usize>> {
        if self.len == 0 {
            return Err(AgentError::Empty { what: "replay buffer".into() });
        }
        check::at_least("batch_size", batch_size, 1)?;
        Ok((0..batch_size).map(|_| rng.random_range(0..self.len)).collect())
    }

    /// A batch of `batch_size` transitions drawn uniformly with replacement, on `device`
    /// (`n`-step returns when `n_step > 1`, see the type docs).
    ///
    /// # Errors
    /// [`AgentError::Empty`] for an empty buffer, [`AgentError::InvalidParameter`] for
    /// `batch_size == 0`, device errors.
    pub fn sample(&self, batch_size: usize, device: Device, rng: &mut dyn RngCore) -> Result<Batch> {
        let idx = self.indices(batch_size, rng)?;
        self.gather(&idx, device)
    }

    /// The batch of the stored rows `indices` (row numbers of the ring, `< len()`), with
    /// `n`-step returns when configured.
    ///
    /// # Errors
    /// [`AgentError::Core`] (index out of range), [`AgentError::Empty`] for no index.
    pub fn gather(&self, indices: &[usize], device: Device) -> Result<Batch> {
        if indices.is_empty() {
            return Err(AgentError::Empty { what: "indices".into() });
        }
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.len) {
            return Err(rl_core::RlCoreError::IndexOutOfRange {
                what: "replay buffer".into(),
                index: bad,
                len: self.len,
            }
            .into());
        }
        let (o, a, b) = (self.obs_dim(), self.act_dim(), indices.len());
        let n = self.params.n_step;
        let mut c = HostColumns {
            obs: Vec::with_capacity(b * o),
            action: Vec::with_capacity(b * a),
            reward: Vec::with_capacity(b),
            next_obs: Vec::with_capacity(b * o),
            terminal: Vec::with_capacity(b),
            discount: (n > 1).then(|| Vec::with_capacity(b)),
        };
        let gamma = self.params.gamma as f32;
        let contiguous = |v: ArrayView1<'_, f32>, out: &mut Vec<f32>| match v.as_slice() {
            Some(sl) => out.extend_from_slice(sl),
            None => out.extend(v.iter()),
        };
        for &i in indices {
            contiguous(self.data.obs.row(i), &mut c.obs);
            contiguous(self.data.action.row(i), &mut c.action);
            let (mut ret, mut last, mut k) = (self.data.reward[i], i, 1usize);
            let mut disc = gamma;
            while k < n && self.data.terminal[last] == 0.0 && self.data.timeout[last] == 0.0 {
                let link = self.next[last];
                if link < 0 || !self.alive(link as u64) {
                    break;
                }
                last = self.row_of(link as u64);
                ret += disc * self.data.reward[last];
                disc *= gamma;
                k += 1;
            }
            c.reward.push(ret);
            contiguous(self.data.next_obs.row(last), &mut c.next_obs);
            c.terminal.push(self.data.terminal[last]);
            if let Some(d) = c.discount.as_mut() {
                d.push(disc);
            }
        }
        Batch::from_host(b, o, a, c, device)
    }

    /// A host batch of `batch_size` one-step transitions drawn uniformly with replacement.
    ///
    /// # Errors
    /// As [`ReplayBuffer::sample`].
    pub fn sample_transitions(&self, batch_size: usize, rng: &mut dyn RngCore) -> Result<Transitions> {
        let idx = self.indices(batch_size, rng)?;
        self.select(&idx)
    }

    /// Named tensors of the stored rows (row order `0..len`), for checkpoints.
    pub(crate) fn state_tensors(&self, prefix: &str) -> Result<Vec<(String, Tensor)>> {
        let n = self.len;
        let m = |a: ndarray::ArrayView2<'_, f32>| -> Result<Tensor> { Ok(rl_nn::convert::array_to_tensor(&a)?) };
        let v = |a: ArrayView1<'_, f32>| -> Result<Tensor> { Ok(rl_nn::convert::array_to_tensor(&a)?) };
        Ok(vec![
            (format!("{prefix}obs"), m(self.data.obs.slice_axis(Axis(0), Slice::from(..n)))?),
            (format!("{prefix}action"), m(self.data.action.slice_axis(Axis(0), Slice::from(..n)))?),
            (format!("{prefix}reward"), v(self.data.reward.slice_axis(Axis(0), Slice::from(..n)))?),
            (format!("{prefix}next_obs"), m(self.data.next_obs.slice_axis(Axis(0), Slice::from(..n)))?),
            (format!("{prefix}terminal"), v(self.data.terminal.slice_axis(Axis(0), Slice::from(..n)))?),
            (format!("{prefix}timeout"), v(self.data.timeout.slice_axis(Axis(0), Slice::from(..n)))?),
            (format!("{prefix}next"), Tensor::f_from_slice(&self.next[..n])?),
        ])
    }

    pub(crate) fn meta(&self) -> BufferMeta {
        BufferMeta {
            params: self.params.get().clone(),
            obs_dim: self.obs_dim(),
            act_dim: self.act_dim(),
            len: self.len,
            pushed: self.pushed,
            open: self.open.iter().map(|(k, v)| (*k, *v)).collect(),
        }
    }

    /// Rebuilds a buffer from its checkpoint parts, checking every name, shape and value.
    pub(crate) fn restore(
        meta: BufferMeta,
        tensors: &BTreeMap<String, Tensor>,
        prefix: &str,
        path: &str,
    ) -> Result<Self> {
        let corrupt = |reason: String| AgentError::Corrupt { path: path.into(), reason };
        let params = meta.params.check().map_err(|e| corrupt(e.to_string()))?;
        let (o, a, n) = (meta.obs_dim, meta.act_dim, meta.len);
        if n > params.capacity || (meta.pushed as u128) < n as u128 {
            return Err(corrupt(format!("len {n} exceeds capacity {} or pushed {}", params.capacity, meta.pushed)));
        }
        let mut buf = Self::new(params, o, a)?;
        let get = |name: &str, shape: &[i64], kind: Kind| -> Result<Tensor> {
            let key = format!("{prefix}{name}");
            let t = tensors.get(&key).ok_or_else(|| corrupt(format!("missing tensor `{key}`")))?;
            if t.size() != shape {
                return Err(corrupt(format!("`{key}` has shape {:?}, expected {shape:?}", t.size())));
            }
            if t.kind() != kind {
                return Err(corrupt(format!("`{key}` has kind {:?}, expected {kind:?}", t.kind())));
            }
            Ok(t.shallow_clone())
        };
        let (ni, oi, ai) = (n as i64, o as i64, a as i64);
        let f32s = |t: Tensor| -> Result<Vec<f32>> { Ok(Vec::<f32>::try_from(&t.f_contiguous()?.f_view([-1])?)?) };
        let obs = f32s(get("obs", &[ni, oi], Kind::Float)?)?;
        let act = f32s(get("action", &[ni, ai], Kind::Float)?)?;
        let rew = f32s(get("reward", &[ni], Kind::Float)?)?;
        let nobs = f32s(get("next_obs", &[ni, oi], Kind::Float)?)?;
        let term = f32s(get("terminal", &[ni], Kind::Float)?)?;
        let tout = f32s(get("timeout", &[ni], Kind::Float)?)?;
        let next = Vec::<i64>::try_from(&get("next", &[ni], Kind::Int64)?)?;
        for (what, col) in [("obs", &obs), ("action", &act), ("reward", &rew), ("next_obs", &nobs)] {
            if let Some(i) = col.iter().position(|v| !v.is_finite()) {
                return Err(corrupt(format!("`{what}` holds a non-finite value at {i}")));
            }
        }
        for (what, col) in [("terminal", &term), ("timeout", &tout)] {
            if let Some(i) = col.iter().position(|v| *v != 0.0 && *v != 1.0) {
                return Err(corrupt(format!("`{what}[{i}]` is not a 0/1 flag")));
            }
        }
        if let Some(i) = next.iter().position(|&l| l < NO_LINK || l >= meta.pushed as i64) {
            return Err(corrupt(format!("link `next[{i}]` = {} is out of range", next[i])));
        }
        buf.data
            .obs
            .slice_axis_mut(Axis(0), Slice::from(..n))
            .assign(&ndarray::ArrayView2::from_shape((n, o), &obs).map_err(|e| corrupt(e.to_string()))?);
        buf.data
            .action
            .slice_axis_mut(Axis(0), Slice::from(..n))
            .assign(&ndarray::ArrayView2::from_shape((n, a), &act).map_err(|e| corrupt(e.to_string()))?);
        buf.data.reward.slice_axis_mut(Axis(0), Slice::from(..n)).assign(&ArrayView1::from(&rew));
        buf.data
            .next_obs
            .slice_axis_mut(Axis(0), Slice::from(..n))
            .assign(&ndarray::ArrayView2::from_shape((n, o), &nobs).map_err(|e| corrupt(e.to_string()))?);
        buf.data.terminal.slice_axis_mut(Axis(0), Slice::from(..n)).assign(&ArrayView1::from(&term));
        buf.data.timeout.slice_axis_mut(Axis(0), Slice::from(..n)).assign(&ArrayView1::from(&tout));
        buf.next[..n].copy_from_slice(&next);
        buf.len = n;
        buf.pushed = meta.pushed;
        buf.open = meta.open.into_iter().collect();
        Ok(buf)
    }

    /// Writes a checkpoint directory (`state.json` + `tensors.safetensors` with every stored
    /// row).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        rl_nn::checkpoint::save_dir(dir, BUFFER_KIND, BUFFER_FORMAT, &self.meta(), &self.state_tensors("")?)?;
        Ok(())
    }

    /// Reads a buffer written by [`ReplayBuffer::save`].
    ///
    /// # Errors
    /// [`AgentError::Nn`] for a missing, unreadable or foreign checkpoint,
    /// [`AgentError::Corrupt`] for contents that do not fit.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        let ck = rl_nn::checkpoint::load_dir::<BufferMeta>(dir, BUFFER_KIND, BUFFER_FORMAT)?;
        Self::restore(ck.state, &ck.tensors, "", &ck.path)
    }
}

const BUFFER_KIND: &str = "rl_agents.replay_buffer";
const BUFFER_FORMAT: u32 = 1;

/// The non-tensor state of a [`ReplayBuffer`] (in `state.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BufferMeta {
    params: ReplayBufferParams,
    obs_dim: usize,
    act_dim: usize,
    len: usize,
    pushed: u64,
    open: Vec<(u32, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn buf(cap: usize, n: usize) -> ReplayBuffer {
        ReplayBuffer::new(ReplayBufferParams::default().capacity(cap).n_step(n).gamma(0.5).check().unwrap(), 1, 1)
            .unwrap()
    }

    fn push(b: &mut ReplayBuffer, x: f32, r: f32, term: bool, tout: bool, stream: u32) {
        b.push(array![x].view(), array![0.0].view(), r, array![x + 1.0].view(), term, tout, stream).unwrap();
    }

    #[test]
    fn ring_overwrites_oldest_and_samples_uniformly() {
        let mut b = buf(3, 1);
        for i in 0..5 {
            push(&mut b, i as f32, i as f32, false, false, 0);
        }
        assert_eq!((b.len(), b.pushed()), (3, 5));
        let t = b.transitions().unwrap();
        assert_eq!(t.obs().column(0).to_vec(), vec![2.0, 3.0, 4.0]);
        let mut rng = rl_core::rng_from_seed(0);
        let s = b.sample(3000, Device::Cpu, &mut rng).unwrap();
        let obs = Vec::<f32>::try_from(&s.obs().view([-1])).unwrap();
        for v in [2.0, 3.0, 4.0] {
            let c = obs.iter().filter(|x| **x == v).count();
            assert!((850..1150).contains(&c), "{v}: {c}");
        }
        assert!(s.discount().is_none());
    }

    #[test]
    fn bad_pushes_are_rejected_and_change_nothing() {
        let mut b = buf(4, 1);
        push(&mut b, 0.0, 0.0, false, false, 0);
        let before = b.transitions().unwrap();
        assert!(b.push(array![1.0, 2.0].view(), array![0.0].view(), 0.0, array![1.0].view(), false, false, 0).is_err());
        assert!(b.push(array![1.0].view(), array![0.0].view(), f32::NAN, array![1.0].view(), false, false, 0).is_err());
        assert_eq!(b.transitions().unwrap(), before);
        assert!(buf(4, 1).sample(1, Device::Cpu, &mut rl_core::rng_from_seed(0)).is_err());
        assert!(b.gather(&[1], Device::Cpu).is_err());
        let e = ReplayBufferParams::default().n_step(0).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "n_step"));
    }

    #[test]
    fn n_step_follows_streams_and_stops_at_episode_ends() {
        let mut b = buf(16, 3);
        // two interleaved streams: stream 0 rewards 1, 2, 3(terminal); stream 1 rewards 10, 20 (timeout)
        push(&mut b, 0.0, 1.0, false, false, 0); // row 0
        push(&mut b, 100.0, 10.0, false, false, 1); // row 1
        push(&mut b, 1.0, 2.0, false, false, 0); // row 2
        push(&mut b, 101.0, 20.0, false, true, 1); // row 3 (timeout)
        push(&mut b, 2.0, 3.0, true, false, 0); // row 4 (terminal)
        push(&mut b, 3.0, 4.0, false, false, 0); // row 5: new episode of stream 0, not linked to row 4
        let batch = b.gather(&[0, 1, 2, 4, 5], Device::Cpu).unwrap();
        let r = Vec::<f32>::try_from(batch.reward()).unwrap();
        let d = Vec::<f32>::try_from(batch.discount().unwrap()).unwrap();
        let nobs = Vec::<f32>::try_from(&batch.next_obs().view([-1])).unwrap();
        let term = Vec::<f32>::try_from(batch.terminal()).unwrap();
        // row 0: 1 + .5*2 + .25*3 = 2.75, ends terminal after 3 steps, discount .125
        assert_eq!(r, vec![2.75, 20.0, 3.5, 3.0, 4.0]);
        assert_eq!(d, vec![0.125, 0.25, 0.25, 0.5, 0.5]);
        assert_eq!(nobs, vec![3.0, 102.0, 3.0, 3.0, 4.0]);
        assert_eq!(term, vec![1.0, 0.0, 1.0, 1.0, 0.0]);
        // bootstrap factor is 0 where terminal
        let boot = Vec::<f32>::try_from(&batch.bootstrap(0.99).unwrap()).unwrap();
        assert_eq!(boot, vec![0.0, 0.25, 0.0, 0.0, 0.5]);
    }

    #[test]
    fn links_to_overwritten_rows_are_not_followed() {
        let mut b = buf(2, 3);
        push(&mut b, 0.0, 1.0, false, false, 0);
        push(&mut b, 1.0, 1.0, false, false, 0);
        push(&mut b, 2.0, 1.0, false, false, 0); // overwrites row 0
                                                 // row 1 (id 1) links to id 2 (row 0): alive
        let batch = b.gather(&[1], Device::Cpu).unwrap();
        assert_eq!(Vec::<f32>::try_from(batch.reward()).unwrap(), vec![1.5]);
        let batch = b.gather(&[0], Device::Cpu).unwrap();
        assert_eq!(Vec::<f32>::try_from(batch.reward()).unwrap(), vec![1.0]);
    }

    #[test]
    fn checkpoint_roundtrip_is_exact() {
        let mut b = buf(5, 2);
        for i in 0..7 {
            push(&mut b, i as f32 * 0.1, i as f32, i == 3, false, (i % 2) as u32);
        }
        let dir = tempfile::tempdir().unwrap();
        b.save(dir.path().join("buf")).unwrap();
        let c = ReplayBuffer::load(dir.path().join("buf")).unwrap();
        assert_eq!(c.transitions().unwrap(), b.transitions().unwrap());
        let mut b2 = b.clone();
        let mut c2 = c.clone();
        push(&mut b2, 9.0, 9.0, false, false, 1);
        push(&mut c2, 9.0, 9.0, false, false, 1);
        let idx = [0, 1, 2, 3, 4];
        let x = b2.gather(&idx, Device::Cpu).unwrap();
        let y = c2.gather(&idx, Device::Cpu).unwrap();
        assert!(x.reward().equal(y.reward()));
        assert!(x.next_obs().equal(y.next_obs()));
        assert!(ReplayBuffer::load(dir.path().join("missing")).is_err());
    }
}
