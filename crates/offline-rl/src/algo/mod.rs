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
use rl_agents::{BatchLearner, BatchPolicy, ReplayBuffer};
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

/// An offline algorithm: a [`BatchLearner`] trained on batches of a fixed dataset.
///
/// Every method of an algorithm returns the agents' error type, [`rl_agents::AgentError`]
/// (which [`OfflineError`] wraps with `From`), as [`BatchLearner::update`] does.
pub trait OfflineAlgorithm: BatchLearner + Send {
    /// Work on the whole (preprocessed) dataset before the first update: SCAS trains its
    /// dynamics model here; the others do nothing. Returns what it measured.
    ///
    /// # Errors
    /// The algorithm's failures.
    fn prepare(&mut self, _data: &ReplayBuffer, _progress: bool) -> rl_agents::Result<Metrics> {
        Ok(Metrics::new())
    }

    /// Switches to (`true`) or from online fine-tuning schedules (DMG: `λ`, `ν` decay, no
    /// cosine); a no-op for algorithms without one.
    ///
    /// # Errors
    /// The algorithm's failures.
    fn set_online(&mut self, _online: bool) -> rl_agents::Result<()> {
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

/// What the registry needs from an algorithm's parameters: its defaults, the two adjustments
/// every run makes (network widths, the cosine schedule's length) and how to build it.
/// Implemented by [`BcParams`], [`Td3BcParams`], [`IqlParams`], [`DmgParams`], [`ScasParams`].
///
/// Adding an algorithm to [`AlgoKind`] / [`AlgorithmParams`] is then one line of the
/// `registry!` table in this module (variant, parameters, name, configuration tag).
pub trait AlgorithmSpec: Params + Clone {
    /// The algorithm these parameters build.
    type Algorithm: OfflineAlgorithm + 'static;

    /// The papers' defaults for a Gym-MuJoCo dataset of kind `data` (most ignore it; DMG's `ν`
    /// depends on it).
    fn defaults_for(data: DatasetKind) -> Self;

    /// Sets the hidden widths of every network (not SCAS's dynamics model).
    #[must_use]
    fn with_hidden(self, hidden: Vec<i64>) -> Self;

    /// Sets the length of the actor's cosine learning-rate schedule to a run of
    /// `gradient_steps` updates; unchanged for algorithms without a schedule.
    #[must_use]
    fn anneal_over(self, _gradient_steps: u64) -> Self {
        self
    }

    /// Builds the algorithm (parameters checked here).
    ///
    /// # Errors
    /// The first invalid parameter; the constructor's errors.
    fn build(self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Self::Algorithm>;
}

impl AlgorithmSpec for BcParams {
    type Algorithm = Bc;
    fn defaults_for(_: DatasetKind) -> Self {
        Self::default()
    }
    fn with_hidden(self, hidden: Vec<i64>) -> Self {
        self.hidden(hidden)
    }
    fn build(self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Bc> {
        Bc::new(self.check()?, obs, act, device, seed)
    }
}

impl AlgorithmSpec for Td3BcParams {
    type Algorithm = Td3Bc;
    fn defaults_for(_: DatasetKind) -> Self {
        Self::default()
    }
    fn with_hidden(self, hidden: Vec<i64>) -> Self {
        self.hidden(hidden)
    }
    fn build(self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Td3Bc> {
        Td3Bc::new(self.check()?, obs, act, device, seed)
    }
}

impl AlgorithmSpec for IqlParams {
    type Algorithm = Iql;
    fn defaults_for(_: DatasetKind) -> Self {
        Self::default()
    }
    fn with_hidden(self, hidden: Vec<i64>) -> Self {
        self.hidden(hidden)
    }
    /// IQL anneals over `gradient_steps` (one actor update per step).
    fn anneal_over(self, gradient_steps: u64) -> Self {
        self.cosine_steps(gradient_steps)
    }
    fn build(self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Iql> {
        Iql::new(self.check()?, obs, act, device, seed)
    }
}

impl AlgorithmSpec for DmgParams {
    type Algorithm = Dmg;
    fn defaults_for(data: DatasetKind) -> Self {
        Self::gym(data)
    }
    fn with_hidden(self, hidden: Vec<i64>) -> Self {
        self.hidden(hidden)
    }
    /// `gradient_steps / policy_delay` actor updates, as the reference's `1e6 / policy_freq`.
    fn anneal_over(self, gradient_steps: u64) -> Self {
        let d = self.td3.policy_delay as u64;
        self.cosine_steps(gradient_steps / d)
    }
    fn build(self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Dmg> {
        Dmg::new(self.check()?, obs, act, device, seed)
    }
}

impl AlgorithmSpec for ScasParams {
    type Algorithm = Scas;
    fn defaults_for(_: DatasetKind) -> Self {
        Self::default()
    }
    fn with_hidden(self, hidden: Vec<i64>) -> Self {
        self.hidden(hidden)
    }
    /// `gradient_steps / policy_delay` actor updates, as the reference's `1e6 / 2`.
    fn anneal_over(self, gradient_steps: u64) -> Self {
        let d = self.td3.policy_delay as u64;
        self.cosine_steps(gradient_steps / d)
    }
    fn build(self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Scas> {
        Scas::new(self.check()?, obs, act, device, seed)
    }
}

/// The one table of offline algorithms: each line is `Variant(Params) = "name", "tag"` with
/// `name` the command-line name ([`AlgoKind::as_str`]; parsing ignores case, `-`, `+`, `_`) and
/// `tag` the `algo` value of a configuration ([`AlgorithmParams`]). Generates [`AlgoKind`], its
/// names and parsing, [`AlgorithmParams`] and its checked deserialisation, and the dispatch of
/// [`AlgorithmParams::defaults`], `kind`, `hidden`, `anneal_over` and `build` through
/// [`AlgorithmSpec`].
macro_rules! registry {
    ($( $(#[$doc:meta])* $variant:ident($params:ty) = $name:literal, $tag:literal; )*) => {
        /// The algorithm names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
        #[serde(rename_all = "snake_case")]
        pub enum AlgoKind {
            $( $(#[$doc])* $variant, )*
        }

        impl AlgoKind {
            /// All, in table order.
            pub const ALL: [AlgoKind; [$($name),*].len()] = [$(AlgoKind::$variant),*];

            /// `td3bc` etc.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $( AlgoKind::$variant => $name, )*
                }
            }
        }

        impl std::str::FromStr for AlgoKind {
            type Err = OfflineError;
            fn from_str(s: &str) -> Result<Self> {
                let norm = s.to_ascii_lowercase().replace(['-', '+', '_'], "");
                $( if norm == $name { return Ok(AlgoKind::$variant); } )*
                let names: Vec<&str> = vec![$($name),*];
                Err(OfflineError::UnknownId { what: format!("algorithm ({})", names.join(", ")), id: s.into() })
            }
        }

        /// Parameters of any algorithm, tagged by `algo` (`{"algo": "dmg", "nu": 10.0}`).
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "algo", rename_all = "snake_case")]
        pub enum AlgorithmParams {
            $( #[doc = concat!("[`", stringify!($variant), "`].")] $variant($params), )*
        }

        /// The `algo` of every variant of [`AlgorithmParams`], in the order of the variants.
        const ALGORITHM_PARAMS_KINDS: [&str; [$($tag),*].len()] = [$($tag),*];

        /// [`AlgorithmParams`] externally tagged, for [`rl_core::de::internally_tagged`]: a
        /// variant without fields refuses any key next to `algo`, and errors keep their paths.
        #[derive(Deserialize)]
        #[serde(remote = "AlgorithmParams", rename_all = "snake_case", deny_unknown_fields)]
        #[allow(dead_code)] // read only by the derived deserializer
        enum AlgorithmParamsDe {
            $( $variant($params), )*
        }

        impl AlgorithmParams {
            /// The papers' defaults of `kind` for a Gym-MuJoCo dataset of kind `data` (only
            /// DMG's `ν` depends on it).
            pub fn defaults(kind: AlgoKind, data: DatasetKind) -> Self {
                match kind {
                    $( AlgoKind::$variant => AlgorithmParams::$variant(<$params as AlgorithmSpec>::defaults_for(data)), )*
                }
            }

            /// Which algorithm.
            pub fn kind(&self) -> AlgoKind {
                match self {
                    $( AlgorithmParams::$variant(_) => AlgoKind::$variant, )*
                }
            }

            /// Sets the hidden widths of every network (not SCAS's dynamics model).
            #[must_use]
            pub fn hidden(self, hidden: Vec<i64>) -> Self {
                match self {
                    $( AlgorithmParams::$variant(p) => AlgorithmParams::$variant(p.with_hidden(hidden)), )*
                }
            }

            /// Sets the length of the actor's cosine learning-rate schedule to a run of
            /// `gradient_steps` updates (DMG, SCAS: `gradient_steps / policy_delay` actor
            /// updates; IQL: `gradient_steps`), as the references anneal over their full
            /// 10^6-step runs.
            #[must_use]
            pub fn anneal_over(self, gradient_steps: u64) -> Self {
                match self {
                    $( AlgorithmParams::$variant(p) => AlgorithmParams::$variant(p.anneal_over(gradient_steps)), )*
                }
            }

            /// Builds the algorithm (parameters checked here).
            ///
            /// # Errors
            /// The first invalid parameter; the constructors' errors.
            pub fn build(&self, obs: &Space, act: &Space, device: Device, seed: u64) -> Result<Box<dyn OfflineAlgorithm>> {
                Ok(match self {
                    $( AlgorithmParams::$variant(p) => Box::new(p.clone().build(obs, act, device, seed)?), )*
                })
            }
        }
    };
}

registry! {
    /// Behaviour cloning.
    Bc(BcParams) = "bc", "bc";
    /// TD3+BC.
    Td3Bc(Td3BcParams) = "td3bc", "td3_bc";
    /// IQL.
    Iql(IqlParams) = "iql", "iql";
    /// DMG.
    Dmg(DmgParams) = "dmg", "dmg";
    /// SCAS.
    Scas(ScasParams) = "scas", "scas";
}

#[derive(Deserialize)]
struct AlgorithmParamsTagged(#[serde(with = "AlgorithmParamsDe")] AlgorithmParams);

impl<'de> Deserialize<'de> for AlgorithmParams {
    /// A table with `algo` and the variant's fields; any other key is an error naming it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(rl_core::de::internally_tagged::<D, AlgorithmParamsTagged>(d, "algo", &ALGORITHM_PARAMS_KINDS)?.0)
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
