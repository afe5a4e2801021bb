//! Batched sampling with behaviour log-probs.

use rand::Rng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::batch::SequenceBatch;
use crate::error::{invalid_param, LmError, Result};
use crate::model::TransformerLm;

/// Parameters of [`TransformerLm::generate`].
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `max_new_tokens` | 32 | response length cap | ≥ 1; longest prompt + this ≤ `max_len` |
/// | `temperature` | 1.0 | sampling distribution `softmax(logits / temperature)` | > 0 |
/// | `top_p` | 1.0 | nucleus: sample from the smallest set of most likely tokens whose mass reaches `top_p` | (0, 1] |
/// | `greedy` | `false` | take the arg-max instead of sampling (`temperature`/`top_p` then only affect the log-probs) | |
/// | `stop_token` | `None` | a row ends after emitting this token (it is part of the response) | in vocab |
/// | `pad_token` | 0 | fills prompts on the left and finished responses on the right | in vocab |
/// | `use_cache` | `true` | incremental decoding with a [`KvCache`](crate::KvCache); `false` re-runs the full prefix every step (same output, for benchmarks) | |
///
/// The RLVR papers roll out at temperature 1.0, top-p 1.0 (see `docs/rl-lm.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Maximum number of generated tokens per row.
    pub max_new_tokens: i64,
    /// Softmax temperature.
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// Arg-max decoding.
    pub greedy: bool,
    /// Token that ends a row.
    pub stop_token: Option<i64>,
    /// Padding token id.
    pub pad_token: i64,
    /// Use the KV cache.
    pub use_cache: bool,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            max_new_tokens: 32,
            temperature: 1.0,
            top_p: 1.0,
            greedy: false,
            stop_token: None,
            pad_token: 0,
            use_cache: true,
        }
    }
}

impl SamplingParams {
    /// Default parameters with `max_new_tokens` set.
    pub fn new(max_new_tokens: i64) -> Self {
        Self { max_new_tokens, ..Self::default() }
    }
    /// Sets the temperature.
    #[must_use]
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }
    /// Sets top-p.
    #[must_use]
    pub fn top_p(mut self, p: f64) -> Self {
        self.top_p = p;
        self
    }
    /// Switches to greedy decoding.
    #[must_use]
    pub fn greedy(mut self, on: bool) -> Self {
        self.greedy = on;
        self
    }
    /// Sets the stop token.
    #[must_use]
    pub fn stop_token(mut self, id: Option<i64>) -> Self {
        self.stop_token = id;
        self
    }
    /// Sets the pad token.
    #[must_use]
    pub fn pad_token(mut self, id: i64) -> Self {
        self.pad_token = id;
        self
    }
    /// Enables or disables the KV cache.
    #[must_use]
    pub fn use_cache(mut self, on: bool) -> Self {
        self.use_cache = on;
        self
    }

    /// Validates the parameters for a vocabulary of `vocab_size` ids.
    ///
    /// # Errors
    /// [`LmError::InvalidParameter`] naming the first bad field.
    pub fn check(&self, vocab_size: i64) -> Result<()> {
        if self.max_new_tokens < 1 {
            return Err(invalid_param("max_new_tokens", self.max_new_tokens, "must be at least 1"));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(invalid_param("temperature", self.temperature, "must be finite and > 0"));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(invalid_param("top_p", self.top_p, "must be in (0, 1]"));
        }
        for (name, id) in [("pad_token", Some(self.pad_token)), ("stop_token", self.stop_token)] {
            if let Some(id) = id {
                if !(0..vocab_size).contains(&id) {
                    return Err(invalid_param(name, id, &format!("must be in [0, {vocab_size})")));
                }
            }
        }
        Ok(())
    }
}

