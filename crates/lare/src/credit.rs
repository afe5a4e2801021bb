//! Agent-level credit for cooperative multi-agent tasks: one decoder shared by every agent.
//!
//! LaRe's MPE code (`thu-rllab/LaRe:mpe/utils/util.py:make_train_step`) encodes each agent's
//! next observation, decodes a per-agent, per-step reward with one shared network, and
//! regresses the sum over agents and steps on the episode's return:
//!
//! ```text
//! r̂_{i,t} = f_ψ(φ(o^i_{t+1}))
//! L = mean_episodes ( Σ_i Σ_t r̂_{i,t} − R_target )²  [+ α · mean_t Var_t(Σ_i r̂_{i,t})]
//! R_target = R_team / N   (LaRe: the sparse reward written to every agent is the team return / N)
//! ```
//!
//! The relabelled reward of agent `i` at step `t` is `r̂_{i,t}` (agent-level credit), or
//! `mean_i r̂_{i,t}` for every agent with `agent_decomposition = false` (LaRe's
//! `--no_agent_decomp` ablation: temporal credit only).

use std::collections::VecDeque;
use std::path::Path;

use ndarray::{Array2, Array3, Axis};
use rand::Rng;
use rl_core::{Metrics, Params, Valid};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::decoder::{segment_sum, DecoderParams, DecompositionLoss, RewardDecoder};
use crate::encoder::LatentEncoder;
use crate::error::{check_finite, check_len, LareError, Result};

/// One finished episode of an `N`-agent task (all agents share observation and action widths).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiEpisode {
    /// Observations `[N, T, obs_dim]`.
    pub obs: Array3<f32>,
    /// Actions `[N, T, act_dim]`.
    pub actions: Array3<f32>,
    /// Next observations `[N, T, obs_dim]`.
    pub next_obs: Array3<f32>,
    /// Hidden dense rewards `[N, T]` (diagnostics only).
    pub dense_rewards: Array2<f32>,
    /// The team's episodic return `Σ_i Σ_t r_{i,t}`.
    pub team_return: f32,
}

impl MultiEpisode {
    /// Number of agents.
    pub fn n_agents(&self) -> usize {
        self.obs.shape()[0]
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.obs.shape()[1]
    }

    /// Whether the episode has no step.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks shapes and finiteness.
    ///
    /// # Errors
    /// [`LareError::Empty`], [`LareError::Shape`], [`LareError::NonFinite`].
    pub fn validate(&self) -> Result<()> {
        let (n, t) = (self.n_agents(), self.len());
        if n == 0 || t == 0 {
            return Err(LareError::Empty { what: "multi-agent episode".into() });
        }
        let want = |what: &str, got: &[usize], exp: &[usize]| -> Result<()> {
            if got != exp {
                return Err(LareError::shape(what, format!("{exp:?}"), format!("{got:?}")));
            }
            Ok(())
        };
        want("actions", &self.actions.shape()[..2], &[n, t])?;
        want("next_obs", self.next_obs.shape(), self.obs.shape())?;
        want("dense_rewards", self.dense_rewards.shape(), &[n, t])?;
        check_finite("obs", self.obs.iter().copied())?;
        check_finite("actions", self.actions.iter().copied())?;
        check_finite("next_obs", self.next_obs.iter().copied())?;
        check_finite("dense_rewards", self.dense_rewards.iter().copied())?;
        check_finite("team_return", [self.team_return])?;
        Ok(())
    }

    /// Each agent's latent factors `[N, T, dim]` from `encoder` (which reads `o_{t+1}` or `o_t`
    /// according to its [`StateSource`](crate::encoder::StateSource)).
    ///
    /// # Errors
    /// Encoder failures.
    pub fn featurize(&self, encoder: &dyn LatentEncoder) -> Result<Array3<f32>> {
        let (n, t) = (self.n_agents(), self.len());
        let mut out = Array3::<f32>::zeros((n, t, encoder.dim()));
        for i in 0..n {
            let f = encoder.encode_batch(
                self.obs.index_axis(Axis(0), i),
                self.actions.index_axis(Axis(0), i),
                self.next_obs.index_axis(Axis(0), i),
            )?;
            out.index_axis_mut(Axis(0), i).assign(&f);
        }
        Ok(out)
    }
}

