//! # rl-hf
//!
//! Hugging Face decoder-only causal LMs on libtorch ([`tch`] 0.24, PyTorch 2.11.0), read from
//! and written to the directory layout transformers uses, for RLVR fine-tuning of models a user
//! did not write:
//!
//! - Families: `qwen2` (Qwen2, Qwen2.5; q/k/v biases), `qwen3` (per-head q/k RMSNorm, explicit
//!   `head_dim`), `llama` (Llama 3.x, `rope_type: "llama3"` frequency scaling); grouped-query
//!   attention; tied or untied LM head; weights held in f32, bf16 or f16 on CPU or CUDA
//!   ([`HfDtype`], [`tch::Device`]).
//! - [`HfConfig`]: `config.json` in the transformers v4 (`rope_theta`, `rope_scaling`) and v5
//!   (`rope_parameters`) layouts, read strictly: an unknown `model_type` or a field that would
//!   change the model in a way not implemented here (sliding window, MoE, other rope types,
//!   quantisation, ...) is a typed error naming the field ([`HfError::UnsupportedField`]).
//! - [`HfModel::from_pretrained`]: `model.safetensors` or shards via
//!   `model.safetensors.index.json`; every tensor checked for name, dtype and shape before a
//!   model is built. [`HfModel::save_pretrained`] writes config + safetensors back (shards and
//!   an index above a size).
//! - [`HfModel::forward`]: logits of a left-padded batch with an attention mask, position ids
//!   as transformers' `generate` computes them, and a [`KvCache`];
//!   [`HfModel::generate_greedy`]: KV-cached greedy decoding.
//!
//! ```no_run
//! use rl_hf::{left_pad, HfDtype, HfModel};
//! let model = HfModel::from_pretrained("path/to/Qwen2.5-0.5B", tch::Device::Cpu, HfDtype::F32)?;
//! let (ids, mask) = left_pad(&[vec![9707, 11], vec![9707]], 0, model.device())?;
//! let logits = tch::no_grad(|| model.forward(&ids, Some(&mask), None))?; // [2, 2, vocab]
//! let new_tokens = model.generate_greedy(&ids, &mask, 24)?; // [2, 24]
//! # Ok::<(), rl_hf::HfError>(())
//! ```
//!
//! - [`HfModel::token_logprobs`]: per-token log-probs (and entropies) with gradient, the LM
//!   head applied in chunks of positions ([`LogProbParams`]).
//! - [`HfTokenizer`]: `tokenizer.json`, special tokens, chat template rendering
//!   ([`HfTokenizer::apply_chat_template`]).
//!
//! - [`HfModel::sample`]: batched KV-cached sampling (temperature, top-p, top-k, stop ids)
//!   returning tokens and behaviour log-probs ([`SampleParams`], [`Sample`]).
//!
//! - [`HfModel::token_logprobs_deferred`]: the same log-probs with the LM head recomputed
//!   chunk by chunk in the backward pass, so `[B, T, V]` logits never exist at once.
//! - LoRA adapters in PEFT's layout ([`lora`]): [`HfModel::add_lora`],
//!   [`HfModel::load_adapter`], [`HfModel::save_adapter`], [`HfModel::merge_lora`];
//!   [`HfModel::trainable_var_store`] is what an optimiser takes.
//!
//! `rlvr-train`'s `HfPolicy` drives these models in the RLVR trainer; what is not supported
//! yet is listed in `docs/rl-hf.md`.
//!
//! Binaries using this crate need the libtorch `build.rs` wiring described in [`rl_nn`].
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod config;
pub mod error;
pub mod logprob;
pub mod lora;
pub mod model;
pub mod sample;
pub mod tokenizer;
pub mod weights;

pub use config::{Family, HfConfig, Rope, CONFIG_FILE};
pub use error::{HfError, Result};
pub use logprob::{DeferredLogProbs, LogProbParams, TokenLogProbs};
pub use lora::{LoraParams, LoraTarget, ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE};
pub use model::{left_pad, HfDtype, HfModel, KvCache, SaveParams};
pub use sample::{Sample, SampleParams};
pub use tokenizer::{ChatMessage, HfTokenizer, CHAT_TEMPLATE_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE};
pub use weights::{INDEX_FILE, WEIGHTS_FILE};
