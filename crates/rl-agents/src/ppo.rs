//! Proximal Policy Optimization (clipped surrogate, GAE, value clipping, entropy bonus) for
//! continuous (diagonal Gaussian) and discrete (categorical) actions.

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rand::Rng;
use rl_core::{ActMode, Params, SeededRng, Space, SpaceKind, Valid};
use rl_nn::init::Init;
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{Activation, Mlp, MlpConfig};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::agent::{obs_tensor, to_array2, Agent, BatchPolicy, OnlineAgent, UpdateMetrics, VecTransition};
use crate::ckpt::{self, Parts};
use crate::error::{check, AgentError, Result};
use crate::nets::ActionBounds;
use crate::sac::setters;

const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// Learning-rate schedule of [`Ppo`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// `lr` throughout (PPO paper, MuJoCo).
    #[default]
    Constant,
    /// Linear decay to 0 over `total_steps` environment steps, set before each rollout's
    /// update: `lr · (1 − (k − 1)/K)` at update `k` of `K = total_steps / (num_steps · n_envs)`
    /// (CleanRL's `anneal_lr`).
    Linear {
        /// Environment steps of the whole run.
        total_steps: u64,
    },
}

/// Parameters of [`Ppo`]. Defaults: CleanRL's `ppo_continuous_action.py` (= the PPO paper's
/// MuJoCo settings, Schulman et al. 2017, arXiv 1707.06347, Table 3, with 32 minibatches of 64);
/// [`PpoParams::classic_control`] is CleanRL's `ppo.py` (CartPole).
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic` | `[64, 64]` tanh, orthogonal `√2`, zero biases; heads orthogonal 0.01 / 1 | networks | identity output | CleanRL (paper: 64-64 tanh) |
/// | `lr` | 3e-4 | Adam step (ε = `adam_eps`) | `> 0` | paper, CleanRL |
/// | `adam_eps` | 1e-5 | Adam ε | `>= 0` | CleanRL |
/// | `lr_schedule` | constant | learning-rate schedule | | paper (MuJoCo) |
/// | `num_steps` | 2048 | rollout length per environment | `>= 1` | paper |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `gae_lambda` | 0.95 | GAE λ | `[0, 1]` | paper |
/// | `num_minibatches` | 32 | minibatches per epoch | `>= 1`, divides `num_steps · n_envs` | CleanRL (paper: minibatch 64) |
/// | `update_epochs` | 10 | epochs per rollout | `>= 1` | paper |
/// | `norm_adv` | true | normalise advantages per minibatch | | CleanRL |
/// | `clip_coef` | 0.2 | surrogate clipping ε | `> 0` | paper |
/// | `clip_vloss` | true | clip the value update around the old values | | CleanRL (baselines) |
/// | `ent_coef` | 0.0 | entropy bonus | `>= 0` | paper (MuJoCo) |
/// | `vf_coef` | 0.5 | value-loss weight | `>= 0` | CleanRL |
/// | `max_grad_norm` | 0.5 | global gradient-norm clip (none: off) | `> 0` | CleanRL |
/// | `target_kl` | none | stop the epochs of a rollout once the approximate KL exceeds it | `> 0` | CleanRL |
/// | `init_log_std` | 0.0 | initial state-independent log-std (continuous) | finite | CleanRL |
/// | `bootstrap_truncated` | true | add `γ V(s_T)` to the reward of a time-limit truncation | | SB3; CleanRL treats truncation as termination (false) |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoParams {
    /// Policy network (mean or logits).
    pub actor: MlpConfig,
    /// Value network.
    pub critic: MlpConfig,
    /// Learning rate.
    pub lr: f64,
    /// Adam ε.
    pub adam_eps: f64,
    /// Learning-rate schedule.
    pub lr_schedule: LrSchedule,
    /// Rollout length per environment.
    pub num_steps: usize,
    /// Discount.
    pub gamma: f64,
    /// GAE λ.
    pub gae_lambda: f64,
    /// Minibatches per epoch.
    pub num_minibatches: usize,
    /// Epochs per rollout.
    pub update_epochs: usize,
    /// Normalise advantages per minibatch.
    pub norm_adv: bool,
    /// Clipping ε.
    pub clip_coef: f64,
    /// Clip the value loss.
    pub clip_vloss: bool,
    /// Entropy coefficient.
    pub ent_coef: f64,
    /// Value coefficient.
    pub vf_coef: f64,
    /// Gradient-norm clip.
    pub max_grad_norm: Option<f64>,
    /// Early-stopping KL.
    pub target_kl: Option<f64>,
    /// Initial log-std.
    pub init_log_std: f64,
    /// Bootstrap time-limit truncations.
    pub bootstrap_truncated: bool,
}

fn ppo_mlp(head_gain: f64) -> MlpConfig {
    MlpConfig::new([64, 64])
        .activation(Activation::Tanh)
        .weight_init(Init::Orthogonal { gain: std::f64::consts::SQRT_2 })
        .bias_init(Init::Zeros)
        .output_weight_init(Some(Init::Orthogonal { gain: head_gain }))
}

impl Default for PpoParams {
    fn default() -> Self {
        Self {
            actor: ppo_mlp(0.01),
            critic: ppo_mlp(1.0),
            lr: 3e-4,
            adam_eps: 1e-5,
            lr_schedule: LrSchedule::Constant,
            num_steps: 2048,
            gamma: 0.99,
            gae_lambda: 0.95,
            num_minibatches: 32,
            update_epochs: 10,
            norm_adv: true,
            clip_coef: 0.2,
            clip_vloss: true,
            ent_coef: 0.0,
            vf_coef: 0.5,
            max_grad_norm: Some(0.5),
            target_kl: None,
            init_log_std: 0.0,
            bootstrap_truncated: true,
        }
    }
}

setters!(PpoParams {
    actor: MlpConfig,
    critic: MlpConfig,
    lr: f64,
    adam_eps: f64,
    lr_schedule: LrSchedule,
    num_steps: usize,
    gamma: f64,
    gae_lambda: f64,
    num_minibatches: usize,
    update_epochs: usize,
    norm_adv: bool,
    clip_coef: f64,
    clip_vloss: bool,
    ent_coef: f64,
    vf_coef: f64,
    max_grad_norm: Option<f64>,
    target_kl: Option<f64>,
    init_log_std: f64,
    bootstrap_truncated: bool,
});

impl PpoParams {
    /// CleanRL's `ppo.py` (CartPole-v1 with 4 environments): lr 2.5e-4 annealed linearly over
    /// `total_steps`, 128 steps per environment, 4 minibatches, 4 epochs, entropy 0.01.
    pub fn classic_control(total_steps: u64) -> Self {
        Self {
            lr: 2.5e-4,
            lr_schedule: LrSchedule::Linear { total_steps },
            num_steps: 128,
            num_minibatches: 4,
            update_epochs: 4,
            ent_coef: 0.01,
            ..Self::default()
        }
    }
}

impl Params for PpoParams {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        crate::sac::check_mlp("actor", &self.actor)?;
        crate::sac::check_mlp("critic", &self.critic)?;
        check::positive("lr", self.lr)?;
        check::non_negative("adam_eps", self.adam_eps)?;
        if let LrSchedule::Linear { total_steps } = self.lr_schedule {
            check::at_least("lr_schedule.total_steps", total_steps as usize, 1)?;
        }
        check::at_least("num_steps", self.num_steps, 1)?;
        check::unit_closed("gamma", self.gamma)?;
        check::unit_closed("gae_lambda", self.gae_lambda)?;
        check::at_least("num_minibatches", self.num_minibatches, 1)?;
        check::at_least("update_epochs", self.update_epochs, 1)?;
        check::positive("clip_coef", self.clip_coef)?;
        check::non_negative("ent_coef", self.ent_coef)?;
        check::non_negative("vf_coef", self.vf_coef)?;
        if let Some(c) = self.max_grad_norm {
            check::positive("max_grad_norm", c)?;
        }
        if let Some(k) = self.target_kl {
            check::positive("target_kl", k)?;
        }
        if !self.init_log_std.is_finite() {
            return Err(AgentError::invalid("init_log_std", self.init_log_std, "must be finite"));
        }
        if self.num_steps < self.num_minibatches {
            return Err(AgentError::invalid(
                "num_minibatches",
                self.num_minibatches,
                format!("must not exceed num_steps = {}", self.num_steps),
            ));
        }
        Ok(())
    }
}

/// The policy of [`Ppo`]: a diagonal Gaussian with a state-independent log-std, or a
/// categorical distribution over logits.
#[derive(Debug)]
pub enum PpoPolicy {
    /// `a ~ N(μ(s), diag(exp(log_std))²)`; the environment receives `a` clipped to the box.
    Gaussian {
        /// The mean network.
        mean: Mlp,
        /// Log-std `[act_dim]` (trainable).
        log_std: Tensor,
        /// Bounds the environment's actions are clipped to.
        bounds: ActionBounds,
    },
    /// `a ~ Categorical(softmax(logits(s)))`.
    Categorical {
        /// The logits network.
        logits: Mlp,
        /// Its device.
        device: Device,
    },
}

impl PpoPolicy {
    fn obs_dim(&self) -> usize {
        match self {
            PpoPolicy::Gaussian { mean, .. } => mean.input_dim() as usize,
            PpoPolicy::Categorical { logits, .. } => logits.input_dim() as usize,
        }
    }

    fn device(&self) -> Device {
        match self {
            PpoPolicy::Gaussian { log_std, .. } => log_std.device(),
            PpoPolicy::Categorical { device, .. } => *device,
        }
    }

    /// `(log π(a|s), entropy)` for raw actions `a` (`[B, act_dim]` floats, or `[B]` int64
    /// indices).
    fn log_prob_entropy(&self, obs: &Tensor, action: &Tensor) -> Result<(Tensor, Tensor)> {
        match self {
            PpoPolicy::Gaussian { mean, log_std, .. } => {
                let mu = mean.f_forward(obs)?;
                let std = log_std.f_exp()?;
                let z = action.f_sub(&mu)?.f_div(&std)?;
                let lp = z.f_square()?.f_mul_scalar(-0.5)?.f_sub(log_std)?.f_sub_scalar(LOG_SQRT_2PI)?;
                let ent = log_std.f_add_scalar(0.5 + LOG_SQRT_2PI)?.f_sum(Kind::Float)?;
                let b = obs.size()[0];
                Ok((lp.f_sum_dim_intlist(-1, false, Kind::Float)?, ent.f_expand([b], false)?))
            }
            PpoPolicy::Categorical { logits, .. } => {
                let lsm = logits.f_forward(obs)?.f_log_softmax(-1, Kind::Float)?;
                let lp = lsm.f_gather(1, &action.f_unsqueeze(1)?, false)?.f_squeeze_dim(1)?;
                let ent = lsm.f_exp()?.f_mul(&lsm)?.f_sum_dim_intlist(-1, false, Kind::Float)?.f_neg()?;
                Ok((lp, ent))
            }
        }
    }

    /// Samples raw actions and their log-probabilities (no gradient).
    fn sample<R: Rng + ?Sized>(&self, obs: &Tensor, rng: &mut R) -> Result<(Tensor, Tensor)> {
        tch::no_grad(|| match self {
            PpoPolicy::Gaussian { mean, log_std, .. } => {
                let mu = mean.f_forward(obs)?;
                let eps = rl_nn::rand::standard_normal(&mu.size(), (Kind::Float, mu.device()), rng)?;
                let a = mu.f_add(&eps.f_mul(&log_std.f_exp()?)?)?;
                let lp = eps
                    .f_square()?
                    .f_mul_scalar(-0.5)?
                    .f_sub(log_std)?
                    .f_sub_scalar(LOG_SQRT_2PI)?
                    .f_sum_dim_intlist(-1, false, Kind::Float)?;
                Ok((a, lp))
            }
            PpoPolicy::Categorical { logits, .. } => {
                let l = logits.f_forward(obs)?;
                let a = rl_nn::rand::categorical(&l, rng)?;
                let lp = l.f_log_softmax(-1, Kind::Float)?.f_gather(1, &a.f_unsqueeze(1)?, false)?.f_squeeze_dim(1)?;
                Ok((a, lp))
            }
        })
    }

    /// Environment actions `[B, act_dim]` from raw actions.
    fn env_actions(&self, raw: &Tensor) -> Result<Array2<f32>> {
        match self {
            PpoPolicy::Gaussian { bounds, .. } => to_array2(&bounds.clamp(raw)?),
            PpoPolicy::Categorical { .. } => to_array2(&raw.f_to_kind(Kind::Float)?.f_unsqueeze(1)?),
        }
    }
}

impl BatchPolicy for PpoPolicy {
    fn obs_dim(&self) -> usize {
        PpoPolicy::obs_dim(self)
    }

    fn act_dim(&self) -> usize {
        match self {
            PpoPolicy::Gaussian { bounds, .. } => bounds.dim(),
            PpoPolicy::Categorical { .. } => 1,
        }
    }

    /// Deterministic: the mean (clipped) or the most likely action; stochastic: a sample.
    fn act_batch(&self, obs: ArrayView2<'_, f32>, mode: ActMode, rng: &mut dyn rand::RngCore) -> Result<Array2<f32>> {
        let x = obs_tensor(obs, PpoPolicy::obs_dim(self), self.device())?;
        let raw = match mode {
            ActMode::Stochastic => self.sample(&x, rng)?.0,
            ActMode::Deterministic => tch::no_grad(|| -> Result<Tensor> {
                Ok(match self {
                    PpoPolicy::Gaussian { mean, .. } => mean.f_forward(&x)?,
                    PpoPolicy::Categorical { logits, .. } => logits.f_forward(&x)?.f_argmax(-1, false)?,
                })
            })?,
        };
        self.env_actions(&raw)
    }
}

/// The rollout being collected: `[t][env]` row-major host columns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Rollout {
    n_envs: usize,
    obs: Vec<f32>,
    raw_actions: Vec<f32>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
    rewards: Vec<f32>,
    dones: Vec<f32>,
    steps: usize,
}

/// What `explore` computed for the step `observe` completes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pending {
    obs: Vec<f32>,
    raw_actions: Vec<f32>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
}

/// PPO with the clipped surrogate (Schulman et al. 2017, arXiv 1707.06347), as CleanRL
/// implements it (`ppo_continuous_action.py`, `ppo.py`). It is an [`OnlineAgent`]: `explore`
/// samples actions and records log-probabilities and values; after `num_steps` calls to
/// `observe` (per environment), it computes GAE and updates.
///
/// ```text
/// δ_t = r_t + γ V(s_{t+1}) (1 − d_t) − V(s_t),   Â_t = δ_t + γλ (1 − d_t) Â_{t+1},   R_t = Â_t + V(s_t)
/// per minibatch (Â normalised):  ρ = exp(log π(a|s) − log π_old(a|s))
/// L = mean max(−Â ρ, −Â clip(ρ, 1 ± ε))                                  (policy)
///   + c_v · ½ mean max((V − R)², (V_old + clip(V − V_old, ±ε) − R)²)     (value, clipped)
///   − c_e · mean H[π(·|s)]                                               (entropy)
/// ```
///
/// `d_t = 1` where the episode ended at `t`; with `bootstrap_truncated`, a time-limit
/// truncation adds `γ V(s_final)` to `r_t` first (SB3), so truncated episodes are not treated
/// as failures. One Adam over policy and value (ε = `adam_eps`), global gradient clipping.
/// Minibatch permutations and sampling noise come from the agent's own generator.
///
/// ```
/// use rl_agents::{Agent, OnlineAgent, Ppo, PpoParams};
/// use rl_core::{Params, Space};
/// let mut ppo = Ppo::new(PpoParams::classic_control(10_000).check()?, &Space::symmetric(4, 10.0)?,
///                        &Space::discrete(2)?, tch::Device::Cpu, 0)?;
/// let a = ppo.explore(ndarray::Array2::zeros((4, 4)).view())?;
/// assert!(a.iter().all(|x| *x == 0.0 || *x == 1.0));
/// # Ok::<(), rl_agents::AgentError>(())
/// ```
#[derive(Debug)]
pub struct Ppo {
    params: Valid<PpoParams>,
    device: Device,
    obs_dim: usize,
    raw_dim: usize,
    discrete: bool,
    vs: VarStore,
    policy: PpoPolicy,
    critic: Mlp,
    opt: Adam,
    rng: SeededRng,
    rollout: Rollout,
    pending: Option<Pending>,
    env_steps: u64,
    iterations: u64,
    updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PpoState {
    params: PpoParams,
    obs_dim: usize,
    action_space: Space,
    rng: SeededRng,
    rollout: Rollout,
    pending: Option<Pending>,
    env_steps: u64,
    iterations: u64,
    updates: u64,
    lr: f64,
}

const PPO_KIND: &str = "rl_agents.ppo";
const PPO_FORMAT: u32 = 1;

impl Ppo {
    /// A PPO agent for `obs_space` and a discrete or bounded-box `action_space`.
    ///
    /// # Errors
    /// [`AgentError::UnsupportedSpace`] for an unbounded action box; device and libtorch
    /// failures.
    pub fn new(
        params: Valid<PpoParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let obs_dim = obs_space.dim();
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "ppo-init"));
        let actor_cfg = crate::sac::check_mlp("actor", &params.actor)?;
        let critic_cfg = crate::sac::check_mlp("critic", &params.critic)?;
        let vs = VarStore::new(device);
        let root = vs.root();
        let (policy, raw_dim, discrete) = match action_space.kind() {
            SpaceKind::Discrete { n } => {
                let logits = Mlp::new(&root.sub("actor"), obs_dim as i64, n as i64, &actor_cfg, &mut init)?;
                (PpoPolicy::Categorical { logits, device }, 1, true)
            }
            SpaceKind::Box { .. } => {
                let bounds = ActionBounds::from_space(action_space, device)?;
                let d = bounds.dim();
                let mean = Mlp::new(&root.sub("actor"), obs_dim as i64, d as i64, &actor_cfg, &mut init)?;
                let log_std = rl_nn::init::var(
                    &root,
                    "actor_log_std",
                    &[d as i64],
                    Init::Constant { value: params.init_log_std },
                    &mut init,
                )?;
                (PpoPolicy::Gaussian { mean, log_std, bounds }, d, false)
            }
        };
        let critic = Mlp::new(&root.sub("critic"), obs_dim as i64, 1, &critic_cfg, &mut init)?;
        let adam =
            AdamParams::default().lr(params.lr).eps(params.adam_eps).max_grad_norm(params.max_grad_norm).check()?;
        let opt = Adam::for_var_store(adam, &vs)?;
        Ok(Self {
            params,
            device,
            obs_dim,
            raw_dim,
            discrete,
            vs,
            policy,
            critic,
            opt,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "ppo-noise")),
            rollout: Rollout::default(),
            pending: None,
            env_steps: 0,
            iterations: 0,
            updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &PpoParams {
        &self.params
    }

