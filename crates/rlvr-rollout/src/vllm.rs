//! A [`RolloutEngine`] over one or several vLLM OpenAI-compatible servers.
//!
//! Each prompt is one `POST /v1/completions` request (`n` choices) sent to the least-loaded
//! server, at most [`VllmConfig::max_in_flight`] at a time; see `docs/rlvr-rollout.md` for the
//! server flags the log-probs depend on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::engine::{
    Completion, FinishReason, GenerateRequest, Generation, LogProbProbe, RolloutEngine, WeightUpdate, WeightVersion,
};
use crate::error::{invalid, Result, RolloutError};
use crate::weights::check_weight_dir;

/// vLLM writes `max(logprob, -9999.0)` for log-probs (its stand-in for −∞).
const VLLM_NEG_INF: f64 = -9999.0;
const COMPLETIONS: &str = "/v1/completions";

/// Parameters of a [`VllmClient`].
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `servers` | `[]` | base URLs, `http://host:port` (plain HTTP) | ≥ 1, each `http://...` |
/// | `model` | `""` | the served model name (`--served-model-name`, else the `--model` argument); every answer's `model` must equal it | non-empty |
/// | `vocab_size` | 0 | the model's vocabulary size: prompt and response ids must lie in `0..vocab_size` | ≥ 1 |
/// | `max_in_flight` | 8 | requests in flight over all servers together | 1..=4096 |
/// | `connect_timeout_ms` | 2000 | TCP connect timeout | ≥ 1 |
/// | `request_timeout_ms` | 600000 | time from sending a request to its whole answer | ≥ 1 |
/// | `max_attempts` | 3 | attempts per request for transient errors (down, timeout, 5xx, 429) | 1..=100 |
/// | `retry_backoff_ms` | 200 | pause before attempt `k + 1` is `k × retry_backoff_ms` | any |
/// | `max_response_bytes` | 256 MiB | largest answer read | ≥ 1024 |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VllmConfig {
    /// Base URLs.
    pub servers: Vec<String>,
    /// Served model name.
    pub model: String,
    /// Vocabulary size.
    pub vocab_size: u32,
    /// Requests in flight over all servers.
    pub max_in_flight: usize,
    /// TCP connect timeout (ms).
    pub connect_timeout_ms: u64,
    /// Request-to-answer timeout (ms).
    pub request_timeout_ms: u64,
    /// Attempts per request.
    pub max_attempts: u32,
    /// Back-off step between attempts (ms).
    pub retry_backoff_ms: u64,
    /// Largest answer read (bytes).
    pub max_response_bytes: u64,
}

impl Default for VllmConfig {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            model: String::new(),
            vocab_size: 0,
            max_in_flight: 8,
            connect_timeout_ms: 2000,
            request_timeout_ms: 600_000,
            max_attempts: 3,
            retry_backoff_ms: 200,
            max_response_bytes: 256 << 20,
        }
    }
}

impl VllmConfig {
    /// A config for `servers` serving `model` with `vocab_size` ids, defaults elsewhere.
    pub fn new(servers: Vec<String>, model: impl Into<String>, vocab_size: u32) -> Self {
        Self { servers, model: model.into(), vocab_size, ..Self::default() }
    }
    /// Sets `servers`.
    #[must_use]
    pub fn servers(mut self, v: Vec<String>) -> Self {
        self.servers = v;
        self
    }
    /// Sets `model`.
    #[must_use]
    pub fn model(mut self, v: impl Into<String>) -> Self {
        self.model = v.into();
        self
    }
    /// Sets `vocab_size`.
    #[must_use]
    pub fn vocab_size(mut self, v: u32) -> Self {
        self.vocab_size = v;
        self
    }
    /// Sets `max_in_flight`.
    #[must_use]
    pub fn max_in_flight(mut self, v: usize) -> Self {
        self.max_in_flight = v;
        self
    }
    /// Sets `connect_timeout_ms`.
    #[must_use]
    pub fn connect_timeout_ms(mut self, v: u64) -> Self {
        self.connect_timeout_ms = v;
        self
    }
    /// Sets `request_timeout_ms`.
    #[must_use]
    pub fn request_timeout_ms(mut self, v: u64) -> Self {
        self.request_timeout_ms = v;
        self
    }
    /// Sets `max_attempts`.
    #[must_use]
    pub fn max_attempts(mut self, v: u32) -> Self {
        self.max_attempts = v;
        self
    }
    /// Sets `retry_backoff_ms`.
    #[must_use]
    pub fn retry_backoff_ms(mut self, v: u64) -> Self {
        self.retry_backoff_ms = v;
        self
    }
    /// Sets `max_response_bytes`.
    #[must_use]
    pub fn max_response_bytes(mut self, v: u64) -> Self {
        self.max_response_bytes = v;
        self
    }
}

