//! The decision transformer bidder (feature `tch`): AuctionNet's DT baseline
//! (`strategy_train_env/bidding_train_env/baseline/dt/dt.py`, `dt/utils.py`,
//! `run/run_decision_transformer.py`; Chen et al., "Decision Transformer: Reinforcement Learning
//! via Sequence Modeling", arXiv 2106.01345).
//!
//! Each step of a window of `K` ticks contributes three tokens (return-to-go, state, action), each
//! an embedding plus a learned per-tick embedding; after a LayerNorm the `3K` tokens pass a
//! causal transformer, and the action at tick `t` is read from the output of the state token
//! `t`:
//!
//! ```text
//! minimise  E [ Σ_t mask_t (â_t − a_t)² / Σ_t mask_t ],   â_t = W · h(s_t-token | R_≤t, s_≤t, a_<t)
//! ```
//!
//! with `R_t = Σ_{i ≥ t} r_i / return_scale` (undiscounted conversions-to-go). Windows start at a
//! uniform tick of a trajectory drawn with probability ∝ its length, and are left-padded
//! (state 0, action −10, return 0, mask 0). At bidding time the first return is the target and
//! each later one is the previous minus the last tick's conversions / `return_scale`.
//!
//! What differs from AuctionNet, and why (each a parameter):
//! - `return_scale` and `target_return`: AuctionNet divides returns by 2000 and targets 4 (8000
//!   conversions, the top of its data). Our markets have far fewer conversions per advertiser,
//!   so by default the scale is the largest return in the training data and the target 1.0
//!   (the best logged return) — reconstructed.
//! - `cpa_relative` (default on): the action is `α / CPA`, as our BC baseline, because the state
//!   holds no CPA; AuctionNet regresses `α`. Targets are clipped to `[0, max_target]`.
//! - The unused reward, state and return prediction heads of AuctionNet's model are omitted
//!   (they do not enter the loss or the action).

use std::path::Path;
use std::sync::Arc;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::bidder::{write_linear_bids, Bidder, PeriodInfo, TickContext, STATE_DIM};
use crate::dataset::TrajectoryDataset;
use crate::error::{check_positive, AigbError, Result};
use crate::nn::{CausalTransformer, LayerNorm, Linear, TransformerParams, Weights};
use crate::policy::StateNorm;
use rl_core::Params;
use rl_nn::init::{self, Init};
use rl_nn::optim::{Adam, AdamParams};

/// Checkpoint format version of [`DtTrainer`].
pub const DT_FORMAT_VERSION: u32 = 1;
const DT_KIND: &str = "aigb.dt_trainer";

/// Parameters of [`DtTrainer`] (defaults: AuctionNet's DT).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `transformer` | d 64, 3 layers, 1 head, MLP 512, dropout 0.1 | the causal transformer ([`TransformerParams`]) | see there |
/// | `context` | 10 | window length `K` (AuctionNet's `K`) | ≥ 1 |
/// | `max_ep_len` | 96 | size of the tick embedding table | ≥ ticks per period |
/// | `lr` | 1e-4 | AdamW step size | > 0 |
/// | `weight_decay` | 1e-4 | AdamW decoupled weight decay | ≥ 0 |
/// | `warmup_steps` | 10 000 | linear warm-up `lr · min((step + 1) / warmup, 1)` | ≥ 1 |
/// | `grad_clip` | 0.25 | global gradient-norm clip | > 0 |
/// | `batch_size` | 32 | windows per step | ≥ 1 |
/// | `return_scale` | none = largest return in the data | returns are divided by it (AuctionNet: 2000) | > 0 |
/// | `target_return` | 1.0 | first return-to-go at bidding time, in scaled units (AuctionNet: 4) | > 0 |
/// | `cpa_relative` | true | the action is `α / CPA` (AuctionNet: `α`) | |
/// | `max_target` | 10 | action targets clipped to `[0, max_target]` | > 0 |
/// | `seed` | 0 | initialisation, batches and dropout | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DtParams {
    /// Transformer sizes.
    pub transformer: TransformerParams,
    /// Window length.
    pub context: usize,
    /// Tick embedding table size.
    pub max_ep_len: usize,
    /// Learning rate.
    pub lr: f64,
    /// Weight decay.
    pub weight_decay: f64,
    /// Warm-up steps.
    pub warmup_steps: u64,
    /// Gradient clip.
    pub grad_clip: f64,
    /// Batch size.
    pub batch_size: usize,
    /// Return scale (none: the largest return of the data).
    pub return_scale: Option<f64>,
    /// Target return (scaled).
    pub target_return: f64,
    /// Action is α / CPA.
    pub cpa_relative: bool,
    /// Target clip.
    pub max_target: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for DtParams {
    fn default() -> Self {
        Self {
            transformer: TransformerParams::default(),
            context: 10,
            max_ep_len: 96,
            lr: 1e-4,
            weight_decay: 1e-4,
            warmup_steps: 10_000,
            grad_clip: 0.25,
            batch_size: 32,
            return_scale: None,
            target_return: 1.0,
            cpa_relative: true,
            max_target: 10.0,
            seed: 0,
        }
    }
}

