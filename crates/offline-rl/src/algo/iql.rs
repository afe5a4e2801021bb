//! IQL: Implicit Q-Learning (Kostrikov, Nair & Levine 2021, arXiv 2110.06169;
//! `ikostrikov/implicit_q_learning`), in the form of CORL's `algorithms/offline/iql.py`.

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rand::RngCore;
use rl_agents::{
    ActionBounds, Agent, Batch, BatchLearner, BatchPolicy, DeterministicActor, EnsembleCritic, TargetSync,
    UpdateMetrics,
};
use rl_core::{ActMode, Params, SeededRng, Space, Valid};
use rl_nn::optim::Adam;
use rl_nn::{Mlp, MlpConfig};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::common::{self, setters, AResult, Shape};
use super::{obs_tensor, OfflineAlgorithm};
use crate::error::{check, OfflineError, Result};

const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// The policy class of [`Iql`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IqlPolicy {
    /// `N(scale · tanh(μ(s)) + bias, diag(exp(2 log σ)))` with a state-independent `log σ`
    /// (CORL `GaussianPolicy`, IQL's `NormalTanhPolicy` without squashing); the BC loss is
    /// `−Σ_j log π(a_j|s)`.
    #[default]
    Gaussian,
    /// `scale · tanh(μ(s)) + bias`; the BC loss is `Σ_j (μ(s) − a)²_j` (CORL
    /// `iql_deterministic`).
    Deterministic,
}

