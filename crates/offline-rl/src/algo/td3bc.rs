//! TD3+BC (Fujimoto & Gu 2021, arXiv 2106.06860; `sfujimoto/TD3_BC`).

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rl_agents::{ActionBounds, Agent, Batch, BatchLearner, BatchPolicy, UpdateMetrics};
use rl_core::{Params, SeededRng, Space, Valid};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::common::{self, setters, AResult, Shape};
use super::{obs_tensor, OfflineAlgorithm};
use crate::error::{check, OfflineError, Result};
use rl_agents::{ActorCritic, Td3Core};

/// Parameters of [`Td3Bc`]: the shared TD3 hyper-parameters [`Td3Core`] (field `td3`, its keys
/// at the top level of a configuration) and `alpha`; defaults are the paper's and its code's
/// (identical for every D4RL task).
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic` | `[256, 256]` ReLU | networks | identity output | code |
/// | `n_critics` | 2 | critics in the fused ensemble; targets use their minimum | `>= 1` | code (TD3) |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `tau` | 0.005 | target smoothing | `[0, 1]` | paper |
/// | `actor_lr`, `critic_lr` | 3e-4 | Adam steps | `> 0` | paper |
/// | `policy_noise` | 0.2 | target smoothing noise std, × action scale | `>= 0` | paper |
/// | `noise_clip` | 0.5 | its clip, × action scale | `>= 0` | paper |
/// | `policy_delay` | 2 | critic updates per actor and target update | `>= 1` | paper |
/// | `exploration_noise` | 0.1 | Gaussian exploration std for [`Agent::explore`] (fine-tuning), × action scale | `>= 0` | TD3 |
/// | `alpha` | 2.5 | `λ = α / mean|Q|` weighs the Q term against behaviour cloning | `> 0` | paper |
///
/// Every row but the last is a field of [`Td3Core`] (`params.td3.gamma`; the setter
/// `.gamma(0.9)` works on `Td3BcParams` too). `check` names the first bad field in the order
/// of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Td3BcParams {
    /// The shared TD3 hyper-parameters.
    pub td3: Td3Core,
    /// Weight of the Q term.
    pub alpha: f64,
}

impl Default for Td3BcParams {
    fn default() -> Self {
        Self { td3: Td3Core::default(), alpha: 2.5 }
    }
}

rl_agents::td3_family_params!(Td3BcParams { alpha });

setters!(Td3BcParams { td3: Td3Core, alpha: f64 });

impl Td3BcParams {
    /// Sets the hidden widths of actor and critic.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.td3 = self.td3.hidden(hidden);
        self
    }
}

impl Params for Td3BcParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        self.td3.check_fields()?;
        check::positive("alpha", self.alpha)?;
        Ok(())
    }
}

/// TD3+BC: TD3 with a behaviour-cloning term in the actor loss.
///
/// ```text
/// critic (every update), all critics in one batched forward:
///   a' = clip( μ'(s') + clip(σε, −c, c) · scale, low, high )
///   y  = r + γ (1 − d) min_e Q'_e(s', a')
///   L(Q) = Σ_e mean_b (Q_e(s, a) − y)²
/// actor and targets (every `policy_delay` updates):
///   λ = α / mean_b |Q_1(s, μ(s))|                       (no gradient through λ)
///   L(μ) = −λ mean_b Q_1(s, μ(s)) + mean_{b,j} (μ(s) − a)²
///   θ' ← τ θ + (1 − τ) θ'   (actor and critics)
/// ```
///
/// ```
/// use offline_rl::algo::{Td3Bc, Td3BcParams};
/// use rl_agents::Agent;
/// use rl_core::{Params, Space};
/// let mut algo = Td3Bc::new(Td3BcParams::default().hidden([32]).check()?, &Space::symmetric(3, 1.0)?,
///                           &Space::symmetric(1, 2.0)?, tch::Device::Cpu, 0)?;
/// let a = algo.explore(ndarray::Array2::zeros((4, 3)).view())?;
/// assert_eq!(a.dim(), (4, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Td3Bc {
    params: Valid<Td3BcParams>,
    nets: ActorCritic,
    rng: SeededRng,
    updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    params: Td3BcParams,
    shape: Shape,
    updates: u64,
    rng: SeededRng,
}

