//! Glue between the tensors of a CPU `f32` batch and the fused kernels of [`crate::fused`]
//! (feature `tch`).
//!
//! The inputs are read in place: a contiguous CPU `f32` tensor's buffer is borrowed as a
//! `&[f32]` for the duration of the call ([`flat`]); any other tensor (a non-contiguous view, a
//! `bool` mask) is copied once into a `Vec<f32>`. Every row goes through [`Kernel::row`], which
//! writes its gradient straight into the buffer of a fresh `[B, T]` tensor `G`
//! ([`out_slice`]). The loss tensor is then `L + G·logp − sg(G·logp)`, as in the libtorch path:
//! its value is `L`, its gradient with respect to `logp` is `G`. LPO (whose listwise
//! coefficients couple a group's rows), Clip-Cov and KL-Cov (whose token selection is over the
//! whole micro-batch) take a first pass over the batch.

use std::ops::Deref;

use tch::{Device, Kind, Tensor};

use crate::aggregate::{float_mask, Compat, GlobalCounts};
use crate::error::{Result, RlvrCoreError};
use crate::fused::{Kernel, Per, RowExtra, RowIn, Scratch, Sums};
use crate::inputs::LossInputs;
use crate::loss::{LossConfig, LossMetrics};
use crate::lpo::lpo_coefficients;
use crate::policy::PolicyLoss;
use crate::torch_loss::LossOutput;

/// A tensor's elements as `f32` in row-major order: borrowed in place, or copied.
#[derive(Debug)]
pub(crate) enum Flat<'a> {
    /// The tensor's own buffer (a contiguous CPU `f32` tensor).
    Borrowed(&'a [f32]),
    /// A copy (any other layout or element type).
    Owned(Vec<f32>),
}

impl Flat<'_> {
    /// Whether the elements are the tensor's own buffer.
    #[cfg(test)]
    pub(crate) fn in_place(&self) -> bool {
        matches!(self, Flat::Borrowed(_))
    }
}

impl Deref for Flat<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            Flat::Borrowed(s) => s,
            Flat::Owned(v) => v,
        }
    }
}

/// A CPU tensor's elements as `f32`: its buffer when it is a contiguous CPU `f32` tensor (no
/// copy), otherwise one contiguous `f32` copy.
#[allow(unsafe_code)]
pub(crate) fn flat(x: &Tensor) -> Result<Flat<'_>> {
    let n = x.numel();
    if n == 0 {
        return Ok(Flat::Owned(Vec::new()));
    }
    if x.kind() == Kind::Float && x.device() == Device::Cpu && x.is_contiguous() && !x.is_sparse() && !x.is_mkldnn() {
        let p = x.data_ptr().cast::<f32>().cast_const();
        if !p.is_null() && p.is_aligned() {
            // SAFETY: `x` is a defined, dense, contiguous CPU tensor of `n` `f32` elements, so
            // its data pointer (storage offset included) addresses `n` consecutive initialised
            // `f32` values, and it is non-null and aligned (checked). The slice borrows `x`,
            // which holds a reference to the storage, so the memory outlives the slice; nothing
            // in this crate writes to an input tensor while the slice exists (the only buffer
            // written is the fresh gradient tensor of `out_slice`). As with every libtorch op,
            // another thread writing the same storage through a shallow clone at the same time
            // would be a data race; `Tensor` is not `Sync`, so safe code cannot share `x` itself.
            return Ok(Flat::Borrowed(unsafe { std::slice::from_raw_parts(p, n) }));
        }
    }
    let mut v = vec![0f32; n];
    x.f_to_kind(Kind::Float)?.f_to_device(Device::Cpu)?.f_contiguous()?.f_copy_data(&mut v, n)?;
    Ok(Flat::Owned(v))
}

