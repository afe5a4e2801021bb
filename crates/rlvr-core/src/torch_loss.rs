//! The libtorch implementation of [`LossConfig::loss`] (feature `tch`): every policy loss and
//! KL estimator computes its value and its exact gradient `G = ∂L/∂logp` with tensor ops in one
//! gradient-free pass; the returned tensor is `L + G·logp − sg(G·logp)`.

use tch::{Kind, Tensor};

use crate::aggregate::{float_mask, Compat, GlobalCounts};
use crate::correction::behaviour_weights;
use crate::error::{Result, RlvrCoreError};
use crate::inputs::LossInputs;
use crate::kl::kl_value_grad;
use crate::loss::{LossConfig, LossMetrics};
use crate::lpo::{lpo_coefficients, LpoParams};
use crate::policy::PolicyLoss;

pub(crate) const EXP20: f64 = 485_165_195.409_790_3; // e^20
pub(crate) const EXPM20: f64 = 2.061_153_622_438_558e-9; // e^-20

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

/// Bounds per advantage sign: `(lo, hi)` is `pos_bounds` where `A > 0`, else `neg_bounds`.
fn bounds(pos: &Tensor, pos_bounds: (f64, f64), neg_bounds: (f64, f64), kind: Kind) -> Result<(Tensor, Tensor)> {
    let dev = pos.device();
    let sc = |v: f64| Tensor::f_scalar_tensor(v, (kind, dev));
    let lo = sc(pos_bounds.0)?.f_where_self(pos, &sc(neg_bounds.0)?)?;
    let hi = sc(pos_bounds.1)?.f_where_self(pos, &sc(neg_bounds.1)?)?;
    Ok((lo, hi))
}

/// Host `f64` copies of the inputs of the covariance selection.
struct HostBatch {
    lp: Vec<f64>,
    old: Vec<f64>,
    adv: Vec<f64>,
    adv_per_token: bool,
    mask: Vec<f64>,
    t: usize,
}

impl HostBatch {
    fn new(lp: &Tensor, old: &Tensor, adv: &Tensor, mask_f: &Tensor) -> Result<Self> {
        let t = lp.size().get(1).copied().unwrap_or(1) as usize;
        let flat = |x: &Tensor| host_f64(&x.f_flatten(0, -1)?);
        Ok(Self {
            lp: flat(lp)?,
            old: flat(old)?,
            adv: flat(adv)?,
            adv_per_token: adv.size().get(1).copied().unwrap_or(1) > 1,
            mask: flat(mask_f)?,
            t,
        })
    }
    fn view(&self) -> crate::cov::CovInputs<'_, f64> {
        crate::cov::CovInputs {
            lp: &self.lp,
            old: &self.old,
            adv: &self.adv,
            adv_per_token: self.adv_per_token,
            mask: &self.mask,
            t: self.t,
        }
    }
}

/// A tensor like `like` with 1 at the flat indices `idx` and 0 elsewhere.
fn index_mask(idx: &[usize], like: &Tensor) -> Result<Tensor> {
    let flat = like.f_zeros_like()?.f_flatten(0, -1)?;
    if idx.is_empty() {
        return Ok(flat.f_view_as(like)?);
    }
    let i: Vec<i64> = idx.iter().map(|&v| v as i64).collect();
    let it = Tensor::from_slice(&i).f_to_device(like.device())?;
    Ok(flat.f_index_fill(0, &it, 1.0)?.f_view_as(like)?)
}

