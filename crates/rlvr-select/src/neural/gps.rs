//! GPS: a small generalisable prompt-predictive model steering batch selection.

use super::features::{success_rate, FeatureMemory};
use super::nn::{
    adam_state, check_lr, kl_normal, load_adam, load_into, matrix, new_adam, randn, AdamState, Dense, TensorData,
};
use crate::diversity::{greedy_msd, mean_pair_distance, min_distance_to, Diversity, MsdProblem};
use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{check_select_args, Candidates, ItemId, Outcome, Prediction, Selection};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use rl_nn::optim::Adam;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// Parameters of [`Gps`].
///
/// The GPS paper (arXiv 2602.01970) gives the model's structure and objective but its code and
/// several constants (`λ`, `M`, `β`, widths) were not available to us; the defaults below are
/// ours, sized for CPU, and marked as such.
///
/// A config file may give any subset of the fields; a misspelt field is an error.
///
/// | name | default | meaning |
/// |---|---|---|
/// | `z_dim` | 8 | latent "difficulty context" dimension (ours) |
/// | `h_dim` | 32 | hidden width of encoders and decoder (ours; paper ≈ 20M parameters, Transformer encoder) |
/// | `lr` | 1e-3 | Adam learning rate (ours) |
/// | `train_steps` | 2 | gradient steps per observed batch (ours) |
/// | `train_samples` | 4 | latent draws in the ELBO's likelihood term (ours) |
/// | `kl_weight` (`β`) | 1.0 | KL weight (ours) |
/// | `predict_samples` (`M`) | 8 | prior draws averaged for a prediction (ours) |
/// | `target` | 0.5 | target success rate of `u(γ̂) = −(γ̂ − target)²` (paper) |
/// | `intra_weight` (`λ_intra`) | 0.02 | weight of intra-batch dispersion (ours) |
/// | `inter_weight` (`λ_inter`) | 0.01 | weight of the distance to the previous batch (ours) |
/// | `warmup_steps` | 0 | steps `< warmup_steps` select uniformly |
/// | `distance_pairs` | 256 | random pairs estimating the mean candidate distance `d̄` |
/// | `seed` | 0 | initial weights and `predict`'s latent draws |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpsParams {
    /// Latent dimension.
    pub z_dim: usize,
    /// Hidden width.
    pub h_dim: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Gradient steps per observed batch.
    pub train_steps: usize,
    /// Latent draws in the likelihood term.
    pub train_samples: usize,
    /// KL weight `β`.
    pub kl_weight: f64,
    /// Prior draws per prediction.
    pub predict_samples: usize,
    /// Target success rate.
    pub target: f64,
    /// Intra-batch diversity weight.
    pub intra_weight: f64,
    /// Inter-step diversity weight.
    pub inter_weight: f64,
    /// Uniform warm-up steps.
    pub warmup_steps: u64,
    /// Pairs sampled to estimate the distance scale.
    pub distance_pairs: usize,
    /// Seed of the initial weights.
    pub seed: u64,
}

impl Default for GpsParams {
    fn default() -> Self {
        Self {
            z_dim: 8,
            h_dim: 32,
            lr: 1e-3,
            train_steps: 2,
            train_samples: 4,
            kl_weight: 1.0,
            predict_samples: 8,
            target: 0.5,
            intra_weight: 0.02,
            inter_weight: 0.01,
            warmup_steps: 0,
            distance_pairs: 256,
            seed: 0,
        }
    }
}

impl GpsParams {
    /// Sets `z_dim`.
    #[must_use]
    pub fn z_dim(mut self, z_dim: usize) -> Self {
        self.z_dim = z_dim;
        self
    }

    /// Sets `h_dim`.
    #[must_use]
    pub fn h_dim(mut self, h_dim: usize) -> Self {
        self.h_dim = h_dim;
        self
    }

