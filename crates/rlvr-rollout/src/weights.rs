//! Checks of a Hugging Face weight directory before an engine is told to load it: a failing
//! `reload_weights` shuts vLLM's server down, so everything that can be checked on disk is
//! checked first.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Result, RolloutError};

/// Largest safetensors header read (its JSON lists names, dtypes, shapes, offsets).
const MAX_HEADER_BYTES: u64 = 64 << 20;

/// What [`check_weight_dir`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightDir {
    /// The directory.
    pub dir: PathBuf,
    /// The `*.safetensors` files, sorted.
    pub safetensors: Vec<PathBuf>,
    /// `config.json`'s `tie_word_embeddings`, when present.
    pub tie_word_embeddings: Option<bool>,
    /// Whether some file holds a tensor named `lm_head.weight`.
    pub has_lm_head: bool,
}

impl WeightDir {
    /// Why the checkpoint's LM head is tied to its embedding, if it is:
    /// `tie_word_embeddings: true`, or no such key and no `lm_head.weight` tensor.
    pub fn tied(&self) -> Option<String> {
        match (self.tie_word_embeddings, self.has_lm_head) {
            (Some(true), _) => Some("config.json has tie_word_embeddings: true".into()),
            (None, false) => Some("config.json has no tie_word_embeddings and no file holds lm_head.weight".into()),
            _ => None,
        }
    }
}

fn bad(dir: &Path, reason: impl Into<String>) -> RolloutError {
    RolloutError::WeightsDir { dir: dir.to_path_buf(), reason: reason.into() }
}

/// Checks that `dir` is a complete Hugging Face checkpoint: a directory with a `config.json`
/// that parses as a JSON object and at least one `*.safetensors` file whose header parses, and
/// reads what decides whether its embeddings are tied.
///
/// # Errors
/// [`RolloutError::WeightsDir`] naming what is missing or unreadable.
pub fn check_weight_dir(dir: &Path) -> Result<WeightDir> {
    if !dir.is_dir() {
        return Err(bad(dir, "is not a directory"));
    }
    if !dir.is_absolute() {
        return Err(bad(dir, "must be an absolute path (the server resolves it in its own working directory)"));
    }
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(|e| bad(dir, format!("config.json: {e}")))?;
    let config: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(dir, format!("config.json is not JSON: {e}")))?;
    let obj = config.as_object().ok_or_else(|| bad(dir, "config.json is not a JSON object"))?;
    let tie_word_embeddings = match obj.get("tie_word_embeddings") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Bool(b)) => Some(*b),
        Some(v) => return Err(bad(dir, format!("config.json: tie_word_embeddings = {v} is not a boolean"))),
    };
    let mut safetensors = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| bad(dir, format!("cannot list: {e}")))?;
    for e in entries {
        let e = e.map_err(|e| bad(dir, format!("cannot list: {e}")))?;
        let p = e.path();
        if p.extension().is_some_and(|x| x == "safetensors") && p.is_file() {
            safetensors.push(p);
        }
    }
    safetensors.sort();
    if safetensors.is_empty() {
        return Err(bad(dir, "holds no *.safetensors file"));
    }
    let mut has_lm_head = false;
    for f in &safetensors {
        let names = safetensors_names(f).map_err(|reason| bad(dir, format!("{}: {reason}", f.display())))?;
        has_lm_head |= names.iter().any(|n| n == "lm_head.weight");
    }
    Ok(WeightDir { dir: dir.to_path_buf(), safetensors, tie_word_embeddings, has_lm_head })
}

/// The tensor names in a safetensors file's header (8-byte little-endian length + JSON).
fn safetensors_names(path: &Path) -> std::result::Result<Vec<String>, String> {
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let file_len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(|e| format!("no safetensors header: {e}"))?;
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER_BYTES || n.saturating_add(8) > file_len {
        return Err(format!("header length {n} exceeds the file ({file_len} bytes) or {MAX_HEADER_BYTES} bytes"));
    }
    let mut buf = Vec::new();
    f.take(n).read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let header: serde_json::Value = serde_json::from_slice(&buf).map_err(|e| format!("header is not JSON: {e}"))?;
    let obj = header.as_object().ok_or("header is not a JSON object")?;
    Ok(obj.keys().filter(|k| k.as_str() != "__metadata__").cloned().collect())
}
