//! Twin Delayed DDPG.

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rl_core::{ActMode, Params, SeededRng, Space, Valid};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::actor_critic::{ensemble_mse, ActorCritic};
use crate::agent::{obs_tensor, to_array2, Agent, BatchLearner, BatchPolicy, UpdateMetrics};
use crate::batch::Batch;
use crate::ckpt::Parts;
use crate::error::{AgentError, Result};
use crate::nets::{ActionBounds, DeterministicActor, EnsembleCritic};
use crate::sac::setters;
use crate::td3_core::Td3Core;

/// Which critic value the actor maximises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ActorObjective {
    /// `Q_1(s, μ(s))`: the first critic (TD3 paper and code).
    #[default]
    First,
    /// The mean over the critics.
    Mean,
    /// The minimum over the critics.
    Min,
}

/// Parameters of [`Td3`]: the shared TD3 hyper-parameters [`Td3Core`] (field `td3`, its keys
/// at the top level of a configuration; defaults: the authors' code `sfujimoto/TD3`,
/// `TD3.py`/`main.py`, which CORL and CleanRL follow) and which critic value the actor
/// maximises.
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic` | `[256, 256]` ReLU | networks | [`MlpConfig`](rl_nn::MlpConfig), identity output | code (paper: 400-300) |
/// | `n_critics` | 2 | critics in the fused ensemble; targets use their minimum | `>= 1` | paper (clipped double Q) |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `tau` | 0.005 | target smoothing | `[0, 1]` | paper |
/// | `actor_lr`, `critic_lr` | 3e-4 | Adam steps | `> 0` | code (paper: 1e-3) |
/// | `policy_noise` | 0.2 | target smoothing noise std, × action scale | `>= 0` | paper |
/// | `noise_clip` | 0.5 | clip of the smoothing noise, × action scale | `>= 0` | paper |
/// | `policy_delay` | 2 | critic updates per actor and target update | `>= 1` | paper |
/// | `exploration_noise` | 0.1 | Gaussian exploration std, × action scale | `>= 0` | paper |
/// | `actor_objective` | `first` | critic value the actor maximises | | paper |
///
/// Every row but the last is a field of [`Td3Core`] (`params.td3.gamma`; the setter
/// `.gamma(0.9)` works on `Td3Params` too).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Td3Params {
    /// The shared TD3 hyper-parameters.
    pub td3: Td3Core,
    /// What the actor maximises.
    pub actor_objective: ActorObjective,
}

crate::td3_family_params!(Td3Params { actor_objective });

setters!(Td3Params { td3: Td3Core, actor_objective: ActorObjective });

impl Td3Params {
    /// Sets the hidden widths of both actor and critic.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.td3 = self.td3.hidden(hidden);
        self
    }
}

impl Params for Td3Params {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        self.td3.check_fields()?;
        Ok(())
    }
}

/// TD3 (Fujimoto et al. 2018, arXiv 1802.09477; reference code `sfujimoto/TD3`).
///
/// ```text
/// critic (every update)
///   a' = clip( μ'(s') + clip(ε, −c, c) · scale, low, high ),   ε ~ N(0, σ²)      (target smoothing)
///   y  = r + γ_k (1 − d) min_e Q'_e(s', a')
///   L(Q) = Σ_e mean_b (Q_e(s, a) − y)²                          (all critics: one batched forward)
/// actor and targets (every `policy_delay` updates)
///   L(μ) = −mean Q_1(s, μ(s))                                   (critic weights frozen)
///   θ' ← θ' + τ (θ − θ')  for the actor and the critics
/// exploration: a = clip( μ(s) + N(0, (σ_expl · scale)²), low, high )
/// ```
///
/// ```
/// use rl_agents::{Agent, Td3, Td3Params};
/// use rl_core::{Params, Space};
/// let mut td3 = Td3::new(Td3Params::default().hidden([32]).check()?, &Space::symmetric(3, 1.0)?,
///                        &Space::symmetric(1, 2.0)?, tch::Device::Cpu, 0)?;
/// let a = td3.explore(ndarray::Array2::zeros((4, 3)).view())?;
/// assert_eq!(a.dim(), (4, 1));
/// assert!(a.iter().all(|x| x.abs() <= 2.0));
/// # Ok::<(), rl_agents::AgentError>(())
/// ```
#[derive(Debug)]
pub struct Td3 {
    params: Valid<Td3Params>,
    device: Device,
    obs_dim: usize,
    act_dim: usize,
    nets: ActorCritic,
    rng: SeededRng,
    updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Td3State {
    params: Td3Params,
    obs_dim: usize,
    act_dim: usize,
    low: Vec<f32>,
    high: Vec<f32>,
    updates: u64,
    rng: SeededRng,
}

const TD3_KIND: &str = "rl_agents.td3";
const TD3_FORMAT: u32 = 1;

impl Td3 {
    /// A TD3 agent for observations of `obs_space` and actions in the bounded box
    /// `action_space`, on `device`, seeded by `seed`.
    ///
    /// # Errors
    /// [`AgentError::UnsupportedSpace`] for a discrete or unbounded action space; device and
    /// libtorch failures.
    pub fn new(
        params: Valid<Td3Params>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let (obs_dim, act_dim) = (obs_space.dim(), bounds.dim());
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "td3-init"));
        let mut scratch = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "td3-target-scratch"));
        let nets = ActorCritic::new(params.td3.spec(obs_dim, bounds), device, &mut init, &mut scratch)?;
        Ok(Self {
            params,
            device,
            obs_dim,
            act_dim,
            nets,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "td3-noise")),
            updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Td3Params {
        &self.params
    }

    /// The policy network.
    pub fn actor(&self) -> &DeterministicActor {
        &self.nets.actor
    }

    /// The critic ensemble.
    pub fn critic(&self) -> &EnsembleCritic {
        &self.nets.critic
    }

    /// The variable stores `(actor, actor target, critic, critic target)`.
    pub fn var_stores(&self) -> [&VarStore; 4] {
        [&self.nets.actor_vs, &self.nets.actor_target_vs, &self.nets.critic_vs, &self.nets.critic_target_vs]
    }

    fn parts(&self) -> Parts<'_> {
        self.nets.parts()
    }

    /// Gaussian noise `N(0, (std · scale)²)` of `shape`, from the agent's stream.
    fn scaled_noise(&mut self, shape: &[i64], std: f64) -> Result<Tensor> {
        let eps = rl_nn::rand::normal(shape, 0.0, std, (Kind::Float, self.device), &mut self.rng)?;
        Ok(eps)
    }
}

