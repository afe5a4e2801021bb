//! The policy the trainer drives: one trait, [`Policy`], implemented for `rl-lm`'s
//! [`TransformerLm`] (the character-level toy policy) and for [`HfPolicy`] (a Hugging Face
//! decoder LLM from `rl-hf` with its own tokenizer), so [`Trainer`](crate::Trainer) runs the
//! same loop on either.
//!
//! A policy owns its tokenizer's view of the task text: [`encode_prompt`](Policy::encode_prompt)
//! turns a prompt into the ids it conditions on (BOS, or the chat template),
//! [`completion_text`](Policy::completion_text) turns sampled ids back into the text the
//! verifier judges. Sampling returns behaviour log-probs; training log-probs come back as a
//! [`ResponseLogProbs`] whose loss is back-propagated through [`Policy::backward`], so a policy
//! may defer its LM head's backward pass to bound memory (what [`HfPolicy`] does).

use std::path::{Path, PathBuf};

use rand::RngCore;
use rl_core::Params;
use rl_hf::{DeferredLogProbs, HfDtype, HfModel, HfTokenizer, LogProbParams, SampleParams};
use rl_lm::{LmConfig, LogProbOptions, SamplingParams, SequenceBatch, TransformerLm};
use rlvr_tasks::{CharTokenizer, MalformedReason};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::error::{invalid, Result, TrainError};

/// How responses are sampled (the policy adds its own stop and pad ids).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Length cap of a response.
    pub max_new_tokens: i64,
    /// Softmax temperature.
    pub temperature: f64,
    /// Nucleus mass (1 = off).
    pub top_p: f64,
}

/// Sampled responses: token ids (up to and including the stop token when one was emitted) and
/// the behaviour log-prob of each of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Generated {
    /// One response per prompt row.
    pub responses: Vec<Vec<i64>>,
    /// `logprobs[i].len() == responses[i].len()`.
    pub logprobs: Vec<Vec<f32>>,
}

/// Training log-probs `[B, R]` of response tokens (0 past a row's end), with what their
/// backward pass needs: back-propagate a loss computed from them with [`Policy::backward`].
#[derive(Debug)]
pub struct ResponseLogProbs {
    /// `[B, R]` f32 log-probs (requires gradient).
    pub logprobs: Tensor,
    /// `[B, R]` f32 entropies, when asked for.
    pub entropy: Option<Tensor>,
    backward: Backward,
}

#[derive(Debug)]
enum Backward {
    /// `loss.backward()` reaches the parameters.
    Autograd,
    /// Leaves: the LM head is recomputed chunk by chunk in the backward pass.
    Deferred(Box<DeferredLogProbs>),
}

impl ResponseLogProbs {
    /// Log-probs connected to the parameters by autograd (`loss.backward()` is their backward).
    pub fn autograd(logprobs: Tensor, entropy: Option<Tensor>) -> Self {
        Self { logprobs, entropy, backward: Backward::Autograd }
    }

    /// Deferred log-probs of an [`HfModel`] ([`HfModel::token_logprobs_deferred`]) times the
    /// response `mask` `[B, R]`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn deferred(d: DeferredLogProbs, mask: &Tensor) -> Result<Self> {
        let logprobs = d.logprobs.f_mul(mask)?;
        let entropy = match &d.entropy {
            Some(e) => Some(e.f_mul(mask)?),
            None => None,
        };
        Ok(Self { logprobs, entropy, backward: Backward::Deferred(Box::new(d)) })
    }
}

/// Where a trainer's policy comes from (recorded in the run's config so a checkpoint can be
/// resumed).
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySource {
    /// `rl-lm`'s transformer with this architecture (`cfg.model`).
    Lm(LmConfig),
    /// A Hugging Face model directory (`cfg.hf`).
    Hf(HfPolicyConfig),
    /// A caller's own policy (a trainer built with [`TrainerBuilder::policy`](crate::TrainerBuilder::policy)).
    Custom(String),
}

