//! The reward decoder `f_ψ`: features of a step → proxy reward, trained so that the proxy
//! rewards of an episode add up to its episodic return.
//!
//! ```text
//! RD  (sum regression):      L = mean_i ( Σ_t r̂_{i,t} / T_i − R_i / T_i )²
//! RRD (K-step subsampling):   I_i ⊂ {0..T_i−1}, |I_i| = K (without replacement when K ≤ T_i)
//!                             L = mean_i ( (1/K) Σ_{t∈I_i} r̂_{i,t} − R_i / T_i )²
//! RRD unbiased:               L − mean_i [ Var_{I_i}(r̂) · (1 − K/T_i) / K ]   (sample variance, K − 1)
//! ```
//!
//! The RRD forms are "Learning Long-Term Reward Redistribution via Randomized Return
//! Decomposition" (Ren et al., ICLR 2022, arXiv 2111.13485) divided by `T²`, as LaRe's
//! reference code computes them (`thu-rllab/LaRe:mujoco/reward_model/rrd.py`, `RD.py`). With
//! raw features `[s, a, s − s']` the decoder is the RD/RRD baseline; over an encoder's latent
//! factors it is LaRe's decoder ("Latent Reward: LLM-Empowered Credit Assignment in Episodic
//! Reinforcement Learning", Qu et al., AAAI 2025, arXiv 2412.11120).

use std::path::Path;

use ndarray::{Array1, Array2, ArrayView2};
use rl_core::{Metrics, Params, SeededRng, Valid};
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{Mlp, MlpConfig};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::episode::{subsample_indices, EpisodeBuffer};
use crate::error::{check_len, LareError, Result};

/// Which decomposition loss trains the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecompositionLoss {
    /// Sum regression over whole episodes (RD; LaRe_RD).
    Sum,
    /// Randomized return decomposition over `K` sampled steps per episode (RRD, biased).
    Rrd,
    /// RRD with the sampling-variance correction (RRD unbiased; LaRe_RRDu, LaRe's default).
    RrdUnbiased,
}

/// Parameters of [`RewardDecoder`]; defaults are LaRe's MuJoCo code.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `hidden` | `[256, 256]` | hidden widths (3 linear layers, `Reward_Model`) | each `>= 1` |
/// | `lr` | 3e-4 | Adam learning rate | `> 0` |
/// | `weight_decay` | 0 | Adam L2 weight decay (MPE: 1e-5) | `>= 0` |
/// | `loss` | `rrd_unbiased` | [`DecompositionLoss`] (LaRe_RRDu) | |
/// | `rrd_k` | 64 | steps sampled per episode (RRD paper; MPE: 10) | `>= 1`, `>= 2` unbiased |
/// | `batch_size` | 256 | steps per update: RD takes `max(batch_size / mean T, 1)` episodes, RRD `max(batch_size / K, 1)` | `>= 1` |
/// | `seed` | 0 | master seed (init and sampling streams are derived from it) | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DecoderParams {
    /// Hidden widths.
    pub hidden: Vec<i64>,
    /// Learning rate.
    pub lr: f64,
    /// L2 weight decay.
    pub weight_decay: f64,
    /// Loss.
    pub loss: DecompositionLoss,
    /// RRD's K.
    pub rrd_k: usize,
    /// Steps per update.
    pub batch_size: usize,
    /// Master seed.
    pub seed: u64,
}

impl Default for DecoderParams {
    fn default() -> Self {
        Self {
            hidden: vec![256, 256],
            lr: 3e-4,
            weight_decay: 0.0,
            loss: DecompositionLoss::RrdUnbiased,
            rrd_k: 64,
            batch_size: 256,
            seed: 0,
        }
    }
}

impl DecoderParams {
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
    /// Sets `loss`.
    #[must_use]
    pub fn loss(mut self, v: DecompositionLoss) -> Self {
        self.loss = v;
        self
    }
    /// Sets `rrd_k`.
    #[must_use]
    pub fn rrd_k(mut self, v: usize) -> Self {
        self.rrd_k = v;
        self
    }
    /// Sets `batch_size`.
    #[must_use]
    pub fn batch_size(mut self, v: usize) -> Self {
        self.batch_size = v;
        self
    }
    /// Sets `seed`.
    #[must_use]
    pub fn seed(mut self, v: u64) -> Self {
        self.seed = v;
        self
    }

