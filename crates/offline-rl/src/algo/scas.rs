//! SCAS: OOD State Correction and OOD Action Suppression (Mao et al., NeurIPS 2024,
//! arXiv 2410.19400; `thu-rllab/SCAS`).

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rand::Rng;
use rl_agents::{ActionBounds, Agent, Batch, BatchLearner, BatchPolicy, ReplayBuffer, UpdateMetrics};
use rl_core::{Metrics, Params, SeededRng, Space, Valid};
use rl_nn::optim::Adam;
use rl_nn::{Mlp, MlpConfig};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::common::{self, setters, AResult, Shape};
use super::{obs_tensor, OfflineAlgorithm};
use crate::error::{check, OfflineError, Result};
use rl_agents::{ActorCritic, Td3Core};

/// How the target critics are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TargetAggregation {
    /// The minimum over the critics (SCAS on Gym-MuJoCo).
    #[default]
    Min,
    /// The mean (SCAS on AntMaze).
    Mean,
}

/// The deterministic dynamics model `f(s, a) → s'` of SCAS and how it is pretrained
/// (`thu-rllab/SCAS`, `model.py`, `pretrain.py`).
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `net` | `[256, 256, 256, 256]` ReLU | the MLP `[s, a] → s'` (absolute next state) | identity output | code |
/// | `lr` | 1e-3 | Adam step | `> 0` | code |
/// | `batch_size` | 256 | transitions per step | `>= 1` | code |
/// | `steps` | 500,001 | pretraining steps (`num_iters + 1`) | `>= 1` | code |
/// | `holdout` | 0.0 | share of transitions held out to measure the model's error (never trained on) | `[0, 1)` | code (`--eval_data`) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DynamicsParams {
    /// Network.
    pub net: MlpConfig,
    /// Learning rate.
    pub lr: f64,
    /// Batch size.
    pub batch_size: usize,
    /// Pretraining steps.
    pub steps: u64,
    /// Held-out share.
    pub holdout: f64,
}

impl Default for DynamicsParams {
    fn default() -> Self {
        Self { net: MlpConfig::new([256, 256, 256, 256]), lr: 1e-3, batch_size: 256, steps: 500_001, holdout: 0.0 }
    }
}

setters!(DynamicsParams { net: MlpConfig, lr: f64, batch_size: usize, steps: u64, holdout: f64 });

impl Params for DynamicsParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        common::check_mlp("net", &self.net)?;
        check::positive("lr", self.lr)?;
        check::at_least("batch_size", self.batch_size, 1)?;
        check::at_least("steps", self.steps as usize, 1)?;
        if !(0.0..1.0).contains(&self.holdout) {
            return Err(OfflineError::invalid("holdout", self.holdout, "must lie in [0, 1)"));
        }
        Ok(())
    }
}

