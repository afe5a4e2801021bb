//! DMG: Doubly Mild Generalization (Mao et al., NeurIPS 2024, arXiv 2411.07934;
//! `thu-rllab/DMG`).

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rl_agents::{ActionBounds, Agent, Batch, BatchLearner, BatchPolicy, UpdateMetrics};
use rl_core::{Params, SeededRng, Space, Valid};
use rl_nn::optim::Adam;
use rl_nn::{Mlp, MlpConfig};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::common::{self, setters, AResult, Shape};
use super::{obs_tensor, DatasetKind, OfflineAlgorithm};
use crate::error::{check, OfflineError, Result};
use rl_agents::{ActorCritic, Td3Core};

/// The offline-to-online fine-tuning schedule of DMG (`train_finetune.py`): after `t` online
/// updates, `d_t = decay^⌊t / every⌋`, `λ_t = λ_end − (λ_end − λ) d_t`,
/// `ν_t = ν_end + (ν − ν_end) d_t`; the actor learning rate is constant.
///
/// | name | default | purpose | source |
/// |---|---|---|---|
/// | `lambda_end` | 0.5 | mixture coefficient reached online | code (`--lam_end`) |
/// | `nu_end` | 0.005 | penalty reached online | code (`--nu_end`) |
/// | `decay` | 0.99 | decay factor | code (`exp_decay`) |
/// | `every` | 1000 | online updates per decay step | code |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FinetuneSchedule {
    /// Final mixture coefficient.
    pub lambda_end: f64,
    /// Final penalty.
    pub nu_end: f64,
    /// Decay factor.
    pub decay: f64,
    /// Updates per decay step.
    pub every: u64,
}

impl Default for FinetuneSchedule {
    fn default() -> Self {
        Self { lambda_end: 0.5, nu_end: 0.005, decay: 0.99, every: 1000 }
    }
}

setters!(FinetuneSchedule { lambda_end: f64, nu_end: f64, decay: f64, every: u64 });

impl Params for FinetuneSchedule {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        check::unit_closed("lambda_end", self.lambda_end)?;
        check::non_negative("nu_end", self.nu_end)?;
        check::unit_closed("decay", self.decay)?;
        check::at_least("every", self.every as usize, 1)?;
        Ok(())
    }
}