    pub(crate) fn mlp(&self) -> Result<Valid<MlpConfig>> {
        Ok(MlpConfig::new(self.hidden.clone()).check()?)
    }

    pub(crate) fn adam(&self) -> Result<Valid<AdamParams>> {
        Ok(AdamParams::default().lr(self.lr).weight_decay(self.weight_decay).check()?)
    }
}

impl Params for DecoderParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        if let Some((i, h)) = self.hidden.iter().enumerate().find(|(_, h)| **h <= 0) {
            return Err(LareError::invalid(format!("hidden[{i}]"), h, "must be >= 1"));
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(LareError::invalid("lr", self.lr, "must be finite and > 0"));
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return Err(LareError::invalid("weight_decay", self.weight_decay, "must be finite and >= 0"));
        }
        if self.rrd_k == 0 {
            return Err(LareError::invalid("rrd_k", 0, "must be >= 1"));
        }
        if self.loss == DecompositionLoss::RrdUnbiased && self.rrd_k < 2 {
            return Err(LareError::invalid(
                "rrd_k",
                self.rrd_k,
                "the unbiased RRD loss needs K >= 2 (sample variance)",
            ));
        }
        if self.batch_size == 0 {
            return Err(LareError::invalid("batch_size", 0, "must be >= 1"));
        }
        Ok(())
    }
}

/// The decoder network with its optimiser and sampling stream (see the module docs).
#[derive(Debug)]
pub struct RewardDecoder {
    params: Valid<DecoderParams>,
    input_dim: usize,
    device: Device,
    vs: VarStore,
    net: Mlp,
    opt: Adam,
    rng: SeededRng,
    updates: u64,
}

/// The serialisable state of a [`RewardDecoder`] checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DecoderState {
    params: DecoderParams,
    input_dim: usize,
    rng: SeededRng,
    updates: u64,
}

const DECODER_KIND: &str = "lare.reward_decoder";
const DECODER_FORMAT: u32 = 1;

/// Sums of `values` per segment (`values[j]` goes to `segment[j]`), as a `[n_segments]` tensor.
pub(crate) fn segment_sum(values: &Tensor, segment: &Tensor, n_segments: i64) -> Result<Tensor> {
    let zeros = Tensor::f_zeros([n_segments], (values.kind(), values.device()))?;
    Ok(zeros.f_index_add(0, segment, values)?)
}