crate::traffic::setters!(DtParams {
    transformer: TransformerParams,
    context: usize,
    max_ep_len: usize,
    lr: f64,
    weight_decay: f64,
    warmup_steps: u64,
    grad_clip: f64,
    batch_size: usize,
    return_scale: Option<f64>,
    target_return: f64,
    cpa_relative: bool,
    max_target: f64,
    seed: u64,
});

impl rl_core::Params for DtParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        self.transformer.validate().map_err(|e| e.nested("transformer"))?;
        for (name, v) in [("context", self.context), ("max_ep_len", self.max_ep_len), ("batch_size", self.batch_size)] {
            if v == 0 {
                return Err(AigbError::invalid(name, 0, "must be >= 1"));
            }
        }
        if self.warmup_steps == 0 {
            return Err(AigbError::invalid("warmup_steps", 0, "must be >= 1"));
        }
        check_positive("lr", self.lr)?;
        crate::error::check_range("weight_decay", self.weight_decay, 0.0, f64::INFINITY)?;
        check_positive("grad_clip", self.grad_clip)?;
        if let Some(s) = self.return_scale {
            check_positive("return_scale", s)?;
        }
        check_positive("target_return", self.target_return)?;
        check_positive("max_target", self.max_target)?;
        Ok(())
    }
}

/// The network: token embeddings, the transformer, the action head.
#[derive(Debug)]
struct DtModel {
    embed_timestep: Tensor,
    embed_return: Linear,
    embed_state: Linear,
    embed_action: Linear,
    embed_ln: LayerNorm,
    transformer: CausalTransformer,
    predict_action: Linear,
    h: i64,
}

impl DtModel {
    fn new(vs: &VarStore, p: &DtParams, rng: &mut rl_core::SeededRng) -> Result<Self> {
        let root = vs.root();
        let h = p.transformer.d_model;
        let max_ep_len = p.max_ep_len as i64;
        // nn.Embedding's default: N(0, 1)
        let embed_timestep =
            init::var(&root, "embed_timestep.weight", &[max_ep_len, h], Init::Normal { mean: 0.0, std: 1.0 }, rng)?;
        let embed_return = Linear::new(&root, "embed_return", 1, h, rng)?;
        let embed_state = Linear::new(&root, "embed_state", STATE_DIM as i64, h, rng)?;
        let embed_action = Linear::new(&root, "embed_action", 1, h, rng)?;
        let embed_ln = LayerNorm::new(&root, "embed_ln", h, rng)?;
        let transformer = CausalTransformer::new(&root.sub("transformer"), &p.transformer, rng)?;
        let predict_action = Linear::new(&root, "predict_action", h, 1, rng)?;
        Ok(Self { embed_timestep, embed_return, embed_state, embed_action, embed_ln, transformer, predict_action, h })
    }