/// Parameters of [`Dmg`]: the shared TD3 hyper-parameters [`Td3Core`] (field `td3`, its keys
/// at the top level of a configuration) and DMG's own. Defaults are the paper's Gym-MuJoCo
/// values for `medium`, `medium-replay` and `random` data (Table 5 and `thu-rllab/DMG`);
/// [`DmgParams::gym`] picks `ν` by dataset, [`DmgParams::antmaze`] gives the AntMaze set.
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic` | `[256, 256]` ReLU | networks | identity output | code |
/// | `n_critics` | 2 | critics (min for targets and the actor) | `>= 1` | code |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `tau` | 0.005 | target smoothing (critic and actor, on actor updates) | `[0, 1]` | code |
/// | `actor_lr`, `critic_lr` | 3e-4 | Adam steps | `> 0` | code |
/// | `policy_noise`, `noise_clip` | 0.2, 0.5 | target smoothing noise std and clip, in action units (not × action scale, as in the code: `randn_like(action) * 0.2` clamped to ±0.5) | `>= 0` | code |
/// | `policy_delay` | 2 | critic updates per actor update | `>= 1` | code |
/// | `exploration_noise` | 0.1 | Gaussian exploration std when fine-tuning, × action scale | `>= 0` | code (`--expl_noise`) |
/// | `value` | `[256, 256]` ReLU | the state-value network | identity output | code |
/// | `value_lr` | 3e-4 | its Adam step | `> 0` | code |
/// | `cosine_steps` | 500,000 | actor updates over which the actor learning rate anneals to 0 (`CosineAnnealingLR(1e6 / policy_delay)`); 0: constant | `>= 0` | code |
/// | `scale_target_noise` | `false` | multiply the clipped smoothing noise by the action scale (`(high − low) / 2`), as TD3's command line does; the DMG code does not | | ours |
/// | `lambda` | 0.25 | mixture `λ` of the generalised and in-sample targets | `[0, 1]` | paper Table 5 |
/// | `nu` | 0.1 | penalty `ν` of the advantage-weighted BC term (10 for expert / medium-expert, 0.5 AntMaze); the code's command line defaults to `--nu 0.5` for every task, [`DmgParams::code_defaults`] gives that | `>= 0` | paper Table 5 |
/// | `expectile` | 0.7 | expectile `τ` of the value net (0.9 AntMaze) | `(0, 1)` | paper (IQL) |
/// | `temperature` | 3.0 | inverse temperature `α` of the weights (10 AntMaze) | `>= 0` | paper (IQL) |
/// | `max_weight` | 3.0 | clamp of `exp(α(Q − V))` (100 AntMaze) | `> 0` | code only (`max_weight = 100 if antmaze else 3`) |
/// | `finetune` | see [`FinetuneSchedule`] | online schedule of `λ`, `ν` | | code |
///
/// The rows from `actor` to `exploration_noise` are the fields of [`Td3Core`]
/// (`params.td3.gamma`; the setter `.gamma(0.9)` works on `DmgParams` too). `check` names the
/// first bad field in the order of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct DmgParams {
    /// The shared TD3 hyper-parameters.
    pub td3: Td3Core,
    /// The state-value network.
    pub value: MlpConfig,
    /// Value learning rate.
    pub value_lr: f64,
    /// Actor updates of the cosine schedule (0: none).
    pub cosine_steps: u64,
    /// Multiply the clipped smoothing noise by the action scale (default `false`, as the code).
    pub scale_target_noise: bool,
    /// Mixture coefficient λ.
    pub lambda: f64,
    /// Penalty ν.
    pub nu: f64,
    /// Expectile τ.
    pub expectile: f64,
    /// Inverse temperature α.
    pub temperature: f64,
    /// Weight clamp.
    pub max_weight: f64,
    /// Fine-tuning schedule.
    pub finetune: FinetuneSchedule,
}

impl Default for DmgParams {
    fn default() -> Self {
        Self {
            td3: Td3Core::default(),
            value: MlpConfig::new([256, 256]),
            value_lr: 3e-4,
            cosine_steps: 500_000,
            scale_target_noise: false,
            lambda: 0.25,
            nu: 0.1,
            expectile: 0.7,
            temperature: 3.0,
            max_weight: 3.0,
            finetune: FinetuneSchedule::default(),
        }
    }
}

rl_agents::td3_family_params!(DmgParams {
    value,
    value_lr,
    cosine_steps,
    scale_target_noise,
    lambda,
    nu,
    expectile,
    temperature,
    max_weight,
    finetune,
});

setters!(DmgParams {
    td3: Td3Core,
    value: MlpConfig,
    value_lr: f64,
    cosine_steps: u64,
    scale_target_noise: bool,
    lambda: f64,
    nu: f64,
    expectile: f64,
    temperature: f64,
    max_weight: f64,
    finetune: FinetuneSchedule,
});

impl DmgParams {
    /// The Gym-MuJoCo values for a dataset kind: `ν = 10` for `expert` and `medium-expert`,
    /// `ν = 0.1` otherwise (paper Table 5).
    pub fn gym(kind: DatasetKind) -> Self {
        let nu = match kind {
            DatasetKind::Expert | DatasetKind::MediumExpert => 10.0,
            _ => 0.1,
        };
        Self { nu, ..Self::default() }
    }

    /// The AntMaze values: `ν = 0.5`, expectile 0.9, temperature 10, weight clamp 100 (paper
    /// Table 5, code). Rewards: [`crate::RewardTransform::SparseMinusOne`].
    pub fn antmaze() -> Self {
        Self { nu: 0.5, expectile: 0.9, temperature: 10.0, max_weight: 100.0, ..Self::default() }
    }

    /// The official code's command-line defaults (`train_offline.py`: `--nu 0.5`,
    /// `--lam 0.25`, expectile 0.7 and temperature 3 off AntMaze) rather than the paper's
    /// per-dataset Table 5: only `ν` differs from [`DmgParams::default`].
    pub fn code_defaults() -> Self {
        Self { nu: 0.5, ..Self::default() }
    }

    /// Sets the hidden widths of actor, critics and value network.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.td3 = self.td3.hidden(hidden.clone());
        self.value.hidden = hidden.into();
        self
    }
}

impl Params for DmgParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        self.td3.check_fields()?;
        common::check_mlp("value", &self.value)?;
        check::positive("value_lr", self.value_lr)?;
        check::unit_closed("lambda", self.lambda)?;
        check::non_negative("nu", self.nu)?;
        check::unit_open("expectile", self.expectile)?;
        check::non_negative("temperature", self.temperature)?;
        check::positive("max_weight", self.max_weight)?;
        self.finetune.validate().map_err(|e| e.prefixed("finetune"))?;
        Ok(())
    }
}

/// DMG: a TD3 actor–critic whose critic target mixes the mildly generalised maximum
/// `Q'(s', π'(s'))` with IQL's in-sample maximum `V(s')`, and whose actor adds an
/// advantage-weighted behaviour-cloning penalty.
///
/// ```text
/// per update, one batch (s, a, r, s', d):
///   value:  q_in = min_e Q'_e(s, a)                                   (target critics)
///           L(V) = mean_b |τ − 1[q_in − V(s) < 0]| (q_in − V(s))²
///   critic: a' = clip( π'(s') + clip(σε, −c, c) · k, low, high )   (k = 1; the action scale with `scale_target_noise`)
///           y  = r + γ (1 − d) ( λ min_e Q'_e(s', a') + (1 − λ) V(s') )     (V just updated)
///           L(Q) = Σ_e mean_b (Q_e(s, a) − y)²
///   actor (every `policy_delay` updates):
///           w = min( exp(α (q_in − V(s))), W )                         (no gradient)
///           k = 1 / mean_b |min_e Q_e(s, π(s))|                         (no gradient)
///           L(π) = −k mean_b min_e Q_e(s, π(s)) + ν mean_{b,j} w_b (π(s) − a)²_j
///           then the cosine step of the actor learning rate and
///           θ' ← τ θ + (1 − τ) θ' for critics and actor
/// fine-tuning (after `set_online(true)`): λ, ν follow [`FinetuneSchedule`], no cosine
/// ```
///
/// As in the official code, `W = 3` on Gym-MuJoCo (`W = 100` on AntMaze) and the BC term is a
/// mean over the batch *and* the action dimensions. The value net regresses to the *target*
/// critics; the critic target uses the *updated* `V`. Implementation: the two no-gradient
/// evaluations of the target critics (at `(s, a)` and `(s', a')`) are one batched forward, as
/// are the two of the updated value net (at `s` and `s'`); values are those of the reference
/// step, computed once.
///
/// ```
/// use offline_rl::algo::{Dmg, DmgParams};
/// use rl_core::{Params, Space};
/// let dmg = Dmg::new(DmgParams::default().hidden([32]).check()?, &Space::symmetric(3, 1.0)?,
///                    &Space::symmetric(1, 1.0)?, tch::Device::Cpu, 0)?;
/// assert_eq!((dmg.lambda(), dmg.nu()), (0.25, 0.1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Dmg {
    params: Valid<DmgParams>,
    nets: ActorCritic,
    value_vs: VarStore,
    value: Mlp,
    value_opt: Adam,
    rng: SeededRng,
    updates: u64,
    actor_updates: u64,
    online: bool,
    online_updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    params: DmgParams,
    shape: Shape,
    updates: u64,
    actor_updates: u64,
    online: bool,
    online_updates: u64,
    rng: SeededRng,
}

