//! Soft Actor-Critic with twin (or `N`) critics and automatic entropy tuning.

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rl_core::{ActMode, Params, SeededRng, Space, Valid};
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::MlpConfig;
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::agent::{obs_tensor, to_array2, Agent, BatchLearner, BatchPolicy, UpdateMetrics};
use crate::batch::Batch;
use crate::ckpt::{self, Parts};
use crate::error::{check, AgentError, Result};
use crate::nets::{ActionBounds, EnsembleCritic, LogStdBounds, TanhGaussianActor, TargetSync};

/// Parameters of [`Sac`]. Defaults: SAC v2 (Haarnoja et al., "Soft Actor-Critic Algorithms and
/// Applications", arXiv 1812.05905, Table 1), as in CORL and CleanRL.
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor` | `[256, 256]` ReLU | policy MLP (output: mean and log-std) | [`MlpConfig`], identity output | paper Table 1 |
/// | `critic` | `[256, 256]` ReLU | each critic's MLP | [`MlpConfig`], identity output | paper Table 1 |
/// | `n_critics` | 2 | critics in the fused ensemble; targets use their minimum | `>= 1` | paper (clipped double Q); SAC-N uses more |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `tau` | 0.005 | target smoothing coefficient | `[0, 1]` | paper |
/// | `actor_lr` | 3e-4 | Adam step of the policy | `> 0` | paper |
/// | `critic_lr` | 3e-4 | Adam step of the critics | `> 0` | paper (CleanRL: 1e-3) |
/// | `alpha_lr` | 3e-4 | Adam step of `log α` | `> 0` | paper |
/// | `init_alpha` | 1.0 | initial temperature (`log α = 0`) | `> 0` | softlearning, CORL |
/// | `autotune` | true | learn `α` by `min −log α · (log π + H̄)` | | paper §5 |
/// | `target_entropy` | none = `−act_dim` | entropy target `H̄` | finite | paper Table 1 |
/// | `log_std_min`, `log_std_max` | −5, 2 | clamp of the policy's log-std | `min < max` | CORL / EDAC (original code: −20, 2) |
/// | `actor_update_interval` | 1 | critic updates per actor and temperature update | `>= 1` | paper (CleanRL: 2) |
/// | `target_update_interval` | 1 | updates per Polyak step | `>= 1` | paper |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SacParams {
    /// Policy network.
    pub actor: MlpConfig,
    /// Each critic's network.
    pub critic: MlpConfig,
    /// Number of critics.
    pub n_critics: usize,
    /// Discount.
    pub gamma: f64,
    /// Polyak coefficient.
    pub tau: f64,
    /// Policy learning rate.
    pub actor_lr: f64,
    /// Critic learning rate.
    pub critic_lr: f64,
    /// Temperature learning rate.
    pub alpha_lr: f64,
    /// Initial temperature.
    pub init_alpha: f64,
    /// Learn the temperature.
    pub autotune: bool,
    /// Entropy target (none: `−act_dim`).
    pub target_entropy: Option<f64>,
    /// Lower clamp of the log-std.
    pub log_std_min: f64,
    /// Upper clamp of the log-std.
    pub log_std_max: f64,
    /// Critic updates per actor update.
    pub actor_update_interval: usize,
    /// Updates per target update.
    pub target_update_interval: usize,
}

impl Default for SacParams {
    fn default() -> Self {
        Self {
            actor: MlpConfig::new([256, 256]),
            critic: MlpConfig::new([256, 256]),
            n_critics: 2,
            gamma: 0.99,
            tau: 0.005,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            alpha_lr: 3e-4,
            init_alpha: 1.0,
            autotune: true,
            target_entropy: None,
            log_std_min: -5.0,
            log_std_max: 2.0,
            actor_update_interval: 1,
            target_update_interval: 1,
        }
    }
}

macro_rules! setters {
    ($t:ty { $($field:ident : $ty:ty),* $(,)? }) => {
        impl $t {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, v: $ty) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }
    };
}
pub(crate) use setters;

setters!(SacParams {
    actor: MlpConfig,
    critic: MlpConfig,
    n_critics: usize,
    gamma: f64,
    tau: f64,
    actor_lr: f64,
    critic_lr: f64,
    alpha_lr: f64,
    init_alpha: f64,
    autotune: bool,
    target_entropy: Option<f64>,
    log_std_min: f64,
    log_std_max: f64,
    actor_update_interval: usize,
    target_update_interval: usize,
});

impl SacParams {
    /// Sets the hidden widths of both actor and critic.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.actor.hidden = hidden.clone().into();
        self.critic.hidden = hidden.into();
        self
    }
}

pub(crate) fn check_mlp(name: &str, cfg: &MlpConfig) -> Result<Valid<MlpConfig>> {
    let v = cfg.clone().check().map_err(|e| AgentError::from(e).prefixed(name))?;
    if cfg.output_activation != rl_nn::Activation::Identity {
        return Err(AgentError::invalid(
            format!("{name}.output_activation"),
            format!("{:?}", cfg.output_activation),
            "must be identity",
        ));
    }
    Ok(v)
}

impl Params for SacParams {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        check_mlp("actor", &self.actor)?;
        check_mlp("critic", &self.critic)?;
        check::at_least("n_critics", self.n_critics, 1)?;
        check::unit_closed("gamma", self.gamma)?;
        check::unit_closed("tau", self.tau)?;
        check::positive("actor_lr", self.actor_lr)?;
        check::positive("critic_lr", self.critic_lr)?;
        check::positive("alpha_lr", self.alpha_lr)?;
        check::positive("init_alpha", self.init_alpha)?;
        if let Some(h) = self.target_entropy {
            if !h.is_finite() {
                return Err(AgentError::invalid("target_entropy", h, "must be finite"));
            }
        }
        if !(self.log_std_min.is_finite() && self.log_std_max.is_finite() && self.log_std_min < self.log_std_max) {
            return Err(AgentError::invalid(
                "log_std_min",
                self.log_std_min,
                format!("need finite log_std_min < log_std_max = {}", self.log_std_max),
            ));
        }
        check::at_least("actor_update_interval", self.actor_update_interval, 1)?;
        check::at_least("target_update_interval", self.target_update_interval, 1)?;
        Ok(())
    }
}

/// Soft Actor-Critic (Haarnoja et al. 2018, arXiv 1801.01290 and 1812.05905).
///
/// One [`update`](BatchLearner::update) on a batch `(s, a, r, s', d)`, in this order (SB3's; one
/// policy forward on `s` serves the temperature and the actor loss):
///
/// ```text
/// a~, log π(a~|s) = sample(π(s))                                   (reparameterised)
/// temperature  L(α)  = −mean( log α · (log π(a~|s) + H̄) )          (autotune; α = exp(log α))
/// critic       y     = r + γ_k (1 − d) [ min_e Q'_e(s', a') − α log π(a'|s') ],  a' ~ π(s')
///              L(Q)  = Σ_e mean_b (Q_e(s, a) − y)²                  (all critics: one batched forward)
/// actor        L(π)  = mean( α log π(a~|s) − min_e Q_e(s, a~) )     (critic weights frozen, updated critic)
/// targets      θ'    ← θ' + τ (θ − θ')
/// ```
///
/// `γ_k` is the batch's per-row discount (`n`-step) or `γ`. All noise comes from the agent's
/// own generator (`derive_seed_named(seed, "sac-noise")`); weights from
/// `derive_seed_named(seed, "sac-init")`.
///
/// ```
/// use rl_agents::{Agent, BatchLearner, ReplayBuffer, ReplayBufferParams, Sac, SacParams};
/// use rl_core::{Params, Space};
/// let obs = Space::symmetric(3, 10.0)?;
/// let act = Space::symmetric(1, 2.0)?;
/// let mut sac = Sac::new(SacParams::default().hidden([32, 32]).check()?, &obs, &act, tch::Device::Cpu, 0)?;
/// let mut buf = ReplayBuffer::new(ReplayBufferParams::default().capacity(100).check()?, 3, 1)?;
/// let o = ndarray::array![0.1f32, 0.2, 0.3];
/// buf.push(o.view(), ndarray::array![0.5f32].view(), -1.0, o.view(), false, false, 0)?;
/// let batch = buf.sample(16, tch::Device::Cpu, &mut rl_core::rng_from_seed(1))?;
/// let metrics = sac.update(&batch)?.to_metrics()?;
/// assert!(metrics.get("loss/critic").is_some());
/// # Ok::<(), rl_agents::AgentError>(())
/// ```
#[derive(Debug)]
pub struct Sac {
    params: Valid<SacParams>,
    device: Device,
    obs_dim: usize,
    act_dim: usize,
    actor_vs: VarStore,
    actor: TanhGaussianActor,
    critic_vs: VarStore,
    critic: EnsembleCritic,
    target_vs: VarStore,
    target: EnsembleCritic,
    sync: TargetSync,
    log_alpha: Tensor,
    actor_opt: Adam,
    critic_opt: Adam,
    alpha_opt: Adam,
    target_entropy: f64,
    rng: SeededRng,
    updates: u64,
}

/// The non-tensor state of a [`Sac`] checkpoint.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SacState {
    params: SacParams,
    obs_dim: usize,
    act_dim: usize,
    low: Vec<f32>,
    high: Vec<f32>,
    updates: u64,
    rng: SeededRng,
}

