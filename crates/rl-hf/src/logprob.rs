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
    /// the graph; [`token_logprobs_deferred`](Self::token_logprobs_deferred) bounds both.) The value for token `t` is defined only where tokens
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
        let targets = input_ids.f_narrow(1, start, n)?;
        let (lp, ent) = head_logprobs(&hidden.f_narrow(1, start - 1, n)?, self.lm_head_weight(), &targets, params)?;
        Ok(TokenLogProbs { logprobs: lp, entropy: ent })
    }

    /// [`token_logprobs`](Self::token_logprobs) with memory bounded by one chunk: the LM head
    /// and softmax run without gradient, chunk by chunk, and the returned log-probs (and
    /// entropies) are leaves that require gradient; [`DeferredLogProbs::backward`] then
    /// back-propagates a loss computed from them by recomputing each chunk's head and softmax
    /// with gradient, one chunk at a time, before back-propagating through the transformer
    /// body. Peak memory is the body's graph plus one `[B, chunk, V]` chunk (a few of its
    /// temporaries), never the `[B, T, V]` logits and their saved log-softmax; the price is
    /// the head's forward computed twice.
    ///
    /// The values are bit-identical to [`token_logprobs`](Self::token_logprobs)'s, and so are
    /// the gradients up to floating-point summation order (`tests/grad.rs`).
    ///
    /// # Errors
    /// As [`token_logprobs`](Self::token_logprobs).
    pub fn token_logprobs_deferred(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        start: i64,
        params: &rl_core::Valid<LogProbParams>,
    ) -> Result<DeferredLogProbs> {
        let t = input_ids.size().get(1).copied().unwrap_or(0);
        if start < 1 || start >= t.max(1) {
            return Err(input_err("start", format!("1 <= start < T = {t}"), start));
        }
        let hidden = self.hidden_states(input_ids, attention_mask, None)?;
        let n = t - start;
        let part = hidden.f_narrow(1, start - 1, n)?;
        let targets = input_ids.f_narrow(1, start, n)?;
        let detached = part.f_detach()?;
        let (lp, ent) = tch::no_grad(|| head_logprobs(&detached, self.lm_head_weight(), &targets, params))?;
        let grad = part.requires_grad();
        Ok(DeferredLogProbs {
            logprobs: lp.f_detach()?.f_set_requires_grad(grad)?,
            entropy: match ent {
                Some(e) => Some(e.f_detach()?.f_set_requires_grad(grad)?),
                None => None,
            },
            hidden: part,
            targets,
            temperature: params.temperature,
            chunk: params.chunk,
        })
    }
}

/// The LM head, temperature and f32 log-softmax over `hidden` `[B, n, H]`, `chunk` positions
/// at a time: the log-probs `[B, n]` of `targets` `[B, n]` and, when asked, the entropies.
fn head_logprobs(
    hidden: &Tensor,
    head: &Tensor,
    targets: &Tensor,
    params: &LogProbParams,
) -> Result<(Tensor, Option<Tensor>)> {
    let n = hidden.size().get(1).copied().unwrap_or(0);
    let mut lps = Vec::new();
    let mut ents = Vec::new();
    let mut off = 0;
    while off < n {
        let c = params.chunk.min(n - off);
        let (lp, ent) = chunk_logprobs(
            &hidden.f_narrow(1, off, c)?,
            head,
            &targets.f_narrow(1, off, c)?,
            params.temperature,
            params.entropy,
        )?;
        lps.push(lp);
        if let Some(e) = ent {
            ents.push(e);
        }
        off += c;
    }
    Ok((Tensor::f_cat(&lps, 1)?, if params.entropy { Some(Tensor::f_cat(&ents, 1)?) } else { None }))
}