/// What [`Trainer`](crate::Trainer) needs of a language-model policy.
///
/// Implemented for [`TransformerLm`] (ids from [`CharTokenizer`]) and [`HfPolicy`]; implement
/// it for your own model to train it with any selector, replay and loss of the workspace.
pub trait Policy: Send + std::fmt::Debug {
    /// Where it comes from (what the trainer's config records).
    fn source(&self) -> PolicySource;
    /// The device its parameters live on.
    fn device(&self) -> Device;
    /// Its parameters (the optimizer's variables, the checkpoint's `model.*` tensors).
    fn var_store(&self) -> &VarStore;
    /// The ids the policy conditions on for a task prompt (BOS or the chat template included).
    ///
    /// # Errors
    /// Text the tokenizer cannot encode.
    fn encode_prompt(&self, text: &str) -> Result<Vec<i64>>;
    /// A supervised completion: the ids of `text` followed by the stop token (an HF
    /// tokenizer's `eos_token`).
    ///
    /// # Errors
    /// Text the tokenizer cannot encode.
    fn encode_completion(&self, text: &str) -> Result<Vec<i64>>;
    /// The text of a generated completion before its first stop id.
    ///
    /// # Errors
    /// The reason it earns a zero reward: no stop id (truncated), an id that is not text.
    fn completion_text(&self, ids: &[i64]) -> std::result::Result<String, MalformedReason>;
    /// The id responses are right-padded with in training batches.
    fn pad_id(&self) -> i64;
    /// The ids that end a response when the policy samples (what an inference engine is
    /// asked to stop on, [`rlvr_rollout::SamplingParams::stop_token_ids`]); none by default.
    fn stop_token_ids(&self) -> Vec<i64> {
        Vec::new()
    }
    /// Samples one response per prompt (without gradient), drawing from `rng`.
    ///
    /// # Errors
    /// Empty or out-of-vocabulary prompts, too long sequences, bad sampling parameters.
    fn generate(&self, prompts: &[&[i64]], sampling: &Sampling, rng: &mut dyn RngCore) -> Result<Generated>;
    /// Log-probs `[B, R]` (with gradient) of `responses` given `prompts` at `temperature`
    /// (`R` = the longest response), 0 past each response's end; entropies when `entropy`.
    ///
    /// # Errors
    /// Shape and token errors of the model.
    fn response_logprobs(
        &self,
        prompts: &[&[i64]],
        responses: &[&[i64]],
        temperature: f64,
        entropy: bool,
    ) -> Result<ResponseLogProbs>;
    /// Back-propagates `loss`, computed from `out`, into the parameters' gradients.
    ///
    /// # Errors
    /// A loss that is not a scalar; libtorch failures.
    fn backward(&self, out: ResponseLogProbs, loss: &Tensor) -> Result<()>;
    /// Writes the weights in the policy's own format (`rl-lm`: a safetensors file; HF: a
    /// model directory in transformers' layout, with its tokenizer files).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    fn save(&self, path: &Path) -> Result<()>;
    /// Loads weights written by [`save`](Self::save) for the same architecture (the warm
    /// start's `sft.init_checkpoint`); checked before anything changes.
    ///
    /// # Errors
    /// Missing, corrupt or mismatched weights.
    fn load(&mut self, path: &Path) -> Result<()>;
    /// The policy as `rl-lm`'s transformer, when it is one.
    fn as_lm(&self) -> Option<&TransformerLm> {
        None
    }
}

fn scalar_loss(loss: &Tensor) -> Result<()> {
    if !loss.defined() || loss.numel() != 1 {
        return Err(TrainError::Shape {
            what: "loss".into(),
            expected: vec![],
            got: if loss.defined() { loss.size() } else { vec![] },
        });
    }
    Ok(())
}