/// A buffer of the last `capacity` multi-agent episodes with their factors.
#[derive(Debug, Clone)]
pub struct MultiEpisodeBuffer {
    capacity: usize,
    feature_dim: usize,
    episodes: VecDeque<(MultiEpisode, Array3<f32>)>,
}

impl MultiEpisodeBuffer {
    /// An empty buffer of at most `capacity` episodes with `feature_dim` factors per step.
    ///
    /// # Errors
    /// `capacity == 0`.
    pub fn new(capacity: usize, feature_dim: usize) -> Result<Self> {
        if capacity == 0 {
            return Err(LareError::invalid("capacity", 0, "must be >= 1"));
        }
        Ok(Self { capacity, feature_dim, episodes: VecDeque::new() })
    }

    /// Episodes held.
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// Episode `i` (0 = oldest) and its factors.
    pub fn get(&self, i: usize) -> Option<&(MultiEpisode, Array3<f32>)> {
        self.episodes.get(i)
    }

    /// Stores an episode with its factors `[N, T, feature_dim]`, evicting the oldest beyond
    /// the capacity.
    ///
    /// # Errors
    /// An invalid episode, features of another shape, non-finite features.
    pub fn push(&mut self, episode: MultiEpisode, features: Array3<f32>) -> Result<()> {
        episode.validate()?;
        let want = [episode.n_agents(), episode.len(), self.feature_dim];
        if features.shape() != want {
            return Err(LareError::shape("features", format!("{want:?}"), format!("{:?}", features.shape())));
        }
        check_finite("features", features.iter().copied())?;
        self.episodes.push_back((episode, features));
        while self.episodes.len() > self.capacity {
            self.episodes.pop_front();
        }
        Ok(())
    }
}

/// What the summed prediction of an episode is regressed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TeamTarget {
    /// `R_team / N` (LaRe's MPE code: the sparse reward of agent 0 summed over time).
    TeamMean,
    /// `R_team`.
    TeamSum,
}

/// Parameters of [`AgentCreditDecoder`]; defaults are LaRe's MPE code.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `hidden` | `[64, 64, 64, 64]` | hidden widths (5 linear layers, `Factor_Reward_Model`) | each `>= 1` |
/// | `lr` | 5e-4 | Adam learning rate | `> 0` |
/// | `weight_decay` | 1e-5 | Adam L2 weight decay | `>= 0` |
/// | `batch_episodes` | 256 | episodes per update (`rewardbatch_size`) | `>= 1` |
/// | `target` | `team_mean` | [`TeamTarget`] | |
/// | `agent_decomposition` | true | per-agent rewards (false: agent mean, `--no_agent_decomp`) | |
/// | `variance_reg` | 0 | α of the temporal variance regulariser (`--reg`) | `>= 0` |
/// | `seed` | 0 | master seed | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CreditParams {
    /// Hidden widths.
    pub hidden: Vec<i64>,
    /// Learning rate.
    pub lr: f64,
    /// L2 weight decay.
    pub weight_decay: f64,
    /// Episodes per update.
    pub batch_episodes: usize,
    /// Regression target.
    pub target: TeamTarget,
    /// Agent-level credit.
    pub agent_decomposition: bool,
    /// Variance regulariser weight.
    pub variance_reg: f64,
    /// Master seed.
    pub seed: u64,
}

impl Default for CreditParams {
    fn default() -> Self {
        Self {
            hidden: vec![64, 64, 64, 64],
            lr: 5e-4,
            weight_decay: 1e-5,
            batch_episodes: 256,
            target: TeamTarget::TeamMean,
            agent_decomposition: true,
            variance_reg: 0.0,
            seed: 0,
        }
    }
}

