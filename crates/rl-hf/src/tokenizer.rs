//! `tokenizer.json` through the `tokenizers` crate (pure-Rust regex backend), with the special
//! tokens and the chat template text of `tokenizer_config.json` / `chat_template.jinja`.

use std::path::Path;
use std::str::FromStr;

use serde_json::Value;
use tch::{Device, Tensor};

use crate::error::{HfError, Result};

/// File name of the tokenizer.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// File name of the tokenizer config (special tokens, chat template in transformers v4).
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";
/// File name of the chat template as transformers v5 writes it.
pub const CHAT_TEMPLATE_FILE: &str = "chat_template.jinja";

/// One chat message, serialised as `{"role": ..., "content": ...}` in that order (what
/// templates index as `message['role']`, `message['content']`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// A Hugging Face fast tokenizer with its special tokens.
#[derive(Debug)]
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    vocab_size: i64,
    bos: Option<(String, i64)>,
    eos: Option<(String, i64)>,
    pad: Option<(String, i64)>,
    chat_template: Option<String>,
}

fn read_text(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl HfTokenizer {
    /// Loads `dir/tokenizer.json` and, when present, `dir/tokenizer_config.json` (`bos_token`,
    /// `eos_token`, `pad_token` as strings or `{"content": ...}` objects; `chat_template` as a
    /// string) and `dir/chat_template.jinja` (which wins over the config's template, as in
    /// transformers v5).
    ///
    /// # Errors
    /// [`HfError::MissingFile`] without `tokenizer.json`; [`HfError::Corrupt`] for a file that
    /// does not parse, a special token that is not in the vocabulary, or a field of the wrong
    /// type.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let path = dir.join(TOKENIZER_FILE);
        let shown = path.display().to_string();
        let text = read_text(&path)?.ok_or_else(|| HfError::MissingFile { path: shown.clone() })?;
        let inner = tokenizers::Tokenizer::from_str(&text)
            .map_err(|e| HfError::Corrupt { path: shown.clone(), reason: e.to_string() })?;
        let vocab_size = inner.get_vocab_size(true) as i64;
        let cfg_path = dir.join(TOKENIZER_CONFIG_FILE);
        let cfg_shown = cfg_path.display().to_string();
        let corrupt = |reason: String| HfError::Corrupt { path: cfg_shown.clone(), reason };
        let cfg: Value = match read_text(&cfg_path)? {
            Some(t) => serde_json::from_str(&t).map_err(|e| corrupt(format!("not valid JSON: {e}")))?,
            None => Value::Object(serde_json::Map::new()),
        };
        let special = |key: &str| -> Result<Option<(String, i64)>> {
            let token = match cfg.get(key) {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(o)) => match o.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    _ => return Err(corrupt(format!("`{key}` has no string `content`"))),
                },
                Some(other) => return Err(corrupt(format!("`{key}` = {other} is not a token"))),
            };
            let id = inner
                .token_to_id(&token)
                .ok_or_else(|| corrupt(format!("`{key}` = {token:?} is not in the vocabulary of {TOKENIZER_FILE}")))?;
            Ok(Some((token, i64::from(id))))
        };
        let (bos, eos, pad) = (special("bos_token")?, special("eos_token")?, special("pad_token")?);
        let chat_template = match read_text(&dir.join(CHAT_TEMPLATE_FILE))? {
            Some(t) => Some(t),
            None => match cfg.get("chat_template") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => {
                    return Err(corrupt(
                        "`chat_template` is not a string (named template lists are not supported)".into(),
                    ))
                }
            },
        };
        Ok(Self { inner, vocab_size, bos, eos, pad, chat_template })
    }

    /// Vocabulary size including added tokens.
    #[must_use]
    pub fn vocab_size(&self) -> i64 {
        self.vocab_size
    }

    /// `(token, id)` of `bos_token`, if the config names one.
    #[must_use]
    pub fn bos(&self) -> Option<(&str, i64)> {
        self.bos.as_ref().map(|(t, i)| (t.as_str(), *i))
    }

    /// `(token, id)` of `eos_token`, if the config names one.
    #[must_use]
    pub fn eos(&self) -> Option<(&str, i64)> {
        self.eos.as_ref().map(|(t, i)| (t.as_str(), *i))
    }

    /// `(token, id)` of `pad_token`, if the config names one.
    #[must_use]
    pub fn pad(&self) -> Option<(&str, i64)> {
        self.pad.as_ref().map(|(t, i)| (t.as_str(), *i))
    }

    /// The chat template's Jinja source, if any.
    #[must_use]
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// Renders the chat template for `messages` (any serialisable list of objects, usually
    /// `{"role", "content"}`), as transformers' `apply_chat_template(.., tokenize=False)`:
    /// Jinja with `trim_blocks` and `lstrip_blocks`, loop controls, `tojson`, a
    /// `raise_exception(message)` function, and `bos_token`, `eos_token`, `pad_token` and
    /// `add_generation_prompt` in the context. Keys keep their serialisation order in
    /// `tojson` (as Python's dicts do) — a [`ChatMessage`] writes `role` then `content`; a
    /// `serde_json::Value` object arrives key-sorted. Python string methods (`.strip()`, ...)
    /// that some templates call are not available.
    ///
    /// # Errors
    /// [`HfError::ChatTemplate`] without a template, for a template that does not compile or
    /// fails (a `raise_exception` message is included).
    pub fn apply_chat_template<M: serde::Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let src = self.chat_template.as_deref().ok_or_else(|| HfError::ChatTemplate {
            reason: "the tokenizer has no chat_template (tokenizer_config.json or chat_template.jinja)".into(),
        })?;
        let err = |e: minijinja::Error| {
            let mut reason = e.to_string();
            let mut src_err = std::error::Error::source(&e);
            while let Some(inner) = src_err {
                reason.push_str(&format!(": {inner}"));
                src_err = inner.source();
            }
            HfError::ChatTemplate { reason }
        };
        let mut env = minijinja::Environment::new();
        let syntax =
            minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build().map_err(err)?;
        env.set_syntax(syntax);
        env.add_function("raise_exception", |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, format!("raise_exception: {msg}")))
        });
        env.add_template("chat", src).map_err(err)?;
        let tmpl = env.get_template("chat").map_err(err)?;
        let token = |t: &Option<(String, i64)>| t.as_ref().map(|(s, _)| s.clone());
        let ctx = minijinja::context! {
            messages => minijinja::Value::from(minijinja::value::Serde(messages)),
            add_generation_prompt => add_generation_prompt,
            bos_token => token(&self.bos),
            eos_token => token(&self.eos),
            pad_token => token(&self.pad),
        };
        tmpl.render(ctx).map_err(err)
    }

    /// The id of `token`, if it is in the vocabulary.
    #[must_use]
    pub fn token_to_id(&self, token: &str) -> Option<i64> {
        self.inner.token_to_id(token).map(i64::from)
    }

    /// Token ids of `text`; `add_special_tokens` applies the tokenizer's post-processor (as
    /// transformers' `encode(.., add_special_tokens=...)`).
    ///
    /// # Errors
    /// [`HfError::Tokenizer`] when the tokenizer fails.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<i64>> {
        let enc =
            self.inner.encode(text, add_special_tokens).map_err(|e| HfError::Tokenizer { reason: e.to_string() })?;
        Ok(enc.get_ids().iter().map(|&i| i64::from(i)).collect())
    }

    /// The text of `ids`, optionally without special tokens.
    ///
    /// # Errors
    /// [`HfError::TokenOutOfRange`] (row 0, the position in `ids`) for an id outside
    /// `[0, vocab_size)`; [`HfError::Tokenizer`] when the tokenizer fails.
    pub fn decode(&self, ids: &[i64], skip_special_tokens: bool) -> Result<String> {
        let mut v = Vec::with_capacity(ids.len());
        for (position, &id) in ids.iter().enumerate() {
            if id < 0 || id >= self.vocab_size {
                return Err(HfError::TokenOutOfRange {
                    row: 0,
                    position: position as i64,
                    id,
                    vocab_size: self.vocab_size,
                });
            }
            v.push(id as u32);
        }
        self.inner.decode(&v, skip_special_tokens).map_err(|e| HfError::Tokenizer { reason: e.to_string() })
    }

    /// Encodes `texts` (no special tokens added) and left-pads them with the pad token
    /// (`pad_id` when the tokenizer has none) into `(input_ids, attention_mask)` `[B, T]`.
    ///
    /// # Errors
    /// As [`encode`](Self::encode) and [`crate::left_pad`] (an empty text is an error).
    pub fn encode_left_padded(&self, texts: &[&str], pad_id: i64, device: Device) -> Result<(Tensor, Tensor)> {
        let rows = texts.iter().map(|t| self.encode(t, false)).collect::<Result<Vec<_>>>()?;
        let pad = self.pad.as_ref().map_or(pad_id, |(_, i)| *i);
        crate::model::left_pad(&rows, pad, device)
    }
}
