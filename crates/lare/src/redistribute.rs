//! The [`RewardRedistributor`] trait: how an agent trained on episodic rewards gets per-step
//! rewards, and its implementations.
//!
//! | type | method | per-step reward of a sampled transition |
//! |---|---|---|
//! | [`EpisodicBaseline`] | raw episodic reward | `R_ep` at the last step, 0 elsewhere |
//! | [`DenseOracle`] | dense reward (LaRe's `--dense_r`, an upper reference, not a method) | the hidden `r_t` |
//! | [`Decomposition`] + [`RawEncoder`](crate::encoder::RawEncoder) | RD / RRD (biased, unbiased) | `f_ψ([s, a, s − s'])` |
//! | [`Decomposition`] + an LLM-written or hand-written encoder | LaRe (LaRe_RD / LaRe_RRDu) | `f_ψ(φ(s, a))` |
//! | [`Ircr`] | IRCR | `(R/T − R_min)/(R_max − R_min)`, half of each batch from the top-10 episodes |
//! | [`DirectReward`] | LaRe's `--direct_generate` ablation | `φ(s, a)` (one factor, no decoder) |
//!
//! A training loop calls [`store_episode`] when an episode ends, [`RewardRedistributor::sample`]
//! and [`RewardRedistributor::relabel`] for every agent batch (LaRe relabels every sampled batch
//! with the current decoder), and [`RewardRedistributor::update`] for the decoder.

use std::path::Path;

use ndarray::{Array1, Array2};
use rand::{Rng, RngCore};
use rl_core::Metrics;
use serde::{Deserialize, Serialize};

use crate::decoder::{DecoderParams, RewardDecoder};
use crate::encoder::LatentEncoder;
use crate::episode::{Episode, EpisodeBuffer, StepBatch, StoredEpisode};
use crate::error::{check_len, LareError, Result};

/// Turns episodic returns into per-step rewards for an off-policy or on-policy learner.
pub trait RewardRedistributor: std::fmt::Debug + Send {
    /// The method's name (`rd`, `rrd`, `lare`, `ircr`, ...), for logs and tables.
    fn name(&self) -> String;

    /// Width of the per-step features stored with each episode (0 when none).
    fn feature_dim(&self) -> usize;

    /// The features of each step of `episode`, `[T, feature_dim]` (latent factors `φ`, raw
    /// features, or nothing), computed once when the episode is stored.
    ///
    /// # Errors
    /// Encoder failures (a script error names the row).
    fn featurize(&self, episode: &Episode) -> Result<Array2<f32>>;

    /// Called after an episode was pushed into `buffer` (it is `buffer.last()`).
    ///
    /// # Errors
    /// Implementation specific.
    fn observe(&mut self, _buffer: &EpisodeBuffer) -> Result<()> {
        Ok(())
    }

    /// A batch of transitions for the agent (uniform over the buffer unless the method says
    /// otherwise, as IRCR does).
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer.
    fn sample(&mut self, buffer: &EpisodeBuffer, batch_size: usize, rng: &mut dyn RngCore) -> Result<StepBatch> {
        buffer.sample_steps(batch_size, rng)
    }

    /// The per-step rewards of `batch`.
    ///
    /// # Errors
    /// A batch whose feature width differs from [`RewardRedistributor::feature_dim`].
    fn relabel(&self, batch: &StepBatch) -> Result<Array1<f32>>;

    /// One update of whatever the method learns (a decoder step); nothing for fixed rules.
    ///
    /// # Errors
    /// Implementation specific.
    fn update(&mut self, _buffer: &EpisodeBuffer) -> Result<Metrics> {
        Ok(Metrics::new())
    }

