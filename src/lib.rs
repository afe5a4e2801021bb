//! # frugal-rl
//!
//! Sample-efficient reinforcement learning in Rust. This facade re-exports the member crates
//! of the workspace, each behind a feature:
//!
//! | feature | crate | what |
//! |---|---|---|
//! | (always) | [`core`] (`rl-core`) | env/policy traits, transition batches, metrics, seeding, statistics |
//! | `nn` (default) | [`nn`] (`rl-nn`) | libtorch MLPs/ensembles, target updates, devices, checkpoints |
//! | `rlvr-core` | [`rlvr_core`] | RLVR losses: advantage estimators, PPO/GSPO/CISPO/SAPO/GMPO/GPG, LPO, decoupled off-policy correction |
//! | `rlvr-replay` (`rlvr-replay-tch` for its tensor side) | [`rlvr_replay`] | POPO prioritized group replay: no batch carries an ineffective group |
//! | `rlvr-select` | [`rlvr_select`] | prompt selection: DPS, MoPPS, DAPO dynamic sampling, difficulty filtering, history resampling, uniform, prompt-pool simulator; neural GPS, MPTS, PDTS |
//! | `rl-lm` | [`rl_lm`] | small decoder-only transformer policy: KV-cached sampling with behaviour log-probs, training log-probs, safetensors checkpoints |
//! | `rl-hf` | [`rl_hf`] | Hugging Face decoder LLMs (Qwen2/2.5, Qwen3, Llama 3.x): strict loading, tokenizer and chat template, KV-cached sampling, memory-bounded training log-probs, `save_pretrained` |
//! | `rlvr-tasks` | [`rlvr_tasks`] | Countdown and multi-digit arithmetic: graded generators, exact verifiers, solvers, character tokenizer (tch-free) |
//! | `rlvr-rollout` | [`rlvr_rollout`] | rollouts from an inference engine: the `RolloutEngine` trait, a vLLM OpenAI-server client (several servers, bounded in-flight requests, timeouts, retries, typed errors), weight sync by disk with a log-prob probe (tch-free) |
//! | `rlvr-train` | [`rlvr_train`] | the end-to-end RLVR loop: warm start, group rollouts, selection, POPO replay, any loss, held-out pass@k |
//! | `rl-envs` | [`rl_envs`] | environments matched to gymnasium step for step (classic control, point mazes, particle worlds) and wrappers (tch-free) |
//! | `rl-agents` | [`rl_agents`] | online SAC, TD3 and PPO with published defaults, replay buffer, fused critic ensembles, training loop, evaluation |
//! | `lare` | [`lare`] | LaRe credit assignment (latent-reward encoders as sandboxed scripts, offline-replayable LLM pipeline, reward decoders) with the RD, RRD, IRCR baselines |
//! | `mujoco` | [`rl_envs`] | adds MuJoCo locomotion (Hopper, HalfCheetah, Walker2d, Ant) and the MuJoCo point maze (needs `make provision-mujoco`) |
//! | `aigb` (`aigb-tch` for the learned bidders) | [`aigb`] | auto-bidding: AuctionNet-faithful auction simulator, PID/OnlineLP/fixed-CPA bidders, logged trajectories, held-out evaluation |
//! | `offline-rl` (`offline-rl-mujoco` for MuJoCo data) | [`offline_rl`] | offline RL: D4RL/Minari HDF5 and safetensors datasets with validation, normalisation, D4RL scores; TD3+BC, IQL, DMG, SCAS |
//! | `full` | | all of the above except `mujoco` |
//!
//! See the README for the crate map and `docs/` for the guide.
#![deny(missing_docs)]

#[cfg(feature = "aigb")]
pub use aigb;
#[cfg(feature = "lare")]
pub use lare;
#[cfg(feature = "offline-rl")]
pub use offline_rl;
#[cfg(feature = "rl-agents")]
pub use rl_agents;
pub use rl_core as core;
#[cfg(feature = "rl-envs")]
pub use rl_envs;
#[cfg(feature = "rl-hf")]
pub use rl_hf;
#[cfg(feature = "rl-lm")]
pub use rl_lm;
#[cfg(feature = "nn")]
pub use rl_nn as nn;
#[cfg(feature = "rlvr-core")]
pub use rlvr_core;
#[cfg(feature = "rlvr-replay")]
pub use rlvr_replay;
#[cfg(feature = "rlvr-rollout")]
pub use rlvr_rollout;
#[cfg(feature = "rlvr-select")]
pub use rlvr_select;
#[cfg(feature = "rlvr-tasks")]
pub use rlvr_tasks;
#[cfg(feature = "rlvr-train")]
pub use rlvr_train;
