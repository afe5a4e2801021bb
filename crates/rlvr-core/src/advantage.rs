//! Outcome-reward advantage estimators (f64; tch-free apart from `Advantages::to_tensor`, feature `tch`).
//!
//! Every estimator maps the outcome rewards `R` of a batch (one scalar per sequence), its
//! [`Groups`] and, where needed, response lengths or baselines to one advantage per sequence.
//! Broadcast it over the response tokens with `Advantages::to_tensor` (feature `tch`). The
//! token-level estimators (GAE, REINFORCE++ with γ ≠ 1, ReMax returns) are in
//! [`crate::token`].
//!
//! | estimator | formula | reference |
//! |---|---|---|
//! | [`AdvantageEstimator::Grpo`] | `A = (R − μ_G)/(σ_G + eps)`, σ Bessel (default) or population, eps `1e-6` | verl `grpo` |
//! | [`AdvantageEstimator::DrGrpo`] | `A = R − μ_G` | verl `norm_adv_by_std_in_grpo=False` |
//! | [`AdvantageEstimator::Rloo`] | `A = K/(K−1)·(R − μ_G)` | verl/OpenRLHF `rloo` |
//! | [`AdvantageEstimator::ReinforcePlusPlus`] | `A = whiten_B(R)` | verl `reinforce_plus_plus` (γ = 1) |
//! | [`AdvantageEstimator::ReinforcePlusPlusBaseline`] | `A = whiten_B(R − μ_G)` | verl `reinforce_plus_plus_baseline` |
//! | [`AdvantageEstimator::MaxRl`] | `A = (R − μ_G)/(μ_G + eps)` | LPO paper, Table 1 |
//! | [`AdvantageEstimator::PassK`] | best response: `A = r_max − r_2nd` (`/(σ_G+eps)`), others 0 | verl `grpo_passk` |
//! | [`AdvantageEstimator::Opo`] | `A = R − Σ_j |y_j| R_j / Σ_j |y_j|` | verl `opo` |
//! | [`AdvantageEstimator::BatchStd`] | `A = (R − μ_G)/(σ_B + eps)`, eps `1e-4` | TRL `scale_rewards="batch"` |
//! | [`AdvantageEstimator::ReMax`] | `A = R − R_greedy` (a baseline per sequence) | verl `remax` |
//! | [`AdvantageEstimator::Gpg`] | `A = α (R − μ_G)/f_norm`, `α = B / #{R ≠ 0}` | verl `gpg` |
//!
//! `whiten_B` is verl's `masked_whiten` over the response tokens of the whole batch: every
//! sequence's value is repeated `|y_i|` times (outcome reward, γ = 1), so the mean and the
//! Bessel variance are length-weighted; `whiten(x) = (x − mean)/sqrt(var + eps)`, eps `1e-8`.
//! Without lengths every sequence has weight 1.
//!
//! **Ineffective groups.** Each group gets a [`Verdict`](crate::Verdict) from
//! [`AdvantageParams::effectiveness`] (default: by outcome, see [`EffectivenessRule`]). With
//! [`AdvantageParams::zero_ineffective`] (default) an ineffective group's centred rewards are set
//! to exactly 0 *before* any batch-level step. For the group estimators that is its final
//! advantage. The two batch-whitened estimators differ: REINFORCE++ ignores groups entirely,
//! and REINFORCE++-baseline whitens the centred values of the whole batch, so an ineffective
//! group ends at `−mean_B/sqrt(var_B + eps)` like every other zero of the batch (exactly what
//! verl gives an exactly constant group), not at 0. On an exactly constant group every
//! group-relative estimator gives 0 anyway, so with binary rewards the zeroing changes nothing
//! relative to verl; it removes the phantom advantages of shaped rewards (an all-fail group
//! with format credit `[0, 0.1, 0]`) and of fp noise. Set `zero_ineffective = false` for verl's
//! numbers on such groups. ReMax compares each sequence with its own baseline and, like
//! REINFORCE++, ignores groups. Singleton groups are an error unless [`SingletonGroups::Zero`]
//! is chosen (verl would give `A = R` for GRPO: `μ = 0`, `σ = 1`).