    /// Writes the method's state into the checkpoint directory `dir` (may write nothing).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    fn save(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    /// Restores what [`RewardRedistributor::save`] wrote.
    ///
    /// # Errors
    /// Missing, corrupt or mismatched files.
    fn load(&mut self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}

/// Featurises `episode`, stores it in `buffer` and tells the redistributor. Returns the
/// episode's serial number.
///
/// # Errors
/// As [`RewardRedistributor::featurize`], [`EpisodeBuffer::push`] and
/// [`RewardRedistributor::observe`].
pub fn store_episode<R: RewardRedistributor + ?Sized>(
    buffer: &mut EpisodeBuffer,
    method: &mut R,
    episode: Episode,
) -> Result<u64> {
    let features = method.featurize(&episode)?;
    let serial = buffer.push(episode, features)?;
    method.observe(buffer)?;
    Ok(serial)
}

fn no_features(episode: &Episode) -> Array2<f32> {
    Array2::zeros((episode.len(), 0))
}

/// The raw episodic reward: `R_ep` at the last step of its episode, 0 elsewhere (what the agent
/// sees without any redistribution).
#[derive(Debug, Clone, Default)]
pub struct EpisodicBaseline;

impl RewardRedistributor for EpisodicBaseline {
    fn name(&self) -> String {
        "episodic".into()
    }
    fn feature_dim(&self) -> usize {
        0
    }
    fn featurize(&self, episode: &Episode) -> Result<Array2<f32>> {
        Ok(no_features(episode))
    }
    fn relabel(&self, batch: &StepBatch) -> Result<Array1<f32>> {
        Ok(batch.episodic_rewards())
    }
}

/// The hidden dense reward (an oracle for reference curves; not available in the episodic
/// setting).
#[derive(Debug, Clone, Default)]
pub struct DenseOracle;

impl RewardRedistributor for DenseOracle {
    fn name(&self) -> String {
        "dense".into()
    }
    fn feature_dim(&self) -> usize {
        0
    }
    fn featurize(&self, episode: &Episode) -> Result<Array2<f32>> {
        Ok(no_features(episode))
    }
    fn relabel(&self, batch: &StepBatch) -> Result<Array1<f32>> {
        Ok(batch.dense_rewards.clone())
    }
}

/// Return decomposition: a [`RewardDecoder`] over the features of an encoder. With
/// [`RawEncoder`](crate::encoder::RawEncoder) it is RD or RRD; with latent factors it is LaRe.
#[derive(Debug)]
pub struct Decomposition {
    name: String,
    encoder: Box<dyn LatentEncoder>,
    decoder: RewardDecoder,
}

impl Decomposition {
    /// A decoder with `params` over the factors of `encoder`, named `name` in logs.
    ///
    /// # Errors
    /// As [`RewardDecoder::new`].
    pub fn new(
        name: impl Into<String>,
        encoder: Box<dyn LatentEncoder>,
        params: rl_core::Valid<DecoderParams>,
        device: tch::Device,
    ) -> Result<Self> {
        let decoder = RewardDecoder::new(params, encoder.dim(), device)?;
        Ok(Self { name: name.into(), encoder, decoder })
    }

    /// The encoder.
    pub fn encoder(&self) -> &dyn LatentEncoder {
        self.encoder.as_ref()
    }

    /// The decoder.
    pub fn decoder(&self) -> &RewardDecoder {
        &self.decoder
    }
}

impl RewardRedistributor for Decomposition {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn feature_dim(&self) -> usize {
        self.encoder.dim()
    }
    fn featurize(&self, episode: &Episode) -> Result<Array2<f32>> {
        self.encoder.encode_batch(episode.obs.view(), episode.actions.view(), episode.next_obs.view())
    }
    fn relabel(&self, batch: &StepBatch) -> Result<Array1<f32>> {
        self.decoder.predict(batch.features.view())
    }
    fn update(&mut self, buffer: &EpisodeBuffer) -> Result<Metrics> {
        self.decoder.update(buffer)
    }
    fn save(&self, dir: &Path) -> Result<()> {
        self.decoder.save(dir.join("decoder"))
    }
    fn load(&mut self, dir: &Path) -> Result<()> {
        self.decoder.load(dir.join("decoder"))
    }
}

/// LaRe's `--direct_generate` ablation: the encoder's single factor is the reward (an
/// LLM-designed reward without a decoder, Eureka-style without iteration).
#[derive(Debug)]
pub struct DirectReward {
    encoder: Box<dyn LatentEncoder>,
}

impl DirectReward {
    /// The reward `φ(s, a)` of a one-factor encoder.
    ///
    /// # Errors
    /// [`LareError::InvalidParameter`] when the encoder has more than one factor.
    pub fn new(encoder: Box<dyn LatentEncoder>) -> Result<Self> {
        if encoder.dim() != 1 {
            return Err(LareError::invalid("encoder.dim", encoder.dim(), "a direct reward has exactly one factor"));
        }
        Ok(Self { encoder })
    }
}

impl RewardRedistributor for DirectReward {
    fn name(&self) -> String {
        "direct".into()
    }
    fn feature_dim(&self) -> usize {
        1
    }
    fn featurize(&self, episode: &Episode) -> Result<Array2<f32>> {
        self.encoder.encode_batch(episode.obs.view(), episode.actions.view(), episode.next_obs.view())
    }
    fn relabel(&self, batch: &StepBatch) -> Result<Array1<f32>> {
        check_len("features width", 1, batch.features.ncols())?;
        Ok(batch.features.column(0).to_owned())
    }
}

/// Parameters of [`Ircr`] ("Learning Guidance Rewards with Trajectory-space Smoothing",
/// Gangwani et al., NeurIPS 2020, arXiv 2010.12718; as LaRe's `IRCRReplayBuffer`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `heap_size` | 10 | best episodes kept for self-imitation sampling | `>= 1` |
/// | `heap_fraction` | 0.5 | share of each batch drawn from the heap | `[0, 1]` |
/// | `normalize` | true | min-max normalise `R/T` over the buffer's episodes | |
///
/// LaRe's IRCR runs also change the agent (buffer 3e5, τ = 0.001, batch 512); those belong to
/// the agent's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IrcrParams {
    /// Heap size.
    pub heap_size: usize,
    /// Heap share of a batch.
    pub heap_fraction: f64,
    /// Min-max normalisation.
    pub normalize: bool,
}

