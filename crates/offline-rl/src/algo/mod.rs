//! Offline algorithms behind one trait: [`Bc`], [`Td3Bc`], [`Iql`], [`Dmg`], [`Scas`].
//!
//! Every algorithm implements [`rl_agents::Agent`] (`update(&Batch)`, `explore`, `policy`,
//! `save`/`load` — the shape the online agents share, so an offline algorithm fine-tunes
//! online through the same loop) and [`OfflineAlgorithm`] (preparation on the dataset before
//! training, e.g. SCAS's dynamics model; the switch to fine-tuning schedules, e.g. DMG's).
//! [`AlgorithmParams`] builds any of them from a tagged configuration (CLI, TOML/JSON).
//!
//! Critic ensembles are one [`rl_agents::EnsembleCritic`] (every member in one batched matmul
//! per layer); randomness comes from each algorithm's own generator (`rl_nn::init`,
//! `rl_nn::rand`), never libtorch's global one; checkpoints hold every weight, target,
//! optimiser moment, counter and generator, so training resumes bit for bit.

pub mod bc;
pub(crate) mod common;
pub mod dmg;
pub mod iql;
pub mod scas;
pub mod td3bc;

use ndarray::{Array2, ArrayView2};
use rand::RngCore;
use rl_agents::{Agent, BatchPolicy, ReplayBuffer};
use rl_core::{ActMode, Metrics, Params, Space};
use serde::{Deserialize, Serialize};
use tch::{Device, Tensor};

use crate::data::StateNorm;
use crate::error::{OfflineError, Result};

pub use bc::{Bc, BcParams};
pub use common::cosine_lr;
pub use dmg::{Dmg, DmgLosses, DmgParams, FinetuneSchedule};
pub use iql::{GaussianPolicy, Iql, IqlParams, IqlPolicy};
pub use scas::{DynamicsParams, Scas, ScasParams, TargetAggregation};
pub use td3bc::{Td3Bc, Td3BcParams};

/// An offline algorithm: an [`Agent`] trained on batches of a fixed dataset.
pub trait OfflineAlgorithm: Agent + Send {
    /// Work on the whole (preprocessed) dataset before the first update: SCAS trains its
    /// dynamics model here; the others do nothing. Returns what it measured.
    ///
    /// # Errors
    /// The algorithm's failures.
    fn prepare(&mut self, _data: &ReplayBuffer, _progress: bool) -> Result<Metrics> {
        Ok(Metrics::new())
    }

    /// Switches to (`true`) or from online fine-tuning schedules (DMG: `λ`, `ν` decay, no
    /// cosine); a no-op for algorithms without one.
    ///
    /// # Errors
    /// The algorithm's failures.
    fn set_online(&mut self, _online: bool) -> Result<()> {
        Ok(())
    }
}

/// The D4RL dataset kinds (they select per-dataset hyperparameters, e.g. DMG's `ν`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetKind {
    /// Uniformly random actions.
    Random,
    /// A policy at about a third of the expert's return.
    Medium,
    /// The replay buffer of the medium policy's training.
    MediumReplay,
    /// Medium and expert data concatenated.
    MediumExpert,
    /// The final policy.
    Expert,
    /// Anything else (maze2d, our own data).
    Other,
}

impl DatasetKind {
    /// Every D4RL kind, in the usual table order.
    pub const D4RL: [DatasetKind; 5] = [
        DatasetKind::Random,
        DatasetKind::Medium,
        DatasetKind::MediumReplay,
        DatasetKind::MediumExpert,
        DatasetKind::Expert,
    ];

    /// `medium-replay` etc.
    pub fn as_str(&self) -> &'static str {
        match self {
            DatasetKind::Random => "random",
            DatasetKind::Medium => "medium",
            DatasetKind::MediumReplay => "medium-replay",
            DatasetKind::MediumExpert => "medium-expert",
            DatasetKind::Expert => "expert",
            DatasetKind::Other => "other",
        }
    }

    /// The kind named in a dataset name (`hopper-medium-replay-v2` → `MediumReplay`).
    pub fn from_name(name: &str) -> DatasetKind {
        let n = name.to_ascii_lowercase().replace('_', "-");
        if n.contains("medium-replay") {
            DatasetKind::MediumReplay
        } else if n.contains("medium-expert") {
            DatasetKind::MediumExpert
        } else if n.contains("medium") {
            DatasetKind::Medium
        } else if n.contains("expert") {
            DatasetKind::Expert
        } else if n.contains("random") {
            DatasetKind::Random
        } else {
            DatasetKind::Other
        }
    }
}