impl CreditParams {
    /// Sets `hidden`.
    #[must_use]
    pub fn hidden(mut self, v: impl Into<Vec<i64>>) -> Self {
        self.hidden = v.into();
        self
    }
    /// Sets `lr`.
    #[must_use]
    pub fn lr(mut self, v: f64) -> Self {
        self.lr = v;
        self
    }
    /// Sets `weight_decay`.
    #[must_use]
    pub fn weight_decay(mut self, v: f64) -> Self {
        self.weight_decay = v;
        self
    }
    /// Sets `batch_episodes`.
    #[must_use]
    pub fn batch_episodes(mut self, v: usize) -> Self {
        self.batch_episodes = v;
        self
    }
    /// Sets `target`.
    #[must_use]
    pub fn target(mut self, v: TeamTarget) -> Self {
        self.target = v;
        self
    }
    /// Sets `agent_decomposition`.
    #[must_use]
    pub fn agent_decomposition(mut self, v: bool) -> Self {
        self.agent_decomposition = v;
        self
    }
    /// Sets `variance_reg`.
    #[must_use]
    pub fn variance_reg(mut self, v: f64) -> Self {
        self.variance_reg = v;
        self
    }
    /// Sets `seed`.
    #[must_use]
    pub fn seed(mut self, v: u64) -> Self {
        self.seed = v;
        self
    }

    fn decoder(&self) -> Result<Valid<DecoderParams>> {
        DecoderParams {
            hidden: self.hidden.clone(),
            lr: self.lr,
            weight_decay: self.weight_decay,
            loss: DecompositionLoss::Sum,
            rrd_k: 2,
            batch_size: self.batch_episodes,
            seed: self.seed,
        }
        .check()
    }
}

impl Params for CreditParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        self.decoder()?;
        if self.batch_episodes == 0 {
            return Err(LareError::invalid("batch_episodes", 0, "must be >= 1"));
        }
        if !(self.variance_reg >= 0.0 && self.variance_reg.is_finite()) {
            return Err(LareError::invalid("variance_reg", self.variance_reg, "must be finite and >= 0"));
        }
        Ok(())
    }
}

/// The shared per-agent decoder (see the module docs).
#[derive(Debug)]
pub struct AgentCreditDecoder {
    params: Valid<CreditParams>,
    decoder: RewardDecoder,
}

impl AgentCreditDecoder {
    /// A decoder over `feature_dim` factors.
    ///
    /// # Errors
    /// As [`RewardDecoder::new`].
    pub fn new(params: Valid<CreditParams>, feature_dim: usize, device: Device) -> Result<Self> {
        let decoder = RewardDecoder::new(params.decoder()?, feature_dim, device)?;
        Ok(Self { params, decoder })
    }

    /// The parameters.
    pub fn params(&self) -> &CreditParams {
        &self.params
    }

    /// Per-agent, per-step rewards `[N, T]` of an episode's factors `[N, T, dim]`.
    ///
    /// # Errors
    /// A wrong feature width, non-finite features.
    pub fn relabel(&self, features: &Array3<f32>) -> Result<Array2<f32>> {
        let (n, t, d) = features.dim();
        let flat = features.to_shape((n * t, d)).map_err(|e| LareError::shape("features", "[N, T, dim]", e))?;
        let r = self.decoder.predict(flat.view())?;
        let mut r = r.into_shape_with_order((n, t)).map_err(|e| LareError::shape("rewards", "[N, T]", e))?;
        if !self.params.agent_decomposition && n > 0 {
            let mean = r.mean_axis(Axis(0)).ok_or_else(|| LareError::Empty { what: "agents".into() })?;
            for mut row in r.rows_mut() {
                row.assign(&mean);
            }
        }
        Ok(r)
    }

