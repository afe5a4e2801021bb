//! The one error type of the crate.

use std::path::PathBuf;

/// Results of this crate.
pub type Result<T, E = RolloutError> = std::result::Result<T, E>;

/// What went wrong, naming the server (its base URL) and, for generation, the prompt.
///
/// [`is_transient`](Self::is_transient) says which errors a retry may cure (the server was
/// down, slow or answered 5xx); the others are deterministic and fail at once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RolloutError {
    /// A parameter or argument outside its range.
    #[error("invalid {name} = {value}: {reason}")]
    InvalidParameter {
        /// The parameter (dotted path).
        name: String,
        /// Its value.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// The server could not be reached (connection refused, reset, host not found).
    #[error("server {server} is unreachable: {reason}")]
    Unreachable {
        /// Base URL.
        server: String,
        /// The transport's message.
        reason: String,
    },
    /// Connecting or waiting for the answer took longer than its timeout.
    #[error("server {server} timed out ({what})")]
    Timeout {
        /// Base URL.
        server: String,
        /// Which phase timed out (ureq's name for it).
        what: String,
    },
    /// The server answered with an HTTP error status.
    #[error("server {server} answered HTTP {status} to {route}: {body}")]
    HttpStatus {
        /// Base URL.
        server: String,
        /// The route (`/v1/completions`, ...).
        route: String,
        /// The status code.
        status: u16,
        /// The start of the body (at most 512 bytes).
        body: String,
    },
    /// The answer is not the JSON document the route returns.
    #[error("server {server} sent a malformed answer to {route}: {reason}")]
    Malformed {
        /// Base URL.
        server: String,
        /// The route.
        route: String,
        /// What is wrong.
        reason: String,
    },
    /// Fewer (or more) choices than `n` per prompt.
    #[error("server {server} returned {got} choices, {expected} were asked for")]
    ChoiceCount {
        /// Base URL.
        server: String,
        /// `n` × prompts of the request.
        expected: usize,
        /// Choices in the answer.
        got: usize,
    },
    /// A choice's log-probs do not line up with its tokens.
    #[error("server {server}, choice {choice}: {tokens} token ids but {logprobs} {what}")]
    LengthMismatch {
        /// Base URL.
        server: String,
        /// Index of the choice.
        choice: usize,
        /// `token_ids.len()`.
        tokens: usize,
        /// The other list's length.
        logprobs: usize,
        /// Which list (`logprobs.token_logprobs`, `logprobs.tokens`).
        what: String,
    },
    /// `token_ids` and `logprobs.tokens` (`"token_id:N"`) name different tokens.
    #[error(
        "server {server}, choice {choice}, position {position}: token_ids has {id}, logprobs.tokens has {listed:?}"
    )]
    TokenMismatch {
        /// Base URL.
        server: String,
        /// Index of the choice.
        choice: usize,
        /// Position in the response.
        position: usize,
        /// The id of `token_ids`.
        id: i64,
        /// The entry of `logprobs.tokens`.
        listed: String,
    },
    /// A log-prob that is missing (`null`), not finite, or vLLM's stand-in for −∞ (≤ −9999).
    #[error("server {server}, choice {choice}, position {position}: log-prob {value} is not a finite log-probability")]
    NonFinite {
        /// Base URL.
        server: String,
        /// Index of the choice.
        choice: usize,
        /// Position in the response (or in the probe).
        position: usize,
        /// The value as received.
        value: String,
    },
    /// A token id outside `0..vocab_size`.
    #[error("server {server}, choice {choice}, position {position}: token id {id} outside the vocabulary (size {vocab_size})")]
    OutOfVocab {
        /// Base URL.
        server: String,
        /// Index of the choice.
        choice: usize,
        /// Position in the response.
        position: usize,
        /// The id.
        id: i64,
        /// The vocabulary size the client was given.
        vocab_size: u32,
    },
    /// The server serves another model than the one configured.
    #[error("server {server} serves model {got:?}, the client expects {expected:?}")]
    ModelMismatch {
        /// Base URL.
        server: String,
        /// The configured model name.
        expected: String,
        /// The `model` of the answer.
        got: String,
    },
    /// A prompt whose generation failed after every attempt.
    #[error("prompt {prompt} failed on server {server} after {attempts} attempt(s): {source}")]
    PromptFailed {
        /// Index of the prompt in the request.
        prompt: usize,
        /// The server of the last attempt.
        server: String,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        #[source]
        source: Box<RolloutError>,
    },
    /// A weight directory that is not a complete Hugging Face checkpoint.
    #[error("weight directory {dir}: {reason}")]
    WeightsDir {
        /// The directory.
        dir: PathBuf,
        /// What is missing or wrong.
        reason: String,
    },
    /// The checkpoint ties its LM head to the input embedding.
    #[error(
        "weight directory {dir} has tied embeddings ({why}); vLLM's CPU build (0.32.0) does not reload a tied \
         LM head (it keeps the old head: log-probs off by up to 2.7), so reload_weights would serve stale \
         weights: export untied weights (a separate lm_head.weight, tie_word_embeddings = false) or restart the server"
    )]
    TiedEmbeddings {
        /// The directory.
        dir: PathBuf,
        /// What shows the tie.
        why: String,
    },
    /// The probe after a weight sync does not match the new weights.
    #[error(
        "server {server} serves stale or different weights after syncing to {version}: probe token {position} \
         has log-prob {got}, expected {expected} (|diff| {diff:e} > tolerance {tolerance:e})"
    )]
    StaleWeights {
        /// Base URL.
        server: String,
        /// The version that was being synced.
        version: crate::WeightVersion,
        /// Index of the worst continuation token of the probe.
        position: usize,
        /// The caller's log-prob.
        expected: f64,
        /// The engine's log-prob.
        got: f64,
        /// `|got - expected|`.
        diff: f64,
        /// The allowed difference.
        tolerance: f64,
    },
    /// A weight sync failed part-way: generation is refused until a sync succeeds.
    #[error("the engine is not in sync with a weight version (the last sync to {version} failed); sync again or restart the servers")]
    OutOfSync {
        /// The version the failed sync aimed at.
        version: crate::WeightVersion,
    },
    /// An engine running in this process failed (its own error as text).
    #[error("in-process engine: {0}")]
    Engine(String),
    /// File-system errors.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl RolloutError {
    /// Whether a retry of the same idempotent request may succeed: the server was
    /// unreachable, timed out, or answered 5xx or 429.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Timeout { .. } => true,
            Self::HttpStatus { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// The server an error names, if any.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::Unreachable { server, .. }
            | Self::Timeout { server, .. }
            | Self::HttpStatus { server, .. }
            | Self::Malformed { server, .. }
            | Self::ChoiceCount { server, .. }
            | Self::LengthMismatch { server, .. }
            | Self::TokenMismatch { server, .. }
            | Self::NonFinite { server, .. }
            | Self::OutOfVocab { server, .. }
            | Self::ModelMismatch { server, .. }
            | Self::PromptFailed { server, .. }
            | Self::StaleWeights { server, .. } => Some(server),
            _ => None,
        }
    }
}

pub(crate) fn invalid(name: &str, value: impl std::fmt::Display, reason: &str) -> RolloutError {
    RolloutError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
}