    /// Sets `lr`.
    #[must_use]
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }

    /// Sets `train_steps`.
    #[must_use]
    pub fn train_steps(mut self, n: usize) -> Self {
        self.train_steps = n;
        self
    }

    /// Sets `train_samples`.
    #[must_use]
    pub fn train_samples(mut self, n: usize) -> Self {
        self.train_samples = n;
        self
    }

    /// Sets `kl_weight`.
    #[must_use]
    pub fn kl_weight(mut self, beta: f64) -> Self {
        self.kl_weight = beta;
        self
    }

    /// Sets `predict_samples`.
    #[must_use]
    pub fn predict_samples(mut self, m: usize) -> Self {
        self.predict_samples = m;
        self
    }

    /// Sets `target`.
    #[must_use]
    pub fn target(mut self, target: f64) -> Self {
        self.target = target;
        self
    }

    /// Sets both diversity weights (0, 0 = pure intermediate-difficulty top-`B`).
    #[must_use]
    pub fn diversity(mut self, intra: f64, inter: f64) -> Self {
        self.intra_weight = intra;
        self.inter_weight = inter;
        self
    }

    /// Sets `warmup_steps`.
    #[must_use]
    pub fn warmup_steps(mut self, steps: u64) -> Self {
        self.warmup_steps = steps;
        self
    }

    /// Sets `distance_pairs`.
    #[must_use]
    pub fn distance_pairs(mut self, pairs: usize) -> Self {
        self.distance_pairs = pairs;
        self
    }

    /// Sets the seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

impl Params for GpsParams {
    type Error = SelectError;

    /// # Errors
    /// Zero widths/steps/samples, a non-positive learning rate, negative or non-finite weights,
    /// a target outside `[0, 1]`.
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("z_dim", self.z_dim),
            ("h_dim", self.h_dim),
            ("train_steps", self.train_steps),
            ("train_samples", self.train_samples),
            ("predict_samples", self.predict_samples),
        ] {
            if v == 0 || v > 1 << 16 {
                return Err(invalid(name, v, "must lie in 1..=65536"));
            }
        }
        check_lr(self.lr)?;
        for (name, v) in
            [("kl_weight", self.kl_weight), ("intra_weight", self.intra_weight), ("inter_weight", self.inter_weight)]
        {
            if !(v.is_finite() && v >= 0.0) {
                return Err(invalid(name, v, "must be finite and >= 0"));
            }
        }
        if !(0.0..=1.0).contains(&self.target) {
            return Err(invalid("target", self.target, "the target success rate must lie in [0, 1]"));
        }
        Ok(())
    }
}

/// Parameters of [`Gps::allocate`] (test-time compute allocation).
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `bins` | 10 | equal-width bins of predicted success rate on `[0, 1]` | `>= 1` |
/// | `budget` | 0 (set it) | total samples to spend | `[min_samples · N, max_samples · N]`, checked by [`Gps::allocate`] |
/// | `min_samples` | 1 | samples every prompt gets | `<= max_samples` |
/// | `max_samples` | 64 | cap per prompt | |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AllocationParams {
    /// Number of difficulty bins.
    pub bins: usize,
    /// Total sample budget.
    pub budget: usize,
    /// Minimum samples per prompt.
    pub min_samples: usize,
    /// Maximum samples per prompt.
    pub max_samples: usize,
}

impl Default for AllocationParams {
    fn default() -> Self {
        Self { bins: 10, budget: 0, min_samples: 1, max_samples: 64 }
    }
}

impl AllocationParams {
    /// `budget` samples, 10 bins, 1..=64 samples per prompt.
    pub fn with_budget(budget: usize) -> Self {
        Self { budget, ..Self::default() }
    }

    /// Sets `bins`.
    #[must_use]
    pub fn bins(mut self, bins: usize) -> Self {
        self.bins = bins;
        self
    }

    /// Sets `budget`.
    #[must_use]
    pub fn budget(mut self, budget: usize) -> Self {
        self.budget = budget;
        self
    }

    /// Sets the per-prompt range `min_samples..=max_samples`.
    #[must_use]
    pub fn samples(mut self, min_samples: usize, max_samples: usize) -> Self {
        self.min_samples = min_samples;
        self.max_samples = max_samples;
        self
    }
}

impl Params for AllocationParams {
    type Error = SelectError;

    /// # Errors
    /// `bins == 0`, `min_samples > max_samples` (the budget is checked against `N` by
    /// [`Gps::allocate`]).
    fn validate(&self) -> Result<()> {
        if self.bins == 0 {
            return Err(invalid("bins", 0, "need at least one bin"));
        }
        if self.min_samples > self.max_samples {
            return Err(invalid("min_samples", self.min_samples, "must not exceed max_samples"));
        }
        Ok(())
    }
}