/// The elements of a freshly allocated contiguous CPU `f32` tensor, for writing.
#[allow(unsafe_code)]
pub(crate) fn out_slice(g: &mut Tensor) -> Result<&mut [f32]> {
    let n = g.numel();
    if n == 0 {
        return Ok(&mut []);
    }
    let p = g.data_ptr().cast::<f32>();
    if g.kind() != Kind::Float || g.device() != Device::Cpu || !g.is_contiguous() || p.is_null() || !p.is_aligned() {
        return Err(RlvrCoreError::Kind {
            what: "fused gradient buffer".into(),
            expected: "contiguous CPU f32".into(),
            got: format!("{:?} on {:?}", g.kind(), g.device()),
        });
    }
    // SAFETY: `g` is a contiguous CPU `f32` tensor of `n` elements (checked), so its data
    // pointer addresses `n` consecutive `f32` values, non-null and aligned (checked); the
    // callers pass a tensor they have just created with `Tensor::empty`, so no other tensor
    // shares its storage, and the `&mut` borrow of `g` keeps it alive and unaliased for the
    // slice's lifetime. Any bit pattern is a valid `f32`; the kernels write every element
    // before reading it.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
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
        let (rows, tu) = (b as usize, t as usize);
        let adv_tok = inputs.advantages.dim() == 2;
        let lpo = match self.policy {
            PolicyLoss::Lpo(p) => Some(p),
            _ => None,
        };
        let behave = inputs.behave_logp.filter(|_| self.correction.is_some() || lpo.is_some());
        let refl = inputs.ref_logp.filter(|_| self.kl.is_some());
        let kernel = Kernel {
            policy: self.policy,
            aggregation: self.aggregation,
            compat: self.compat,
            counts: *counts,
            kl: self.kl,
            correction: self.correction,
            t: tu,
            rows,
            metrics: self.metrics,
        };
        let lp = flat(inputs.logp)?;
        let old = flat(inputs.old_logp)?;
        let mask = flat(inputs.mask)?;
        let adv = flat(inputs.advantages)?;
        let beh = behave.map(flat).transpose()?;
        let rf = refl.map(flat).transpose()?;
        let n = rows * tu;
        let sized = |x: &[f32], len: usize, what: &str| -> Result<()> {
            if x.len() == len {
                Ok(())
            } else {
                Err(RlvrCoreError::Shape {
                    what: what.into(),
                    expected: format!("{len} elements"),
                    got: vec![x.len() as i64],
                })
            }
        };
        sized(&lp, n, "logp")?;
        sized(&old, n, "old_logp")?;
        sized(&mask, n, "mask")?;
        sized(&adv, if adv_tok { n } else { rows }, "advantages")?;
        if let Some(x) = &beh {
            sized(x, n, "behave_logp")?;
        }
        if let Some(x) = &rf {
            sized(x, n, "ref_logp")?;
        }
        let mut g = Tensor::f_empty([b, t], (Kind::Float, Device::Cpu))?;
        let mut scratch = Scratch::default();
        let mut sums = Sums::default();
        let mut lpo_metrics = None;
        let mut selected: Vec<usize> = Vec::new();
        {
            let grad = out_slice(&mut g)?;
            let row_in = |i: usize| -> RowIn<'_> {
                let s = i * tu..(i + 1) * tu;
                RowIn {
                    lp: &lp[s.clone()],
                    old: &old[s.clone()],
                    mask: &mask[s.clone()],
                    adv: if adv_tok { Per::Tok(&adv[s.clone()]) } else { Per::Row(adv[i]) },
                    behave: beh.as_ref().map(|x| &x[s.clone()]),
                    refl: rf.as_ref().map(|x| &x[s.clone()]),
                }
            };
            // batch-level passes
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
                } else {
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
            }
            let cov = || crate::cov::CovInputs {
                lp: &lp[..],
                old: &old[..],
                adv: &adv[..],
                adv_per_token: adv_tok,
                mask: &mask[..],
                t: tu,
            };
            match self.policy {
                PolicyLoss::ClipCov(p) => {
                    let seed = inputs.seed.ok_or_else(|| RlvrCoreError::MissingInput {
                        loss: "clip_cov".into(),
                        input: "seed (LossInputs::seed)".into(),
                    })?;
                    selected = crate::cov::clip_cov_selection(&cov(), &p, seed);
                }
                PolicyLoss::KlCov(p) => selected = crate::cov::kl_cov_selection(&cov(), p.ratio),
                _ => {}
            }
            if sums.nonfinite {
                // LPO's listwise pass met a NaN/inf: no gradient (an error below unless the
                // check is off, then NaN as in the libtorch path)
                grad.fill(f32::NAN);
                sums.pg_value = f64::NAN;
            } else {
                let mut sel_at = 0usize;
                let mut positions: Vec<usize> = Vec::new();
                for (i, grow) in grad.chunks_exact_mut(tu).enumerate() {
                    let row_start = i * tu;
                    positions.clear();
                    while sel_at < selected.len() && selected[sel_at] < row_start + tu {
                        positions.push(selected[sel_at] - row_start);
                        sel_at += 1;
                    }
                    let extra = RowExtra { lpo_coef: lpo_coef.get(i).copied().unwrap_or(0.0), selected: &positions };
                    kernel.row(&row_in(i), &extra, grow, &mut scratch, &mut sums);
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn values(x: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(x.to_kind(Kind::Float).contiguous().view([-1])).unwrap()
    }

    #[test]
    fn flat_borrows_contiguous_f32_and_copies_the_rest() {
        let base = Tensor::arange(24, (Kind::Float, Device::Cpu)).view([4, 6]);
        // contiguous: the tensor's own buffer
        let f = flat(&base).unwrap();
        assert!(f.in_place());
        assert_eq!(f.as_ptr().cast::<std::ffi::c_void>(), base.data_ptr().cast_const());
        assert_eq!(&f[..], &values(&base)[..]);
        // contiguous at a storage offset (rows 1..3): borrowed from the offset
        let rows = base.narrow(0, 1, 2);
        let f = flat(&rows).unwrap();
        assert!(f.in_place());
        assert_eq!(&f[..], &values(&rows)[..]);
        assert_eq!(f[0], 6.0);
        // strided (a transpose, a column slice): copied in row-major order
        for v in [base.transpose(0, 1), base.narrow(1, 2, 3)] {
            assert!(!v.is_contiguous());
            let f = flat(&v).unwrap();
            assert!(!f.in_place());
            assert_eq!(&f[..], &values(&v)[..]);
        }
        // bool and f64: converted copies
        let mask = base.gt(10.0);
        let f = flat(&mask).unwrap();
        assert!(!f.in_place());
        assert_eq!(&f[..], &values(&mask)[..]);
        let dbl = base.to_kind(Kind::Double);
        let f = flat(&dbl).unwrap();
        assert!(!f.in_place());
        assert_eq!(&f[..], &values(&base)[..]);
        // empty
        assert!(flat(&Tensor::zeros([0, 3], (Kind::Float, Device::Cpu))).unwrap().is_empty());
    }

    #[test]
    fn out_slice_writes_into_the_tensor_and_refuses_other_layouts() {
        let mut g = Tensor::empty([3, 5], (Kind::Float, Device::Cpu));
        for (i, v) in out_slice(&mut g).unwrap().iter_mut().enumerate() {
            *v = i as f32;
        }
        assert_eq!(values(&g), (0..15).map(|i| i as f32).collect::<Vec<_>>());
        let mut e = Tensor::empty([0, 5], (Kind::Float, Device::Cpu));
        assert!(out_slice(&mut e).unwrap().is_empty());
        let mut d = Tensor::empty([2, 2], (Kind::Double, Device::Cpu));
        assert!(matches!(out_slice(&mut d), Err(RlvrCoreError::Kind { .. })));
        let mut t = Tensor::empty([2, 3], (Kind::Float, Device::Cpu)).transpose(0, 1);
        assert!(matches!(out_slice(&mut t), Err(RlvrCoreError::Kind { .. })));
    }
}