/// Parameters of [`Iql`]; defaults are the Gym-MuJoCo values (IQL paper, CORL configs);
/// [`IqlParams::antmaze`] gives the AntMaze set.
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic`, `value` | `[256, 256]` ReLU | networks | identity output | paper |
/// | `policy` | `gaussian` | policy class | | CORL |
/// | `n_critics` | 2 | critics (min for the value target) | `>= 1` | paper |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `tau` | 0.005 | Polyak step of the target critics, every update | `[0, 1]` | paper |
/// | `actor_lr`, `critic_lr`, `value_lr` | 3e-4 | Adam steps | `> 0` | paper |
/// | `cosine_steps` | 1,000,000 | actor updates of the cosine schedule (CORL `max_timesteps`), 0: constant | `>= 0` | paper / CORL |
/// | `expectile` | 0.7 | expectile τ of `V` (0.9 AntMaze) | `(0, 1)` | paper |
/// | `temperature` | 3.0 | inverse temperature β of the advantage weights (10 AntMaze) | `>= 0` | paper |
/// | `max_weight` | 100 | clamp of `exp(β A)` | `> 0` | paper / CORL `EXP_ADV_MAX` |
/// | `log_std_min`, `log_std_max` | −20, 2 | clamp of the Gaussian's `log σ` | `min < max` | CORL |
/// | `exploration_noise` | 0.1 | Gaussian exploration std of the mean action (fine-tuning), × action scale | `>= 0` | TD3 |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IqlParams {
    /// Policy network.
    pub actor: MlpConfig,
    /// Each critic's network.
    pub critic: MlpConfig,
    /// The state-value network.
    pub value: MlpConfig,
    /// Policy class.
    pub policy: IqlPolicy,
    /// Number of critics.
    pub n_critics: usize,
    /// Discount.
    pub gamma: f64,
    /// Polyak coefficient.
    pub tau: f64,
    /// Actor learning rate.
    pub actor_lr: f64,
    /// Critic learning rate.
    pub critic_lr: f64,
    /// Value learning rate.
    pub value_lr: f64,
    /// Actor updates of the cosine schedule.
    pub cosine_steps: u64,
    /// Expectile.
    pub expectile: f64,
    /// Inverse temperature.
    pub temperature: f64,
    /// Weight clamp.
    pub max_weight: f64,
    /// Lower clamp of `log σ`.
    pub log_std_min: f64,
    /// Upper clamp of `log σ`.
    pub log_std_max: f64,
    /// Exploration noise.
    pub exploration_noise: f64,
}

impl Default for IqlParams {
    fn default() -> Self {
        Self {
            actor: MlpConfig::new([256, 256]),
            critic: MlpConfig::new([256, 256]),
            value: MlpConfig::new([256, 256]),
            policy: IqlPolicy::Gaussian,
            n_critics: 2,
            gamma: 0.99,
            tau: 0.005,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            value_lr: 3e-4,
            cosine_steps: 1_000_000,
            expectile: 0.7,
            temperature: 3.0,
            max_weight: 100.0,
            log_std_min: -20.0,
            log_std_max: 2.0,
            exploration_noise: 0.1,
        }
    }
}

setters!(IqlParams {
    actor: MlpConfig,
    critic: MlpConfig,
    value: MlpConfig,
    policy: IqlPolicy,
    n_critics: usize,
    gamma: f64,
    tau: f64,
    actor_lr: f64,
    critic_lr: f64,
    value_lr: f64,
    cosine_steps: u64,
    expectile: f64,
    temperature: f64,
    max_weight: f64,
    log_std_min: f64,
    log_std_max: f64,
    exploration_noise: f64,
});

impl IqlParams {
    /// AntMaze: expectile 0.9, temperature 10 (paper; rewards `r − 1`).
    pub fn antmaze() -> Self {
        Self { expectile: 0.9, temperature: 10.0, ..Self::default() }
    }

    /// Sets the hidden widths of actor, critics and value network.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.actor.hidden = hidden.clone().into();
        self.critic.hidden = hidden.clone().into();
        self.value.hidden = hidden.into();
        self
    }
}

impl Params for IqlParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        common::check_mlp("actor", &self.actor)?;
        common::check_mlp("critic", &self.critic)?;
        common::check_mlp("value", &self.value)?;
        check::at_least("n_critics", self.n_critics, 1)?;
        check::unit_closed("gamma", self.gamma)?;
        check::unit_closed("tau", self.tau)?;
        check::positive("actor_lr", self.actor_lr)?;
        check::positive("critic_lr", self.critic_lr)?;
        check::positive("value_lr", self.value_lr)?;
        check::unit_open("expectile", self.expectile)?;
        check::non_negative("temperature", self.temperature)?;
        check::positive("max_weight", self.max_weight)?;
        if !(self.log_std_min.is_finite() && self.log_std_max.is_finite() && self.log_std_min < self.log_std_max) {
            return Err(OfflineError::invalid(
                "log_std_min",
                self.log_std_min,
                format!("must be finite and < log_std_max = {}", self.log_std_max),
            ));
        }
        check::non_negative("exploration_noise", self.exploration_noise)?;
        Ok(())
    }
}

/// IQL's Gaussian policy: mean `scale · tanh(MLP(s)) + bias`, state-independent `log σ`
/// (initialised to 0, clamped). Acts with its mean; samples with noise from the caller's
/// generator in [`ActMode::Stochastic`].
#[derive(Debug)]
pub struct GaussianPolicy {
    mean: DeterministicActor,
    log_std: Tensor,
    bounds: (f64, f64),
}

impl GaussianPolicy {
    /// `(mean [B, A], log σ [A])`.
    ///
    /// # Errors
    /// Shape failures.
    pub fn distribution(&self, obs: &Tensor) -> AResult<(Tensor, Tensor)> {
        Ok((self.mean.forward(obs)?, self.log_std.f_clamp(self.bounds.0, self.bounds.1)?))
    }

    /// `Σ_j log N(a_j; μ_j(s), σ_j²)` `[B]`.
    ///
    /// # Errors
    /// Shape failures.
    pub fn log_prob(&self, obs: &Tensor, action: &Tensor) -> AResult<Tensor> {
        let (mu, log_std) = self.distribution(obs)?;
        let z = action.f_sub(&mu)?.f_div(&log_std.f_exp()?)?;
        let lp = z.f_square()?.f_mul_scalar(-0.5)?.f_sub(&log_std)?.f_sub_scalar(LOG_SQRT_2PI)?;
        Ok(lp.f_sum_dim_intlist(-1, false, Kind::Float)?)
    }
}

impl BatchPolicy for GaussianPolicy {
    fn obs_dim(&self) -> usize {
        self.mean.obs_dim()
    }

    fn act_dim(&self) -> usize {
        self.mean.bounds().dim()
    }

    /// The mean in `Deterministic` mode; a clipped Gaussian sample in `Stochastic` mode.
    fn act_batch(&self, obs: ArrayView2<'_, f32>, mode: ActMode, rng: &mut dyn RngCore) -> AResult<Array2<f32>> {
        let device = self.log_std.device();
        let x = obs_tensor(obs, self.obs_dim(), device)?;
        let a = tch::no_grad(|| -> AResult<Tensor> {
            let (mu, log_std) = self.distribution(&x)?;
            match mode {
                ActMode::Deterministic => Ok(mu),
                ActMode::Stochastic => {
                    let eps = rl_nn::rand::standard_normal(&mu.size(), (Kind::Float, device), rng)?;
                    self.mean.bounds().clamp(&mu.f_add(&eps.f_mul(&log_std.f_exp()?)?)?)
                }
            }
        })?;
        Ok(rl_nn::convert::tensor_to_array2(&a)?)
    }
}

#[derive(Debug)]
enum Actor {
    Gaussian(GaussianPolicy),
    Deterministic(DeterministicActor),
}

impl Actor {
    fn mean(&self) -> &DeterministicActor {
        match self {
            Actor::Gaussian(g) => &g.mean,
            Actor::Deterministic(d) => d,
        }
    }
}

/// IQL: expectile regression of `V` towards the target critics, in-sample Q targets
/// `r + γ V(s')`, and advantage-weighted regression for the policy.
///
/// ```text
/// per update (CORL's order):  v' = V(s')                                    (before the V step)
///   value:  A = min_e Q'_e(s, a) − V(s);   L(V) = mean_b |τ − 1[A < 0]| A²
///   critic: y = r + γ (1 − d) v';          L(Q) = (1/E) Σ_e mean_b (Q_e(s, a) − y)²
///           θ' ← τ θ + (1 − τ) θ'  (critics, every update)
///   actor:  w = min(exp(β A), W)  (A from the value step, no gradient)
///           L(π) = mean_b w_b · ℓ_b,  ℓ = −Σ_j log π(a_j|s)  (Gaussian)  or  Σ_j (π(s) − a)²_j
///           then the cosine step of the actor learning rate
/// ```
#[derive(Debug)]
pub struct Iql {
    params: Valid<IqlParams>,
    device: Device,
    obs_dim: usize,
    act_dim: usize,
    actor_vs: VarStore,
    actor: Actor,
    critic_vs: VarStore,
    critic: EnsembleCritic,
    critic_target_vs: VarStore,
    critic_target: EnsembleCritic,
    critic_sync: TargetSync,
    value_vs: VarStore,
    value: Mlp,
    actor_opt: Adam,
    critic_opt: Adam,
    value_opt: Adam,
    rng: SeededRng,
    updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    params: IqlParams,
    shape: Shape,
    updates: u64,
    rng: SeededRng,
}

const KIND: &str = "offline_rl.iql";
const FORMAT: u32 = 1;

impl Iql {
    /// IQL for observations of `obs_space` and actions in the bounded box `action_space`.
    ///
    /// # Errors
    /// [`OfflineError::Agent`] for an unbounded or discrete action space; device errors.
    pub fn new(
        params: Valid<IqlParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let (obs_dim, act_dim) = (obs_space.dim(), bounds.dim());
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "iql-init"));
        let mut scratch = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "iql-target-scratch"));
        let actor_cfg = common::check_mlp("actor", &params.actor)?;
        let critic_cfg = common::check_mlp("critic", &params.critic)?;
        let value_cfg = common::check_mlp("value", &params.value)?;
        let actor_vs = VarStore::new(device);
        let mean = DeterministicActor::new(&actor_vs.root().sub("mean"), obs_dim, bounds, &actor_cfg, &mut init)?;
        let actor = match params.policy {
            IqlPolicy::Gaussian => {
                let log_std = rl_nn::init::var(
                    &actor_vs.root(),
                    "log_std",
                    &[act_dim as i64],
                    rl_nn::init::Init::Zeros,
                    &mut init,
                )?;
                Actor::Gaussian(GaussianPolicy { mean, log_std, bounds: (params.log_std_min, params.log_std_max) })
            }
            IqlPolicy::Deterministic => Actor::Deterministic(mean),
        };
        let critic_vs = VarStore::new(device);
        let critic =
            EnsembleCritic::new(&critic_vs.root(), params.n_critics, obs_dim, act_dim, &critic_cfg, &mut init)?;
        let mut critic_target_vs = VarStore::new(device);
        let critic_target = EnsembleCritic::new(
            &critic_target_vs.root(),
            params.n_critics,
            obs_dim,
            act_dim,
            &critic_cfg,
            &mut scratch,
        )?;
        let critic_sync = TargetSync::new(&mut critic_target_vs, &critic_vs)?;
        let value_vs = VarStore::new(device);
        let value = Mlp::new(&value_vs.root(), obs_dim as i64, 1, &value_cfg, &mut init)?;
        let actor_opt = Adam::for_var_store(common::adam(params.actor_lr)?, &actor_vs)?;
        let critic_opt = Adam::for_var_store(common::adam(params.critic_lr)?, &critic_vs)?;
        let value_opt = Adam::for_var_store(common::adam(params.value_lr)?, &value_vs)?;
        Ok(Self {
            params,
            device,
            obs_dim,
            act_dim,
            actor_vs,
            actor,
            critic_vs,
            critic,
            critic_target_vs,
            critic_target,
            critic_sync,
            value_vs,
            value,
            actor_opt,
            critic_opt,
            value_opt,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "iql-noise")),
            updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &IqlParams {
        &self.params
    }

    /// `V(s)` `[B]`.
    ///
    /// # Errors
    /// Shape failures.
    pub fn value(&self, obs: &Tensor) -> AResult<Tensor> {
        Ok(self.value.f_forward(obs)?.f_squeeze_dim(-1)?)
    }

    /// The critic ensemble.
    pub fn critic(&self) -> &EnsembleCritic {
        &self.critic
    }

    /// The per-sample BC loss `ℓ` `[B]` of the policy on the batch's actions.
    ///
    /// # Errors
    /// Shape failures.
    pub fn bc_loss(&self, obs: &Tensor, action: &Tensor) -> AResult<Tensor> {
        match &self.actor {
            Actor::Gaussian(g) => Ok(g.log_prob(obs, action)?.f_neg()?),
            Actor::Deterministic(d) => {
                Ok(d.forward(obs)?.f_sub(action)?.f_square()?.f_sum_dim_intlist(-1, false, Kind::Float)?)
            }
        }
    }

    fn sync_lr(&mut self) -> AResult<()> {
        let p = &self.params;
        let lr =
            if p.cosine_steps == 0 { p.actor_lr } else { common::cosine_lr(p.actor_lr, self.updates, p.cosine_steps) };
        Ok(self.actor_opt.set_lr(lr)?)
    }

    fn parts(&self) -> common::Parts<'_> {
        common::Parts::new()
            .store("actor", &self.actor_vs)
            .store("critic", &self.critic_vs)
            .store("critic_target", &self.critic_target_vs)
            .store("value", &self.value_vs)
            .optim("actor", &self.actor_opt)
            .optim("critic", &self.critic_opt)
            .optim("value", &self.value_opt)
    }
}