impl Params for VllmConfig {
    type Error = RolloutError;
    fn validate(&self) -> Result<()> {
        if self.servers.is_empty() {
            return Err(invalid("vllm.servers", "[]", "name at least one server URL"));
        }
        for (i, s) in self.servers.iter().enumerate() {
            let rest = s.strip_prefix("http://").unwrap_or("");
            if rest.is_empty() || rest.contains(char::is_whitespace) {
                return Err(invalid(&format!("vllm.servers[{i}]"), s, "must be a plain-HTTP URL, http://host:port"));
            }
        }
        if self.model.is_empty() {
            return Err(invalid("vllm.model", "\"\"", "name the served model"));
        }
        if self.vocab_size == 0 {
            return Err(invalid("vllm.vocab_size", 0, "must be >= 1"));
        }
        if !(1..=4096).contains(&self.max_in_flight) {
            return Err(invalid("vllm.max_in_flight", self.max_in_flight, "must be in 1..=4096"));
        }
        if self.connect_timeout_ms == 0 {
            return Err(invalid("vllm.connect_timeout_ms", 0, "must be >= 1"));
        }
        if self.request_timeout_ms == 0 {
            return Err(invalid("vllm.request_timeout_ms", 0, "must be >= 1"));
        }
        if !(1..=100).contains(&self.max_attempts) {
            return Err(invalid("vllm.max_attempts", self.max_attempts, "must be in 1..=100"));
        }
        if self.max_response_bytes < 1024 {
            return Err(invalid("vllm.max_response_bytes", self.max_response_bytes, "must be >= 1024"));
        }
        Ok(())
    }
}

/// Requests and failures of one server since the client was built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Base URL.
    pub url: String,
    /// Requests sent (every attempt counts).
    pub requests: u64,
    /// Attempts that failed.
    pub failures: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Load {
    in_flight: usize,
    requests: u64,
    failures: u64,
}

/// A client of vLLM OpenAI-compatible servers (see the module docs).
///
/// Routing: every request goes to the server with the fewest requests in flight (ties: the one
/// sent fewest requests, then the first); a retry avoids the server that just failed when
/// there is another. Retries: transient errors ([`RolloutError::is_transient`]) are retried up
/// to `max_attempts` with the same seed (a seeded generation is idempotent); every other error,
/// and the last transient one, fails the call as [`RolloutError::PromptFailed`] naming the
/// prompt, the server and the cause. Nothing is dropped.
#[derive(Debug)]
pub struct VllmClient {
    cfg: Valid<VllmConfig>,
    urls: Vec<String>,
    agent: ureq::Agent,
    load: Mutex<Vec<Load>>,
    version: WeightVersion,
    pending_sync: Option<WeightVersion>,
}