/// The algorithm names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum AlgoKind {
    /// Behaviour cloning.
    Bc,
    /// TD3+BC.
    Td3Bc,
    /// IQL.
    Iql,
    /// DMG.
    Dmg,
    /// SCAS.
    Scas,
}

impl AlgoKind {
    /// All, in table order.
    pub const ALL: [AlgoKind; 5] = [AlgoKind::Bc, AlgoKind::Td3Bc, AlgoKind::Iql, AlgoKind::Dmg, AlgoKind::Scas];

    /// `td3bc` etc.
    pub fn as_str(&self) -> &'static str {
        match self {
            AlgoKind::Bc => "bc",
            AlgoKind::Td3Bc => "td3bc",
            AlgoKind::Iql => "iql",
            AlgoKind::Dmg => "dmg",
            AlgoKind::Scas => "scas",
        }
    }
}

impl std::str::FromStr for AlgoKind {
    type Err = OfflineError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace(['-', '+', '_'], "").as_str() {
            "bc" => Ok(AlgoKind::Bc),
            "td3bc" => Ok(AlgoKind::Td3Bc),
            "iql" => Ok(AlgoKind::Iql),
            "dmg" => Ok(AlgoKind::Dmg),
            "scas" => Ok(AlgoKind::Scas),
            _ => Err(OfflineError::UnknownId { what: "algorithm (bc, td3bc, iql, dmg, scas)".into(), id: s.into() }),
        }
    }
}

/// Parameters of any algorithm, tagged by `algo` (`{"algo": "dmg", "nu": 10.0}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "algo", rename_all = "snake_case")]
pub enum AlgorithmParams {
    /// [`Bc`].
    Bc(BcParams),
    /// [`Td3Bc`].
    Td3Bc(Td3BcParams),
    /// [`Iql`].
    Iql(IqlParams),
    /// [`Dmg`].
    Dmg(DmgParams),
    /// [`Scas`].
    Scas(ScasParams),
}

/// The `algo` of every variant of [`AlgorithmParams`], in the order of the variants.
const ALGORITHM_PARAMS_KINDS: [&str; 5] = ["bc", "td3_bc", "iql", "dmg", "scas"];

/// [`AlgorithmParams`] externally tagged, for [`rl_core::de::internally_tagged`]: a variant without
/// fields refuses any key next to `algo`, and errors keep their paths.
#[derive(Deserialize)]
#[serde(remote = "AlgorithmParams", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)] // read only by the derived deserializer
enum AlgorithmParamsDe {
    Bc(BcParams),
    Td3Bc(Td3BcParams),
    Iql(IqlParams),
    Dmg(DmgParams),
    Scas(ScasParams),
}

#[derive(Deserialize)]
struct AlgorithmParamsTagged(#[serde(with = "AlgorithmParamsDe")] AlgorithmParams);

impl<'de> Deserialize<'de> for AlgorithmParams {
    /// A table with `algo` and the variant's fields; any other key is an error naming it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(rl_core::de::internally_tagged::<D, AlgorithmParamsTagged>(d, "algo", &ALGORITHM_PARAMS_KINDS)?.0)
    }
}

impl AlgorithmParams {
    /// The papers' defaults of `kind` for a Gym-MuJoCo dataset of kind `data` (only DMG's `ν`
    /// depends on it).
    pub fn defaults(kind: AlgoKind, data: DatasetKind) -> Self {
        match kind {
            AlgoKind::Bc => AlgorithmParams::Bc(BcParams::default()),
            AlgoKind::Td3Bc => AlgorithmParams::Td3Bc(Td3BcParams::default()),
            AlgoKind::Iql => AlgorithmParams::Iql(IqlParams::default()),
            AlgoKind::Dmg => AlgorithmParams::Dmg(DmgParams::gym(data)),
            AlgoKind::Scas => AlgorithmParams::Scas(ScasParams::default()),
        }
    }

    /// Which algorithm.
    pub fn kind(&self) -> AlgoKind {
        match self {
            AlgorithmParams::Bc(_) => AlgoKind::Bc,
            AlgorithmParams::Td3Bc(_) => AlgoKind::Td3Bc,
            AlgorithmParams::Iql(_) => AlgoKind::Iql,
            AlgorithmParams::Dmg(_) => AlgoKind::Dmg,
            AlgorithmParams::Scas(_) => AlgoKind::Scas,
        }
    }