    /// states `[B, K, 16]`, actions `[B, K, 1]`, returns `[B, K, 1]`, timesteps `[B, K]` (int64),
    /// mask `[B, K]` → action predictions `[B, K, 1]`.
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &self,
        states: &Tensor,
        actions: &Tensor,
        returns: &Tensor,
        timesteps: &Tensor,
        mask: &Tensor,
        train: bool,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Tensor> {
        let size = states.size();
        let (b, k) = (size[0], size[1]);
        let time = self.embed_timestep.f_index_select(0, &timesteps.f_reshape([-1])?)?.f_view([b, k, self.h])?;
        let s = self.embed_state.forward(states)?.f_add(&time)?;
        let a = self.embed_action.forward(actions)?.f_add(&time)?;
        let r = self.embed_return.forward(returns)?.f_add(&time)?;
        let x = Tensor::f_stack(&[r, s, a], 2)?.f_reshape([b, 3 * k, self.h])?;
        let x = self.embed_ln.forward(&x)?;
        let m = Tensor::f_stack(&[mask, mask, mask], 2)?.f_reshape([b, 3 * k])?;
        let y = self.transformer.forward(&x, &m, train, rng)?.f_view([b, k, 3, self.h])?;
        self.predict_action.forward(&y.f_select(2, 1)?)
    }
}

/// One training trajectory in model units.
#[derive(Debug, Clone)]
struct DtTraj {
    states: Vec<[f32; STATE_DIM]>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
}

/// A fixed-size batch of windows, host side.
struct Windows {
    states: Vec<f32>,
    actions: Vec<f32>,
    returns: Vec<f32>,
    timesteps: Vec<i64>,
    mask: Vec<f32>,
}

#[derive(Serialize)]
struct DtStateRef<'a> {
    params: &'a DtParams,
    norm: &'a StateNorm,
    return_scale: f64,
    data_fingerprint: u64,
    steps: u64,
    rng: &'a rl_core::SeededRng,
}

#[derive(Deserialize)]
struct DtState {
    params: rl_core::Valid<DtParams>,
    norm: StateNorm,
    return_scale: f64,
    data_fingerprint: u64,
    steps: u64,
    rng: rl_core::SeededRng,
}

/// Trains a decision transformer on logged trajectories (CPU).
#[derive(Debug)]
pub struct DtTrainer {
    params: rl_core::Valid<DtParams>,
    vs: VarStore,
    model: DtModel,
    opt: Adam,
    norm: StateNorm,
    trajs: Vec<DtTraj>,
    cum_len: Vec<f64>,
    return_scale: f64,
    fingerprint: u64,
    rng: rl_core::SeededRng,
    steps: u64,
}