/// One chunk of [`head_logprobs`].
fn chunk_logprobs(
    h: &Tensor,
    head: &Tensor,
    targets: &Tensor,
    temperature: f64,
    entropy: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let mut logits = h.f_linear::<Tensor>(head, None)?.f_to_kind(Kind::Float)?;
    if temperature != 1.0 {
        logits = logits.f_div_scalar(temperature)?;
    }
    let logp = logits.f_log_softmax(-1, Kind::Float)?;
    let lp = logp.f_gather(-1, &targets.f_unsqueeze(-1)?, false)?.f_squeeze_dim(-1)?;
    let ent = if entropy {
        Some(logp.f_exp()?.f_mul(&logp)?.f_sum_dim_intlist(-1, false, Kind::Float)?.f_neg()?)
    } else {
        None
    };
    Ok((lp, ent))
}

/// Output of [`HfModel::token_logprobs_deferred`]: log-probs (and entropies) as gradient
/// leaves, and what their backward pass needs.
#[derive(Debug)]
pub struct DeferredLogProbs {
    /// `[B, T - start]` f32 log-probs, a leaf (requires gradient when the model does).
    pub logprobs: Tensor,
    /// `[B, T - start]` f32 entropies, a leaf, when asked for.
    pub entropy: Option<Tensor>,
    /// Hidden states `[B, T - start, H]` before the head, with the body's graph.
    hidden: Tensor,
    targets: Tensor,
    temperature: f64,
    chunk: i64,
}

impl DeferredLogProbs {
    /// Back-propagates `loss` (a scalar computed from [`logprobs`](Self::logprobs) and
    /// [`entropy`](Self::entropy)) into the parameters of `model`, the model that computed
    /// them: first into the leaves, then chunk by chunk through the LM head (recomputed with
    /// gradient), then through the transformer body. Gradients accumulate in the parameters'
    /// `.grad()` as `loss.backward()` would; calling `loss.backward()` alone would stop at the
    /// leaves.
    ///
    /// # Errors
    /// [`HfError::Input`] for a `loss` that is not a scalar or does not require gradient, or
    /// a model whose head does not match the hidden states; libtorch failures.
    pub fn backward(self, model: &HfModel, loss: &Tensor) -> Result<()> {
        if loss.numel() != 1 {
            return Err(input_err("loss", "a scalar", format!("{:?}", loss.size())));
        }
        if !loss.requires_grad() {
            return Err(input_err("loss", "a tensor that requires gradient", "a constant"));
        }
        let head = model.lm_head_weight();
        let hsize = self.hidden.size();
        if head.size().get(1) != hsize.get(2) {
            return Err(input_err("model", format!("hidden size {:?}", hsize.get(2)), format!("{:?}", head.size())));
        }
        loss.f_backward()?;
        let grad_of = |t: Option<&Tensor>| -> Option<Tensor> { t.map(Tensor::grad).filter(Tensor::defined) };
        let g_lp = grad_of(Some(&self.logprobs));
        let g_ent = grad_of(self.entropy.as_ref());
        if g_lp.is_none() && g_ent.is_none() {
            return Ok(());
        }
        let n = hsize.get(1).copied().unwrap_or(0);
        let mut grads = Vec::new();
        let mut off = 0;
        while off < n {
            let c = self.chunk.min(n - off);
            let h = self.hidden.f_narrow(1, off, c)?.f_detach()?.f_set_requires_grad(true)?;
            let targets = self.targets.f_narrow(1, off, c)?;
            let (lp, ent) = chunk_logprobs(&h, head, &targets, self.temperature, g_ent.is_some())?;
            let mut surrogate = Tensor::f_zeros([], (Kind::Float, lp.device()))?;
            if let Some(g) = &g_lp {
                surrogate = surrogate.f_add(&lp.f_mul(&g.f_narrow(1, off, c)?)?.f_sum(Kind::Float)?)?;
            }
            if let (Some(g), Some(e)) = (&g_ent, &ent) {
                surrogate = surrogate.f_add(&e.f_mul(&g.f_narrow(1, off, c)?)?.f_sum(Kind::Float)?)?;
            }
            surrogate.f_backward()?;
            grads.push(h.grad().f_detach()?);
            off += c;
        }
        if self.hidden.requires_grad() {
            let g = Tensor::f_cat(&grads, 1)?;
            self.hidden.f_mul(&g)?.f_sum(Kind::Float)?.f_backward()?;
        }
        Ok(())
    }
}