impl RewardDecoder {
    /// A decoder over `input_dim` features, initialised from the stream
    /// `derive_seed_named(seed, "reward-decoder-init")`.
    ///
    /// # Errors
    /// `input_dim == 0`; an unavailable device; libtorch failures.
    pub fn new(params: Valid<DecoderParams>, input_dim: usize, device: Device) -> Result<Self> {
        if input_dim == 0 {
            return Err(LareError::invalid("input_dim", 0, "the decoder needs >= 1 feature"));
        }
        rl_nn::check::available(device)?;
        let vs = VarStore::new(device);
        let mut init_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "reward-decoder-init"));
        let net = Mlp::new(&vs.root().sub("decoder"), input_dim as i64, 1, &params.mlp()?, &mut init_rng)?;
        let opt = Adam::for_var_store(params.adam()?, &vs)?;
        let rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "reward-decoder-sampling"));
        Ok(Self { params, input_dim, device, vs, net, opt, rng, updates: 0 })
    }

    /// The parameters.
    pub fn params(&self) -> &DecoderParams {
        &self.params
    }

    /// Feature width.
    pub fn input_dim(&self) -> usize {
        self.input_dim
    }

    /// Updates taken.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The network's variables.
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    fn features_tensor(&self, features: ArrayView2<'_, f32>) -> Result<Tensor> {
        check_len("features width", self.input_dim, features.ncols())?;
        crate::error::check_finite("features", features.iter().copied())?;
        Ok(rl_nn::convert::array_to_tensor_on(&features, self.device)?)
    }

    /// Proxy rewards `r̂ = f_ψ(features)` of every row (no gradient).
    ///
    /// # Errors
    /// A wrong width or non-finite features; libtorch failures.
    pub fn predict(&self, features: ArrayView2<'_, f32>) -> Result<Array1<f32>> {
        if features.nrows() == 0 {
            return Ok(Array1::zeros(0));
        }
        let x = self.features_tensor(features)?;
        let y = tch::no_grad(|| self.net.f_forward(&x))?;
        Ok(rl_nn::convert::tensor_to_array1(&y.f_reshape([-1])?)?)
    }

    /// The sampling stream.
    pub(crate) fn rng_mut(&mut self) -> &mut SeededRng {
        &mut self.rng
    }

    /// One optimiser step on `loss`.
    pub(crate) fn step(&mut self, loss: &Tensor) -> Result<()> {
        self.opt.backward_step(loss)?;
        self.updates += 1;
        Ok(())
    }

    /// Features as a checked tensor on the decoder's device.
    pub(crate) fn to_device(&self, features: ArrayView2<'_, f32>) -> Result<Tensor> {
        self.features_tensor(features)
    }

    /// `r̂` as a tensor with gradient, for a batch already on the device.
    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.net.f_forward(x)?.f_reshape([-1])?)
    }

    /// One decoder update on episodes sampled from `buffer` with the loss of the parameters.
    /// Returns `reward_model/loss` (and, for RRD unbiased, `reward_model/variance_correction`).
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer; a feature width that differs from the
    /// decoder's; libtorch failures.
    pub fn update(&mut self, buffer: &EpisodeBuffer) -> Result<Metrics> {
        check_len("buffer feature width", self.input_dim, buffer.feature_dim())?;
        let p = self.params.get().clone();
        let mut m = Metrics::new();
        let loss = match p.loss {
            DecompositionLoss::Sum => {
                let n = ((p.batch_size as f64 / buffer.mean_length().max(1.0)) as usize).max(1);
                let idx = buffer.sample_episode_indices(n, &mut self.rng)?;
                let total: usize = idx.iter().filter_map(|&i| buffer.episode(i)).map(|e| e.len()).sum();
                let mut feats = Array2::<f32>::zeros((total, self.input_dim));
                let mut seg = Vec::with_capacity(total);
                let mut lens = Vec::with_capacity(n);
                let mut rets = Vec::with_capacity(n);
                let mut r = 0;
                for (j, &i) in idx.iter().enumerate() {
                    let Some(ep) = buffer.episode(i) else { continue };
                    let t = ep.len();
                    feats.slice_axis_mut(ndarray::Axis(0), (r..r + t).into()).assign(&ep.features);
                    seg.extend(std::iter::repeat_n(j as i64, t));
                    lens.push(t as f32);
                    rets.push(ep.episode.episodic_return);
                    r += t;
                }
                let x = self.features_tensor(feats.view())?;
                let seg = Tensor::from_slice(&seg).f_to_device(self.device)?;
                let lens = Tensor::from_slice(&lens).f_to_device(self.device)?;
                let rets = Tensor::from_slice(&rets).f_to_device(self.device)?;
                let r_hat = self.forward(&x)?;
                let pred = segment_sum(&r_hat, &seg, n as i64)?.f_div(&lens)?;
                let target = rets.f_div(&lens)?;
                pred.f_mse_loss(&target, tch::Reduction::Mean)?
            }
            DecompositionLoss::Rrd | DecompositionLoss::RrdUnbiased => {
                let k = p.rrd_k;
                let n = (p.batch_size / k).max(1);
                let idx = buffer.sample_episode_indices(n, &mut self.rng)?;
                let mut feats = Array2::<f32>::zeros((n * k, self.input_dim));
                let mut lens = Vec::with_capacity(n);
                let mut rets = Vec::with_capacity(n);
                for (j, &i) in idx.iter().enumerate() {
                    let Some(ep) = buffer.episode(i) else { continue };
                    let steps = subsample_indices(ep.len(), k, &mut self.rng);
                    for (c, &t) in steps.iter().enumerate() {
                        feats.row_mut(j * k + c).assign(&ep.features.row(t));
                    }
                    lens.push(ep.len() as f32);
                    rets.push(ep.episodic_return());
                }
                let x = self.features_tensor(feats.view())?;
                let lens = Tensor::from_slice(&lens).f_to_device(self.device)?;
                let rets = Tensor::from_slice(&rets).f_to_device(self.device)?;
                let r_hat = self.forward(&x)?.f_reshape([n as i64, k as i64])?;
                let pred = r_hat.f_mean_dim(1, false, Kind::Float)?;
                let target = rets.f_div(&lens)?;
                let mse = pred.f_mse_loss(&target, tch::Reduction::Mean)?;
                if p.loss == DecompositionLoss::RrdUnbiased {
                    let var = r_hat.f_var_dim(1, true, false)?; // unbiased: K − 1
                    let coef = lens.f_reciprocal()?.f_mul_scalar(-(k as f64))?.f_add_scalar(1.0)?;
                    let corr = var.f_mul(&coef)?.f_div_scalar(k as f64)?.f_mean(Kind::Float)?;
                    m.insert("reward_model/variance_correction", corr.f_double_value(&[])?);
                    mse.f_sub(&corr)?
                } else {
                    mse
                }
            }
        };
        self.opt.backward_step(&loss)?;
        self.updates += 1;
        m.insert("reward_model/loss", loss.f_double_value(&[])?);
        Ok(m)
    }

    /// Writes a checkpoint directory (weights, Adam moments, sampling stream, counters).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let state = DecoderState {
            params: self.params.get().clone(),
            input_dim: self.input_dim,
            rng: self.rng.clone(),
            updates: self.updates,
        };
        let mut tensors = rl_nn::checkpoint::var_store_tensors(&self.vs, "model.");
        tensors.extend(self.opt.state_tensors("optim.")?);
        rl_nn::checkpoint::save_dir(dir, DECODER_KIND, DECODER_FORMAT, &state, &tensors)?;
        Ok(())
    }

    /// Restores a checkpoint written by [`RewardDecoder::save`] into this decoder (same
    /// parameters and width). Everything is checked before anything is copied.
    ///
    /// # Errors
    /// Missing, corrupt or mismatched files; other parameters or width
    /// ([`LareError::Corrupt`]); the decoder is unchanged on error.
    pub fn load(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<DecoderState>(dir, DECODER_KIND, DECODER_FORMAT)?;
        let path = ck.path.clone();
        if ck.state.params != *self.params.get() || ck.state.input_dim != self.input_dim {
            return Err(LareError::Corrupt {
                path,
                reason: "the checkpoint was written by a decoder with other parameters or width".into(),
            });
        }
        let mode = rl_nn::LoadMode::AllowExtra;
        rl_nn::checkpoint::check_map(&self.vs, &ck.tensors, "model.", mode, &ck.path)?;
        self.opt.check_state_tensors(&ck.tensors, "optim.", mode, &ck.path)?;
        rl_nn::checkpoint::load_map(&self.vs, &ck.tensors, "model.", mode, &ck.path)?;
        self.opt.load_state_tensors(&ck.tensors, "optim.", mode, &ck.path)?;
        self.rng = ck.state.rng;
        self.updates = ck.state.updates;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::{Episode, EpisodeBuffer};
    use ndarray::Array1;

    /// Episodes whose hidden reward is `r_t = 2·x_t − 1` for a feature `x_t` in [0, 1].
    pub(crate) fn linear_buffer(n: usize, t: usize, seed: u64) -> EpisodeBuffer {
        use rand::Rng;
        let mut rng = rl_core::rng_from_seed(seed);
        let mut buf = EpisodeBuffer::new(1, 1, 1, 100_000).unwrap();
        for _ in 0..n {
            let x: Vec<f32> = (0..t).map(|_| rng.random::<f32>()).collect();
            let r: Vec<f32> = x.iter().map(|x| 2.0 * x - 1.0).collect();
            let obs = Array2::from_shape_vec((t, 1), x.clone()).unwrap();
            let ep = Episode {
                obs: obs.clone(),
                actions: Array2::zeros((t, 1)),
                next_obs: obs.clone(),
                dense_rewards: Array1::from(r.clone()),
                terminated: false,
                episodic_return: r.iter().sum(),
            };
            buf.push(ep, obs).unwrap();
        }
        buf
    }

    fn fit(loss: DecompositionLoss, steps: usize) -> (RewardDecoder, f64) {
        let buf = linear_buffer(64, 20, 1);
        let p = DecoderParams::default().hidden([32]).lr(1e-2).loss(loss).rrd_k(8).batch_size(256).check().unwrap();
        let mut dec = RewardDecoder::new(p, 1, Device::Cpu).unwrap();
        for _ in 0..steps {
            dec.update(&buf).unwrap();
        }
        let all = buf.all_steps().unwrap();
        let pred = dec.predict(all.features.view()).unwrap();
        let err = (&pred - &all.dense_rewards).mapv(|e| f64::from(e * e)).mean().unwrap();
        (dec, err)
    }

    #[test]
    fn sum_and_unbiased_rrd_recover_the_per_step_reward_biased_rrd_shrinks_it() {
        // the reward has variance 1/3; a decoder that learned nothing predicts the mean (0)
        let (_, sum) = fit(DecompositionLoss::Sum, 400);
        let (_, unbiased) = fit(DecompositionLoss::RrdUnbiased, 400);
        let (_, biased) = fit(DecompositionLoss::Rrd, 400);
        assert!(sum < 0.02, "sum regression: per-step MSE {sum}");
        assert!(unbiased < 0.02, "unbiased RRD: per-step MSE {unbiased}");
        // biased RRD also minimises the subsample variance Var_K(r̂)·(1 − K/T)/K, which pulls
        // r̂ towards each episode's mean: the bias the unbiased form removes (K = 8 of T = 20)
        assert!(biased > 2.0 * unbiased, "biased {biased} vs unbiased {unbiased}");
    }

    #[test]
    fn checkpoint_resume_is_bit_identical() {
        let buf = linear_buffer(16, 10, 2);
        let p = DecoderParams::default().hidden([16]).rrd_k(4).batch_size(16);
        let mut a = RewardDecoder::new(p.clone().check().unwrap(), 1, Device::Cpu).unwrap();
        for _ in 0..3 {
            a.update(&buf).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        a.save(dir.path().join("dec")).unwrap();
        let mut b = RewardDecoder::new(p.clone().seed(9).check().unwrap(), 1, Device::Cpu).unwrap();
        assert!(b.load(dir.path().join("dec")).is_err(), "other seed = other params");
        let mut b = RewardDecoder::new(p.check().unwrap(), 1, Device::Cpu).unwrap();
        b.load(dir.path().join("dec")).unwrap();
        for _ in 0..4 {
            let ma = a.update(&buf).unwrap();
            let mb = b.update(&buf).unwrap();
            assert_eq!(ma, mb);
        }
        let f = buf.all_steps().unwrap().features;
        assert_eq!(a.predict(f.view()).unwrap(), b.predict(f.view()).unwrap());
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        assert!(DecoderParams::default().rrd_k(1).check().is_err());
        assert!(DecoderParams::default().rrd_k(1).loss(DecompositionLoss::Rrd).check().is_ok());
        assert!(DecoderParams::default().lr(f64::NAN).check().is_err());
        assert!(DecoderParams::default().hidden([0]).check().is_err());
        let p = DecoderParams::default().hidden([4]).check().unwrap();
        assert!(RewardDecoder::new(p.clone(), 0, Device::Cpu).is_err());
        let mut dec = RewardDecoder::new(p, 2, Device::Cpu).unwrap();
        assert!(matches!(dec.predict(Array2::zeros((3, 1)).view()), Err(LareError::Shape { .. })));
        let nan = Array2::from_elem((1, 2), f32::NAN);
        assert!(matches!(dec.predict(nan.view()), Err(LareError::NonFinite { .. })));
        let empty = EpisodeBuffer::new(1, 1, 2, 10).unwrap();
        assert!(matches!(dec.update(&empty), Err(LareError::Empty { .. })));
        let other = linear_buffer(2, 3, 0);
        assert!(matches!(dec.update(&other), Err(LareError::Shape { .. })));
    }
}
