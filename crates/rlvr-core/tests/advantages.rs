//! Advantage estimators: golden values from the published formulas, properties, errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::needless_range_loop)]
use proptest::prelude::*;
use rlvr_core::{
    AdvantageEstimator, AdvantageParams, EffectivenessRule, GroupKind, Groups, RlvrCoreError, SingletonGroups, StdKind,
};

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "index {i}: {x} vs {y} (tol {tol})\n{a:?}\n{b:?}");
    }
}

fn adv(est: AdvantageEstimator, r: &[f64], g: &Groups, lengths: Option<&[usize]>) -> Vec<f64> {
    AdvantageParams::new(est).check().unwrap().compute(r, g, lengths).unwrap().values
}

const R8: [f64; 8] = [1., 0., 0., 0., 0., 0., 0., 0.];

#[test]
fn grpo_golden_rlvr_section_8() {
    // A = (R − μ)/(σ_unbiased + 1e-6), μ = 0.125, σ = 0.353553 → [2.474867, −0.353552 × 7]
    let g = Groups::uniform(1, 8).unwrap();
    let a = adv(AdvantageEstimator::grpo(), &R8, &g, None);
    let mut want = vec![-0.353552; 8];
    want[0] = 2.474867;
    close(&a, &want, 2e-6);
    // population std (LPO's σ_G = 0.330719): (1 − 0.125)/0.330719 = 2.645751
    let a = adv(AdvantageEstimator::Grpo { eps: 1e-6, std: StdKind::Population }, &R8, &g, None);
    assert!((a[0] - 0.875 / (0.330719 + 1e-6)).abs() < 1e-5);
}

#[test]
fn group_relative_estimators_golden() {
    let g = Groups::uniform(2, 4).unwrap();
    let r = [1., 0., 0., 1., 0.2, 0.4, 0.6, 0.8];
    // Dr.GRPO: A = R − μ_G (μ = 0.5 in both groups)
    let dr = adv(AdvantageEstimator::DrGrpo, &r, &g, None);
    close(&dr, &[0.5, -0.5, -0.5, 0.5, -0.3, -0.1, 0.1, 0.3], 1e-12);
    // RLOO: A = R − mean(others) = K/(K−1)(R − μ)
    let rloo = adv(AdvantageEstimator::Rloo, &r, &g, None);
    let loo = |i: usize, m: &[usize]| r[i] - m.iter().filter(|&&j| j != i).map(|&j| r[j]).sum::<f64>() / 3.0;
    let want: Vec<f64> = (0..8).map(|i| loo(i, if i < 4 { &[0, 1, 2, 3] } else { &[4, 5, 6, 7] })).collect();
    close(&rloo, &want, 1e-12);
    // MaxRL: (R − μ)/(μ + 1e-6)
    let mx = adv(AdvantageEstimator::max_rl(), &r, &g, None);
    close(&mx, &dr.iter().map(|d| d / (0.5 + 1e-6)).collect::<Vec<_>>(), 1e-12);
    // batch std (TRL scale_rewards="batch"): (R − μ_G)/(std_unbiased(all R) + 1e-4)
    let mean = r.iter().sum::<f64>() / 8.0;
    let sd = (r.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 7.0).sqrt();
    let bs = adv(AdvantageEstimator::batch_std(), &r, &g, None);
    close(&bs, &dr.iter().map(|d| d / (sd + 1e-4)).collect::<Vec<_>>(), 1e-12);
}

