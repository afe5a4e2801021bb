//! Run configuration: one serde struct, loadable from TOML, with a validating `check()`.
//!
//! Every section has defaults, so a TOML file only names what it changes:
//!
//! ```toml
//! seed = 3
//! [rl]
//! steps = 80
//! [selector]
//! kind = "mopps"
//! [loss.policy]
//! kind = "lpo"
//! projection = "forward"
//! ```
//!
//! A misspelt or stray key is an error, also next to a `kind` without fields
//! (`[selector] kind = "uniform"`), and every error names its key by its dotted path
//! (`selector.params.decay`, `model.d_model`): parse errors as [`TrainError::ConfigParse`],
//! range errors as [`TrainError::InvalidConfig`] or the upstream crate's `InvalidParameter`.
//! Defaults that must equal another value follow it: `replay.group_size` is `rl.group_size`
//! unless written.

use rl_core::{de, Params};
use std::path::{Path, PathBuf};

use rl_lm::LmConfig;
use rlvr_core::{DecoupledParams, EffectivenessRule, LossParams};
use rlvr_replay::{ReplayParams, Shortfall};
use rlvr_select::neural::{GpsParams, MptsParams, PdtsParams};
use rlvr_select::{
    DpsParams, DrmParams, FilterParams, GdrmParams, HistoryResamplingParams, MoppsParams, RiskFromRewards,
};
use rlvr_tasks::{CharTokenizer, Family, PoolParams, RewardParams};
use serde::{Deserialize, Serialize};

use crate::error::{invalid, io, Result, TrainError};
use crate::policy::HfPolicyConfig;

/// A whole run: tasks, model, warm start, RL loop, selector, replay, loss, evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "RunConfigDe")]
pub struct RunConfig {
    /// Master seed: model init, pools, sampling, selectors (each through its own derived stream).
    pub seed: u64,
    /// `"auto"` (CUDA when available, else CPU; `FRUGAL_DEVICE` overrides), `"cpu"`, `"cuda"`, `"cuda:N"`.
    pub device: String,
    /// Prompt pools and rewards.
    pub task: TaskConfig,
    /// The transformer policy (`rl-lm`; not used when `hf` is set).
    pub model: LmConfig,
    /// Train a Hugging Face model directory instead of `model` (an `[hf]` table:
    /// [`HfPolicyConfig`]); `None` (no table) trains `rl-lm`'s transformer.
    pub hf: Option<HfPolicyConfig>,
    /// Supervised warm start on solver solutions.
    pub sft: SftConfig,
    /// The RL loop.
    pub rl: RlConfig,
    /// Prompt selection.
    pub selector: SelectorConfig,
    /// POPO group replay; `None` trains every rolled-out group as it is (ineffective groups
    /// contribute zero advantage). In TOML: a `[replay]` table (fields default to
    /// `ReplayParams`'s), `replay = true` (all defaults) or `replay = false` (off). When read
    /// from a file, `replay.group_size` is `rl.group_size` unless the file sets it.
    #[serde(serialize_with = "serialize_replay")]
    pub replay: Option<ReplayParams>,
    /// Which groups count as effective — in the replay buffer (what POPO replaces, what gets
    /// zero advantages without replay), in the trainer's metrics and in the summary. Default
    /// by outcome (some responses right, some wrong; `rlvr_core::EffectivenessRule::Outcome`);
    /// `{ reward_std = { tol = 1e-6 } }` judges by reward variance instead, which counts an
    /// all-wrong group mixing the format reward 0.1 with 0 as effective. Metrics report both.
    pub effectiveness: EffectivenessRule,
    /// The policy loss (any `rlvr-core` loss, aggregation, KL, correction).
    pub loss: LossParams,
    /// Held-out evaluation.
    pub eval: EvalConfig,
}

impl Default for RunConfig {
    fn default() -> Self {
        let tok_vocab = CharTokenizer::VOCAB_SIZE;
        Self {
            seed: 0,
            device: "auto".into(),
            task: TaskConfig::default(),
            model: LmConfig::new(tok_vocab, 40).d_model(128).n_layers(3).n_heads(4).d_ff(512),
            hf: None,
            sft: SftConfig::default(),
            rl: RlConfig::default(),
            selector: SelectorConfig::Dps { params: DpsParams::default() },
            replay: Some(ReplayParams::new(RlConfig::default().group_size)),
            effectiveness: EffectivenessRule::default(),
            loss: LossParams::default().correction(Some(DecoupledParams::default())),
            eval: EvalConfig::default(),
        }
    }
}

