//! The actor–critic core of the TD3 family: a deterministic actor and a fused critic
//! ensemble, both with Polyak targets and Adam, and the pieces of their updates that every
//! member shares (the smoothed target action, the ensemble's squared error, the soft update,
//! exploration). [`crate::Td3`] is built on it, and so are offline-rl's TD3+BC, DMG and SCAS
//! (the shape of `sfujimoto/TD3_BC`, `thu-rllab/DMG` and `thu-rllab/SCAS`:
//! `Linear-ReLU-Linear-ReLU-Linear` networks with PyTorch's default initialisation).
//!
//! A new algorithm of the family holds an [`ActorCritic`], writes its own losses from the
//! public networks and optimisers, and checkpoints through [`ActorCritic::parts`]:
//!
//! ```
//! use rl_agents::{ActionBounds, ActorCritic, ActorCriticSpec};
//! use rl_core::Space;
//! use rl_nn::MlpConfig;
//! use tch::{Device, Kind, Tensor};
//!
//! let bounds = ActionBounds::from_space(&Space::symmetric(2, 1.0)?, Device::Cpu)?;
//! let net = MlpConfig::new([16, 16]);
//! let spec = ActorCriticSpec {
//!     obs_dim: 3, bounds, actor: &net, critic: &net, n_critics: 2, actor_lr: 3e-4, critic_lr: 3e-4,
//! };
//! let mut init = rl_core::rng_from_seed(1);
//! let mut scratch = rl_core::rng_from_seed(2);
//! let ac = ActorCritic::new(spec, Device::Cpu, &mut init, &mut scratch)?;
//! let next_obs = Tensor::zeros([4, 3], (Kind::Float, Device::Cpu));
//! let eps = Tensor::zeros([4, 2], (Kind::Float, Device::Cpu));
//! let a = ac.target_action(&next_obs, &eps, 0.2, 0.5, false)?; // μ'(s') + clip(0.2 ε, ±0.5)
//! assert_eq!(a.size(), [4, 2]);
//! # Ok::<(), rl_agents::AgentError>(())
//! ```

use std::collections::BTreeMap;

use rand::Rng;
use rl_nn::optim::Adam;
use rl_nn::parts::Parts;
use rl_nn::MlpConfig;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::error::Result;
use crate::nets::{ActionBounds, DeterministicActor, EnsembleCritic, TargetSync};
use crate::sac::{adam, check_mlp};

/// Deterministic actor + fused critic ensemble with their targets and Adam optimisers. The
/// fields are public: an algorithm built on the core reads the networks and steps the
/// optimisers with its own losses.
#[derive(Debug)]
pub struct ActorCritic {
    /// Where every tensor lives.
    pub device: Device,
    /// Observation width.
    pub obs_dim: usize,
    /// Action width.
    pub act_dim: usize,
    /// The actor's variables.
    pub actor_vs: VarStore,
    /// The actor `μ(s)`.
    pub actor: DeterministicActor,
    /// The target actor's variables.
    pub actor_target_vs: VarStore,
    /// The target actor `μ'(s)`.
    pub actor_target: DeterministicActor,
    /// Polyak sync actor → target.
    pub actor_sync: TargetSync,
    /// The critics' variables (one fused ensemble).
    pub critic_vs: VarStore,
    /// The critic ensemble `Q_e(s, a)`.
    pub critic: EnsembleCritic,
    /// The target critics' variables.
    pub critic_target_vs: VarStore,
    /// The target critic ensemble.
    pub critic_target: EnsembleCritic,
    /// Polyak sync critics → targets.
    pub critic_sync: TargetSync,
    /// Adam over the actor.
    pub actor_opt: Adam,
    /// Adam over the critics.
    pub critic_opt: Adam,
}

/// What [`ActorCritic::new`] needs.
#[derive(Debug, Clone)]
pub struct ActorCriticSpec<'a> {
    /// Observation width.
    pub obs_dim: usize,
    /// The action box (the actor maps `tanh` onto it).
    pub bounds: ActionBounds,
    /// The actor's hidden layers (identity output; the actor adds its `tanh`).
    pub actor: &'a MlpConfig,
    /// Each critic's hidden layers (identity output).
    pub critic: &'a MlpConfig,
    /// Critics in the ensemble.
    pub n_critics: usize,
    /// Actor Adam learning rate.
    pub actor_lr: f64,
    /// Critic Adam learning rate.
    pub critic_lr: f64,
}

