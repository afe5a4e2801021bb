//! The LLM pipeline that writes latent reward encoders, replayable offline.
//!
//! - [`client`]: an OpenAI-compatible chat client ([`HttpChat`], configured from the
//!   environment by [`ChatConfig::from_env`]) and [`ScriptedChat`] for dialogs written in advance.
//! - [`cache`]: the content-addressed [`ResponseCache`] and [`CachedChat`] (replay,
//!   record-missing, live), with the [`Provenance`] of every answer (LLM, hand-written, fixture).
//! - [`prompt`]: LaRe's prompt structure for Rhai encoders; [`tasks`]: prompts of the
//!   `rl-envs` tasks.
//! - [`pipeline`]: [`generate_encoder`] (candidates, summary, verification on sampled states,
//!   bounded repair) returning an auditable [`EncoderRecord`].
//!
//! ```no_run
//! use lare::llm::{generate_encoder, tasks, CacheMode, CachedChat, ChatConfig, HttpChat,
//!                 PipelineParams, ProbeSet, ResponseCache, Source};
//! use rl_core::Params;
//! let config = ChatConfig::from_env()?; // LARE_LLM_BASE_URL, LARE_LLM_MODEL, LARE_LLM_API_KEY
//! let params = PipelineParams::default().model(config.model.clone()).check()?;
//! let mut chat = CachedChat::new(ResponseCache::new("llm_cache"), CacheMode::RecordMissing,
//!                                Box::new(HttpChat::new(config)), Source::Llm, "");
//! let mut env = rl_envs::classic::Pendulum::new(rl_envs::classic::PendulumParams::default().check()?)?;
//! let probe = ProbeSet::from_env(&mut env, 32, &mut rl_core::rng_from_seed(0))?;
//! let record = generate_encoder(&mut chat, &tasks::pendulum(), &probe, &params)?;
//! record.save("pendulum_encoder.json")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cache;
pub mod client;
pub mod pipeline;
pub mod prompt;
pub mod tasks;

pub use cache::{CacheEntry, CacheMode, CachedAnswer, CachedChat, Provenance, ResponseCache, Source};
pub use client::{ChatBackend, ChatConfig, ChatRequest, ChatResponse, HttpChat, Message, ScriptedChat, ScriptedTurn};
pub use pipeline::{generate_encoder, verify_answer, EncoderRecord, PipelineParams, ProbeSet};
pub use prompt::{parse_answer, Answer, PromptMode, TaskPrompt};
