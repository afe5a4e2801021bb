//! Glue between the tensors of a CPU `f32` batch and the fused kernels of [`crate::fused`]
//! (feature `tch`).
//!
//! The inputs are copied a few rows at a time (about 64 Ki tokens, so the working set stays in
//! cache) with `copy_data`, every row goes through [`Kernel::row`], and the gradient rows are
//! written into one `[B, T]` tensor `G`. The loss tensor is then `L + G·logp − sg(G·logp)`, as in
//! the libtorch path: its value is `L`, its gradient with respect to `logp` is `G`. LPO (whose
//! listwise coefficients couple a group's rows), Clip-Cov and KL-Cov (whose token selection is
//! over the whole micro-batch) copy the batch at once and take a first pass over it.

use tch::{Device, Kind, Tensor};

use crate::aggregate::{float_mask, Compat, GlobalCounts};
use crate::error::{Result, RlvrCoreError};
use crate::fused::{Kernel, Per, RowExtra, RowIn, Scratch, Sums};
use crate::inputs::LossInputs;
use crate::loss::{LossConfig, LossMetrics};
use crate::lpo::lpo_coefficients;
use crate::policy::PolicyLoss;
use crate::torch_loss::LossOutput;

/// Tokens per chunk of copied rows.
const CHUNK_TOKENS: usize = 1 << 14;

/// One input tensor's rows, copied chunk by chunk.
struct Buf {
    data: Vec<f32>,
    bools: Vec<bool>,
}

impl Buf {
    fn new() -> Self {
        Self { data: Vec::new(), bools: Vec::new() }
    }

    /// Copies rows `r0 .. r0 + rows` of a `[B, T]` `f32` or `bool` tensor as `f32`.
    fn fill(&mut self, x: &Tensor, r0: i64, rows: i64, t: usize) -> Result<()> {
        let n = rows as usize * t;
        let part = x.f_narrow(0, r0, rows)?;
        if self.data.len() < n {
            self.data.resize(n, 0.0);
        }
        if x.kind() == Kind::Bool {
            if self.bools.len() < n {
                self.bools.resize(n, false);
            }
            part.f_copy_data(&mut self.bools[..n], n)?;
            for (d, &b) in self.data[..n].iter_mut().zip(&self.bools[..n]) {
                *d = f32::from(u8::from(b));
            }
        } else {
            part.f_copy_data(&mut self.data[..n], n)?;
        }
        Ok(())
    }
}

fn is_f32(x: &Tensor) -> bool {
    x.kind() == Kind::Float && x.device() == Device::Cpu
}

impl LossConfig {
    /// Whether the fused kernels handle this batch (CPU, `f32` log-probs and advantages, `f32`
    /// or `bool` mask).
    pub(crate) fn fused_eligible(&self, x: &LossInputs<'_>) -> bool {
        self.fused_cpu
            && is_f32(x.logp)
            && is_f32(x.old_logp)
            && is_f32(x.advantages)
            && (is_f32(x.mask) || (x.mask.kind() == Kind::Bool && x.mask.device() == Device::Cpu))
            && x.behave_logp.is_none_or(is_f32)
            && x.ref_logp.is_none_or(is_f32)
    }