impl DtTrainer {
    /// A trainer on `data` (trajectories up to their first `done`; AuctionNet drops
    /// one-step trajectories, and so do we).
    ///
    /// # Errors
    /// [`AigbError::Empty`] without a trajectory of two or more steps;
    /// [`AigbError::InvalidParameter`] if a trajectory is longer than `max_ep_len`; network
    /// construction errors.
    pub fn new(params: rl_core::Valid<DtParams>, data: &TrajectoryDataset) -> Result<Self> {
        let mut raw = Vec::new();
        let mut kept = Vec::new();
        for tr in &data.trajectories {
            let n = tr.active_len();
            if n < 2 {
                continue;
            }
            if n > params.max_ep_len {
                return Err(AigbError::invalid("max_ep_len", params.max_ep_len, format!("a trajectory has {n} steps")));
            }
            raw.extend(tr.steps[..n].iter().map(|s| s.state));
            kept.push(tr);
        }
        if kept.is_empty() {
            return Err(AigbError::Empty { what: "trajectories with two or more steps".into() });
        }
        let norm = StateNorm::fit(&raw)?;
        let trajs: Vec<DtTraj> = kept
            .iter()
            .map(|tr| {
                let n = tr.active_len();
                DtTraj {
                    states: tr.steps[..n].iter().map(|s| norm.apply(&s.state)).collect(),
                    actions: tr.steps[..n]
                        .iter()
                        .map(|s| {
                            let a = if params.cpa_relative { s.action / tr.cpa } else { s.action };
                            a.clamp(0.0, params.max_target) as f32
                        })
                        .collect(),
                    rewards: tr.steps[..n].iter().map(|s| s.reward as f32).collect(),
                }
            })
            .collect();
        let max_ret = trajs.iter().map(|t| t.rewards.iter().map(|&r| f64::from(r)).sum::<f64>()).fold(0.0, f64::max);
        let return_scale = params.return_scale.unwrap_or(if max_ret > 0.0 { max_ret } else { 1.0 });
        let mut cum_len = Vec::with_capacity(trajs.len());
        let mut acc = 0.0;
        for t in &trajs {
            acc += t.states.len() as f64;
            cum_len.push(acc);
        }
        let fingerprint = fingerprint(&trajs);
        let mut init_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "dt-init"));
        let vs = VarStore::new(Device::Cpu);
        let model = DtModel::new(&vs, &params, &mut init_rng)?;
        let opt = Adam::for_var_store(
            AdamParams::adamw()
                .lr(params.lr / params.warmup_steps as f64)
                .weight_decay(params.weight_decay)
                .max_grad_norm(Some(params.grad_clip))
                .check()?,
            &vs,
        )?;
        let rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "dt-train"));
        Ok(Self { params, vs, model, opt, norm, trajs, cum_len, return_scale, fingerprint, rng, steps: 0 })
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The return scale in use.
    pub fn return_scale(&self) -> f64 {
        self.return_scale
    }

    fn sample(&mut self) -> Windows {
        let (b, k) = (self.params.batch_size, self.params.context);
        let total = self.cum_len.last().copied().unwrap_or(1.0);
        let mut w = Windows {
            states: vec![0.0; b * k * STATE_DIM],
            actions: vec![-10.0; b * k],
            returns: vec![0.0; b * k],
            timesteps: vec![0; b * k],
            mask: vec![0.0; b * k],
        };
        for j in 0..b {
            let u = self.rng.random::<f64>() * total;
            let i = self.cum_len.partition_point(|&c| c <= u).min(self.trajs.len() - 1);
            let tr = &self.trajs[i];
            let n = tr.states.len();
            let start = self.rng.random_range(0..n);
            let len = (n - start).min(k);
            let pad = k - len;
            let mut rtg: f64 = tr.rewards[start..].iter().map(|&r| f64::from(r)).sum();
            for q in 0..len {
                let t = start + q;
                let o = j * k + pad + q;
                w.states[o * STATE_DIM..(o + 1) * STATE_DIM].copy_from_slice(&tr.states[t]);
                w.actions[o] = tr.actions[t];
                w.returns[o] = (rtg / self.return_scale) as f32;
                rtg -= f64::from(tr.rewards[t]);
                w.timesteps[o] = t.min(self.params.max_ep_len - 1) as i64;
                w.mask[o] = 1.0;
            }
        }
        w
    }

    fn loss(&mut self, w: &Windows, train: bool) -> Result<Tensor> {
        let (b, k) = (self.params.batch_size as i64, self.params.context as i64);
        let s = Tensor::f_from_slice(&w.states)?.f_view([b, k, STATE_DIM as i64])?;
        let a = Tensor::f_from_slice(&w.actions)?.f_view([b, k, 1])?;
        let r = Tensor::f_from_slice(&w.returns)?.f_view([b, k, 1])?;
        let t = Tensor::f_from_slice(&w.timesteps)?.f_view([b, k])?;
        let m = Tensor::f_from_slice(&w.mask)?.f_view([b, k])?;
        let pred = self.model.forward(&s, &a, &r, &t, &m, train, &mut self.rng)?.f_view([b, k])?;
        let se = (pred - a.f_view([b, k])?).f_square()?.f_mul(&m)?;
        Ok(se.f_sum(Kind::Float)?.f_div(&m.f_sum(Kind::Float)?.f_clamp_min(1.0)?)?)
    }

    /// Runs `steps` AdamW steps (with AuctionNet's warm-up); `on_step(step, loss)` sees each loss.
    ///
    /// # Errors
    /// libtorch failures; a non-finite gradient norm.
    pub fn train(&mut self, steps: usize, on_step: &mut dyn FnMut(u64, f64)) -> Result<f64> {
        let mut last = f64::NAN;
        for _ in 0..steps {
            let lr = self.params.lr * ((self.steps + 1) as f64 / self.params.warmup_steps as f64).min(1.0);
            self.opt.set_lr(lr)?;
            let w = self.sample();
            let loss = self.loss(&w, true)?;
            self.opt.backward_step(&loss)?;
            last = loss.f_double_value(&[])?;
            self.steps += 1;
            on_step(self.steps, last);
        }
        Ok(last)
    }

    /// Mean squared action error on `n` windows drawn from a separate stream (dropout off).
    ///
    /// # Errors
    /// libtorch failures.
    pub fn eval_loss(&mut self, seed: u64) -> Result<f64> {
        let saved = self.rng.clone();
        self.rng = rl_core::rng_from_seed(seed);
        let w = self.sample();
        let out = tch::no_grad(|| self.loss(&w, false)).and_then(|l| Ok(l.f_double_value(&[])?));
        self.rng = saved;
        out
    }

    /// Exports the trained policy (weights as plain arrays) under `name`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn policy(&self, name: &str) -> Result<DtPolicy> {
        Ok(DtPolicy {
            params: self.params.get().clone(),
            norm: self.norm.clone(),
            return_scale: self.return_scale,
            weights: Weights::from_var_store(&self.vs)?,
            name: name.to_owned(),
        })
    }

    /// Writes a checkpoint directory (parameters, normaliser, counters, generator; weights and
    /// AdamW moments).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let state = DtStateRef {
            params: &self.params,
            norm: &self.norm,
            return_scale: self.return_scale,
            data_fingerprint: self.fingerprint,
            steps: self.steps,
            rng: &self.rng,
        };
        let mut tensors = rl_nn::checkpoint::var_store_tensors(&self.vs, "model.");
        tensors.extend(self.opt.state_tensors("optim.")?);
        rl_nn::checkpoint::save_dir(dir, DT_KIND, DT_FORMAT_VERSION, &state, &tensors)?;
        Ok(())
    }

    /// Restores a checkpoint written by [`DtTrainer::save`] for the same data; everything is
    /// checked before anything changes.
    ///
    /// # Errors
    /// `rl_nn` checkpoint errors; [`AigbError::Corrupt`] for other parameters, another dataset
    /// or a bad normaliser.
    pub fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<DtState>(dir, DT_KIND, DT_FORMAT_VERSION)?;
        let corrupt = |reason: String| AigbError::Corrupt { path: dir.to_owned(), reason };
        if *ck.state.params != *self.params {
            return Err(corrupt("the checkpoint's parameters differ from this trainer's".into()));
        }
        if ck.state.data_fingerprint != self.fingerprint {
            return Err(corrupt("the checkpoint was trained on another dataset".into()));
        }
        if ck.state.norm.mean.len() != STATE_DIM || ck.state.norm.std.len() != STATE_DIM {
            return Err(corrupt("state normaliser has the wrong size".into()));
        }
        if !(ck.state.return_scale.is_finite() && ck.state.return_scale > 0.0) {
            return Err(corrupt(format!("return scale {}", ck.state.return_scale)));
        }
        use rl_nn::checkpoint::LoadMode::Strict;
        rl_nn::checkpoint::check_map(&self.vs, &ck.tensors, "model.", Strict, &ck.path)?;
        self.opt.check_state_tensors(&ck.tensors, "optim.", Strict, &ck.path)?;
        rl_nn::checkpoint::load_map(&self.vs, &ck.tensors, "model.", Strict, &ck.path)?;
        self.opt.load_state_tensors(&ck.tensors, "optim.", Strict, &ck.path)?;
        self.norm = ck.state.norm;
        self.return_scale = ck.state.return_scale;
        self.steps = ck.state.steps;
        self.rng = ck.state.rng;
        Ok(())
    }
}