/// A per-prompt seed in vLLM's accepted range (a signed 64-bit integer, here ≥ 0).
fn prompt_seed(seed: u64, prompt: usize) -> u64 {
    // splitmix64 of the pair
    let mut z = seed ^ (prompt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) >> 1
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

impl VllmClient {
    /// A client for `cfg.servers`, which serve weight version `version` now.
    ///
    /// # Errors
    /// None beyond the checked config's; no request is sent (see [`check_servers`](Self::check_servers)).
    pub fn new(cfg: Valid<VllmConfig>, version: WeightVersion) -> Result<Self> {
        let urls: Vec<String> = cfg.servers.iter().map(|s| s.trim_end_matches('/').to_string()).collect();
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_millis(cfg.connect_timeout_ms)))
            .timeout_global(Some(Duration::from_millis(cfg.request_timeout_ms.saturating_add(cfg.connect_timeout_ms))))
            .timeout_recv_response(Some(Duration::from_millis(cfg.request_timeout_ms)))
            .max_idle_connections_per_host(cfg.max_in_flight)
            .build();
        let agent = ureq::Agent::new_with_config(config);
        let load = Mutex::new(vec![Load::default(); urls.len()]);
        Ok(Self { cfg, urls, agent, load, version, pending_sync: None })
    }

    /// The config.
    pub fn config(&self) -> &VllmConfig {
        &self.cfg
    }

    /// Requests and failures per server.
    pub fn server_stats(&self) -> Vec<ServerStats> {
        let load = self.load.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.urls
            .iter()
            .zip(load.iter())
            .map(|(u, l)| ServerStats { url: u.clone(), requests: l.requests, failures: l.failures })
            .collect()
    }

    /// Asks every server for `GET /v1/models` and checks that it serves the configured model.
    ///
    /// # Errors
    /// The first server that is unreachable, answers an error or malformed JSON, or does not
    /// list the model ([`RolloutError::ModelMismatch`]).
    pub fn check_servers(&self) -> Result<()> {
        #[derive(Deserialize)]
        struct Models {
            data: Vec<ModelEntry>,
        }
        #[derive(Deserialize)]
        struct ModelEntry {
            id: String,
        }
        for url in &self.urls {
            let body = self.request(url, "/v1/models", None)?;
            let m: Models = serde_json::from_str(&body).map_err(|e| RolloutError::Malformed {
                server: url.clone(),
                route: "/v1/models".into(),
                reason: e.to_string(),
            })?;
            if !m.data.iter().any(|e| e.id == self.cfg.model) {
                return Err(RolloutError::ModelMismatch {
                    server: url.clone(),
                    expected: self.cfg.model.clone(),
                    got: m.data.iter().map(|e| e.id.as_str()).collect::<Vec<_>>().join(", "),
                });
            }
        }
        Ok(())
    }

    /// One HTTP exchange: `POST` with a JSON body (or `GET` without one); the body of a 2xx answer.
    fn request(&self, server: &str, route: &str, body: Option<&serde_json::Value>) -> Result<String> {
        let url = format!("{server}{route}");
        let sent = match body {
            Some(b) => self.agent.post(&url).header("Content-Type", "application/json").send(b.to_string()),
            None => self.agent.get(&url).call(),
        };
        let mut resp = sent.map_err(|e| transport_error(server, route, e))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(self.cfg.max_response_bytes)
            .read_to_string()
            .map_err(|e| transport_error(server, route, e))?;
        if !(200..300).contains(&status) {
            return Err(RolloutError::HttpStatus {
                server: server.into(),
                route: route.into(),
                status,
                body: truncate(&text, 512),
            });
        }
        Ok(text)
    }

    /// The server for the next attempt (least loaded, avoiding `avoid` when another exists).
    fn acquire(&self, avoid: Option<usize>) -> usize {
        let mut load = self.load.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let pick = (0..load.len())
            .filter(|&k| load.len() == 1 || Some(k) != avoid)
            .min_by_key(|&k| (load[k].in_flight, load[k].requests, k))
            .unwrap_or(0);
        if let Some(l) = load.get_mut(pick) {
            l.in_flight += 1;
            l.requests += 1;
        }
        pick
    }

    fn release(&self, k: usize, failed: bool) {
        let mut load = self.load.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(l) = load.get_mut(k) {
            l.in_flight = l.in_flight.saturating_sub(1);
            l.failures += u64::from(failed);
        }
    }

    /// `n` completions of prompt `index`, with retries.
    fn generate_one(&self, index: usize, prompt: &[u32], req: &GenerateRequest<'_>) -> Result<Vec<Completion>> {
        let s = &**req.sampling;
        let mut body = json!({
            "model": self.cfg.model,
            "prompt": [prompt],
            "n": req.n,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": prompt_seed(req.seed, index),
            "logprobs": 0,
            "return_token_ids": true,
            "return_tokens_as_token_ids": true,
            "stream": false,
        });
        if let Some(k) = s.top_k {
            body["top_k"] = json!(k);
        }
        if !s.stop_token_ids.is_empty() {
            body["stop_token_ids"] = json!(s.stop_token_ids);
        }
        let mut avoid = None;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let k = self.acquire(avoid);
            let server = self.urls.get(k).map_or("", String::as_str);
            let out = self.request(server, COMPLETIONS, Some(&body)).and_then(|text| {
                parse_completions(server, &text, &self.cfg.model, &[prompt], req.n, self.cfg.vocab_size)
            });
            self.release(k, out.is_err());
            match out {
                Ok(mut per_prompt) => return Ok(per_prompt.pop().unwrap_or_default()),
                Err(e) if e.is_transient() && attempt < self.cfg.max_attempts => {
                    avoid = Some(k);
                    std::thread::sleep(Duration::from_millis(self.cfg.retry_backoff_ms.saturating_mul(attempt.into())));
                }
                Err(e) => {
                    return Err(RolloutError::PromptFailed {
                        prompt: index,
                        server: server.to_string(),
                        attempts: attempt,
                        source: Box::new(e),
                    })
                }
            }
        }
    }

    /// Runs the probe on `server`: the worst |engine − expected| and its position.
    fn probe(&self, server: &str, version: WeightVersion, probe: &LogProbProbe) -> Result<()> {
        let seq = probe.sequence();
        let body = json!({
            "model": self.cfg.model,
            "prompt": [seq],
            "n": 1,
            "max_tokens": 1,
            "temperature": 1.0,
            "seed": 0,
            "prompt_logprobs": 0,
            "return_token_ids": true,
            "stream": false,
        });
        let text = self.request(server, COMPLETIONS, Some(&body))?;
        let got = parse_prompt_logprobs(server, &text, &self.cfg.model, &seq)?;
        let start = probe.prompt.len();
        let mut worst: Option<(usize, f64, f64, f64)> = None;
        for (i, &want) in probe.expected.iter().enumerate() {
            let have = got.get(start + i).copied().ok_or_else(|| malformed(server, "prompt_logprobs too short"))?;
            let diff = (have - want).abs();
            if worst.is_none_or(|w| diff > w.3) {
                worst = Some((i, want, have, diff));
            }
        }
        if let Some((position, expected, got, diff)) = worst {
            if diff > probe.tolerance {
                return Err(RolloutError::StaleWeights {
                    server: server.into(),
                    version,
                    position,
                    expected,
                    got,
                    diff,
                    tolerance: probe.tolerance,
                });
            }
        }
        Ok(())
    }

    fn check_ids(&self, what: &str, ids: &[u32]) -> Result<()> {
        if let Some(p) = ids.iter().position(|&t| t >= self.cfg.vocab_size) {
            return Err(invalid(
                &format!("{what}[{p}]"),
                ids[p],
                &format!("token id outside the vocabulary (size {})", self.cfg.vocab_size),
            ));
        }
        Ok(())
    }
}

