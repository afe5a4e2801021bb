//! # lare
//!
//! Credit assignment for episodic rewards: LaRe ("Latent Reward: LLM-Empowered Credit
//! Assignment in Episodic Reinforcement Learning", Qu et al., AAAI 2025, arXiv 2412.11120;
//! reference code `thu-rllab/LaRe`) and the return-decomposition baselines it is compared with.
//!
//! With only an episodic reward `R_ep = Σ_t r_t` given at the end of an episode, a learner must
//! guess which steps earned it. A [`RewardRedistributor`] turns the episodic return into
//! per-step rewards:
//!
//! - [`Decomposition`] trains a [`RewardDecoder`] `f_ψ` so that the per-step predictions of an
//!   episode add up to its return ([`DecompositionLoss`]: RD sum regression, RRD biased and
//!   unbiased with K-step subsampling). Over raw features `[s, a, s − s']`
//!   ([`RawEncoder`]) it is RD/RRD; over the latent factors `φ(s, a)` of an encoder written by
//!   an LLM (or by hand) it is LaRe.
//! - [`Ircr`]: uniform redistribution `R/T`, min-max normalised, with a heap of the best
//!   episodes; [`EpisodicBaseline`] (the raw episodic reward), [`DenseOracle`] (the hidden dense
//!   reward, for reference curves) and [`DirectReward`] (LaRe's direct-reward ablation).
//! - [`AgentCreditDecoder`]: agent-level credit for cooperative multi-agent tasks with one
//!   decoder shared by every agent or one per agent type ([`AgentTypes`], all in one
//!   optimiser), trained by sum regression or multi-agent RRD with a shared K-step draw
//!   ([`CreditDraw`]).
//!
//! Latent reward encoders ([`LatentEncoder`]) are Rust closures ([`NativeEncoder`]) or
//! sandboxed [Rhai](https://rhai.rs) scripts ([`ScriptEncoder`]: operation, time, stack, memory and
//! depth limits, no I/O, no clock; the script sees the observation as named fields). The [`llm`] module
//! generates them: an OpenAI-compatible chat client, LaRe's prompt structure, `n` candidates
//! and a summarising call, verification on sampled states with bounded repair rounds, and a
//! content-addressed response cache so every run replays offline.
//!
//! ```
//! use lare::{store_episode, DecoderParams, Decomposition, EpisodeBuffer, EpisodeBuilder,
//!            NativeEncoder, RewardRedistributor};
//! use rl_core::Params;
//! // a hand-written one-factor encoder and LaRe's decoder over it
//! let enc = NativeEncoder::new(1, "x", |obs, _act, _next, out| out[0] = obs[0])?;
//! let params = DecoderParams::default().hidden([16]).rrd_k(4).batch_size(8).check()?;
//! let mut lare = Decomposition::new("lare", Box::new(enc), params, tch::Device::Cpu)?;
//! let mut buffer = EpisodeBuffer::new(1, 1, lare.feature_dim(), 10_000)?;
//! let mut ep = EpisodeBuilder::new(1, 1);
//! for t in 0..8 {
//!     let x = ndarray::array![t as f32 / 8.0];
//!     ep.push(x.view(), ndarray::array![0.0].view(), x.view(), x[0])?;
//! }
//! store_episode(&mut buffer, &mut lare, ep.finish(3.5, false)?)?;
//! let metrics = lare.update(&buffer)?;                  // one decoder step
//! let batch = buffer.sample_steps(4, &mut rl_core::rng_from_seed(0))?;
//! let rewards = lare.relabel(&batch)?;                  // per-step proxy rewards
//! assert_eq!(rewards.len(), 4);
//! assert!(metrics.get("reward_model/loss").is_some());
//! # Ok::<(), lare::LareError>(())
//! ```
//!
//! Guide and results: `docs/lare.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod credit;
pub mod decoder;
pub mod encoder;
pub mod episode;
pub mod error;
pub mod llm;
pub mod redistribute;
pub mod script;
pub mod train;

pub use credit::{
    AgentCreditDecoder, AgentTypes, CreditDraw, CreditLoss, CreditParams, MultiEpisode, MultiEpisodeBuffer, TeamTarget,
};
pub use decoder::{DecoderParams, DecompositionLoss, RewardDecoder};
pub use encoder::{Field, LatentEncoder, Layout, NativeEncoder, RawEncoder, RawFeatures, StateSource};
pub use episode::{Episode, EpisodeBuffer, EpisodeBuilder, StepBatch, StoredEpisode};
pub use error::{LareError, Result, SandboxLimit, ScriptErrorKind};
pub use redistribute::{
    store_episode, Decomposition, DenseOracle, DirectReward, EpisodicBaseline, Ircr, IrcrParams, RewardRedistributor,
};
pub use script::{SandboxLimits, ScriptEncoder, ScriptSpec};

#[cfg(test)]
mod autotraits {
    fn has_send_sync<T: Send + Sync>() {}
    fn has_send<T: Send>() {}

    #[test]
    fn public_types_are_send() {
        has_send_sync::<super::ScriptEncoder>();
        has_send_sync::<super::NativeEncoder>();
        has_send_sync::<super::EpisodeBuffer>();
        has_send_sync::<super::LareError>();
        has_send::<super::Decomposition>();
        has_send::<super::AgentCreditDecoder>();
    }
}