    /// The policy.
    pub fn ppo_policy(&self) -> &PpoPolicy {
        &self.policy
    }

    /// The value network.
    pub fn critic(&self) -> &Mlp {
        &self.critic
    }

    /// The variable store (policy, log-std, value network).
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// Rollouts (policy updates) done.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    fn values(&self, obs: &Tensor) -> Result<Tensor> {
        Ok(self.critic.f_forward(obs)?.f_squeeze_dim(-1)?)
    }

    fn action_space(&self) -> Result<Space> {
        Ok(match &self.policy {
            PpoPolicy::Gaussian { bounds, .. } => Space::boxed(
                ndarray::Array1::from(bounds.low().to_vec()),
                ndarray::Array1::from(bounds.high().to_vec()),
            )?,
            PpoPolicy::Categorical { logits, .. } => Space::discrete(logits.output_dim() as usize)?,
        })
    }

    /// GAE over the finished rollout (host), with `last_values` = `V(s_T)`.
    fn gae(&self, last_values: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let r = &self.rollout;
        let (t_len, n) = (r.steps, r.n_envs);
        let (g, l) = (self.params.gamma as f32, self.params.gae_lambda as f32);
        let mut adv = vec![0.0f32; t_len * n];
        for (e, &last_value) in last_values.iter().enumerate().take(n) {
            let mut last = 0.0f32;
            for t in (0..t_len).rev() {
                let i = t * n + e;
                let next_v = if t + 1 == t_len { last_value } else { r.values[i + n] };
                let live = 1.0 - r.dones[i];
                let delta = r.rewards[i] + g * next_v * live - r.values[i];
                last = delta + g * l * live * last;
                adv[i] = last;
            }
        }
        let ret = adv.iter().zip(&r.values).map(|(a, v)| a + v).collect();
        (adv, ret)
    }

    fn learn(&mut self, continue_obs: ArrayView2<'_, f32>) -> Result<UpdateMetrics> {
        let p = self.params.get().clone();
        let n = self.rollout.n_envs;
        let x_last = obs_tensor(continue_obs, self.obs_dim, self.device)?;
        let last_values = Vec::<f32>::try_from(&tch::no_grad(|| self.values(&x_last))?.f_to_device(Device::Cpu)?)?;
        let (adv, ret) = self.gae(&last_values);
        let b = self.rollout.steps * n;
        if b % p.num_minibatches != 0 {
            return Err(AgentError::invalid(
                "num_minibatches",
                p.num_minibatches,
                format!("must divide the rollout size num_steps · n_envs = {b}"),
            ));
        }
        let mb = b / p.num_minibatches;
        if let LrSchedule::Linear { total_steps } = p.lr_schedule {
            let total_iters = (total_steps / b as u64).max(1) as f64;
            let frac = (1.0 - self.iterations as f64 / total_iters).max(0.0);
            self.opt.set_lr(frac * p.lr)?;
        }
        let dev = self.device;
        let bi = b as i64;
        let t = |v: &[f32], shape: &[i64]| -> Result<Tensor> {
            Ok(Tensor::f_from_slice(v)?.f_reshape(shape)?.f_to_device(dev)?)
        };
        let obs = t(&self.rollout.obs, &[bi, self.obs_dim as i64])?;
        let actions = if self.discrete {
            t(&self.rollout.raw_actions, &[bi])?.f_to_kind(Kind::Int64)?
        } else {
            t(&self.rollout.raw_actions, &[bi, self.raw_dim as i64])?
        };
        let old_logp = t(&self.rollout.log_probs, &[bi])?;
        let old_values = t(&self.rollout.values, &[bi])?;
        let advantages = t(&adv, &[bi])?;
        let returns = t(&ret, &[bi])?;
        let mut m = UpdateMetrics::new();
        let (mut pg_sum, mut v_sum, mut ent_sum, mut kl_sum, mut cf_sum, mut count) = (
            Tensor::from(0.0f32).f_to_device(dev)?,
            Tensor::from(0.0f32).f_to_device(dev)?,
            Tensor::from(0.0f32).f_to_device(dev)?,
            Tensor::from(0.0f32).f_to_device(dev)?,
            Tensor::from(0.0f32).f_to_device(dev)?,
            0u32,
        );
        let mut perm: Vec<i64> = (0..bi).collect();
        'epochs: for _ in 0..p.update_epochs {
            for i in (1..perm.len()).rev() {
                let j = self.rng.random_range(0..=i);
                perm.swap(i, j);
            }
            let perm_t = Tensor::f_from_slice(&perm)?.f_to_device(dev)?;
            let mut last_kl = None;
            for start in (0..b).step_by(mb) {
                let idx = perm_t.f_narrow(0, start as i64, mb as i64)?;
                let o = obs.f_index_select(0, &idx)?;
                let a = actions.f_index_select(0, &idx)?;
                let (new_logp, entropy) = self.policy.log_prob_entropy(&o, &a)?;
                let logratio = new_logp.f_sub(&old_logp.f_index_select(0, &idx)?)?;
                let ratio = logratio.f_exp()?;
                let (approx_kl, clipfrac) = tch::no_grad(|| -> Result<(Tensor, Tensor)> {
                    let kl = ratio.f_sub_scalar(1.0)?.f_sub(&logratio)?.f_mean(Kind::Float)?;
                    let cf = ratio
                        .f_sub_scalar(1.0)?
                        .f_abs()?
                        .f_gt(p.clip_coef)?
                        .f_to_kind(Kind::Float)?
                        .f_mean(Kind::Float)?;
                    Ok((kl, cf))
                })?;
                let mut mb_adv = advantages.f_index_select(0, &idx)?;
                if p.norm_adv {
                    let std = mb_adv.f_std(true)?;
                    mb_adv = mb_adv.f_sub(&mb_adv.f_mean(Kind::Float)?)?.f_div(&std.f_add_scalar(1e-8)?)?;
                }
                let pg1 = mb_adv.f_neg()?.f_mul(&ratio)?;
                let pg2 = mb_adv.f_neg()?.f_mul(&ratio.f_clamp(1.0 - p.clip_coef, 1.0 + p.clip_coef)?)?;
                let pg_loss = pg1.f_maximum(&pg2)?.f_mean(Kind::Float)?;
                let new_v = self.values(&o)?;
                let mb_ret = returns.f_index_select(0, &idx)?;
                let v_loss = if p.clip_vloss {
                    let mb_old_v = old_values.f_index_select(0, &idx)?;
                    let unclipped = new_v.f_sub(&mb_ret)?.f_square()?;
                    let clipped_v = mb_old_v.f_add(&new_v.f_sub(&mb_old_v)?.f_clamp(-p.clip_coef, p.clip_coef)?)?;
                    let clipped = clipped_v.f_sub(&mb_ret)?.f_square()?;
                    unclipped.f_maximum(&clipped)?.f_mean(Kind::Float)?.f_mul_scalar(0.5)?
                } else {
                    new_v.f_sub(&mb_ret)?.f_square()?.f_mean(Kind::Float)?.f_mul_scalar(0.5)?
                };
                let ent = entropy.f_mean(Kind::Float)?;
                let loss = pg_loss.f_sub(&ent.f_mul_scalar(p.ent_coef)?)?.f_add(&v_loss.f_mul_scalar(p.vf_coef)?)?;
                self.opt.backward_step(&loss)?;
                self.updates += 1;
                pg_sum = pg_sum.f_add(&pg_loss.f_detach()?)?;
                v_sum = v_sum.f_add(&v_loss.f_detach()?)?;
                ent_sum = ent_sum.f_add(&ent.f_detach()?)?;
                kl_sum = kl_sum.f_add(&approx_kl)?;
                cf_sum = cf_sum.f_add(&clipfrac)?;
                count += 1;
                last_kl = Some(approx_kl);
            }
            if let (Some(target), Some(kl)) = (p.target_kl, last_kl) {
                if kl.f_double_value(&[])? > target {
                    break 'epochs;
                }
            }
        }
        let c = f64::from(count.max(1));
        m.push("loss/policy", &pg_sum.f_div_scalar(c)?)?;
        m.push("loss/value", &v_sum.f_div_scalar(c)?)?;
        m.push("loss/entropy", &ent_sum.f_div_scalar(c)?)?;
        m.push("train/approx_kl", &kl_sum.f_div_scalar(c)?)?;
        m.push("train/clipfrac", &cf_sum.f_div_scalar(c)?)?;
        let var_y = returns.f_var(true)?;
        let ev = tch::no_grad(|| -> Result<Tensor> {
            Ok(returns.f_sub(&old_values)?.f_var(true)?.f_div(&var_y)?.f_neg()?.f_add_scalar(1.0)?)
        })?;
        if var_y.f_double_value(&[])? > 0.0 {
            m.push("train/explained_variance", &ev)?;
        }
        m.push_value("train/lr", self.opt.lr());
        if let PpoPolicy::Gaussian { log_std, .. } = &self.policy {
            m.push("train/std", &log_std.f_detach()?.f_exp()?.f_mean(Kind::Float)?)?;
        }
        self.iterations += 1;
        self.rollout = Rollout { n_envs: n, ..Rollout::default() };
        Ok(m)
    }
}

