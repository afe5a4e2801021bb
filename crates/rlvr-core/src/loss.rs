//! The loss: policy loss + KL-to-reference + entropy bonus, aggregated with global counts and
//! optionally corrected for off-policy data.
//!
//! ```text
//! L = Σ_{i,t} W_it · w_it · ℓ_it  +  β Σ_{i,t} W_it kl_it  −  γ Σ_{i,t} W_it H_it
//! ```
//!
//! `W` are the aggregation weights ([`crate::Aggregation::token_weights`], with the global
//! counts), `w` the detached behaviour weights of the decoupled correction (1 when off or
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

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::aggregate::{float_mask, Aggregation, GlobalCounts};
use crate::correction::{behaviour_weights, DecoupledParams};
use crate::error::{check_range, Result, RlvrCoreError};
use crate::inputs::LossInputs;
use crate::kl::{kl_value_grad, KlParams};
use crate::lpo::{lpo_coefficients, LpoParams};
use crate::policy::PolicyLoss;

const EXP20: f64 = 485_165_195.409_790_3; // e^20
const EXPM20: f64 = 2.061_153_622_438_558e-9; // e^-20

/// The full loss configuration. Build it with [`LossParams::new`] and the builder methods;
/// validate it once with [`LossParams::check`] into a [`LossConfig`].
///
/// | field | default | reference |
/// |---|---|---|
/// | `policy` | PPO ε 0.2/0.2, dual clip 3.0 | verl `vanilla` |
/// | `aggregation` | `token-mean` | verl `loss_agg_mode` |
/// | `kl` | `None` (off) | verl `use_kl_loss: false` (`kl_loss_coef` 0.001, `low_var_kl` when on) |
/// | `entropy_coef` | `0.0` | verl `entropy_coeff` |
/// | `correction` | `None` (off) | POPO / AReaL decoupled IS, see [`DecoupledParams`] |
/// | `check_finite` | `true` | reject NaN/inf inputs with a typed error |
/// | `metrics` | `true` | compute [`LossMetrics`] (a few extra reductions) |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossParams {
    /// The policy loss.
    pub policy: PolicyLoss,
    /// The aggregation mode.
    pub aggregation: Aggregation,
    /// KL-to-reference in the loss.
    pub kl: Option<KlParams>,
    /// Entropy-bonus coefficient γ (`L −= γ agg(H)`).
    pub entropy_coef: f64,
    /// Decoupled off-policy correction (applied when behaviour log-probs are given).
    pub correction: Option<DecoupledParams>,
    /// Check every input for NaN/inf.
    pub check_finite: bool,
    /// Compute metrics.
    pub metrics: bool,
}

impl Default for LossParams {
    fn default() -> Self {
        Self {
            policy: PolicyLoss::default(),
            aggregation: Aggregation::TokenMean,
            kl: None,
            entropy_coef: 0.0,
            correction: None,
            check_finite: true,
            metrics: true,
        }
    }
}