const KIND: &str = "offline_rl.dmg";
const FORMAT: u32 = 1;

/// What one DMG step computes, exposed for tests.
#[derive(Debug)]
pub struct DmgLosses {
    /// `L(V)`.
    pub value: Tensor,
    /// The critic target `y` `[B]`.
    pub target: Tensor,
    /// The weights `w` `[B]`.
    pub weight: Tensor,
}

impl Dmg {
    /// DMG for observations of `obs_space` and actions in the bounded box `action_space`.
    ///
    /// # Errors
    /// [`OfflineError::Agent`] for an unbounded or discrete action space; device errors.
    pub fn new(
        params: Valid<DmgParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "dmg-init"));
        let nets = common::actor_critic(params.td3.spec(obs_space.dim(), bounds), device, &mut init)?;
        let value_vs = VarStore::new(device);
        let value_cfg = common::check_mlp("value", &params.value)?;
        let value = Mlp::new(&value_vs.root(), obs_space.dim() as i64, 1, &value_cfg, &mut init)?;
        let value_opt = Adam::for_var_store(common::adam(params.value_lr)?, &value_vs)?;
        Ok(Self {
            params,
            nets,
            value_vs,
            value,
            value_opt,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "dmg-noise")),
            updates: 0,
            actor_updates: 0,
            online: false,
            online_updates: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &DmgParams {
        &self.params
    }

    /// Switches to the fine-tuning schedule (`true`): `λ`, `ν` decay per
    /// [`FinetuneSchedule`], the actor learning rate is reset to `actor_lr` and kept constant
    /// (`train_finetune.py`). `false` returns to offline training.
    ///
    /// # Errors
    /// None in practice (the learning rate is a checked parameter).
    pub fn set_online(&mut self, online: bool) -> rl_agents::Result<()> {
        self.online = online;
        self.sync_lr()
    }

    /// Whether the fine-tuning schedule is on.
    pub fn is_online(&self) -> bool {
        self.online
    }

    fn decay(&self) -> f64 {
        let f = &self.params.finetune;
        f.decay.powf((self.online_updates / f.every) as f64)
    }

    /// The current mixture coefficient `λ` (offline: the parameter; online: the schedule's).
    pub fn lambda(&self) -> f64 {
        if !self.online {
            return self.params.lambda;
        }
        let f = &self.params.finetune;
        f.lambda_end - (f.lambda_end - self.params.lambda) * self.decay()
    }

    /// The current penalty `ν`.
    pub fn nu(&self) -> f64 {
        if !self.online {
            return self.params.nu;
        }
        let f = &self.params.finetune;
        f.nu_end + (self.params.nu - f.nu_end) * self.decay()
    }

    /// `V(s)` `[B]`.
    ///
    /// # Errors
    /// Shape failures.
    pub fn value(&self, obs: &Tensor) -> AResult<Tensor> {
        Ok(self.value.f_forward(obs)?.f_squeeze_dim(-1)?)
    }

    /// The value loss, critic target and weights of `batch` under the current networks with
    /// smoothing noise `eps` (standard normal `[B, act_dim]`), without updating anything:
    /// the quantities of the docs' formula evaluated as the reference would in a step where V
    /// does not move.
    ///
    /// # Errors
    /// Shape and libtorch failures.
    pub fn losses(&self, batch: &Batch, eps: &Tensor) -> AResult<DmgLosses> {
        tch::no_grad(|| {
            let p = &self.params;
            let n = &self.nets;
            let a_next =
                n.target_action(batch.next_obs(), eps, p.td3.policy_noise, p.td3.noise_clip, p.scale_target_noise)?;
            let q_in = n.critic_target.forward(batch.obs(), batch.action())?.f_amin(0, false)?;
            let q_next = n.critic_target.forward(batch.next_obs(), &a_next)?.f_amin(0, false)?;
            let v = self.value(batch.obs())?;
            let value = common::expectile_loss(&q_in.f_sub(&v)?, p.expectile)?;
            let v_next = self.value(batch.next_obs())?;
            let mix = q_next.f_mul_scalar(self.lambda())?.f_add(&v_next.f_mul_scalar(1.0 - self.lambda())?)?;
            let target = batch.reward().f_add(&batch.bootstrap(p.td3.gamma)?.f_mul(&mix)?)?;
            let weight = q_in.f_sub(&v)?.f_mul_scalar(p.temperature)?.f_exp()?.f_clamp_max(p.max_weight)?;
            Ok(DmgLosses { value, target, weight })
        })
    }

    /// The actor loss `−k mean min_e Q_e(s, π(s)) + ν mean w (π(s) − a)²` for given weights.
    ///
    /// # Errors
    /// Shape and libtorch failures.
    pub fn actor_loss(&self, batch: &Batch, weight: &Tensor) -> AResult<Tensor> {
        let pi = self.nets.actor.forward(batch.obs())?;
        let q = self.nets.critic.forward_frozen(batch.obs(), &pi)?.f_amin(0, false)?;
        let k = q.f_abs()?.f_mean(Kind::Float)?.f_detach()?.f_reciprocal()?;
        let bc = pi.f_sub(batch.action())?.f_square()?.f_mul(&weight.f_unsqueeze(1)?)?.f_mean(Kind::Float)?;
        Ok(q.f_mean(Kind::Float)?.f_mul(&k)?.f_neg()?.f_add(&bc.f_mul_scalar(self.nu())?)?)
    }

    /// The actor learning rate the schedule prescribes now.
    fn sync_lr(&mut self) -> AResult<()> {
        let p = &self.params;
        let lr = if self.online || p.cosine_steps == 0 {
            p.td3.actor_lr
        } else {
            common::cosine_lr(p.td3.actor_lr, self.actor_updates, p.cosine_steps)
        };
        Ok(self.nets.actor_opt.set_lr(lr)?)
    }

    fn parts(&self) -> common::Parts<'_> {
        let mut p = self.nets.parts();
        p.stores.push(("value", &self.value_vs));
        p.optims.push(("value", &self.value_opt));
        p
    }

    /// One update (the same as [`BatchLearner::update`]) with the target-smoothing draw supplied by
    /// the caller: `eps` is the standard normal `[B, act_dim]` tensor `update` would draw (the
    /// reference's `torch.randn_like(action)`). The internal generator is not touched.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Shape`] for a batch of other widths or an `eps` of another
    /// shape, kind or device; libtorch failures.
    pub fn update_with_noise(&mut self, batch: &Batch, eps: &Tensor) -> AResult<UpdateMetrics> {
        let n = &self.nets;
        batch.check_dims(n.obs_dim, n.act_dim, n.device)?;
        let p = self.params.get().clone();
        let (lambda, nu) = (self.lambda(), self.nu());
        let b = batch.len() as i64;
        common::check_noise("eps", eps, batch.len(), n.act_dim, n.device)?;
        let mut m = UpdateMetrics::new();
        // target critics at (s, a) and (s', a') in one forward
        let (q_in, q_next) = tch::no_grad(|| -> AResult<(Tensor, Tensor)> {
            let a_next =
                n.target_action(batch.next_obs(), eps, p.td3.policy_noise, p.td3.noise_clip, p.scale_target_noise)?;
            let obs = Tensor::f_cat(&[batch.obs(), batch.next_obs()], 0)?;
            let act = Tensor::f_cat(&[batch.action(), &a_next], 0)?;
            let q = n.critic_target.forward(&obs, &act)?.f_amin(0, false)?;
            Ok((q.f_narrow(0, 0, b)?, q.f_narrow(0, b, b)?))
        })?;
        // value: expectile regression to the target critics' minimum
        let v = self.value(batch.obs())?;
        let value_loss = common::expectile_loss(&q_in.f_sub(&v)?, p.expectile)?;
        self.value_opt.backward_step(&value_loss)?;
        // the updated value net at s and s' in one forward
        let (v_s, v_next) = tch::no_grad(|| -> AResult<(Tensor, Tensor)> {
            let vv = self.value(&Tensor::f_cat(&[batch.obs(), batch.next_obs()], 0)?)?;
            Ok((vv.f_narrow(0, 0, b)?, vv.f_narrow(0, b, b)?))
        })?;
        let y = tch::no_grad(|| -> AResult<Tensor> {
            let mix = q_next.f_mul_scalar(lambda)?.f_add(&v_next.f_mul_scalar(1.0 - lambda)?)?;
            Ok(batch.reward().f_add(&batch.bootstrap(p.td3.gamma)?.f_mul(&mix)?)?)
        })?;
        let q = self.nets.critic.forward(batch.obs(), batch.action())?;
        let critic_loss = common::ensemble_mse(&q, &y)?;
        self.nets.critic_opt.backward_step(&critic_loss)?;
        m.push("loss/value", &value_loss)?;
        m.push("loss/critic", &critic_loss)?;
        m.push("train/q", &q.f_detach()?.f_mean(Kind::Float)?)?;
        m.push("train/v", &v_s.f_mean(Kind::Float)?)?;
        self.updates += 1;
        if self.online {
            self.online_updates += 1;
        }
        if self.updates % p.td3.policy_delay as u64 == 0 {
            let w = tch::no_grad(|| -> AResult<Tensor> {
                Ok(q_in.f_sub(&v_s)?.f_mul_scalar(p.temperature)?.f_exp()?.f_clamp_max(p.max_weight)?)
            })?;
            let pi = self.nets.actor.forward(batch.obs())?;
            let q_pi = self.nets.critic.forward_frozen(batch.obs(), &pi)?.f_amin(0, false)?;
            let k = q_pi.f_abs()?.f_mean(Kind::Float)?.f_detach()?.f_reciprocal()?;
            let bc = pi.f_sub(batch.action())?.f_square()?.f_mul(&w.f_unsqueeze(1)?)?.f_mean(Kind::Float)?;
            let actor_loss = q_pi.f_mean(Kind::Float)?.f_mul(&k)?.f_neg()?.f_add(&bc.f_mul_scalar(nu)?)?;
            self.nets.actor_opt.backward_step(&actor_loss)?;
            self.actor_updates += 1;
            self.sync_lr()?;
            self.nets.soft_update(p.td3.tau)?;
            m.push("loss/actor", &actor_loss)?;
            m.push("loss/bc", &bc)?;
            m.push("train/weight", &w.f_mean(Kind::Float)?)?;
        }
        m.push_value("train/lambda", lambda);
        m.push_value("train/nu", nu);
        Ok(m)
    }

    /// The network weights under checkpoint names (`actor.*`, `actor_target.*`, `critic.*`,
    /// `critic_target.*`, `value.*`; shallow copies, no optimiser state).
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        rl_nn::parts::weights(&self.parts().stores)
    }

    /// Overwrites the network weights from `weights` (names as [`Dmg::weights`]; all present,
    /// shapes equal, no other name); optimiser state and counters are untouched.
    ///
    /// # Errors
    /// [`rl_agents::AgentError::Nn`]-wrapped checkpoint errors naming the offending tensor.
    pub fn set_weights(&mut self, weights: &std::collections::BTreeMap<String, Tensor>) -> AResult<()> {
        Ok(rl_nn::parts::set_weights(&self.parts().stores, weights)?)
    }
}

