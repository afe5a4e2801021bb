//! Batched KV-cached sampling of left-padded prompts with behaviour log-probs.

use rand::Rng;
use rl_core::Params;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::error::{HfError, Result};
use crate::model::{HfModel, KvCache};

/// Parameters of [`HfModel::sample`].
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `max_new_tokens` | 32 | response length cap | ≥ 1 |
/// | `temperature` | 1.0 | sampling distribution `softmax(logits / temperature)` | > 0, finite |
/// | `top_p` | 1.0 | nucleus: the smallest set of most likely tokens whose mass reaches `top_p` | (0, 1] |
/// | `top_k` | 0 | only the `top_k` most likely tokens (0 = all) | ≥ 0 |
/// | `greedy` | false | arg-max instead of sampling (`temperature` then only affects the log-probs) | |
/// | `stop_ids` | `[]` | a row ends after emitting one of these (it is part of the response) | in vocab |
/// | `pad_id` | 0 | fills finished rows on the right | in vocab |
///
/// The RLVR papers roll out at temperature 1.0, top-p 1.0, no top-k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SampleParams {
    /// Maximum number of new tokens per row.
    pub max_new_tokens: i64,
    /// Softmax temperature.
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// Top-k cut (0 = off).
    pub top_k: i64,
    /// Arg-max decoding.
    pub greedy: bool,
    /// Tokens that end a row.
    pub stop_ids: Vec<i64>,
    /// Padding id after a row ends.
    pub pad_id: i64,
}

impl Default for SampleParams {
    fn default() -> Self {
        Self {
            max_new_tokens: 32,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            greedy: false,
            stop_ids: Vec::new(),
            pad_id: 0,
        }
    }
}

impl SampleParams {
    /// Sets `max_new_tokens`.
    #[must_use]
    pub fn max_new_tokens(mut self, n: i64) -> Self {
        self.max_new_tokens = n;
        self
    }
    /// Sets `temperature`.
    #[must_use]
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }
    /// Sets `top_p`.
    #[must_use]
    pub fn top_p(mut self, p: f64) -> Self {
        self.top_p = p;
        self
    }
    /// Sets `top_k`.
    #[must_use]
    pub fn top_k(mut self, k: i64) -> Self {
        self.top_k = k;
        self
    }
    /// Sets `greedy`.
    #[must_use]
    pub fn greedy(mut self, g: bool) -> Self {
        self.greedy = g;
        self
    }
    /// Sets `stop_ids`.
    #[must_use]
    pub fn stop_ids(mut self, ids: impl Into<Vec<i64>>) -> Self {
        self.stop_ids = ids.into();
        self
    }
    /// Sets `pad_id`.
    #[must_use]
    pub fn pad_id(mut self, id: i64) -> Self {
        self.pad_id = id;
        self
    }
}

fn bad(name: &str, value: impl ToString, reason: &str) -> HfError {
    HfError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
}

impl Params for SampleParams {
    type Error = HfError;
    fn validate(&self) -> Result<()> {
        if self.max_new_tokens < 1 {
            return Err(bad("max_new_tokens", self.max_new_tokens, "must be >= 1"));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(bad("temperature", self.temperature, "must be finite and > 0"));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(bad("top_p", self.top_p, "must be in (0, 1]"));
        }
        if self.top_k < 0 {
            return Err(bad("top_k", self.top_k, "must be >= 0 (0 = off)"));
        }
        if let Some(id) = self.stop_ids.iter().find(|&&i| i < 0) {
            return Err(bad("stop_ids", id, "must be >= 0"));
        }
        if self.pad_id < 0 {
            return Err(bad("pad_id", self.pad_id, "must be >= 0"));
        }
        Ok(())
    }
}

/// Output of [`HfModel::sample`].
#[derive(Debug)]
pub struct Sample {
    /// `[B, R]` Int64 new tokens (stop token included), `pad_id` after a row ended;
    /// `R ≤ max_new_tokens` (sampling stops when every row has ended).
    pub tokens: Tensor,
    /// `[B, R]` f32 behaviour log-probs `log softmax(logits / temperature)[token]` over the
    /// full vocabulary (before top-k/top-p truncation, as in verl), 0 where `mask` is 0.
    pub logprobs: Tensor,
    /// `[B, R]` Int64: 1 for response tokens, 0 after a row ended.
    pub mask: Tensor,
    /// Whether each row emitted a stop id (`false`: cut at `max_new_tokens`).
    pub finished: Vec<bool>,
}