/// The result of [`Gps::allocate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// Predicted success rate per prompt.
    pub predicted: Vec<f64>,
    /// Bin index per prompt.
    pub bin: Vec<usize>,
    /// Mean predicted success rate of each bin (`NaN`-free: empty bins hold their centre).
    pub bin_rate: Vec<f64>,
    /// Samples allocated per prompt.
    pub samples: Vec<usize>,
    /// Expected number of prompts solved at least once under the bin rates.
    pub expected_solved: f64,
}

/// GPS (Generalizable Predictive Prompt Selection; "Small Generalizable Prompt Predictive Models
/// Can Steer Efficient RL Post-Training of Large Reasoning Models", ICML 2026, arXiv 2602.01970).
///
/// One small generative model, shared by all prompts, predicts any prompt's success rate from
/// its embedding `e_τ` and a latent context `z_t` summarising the current policy:
///
/// ```text
/// posterior  q_φ(z_t | H_t)      = N(μ, σ) from a set encoder over {(e_τ, γ_τ) : τ ∈ B_t}
/// prior      p_η(z_t | H_{t−1})  = same structure, own weights, over the previous batch (N(0, I) without one)
/// decoder    p_ψ(γ | e_τ, z)     = sigmoid(MLP([e_τ, z]))
/// observe:   maximise  E_q[Σ_τ log Bern(γ_τ; γ̂_τ(z))] − β KL(q_φ(z_t|H_t) ‖ p_η(z_t|H_{t−1}))
///            (cross-entropy on the success rate = the Binomial likelihood up to a constant and
///             the factor k) by `train_steps` Adam steps on φ, η, ψ
/// predict:   z_m ~ p_η(z_{t+1} | H_t),  γ̂_τ = (1/M) Σ_m sigmoid(decoder(e_τ, z_m))   — any prompt, seen or not
/// select:    greedy:  u* = argmax_{u∉S} −(γ̂_u − ½)² + λ_intra Σ_{v∈S} d̃(u,v)/(B−1) + λ_inter min_{w∈B_{t−1}} d̃(u,w)
///            with d̃ = ‖e_u − e_v‖ / d̄ (d̄: mean distance between random candidate pairs)
/// ```
///
/// Differences from the paper (whose code was not available): the set encoder is a mean-pooled
/// MLP (DeepSets) instead of a Transformer; widths are CPU-sized; the diversity terms'
/// normalisation and weights are ours. [`Gps::allocate`] serves the paper's test-time use: bin
/// unseen prompts by `γ̂` and spend a sample budget where it raises the expected number of
/// solved prompts most.
///
/// Embeddings come from the caller as candidate features (e.g. a sentence encoder), or from
/// [`crate::embed::HashedNgramEmbedder`] for demos; [`Gps::with_feature_table`] attaches a
/// table. [`Selection::scores`] holds `γ̂` of the selected prompts.
///
/// # Errors
/// Missing or mis-sized embeddings, outcomes without rewards, the common input errors, libtorch
/// failures; the state is unchanged on error.
///
/// # Example
/// ```
/// use rlvr_select::neural::{Gps, GpsParams};
/// use rlvr_select::{Candidates, NoRollouts, Outcome, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// use rl_core::Params;
/// let mut gps = Gps::new(GpsParams::default().check()?, 4)?;
/// let ids: Vec<u64> = (0..64).collect();
/// let emb: Vec<f32> = (0..256).map(|i| ((i * 37) % 11) as f32 / 11.0).collect();
/// let sel = gps.select(0, Candidates::with_features(&ids, &emb, 4)?, 8, &mut NoRollouts, &mut rng)?;
/// let outcomes: Vec<Outcome> =
///     sel.ids.iter().map(|&id| Outcome::from_successes(id, (id % 9) as usize, 8)).collect::<Result<_, _>>()?;
/// gps.observe(0, &outcomes, &mut rng)?;
/// let p = gps.predict_success(&emb[..8], &mut rng)?; // two prompts, seen or not
/// assert_eq!(p.len(), 2);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug)]
pub struct Gps {
    params: Valid<GpsParams>,
    post_enc: Dense,
    post_head: Dense,
    prior_enc: Dense,
    prior_head: Dense,
    decoder: Dense,
    adam: Adam,
    last: Option<(Vec<f32>, Vec<f32>)>,
    prev: Option<(Vec<f32>, Vec<f32>)>,
    updates: u64,
    features: FeatureMemory,
    scratch: Vec<u64>,
}