/// Output of [`TransformerLm::generate`].
#[derive(Debug)]
pub struct Generation {
    /// Prompts and responses in the [`SequenceBatch`] layout; feed it back to
    /// [`TransformerLm::response_logprobs`] for training.
    pub batch: SequenceBatch,
    /// `[B, R]` float behaviour log-probs: `log softmax(logits / temperature)[token]` of the
    /// policy at sampling time (full vocabulary, *before* top-p truncation), 0 where
    /// `response_mask` is 0.
    pub logprobs: Tensor,
    /// Whether each row emitted the stop token (`false` = truncated at `max_new_tokens`).
    pub finished: Vec<bool>,
}

impl Generation {
    /// The response tokens of each row (stop token included), as [`SequenceBatch::responses`].
    ///
    /// # Errors
    /// libtorch errors.
    pub fn responses(&self) -> Result<Vec<Vec<i64>>> {
        self.batch.responses()
    }
}

impl TransformerLm {
    /// Samples responses for a batch of prompts (without gradient).
    ///
    /// Prompts of different lengths are **left-padded** with `pad_token` (masked out, positions
    /// count real tokens only), so all rows decode in lock-step and response column `j` is the
    /// `j`-th generated token of every row. A row that emits `stop_token` is finished: later
    /// columns hold `pad_token` with mask 0 and log-prob 0. Generation ends when every row is
    /// finished or after `max_new_tokens` steps, so `R ≤ max_new_tokens`.
    ///
    /// Sampling uses inverse-CDF draws from `rng` (one uniform per row and step) on the model's
    /// device: the same `rng` state gives the same tokens, with or without the cache.
    ///
    /// ```
    /// use rl_lm::{LmConfig, SamplingParams, TransformerLm, LogProbOptions};
    /// let lm = TransformerLm::new(&LmConfig::new(16, 32).d_model(32).n_layers(2), tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    /// let mut rng = rl_core::rng_from_seed(7);
    /// let params = SamplingParams::new(8).stop_token(Some(2)).pad_token(0);
    /// let out = lm.generate(&[vec![1, 5, 6], vec![1, 9]], &params, &mut rng)?;
    /// assert_eq!(out.batch.prompt_width, 3);
    /// // Training-mode log-probs of the same tokens equal the behaviour log-probs.
    /// let train = lm.response_logprobs(&out.batch, &LogProbOptions::default())?;
    /// let diff = (train.logprobs - &out.logprobs).abs().max().double_value(&[]);
    /// assert!(diff < 1e-5);
    /// # Ok::<(), rl_lm::LmError>(())
    /// ```
    ///
    /// # Errors
    /// [`LmError::EmptyBatch`], [`LmError::EmptySequence`], [`LmError::TokenOutOfRange`],
    /// [`LmError::SequenceTooLong`] when the longest prompt plus `max_new_tokens` exceeds
    /// `max_len`, [`LmError::InvalidParameter`] from [`SamplingParams::check`].
    pub fn generate<P: AsRef<[i64]>, R: Rng + ?Sized>(
        &self,
        prompts: &[P],
        params: &SamplingParams,
        rng: &mut R,
    ) -> Result<Generation> {
        let cfg = self.config();
        params.check(cfg.vocab_size)?;
        if prompts.is_empty() {
            return Err(LmError::EmptyBatch);
        }
        for (row, p) in prompts.iter().enumerate() {
            let p = p.as_ref();
            if p.is_empty() {
                return Err(LmError::EmptySequence { row });
            }
            if let Some((position, &id)) = p.iter().enumerate().find(|(_, &id)| !(0..cfg.vocab_size).contains(&id)) {
                return Err(LmError::TokenOutOfRange { row, position, id, vocab_size: cfg.vocab_size });
            }
        }
        let p_max = prompts.iter().map(|p| p.as_ref().len()).max().unwrap_or(0) as i64;
        if p_max + params.max_new_tokens > cfg.max_len {
            return Err(LmError::SequenceTooLong { len: p_max + params.max_new_tokens, max_len: cfg.max_len });
        }
        tch::no_grad(|| self.generate_inner(prompts, params, rng))
    }