const KIND: &str = "offline_rl.td3bc";
const FORMAT: u32 = 1;

impl Td3Bc {
    /// TD3+BC for observations of `obs_space` and actions in the bounded box `action_space`,
    /// on `device`; weights and noise from `seed`.
    ///
    /// # Errors
    /// [`OfflineError::Agent`] for an unbounded or discrete action space, device errors.
    pub fn new(
        params: Valid<Td3BcParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "td3bc-init"));
        let nets = common::actor_critic(params.td3.spec(obs_space.dim(), bounds), device, &mut init)?;
        Ok(Self {
            params,
            nets,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "td3bc-noise")),
            updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Td3BcParams {
        &self.params
    }

    /// The policy network.
    pub fn actor(&self) -> &rl_agents::DeterministicActor {
        &self.nets.actor
    }

    /// The critic ensemble.
    pub fn critic(&self) -> &rl_agents::EnsembleCritic {
        &self.nets.critic
    }

    /// The actor loss of a batch (no update), for tests and diagnostics: `(loss, λ)`.
    ///
    /// # Errors
    /// Shape and libtorch failures.
    pub fn actor_loss(&self, batch: &Batch) -> AResult<(Tensor, Tensor)> {
        let pi = self.nets.actor.forward(batch.obs())?;
        let q = self.nets.critic.forward_member_frozen(batch.obs(), &pi, 0)?;
        let lambda = q.f_abs()?.f_mean(Kind::Float)?.f_detach()?.f_reciprocal()?.f_mul_scalar(self.params.alpha)?;
        let bc = pi.f_sub(batch.action())?.f_square()?.f_mean(Kind::Float)?;
        let loss = q.f_mean(Kind::Float)?.f_mul(&lambda)?.f_neg()?.f_add(&bc)?;
        Ok((loss, lambda))
    }

    /// One update (the same as [`BatchLearner::update`]) with the target-smoothing draw supplied by
    /// the caller: `eps` is the standard normal `[B, act_dim]` tensor that `update` would draw
    /// from its own generator (the reference's `torch.randn_like(action)`), so a step can be
    /// replayed against another implementation. The internal generator is not touched.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Shape`] for a batch of other widths or an `eps` of another
    /// shape, kind or device; libtorch failures.
    pub fn update_with_noise(&mut self, batch: &Batch, eps: &Tensor) -> AResult<UpdateMetrics> {
        let n = &self.nets;
        batch.check_dims(n.obs_dim, n.act_dim, n.device)?;
        common::check_noise("eps", eps, batch.len(), n.act_dim, n.device)?;
        let p = self.params.td3.clone();
        let mut m = UpdateMetrics::new();
        let y = tch::no_grad(|| -> AResult<Tensor> {
            let a_next = n.target_action(batch.next_obs(), eps, p.policy_noise, p.noise_clip, true)?;
            let q_next = n.critic_target.forward(batch.next_obs(), &a_next)?.f_amin(0, false)?;
            Ok(batch.reward().f_add(&batch.bootstrap(p.gamma)?.f_mul(&q_next)?)?)
        })?;
        let q = n.critic.forward(batch.obs(), batch.action())?;
        let critic_loss = common::ensemble_mse(&q, &y)?;
        self.nets.critic_opt.backward_step(&critic_loss)?;
        m.push("loss/critic", &critic_loss)?;
        m.push("train/q", &q.f_detach()?.f_mean(Kind::Float)?)?;
        self.updates += 1;
        if self.updates % p.policy_delay as u64 == 0 {
            let (actor_loss, lambda) = self.actor_loss(batch)?;
            self.nets.actor_opt.backward_step(&actor_loss)?;
            self.nets.soft_update(p.tau)?;
            m.push("loss/actor", &actor_loss)?;
            m.push("train/lambda", &lambda)?;
        }
        Ok(m)
    }

    /// The network weights under checkpoint names (`actor.*`, `actor_target.*`, `critic.*`,
    /// `critic_target.*`; shallow copies, no optimiser state), e.g. to compare with another
    /// implementation.
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        rl_nn::parts::weights(&self.nets.parts().stores)
    }

    /// Overwrites the network weights from `weights` (names as [`Td3Bc::weights`]; every one
    /// must be present with its shape, no other name is accepted); optimiser state and counters
    /// are untouched.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Nn`]-wrapped checkpoint errors naming the missing, misshapen or
    /// unexpected tensor.
    pub fn set_weights(&mut self, weights: &std::collections::BTreeMap<String, Tensor>) -> AResult<()> {
        Ok(rl_nn::parts::set_weights(&self.nets.parts().stores, weights)?)
    }
}