const SAC_KIND: &str = "rl_agents.sac";
const SAC_FORMAT: u32 = 1;

pub(crate) fn adam(lr: f64) -> Result<Valid<AdamParams>> {
    Ok(AdamParams::default().lr(lr).check()?)
}

impl Sac {
    /// A SAC agent for observations of `obs_space` and actions in the bounded box
    /// `action_space`, on `device`, seeded by `seed`.
    ///
    /// # Errors
    /// [`AgentError::UnsupportedSpace`] for a discrete or unbounded action space; device and
    /// libtorch failures.
    pub fn new(
        params: Valid<SacParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let (obs_dim, act_dim) = (obs_space.dim(), bounds.dim());
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "sac-init"));
        let actor_cfg = check_mlp("actor", &params.actor)?;
        let critic_cfg = check_mlp("critic", &params.critic)?;
        let actor_vs = VarStore::new(device);
        let log_std = LogStdBounds { min: params.log_std_min, max: params.log_std_max };
        let actor = TanhGaussianActor::new(&actor_vs.root(), obs_dim, bounds, log_std, &actor_cfg, &mut init)?;
        let critic_vs = VarStore::new(device);
        let critic =
            EnsembleCritic::new(&critic_vs.root(), params.n_critics, obs_dim, act_dim, &critic_cfg, &mut init)?;
        let mut target_vs = VarStore::new(device);
        // the target's initial draw is overwritten by the copy; a separate stream keeps `init` unshifted
        let mut scratch = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "sac-target-scratch"));
        let target =
            EnsembleCritic::new(&target_vs.root(), params.n_critics, obs_dim, act_dim, &critic_cfg, &mut scratch)?;
        let sync = TargetSync::new(&mut target_vs, &critic_vs)?;
        let log_alpha = Tensor::f_from_slice(&[params.init_alpha.ln() as f32])?
            .f_reshape([0i64; 0])?
            .f_to_device(device)?
            .set_requires_grad(true);
        let actor_opt = Adam::for_var_store(adam(params.actor_lr)?, &actor_vs)?;
        let critic_opt = Adam::for_var_store(adam(params.critic_lr)?, &critic_vs)?;
        let alpha_opt = Adam::new(adam(params.alpha_lr)?, vec![("log_alpha".into(), log_alpha.shallow_clone())])?;
        let target_entropy = params.target_entropy.unwrap_or(-(act_dim as f64));
        Ok(Self {
            params,
            device,
            obs_dim,
            act_dim,
            actor_vs,
            actor,
            critic_vs,
            critic,
            target_vs,
            target,
            sync,
            log_alpha,
            actor_opt,
            critic_opt,
            alpha_opt,
            target_entropy,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "sac-noise")),
            updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &SacParams {
        &self.params
    }

    /// The current temperature `α`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn alpha(&self) -> Result<f64> {
        Ok(self.log_alpha.f_exp()?.f_double_value(&[])?)
    }

    /// The policy network.
    pub fn actor(&self) -> &TanhGaussianActor {
        &self.actor
    }

    /// The critic ensemble.
    pub fn critic(&self) -> &EnsembleCritic {
        &self.critic
    }

    /// The target critic ensemble.
    pub fn target_critic(&self) -> &EnsembleCritic {
        &self.target
    }

    /// The variable stores `(actor, critic, target critic)` (e.g. to inspect or export weights).
    pub fn var_stores(&self) -> (&VarStore, &VarStore, &VarStore) {
        (&self.actor_vs, &self.critic_vs, &self.target_vs)
    }

    fn parts(&self) -> Parts<'_> {
        Parts {
            stores: vec![("actor", &self.actor_vs), ("critic", &self.critic_vs), ("critic_target", &self.target_vs)],
            optims: vec![("actor", &self.actor_opt), ("critic", &self.critic_opt), ("alpha", &self.alpha_opt)],
            tensors: vec![("log_alpha", &self.log_alpha)],
        }
    }
}