use rl_core::Valid;
use serde::{Deserialize, Serialize};
#[cfg(feature = "tch")]
use tch::{Device, Kind, Tensor};

use crate::effectiveness::{EffectivenessRule, IneffectiveReason, ReasonCounts};
use crate::error::{invalid, Result, RlvrCoreError};
use crate::groups::{group_stats, GroupStats, Groups};
use crate::stats::{check_finite_values, mean_std};

/// Which standard deviation GRPO divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdKind {
    /// Bessel-corrected `torch.std` (verl, TRL, OpenRLHF). Default.
    #[default]
    Unbiased,
    /// Population std (the LPO paper's `σ_G`).
    Population,
}

fn eps_1e6() -> f64 {
    1e-6
}
fn eps_1e8() -> f64 {
    1e-8
}
fn eps_1e4() -> f64 {
    1e-4
}
fn yes() -> bool {
    true
}
fn one() -> f64 {
    1.0
}

/// An outcome-reward advantage estimator. Every field has the reference's default, also when
/// read from a config (`{"kind": "grpo"}` is verl's GRPO).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AdvantageEstimator {
    /// GRPO: `(R − μ_G)/(σ_G + eps)` (verl `grpo`, eps `1e-6`, Bessel std).
    Grpo {
        /// Added to σ (verl `1e-6`; TRL `1e-4`; OpenRLHF `1e-9`).
        #[serde(default = "eps_1e6")]
        eps: f64,
        /// Bessel (verl) or population std.
        #[serde(default)]
        std: StdKind,
    },
    /// Dr.GRPO: `R − μ_G`.
    DrGrpo,
    /// RLOO: `R − mean of the other K−1 rewards = K/(K−1)·(R − μ_G)`.
    Rloo,
    /// REINFORCE++: batch whitening of `R` (no group baseline; γ = 1 — for γ ≠ 1 use
    /// [`crate::token::reinforce_pp`]).
    ReinforcePlusPlus {
        /// Added to the variance inside the square root (verl `masked_whiten`: `1e-8`).
        #[serde(default = "eps_1e8")]
        eps: f64,
    },
    /// REINFORCE++-baseline: `R − μ_G`, then batch whitening.
    ReinforcePlusPlusBaseline {
        /// Added to the variance inside the square root (verl: `1e-8`).
        #[serde(default = "eps_1e8")]
        eps: f64,
    },
    /// MaxRL: `(R − μ_G)/(μ_G + eps)`.
    MaxRl {
        /// Added to `μ_G` (default `1e-6`).
        #[serde(default = "eps_1e6")]
        eps: f64,
    },
    /// Pass@k (verl `grpo_passk`): only the best response of a group gets
    /// `r_max − r_second`, divided by `σ_G + eps` when `normalize_by_std`.
    PassK {
        /// Divide by the group's Bessel std (verl: `norm_adv_by_std_in_grpo`, default true).
        #[serde(default = "yes")]
        normalize_by_std: bool,
        /// Added to σ (default `1e-6`).
        #[serde(default = "eps_1e6")]
        eps: f64,
    },
    /// OPO: `R − Σ_j |y_j| R_j / Σ_j |y_j|` (needs lengths).
    Opo,
    /// Batch-std scaling (TRL `scale_rewards="batch"`, "PPO-Lite"): `(R − μ_G)/(σ_B + eps)`
    /// with σ_B the Bessel std of all rewards of the batch.
    BatchStd {
        /// Added to σ_B (TRL `1e-4`).
        #[serde(default = "eps_1e4")]
        eps: f64,
    },
    /// ReMax (Li et al. 2023, arXiv 2310.10505; verl `remax`): `R − b`, with `b` the reward of
    /// the greedy response to the same prompt (needs baselines, one per sequence).
    #[serde(rename = "remax")]
    ReMax,
    /// GPG (Chu et al. 2025, arXiv 2504.02546; verl `gpg`): `α (R − μ_G)/f_norm` with
    /// `α = B / max(#{i : R_i ≠ 0}, 1)` over the whole batch.
    Gpg {
        /// The normaliser `f_norm` (verl `1.0`).
        #[serde(default = "one")]
        f_norm: f64,
    },
}

