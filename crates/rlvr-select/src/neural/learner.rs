//! The neural-process risk learner shared by MPTS and PDTS: a conditional VAE from a task
//! identifier to its adaptation risk, trained by streaming variational inference.

use super::nn::{
    adam_state, check_lr, kl_normal, load_adam, load_into, matrix, new_adam, randn, AdamState, Dense, TensorData,
};
use crate::error::{invalid, Result, SelectError};
use rand::RngCore;
use rl_core::{Params, Valid};
use rl_nn::optim::Adam;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// How the squared errors of a batch are reduced in the learner's loss (`"sum"` / `"mean"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduction {
    /// Sum over the batch (reference sinusoid: `F.mse_loss(..., reduction="sum")`).
    Sum,
    /// Mean over the batch (reference Meta-RL / domain randomisation).
    Mean,
}

/// Parameters of the [`RiskLearner`]. `Default` is the reference sinusoid configuration
/// (thu-rllab/MPTS `sinusoid/`, PDTS forks it).
///
/// A config file may give any subset of the fields; a misspelt field is an error.
///
/// | name | default | reference value |
/// |---|---|---|
/// | `r_dim`, `z_dim`, `h_dim` | 10, 10, 10 | all configs |
/// | `lr` | 5e-4 | sinusoid `risklearner_lr`; Meta-RL / DR 5e-3 |
/// | `train_steps` | 1 | gradient steps per update; Meta-RL / DR `sampler_train_times` 10 |
/// | `train_samples` | 20 | reparameterised `z` draws in the loss; Meta-RL / DR 1 |
/// | `kl_weight` | 1.0 | β of the ELBO; Meta-RL 1e-4, DR 1.0 |
/// | `reduction` | `sum` | MSE reduction; Meta-RL / DR `mean` |
/// | `standardize` | false | `(y − mean) / (std + 1e-8)` within the batch; Meta-RL / DR true |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RiskLearnerParams {
    /// Width of the per-point representation `r_i`.
    pub r_dim: usize,
    /// Dimension of the latent `z`.
    pub z_dim: usize,
    /// Hidden width of encoder and decoder.
    pub h_dim: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Gradient steps per [`RiskLearner::update`].
    pub train_steps: usize,
    /// Latent draws averaged in the likelihood term.
    pub train_samples: usize,
    /// Weight β of the KL term.
    pub kl_weight: f64,
    /// Reduction of the squared errors.
    pub reduction: Reduction,
    /// Standardise the targets within each batch.
    pub standardize: bool,
}

impl Default for RiskLearnerParams {
    fn default() -> Self {
        Self::sinusoid()
    }
}

impl RiskLearnerParams {
    /// The reference sinusoid configuration (the default).
    pub fn sinusoid() -> Self {
        Self {
            r_dim: 10,
            z_dim: 10,
            h_dim: 10,
            lr: 5e-4,
            train_steps: 1,
            train_samples: 20,
            kl_weight: 1.0,
            reduction: Reduction::Sum,
            standardize: false,
        }
    }

    /// The reference domain-randomisation configuration (`DR/mpmodel`): lr 5e-3, 10 steps,
    /// one latent draw, KL weight 1, mean reduction, standardised targets.
    pub fn domain_randomisation() -> Self {
        Self {
            lr: 5e-3,
            train_steps: 10,
            train_samples: 1,
            reduction: Reduction::Mean,
            standardize: true,
            ..Self::sinusoid()
        }
    }

    /// The reference Meta-RL configuration (`MetaRL/MPModel`): as domain randomisation with KL
    /// weight 1e-4.
    pub fn meta_rl() -> Self {
        Self { kl_weight: 1e-4, ..Self::domain_randomisation() }
    }

    /// Sets the widths `r_dim`, `z_dim`, `h_dim`.
    #[must_use]
    pub fn dims(mut self, r_dim: usize, z_dim: usize, h_dim: usize) -> Self {
        self.r_dim = r_dim;
        self.z_dim = z_dim;
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

    /// Sets `reduction`.
    #[must_use]
    pub fn reduction(mut self, reduction: Reduction) -> Self {
        self.reduction = reduction;
        self
    }

    /// Sets `standardize`.
    #[must_use]
    pub fn standardize(mut self, on: bool) -> Self {
        self.standardize = on;
        self
    }
}

impl Params for RiskLearnerParams {
    type Error = SelectError;