impl RunConfig {
    /// Reads a TOML file (missing fields take their defaults) and validates it.
    ///
    /// # Errors
    /// I/O; [`TrainError::ConfigParse`] for TOML syntax, unknown keys and values of the wrong
    /// type (naming the dotted key); everything [`validate`](rl_core::Params::validate) rejects.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(io(format!("reading {}", path.display())))?;
        Self::from_toml_str(&text)
    }

    /// Parses TOML text and validates it.
    ///
    /// # Errors
    /// [`TrainError::ConfigParse`] for TOML syntax, unknown keys and values of the wrong type
    /// (naming the dotted key); everything [`validate`](rl_core::Params::validate) rejects.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let cfg: Self =
            serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| parse_error(text, e))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The config as TOML (what a run writes next to its metrics).
    ///
    /// # Errors
    /// Serialisation failure.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string_pretty(self).map_err(|e| invalid("config", "(serialise)", &e.to_string()))
    }

    /// The replay parameters the trainer's buffer uses: `replay` (POPO) or, when replay is
    /// off, a buffer that stores nothing and keeps every group in its slot (ineffective ones
    /// with zero advantages: plain GRPO); either way with the run's `effectiveness` rule.
    pub fn replay_params(&self) -> ReplayParams {
        let base = match &self.replay {
            Some(r) => r.clone(),
            None => ReplayParams::new(self.rl.group_size).max_age(0).shortfall(Shortfall::KeepIneffective),
        };
        base.effectiveness(self.effectiveness.clone())
    }

    fn validate_all(&self) -> Result<()> {
        rl_nn::parse_device(&self.device).map_err(|e| invalid("device", &self.device, &e.to_string()))?;
        self.task.pool.validate().map_err(|e| at("task.pool", e))?;
        self.task.rewards.validate().map_err(|e| at("task.rewards", e))?;
        if self.task.train_prompts == 0 {
            return Err(invalid("task.train_prompts", 0, "need at least one training prompt"));
        }
        if self.task.eval_prompts == 0 {
            return Err(invalid("task.eval_prompts", 0, "need at least one held-out prompt"));
        }
        for (j, m) in self.task.mix.iter().enumerate() {
            m.pool.validate().map_err(|e| at(&format!("task.mix[{j}].pool"), e))?;
            if m.train_prompts + m.eval_prompts == 0 {
                return Err(invalid(&format!("task.mix[{j}].train_prompts"), 0, "a mixed pool needs some prompts"));
            }
        }
        if self.task.eval_seed == self.task.pool.seed {
            return Err(invalid("task.eval_seed", self.task.eval_seed, "must differ from task.pool.seed (held out)"));
        }
        self.model.validate().map_err(|e| at("model", e))?;
        if let Some(hf) = &self.hf {
            hf.validate()?;
        }
        let vocab = CharTokenizer::VOCAB_SIZE;
        if self.model.vocab_size != vocab {
            return Err(invalid("model.vocab_size", self.model.vocab_size, &format!("the tokenizer has {vocab} ids")));
        }
        self.sft.validate()?;
        self.rl.validate()?;
        self.eval.validate()?;
        self.loss.validate().map_err(|e| at("loss", e))?;
        self.effectiveness.validate_at("effectiveness")?;
        if let Some(r) = &self.replay {
            if r.effectiveness != ReplayParams::default().effectiveness && r.effectiveness != self.effectiveness {
                return Err(invalid(
                    "replay.effectiveness",
                    format!("{:?}", r.effectiveness),
                    "differs from the run's `effectiveness` (set the rule there: the trainer, the buffer and the metrics use one)",
                ));
            }
            if r.group_size != self.rl.group_size {
                return Err(invalid(
                    "replay.group_size",
                    r.group_size,
                    &format!(
                        "must equal rl.group_size = {} (leave replay.group_size out to follow rl.group_size)",
                        self.rl.group_size
                    ),
                ));
            }
            r.validate().map_err(|e| at("replay", e))?;
        }
        self.selector.check(self.rl.group_size).map_err(|e| at("selector", e))?;
        Ok(())
    }
}

