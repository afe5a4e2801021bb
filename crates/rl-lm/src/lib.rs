//! # rl-lm
//!
//! A small decoder-only transformer policy on libtorch ([`tch`] 0.24, PyTorch 2.11.0) for
//! RLVR (reinforcement learning with verifiable rewards) runs that fit on a CPU:
//!
//! - [`TransformerLm`]: token + learned position embeddings, pre-LayerNorm blocks (causal
//!   multi-head self-attention, GELU MLP), final LayerNorm, tied or untied LM head
//!   ([`LmConfig`]). Runs on any device (pass [`rl_nn::default_device`] for CUDA when present).
//! - [`TransformerLm::generate`]: batched sampling of `B` left-padded prompts with a
//!   [`KvCache`], temperature, top-p or greedy, a stop token and `max_new_tokens`
//!   ([`SamplingParams`]); returns the tokens, the **behaviour log-probs** and the response mask
//!   ([`Generation`]).
//! - [`TransformerLm::response_logprobs`]: the training-mode forward: per-token log-probs (and
//!   entropies) of the response tokens of a [`SequenceBatch`], with gradient, `[B, R]`: what the
//!   `rlvr-core` losses consume.
//! - Checkpoints: [`TransformerLm::save`] / [`load`](TransformerLm::load) (safetensors through
//!   [`rl_nn::checkpoint`]), [`load_weights`](TransformerLm::load_weights) by name with a prefix
//!   and typed errors on any mismatch, [`save_pretrained`](TransformerLm::save_pretrained) /
//!   [`from_pretrained`](TransformerLm::from_pretrained) (config + weights).
//!
//! ```
//! use rl_lm::{LmConfig, LogProbOptions, SamplingParams, TransformerLm};
//! let cfg = LmConfig::new(24, 64).d_model(32).n_layers(2).n_heads(4).d_ff(64);
//! let lm = TransformerLm::new(&cfg, rl_nn::default_device()?, &mut rl_core::rng_from_seed(0))?;
//! let mut rng = rl_core::rng_from_seed(0);
//! // Two prompts of different lengths, up to 16 new tokens, stop at id 2.
//! let params = SamplingParams::new(16).temperature(1.0).top_p(1.0).stop_token(Some(2));
//! let out = lm.generate(&[vec![1, 7, 8, 9], vec![1, 4]], &params, &mut rng)?;
//! let behaviour = &out.logprobs; // [2, R], 0 past each row's stop token
//! // Later, for the loss: log-probs of the same tokens under the current weights, with grad.
//! let cur = lm.response_logprobs(&out.batch, &LogProbOptions::default().with_entropy())?;
//! let ratio = (cur.logprobs - behaviour).exp(); // all ones before any update
//! assert_eq!(ratio.size(), out.batch.response_mask.size());
//! # Ok::<(), rl_lm::LmError>(())
//! ```
//!
//! ## Conventions
//!
//! - Token ids are `i64` (libtorch's index type); every id is checked against the vocabulary.
//! - Prompts are left-padded, responses right-padded ([`SequenceBatch`]); positions count only
//!   real tokens, so padding never changes a row's logits.
//! - Behaviour log-probs are `log softmax(logits / temperature)` of the policy at sampling time
//!   over the full vocabulary (top-p truncation is *not* renormalised into them, as in verl);
//!   `response_logprobs` with the same temperature reproduces them to 1e-5.
//! - Dropout is not supported (`dropout` must be 0): importance ratios need a deterministic
//!   forward.
//!
//! Binaries using this crate need the libtorch `build.rs` wiring described in [`rl_nn`].
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod batch;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod generate;
pub mod model;

pub use batch::{LogProbOptions, SequenceBatch, TokenLogProbs};
pub use checkpoint::WeightLoad;
pub use config::LmConfig;
pub use error::{LmError, Result};
pub use generate::{Generation, SamplingParams};
pub use model::{KvCache, TransformerLm};
pub use rl_nn::checkpoint::LoadMode;

#[cfg(test)]
mod autotraits {
    fn has_send<T: Send + Sized + Unpin>() {}
    fn has_send_sync<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send() {
        has_send::<super::TransformerLm>();
        has_send::<super::KvCache>();
        has_send::<super::SequenceBatch>();
        has_send::<super::Generation>();
        has_send::<super::TokenLogProbs>();
        has_send_sync::<super::LmConfig>();
        has_send_sync::<super::SamplingParams>();
        has_send_sync::<super::LmError>();
    }
}