impl Agent for Iql {
    fn name(&self) -> &'static str {
        "iql"
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> AResult<Array2<f32>> {
        let x = obs_tensor(obs, self.obs_dim, self.device)?;
        let d = self.actor.mean();
        let eps = rl_nn::rand::normal(
            &[obs.nrows() as i64, self.act_dim as i64],
            0.0,
            self.params.exploration_noise,
            (Kind::Float, self.device),
            &mut self.rng,
        )?;
        let a = tch::no_grad(|| -> AResult<Tensor> {
            d.bounds().clamp(&d.forward(&x)?.f_add(&eps.f_mul(d.bounds().scale())?)?)
        })?;
        Ok(rl_nn::convert::tensor_to_array2(&a)?)
    }

    fn policy(&self) -> &dyn BatchPolicy {
        match &self.actor {
            Actor::Gaussian(g) => g,
            Actor::Deterministic(d) => d,
        }
    }

    fn device(&self) -> Device {
        self.device
    }

    fn updates(&self) -> u64 {
        self.updates
    }

    fn save(&self, dir: &Path) -> AResult<()> {
        let state = State {
            params: self.params.get().clone(),
            shape: Shape::of(self.obs_dim, self.actor.mean().bounds()),
            updates: self.updates,
            rng: self.rng.clone(),
        };
        common::save(dir, KIND, FORMAT, &state, &self.parts())
    }