impl LossParams {
    /// Defaults with `policy`.
    pub fn new(policy: PolicyLoss) -> Self {
        Self { policy, ..Self::default() }
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

    /// Validates every field.
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`] naming the first bad field.
    pub fn check(self) -> Result<LossConfig> {
        self.policy.check()?;
        self.aggregation.check()?;
        if let Some(k) = &self.kl {
            k.check()?;
        }
        check_range("entropy_coef", self.entropy_coef, None, None, "must be finite")?;
        if let Some(c) = &self.correction {
            c.check()?;
        }
        Ok(LossConfig(self))
    }
}

/// Validated [`LossParams`]; computes the loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossConfig(LossParams);

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

/// The result of one loss call.
#[derive(Debug)]
pub struct LossOutput {
    /// Scalar loss; call `backward()` on it (once per micro-batch; do not rescale).
    pub loss: Tensor,
    /// Metrics (all zero/`None` when metrics are off, except `loss` and `pg_loss`).
    pub metrics: LossMetrics,
}

/// Scalars gathered during the forward pass, read back in one transfer.
#[derive(Default)]
struct Scalars {
    names: Vec<&'static str>,
    values: Vec<Tensor>,
}

impl Scalars {
    fn push(&mut self, name: &'static str, t: Tensor) -> Result<()> {
        self.names.push(name);
        self.values.push(t.f_to_kind(Kind::Double)?.f_reshape([1])?);
        Ok(())
    }
    fn read(self) -> Result<Vec<(&'static str, f64)>> {
        if self.values.is_empty() {
            return Ok(Vec::new());
        }
        let v = Vec::<f64>::try_from(Tensor::f_cat(&self.values, 0)?.f_to_device(tch::Device::Cpu)?)?;
        Ok(self.names.into_iter().zip(v).collect())
    }
}

/// Count of `cond` over the boolean mask, as a 0-d tensor.
fn count(cond: &Tensor, mask_b: &Tensor) -> Result<Tensor> {
    Ok(cond.f_logical_and(mask_b)?.f_count_nonzero(None)?)
}

/// `lo`/`hi` ratio bounds per advantage sign: for `A > 0` `[e^-20, hi_pos]`, else
/// `[lo_neg, hi_neg]`.
fn sign_bounds(pos: &Tensor, hi_pos: f64, lo_neg: f64, hi_neg: f64, kind: Kind) -> Result<(Tensor, Tensor)> {
    let dev = pos.device();
    let sc = |v: f64| Tensor::f_scalar_tensor(v, (kind, dev));
    let lo = sc(EXPM20)?.f_where_self(pos, &sc(lo_neg)?)?;
    let hi = sc(hi_pos)?.f_where_self(pos, &sc(hi_neg)?)?;
    Ok((lo, hi))
}

struct PgOut {
    /// Σ W w ℓ (0-d).
    value: Tensor,
    /// ∂/∂logp of `value` ([B, T]).
    grad: Tensor,
}

impl LossConfig {
    /// Computes the loss of one micro-batch.
    ///
    /// # Errors
    /// - shape, type, device or finiteness problems of the inputs ([`RlvrCoreError::Shape`],
    ///   [`RlvrCoreError::Kind`], [`RlvrCoreError::NonFinite`], [`RlvrCoreError::Empty`]);
    /// - [`RlvrCoreError::Counts`] for invalid global counts;
    /// - [`RlvrCoreError::MissingInput`] when LPO gets no groups, the KL term no reference
    ///   log-probs, or a non-zero entropy coefficient no entropy;
    /// - [`RlvrCoreError::GroupTooSmall`] for LPO groups of one;
    /// - libtorch failures.
    ///
    /// Rows whose mask is all zero contribute nothing (documented behaviour, not an error); a
    /// micro-batch with no response token at all gives a zero loss.
    pub fn loss(&self, inputs: &LossInputs<'_>, counts: &GlobalCounts) -> Result<LossOutput> {
        counts.check()?;
        inputs.validate(self.check_finite)?;
        let missing = |loss: &str, input: &str| RlvrCoreError::MissingInput { loss: loss.into(), input: input.into() };
        if matches!(self.policy, PolicyLoss::Lpo(_)) && inputs.groups.is_none() {
            return Err(missing("lpo", "groups"));
        }
        if self.kl.is_some() && inputs.ref_logp.is_none() {
            return Err(missing("kl", "ref_logp"));
        }
        if self.entropy_coef != 0.0 && inputs.entropy.is_none() {
            return Err(missing("entropy bonus", "entropy"));
        }
        let kind = if inputs.logp.kind() == Kind::Double { Kind::Double } else { Kind::Float };
        let logp = inputs.logp.f_to_kind(kind)?;
        let mut sc = Scalars::default();
        let want = self.metrics;

        let _g = tch::no_grad_guard();
        let lp = logp.f_detach()?;
        let konst = |x: &Tensor| -> Result<Tensor> { Ok(x.f_detach()?.f_to_kind(kind)?) };
        let old = konst(inputs.old_logp)?;
        let behave = inputs.behave_logp.map(konst).transpose()?;
        let mask_f = float_mask(inputs.mask)?.f_to_kind(kind)?;
        let mask_b = if inputs.mask.kind() == Kind::Bool { inputs.mask.shallow_clone() } else { mask_f.f_gt(0.0)? };
        let w_agg = self.aggregation.token_weights(&mask_f, counts)?;
        let adv_in = konst(inputs.advantages)?;
        let adv = if adv_in.dim() == 1 { adv_in.f_unsqueeze(1)? } else { adv_in };
        let n_tok = mask_f.f_sum(kind)?;
        let n_tok_f = f64::try_from(&n_tok)?.max(1e-12);

        // decoupled behaviour weight (detached), folded into the policy term's weights
        let mut metrics = LossMetrics { tokens: n_tok_f, ..LossMetrics::default() };
        let w_pg = match (&self.correction, &behave) {
            (Some(p), Some(b)) => {
                let is = behaviour_weights(&old, b, &mask_f, p)?;
                metrics.is_weight_raw_mean = Some(is.raw_mean);
                metrics.is_weight_mean = Some(is.mean);
                metrics.is_weight_min = Some(is.min);
                metrics.is_weight_max = Some(is.max);
                let frac = Some(is.out_of_bounds_frac);
                match p.mode {
                    crate::correction::IsMode::Truncate => metrics.is_truncated_frac = frac,
                    crate::correction::IsMode::Mask => metrics.is_masked_frac = frac,
                }
                metrics.behave_approx_kl = Some(is.behave_approx_kl);
                w_agg.f_mul(&is.weights)?
            }
            _ => w_agg.shallow_clone(),
        };

        let delta = lp.f_sub(&old)?; // log π_θ/π_prox
        if want {
            sc.push("ppo_kl", delta.f_flatten(0, -1)?.f_dot(&mask_f.f_flatten(0, -1)?)?.f_neg()?)?;
        }
        let pg = self.policy_term(
            &lp,
            &old,
            behave.as_ref(),
            &delta,
            &adv,
            &mask_f,
            &mask_b,
            &w_pg,
            inputs,
            &mut sc,
            &mut metrics,
        )?;
        let mut value = pg.value.shallow_clone();
        let mut grad = pg.grad;
        if want {
            sc.push("pg_loss", pg.value.shallow_clone())?;
        }

        if let (Some(klp), Some(r)) = (&self.kl, inputs.ref_logp) {
            let (v, g) = kl_value_grad(&lp, &konst(r)?, klp)?;
            let vf = v.f_flatten(0, -1)?;
            value = value.f_add(&vf.f_dot(&w_agg.f_flatten(0, -1)?)?.f_mul_scalar(klp.coef)?)?;
            grad = grad.f_add(&g.f_mul(&w_agg)?.f_mul_scalar(klp.coef)?)?;
            if want {
                sc.push("kl_ref", vf.f_dot(&mask_f.f_flatten(0, -1)?)?)?;
            }
        }
        drop(_g);

        // value + G·logp − sg(G·logp): value L, gradient G with respect to logp
        let sur = logp.f_flatten(0, -1)?.f_dot(&grad.f_flatten(0, -1)?)?;
        let mut loss = sur.f_sub(&sur.f_detach()?)?.f_add(&value)?;
        if let Some(h) = inputs.entropy {
            let h = crate::kl::to_compute_kind(h)?;
            let hsum = h.f_flatten(0, -1)?.f_dot(&w_agg.f_flatten(0, -1)?)?;
            if self.entropy_coef != 0.0 {
                loss = loss.f_sub(&hsum.f_mul_scalar(self.entropy_coef)?)?;
            }
            if want {
                sc.push("entropy", h.f_detach()?.f_flatten(0, -1)?.f_dot(&mask_f.f_flatten(0, -1)?)?)?;
            }
        }
        if want {
            sc.push("loss", loss.f_detach()?)?;
            for (name, v) in sc.read()? {
                let per_tok = v / n_tok_f;
                match name {
                    "ppo_kl" => metrics.ppo_kl = per_tok,
                    "pg_loss" => metrics.pg_loss = v,
                    "loss" => metrics.loss = v,
                    "ratio_mean" => metrics.ratio_mean = per_tok,
                    "kl_ref" => metrics.kl_ref = Some(per_tok),
                    "entropy" => metrics.entropy = Some(per_tok),
                    "clipfrac" => metrics.clipfrac = Some(per_tok),
                    "clipfrac_upper" => metrics.clipfrac_upper = Some(per_tok),
                    "clipfrac_lower" => metrics.clipfrac_lower = Some(per_tok),
                    "clipfrac_dual" => metrics.clipfrac_dual = Some(per_tok),
                    _ => {}
                }
            }
        }
        Ok(LossOutput { loss, metrics })
    }

    #[allow(clippy::too_many_arguments)]
    fn policy_term(
        &self,
        lp: &Tensor,
        old: &Tensor,
        behave: Option<&Tensor>,
        delta: &Tensor,
        adv: &Tensor,
        mask_f: &Tensor,
        mask_b: &Tensor,
        w_pg: &Tensor,
        inputs: &LossInputs<'_>,
        sc: &mut Scalars,
        metrics: &mut LossMetrics,
    ) -> Result<PgOut> {
        let kind = lp.kind();
        let dev = lp.device();
        let want = self.metrics;
        let zero = Tensor::f_scalar_tensor(0.0, (kind, dev))?;
        let flat_dot =
            |a: &Tensor, b: &Tensor| -> Result<Tensor> { Ok(a.f_flatten(0, -1)?.f_dot(&b.f_flatten(0, -1)?)?) };
        let pos = adv.f_gt(0.0)?;
        let neg = adv.f_lt(0.0)?;
        // coef = −A · w_pg: the weight of a ratio-type loss `−A f(r)`
        let neg_coef = || -> Result<Tensor> { Ok(w_pg.f_mul(&adv.f_neg()?)?) };
        // clip metrics from the effective ratio `eff` versus the raw ratio `r`
        let clip_metrics = |eff: &Tensor, r: &Tensor, with_dual: bool, sc: &mut Scalars| -> Result<()> {
            let high = eff.f_lt_tensor(r)?;
            let low = eff.f_gt_tensor(r)?;
            let up = count(&high.f_logical_and(&pos)?, mask_b)?;
            let dual = count(&high.f_logical_and(&neg)?, mask_b)?;
            let lo = count(&low.f_logical_and(&neg)?, mask_b)?;
            sc.push("clipfrac", up.f_add(&lo)?)?;
            sc.push("clipfrac_upper", up)?;
            sc.push("clipfrac_lower", lo)?;
            if with_dual {
                sc.push("clipfrac_dual", dual)?;
            }
            Ok(())
        };
        match self.policy {
            PolicyLoss::Ppo(p) => {
                let r = delta.f_exp()?;
                let hi_neg = p.dual_clip.unwrap_or(f64::INFINITY).min(p.ratio_cap.unwrap_or(f64::INFINITY)).min(EXP20);
                let (lo, hi) = sign_bounds(&pos, 1.0 + p.eps_high, 1.0 - p.eps_low, hi_neg, kind)?;
                let eff = r.f_clamp_tensor(Some(&lo), Some(&hi))?;
                let coef = neg_coef()?;
                let value = flat_dot(&eff, &coef)?;
                let unclipped = eff.f_eq_tensor(&r)?;
                let grad = r.f_where_self(&unclipped, &zero)?.f_mul(&coef)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&r.f_clamp_max(EXP20)?, mask_f)?)?;
                    clip_metrics(&eff, &r, p.dual_clip.is_some() || p.ratio_cap.is_some(), sc)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::Gspo(p) => {
                let n = mask_f.f_sum_dim_intlist(1, true, kind)?.f_clamp_min(1.0)?;
                let seq_lr = delta.f_mul(mask_f)?.f_sum_dim_intlist(1, true, kind)?.f_div(&n)?;
                let s = seq_lr.f_clamp_max(10.0)?.f_exp()?; // [B, 1]
                let hi_neg = p.ratio_cap.unwrap_or(f64::INFINITY).min(EXP20);
                let (lo, hi) = sign_bounds(&pos, 1.0 + p.eps_high, 1.0 - p.eps_low, hi_neg, kind)?;
                let eff = s.f_clamp_tensor(Some(&lo), Some(&hi))?; // [B, 1] or [B, T]
                let coef = neg_coef()?;
                let value = coef.f_mul(&eff)?.f_sum(kind)?;
                let unclipped = eff.f_eq_tensor(&s)?.f_logical_and(&seq_lr.f_lt(10.0)?)?;
                let grad = coef.f_mul(&s.f_where_self(&unclipped, &zero)?)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&s.f_expand_as(mask_f)?, mask_f)?)?;
                    let effb = eff.f_expand_as(mask_f)?;
                    let sb = s.f_expand_as(mask_f)?;
                    clip_metrics(&effb, &sb, p.ratio_cap.is_some(), sc)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::Cispo(p) => {
                let r = delta.f_clamp(-20.0, 20.0)?.f_exp()?;
                let lo = p.eps_low.map(|e| 1.0 - e);
                let w = r.f_clamp(lo.unwrap_or(0.0), 1.0 + p.eps_high)?;
                let grad = w.f_mul(&neg_coef()?)?;
                let value = flat_dot(&grad, lp)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&r, mask_f)?)?;
                    let high = count(&w.f_lt_tensor(&r)?, mask_b)?;
                    let low = count(&w.f_gt_tensor(&r)?, mask_b)?;
                    sc.push("clipfrac", high.f_add(&low)?)?;
                    sc.push("clipfrac_upper", high)?;
                    sc.push("clipfrac_lower", low)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::Sapo(p) => {
                let r = delta.f_clamp(-20.0, 20.0)?.f_exp()?;
                let sct = |v: f64| Tensor::f_scalar_tensor(v, (kind, dev));
                let tau = sct(p.tau_pos)?.f_where_self(&pos, &sct(p.tau_neg)?)?;
                let sig = r.f_sub_scalar(1.0)?.f_mul(&tau)?.f_sigmoid()?;
                let coef = neg_coef()?;
                // gate = σ(τ(r−1))·4/τ; d gate/d logp = 4 σ (1−σ) r
                let value = flat_dot(&sig.f_mul(&tau.f_reciprocal()?.f_mul_scalar(4.0)?)?, &coef)?;
                let grad = sig.f_mul(&sig.f_neg()?.f_add_scalar(1.0)?)?.f_mul(&r)?.f_mul(&coef)?.f_mul_scalar(4.0)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&r, mask_f)?)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::Reinforce => {
                let grad = neg_coef()?;
                let value = flat_dot(&grad, lp)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&delta.f_clamp(-20.0, 20.0)?.f_exp()?, mask_f)?)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::Gmpo(p) => {
                let n = mask_f.f_sum_dim_intlist(1, true, kind)?.f_clamp_min(1.0)?;
                let sct = |v: f64| Tensor::f_scalar_tensor(v, (kind, dev));
                let lo = sct(f64::NEG_INFINITY)?.f_where_self(&pos, &sct(-p.eps_low)?)?;
                let hi = sct(p.eps_high)?.f_where_self(&pos, &sct(f64::INFINITY)?)?;
                let mut dmin = delta.f_clamp_tensor(Some(&lo), Some(&hi))?;
                if adv.size()[1] > 1 {
                    dmin = dmin.f_where_self(&adv.f_ne(0.0)?, &zero)?;
                }
                let unclipped = dmin.f_eq_tensor(delta)?;
                let mlr = dmin.f_mul(mask_f)?.f_sum_dim_intlist(1, true, kind)?.f_div(&n)?;
                let in_range = mlr.f_abs()?.f_lt(20.0)?;
                let ratio = mlr.f_clamp(-20.0, 20.0)?.f_exp()?; // [B, 1]
                let abar = if adv.size()[1] > 1 {
                    adv.f_mul(mask_f)?.f_sum_dim_intlist(1, true, kind)?.f_div(&n)?
                } else {
                    adv.shallow_clone()
                };
                let wrow = w_pg.f_sum_dim_intlist(1, true, kind)?; // Σ_t W w
                let seq_loss = abar.f_neg()?.f_mul(&ratio)?; // ℓ_i
                let value = wrow.f_mul(&seq_loss)?.f_sum(kind)?;
                // ∂ℓ_i/∂logp_t = −Ā r_i m_t 1[unclipped_t] / n_i
                let row = wrow.f_mul(&seq_loss)?.f_div(&n)?.f_mul(&in_range)?;
                let grad = mask_f.f_mul(&row)?.f_where_self(&unclipped, &zero)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&ratio.f_expand_as(mask_f)?, mask_f)?)?;
                    let clipped = unclipped.f_logical_not()?;
                    let up = count(&clipped.f_logical_and(&pos)?, mask_b)?;
                    let lo = count(&clipped.f_logical_and(&neg)?, mask_b)?;
                    sc.push("clipfrac", up.f_add(&lo)?)?;
                    sc.push("clipfrac_upper", up)?;
                    sc.push("clipfrac_lower", lo)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::Lpo(p) => self.lpo_term(&p, lp, old, behave, adv, mask_f, mask_b, w_pg, inputs, sc, metrics),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn lpo_term(
        &self,
        p: &LpoParams,
        lp: &Tensor,
        old: &Tensor,
        behave: Option<&Tensor>,
        adv: &Tensor,
        mask_f: &Tensor,
        mask_b: &Tensor,
        w_pg: &Tensor,
        inputs: &LossInputs<'_>,
        sc: &mut Scalars,
        metrics: &mut LossMetrics,
    ) -> Result<PgOut> {
        let groups =
            inputs.groups.ok_or_else(|| RlvrCoreError::MissingInput { loss: "lpo".into(), input: "groups".into() })?;
        let kind = lp.kind();
        let dev = lp.device();
        let base = behave.unwrap_or(old);
        let delta_b = lp.f_sub(base)?; // log π_θ/π_b
        let (dclip, unclipped) = match p.clip_eps {
            Some(e) => {
                let c = delta_b.f_clamp((1.0 - e).ln(), (1.0 + e).ln())?;
                let u = c.f_eq_tensor(&delta_b)?;
                (c, Some(u))
            }
            None => (delta_b.shallow_clone(), None),
        };
        let listwise_src = if p.listwise_uses_clipped { &dclip } else { &delta_b };
        let row_sum = |x: &Tensor| -> Result<Vec<f64>> {
            // fp32 row sums (pairwise summation), widened to f64 for the listwise softmax
            let s = x.f_mul(mask_f)?.f_sum_dim_intlist(1, false, kind)?.f_to_kind(Kind::Double)?;
            Ok(Vec::<f64>::try_from(s.f_to_device(tch::Device::Cpu)?)?)
        };
        let s_theta = row_sum(listwise_src)?;
        let s_t = match behave {
            Some(b) => row_sum(&old.f_sub(b)?)?,
            None => vec![0.0; s_theta.len()],
        };
        let adv_seq = if adv.size()[1] > 1 {
            let n = mask_f.f_sum_dim_intlist(1, false, kind)?.f_clamp_min(1.0)?;
            adv.f_mul(mask_f)?.f_sum_dim_intlist(1, false, kind)?.f_div(&n)?
        } else {
            adv.f_squeeze_dim(1)?
        };
        let adv_seq = Vec::<f64>::try_from(adv_seq.f_to_kind(Kind::Double)?.f_to_device(tch::Device::Cpu)?)?;
        let c = lpo_coefficients(&s_theta, &s_t, &adv_seq, groups, p)?;
        let sizes = groups.sizes();
        let kc: Vec<f64> = c
            .coef
            .iter()
            .zip(groups.ids())
            .map(|(c, &g)| if p.scale_by_group_size { c * sizes[g] as f64 } else { *c })
            .collect();
        let kc_t = Tensor::from_slice(&kc).f_to_kind(kind)?.f_to_device(dev)?.f_unsqueeze(1)?;
        let coef = w_pg.f_mul(&kc_t)?;
        let value = dclip.f_flatten(0, -1)?.f_dot(&coef.f_flatten(0, -1)?)?;
        let grad = match &unclipped {
            Some(u) => coef.f_where_self(u, &Tensor::f_scalar_tensor(0.0, (kind, dev))?)?,
            None => coef,
        };
        if self.metrics {
            let (l1, maxabs, ht, hp, zero) = c.summary(groups);
            metrics.lpo_coef_l1 = Some(l1);
            metrics.lpo_coef_max_abs = Some(maxabs);
            metrics.lpo_target_entropy = Some(ht);
            metrics.lpo_listwise_entropy = Some(hp);
            metrics.lpo_frac_zero_groups = Some(zero);
            sc.push(
                "ratio_mean",
                delta_b.f_clamp(-20.0, 20.0)?.f_exp()?.f_flatten(0, -1)?.f_dot(&mask_f.f_flatten(0, -1)?)?,
            )?;
            if let Some(u) = &unclipped {
                sc.push("clipfrac", count(&u.f_logical_not()?, mask_b)?)?;
            }
        }
        Ok(PgOut { value, grad })
    }
}
