//! Prompt + response batches and the training-mode per-token log-probs.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::error::{invalid_param, LmError, Result};
use crate::model::TransformerLm;

/// A batch of prompt + response sequences in the layout every `rl-lm` function shares:
/// prompts **left-padded** to a common width `P`, responses **right-padded** to a common width
/// `R`, so response token `j` of every row sits in column `P + j`.
///
/// | field | shape | kind | meaning |
/// |---|---|---|---|
/// | `input_ids` | `[B, P + R]` | int64 | prompt and response ids; padding holds the pad id |
/// | `attention_mask` | `[B, P + R]` | float | 1 for real tokens, 0 for padding |
/// | `response_mask` | `[B, R]` | float | 1 for real response tokens (up to and including the stop token) |
/// | `prompt_width` | `P` | | index of the first response column |
///
/// [`TransformerLm::generate`] returns one; [`SequenceBatch::pack`] builds one from token lists
/// (supervised warm start, replayed groups).
#[derive(Debug)]
pub struct SequenceBatch {
    /// `[B, P + R]` int64 token ids.
    pub input_ids: Tensor,
    /// `[B, P + R]` float mask, 1 = real token.
    pub attention_mask: Tensor,
    /// `[B, R]` float mask of real response tokens.
    pub response_mask: Tensor,
    /// Width `P` of the (left-padded) prompt block.
    pub prompt_width: i64,
}

impl SequenceBatch {
    /// Packs token lists: prompts left-padded, responses right-padded with `pad_id`, on `device`.
    ///
    /// ```
    /// use rl_lm::SequenceBatch;
    /// let b = SequenceBatch::pack(&[vec![1, 4, 5], vec![1, 6]], &[vec![7, 2], vec![8, 9, 2]], 0, tch::Device::Cpu)?;
    /// assert_eq!(b.input_ids.size(), [2, 6]);
    /// assert_eq!(b.prompt_width, 3);
    /// assert_eq!(Vec::<i64>::try_from(&b.input_ids.get(1))?, [0, 1, 6, 8, 9, 2]);
    /// assert_eq!(b.responses()?, vec![vec![7, 2], vec![8, 9, 2]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LmError::EmptyBatch`], [`LmError::EmptySequence`] for an empty prompt,
    /// [`LmError::Shape`] when the lists differ in length or every response is empty.
    pub fn pack<P: AsRef<[i64]>, Q: AsRef<[i64]>>(
        prompts: &[P],
        responses: &[Q],
        pad_id: i64,
        device: Device,
    ) -> Result<Self> {
        if prompts.is_empty() {
            return Err(LmError::EmptyBatch);
        }
        if responses.len() != prompts.len() {
            return Err(LmError::Shape {
                what: "responses".into(),
                expected: format!("{} lists (one per prompt)", prompts.len()),
                got: vec![responses.len() as i64],
            });
        }
        if let Some(row) = prompts.iter().position(|p| p.as_ref().is_empty()) {
            return Err(LmError::EmptySequence { row });
        }
        let p = prompts.iter().map(|p| p.as_ref().len()).max().unwrap_or(0);
        let r = responses.iter().map(|q| q.as_ref().len()).max().unwrap_or(0);
        if r == 0 {
            return Err(LmError::Shape {
                what: "responses".into(),
                expected: "at least one non-empty response".into(),
                got: vec![responses.len() as i64, 0],
            });
        }
        let width = p + r;
        let b = prompts.len();
        let mut ids = vec![pad_id; b * width];
        let mut mask = vec![0f32; b * width];
        let mut rmask = vec![0f32; b * r];
        for (row, (pr, rs)) in prompts.iter().zip(responses).enumerate() {
            let (pr, rs) = (pr.as_ref(), rs.as_ref());
            let base = row * width;
            let start = base + p - pr.len();
            ids[start..base + p].copy_from_slice(pr);
            mask[start..base + p].fill(1.0);
            ids[base + p..base + p + rs.len()].copy_from_slice(rs);
            mask[base + p..base + p + rs.len()].fill(1.0);
            rmask[row * r..row * r + rs.len()].fill(1.0);
        }
        let shape = [b as i64, width as i64];
        Ok(Self {
            input_ids: Tensor::f_from_slice(&ids)?.f_view(shape)?.f_to_device(device)?,
            attention_mask: Tensor::f_from_slice(&mask)?.f_view(shape)?.f_to_device(device)?,
            response_mask: Tensor::f_from_slice(&rmask)?.f_view([b as i64, r as i64])?.f_to_device(device)?,
            prompt_width: p as i64,
        })
    }

    /// Number of rows `B`.
    pub fn batch_size(&self) -> i64 {
        self.input_ids.size().first().copied().unwrap_or(0)
    }

    /// Response width `R`.
    pub fn response_width(&self) -> i64 {
        self.response_mask.size().get(1).copied().unwrap_or(0)
    }

    /// The real response tokens of each row (those under `response_mask`, stop token included).
    ///
    /// # Errors
    /// libtorch errors (device transfer).
    pub fn responses(&self) -> Result<Vec<Vec<i64>>> {
        let r = self.response_width();
        let ids = self.input_ids.f_narrow(1, self.prompt_width, r)?.f_to_device(Device::Cpu)?;
        let ids: Vec<i64> = Vec::try_from(&ids.f_flatten(0, -1)?)?;
        let mask = self.response_mask.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?;
        let mask: Vec<f32> = Vec::try_from(&mask.f_flatten(0, -1)?)?;
        let r = r as usize;
        Ok(ids
            .chunks(r.max(1))
            .zip(mask.chunks(r.max(1)))
            .map(|(i, m)| i.iter().zip(m).filter(|(_, m)| **m > 0.5).map(|(i, _)| *i).collect())
            .collect())
    }