    fn generate_inner<P: AsRef<[i64]>, R: Rng + ?Sized>(
        &self,
        prompts: &[P],
        params: &SamplingParams,
        rng: &mut R,
    ) -> Result<Generation> {
        let device = self.device();
        let b = prompts.len() as i64;
        // Left-padded prompt block (a dummy one-token response makes `pack` happy; dropped).
        let dummy = vec![[params.pad_token]; prompts.len()];
        let packed = SequenceBatch::pack(prompts, &dummy, params.pad_token, device)?;
        let p = packed.prompt_width;
        let prompt_ids = packed.input_ids.f_narrow(1, 0, p)?;
        let prompt_mask = packed.attention_mask.f_narrow(1, 0, p)?;

        let mut cache = params.use_cache.then(|| self.new_cache(b));
        let mut seq = prompt_ids.shallow_clone();
        let mut seq_mask = prompt_mask.shallow_clone();
        let mut last = match cache.as_mut() {
            Some(c) => self.forward_cached(&prompt_ids, Some(&prompt_mask), c)?,
            None => self.forward(&prompt_ids, Some(&prompt_mask))?,
        }
        .f_select(1, p - 1)?;

        let pad = Tensor::f_full([b], params.pad_token, (Kind::Int64, device))?;
        let mut alive = Tensor::f_ones([b], (Kind::Bool, device))?;
        let (mut toks, mut lps, mut masks) = (Vec::new(), Vec::new(), Vec::new());
        for step in 0..params.max_new_tokens {
            let (tok, lp) = sample_next(&last, params, rng)?;
            let tok = tok.f_where_self(&alive, &pad)?;
            let alive_f = alive.f_to_kind(Kind::Float)?;
            lps.push(lp * &alive_f);
            let col_mask = alive_f.f_unsqueeze(1)?;
            toks.push(tok.shallow_clone());
            masks.push(col_mask.shallow_clone());
            if let Some(stop) = params.stop_token {
                alive = alive.f_logical_and(&tok.f_ne(stop)?)?;
            }
            if step + 1 == params.max_new_tokens || alive.f_any()?.f_int64_value(&[])? == 0 {
                break;
            }
            let tok_col = tok.f_unsqueeze(1)?;
            last = match cache.as_mut() {
                Some(c) => self.forward_cached(&tok_col, Some(&col_mask), c)?.f_select(1, 0)?,
                None => {
                    seq = Tensor::f_cat(&[&seq, &tok_col], 1)?;
                    seq_mask = Tensor::f_cat(&[&seq_mask, &col_mask], 1)?;
                    self.forward(&seq, Some(&seq_mask))?.f_select(1, -1)?
                }
            };
        }
        let response = Tensor::f_stack(&toks, 1)?;
        let response_mask = Tensor::f_cat(&masks, 1)?;
        let logprobs = Tensor::f_stack(&lps, 1)?;
        let finished: Vec<bool> = match params.stop_token {
            Some(stop) => {
                let hit = response.f_eq(stop)?.f_any_dim(1, false)?.f_to_device(Device::Cpu)?;
                Vec::<bool>::try_from(&hit)?
            }
            None => vec![false; prompts.len()],
        };
        let batch = SequenceBatch {
            input_ids: Tensor::f_cat(&[&prompt_ids, &response], 1)?,
            attention_mask: Tensor::f_cat(&[&prompt_mask, &response_mask], 1)?,
            response_mask,
            prompt_width: p,
        };
        Ok(Generation { batch, logprobs, finished })
    }
}