/// Prompt pools (training and held-out) and the reward of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskConfig {
    /// Family, levels and generator parameters of the training pool (ids `0..train_prompts`).
    pub pool: PoolParams,
    /// Training prompts.
    pub train_prompts: usize,
    /// Held-out prompts, drawn with the same generator from `eval_seed`.
    pub eval_prompts: usize,
    /// Seed of the held-out pool (must differ from `pool.seed`).
    pub eval_seed: u64,
    /// Rewards: 1 correct, 0.1 well-formed but wrong, 0 malformed (TinyZero, as in the papers).
    pub rewards: RewardParams,
    /// More pools mixed in (another family, other levels): their prompts follow `pool`'s in
    /// both the training and the held-out set, and all are disjoint from each other.
    pub mix: Vec<MixedPool>,
}

impl Default for TaskConfig {
    fn default() -> Self {
        Self {
            pool: PoolParams::new(Family::Countdown, 0).levels([1, 2]),
            train_prompts: 1600,
            eval_prompts: 400,
            eval_seed: 1_000_003,
            rewards: RewardParams::default(),
            mix: Vec::new(),
        }
    }
}

impl TaskConfig {
    /// Training prompts of all pools (`train_prompts` plus the mixed pools').
    pub fn total_train_prompts(&self) -> usize {
        self.train_prompts + self.mix.iter().map(|m| m.train_prompts).sum::<usize>()
    }

    /// Held-out prompts of all pools.
    pub fn total_eval_prompts(&self) -> usize {
        self.eval_prompts + self.mix.iter().map(|m| m.eval_prompts).sum::<usize>()
    }
}

/// A pool mixed into the task set ([`TaskConfig::mix`]): its generator parameters and how many
/// of its prompts go to training and to the held-out set. Its held-out prompts are drawn from
/// `derive_seed(task.eval_seed, j + 1)` for the `j`-th mixed pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MixedPool {
    /// Family, levels and generator parameters.
    pub pool: PoolParams,
    /// Training prompts from this pool.
    pub train_prompts: usize,
    /// Held-out prompts from this pool.
    pub eval_prompts: usize,
}

impl Default for MixedPool {
    fn default() -> Self {
        Self { pool: PoolParams::new(Family::Arithmetic, 0), train_prompts: 0, eval_prompts: 0 }
    }
}

/// Supervised warm start on the solver's solutions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Adam steps (0: no warm start).
    pub steps: usize,
    /// Prompts per step.
    pub batch_size: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Load these weights instead of training (a `TransformerLm::save` file).
    pub init_checkpoint: Option<PathBuf>,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self { steps: 400, batch_size: 64, lr: 3e-3, init_checkpoint: None }
    }
}

impl SftConfig {
    fn validate_fields(&self) -> Result<()> {
        if self.steps > 0 && self.batch_size == 0 {
            return Err(invalid("sft.batch_size", 0, "must be >= 1"));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(invalid("sft.lr", self.lr, "must be finite and > 0"));
        }
        Ok(())
    }
}

/// The RL loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlConfig {
    /// Maximum training steps (rollout batches; each makes `ppo_epochs × ppo_mini_batches`
    /// optimizer steps).
    pub steps: usize,
    /// Stop once this many rollouts (training + selection) are spent; `None`: run all steps.
    pub rollout_budget: Option<u64>,
    /// Prompts per training batch `B`.
    pub batch_prompts: usize,
    /// Responses per prompt `K`.
    pub group_size: usize,
    /// Candidate prompts per step for predictive selectors, as a multiple `r` of `B`.
    pub candidate_ratio: usize,
    /// Mini-batches each rollout batch is split into, whole groups each (verl:
    /// `train_batch_size / ppo_mini_batch_size`, 4 with its defaults): one optimizer step per
    /// mini-batch, so every mini-batch after the first is off-policy and the clip can act.
    pub ppo_mini_batches: usize,
    /// Passes over the rollout batch (verl `ppo_epochs`, default 1).
    pub ppo_epochs: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Global gradient-norm clip (`None`: off).
    pub grad_clip: Option<f64>,
    /// Rollout temperature (the papers: 1.0).
    pub temperature: f64,
    /// Rollout top-p (the papers: 1.0).
    pub top_p: f64,
    /// Response length cap in tokens (a response without `<eos>` gets reward 0).
    pub max_new_tokens: i64,
}

