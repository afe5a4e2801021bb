//! A content-addressed response cache: every chat call of a run is stored under the SHA-256 of
//! its canonical request, so any run replays offline, bit for bit, without an endpoint.
//!
//! An entry is one JSON file `<dir>/<key>.json`:
//!
//! ```text
//! {"format_version": 1, "key": "<sha256>", "attempt": 0,
//!  "request": {<OpenAI request body>},
//!  "response": {<OpenAI response body>},
//!  "provenance": {"source": "llm" | "hand_written" | "test_fixture", "by": "...", "note": "...", "recorded_unix": 1764000000}}
//! ```
//!
//! `provenance.source` says who wrote the answer: a language model (`llm`, `by` = model and
//! endpoint), a person (`hand_written`: an encoder written by hand and passed through the
//! pipeline so that it is verified and replayed like an LLM's answer — never to be reported as
//! an LLM's), or a test fixture. Loading checks that the stored request hashes to the key, so a
//! hand-edited request is detected ([`LareError::Corrupt`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::client::{canonical_json, ChatBackend, ChatRequest, ChatResponse};
use crate::error::{LareError, Result};

/// Who wrote a cached answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A language model answered.
    Llm,
    /// A person wrote the answer (no LLM was involved).
    HandWritten,
    /// A fixture written for tests.
    TestFixture,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Source::Llm => "llm",
            Source::HandWritten => "hand_written",
            Source::TestFixture => "test_fixture",
        })
    }
}

/// Where a cached answer came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Who wrote it.
    pub source: Source,
    /// The model and endpoint, or the person / file.
    pub by: String,
    /// Free text.
    #[serde(default)]
    pub note: String,
    /// When it was recorded (Unix seconds).
    #[serde(default)]
    pub recorded_unix: u64,
}

impl Provenance {
    /// A provenance record stamped now.
    pub fn new(source: Source, by: impl Into<String>, note: impl Into<String>) -> Self {
        let recorded_unix =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        Self { source, by: by.into(), note: note.into(), recorded_unix }
    }
}

/// One cached call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// Entry format.
    pub format_version: u32,
    /// SHA-256 of the canonical request (with the attempt number when > 0).
    pub key: String,
    /// Which call of the same request this is (servers that return fewer choices than asked).
    pub attempt: usize,
    /// The request body.
    pub request: serde_json::Value,
    /// The response body.
    pub response: serde_json::Value,
    /// Who wrote the answer.
    pub provenance: Provenance,
}

const ENTRY_FORMAT: u32 = 1;

/// What the cache does on a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Answer from the cache only; a miss is [`LareError::CacheMiss`] (CI, results).
    #[default]
    Replay,
    /// Answer from the cache; call the backend on a miss and store its answer.
    RecordMissing,
    /// Always call the backend and store (overwrite) its answer.
    Live,
}

/// A directory of [`CacheEntry`] files.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    dir: PathBuf,
}

impl ResponseCache {
    /// A cache in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The entry stored under `key`, if any.
    ///
    /// # Errors
    /// [`LareError::Corrupt`] for a file that does not parse, another format version, or a
    /// stored request that does not hash to `key`.
    pub fn get(&self, key: &str) -> Result<Option<CacheEntry>> {
        let path = self.path(key);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let shown = path.display().to_string();
        let corrupt = |reason: String| LareError::Corrupt { path: shown.clone(), reason };
        let entry: CacheEntry = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if entry.format_version != ENTRY_FORMAT {
            return Err(corrupt(format!("format_version {} (this code reads {ENTRY_FORMAT})", entry.format_version)));
        }
        let mut body = entry.request.clone();
        if entry.attempt > 0 {
            body["x_attempt"] = serde_json::json!(entry.attempt);
        }
        let digest = sha2::Sha256::digest_hex(&canonical_json(&body));
        if digest != key || entry.key != key {
            return Err(corrupt("the stored request does not hash to the file's key (edited or misnamed)".into()));
        }
        Ok(Some(entry))
    }

