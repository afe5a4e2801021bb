//! The loss: policy loss + KL-to-reference + entropy bonus, aggregated with global counts and
//! optionally corrected for off-policy data.
//!
//! ```text
//! L = Σ_{i,t} W_it · w_it · ℓ_it  +  β Σ_{i,t} W_it kl_it  −  γ Σ_{i,t} W_it H_it
//! ```
//!
//! `W` are the aggregation weights (`W_it = c_i m_it`, [`crate::Aggregation::row_scale`], with
//! the global counts), `w` the detached behaviour weights of the decoupled correction (1 when off or
//! on-policy), `ℓ` the per-token policy loss ([`crate::PolicyLoss`]), `kl` the KL estimator
//! ([`crate::KlParams`]) and `H` the per-token entropy. This is verl's actor loss
//! `pg_loss + kl_loss_coef · agg(kl) − entropy_coeff · agg(H)` with `rollout_is_weights`
//! applied to the policy term only.
//!
//! Implementation: every policy loss and KL estimator is a per-token function of `logp`, so
//! the loss value and its exact derivative `G = ∂L/∂logp` are computed in one gradient-free
//! pass, and the returned tensor is `L + G·logp − sg(G·logp)`: its value is `L` and its
//! gradient with respect to `logp` is `G`, with a one-operation backward. The entropy term
//! keeps its own autograd graph (it depends on the logits, not on `logp`).

use rl_core::Valid;
use serde::{Deserialize, Serialize};

use crate::aggregate::{Aggregation, Compat};
use crate::correction::DecoupledParams;
use crate::error::{invalid, Result, RlvrCoreError};
use crate::kl::KlParams;
use crate::policy::PolicyLoss;

/// The full loss configuration. Build it with [`LossParams::new`] and the setters, check it
/// once with [`rl_core::Params::check`] and compute with [`LossConfig`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `policy` | PPO ε 0.2/0.2, dual clip 3.0 (verl `vanilla`) | the policy loss, see [`PolicyLoss`] | |
/// | `aggregation` | `token-mean` (verl `loss_agg_mode`) | token/sequence normalisation, see [`Aggregation`] | scale > 0 |
/// | `kl` | `None` (off; verl `use_kl_loss: false`) | KL-to-reference term, see [`KlParams`] (`kl_loss_coef` 0.001, `low_var_kl` when on) | coef ≥ 0 |
/// | `entropy_coef` | `0.0` (verl `entropy_coeff`; the alias `entropy_coeff` is accepted in configs) | entropy bonus γ: `L −= γ agg(H)` | finite |
/// | `correction` | `None` (off) | POPO / AReaL decoupled IS on rows with behaviour log-probs, see [`DecoupledParams`] | |
/// | `compat` | `Native` | `Verl` follows verl's arithmetic where this crate differs (see [`Compat`] and `docs/rlvr-core.md`) | |
/// | `check_finite` | `true` | reject NaN/inf inputs with a typed error | |
/// | `metrics` | `true` | compute [`LossMetrics`] | |
/// | `fused_cpu` | `true` | on CPU `f32` batches, compute value, gradient and metrics in one sweep over the tokens (`crate::fused`); `false` uses the libtorch ops of every other device and type | |
///
/// ```
/// use rl_core::Params;
/// use rlvr_core::{LossParams, PolicyLoss, PpoParams};
/// // TOML/JSON configs name only what they change; a misspelt field is an error
/// let p: LossParams = serde_json::from_str(r#"{"policy": {"kind": "ppo", "eps_high": 0.28}, "entropy_coeff": 0.01}"#)?;
/// assert_eq!(p.policy, PolicyLoss::Ppo(PpoParams::default().eps_high(0.28)));
/// assert_eq!(p.entropy_coef, 0.01);
/// assert!(serde_json::from_str::<LossParams>(r#"{"entropy": 0.01}"#).is_err());
/// assert!(p.check().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LossParams {
    /// The policy loss.
    pub policy: PolicyLoss,
    /// The aggregation mode.
    pub aggregation: Aggregation,
    /// KL-to-reference in the loss.
    pub kl: Option<KlParams>,
    /// Entropy-bonus coefficient γ (`L −= γ agg(H)`).
    #[serde(alias = "entropy_coeff")]
    pub entropy_coef: f64,
    /// Decoupled off-policy correction (applied when behaviour log-probs are given).
    pub correction: Option<DecoupledParams>,
    /// Whose arithmetic to follow where this crate's definition differs from verl's.
    pub compat: Compat,
    /// Check every input for NaN/inf.
    pub check_finite: bool,
    /// Compute metrics.
    pub metrics: bool,
    /// Use the fused CPU kernels for CPU `f32` batches.
    pub fused_cpu: bool,
}