impl Default for RlConfig {
    fn default() -> Self {
        Self {
            steps: 200,
            rollout_budget: None,
            batch_prompts: 32,
            group_size: 8,
            candidate_ratio: 4,
            ppo_mini_batches: 4,
            ppo_epochs: 1,
            lr: 3e-4,
            grad_clip: Some(1.0),
            temperature: 1.0,
            top_p: 1.0,
            max_new_tokens: 14,
        }
    }
}

impl RlConfig {
    fn validate_fields(&self) -> Result<()> {
        if self.batch_prompts == 0 {
            return Err(invalid("rl.batch_prompts", 0, "must be >= 1"));
        }
        if self.group_size < 2 {
            return Err(invalid("rl.group_size", self.group_size, "a group needs >= 2 responses"));
        }
        if self.candidate_ratio == 0 {
            return Err(invalid("rl.candidate_ratio", 0, "must be >= 1"));
        }
        if self.ppo_mini_batches == 0 || self.ppo_mini_batches > self.batch_prompts {
            return Err(invalid(
                "rl.ppo_mini_batches",
                self.ppo_mini_batches,
                "must be in 1..=rl.batch_prompts (mini-batches hold whole groups)",
            ));
        }
        if self.ppo_epochs == 0 {
            return Err(invalid("rl.ppo_epochs", 0, "must be >= 1"));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(invalid("rl.lr", self.lr, "must be finite and > 0"));
        }
        if let Some(c) = self.grad_clip {
            if !(c.is_finite() && c > 0.0) {
                return Err(invalid("rl.grad_clip", c, "must be finite and > 0"));
            }
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(invalid("rl.temperature", self.temperature, "must be finite and > 0"));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(invalid("rl.top_p", self.top_p, "must be in (0, 1]"));
        }
        if self.max_new_tokens < 1 {
            return Err(invalid("rl.max_new_tokens", self.max_new_tokens, "must be >= 1"));
        }
        Ok(())
    }
}

/// Which `rlvr-select` selector picks each step's prompts: every selector of the crate. To
/// use a selector of your own, hand it to [`crate::TrainerBuilder::selector`] instead.
///
/// Rollout-based selectors (`dynamic_sampling`, `online_difficulty`, `drm`) spend rollouts
/// through the trainer's policy and train on the groups they keep; their group size is always
/// `rl.group_size`. The feature-based ones (`gps`, `mpts`, `pdts`) see each prompt as a hashed
/// character n-gram embedding of its text (`embed_dim` floats).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SelectorConfig {
    /// `B` prompts uniformly (an epoch-shuffled data loader).
    Uniform,
    /// History resampling (the DPS paper's baseline): within an epoch, skip prompts whose group
    /// was all-correct earlier in the epoch.
    HistoryResampling {
        /// Parameters (`epoch_steps`: steps per epoch; none = the whole run is one epoch).
        #[serde(default)]
        params: HistoryResamplingParams,
    },
    /// DAPO dynamic sampling: roll out generation batches of `B`, keep groups with mixed
    /// success, stop at `B` kept or after `max_gen_batches` batches.
    DynamicSampling {
        /// Cap on generation batches per step (DAPO: 10).
        #[serde(default = "default_gen_batches")]
        max_gen_batches: usize,
    },
    /// Online difficulty filtering: as dynamic sampling, keeping groups whose success rate lies
    /// in `[p_lo, p_hi]`.
    OnlineDifficulty {
        /// Cap on generation batches per step.
        #[serde(default = "default_gen_batches")]
        max_gen_batches: usize,
        /// Lower end of the kept success-rate band.
        #[serde(default = "default_p_lo")]
        p_lo: f64,
        /// Upper end of the kept success-rate band.
        #[serde(default = "default_p_hi")]
        p_hi: f64,
    },
    /// MoPPS: Beta posterior per prompt, Thompson draw closest to the target rate.
    Mopps {
        /// Parameters.
        #[serde(default)]
        params: MoppsParams,
    },
    /// DPS: HMM over each prompt's solving state, top-`B` by `P(partial)`.
    Dps {
        /// Parameters.
        #[serde(default)]
        params: DpsParams,
    },
    /// GPS: shared generative model over hashed n-gram prompt embeddings.
    Gps {
        /// Parameters.
        #[serde(default)]
        params: GpsParams,
        /// Embedding dimension of the hashed character n-grams.
        #[serde(default = "default_embed_dim")]
        embed_dim: usize,
    },
    /// MPTS: a risk learner over prompt embeddings, UCB on the predicted risk (1 − success).
    Mpts {
        /// Parameters.
        #[serde(default)]
        params: MptsParams,
        /// Embedding dimension of the hashed character n-grams.
        #[serde(default = "default_embed_dim")]
        embed_dim: usize,
    },
    /// PDTS: MPTS's risk learner with posterior sampling and a diversity term.
    Pdts {
        /// Parameters.
        #[serde(default)]
        params: PdtsParams,
        /// Embedding dimension of the hashed character n-grams.
        #[serde(default = "default_embed_dim")]
        embed_dim: usize,
    },
    /// DRM: roll out every candidate and train on the `B` with the highest risk (CVaR).
    Drm {
        /// Risk of a group without an explicit risk.
        #[serde(default = "default_risk")]
        risk_from_rewards: RiskFromRewards,
    },
    /// GDRM: the first `B` candidates, each group's advantages scaled by its exponentiated-
    /// gradient weight (a weighted loss for PPO-type losses, which are linear in the advantage).
    Gdrm {
        /// Parameters.
        #[serde(default)]
        params: GdrmParams,
    },
}

