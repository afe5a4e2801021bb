//! Outcome-reward advantage estimators (tch-free, f64).
//!
//! Every estimator maps the outcome rewards `R` of a batch (one scalar per sequence), its
//! [`Groups`] and, where needed, response lengths to one advantage per sequence. Broadcast it
//! over the response tokens with [`Advantages::to_tensor`].
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
//!
//! `whiten_B` is verl's `masked_whiten` over the response tokens of the whole batch: every
//! sequence's value is repeated `|y_i|` times (outcome reward, γ = 1), so the mean and the
//! Bessel variance are length-weighted; `whiten(x) = (x − mean)/sqrt(var + eps)`, eps `1e-8`.
//! Without lengths every sequence has weight 1.
//!
//! Groups that are not effective ([`GroupKind`] other than `Mixed`) get `A = 0` exactly when
//! [`AdvantageParams::zero_ineffective`] is set (default), before any batch whitening. On an
//! exactly constant group every group-relative estimator gives 0 anyway, so this changes
//! nothing for verl parity; it removes the phantom advantages of fp noise and of shaped
//! rewards under an outcome gate. REINFORCE++ (no baseline) ignores groups entirely. Singleton groups are an error unless
//! [`SingletonGroups::Zero`] is chosen (verl would give `A = R` for GRPO: `μ = 0`, `σ = 1`).

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::error::{check_positive, Result, RlvrCoreError};
use crate::groups::{group_stats, mean_std, EffectivenessRule, GroupKind, GroupStats, Groups};

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

