//! # rlvr-rollout
//!
//! Rollouts for RLVR from an inference engine, without libtorch: the trainer hands a batch of
//! token-id prompts to a [`RolloutEngine`] and gets back `n` sampled responses per prompt, the
//! behaviour log-prob of every sampled token, why each response ended, and the
//! [`WeightVersion`] that produced them; [`RolloutEngine::sync_weights`] moves the engine to
//! new weights and proves it with a log-prob probe.
//!
//! - [`VllmClient`]: vLLM's OpenAI-compatible server (`POST /v1/completions` with token-id
//!   prompts, `n`, a seed, `logprobs: 0`, `return_token_ids`, `return_tokens_as_token_ids`),
//!   several servers with least-loaded routing, a bound on requests in flight, connect and
//!   request timeouts, bounded retries of transient failures, and typed errors
//!   ([`RolloutError`]) naming the server and the prompt. Every answer is checked: choice
//!   count, model name, token ids in the vocabulary and equal to `logprobs.tokens`, one finite
//!   log-prob per token.
//! - Weight sync by disk ([`VllmClient`]'s [`sync_weights`](RolloutEngine::sync_weights)): the
//!   directory is checked first ([`check_weight_dir`]: `config.json`, `*.safetensors`, tied
//!   embeddings refused), then `POST /collective_rpc` `reload_weights`, `POST
//!   /reset_prefix_cache`, and a probe whose `prompt_logprobs` must match the caller's
//!   log-probs of the new weights ([`RolloutError::StaleWeights`] otherwise).
//! - The in-process engine over an `rlvr-train` policy lives in `rlvr-train` (it needs
//!   libtorch); this crate never links it.
//!
//! The server flags the log-probs depend on (`--logprobs-mode processed_logprobs
//! --generation-config vllm`, dev mode for the reload routes) are in `docs/rlvr-rollout.md`.
//!
//! ```no_run
//! use rl_core::Params;
//! use rlvr_rollout::{GenerateRequest, RolloutEngine, SamplingParams, VllmClient, VllmConfig, WeightVersion};
//!
//! let cfg = VllmConfig::new(vec!["http://127.0.0.1:8000".into()], "/models/qwen2-tiny", 512).check()?;
//! let mut engine = VllmClient::new(cfg, WeightVersion(0))?;
//! let sampling = SamplingParams::default().temperature(1.0).max_tokens(32).check()?;
//! let prompts = vec![vec![1, 17, 42], vec![1, 99]];
//! let out = engine.generate(&GenerateRequest { prompts: &prompts, n: 4, sampling: &sampling, seed: 7 })?;
//! assert_eq!(out.completions.len(), 2);
//! # Ok::<(), rlvr_rollout::RolloutError>(())
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

pub mod engine;
pub mod error;
pub mod vllm;
pub mod weights;

pub use engine::{
    Completion, FinishReason, GenerateRequest, Generation, LogProbProbe, RolloutEngine, SamplingParams, WeightUpdate,
    WeightVersion,
};
pub use error::{Result, RolloutError};
pub use vllm::{ServerStats, VllmClient, VllmConfig};
pub use weights::{check_weight_dir, WeightDir};