impl Agent for Sac {
    fn name(&self) -> &'static str {
        "sac"
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>> {
        let x = obs_tensor(obs, self.obs_dim, self.device)?;
        let a = tch::no_grad(|| self.actor.sample(&x, &mut self.rng))?;
        to_array2(&a.action)
    }

    fn policy(&self) -> &dyn BatchPolicy {
        &self.actor
    }

    fn device(&self) -> Device {
        self.device
    }

    fn updates(&self) -> u64 {
        self.updates
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let state = SacState {
            params: self.params.get().clone(),
            obs_dim: self.obs_dim,
            act_dim: self.act_dim,
            low: self.actor.bounds().low().to_vec(),
            high: self.actor.bounds().high().to_vec(),
            updates: self.updates,
            rng: self.rng.clone(),
        };
        rl_nn::checkpoint::save_dir(dir, SAC_KIND, SAC_FORMAT, &state, &self.parts().collect()?)?;
        Ok(())
    }

    fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<SacState>(dir, SAC_KIND, SAC_FORMAT)?;
        let s = ck.state;
        AgentError::ensure_same(&ck.path, "params", &s.params, self.params.get())?;
        AgentError::ensure_same(&ck.path, "obs_dim", &s.obs_dim, &self.obs_dim)?;
        AgentError::ensure_same(&ck.path, "act_dim", &s.act_dim, &self.act_dim)?;
        AgentError::ensure_same(&ck.path, "action low", &s.low.as_slice(), &self.actor.bounds().low())?;
        AgentError::ensure_same(&ck.path, "action high", &s.high.as_slice(), &self.actor.bounds().high())?;
        self.parts().check(&ck.tensors, &ck.path)?;
        ckpt::restore(
            &[("actor", &self.actor_vs), ("critic", &self.critic_vs), ("critic_target", &self.target_vs)],
            &mut [("actor", &mut self.actor_opt), ("critic", &mut self.critic_opt), ("alpha", &mut self.alpha_opt)],
            &mut [("log_alpha", &mut self.log_alpha)],
            &ck.tensors,
            &ck.path,
        )?;
        self.updates = s.updates;
        self.rng = s.rng;
        Ok(())
    }
}