impl Default for LossParams {
    fn default() -> Self {
        Self {
            policy: PolicyLoss::default(),
            aggregation: Aggregation::TokenMean,
            kl: None,
            entropy_coef: 0.0,
            correction: None,
            compat: Compat::Native,
            check_finite: true,
            metrics: true,
            fused_cpu: true,
        }
    }
}

impl LossParams {
    /// Defaults with `policy`.
    pub fn new(policy: PolicyLoss) -> Self {
        Self { policy, ..Self::default() }
    }
    /// Sets the policy loss.
    #[must_use]
    pub fn policy(mut self, p: PolicyLoss) -> Self {
        self.policy = p;
        self
    }
    /// Sets the aggregation mode.
    #[must_use]
    pub fn aggregation(mut self, a: Aggregation) -> Self {
        self.aggregation = a;
        self
    }
    /// Sets the KL term.
    #[must_use]
    pub fn kl(mut self, kl: Option<KlParams>) -> Self {
        self.kl = kl;
        self
    }
    /// Sets the entropy coefficient.
    #[must_use]
    pub fn entropy_coef(mut self, c: f64) -> Self {
        self.entropy_coef = c;
        self
    }
    /// Sets the decoupled correction.
    #[must_use]
    pub fn correction(mut self, c: Option<DecoupledParams>) -> Self {
        self.correction = c;
        self
    }
    /// Sets the compatibility mode.
    #[must_use]
    pub fn compat(mut self, c: Compat) -> Self {
        self.compat = c;
        self
    }
    /// Sets the input finiteness check.
    #[must_use]
    pub fn check_finite(mut self, on: bool) -> Self {
        self.check_finite = on;
        self
    }
    /// Sets whether metrics are computed.
    #[must_use]
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }
    /// Sets whether CPU `f32` batches go through the fused kernels.
    #[must_use]
    pub fn fused_cpu(mut self, on: bool) -> Self {
        self.fused_cpu = on;
        self
    }
}

impl rl_core::Params for LossParams {
    type Error = RlvrCoreError;
    /// Checks every field, naming the first bad one (`policy.eps_low`, `kl.coef`,
    /// `aggregation.scale`, `entropy_coef`, `correction.upper`).
    fn validate(&self) -> Result<()> {
        self.policy.validate_at("policy")?;
        self.aggregation.validate_at("aggregation")?;
        if let Some(k) = &self.kl {
            k.validate_at("kl")?;
        }
        if !self.entropy_coef.is_finite() {
            return Err(invalid("entropy_coef", self.entropy_coef, "must be finite"));
        }
        if let Some(c) = &self.correction {
            c.validate_at("correction")?;
        }
        Ok(())
    }
}

/// Computes the loss from checked [`LossParams`] (`LossConfig::loss`, feature `tch`).
#[derive(Debug, Clone, PartialEq)]
pub struct LossConfig(Valid<LossParams>);

impl LossConfig {
    /// The loss for `params`.
    pub fn new(params: Valid<LossParams>) -> Self {
        Self(params)
    }

    /// The parameters.
    pub fn params(&self) -> &Valid<LossParams> {
        &self.0
    }
}

impl From<Valid<LossParams>> for LossConfig {
    fn from(p: Valid<LossParams>) -> Self {
        Self(p)
    }
}

impl std::ops::Deref for LossConfig {
    type Target = LossParams;
    fn deref(&self) -> &LossParams {
        &self.0
    }
}