impl Agent for Ppo {
    fn device(&self) -> Device {
        self.device
    }

    fn name(&self) -> &'static str {
        "ppo"
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>> {
        let x = obs_tensor(obs, self.obs_dim, self.device)?;
        let (raw, logp) = self.policy.sample(&x, &mut self.rng)?;
        let values = tch::no_grad(|| self.values(&x))?;
        let flat = |t: &Tensor| -> Result<Vec<f32>> {
            Ok(Vec::<f32>::try_from(
                &t.f_to_kind(Kind::Float)?.f_to_device(Device::Cpu)?.f_contiguous()?.f_view([-1])?,
            )?)
        };
        self.pending = Some(Pending {
            obs: obs.iter().copied().collect(),
            raw_actions: flat(&raw)?,
            log_probs: flat(&logp)?,
            values: flat(&values)?,
        });
        self.policy.env_actions(&raw)
    }

    fn policy(&self) -> &dyn BatchPolicy {
        &self.policy
    }

    fn updates(&self) -> u64 {
        self.updates
    }

    /// Writes the checkpoint directory `dir` (weights, Adam state, the partial rollout,
    /// counters, generator).
    fn save(&self, dir: &Path) -> Result<()> {
        let state = PpoState {
            params: self.params.get().clone(),
            obs_dim: self.obs_dim,
            action_space: self.action_space()?,
            rng: self.rng.clone(),
            rollout: self.rollout.clone(),
            pending: self.pending.clone(),
            env_steps: self.env_steps,
            iterations: self.iterations,
            updates: self.updates,
            lr: self.opt.lr(),
        };
        let parts = Parts { stores: vec![("model", &self.vs)], optims: vec![("model", &self.opt)], tensors: vec![] };
        rl_nn::checkpoint::save_dir(dir, PPO_KIND, PPO_FORMAT, &state, &parts.collect()?)?;
        Ok(())
    }

    fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<PpoState>(dir, PPO_KIND, PPO_FORMAT)?;
        let s = ck.state;
        AgentError::ensure_same(&ck.path, "params", &s.params, self.params.get())?;
        AgentError::ensure_same(&ck.path, "obs_dim", &s.obs_dim, &self.obs_dim)?;
        AgentError::ensure_same(&ck.path, "action space", &s.action_space, &self.action_space()?)?;
        let per_step = s.rollout.n_envs;
        let r = &s.rollout;
        let sizes_ok = r.obs.len() == r.steps * per_step * self.obs_dim
            && r.raw_actions.len() == r.steps * per_step * self.raw_dim
            && [r.log_probs.len(), r.values.len(), r.rewards.len(), r.dones.len()]
                .iter()
                .all(|&l| l == r.steps * per_step);
        if !(sizes_ok && s.lr.is_finite() && s.lr >= 0.0) {
            return Err(AgentError::Corrupt {
                path: ck.path,
                reason: "rollout sizes or learning rate do not fit".into(),
            });
        }
        let parts = Parts { stores: vec![("model", &self.vs)], optims: vec![("model", &self.opt)], tensors: vec![] };
        parts.check(&ck.tensors, &ck.path)?;
        ckpt::restore(&[("model", &self.vs)], &mut [("model", &mut self.opt)], &mut [], &ck.tensors, &ck.path)?;
        self.opt.set_lr(s.lr)?;
        self.rng = s.rng;
        self.rollout = s.rollout;
        self.pending = s.pending;
        self.env_steps = s.env_steps;
        self.iterations = s.iterations;
        self.updates = s.updates;
        Ok(())
    }
}

