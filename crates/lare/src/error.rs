//! The error type of `lare`.

use rl_core::RlCoreError;

/// A limit of the script sandbox (a field of [`crate::SandboxLimits`]), as named in
/// [`ScriptErrorKind::Limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SandboxLimit {
    /// `max_source_bytes`: bytes of script source.
    MaxSourceBytes,
    /// `max_compile_ms`: wall-clock time to compile the source.
    MaxCompileMs,
    /// `max_operations`: operations of one call.
    MaxOperations,
    /// `max_wall_ms`: wall-clock time of one call.
    MaxWallMs,
    /// `max_batch_operations`: operations of all the calls of one `encode_batch`.
    MaxBatchOperations,
    /// `max_batch_wall_ms`: wall-clock time of one `encode_batch`.
    MaxBatchWallMs,
    /// `max_array_size`: elements of one array (nested arrays and maps included).
    MaxArraySize,
    /// `max_string_size`: bytes of one string (or of all strings inside one array or map).
    MaxStringSize,
    /// `max_map_size`: entries of one map (nested maps included).
    MaxMapSize,
    /// `max_call_levels`: function-call depth.
    MaxCallLevels,
    /// `max_expr_depth`: expression nesting, checked when compiling.
    MaxExprDepth,
    /// `max_stack_bytes`: native stack a call may use (deeply nested data, recursion).
    MaxStackBytes,
}

impl SandboxLimit {
    /// The field of [`crate::SandboxLimits`] that sets this limit.
    pub fn name(self) -> &'static str {
        match self {
            SandboxLimit::MaxSourceBytes => "max_source_bytes",
            SandboxLimit::MaxCompileMs => "max_compile_ms",
            SandboxLimit::MaxOperations => "max_operations",
            SandboxLimit::MaxWallMs => "max_wall_ms",
            SandboxLimit::MaxBatchOperations => "max_batch_operations",
            SandboxLimit::MaxBatchWallMs => "max_batch_wall_ms",
            SandboxLimit::MaxArraySize => "max_array_size",
            SandboxLimit::MaxStringSize => "max_string_size",
            SandboxLimit::MaxMapSize => "max_map_size",
            SandboxLimit::MaxCallLevels => "max_call_levels",
            SandboxLimit::MaxExprDepth => "max_expr_depth",
            SandboxLimit::MaxStackBytes => "max_stack_bytes",
        }
    }
}

impl std::fmt::Display for SandboxLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a latent-reward script was stopped or rejected ([`LareError::Script`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScriptErrorKind {
    /// The script does not parse (syntax error, a forbidden statement such as `import`/`eval`).
    Compile,
    /// The script has no `evaluation_func(obs, act)` (or `evaluation_func(obs)`).
    MissingFunction,
    /// The script (or its source) went past a sandbox limit: an endless or too long loop
    /// (`max_operations`, `max_wall_ms`), a batch too slow in total (`max_batch_operations`,
    /// `max_batch_wall_ms`), unbounded allocation (`max_array_size`, `max_string_size`,
    /// `max_map_size`), runaway recursion or nesting (`max_call_levels`, `max_expr_depth`, `max_stack_bytes`), a
    /// source too long or too slow to compile (`max_source_bytes`, `max_compile_ms`).
    Limit {
        /// Which limit.
        limit: SandboxLimit,
        /// Its value in the [`crate::SandboxLimits`] the script ran under.
        value: u64,
    },
    /// The script raised a runtime error (unknown variable or function, type mismatch, index
    /// out of range, an error thrown in a `sort` comparator).
    Runtime,
    /// The script returned something other than an array of numbers.
    BadOutput,
}

impl std::fmt::Display for ScriptErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptErrorKind::Compile => f.write_str("compile error"),
            ScriptErrorKind::MissingFunction => f.write_str("missing function"),
            ScriptErrorKind::Limit { limit, value } => write!(f, "limit `{limit}` = {value} exceeded"),
            ScriptErrorKind::Runtime => f.write_str("runtime error"),
            ScriptErrorKind::BadOutput => f.write_str("bad output"),
        }
    }
}