/// The `kind` of every variant of [`AdvantageEstimator`], in the order of the variants.
const ADVANTAGE_ESTIMATOR_KINDS: [&str; 11] = [
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "max_rl",
    "pass_k",
    "opo",
    "batch_std",
    "remax",
    "gpg",
];

/// [`AdvantageEstimator`] externally tagged, for [`rl_core::de::internally_tagged`]: a variant without
/// fields refuses any key next to `kind`, and errors keep their paths.
#[derive(Deserialize)]
#[serde(remote = "AdvantageEstimator", rename_all = "snake_case", deny_unknown_fields)]
#[allow(dead_code)] // read only by the derived deserializer
enum AdvantageEstimatorDe {
    Grpo {
        #[serde(default = "eps_1e6")]
        eps: f64,
        #[serde(default)]
        std: StdKind,
    },
    DrGrpo,
    Rloo,
    ReinforcePlusPlus {
        #[serde(default = "eps_1e8")]
        eps: f64,
    },
    ReinforcePlusPlusBaseline {
        #[serde(default = "eps_1e8")]
        eps: f64,
    },
    MaxRl {
        #[serde(default = "eps_1e6")]
        eps: f64,
    },
    PassK {
        #[serde(default = "yes")]
        normalize_by_std: bool,
        #[serde(default = "eps_1e6")]
        eps: f64,
    },
    Opo,
    BatchStd {
        #[serde(default = "eps_1e4")]
        eps: f64,
    },
    #[serde(rename = "remax")]
    ReMax,
    Gpg {
        #[serde(default = "one")]
        f_norm: f64,
    },
}

#[derive(Deserialize)]
struct AdvantageEstimatorTagged(#[serde(with = "AdvantageEstimatorDe")] AdvantageEstimator);

impl<'de> Deserialize<'de> for AdvantageEstimator {
    /// A table with `kind` and the variant's fields; any other key is an error naming it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(rl_core::de::internally_tagged::<D, AdvantageEstimatorTagged>(d, "kind", &ADVANTAGE_ESTIMATOR_KINDS)?.0)
    }
}

impl Default for AdvantageEstimator {
    fn default() -> Self {
        Self::grpo()
    }
}

impl AdvantageEstimator {
    /// GRPO with verl's defaults (eps `1e-6`, Bessel std).
    pub fn grpo() -> Self {
        Self::Grpo { eps: 1e-6, std: StdKind::Unbiased }
    }
    /// REINFORCE++ with verl's whitening eps `1e-8`.
    pub fn reinforce_pp() -> Self {
        Self::ReinforcePlusPlus { eps: 1e-8 }
    }
    /// REINFORCE++-baseline with verl's whitening eps `1e-8`.
    pub fn reinforce_pp_baseline() -> Self {
        Self::ReinforcePlusPlusBaseline { eps: 1e-8 }
    }
    /// MaxRL with eps `1e-6`.
    pub fn max_rl() -> Self {
        Self::MaxRl { eps: 1e-6 }
    }
    /// Pass@k with verl's defaults (std-normalised, eps `1e-6`).
    pub fn pass_k() -> Self {
        Self::PassK { normalize_by_std: true, eps: 1e-6 }
    }
    /// Batch-std scaling with TRL's eps `1e-4`.
    pub fn batch_std() -> Self {
        Self::BatchStd { eps: 1e-4 }
    }
    /// GPG with verl's `f_norm = 1`.
    pub fn gpg() -> Self {
        Self::Gpg { f_norm: 1.0 }
    }