impl OnlineAgent for Ppo {
    fn observe(&mut self, step: &VecTransition<'_>) -> Result<Option<UpdateMetrics>> {
        let n = step.len();
        let pending = match self.pending.take() {
            Some(p) if p.values.len() == n => p,
            other => {
                let got = other.as_ref().map(|p| p.values.len());
                self.pending = other;
                return Err(AgentError::Protocol(format!("observe of {n} environments after explore of {got:?}")));
            }
        };
        let act_dim = BatchPolicy::act_dim(&self.policy);
        if let Err(e) = step.check(self.obs_dim, act_dim) {
            self.pending = Some(pending);
            return Err(e);
        }
        if self.rollout.steps > 0 && self.rollout.n_envs != n {
            self.pending = Some(pending);
            return Err(AgentError::Protocol(format!(
                "the rollout has {} environments, this step {n}",
                self.rollout.n_envs
            )));
        }
        let mut rewards: Vec<f32> = step.reward.to_vec();
        if self.params.bootstrap_truncated {
            let cut: Vec<usize> = (0..n).filter(|&i| step.truncated[i] && !step.terminated[i]).collect();
            if !cut.is_empty() {
                let rows = step.next_obs.select(ndarray::Axis(0), &cut);
                let x = obs_tensor(rows.view(), self.obs_dim, self.device)?;
                let v = Vec::<f32>::try_from(&tch::no_grad(|| self.values(&x))?.f_to_device(Device::Cpu)?)?;
                for (k, &i) in cut.iter().enumerate() {
                    rewards[i] += self.params.gamma as f32 * v[k];
                }
            }
        }
        let r = &mut self.rollout;
        r.n_envs = n;
        r.obs.extend_from_slice(&pending.obs);
        r.raw_actions.extend_from_slice(&pending.raw_actions);
        r.log_probs.extend_from_slice(&pending.log_probs);
        r.values.extend_from_slice(&pending.values);
        r.rewards.extend_from_slice(&rewards);
        r.dones.extend((0..n).map(|i| f32::from(u8::from(step.terminated[i] || step.truncated[i]))));
        r.steps += 1;
        self.env_steps += n as u64;
        if self.rollout.steps < self.params.num_steps {
            return Ok(None);
        }
        self.learn(step.continue_obs).map(Some)
    }