/// Errors returned by `lare`. Every variant names what was wrong, so a user can fix the input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LareError {
    /// A parameter value is invalid.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Field name (dotted for nested parameters).
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An input had the wrong shape or length.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got}")]
    Shape {
        /// What was checked.
        what: String,
        /// The expected shape, formatted.
        expected: String,
        /// The shape that was passed, formatted.
        got: String,
    },
    /// A value that must be finite was NaN or infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was checked.
        what: String,
        /// The first offending index (flattened).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// An input that must be non-empty was empty.
    #[error("`{what}` is empty")]
    Empty {
        /// What was empty.
        what: String,
    },
    /// An unknown name (observation field, task, method, cache key).
    #[error("unknown {what} `{id}`")]
    UnknownId {
        /// What kind of thing was looked up.
        what: String,
        /// The name that was not found.
        id: String,
    },
    /// A file (checkpoint, cache entry, encoder record) is corrupt, truncated or mismatched.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A latent-reward script failed to compile, was stopped by a sandbox limit, raised an
    /// error or returned a bad value.
    #[error("script {kind}: {message}")]
    Script {
        /// What happened.
        kind: ScriptErrorKind,
        /// The engine's message (with the position in the script where known).
        message: String,
    },
    /// An encoder candidate failed verification (shape, finiteness, variance) on sampled states.
    #[error("verification failed: {0}")]
    Verification(String),
    /// The chat endpoint could not be reached or answered with an error status.
    #[error("chat endpoint {url}: {reason}")]
    Http {
        /// The URL that was called.
        url: String,
        /// What went wrong (status and body, or the transport error).
        reason: String,
    },
    /// A chat response that does not have the OpenAI shape, or an answer that is not the JSON
    /// the prompt asked for.
    #[error("bad LLM response: {0}")]
    BadResponse(String),
    /// The response cache has no entry for a request and the cache is in replay mode.
    #[error("no cached response for request {key} (cache {dir}, replay mode): run with a live endpoint to record it")]
    CacheMiss {
        /// The request's content address (SHA-256 of its canonical JSON).
        key: String,
        /// The cache directory.
        dir: String,
    },
    /// The LLM pipeline ran out of repair rounds without an accepted encoder.
    #[error("no encoder accepted after {rounds} repair rounds; last error: {last_error}")]
    RepairExhausted {
        /// Repair rounds spent.
        rounds: usize,
        /// The verification error of the last candidate.
        last_error: String,
    },
    /// A required environment variable is not set.
    #[error("environment variable `{0}` is not set")]
    MissingEnv(String),
    /// An error from `rl-core`.
    #[error(transparent)]
    Core(#[from] RlCoreError),
    /// An error from `rl-nn` (checkpoints, optimiser, tensors).
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// An error from `rl-agents` (the learners of the training loops).
    #[error(transparent)]
    Agent(#[from] rl_agents::AgentError),
    /// An error from `rl-envs`.
    #[error(transparent)]
    Env(#[from] rl_envs::EnvError),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON (de)serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl LareError {
    /// [`LareError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        LareError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }

    /// [`LareError::Shape`].
    pub fn shape(what: impl Into<String>, expected: impl std::fmt::Display, got: impl std::fmt::Display) -> Self {
        LareError::Shape { what: what.into(), expected: expected.to_string(), got: got.to_string() }
    }

    /// [`LareError::Script`].
    pub fn script(kind: ScriptErrorKind, message: impl Into<String>) -> Self {
        LareError::Script { kind, message: message.into() }
    }
}

/// `Result` with [`LareError`].
pub type Result<T, E = LareError> = std::result::Result<T, E>;

/// Checks that every value is finite, naming the first that is not.
pub(crate) fn check_finite(what: &str, values: impl IntoIterator<Item = f32>) -> Result<()> {
    for (index, v) in values.into_iter().enumerate() {
        if !v.is_finite() {
            return Err(LareError::NonFinite { what: what.to_owned(), index, value: f64::from(v) });
        }
    }
    Ok(())
}

/// Checks `got == expected` for a length.
pub(crate) fn check_len(what: &str, expected: usize, got: usize) -> Result<()> {
    if expected != got {
        return Err(LareError::shape(what, format!("[{expected}]"), format!("[{got}]")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let e = LareError::invalid("rrd_k", 0, "must be >= 1");
        assert_eq!(e.to_string(), "invalid parameter `rrd_k` = 0: must be >= 1");
        let e = check_finite("obs", [1.0, f32::NAN]).unwrap_err();
        assert!(matches!(e, LareError::NonFinite { index: 1, .. }), "{e}");
        assert!(check_len("act", 2, 3).unwrap_err().to_string().contains("expected [2], got [3]"));
        let kind = ScriptErrorKind::Limit { limit: SandboxLimit::MaxOperations, value: 200_000 };
        let e = LareError::script(kind, "loop");
        assert_eq!(e.to_string(), "script limit `max_operations` = 200000 exceeded: loop");
    }
}