fn malformed(server: &str, reason: impl Into<String>) -> RolloutError {
    RolloutError::Malformed { server: server.into(), route: COMPLETIONS.into(), reason: reason.into() }
}

fn transport_error(server: &str, route: &str, e: ureq::Error) -> RolloutError {
    use std::io::ErrorKind;
    let server = server.to_string();
    match e {
        ureq::Error::Timeout(t) => RolloutError::Timeout { server, what: t.to_string() },
        ureq::Error::Io(io) if matches!(io.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
            RolloutError::Timeout { server, what: io.to_string() }
        }
        ureq::Error::Io(io) => RolloutError::Unreachable { server, reason: io.to_string() },
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
            RolloutError::Unreachable { server, reason: e.to_string() }
        }
        ureq::Error::Protocol(_) | ureq::Error::BodyExceedsLimit(_) | ureq::Error::LargeResponseHeader(..) => {
            RolloutError::Malformed { server, route: route.into(), reason: e.to_string() }
        }
        other => RolloutError::Unreachable { server, reason: other.to_string() },
    }
}

#[derive(Deserialize)]
struct ResponseJson {
    model: String,
    choices: Vec<ChoiceJson>,
}

#[derive(Deserialize)]
struct ChoiceJson {
    index: usize,
    #[serde(default)]
    token_ids: Option<Vec<i64>>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<LogprobsJson>,
    #[serde(default)]
    prompt_logprobs: Option<Vec<Option<HashMap<String, PromptLogprobJson>>>>,
    #[serde(default)]
    prompt_token_ids: Option<Vec<i64>>,
}

#[derive(Deserialize)]
struct LogprobsJson {
    token_logprobs: Vec<Option<f64>>,
    tokens: Vec<String>,
}

#[derive(Deserialize)]
struct PromptLogprobJson {
    logprob: Option<f64>,
}

fn parse_response(server: &str, text: &str, model: &str) -> Result<Vec<ChoiceJson>> {
    let r: ResponseJson = serde_json::from_str(text).map_err(|e| malformed(server, e.to_string()))?;
    if r.model != model {
        return Err(RolloutError::ModelMismatch { server: server.into(), expected: model.into(), got: r.model });
    }
    let mut choices = r.choices;
    choices.sort_by_key(|c| c.index);
    if let Some(i) = choices.iter().enumerate().position(|(i, c)| c.index != i) {
        return Err(malformed(server, format!("choice indices are not 0..{} (position {i})", choices.len())));
    }
    Ok(choices)
}