    /// Sets the hidden widths of every network (not SCAS's dynamics model).
    #[must_use]
    pub fn hidden(self, hidden: Vec<i64>) -> Self {
        match self {
            AlgorithmParams::Bc(p) => AlgorithmParams::Bc(p.hidden(hidden)),
            AlgorithmParams::Td3Bc(p) => AlgorithmParams::Td3Bc(p.hidden(hidden)),
            AlgorithmParams::Iql(p) => AlgorithmParams::Iql(p.hidden(hidden)),
            AlgorithmParams::Dmg(p) => AlgorithmParams::Dmg(p.hidden(hidden)),
            AlgorithmParams::Scas(p) => AlgorithmParams::Scas(p.hidden(hidden)),
        }
    }

    /// Sets the length of the actor's cosine learning-rate schedule to a run of
    /// `gradient_steps` updates (DMG, SCAS: `gradient_steps / policy_delay` actor updates; IQL:
    /// `gradient_steps`), as the references anneal over their full 10^6-step runs.
    #[must_use]
    pub fn anneal_over(self, gradient_steps: u64) -> Self {
        match self {
            AlgorithmParams::Iql(p) => AlgorithmParams::Iql(p.cosine_steps(gradient_steps)),
            AlgorithmParams::Dmg(p) => {
                let d = p.policy_delay as u64;
                AlgorithmParams::Dmg(p.cosine_steps(gradient_steps / d))
            }
            AlgorithmParams::Scas(p) => {
                let d = p.policy_delay as u64;
                AlgorithmParams::Scas(p.cosine_steps(gradient_steps / d))
            }
            other => other,
        }
    }

    /// Builds the algorithm (parameters checked here).
    ///
    /// # Errors
    /// The first invalid parameter; the constructors' errors.
    pub fn build(&self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Box<dyn OfflineAlgorithm>> {
        Ok(match self {
            AlgorithmParams::Bc(p) => Box::new(Bc::new(p.clone().check()?, obs, act, device, seed)?),
            AlgorithmParams::Td3Bc(p) => Box::new(Td3Bc::new(p.clone().check()?, obs, act, device, seed)?),
            AlgorithmParams::Iql(p) => Box::new(Iql::new(p.clone().check()?, obs, act, device, seed)?),
            AlgorithmParams::Dmg(p) => Box::new(Dmg::new(p.clone().check()?, obs, act, device, seed)?),
            AlgorithmParams::Scas(p) => Box::new(Scas::new(p.clone().check()?, obs, act, device, seed)?),
        })
    }
}

/// Checks a host observation batch and moves it to `device` as `[n, obs_dim]` `f32`.
pub(crate) fn obs_tensor(obs: ArrayView2<'_, f32>, obs_dim: usize, device: Device) -> common::AResult<Tensor> {
    if obs.ncols() != obs_dim || obs.nrows() == 0 {
        return Err(rl_agents::AgentError::shape("obs", format!("[n >= 1, {obs_dim}]"), format!("{:?}", obs.shape())));
    }
    rl_core::check_finite("obs", obs.iter())?;
    Ok(rl_nn::convert::array_to_tensor_on(&obs, device)?)
}

/// A policy trained on normalised observations, acting on raw ones: `π((s − mean) / std)`.
#[derive(Clone, Copy)]
pub struct NormalizedPolicy<'a> {
    /// The policy.
    pub inner: &'a dyn BatchPolicy,
    /// The dataset's statistics.
    pub norm: &'a StateNorm,
}

impl std::fmt::Debug for NormalizedPolicy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NormalizedPolicy(obs {}, action {})", self.inner.obs_dim(), self.inner.act_dim())
    }
}

impl BatchPolicy for NormalizedPolicy<'_> {
    fn obs_dim(&self) -> usize {
        self.inner.obs_dim()
    }

    fn act_dim(&self) -> usize {
        self.inner.act_dim()
    }

    fn act_batch(
        &self,
        obs: ArrayView2<'_, f32>,
        mode: ActMode,
        rng: &mut dyn RngCore,
    ) -> common::AResult<Array2<f32>> {
        let z = self
            .norm
            .normalize(obs)
            .map_err(|e| rl_agents::AgentError::shape("obs", format!("width {}", self.norm.dim()), e.to_string()))?;
        self.inner.act_batch(z.view(), mode, rng)
    }
}
