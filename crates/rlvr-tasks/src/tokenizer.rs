//! A character-level tokenizer with a fixed vocabulary for the embedded tasks.

use serde::{Deserialize, Serialize};

use crate::error::{Result, TaskError};
use crate::verdict::MalformedReason;

/// The text characters, in id order starting at [`CharTokenizer::FIRST_TEXT_ID`].
pub const ALPHABET: &str = "0123456789+-*/()=,:> ";

/// A character-level tokenizer over a fixed 24-token vocabulary.
///
/// | id | token |
/// |---|---|
/// | 0 | `<pad>` |
/// | 1 | `<bos>` |
/// | 2 | `<eos>` |
/// | 3–12 | `0`–`9` |
/// | 13–16 | `+ - * /` |
/// | 17–18 | `( )` |
/// | 19 | `=` |
/// | 20–23 | `,` `:` `>` and space (separators of the prompt formats) |
///
/// Ids are `i64`, the index type of libtorch, so they feed `rl-lm` directly. `decode(encode(s))
/// == s` for every string over [`ALPHABET`] (property-tested).
///
/// ```
/// use rlvr_tasks::CharTokenizer;
/// let tok = CharTokenizer::new();
/// let ids = tok.encode_prompt("3,5,2>16:")?;
/// assert_eq!(ids[0], CharTokenizer::BOS);
/// assert_eq!(tok.decode(&ids[1..])?, "3,5,2>16:");
/// let done = tok.encode_completion("(3+5)*2")?;
/// assert_eq!(*done.last().unwrap(), CharTokenizer::EOS);
/// assert_eq!(tok.completion_text(&done), Ok("(3+5)*2".to_string()));
/// # Ok::<(), rlvr_tasks::TaskError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CharTokenizer;

impl CharTokenizer {
    /// Padding id.
    pub const PAD: i64 = 0;
    /// Beginning-of-sequence id (starts every prompt).
    pub const BOS: i64 = 1;
    /// End-of-sequence id (ends every completion; use it as the stop token).
    pub const EOS: i64 = 2;
    /// Id of the first text character (`'0'`).
    pub const FIRST_TEXT_ID: i64 = 3;
    /// Vocabulary size.
    pub const VOCAB_SIZE: i64 = Self::FIRST_TEXT_ID + ALPHABET.len() as i64;

    /// The tokenizer.
    pub const fn new() -> Self {
        Self
    }

    /// Vocabulary size (24).
    pub const fn vocab_size(&self) -> i64 {
        Self::VOCAB_SIZE
    }

    /// The id of a text character.
    pub fn id_of(&self, ch: char) -> Option<i64> {
        ALPHABET.chars().position(|c| c == ch).map(|i| Self::FIRST_TEXT_ID + i as i64)
    }

    /// The text character of an id (`None` for special or unknown ids).
    pub fn char_of(&self, id: i64) -> Option<char> {
        let i = usize::try_from(id.checked_sub(Self::FIRST_TEXT_ID)?).ok()?;
        ALPHABET.as_bytes().get(i).map(|&b| char::from(b))
    }

    /// A printable name of any id: the character, `<pad>`, `<bos>`, `<eos>` or `<unk:ID>`.
    pub fn token_name(&self, id: i64) -> String {
        match id {
            Self::PAD => "<pad>".into(),
            Self::BOS => "<bos>".into(),
            Self::EOS => "<eos>".into(),
            _ => self.char_of(id).map_or_else(|| format!("<unk:{id}>"), String::from),
        }
    }

    /// Encodes text (no special tokens).
    ///
    /// # Errors
    /// [`TaskError::UnknownChar`] for the first character outside [`ALPHABET`].
    pub fn encode(&self, text: &str) -> Result<Vec<i64>> {
        text.chars()
            .enumerate()
            .map(|(position, ch)| self.id_of(ch).ok_or(TaskError::UnknownChar { ch, position }))
            .collect()
    }

    /// `BOS` followed by the encoded prompt text.
    ///
    /// # Errors
    /// As [`encode`](Self::encode).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<i64>> {
        let mut ids = vec![Self::BOS];
        ids.extend(self.encode(text)?);
        Ok(ids)
    }

    /// The encoded completion text followed by `EOS` (supervised targets).
    ///
    /// # Errors
    /// As [`encode`](Self::encode).
    pub fn encode_completion(&self, text: &str) -> Result<Vec<i64>> {
        let mut ids = self.encode(text)?;
        ids.push(Self::EOS);
        Ok(ids)
    }

    /// Decodes text ids.
    ///
    /// # Errors
    /// [`TaskError::NotATextToken`] for the first special or unknown id.
    pub fn decode(&self, ids: &[i64]) -> Result<String> {
        ids.iter()
            .enumerate()
            .map(|(position, &id)| self.char_of(id).ok_or(TaskError::NotATextToken { id, position }))
            .collect()
    }

    /// The text of a generated completion: the tokens before the first `EOS`.
    ///
    /// Never fails on model output; problems are reasons for a 0 reward.
    ///
    /// # Errors
    /// [`MalformedReason::MissingEos`] when there is no `EOS` (a truncated generation),
    /// [`MalformedReason::BadToken`] for a special or unknown id before it.
    pub fn completion_text(&self, ids: &[i64]) -> Result<String, MalformedReason> {
        let end = ids.iter().position(|&id| id == Self::EOS).ok_or(MalformedReason::MissingEos)?;
        ids[..end]
            .iter()
            .enumerate()
            .map(|(position, &id)| self.char_of(id).ok_or(MalformedReason::BadToken { id, position }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_layout() {
        let t = CharTokenizer::new();
        assert_eq!(t.vocab_size(), 24);
        assert_eq!(t.id_of('0'), Some(3));
        assert_eq!(t.id_of('9'), Some(12));
        assert_eq!(t.id_of(' '), Some(23));
        assert_eq!(t.id_of('x'), None);
        assert_eq!(t.char_of(2), None);
        assert_eq!(t.char_of(24), None);
        assert_eq!(t.char_of(-5), None);
        assert_eq!(t.char_of(i64::MIN), None);
        assert_eq!(t.token_name(1), "<bos>");
        assert_eq!(t.token_name(99), "<unk:99>");
        for id in 0..t.vocab_size() {
            if let Some(c) = t.char_of(id) {
                assert_eq!(t.id_of(c), Some(id));
            }
        }
    }

    #[test]
    fn errors_name_the_offender() {
        let t = CharTokenizer::new();
        assert_eq!(t.encode("12a"), Err(TaskError::UnknownChar { ch: 'a', position: 2 }));
        assert_eq!(t.decode(&[3, 1]), Err(TaskError::NotATextToken { id: 1, position: 1 }));
        assert_eq!(t.completion_text(&[3, 4]), Err(MalformedReason::MissingEos));
        assert_eq!(t.completion_text(&[3, 0, 2]), Err(MalformedReason::BadToken { id: 0, position: 1 }));
        assert_eq!(t.completion_text(&[3, 2, 99]), Ok("0".into()));
        assert_eq!(t.completion_text(&[2]), Ok(String::new()));
    }
}