/// Metrics of one loss call (means over the micro-batch's response tokens unless stated).
/// Fields a loss does not define are `None`. Names in [`rl_core::Metrics`] are given in
/// brackets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LossMetrics {
    /// Total loss value \[`loss`\].
    pub loss: f64,
    /// Policy term \[`pg_loss`\].
    pub pg_loss: f64,
    /// Response tokens in this micro-batch \[`tokens`\].
    pub tokens: f64,
    /// Approximate KL to the proximal policy, `mean(old_logp − logp)` \[`ppo_kl`\] (verl).
    pub ppo_kl: f64,
    /// Mean ratio `π_θ/π_prox` (sequence ratio for GSPO/GMPO) \[`ratio_mean`\].
    pub ratio_mean: f64,
    /// Share of tokens with the clipped branch active (verl `pg_clipfrac`) \[`clipfrac`\].
    pub clipfrac: Option<f64>,
    /// Share clipped above (`r > 1+ε_h`, `A > 0`) \[`clipfrac_upper`\].
    pub clipfrac_upper: Option<f64>,
    /// Share clipped below (`r < 1−ε_l`, `A < 0`) \[`clipfrac_lower`\].
    pub clipfrac_lower: Option<f64>,
    /// Share hit by the dual clip or the ratio cap (`A < 0`) \[`clipfrac_dual`\].
    pub clipfrac_dual: Option<f64>,
    /// Clip-Cov / KL-Cov: share of tokens selected by the covariance rule (verl's
    /// `pg_clipfrac` of `clip_cov`) \[`cov_frac`\].
    pub cov_frac: Option<f64>,
    /// KL-to-reference estimator mean \[`kl_ref`\].
    pub kl_ref: Option<f64>,
    /// Mean per-token entropy \[`entropy`\].
    pub entropy: Option<f64>,
    /// Mean behaviour weight before truncation/masking \[`is_weight_raw_mean`\].
    pub is_weight_raw_mean: Option<f64>,
    /// Mean behaviour weight applied \[`is_weight_mean`\].
    pub is_weight_mean: Option<f64>,
    /// Minimum raw behaviour weight \[`is_weight_min`\].
    pub is_weight_min: Option<f64>,
    /// Maximum raw behaviour weight \[`is_weight_max`\].
    pub is_weight_max: Option<f64>,
    /// Share of tokens/sequences truncated \[`is_truncated_frac`\].
    pub is_truncated_frac: Option<f64>,
    /// Share of tokens/sequences masked \[`is_masked_frac`\].
    pub is_masked_frac: Option<f64>,
    /// `mean(behave_logp − old_logp)` \[`behave_approx_kl`\].
    pub behave_approx_kl: Option<f64>,
    /// LPO: mean over groups of `Σ_k |c_k|` \[`lpo_coef_l1`\].
    pub lpo_coef_l1: Option<f64>,
    /// LPO: max `|c_k|` \[`lpo_coef_max_abs`\].
    pub lpo_coef_max_abs: Option<f64>,
    /// LPO: mean target entropy `H(w*)` \[`lpo_target_entropy`\].
    pub lpo_target_entropy: Option<f64>,
    /// LPO: mean listwise entropy `H(P_θ)` \[`lpo_listwise_entropy`\].
    pub lpo_listwise_entropy: Option<f64>,
    /// LPO: share of groups whose coefficients are all zero (zero-variance groups on-policy)
    /// \[`lpo_frac_zero_groups`\].
    pub lpo_frac_zero_groups: Option<f64>,
}