    fn load(&mut self, dir: &Path) -> AResult<()> {
        let ck = rl_nn::checkpoint::load_dir::<State>(dir, KIND, FORMAT)?;
        common::check_saved(
            &ck.path,
            (&ck.state.params, &ck.state.shape),
            (self.params.get(), &Shape::of(self.obs_dim, self.actor.mean().bounds())),
        )?;
        self.parts().check(&ck.tensors, &ck.path)?;
        rl_nn::parts::restore(
            &[
                ("actor", &self.actor_vs),
                ("critic", &self.critic_vs),
                ("critic_target", &self.critic_target_vs),
                ("value", &self.value_vs),
            ],
            &mut [("actor", &mut self.actor_opt), ("critic", &mut self.critic_opt), ("value", &mut self.value_opt)],
            &mut [],
            &ck.tensors,
            &ck.path,
        )?;
        self.updates = ck.state.updates;
        self.rng = ck.state.rng;
        self.sync_lr()?;
        Ok(())
    }
}

impl BatchLearner for Iql {
    fn update(&mut self, batch: &Batch) -> AResult<UpdateMetrics> {
        batch.check_dims(self.obs_dim, self.act_dim, self.device)?;
        let p = self.params.get().clone();
        let mut m = UpdateMetrics::new();
        let (next_v, q_t) = tch::no_grad(|| -> AResult<(Tensor, Tensor)> {
            Ok((
                self.value(batch.next_obs())?,
                self.critic_target.forward(batch.obs(), batch.action())?.f_amin(0, false)?,
            ))
        })?;
        let v = self.value(batch.obs())?;
        let adv = q_t.f_sub(&v)?;
        let value_loss = common::expectile_loss(&adv, p.expectile)?;
        self.value_opt.backward_step(&value_loss)?;
        let y = tch::no_grad(|| -> AResult<Tensor> {
            Ok(batch.reward().f_add(&batch.bootstrap(p.gamma)?.f_mul(&next_v)?)?)
        })?;
        let q = self.critic.forward(batch.obs(), batch.action())?;
        let critic_loss = common::ensemble_mse(&q, &y)?.f_div_scalar(p.n_critics as f64)?;
        self.critic_opt.backward_step(&critic_loss)?;
        self.critic_sync.soft_update(p.tau)?;
        let w = tch::no_grad(|| -> AResult<Tensor> {
            Ok(adv.f_detach()?.f_mul_scalar(p.temperature)?.f_exp()?.f_clamp_max(p.max_weight)?)
        })?;
        let actor_loss = w.f_mul(&self.bc_loss(batch.obs(), batch.action())?)?.f_mean(Kind::Float)?;
        self.actor_opt.backward_step(&actor_loss)?;
        self.updates += 1;
        self.sync_lr()?;
        m.push("loss/value", &value_loss)?;
        m.push("loss/critic", &critic_loss)?;
        m.push("loss/actor", &actor_loss)?;
        m.push("train/q", &q.f_detach()?.f_mean(Kind::Float)?)?;
        m.push("train/v", &v.f_detach()?.f_mean(Kind::Float)?)?;
        m.push("train/weight", &w.f_mean(Kind::Float)?)?;
        Ok(m)
    }
}