    /// One update on `batch_episodes` episodes drawn uniformly (with replacement) from
    /// `buffer`. Returns `reward_model/loss`.
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer, a feature width that differs, libtorch failures.
    pub fn update(&mut self, buffer: &MultiEpisodeBuffer) -> Result<Metrics> {
        if buffer.is_empty() {
            return Err(LareError::Empty { what: "multi-agent episode buffer".into() });
        }
        check_len("buffer feature width", self.decoder.input_dim(), buffer.feature_dim)?;
        let p = self.params.get().clone();
        let b = p.batch_episodes;
        let idx: Vec<usize> = (0..b).map(|_| self.decoder.rng_mut().random_range(0..buffer.len())).collect();
        let total: usize = idx.iter().filter_map(|&i| buffer.get(i)).map(|(e, _)| e.n_agents() * e.len()).sum();
        let d = buffer.feature_dim;
        let mut feats = Array2::<f32>::zeros((total, d));
        let mut seg = Vec::with_capacity(total);
        let mut step_seg = Vec::with_capacity(total);
        let mut steps_per_ep = Vec::with_capacity(b);
        let mut targets = Vec::with_capacity(b);
        let (mut r, mut step_base) = (0usize, 0i64);
        for (j, &i) in idx.iter().enumerate() {
            let Some((ep, f)) = buffer.get(i) else { continue };
            let (n, t) = (ep.n_agents(), ep.len());
            let flat = f.to_shape((n * t, d)).map_err(|e| LareError::shape("features", "[N, T, dim]", e))?;
            feats.slice_axis_mut(Axis(0), (r..r + n * t).into()).assign(&flat);
            seg.extend(std::iter::repeat_n(j as i64, n * t));
            for _agent in 0..n {
                step_seg.extend((0..t as i64).map(|k| step_base + k));
            }
            step_base += t as i64;
            steps_per_ep.push(t as i64);
            targets.push(match p.target {
                TeamTarget::TeamMean => ep.team_return / n as f32,
                TeamTarget::TeamSum => ep.team_return,
            });
            r += n * t;
        }
        let dev = self.decoder.device();
        let x = self.decoder.to_device(feats.view())?;
        let r_hat = self.decoder.forward(&x)?;
        let seg_t = Tensor::from_slice(&seg).f_to_device(dev)?;
        let pred = segment_sum(&r_hat, &seg_t, b as i64)?;
        let target = Tensor::from_slice(&targets).f_to_device(dev)?;
        let mse = pred.f_mse_loss(&target, tch::Reduction::Mean)?;
        let mut m = Metrics::new();
        let loss = if p.variance_reg > 0.0 {
            // temporal variance of the team's per-step reward, averaged over episodes
            let step_t = Tensor::from_slice(&step_seg).f_to_device(dev)?;
            let per_step = segment_sum(&r_hat, &step_t, step_base)?;
            let ep_of_step: Vec<i64> =
                steps_per_ep.iter().enumerate().flat_map(|(j, &t)| std::iter::repeat_n(j as i64, t as usize)).collect();
            let ep_t = Tensor::from_slice(&ep_of_step).f_to_device(dev)?;
            let lens = Tensor::from_slice(&steps_per_ep).f_to_device(dev)?.f_to_kind(Kind::Float)?;
            let mean = segment_sum(&per_step, &ep_t, b as i64)?.f_div(&lens)?;
            let dev_sq = per_step.f_sub(&mean.f_index_select(0, &ep_t)?)?.f_square()?;
            let var = segment_sum(&dev_sq, &ep_t, b as i64)?.f_div(&lens)?.f_mean(Kind::Float)?;
            m.insert("reward_model/variance", var.f_double_value(&[])?);
            mse.f_add(&var.f_mul_scalar(p.variance_reg)?)?
        } else {
            mse
        };
        self.decoder.step(&loss)?;
        m.insert("reward_model/loss", loss.f_double_value(&[])?);
        Ok(m)
    }

