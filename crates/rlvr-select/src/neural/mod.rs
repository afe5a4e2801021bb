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

impl From<tch::TchError> for crate::SelectError {
    fn from(e: tch::TchError) -> Self {
        crate::SelectError::Nn(rl_nn::RlNnError::from(e))
    }
}