/// A tensor's values as `f64` on the host.
fn host_f64(x: &Tensor) -> Result<Vec<f64>> {
    Ok(Vec::<f64>::try_from(x.f_to_kind(Kind::Double)?.f_to_device(tch::Device::Cpu)?)?)
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
        let fused = self.fused_eligible(inputs);
        // the fused kernels check finiteness in their sweep (and name the value on failure)
        inputs.validate(self.check_finite && !fused)?;
        let missing = |loss: &str, input: &str| RlvrCoreError::MissingInput { loss: loss.into(), input: input.into() };
        if matches!(self.policy, PolicyLoss::Lpo(_)) && inputs.groups.is_none() {
            return Err(missing("lpo", "groups"));
        }
        if matches!(self.policy, PolicyLoss::ClipCov(_)) && inputs.seed.is_none() {
            return Err(missing("clip_cov", "seed (LossInputs::seed)"));
        }
        if self.kl.is_some() && inputs.ref_logp.is_none() {
            return Err(missing("kl", "ref_logp"));
        }
        if self.entropy_coef != 0.0 && inputs.entropy.is_none() {
            return Err(missing("entropy bonus", "entropy"));
        }
        if fused {
            self.loss_fused(inputs, counts)
        } else {
            self.loss_torch(inputs, counts)
        }
    }

    /// The libtorch implementation (any device and float type); inputs already validated.
    fn loss_torch(&self, inputs: &LossInputs<'_>, counts: &GlobalCounts) -> Result<LossOutput> {
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
        let w_agg = self.aggregation.token_weights(&mask_f, counts, self.compat)?;
        let adv_in = konst(inputs.advantages)?;
        let adv = if adv_in.dim() == 1 { adv_in.f_unsqueeze(1)? } else { adv_in };
        let n_tok = mask_f.f_sum(kind)?;
        let n_tok_f = f64::try_from(&n_tok)?;

        // decoupled behaviour weight (detached), folded into the policy term's weights
        let mut metrics = LossMetrics { tokens: n_tok_f, ..LossMetrics::default() };
        let mut is_w = None;
        let w_pg = match (&self.correction, &behave) {
            // an all-padding micro-batch has nothing to weight (and contributes 0)
            (Some(p), Some(b)) if n_tok_f > 0.0 => {
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
                let w = w_agg.f_mul(&is.weights)?;
                is_w = Some(is.weights);
                w
            }
            _ => w_agg.shallow_clone(),
        };

        let delta = lp.f_sub(&old)?; // log π_θ/π_prox
        if want {
            // verl reports the clamped log-ratio for the losses that clamp it (vanilla, cispo,
            // sapo) and |δ| for kl_cov; this crate reports mean(old − logp) unclamped
            let kl_src = match (self.compat, &self.policy) {
                (Compat::Verl, PolicyLoss::Ppo(_) | PolicyLoss::Cispo(_) | PolicyLoss::Sapo(_)) => {
                    delta.f_clamp(-20.0, 20.0)?
                }
                (Compat::Verl, PolicyLoss::KlCov(_)) => delta.f_abs()?.f_neg()?,
                _ => delta.shallow_clone(),
            };
            sc.push("ppo_kl", kl_src.f_flatten(0, -1)?.f_dot(&mask_f.f_flatten(0, -1)?)?.f_neg()?)?;
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
            is_w.as_ref(),
            inputs,
            &mut sc,
            &mut metrics,
        )?;
        let mut value = pg.value.shallow_clone();
        let mut grad = pg.grad;
        sc.push("pg_loss", pg.value.shallow_clone())?;

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
        sc.push("loss", loss.f_detach()?)?;
        {
            for (name, v) in sc.read()? {
                let per_tok = v / n_tok_f.max(1e-12);
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
                    "cov_frac" => metrics.cov_frac = Some(per_tok),
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
        is_w: Option<&Tensor>,
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
                // row sums accumulate in f64 (as the fused CPU kernels do)
                let n = mask_f.f_sum_dim_intlist(1, true, Kind::Double)?.f_clamp_min(1.0)?;
                let seq_lr =
                    delta.f_mul(mask_f)?.f_sum_dim_intlist(1, true, Kind::Double)?.f_div(&n)?.f_to_kind(kind)?;
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
                let verl = self.compat == Compat::Verl;
                let len = mask_f.f_sum_dim_intlist(1, true, kind)?;
                // verl divides by len + 1e-8 and averages over every row of the micro-batch
                let n = if verl { len.f_add_scalar(1e-8)? } else { len.f_clamp_min(1.0)? };
                let sct = |v: f64| Tensor::f_scalar_tensor(v, (kind, dev));
                let lo = sct(f64::NEG_INFINITY)?.f_where_self(&pos, &sct(-p.eps_low)?)?;
                let hi = sct(p.eps_high)?.f_where_self(&pos, &sct(f64::INFINITY)?)?;
                let mut dmin = delta.f_clamp_tensor(Some(&lo), Some(&hi))?;
                if adv.size()[1] > 1 {
                    dmin = dmin.f_where_self(&adv.f_ne(0.0)?, &zero)?;
                }
                let unclipped = dmin.f_eq_tensor(delta)?;
                let mlr = dmin
                    .f_mul(mask_f)?
                    .f_sum_dim_intlist(1, true, Kind::Double)?
                    .f_div(&n.f_to_kind(Kind::Double)?)?
                    .f_to_kind(kind)?;
                let in_range = mlr.f_abs()?.f_lt(20.0)?;
                let ratio = mlr.f_clamp(-20.0, 20.0)?.f_exp()?; // [B, 1]
                let abar = if adv.size()[1] > 1 || verl {
                    adv.f_mul(mask_f)?.f_sum_dim_intlist(1, true, kind)?.f_div(&n)?
                } else {
                    adv.shallow_clone()
                };
                let wrow = if verl {
                    // torch.mean over the rows, times the geometric mean of the token weights
                    let b = mask_f.size()[0] as f64;
                    match is_w {
                        Some(w) => {
                            let logw = w.f_expand_as(mask_f)?.f_add_scalar(1e-10)?.f_log()?.f_mul(mask_f)?;
                            logw.f_sum_dim_intlist(1, true, kind)?.f_div(&n)?.f_exp()?.f_div_scalar(b)?
                        }
                        None => len.f_ones_like()?.f_div_scalar(b)?,
                    }
                } else {
                    w_pg.f_sum_dim_intlist(1, true, kind)? // Σ_t W w
                };
                let seq_loss = abar.f_neg()?.f_mul(&ratio)?; // ℓ_i
                let value = wrow.f_mul(&seq_loss)?.f_sum(kind)?;
                // ∂ℓ_i/∂logp_t = −Ā r_i m_t 1[unclipped_t] / n_i
                let row = wrow.f_mul(&seq_loss)?.f_div(&n)?.f_mul(&in_range)?;
                let grad = mask_f.f_mul(&row)?.f_where_self(&unclipped, &zero)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&ratio.f_expand_as(mask_f)?, mask_f)?)?;
                    let clipped = if verl {
                        // verl: the log-ratio lies outside [−ε_l, ε_h], whichever side A is on
                        delta.f_clamp(-p.eps_low, p.eps_high)?.f_ne_tensor(delta)?
                    } else {
                        unclipped.f_logical_not()?
                    };
                    let up = count(&clipped.f_logical_and(&pos)?, mask_b)?;
                    let lo = count(&clipped.f_logical_and(&neg)?, mask_b)?;
                    if verl {
                        sc.push("clipfrac", up.shallow_clone())?;
                    } else {
                        sc.push("clipfrac", up.f_add(&lo)?)?;
                    }
                    sc.push("clipfrac_upper", up)?;
                    sc.push("clipfrac_lower", lo)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::ClipCov(p) => {
                // verl clip_cov: unclamped ratio, PPO clip without dual clip, and the gradient of
                // `k` random unclipped tokens with cov in (lb, ub) cut (selection on the host,
                // shared with the fused path)
                let seed = inputs.seed.ok_or_else(|| RlvrCoreError::MissingInput {
                    loss: "clip_cov".into(),
                    input: "seed (LossInputs::seed)".into(),
                })?;
                let r = delta.f_exp()?;
                let (lo, hi) = bounds(&pos, (0.0, 1.0 + p.eps_high), (1.0 - p.eps_low, f64::INFINITY), kind)?;
                let eff = r.f_clamp_tensor(Some(&lo), Some(&hi))?;
                let h = HostBatch::new(lp, old, adv, mask_f)?;
                let sel = crate::cov::clip_cov_selection(&h.view(), &p, seed);
                let cut = index_mask(&sel, mask_f)?; // 1 on the cut tokens
                let coef = neg_coef()?.f_mul(&cut.f_neg()?.f_add_scalar(1.0)?)?;
                let value = flat_dot(&eff, &coef)?;
                let grad = r.f_where_self(&eff.f_eq_tensor(&r)?, &zero)?.f_mul(&coef)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&r.f_clamp_max(EXP20)?, mask_f)?)?;
                    let cov_count = Tensor::f_scalar_tensor(sel.len() as f64, (Kind::Double, dev))?;
                    if self.compat == Compat::Verl {
                        sc.push("clipfrac", cov_count.shallow_clone())?;
                        let high = eff.f_lt_tensor(&r)?;
                        let low = eff.f_gt_tensor(&r)?;
                        sc.push("clipfrac_upper", count(&high.f_logical_and(&pos)?, mask_b)?)?;
                        sc.push("clipfrac_lower", count(&low.f_logical_and(&neg)?, mask_b)?)?;
                    } else {
                        clip_metrics(&eff, &r, false, sc)?;
                    }
                    sc.push("cov_frac", cov_count)?;
                }
                Ok(PgOut { value, grad })
            }
            PolicyLoss::KlCov(p) => {
                // verl kl_cov: −A r (unclamped) plus β|δ| on the top-k covariance tokens
                let r = delta.f_exp()?;
                let h = HostBatch::new(lp, old, adv, mask_f)?;
                let sel = crate::cov::kl_cov_selection(&h.view(), p.ratio);
                let pen = index_mask(&sel, mask_f)?.f_mul(w_pg)?.f_mul_scalar(p.kl_coef)?;
                let coef = neg_coef()?;
                let value = flat_dot(&r, &coef)?.f_add(&flat_dot(&delta.f_abs()?, &pen)?)?;
                let grad = r.f_mul(&coef)?.f_add(&delta.f_sign()?.f_mul(&pen)?)?;
                if want {
                    sc.push("ratio_mean", flat_dot(&r.f_clamp_max(EXP20)?, mask_f)?)?;
                    sc.push("cov_frac", Tensor::f_scalar_tensor(sel.len() as f64, (Kind::Double, dev))?)?;
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
            // row sums accumulated in f64 for the listwise softmax
            let s = x.f_mul(mask_f)?.f_sum_dim_intlist(1, false, Kind::Double)?;
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