/// An outcome-reward advantage estimator. Defaults of each variant are the reference's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AdvantageEstimator {
    /// GRPO: `(R − μ_G)/(σ_G + eps)` (verl `grpo`, eps `1e-6`, Bessel std).
    Grpo {
        /// Added to σ (verl `1e-6`; TRL `1e-4`; OpenRLHF `1e-9`).
        eps: f64,
        /// Bessel (verl) or population std.
        std: StdKind,
    },
    /// Dr.GRPO: `R − μ_G`.
    DrGrpo,
    /// RLOO: `R − mean of the other K−1 rewards = K/(K−1)·(R − μ_G)`.
    Rloo,
    /// REINFORCE++: batch whitening of `R` (no group baseline).
    ReinforcePlusPlus {
        /// Added to the variance inside the square root (verl `masked_whiten`: `1e-8`).
        eps: f64,
    },
    /// REINFORCE++-baseline: `R − μ_G`, then batch whitening.
    ReinforcePlusPlusBaseline {
        /// Added to the variance inside the square root (verl: `1e-8`).
        eps: f64,
    },
    /// MaxRL: `(R − μ_G)/(μ_G + eps)`.
    MaxRl {
        /// Added to `μ_G` (default `1e-6`).
        eps: f64,
    },
    /// Pass@k (verl `grpo_passk`): only the best response of a group gets
    /// `r_max − r_second`, divided by `σ_G + eps` when `normalize_by_std`.
    PassK {
        /// Divide by the group's Bessel std (verl: `norm_adv_by_std_in_grpo`, default true).
        normalize_by_std: bool,
        /// Added to σ (default `1e-6`).
        eps: f64,
    },
    /// OPO: `R − Σ_j |y_j| R_j / Σ_j |y_j|` (needs lengths).
    Opo,
    /// Batch-std scaling (TRL `scale_rewards="batch"`, "PPO-Lite"): `(R − μ_G)/(σ_B + eps)`
    /// with σ_B the Bessel std of all rewards of the batch.
    BatchStd {
        /// Added to σ_B (TRL `1e-4`).
        eps: f64,
    },
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
        }
    }

    fn min_group_size(&self) -> usize {
        match self {
            Self::Rloo | Self::PassK { .. } => 2,
            _ => 1,
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

/// Advantage configuration. Build with [`AdvantageParams::new`] and the builder methods,
/// validate with [`AdvantageParams::check`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `estimator` | GRPO, eps `1e-6`, Bessel std (verl) | see [`AdvantageEstimator`] |
/// | `effectiveness` | tolerance `1e-6`, no outcome threshold | see [`EffectivenessRule`] |
/// | `zero_ineffective` | `true` | ineffective groups get `A = 0` exactly |
/// | `singleton` | `Error` | see [`SingletonGroups`] |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdvantageParams {
    /// The estimator.
    pub estimator: AdvantageEstimator,
    /// Group classification.
    pub effectiveness: EffectivenessRule,
    /// Zero the advantages of groups that are not `Mixed`.
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

    /// Validates the parameters.
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`] naming a non-positive or non-finite eps, or a bad
    /// effectiveness rule.
    pub fn check(self) -> Result<AdvantageConfig> {
        self.effectiveness.check()?;
        match self.estimator {
            AdvantageEstimator::Grpo { eps, .. }
            | AdvantageEstimator::ReinforcePlusPlus { eps }
            | AdvantageEstimator::ReinforcePlusPlusBaseline { eps }
            | AdvantageEstimator::MaxRl { eps }
            | AdvantageEstimator::PassK { eps, .. }
            | AdvantageEstimator::BatchStd { eps } => check_positive("estimator.eps", eps)?,
            AdvantageEstimator::DrGrpo | AdvantageEstimator::Rloo | AdvantageEstimator::Opo => {}
        }
        Ok(AdvantageConfig(self))
    }
}

/// Validated [`AdvantageParams`]; computes advantages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdvantageConfig(AdvantageParams);

impl std::ops::Deref for AdvantageConfig {
    type Target = AdvantageParams;
    fn deref(&self) -> &AdvantageParams {
        &self.0
    }
}

/// Advantages of a batch plus the per-group statistics they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Advantages {
    /// One advantage per sequence.
    pub values: Vec<f64>,
    /// Statistics and classification of every group.
    pub groups: Vec<GroupStats>,
}

impl Advantages {
    /// The advantages as an `f32` tensor `[B]` on `device`.
    pub fn to_tensor(&self, device: Device) -> Tensor {
        let v: Vec<f32> = self.values.iter().map(|&a| a as f32).collect();
        Tensor::from_slice(&v).to_kind(Kind::Float).to_device(device)
    }

    /// Fraction of groups of each [`GroupKind`] and advantage statistics:
    /// `frac_zero_variance_groups` (all non-`Mixed` groups), `frac_all_success`,
    /// `frac_all_fail`, `frac_singleton`, `adv_mean`, `adv_std`, `adv_min`, `adv_max`.
    pub fn metrics(&self) -> rl_core::Metrics {
        let g = self.groups.len().max(1) as f64;
        let frac = |k: GroupKind| self.groups.iter().filter(|s| s.kind == k).count() as f64 / g;
        let (mean, _, std) = if self.values.is_empty() { (0.0, 0.0, 0.0) } else { mean_std(&self.values) };
        let min = self.values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        rl_core::Metrics::new()
            .with("frac_zero_variance_groups", self.groups.iter().filter(|s| !s.kind.is_effective()).count() as f64 / g)
            .with("frac_all_success", frac(GroupKind::AllSuccess))
            .with("frac_all_fail", frac(GroupKind::AllFail))
            .with("frac_singleton", frac(GroupKind::Singleton))
            .with("adv_mean", mean)
            .with("adv_std", std)
            .with("adv_min", min)
            .with("adv_max", max)
    }
}

/// Length-weighted whitening (verl `masked_whiten`, Bessel variance over tokens).
fn whiten(x: &mut [f64], weights: &[f64], eps: f64) {
    let n: f64 = weights.iter().sum();
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
    /// Computes one advantage per sequence.
    ///
    /// `lengths` are response lengths in tokens (required by OPO; used as whitening weights by
    /// the REINFORCE++ estimators, uniform weights when absent).
    ///
    /// # Errors
    /// - [`RlvrCoreError::Empty`] for an empty batch;
    /// - [`RlvrCoreError::Groups`] when `groups` or `lengths` do not match `rewards`;
    /// - [`RlvrCoreError::NonFinite`] for a NaN or infinite reward;
    /// - [`RlvrCoreError::MissingInput`] when OPO gets no lengths;
    /// - [`RlvrCoreError::GroupTooSmall`] for a group below the estimator's minimum size (2
    ///   for RLOO and pass@k) unless [`SingletonGroups::Zero`], and for any singleton group
    ///   under [`SingletonGroups::Error`].
    pub fn compute(&self, rewards: &[f64], groups: &Groups, lengths: Option<&[usize]>) -> Result<Advantages> {
        if rewards.is_empty() {
            return Err(RlvrCoreError::Empty { what: "rewards".into() });
        }
        let stats = group_stats(rewards, groups, &self.effectiveness)?;
        if let Some(l) = lengths {
            groups.check_len(l.len(), "lengths")?;
        }
        if let AdvantageEstimator::ReinforcePlusPlus { eps } = self.estimator {
            // No group baseline: groups, their sizes and their effectiveness play no part.
            let mut adv = rewards.to_vec();
            let w: Vec<f64> = match lengths {
                Some(l) => l.iter().map(|&x| x as f64).collect(),
                None => vec![1.0; rewards.len()],
            };
            if w.iter().sum::<f64>() > 0.0 {
                whiten(&mut adv, &w, eps);
            }
            return Ok(Advantages { values: adv, groups: stats });
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
            if s.size == 1 || (self.zero_ineffective && !s.kind.is_effective()) {
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
                | AdvantageEstimator::BatchStd { .. } => {
                    for &i in m {
                        adv[i] = rewards[i] - s.mean;
                    }
                }
                AdvantageEstimator::Rloo => {
                    for &i in m {
                        adv[i] = k / (k - 1.0) * (rewards[i] - s.mean);
                    }
                }
                AdvantageEstimator::ReinforcePlusPlus { .. } => {} // handled above
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
                    let l = lengths.ok_or_else(|| RlvrCoreError::MissingInput {
                        loss: "opo advantage".into(),
                        input: "lengths".into(),
                    })?;
                    let tot: f64 = m.iter().map(|&i| l[i] as f64).sum();
                    let base =
                        if tot > 0.0 { m.iter().map(|&i| l[i] as f64 * rewards[i]).sum::<f64>() / tot } else { 0.0 };
                    for &i in m {
                        adv[i] = rewards[i] - base;
                    }
                }
            }
        }
        match self.estimator {
            AdvantageEstimator::ReinforcePlusPlusBaseline { eps } => {
                let w: Vec<f64> = match lengths {
                    Some(l) => l.iter().map(|&x| x as f64).collect(),
                    None => vec![1.0; rewards.len()],
                };
                if w.iter().sum::<f64>() > 0.0 {
                    whiten(&mut adv, &w, eps);
                }
            }
            AdvantageEstimator::BatchStd { eps } => {
                let (_, sd, _) = mean_std(rewards);
                for a in &mut adv {
                    *a /= sd + eps;
                }
            }
            _ => {}
        }
        Ok(Advantages { values: adv, groups: stats })
    }
}