/// A hash of the training arrays, so a checkpoint resumes only on the data it was trained on.
fn fingerprint(trajs: &[DtTraj]) -> u64 {
    let mut h = rl_core::seed::splitmix64(trajs.len() as u64);
    for t in trajs {
        for (s, (a, r)) in t.states.iter().zip(t.actions.iter().zip(&t.rewards)) {
            for x in s.iter().chain([a, r]) {
                h = rl_core::seed::splitmix64(h ^ u64::from(x.to_bits()));
            }
        }
    }
    h
}

/// A trained decision transformer: parameters, normaliser, return scale and weights (plain
/// Rust, shareable across evaluation threads); [`DtBidder`] runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DtPolicy {
    /// Training parameters (network sizes, context, target return).
    pub params: DtParams,
    /// State standardisation.
    pub norm: StateNorm,
    /// Return scale.
    pub return_scale: f64,
    /// Network weights.
    pub weights: Weights,
    /// Name for tables.
    pub name: String,
}

/// Bids with a decision transformer: at tick `t` it appends the state, the return-to-go
/// (target, then minus the last tick's conversions / scale) and a placeholder action, runs the
/// last `K` steps, and bids `max(â_t, 0) (· CPA) · pValue`; `â_t` replaces the placeholder.
#[derive(Debug)]
pub struct DtBidder {
    policy: Arc<DtPolicy>,
    _vs: VarStore,
    model: DtModel,
    rng: rl_core::SeededRng,
    cpa: f64,
    states: Vec<[f32; STATE_DIM]>,
    actions: Vec<f32>,
    returns: Vec<f32>,
    ticks: Vec<i64>,
}

