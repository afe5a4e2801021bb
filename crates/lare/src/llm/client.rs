//! An OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`).
//!
//! Works with OpenAI's API (feature `https`) and with local OpenAI-compatible servers such as
//! vLLM (`vllm serve`, base URL `http://127.0.0.1:8000/v1`) and llama.cpp's `llama-server`
//! (`http://127.0.0.1:8080/v1`). Servers that return fewer choices than the `n` asked for are
//! topped up by repeated calls ([`super::cache::CachedChat`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{LareError, Result};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: "user".into(), content: content.into() }
    }
    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: "assistant".into(), content: content.into() }
    }
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: "system".into(), content: content.into() }
    }
}

/// A chat-completions request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name.
    pub model: String,
    /// The dialog so far.
    pub messages: Vec<Message>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Number of choices.
    pub n: usize,
    /// Sampling seed (servers that support it).
    pub seed: Option<u64>,
    /// Ask for a JSON object (`response_format = {"type": "json_object"}`).
    pub json_mode: bool,
}

impl ChatRequest {
    /// The OpenAI request body.
    pub fn body(&self) -> serde_json::Value {
        let mut b = serde_json::json!({
            "model": self.model,
            "messages": self.messages,
            "temperature": self.temperature,
            "n": self.n,
        });
        if let Some(seed) = self.seed {
            b["seed"] = serde_json::json!(seed);
        }
        if self.json_mode {
            b["response_format"] = serde_json::json!({"type": "json_object"});
        }
        b
    }

    /// The content address of this request's `attempt`-th call: SHA-256 (hex) of the canonical
    /// JSON of the body (keys sorted; no endpoint, no key) with the attempt number when > 0.
    pub fn cache_key(&self, attempt: usize) -> String {
        let mut body = self.body();
        if attempt > 0 {
            body["x_attempt"] = serde_json::json!(attempt);
        }
        let canonical = canonical_json(&body);
        let digest = Sha256::digest(canonical.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// JSON with object keys sorted (serde_json's default map is a sorted `BTreeMap`).
pub(crate) fn canonical_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", serde_json::Value::String((*k).clone()), canonical_json(&m[*k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        serde_json::Value::Array(a) => format!("[{}]", a.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// A chat-completions response: the raw JSON and the text of each choice.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The response body.
    pub raw: serde_json::Value,
    /// `choices[i].message.content`.
    pub choices: Vec<String>,
}

impl ChatResponse {
    /// Reads the choices of an OpenAI-shaped response body.
    ///
    /// # Errors
    /// [`LareError::BadResponse`] when there is no `choices` array or a choice has no string
    /// `message.content`.
    pub fn from_raw(raw: serde_json::Value) -> Result<Self> {
        let arr = raw
            .get("choices")
            .and_then(|c| c.as_array())
            .ok_or_else(|| LareError::BadResponse(format!("no `choices` array in {}", excerpt(&raw.to_string()))))?;
        let choices = arr
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.pointer("/message/content")
                    .and_then(|s| s.as_str())
                    .map(str::to_owned)
                    .ok_or_else(|| LareError::BadResponse(format!("choice {i} has no string `message.content`")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { raw, choices })
    }

    /// An OpenAI-shaped response body holding `answers` (for hand-written dialogs and tests).
    pub fn synthetic(model: &str, answers: &[String]) -> serde_json::Value {
        let choices: Vec<serde_json::Value> = answers
            .iter()
            .enumerate()
            .map(|(i, a)| {
                serde_json::json!({"index": i, "message": {"role": "assistant", "content": a}, "finish_reason": "stop"})
            })
            .collect();
        serde_json::json!({"object": "chat.completion", "model": model, "choices": choices})
    }
}

pub(crate) fn excerpt(s: &str) -> String {
    let mut e: String = s.chars().take(300).collect();
    if s.chars().count() > 300 {
        e.push('…');
    }
    e
}

/// Something that answers chat requests (an HTTP endpoint, a scripted dialog).
pub trait ChatBackend: std::fmt::Debug {
    /// Answers `request`.
    ///
    /// # Errors
    /// Transport failures, error statuses, malformed responses.
    fn complete(&mut self, request: &ChatRequest) -> Result<ChatResponse>;

    /// Where the answers come from (for provenance records; never contains a key).
    fn describe(&self) -> String;
}

/// Where the chat endpoint is and how to call it.
///
/// | env var | fallback | meaning |
/// |---|---|---|
/// | `LARE_LLM_BASE_URL` | `OPENAI_BASE_URL` | base URL including `/v1` (e.g. `http://127.0.0.1:8000/v1`) |
/// | `LARE_LLM_MODEL` | `OPENAI_MODEL` | model name the server knows |
/// | `LARE_LLM_API_KEY` | `OPENAI_API_KEY` | bearer token (optional: local servers need none) |
/// | `LARE_LLM_TIMEOUT_S` | | request timeout in seconds (default 300) |
#[derive(Clone, PartialEq, Eq)]
pub struct ChatConfig {
    /// Base URL including the API version path.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Bearer token.
    pub api_key: Option<String>,
    /// Request timeout (seconds).
    pub timeout_s: u64,
}

impl std::fmt::Debug for ChatConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout_s", &self.timeout_s)
            .finish()
    }
}

fn env_either(a: &str, b: &str) -> Option<String> {
    std::env::var(a).ok().or_else(|| std::env::var(b).ok()).filter(|s| !s.is_empty())
}

impl ChatConfig {
    /// A config for `base_url` and `model` without a key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), model: model.into(), api_key: None, timeout_s: 300 }
    }