impl OfflineAlgorithm for Iql {}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn gaussian_log_prob_matches_the_normal_density() {
        let p = IqlParams::default().hidden([8]).check().unwrap();
        let iql = Iql::new(p, &Space::symmetric(2, 1.0).unwrap(), &Space::symmetric(2, 1.0).unwrap(), Device::Cpu, 0)
            .unwrap();
        let obs = Tensor::from_slice(&[0.5f32, -0.5]).view([1, 2]);
        let act = Tensor::from_slice(&[0.25f32, -0.75]).view([1, 2]);
        let Actor::Gaussian(g) = &iql.actor else { unreachable!() };
        let mu: Vec<f32> = Vec::try_from(&g.mean.forward(&obs).unwrap().view([-1])).unwrap();
        // log σ = 0 at initialisation: σ = 1
        let want: f64 = (0..2)
            .map(|j| -0.5 * f64::from(act.double_value(&[0, j as i64]) as f32 - mu[j]).powi(2) - LOG_SQRT_2PI)
            .sum();
        let got = common::scalar(&g.log_prob(&obs, &act).unwrap().get(0)).unwrap();
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        // the BC loss is its negation, and the deterministic policy's is the squared error sum
        assert!((common::scalar(&iql.bc_loss(&obs, &act).unwrap().get(0)).unwrap() + want).abs() < 1e-5);
        let d = Iql::new(
            IqlParams::default().hidden([8]).policy(IqlPolicy::Deterministic).check().unwrap(),
            &Space::symmetric(2, 1.0).unwrap(),
            &Space::symmetric(2, 1.0).unwrap(),
            Device::Cpu,
            0,
        )
        .unwrap();
        let mu: Vec<f32> = Vec::try_from(&d.actor.mean().forward(&obs).unwrap().view([-1])).unwrap();
        let se: f64 = f64::from(0.25 - mu[0]).powi(2) + f64::from(-0.75 - mu[1]).powi(2);
        assert!((common::scalar(&d.bc_loss(&obs, &act).unwrap().get(0)).unwrap() - se).abs() < 1e-5);
    }
}
