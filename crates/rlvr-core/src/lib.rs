//! # rlvr-core
//!
//! Group-based RLVR (reinforcement learning with verifiable rewards) losses for
//! [frugal-rl](https://example.invalid/frugal-rl): the loss catalogue of verl, TRL, OpenRLHF
//! and AReaL, plus LPO's listwise target-projection (Qu et al., arXiv 2605.06139) and POPO's
//! decoupled off-policy correction (Mao et al., arXiv 2606.01281).
//!
//! **Without libtorch** (`default-features = false`) the crate is pure arithmetic:
//! - [`advantage`]: outcome-reward advantage estimators (GRPO, Dr.GRPO, RLOO, REINFORCE++,
//!   REINFORCE++-baseline, MaxRL, pass@k, OPO, batch-std scaling, ReMax, GPG) with the group
//!   [`Verdict`]s of an [`EffectivenessRule`] (by outcome by default; [`effectiveness`]);
//! - [`token`]: GAE with a value head, REINFORCE++ with γ ≠ 1 (returns and advantages),
//!   ReMax returns, verl's `masked_whiten`; [`KlController`] (fixed or adaptive KL coefficient);
//! - [`Groups`], [`stats`] (mean/std, finiteness), [`lpo_coefficients`], [`kl_token`];
//! - every params type ([`LossParams`], [`PolicyLoss`], [`Aggregation`], [`KlParams`],
//!   [`DecoupledParams`], [`AdvantageParams`], ...), checked through [`rl_core::Params`].
//!
//! **With the default feature `tch`** come the losses on tensors:
//! - `LossInputs`: one `[B, T]` batch (current, proximal, behaviour, reference log-probs,
//!   advantages, response mask, entropy, [`Groups`]);
//! - [`GlobalCounts`] + [`Aggregation`]: token-mean, seq-mean-token-sum, seq-mean-token-mean,
//!   seq-mean-token-sum-norm, normalised by whole-batch counts so that micro-batch losses sum
//!   to the full-batch loss;
//! - [`PolicyLoss`]: PPO (asymmetric clip, dual clip, ratio cap), GSPO, CISPO, SAPO,
//!   REINFORCE/GPG, GMPO, Clip-Cov, KL-Cov, [`lpo`] (forward KL, reverse KL, pointwise);
//! - KL estimators (k1, abs, k2, k3 and straight-through variants), `entropy_from_logits`,
//!   `token_log_probs`;
//! - [`correction`]: the decoupled behaviour weight `π_prox/π_b` (token or sequence level,
//!   truncate or mask), exactly 1 on on-policy data, composing with every loss;
//! - [`LossParams`] → `check()` → [`LossConfig`] → `LossConfig::loss` → `LossOutput` (`loss`
//!   tensor + [`LossMetrics`], convertible to [`rl_core::Metrics`]); CPU `f32` batches go through
//!   the fused kernels, everything else through libtorch ops;
//! - `value_loss`: the clipped value loss of a value head (with [`token::gae`]).
//!
//! ```
//! # #[cfg(feature = "tch")] {
//! use rlvr_core::{AdvantageConfig, AdvantageParams, Groups, GlobalCounts, LossConfig, LossInputs, LossParams};
//! use rlvr_core::{Params, PolicyLoss, PpoParams};
//! use tch::{Device, Kind, Tensor};
//!
//! // 2 prompts x 4 responses, binary rewards -> GRPO advantages
//! let groups = Groups::uniform(2, 4)?;
//! let adv = AdvantageConfig::new(AdvantageParams::default().check()?)
//!     .compute(&[1., 0., 0., 1., 0., 0., 0., 1.], &groups, None)?;
//!
//! // token log-probs [8, 5] of the current and the proximal policy, response mask
//! let old = Tensor::from_slice(&[-2.0f32; 40]).view([8, 5]);
//! let logp = (&old + 0.01).set_requires_grad(true);
//! let mask = Tensor::ones([8, 5], (Kind::Bool, Device::Cpu));
//! let counts = GlobalCounts::local(&mask)?;
//!
//! let cfg = LossConfig::new(LossParams::new(PolicyLoss::Ppo(PpoParams::dapo())).check()?);
//! let out = cfg.loss(&LossInputs::new(&logp, &old, &adv.to_tensor(Device::Cpu)?, &mask), &counts)?;
//! out.loss.backward();
//! assert!(out.metrics.clipfrac.is_some());
//! let metrics: rl_core::Metrics = (&out.metrics).into();
//! assert!(metrics.get("ppo_kl").is_some());
//! # }
//! # Ok::<(), rlvr_core::RlvrCoreError>(())
//! ```
//!
//! ## Off-policy (replayed) groups
//!
//! Pass the behaviour log-probs stored with a replayed group and enable the correction; fresh
//! groups may pass their proximal log-probs as behaviour (weight exactly 1) or nothing:
//!
//! ```
//! # #[cfg(feature = "tch")] {
//! use rlvr_core::{DecoupledParams, GlobalCounts, LossConfig, LossInputs, LossParams, Params};
//! use tch::{Device, Kind, Tensor};
//! let old = Tensor::from_slice(&[-2.0f32; 24]).view([4, 6]);
//! let behave = &old + 0.05;
//! let logp = old.copy().set_requires_grad(true);
//! let adv = Tensor::from_slice(&[1.0f32, -1.0, 0.5, -0.5]);
//! let mask = Tensor::ones([4, 6], (Kind::Float, Device::Cpu));
//! let cfg = LossConfig::new(LossParams::default().correction(Some(DecoupledParams::default())).check()?);
//! let inputs = LossInputs::new(&logp, &old, &adv, &mask).behaviour(&behave);
//! let out = cfg.loss(&inputs, &GlobalCounts::local(&mask)?)?;
//! assert!(out.metrics.is_weight_mean.is_some());
//! # }
//! # Ok::<(), rlvr_core::RlvrCoreError>(())
//! ```
//!
//! ## Linking
//!
//! With feature `tch`, like every crate of the workspace that links libtorch, binaries using
//! this crate need a direct `torch-sys` dependency and the rpath `build.rs` described in
//! `docs/setup.md`. Without it nothing links libtorch (`cargo tree -p rlvr-core
//! --no-default-features` shows no `tch`).
//!
//! ## References
//! - Qu et al., *Listwise Policy Optimization: Group-based RLVR as Target-Projection on the LLM
//!   Response Simplex*, arXiv 2605.06139.
//! - Mao et al., *RLVR without Ineffective Samples: Group Prioritized Off-Policy Optimization
//!   for LLM Reasoning*, arXiv 2606.01281.
//! - verl `verl/trainer/ppo/core_algos.py`; TRL `trl/trainer/grpo_trainer.py`; OpenRLHF
//!   `openrlhf/models/loss.py`; AReaL `areal/utils/functional/functional.py`.
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod advantage;
pub mod aggregate;
pub mod correction;
#[cfg_attr(not(feature = "tch"), allow(dead_code))]
mod cov;
pub mod effectiveness;
pub mod error;
#[cfg_attr(not(feature = "tch"), allow(dead_code))]
mod fused;
#[cfg(feature = "tch")]
mod fused_tch;
pub mod groups;
#[cfg(feature = "tch")]
pub mod inputs;
pub mod kl;
pub mod kl_control;
pub mod loss;
pub mod lpo;
pub mod policy;
pub mod stats;
pub mod token;
#[cfg(feature = "tch")]
mod torch_loss;
#[cfg(feature = "tch")]
pub mod value;

