//! The [`RolloutEngine`] trait and the types it speaks: token-id prompts in, sampled
//! responses with their behaviour log-probs out, tagged with the [`WeightVersion`] that
//! produced them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};

/// A version of the policy's weights (the trainer's step counter, say). Every generation is
/// tagged with the version the engine served, so a trainer knows how stale its behaviour
/// log-probs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct WeightVersion(pub u64);

impl std::fmt::Display for WeightVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// How responses are sampled.
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `temperature` | 1.0 | softmax temperature; 0 = greedy | finite, ≥ 0 |
/// | `top_p` | 1.0 | nucleus mass (1 = off) | (0, 1] |
/// | `top_k` | `None` | keep the `k` most likely tokens (`None` = off) | ≥ 1 |
/// | `max_tokens` | 64 | length cap of a response | ≥ 1 |
/// | `stop_token_ids` | `[]` | ids that end a response besides the model's EOS | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Softmax temperature (0 = greedy).
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// Top-k cut (`None` = off).
    pub top_k: Option<u32>,
    /// Length cap of a response.
    pub max_tokens: u32,
    /// Extra stop ids.
    pub stop_token_ids: Vec<u32>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_p: 1.0, top_k: None, max_tokens: 64, stop_token_ids: Vec::new() }
    }
}

impl SamplingParams {
    /// Sets `temperature`.
    #[must_use]
    pub fn temperature(mut self, v: f64) -> Self {
        self.temperature = v;
        self
    }
    /// Sets `top_p`.
    #[must_use]
    pub fn top_p(mut self, v: f64) -> Self {
        self.top_p = v;
        self
    }
    /// Sets `top_k`.
    #[must_use]
    pub fn top_k(mut self, v: Option<u32>) -> Self {
        self.top_k = v;
        self
    }
    /// Sets `max_tokens`.
    #[must_use]
    pub fn max_tokens(mut self, v: u32) -> Self {
        self.max_tokens = v;
        self
    }
    /// Sets `stop_token_ids`.
    #[must_use]
    pub fn stop_token_ids(mut self, v: Vec<u32>) -> Self {
        self.stop_token_ids = v;
        self
    }
}

impl rl_core::Params for SamplingParams {
    type Error = crate::RolloutError;
    fn validate(&self) -> Result<()> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(invalid("sampling.temperature", self.temperature, "must be finite and >= 0"));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(invalid("sampling.top_p", self.top_p, "must be in (0, 1]"));
        }
        if self.top_k == Some(0) {
            return Err(invalid("sampling.top_k", 0, "must be >= 1 (or absent for no cut)"));
        }
        if self.max_tokens == 0 {
            return Err(invalid("sampling.max_tokens", 0, "must be >= 1"));
        }
        Ok(())
    }
}

/// One generation call: `n` responses for each prompt.
#[derive(Debug, Clone, Copy)]
pub struct GenerateRequest<'a> {
    /// Token-id prompts (each non-empty).
    pub prompts: &'a [Vec<u32>],
    /// Responses per prompt (≥ 1).
    pub n: usize,
    /// Sampling parameters (checked).
    pub sampling: &'a rl_core::Valid<SamplingParams>,
    /// The seed: the same request with the same seed gives the same responses on an engine
    /// that is deterministic for a seed (vLLM with a per-request seed, the in-process engines).
    pub seed: u64,
}

impl GenerateRequest<'_> {
    /// Checks `n ≥ 1` and that every prompt is non-empty.
    ///
    /// # Errors
    /// [`RolloutError::InvalidParameter`](crate::RolloutError::InvalidParameter) naming the prompt.
    pub fn validate(&self) -> Result<()> {
        if self.n == 0 {
            return Err(invalid("request.n", 0, "must be >= 1"));
        }
        if let Some(i) = self.prompts.iter().position(Vec::is_empty) {
            return Err(invalid(&format!("request.prompts[{i}]"), "[]", "a prompt must have at least one token"));
        }
        Ok(())
    }
}

/// Why a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A stop id (EOS or one of `stop_token_ids`) was sampled; it is the last token.
    Stop,
    /// `max_tokens` was reached.
    Length,
}

/// One sampled response.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Sampled token ids (the stop id included when [`FinishReason::Stop`]).
    pub token_ids: Vec<u32>,
    /// The behaviour log-prob of each sampled token (`logprobs.len() == token_ids.len()`),
    /// as the engine computed it: for vLLM started with `--logprobs-mode processed_logprobs`,
    /// `log_softmax(logits / T)` renormalised over the top-p nucleus.
    pub logprobs: Vec<f32>,
    /// Why it ended.
    pub finish_reason: FinishReason,
}