impl DtBidder {
    /// Builds the network from `policy`'s weights (checked against its parameters).
    ///
    /// # Errors
    /// Invalid parameters; weights that do not fit the network.
    pub fn new(policy: Arc<DtPolicy>) -> Result<Self> {
        let params = policy.params.clone().check()?;
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let model = DtModel::new(&vs, &params, &mut rng)?;
        policy.weights.load_into(&vs)?;
        if policy.norm.mean.len() != STATE_DIM || policy.norm.std.len() != STATE_DIM {
            return Err(AigbError::Shape {
                what: "DT state normaliser".into(),
                expected: STATE_DIM.to_string(),
                got: policy.norm.mean.len().to_string(),
            });
        }
        check_positive("return_scale", policy.return_scale)?;
        Ok(Self {
            policy,
            _vs: vs,
            model,
            rng,
            cpa: 0.0,
            states: Vec::new(),
            actions: Vec::new(),
            returns: Vec::new(),
            ticks: Vec::new(),
        })
    }

    /// The model's action (α or α / CPA) for the history so far plus `state` at `tick`.
    fn act(&mut self, state: &[f32; STATE_DIM], tick: usize, last_reward: Option<f64>) -> Result<f64> {
        let p = &self.policy.params;
        let ret = match (self.returns.last(), last_reward) {
            (Some(&r), Some(rew)) => r - (rew / self.policy.return_scale) as f32,
            (Some(&r), None) => r,
            (None, _) => p.target_return as f32,
        };
        self.states.push(self.policy.norm.apply(state));
        self.actions.push(0.0);
        self.returns.push(ret);
        self.ticks.push(tick.min(p.max_ep_len - 1) as i64);
        let k = p.context;
        let n = self.states.len().min(k);
        let from = self.states.len() - n;
        let pad = k - n;
        let mut s = vec![0.0f32; k * STATE_DIM];
        let mut a = vec![0.0f32; k];
        let mut r = vec![0.0f32; k];
        let mut t = vec![0i64; k];
        let mut m = vec![0.0f32; k];
        for q in 0..n {
            let o = pad + q;
            s[o * STATE_DIM..(o + 1) * STATE_DIM].copy_from_slice(&self.states[from + q]);
            a[o] = self.actions[from + q];
            r[o] = self.returns[from + q];
            t[o] = self.ticks[from + q];
            m[o] = 1.0;
        }
        let kk = k as i64;
        let pred = tch::no_grad(|| -> Result<Tensor> {
            self.model.forward(
                &Tensor::f_from_slice(&s)?.f_view([1, kk, STATE_DIM as i64])?,
                &Tensor::f_from_slice(&a)?.f_view([1, kk, 1])?,
                &Tensor::f_from_slice(&r)?.f_view([1, kk, 1])?,
                &Tensor::f_from_slice(&t)?.f_view([1, kk])?,
                &Tensor::f_from_slice(&m)?.f_view([1, kk])?,
                false,
                &mut self.rng,
            )
        })?;
        let out = pred.f_double_value(&[0, kk - 1, 0])?;
        if let Some(last) = self.actions.last_mut() {
            *last = out as f32;
        }
        Ok(out)
    }
}