#[derive(Serialize)]
struct GpsStateRef<'a> {
    params: &'a GpsParams,
    dim: usize,
    weights: Vec<TensorData>,
    adam: AdamState,
    last: &'a Option<(Vec<f32>, Vec<f32>)>,
    prev: &'a Option<(Vec<f32>, Vec<f32>)>,
    updates: u64,
    features: &'a FeatureMemory,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpsState {
    params: Valid<GpsParams>,
    dim: usize,
    weights: Vec<TensorData>,
    adam: AdamState,
    last: Option<(Vec<f32>, Vec<f32>)>,
    prev: Option<(Vec<f32>, Vec<f32>)>,
    updates: u64,
    features: FeatureMemory,
}

const CHUNK: usize = 16_384;

impl Gps {
    /// A GPS selector for `dim`-dimensional prompt embeddings.
    ///
    /// # Errors
    /// `dim` outside `1..=2^20`.
    pub fn new(params: Valid<GpsParams>, dim: usize) -> Result<Self> {
        let p = *params;
        if dim == 0 || dim > 1 << 20 {
            return Err(invalid("dim", dim, "must lie in 1..=2^20"));
        }
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(p.seed, "gps-init"));
        let (h, z, d) = (p.h_dim as i64, p.z_dim as i64, dim as i64);
        let post_enc = Dense::new(d + 1, &[h], h, &mut rng)?;
        let post_head = Dense::new(h, &[h], 2 * z, &mut rng)?;
        let prior_enc = Dense::new(d + 1, &[h], h, &mut rng)?;
        let prior_head = Dense::new(h, &[h], 2 * z, &mut rng)?;
        let decoder = Dense::new(d + z, &[h, h], 1, &mut rng)?;
        let mut vars = post_enc.params();
        for net in [&post_head, &prior_enc, &prior_head, &decoder] {
            vars.extend(net.params());
        }
        let adam = new_adam(p.lr, vars)?;
        Ok(Self {
            params,
            post_enc,
            post_head,
            prior_enc,
            prior_head,
            decoder,
            adam,
            last: None,
            prev: None,
            updates: 0,
            features: FeatureMemory::new(dim),
            scratch: Vec::new(),
        })
    }

    /// Attaches an embedding table (row `i` = embedding of id `i`). Not part of the saved state.
    ///
    /// # Errors
    /// A table whose length is not a multiple of `dim`, or non-finite values.
    pub fn with_feature_table(mut self, table: Vec<f32>) -> Result<Self> {
        self.features.set_table(table)?;
        Ok(self)
    }

    /// The parameters.
    pub fn params(&self) -> &GpsParams {
        &self.params
    }

    /// Embedding dimension.
    pub fn dim(&self) -> usize {
        self.features.dim
    }

    /// Batches learned from so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    fn vars(&self) -> Vec<&Tensor> {
        let mut v = self.post_enc.params();
        v.extend(self.post_head.params());
        v.extend(self.prior_enc.params());
        v.extend(self.prior_head.params());
        v.extend(self.decoder.params());
        v
    }

    fn check_x(&self, x: &[f32]) -> Result<usize> {
        let d = self.features.dim;
        if x.len() % d != 0 {
            return Err(SelectError::Features(format!(
                "{} floats is not a multiple of the embedding dim {d}",
                x.len()
            )));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(SelectError::Features(format!("embedding value {i} is {}", x[i])));
        }
        Ok(x.len() / d)
    }

    fn gaussian(enc: &Dense, head: &Dense, x: &Tensor, g: &Tensor, z: i64) -> Result<(Tensor, Tensor)> {
        let xy = Tensor::f_cat(&[x, &g.f_unsqueeze(1)?], 1)?;
        let r = enc.forward(&xy)?.f_relu()?.f_mean_dim(Some([0i64].as_slice()), false, Kind::Float)?;
        let out = head.forward(&r)?;
        let mu = out.f_narrow(0, 0, z)?;
        let sigma = out.f_narrow(0, z, z)?.f_sigmoid()?.f_mul_scalar(0.9)?.f_add_scalar(0.1)?;
        Ok((mu, sigma))
    }

    fn batch_tensors(&self, b: &(Vec<f32>, Vec<f32>)) -> Result<(Tensor, Tensor)> {
        Ok((matrix(&b.0, b.1.len(), self.features.dim)?, Tensor::f_from_slice(&b.1)?))
    }

    /// The prior `p_η(z | H)` for a history batch (N(0, I) without one).
    fn prior_of(&self, h: Option<&(Vec<f32>, Vec<f32>)>) -> Result<(Tensor, Tensor)> {
        let z = self.params.z_dim as i64;
        match h {
            Some(b) => {
                let (x, g) = self.batch_tensors(b)?;
                Self::gaussian(&self.prior_enc, &self.prior_head, &x, &g, z)
            }
            None => Ok((
                Tensor::f_zeros([z], (Kind::Float, tch::Device::Cpu))?,
                Tensor::f_ones([z], (Kind::Float, tch::Device::Cpu))?,
            )),
        }
    }

    /// Predicted success rates (mean over `M` draws of `z ~ p_η(z | H_last)`) for row-major
    /// embeddings of prompts, seen in training or not.
    ///
    /// # Errors
    /// Embeddings of the wrong length or non-finite.
    pub fn predict_success(&self, embeddings: &[f32], rng: &mut dyn RngCore) -> Result<Vec<f64>> {
        Ok(self.predict_mean_std(embeddings, rng)?.0)
    }

    fn predict_mean_std(&self, x: &[f32], rng: &mut dyn RngCore) -> Result<(Vec<f64>, Vec<f64>)> {
        let n = self.check_x(x)?;
        let m = self.params.predict_samples;
        let d = self.features.dim;
        tch::no_grad(|| {
            let (mu, sigma) = self.prior_of(self.last.as_ref())?;
            let eps = randn(&[m as i64, self.params.z_dim as i64], rng)?;
            let zs = mu.f_unsqueeze(0)?.f_add(&sigma.f_unsqueeze(0)?.f_mul(&eps)?)?;
            let mut mean = Vec::with_capacity(n);
            let mut std = Vec::with_capacity(n);
            let mut start = 0;
            while start < n {
                let len = CHUNK.min(n - start);
                let xc = matrix(&x[start * d..(start + len) * d], len, d)?;
                let p = self.decoder.forward_pairs(&xc, &zs)?.f_squeeze_dim(-1)?.f_sigmoid()?; // [M, len]
                let mt = p.f_mean_dim(Some([0i64].as_slice()), false, Kind::Float)?;
                mean.extend(TensorData::from_tensor(&mt)?.data.into_iter().map(f64::from));
                if m > 1 {
                    let st = super::nn::std0(&p)?;
                    std.extend(TensorData::from_tensor(&st)?.data.into_iter().map(f64::from));
                } else {
                    std.extend(std::iter::repeat_n(0.0, len));
                }
                start += len;
            }
            Ok((mean, std))
        })
    }

    /// Test-time compute allocation (the paper's reuse of the predictor): predicts `γ̂` for
    /// every candidate, bins prompts into `bins` equal-width bins, and spends the budget greedily
    /// where one more sample most raises the expected number of prompts solved at least once
    /// under the bin's mean rate `p_b`: the `(n+1)`-th sample of a prompt gains `p_b (1 − p_b)^n`.
    /// Hopeless (`p_b ≈ 0`) and trivial (`p_b ≈ 1`) prompts get few samples, challenging but
    /// solvable ones get the most.
    ///
    /// # Errors
    /// A budget below `min_samples · N` or above `max_samples · N`, missing embeddings.
    pub fn allocate(&self, candidates: Candidates<'_>, params: &Valid<AllocationParams>) -> Result<Allocation> {
        let n = candidates.len();
        if params.budget < params.min_samples * n || params.budget > params.max_samples.saturating_mul(n) {
            return Err(invalid("budget", params.budget, "must lie in [min_samples * N, max_samples * N]"));
        }
        let x = self.features.gather_candidates(&candidates)?;
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(self.params.seed ^ 0x414c_4c4f, self.updates));
        let predicted = self.predict_success(&x, &mut rng)?;
        let nb = params.bins;
        let bin: Vec<usize> = predicted.iter().map(|&p| ((p * nb as f64) as usize).min(nb - 1)).collect();
        let mut sum = vec![0.0; nb];
        let mut cnt = vec![0usize; nb];
        for (&b, &p) in bin.iter().zip(&predicted) {
            sum[b] += p;
            cnt[b] += 1;
        }
        let bin_rate: Vec<f64> =
            (0..nb).map(|b| if cnt[b] > 0 { sum[b] / cnt[b] as f64 } else { (b as f64 + 0.5) / nb as f64 }).collect();
        let mut samples = vec![params.min_samples; n];
        let gain = |b: usize, s: usize| {
            let p = bin_rate[b].clamp(0.0, 1.0);
            p * (1.0 - p).powi(s.min(i32::MAX as usize) as i32)
        };
        // max-heap on (gain, then lower position first)
        #[derive(PartialEq)]
        struct Key(f64, usize);
        impl Eq for Key {}
        impl PartialOrd for Key {
            fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Key {
            fn cmp(&self, o: &Self) -> std::cmp::Ordering {
                self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
            }
        }
        let mut heap: std::collections::BinaryHeap<Key> =
            (0..n).filter(|&i| samples[i] < params.max_samples).map(|i| Key(gain(bin[i], samples[i]), i)).collect();
        let mut left = params.budget - params.min_samples * n;
        while left > 0 {
            let Some(Key(_, i)) = heap.pop() else { break };
            samples[i] += 1;
            left -= 1;
            if samples[i] < params.max_samples {
                heap.push(Key(gain(bin[i], samples[i]), i));
            }
        }
        let expected_solved =
            bin.iter().zip(&samples).map(|(&b, &s)| 1.0 - (1.0 - bin_rate[b].clamp(0.0, 1.0)).powi(s as i32)).sum();
        Ok(Allocation { predicted, bin, bin_rate, samples, expected_solved })
    }

    fn train(&mut self, x: Vec<f32>, g: Vec<f32>, rng: &mut dyn RngCore) -> Result<f64> {
        let z = self.params.z_dim as i64;
        let cur = (x, g);
        let (xt, gt) = self.batch_tensors(&cur)?;
        let s = self.params.train_samples as i64;
        let mut loss_value = 0.0;
        for _ in 0..self.params.train_steps {
            let (mu, sigma) = Self::gaussian(&self.post_enc, &self.post_head, &xt, &gt, z)?;
            let (pmu, psigma) = self.prior_of(self.last.as_ref())?;
            let eps = randn(&[s, z], rng)?;
            let zs = mu.f_unsqueeze(0)?.f_add(&sigma.f_unsqueeze(0)?.f_mul(&eps)?)?;
            let logits = self.decoder.forward_pairs(&xt, &zs)?.f_squeeze_dim(-1)?; // [S, N]
            let target = gt.f_unsqueeze(0)?.f_expand_as(&logits)?;
            let bce = logits.f_binary_cross_entropy_with_logits::<Tensor>(&target, None, None, tch::Reduction::None)?;
            let nll = bce.f_mean_dim(Some([0i64].as_slice()), false, Kind::Float)?.f_sum(Kind::Float)?;
            let kl = kl_normal(&mu, &sigma, &pmu, &psigma)?;
            let loss = nll.f_add(&kl.f_mul_scalar(self.params.kl_weight)?)?;
            loss_value = loss.f_double_value(&[])?;
            if !loss_value.is_finite() {
                return Err(SelectError::InvalidState(format!("GPS loss is {loss_value}")));
            }
            self.adam.backward_step(&loss)?;
        }
        // H_{t−1} ← H_t for the next update's prior; H_t also conditions the next prediction.
        self.prev = self.last.take();
        self.last = Some(cur);
        self.updates += 1;
        Ok(loss_value)
    }
}