fn default_gen_batches() -> usize {
    10
}

fn default_embed_dim() -> usize {
    32
}

fn default_p_lo() -> f64 {
    FilterParams::online_difficulty().p_lo
}

fn default_p_hi() -> f64 {
    FilterParams::online_difficulty().p_hi
}

fn default_risk() -> RiskFromRewards {
    DrmParams::default().risk_from_rewards
}

impl Default for SelectorConfig {
    fn default() -> Self {
        Self::Dps { params: DpsParams::default() }
    }
}

impl SelectorConfig {
    /// Every short name, in the order of the variants.
    pub const SHORT_NAMES: [&'static str; 11] =
        ["uniform", "hr", "ds", "odf", "mopps", "dps", "gps", "mpts", "pdts", "drm", "gdrm"];

    /// A short name for tables (one of [`SHORT_NAMES`](Self::SHORT_NAMES)).
    pub fn short_name(&self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::HistoryResampling { .. } => "hr",
            Self::DynamicSampling { .. } => "ds",
            Self::OnlineDifficulty { .. } => "odf",
            Self::Mopps { .. } => "mopps",
            Self::Dps { .. } => "dps",
            Self::Gps { .. } => "gps",
            Self::Mpts { .. } => "mpts",
            Self::Pdts { .. } => "pdts",
            Self::Drm { .. } => "drm",
            Self::Gdrm { .. } => "gdrm",
        }
    }

    /// The selector of a short name (or its TOML `kind`) with default parameters.
    pub fn from_short_name(name: &str) -> Option<Self> {
        Some(match name {
            "uniform" => Self::Uniform,
            "hr" | "history_resampling" => Self::HistoryResampling { params: HistoryResamplingParams::default() },
            "ds" | "dynamic_sampling" => Self::DynamicSampling { max_gen_batches: default_gen_batches() },
            "odf" | "online_difficulty" => Self::OnlineDifficulty {
                max_gen_batches: default_gen_batches(),
                p_lo: default_p_lo(),
                p_hi: default_p_hi(),
            },
            "mopps" => Self::Mopps { params: MoppsParams::default() },
            "dps" => Self::Dps { params: DpsParams::default() },
            "gps" => Self::Gps { params: GpsParams::default(), embed_dim: default_embed_dim() },
            "mpts" => Self::Mpts { params: MptsParams::default(), embed_dim: default_embed_dim() },
            "pdts" => Self::Pdts { params: PdtsParams::default(), embed_dim: default_embed_dim() },
            "drm" => Self::Drm { risk_from_rewards: default_risk() },
            "gdrm" => Self::Gdrm { params: GdrmParams::default() },
            _ => return None,
        })
    }

    /// The filter parameters of `dynamic_sampling` / `online_difficulty` for `group_size`.
    pub(crate) fn filter_params(&self, group_size: usize) -> Option<FilterParams> {
        match self {
            Self::DynamicSampling { max_gen_batches } => {
                Some(FilterParams { group_size, max_gen_batches: *max_gen_batches, ..FilterParams::dynamic_sampling() })
            }
            Self::OnlineDifficulty { max_gen_batches, p_lo, p_hi } => Some(FilterParams {
                group_size,
                max_gen_batches: *max_gen_batches,
                p_lo: *p_lo,
                p_hi: *p_hi,
                ..FilterParams::online_difficulty()
            }),
            _ => None,
        }
    }