    /// A copy of the batch on `device`.
    ///
    /// # Errors
    /// libtorch errors.
    pub fn to_device(&self, device: Device) -> Result<Self> {
        Ok(Self {
            input_ids: self.input_ids.f_to_device(device)?,
            attention_mask: self.attention_mask.f_to_device(device)?,
            response_mask: self.response_mask.f_to_device(device)?,
            prompt_width: self.prompt_width,
        })
    }

    fn check(&self) -> Result<(i64, i64)> {
        let size = self.input_ids.size();
        if size.len() != 2 {
            return Err(LmError::Shape { what: "input_ids".into(), expected: "[B, P + R]".into(), got: size });
        }
        let (b, t) = (size[0], size[1]);
        let p = self.prompt_width;
        if p < 1 || p >= t {
            return Err(invalid_param("prompt_width", p, &format!("must be in [1, {t}) for sequences of width {t}")));
        }
        let r = t - p;
        if self.response_mask.size() != [b, r] {
            return Err(LmError::Shape {
                what: "response_mask".into(),
                expected: format!("[{b}, {r}]"),
                got: self.response_mask.size(),
            });
        }
        Ok((p, r))
    }
}

/// Options of [`TransformerLm::response_logprobs`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `temperature` | 1.0 | log-probs of `softmax(logits / temperature)`; use the rollout temperature so ratios against the behaviour log-probs of [`generate`](TransformerLm::generate) are exact |
/// | `entropy` | `false` | also return the per-token entropy of that distribution |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogProbOptions {
    /// Temperature dividing the logits.
    pub temperature: f64,
    /// Compute per-token entropy.
    pub entropy: bool,
}

impl Default for LogProbOptions {
    fn default() -> Self {
        Self { temperature: 1.0, entropy: false }
    }
}

impl LogProbOptions {
    /// Options with entropy on.
    #[must_use]
    pub fn with_entropy(mut self) -> Self {
        self.entropy = true;
        self
    }
}

/// Output of [`TransformerLm::response_logprobs`].
#[derive(Debug)]
pub struct TokenLogProbs {
    /// `[B, R]` float log-prob of each response token (0 where `response_mask` is 0), with grad.
    pub logprobs: Tensor,
    /// `[B, R]` float entropy of the next-token distribution at each response position (0 where
    /// masked), when requested.
    pub entropy: Option<Tensor>,
}

impl TransformerLm {
    /// Per-token log-probs (and optionally entropies) of the response tokens of `batch`, with
    /// gradient: what RLVR losses consume.
    ///
    /// Response token `j` of a row (column `P + j`) is scored by the logits at column
    /// `P + j - 1`: `logprobs[b, j] = log softmax(logits[b, P+j-1] / temperature)[ids[b, P+j]]`,
    /// computed in fp32 with log-sum-exp, multiplied by `response_mask`.
    ///
    /// ```
    /// use rl_lm::{LmConfig, LogProbOptions, SequenceBatch, TransformerLm};
    /// let lm = TransformerLm::new(&LmConfig::new(16, 32).d_model(32).n_layers(1), tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    /// let batch = SequenceBatch::pack(&[vec![1, 3]], &[vec![4, 5, 2]], 0, lm.device())?;
    /// let out = lm.response_logprobs(&batch, &LogProbOptions::default().with_entropy())?;
    /// assert_eq!(out.logprobs.size(), [1, 3]);
    /// let nll = -(out.logprobs * &batch.response_mask).sum(tch::Kind::Float);
    /// nll.backward();
    /// # Ok::<(), rl_lm::LmError>(())
    /// ```
    ///
    /// # Errors
    /// [`LmError::InvalidParameter`] for a non-positive temperature or a `prompt_width` outside
    /// `[1, T)`; [`LmError::Shape`]; the errors of [`forward`](Self::forward).
    pub fn response_logprobs(&self, batch: &SequenceBatch, opts: &LogProbOptions) -> Result<TokenLogProbs> {
        if !(opts.temperature.is_finite() && opts.temperature > 0.0) {
            return Err(invalid_param("temperature", opts.temperature, "must be finite and > 0"));
        }
        let (p, r) = batch.check()?;
        let logits = self.forward(&batch.input_ids, Some(&batch.attention_mask))?;
        let mut logits = logits.f_narrow(1, p - 1, r)?.f_to_kind(Kind::Float)?;
        if opts.temperature != 1.0 {
            logits = logits.f_div_scalar(opts.temperature)?;
        }
        let logp = logits.f_log_softmax(-1, Kind::Float)?;
        let device = logp.device();
        let targets = batch.input_ids.f_narrow(1, p, r)?.f_to_device(device)?.f_to_kind(Kind::Int64)?;
        let mask = batch.response_mask.f_to_device(device)?.f_to_kind(Kind::Float)?;
        let lp = logp.f_gather(-1, &targets.f_unsqueeze(-1)?, false)?.f_squeeze_dim(-1)? * &mask;
        let entropy = if opts.entropy {
            let h = -(logp.f_exp()? * &logp).f_sum_dim_intlist(-1, false, Kind::Float)?;
            Some(h * &mask)
        } else {
            None
        };
        Ok(TokenLogProbs { logprobs: lp, entropy })
    }
}
