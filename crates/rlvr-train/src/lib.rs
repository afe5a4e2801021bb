//! # rlvr-train
//!
//! An end-to-end RLVR (reinforcement learning with verifiable rewards) training loop that runs
//! on a laptop CPU (or CUDA), assembled from the workspace's crates:
//!
//! | piece | crate |
//! |---|---|
//! | policy: small decoder-only transformer, KV-cached sampling, per-token log-probs | `rl-lm` |
//! | or a Hugging Face decoder LLM with its tokenizer ([`HfPolicy`], an `[hf]` config table) | `rl-hf` |
//! | tasks: Countdown / arithmetic pools, verifier (1 / 0.1 / 0), tokenizer, solver | `rlvr-tasks` |
//! | prompt selection: uniform, DAPO dynamic sampling, MoPPS, DPS, GPS | `rlvr-select` |
//! | POPO group replay (ineffective groups swapped for recent effective ones) | `rlvr-replay` |
//! | advantages and losses (GRPO/DAPO/LPO/...), decoupled off-policy correction | `rlvr-core` |
//!
//! One run ([`Trainer`]): a supervised warm start on solver solutions to partial accuracy
//! (so groups are mixed, as with a real base model), then RL steps — select `B` prompts, roll
//! out `K` responses each, score them, fill the batch (replaying stored effective groups into
//! the slots of ineffective ones), compute the loss with the decoupled correction for replayed
//! rows, step Adam, feed the outcomes back to the selector — with held-out pass@1 / pass@k
//! evaluations along the way. Every step's metrics (rewards, effective-group ratios, replay
//! and loss statistics, wall time split into generation / scoring / selection / loss) come
//! back as a [`StepRecord`].
//!
//! The trainer drives any [`Policy`] (`rl-lm`'s transformer, [`HfPolicy`], or yours, through
//! [`TrainerBuilder::policy`]). [`PolicyEngine`] serves a policy as an `rlvr-rollout`
//! [`RolloutEngine`](rlvr_rollout::RolloutEngine), the trait vLLM's client implements too (the
//! trainer itself still samples from its own policy; docs/rlvr-rollout.md).
//!
//! Configuration is one serde struct, [`RunConfig`], loadable from TOML. The `rlvr_demo`
//! example of the `frugal-rl` facade is the command-line front end (`make demo`); see
//! `docs/rlvr-demo.md` for the method comparison.
//!
//! ```no_run
//! use rlvr_train::{RunConfig, SelectorConfig, Trainer};
//! let mut cfg = RunConfig::default();            // Countdown, DPS + POPO replay, PPO-clip
//! cfg.selector = SelectorConfig::Uniform;
//! cfg.replay = None;                             // plain GRPO
//! let mut trainer = Trainer::new(cfg)?;
//! trainer.warm_start(&mut |_, _| {})?;
//! let summary = trainer.run(&mut |rec| println!("step {} reward {:.3}", rec.step, rec.reward_mean), &mut |_| {})?;
//! println!("held-out pass@1 {:.3} -> {:.3} with {} rollouts",
//!     summary.initial.pass_at_1, summary.last.pass_at_1, summary.rollouts.total());
//! # Ok::<(), rlvr_train::TrainError>(())
//! ```
//!
//! Binaries that link this crate need the libtorch `build.rs` of `docs/setup.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod config;
pub mod engine;
mod error;
pub mod eval;
pub mod policy;
pub mod report;
pub mod rollout;
pub mod sft;
mod tasks;
mod trainer;

pub use config::{EvalConfig, MixedPool, RlConfig, RunConfig, SelectorConfig, SftConfig, TaskConfig};
pub use engine::PolicyEngine;
pub use error::{Result, TrainError};
pub use eval::{pass_at_k, EvalReport};
pub use policy::{Generated, HfPolicy, HfPolicyConfig, Policy, PolicySource, ResponseLogProbs, Sampling, ADAPTER_DIR};
pub use rollout::{GroupSampling, RolloutGroup, RolloutTimes};
pub use tasks::{PoolSide, TaskSet};
pub use trainer::{
    device_of, EvalPoint, GeneratedGroups, RolloutCounts, RunSummary, StepRecord, TimeSplit, Trainer, TrainerBuilder,
    UpdateStats,
};
