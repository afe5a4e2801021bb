//! # rl-core
//!
//! The libtorch-free foundations of [frugal-rl](https://example.invalid/frugal-rl): what every
//! other crate of the workspace shares and what a user can build on without linking libtorch.
//!
//! - [`Env`] and [`Policy`]: the environment and policy traits (Gymnasium semantics, object
//!   safe), with [`Space`] for observation and action spaces (always valid; matched through
//!   [`Space::kind`]) and [`rollout_episode`].
//! - [`Transitions`]: column batches of transitions (obs, action, reward, next_obs, terminal,
//!   timeout) with validation, sampling and returns-to-go.
//! - [`EpisodeStats`] / [`EpisodeSummary`]: episode returns and lengths.
//! - [`Metrics`], [`MetricsSink`], [`JsonlSink`]: named scalars logged as JSON lines.
//! - [`Params`] / [`Valid`]: the one validation shape of every parameter set.
//! - [`seed`]: reproducible, serialisable generators and derived streams.
//! - [`stats`]: running mean/std, quantiles, CVaR, Pearson/Spearman.
//! - [`MemoryBudget`]: the size limit every reader of untrusted input checks before allocating.
//! - [`de`]: config deserialisation that drops no key and names every error by its dotted path.
//! - [`RlCoreError`]: the one error type; nothing here panics on caller input.
//!
//! ```
//! use rl_core::stats::{cvar_upper, quantile};
//! let losses = [0.1, 0.4, 0.2, 0.9, 0.3];
//! assert_eq!(quantile(&losses, 0.5)?, 0.3);
//! assert_eq!(cvar_upper(&losses, 0.8)?, 0.9); // the worst 20%
//! # Ok::<(), rl_core::RlCoreError>(())
//! ```
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod batch;
pub mod budget;
pub mod check;
pub mod de;
pub mod env;
pub mod episode;
pub mod error;
pub mod metrics;
pub mod params;
pub mod seed;
pub mod space;
pub mod stats;

pub use batch::{TransitionColumns, Transitions};
pub use budget::MemoryBudget;
pub use env::{rollout_episode, ActMode, Env, Info, InfoValue, Policy, RandomPolicy, Step};
pub use episode::{EpisodeStats, EpisodeSummary};
pub use error::{check_finite, check_finite_f64, Result, RlCoreError};
pub use metrics::{JsonlSink, MemorySink, Metrics, MetricsSink};
pub use params::{Params, Valid};
pub use seed::{derive_seed, derive_seed_named, rng_from_seed, SeededRng};
pub use space::{Space, SpaceKind};

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<super::Transitions>();
        has_autotraits::<super::Space>();
        has_autotraits::<super::Metrics>();
        has_autotraits::<super::RlCoreError>();
        has_autotraits::<super::stats::RunningMeanStd>();
        has_autotraits::<super::SeededRng>();
        has_autotraits::<super::JsonlSink>();
    }
}