impl BatchLearner for Sac {
    fn update(&mut self, batch: &Batch) -> Result<UpdateMetrics> {
        batch.check_dims(self.obs_dim, self.act_dim, self.device)?;
        let p = self.params.get();
        let mut m = UpdateMetrics::new();
        let actor_step = self.updates % p.actor_update_interval as u64 == 0;
        // one policy forward on s serves the temperature and the actor loss
        let pi = if actor_step { Some(self.actor.sample(batch.obs(), &mut self.rng)?) } else { None };
        if let (Some(pi), true) = (&pi, p.autotune) {
            let target = pi.log_prob.f_detach()?.f_add_scalar(self.target_entropy)?;
            let loss = self.log_alpha.f_mul(&target)?.f_mean(Kind::Float)?.f_neg()?;
            self.alpha_opt.backward_step(&loss)?;
            m.push("loss/alpha", &loss)?;
        }
        let alpha = self.log_alpha.f_detach()?.f_exp()?;
        // critic
        let y = tch::no_grad(|| -> Result<Tensor> {
            let next = self.actor.sample(batch.next_obs(), &mut self.rng)?;
            let q_next = self.target.forward(batch.next_obs(), &next.action)?.f_amin(0, false)?;
            let v_next = q_next.f_sub(&next.log_prob.f_mul(&alpha)?)?;
            Ok(batch.reward().f_add(&batch.bootstrap(p.gamma)?.f_mul(&v_next)?)?)
        })?;
        let q = self.critic.forward(batch.obs(), batch.action())?;
        let critic_loss =
            q.f_sub(&y.f_unsqueeze(0)?)?.f_square()?.f_mean_dim(1, false, Kind::Float)?.f_sum(Kind::Float)?;
        self.critic_opt.backward_step(&critic_loss)?;
        m.push("loss/critic", &critic_loss)?;
        m.push("train/q", &q.f_detach()?.f_mean(Kind::Float)?)?;
        // actor, against the updated critic with its weights frozen
        if let Some(pi) = pi {
            let q_pi = self.critic.forward_frozen(batch.obs(), &pi.action)?.f_amin(0, false)?;
            let actor_loss = pi.log_prob.f_mul(&alpha)?.f_sub(&q_pi)?.f_mean(Kind::Float)?;
            self.actor_opt.backward_step(&actor_loss)?;
            m.push("loss/actor", &actor_loss)?;
            m.push("train/entropy", &pi.log_prob.f_detach()?.f_mean(Kind::Float)?.f_neg()?)?;
        }
        m.push("train/alpha", &alpha)?;
        self.updates += 1;
        if self.updates % p.target_update_interval as u64 == 0 {
            self.sync.soft_update(p.tau)?;
        }
        Ok(m)
    }
}