impl Selector for Gps {
    fn name(&self) -> &'static str {
        "gps"
    }

    fn select(
        &mut self,
        step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.scratch)?;
        let feats = self.features.gather_candidates(&candidates)?;
        let n = candidates.len();
        let d = self.features.dim;
        let p = *self.params;
        let (chosen, pred): (Vec<usize>, Vec<f64>) = if step < p.warmup_steps {
            (rand::seq::index::sample(rng, n, batch_size).into_vec(), vec![0.5; n])
        } else {
            let pred = self.predict_success(&feats, rng)?;
            let utility: Vec<f64> = pred.iter().map(|g| -(g - p.target).powi(2)).collect();
            let dbar = mean_pair_distance(&feats, d, p.distance_pairs, rng);
            let anchors: Vec<f32> = self.features.recent.values().flatten().copied().collect();
            let bonus: Option<Vec<f64>> = if p.inter_weight > 0.0 && !anchors.is_empty() {
                Some(min_distance_to(&feats, &anchors, d).into_iter().map(|m| p.inter_weight * m / dbar).collect())
            } else {
                None
            };
            let scale = if batch_size > 1 { 1.0 / ((batch_size - 1) as f64 * dbar) } else { 0.0 };
            let chosen = greedy_msd(
                &MsdProblem {
                    scores: &utility,
                    features: &feats,
                    dim: d,
                    score_coef: 1.0,
                    weight: p.intra_weight,
                    diversity: Diversity::Sum { scale },
                    bonus: bonus.as_deref(),
                },
                batch_size,
            )?;
            (chosen, pred)
        };
        let ids: Vec<ItemId> = chosen.iter().map(|&q| candidates.ids()[q]).collect();
        self.features.remember(candidates.ids(), &feats, &chosen);
        Ok(Selection { scores: chosen.iter().map(|&q| pred[q]).collect(), ids, ..Selection::default() })
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], rng: &mut dyn RngCore) -> Result<()> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let mut g = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            g.push(success_rate(o)? as f32);
        }
        let ids: Vec<ItemId> = outcomes.iter().map(|o| o.id).collect();
        crate::types::ensure_unique(&ids, "outcomes", &mut self.scratch)?;
        let x = self.features.gather_outcomes(outcomes)?;
        self.train(x, g, rng).map(|_| ())
    }

    fn predict(&self, candidates: Candidates<'_>) -> Result<Option<Vec<Prediction>>> {
        let x = self.features.gather_candidates(&candidates)?;
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(self.params.seed ^ 0x5052_4544, self.updates));
        let (m, s) = self.predict_mean_std(&x, &mut rng)?;
        Ok(Some(
            m.into_iter().zip(s).map(|(mean, std)| Prediction { mean, std: Some(std), class_probs: None }).collect(),
        ))
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(GpsStateRef {
            params: &self.params,
            dim: self.features.dim,
            weights: self.vars().into_iter().map(TensorData::from_tensor).collect::<Result<_>>()?,
            adam: adam_state(&self.adam)?,
            last: &self.last,
            prev: &self.prev,
            updates: self.updates,
            features: &self.features,
        })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: GpsState = serde_json::from_value(state.clone())?;
        let mut new = Gps::new(s.params, s.dim)?;
        if s.features.dim != s.dim {
            return Err(SelectError::InvalidState("GPS feature memory has another dimension".into()));
        }
        for b in [&s.last, &s.prev].into_iter().flatten() {
            if b.1.is_empty() || b.0.len() != b.1.len() * s.dim || b.0.iter().chain(&b.1).any(|v| !v.is_finite()) {
                return Err(SelectError::InvalidState("GPS history batch is inconsistent".into()));
            }
        }
        if s.features.recent.values().any(|f| f.len() != s.dim || f.iter().any(|x| !x.is_finite())) {
            return Err(SelectError::InvalidState(
                "remembered embeddings have the wrong length or are not finite".into(),
            ));
        }
        {
            let mut vars = new.post_enc.params_mut();
            vars.extend(new.post_head.params_mut());
            vars.extend(new.prior_enc.params_mut());
            vars.extend(new.prior_head.params_mut());
            vars.extend(new.decoder.params_mut());
            load_into(&mut vars, &s.weights, "GPS weights")?;
        }
        load_adam(&mut new.adam, &s.adam)?;
        new.last = s.last;
        new.prev = s.prev;
        new.updates = s.updates;
        new.features = s.features;
        new.features.table.clone_from(&self.features.table);
        *self = new;
        Ok(())
    }
}
