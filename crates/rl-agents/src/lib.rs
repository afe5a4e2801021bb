//! # rl-agents
//!
//! Online reinforcement-learning agents for [frugal-rl](https://example.invalid/frugal-rl) on
//! libtorch, with the published defaults, and the building blocks offline and
//! credit-assignment methods reuse:
//!
//! - [`Sac`] (twin or `N` critics, automatic entropy tuning), [`Td3`] (target smoothing,
//!   delayed actor) and [`Ppo`] (GAE, clipping, value clipping, entropy; continuous and
//!   discrete actions; any number of environments).
//! - [`Agent`]: `update(&Batch) -> UpdateMetrics`, `explore`, `policy`, `save`/`load` — the
//!   shape offline algorithms share; [`OnlineAgent`]: `explore` + `observe`, which
//!   [`OffPolicy`] (replay buffer, warm-up, update schedule) and [`Ppo`] implement.
//! - Networks ([`nets`]): [`DeterministicActor`], [`TanhGaussianActor`], [`EnsembleCritic`]
//!   (twin/`N` critics as one batched network), [`TargetSync`] (Polyak averaging),
//!   [`ActionBounds`].
//! - [`ReplayBuffer`] over [`rl_core::Transitions`] (uniform, optional `n`-step returns that
//!   follow each environment's stream), [`Batch`] (checked tensor batches).
//! - The loop: [`OnlineTrainer`], [`train()`] (JSONL metrics through [`rl_core::MetricsSink`],
//!   progress bar, periodic evaluation and checkpoints), [`Evaluator`] / [`evaluate`].
//!
//! Every agent owns its random stream (weights and noise through `rl_nn::init` /
//! `rl_nn::rand`, never libtorch's global generator) and checkpoints exactly: a run resumed
//! from a checkpoint continues bit for bit on CPU.
//!
//! ```no_run
//! use rl_agents::{train, Evaluator, OffPolicy, OffPolicyParams, OnlineTrainer, Sac, SacParams, TrainParams};
//! use rl_core::{Env, Params};
//! use rl_envs::classic::{Pendulum, PendulumParams};
//! use rl_envs::wrappers::VecEnv;
//! let make = |_| Ok(Pendulum::new(PendulumParams::default().check()?)?);
//! let envs = VecEnv::from_fn(1, 0, |_| Pendulum::new(PendulumParams::default().check()?))?;
//! let (obs, act) = (envs.observation_space().clone(), envs.action_space().clone());
//! let sac = Sac::new(SacParams::default().check()?, &obs, &act, tch::Device::Cpu, 0)?;
//! let mut agent = OffPolicy::new(OffPolicyParams::default().check()?, sac, &obs, &act, 0)?;
//! let mut trainer = OnlineTrainer::new(envs)?;
//! let mut eval = Evaluator::new(10, 100, make)?;
//! let mut sink = rl_core::JsonlSink::create("target/sac-pendulum/metrics.jsonl")?;
//! let params = TrainParams::default().total_steps(20_000).check()?;
//! let summary = train(&mut agent, &mut trainer, &params, Some(&mut eval), &mut sink, None)?;
//! println!("{:?}", summary.evaluations.last());
//! # Ok::<(), rl_agents::AgentError>(())
//! ```
//!
//! Guide: `docs/rl-agents.md`; speed: `docs/benchmarks.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod actor_critic;
pub mod agent;
pub mod batch;
pub mod buffer;
mod ckpt;
pub mod error;
pub mod nets;
pub mod off_policy;
pub mod ppo;
pub mod sac;
pub mod td3;
pub mod td3_core;
pub mod train;

pub use actor_critic::{ensemble_mse, ActorCritic, ActorCriticSpec};
pub use agent::{Agent, BatchLearner, BatchPolicy, OnlineAgent, PolicyRef, UpdateMetrics, VecTransition};
pub use batch::Batch;
pub use buffer::{ReplayBuffer, ReplayBufferParams};
pub use error::{AgentError, Result};
pub use nets::{
    ActionBounds, DeterministicActor, EnsembleCritic, GaussianSample, LogStdBounds, TanhGaussianActor, TargetSync,
};
pub use off_policy::{OffPolicy, OffPolicyParams};
pub use ppo::{LrSchedule, Ppo, PpoParams};
pub use sac::{Sac, SacParams};
pub use td3::{ActorObjective, Td3, Td3Params};
pub use td3_core::Td3Core;
pub use train::{evaluate, load_run, read_jsonl, save_run, train, Evaluator, OnlineTrainer, TrainParams, TrainSummary};

/// What [`td3_family_params!`] expands to needs from this crate's dependencies.
#[doc(hidden)]
pub mod __private {
    pub use rl_nn::MlpConfig;
    pub use serde;
}

#[cfg(test)]
mod autotraits {
    fn has_send<T: Send + Sized>() {}

    #[test]
    fn agents_are_send() {
        has_send::<super::Sac>();
        has_send::<super::Td3>();
        has_send::<super::Ppo>();
        has_send::<super::ReplayBuffer>();
        has_send::<super::AgentError>();
        has_send::<super::OffPolicy<super::Sac>>();
    }
}