#[test]
fn reinforce_pp_whitening_golden() {
    // verl masked_whiten over tokens: mean and Bessel variance weighted by length;
    // (x − mean) / sqrt(var + 1e-8)
    let g = Groups::uniform(2, 2).unwrap();
    let r = [1.0, 0.0, 0.0, 0.0];
    let lens = [1usize, 3, 2, 2];
    let whiten = |x: &[f64]| {
        let n: f64 = lens.iter().sum::<usize>() as f64;
        let mean = x.iter().zip(&lens).map(|(v, &l)| v * l as f64).sum::<f64>() / n;
        let var = x.iter().zip(&lens).map(|(v, &l)| l as f64 * (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        x.iter().map(|v| (v - mean) / (var + 1e-8).sqrt()).collect::<Vec<_>>()
    };
    let a = adv(AdvantageEstimator::reinforce_pp(), &r, &g, Some(&lens));
    close(&a, &whiten(&r), 1e-12);
    // baseline variant: R − μ_G first (group 2 is constant → 0), then whiten
    let a = adv(AdvantageEstimator::reinforce_pp_baseline(), &r, &g, Some(&lens));
    close(&a, &whiten(&[0.5, -0.5, 0.0, 0.0]), 1e-12);
}

#[test]
fn pass_k_and_opo_golden() {
    let g = Groups::uniform(1, 4).unwrap();
    let r = [0.2, 0.9, 0.5, 0.9];
    // pass@k: only the (first) best gets r_max − r_2nd; here 0.9 − 0.9 = 0
    let a = adv(AdvantageEstimator::PassK { normalize_by_std: false, eps: 1e-6 }, &r, &g, None);
    close(&a, &[0.0; 4], 0.0);
    let r = [0.2, 0.9, 0.5, 0.1];
    let a = adv(AdvantageEstimator::pass_k(), &r, &g, None);
    let mean = 0.425;
    let sd = (r.iter().map(|x: &f64| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
    close(&a, &[0.0, 0.4 / (sd + 1e-6), 0.0, 0.0], 1e-12);
    // OPO: A = R − Σ|y|R/Σ|y|
    let lens = [10usize, 20, 30, 40];
    let base = (0.2 * 10. + 0.9 * 20. + 0.5 * 30. + 0.1 * 40.) / 100.0;
    let a = adv(AdvantageEstimator::Opo, &r, &g, Some(&lens));
    close(&a, &r.iter().map(|x| x - base).collect::<Vec<_>>(), 1e-12);
    let err = AdvantageParams::new(AdvantageEstimator::Opo).check().unwrap().compute(&r, &g, None);
    assert!(matches!(err, Err(RlvrCoreError::MissingInput { .. })));
}

#[test]
fn effectiveness_zeroes_phantom_advantages() {
    // fp noise on a constant group: verl's GRPO gives (1e-9)/(σ + 1e-6) ≈ O(1e-3..1) phantom
    // advantages; the tolerance classifies it as zero-variance and zeroes it
    let g = Groups::uniform(2, 3).unwrap();
    let r = [1.0, 1.0 + 1e-9, 1.0, 1.0, 0.0, 0.0];
    let out = AdvantageParams::default().check().unwrap().compute(&r, &g, None).unwrap();
    assert_eq!(out.groups[0].kind, GroupKind::ZeroVariance);
    assert_eq!(&out.values[..3], &[0.0; 3]);
    assert!(out.values[3] > 1.0);
    // shaped rewards: an all-fail group with format credit 0.1 is "mixed" by variance, but the
    // outcome gate marks it AllFail and zeroes it
    let r = [0.0, 0.1, 0.0, 1.0, 0.1, 0.0];
    let gate = EffectivenessRule::default().success_threshold(Some(1.0));
    let out = AdvantageParams::default().effectiveness(gate).check().unwrap().compute(&r, &g, None).unwrap();
    assert_eq!(out.groups[0].kind, GroupKind::AllFail);
    assert_eq!(&out.values[..3], &[0.0; 3]);
    assert_eq!(out.groups[1].kind, GroupKind::Mixed);
    let m = out.metrics();
    assert_eq!(m.get("frac_zero_variance_groups"), Some(0.5));
    assert_eq!(m.get("frac_all_fail"), Some(0.5));
}

#[test]
fn singleton_groups_and_bad_input_are_typed_errors() {
    let g = Groups::from_ids(&[7, 7, 8]).unwrap();
    let p = AdvantageParams::default().check().unwrap();
    assert!(matches!(
        p.compute(&[1.0, 0.0, 1.0], &g, None),
        Err(RlvrCoreError::GroupTooSmall { group: 1, size: 1, .. })
    ));
    let z = AdvantageParams::default().singleton(SingletonGroups::Zero).check().unwrap();
    assert_eq!(z.compute(&[1.0, 0.0, 1.0], &g, None).unwrap().values[2], 0.0);
    assert!(matches!(p.compute(&[1.0, f64::NAN, 1.0], &g, None), Err(RlvrCoreError::Core(_))));
    assert!(matches!(p.compute(&[1.0, 0.0], &g, None), Err(RlvrCoreError::Groups(_))));
    assert!(matches!(p.compute(&[], &g, None), Err(RlvrCoreError::Empty { .. })));
    assert!(AdvantageParams::new(AdvantageEstimator::Grpo { eps: 0.0, std: StdKind::Unbiased }).check().is_err());
    // REINFORCE++ needs no groups of size > 1
    let rpp = AdvantageParams::new(AdvantageEstimator::reinforce_pp()).check().unwrap();
    assert!(rpp.compute(&[1.0, 0.0, 1.0], &g, None).is_ok());
}

#[test]
fn params_roundtrip_through_json() {
    let p =
        AdvantageParams::new(AdvantageEstimator::pass_k()).effectiveness(EffectivenessRule::default().tolerance(1e-3));
    let s = serde_json::to_string(&p).unwrap();
    let back: AdvantageParams = serde_json::from_str(&s).unwrap();
    assert_eq!(p, back);
}

proptest! {
    #[test]
    fn grpo_and_rloo_are_zero_mean_per_group(r in proptest::collection::vec(0.0f64..1.0, 12)) {
        let g = Groups::uniform(3, 4).unwrap();
        for est in [AdvantageEstimator::grpo(), AdvantageEstimator::DrGrpo, AdvantageEstimator::Rloo, AdvantageEstimator::max_rl()] {
            let a = adv(est, &r, &g, None);
            for m in g.iter() {
                let s: f64 = m.iter().map(|&i| a[i]).sum();
                prop_assert!(s.abs() < 1e-6 * (1.0 + a.iter().map(|x| x.abs()).sum::<f64>()));
            }
        }
    }

    #[test]
    fn ids_and_uniform_layouts_agree(r in proptest::collection::vec(0.0f64..1.0, 8)) {
        let u = Groups::uniform(2, 4).unwrap();
        let ids = Groups::from_ids(&["a", "a", "a", "a", "b", "b", "b", "b"]).unwrap();
        prop_assert_eq!(adv(AdvantageEstimator::grpo(), &r, &u, None), adv(AdvantageEstimator::grpo(), &r, &ids, None));
    }
}