impl Agent for Td3 {
    fn name(&self) -> &'static str {
        "td3"
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>> {
        let x = obs_tensor(obs, self.obs_dim, self.device)?;
        let a = self.nets.explore(&x, self.params.td3.exploration_noise, &mut self.rng)?;
        to_array2(&a)
    }

    fn policy(&self) -> &dyn BatchPolicy {
        &self.nets.actor
    }

    fn device(&self) -> Device {
        self.device
    }

    fn updates(&self) -> u64 {
        self.updates
    }

    fn save(&self, dir: &Path) -> Result<()> {
        let state = Td3State {
            params: self.params.get().clone(),
            obs_dim: self.obs_dim,
            act_dim: self.act_dim,
            low: self.nets.actor.bounds().low().to_vec(),
            high: self.nets.actor.bounds().high().to_vec(),
            updates: self.updates,
            rng: self.rng.clone(),
        };
        rl_nn::checkpoint::save_dir(dir, TD3_KIND, TD3_FORMAT, &state, &self.parts().collect()?)?;
        Ok(())
    }

    fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<Td3State>(dir, TD3_KIND, TD3_FORMAT)?;
        let s = ck.state;
        AgentError::ensure_same(&ck.path, "params", &s.params, self.params.get())?;
        AgentError::ensure_same(&ck.path, "obs_dim", &s.obs_dim, &self.obs_dim)?;
        AgentError::ensure_same(&ck.path, "act_dim", &s.act_dim, &self.act_dim)?;
        AgentError::ensure_same(&ck.path, "action low", &s.low.as_slice(), &self.nets.actor.bounds().low())?;
        AgentError::ensure_same(&ck.path, "action high", &s.high.as_slice(), &self.nets.actor.bounds().high())?;
        self.parts().check(&ck.tensors, &ck.path)?;
        self.nets.restore(&ck.tensors, &ck.path)?;
        self.updates = s.updates;
        self.rng = s.rng;
        Ok(())
    }
}