/// Parameters of [`Scas`]: the shared TD3 hyper-parameters [`Td3Core`] (field `td3`, its keys
/// at the top level of a configuration) and SCAS's own; one set for every task
/// (`run_experiments.sh`), except the target aggregation (`mean` on AntMaze).
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic` | `[256, 256]` ReLU | networks | identity output | code |
/// | `n_critics` | 4 | critics in the fused ensemble | `>= 1` | code |
/// | `gamma`, `tau` | 0.99, 0.005 | discount, target smoothing | `[0, 1]` | code |
/// | `actor_lr` | 2e-4 | actor Adam step, cosine-annealed over `cosine_steps` actor updates | `> 0` | code |
/// | `critic_lr` | 3e-4 | critic Adam step | `> 0` | code |
/// | `policy_noise`, `noise_clip` | 0.2, 0.5 | target smoothing noise std and clip, in action units (not × action scale, as in the code: `randn_like(action) * 0.2` clamped to ±0.5) | `>= 0` | code |
/// | `policy_delay` | 2 | critic updates per actor update | `>= 1` | code |
/// | `exploration_noise` | 0.1 | Gaussian exploration std, × action scale | `>= 0` | TD3 |
/// | `target` | `min` | target aggregation (`mean` on AntMaze) | | code |
/// | `cosine_steps` | 500,000 | actor updates of the cosine schedule (`CosineAnnealingLR(1e6 / 2)`), 0: constant | `>= 0` | code |
/// | `scale_target_noise` | `false` | multiply the clipped smoothing noise by the action scale (`(high − low) / 2`), as TD3's command line does; the SCAS code does not | | ours |
/// | `lambda` | 0.25 | weight of the state-recovery loss against the normalised max-Q loss | `[0, 1]` | code |
/// | `temperature` | 5.0 | inverse temperature of the value-aware weight | `>= 0` | code |
/// | `beta` | 3e-3 | std of the state perturbation (normalised units) | `>= 0` | code |
/// | `max_weight` | 50 | clamp of the value-aware weight | `> 0` | code |
/// | `perturbed_policy_input` | false | feed `π(ŝ)` instead of the code's `π(s)` into `f(ŝ, ·)` (the paper's reading; reconstructed option) | | paper vs code |
/// | `dynamics` | see [`DynamicsParams`] | the pretrained model | | code |
///
/// The rows from `actor` to `exploration_noise` are the fields of [`Td3Core`]
/// (`params.td3.gamma`; the setter `.gamma(0.9)` works on `ScasParams` too; SCAS's defaults
/// differ from TD3's in `n_critics` and `actor_lr`). `check` names the first bad field in the
/// order of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct ScasParams {
    /// The shared TD3 hyper-parameters.
    pub td3: Td3Core,
    /// Target aggregation.
    pub target: TargetAggregation,
    /// Actor updates of the cosine schedule.
    pub cosine_steps: u64,
    /// Multiply the clipped smoothing noise by the action scale (default `false`, as the code).
    pub scale_target_noise: bool,
    /// Weight of the state-recovery loss.
    pub lambda: f64,
    /// Inverse temperature.
    pub temperature: f64,
    /// State perturbation std.
    pub beta: f64,
    /// Weight clamp.
    pub max_weight: f64,
    /// Policy input of the dynamics term.
    pub perturbed_policy_input: bool,
    /// Dynamics model.
    pub dynamics: DynamicsParams,
}

impl Default for ScasParams {
    fn default() -> Self {
        Self {
            td3: Td3Core { n_critics: 4, actor_lr: 2e-4, ..Td3Core::default() },
            target: TargetAggregation::Min,
            cosine_steps: 500_000,
            scale_target_noise: false,
            lambda: 0.25,
            temperature: 5.0,
            beta: 3e-3,
            max_weight: 50.0,
            perturbed_policy_input: false,
            dynamics: DynamicsParams::default(),
        }
    }
}

rl_agents::td3_family_params!(ScasParams {
    target,
    cosine_steps,
    scale_target_noise,
    lambda,
    temperature,
    beta,
    max_weight,
    perturbed_policy_input,
    dynamics,
});

setters!(ScasParams {
    td3: Td3Core,
    target: TargetAggregation,
    cosine_steps: u64,
    scale_target_noise: bool,
    lambda: f64,
    temperature: f64,
    beta: f64,
    max_weight: f64,
    perturbed_policy_input: bool,
    dynamics: DynamicsParams,
});

impl ScasParams {
    /// The AntMaze set: the same values with the mean target over the critics.
    pub fn antmaze() -> Self {
        Self { target: TargetAggregation::Mean, ..Self::default() }
    }

    /// Sets the hidden widths of actor and critics (not the dynamics model).
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.td3 = self.td3.hidden(hidden);
        self
    }
}

impl Params for ScasParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        self.td3.check_fields()?;
        check::unit_closed("lambda", self.lambda)?;
        check::non_negative("temperature", self.temperature)?;
        check::non_negative("beta", self.beta)?;
        check::positive("max_weight", self.max_weight)?;
        self.dynamics.validate().map_err(|e| e.prefixed("dynamics"))?;
        Ok(())
    }
}

/// SCAS: TD3 with `N` critics whose actor loss adds a value-aware state-correction term
/// through a frozen, pretrained dynamics model `f`.
///
/// ```text
/// dynamics (pretrained once, then frozen):  L(f) = mean (f(s, a) − s')²
/// critic (every update):  a' = clip( π'(s') + clip(σε, −c, c) · k, low, high )  (k = 1; the action scale with `scale_target_noise`)
///                         y  = r + γ (1 − d) agg_e Q'_e(s', a')          (agg: min, or mean on AntMaze)
///                         L(Q) = Σ_e mean_b (Q_e(s, a) − y)²
/// actor (every `policy_delay` updates), π = π(s):
///   L_maxq = −mean_b min_e Q_e(s, π) / mean_b |min_e Q_e(s, π)|          (normaliser detached)
///   w      = min( exp(T (Q̄(s', π(s')) − Q̄(s, π))), W ),  Q̄ = mean_e Q_e  (no gradient)
///   ŝ      = s + N(0, β² I)
///   L_sr   = mean_{b,j} w_b (f(ŝ, π) − s')²_j                           (gradient through f to π)
///   L(π)   = (1 − λ) L_maxq + λ L_sr; cosine step of the actor rate; Polyak targets
/// ```
///
/// The dynamics model is trained by [`OfflineAlgorithm::prepare`], by the caller's own batches
/// through [`Scas::pretrain_dynamics`] (resumable: its Adam state is checkpointed) followed by
/// [`Scas::freeze_dynamics`], or loaded with a checkpoint, and never enters an optimiser
/// afterwards: its variables are frozen, gradients reach the action input only.
#[derive(Debug)]
pub struct Scas {
    params: Valid<ScasParams>,
    nets: ActorCritic,
    dyn_vs: VarStore,
    dynamics: Mlp,
    dyn_opt: Adam,
    dyn_steps: u64,
    dynamics_ready: bool,
    rng: SeededRng,
    dyn_rng: SeededRng,
    updates: u64,
    actor_updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    params: ScasParams,
    shape: Shape,
    updates: u64,
    actor_updates: u64,
    dyn_steps: u64,
    dynamics_ready: bool,
    rng: SeededRng,
    dyn_rng: SeededRng,
}

