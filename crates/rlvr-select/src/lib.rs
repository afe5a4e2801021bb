//! # rlvr-select
//!
//! Online prompt (task) selection for RL with verifiable rewards: which prompts to roll out at
//! each training step so that fewer rollouts are wasted on groups that are all right or all
//! wrong (zero group-relative advantage).
//!
//! Every method implements one object-safe trait, [`Selector`]: the trainer calls
//! [`Selector::select`] before the rollouts of a step and [`Selector::observe`] after the
//! rewards (also with no outcomes: DPS propagates its beliefs every step).
//!
//! | selector | idea | rollouts spent in selection | state per prompt |
//! |---|---|---|---|
//! | [`Uniform`] | `B` uniformly without replacement | none | none |
//! | [`HistoryResampling`] | skip prompts solved earlier in the epoch | none | solved set |
//! | [`DynamicSampling`] | DAPO: roll out, keep groups with reward variance | yes (prefetched for training) | none |
//! | [`OnlineDifficultyFilter`] | roll out, keep pass rates in a band | yes (prefetched) | none |
//! | [`Mopps`] | discounted Beta posterior, Thompson draw closest to the target rate | none | 12 bytes |
//! | [`Dps`] | 3-state HMM over the solving state, top-`B` by `P(partial)` | none | 57 bytes |
//! | `neural::Gps` | shared generative model: `γ̂` from embedding + latent, intermediate difficulty + diversity | none | none (shared model) |
//! | `neural::Mpts` | neural-process risk learner, top-`B` UCB over latent draws | none | none (shared model) |
//! | `neural::Pdts` | same learner, one posterior draw + greedy max-sum diversification | none | none (shared model) |
//! | [`Drm`] | evaluate every candidate, keep the `B` riskiest (CVaR) | yes (all candidates) | none |
//! | [`Gdrm`] | first `B`, exponentiated group-DRO loss weights | none | one weight per batch slot |
//!
//! Around the trait: [`CandidateSource`]s build each step's candidate set ([`EpochWindow`] of
//! `r·B`, [`WholePool`], [`FreshDraws`] from a continuous task box); a [`RolloutOracle`] counts
//! every rollout a selector spends and lets rollout-based selectors hand their groups to the
//! trainer ([`Selection::prefetched`]); [`Diagnostics`] accumulates the effective-sample ratio,
//! rollouts in selection vs training, predicted-vs-realised correlations, the DPS confusion
//! matrix and the selection-count spread; [`sim`] is a synthetic prompt pool with known
//! difficulty dynamics (skill curves or a ground-truth HMM) and a training-loop runner.
//!
//! ```
//! use rl_core::Params;
//! use rlvr_select::sim::{PromptPoolSim, SimParams};
//! use rlvr_select::{CandidateSource, Dps, DpsParams, EpochWindow, Selector};
//!
//! let mut rng = rl_core::rng_from_seed(7);
//! let mut sim = PromptPoolSim::new(SimParams::default().check()?, 7)?;
//! let mut dps = Dps::new(DpsParams::default().check()?, sim.n_prompts())?;
//! let mut source = EpochWindow::new(sim.n_prompts(), 4)?;
//! for step in 0..5 {
//!     let candidates = source.next_candidates(32, &mut rng)?;
//!     let selection = dps.select(step, candidates, 32, &mut sim, &mut rng)?;
//!     let outcomes = sim.rollout_for_training(&selection.ids, &mut rng)?; // the trainer's rollouts
//!     sim.train(&outcomes, &mut rng)?;
//!     dps.observe(step, &outcomes, &mut rng)?;
//! }
//! # Ok::<(), rlvr_select::SelectError>(())
//! ```
//!
//! Features: `neural` (default) adds `neural`: GPS, MPTS and PDTS, learned difficulty/risk
//! predictors over prompt embeddings or task identifiers (libtorch through `tch`/`rl-nn`; a
//! binary using them needs the `build.rs` of `rl-nn`'s docs). `--no-default-features` builds the
//! rest of the crate without libtorch, including the robust baselines [`Drm`] and [`Gdrm`], the
//! greedy max-sum diversification of [`diversity`] and the hashed n-gram text [`embed`]ding.
//!
//! Guide: `docs/rlvr-select.md`; speed: `docs/benchmarks.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod baselines;
pub mod diagnostics;
pub mod diversity;
mod dps;
pub mod embed;
mod error;
mod filter;
mod mopps;
#[cfg(feature = "neural")]
pub mod neural;
mod oracle;
mod robust;
pub mod sim;
mod source;
mod types;