/// Logits with everything outside the top-k / nucleus set to `-inf` (`x` f32 `[B, V]`).
fn truncate(x: &Tensor, top_k: i64, top_p: f64) -> Result<Tensor> {
    let v = x.size().last().copied().unwrap_or(0);
    let mut x = x.shallow_clone();
    if top_k > 0 && top_k < v {
        let (vals, _) = x.f_topk(top_k, -1, true, true)?;
        let kth = vals.f_narrow(-1, top_k - 1, 1)?;
        x = x.f_masked_fill(&x.f_lt_tensor(&kth)?, f64::NEG_INFINITY)?;
    }
    if top_p < 1.0 {
        let (sorted, idx) = x.f_sort(-1, true)?;
        let probs = sorted.f_softmax(-1, Kind::Float)?;
        // Drop a token when the mass of the tokens before it already reaches top_p (the most
        // likely token is always kept).
        let before = probs.f_cumsum(-1, Kind::Float)?.f_sub(&probs)?;
        let drop_sorted = before.f_ge(top_p)?;
        let drop = drop_sorted.f_scatter(-1, &idx, &drop_sorted)?;
        x = x.f_masked_fill(&drop, f64::NEG_INFINITY)?;
    }
    Ok(x)
}

impl HfModel {
    /// Samples up to `max_new_tokens` per row of a left-padded batch (`input_ids`,
    /// `attention_mask` `[B, T]` Int64) with the KV cache, drawing from `rng` (one uniform per
    /// row and step, through [`rl_nn::rand::categorical`]), without gradient.
    ///
    /// # Errors
    /// [`HfError::InvalidParameter`] for a stop or pad id outside the vocabulary, and what
    /// [`forward`](Self::forward) returns.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        params: &rl_core::Valid<SampleParams>,
        rng: &mut R,
    ) -> Result<Sample> {
        let v = self.config().vocab_size;
        if let Some(id) = params.stop_ids.iter().find(|&&i| i >= v) {
            return Err(bad("stop_ids", id, &format!("outside the vocabulary [0, {v})")));
        }
        if params.pad_id >= v {
            return Err(bad("pad_id", params.pad_id, &format!("outside the vocabulary [0, {v})")));
        }
        let dev = self.device();
        tch::no_grad(|| {
            let b = input_ids.size().first().copied().unwrap_or(0);
            let mut cache = KvCache::new();
            let mut mask = attention_mask.f_to_device(dev)?;
            let mut ids = input_ids.shallow_clone();
            let mut done = vec![false; b as usize];
            let (mut toks, mut lps, mut masks) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..params.max_new_tokens {
                let last = self
                    .last_logits(&ids, &mask, &mut cache)?
                    .f_to_kind(Kind::Float)?
                    .f_div_scalar(params.temperature)?;
                let logp = last.f_log_softmax(-1, Kind::Float)?;
                let next = if params.greedy {
                    last.f_argmax(-1, false)?
                } else {
                    rl_nn::rand::categorical(&truncate(&last, params.top_k, params.top_p)?, rng)?
                };
                let alive: Vec<i64> = done.iter().map(|&d| i64::from(!d)).collect();
                let alive = Tensor::f_from_slice(&alive)?.f_to_device(dev)?;
                let next = next.f_mul(&alive)?.f_add(&alive.f_neg()?.f_add_scalar(1)?.f_mul_scalar(params.pad_id)?)?;
                let lp = logp.f_gather(-1, &next.f_unsqueeze(-1)?, false)?.f_squeeze_dim(-1)?;
                lps.push(lp.f_mul(&alive.f_to_kind(Kind::Float)?)?);
                masks.push(alive.shallow_clone());
                let host: Vec<i64> = Vec::<i64>::try_from(&next.f_to_device(tch::Device::Cpu)?)?;
                for (row, id) in host.iter().enumerate() {
                    if !done[row] && params.stop_ids.contains(id) {
                        done[row] = true;
                    }
                }
                toks.push(next.shallow_clone());
                mask = Tensor::f_cat(&[&mask, &alive.f_unsqueeze(-1)?], 1)?;
                ids = next.f_unsqueeze(-1)?;
                if done.iter().all(|&d| d) {
                    break;
                }
            }
            Ok(Sample {
                tokens: Tensor::f_stack(&toks, 1)?,
                logprobs: Tensor::f_stack(&lps, 1)?,
                mask: Tensor::f_stack(&masks, 1)?,
                finished: done,
            })
        })
    }
}