const KIND: &str = "offline_rl.scas";
/// 2: the dynamics model's Adam state (`optim.dynamics.*`) and step count are saved.
const FORMAT: u32 = 2;

impl Scas {
    /// SCAS for observations of `obs_space` and actions in the bounded box `action_space`.
    /// The dynamics model starts untrained: call [`OfflineAlgorithm::prepare`] before
    /// [`BatchLearner::update`].
    ///
    /// # Errors
    /// [`OfflineError::Agent`] for an unbounded or discrete action space; device errors.
    pub fn new(
        params: Valid<ScasParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "scas-init"));
        let (o, a) = (obs_space.dim(), bounds.dim());
        let nets = common::actor_critic(params.td3.spec(o, bounds), device, &mut init)?;
        let dyn_vs = VarStore::new(device);
        let cfg = common::check_mlp("dynamics.net", &params.dynamics.net)?;
        let mut dyn_init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "scas-dynamics-init"));
        let dynamics = Mlp::new(&dyn_vs.root(), (o + a) as i64, o as i64, &cfg, &mut dyn_init)?;
        let dyn_opt = Adam::for_var_store(common::adam(params.dynamics.lr)?, &dyn_vs)?;
        Ok(Self {
            params,
            nets,
            dyn_vs,
            dynamics,
            dyn_opt,
            dyn_steps: 0,
            dynamics_ready: false,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "scas-noise")),
            dyn_rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "scas-dynamics")),
            updates: 0,
            actor_updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &ScasParams {
        &self.params
    }

    /// Whether the dynamics model has been trained (or loaded).
    pub fn dynamics_ready(&self) -> bool {
        self.dynamics_ready
    }

    /// `f(s, a)` `[B, obs_dim]` (gradients flow to the inputs only once the model is frozen).
    ///
    /// # Errors
    /// Shape failures.
    pub fn predict(&self, obs: &Tensor, action: &Tensor) -> AResult<Tensor> {
        Ok(self.dynamics.f_forward(&Tensor::f_cat(&[obs, action], 1)?)?)
    }

    /// Trains the dynamics model on `data` (`dynamics.steps` steps of Adam on the MSE of
    /// `f(s, a)` against `s'`, uniform batches with replacement), holding out a
    /// `dynamics.holdout` share of the rows (chosen by a seeded permutation, never trained
    /// on), then freezes it. The Adam state is the one [`Scas::pretrain_dynamics`] uses and
    /// checkpoints save (fresh unless that was called first). Returns `dynamics/train_mse` (last batch) and, with a holdout,
    /// `dynamics/holdout_mse` and `dynamics/holdout_rows`.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Empty`] when the holdout leaves no training row;
    /// [`rl_agents::AgentError::Protocol`] when the model is already frozen; libtorch failures.
    pub fn train_dynamics(&mut self, data: &ReplayBuffer, progress: bool) -> AResult<Metrics> {
        let p = self.params.dynamics.clone();
        let n = data.len();
        let mut rows: Vec<usize> = (0..n).collect();
        // Fisher–Yates with the model's own stream
        for i in (1..n).rev() {
            let j = self.dyn_rng.random_range(0..=i);
            rows.swap(i, j);
        }
        let n_hold = (p.holdout * n as f64).floor() as usize;
        let (held, train) = rows.split_at(n_hold);
        if train.is_empty() {
            return Err(rl_agents::AgentError::Empty { what: "dynamics training rows".into() });
        }
        self.check_dynamics_trainable()?;
        let bar = crate::progress::progress_bar(p.steps, 0, progress, "dynamics");
        let mut last = f64::NAN;
        let device = self.nets.device;
        for step in 0..p.steps {
            let idx: Vec<usize> = (0..p.batch_size).map(|_| train[self.dyn_rng.random_range(0..train.len())]).collect();
            let b = data.gather(&idx, device)?;
            let loss = self.dynamics_step(&b)?;
            if step + 1 == p.steps || step % 1000 == 0 {
                last = common::scalar(&loss)?;
                bar.set_message(format!("mse {last:.4}"));
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        let mut m = Metrics::new().with("dynamics/train_mse", last);
        if !held.is_empty() {
            let mut total = 0.0;
            for chunk in held.chunks(4096) {
                let b = data.gather(chunk, device)?;
                let err = tch::no_grad(|| -> AResult<f64> {
                    let pred = self.predict(b.obs(), b.action())?;
                    common::scalar(&pred.f_mse_loss(b.next_obs(), tch::Reduction::Sum)?)
                })?;
                total += err;
            }
            m.insert("dynamics/holdout_mse", total / (held.len() * data.obs_dim()) as f64);
            m.insert("dynamics/holdout_rows", held.len() as f64);
        }
        self.dyn_vs.freeze();
        self.dynamics_ready = true;
        Ok(m)
    }

    /// `Protocol` once the model is frozen.
    fn check_dynamics_trainable(&self) -> AResult<()> {
        if self.dynamics_ready {
            return Err(rl_agents::AgentError::Protocol(
                "SCAS: the dynamics model is frozen (trained, loaded or set); it takes no more steps".into(),
            ));
        }
        Ok(())
    }

    /// One Adam step of the dynamics model on `mean (f(s, a) − s')²` of `b`; the loss.
    fn dynamics_step(&mut self, b: &Batch) -> AResult<Tensor> {
        b.check_dims(self.nets.obs_dim, self.nets.act_dim, self.nets.device)?;
        let pred = self.predict(b.obs(), b.action())?;
        let loss = pred.f_mse_loss(b.next_obs(), tch::Reduction::Mean)?;
        self.dyn_opt.backward_step(&loss)?;
        self.dyn_steps += 1;
        Ok(loss)
    }

    /// Pretrains the dynamics model on caller-chosen batches: one Adam step (rate
    /// `dynamics.lr`) of `mean (f(s, a) − s')²` per batch, in order, continuing the optimiser
    /// state of earlier calls (and of a loaded checkpoint: the moments and the step count are
    /// saved), so two calls on the two halves of a list equal one call on the whole list. The
    /// model stays trainable until [`Scas::freeze_dynamics`]. Returns `dynamics/train_mse`
    /// (the last batch's loss, before its step) and `dynamics/steps` (all steps so far).
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Empty`] for no batch; [`rl_agents::AgentError::Protocol`] once
    /// the model is frozen; [`rl_agents::AgentError::Shape`] for a batch of other widths.
    pub fn pretrain_dynamics(&mut self, batches: &[Batch]) -> AResult<Metrics> {
        if batches.is_empty() {
            return Err(rl_agents::AgentError::Empty { what: "dynamics pretraining batches".into() });
        }
        self.check_dynamics_trainable()?;
        let mut last = f64::NAN;
        for b in batches {
            last = common::scalar(&self.dynamics_step(b)?)?;
        }
        Ok(Metrics::new().with("dynamics/train_mse", last).with("dynamics/steps", self.dyn_steps as f64))
    }

    /// Pretraining steps the dynamics model has taken (all calls, checkpoints included).
    pub fn dynamics_steps(&self) -> u64 {
        self.dyn_steps
    }

    /// Freezes the dynamics model after [`Scas::pretrain_dynamics`]: no more steps, gradients
    /// reach the action input only, and [`BatchLearner::update`] may run.
    pub fn freeze_dynamics(&mut self) {
        self.dyn_vs.freeze();
        self.dynamics_ready = true;
    }

    /// The actor loss and its parts `(L, L_maxq, L_sr, w)` for a batch and a standard normal
    /// state perturbation `noise` `[B, obs_dim]` (scaled by `beta` here).
    ///
    /// # Errors
    /// Shape and libtorch failures.
    pub fn actor_loss(&self, batch: &Batch, noise: &Tensor) -> AResult<(Tensor, Tensor, Tensor, Tensor)> {
        let p = &self.params;
        let n = &self.nets;
        let pi = n.actor.forward(batch.obs())?;
        let q_pi = n.critic.forward_frozen(batch.obs(), &pi)?;
        let v_min = q_pi.f_amin(0, false)?;
        let k = v_min.f_abs()?.f_mean(Kind::Float)?.f_detach()?.f_reciprocal()?;
        let maxq = v_min.f_mean(Kind::Float)?.f_mul(&k)?.f_neg()?;
        let w = tch::no_grad(|| -> AResult<Tensor> {
            let v_mean = q_pi.f_detach()?.f_mean_dim(0, false, Kind::Float)?;
            let next_pi = n.actor.forward(batch.next_obs())?;
            let next_v = n.critic.forward(batch.next_obs(), &next_pi)?.f_mean_dim(0, false, Kind::Float)?;
            Ok(next_v.f_sub(&v_mean)?.f_mul_scalar(p.temperature)?.f_exp()?.f_clamp_max(p.max_weight)?)
        })?;
        let s_hat = batch.obs().f_add(&noise.f_mul_scalar(p.beta)?)?;
        let pi_in = if p.perturbed_policy_input { n.actor.forward(&s_hat)? } else { pi };
        let pred = self.predict(&s_hat, &pi_in)?;
        let sr = pred.f_sub(batch.next_obs())?.f_square()?.f_mul(&w.f_unsqueeze(1)?)?.f_mean(Kind::Float)?;
        let loss = maxq.f_mul_scalar(1.0 - p.lambda)?.f_add(&sr.f_mul_scalar(p.lambda)?)?;
        Ok((loss, maxq, sr, w))
    }

    fn sync_lr(&mut self) -> AResult<()> {
        let p = &self.params;
        let lr = if p.cosine_steps == 0 {
            p.td3.actor_lr
        } else {
            common::cosine_lr(p.td3.actor_lr, self.actor_updates, p.cosine_steps)
        };
        Ok(self.nets.actor_opt.set_lr(lr)?)
    }

    fn parts(&self) -> common::Parts<'_> {
        let mut p = self.nets.parts();
        p.stores.push(("dynamics", &self.dyn_vs));
        p.optims.push(("dynamics", &self.dyn_opt));
        p
    }

    /// One update (the same as [`BatchLearner::update`]) with the noise supplied by the caller:
    /// `eps`, the standard normal `[B, act_dim]` smoothing draw (the reference's
    /// `torch.randn_like(action)`), and `state_noise`, the standard normal `[B, obs_dim]` state
    /// perturbation before scaling by `beta` (the reference's `torch.randn(state.shape)`),
    /// needed only when this update is an actor update (`(updates() + 1) % policy_delay == 0`)
    /// and ignored otherwise. The internal generator is not touched.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Protocol`] before the dynamics model is ready or when an actor
    /// update has no `state_noise`; [`rl_agents::AgentError::Shape`] for a batch of other
    /// widths or noise of another shape, kind or device; libtorch failures.
    pub fn update_with_noise(
        &mut self,
        batch: &Batch,
        eps: &Tensor,
        state_noise: Option<&Tensor>,
    ) -> AResult<UpdateMetrics> {
        if !self.dynamics_ready {
            return Err(rl_agents::AgentError::Protocol(
                "SCAS needs its dynamics model: call prepare(), freeze_dynamics() after pretrain_dynamics(), or load a checkpoint first".into(),
            ));
        }
        let n = &self.nets;
        batch.check_dims(n.obs_dim, n.act_dim, n.device)?;
        let p = self.params.get().clone();
        common::check_noise("eps", eps, batch.len(), n.act_dim, n.device)?;
        let actor_step = (self.updates + 1) % p.td3.policy_delay as u64 == 0;
        let state_noise = match (actor_step, state_noise) {
            (true, None) => {
                return Err(rl_agents::AgentError::Protocol(
                    "SCAS: this update is an actor update and needs `state_noise`".into(),
                ))
            }
            (true, Some(t)) => {
                common::check_noise("state_noise", t, batch.len(), n.obs_dim, n.device)?;
                Some(t)
            }
            (false, _) => None,
        };
        let mut m = UpdateMetrics::new();
        let y = tch::no_grad(|| -> AResult<Tensor> {
            let a_next =
                n.target_action(batch.next_obs(), eps, p.td3.policy_noise, p.td3.noise_clip, p.scale_target_noise)?;
            let q = n.critic_target.forward(batch.next_obs(), &a_next)?;
            let q_next = match p.target {
                TargetAggregation::Min => q.f_amin(0, false)?,
                TargetAggregation::Mean => q.f_mean_dim(0, false, Kind::Float)?,
            };
            Ok(batch.reward().f_add(&batch.bootstrap(p.td3.gamma)?.f_mul(&q_next)?)?)
        })?;
        let q = n.critic.forward(batch.obs(), batch.action())?;
        let critic_loss = common::ensemble_mse(&q, &y)?;
        self.nets.critic_opt.backward_step(&critic_loss)?;
        m.push("loss/critic", &critic_loss)?;
        m.push("train/q", &q.f_detach()?.f_mean(Kind::Float)?)?;
        self.updates += 1;
        if let Some(noise) = state_noise {
            let (loss, maxq, sr, w) = self.actor_loss(batch, noise)?;
            self.nets.actor_opt.backward_step(&loss)?;
            self.actor_updates += 1;
            self.sync_lr()?;
            self.nets.soft_update(p.td3.tau)?;
            m.push("loss/actor", &loss)?;
            m.push("loss/maxq", &maxq)?;
            m.push("loss/state_recovery", &sr)?;
            m.push("train/weight", &w.f_mean(Kind::Float)?)?;
        }
        Ok(m)
    }

    /// The network weights under checkpoint names (`actor.*`, `actor_target.*`, `critic.*`,
    /// `critic_target.*`, `dynamics.*`; shallow copies, no optimiser state).
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        rl_nn::parts::weights(&self.parts().stores)
    }

    /// Overwrites the network weights from `weights` (names as [`Scas::weights`]; all present,
    /// shapes equal, no other name), including the dynamics model; whether that model is
    /// frozen is unchanged (call [`Scas::freeze_dynamics`] to use copied-in dynamics weights
    /// as the pretrained model, or [`Scas::pretrain_dynamics`] to go on training them);
    /// optimiser state and counters are untouched.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Nn`]-wrapped checkpoint errors naming the offending tensor.
    pub fn set_weights(&mut self, weights: &std::collections::BTreeMap<String, Tensor>) -> AResult<()> {
        Ok(rl_nn::parts::set_weights(&self.parts().stores, weights)?)
    }
}