    fn check(&self, group_size: usize) -> Result<()> {
        if let Some(f) = self.filter_params(group_size) {
            if f.max_gen_batches == 0 {
                return Err(invalid("max_gen_batches", 0, "must be >= 1"));
            }
            f.check()?;
            return Ok(());
        }
        match self {
            Self::Uniform | Self::DynamicSampling { .. } | Self::OnlineDifficulty { .. } => Ok(()),
            Self::HistoryResampling { params } => nest("params", || {
                rlvr_select::HistoryResampling::new((*params).check()?)?;
                Ok(())
            }),
            Self::Mopps { params } => nest("params", || {
                rlvr_select::Mopps::new((*params).check()?, 1)?;
                Ok(())
            }),
            Self::Dps { params } => nest("params", || {
                rlvr_select::Dps::new((*params).check()?, 1)?;
                Ok(())
            }),
            Self::Gps { params, embed_dim } => {
                check_embed_dim(*embed_dim)?;
                nest("params", || {
                    params.check()?;
                    Ok(())
                })
            }
            Self::Mpts { params, embed_dim } => {
                check_embed_dim(*embed_dim)?;
                nest("params", || {
                    rlvr_select::neural::Mpts::new((*params).check()?, *embed_dim)?;
                    Ok(())
                })
            }
            Self::Pdts { params, embed_dim } => {
                check_embed_dim(*embed_dim)?;
                nest("params", || {
                    rlvr_select::neural::Pdts::new((*params).check()?, *embed_dim)?;
                    Ok(())
                })
            }
            Self::Drm { risk_from_rewards } => {
                rlvr_select::Drm::new(DrmParams { group_size, risk_from_rewards: *risk_from_rewards }.check()?)?;
                Ok(())
            }
            Self::Gdrm { params } => nest("params", || {
                rlvr_select::Gdrm::new((*params).check()?)?;
                Ok(())
            }),
        }
    }
}

/// Runs a check of a nested parameter set, prefixing the field its error names.
fn nest(prefix: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    f().map_err(|e| at(prefix, e))
}

fn check_embed_dim(embed_dim: usize) -> Result<()> {
    if embed_dim == 0 {
        return Err(invalid("embed_dim", 0, "must be >= 1"));
    }
    Ok(())
}

/// Held-out evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// Evaluate every this many RL steps (and always before the first and after the last).
    pub every: usize,
    /// Samples per held-out prompt `n` (pass@1 is their mean; pass@k uses the unbiased estimator).
    pub samples: usize,
    /// Sampling temperature of the evaluation.
    pub temperature: f64,
    /// The `k` of pass@k (≤ `samples`).
    pub k: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self { every: 25, samples: 8, temperature: 1.0, k: 8 }
    }
}

impl EvalConfig {
    fn validate_fields(&self) -> Result<()> {
        if self.every == 0 {
            return Err(invalid("eval.every", 0, "must be >= 1"));
        }
        if self.samples == 0 {
            return Err(invalid("eval.samples", 0, "must be >= 1"));
        }
        if self.k == 0 || self.k > self.samples {
            return Err(invalid("eval.k", self.k, "must be in 1..=eval.samples"));
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(invalid("eval.temperature", self.temperature, "must be finite and > 0"));
        }
        Ok(())
    }
}

/// `replay` in TOML/JSON: a table of `ReplayParams`, or `false` for off (TOML has no null).
fn serialize_replay<S: serde::Serializer>(v: &Option<ReplayParams>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(p) => p.serialize(s),
        None => s.serialize_bool(false),
    }
}

impl Params for RunConfig {
    type Error = TrainError;

    /// Every section; [`TrainError::InvalidConfig`] (or the upstream crate's error) names the
    /// first bad field by its dotted path.
    fn validate(&self) -> Result<()> {
        self.validate_all()
    }
}

impl Params for SftConfig {
    type Error = TrainError;

    /// `sft.*` in range.
    fn validate(&self) -> Result<()> {
        self.validate_fields()
    }
}

impl Params for RlConfig {
    type Error = TrainError;

    /// `rl.*` in range.
    fn validate(&self) -> Result<()> {
        self.validate_fields()
    }
}

impl Params for EvalConfig {
    type Error = TrainError;