fn backward_of(out: ResponseLogProbs, model: Option<&HfModel>, loss: &Tensor) -> Result<()> {
    scalar_loss(loss)?;
    match (out.backward, model) {
        (Backward::Autograd, _) => Ok(loss.f_backward()?),
        (Backward::Deferred(d), Some(m)) => Ok(d.backward(m, loss)?),
        (Backward::Deferred(_), None) => Err(invalid(
            "policy.backward",
            "deferred log-probs",
            "deferred log-probs of an HF model given to a policy that is not that model",
        )),
    }
}

impl Policy for TransformerLm {
    fn source(&self) -> PolicySource {
        PolicySource::Lm(self.config().clone())
    }
    fn device(&self) -> Device {
        TransformerLm::device(self)
    }
    fn var_store(&self) -> &VarStore {
        TransformerLm::var_store(self)
    }
    fn encode_prompt(&self, text: &str) -> Result<Vec<i64>> {
        Ok(CharTokenizer::new().encode_prompt(text)?)
    }
    fn encode_completion(&self, text: &str) -> Result<Vec<i64>> {
        Ok(CharTokenizer::new().encode_completion(text)?)
    }
    fn completion_text(&self, ids: &[i64]) -> std::result::Result<String, MalformedReason> {
        CharTokenizer::new().completion_text(ids)
    }
    fn pad_id(&self) -> i64 {
        CharTokenizer::PAD
    }
    fn stop_token_ids(&self) -> Vec<i64> {
        vec![CharTokenizer::EOS]
    }
    fn generate(&self, prompts: &[&[i64]], s: &Sampling, rng: &mut dyn RngCore) -> Result<Generated> {
        let params = SamplingParams::new(s.max_new_tokens)
            .temperature(s.temperature)
            .top_p(s.top_p)
            .stop_token(Some(CharTokenizer::EOS))
            .pad_token(CharTokenizer::PAD);
        let gen = TransformerLm::generate(self, prompts, &params, rng)?;
        let responses = gen.responses()?;
        let rows = gen.logprobs.size().first().copied().unwrap_or(0);
        let width = gen.logprobs.size().get(1).copied().unwrap_or(0) as usize;
        let flat = Vec::<f32>::try_from(gen.logprobs.f_to_kind(Kind::Float)?.f_flatten(0, -1)?)?;
        if rows as usize != prompts.len() || responses.len() != prompts.len() {
            return Err(TrainError::Shape {
                what: "generated rows".into(),
                expected: vec![prompts.len() as i64],
                got: vec![rows, responses.len() as i64],
            });
        }
        let logprobs =
            responses.iter().enumerate().map(|(row, r)| flat[row * width..row * width + r.len()].to_vec()).collect();
        Ok(Generated { responses, logprobs })
    }
    fn response_logprobs(
        &self,
        prompts: &[&[i64]],
        responses: &[&[i64]],
        temperature: f64,
        entropy: bool,
    ) -> Result<ResponseLogProbs> {
        let seq = SequenceBatch::pack(prompts, responses, CharTokenizer::PAD, TransformerLm::device(self))?;
        let out = TransformerLm::response_logprobs(self, &seq, &LogProbOptions { temperature, entropy })?;
        Ok(ResponseLogProbs::autograd(out.logprobs, out.entropy))
    }
    fn backward(&self, out: ResponseLogProbs, loss: &Tensor) -> Result<()> {
        backward_of(out, None, loss)
    }
    fn save(&self, path: &Path) -> Result<()> {
        Ok(TransformerLm::save(self, path)?)
    }
    fn load(&mut self, path: &Path) -> Result<()> {
        Ok(TransformerLm::load(self, path)?)
    }
    fn as_lm(&self) -> Option<&TransformerLm> {
        Some(self)
    }
}