    /// # Errors
    /// Zero widths/steps/samples, a non-positive learning rate, a negative KL weight.
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("r_dim", self.r_dim),
            ("z_dim", self.z_dim),
            ("h_dim", self.h_dim),
            ("train_steps", self.train_steps),
            ("train_samples", self.train_samples),
        ] {
            if v == 0 || v > 1 << 20 {
                return Err(invalid(name, v, "must lie in 1..=2^20"));
            }
        }
        check_lr(self.lr)?;
        if !(self.kl_weight.is_finite() && self.kl_weight >= 0.0) {
            return Err(invalid("kl_weight", self.kl_weight, "must be finite and >= 0"));
        }
        Ok(())
    }
}

/// The risk learner of MPTS/PDTS (a neural process with a global latent).
///
/// ```text
/// encoder     r_i = MLP_{h,h}([x_i, ℓ_i]) ∈ R^r,  r = mean_i r_i
/// posterior   h = relu(W r);  q(z | H_t) = N(μ = W_μ h, σ = 0.1 + 0.9 sigmoid(W_σ h))
/// decoder     ℓ̂(x, z) = MLP_{h,h,h}([x, z])
/// update(H_t) minimises  Σ_i (mean_s ℓ̂(x_i, z_s) − ℓ_i)² + β KL(q(z|H_t) ‖ p_t),  z_s ~ q
///             then p_{t+1} ← stop_grad(q(z|H_t))     (streaming VI; p_0 = N(0, I))
/// predict(x)  z_m ~ q(z | H_last) re-encoded with the current weights (p_0 before any update),
///             ℓ̂_m(x) = decoder(x, z_m), m = 1..M
/// ```
///
/// All latent noise comes from the RNG passed in, so results are reproducible and state
/// round-trips exactly through [`RiskLearner::state`] / [`RiskLearner::from_state`].
///
/// # Example
/// ```
/// use rlvr_select::neural::{RiskLearner, RiskLearnerParams};
/// let mut rng = rl_core::rng_from_seed(0);
/// use rl_core::Params;
/// let mut learner = RiskLearner::new(2, RiskLearnerParams::default().check()?, 0)?;
/// let x = [0.0f32, 0.0, 1.0, 1.0, 2.0, 0.5];
/// learner.update(&x, &[0.1, 0.5, 0.9], &mut rng)?;
/// let (mean, std) = learner.predict(&x, 20, &mut rng)?;
/// assert_eq!((mean.len(), std.len()), (3, 3));
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug)]
pub struct RiskLearner {
    x_dim: usize,
    params: Valid<RiskLearnerParams>,
    encoder: Dense,
    musigma: Dense,
    decoder: Dense,
    adam: Adam,
    prior_mu: Vec<f32>,
    prior_sigma: Vec<f32>,
    last_x: Option<Vec<f32>>,
    last_y: Option<Vec<f32>>,
    updates: u64,
}

/// The saved state of a [`RiskLearner`] (weights, optimiser moments, prior, last batch): plain
/// data, turned back into a learner only by [`RiskLearner::from_state`], which checks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RiskLearnerState {
    /// Identifier dimension.
    pub x_dim: usize,
    /// Parameters.
    pub params: RiskLearnerParams,
    /// Network weights (encoder, posterior head, decoder; weight then bias per layer).
    pub weights: Vec<TensorData>,
    /// Adam moments.
    pub adam: AdamState,
    /// Prior mean.
    pub prior_mu: Vec<f32>,
    /// Prior standard deviation.
    pub prior_sigma: Vec<f32>,
    /// Identifiers of the last batch (row-major).
    pub last_x: Option<Vec<f32>>,
    /// Targets of the last batch (as trained on).
    pub last_y: Option<Vec<f32>>,
    /// Updates so far.
    pub updates: u64,
}

/// Rows of at most this many candidates are decoded at once (bounds memory at 10^5+).
const CHUNK: usize = 16_384;

