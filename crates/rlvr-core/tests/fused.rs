//! The fused CPU kernels against the libtorch path (`fused_cpu(false)`), in `f32`: values,
//! gradients and metrics of every loss × aggregation × correction × KL, per-row and per-token
//! advantages, float and bool masks, to ~1e-6.
#![cfg(feature = "tch")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use rlvr_core::{
    Aggregation, CispoParams, ClipCovParams, Compat, DecoupledParams, GlobalCounts, GmpoParams, Groups, GspoParams,
    IsLevel, IsMode, KlCovParams, KlEstimator, KlParams, LossConfig, LossInputs, LossMetrics, LossParams, LpoParams,
    Params, PolicyLoss, PpoParams, Projection, RlvrCoreError, SapoParams,
};
use tch::{Device, Kind, Tensor};

const B: i64 = 8;
const T: i64 = 37;

fn lcg(seed: u64, n: usize) -> Vec<f32> {
    // uniform in [-1, 1), deterministic (no global generator)
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

struct Case {
    logp: Tensor,
    old: Tensor,
    behave: Tensor,
    refl: Tensor,
    adv_row: Tensor,
    adv_tok: Tensor,
    mask_f: Tensor,
    mask_b: Tensor,
}

fn case(seed: u64) -> Case {
    case_shape(seed, B, T, &[37, 30, 12, 0, 25, 37, 1, 20])
}

fn case_shape(seed: u64, rows: i64, cols: i64, lens: &[usize]) -> Case {
    let n = (rows * cols) as usize;
    let t = |v: Vec<f32>| Tensor::from_slice(&v).view([rows, cols]);
    let old: Vec<f32> = lcg(seed, n).iter().map(|u| -1.5 + 0.8 * u).collect();
    let logp: Vec<f32> = old.iter().zip(lcg(seed + 1, n)).map(|(o, u)| o + 0.35 * u).collect();
    let behave: Vec<f32> = old.iter().zip(lcg(seed + 2, n)).map(|(o, u)| o + 0.5 * u).collect();
    let refl: Vec<f32> = old.iter().zip(lcg(seed + 3, n)).map(|(o, u)| o + 0.3 * u).collect();
    let adv_row: Vec<f32> = lcg(seed + 4, rows as usize).iter().map(|u| 1.5 * u).collect();
    let adv_tok: Vec<f32> = lcg(seed + 5, n).iter().map(|u| 1.5 * u).collect();
    let mask: Vec<bool> = (0..n).map(|i| (i % cols as usize) < lens[i / cols as usize]).collect();
    let mask_b = Tensor::from_slice(&mask).view([rows, cols]);
    Case {
        logp: t(logp),
        old: t(old),
        behave: t(behave),
        refl: t(refl),
        adv_row: Tensor::from_slice(&adv_row),
        adv_tok: t(adv_tok),
        mask_f: mask_b.to_kind(Kind::Float),
        mask_b,
    }
}

fn losses() -> Vec<PolicyLoss> {
    vec![
        PolicyLoss::Ppo(PpoParams::default()),
        PolicyLoss::Ppo(PpoParams::dapo().ratio_cap(Some(1.5))),
        PolicyLoss::Gspo(GspoParams::default().eps(0.02, 0.03)),
        PolicyLoss::Gspo(GspoParams::default().eps(0.02, 0.03).ratio_cap(Some(1.2))),
        PolicyLoss::Cispo(CispoParams::default()),
        PolicyLoss::Cispo(CispoParams::trl()),
        PolicyLoss::Sapo(SapoParams::default()),
        PolicyLoss::Reinforce,
        PolicyLoss::Gmpo(GmpoParams::default().eps(0.1, 0.15)),
        PolicyLoss::ClipCov(ClipCovParams::default().ratio(0.05).cov_bounds(0.05, 5.0)),
        PolicyLoss::KlCov(KlCovParams::default().ratio(0.05).kl_coef(0.5)),
        PolicyLoss::Lpo(LpoParams::new(Projection::Forward)),
        PolicyLoss::Lpo(LpoParams::new(Projection::Reverse).listwise_uses_clipped(true)),
        PolicyLoss::Lpo(LpoParams::new(Projection::Pointwise).clip_eps(None)),
    ]
}

fn run(p: LossParams, x: &LossInputs<'_>, counts: &GlobalCounts) -> (f64, Tensor, LossMetrics) {
    let leaf = x.logp.detach().copy().set_requires_grad(true);
    let mut xi = *x;
    xi.logp = &leaf;
    let out = LossConfig::new(p.check().unwrap()).loss(&xi, counts).unwrap();
    let g = Tensor::run_backward(&[&out.loss], &[&leaf], false, false).remove(0);
    (f64::try_from(&out.loss).unwrap(), g, out.metrics)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

fn compare(what: &str, p: LossParams, x: &LossInputs<'_>, counts: &GlobalCounts) {
    let (vf, gf, mf) = run(p.fused_cpu(true), x, counts);
    let (vt, gt, mt) = run(p.fused_cpu(false), x, counts);
    assert!(close(vf, vt, 1e-6), "{what}: value fused {vf} vs torch {vt}");
    let scale = 1.0 + f64::try_from(gt.abs().max()).unwrap();
    let d = f64::try_from((&gf - &gt).abs().max()).unwrap();
    assert!(d <= 1e-6 * scale, "{what}: gradient differs by {d} (scale {scale})");
    let (a, b) = (mf.to_metrics(), mt.to_metrics());
    let keys = |m: &rl_core::Metrics| m.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>();
    assert_eq!(keys(&a), keys(&b), "{what}: metric names");
    for (k, v) in a.iter() {
        let w = b.get(k).unwrap();
        assert!(close(v, w, 2e-6), "{what}: metric {k} fused {v} vs torch {w}");
    }
}

#[test]
fn fused_equals_libtorch_for_every_loss_and_option() {
    let groups = Groups::uniform(4, 2).unwrap();
    for seed in [1u64, 2] {
        let c = case(seed);
        for (mi, mask) in [&c.mask_f, &c.mask_b].into_iter().enumerate() {
            let counts = GlobalCounts::local(mask).unwrap();
            for (ai, adv) in [&c.adv_row, &c.adv_tok].into_iter().enumerate() {
                for loss in losses() {
                    for agg in [
                        Aggregation::TokenMean,
                        Aggregation::SeqMeanTokenSum,
                        Aggregation::SeqMeanTokenMean,
                        Aggregation::SeqMeanTokenSumNorm { scale: Some(64.0) },
                    ] {
                        for compat in [Compat::Native, Compat::Verl] {
                            let p = LossParams::new(loss).aggregation(agg).compat(compat);
                            let x = LossInputs::new(&c.logp, &c.old, adv, mask).groups(&groups).seed(seed);
                            let what =
                                format!("{} {} {compat:?} mask {mi} adv {ai} seed {seed}", loss.name(), agg.name());
                            compare(&what, p, &x, &counts);
                            if agg == Aggregation::TokenMean && compat == Compat::Native {
                                // corrections and KL once per loss
                                for corr in [
                                    DecoupledParams::default(),
                                    DecoupledParams::default().level(IsLevel::Token),
                                    DecoupledParams::areal().bounds(Some(0.8), 1.3),
                                    DecoupledParams::default().level(IsLevel::Sequence).mode(IsMode::Mask).upper(1.1),
                                ] {
                                    let x = x.behaviour(&c.behave);
                                    compare(&format!("{what} {corr:?}"), p.correction(Some(corr)), &x, &counts);
                                }
                                for est in [KlEstimator::K1, KlEstimator::Abs, KlEstimator::K2, KlEstimator::K3] {
                                    for st in [false, true] {
                                        let kl = KlParams::default().estimator(est).straight_through(st).coef(0.2);
                                        let x = x.reference(&c.refl);
                                        compare(&format!("{what} kl {est:?} {st}"), p.kl(Some(kl)), &x, &counts);
                                    }
                                }
                                compare(&format!("{what} no metrics"), p.metrics(false), &x, &counts);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn fused_rows_longer_than_a_block_match_libtorch() {
    // T = 600: every row is swept in blocks of 256 (with a partial last block)
    let c = case_shape(5, 4, 600, &[600, 513, 0, 257]);
    let groups = Groups::uniform(2, 2).unwrap();
    for mask in [&c.mask_f, &c.mask_b] {
        let counts = GlobalCounts::local(mask).unwrap();
        for adv in [&c.adv_row, &c.adv_tok] {
            for loss in losses() {
                for agg in [Aggregation::TokenMean, Aggregation::SeqMeanTokenMean] {
                    let p = LossParams::new(loss).aggregation(agg);
                    let x = LossInputs::new(&c.logp, &c.old, adv, mask).groups(&groups).seed(3);
                    let what = format!("{} {} T=600", loss.name(), agg.name());
                    compare(&what, p, &x, &counts);
                    let xb = x.behaviour(&c.behave).reference(&c.refl);
                    let corr = DecoupledParams::default().level(IsLevel::Token);
                    compare(
                        &format!("{what} token IS + k3"),
                        p.correction(Some(corr)).kl(Some(KlParams::default())),
                        &xb,
                        &counts,
                    );
                }
            }
        }
    }
}

#[test]
fn fused_reports_non_finite_inputs_like_the_libtorch_path() {
    let c = case(3);
    let counts = GlobalCounts::local(&c.mask_f).unwrap();
    let bad = c.old.copy();
    let _ = bad.view([-1]).get(40).fill_(f64::NAN);
    for fused in [true, false] {
        let p = LossParams::default().fused_cpu(fused).check().unwrap();
        match LossConfig::new(p).loss(&LossInputs::new(&c.logp, &bad, &c.adv_row, &c.mask_f), &counts) {
            Err(RlvrCoreError::NonFinite { what, index, .. }) => assert_eq!((what.as_str(), index), ("old_logp", 40)),
            other => panic!("fused {fused}: {other:?}"),
        }
    }
    // a NaN at a masked position is still an input error (as with libtorch)
    let bad = c.logp.copy();
    let _ = bad.view([-1]).get(3 * T + 5).fill_(f64::INFINITY);
    let r = LossConfig::new(LossParams::default().check().unwrap())
        .loss(&LossInputs::new(&bad, &c.old, &c.adv_row, &c.mask_f), &counts);
    assert!(matches!(r, Err(RlvrCoreError::NonFinite { .. })), "{r:?}");
}

#[test]
fn reinforce_finds_every_non_finite_input_in_its_single_sweep() {
    // REINFORCE reads its checks off the `ppo_kl` sum: every non-finite logp, old_logp or mask
    // value, masked or not, must still be an input error naming the value, on both paths
    let c = case(5);
    let counts = GlobalCounts::local(&c.mask_f).unwrap();
    let at = |x: &Tensor, i: i64, v: f64| {
        let y = x.copy();
        let _ = y.view([-1]).get(i).fill_(v);
        y
    };
    let cases = [
        ("old_logp", 40, f64::NAN),
        ("logp", 3 * T + 5, f64::INFINITY), // row 3 is all padding
        ("logp", 2, f64::NEG_INFINITY),
        ("mask", 77, f64::NAN),
        ("mask", 8, f64::INFINITY),
        ("old_logp", B * T - 1, f64::NEG_INFINITY), // the last element (a remainder lane)
    ];
    for (what, i, v) in cases {
        let (mut lp, mut old, mut mask) = (c.logp.copy(), c.old.copy(), c.mask_f.copy());
        match what {
            "logp" => lp = at(&c.logp, i, v),
            "old_logp" => old = at(&c.old, i, v),
            _ => mask = at(&c.mask_f, i, v),
        }
        for fused in [true, false] {
            let p = LossParams::new(PolicyLoss::Reinforce).fused_cpu(fused).check().unwrap();
            match LossConfig::new(p).loss(&LossInputs::new(&lp, &old, &c.adv_row, &mask), &counts) {
                Err(RlvrCoreError::NonFinite { what: w, index, .. }) => {
                    assert_eq!((w.as_str(), index), (what, i as usize), "fused {fused}");
                }
                other => panic!("{what}[{i}] = {v}, fused {fused}: {other:?}"),
            }
        }
    }
    // finite values whose difference overflows f32 are not an input error (the sum's alarm is
    // confirmed by the exact check)
    let (lp, old) = (at(&c.logp, 10, -3.0e38), at(&c.old, 10, 3.0e38));
    for fused in [true, false] {
        let p = LossParams::new(PolicyLoss::Reinforce).fused_cpu(fused).check().unwrap();
        let r = LossConfig::new(p).loss(&LossInputs::new(&lp, &old, &c.adv_row, &c.mask_f), &counts);
        assert!(r.is_ok(), "fused {fused}: {r:?}");
    }
}

#[test]
fn fused_handles_an_all_padding_micro_batch_with_the_correction_on() {
    let c = case(4);
    let zero = Tensor::zeros([B, T], (Kind::Float, Device::Cpu));
    let counts = GlobalCounts::new(100.0, 8.0, 1).unwrap();
    for fused in [true, false] {
        let p = LossParams::default().correction(Some(DecoupledParams::default())).fused_cpu(fused);
        let x = LossInputs::new(&c.logp, &c.old, &c.adv_row, &zero).behaviour(&c.behave);
        let (v, g, m) = run(p, &x, &counts);
        assert_eq!(v, 0.0);
        assert_eq!(f64::try_from(g.abs().sum(Kind::Double)).unwrap(), 0.0);
        assert_eq!(m.tokens, 0.0);
        assert!(m.is_weight_mean.is_none());
    }
}

/// `x` as a non-contiguous view with the same values (the transpose of a `[T, B]` copy).
fn strided(x: &Tensor) -> Tensor {
    let v = x.transpose(0, 1).contiguous().transpose(0, 1);
    assert!(!v.is_contiguous());
    v
}

/// `x` as a contiguous view at a non-zero storage offset (rows 1.. of a taller tensor).
fn offset(x: &Tensor) -> Tensor {
    let (b, t) = x.size2().unwrap();
    let tall = Tensor::zeros([b + 1, t], (x.kind(), Device::Cpu));
    tall.narrow(0, 1, b).copy_(x);
    let v = tall.narrow(0, 1, b);
    assert!(v.is_contiguous());
    v
}

#[test]
fn fused_reads_strided_and_offset_inputs_like_contiguous_ones() {
    // rows 3 and 5 are empty, row 6 has one token
    let c = case_shape(9, B, T, &[37, 30, 12, 0, 25, 0, 1, 20]);
    let groups = Groups::uniform(4, 2).unwrap();
    let counts = GlobalCounts::local(&c.mask_f).unwrap();
    for loss in losses() {
        let p = LossParams::new(loss).correction(Some(DecoupledParams::default().level(IsLevel::Token)));
        let base = LossInputs::new(&c.logp, &c.old, &c.adv_tok, &c.mask_f).behaviour(&c.behave).groups(&groups).seed(5);
        let (v0, g0, m0) = run(p, &base, &counts);
        for (name, view) in [("strided", strided as fn(&Tensor) -> Tensor), ("offset", offset)] {
            let (old, adv, mask, behave) = (view(&c.old), view(&c.adv_tok), view(&c.mask_f), view(&c.behave));
            let x = LossInputs::new(&c.logp, &old, &adv, &mask).behaviour(&behave).groups(&groups).seed(5);
            // the same kernel on the same values: bit-identical to the contiguous inputs
            let (v, g, m) = run(p, &x, &counts);
            let what = format!("{} {name}", loss.name());
            assert_eq!(v.to_bits(), v0.to_bits(), "{what}: value");
            assert!(g.equal(&g0), "{what}: gradient");
            assert_eq!(m.to_metrics().iter().count(), m0.to_metrics().iter().count(), "{what}: metrics");
            for (k, a) in m.to_metrics().iter() {
                assert_eq!(a.to_bits(), m0.to_metrics().get(k).unwrap().to_bits(), "{what}: {k}");
            }
            // and equal to the libtorch path on the same views
            compare(&what, p, &x, &counts);
        }
        // a strided logp (the gradient flows back through the view to its contiguous base)
        let base_t = c.logp.transpose(0, 1).contiguous().set_requires_grad(true);
        let lp_view = base_t.transpose(0, 1);
        let x = LossInputs::new(&lp_view, &c.old, &c.adv_tok, &c.mask_f).behaviour(&c.behave).groups(&groups).seed(5);
        let out = LossConfig::new(p.check().unwrap()).loss(&x, &counts).unwrap();
        let g = Tensor::run_backward(&[&out.loss], &[&base_t], false, false).remove(0);
        assert_eq!(f64::try_from(&out.loss).unwrap().to_bits(), v0.to_bits(), "{}: strided logp value", loss.name());
        assert!(g.transpose(0, 1).equal(&g0), "{}: strided logp gradient", loss.name());
    }
}

#[test]
fn fused_handles_empty_rows_like_libtorch() {
    // every row empty but one, and an all-empty micro-batch
    let c = case_shape(11, 4, 9, &[0, 0, 9, 0]);
    let groups = Groups::uniform(2, 2).unwrap();
    for mask in [&c.mask_f, &c.mask_b] {
        let counts = GlobalCounts::local(mask).unwrap();
        for loss in losses() {
            for agg in [Aggregation::TokenMean, Aggregation::SeqMeanTokenMean, Aggregation::SeqMeanTokenSum] {
                let x = LossInputs::new(&c.logp, &c.old, &c.adv_row, mask).groups(&groups).seed(2);
                compare(
                    &format!("{} {} one row", loss.name(), agg.name()),
                    LossParams::new(loss).aggregation(agg),
                    &x,
                    &counts,
                );
            }
        }
    }
    let none = Tensor::zeros([4, 9], (Kind::Float, Device::Cpu));
    let counts = GlobalCounts::new(10.0, 4.0, 1).unwrap();
    for loss in losses() {
        let x = LossInputs::new(&c.logp, &c.old, &c.adv_row, &none).groups(&groups).seed(2);
        let (v, g, _) = run(LossParams::new(loss), &x, &counts);
        assert_eq!(v, 0.0, "{}", loss.name());
        assert_eq!(f64::try_from(g.abs().sum(Kind::Double)).unwrap(), 0.0, "{}", loss.name());
        compare(&format!("{} all empty", loss.name()), LossParams::new(loss), &x, &counts);
    }
}