/// The `[hf]` table of a run config: train a Hugging Face model directory instead of the
/// toy transformer of `[model]`.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `dir` | (required) | the model directory: `config.json`, `model.safetensors` (or shards), `tokenizer.json` (+ `tokenizer_config.json`) |
/// | `dtype` | `f32` | weights in `f32`, `bf16` or `f16` |
/// | `chat_template` | `false` | render each prompt as one user message with the tokenizer's chat template (`add_generation_prompt`), as an instruct model expects; else the prompt text itself, after BOS when the tokenizer has one |
/// | `logprob_chunk` | 256 | positions per LM-head chunk of the training log-probs (memory: one `[B, chunk, V]` chunk) |
/// | `stop` | `[]` | extra stop tokens (strings) besides EOS and the chat end-of-turn tokens found in the vocabulary (`<\|im_end\|>`, `<\|eot_id\|>`, `<\|end_of_text\|>`) |
/// | `lora` | none | train a LoRA adapter ([`rl_hf::LoraParams`]: `r`, `alpha`, `targets`, `rslora`) instead of every weight; the base stays frozen |
/// | `lora_seed` | 0 | seed of the fresh adapter's `A` matrices |
///
/// With `lora`, the optimiser and the trainer's checkpoints hold the adapter only (the base is
/// `dir`'s, reloaded on resume), and [`Policy::save`] writes the merged model (what transformers
/// and an inference engine load) plus the adapter in PEFT's layout under `adapter/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HfPolicyConfig {
    /// The model directory.
    pub dir: PathBuf,
    /// Weight dtype.
    #[serde(default)]
    pub dtype: HfDtype,
    /// Prompts through the chat template.
    #[serde(default)]
    pub chat_template: bool,
    /// Positions per LM-head chunk.
    #[serde(default = "default_chunk")]
    pub logprob_chunk: i64,
    /// Extra stop tokens.
    #[serde(default)]
    pub stop: Vec<String>,
    /// A LoRA adapter to train instead of the full model.
    #[serde(default)]
    pub lora: Option<rl_hf::LoraParams>,
    /// Seed of the fresh adapter.
    #[serde(default)]
    pub lora_seed: u64,
}

/// Where [`Policy::save`] puts the adapter of a LoRA policy, inside the model directory.
pub const ADAPTER_DIR: &str = "adapter";

fn default_chunk() -> i64 {
    256
}

impl HfPolicyConfig {
    /// The model in `dir`, defaults elsewhere.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            dtype: HfDtype::F32,
            chat_template: false,
            logprob_chunk: 256,
            stop: Vec::new(),
            lora: None,
            lora_seed: 0,
        }
    }

    /// Checks the fields that need no file (`hf.logprob_chunk`).
    ///
    /// # Errors
    /// [`TrainError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.logprob_chunk < 1 {
            return Err(invalid("hf.logprob_chunk", self.logprob_chunk, "must be >= 1"));
        }
        if self.dir.as_os_str().is_empty() {
            return Err(invalid("hf.dir", "\"\"", "name the model directory"));
        }
        if let Some(l) = &self.lora {
            rl_core::Params::validate(l).map_err(|e| invalid("hf.lora", format!("{l:?}"), &e.to_string()))?;
        }
        Ok(())
    }
}

/// A Hugging Face decoder LLM (`rl-hf`) with its tokenizer, as a [`Policy`].
#[derive(Debug)]
pub struct HfPolicy {
    model: HfModel,
    tokenizer: HfTokenizer,
    cfg: HfPolicyConfig,
    stop_ids: Vec<i64>,
    eos: i64,
    pad_id: i64,
    bos: Option<i64>,
}

impl HfPolicy {
    /// Loads the model and tokenizer of `cfg.dir` onto `device`.
    ///
    /// # Errors
    /// Typed `rl-hf` errors for the directory (config, weights, tokenizer);
    /// [`TrainError::InvalidConfig`] for a tokenizer without EOS, a stop token not in the
    /// vocabulary, `chat_template = true` without a template, a tokenizer larger than the
    /// model's vocabulary.
    pub fn load(cfg: &HfPolicyConfig, device: Device) -> Result<Self> {
        cfg.validate()?;
        let mut model = HfModel::from_pretrained(&cfg.dir, device, cfg.dtype)?;
        if let Some(l) = &cfg.lora {
            model.add_lora(&l.clone().check()?, cfg.lora_seed)?;
        }
        let tokenizer = HfTokenizer::from_dir(&cfg.dir)?;
        Self::new(model, tokenizer, cfg.clone())
    }