    /// Stores `entry` (through a temporary file renamed into place).
    ///
    /// # Errors
    /// I/O failures.
    pub fn put(&self, entry: &CacheEntry) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(&entry.key);
        let tmp = self.dir.join(format!(".{}.tmp-{}", entry.key, std::process::id()));
        std::fs::write(&tmp, serde_json::to_string_pretty(entry)?)?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// Number of entries.
    ///
    /// # Errors
    /// I/O failures.
    pub fn len(&self) -> Result<usize> {
        if !self.dir.exists() {
            return Ok(0);
        }
        Ok(std::fs::read_dir(&self.dir)?
            .filter_map(std::result::Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count())
    }

    /// Whether the cache holds no entry.
    ///
    /// # Errors
    /// I/O failures.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

trait DigestHex {
    fn digest_hex(s: &str) -> String;
}

impl DigestHex for sha2::Sha256 {
    fn digest_hex(s: &str) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// What one [`CachedChat::complete`] returned, with where each answer came from.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedAnswer {
    /// The choices (at least `n`; exactly `n` are used).
    pub choices: Vec<String>,
    /// The cache keys of the calls that produced them.
    pub keys: Vec<String>,
    /// The provenance of each call.
    pub provenance: Vec<Provenance>,
}

/// A chat backend behind a [`ResponseCache`].
#[derive(Debug)]
pub struct CachedChat {
    cache: ResponseCache,
    mode: CacheMode,
    backend: Option<Box<dyn ChatBackend>>,
    source: Source,
    note: String,
}

impl CachedChat {
    /// A replay-only chat over `cache`.
    pub fn replay(cache: ResponseCache) -> Self {
        Self { cache, mode: CacheMode::Replay, backend: None, source: Source::Llm, note: String::new() }
    }

    /// A chat that calls `backend` according to `mode` and labels new entries with `source`.
    pub fn new(
        cache: ResponseCache,
        mode: CacheMode,
        backend: Box<dyn ChatBackend>,
        source: Source,
        note: impl Into<String>,
    ) -> Self {
        Self { cache, mode, backend: Some(backend), source, note: note.into() }
    }

    /// The cache.
    pub fn cache(&self) -> &ResponseCache {
        &self.cache
    }

    fn call(&mut self, request: &ChatRequest, attempt: usize) -> Result<(Vec<String>, String, Provenance)> {
        let key = request.cache_key(attempt);
        if self.mode != CacheMode::Live {
            if let Some(entry) = self.cache.get(&key)? {
                let resp = ChatResponse::from_raw(entry.response)?;
                return Ok((resp.choices, key, entry.provenance));
            }
            if self.mode == CacheMode::Replay || self.backend.is_none() {
                return Err(LareError::CacheMiss { key, dir: self.cache.dir.display().to_string() });
            }
        }
        let backend = self
            .backend
            .as_mut()
            .ok_or_else(|| LareError::CacheMiss { key: key.clone(), dir: self.cache.dir.display().to_string() })?;
        let resp = backend.complete(request)?;
        let provenance = Provenance::new(self.source, backend.describe(), self.note.clone());
        let entry = CacheEntry {
            format_version: ENTRY_FORMAT,
            key: key.clone(),
            attempt,
            request: request.body(),
            response: resp.raw.clone(),
            provenance: provenance.clone(),
        };
        self.cache.put(&entry)?;
        Ok((resp.choices, key, provenance))
    }

    /// Answers `request` with at least `request.n` choices: from the cache, or from the backend
    /// (topping up with repeated calls, attempt 1, 2, ..., when a server returns fewer choices
    /// than asked; at most `n` calls).
    ///
    /// # Errors
    /// [`LareError::CacheMiss`] in replay mode; backend failures; [`LareError::BadResponse`]
    /// when `n` calls still give fewer than `n` choices.
    pub fn complete(&mut self, request: &ChatRequest) -> Result<CachedAnswer> {
        let mut out = CachedAnswer { choices: vec![], keys: vec![], provenance: vec![] };
        let mut attempt = 0;
        while out.choices.len() < request.n.max(1) {
            if attempt >= request.n.max(1) {
                return Err(LareError::BadResponse(format!(
                    "asked for {} choices, got {} in {attempt} calls",
                    request.n,
                    out.choices.len()
                )));
            }
            let (choices, key, prov) = self.call(request, attempt)?;
            out.choices.extend(choices);
            out.keys.push(key);
            out.provenance.push(prov);
            attempt += 1;
        }
        out.choices.truncate(request.n.max(1));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::client::{Message, ScriptedChat, ScriptedTurn};
    use super::*;

    fn req(n: usize) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![Message::user("q")],
            temperature: 1.0,
            n,
            seed: Some(1),
            json_mode: true,
        }
    }

    #[test]
    fn record_then_replay_then_detect_edits() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::new(dir.path());
        let backend = ScriptedChat::new(
            "scripted",
            vec![
                ScriptedTurn { expect: None, answers: vec!["a".into()] }, // a server that returns 1 of 2
                ScriptedTurn { expect: None, answers: vec!["b".into()] },
            ],
        );
        let mut chat =
            CachedChat::new(cache.clone(), CacheMode::RecordMissing, Box::new(backend), Source::TestFixture, "t");
        let a = chat.complete(&req(2)).unwrap();
        assert_eq!(a.choices, vec!["a", "b"]);
        assert_eq!(a.keys.len(), 2);
        assert_eq!(cache.len().unwrap(), 2);
        // replay without a backend: same answers, same provenance
        let mut replay = CachedChat::replay(cache.clone());
        let b = replay.complete(&req(2)).unwrap();
        assert_eq!((b.choices, b.keys), (a.choices, a.keys.clone()));
        assert_eq!(b.provenance[0].source, Source::TestFixture);
        // a request nobody answered is a typed miss
        assert!(matches!(replay.complete(&req(3)), Err(LareError::CacheMiss { .. })));
        // an edited entry is detected
        let path = dir.path().join(format!("{}.json", a.keys[0]));
        let text = std::fs::read_to_string(&path).unwrap().replace("\"q\"", "\"edited\"");
        std::fs::write(&path, text).unwrap();
        assert!(matches!(replay.complete(&req(2)), Err(LareError::Corrupt { .. })));
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(cache.get(&a.keys[0]), Err(LareError::Corrupt { .. })));
    }

    #[test]
    fn a_server_that_never_returns_enough_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let turns = (0..3).map(|_| ScriptedTurn { expect: None, answers: vec![] }).collect();
        let mut chat = CachedChat::new(
            ResponseCache::new(dir.path()),
            CacheMode::Live,
            Box::new(ScriptedChat::new("empty", turns)),
            Source::TestFixture,
            "",
        );
        assert!(matches!(chat.complete(&req(3)), Err(LareError::BadResponse(_))));
    }
}