impl Bidder for DtBidder {
    fn name(&self) -> String {
        self.policy.name.clone()
    }

    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()> {
        self.cpa = info.cpa;
        self.states.clear();
        self.actions.clear();
        self.returns.clear();
        self.ticks.clear();
        Ok(())
    }

    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        let last_reward = ctx.history.last().map(|r| r.conversions as f64);
        let a = self.act(&ctx.state(), ctx.tick, last_reward)?;
        let alpha = if self.policy.params.cpa_relative { a * self.cpa } else { a };
        write_linear_bids(alpha.max(0.0), ctx.pvalues, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{toy_dataset, ToyStep};

    /// α / CPA depends on the return still to go: 2 if two conversions remain, else 0.5 — a
    /// policy only a return-conditioned model can represent from states that are all alike.
    fn toy() -> TrajectoryDataset {
        toy_dataset(24, 12, 40.0, |k, t| {
            let good = k % 2 == 0;
            let mut state = [0.0f32; STATE_DIM];
            state[0] = (12 - t) as f32 / 12.0;
            let reward = if good && t == 11 { 2.0 } else { 0.0 };
            ToyStep { reward, ..ToyStep::new(state, 40.0 * if good { 2.0 } else { 0.5 }) }
        })
    }

    fn params() -> rl_core::Valid<DtParams> {
        DtParams::default()
            .transformer(TransformerParams::default().d_model(16).d_ff(32).n_layers(1).dropout(0.0))
            .context(4)
            .lr(3e-3)
            .warmup_steps(10)
            .batch_size(16)
            .check()
            .unwrap()
    }

    #[test]
    fn dt_learns_a_return_conditioned_policy_and_resumes_exactly() {
        tch::set_num_threads(1);
        let ds = toy();
        let mut dt = DtTrainer::new(params(), &ds).unwrap();
        assert_eq!(dt.return_scale(), 2.0);
        let before = dt.eval_loss(99).unwrap();
        dt.train(150, &mut |_, _| {}).unwrap();
        let after = dt.eval_loss(99).unwrap();
        assert!(after < 0.05 * before && after < 0.05, "{before} -> {after}");
        let pol = Arc::new(dt.policy("DT").unwrap());
        let mut b = DtBidder::new(Arc::clone(&pol)).unwrap();
        let info = PeriodInfo { period: 0, advertiser: 0, budget: 1.0, cpa: 40.0, category: 0, num_ticks: 12 };
        let state = ds.trajectories[0].steps[0].state;
        // target 1.0 (two conversions to go) → α / CPA ≈ 2; target 0 → ≈ 0.5
        b.begin_period(&info).unwrap();
        let hi = b.act(&state, 0, None).unwrap();
        let mut low = DtBidder::new(Arc::new(DtPolicy {
            params: DtParams { target_return: 1e-6, ..pol.params.clone() },
            ..(*pol).clone()
        }))
        .unwrap();
        low.begin_period(&info).unwrap();
        let lo = low.act(&state, 0, None).unwrap();
        assert!((hi - 2.0).abs() < 0.3 && (lo - 0.5).abs() < 0.3, "{hi} {lo}");

        // resume: 20 steps = 10, save, load into a fresh trainer, 10
        let mut a = DtTrainer::new(params(), &ds).unwrap();
        a.train(20, &mut |_, _| {}).unwrap();
        let mut b1 = DtTrainer::new(params(), &ds).unwrap();
        b1.train(10, &mut |_, _| {}).unwrap();
        let dir = tempfile::tempdir().unwrap();
        b1.save(&dir.path().join("ck")).unwrap();
        let mut b2 = DtTrainer::new(params(), &ds).unwrap();
        b2.load(&dir.path().join("ck")).unwrap();
        b2.train(10, &mut |_, _| {}).unwrap();
        assert_eq!(a.policy("x").unwrap(), b2.policy("x").unwrap());
        assert_eq!(a.steps(), b2.steps());
        // a checkpoint for other data is refused and changes nothing
        let mut other = toy();
        other.trajectories[0].steps[0].action = 1.0;
        let mut c = DtTrainer::new(params(), &other).unwrap();
        let w = c.policy("x").unwrap();
        assert!(c.load(&dir.path().join("ck")).is_err());
        assert_eq!(c.policy("x").unwrap(), w);
        assert!(DtParams::default().context(0).check().is_err());
        assert!(DtTrainer::new(params(), &TrajectoryDataset::default()).is_err());
    }
}