    fn env_steps(&self) -> u64 {
        self.env_steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_params_name_the_field() {
        let e = PpoParams::default().clip_coef(0.0).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "clip_coef"), "{e}");
        let e = PpoParams::default().num_steps(4).num_minibatches(8).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "num_minibatches"), "{e}");
        let e = PpoParams::default().lr_schedule(LrSchedule::Linear { total_steps: 0 }).check().unwrap_err();
        assert!(matches!(e, AgentError::InvalidParameter { ref name, .. } if name == "lr_schedule.total_steps"), "{e}");
        let p: PpoParams = serde_json::from_str(r#"{"lr_schedule": {"linear": {"total_steps": 100}}}"#).unwrap();
        assert_eq!(p.lr_schedule, LrSchedule::Linear { total_steps: 100 });
    }

    #[test]
    fn gae_matches_hand_computation() {
        let mut ppo = Ppo::new(
            PpoParams::default().num_steps(3).num_minibatches(1).gamma(0.5).gae_lambda(0.5).check().unwrap(),
            &Space::symmetric(1, 1.0).unwrap(),
            &Space::discrete(2).unwrap(),
            Device::Cpu,
            0,
        )
        .unwrap();
        ppo.rollout = Rollout {
            n_envs: 1,
            obs: vec![0.0; 3],
            raw_actions: vec![0.0; 3],
            log_probs: vec![0.0; 3],
            values: vec![1.0, 2.0, 3.0],
            rewards: vec![1.0, 1.0, 1.0],
            dones: vec![0.0, 1.0, 0.0],
            steps: 3,
        };
        let (adv, ret) = ppo.gae(&[4.0]);
        // t=2: δ = 1 + .5·4 − 3 = 0, A = 0
        // t=1 (done): δ = 1 − 2 = −1, A = −1
        // t=0: δ = 1 + .5·2 − 1 = 1, A = 1 + .25·(−1) = 0.75
        assert_eq!(adv, vec![0.75, -1.0, 0.0]);
        assert_eq!(ret, vec![1.75, 1.0, 3.0]);
    }
}