fn check_logprob(server: &str, choice: usize, position: usize, v: Option<f64>) -> Result<f64> {
    match v {
        Some(x) if x.is_finite() && x > VLLM_NEG_INF => Ok(x),
        other => Err(RolloutError::NonFinite {
            server: server.into(),
            choice,
            position,
            value: other.map_or_else(|| "null".into(), |x| x.to_string()),
        }),
    }
}

/// Completions of a `/v1/completions` answer for `prompts` × `n`, checked: model, choice
/// count and indices, `prompt_token_ids` (when present) equal to the prompt sent, token ids in
/// the vocabulary and equal to `logprobs.tokens`, one finite log-prob per token, a
/// `stop`/`length` finish reason.
fn parse_completions(
    server: &str,
    text: &str,
    model: &str,
    sent: &[&[u32]],
    n: usize,
    vocab_size: u32,
) -> Result<Vec<Vec<Completion>>> {
    let prompts = sent.len();
    let choices = parse_response(server, text, model)?;
    if choices.len() != prompts * n {
        return Err(RolloutError::ChoiceCount { server: server.into(), expected: prompts * n, got: choices.len() });
    }
    let mut out: Vec<Vec<Completion>> = (0..prompts).map(|_| Vec::with_capacity(n)).collect();
    for c in choices {
        let ci = c.index;
        if let (Some(echo), Some(prompt)) = (&c.prompt_token_ids, sent.get(ci / n)) {
            if !echo.iter().copied().eq(prompt.iter().map(|&t| i64::from(t))) {
                return Err(malformed(server, format!("choice {ci} answers another prompt (prompt_token_ids differ)")));
            }
        }
        let ids = c.token_ids.ok_or_else(|| malformed(server, format!("choice {ci} has no token_ids")))?;
        let lp = c.logprobs.ok_or_else(|| malformed(server, format!("choice {ci} has no logprobs")))?;
        if lp.token_logprobs.len() != ids.len() {
            return Err(RolloutError::LengthMismatch {
                server: server.into(),
                choice: ci,
                tokens: ids.len(),
                logprobs: lp.token_logprobs.len(),
                what: "logprobs.token_logprobs".into(),
            });
        }
        if lp.tokens.len() != ids.len() {
            return Err(RolloutError::LengthMismatch {
                server: server.into(),
                choice: ci,
                tokens: ids.len(),
                logprobs: lp.tokens.len(),
                what: "logprobs.tokens".into(),
            });
        }
        let mut token_ids = Vec::with_capacity(ids.len());
        let mut logprobs = Vec::with_capacity(ids.len());
        for (p, ((&id, listed), &v)) in ids.iter().zip(&lp.tokens).zip(&lp.token_logprobs).enumerate() {
            let tok = u32::try_from(id).ok().filter(|&t| t < vocab_size).ok_or(RolloutError::OutOfVocab {
                server: server.into(),
                choice: ci,
                position: p,
                id,
                vocab_size,
            })?;
            if listed.strip_prefix("token_id:").and_then(|s| s.parse::<i64>().ok()) != Some(id) {
                return Err(RolloutError::TokenMismatch {
                    server: server.into(),
                    choice: ci,
                    position: p,
                    id,
                    listed: listed.clone(),
                });
            }
            token_ids.push(tok);
            logprobs.push(check_logprob(server, ci, p, v)? as f32);
        }
        let finish_reason = match c.finish_reason.as_deref() {
            Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            other => return Err(malformed(server, format!("choice {ci} has finish_reason {other:?}"))),
        };
        if let Some(slot) = out.get_mut(ci / n) {
            slot.push(Completion { token_ids, logprobs, finish_reason });
        }
    }
    Ok(out)
}