    /// Writes a checkpoint directory.
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.decoder.save(dir)
    }

    /// Restores a checkpoint of a decoder with the same parameters.
    ///
    /// # Errors
    /// As [`RewardDecoder::load`].
    pub fn load(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        self.decoder.load(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::{NativeEncoder, StateSource};
    use ndarray::Array1;

    /// Agents whose hidden reward is `−|x|` of their own next position: the team return is
    /// known, the per-agent split is what the decoder must find.
    fn episodes(n_eps: usize, seed: u64) -> Vec<MultiEpisode> {
        let mut rng = rl_core::rng_from_seed(seed);
        (0..n_eps)
            .map(|_| {
                let (n, t) = (3, 5);
                let next = Array3::from_shape_fn((n, t, 1), |_| rng.random_range(-1.0f32..1.0));
                let dense = Array2::from_shape_fn((n, t), |(i, k)| -next[[i, k, 0]].abs());
                MultiEpisode {
                    obs: next.clone(),
                    actions: Array3::zeros((n, t, 1)),
                    next_obs: next,
                    team_return: dense.sum(),
                    dense_rewards: dense,
                }
            })
            .collect()
    }

    #[test]
    fn shared_decoder_learns_agent_level_credit() {
        let enc = NativeEncoder::new(1, "|x|", |o, _, _, out| out[0] = o[0].abs())
            .unwrap()
            .with_state_source(StateSource::Next);
        let mut buf = MultiEpisodeBuffer::new(1000, 1).unwrap();
        for ep in episodes(200, 0) {
            let f = ep.featurize(&enc).unwrap();
            buf.push(ep, f).unwrap();
        }
        let p = CreditParams::default().hidden([16]).lr(1e-2).batch_episodes(32).target(TeamTarget::TeamSum);
        let mut dec = AgentCreditDecoder::new(p.check().unwrap(), 1, Device::Cpu).unwrap();
        for _ in 0..400 {
            dec.update(&buf).unwrap();
        }
        let (ep, f) = buf.get(0).unwrap();
        let r = dec.relabel(f).unwrap();
        let err = (&r - &ep.dense_rewards).mapv(|e| e * e).mean().unwrap();
        assert!(err < 0.01, "per-agent reward MSE {err}");
        // without agent decomposition every agent gets the same reward at a step
        let p = CreditParams::default().hidden([16]).agent_decomposition(false).check().unwrap();
        let flat = AgentCreditDecoder::new(p, 1, Device::Cpu).unwrap().relabel(f).unwrap();
        assert!(flat.columns().into_iter().all(|c| c.iter().all(|v| (v - c[0]).abs() < 1e-6)));
    }

    #[test]
    fn variance_regulariser_and_bad_inputs() {
        let enc = NativeEncoder::new(1, "x", |o, _, _, out| out[0] = o[0]).unwrap();
        let mut buf = MultiEpisodeBuffer::new(2, 1).unwrap();
        for ep in episodes(3, 1) {
            let f = ep.featurize(&enc).unwrap();
            buf.push(ep, f).unwrap();
        }
        assert_eq!(buf.len(), 2);
        let p = CreditParams::default().hidden([4]).batch_episodes(4).variance_reg(0.5).check().unwrap();
        let mut dec = AgentCreditDecoder::new(p, 1, Device::Cpu).unwrap();
        let m = dec.update(&buf).unwrap();
        assert!(m.get("reward_model/variance").unwrap() >= 0.0);
        let mut ep = episodes(1, 2).remove(0);
        ep.dense_rewards = Array2::zeros((2, 5));
        assert!(buf.push(ep, Array3::zeros((3, 5, 1))).is_err());
        assert!(CreditParams::default().variance_reg(-1.0).check().is_err());
        assert!(MultiEpisodeBuffer::new(0, 1).is_err());
        let empty = MultiEpisodeBuffer::new(1, 1).unwrap();
        assert!(dec.update(&empty).is_err());
        let _ = Array1::<f32>::zeros(1);
    }
}