pub use baselines::{HistoryResampling, HistoryResamplingParams, Uniform};
pub use diagnostics::{Diagnostics, DiagnosticsSummary, StepDiagnostics};
pub use dps::{Dps, DpsParams, DpsPrior, InitialBelief};
pub use error::{Result, SelectError};
pub use filter::{DynamicSampling, FilterParams, OnlineDifficultyFilter};
pub use mopps::{Mopps, MoppsAcquisition, MoppsParams};
pub use oracle::{BudgetedOracle, FnOracle, NoRollouts, RolloutOracle};
pub use robust::{Drm, DrmParams, Gdrm, GdrmParams, RiskFromRewards};
pub use source::{CandidateSource, EpochWindow, FreshDraws, WholePool};
pub use types::{Candidates, ItemId, Outcome, Prediction, Selection, Shortfall, SolveState};

use rand::RngCore;

/// A prompt/task selector. Object safe: runs hold `Box<dyn Selector>`.
///
/// Protocol per training step `t`: build candidates (a [`CandidateSource`]), call
/// [`select`](Selector::select) *before* the rollouts, roll out the selected prompts that were
/// not [prefetched](Selection::prefetched), train, then call [`observe`](Selector::observe)
/// with the groups trained on, every step, possibly with an empty slice.
///
/// Every method validates its input before touching state: on error the selector is exactly
/// as before the call. State round-trips exactly through [`save_state`](Selector::save_state) /
/// [`load_state`](Selector::load_state): a selector restored from a saved state and driven with
/// an RNG in the same state produces the same outputs as the original.
pub trait Selector: std::fmt::Debug {
    /// A short, stable name (`"dps"`, `"mopps"`, ...).
    fn name(&self) -> &'static str;

    /// Chooses at most `batch_size` prompts among `candidates` (exactly `batch_size` unless
    /// [`Selection::shortfall`] is set, which only rollout-based selectors do). Predictive
    /// selectors never call `oracle`; rollout-based ones spend rollouts through it and return
    /// the kept groups as [`Selection::prefetched`].
    ///
    /// # Errors
    /// [`SelectError::ZeroBatch`], [`SelectError::BatchTooLarge`],
    /// [`SelectError::DuplicateId`], [`SelectError::UnknownId`] (selectors with per-prompt
    /// state), oracle errors.
    fn select(
        &mut self,
        step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection>;

    /// Feeds back the groups trained on at `step` (all of one group size). An empty slice is
    /// legal and still advances per-step dynamics (DPS belief propagation).
    ///
    /// # Errors
    /// [`SelectError::DuplicateId`], [`SelectError::UnknownId`], [`SelectError::EmptyGroup`],
    /// [`SelectError::GroupSizeMismatch`], [`SelectError::NonFiniteReward`],
    /// [`SelectError::RewardOutOfRange`].
    fn observe(&mut self, step: u64, outcomes: &[Outcome], rng: &mut dyn RngCore) -> Result<()>;

    /// Model predictions for `candidates` (success rate, and DPS class probabilities), or
    /// `None` for selectors without a model.
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    fn predict(&self, candidates: Candidates<'_>) -> Result<Option<Vec<Prediction>>> {
        let _ = candidates;
        Ok(None)
    }

    /// The exact state (parameters included) as JSON.
    ///
    /// # Errors
    /// Serialisation failure.
    fn save_state(&self) -> Result<serde_json::Value>;

    /// Restores a state produced by [`save_state`](Selector::save_state) of the same type.
    ///
    /// # Errors
    /// [`SelectError::Json`] or [`SelectError::InvalidState`]; the selector is unchanged then.
    fn load_state(&mut self, state: &serde_json::Value) -> Result<()>;
}

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<super::Dps>();
        has_autotraits::<super::Mopps>();
        has_autotraits::<super::Uniform>();
        has_autotraits::<super::HistoryResampling>();
        has_autotraits::<super::DynamicSampling>();
        has_autotraits::<super::OnlineDifficultyFilter>();
        has_autotraits::<super::Selection>();
        has_autotraits::<super::Diagnostics>();
        has_autotraits::<super::sim::PromptPoolSim>();
        has_autotraits::<super::SelectError>();
    }
}
