//! Behaviour cloning: the baseline every offline method must beat.

use std::path::Path;

use ndarray::{Array2, ArrayView2};
use rl_agents::{ActionBounds, Agent, Batch, BatchLearner, BatchPolicy, DeterministicActor, UpdateMetrics};
use rl_core::{Params, SeededRng, Space, Valid};
use rl_nn::optim::Adam;
use rl_nn::MlpConfig;
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind};

use super::common::{self, setters, AResult, Shape};
use super::{obs_tensor, OfflineAlgorithm};
use crate::error::{check, OfflineError, Result};

/// Parameters of [`Bc`] (CORL `any_percent_bc.py` with 100% of the data: 256-256 ReLU
/// deterministic tanh policy, MSE, Adam 3e-4).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `actor` | `[256, 256]` ReLU | network | identity output |
/// | `lr` | 3e-4 | Adam step | `> 0` |
/// | `exploration_noise` | 0.1 | Gaussian exploration std, × action scale | `>= 0` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BcParams {
    /// Policy network.
    pub actor: MlpConfig,
    /// Learning rate.
    pub lr: f64,
    /// Exploration noise.
    pub exploration_noise: f64,
}

impl Default for BcParams {
    fn default() -> Self {
        Self { actor: MlpConfig::new([256, 256]), lr: 3e-4, exploration_noise: 0.1 }
    }
}

setters!(BcParams { actor: MlpConfig, lr: f64, exploration_noise: f64 });

impl BcParams {
    /// Sets the hidden widths.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>>) -> Self {
        self.actor.hidden = hidden.into();
        self
    }
}

impl Params for BcParams {
    type Error = OfflineError;
    fn validate(&self) -> Result<()> {
        common::check_mlp("actor", &self.actor)?;
        check::positive("lr", self.lr)?;
        check::non_negative("exploration_noise", self.exploration_noise)?;
        Ok(())
    }
}

/// Behaviour cloning: `L(π) = mean_{b,j} (π(s) − a)²_j` with a deterministic tanh policy.
#[derive(Debug)]
pub struct Bc {
    params: Valid<BcParams>,
    device: Device,
    vs: VarStore,
    actor: DeterministicActor,
    opt: Adam,
    rng: SeededRng,
    updates: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    params: BcParams,
    shape: Shape,
    updates: u64,
    rng: SeededRng,
}

const KIND: &str = "offline_rl.bc";
const FORMAT: u32 = 1;

impl Bc {
    /// Behaviour cloning for observations of `obs_space` and actions in the bounded box
    /// `action_space`.
    ///
    /// # Errors
    /// [`OfflineError::Agent`] for an unbounded or discrete action space; device errors.
    pub fn new(
        params: Valid<BcParams>,
        obs_space: &Space,
        action_space: &Space,
        device: Device,
        seed: u64,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let bounds = ActionBounds::from_space(action_space, device)?;
        let mut init = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "bc-init"));
        let cfg = common::check_mlp("actor", &params.actor)?;
        let vs = VarStore::new(device);
        let actor = DeterministicActor::new(&vs.root(), obs_space.dim(), bounds, &cfg, &mut init)?;
        let opt = Adam::for_var_store(common::adam(params.lr)?, &vs)?;
        Ok(Self {
            params,
            device,
            vs,
            actor,
            opt,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "bc-noise")),
            updates: 0,
        })
    }
}

impl Agent for Bc {
    fn name(&self) -> &'static str {
        "bc"
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> AResult<Array2<f32>> {
        let x = obs_tensor(obs, self.actor.obs_dim(), self.device)?;
        let b = self.actor.bounds();
        let eps = rl_nn::rand::normal(
            &[obs.nrows() as i64, b.dim() as i64],
            0.0,
            self.params.exploration_noise,
            (Kind::Float, self.device),
            &mut self.rng,
        )?;
        let a = tch::no_grad(|| -> AResult<tch::Tensor> {
            b.clamp(&self.actor.forward(&x)?.f_add(&eps.f_mul(b.scale())?)?)
        })?;
        Ok(rl_nn::convert::tensor_to_array2(&a)?)
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

    fn save(&self, dir: &Path) -> AResult<()> {
        let state = State {
            params: self.params.get().clone(),
            shape: Shape::of(self.actor.obs_dim(), self.actor.bounds()),
            updates: self.updates,
            rng: self.rng.clone(),
        };
        let parts = common::Parts::new().store("actor", &self.vs).optim("actor", &self.opt);
        common::save(dir, KIND, FORMAT, &state, &parts)
    }

    fn load(&mut self, dir: &Path) -> AResult<()> {
        let ck = rl_nn::checkpoint::load_dir::<State>(dir, KIND, FORMAT)?;
        common::check_saved(
            &ck.path,
            (&ck.state.params, &ck.state.shape),
            (self.params.get(), &Shape::of(self.actor.obs_dim(), self.actor.bounds())),
        )?;
        let parts = common::Parts::new().store("actor", &self.vs).optim("actor", &self.opt);
        parts.check(&ck.tensors, &ck.path)?;
        rl_nn::parts::restore(&[("actor", &self.vs)], &mut [("actor", &mut self.opt)], &mut [], &ck.tensors, &ck.path)?;
        self.updates = ck.state.updates;
        self.rng = ck.state.rng;
        Ok(())
    }
}

impl BatchLearner for Bc {
    fn update(&mut self, batch: &Batch) -> AResult<UpdateMetrics> {
        batch.check_dims(self.actor.obs_dim(), self.actor.bounds().dim(), self.device)?;
        let loss = self.actor.forward(batch.obs())?.f_sub(batch.action())?.f_square()?.f_mean(Kind::Float)?;
        self.opt.backward_step(&loss)?;
        self.updates += 1;
        let mut m = UpdateMetrics::new();
        m.push("loss/actor", &loss)?;
        Ok(m)
    }
}

impl OfflineAlgorithm for Bc {}