impl Agent for Scas {
    fn name(&self) -> &'static str {
        "scas"
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> AResult<Array2<f32>> {
        let x = obs_tensor(obs, self.nets.obs_dim, self.nets.device)?;
        let a = self.nets.explore(&x, self.params.td3.exploration_noise, &mut self.rng)?;
        Ok(rl_nn::convert::tensor_to_array2(&a)?)
    }

    fn policy(&self) -> &dyn BatchPolicy {
        &self.nets.actor
    }

    fn device(&self) -> Device {
        self.nets.device
    }

    fn updates(&self) -> u64 {
        self.updates
    }

    fn save(&self, dir: &Path) -> AResult<()> {
        let state = State {
            params: self.params.get().clone(),
            shape: Shape::of(self.nets.obs_dim, self.nets.actor.bounds()),
            updates: self.updates,
            actor_updates: self.actor_updates,
            dyn_steps: self.dyn_steps,
            dynamics_ready: self.dynamics_ready,
            rng: self.rng.clone(),
            dyn_rng: self.dyn_rng.clone(),
        };
        common::save(dir, KIND, FORMAT, &state, &self.parts())
    }

    fn load(&mut self, dir: &Path) -> AResult<()> {
        let ck = rl_nn::checkpoint::load_dir::<State>(dir, KIND, FORMAT)?;
        common::check_saved(
            &ck.path,
            (&ck.state.params, &ck.state.shape),
            (self.params.get(), &Shape::of(self.nets.obs_dim, self.nets.actor.bounds())),
        )?;
        self.parts().check(&ck.tensors, &ck.path)?;
        self.nets.restore(&ck.tensors, &ck.path)?;
        rl_nn::parts::restore(
            &[("dynamics", &self.dyn_vs)],
            &mut [("dynamics", &mut self.dyn_opt)],
            &mut [],
            &ck.tensors,
            &ck.path,
        )?;
        self.updates = ck.state.updates;
        self.actor_updates = ck.state.actor_updates;
        self.dyn_steps = ck.state.dyn_steps;
        self.dynamics_ready = ck.state.dynamics_ready;
        if self.dynamics_ready {
            self.dyn_vs.freeze();
        } else {
            // a checkpoint taken mid-pretraining: trainable again, whatever this object was
            self.dyn_vs.unfreeze();
        }
        self.rng = ck.state.rng;
        self.dyn_rng = ck.state.dyn_rng;
        self.sync_lr()?;
        Ok(())
    }
}