    /// A short name (`"grpo"`, `"rloo"`, ...), as used in metrics and docs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Grpo { .. } => "grpo",
            Self::DrGrpo => "dr_grpo",
            Self::Rloo => "rloo",
            Self::ReinforcePlusPlus { .. } => "reinforce_plus_plus",
            Self::ReinforcePlusPlusBaseline { .. } => "reinforce_plus_plus_baseline",
            Self::MaxRl { .. } => "max_rl",
            Self::PassK { .. } => "pass_k",
            Self::Opo => "opo",
            Self::BatchStd { .. } => "batch_std",
            Self::ReMax => "remax",
            Self::Gpg { .. } => "gpg",
        }
    }

    /// Whether the estimator compares responses within a group (all but REINFORCE++ and ReMax).
    pub fn uses_groups(&self) -> bool {
        !matches!(self, Self::ReinforcePlusPlus { .. } | Self::ReMax)
    }

    fn min_group_size(&self) -> usize {
        match self {
            Self::Rloo | Self::PassK { .. } => 2,
            _ => 1,
        }
    }

    fn validate_at(&self, prefix: &str) -> Result<()> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(invalid(&format!("{prefix}.{name}"), v, "must be finite and > 0"))
            }
        };
        match *self {
            Self::Grpo { eps, .. }
            | Self::ReinforcePlusPlus { eps }
            | Self::ReinforcePlusPlusBaseline { eps }
            | Self::MaxRl { eps }
            | Self::PassK { eps, .. }
            | Self::BatchStd { eps } => positive("eps", eps),
            Self::Gpg { f_norm } => positive("f_norm", f_norm),
            Self::DrGrpo | Self::Rloo | Self::Opo | Self::ReMax => Ok(()),
        }
    }
}

/// What to do with groups of a single response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SingletonGroups {
    /// Return [`RlvrCoreError::GroupTooSmall`] (default).
    #[default]
    Error,
    /// Give them `A = 0` (no group baseline exists).
    Zero,
}

/// Parameters of the outcome-reward advantage ([`AdvantageConfig`] computes it).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `estimator` | GRPO, eps `1e-6`, Bessel std (verl) | the formula, see [`AdvantageEstimator`] | eps, f_norm > 0 |
/// | `effectiveness` | by outcome, success = `reward ≥ 1` | which groups carry signal, see [`EffectivenessRule`] | |
/// | `zero_ineffective` | `true` | ineffective groups' centred rewards are set to exactly 0 | |
/// | `singleton` | `Error` | groups of one response, see [`SingletonGroups`] | |
///
/// ```
/// use rl_core::Params;
/// use rlvr_core::{AdvantageConfig, AdvantageEstimator, AdvantageParams, Groups};
/// let cfg = AdvantageConfig::new(AdvantageParams::new(AdvantageEstimator::Rloo).check()?);
/// let adv = cfg.compute(&[1.0, 0.0, 0.0, 1.0], &Groups::uniform(1, 4)?, None)?;
/// assert_eq!(adv.values, vec![2.0 / 3.0, -2.0 / 3.0, -2.0 / 3.0, 2.0 / 3.0]);
/// // from a config file: every field may be omitted, misspelt fields are errors
/// let p: AdvantageParams = serde_json::from_str(r#"{"estimator": {"kind": "gpg"}}"#)?;
/// assert_eq!(p.estimator, AdvantageEstimator::gpg());
/// assert!(serde_json::from_str::<AdvantageParams>(r#"{"zero_ineffectve": false}"#).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdvantageParams {
    /// The estimator.
    pub estimator: AdvantageEstimator,
    /// Group classification.
    pub effectiveness: EffectivenessRule,
    /// Zero the centred rewards of groups that are not effective.
    pub zero_ineffective: bool,
    /// Singleton-group policy.
    pub singleton: SingletonGroups,
}

impl Default for AdvantageParams {
    fn default() -> Self {
        Self {
            estimator: AdvantageEstimator::default(),
            effectiveness: EffectivenessRule::default(),
            zero_ineffective: true,
            singleton: SingletonGroups::Error,
        }
    }
}

impl AdvantageParams {
    /// Defaults with `estimator`.
    pub fn new(estimator: AdvantageEstimator) -> Self {
        Self { estimator, ..Self::default() }
    }
    /// Sets the estimator.
    #[must_use]
    pub fn estimator(mut self, estimator: AdvantageEstimator) -> Self {
        self.estimator = estimator;
        self
    }
    /// Sets the effectiveness rule.
    #[must_use]
    pub fn effectiveness(mut self, rule: EffectivenessRule) -> Self {
        self.effectiveness = rule;
        self
    }
    /// Sets whether ineffective groups get zero advantages.
    #[must_use]
    pub fn zero_ineffective(mut self, on: bool) -> Self {
        self.zero_ineffective = on;
        self
    }
    /// Sets the singleton-group policy.
    #[must_use]
    pub fn singleton(mut self, s: SingletonGroups) -> Self {
        self.singleton = s;
        self
    }
}