/// One token per row from `logits` `[B, V]`: returns `(tokens [B] int64, log-probs [B] float)`.
fn sample_next<R: Rng + ?Sized>(logits: &Tensor, params: &SamplingParams, rng: &mut R) -> Result<(Tensor, Tensor)> {
    let logits = logits.f_to_kind(Kind::Float)?;
    let scaled = if params.temperature != 1.0 { logits / params.temperature } else { logits };
    let logp = scaled.f_log_softmax(-1, Kind::Float)?;
    let tok = if params.greedy {
        scaled.f_argmax(-1, false)?
    } else {
        let probs = logp.f_exp()?;
        let (b, v) = (probs.size()[0], probs.size()[1]);
        let (sorted, order) = if params.top_p < 1.0 {
            let (sorted, order) = probs.f_sort(-1, true)?;
            // Keep a token while the mass strictly before it is below top_p (the first always).
            let before = sorted.f_cumsum(-1, Kind::Float)? - &sorted;
            let keep = before.f_lt(params.top_p)?.f_to_kind(Kind::Float)?;
            (sorted * keep, Some(order))
        } else {
            (probs, None)
        };
        let cdf = sorted.f_cumsum(-1, Kind::Float)?;
        let total = cdf.f_narrow(1, v - 1, 1)?;
        let u: Vec<f32> = (0..b).map(|_| rng.random::<f32>()).collect();
        let u = Tensor::f_from_slice(&u)?.f_to_device(logp.device())?.f_view([b, 1])?;
        // Index of the first entry whose CDF reaches u * total: it has positive mass.
        let pos = cdf.f_lt_tensor(&(u * total))?.f_sum_dim_intlist(-1, false, Kind::Int64)?.f_clamp_max(v - 1)?;
        match order {
            Some(order) => order.f_gather(-1, &pos.f_unsqueeze(-1)?, false)?.f_squeeze_dim(-1)?,
            None => pos,
        }
    };
    let lp = logp.f_gather(-1, &tok.f_unsqueeze(-1)?, false)?.f_squeeze_dim(-1)?;
    Ok((tok, lp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_cdf_sampling_matches_probabilities() {
        // 3 tokens with probs 0.5, 0.3, 0.2; top-p 0.6 keeps the first two (mass before the
        // second is 0.5 < 0.6, before the third 0.8 >= 0.6).
        let logits = Tensor::from_slice(&[0.5f32, 0.3, 0.2]).log().view([1, 3]);
        let mut rng = rl_core::rng_from_seed(1);
        let n = 4000;
        let mut counts = [0usize; 3];
        let mut counts_p = [0usize; 3];
        for _ in 0..n {
            let (t, _) = sample_next(&logits, &SamplingParams::default(), &mut rng).unwrap();
            counts[t.int64_value(&[0]) as usize] += 1;
            let (t, _) = sample_next(&logits, &SamplingParams::default().top_p(0.6), &mut rng).unwrap();
            counts_p[t.int64_value(&[0]) as usize] += 1;
        }
        let f = |c: usize| c as f64 / n as f64;
        // 4 sigma of a binomial proportion at n = 4000 is about 0.032.
        assert!((f(counts[0]) - 0.5).abs() < 0.032, "{counts:?}");
        assert!((f(counts[1]) - 0.3).abs() < 0.032, "{counts:?}");
        assert!((f(counts[2]) - 0.2).abs() < 0.032, "{counts:?}");
        assert_eq!(counts_p[2], 0);
        assert!((f(counts_p[0]) - 0.625).abs() < 0.032, "{counts_p:?}");
        // log-probs are of the untruncated distribution
        let (t, lp) = sample_next(&logits, &SamplingParams::default().greedy(true), &mut rng).unwrap();
        assert_eq!(t.int64_value(&[0]), 0);
        assert!((lp.double_value(&[0]) - 0.5f64.ln()).abs() < 1e-6);
    }

    #[test]
    fn params_check() {
        assert!(SamplingParams::default().check(10).is_ok());
        for (p, name) in [
            (SamplingParams::new(0), "max_new_tokens"),
            (SamplingParams::default().temperature(0.0), "temperature"),
            (SamplingParams::default().top_p(0.0), "top_p"),
            (SamplingParams::default().top_p(1.5), "top_p"),
            (SamplingParams::default().pad_token(10), "pad_token"),
            (SamplingParams::default().stop_token(Some(-1)), "stop_token"),
        ] {
            match p.check(10) {
                Err(LmError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("expected InvalidParameter({name}), got {other:?}"),
            }
        }
    }
}
