//! # rl-envs
//!
//! Control environments that match their reference implementations step for step, behind
//! [`rl_core::Env`] (single agent) and [`MultiAgentEnv`] (simultaneous-move multi-agent), and
//! the wrappers RL experiments put around them. The crate depends on `rl-core` only (no
//! libtorch); MuJoCo is an optional native dependency behind the `mujoco` feature.
//!
//! | module | environments | source of truth | golden tolerance |
//! |---|---|---|---|
//! | [`classic`] | Pendulum-v1, CartPole-v1, MountainCarContinuous-v0 | gymnasium 1.4 `classic_control` | 1e-6 |
//! | [`mpe`] | simple spread, tag, adversary, push, reference, speaker-listener, crypto, world comm ([`MultiAgentEnv`]) | mpe2 1.1.1 (PettingZoo MPE) | 1e-6 (push and the communication scenarios: 0) |
//! | `mujoco` (feature `mujoco`) | Hopper, HalfCheetah, Walker2d, Ant, Swimmer, InvertedPendulum, InvertedDoublePendulum, Reacher, Humanoid (v4 and v5), Pusher-v5; MuJoCo point maze | gymnasium 1.4 `mujoco/*_v4.py`, `*_v5.py` on MuJoCo 3.17.0; gymnasium-robotics | 1e-4 (measured: bit-identical after the float32 cast) |
//! | [`maze`] | PointMaze (D4RL maze2d layouts), sparse / dense; D4RL's waypoint controller | gymnasium-robotics 1.4.2 `PointMaze_*-v3`, D4RL | 1e-6 (MuJoCo's soft wall contact re-implemented) |
//!
//! Every environment:
//! - is deterministic given the generator passed to `reset`; with [`rng::NumpyRng::new(seed)`](rng::NumpyRng)
//!   its resets are gymnasium's `reset(seed=seed)` exactly;
//! - saves and restores its whole state through [`Snapshot`] (serde; a restored environment
//!   continues bit-identically);
//! - rejects a wrong action length ([`rl_core::RlCoreError::ShapeMismatch`]), a NaN or infinite
//!   action ([`rl_core::RlCoreError::NonFinite`]) and a step after the end of an episode
//!   ([`rl_core::RlCoreError::NeedsReset`]); out-of-range continuous actions are treated as the
//!   reference treats them (clipped by the dynamics);
//! - exposes its physical parameters through [`TaskParams`] for domain randomisation and task
//!   samplers.
//!
//! Wrappers ([`wrappers`]): [`TimeLimit`](wrappers::TimeLimit), [`EpisodicReward`](wrappers::EpisodicReward)
//! (delayed reward), [`DomainRandomization`](wrappers::DomainRandomization),
//! [`NormalizeObservation`](wrappers::NormalizeObservation), [`RescaleAction`](wrappers::RescaleAction)
//! and [`VecEnv`](wrappers::VecEnv) (a batch stepped together).
//!
//! ```
//! use rl_core::{Env, Params};
//! use rl_envs::classic::{CartPole, CartPoleParams};
//! use rl_envs::rng::NumpyRng;
//! use rl_envs::Snapshot;
//!
//! let mut env = CartPole::new(CartPoleParams::default().check()?)?;
//! let obs = env.reset(&mut NumpyRng::new(42))?; // gymnasium: env.reset(seed=42)
//! let saved = env.snapshot();
//! let a = env.step(ndarray::array![1.0].view())?;
//! env.restore(&saved)?;
//! let b = env.step(ndarray::array![1.0].view())?;
//! assert_eq!(a, b);
//! assert_eq!(obs.len(), 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Guide: `docs/rl-envs.md`; speed: `docs/benchmarks.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod classic;
pub mod common;
pub mod error;
pub mod maze;
pub mod mpe;
#[cfg(feature = "mujoco")]
pub mod mujoco;
pub mod numpy_sum;
pub mod rng;
pub mod traits;
pub mod wrappers;

pub use error::{EnvError, Result};
pub use traits::{MultiAgentEnv, MultiStep, Snapshot, TaskParam, TaskParams};

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<crate::classic::Pendulum>();
        has_autotraits::<crate::classic::CartPole>();
        has_autotraits::<crate::classic::MountainCarContinuous>();
        has_autotraits::<crate::wrappers::VecEnv<crate::classic::Pendulum>>();
        has_autotraits::<crate::EnvError>();
        has_autotraits::<crate::rng::NumpyRng>();
    }
}
