//! The model configuration.

use serde::{Deserialize, Serialize};

use crate::error::{LmError, Result};

/// Architecture of a [`TransformerLm`](crate::TransformerLm).
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `vocab_size` | 32 | number of token ids | ≥ 1 |
/// | `d_model` | 128 | residual width | ≥ 1, divisible by `n_heads` |
/// | `n_layers` | 4 | transformer blocks | ≥ 1 |
/// | `n_heads` | 4 | attention heads per block | ≥ 1 |
/// | `d_ff` | 512 | hidden width of each block's MLP | ≥ 1 |
/// | `max_len` | 128 | learned positions: longest prompt + response | ≥ 1 |
/// | `dropout` | 0.0 | dropout probability; only 0 is supported (RLVR log-prob ratios need a deterministic forward) | 0 |
/// | `tie_embeddings` | `true` | LM head shares the token embedding matrix | |
/// | `layer_norm_eps` | 1e-5 | LayerNorm epsilon | > 0 |
/// | `init_std` | 0.02 | std of the normal init of embeddings and linear weights (GPT-2) | > 0 |
///
/// ```
/// use rl_core::Params;
/// let cfg = rl_lm::LmConfig::new(24, 64).d_model(64).n_layers(2).n_heads(4).d_ff(256).check()?;
/// assert_eq!(cfg.head_dim(), 16);
/// assert!(rl_lm::LmConfig::new(24, 64).n_heads(5).check().is_err()); // 128 % 5 != 0
/// # Ok::<(), rl_lm::LmError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LmConfig {
    /// Number of token ids.
    pub vocab_size: i64,
    /// Residual stream width.
    pub d_model: i64,
    /// Number of transformer blocks.
    pub n_layers: i64,
    /// Attention heads per block.
    pub n_heads: i64,
    /// Hidden width of the MLPs.
    pub d_ff: i64,
    /// Maximum sequence length (size of the position table).
    pub max_len: i64,
    /// Dropout probability; must be 0.
    pub dropout: f64,
    /// Tie the LM head to the token embedding.
    pub tie_embeddings: bool,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// Standard deviation of the initial weights.
    pub init_std: f64,
}

impl Default for LmConfig {
    fn default() -> Self {
        Self {
            vocab_size: 32,
            d_model: 128,
            n_layers: 4,
            n_heads: 4,
            d_ff: 512,
            max_len: 128,
            dropout: 0.0,
            tie_embeddings: true,
            layer_norm_eps: 1e-5,
            init_std: 0.02,
        }
    }
}

macro_rules! setter {
    ($(#[$doc:meta] $name:ident: $ty:ty),* $(,)?) => {
        $(
            #[$doc]
            #[must_use]
            pub fn $name(mut self, v: $ty) -> Self {
                self.$name = v;
                self
            }
        )*
    };
}

impl LmConfig {
    /// The default architecture with the given vocabulary size and maximum length.
    pub fn new(vocab_size: i64, max_len: i64) -> Self {
        Self { vocab_size, max_len, ..Self::default() }
    }

    setter! {
        /// Sets `d_model`.
        d_model: i64,
        /// Sets `n_layers`.
        n_layers: i64,
        /// Sets `n_heads`.
        n_heads: i64,
        /// Sets `d_ff`.
        d_ff: i64,
        /// Sets `dropout` (only 0 passes [`check`](rl_core::Params::check)).
        dropout: f64,
        /// Sets `tie_embeddings`.
        tie_embeddings: bool,
        /// Sets `layer_norm_eps`.
        layer_norm_eps: f64,
        /// Sets `init_std`.
        init_std: f64,
    }

    /// Width of one attention head, `d_model / n_heads`.
    pub fn head_dim(&self) -> i64 {
        if self.n_heads > 0 {
            self.d_model / self.n_heads
        } else {
            0
        }
    }

    fn validate_fields(&self) -> Result<()> {
        let bad = |name: &str, value: String, reason: &str| LmError::InvalidConfig {
            name: name.to_owned(),
            value,
            reason: reason.to_owned(),
        };
        for (name, v) in [
            ("vocab_size", self.vocab_size),
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("d_ff", self.d_ff),
            ("max_len", self.max_len),
        ] {
            if v < 1 {
                return Err(bad(name, v.to_string(), "must be at least 1"));
            }
        }
        if self.d_model % self.n_heads != 0 {
            return Err(bad(
                "d_model",
                self.d_model.to_string(),
                &format!("must be divisible by n_heads = {}", self.n_heads),
            ));
        }
        if self.dropout != 0.0 {
            return Err(bad(
                "dropout",
                self.dropout.to_string(),
                "only 0 is supported: RLVR importance ratios need a deterministic forward pass",
            ));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(bad("layer_norm_eps", self.layer_norm_eps.to_string(), "must be finite and > 0"));
        }
        if !(self.init_std.is_finite() && self.init_std > 0.0) {
            return Err(bad("init_std", self.init_std.to_string(), "must be finite and > 0"));
        }
        Ok(())
    }

    /// Number of parameters of a model with this config.
    pub fn num_parameters(&self) -> i64 {
        let (v, d, f, l) = (self.vocab_size, self.d_model, self.d_ff, self.n_layers);
        let block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d);
        let head = if self.tie_embeddings { 0 } else { v * d };
        v * d + self.max_len * d + l * block + 2 * d + head
    }
}

impl rl_core::Params for LmConfig {
    type Error = LmError;

    /// Every field in range; [`LmError::InvalidConfig`] names the first bad one.
    fn validate(&self) -> Result<()> {
        self.validate_fields()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn check_names_the_bad_field() {
        assert!(LmConfig::default().check().is_ok());
        let e = LmConfig::default().n_heads(3).check().unwrap_err();
        assert!(matches!(e, LmError::InvalidConfig { ref name, .. } if name == "d_model"), "{e}");
        let e = LmConfig::default().dropout(0.1).check().unwrap_err();
        assert!(matches!(e, LmError::InvalidConfig { ref name, .. } if name == "dropout"));
        let e = LmConfig::new(0, 8).check().unwrap_err();
        assert!(matches!(e, LmError::InvalidConfig { ref name, .. } if name == "vocab_size"));
        let e = LmConfig::default().layer_norm_eps(f64::NAN).check().unwrap_err();
        assert!(matches!(e, LmError::InvalidConfig { ref name, .. } if name == "layer_norm_eps"));
    }

    #[test]
    fn serde_round_trip_and_defaults() {
        let cfg = LmConfig::new(24, 64).d_model(32).tie_embeddings(false);
        let s = serde_json::to_string(&cfg).unwrap();
        let back: LmConfig = serde_json::from_str(&s).unwrap();
        assert_eq!(cfg, back);
        let partial: LmConfig = serde_json::from_str(r#"{"vocab_size": 10}"#).unwrap();
        assert_eq!(partial.vocab_size, 10);
        assert_eq!(partial.d_model, 128);
        assert!(serde_json::from_str::<LmConfig>(r#"{"vocab": 10}"#).is_err());
    }
}