impl BatchPolicy for TanhGaussianActor {
    fn obs_dim(&self) -> usize {
        TanhGaussianActor::obs_dim(self)
    }

    fn act_dim(&self) -> usize {
        self.bounds().dim()
    }

    fn act_batch(&self, obs: ArrayView2<'_, f32>, mode: ActMode, rng: &mut dyn rand::RngCore) -> Result<Array2<f32>> {
        let x = obs_tensor(obs, BatchPolicy::obs_dim(self), self.bounds().scale().device())?;
        let a = tch::no_grad(|| -> Result<Tensor> {
            match mode {
                ActMode::Deterministic => self.mean_action(&x),
                ActMode::Stochastic => Ok(self.sample(&x, rng)?.action),
            }
        })?;
        to_array2(&a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_params_name_the_field() {
        let e = SacParams::default().tau(1.5).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "tau"), "{e}");
        let e = SacParams::default().actor(MlpConfig::new([0])).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "actor.hidden[0]"), "{e}");
        let e = SacParams::default().log_std_min(3.0).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "log_std_min"), "{e}");
        let e = SacParams::default().n_critics(0).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "n_critics"), "{e}");
        let e = SacParams::default()
            .critic(MlpConfig::new([4]).output_activation(rl_nn::Activation::Tanh))
            .check()
            .unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "critic.output_activation"));
        assert!(serde_json::from_str::<SacParams>(r#"{"taw": 0.1}"#).is_err());
        let p: SacParams = serde_json::from_str(r#"{"tau": 0.01, "critic": {"hidden": [64]}}"#).unwrap();
        assert_eq!(p.tau, 0.01);
        assert_eq!(p.critic.hidden, vec![64]);
        assert!(serde_json::from_str::<Valid<SacParams>>(r#"{"gamma": 2.0}"#).is_err());
    }

    #[test]
    fn rejects_discrete_actions_and_wrong_batches() {
        let obs = Space::symmetric(3, 1.0).unwrap();
        let p = SacParams::default().hidden([8]).check().unwrap();
        let e = Sac::new(p.clone(), &obs, &Space::discrete(2).unwrap(), Device::Cpu, 0).unwrap_err();
        assert!(matches!(e, AgentError::UnsupportedSpace { .. }));
        let mut sac = Sac::new(p, &obs, &Space::symmetric(1, 1.0).unwrap(), Device::Cpu, 0).unwrap();
        let b = Batch::from_tensors(
            Tensor::zeros([4, 2], (Kind::Float, Device::Cpu)),
            Tensor::zeros([4, 1], (Kind::Float, Device::Cpu)),
            Tensor::zeros([4], (Kind::Float, Device::Cpu)),
            Tensor::zeros([4, 2], (Kind::Float, Device::Cpu)),
            Tensor::zeros([4], (Kind::Float, Device::Cpu)),
            None,
        )
        .unwrap();
        assert!(matches!(sac.update(&b), Err(AgentError::Shape { .. })));
        assert_eq!(sac.updates(), 0);
        assert!(sac.explore(Array2::zeros((2, 4)).view()).is_err());
        let mut bad = Array2::zeros((1, 3));
        bad[[0, 1]] = f32::NAN;
        assert!(sac.explore(bad.view()).is_err());
    }
}