impl ActorCritic {
    /// The actor's and then the critics' weights from `init`; the targets are built from
    /// `scratch` (their own draws are overwritten by the copy, so `init` stays clean) and start
    /// as copies.
    ///
    /// # Errors
    /// [`crate::AgentError::InvalidParameter`] for a network configuration that fails its
    /// checks or has a non-identity output; device and libtorch failures.
    pub fn new<R: Rng + ?Sized, S: Rng + ?Sized>(
        spec: ActorCriticSpec<'_>,
        device: Device,
        init: &mut R,
        scratch: &mut S,
    ) -> Result<Self> {
        let actor_cfg = check_mlp("actor", spec.actor)?;
        let critic_cfg = check_mlp("critic", spec.critic)?;
        let obs_dim = spec.obs_dim;
        let act_dim = spec.bounds.dim();
        let actor_vs = VarStore::new(device);
        let actor = DeterministicActor::new(&actor_vs.root(), obs_dim, spec.bounds.clone(), &actor_cfg, init)?;
        let critic_vs = VarStore::new(device);
        let critic = EnsembleCritic::new(&critic_vs.root(), spec.n_critics, obs_dim, act_dim, &critic_cfg, init)?;
        let mut actor_target_vs = VarStore::new(device);
        let actor_target = DeterministicActor::new(&actor_target_vs.root(), obs_dim, spec.bounds, &actor_cfg, scratch)?;
        let actor_sync = TargetSync::new(&mut actor_target_vs, &actor_vs)?;
        let mut critic_target_vs = VarStore::new(device);
        let critic_target =
            EnsembleCritic::new(&critic_target_vs.root(), spec.n_critics, obs_dim, act_dim, &critic_cfg, scratch)?;
        let critic_sync = TargetSync::new(&mut critic_target_vs, &critic_vs)?;
        let actor_opt = Adam::for_var_store(adam(spec.actor_lr)?, &actor_vs)?;
        let critic_opt = Adam::for_var_store(adam(spec.critic_lr)?, &critic_vs)?;
        Ok(Self {
            device,
            obs_dim,
            act_dim,
            actor_vs,
            actor,
            actor_target_vs,
            actor_target,
            actor_sync,
            critic_vs,
            critic,
            critic_target_vs,
            critic_target,
            critic_sync,
            actor_opt,
            critic_opt,
        })
    }

    /// TD3's smoothed target action `clip(μ'(s') + clip(σε, −c, c) · k, low, high)` for a
    /// standard normal draw `eps` `[B, act_dim]`, with `k` the action scale `(high − low) / 2`
    /// when `scaled` and 1 otherwise (no gradient is taken through it by the callers).
    ///
    /// # Errors
    /// libtorch failures (shapes are the caller's to check).
    pub fn target_action(
        &self,
        next_obs: &Tensor,
        eps: &Tensor,
        sigma: f64,
        clip: f64,
        scaled: bool,
    ) -> Result<Tensor> {
        let mut noise = eps.f_mul_scalar(sigma)?.f_clamp(-clip, clip)?;
        if scaled {
            noise = noise.f_mul(self.actor.bounds().scale())?;
        }
        self.actor.bounds().clamp(&self.actor_target.forward(next_obs)?.f_add(&noise)?)
    }

    /// Polyak update `θ' ← τθ + (1 − τ)θ'` of the critic targets, then of the actor target.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn soft_update(&self, tau: f64) -> Result<()> {
        self.critic_sync.soft_update(tau)?;
        self.actor_sync.soft_update(tau)
    }

    /// Exploration `clip(μ(s) + N(0, σ²) · scale, low, high)` with the noise from `rng`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn explore<R: Rng + ?Sized>(&self, obs: &Tensor, sigma: f64, rng: &mut R) -> Result<Tensor> {
        let b = obs.size()[0];
        let eps = rl_nn::rand::normal(&[b, self.act_dim as i64], 0.0, sigma, (Kind::Float, self.device), rng)?;
        tch::no_grad(|| {
            let mu = self.actor.forward(obs)?;
            self.actor.bounds().clamp(&mu.f_add(&eps.f_mul(self.actor.bounds().scale())?)?)
        })
    }

    /// Copies the core's stores and optimiser states back from a checkpoint's tensors (check
    /// the whole file with [`ActorCritic::parts`] — plus the algorithm's own parts — first).
    ///
    /// # Errors
    /// libtorch failures and the optimisers' load checks.
    pub fn restore(&mut self, file: &BTreeMap<String, Tensor>, path: &str) -> Result<()> {
        rl_nn::parts::restore(
            &[
                ("actor", &self.actor_vs),
                ("actor_target", &self.actor_target_vs),
                ("critic", &self.critic_vs),
                ("critic_target", &self.critic_target_vs),
            ],
            &mut [("actor", &mut self.actor_opt), ("critic", &mut self.critic_opt)],
            &mut [],
            file,
            path,
        )?;
        Ok(())
    }

    /// The checkpoint parts: stores `actor`, `actor_target`, `critic`, `critic_target` and the
    /// optimisers `actor`, `critic` (an algorithm adds its own, e.g. DMG's `value`).
    pub fn parts(&self) -> Parts<'_> {
        Parts::new()
            .store("actor", &self.actor_vs)
            .store("actor_target", &self.actor_target_vs)
            .store("critic", &self.critic_vs)
            .store("critic_target", &self.critic_target_vs)
            .optim("actor", &self.actor_opt)
            .optim("critic", &self.critic_opt)
    }
}

/// The critic ensemble's loss `Σ_e mean_b (q_e − y)²` for values `q` `[E, B]` and targets `y`
/// `[B]` (PyTorch's `Σ_e F.mse_loss(Q_e, y)`, as TD3, TD3+BC, DMG and SCAS write it).
///
/// # Errors
/// libtorch failures (mismatched shapes).
pub fn ensemble_mse(q: &Tensor, y: &Tensor) -> Result<Tensor> {
    Ok(q.f_sub(&y.f_unsqueeze(0)?)?.f_square()?.f_mean_dim(1, false, Kind::Float)?.f_sum(Kind::Float)?)
}