pub use advantage::{
    AdvantageConfig, AdvantageEstimator, AdvantageInputs, AdvantageParams, Advantages, SingletonGroups, StdKind,
};
pub use aggregate::{Aggregation, Compat, GlobalCounts};
#[cfg(feature = "tch")]
pub use correction::{behaviour_weights, IsWeights};
pub use correction::{DecoupledParams, IsLevel, IsMode};
pub use effectiveness::{EffectivenessRule, IneffectiveReason, ReasonCounts, Verdict};
pub use error::{Result, RlvrCoreError};
pub use groups::{group_stats, GroupStats, Groups};
#[cfg(feature = "tch")]
pub use inputs::{check_finite, LossInputs};
#[cfg(feature = "tch")]
pub use kl::{entropy_from_logits, kl_penalty, token_log_probs};
pub use kl::{kl_token, KlEstimator, KlParams};
pub use kl_control::{KlControlKind, KlControlParams, KlController};
pub use loss::{LossConfig, LossMetrics, LossParams};
pub use lpo::{lpo_coefficients, LpoCoefficients, LpoParams, Projection};
pub use policy::{CispoParams, ClipCovParams, GmpoParams, GspoParams, KlCovParams, PolicyLoss, PpoParams, SapoParams};
/// The parameter convention of every params type here (`check()` → [`rl_core::Valid`]).
pub use rl_core::{Params, Valid};
#[cfg(feature = "tch")]
pub use torch_loss::LossOutput;
#[cfg(feature = "tch")]
pub use value::{value_loss, ValueLossOutput, ValueLossParams};

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<super::LossParams>();
        has_autotraits::<super::LossConfig>();
        has_autotraits::<super::AdvantageParams>();
        has_autotraits::<super::AdvantageConfig>();
        has_autotraits::<super::Groups>();
        has_autotraits::<super::GlobalCounts>();
        has_autotraits::<super::LossMetrics>();
        has_autotraits::<super::EffectivenessRule>();
        has_autotraits::<super::RlvrCoreError>();
    }
}