impl BatchLearner for Scas {
    fn update(&mut self, batch: &Batch) -> AResult<UpdateMetrics> {
        if !self.dynamics_ready {
            // refused before any draw, so the noise stream is untouched
            return self.update_with_noise(batch, &Tensor::new(), None);
        }
        let n = &self.nets;
        batch.check_dims(n.obs_dim, n.act_dim, n.device)?;
        let b = batch.len() as i64;
        // the same draws in the same order as before the noise could be injected: the
        // smoothing noise, then the state perturbation on actor steps only
        let eps = rl_nn::rand::standard_normal(&[b, n.act_dim as i64], (Kind::Float, n.device), &mut self.rng)?;
        let state_noise = if (self.updates + 1) % self.params.td3.policy_delay as u64 == 0 {
            Some(rl_nn::rand::standard_normal(&[b, n.obs_dim as i64], (Kind::Float, n.device), &mut self.rng)?)
        } else {
            None
        };
        self.update_with_noise(batch, &eps, state_noise.as_ref())
    }
}

impl OfflineAlgorithm for Scas {
    fn prepare(&mut self, data: &ReplayBuffer, progress: bool) -> AResult<Metrics> {
        if self.dynamics_ready {
            return Ok(Metrics::new());
        }
        self.train_dynamics(data, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    fn data(n: usize) -> ReplayBuffer {
        let mut rng = rl_core::rng_from_seed(3);
        let mut t = rl_core::Transitions::empty(2, 1);
        for _ in 0..n {
            let s = ndarray::array![rng.random_range(-1.0f32..1.0), rng.random_range(-1.0f32..1.0)];
            let a = ndarray::array![rng.random_range(-1.0f32..1.0)];
            let next = ndarray::array![s[0] + 0.5 * a[0], s[1]];
            t.push(s.view(), a.view(), 0.0, next.view(), false, false).unwrap();
        }
        ReplayBuffer::from_transitions(rl_agents::ReplayBufferParams::default(), &t).unwrap()
    }

    #[test]
    fn dynamics_pretraining_holds_out_rows_and_freezes() {
        let p = ScasParams::default()
            .hidden([8])
            .dynamics(DynamicsParams::default().net(MlpConfig::new([16])).steps(300).batch_size(32).holdout(0.25));
        let mut s = Scas::new(
            p.check().unwrap(),
            &Space::symmetric(2, 1.0).unwrap(),
            &Space::symmetric(1, 1.0).unwrap(),
            Device::Cpu,
            0,
        )
        .unwrap();
        let buf = data(400);
        let m = s.prepare(&buf, false).unwrap();
        assert_eq!(m.get("dynamics/holdout_rows"), Some(100.0));
        assert!(m.get("dynamics/holdout_mse").unwrap() < 0.1, "{m:?}");
        assert!(s.dynamics_ready());
        // frozen: gradients reach the action, not the weights
        let a = Tensor::zeros([4, 1], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        s.predict(&Tensor::ones([4, 2], (Kind::Float, Device::Cpu)), &a).unwrap().sum(Kind::Float).backward();
        assert!(a.grad().defined());
        assert!(s.dyn_vs.trainable_variables().iter().all(|t| !t.requires_grad()));
        // a second prepare is a no-op
        assert!(s.prepare(&buf, false).unwrap().is_empty());
    }

    #[test]
    fn actor_loss_matches_hand_computation() {
        let p = ScasParams::default().hidden([8]).dynamics(DynamicsParams::default().net(MlpConfig::new([8])).steps(2));
        let mut s = Scas::new(
            p.check().unwrap(),
            &Space::symmetric(2, 1.0).unwrap(),
            &Space::symmetric(1, 1.0).unwrap(),
            Device::Cpu,
            0,
        )
        .unwrap();
        let buf = data(64);
        s.prepare(&buf, false).unwrap();
        let b = buf.gather(&[0, 1, 2, 3], Device::Cpu).unwrap();
        let noise = Tensor::from_slice(&[1.0f32, -1.0, 0.5, 0.0, 2.0, 1.0, -0.5, 0.25]).view([4, 2]);
        let (loss, maxq, sr, w) = s.actor_loss(&b, &noise).unwrap();
        let f = |t: &Tensor| -> Vec<f64> {
            Vec::<f32>::try_from(&t.f_flatten(0, -1).unwrap()).unwrap().into_iter().map(f64::from).collect()
        };
        let n = &s.nets;
        let pi = n.actor.forward(b.obs()).unwrap();
        let q = f(&n.critic.forward(b.obs(), &pi).unwrap()); // [4 critics, 4]
        let qn = f(&n.critic.forward(b.next_obs(), &n.actor.forward(b.next_obs()).unwrap()).unwrap());
        let mut want_w = [0.0; 4];
        let mut mins = [0.0; 4];
        for i in 0..4 {
            let col: Vec<f64> = (0..4).map(|e| q[e * 4 + i]).collect();
            let coln: Vec<f64> = (0..4).map(|e| qn[e * 4 + i]).collect();
            mins[i] = col.iter().copied().fold(f64::INFINITY, f64::min);
            let (m, mn) = (col.iter().sum::<f64>() / 4.0, coln.iter().sum::<f64>() / 4.0);
            want_w[i] = (5.0 * (mn - m)).exp().min(50.0);
        }
        let want_maxq = -(mins.iter().sum::<f64>() / 4.0) / (mins.iter().map(|x| x.abs()).sum::<f64>() / 4.0);
        let s_hat = b.obs() + &noise * 3e-3;
        let pred = f(&s.predict(&s_hat, &pi).unwrap());
        let next = f(b.next_obs());
        let want_sr: f64 = (0..8).map(|j| want_w[j / 2] * (pred[j] - next[j]).powi(2)).sum::<f64>() / 8.0;
        for (got, want) in f(&w).iter().zip(want_w) {
            assert!((got - want).abs() < 1e-4 * want.max(1.0));
        }
        assert!((f(&maxq)[0] - want_maxq).abs() < 1e-5);
        assert!((f(&sr)[0] - want_sr).abs() < 1e-5);
        assert!((f(&loss)[0] - (0.75 * want_maxq + 0.25 * want_sr)).abs() < 1e-5);
    }
}