impl rl_core::Params for AdvantageParams {
    type Error = RlvrCoreError;
    /// Checks the estimator's constants (`estimator.eps`, `estimator.f_norm`) and the
    /// effectiveness rule.
    fn validate(&self) -> Result<()> {
        self.estimator.validate_at("estimator")?;
        self.effectiveness.validate_at("effectiveness")
    }
}

/// Computes advantages from checked [`AdvantageParams`].
#[derive(Debug, Clone, PartialEq)]
pub struct AdvantageConfig(Valid<AdvantageParams>);

impl AdvantageConfig {
    /// The estimator for `params`.
    pub fn new(params: Valid<AdvantageParams>) -> Self {
        Self(params)
    }

    /// The parameters.
    pub fn params(&self) -> &Valid<AdvantageParams> {
        &self.0
    }
}

impl From<Valid<AdvantageParams>> for AdvantageConfig {
    fn from(p: Valid<AdvantageParams>) -> Self {
        Self(p)
    }
}

impl std::ops::Deref for AdvantageConfig {
    type Target = AdvantageParams;
    fn deref(&self) -> &AdvantageParams {
        &self.0
    }
}

/// The inputs of one advantage computation: rewards and groups, plus what some estimators or
/// rules need.
#[derive(Debug, Clone, Copy)]
pub struct AdvantageInputs<'a> {
    /// One outcome reward per sequence.
    pub rewards: &'a [f64],
    /// The group of every sequence.
    pub groups: &'a Groups,
    /// Response lengths in tokens (OPO; whitening weights of the REINFORCE++ estimators).
    pub lengths: Option<&'a [usize]>,
    /// Binary outcomes, one per sequence, used by [`EffectivenessRule::Outcome`] instead of
    /// its reward threshold.
    pub outcomes: Option<&'a [bool]>,
    /// Per-sequence baselines (ReMax: the greedy response's reward).
    pub baselines: Option<&'a [f64]>,
}

impl<'a> AdvantageInputs<'a> {
    /// Rewards and groups; the optional inputs start empty.
    pub fn new(rewards: &'a [f64], groups: &'a Groups) -> Self {
        Self { rewards, groups, lengths: None, outcomes: None, baselines: None }
    }
    /// Sets the response lengths.
    #[must_use]
    pub fn lengths(mut self, lengths: &'a [usize]) -> Self {
        self.lengths = Some(lengths);
        self
    }
    /// Sets the binary outcomes.
    #[must_use]
    pub fn outcomes(mut self, outcomes: &'a [bool]) -> Self {
        self.outcomes = Some(outcomes);
        self
    }
    /// Sets the per-sequence baselines.
    #[must_use]
    pub fn baselines(mut self, baselines: &'a [f64]) -> Self {
        self.baselines = Some(baselines);
        self
    }
}

/// Advantages of a batch plus the per-group statistics they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Advantages {
    /// One advantage per sequence.
    pub values: Vec<f64>,
    /// Statistics and verdict of every group.
    pub groups: Vec<GroupStats>,
}

impl Advantages {
    /// The advantages as an `f32` tensor `[B]` on `device` (feature `tch`).
    ///
    /// # Errors
    /// [`RlvrCoreError::Torch`] when `device` is not available (libtorch's error, not a panic).
    #[cfg(feature = "tch")]
    pub fn to_tensor(&self, device: Device) -> Result<Tensor> {
        let v: Vec<f32> = self.values.iter().map(|&a| a as f32).collect();
        Ok(Tensor::f_from_slice(&v)?.f_to_kind(Kind::Float)?.f_to_device(device)?)
    }

    /// Ineffective groups per reason.
    pub fn reasons(&self) -> ReasonCounts {
        let mut c = ReasonCounts::default();
        for s in &self.groups {
            c.record(s.verdict);
        }
        c
    }

    /// Share of groups judged ineffective.
    pub fn frac_ineffective(&self) -> f64 {
        let n = self.groups.len();
        if n == 0 {
            0.0
        } else {
            self.groups.iter().filter(|s| !s.verdict.is_effective()).count() as f64 / n as f64
        }
    }

