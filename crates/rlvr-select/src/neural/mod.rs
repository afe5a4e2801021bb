//! Neural selectors (feature `neural`, links libtorch through `tch`): learned difficulty and
//! risk predictors that generalise across prompts/tasks through their features.
//!
//! | selector | predicts | from | acquisition | paper |
//! |---|---|---|---|---|
//! | [`Gps`] | success rate `γ̂` | prompt embedding + latent policy context | greedy: `−(γ̂−½)²` + intra-batch + inter-step diversity | GPS, arXiv 2602.01970 |
//! | [`Mpts`] | adaptation risk | task identifier + latent | top-`B` UCB `γ0·mean + γ1·std` over `M` draws | MPTS, arXiv 2501.11039 |
//! | [`Pdts`] | adaptation risk | task identifier + latent | one posterior draw + greedy max-sum diversification | PDTS, arXiv 2504.19139 |
//!
//! [`RiskLearner`] (the neural process of MPTS/PDTS) is usable on its own. All randomness
//! (weight init, latent draws) comes from Rust generators, so every selector saves and restores
//! its exact state — weights and Adam moments included — through [`crate::Selector::save_state`].
//!
//! The robust baselines [`crate::Drm`] and [`crate::Gdrm`] and the greedy solver
//! [`crate::diversity`] need no libtorch and live outside this module.
//!
//! Every parameter set ([`GpsParams`], [`MptsParams`], [`PdtsParams`], [`RiskLearnerParams`],
//! [`AllocationParams`]) follows `docs/conventions.md`: `#[serde(default, deny_unknown_fields)]`,
//! `#[must_use]` setters, and [`rl_core::Params::check`] into the `Valid<_>` the constructors
//! take.
//!
//! ## MPTS and PDTS
//!
//! [`Mpts`] and [`Pdts`] wrap the same [`RiskLearner`] and differ only in how they pick; the rest
//! is shared:
//!
//! - **Features.** Candidates carry their task identifiers ([`crate::Candidates::with_features`]),
//!   or a table is attached (`with_feature_table`, not part of the saved state); outcomes may
//!   omit them (the features of the latest selection are remembered).
//! - **Outcomes.** The risk of an outcome is [`crate::Outcome::risk`], or `risk_from_rewards` of
//!   its success rate ([`RiskFromRewards`]); `observe` runs one streaming-VI update of the learner.
//! - **Batch.** Steps `< warmup_steps` pick uniformly; afterwards `round(random_ratio · B)` of the
//!   batch is drawn uniformly from the candidates the model did not pick.
//! - **Predictions.** [`crate::Selector::predict`] returns the predicted *risk* in
//!   [`crate::Prediction::mean`] and its std over latent draws, from a generator derived from the
//!   seed and the update count (no RNG argument, no state change).
//! - **Errors.** Missing or mis-sized features ([`crate::SelectError::Features`]), the common input
//!   errors, libtorch failures ([`crate::SelectError::Nn`]); the state is unchanged on error.
//! - **State.** `save_state` holds the parameters and the learner (weights, Adam moments, prior,
//!   last batch) and remembered features; `load_state` checks the parameters, requires the
//!   learner's to equal `params.learner`, and rebuilds through [`RiskLearner::from_state`].
//!
//! Tensors hold `tch::Tensor`s, which are `Send` but not `Sync`: the neural selectors are `Send`.
//!
//! Guide: `docs/rlvr-select-neural.md`.

mod features;
mod gps;
mod learner;
mod mpts;
mod nn;
mod pdts;
mod risk;

pub use gps::{Allocation, AllocationParams, Gps, GpsParams};
pub use learner::{Reduction, RiskLearner, RiskLearnerParams, RiskLearnerState};
pub use mpts::{Mpts, MptsParams};
pub use nn::{AdamState, TensorData};
pub use pdts::{Pdts, PdtsDiversity, PdtsParams};
pub use risk::RiskFromRewards;

impl From<tch::TchError> for crate::SelectError {
    fn from(e: tch::TchError) -> Self {
        crate::SelectError::Nn(rl_nn::RlNnError::from(e))
    }
}