impl RiskLearner {
    /// A learner for `x_dim`-dimensional identifiers, weights drawn from `seed`.
    ///
    /// # Errors
    /// `x_dim` outside `1..=2^20`.
    pub fn new(x_dim: usize, params: Valid<RiskLearnerParams>, seed: u64) -> Result<Self> {
        let p = *params;
        if x_dim == 0 || x_dim > 1 << 20 {
            return Err(invalid("x_dim", x_dim, "must lie in 1..=2^20"));
        }
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "risk-learner-init"));
        let (r, z, h, d) = (p.r_dim as i64, p.z_dim as i64, p.h_dim as i64, x_dim as i64);
        let encoder = Dense::new(d + 1, &[h, h], r, &mut rng)?;
        let musigma = Dense::new(r, &[r], 2 * z, &mut rng)?;
        let decoder = Dense::new(d + z, &[h, h, h], 1, &mut rng)?;
        let mut vars = encoder.params();
        vars.extend(musigma.params());
        vars.extend(decoder.params());
        let adam = new_adam(p.lr, vars)?;
        Ok(Self {
            x_dim,
            params,
            encoder,
            musigma,
            decoder,
            adam,
            prior_mu: vec![0.0; p.z_dim],
            prior_sigma: vec![1.0; p.z_dim],
            last_x: None,
            last_y: None,
            updates: 0,
        })
    }

    /// Identifier dimension.
    pub fn x_dim(&self) -> usize {
        self.x_dim
    }

    /// Parameters.
    pub fn params(&self) -> &RiskLearnerParams {
        &self.params
    }

    /// Updates done so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The current prior `(μ, σ)` of `z` (the detached posterior of the last update).
    pub fn prior(&self) -> (&[f32], &[f32]) {
        (&self.prior_mu, &self.prior_sigma)
    }

    fn vars(&self) -> Vec<&Tensor> {
        let mut v = self.encoder.params();
        v.extend(self.musigma.params());
        v.extend(self.decoder.params());
        v
    }

    fn vars_mut(&mut self) -> Vec<&mut Tensor> {
        let mut v = self.encoder.params_mut();
        v.extend(self.musigma.params_mut());
        v.extend(self.decoder.params_mut());
        v
    }

    fn check_x(&self, x: &[f32], what: &'static str) -> Result<usize> {
        if x.len() % self.x_dim != 0 {
            return Err(SelectError::Features(format!(
                "{what}: {} floats is not a multiple of x_dim {}",
                x.len(),
                self.x_dim
            )));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(SelectError::Features(format!("{what}: value {i} is {}", x[i])));
        }
        Ok(x.len() / self.x_dim)
    }

    /// `q(z | (x, y))`: `(μ, σ)` tensors of shape `[z_dim]`.
    fn posterior(&self, x: &Tensor, y: &Tensor) -> Result<(Tensor, Tensor)> {
        let xy = Tensor::f_cat(&[x, &y.f_unsqueeze(1)?], 1)?;
        let r = self.encoder.forward(&xy)?.f_mean_dim(Some([0i64].as_slice()), false, Kind::Float)?;
        let out = self.musigma.forward(&r)?;
        let z = self.params.z_dim as i64;
        let mu = out.f_narrow(0, 0, z)?;
        let sigma = out.f_narrow(0, z, z)?.f_sigmoid()?.f_mul_scalar(0.9)?.f_add_scalar(0.1)?;
        Ok((mu, sigma))
    }

    /// The posterior `q(z | H)` of a batch under the current weights, as `(μ, σ)`.
    ///
    /// # Errors
    /// As [`RiskLearner::update`] (without changing anything).
    pub fn posterior_of(&self, x: &[f32], y: &[f32]) -> Result<(Vec<f32>, Vec<f32>)> {
        let n = self.check_x(x, "identifiers")?;
        if n == 0 || y.len() != n || y.iter().any(|v| !v.is_finite()) {
            return Err(invalid("risks", y.len(), "need one finite risk per identifier row (at least one)"));
        }
        tch::no_grad(|| {
            let (mu, sigma) = self.posterior(&matrix(x, n, self.x_dim)?, &Tensor::f_from_slice(y)?)?;
            Ok((TensorData::from_tensor(&mu)?.data, TensorData::from_tensor(&sigma)?.data))
        })
    }

    /// One streaming-VI update on a batch `H_t` of identifiers `x` (`n * x_dim`, row-major) and
    /// risks `y` (`n`). Returns the loss of the last gradient step.
    ///
    /// # Errors
    /// An empty batch, mismatched lengths, non-finite values; the learner is unchanged then.
    pub fn update(&mut self, x: &[f32], y: &[f32], rng: &mut dyn RngCore) -> Result<f64> {
        let n = self.check_x(x, "update identifiers")?;
        if n == 0 {
            return Err(invalid("batch", 0, "an update needs at least one (x, risk) pair"));
        }
        if y.len() != n {
            return Err(invalid("risks", y.len(), "need one risk per identifier row"));
        }
        if let Some(v) = y.iter().find(|v| !v.is_finite()) {
            return Err(invalid("risk", v, "risks must be finite"));
        }
        let mut y = y.to_vec();
        if self.params.standardize {
            let m = y.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
            let sd = if n > 1 {
                (y.iter().map(|&v| (f64::from(v) - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
            } else {
                0.0
            };
            for v in &mut y {
                *v = ((f64::from(*v) - m) / (sd + 1e-8)) as f32;
            }
        }
        let xt = matrix(x, n, self.x_dim)?;
        let yt = Tensor::f_from_slice(&y)?;
        let prior_mu = Tensor::f_from_slice(&self.prior_mu)?;
        let prior_sigma = Tensor::f_from_slice(&self.prior_sigma)?;
        let s = self.params.train_samples as i64;
        let mut loss_value = 0.0;
        let mut last_q = None;
        for _ in 0..self.params.train_steps {
            let (mu, sigma) = self.posterior(&xt, &yt)?;
            let eps = randn(&[s, self.params.z_dim as i64], rng)?;
            let zs = mu.f_unsqueeze(0)?.f_add(&sigma.f_unsqueeze(0)?.f_mul(&eps)?)?;
            let pred = self.decoder.forward_pairs(&xt, &zs)?.f_squeeze_dim(-1)?; // [S, N]
            let mean_pred = pred.f_mean_dim(Some([0i64].as_slice()), false, Kind::Float)?;
            let se = mean_pred.f_sub(&yt)?.f_square()?;
            let nll = match self.params.reduction {
                Reduction::Sum => se.f_sum(Kind::Float)?,
                Reduction::Mean => se.f_mean(Kind::Float)?,
            };
            let kl = kl_normal(&mu, &sigma, &prior_mu, &prior_sigma)?;
            let loss = nll.f_add(&kl.f_mul_scalar(self.params.kl_weight)?)?;
            loss_value = loss.f_double_value(&[])?;
            if !loss_value.is_finite() {
                return Err(SelectError::InvalidState(format!("risk-learner loss is {loss_value}")));
            }
            self.adam.backward_step(&loss)?;
            last_q = Some((TensorData::from_tensor(&mu)?.data, TensorData::from_tensor(&sigma)?.data));
        }
        if let Some((m, s)) = last_q {
            self.prior_mu = m;
            self.prior_sigma = s;
        }
        self.last_x = Some(x.to_vec());
        self.last_y = Some(y);
        self.updates += 1;
        Ok(loss_value)
    }

    /// `M` latent draws for acquisition: from `q(z | H_last)` re-encoded with the current
    /// weights, or from the prior before any update. Shape `[M, z_dim]`.
    fn latent_draws(&self, m: usize, rng: &mut dyn RngCore) -> Result<Tensor> {
        let (mu, sigma) = match (&self.last_x, &self.last_y) {
            (Some(x), Some(y)) => {
                let n = y.len();
                self.posterior(&matrix(x, n, self.x_dim)?, &Tensor::f_from_slice(y)?)?
            }
            _ => (Tensor::f_from_slice(&self.prior_mu)?, Tensor::f_from_slice(&self.prior_sigma)?),
        };
        let eps = randn(&[m as i64, self.params.z_dim as i64], rng)?;
        Ok(mu.f_unsqueeze(0)?.f_add(&sigma.f_unsqueeze(0)?.f_mul(&eps)?)?)
    }

    /// Decoded risks for `M` latent draws: `M * n` values, row `m` = draw `m` (candidate-major
    /// inside a row).
    ///
    /// # Errors
    /// `m == 0`, identifiers of the wrong length or non-finite.
    pub fn sample_risks(&self, x: &[f32], m: usize, rng: &mut dyn RngCore) -> Result<Vec<f32>> {
        let n = self.check_x(x, "candidate identifiers")?;
        if m == 0 {
            return Err(invalid("samples", 0, "need at least one latent draw"));
        }
        tch::no_grad(|| -> Result<Vec<f32>> {
            let zs = self.latent_draws(m, rng)?;
            let mut out = vec![0f32; m * n];
            let mut start = 0;
            while start < n {
                let len = CHUNK.min(n - start);
                let xc = matrix(&x[start * self.x_dim..(start + len) * self.x_dim], len, self.x_dim)?;
                let pred = self.decoder.forward_pairs(&xc, &zs)?.f_squeeze_dim(-1)?; // [M, len]
                let v = TensorData::from_tensor(&pred)?.data;
                for j in 0..m {
                    out[j * n + start..j * n + start + len].copy_from_slice(&v[j * len..(j + 1) * len]);
                }
                start += len;
            }
            Ok(out)
        })
    }

    /// Predictive mean and standard deviation (Bessel-corrected, as `torch.std`; 0 when
    /// `m == 1`) of the risk of each identifier row over `m` latent draws.
    ///
    /// # Errors
    /// As [`RiskLearner::sample_risks`].
    pub fn predict(&self, x: &[f32], m: usize, rng: &mut dyn RngCore) -> Result<(Vec<f32>, Vec<f32>)> {
        let draws = self.sample_risks(x, m, rng)?;
        Ok(mean_std(&draws, m))
    }

    /// The exact state.
    ///
    /// # Errors
    /// A libtorch failure while copying tensors.
    pub fn state(&self) -> Result<RiskLearnerState> {
        Ok(RiskLearnerState {
            x_dim: self.x_dim,
            params: *self.params,
            weights: self.vars().into_iter().map(TensorData::from_tensor).collect::<Result<_>>()?,
            adam: adam_state(&self.adam)?,
            prior_mu: self.prior_mu.clone(),
            prior_sigma: self.prior_sigma.clone(),
            last_x: self.last_x.clone(),
            last_y: self.last_y.clone(),
            updates: self.updates,
        })
    }

    /// A learner restored from `state`.
    ///
    /// # Errors
    /// [`SelectError::InvalidParameter`] for invalid parameters, [`SelectError::InvalidState`]
    /// on inconsistent shapes or values.
    pub fn from_state(state: &RiskLearnerState) -> Result<Self> {
        let mut s = Self::new(state.x_dim, state.params.check()?, 0)?;
        let z = s.params.z_dim;
        if state.prior_mu.len() != z || state.prior_sigma.len() != z {
            return Err(SelectError::InvalidState(format!("risk learner prior must have z_dim = {z} entries")));
        }
        if state.prior_mu.iter().any(|v| !v.is_finite())
            || state.prior_sigma.iter().any(|v| !(v.is_finite() && *v > 0.0))
        {
            return Err(SelectError::InvalidState("risk learner prior must be finite with σ > 0".into()));
        }
        match (&state.last_x, &state.last_y) {
            (Some(x), Some(y)) => {
                if y.is_empty() || x.len() != y.len() * state.x_dim || x.iter().chain(y).any(|v| !v.is_finite()) {
                    return Err(SelectError::InvalidState("risk learner last batch is inconsistent".into()));
                }
            }
            (None, None) => {}
            _ => return Err(SelectError::InvalidState("risk learner last batch needs both x and y".into())),
        }
        load_into(&mut s.vars_mut(), &state.weights, "risk learner weights")?;
        load_adam(&mut s.adam, &state.adam)?;
        s.prior_mu.clone_from(&state.prior_mu);
        s.prior_sigma.clone_from(&state.prior_sigma);
        s.last_x.clone_from(&state.last_x);
        s.last_y.clone_from(&state.last_y);
        s.updates = state.updates;
        Ok(s)
    }
}

/// Column mean and Bessel-corrected std of an `m × n` row-major matrix (std 0 when `m == 1`).
pub(crate) fn mean_std(draws: &[f32], m: usize) -> (Vec<f32>, Vec<f32>) {
    let n = draws.len().checked_div(m).unwrap_or(0);
    let mut mean = vec![0f64; n];
    for j in 0..m {
        for (acc, &v) in mean.iter_mut().zip(&draws[j * n..(j + 1) * n]) {
            *acc += f64::from(v);
        }
    }
    for v in &mut mean {
        *v /= m as f64;
    }
    let mut var = vec![0f64; n];
    if m > 1 {
        for j in 0..m {
            for ((acc, &v), mu) in var.iter_mut().zip(&draws[j * n..(j + 1) * n]).zip(&mean) {
                *acc += (f64::from(v) - mu).powi(2);
            }
        }
        for v in &mut var {
            *v /= (m - 1) as f64;
        }
    }
    (mean.iter().map(|&v| v as f32).collect(), var.iter().map(|&v| v.sqrt() as f32).collect())
}