    /// `frac_ineffective` (share of groups), `frac_<reason>` for every
    /// [`IneffectiveReason`] (`frac_all_failure`, `frac_zero_variance`, ...), and `adv_mean`,
    /// `adv_std` (population), `adv_min`, `adv_max`.
    pub fn metrics(&self) -> rl_core::Metrics {
        let g = self.groups.len().max(1) as f64;
        let reasons = self.reasons();
        let s = mean_std(&self.values);
        let min = self.values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut m = rl_core::Metrics::new().with("frac_ineffective", self.frac_ineffective());
        for r in IneffectiveReason::ALL {
            m.insert(format!("frac_{}", r.name()), reasons.get(r) as f64 / g);
        }
        m.with("adv_mean", s.mean).with("adv_std", s.std_pop).with("adv_min", min).with("adv_max", max)
    }
}

/// Length-weighted whitening (verl `masked_whiten`, Bessel variance over tokens).
fn whiten(x: &mut [f64], weights: &[f64], eps: f64) {
    let n: f64 = weights.iter().sum();
    if n <= 0.0 {
        return;
    }
    let mean = x.iter().zip(weights).map(|(v, w)| v * w).sum::<f64>() / n;
    let mut var = x.iter().zip(weights).map(|(v, w)| w * (v - mean) * (v - mean)).sum::<f64>() / n;
    if n > 1.0 {
        var *= n / (n - 1.0);
    }
    let inv = 1.0 / (var + eps).sqrt();
    for v in x.iter_mut() {
        *v = (*v - mean) * inv;
    }
}

impl AdvantageConfig {
    /// Computes one advantage per sequence from rewards, groups and optional lengths (the
    /// common case of [`AdvantageConfig::compute_inputs`]).
    ///
    /// # Errors
    /// As [`AdvantageConfig::compute_inputs`].
    pub fn compute(&self, rewards: &[f64], groups: &Groups, lengths: Option<&[usize]>) -> Result<Advantages> {
        let mut x = AdvantageInputs::new(rewards, groups);
        x.lengths = lengths;
        self.compute_inputs(&x)
    }