/// The answer to a [`GenerateRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// `completions[prompt][j]`, `n` per prompt, in the request's prompt order.
    pub completions: Vec<Vec<Completion>>,
    /// The weight version that produced every completion.
    pub version: WeightVersion,
}

impl Generation {
    /// Sampled tokens in all completions.
    pub fn total_tokens(&self) -> usize {
        self.completions.iter().flatten().map(|c| c.token_ids.len()).sum()
    }
}

/// A fixed probe that proves which weights an engine serves: the log-probs of `continuation`
/// after `prompt` (teacher-forced, temperature 1), computed by the trainer from the weights
/// being synced.
#[derive(Debug, Clone, PartialEq)]
pub struct LogProbProbe {
    /// Prompt ids (≥ 1).
    pub prompt: Vec<u32>,
    /// Continuation ids whose log-probs are compared (≥ 1).
    pub continuation: Vec<u32>,
    /// `expected[i] = log p(continuation[i] | prompt, continuation[..i])` under the new weights.
    pub expected: Vec<f64>,
    /// Largest allowed `|engine − expected|` (e.g. 1e-4 for float32 on both sides).
    pub tolerance: f64,
}

impl LogProbProbe {
    /// Checks the lengths and that the expected values and tolerance are finite.
    ///
    /// # Errors
    /// [`RolloutError::InvalidParameter`](crate::RolloutError::InvalidParameter).
    pub fn validate(&self) -> Result<()> {
        if self.prompt.is_empty() {
            return Err(invalid("probe.prompt", "[]", "needs at least one token"));
        }
        if self.continuation.is_empty() {
            return Err(invalid("probe.continuation", "[]", "needs at least one token"));
        }
        if self.expected.len() != self.continuation.len() {
            return Err(invalid(
                "probe.expected",
                self.expected.len(),
                &format!("needs one log-prob per continuation token ({})", self.continuation.len()),
            ));
        }
        if let Some(i) = self.expected.iter().position(|v| !v.is_finite() || *v > 0.0) {
            return Err(invalid(&format!("probe.expected[{i}]"), self.expected[i], "must be a finite log-prob <= 0"));
        }
        if !self.tolerance.is_finite() || self.tolerance <= 0.0 {
            return Err(invalid("probe.tolerance", self.tolerance, "must be finite and > 0"));
        }
        Ok(())
    }

    /// The probe's full prompt (`prompt ++ continuation`).
    pub fn sequence(&self) -> Vec<u32> {
        let mut s = self.prompt.clone();
        s.extend_from_slice(&self.continuation);
        s
    }
}

/// A move to new weights: a complete Hugging Face directory (`config.json` + `*.safetensors`)
/// holding `version`, and the probe that proves the engine serves it.
#[derive(Debug, Clone, Copy)]
pub struct WeightUpdate<'a> {
    /// The new version (greater than the engine's current one).
    pub version: WeightVersion,
    /// The directory the weights were written to (a fresh one per version).
    pub dir: &'a Path,
    /// The probe, computed from the new weights.
    pub probe: &'a LogProbProbe,
}

/// Something that generates rollouts for a trainer: an inference-engine client
/// ([`VllmClient`](crate::VllmClient)) or a policy in the trainer's own process.
///
/// Contract: [`generate`](Self::generate) returns `n` completions for every prompt or an error
/// naming the prompt that failed — never fewer; every log-prob is finite; the returned
/// [`Generation::version`] is the version that produced the tokens.
/// [`sync_weights`](Self::sync_weights) either leaves the engine serving `update.version`
/// (checked by the probe) or fails, after which a client that may be serving a mix refuses to
/// generate until a sync succeeds.
pub trait RolloutEngine: Send + std::fmt::Debug {
    /// Samples `request.n` responses for each prompt.
    ///
    /// # Errors
    /// Bad requests, and the engine's typed failures (see [`RolloutError`](crate::RolloutError)).
    fn generate(&mut self, request: &GenerateRequest<'_>) -> Result<Generation>;

    /// Moves the engine to the weights of `update.dir` and checks them with `update.probe`.
    ///
    /// # Errors
    /// An incomplete directory, tied embeddings on an engine that cannot reload them, a
    /// failed reload, a probe mismatch ([`RolloutError::StaleWeights`](crate::RolloutError::StaleWeights)).
    fn sync_weights(&mut self, update: &WeightUpdate<'_>) -> Result<()>;

    /// The version the engine serves now.
    fn weight_version(&self) -> WeightVersion;
}
