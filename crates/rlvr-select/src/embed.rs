//! A cheap, dependency-free text embedding for demos: hashed character n-grams.
//!
//! GPS needs a fixed embedding per prompt. Real runs pass embeddings from a sentence encoder
//! (the GPS paper uses WordLlama) as candidate features; this module is the built-in stand-in
//! so examples run without a model: every character n-gram (`n_min..=n_max`, with `^`/`$`
//! boundary marks around each word) is hashed (FNV-1a, seeded) to one of `dim` buckets with a
//! hashed sign (the "hashing trick", Weinberger et al. 2009), counts are summed and the vector
//! is L2-normalised. Prompts sharing many substrings (same template, same numbers) get nearby
//! vectors; semantics are not captured.

use crate::error::{invalid, Result, SelectError};
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// Parameters of [`HashedNgramEmbedder`].
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `dim` | 64 | embedding dimension | `>= 1` |
/// | `n_min`, `n_max` | 2, 4 | character n-gram lengths | `1 <= n_min <= n_max` |
/// | `lowercase` | true | fold case first | |
/// | `seed` | 0 | hash seed | |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedParams {
    /// Output dimension.
    pub dim: usize,
    /// Shortest n-gram.
    pub n_min: usize,
    /// Longest n-gram.
    pub n_max: usize,
    /// Lowercase the text first.
    pub lowercase: bool,
    /// Hash seed.
    pub seed: u64,
}

impl Default for EmbedParams {
    fn default() -> Self {
        Self { dim: 64, n_min: 2, n_max: 4, lowercase: true, seed: 0 }
    }
}

/// Hashed character n-gram embedder (see the module docs).
///
/// ```
/// use rlvr_select::embed::{EmbedParams, HashedNgramEmbedder};
/// use rl_core::Params;
/// let e = HashedNgramEmbedder::new(EmbedParams::default().check()?);
/// let a = e.embed("Solve 3x + 5 = 11 for x.");
/// let b = e.embed("Solve 3x + 7 = 13 for x.");
/// let c = e.embed("Name the capital of Australia.");
/// let dot = |u: &[f32], v: &[f32]| u.iter().zip(v).map(|(x, y)| x * y).sum::<f32>();
/// assert!(dot(&a, &b) > dot(&a, &c));
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HashedNgramEmbedder {
    params: Valid<EmbedParams>,
}

impl EmbedParams {
    /// Sets `dim`.
    #[must_use]
    pub fn dim(mut self, dim: usize) -> Self {
        self.dim = dim;
        self
    }

    /// Sets the n-gram lengths.
    #[must_use]
    pub fn ngrams(mut self, n_min: usize, n_max: usize) -> Self {
        self.n_min = n_min;
        self.n_max = n_max;
        self
    }

    /// Sets `lowercase`.
    #[must_use]
    pub fn lowercase(mut self, on: bool) -> Self {
        self.lowercase = on;
        self
    }

    /// Sets the hash seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

impl Params for EmbedParams {
    type Error = SelectError;

    /// # Errors
    /// `dim == 0`, `n_min == 0` or `n_min > n_max`.
    fn validate(&self) -> Result<()> {
        if self.dim == 0 {
            return Err(invalid("dim", 0, "the embedding needs at least one dimension"));
        }
        if self.n_min == 0 {
            return Err(invalid("n_min", 0, "need 1 <= n_min <= n_max"));
        }
        if self.n_min > self.n_max {
            return Err(invalid("n_max", self.n_max, format!("need n_max >= n_min = {}", self.n_min)));
        }
        Ok(())
    }
}

impl HashedNgramEmbedder {
    /// An embedder.
    pub fn new(params: Valid<EmbedParams>) -> Self {
        Self { params }
    }

    /// The output dimension.
    pub fn dim(&self) -> usize {
        self.params.dim
    }

    /// The unit-norm embedding of `text` (all zeros for text without n-grams).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let p = *self.params;
        let mut v = vec![0f32; p.dim];
        let text = if p.lowercase { text.to_lowercase() } else { text.to_string() };
        for word in text.split_whitespace() {
            let chars: Vec<char> = std::iter::once('^').chain(word.chars()).chain(std::iter::once('$')).collect();
            for n in p.n_min..=p.n_max {
                if n > chars.len() {
                    break;
                }
                for w in chars.windows(n) {
                    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ rl_core::seed::splitmix64(p.seed);
                    for c in w {
                        for b in (*c as u32).to_le_bytes() {
                            h ^= u64::from(b);
                            h = h.wrapping_mul(0x0100_0000_01b3);
                        }
                    }
                    let h = rl_core::seed::splitmix64(h);
                    let idx = (h % p.dim as u64) as usize;
                    v[idx] += if h >> 63 == 0 { 1.0 } else { -1.0 };
                }
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            for x in &mut v {
                *x /= norm;
            }
        }
        v
    }

    /// Row-major embeddings of many texts (`texts.len() * dim` floats).
    pub fn embed_all<S: AsRef<str>>(&self, texts: &[S]) -> Vec<f32> {
        texts.iter().flat_map(|t| self.embed(t.as_ref())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_unit_and_deterministic() -> anyhow::Result<()> {
        let e = HashedNgramEmbedder::new(EmbedParams::default().check()?);
        let a = e.embed("What is 2 + 2?");
        assert_eq!(a, e.embed("what is 2 + 2?"));
        assert!((a.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(e.embed("").iter().all(|&x| x == 0.0));
        assert!(EmbedParams::default().dim(0).check().is_err());
        assert!(EmbedParams::default().ngrams(0, 2).check().is_err());
        assert!(EmbedParams::default().ngrams(3, 2).check().is_err());
        let other = HashedNgramEmbedder::new(EmbedParams::default().seed(1).lowercase(false).check()?);
        assert_ne!(other.embed("What is 2 + 2?"), a);
        assert_ne!(other.embed("What"), other.embed("what"));
        Ok(())
    }

    #[test]
    fn embed_all_concatenates_rows() -> anyhow::Result<()> {
        let e = HashedNgramEmbedder::new(EmbedParams::default().dim(16).check()?);
        let all = e.embed_all(&["a b", "c d e"]);
        assert_eq!(all.len(), 32);
        assert_eq!(&all[..16], e.embed("a b").as_slice());
        assert_eq!(&all[16..], e.embed("c d e").as_slice());
        assert!(e.embed_all::<&str>(&[]).is_empty());
        Ok(())
    }
}