    /// Computes one advantage per sequence.
    ///
    /// # Errors
    /// - [`RlvrCoreError::Empty`] for an empty batch;
    /// - [`RlvrCoreError::Groups`] when `groups`, `lengths`, `outcomes` or `baselines` do not
    ///   match `rewards`;
    /// - [`RlvrCoreError::NonFinite`] for a NaN or infinite reward or baseline;
    /// - [`RlvrCoreError::MissingInput`] when OPO gets no lengths or ReMax no baselines;
    /// - [`RlvrCoreError::GroupTooSmall`] for a group below the estimator's minimum size (2
    ///   for RLOO and pass@k) unless [`SingletonGroups::Zero`], and for any singleton group
    ///   under [`SingletonGroups::Error`] (not for REINFORCE++ and ReMax, which ignore groups).
    pub fn compute_inputs(&self, x: &AdvantageInputs<'_>) -> Result<Advantages> {
        let (rewards, groups) = (x.rewards, x.groups);
        if rewards.is_empty() {
            return Err(RlvrCoreError::Empty { what: "rewards".into() });
        }
        let stats = group_stats(rewards, x.outcomes, groups, &self.effectiveness)?;
        if let Some(l) = x.lengths {
            groups.check_len(l.len(), "lengths")?;
        }
        let missing = |input: &str| RlvrCoreError::MissingInput {
            loss: format!("{} advantage", self.estimator.name()),
            input: input.into(),
        };
        let length_weights = || -> Vec<f64> {
            match x.lengths {
                Some(l) => l.iter().map(|&v| v as f64).collect(),
                None => vec![1.0; rewards.len()],
            }
        };
        if self.estimator == AdvantageEstimator::Opo && x.lengths.is_none() {
            return Err(missing("lengths"));
        }
        match self.estimator {
            AdvantageEstimator::ReinforcePlusPlus { eps } => {
                // No group baseline: groups, their sizes and their verdicts play no part.
                let mut adv = rewards.to_vec();
                whiten(&mut adv, &length_weights(), eps);
                return Ok(Advantages { values: adv, groups: stats });
            }
            AdvantageEstimator::ReMax => {
                let b = x.baselines.ok_or_else(|| missing("baselines"))?;
                groups.check_len(b.len(), "baselines")?;
                check_finite_values("baselines", b)?;
                let adv = rewards.iter().zip(b).map(|(r, b)| r - b).collect();
                return Ok(Advantages { values: adv, groups: stats });
            }
            _ => {}
        }
        let min = self.estimator.min_group_size();
        for (g, s) in stats.iter().enumerate() {
            let too_small = s.size < min || s.size == 1;
            if too_small && self.singleton == SingletonGroups::Error {
                return Err(RlvrCoreError::GroupTooSmall {
                    group: g,
                    size: s.size,
                    method: self.estimator.name().into(),
                    min: min.max(2),
                });
            }
        }
        let mut adv = vec![0.0; rewards.len()];
        let mut buf = Vec::new();
        for (g, m) in groups.iter().enumerate() {
            let s = &stats[g];
            if s.size == 1 || (self.zero_ineffective && !s.verdict.is_effective()) {
                continue; // A = 0
            }
            buf.clear();
            buf.extend(m.iter().map(|&i| rewards[i]));
            let k = s.size as f64;
            match self.estimator {
                AdvantageEstimator::Grpo { eps, std } => {
                    let sd = match std {
                        StdKind::Unbiased => s.std_unbiased,
                        StdKind::Population => s.std_pop,
                    };
                    for &i in m {
                        adv[i] = (rewards[i] - s.mean) / (sd + eps);
                    }
                }
                AdvantageEstimator::DrGrpo
                | AdvantageEstimator::ReinforcePlusPlusBaseline { .. }
                | AdvantageEstimator::BatchStd { .. }
                | AdvantageEstimator::Gpg { .. } => {
                    for &i in m {
                        adv[i] = rewards[i] - s.mean;
                    }
                }
                AdvantageEstimator::Rloo => {
                    for &i in m {
                        adv[i] = k / (k - 1.0) * (rewards[i] - s.mean);
                    }
                }
                AdvantageEstimator::MaxRl { eps } => {
                    for &i in m {
                        adv[i] = (rewards[i] - s.mean) / (s.mean + eps);
                    }
                }
                AdvantageEstimator::PassK { normalize_by_std, eps } => {
                    // best = first index of the maximum; second = max over the others
                    let (best_pos, r_max) =
                        buf.iter().enumerate().fold((0usize, f64::NEG_INFINITY), |(bi, bv), (j, &v)| {
                            if v > bv {
                                (j, v)
                            } else {
                                (bi, bv)
                            }
                        });
                    let r_2nd = buf
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != best_pos)
                        .map(|(_, &v)| v)
                        .fold(f64::NEG_INFINITY, f64::max);
                    let mut a = r_max - r_2nd;
                    if normalize_by_std {
                        a /= s.std_unbiased + eps;
                    }
                    adv[m[best_pos]] = a;
                }
                AdvantageEstimator::Opo => {
                    let l = x.lengths.ok_or_else(|| missing("lengths"))?;
                    let tot: f64 = m.iter().map(|&i| l[i] as f64).sum();
                    let base =
                        if tot > 0.0 { m.iter().map(|&i| l[i] as f64 * rewards[i]).sum::<f64>() / tot } else { 0.0 };
                    for &i in m {
                        adv[i] = rewards[i] - base;
                    }
                }
                AdvantageEstimator::ReinforcePlusPlus { .. } | AdvantageEstimator::ReMax => {} // handled above
            }
        }
        match self.estimator {
            AdvantageEstimator::ReinforcePlusPlusBaseline { eps } => whiten(&mut adv, &length_weights(), eps),
            AdvantageEstimator::BatchStd { eps } => {
                let sd = mean_std(rewards).std_unbiased;
                for a in &mut adv {
                    *a /= sd + eps;
                }
            }
            AdvantageEstimator::Gpg { f_norm } => {
                let nonzero = rewards.iter().filter(|&&r| r != 0.0).count().max(1);
                let alpha = rewards.len() as f64 / nonzero as f64;
                for a in &mut adv {
                    *a = alpha * *a / f_norm;
                }
            }
            _ => {}
        }
        Ok(Advantages { values: adv, groups: stats })
    }
}
