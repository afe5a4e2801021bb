//! Per-token log-probabilities (and entropies) of given tokens, with gradient, the LM head and
//! softmax applied in chunks of positions.

use rl_core::Params;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::error::{input_err, HfError, Result};
use crate::model::HfModel;

/// Options of [`HfModel::token_logprobs`].
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `temperature` | 1.0 | log-probs of `softmax(logits / temperature)` | > 0, finite |
/// | `chunk` | 256 | positions per LM-head + log-softmax chunk | ≥ 1 |
/// | `entropy` | false | also return per-token entropies | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogProbParams {
    /// Sampling temperature the log-probs are taken at.
    pub temperature: f64,
    /// Positions per chunk.
    pub chunk: i64,
    /// Whether to compute entropies.
    pub entropy: bool,
}

impl Default for LogProbParams {
    fn default() -> Self {
        Self { temperature: 1.0, chunk: 256, entropy: false }
    }
}

impl LogProbParams {
    /// Sets `temperature`.
    #[must_use]
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }
    /// Sets `chunk`.
    #[must_use]
    pub fn chunk(mut self, c: i64) -> Self {
        self.chunk = c;
        self
    }
    /// Sets `entropy`.
    #[must_use]
    pub fn entropy(mut self, on: bool) -> Self {
        self.entropy = on;
        self
    }
}

impl Params for LogProbParams {
    type Error = HfError;
    fn validate(&self) -> Result<()> {
        let bad = |name: &str, value: String, reason: &str| HfError::InvalidParameter {
            name: name.into(),
            value,
            reason: reason.into(),
        };
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(bad("temperature", self.temperature.to_string(), "must be finite and > 0"));
        }
        if self.chunk < 1 {
            return Err(bad("chunk", self.chunk.to_string(), "must be >= 1"));
        }
        Ok(())
    }
}

/// Output of [`HfModel::token_logprobs`].
#[derive(Debug)]
pub struct TokenLogProbs {
    /// `[B, T - start]` f32: `log p(input_ids[:, t] | input_ids[:, < t])` for `t >= start`.
    pub logprobs: Tensor,
    /// `[B, T - start]` f32 entropies of the same distributions, when asked for.
    pub entropy: Option<Tensor>,
}

impl HfModel {
    /// Log-probs of the tokens `input_ids[:, start..]` given everything before them, with
    /// gradient to the parameters (training mode), for a left-padded batch.
    ///
    /// The hidden states are computed once; the LM head, the temperature and the f32
    /// log-softmax are applied `params.chunk` positions at a time, so the forward never holds
    /// the `[B, T, V]` logits at once. (With gradient, autograd still keeps each chunk's
    /// log-softmax output for the backward pass: this bounds the forward's temporaries, not
    /// the graph; see `docs/rl-hf.md`.) The value for token `t` is defined only where tokens
    /// `t - 1` and `t` are both real (not padding): elsewhere it is finite but meaningless, so
    /// multiply by the caller's response mask (a response after a non-empty prompt always
    /// qualifies).
    ///
    /// # Errors
    /// [`HfError::Input`] for `start` outside `1..T`, and what [`forward`](Self::forward)
    /// returns.
    pub fn token_logprobs(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        start: i64,
        params: &rl_core::Valid<LogProbParams>,
    ) -> Result<TokenLogProbs> {
        let t = input_ids.size().get(1).copied().unwrap_or(0);
        if start < 1 || start >= t.max(1) {
            return Err(input_err("start", format!("1 <= start < T = {t}"), start));
        }
        let hidden = self.hidden_states(input_ids, attention_mask, None)?;
        let n = t - start;
        let head = self.lm_head_weight();
        let mut lps = Vec::new();
        let mut ents = Vec::new();
        let mut off = 0;
        while off < n {
            let c = params.chunk.min(n - off);
            let h = hidden.f_narrow(1, start - 1 + off, c)?;
            let target = input_ids.f_narrow(1, start + off, c)?.f_unsqueeze(-1)?;
            let mut logits = h.f_linear::<Tensor>(head, None)?.f_to_kind(Kind::Float)?;
            if params.temperature != 1.0 {
                logits = logits.f_div_scalar(params.temperature)?;
            }
            let logp = logits.f_log_softmax(-1, Kind::Float)?;
            lps.push(logp.f_gather(-1, &target, false)?.f_squeeze_dim(-1)?);
            if params.entropy {
                ents.push(logp.f_exp()?.f_mul(&logp)?.f_sum_dim_intlist(-1, false, Kind::Float)?.f_neg()?);
            }
            off += c;
        }
        Ok(TokenLogProbs {
            logprobs: Tensor::f_cat(&lps, 1)?,
            entropy: if params.entropy { Some(Tensor::f_cat(&ents, 1)?) } else { None },
        })
    }
}