    /// A policy of a loaded model and tokenizer (`cfg.dir` is what the run's config records;
    /// with `cfg.lora` the model must carry an adapter of those parameters,
    /// [`HfModel::add_lora`]).
    ///
    /// # Errors
    /// As [`load`](Self::load), without the file errors; [`TrainError::InvalidConfig`]
    /// (`hf.lora`) when the model's adapter is not the one `cfg.lora` describes.
    pub fn new(model: HfModel, tokenizer: HfTokenizer, cfg: HfPolicyConfig) -> Result<Self> {
        cfg.validate()?;
        if model.lora() != cfg.lora.as_ref() {
            return Err(invalid(
                "hf.lora",
                format!("{:?}", cfg.lora),
                &format!("the model carries the adapter {:?}", model.lora()),
            ));
        }
        let vocab = model.config().vocab_size;
        if tokenizer.vocab_size() > vocab {
            return Err(invalid(
                "hf.dir",
                cfg.dir.display(),
                &format!("the tokenizer has {} ids, the model {vocab}", tokenizer.vocab_size()),
            ));
        }
        let eos = tokenizer.eos().map(|(_, id)| id).ok_or_else(|| {
            invalid("hf.dir", cfg.dir.display(), "the tokenizer has no eos_token (responses could never end)")
        })?;
        let mut stop_ids = vec![eos];
        for t in ["<|im_end|>", "<|eot_id|>", "<|end_of_text|>"] {
            if let Some(id) = tokenizer.token_to_id(t) {
                stop_ids.push(id);
            }
        }
        for t in &cfg.stop {
            let id = tokenizer
                .token_to_id(t)
                .ok_or_else(|| invalid("hf.stop", t, "is not a token of the tokenizer's vocabulary"))?;
            stop_ids.push(id);
        }
        stop_ids.sort_unstable();
        stop_ids.dedup();
        if cfg.chat_template && tokenizer.chat_template().is_none() {
            return Err(invalid("hf.chat_template", true, "the tokenizer has no chat template"));
        }
        let pad_id = tokenizer.pad().map_or(eos, |(_, id)| id);
        let bos = tokenizer.bos().map(|(_, id)| id);
        Ok(Self { model, tokenizer, cfg, stop_ids, eos, pad_id, bos })
    }

