//! # offline-rl
//!
//! Offline reinforcement learning for [frugal-rl](https://example.invalid/frugal-rl) on
//! libtorch:
//!
//! - [`data`]: [`Dataset`] (transitions with D4RL's terminal/timeout semantics), read and
//!   written as D4RL HDF5, Minari datasets (pure-Rust HDF5, no C library) and our safetensors
//!   format, with typed validation errors and a [`LoadReport`] that accounts for every row;
//!   [`StateNorm`] (mean/std, eps 1e-3) and [`RewardTransform`]s.
//! - [`score`]: D4RL normalised scores with the published reference returns.
//! - [`algo`]: TD3+BC, IQL, DMG, SCAS and behaviour cloning behind
//!   [`algo::OfflineAlgorithm`] (on `rl_agents::Agent`), configured by
//!   [`algo::AlgorithmParams`] whose defaults are the papers' per-family values.
//! - [`train`]: [`train::OfflineData`] (normalised dataset in a replay buffer) and
//!   [`train::Trainer`] (the evaluation protocol, JSONL logs, checkpoints with exact resume).
//! - [`finetune`]: offline-to-online fine-tuning (DMG's schedule); [`robust`]: evaluation under
//!   observation/action perturbations.
//! - [`generate`]: D4RL-style datasets from our own SAC and maze2d data from D4RL's waypoint
//!   controller; [`tasks`]: the evaluation environments by name.
//!
//! Guide: `docs/offline-rl.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod algo;
pub mod data;
pub mod error;
pub mod finetune;
pub mod generate;
mod progress;
pub mod robust;
pub mod score;
pub mod tasks;
pub mod train;

pub use data::{Dataset, DatasetInfo, LoadReport, RewardTransform, StateNorm};
pub use error::{OfflineError, Result};