impl BatchLearner for Td3 {
    fn update(&mut self, batch: &Batch) -> Result<UpdateMetrics> {
        batch.check_dims(self.obs_dim, self.act_dim, self.device)?;
        let p = self.params.td3.clone();
        let objective = self.params.actor_objective;
        let mut m = UpdateMetrics::new();
        let b = batch.len() as i64;
        let noise = self.scaled_noise(&[b, self.act_dim as i64], p.policy_noise)?;
        let y = tch::no_grad(|| -> Result<Tensor> {
            let scale = self.nets.actor.bounds().scale();
            let smooth = noise.f_clamp(-p.noise_clip, p.noise_clip)?.f_mul(scale)?;
            let a_next =
                self.nets.actor.bounds().clamp(&self.nets.actor_target.forward(batch.next_obs())?.f_add(&smooth)?)?;
            let q_next = self.nets.critic_target.forward(batch.next_obs(), &a_next)?.f_amin(0, false)?;
            Ok(batch.reward().f_add(&batch.bootstrap(p.gamma)?.f_mul(&q_next)?)?)
        })?;
        let q = self.nets.critic.forward(batch.obs(), batch.action())?;
        let critic_loss = ensemble_mse(&q, &y)?;
        self.nets.critic_opt.backward_step(&critic_loss)?;
        m.push("loss/critic", &critic_loss)?;
        m.push("train/q", &q.f_detach()?.f_mean(Kind::Float)?)?;
        self.updates += 1;
        if self.updates % p.policy_delay as u64 == 0 {
            let a = self.nets.actor.forward(batch.obs())?;
            let q_pi = match objective {
                ActorObjective::First => self.nets.critic.forward_member_frozen(batch.obs(), &a, 0)?,
                ActorObjective::Mean => {
                    self.nets.critic.forward_frozen(batch.obs(), &a)?.f_mean_dim(0, false, Kind::Float)?
                }
                ActorObjective::Min => self.nets.critic.forward_frozen(batch.obs(), &a)?.f_amin(0, false)?,
            };
            let actor_loss = q_pi.f_mean(Kind::Float)?.f_neg()?;
            self.nets.actor_opt.backward_step(&actor_loss)?;
            m.push("loss/actor", &actor_loss)?;
            self.nets.soft_update(p.tau)?;
        }
        Ok(m)
    }
}

impl BatchPolicy for DeterministicActor {
    fn obs_dim(&self) -> usize {
        DeterministicActor::obs_dim(self)
    }

    fn act_dim(&self) -> usize {
        self.bounds().dim()
    }

    /// `μ(obs)` in both modes (the policy is deterministic; exploration noise is the agent's).
    fn act_batch(&self, obs: ArrayView2<'_, f32>, _mode: ActMode, _rng: &mut dyn rand::RngCore) -> Result<Array2<f32>> {
        let x = obs_tensor(obs, BatchPolicy::obs_dim(self), self.bounds().scale().device())?;
        let a = tch::no_grad(|| self.forward(&x))?;
        to_array2(&a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_params_name_the_field() {
        let e = Td3Params::default().policy_delay(0).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "policy_delay"), "{e}");
        let e = Td3Params::default().policy_noise(-0.1).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "policy_noise"), "{e}");
        let p: Td3Params = serde_json::from_str(r#"{"actor_objective": "min"}"#).unwrap();
        assert_eq!(p.actor_objective, ActorObjective::Min);
    }
}
