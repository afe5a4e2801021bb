//! # rlvr-core
//!
//! Group-based RLVR (reinforcement learning with verifiable rewards) losses on libtorch, for
//! [frugal-rl](https://example.invalid/frugal-rl): the loss catalogue of verl, TRL, OpenRLHF
//! and AReaL, plus LPO's listwise target-projection (Qu et al., arXiv 2605.06139) and POPO's
//! decoupled off-policy correction (Mao et al., arXiv 2606.01281).
//!
//! - [`advantage`]: outcome-reward advantage estimators (GRPO, Dr.GRPO, RLOO, REINFORCE++,
//!   REINFORCE++-baseline, MaxRL, pass@k, OPO, batch-std scaling), tch-free, with group
//!   effectiveness ([`GroupKind`], [`EffectivenessRule`]).
//! - [`LossInputs`]: one `[B, T]` batch (current, proximal, behaviour, reference log-probs,
//!   advantages, response mask, entropy, [`Groups`]).
//! - [`GlobalCounts`] + [`Aggregation`]: token-mean, seq-mean-token-sum, seq-mean-token-mean,
//!   seq-mean-token-sum-norm, normalised by whole-batch counts so that micro-batch losses sum
//!   to the full-batch loss.
//! - [`PolicyLoss`]: PPO (asymmetric clip, dual clip, ratio cap), GSPO, CISPO, SAPO,
//!   REINFORCE/GPG, GMPO, [`lpo`] (forward KL, reverse KL, pointwise).
//! - [`KlParams`] (k1, abs, k2, k3 and straight-through variants), [`entropy_from_logits`],
//!   [`token_log_probs`].
//! - [`correction`]: the decoupled behaviour weight `π_prox/π_b` (token or sequence level,
//!   truncate or mask), exactly 1 on on-policy data, composing with every loss.
//! - [`LossParams`] → [`LossConfig`] → [`LossConfig::loss`] → [`LossOutput`] (`loss` tensor +
//!   [`LossMetrics`], convertible to [`rl_core::Metrics`]).
//!
//! ```
//! use rlvr_core::{AdvantageParams, Groups, GlobalCounts, LossInputs, LossParams, PolicyLoss, PpoParams};
//! use tch::{Device, Kind, Tensor};
//!
//! // 2 prompts x 4 responses, binary rewards -> GRPO advantages
//! let groups = Groups::uniform(2, 4)?;
//! let adv = AdvantageParams::default().check()?.compute(&[1., 0., 0., 1., 0., 0., 0., 1.], &groups, None)?;
//!
//! // token log-probs [8, 5] of the current and the proximal policy, response mask
//! let old = Tensor::randn([8, 5], (Kind::Float, Device::Cpu)) - 2.0;
//! let logp = (&old + 0.01).set_requires_grad(true);
//! let mask = Tensor::ones([8, 5], (Kind::Bool, Device::Cpu));
//! let counts = GlobalCounts::local(&mask)?;
//!
//! let cfg = LossParams::new(PolicyLoss::Ppo(PpoParams::dapo())).check()?;
//! let out = cfg.loss(&LossInputs::new(&logp, &old, &adv.to_tensor(Device::Cpu), &mask), &counts)?;
//! out.loss.backward();
//! assert!(out.metrics.clipfrac.is_some());
//! let metrics: rl_core::Metrics = (&out.metrics).into();
//! assert!(metrics.get("ppo_kl").is_some());
//! # Ok::<(), rlvr_core::RlvrCoreError>(())
//! ```
//!
//! ## Off-policy (replayed) groups
//!
//! Pass the behaviour log-probs stored with a replayed group and enable the correction; fresh
//! groups may pass their proximal log-probs as behaviour (weight exactly 1) or nothing:
//!
//! ```
//! use rlvr_core::{DecoupledParams, GlobalCounts, LossInputs, LossParams, PolicyLoss};
//! use tch::{Device, Kind, Tensor};
//! let old = Tensor::randn([4, 6], (Kind::Float, Device::Cpu)) - 2.0;
//! let behave = &old + 0.05 * Tensor::randn([4, 6], (Kind::Float, Device::Cpu));
//! let logp = old.copy().set_requires_grad(true);
//! let adv = Tensor::from_slice(&[1.0f32, -1.0, 0.5, -0.5]);
//! let mask = Tensor::ones([4, 6], (Kind::Float, Device::Cpu));
//! let cfg = LossParams::default().correction(Some(DecoupledParams::default())).check()?;
//! let inputs = LossInputs::new(&logp, &old, &adv, &mask).behaviour(&behave);
//! let out = cfg.loss(&inputs, &GlobalCounts::local(&mask)?)?;
//! assert!(out.metrics.is_weight_mean.is_some());
//! # Ok::<(), rlvr_core::RlvrCoreError>(())
//! ```
//!
//! ## Linking
//!
//! Like every crate of the workspace that links libtorch, binaries using this crate need a
//! direct `torch-sys` dependency and the rpath `build.rs` described in `rl-nn`'s docs.
//!
//! ## References
//! - Qu et al., *Listwise Policy Optimization: Group-based RLVR as Target-Projection on the LLM
//!   Response Simplex*, arXiv 2605.06139.
//! - Mao et al., *RLVR without Ineffective Samples: Group Prioritized Off-Policy Optimization
//!   for LLM Reasoning*, arXiv 2606.01281.
//! - verl `verl/trainer/ppo/core_algos.py`; TRL `trl/trainer/grpo_trainer.py`; OpenRLHF
//!   `openrlhf/models/loss.py`; AReaL `areal/utils/functional/functional.py`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod advantage;
pub mod aggregate;
pub mod correction;
pub mod error;
pub mod groups;
pub mod inputs;
pub mod kl;
pub mod loss;
pub mod lpo;
pub mod policy;

pub use advantage::{AdvantageConfig, AdvantageEstimator, AdvantageParams, Advantages, SingletonGroups, StdKind};
pub use aggregate::{Aggregation, GlobalCounts};
pub use correction::{behaviour_weights, DecoupledParams, IsLevel, IsMode, IsWeights};
pub use error::{Result, RlvrCoreError};
pub use groups::{group_stats, EffectivenessRule, GroupKind, GroupStats, Groups};
pub use inputs::{check_finite, LossInputs};
pub use kl::{entropy_from_logits, kl_penalty, token_log_probs, KlEstimator, KlParams};
pub use loss::{LossConfig, LossMetrics, LossOutput, LossParams};
pub use lpo::{lpo_coefficients, LpoCoefficients, LpoParams, Projection};
pub use policy::{CispoParams, GmpoParams, GspoParams, PolicyLoss, PpoParams, SapoParams};

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<super::LossParams>();
        has_autotraits::<super::LossConfig>();
        has_autotraits::<super::AdvantageParams>();
        has_autotraits::<super::Groups>();
        has_autotraits::<super::GlobalCounts>();
        has_autotraits::<super::LossMetrics>();
        has_autotraits::<super::RlvrCoreError>();
    }
}