impl Agent for Dmg {
    fn name(&self) -> &'static str {
        "dmg"
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
            online: self.online,
            online_updates: self.online_updates,
            rng: self.rng.clone(),
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
            &[("value", &self.value_vs)],
            &mut [("value", &mut self.value_opt)],
            &mut [],
            &ck.tensors,
            &ck.path,
        )?;
        self.updates = ck.state.updates;
        self.actor_updates = ck.state.actor_updates;
        self.online = ck.state.online;
        self.online_updates = ck.state.online_updates;
        self.rng = ck.state.rng;
        self.sync_lr()?;
        Ok(())
    }
}

impl BatchLearner for Dmg {
    fn update(&mut self, batch: &Batch) -> AResult<UpdateMetrics> {
        let n = &self.nets;
        batch.check_dims(n.obs_dim, n.act_dim, n.device)?;
        let b = batch.len() as i64;
        let eps = rl_nn::rand::standard_normal(&[b, n.act_dim as i64], (Kind::Float, n.device), &mut self.rng)?;
        self.update_with_noise(batch, &eps)
    }
}

impl OfflineAlgorithm for Dmg {
    fn set_online(&mut self, online: bool) -> rl_agents::Result<()> {
        Dmg::set_online(self, online)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    fn v(t: &Tensor) -> Vec<f64> {
        Vec::<f32>::try_from(&t.f_to_kind(Kind::Float).unwrap().f_flatten(0, -1).unwrap())
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()
    }

    fn setup() -> (Dmg, Batch) {
        let p = DmgParams::default().hidden([8]).max_weight(1.5).check().unwrap();
        let dmg = Dmg::new(p, &Space::symmetric(3, 1.0).unwrap(), &Space::symmetric(2, 1.0).unwrap(), Device::Cpu, 4)
            .unwrap();
        let mut rng = rl_core::rng_from_seed(1);
        let o = (Kind::Float, Device::Cpu);
        let b = Batch::from_tensors(
            rl_nn::rand::standard_normal(&[5, 3], o, &mut rng).unwrap(),
            rl_nn::rand::uniform(&[5, 2], -1.0, 1.0, o, &mut rng).unwrap(),
            rl_nn::rand::standard_normal(&[5], o, &mut rng).unwrap(),
            rl_nn::rand::standard_normal(&[5, 3], o, &mut rng).unwrap(),
            Tensor::from_slice(&[0.0f32, 1.0, 0.0, 0.0, 1.0]),
            None,
        )
        .unwrap();
        (dmg, b)
    }

    /// The value loss, target and weights, computed element by element from the networks'
    /// outputs (at initialisation the targets equal the online networks).
    #[test]
    fn losses_match_hand_computation() {
        let (dmg, b) = setup();
        let eps = Tensor::from_slice(&[3.0f32, -0.1, 0.2, 0.0, -4.0, 1.0, 0.5, 0.5, -0.3, 2.0]).view([5, 2]);
        let l = dmg.losses(&b, &eps).unwrap();
        let n = &dmg.nets;
        let q_sa = v(&n.critic.forward(b.obs(), b.action()).unwrap()); // [2, 5]
        let mu_next = v(&n.actor.forward(b.next_obs()).unwrap());
        let e = v(&eps);
        let a_next: Vec<f32> =
            (0..10).map(|i| (mu_next[i] + (0.2 * e[i]).clamp(-0.5, 0.5)).clamp(-1.0, 1.0) as f32).collect();
        let a_next = Tensor::from_slice(&a_next).view([5, 2]);
        let q_next = v(&n.critic.forward(b.next_obs(), &a_next).unwrap());
        let vs = v(&dmg.value(b.obs()).unwrap());
        let vn = v(&dmg.value(b.next_obs()).unwrap());
        let (r, d) = (v(b.reward()), v(b.terminal()));
        let mut value = 0.0;
        for i in 0..5 {
            let q_in = q_sa[i].min(q_sa[5 + i]);
            let diff = q_in - vs[i];
            value += if diff < 0.0 { 0.3 } else { 0.7 } * diff * diff / 5.0;
            let mix = 0.25 * q_next[i].min(q_next[5 + i]) + 0.75 * vn[i];
            let y = r[i] + 0.99 * (1.0 - d[i]) * mix;
            assert!((v(&l.target)[i] - y).abs() < 1e-5, "target {i}");
            let w = (3.0 * diff).exp().min(1.5);
            assert!((v(&l.weight)[i] - w).abs() < 1e-5, "weight {i}");
        }
        assert!((v(&l.value)[0] - value).abs() < 1e-5);
        // actor loss: −mean(min Q(s, π)) / mean|min Q(s, π)| + ν mean(w (π − a)²)
        let pi = v(&n.actor.forward(b.obs()).unwrap());
        let q_pi = v(&n.critic.forward(b.obs(), &n.actor.forward(b.obs()).unwrap()).unwrap());
        let qmin: Vec<f64> = (0..5).map(|i| q_pi[i].min(q_pi[5 + i])).collect();
        let k = 5.0 / qmin.iter().map(|x| x.abs()).sum::<f64>();
        let a = v(b.action());
        let w = v(&l.weight);
        let bc: f64 = (0..10).map(|j| w[j / 2] * (pi[j] - a[j]).powi(2)).sum::<f64>() / 10.0;
        let want = -k * qmin.iter().sum::<f64>() / 5.0 + 0.1 * bc;
        let got = v(&dmg.actor_loss(&b, &l.weight).unwrap())[0];
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    }

    #[test]
    fn finetune_schedule_follows_the_code() {
        let (mut dmg, b) = setup();
        assert_eq!((dmg.lambda(), dmg.nu()), (0.25, 0.1));
        dmg.set_online(true).unwrap();
        assert_eq!((dmg.lambda(), dmg.nu()), (0.25, 0.1)); // d_0 = 1
        dmg.online_updates = 2500; // d = 0.99^2
        let d = 0.99f64.powi(2);
        assert!((dmg.lambda() - (0.5 - 0.25 * d)).abs() < 1e-12);
        assert!((dmg.nu() - (0.005 + 0.095 * d)).abs() < 1e-12);
        dmg.online_updates = 0;
        dmg.update(&b).unwrap();
        assert_eq!(dmg.online_updates, 1);
        // offline, the cosine schedule moves the actor rate; online it stays at actor_lr
        assert_eq!(dmg.nets.actor_opt.lr(), 3e-4);
        dmg.set_online(false).unwrap();
        dmg.update(&b).unwrap();
        assert!(dmg.nets.actor_opt.lr() < 3e-4);
    }
}