    /// `eval.*` in range.
    fn validate(&self) -> Result<()> {
        self.validate_fields()
    }
}

/// The `kind` of every selector, in the order of the variants.
const SELECTOR_KINDS: [&str; 11] = [
    "uniform",
    "history_resampling",
    "dynamic_sampling",
    "online_difficulty",
    "mopps",
    "dps",
    "gps",
    "mpts",
    "pdts",
    "drm",
    "gdrm",
];

/// [`SelectorConfig`] as serde derives it for an externally tagged enum (`{ dps = { params =
/// .. } }`), which the internally tagged TOML form is rearranged into: its unit variant
/// refuses stray keys and its errors keep their paths.
#[derive(Deserialize)]
#[serde(remote = "SelectorConfig", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)] // read only by the derived deserializer
enum SelectorDe {
    Uniform,
    HistoryResampling {
        #[serde(default)]
        params: HistoryResamplingParams,
    },
    DynamicSampling {
        #[serde(default = "default_gen_batches")]
        max_gen_batches: usize,
    },
    OnlineDifficulty {
        #[serde(default = "default_gen_batches")]
        max_gen_batches: usize,
        #[serde(default = "default_p_lo")]
        p_lo: f64,
        #[serde(default = "default_p_hi")]
        p_hi: f64,
    },
    Mopps {
        #[serde(default)]
        params: MoppsParams,
    },
    Dps {
        #[serde(default)]
        params: DpsParams,
    },
    Gps {
        #[serde(default)]
        params: GpsParams,
        #[serde(default = "default_embed_dim")]
        embed_dim: usize,
    },
    Mpts {
        #[serde(default)]
        params: MptsParams,
        #[serde(default = "default_embed_dim")]
        embed_dim: usize,
    },
    Pdts {
        #[serde(default)]
        params: PdtsParams,
        #[serde(default = "default_embed_dim")]
        embed_dim: usize,
    },
    Drm {
        #[serde(default = "default_risk")]
        risk_from_rewards: RiskFromRewards,
    },
    Gdrm {
        #[serde(default)]
        params: GdrmParams,
    },
}

#[derive(Deserialize)]
struct SelectorWrap(#[serde(with = "SelectorDe")] SelectorConfig);

impl<'de> Deserialize<'de> for SelectorConfig {
    /// A table with `kind` (one of the variants, snake_case) and the variant's fields; any
    /// other key is an error naming it, also next to `kind = "uniform"`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(de::internally_tagged::<D, SelectorWrap>(d, "kind", &SELECTOR_KINDS)?.0)
    }
}

/// `replay` as read: off, or parameters with a note whether `group_size` was written (else it
/// follows `rl.group_size`).
#[derive(Debug, Clone, PartialEq)]
enum ReplayField {
    Off,
    On { params: ReplayParams, group_size_set: bool },
}

impl<'de> Deserialize<'de> for ReplayField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error;
        match de::Raw::deserialize(d)? {
            de::Raw::Bool(false) => Ok(Self::Off),
            de::Raw::Bool(true) => Ok(Self::On { params: ReplayParams::default(), group_size_set: false }),
            de::Raw::Map(entries) => {
                let group_size_set = entries.iter().any(|(k, _)| k == "group_size");
                let params = de::nested(de::Raw::Map(entries), 0)?;
                Ok(Self::On { params, group_size_set })
            }
            other => Err(D::Error::invalid_type(
                other.unexpected(),
                &"`false` (off), `true` (the defaults) or a table of replay parameters",
            )),
        }
    }
}

/// [`RunConfig`] as read from a file: `replay.group_size` not yet resolved.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RunConfigDe {
    seed: u64,
    device: String,
    task: TaskConfig,
    model: LmConfig,
    hf: Option<HfPolicyConfig>,
    sft: SftConfig,
    rl: RlConfig,
    selector: SelectorConfig,
    replay: ReplayField,
    effectiveness: EffectivenessRule,
    loss: LossParams,
    eval: EvalConfig,
}

impl Default for RunConfigDe {
    fn default() -> Self {
        let d = RunConfig::default();
        Self {
            seed: d.seed,
            device: d.device,
            task: d.task,
            model: d.model,
            hf: d.hf,
            sft: d.sft,
            rl: d.rl,
            selector: d.selector,
            replay: match d.replay {
                Some(params) => ReplayField::On { params, group_size_set: false },
                None => ReplayField::Off,
            },
            effectiveness: d.effectiveness,
            loss: d.loss,
            eval: d.eval,
        }
    }
}