impl Default for IrcrParams {
    fn default() -> Self {
        Self { heap_size: 10, heap_fraction: 0.5, normalize: true }
    }
}

impl IrcrParams {
    /// Sets `heap_size`.
    #[must_use]
    pub fn heap_size(mut self, v: usize) -> Self {
        self.heap_size = v;
        self
    }
    /// Sets `heap_fraction`.
    #[must_use]
    pub fn heap_fraction(mut self, v: f64) -> Self {
        self.heap_fraction = v;
        self
    }
    /// Sets `normalize`.
    #[must_use]
    pub fn normalize(mut self, v: bool) -> Self {
        self.normalize = v;
        self
    }
}

impl rl_core::Params for IrcrParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        if self.heap_size == 0 {
            return Err(LareError::invalid("heap_size", 0, "must be >= 1"));
        }
        if !(0.0..=1.0).contains(&self.heap_fraction) {
            return Err(LareError::invalid("heap_fraction", self.heap_fraction, "must be in [0, 1]"));
        }
        Ok(())
    }
}

/// IRCR: every step of an episode gets its episode's return per step `R/T`, min-max
/// normalised over the buffer; a heap of the best episodes supplies part of every batch.
///
/// ```text
/// r̃_t = (R/T − min_j R_j/T_j) / (max_j R_j/T_j − min_j R_j/T_j)       (j over the buffer)
/// ```
#[derive(Debug, Clone)]
pub struct Ircr {
    params: rl_core::Valid<IrcrParams>,
    heap: Vec<StoredEpisode>,
    r_min: f32,
    r_max: f32,
}

/// The serialisable state of [`Ircr`] (the heap's arrays go to the tensor file).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IrcrState {
    params: IrcrParams,
    /// `(min R/T, max R/T)` over the buffer; `None` before the first episode (JSON has no
    /// infinities, and the initial range is `(+inf, -inf)`).
    range: Option<(f32, f32)>,
    heap_serials: Vec<u64>,
    heap: crate::episode::EpisodeBufferState,
}

impl Ircr {
    /// IRCR with `params`.
    pub fn new(params: rl_core::Valid<IrcrParams>) -> Self {
        Self { params, heap: vec![], r_min: f32::INFINITY, r_max: f32::NEG_INFINITY }
    }

    /// The returns of the heap's episodes.
    pub fn heap_returns(&self) -> Vec<f32> {
        self.heap.iter().map(StoredEpisode::episodic_return).collect()
    }

    /// The current normalisation range `(min R/T, max R/T)`.
    pub fn range(&self) -> (f32, f32) {
        (self.r_min, self.r_max)
    }

    fn per_step(&self, ret: f32, len: f32) -> f32 {
        let x = ret / len.max(1.0);
        if !self.params.normalize {
            return x;
        }
        let span = self.r_max - self.r_min;
        if span.is_finite() && span > 1e-8 {
            (x - self.r_min) / span
        } else {
            0.0
        }
    }
}