    /// The model.
    pub fn model(&self) -> &HfModel {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &HfTokenizer {
        &self.tokenizer
    }

    /// The ids that end a response.
    pub fn stop_ids(&self) -> &[i64] {
        &self.stop_ids
    }

    /// Left-padded prompts followed by right-padded responses, `[B, P + R]` ids and mask, and
    /// the response mask `[B, R]` (f32).
    fn pack(&self, prompts: &[&[i64]], responses: &[&[i64]]) -> Result<(Tensor, Tensor, Tensor, i64)> {
        if prompts.is_empty() || prompts.len() != responses.len() {
            return Err(TrainError::Shape {
                what: "prompts vs responses".into(),
                expected: vec![prompts.len() as i64],
                got: vec![responses.len() as i64],
            });
        }
        if let Some(row) = prompts.iter().position(|p| p.is_empty()) {
            return Err(invalid("prompts", format!("row {row}"), "a prompt is empty"));
        }
        let p = prompts.iter().map(|x| x.len()).max().unwrap_or(0);
        let r = responses.iter().map(|x| x.len()).max().unwrap_or(0);
        if r == 0 {
            return Err(invalid("responses", 0, "every response is empty"));
        }
        let (b, w) = (prompts.len(), p + r);
        let mut ids = vec![self.pad_id; b * w];
        let mut mask = vec![0i64; b * w];
        let mut rmask = vec![0f32; b * r];
        for (row, (pr, rs)) in prompts.iter().zip(responses).enumerate() {
            let at = row * w + p - pr.len();
            ids[at..row * w + p].copy_from_slice(pr);
            mask[at..row * w + p].fill(1);
            ids[row * w + p..row * w + p + rs.len()].copy_from_slice(rs);
            mask[row * w + p..row * w + p + rs.len()].fill(1);
            rmask[row * r..row * r + rs.len()].fill(1.0);
        }
        let dev = self.model.device();
        let shape = [b as i64, w as i64];
        Ok((
            Tensor::f_from_slice(&ids)?.f_view(shape)?.f_to_device(dev)?,
            Tensor::f_from_slice(&mask)?.f_view(shape)?.f_to_device(dev)?,
            Tensor::f_from_slice(&rmask)?.f_view([b as i64, r as i64])?.f_to_device(dev)?,
            p as i64,
        ))
    }
}

impl Policy for HfPolicy {
    fn source(&self) -> PolicySource {
        PolicySource::Hf(self.cfg.clone())
    }
    fn device(&self) -> Device {
        self.model.device()
    }
    fn var_store(&self) -> &VarStore {
        self.model.trainable_var_store()
    }
    fn encode_prompt(&self, text: &str) -> Result<Vec<i64>> {
        if self.cfg.chat_template {
            let rendered = self.tokenizer.apply_chat_template(&[rl_hf::ChatMessage::new("user", text)], true)?;
            // The template writes its own special tokens as text.
            return Ok(self.tokenizer.encode(&rendered, false)?);
        }
        let mut ids = Vec::with_capacity(text.len() + 1);
        ids.extend(self.bos);
        ids.extend(self.tokenizer.encode(text, false)?);
        Ok(ids)
    }
    fn encode_completion(&self, text: &str) -> Result<Vec<i64>> {
        let mut ids = self.tokenizer.encode(text, false)?;
        ids.push(self.eos);
        Ok(ids)
    }
    fn completion_text(&self, ids: &[i64]) -> std::result::Result<String, MalformedReason> {
        let end = ids.iter().position(|id| self.stop_ids.contains(id)).ok_or(MalformedReason::MissingEos)?;
        let vocab = self.model.config().vocab_size;
        if let Some((position, &id)) = ids[..end].iter().enumerate().find(|(_, &id)| !(0..vocab).contains(&id)) {
            return Err(MalformedReason::BadToken { id, position });
        }
        self.tokenizer
            .decode(&ids[..end], false)
            .map_err(|_| MalformedReason::BadToken { id: ids.first().copied().unwrap_or(-1), position: 0 })
    }
    fn pad_id(&self) -> i64 {
        self.pad_id
    }
    fn stop_token_ids(&self) -> Vec<i64> {
        self.stop_ids.clone()
    }
    fn generate(&self, prompts: &[&[i64]], s: &Sampling, rng: &mut dyn RngCore) -> Result<Generated> {
        let owned: Vec<Vec<i64>> = prompts.iter().map(|p| p.to_vec()).collect();
        let (ids, mask) = rl_hf::left_pad(&owned, self.pad_id, self.model.device())?;
        let params = SampleParams::default()
            .max_new_tokens(s.max_new_tokens)
            .temperature(s.temperature)
            .top_p(s.top_p)
            .stop_ids(self.stop_ids.clone())
            .pad_id(self.pad_id)
            .check()?;
        let out = self.model.sample(&ids, &mask, &params, rng)?;
        let b = prompts.len();
        let width = out.tokens.size().get(1).copied().unwrap_or(0) as usize;
        let tokens = Vec::<i64>::try_from(out.tokens.f_flatten(0, -1)?.f_to_device(Device::Cpu)?)?;
        let lps = Vec::<f32>::try_from(out.logprobs.f_flatten(0, -1)?.f_to_device(Device::Cpu)?)?;
        let lens = Vec::<i64>::try_from(out.mask.f_sum_dim_intlist(1, false, Kind::Int64)?.f_to_device(Device::Cpu)?)?;
        if tokens.len() != b * width || lens.len() != b {
            return Err(TrainError::Shape {
                what: "sampled rows".into(),
                expected: vec![b as i64, width as i64],
                got: out.tokens.size(),
            });
        }
        let mut g = Generated { responses: Vec::with_capacity(b), logprobs: Vec::with_capacity(b) };
        for (row, &n) in lens.iter().enumerate() {
            let n = n as usize;
            g.responses.push(tokens[row * width..row * width + n].to_vec());
            g.logprobs.push(lps[row * width..row * width + n].to_vec());
        }
        Ok(g)
    }
    fn response_logprobs(
        &self,
        prompts: &[&[i64]],
        responses: &[&[i64]],
        temperature: f64,
        entropy: bool,
    ) -> Result<ResponseLogProbs> {
        let (ids, mask, rmask, p) = self.pack(prompts, responses)?;
        let params =
            LogProbParams::default().temperature(temperature).chunk(self.cfg.logprob_chunk).entropy(entropy).check()?;
        // Under `tch::no_grad` the hidden states carry no graph and the leaves need no gradient.
        let d = self.model.token_logprobs_deferred(&ids, Some(&mask), p, &params)?;
        ResponseLogProbs::deferred(d, &rmask)
    }
    fn backward(&self, out: ResponseLogProbs, loss: &Tensor) -> Result<()> {
        backward_of(out, Some(&self.model), loss)
    }
    fn save(&self, path: &Path) -> Result<()> {
        let params = rl_hf::SaveParams::default().check()?;
        self.model.save_pretrained(path, &params)?;
        if self.model.lora().is_some() {
            let base = self.cfg.dir.display().to_string();
            self.model.save_adapter(path.join(ADAPTER_DIR), Some(&base))?;
        }
        for f in [rl_hf::TOKENIZER_FILE, rl_hf::TOKENIZER_CONFIG_FILE, rl_hf::CHAT_TEMPLATE_FILE] {
            let src = self.cfg.dir.join(f);
            if src.is_file() {
                std::fs::copy(&src, path.join(f)).map_err(crate::error::io(format!("copying {}", src.display())))?;
            }
        }
        Ok(())
    }
    fn load(&mut self, path: &Path) -> Result<()> {
        if let Some(lora) = self.model.lora() {
            // The adapter saved under `adapter/`, on this policy's own base (`hf.dir`).
            let adapter = path.join(ADAPTER_DIR);
            let mut other = HfModel::from_pretrained(&self.cfg.dir, self.model.device(), self.model.dtype())?;
            other.load_adapter(&adapter)?;
            if other.lora() != Some(lora) {
                return Err(invalid(
                    "sft.init_checkpoint",
                    adapter.display(),
                    &format!("holds the adapter {:?}, hf.lora is {lora:?}", other.lora()),
                ));
            }
            let tensors: std::collections::BTreeMap<String, Tensor> =
                rl_nn::checkpoint::var_store_tensors(other.trainable_var_store(), "").into_iter().collect();
            let shown = adapter.display().to_string();
            let vs = self.model.trainable_var_store();
            rl_nn::checkpoint::check_map(vs, &tensors, "", rl_nn::LoadMode::Strict, &shown)?;
            rl_nn::checkpoint::load_map(vs, &tensors, "", rl_nn::LoadMode::Strict, &shown)?;
            return Ok(());
        }
        let other = HfModel::from_pretrained(path, self.model.device(), self.model.dtype())?;
        if other.config() != self.model.config() {
            return Err(invalid(
                "sft.init_checkpoint",
                path.display(),
                "its config.json describes another model than hf.dir's",
            ));
        }
        let tensors: std::collections::BTreeMap<String, Tensor> =
            rl_nn::checkpoint::var_store_tensors(other.var_store(), "").into_iter().collect();
        let shown = path.display().to_string();
        rl_nn::checkpoint::check_map(self.model.var_store(), &tensors, "", rl_nn::LoadMode::Strict, &shown)?;
        rl_nn::checkpoint::load_map(self.model.var_store(), &tensors, "", rl_nn::LoadMode::Strict, &shown)?;
        Ok(())
    }
}