    /// The config from the environment (see the table).
    ///
    /// # Errors
    /// [`LareError::MissingEnv`] when the base URL or the model is not set; a timeout that is
    /// not a positive integer.
    pub fn from_env() -> Result<Self> {
        let base_url = env_either("LARE_LLM_BASE_URL", "OPENAI_BASE_URL")
            .ok_or_else(|| LareError::MissingEnv("LARE_LLM_BASE_URL".into()))?;
        let model = env_either("LARE_LLM_MODEL", "OPENAI_MODEL")
            .ok_or_else(|| LareError::MissingEnv("LARE_LLM_MODEL".into()))?;
        let api_key = env_either("LARE_LLM_API_KEY", "OPENAI_API_KEY");
        let timeout_s = match std::env::var("LARE_LLM_TIMEOUT_S") {
            Ok(s) => s
                .parse::<u64>()
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| LareError::invalid("LARE_LLM_TIMEOUT_S", &s, "must be a positive integer"))?,
            Err(_) => 300,
        };
        Ok(Self { base_url, model, api_key, timeout_s })
    }

    /// The chat-completions URL.
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// The HTTP backend: one blocking `POST` per request (no proxy; plain HTTP always, HTTPS with
/// the `https` feature).
#[derive(Debug)]
pub struct HttpChat {
    config: ChatConfig,
    agent: ureq::Agent,
}

impl HttpChat {
    /// A client for `config`.
    pub fn new(config: ChatConfig) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(config.timeout_s)))
            .http_status_as_error(false)
            .proxy(None)
            .build()
            .into();
        Self { config, agent }
    }

    /// The config.
    pub fn config(&self) -> &ChatConfig {
        &self.config
    }
}

impl ChatBackend for HttpChat {
    fn complete(&mut self, request: &ChatRequest) -> Result<ChatResponse> {
        let url = self.config.url();
        let http = |reason: String| LareError::Http { url: url.clone(), reason };
        let body = serde_json::to_string(&request.body())?;
        let mut req = self.agent.post(&url).header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            req = req.header("Authorization", &format!("Bearer {key}"));
        }
        let mut resp = req.send(body.as_str()).map_err(|e| http(e.to_string()))?;
        let status = resp.status();
        let text = resp.body_mut().read_to_string().map_err(|e| http(format!("reading the body: {e}")))?;
        if !status.is_success() {
            return Err(http(format!("status {status}: {}", excerpt(&text))));
        }
        let raw: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| LareError::BadResponse(format!("{e}: {}", excerpt(&text))))?;
        ChatResponse::from_raw(raw)
    }

    fn describe(&self) -> String {
        format!("{} ({})", self.config.model, self.config.base_url)
    }
}