impl RewardRedistributor for Ircr {
    fn name(&self) -> String {
        "ircr".into()
    }
    fn feature_dim(&self) -> usize {
        0
    }
    fn featurize(&self, episode: &Episode) -> Result<Array2<f32>> {
        Ok(no_features(episode))
    }
    fn observe(&mut self, buffer: &EpisodeBuffer) -> Result<()> {
        let Some(last) = buffer.last() else { return Ok(()) };
        // heap of the best episodes (LaRe's HeapReplayBuffer: replace the worst when better)
        if self.heap.len() < self.params.heap_size {
            self.heap.push(last.clone());
        } else if let Some((i, worst)) =
            self.heap.iter().enumerate().min_by(|a, b| a.1.episodic_return().total_cmp(&b.1.episodic_return()))
        {
            if last.episodic_return() > worst.episodic_return() {
                self.heap[i] = last.clone();
            }
        }
        let per: Vec<f32> = buffer.episodes().map(|e| e.episodic_return() / e.len() as f32).collect();
        self.r_min = per.iter().copied().fold(f32::INFINITY, f32::min);
        self.r_max = per.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        Ok(())
    }
    fn sample(&mut self, buffer: &EpisodeBuffer, batch_size: usize, rng: &mut dyn RngCore) -> Result<StepBatch> {
        let from_heap = if self.heap.is_empty() { 0 } else { (batch_size as f64 * self.params.heap_fraction) as usize };
        let uniform = buffer.sample_steps(batch_size - from_heap, rng)?;
        if from_heap == 0 {
            return Ok(uniform);
        }
        let mut heap = StepBatch::with_capacity(from_heap, buffer.obs_dim(), buffer.act_dim(), buffer.feature_dim());
        for row in 0..from_heap {
            let ep = &self.heap[rng.random_range(0..self.heap.len())];
            let t = rng.random_range(0..ep.len());
            heap.set_row(row, ep, t);
        }
        uniform.concat(&heap)
    }
    fn relabel(&self, batch: &StepBatch) -> Result<Array1<f32>> {
        Ok(Array1::from_iter(
            batch.episode_return.iter().zip(&batch.episode_length).map(|(r, l)| self.per_step(*r, *l)),
        ))
    }
    fn save(&self, dir: &Path) -> Result<()> {
        let (od, ad, fd) = self
            .heap
            .first()
            .map_or((1, 0, 0), |e| (e.episode.obs.ncols(), e.episode.actions.ncols(), e.features.ncols()));
        let mut heap = EpisodeBuffer::new(od, ad, fd, usize::MAX)?;
        for e in &self.heap {
            heap.push(e.episode.clone(), e.features.clone())?;
        }
        let state = IrcrState {
            params: self.params.get().clone(),
            range: (self.r_min.is_finite() && self.r_max.is_finite()).then_some((self.r_min, self.r_max)),
            heap_serials: self.heap.iter().map(|e| e.serial).collect(),
            heap: heap.state(),
        };
        rl_nn::checkpoint::save_dir(dir.join("ircr"), "lare.ircr", 1, &state, &heap.tensors()?)?;
        Ok(())
    }
    fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<IrcrState>(dir.join("ircr"), "lare.ircr", 1)?;
        let path = ck.path.clone();
        if ck.state.params != *self.params.get() {
            return Err(LareError::Corrupt { path, reason: "written by IRCR with other parameters".into() });
        }
        let heap = EpisodeBuffer::from_parts(&ck.state.heap, &ck.tensors, &path)?;
        if heap.n_episodes() != ck.state.heap_serials.len() {
            return Err(LareError::Corrupt { path, reason: "heap serials do not match its episodes".into() });
        }
        self.heap = heap
            .episodes()
            .zip(&ck.state.heap_serials)
            .map(|(e, &s)| StoredEpisode { serial: s, ..e.clone() })
            .collect();
        (self.r_min, self.r_max) = match ck.state.range {
            Some((lo, hi)) if lo.is_finite() && hi.is_finite() && lo <= hi => (lo, hi),
            Some(_) => return Err(LareError::Corrupt { path, reason: "IRCR range is not a finite min <= max".into() }),
            None => (f32::INFINITY, f32::NEG_INFINITY),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::DecompositionLoss;
    use crate::encoder::{NativeEncoder, RawEncoder, RawFeatures};
    use ndarray::Array1;
    use rl_core::Params;

    fn episode(ret: f32, t: usize) -> Episode {
        Episode {
            obs: Array2::from_elem((t, 1), ret),
            actions: Array2::zeros((t, 1)),
            next_obs: Array2::from_elem((t, 1), ret),
            dense_rewards: Array1::from_elem(t, ret / t as f32),
            terminated: false,
            episodic_return: ret,
        }
    }

    #[test]
    fn episodic_and_dense_relabel() {
        let mut buf = EpisodeBuffer::new(1, 1, 0, 100).unwrap();
        let mut m = EpisodicBaseline;
        store_episode(&mut buf, &mut m, episode(5.0, 5)).unwrap();
        let all = buf.all_steps().unwrap();
        assert_eq!(m.relabel(&all).unwrap().to_vec(), vec![0.0, 0.0, 0.0, 0.0, 5.0]);
        assert_eq!(DenseOracle.relabel(&all).unwrap().to_vec(), vec![1.0; 5]);
    }

    #[test]
    fn ircr_normalises_and_keeps_the_best_episodes() {
        let mut buf = EpisodeBuffer::new(1, 1, 0, 1000).unwrap();
        let mut m = Ircr::new(IrcrParams::default().heap_size(2).check().unwrap());
        for (ret, t) in [(10.0, 10), (40.0, 20), (0.0, 5), (30.0, 10)] {
            store_episode(&mut buf, &mut m, episode(ret, t)).unwrap();
        }
        // per-step returns 1, 2, 0, 3 → range [0, 3]
        assert_eq!(m.range(), (0.0, 3.0));
        let mut heap = m.heap_returns();
        heap.sort_by(f32::total_cmp);
        assert_eq!(heap, vec![30.0, 40.0]);
        let all = buf.all_steps().unwrap();
        let r = m.relabel(&all).unwrap();
        assert!((r[0] - 1.0 / 3.0).abs() < 1e-6 && (r[r.len() - 1] - 1.0).abs() < 1e-6);
        let mut rng = rl_core::rng_from_seed(0);
        let b = m.sample(&buf, 100, &mut rng).unwrap();
        assert_eq!(b.len(), 100);
        // the heap half only holds the two best episodes
        assert!(b.episode_return.iter().skip(50).all(|&r| r == 30.0 || r == 40.0));
        let dir = tempfile::tempdir().unwrap();
        m.save(dir.path()).unwrap();
        let mut back = Ircr::new(IrcrParams::default().heap_size(2).check().unwrap());
        back.load(dir.path()).unwrap();
        assert_eq!((back.range(), back.heap_returns()), (m.range(), m.heap_returns()));
        let (mut r1, mut r2) = (rl_core::rng_from_seed(5), rl_core::rng_from_seed(5));
        assert_eq!(m.sample(&buf, 20, &mut r1).unwrap(), back.sample(&buf, 20, &mut r2).unwrap());
        assert!(IrcrParams::default().heap_fraction(1.5).check().is_err());
    }

    #[test]
    fn ircr_saved_before_its_first_episode_loads() {
        // the initial range is (+inf, -inf), which JSON cannot hold: it is saved as "no range yet"
        let m = Ircr::new(IrcrParams::default().check().unwrap());
        let dir = tempfile::tempdir().unwrap();
        m.save(dir.path()).unwrap();
        let mut back = Ircr::new(IrcrParams::default().check().unwrap());
        back.load(dir.path()).unwrap();
        assert_eq!(back.range(), (f32::INFINITY, f32::NEG_INFINITY));
        assert!(back.heap_returns().is_empty());
    }

    #[test]
    fn decomposition_featurizes_once_and_relabels() {
        let enc = RawEncoder::new(1, 1, RawFeatures::StateActionDelta);
        let p = DecoderParams::default().hidden([8]).loss(DecompositionLoss::Sum).check().unwrap();
        let mut m = Decomposition::new("rd", Box::new(enc), p, tch::Device::Cpu).unwrap();
        assert_eq!(m.feature_dim(), 3);
        let mut buf = EpisodeBuffer::new(1, 1, 3, 100).unwrap();
        store_episode(&mut buf, &mut m, episode(2.0, 4)).unwrap();
        let b = buf.sample_steps(8, &mut rl_core::rng_from_seed(0)).unwrap();
        assert_eq!(m.relabel(&b).unwrap().len(), 8);
        let loss = m.update(&buf).unwrap();
        assert!(loss.get("reward_model/loss").unwrap().is_finite());
        let direct =
            DirectReward::new(Box::new(NativeEncoder::new(1, "x", |o, _, _, out| out[0] = o[0]).unwrap())).unwrap();
        let f = direct.featurize(&episode(3.0, 2)).unwrap();
        assert_eq!(f.column(0).to_vec(), vec![3.0, 3.0]);
        assert!(DirectReward::new(Box::new(RawEncoder::new(1, 1, RawFeatures::NextState))).is_ok());
        assert!(DirectReward::new(Box::new(RawEncoder::new(2, 1, RawFeatures::NextState))).is_err());
    }
}