impl From<RunConfigDe> for RunConfig {
    fn from(d: RunConfigDe) -> Self {
        let replay = match d.replay {
            ReplayField::Off => None,
            ReplayField::On { mut params, group_size_set } => {
                if !group_size_set {
                    params.group_size = d.rl.group_size;
                }
                Some(params)
            }
        };
        Self {
            seed: d.seed,
            device: d.device,
            task: d.task,
            model: d.model,
            hf: d.hf,
            sft: d.sft,
            rl: d.rl,
            selector: d.selector,
            replay,
            effectiveness: d.effectiveness,
            loss: d.loss,
            eval: d.eval,
        }
    }
}

/// A TOML parse error as [`TrainError::ConfigParse`]: the dotted key and the message with its
/// line and column.
fn parse_error(text: &str, e: serde_path_to_error::Error<toml::de::Error>) -> TrainError {
    let path = de::dotted(e.path(), 0);
    let inner = e.into_inner();
    let (key, message) = de::join_at(&path, inner.message().trim_end());
    let location = inner.span().map(|span| {
        let before = text.get(..span.start).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!(" (line {line}, column {column})")
    });
    TrainError::ConfigParse {
        key: if key.is_empty() { "(top level)".into() } else { key },
        message: format!("{message}{}", location.unwrap_or_default()),
    }
}

/// Prefixes the field named by a parameter error of a nested section with `prefix.` (the
/// upstream crates name fields relative to their own parameter set).
fn at(prefix: &str, e: impl Into<TrainError>) -> TrainError {
    let join = |name: String| {
        if name == prefix || name.starts_with(&format!("{prefix}.")) || name.starts_with(&format!("{prefix}[")) {
            name
        } else if name.starts_with('[') {
            format!("{prefix}{name}")
        } else {
            format!("{prefix}.{name}")
        }
    };
    match e.into() {
        TrainError::InvalidConfig { field, value, reason } => {
            TrainError::InvalidConfig { field: join(field), value, reason }
        }
        TrainError::Task(rlvr_tasks::TaskError::InvalidParameter { name, value, reason }) => {
            TrainError::Task(rlvr_tasks::TaskError::InvalidParameter { name: join(name), value, reason })
        }
        TrainError::Lm(rl_lm::LmError::InvalidConfig { name, value, reason }) => {
            TrainError::Lm(rl_lm::LmError::InvalidConfig { name: join(name), value, reason })
        }
        TrainError::Lm(rl_lm::LmError::InvalidParameter { name, value, reason }) => {
            TrainError::Lm(rl_lm::LmError::InvalidParameter { name: join(name), value, reason })
        }
        TrainError::Loss(rlvr_core::RlvrCoreError::InvalidParameter { name, value, reason }) => {
            TrainError::Loss(rlvr_core::RlvrCoreError::InvalidParameter { name: join(name), value, reason })
        }
        TrainError::Replay(rlvr_replay::ReplayError::InvalidParameter { name, value, reason }) => {
            TrainError::Replay(rlvr_replay::ReplayError::InvalidParameter { name: join(name), value, reason })
        }
        TrainError::Replay(rlvr_replay::ReplayError::Rlvr(rlvr_core::RlvrCoreError::InvalidParameter {
            name,
            value,
            reason,
        })) => TrainError::Replay(rlvr_replay::ReplayError::Rlvr(rlvr_core::RlvrCoreError::InvalidParameter {
            name: join(name),
            value,
            reason,
        })),
        TrainError::Select(rlvr_select::SelectError::InvalidParameter { name, value, reason }) => {
            TrainError::Select(rlvr_select::SelectError::InvalidParameter { name: join(name), value, reason })
        }
        TrainError::Select(rlvr_select::SelectError::Core(rl_core::RlCoreError::InvalidParameter {
            name,
            value,
            reason,
        })) => TrainError::Select(rlvr_select::SelectError::Core(rl_core::RlCoreError::InvalidParameter {
            name: join(name),
            value,
            reason,
        })),
        TrainError::Core(rl_core::RlCoreError::InvalidParameter { name, value, reason }) => {
            TrainError::Core(rl_core::RlCoreError::InvalidParameter { name: join(name), value, reason })
        }
        other => other,
    }
}