/// A backend that answers from a fixed list, one entry per call, in order: a dialog written in
/// advance (by a person, or recorded). Every call checks that the request still fits: the
/// `expect` substring of each turn (if any) must occur in the last user message.
#[derive(Debug, Clone)]
pub struct ScriptedChat {
    label: String,
    turns: std::collections::VecDeque<ScriptedTurn>,
}

/// One answer of a [`ScriptedChat`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedTurn {
    /// A substring the last user message must contain (checks the dialog is in step).
    #[serde(default)]
    pub expect: Option<String>,
    /// The choices to return.
    pub answers: Vec<String>,
}

impl ScriptedChat {
    /// A backend answering `turns` in order; `label` says who wrote them.
    pub fn new(label: impl Into<String>, turns: Vec<ScriptedTurn>) -> Self {
        Self { label: label.into(), turns: turns.into() }
    }

    /// Turns left.
    pub fn remaining(&self) -> usize {
        self.turns.len()
    }
}

impl ChatBackend for ScriptedChat {
    fn complete(&mut self, request: &ChatRequest) -> Result<ChatResponse> {
        let turn = self
            .turns
            .pop_front()
            .ok_or_else(|| LareError::BadResponse("the scripted dialog has no turn left".into()))?;
        if let Some(exp) = &turn.expect {
            let last =
                request.messages.iter().rev().find(|m| m.role == "user").map(|m| m.content.as_str()).unwrap_or("");
            if !last.contains(exp.as_str()) {
                return Err(LareError::BadResponse(format!(
                    "the scripted dialog expected a user message containing {exp:?}, got {:?}",
                    excerpt(last)
                )));
            }
        }
        ChatResponse::from_raw(ChatResponse::synthetic(&request.model, &turn.answers))
    }

    fn describe(&self) -> String {
        self.label.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![Message::user("hi")],
            temperature: 1.0,
            n: 5,
            seed: None,
            json_mode: true,
        }
    }

    #[test]
    fn body_and_key_are_canonical() {
        let r = req();
        let b = r.body();
        assert_eq!(b["response_format"]["type"], "json_object");
        assert!(b.get("seed").is_none());
        let k0 = r.cache_key(0);
        assert_eq!(k0.len(), 64);
        assert_eq!(k0, req().cache_key(0));
        assert_ne!(k0, r.cache_key(1));
        let mut other = req();
        other.temperature = 0.3;
        assert_ne!(k0, other.cache_key(0));
        assert_eq!(canonical_json(&serde_json::json!({"b": 1, "a": [true, null]})), r#"{"a":[true,null],"b":1}"#);
    }

    #[test]
    fn responses_parse_or_fail_typed() {
        let raw = ChatResponse::synthetic("m", &["x".into(), "y".into()]);
        assert_eq!(ChatResponse::from_raw(raw).unwrap().choices, vec!["x", "y"]);
        assert!(matches!(ChatResponse::from_raw(serde_json::json!({"error": "no"})), Err(LareError::BadResponse(_))));
        let bad = serde_json::json!({"choices": [{"message": {"content": 3}}]});
        assert!(ChatResponse::from_raw(bad).is_err());
    }

    #[test]
    fn scripted_chat_checks_the_dialog() {
        let mut s = ScriptedChat::new(
            "test",
            vec![
                ScriptedTurn { expect: Some("hi".into()), answers: vec!["a".into()] },
                ScriptedTurn { expect: Some("error".into()), answers: vec!["b".into()] },
            ],
        );
        assert_eq!(s.complete(&req()).unwrap().choices, vec!["a"]);
        assert!(s.complete(&req()).is_err());
        assert!(s.complete(&req()).is_err());
        assert_eq!(s.remaining(), 0);
    }

    #[test]
    fn config_hides_the_key_and_builds_the_url() {
        let mut c = ChatConfig::new("http://127.0.0.1:8000/v1/", "m");
        c.api_key = Some("secret".into());
        assert_eq!(c.url(), "http://127.0.0.1:8000/v1/chat/completions");
        assert!(!format!("{c:?}").contains("secret"));
    }
}