/// The `prompt_logprobs` of a single-choice answer: one value per token of `seq` (the first
/// position has none and reads as 0).
fn parse_prompt_logprobs(server: &str, text: &str, model: &str, seq: &[u32]) -> Result<Vec<f64>> {
    let mut choices = parse_response(server, text, model)?;
    if choices.len() != 1 {
        return Err(RolloutError::ChoiceCount { server: server.into(), expected: 1, got: choices.len() });
    }
    let c = choices.remove(0);
    let entries = c.prompt_logprobs.ok_or_else(|| malformed(server, "no prompt_logprobs in the probe's answer"))?;
    if entries.len() != seq.len() {
        return Err(malformed(server, format!("{} prompt_logprobs for {} probe tokens", entries.len(), seq.len())));
    }
    let mut out = Vec::with_capacity(seq.len());
    for (p, (entry, &tok)) in entries.into_iter().zip(seq).enumerate() {
        match entry {
            None if p == 0 => out.push(0.0),
            None => return Err(malformed(server, format!("prompt_logprobs[{p}] is null"))),
            Some(map) => {
                let e = map
                    .get(&tok.to_string())
                    .ok_or_else(|| malformed(server, format!("prompt_logprobs[{p}] lacks the probe token {tok}")))?;
                out.push(check_logprob(server, 0, p, e.logprob)?);
            }
        }
    }
    Ok(out)
}

impl RolloutEngine for VllmClient {
    fn generate(&mut self, req: &GenerateRequest<'_>) -> Result<Generation> {
        req.validate()?;
        if let Some(version) = self.pending_sync {
            return Err(RolloutError::OutOfSync { version });
        }
        for (i, p) in req.prompts.iter().enumerate() {
            self.check_ids(&format!("request.prompts[{i}]"), p)?;
        }
        let this = &*self;
        let total = req.prompts.len();
        let results: Mutex<Vec<Option<Result<Vec<Completion>>>>> = Mutex::new((0..total).map(|_| None).collect());
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let workers = this.cfg.max_in_flight.min(total);
        let spawned: std::io::Result<()> = std::thread::scope(|scope| {
            for _ in 0..workers {
                std::thread::Builder::new().name("vllm-client".into()).spawn_scoped(scope, || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = this.generate_one(i, &req.prompts[i], req);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    let mut slots = results.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(s) = slots.get_mut(i) {
                        *s = Some(r);
                    }
                })?;
            }
            Ok(())
        });
        spawned.map_err(|source| RolloutError::Io { what: "spawning client threads".into(), source })?;
        let slots = results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        // The first failed prompt (by index) is the error; prompts left unsent after a failure
        // are not answered, so the call fails as a whole.
        let mut completions = Vec::with_capacity(total);
        let mut unanswered = None;
        for (i, s) in slots.into_iter().enumerate() {
            match s {
                Some(Ok(c)) => completions.push(c),
                Some(Err(e)) => return Err(e),
                None => unanswered = unanswered.or(Some(i)),
            }
        }
        if let Some(i) = unanswered {
            return Err(RolloutError::Engine(format!("prompt {i} was not answered")));
        }
        Ok(Generation { completions, version: self.version })
    }

    fn sync_weights(&mut self, update: &WeightUpdate<'_>) -> Result<()> {
        update.probe.validate()?;
        if update.version <= self.version {
            return Err(invalid(
                "update.version",
                update.version,
                &format!("must be greater than the served version {}", self.version),
            ));
        }
        self.check_ids("probe.prompt", &update.probe.prompt)?;
        self.check_ids("probe.continuation", &update.probe.continuation)?;
        let dir = check_weight_dir(update.dir)?;
        if let Some(why) = dir.tied() {
            return Err(RolloutError::TiedEmbeddings { dir: dir.dir, why });
        }
        let path = dir.dir.to_str().ok_or_else(|| RolloutError::WeightsDir {
            dir: dir.dir.clone(),
            reason: "the path is not UTF-8 (it travels in JSON)".into(),
        })?;
        self.pending_sync = Some(update.version);
        let reload = json!({
            "method": "reload_weights",
            "kwargs": {"weights_path": path, "is_checkpoint_format": true},
        });
        for url in &self.urls {
            self.request(url, "/collective_rpc", Some(&reload))?;
            self.request(url, "/reset_prefix_cache", Some(&json!({})))?;
            self.probe(url, update.version, update.probe)?;
        }
        self.version = update.version;
        self.pending_sync = None;
        Ok(())
    }

    fn weight_version(&self) -> WeightVersion {
        self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_non_negative_i64_and_differ_per_prompt() {
        let a = prompt_seed(7, 0);
        let b = prompt_seed(7, 1);
        assert_ne!(a, b);
        assert!(a <= i64::MAX as u64 && b <= i64::MAX as u64);
        assert_eq!(prompt_seed(7, 1), b);
    }

    #[test]
    fn truncate_keeps_char_boundaries() {
        assert_eq!(truncate("ééé", 3), "é...");
        assert_eq!(truncate("ab", 3), "ab");
    }
}