impl LossMetrics {
    /// The metrics as named scalars (unset options are left out).
    pub fn to_metrics(&self) -> rl_core::Metrics {
        let mut m = rl_core::Metrics::new()
            .with("loss", self.loss)
            .with("pg_loss", self.pg_loss)
            .with("tokens", self.tokens)
            .with("ppo_kl", self.ppo_kl)
            .with("ratio_mean", self.ratio_mean);
        let opts = [
            ("clipfrac", self.clipfrac),
            ("clipfrac_upper", self.clipfrac_upper),
            ("clipfrac_lower", self.clipfrac_lower),
            ("clipfrac_dual", self.clipfrac_dual),
            ("cov_frac", self.cov_frac),
            ("kl_ref", self.kl_ref),
            ("entropy", self.entropy),
            ("is_weight_raw_mean", self.is_weight_raw_mean),
            ("is_weight_mean", self.is_weight_mean),
            ("is_weight_min", self.is_weight_min),
            ("is_weight_max", self.is_weight_max),
            ("is_truncated_frac", self.is_truncated_frac),
            ("is_masked_frac", self.is_masked_frac),
            ("behave_approx_kl", self.behave_approx_kl),
            ("lpo_coef_l1", self.lpo_coef_l1),
            ("lpo_coef_max_abs", self.lpo_coef_max_abs),
            ("lpo_target_entropy", self.lpo_target_entropy),
            ("lpo_listwise_entropy", self.lpo_listwise_entropy),
            ("lpo_frac_zero_groups", self.lpo_frac_zero_groups),
        ];
        for (k, v) in opts {
            if let Some(v) = v {
                m.insert(k, v);
            }
        }
        m
    }
}

impl From<&LossMetrics> for rl_core::Metrics {
    fn from(m: &LossMetrics) -> Self {
        m.to_metrics()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PpoParams;
    use rl_core::Params;

    #[test]
    fn setters_validation_and_config_files() {
        let p = LossParams::default()
            .policy(PolicyLoss::Reinforce)
            .aggregation(Aggregation::SeqMeanTokenSum)
            .kl(Some(KlParams::default()))
            .entropy_coef(-0.5)
            .correction(Some(DecoupledParams::default()))
            .compat(Compat::Verl)
            .check_finite(false)
            .metrics(false)
            .fused_cpu(false);
        assert_eq!(
            p,
            LossParams {
                policy: PolicyLoss::Reinforce,
                aggregation: Aggregation::SeqMeanTokenSum,
                kl: Some(KlParams::default()),
                entropy_coef: -0.5,
                correction: Some(DecoupledParams::default()),
                compat: Compat::Verl,
                check_finite: false,
                metrics: false,
                fused_cpu: false,
            }
        );
        let cfg = LossConfig::from(p.check().unwrap());
        assert_eq!(cfg.params().entropy_coef, -0.5);
        assert_eq!(LossConfig::new(LossParams::default().check().unwrap()).compat, Compat::Native);
        let name = |p: LossParams| match p.check().unwrap_err() {
            RlvrCoreError::InvalidParameter { name, .. } => name,
            e => panic!("{e:?}"),
        };
        assert_eq!(name(LossParams::new(PolicyLoss::Ppo(PpoParams::default().eps_low(2.0)))), "policy.eps_low");
        assert_eq!(
            name(LossParams::default().aggregation(Aggregation::SeqMeanTokenSumNorm { scale: Some(-1.0) })),
            "aggregation.scale"
        );
        assert_eq!(name(LossParams::default().kl(Some(KlParams::default().coef(-1.0)))), "kl.coef");
        assert_eq!(name(LossParams::default().entropy_coef(f64::NAN)), "entropy_coef");
        assert_eq!(
            name(LossParams::default().correction(Some(DecoupledParams::default().upper(0.5)))),
            "correction.upper"
        );
        // verl's `entropy_coeff` is an alias; unknown fields are errors, not silently dropped
        let p: LossParams = serde_json::from_str(r#"{"entropy_coeff": 0.01, "compat": "verl"}"#).unwrap();
        assert_eq!((p.entropy_coef, p.compat), (0.01, Compat::Verl));
        assert!(serde_json::from_str::<LossParams>(r#"{"entropy_coefficient": 0.01}"#).is_err());
        assert!(serde_json::from_str::<rl_core::Valid<LossParams>>(r#"{"entropy_coef": 1e999}"#).is_err());
    }

    #[test]
    fn metrics_keep_only_what_is_set() {
        let m = LossMetrics { loss: 1.5, clipfrac: Some(0.25), cov_frac: Some(0.5), ..LossMetrics::default() };
        let r = m.to_metrics();
        assert_eq!((r.get("loss"), r.get("clipfrac"), r.get("cov_frac")), (Some(1.5), Some(0.25), Some(0.5)));
        assert_eq!(r.get("kl_ref"), None);
        assert_eq!(rl_core::Metrics::from(&m).get("tokens"), Some(0.0));
    }
}
