//! # frugal-rl
//!
//! Sample-efficient reinforcement learning in Rust. This facade re-exports the member crates
//! of the workspace, each behind a feature:
//!
//! | feature | crate | what |
//! |---|---|---|
//! | (always) | [`core`] (`rl-core`) | env/policy traits, transition batches, metrics, seeding, statistics |
//! | `nn` (default) | [`nn`] (`rl-nn`) | libtorch MLPs/ensembles, target updates, devices, checkpoints |
//!
//! See the README for the crate map and `docs/` for the guide.
#![deny(missing_docs)]

pub use rl_core as core;
#[cfg(feature = "nn")]
pub use rl_nn as nn;