    /// The loss through the fused kernels; inputs already validated (shapes, types, counts,
    /// required inputs) except for finiteness, which the sweep checks.
    pub(crate) fn loss_fused(&self, inputs: &LossInputs<'_>, counts: &GlobalCounts) -> Result<LossOutput> {
        let (b, t) = inputs.batch_shape()?;
        let (bu, tu) = (b as usize, t as usize);
        let adv_tok = inputs.advantages.dim() == 2;
        let lpo = match self.policy {
            PolicyLoss::Lpo(p) => Some(p),
            _ => None,
        };
        let whole = lpo.is_some() || matches!(self.policy, PolicyLoss::ClipCov(_) | PolicyLoss::KlCov(_));
        let chunk_rows = if whole { bu } else { (CHUNK_TOKENS / tu).clamp(1, bu) };
        let behave = inputs.behave_logp.filter(|_| self.correction.is_some() || lpo.is_some());
        let kernel = Kernel {
            policy: self.policy,
            aggregation: self.aggregation,
            compat: self.compat,
            counts: *counts,
            kl: self.kl,
            correction: self.correction,
            t: tu,
            rows: bu,
            metrics: self.metrics,
        };
        let (mut lp, mut old, mut mask, mut adv, mut beh, mut refl) =
            (Buf::new(), Buf::new(), Buf::new(), Buf::new(), Buf::new(), Buf::new());
        let adv_rows: Vec<f32> = if adv_tok { Vec::new() } else { Vec::<f32>::try_from(inputs.advantages)? };
        let mut grad = vec![0f32; chunk_rows * tu];
        let g = Tensor::f_empty([b, t], (Kind::Float, Device::Cpu))?;
        let mut scratch = Scratch::default();
        let mut sums = Sums::default();
        let mut lpo_metrics = None;
        let mut selected: Vec<usize> = Vec::new();
        let mut r0 = 0usize;
        while r0 < bu {
            let rows = chunk_rows.min(bu - r0);
            let (r0i, rowsi) = (r0 as i64, rows as i64);
            lp.fill(inputs.logp, r0i, rowsi, tu)?;
            old.fill(inputs.old_logp, r0i, rowsi, tu)?;
            mask.fill(inputs.mask, r0i, rowsi, tu)?;
            if adv_tok {
                adv.fill(inputs.advantages, r0i, rowsi, tu)?;
            }
            if let Some(x) = behave {
                beh.fill(x, r0i, rowsi, tu)?;
            }
            if let (Some(_), Some(x)) = (self.kl, inputs.ref_logp) {
                refl.fill(x, r0i, rowsi, tu)?;
            }
            let row_in = |i: usize| -> RowIn<'_> {
                let s = i * tu..(i + 1) * tu;
                RowIn {
                    lp: &lp.data[s.clone()],
                    old: &old.data[s.clone()],
                    mask: &mask.data[s.clone()],
                    adv: if adv_tok { Per::Tok(&adv.data[s.clone()]) } else { Per::Row(adv_rows[r0 + i]) },
                    behave: behave.map(|_| &beh.data[s.clone()]),
                    refl: inputs.ref_logp.filter(|_| self.kl.is_some()).map(|_| &refl.data[s.clone()]),
                }
            };
            // batch-level passes (whole batch in one chunk)
            let mut lpo_coef = Vec::new();
            if let Some(p) = lpo {
                let groups = inputs
                    .groups
                    .ok_or_else(|| RlvrCoreError::MissingInput { loss: "lpo".into(), input: "groups".into() })?;
                let (mut s_theta, mut s_t, mut adv_seq) = (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows]);
                let clip = p.clip_eps.map(|e| ((1.0 - e).ln() as f32, (1.0 + e).ln() as f32));
                for i in 0..rows {
                    let x = row_in(i);
                    let base = x.behave.unwrap_or(x.old);
                    let (mut st, mut sb, mut n, mut sa) = (0.0, 0.0, 0.0, 0.0);
                    for j in 0..tu {
                        let m = x.mask[j];
                        let d = x.lp[j] - base[j];
                        let src = match clip {
                            Some((lo, hi)) if p.listwise_uses_clipped => d.max(lo).min(hi),
                            _ => d,
                        };
                        st += f64::from(src * m);
                        if let Some(bh) = x.behave {
                            sb += f64::from((x.old[j] - bh[j]) * m);
                        }
                        n += f64::from(m);
                        if let Per::Tok(a) = x.adv {
                            sa += f64::from(a[j] * m);
                        }
                    }
                    s_theta[i] = st;
                    s_t[i] = sb;
                    adv_seq[i] = match x.adv {
                        Per::Row(a) => f64::from(a),
                        Per::Tok(_) => sa / n.max(1.0),
                    };
                }
                if s_theta.iter().chain(&s_t).chain(&adv_seq).any(|v| !v.is_finite()) {
                    sums.nonfinite = true;
                    break;
                }
                let c = lpo_coefficients(&s_theta, &s_t, &adv_seq, groups, &p)?;
                let sizes = groups.sizes();
                lpo_coef = c
                    .coef
                    .iter()
                    .zip(groups.ids())
                    .map(|(c, &g)| if p.scale_by_group_size { c * sizes[g] as f64 } else { *c })
                    .collect();
                lpo_metrics = Some(c.summary(groups));
            }
            match self.policy {
                PolicyLoss::ClipCov(p) => {
                    let seed = inputs.seed.ok_or_else(|| RlvrCoreError::MissingInput {
                        loss: "clip_cov".into(),
                        input: "seed (LossInputs::seed)".into(),
                    })?;
                    let n = rows * tu;
                    let a = if adv_tok { &adv.data[..n] } else { &adv_rows[..] };
                    let h = crate::cov::CovInputs {
                        lp: &lp.data[..n],
                        old: &old.data[..n],
                        adv: a,
                        adv_per_token: adv_tok,
                        mask: &mask.data[..n],
                        t: tu,
                    };
                    selected = crate::cov::clip_cov_selection(&h, &p, seed);
                }
                PolicyLoss::KlCov(p) => {
                    let n = rows * tu;
                    let a = if adv_tok { &adv.data[..n] } else { &adv_rows[..] };
                    let h = crate::cov::CovInputs {
                        lp: &lp.data[..n],
                        old: &old.data[..n],
                        adv: a,
                        adv_per_token: adv_tok,
                        mask: &mask.data[..n],
                        t: tu,
                    };
                    selected = crate::cov::kl_cov_selection(&h, p.ratio);
                }
                _ => {}
            }
            let mut sel_at = 0usize;
            let mut positions: Vec<usize> = Vec::new();
            for i in 0..rows {
                let row_start = i * tu;
                positions.clear();
                while sel_at < selected.len() && selected[sel_at] < row_start + tu {
                    positions.push(selected[sel_at] - row_start);
                    sel_at += 1;
                }
                let extra = RowExtra { lpo_coef: lpo_coef.get(i).copied().unwrap_or(0.0), selected: &positions };
                kernel.row(&row_in(i), &extra, &mut grad[row_start..row_start + tu], &mut scratch, &mut sums);
            }
            let n = rows * tu;
            let gt = Tensor::from_slice(&grad[..n]).f_view([rowsi, t])?;
            g.f_narrow(0, r0i, rowsi)?.f_copy_(&gt)?;
            r0 += rows;
        }
        if sums.nonfinite && self.check_finite {
            // name the first bad value exactly
            inputs.validate(true)?;
            return Err(RlvrCoreError::NonFinite { what: "loss inputs".into(), index: 0, value: f64::NAN });
        }

        // the returned tensor: value L, gradient G with respect to logp
        let mut value = sums.pg_value + sums.kl_value;
        let sur = inputs.logp.f_flatten(0, -1)?.f_dot(&g.f_flatten(0, -1)?)?;
        let mut loss = sur.f_sub(&sur.f_detach()?)?.f_add_scalar(value)?;
        let n_tok = sums.tokens;
        let per = |v: f64| v / n_tok.max(1e-12);
        let mut metrics = LossMetrics { tokens: n_tok, ..LossMetrics::default() };
        if let Some(h) = inputs.entropy {
            let h = crate::kl::to_compute_kind(h)?;
            let m = float_mask(inputs.mask)?.f_to_kind(h.kind())?;
            let w_agg = self.aggregation.token_weights(&m, counts, self.compat)?;
            let hsum = h.f_flatten(0, -1)?.f_dot(&w_agg.f_flatten(0, -1)?)?;
            if self.entropy_coef != 0.0 {
                value -= self.entropy_coef * f64::try_from(&hsum)?;
                loss = loss.f_sub(&hsum.f_mul_scalar(self.entropy_coef)?.f_to_kind(loss.kind())?)?;
            }
            if self.metrics {
                let hm = h.f_detach()?.f_flatten(0, -1)?.f_dot(&m.f_flatten(0, -1)?)?;
                metrics.entropy = Some(per(f64::try_from(hm)?));
            }
        }
        metrics.pg_loss = sums.pg_value;
        metrics.loss = value;
        // an all-padding micro-batch has nothing to weight (as in the libtorch path)
        if sums.any_is && sums.tokens > 0.0 {
            let units = sums.is_units.max(1e-12);
            metrics.is_weight_raw_mean = Some(sums.is_raw / units);
            metrics.is_weight_mean = Some(sums.is_applied / units);
            metrics.is_weight_min = Some(sums.is_min);
            metrics.is_weight_max = Some(sums.is_max);
            let frac = Some(sums.is_oob / units);
            match self.correction.map(|c| c.mode) {
                Some(crate::correction::IsMode::Mask) => metrics.is_masked_frac = frac,
                _ => metrics.is_truncated_frac = frac,
            }
            metrics.behave_approx_kl = Some(per(sums.behave_kl));
        }
        if self.metrics {
            metrics.ppo_kl = per(sums.ppo_kl);
            metrics.ratio_mean = per(sums.ratio);
            if self.kl.is_some() && inputs.ref_logp.is_some() {
                metrics.kl_ref = Some(per(sums.kl_ref));
            }
            let (up, lo, dual) = (per(sums.clip_up), per(sums.clip_lo), per(sums.clip_dual));
            match self.policy {
                PolicyLoss::Ppo(p) => {
                    metrics.clipfrac = Some(up + lo);
                    metrics.clipfrac_upper = Some(up);
                    metrics.clipfrac_lower = Some(lo);
                    if p.dual_clip.is_some() || p.ratio_cap.is_some() {
                        metrics.clipfrac_dual = Some(dual);
                    }
                }
                PolicyLoss::Gspo(p) => {
                    metrics.clipfrac = Some(up + lo);
                    metrics.clipfrac_upper = Some(up);
                    metrics.clipfrac_lower = Some(lo);
                    if p.ratio_cap.is_some() {
                        metrics.clipfrac_dual = Some(dual);
                    }
                }
                PolicyLoss::Cispo(_) => {
                    metrics.clipfrac = Some(up + lo);
                    metrics.clipfrac_upper = Some(up);
                    metrics.clipfrac_lower = Some(lo);
                }
                PolicyLoss::Gmpo(_) => {
                    metrics.clipfrac = Some(if self.compat == Compat::Verl { up } else { up + lo });
                    metrics.clipfrac_upper = Some(up);
                    metrics.clipfrac_lower = Some(lo);
                }
                PolicyLoss::ClipCov(_) => {
                    let cov = per(selected.len() as f64);
                    metrics.clipfrac = Some(if self.compat == Compat::Verl { cov } else { up + lo });
                    metrics.clipfrac_upper = Some(up);
                    metrics.clipfrac_lower = Some(lo);
                    metrics.cov_frac = Some(cov);
                }
                PolicyLoss::KlCov(_) => metrics.cov_frac = Some(per(selected.len() as f64)),
                PolicyLoss::Lpo(p) => {
                    if p.clip_eps.is_some() {
                        metrics.clipfrac = Some(up);
                    }
                }
                PolicyLoss::Sapo(_) | PolicyLoss::Reinforce => {}
            }
            if let Some((l1, maxabs, ht, hp, zero)) = lpo_metrics {
                metrics.lpo_coef_l1 = Some(l1);
                metrics.lpo_coef_max_abs = Some(maxabs);
                metrics.lpo_target_entropy = Some(ht);
                metrics.lpo_listwise_entropy = Some(hp);
                metrics.lpo_frac_zero_groups = Some(zero);
            }
        }
        Ok(LossOutput { loss, metrics })
    }
}