impl Agent for Td3Bc {
    fn name(&self) -> &'static str {
        "td3bc"
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
            rng: self.rng.clone(),
        };
        common::save(dir, KIND, FORMAT, &state, &self.nets.parts())
    }

    fn load(&mut self, dir: &Path) -> AResult<()> {
        let ck = rl_nn::checkpoint::load_dir::<State>(dir, KIND, FORMAT)?;
        common::check_saved(
            &ck.path,
            (&ck.state.params, &ck.state.shape),
            (self.params.get(), &Shape::of(self.nets.obs_dim, self.nets.actor.bounds())),
        )?;
        self.nets.parts().check(&ck.tensors, &ck.path)?;
        self.nets.restore(&ck.tensors, &ck.path)?;
        self.updates = ck.state.updates;
        self.rng = ck.state.rng;
        Ok(())
    }
}

impl BatchLearner for Td3Bc {
    fn update(&mut self, batch: &Batch) -> AResult<UpdateMetrics> {
        let n = &self.nets;
        batch.check_dims(n.obs_dim, n.act_dim, n.device)?;
        let eps = rl_nn::rand::standard_normal(
            &[batch.len() as i64, n.act_dim as i64],
            (Kind::Float, n.device),
            &mut self.rng,
        )?;
        self.update_with_noise(batch, &eps)
    }
}

impl OfflineAlgorithm for Td3Bc {}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn actor_loss_matches_hand_computation() {
        let p = Td3BcParams::default().hidden([8]).check().unwrap();
        let algo =
            Td3Bc::new(p, &Space::symmetric(2, 1.0).unwrap(), &Space::symmetric(1, 1.0).unwrap(), Device::Cpu, 0)
                .unwrap();
        let obs = Tensor::from_slice(&[0.1f32, -0.4, 0.7, 0.2, -1.0, 0.5]).view([3, 2]);
        let act = Tensor::from_slice(&[0.3f32, -0.9, 0.0]).view([3, 1]);
        let b = Batch::from_tensors(
            obs.shallow_clone(),
            act,
            Tensor::zeros([3], (Kind::Float, Device::Cpu)),
            obs,
            Tensor::zeros([3], (Kind::Float, Device::Cpu)),
            None,
        )
        .unwrap();
        let (loss, lambda) = algo.actor_loss(&b).unwrap();
        let pi: Vec<f32> = Vec::try_from(&algo.actor().forward(b.obs()).unwrap().view([-1])).unwrap();
        let q: Vec<f32> =
            Vec::try_from(&algo.critic().forward(b.obs(), &algo.actor().forward(b.obs()).unwrap()).unwrap().get(0))
                .unwrap();
        let a = [0.3f32, -0.9, 0.0];
        let mean_abs = q.iter().map(|x| f64::from(x.abs())).sum::<f64>() / 3.0;
        let l = 2.5 / mean_abs;
        let want = -l * q.iter().map(|x| f64::from(*x)).sum::<f64>() / 3.0
            + (0..3).map(|i| f64::from(pi[i] - a[i]).powi(2)).sum::<f64>() / 3.0;
        assert!((common::scalar(&loss).unwrap() - want).abs() < 1e-5);
        assert!((common::scalar(&lambda).unwrap() - l).abs() < 1e-4);
    }
}
