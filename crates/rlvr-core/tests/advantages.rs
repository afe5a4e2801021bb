//! Advantage estimators: golden values from the published formulas, properties, errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::needless_range_loop)]
use proptest::prelude::*;
use rlvr_core::{
    AdvantageConfig, AdvantageEstimator, AdvantageInputs, AdvantageParams, EffectivenessRule, Groups,
    IneffectiveReason, Params, RlvrCoreError, SingletonGroups, StdKind, Verdict,
};

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "index {i}: {x} vs {y} (tol {tol})\n{a:?}\n{b:?}");
    }
}

fn cfg(p: AdvantageParams) -> AdvantageConfig {
    AdvantageConfig::new(p.check().unwrap())
}

/// The estimator's formula on every group (verl's numbers: no zeroing of ineffective groups).
fn adv(est: AdvantageEstimator, r: &[f64], g: &Groups, lengths: Option<&[usize]>) -> Vec<f64> {
    cfg(AdvantageParams::new(est).zero_ineffective(false)).compute(r, g, lengths).unwrap().values
}

const R8: [f64; 8] = [1., 0., 0., 0., 0., 0., 0., 0.];

#[test]
fn grpo_golden_rlvr_section_8() {
    // A = (R − μ)/(σ_unbiased + 1e-6), μ = 0.125, σ = 0.353553 → [2.474867, −0.353552 × 7]
    let g = Groups::uniform(1, 8).unwrap();
    for zero in [false, true] {
        let a = cfg(AdvantageParams::default().zero_ineffective(zero)).compute(&R8, &g, None).unwrap().values;
        let mut want = vec![-0.353552; 8];
        want[0] = 2.474867;
        close(&a, &want, 2e-6);
    }
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
fn gpg_scales_by_the_share_of_nonzero_rewards() {
    // verl gpg: α = B / #nonzero = 8 / 5; A = α (R − μ_G) / f_norm
    let g = Groups::uniform(2, 4).unwrap();
    let r = [1., 0., 0., 1., 0.2, 0.4, 0.6, 0.0];
    let a = adv(AdvantageEstimator::gpg(), &r, &g, None);
    let want = [0.5, -0.5, -0.5, 0.5, -0.1, 0.1, 0.3, -0.3].map(|d| 1.6 * d);
    close(&a, &want, 1e-12);
    let a = adv(AdvantageEstimator::Gpg { f_norm: 2.0 }, &r, &g, None);
    close(&a, &want.map(|x| x / 2.0), 1e-12);
    // all-zero rewards: α = B / max(0, 1) and every centred reward is 0
    assert!(adv(AdvantageEstimator::gpg(), &[0.0; 8], &g, None).iter().all(|&x| x == 0.0));
}

#[test]
fn remax_subtracts_the_greedy_baseline() {
    let g = Groups::uniform(1, 3).unwrap();
    let c = cfg(AdvantageParams::new(AdvantageEstimator::ReMax));
    let r = [1.0, 0.0, 0.5];
    let out = c.compute_inputs(&AdvantageInputs::new(&r, &g).baselines(&[0.5, 0.5, 1.0])).unwrap();
    close(&out.values, &[0.5, -0.5, -0.5], 0.0);
    // no groups involved: a singleton batch works, an all-fail group is not zeroed
    let one = Groups::uniform(1, 1).unwrap();
    let out = c.compute_inputs(&AdvantageInputs::new(&[0.0], &one).baselines(&[0.3])).unwrap();
    assert_eq!(out.values, vec![-0.3]);
    assert!(matches!(c.compute(&r, &g, None), Err(RlvrCoreError::MissingInput { .. })));
    let bad = AdvantageInputs::new(&r, &g).baselines(&[0.5, f64::NAN, 0.0]);
    assert!(matches!(c.compute_inputs(&bad), Err(RlvrCoreError::NonFinite { index: 1, .. })));
    assert!(matches!(c.compute_inputs(&AdvantageInputs::new(&r, &g).baselines(&[0.5])), Err(RlvrCoreError::Groups(_))));
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
fn reinforce_pp_baseline_shifts_ineffective_groups_like_verl() {
    // group 1 is all-fail with shaped credit: zeroed before the whitening, then shifted by
    // −mean/σ with every other zero — not exactly 0 (the module docs say so)
    let g = Groups::uniform(2, 2).unwrap();
    let r = [1.0, 0.0, 0.1, 0.0];
    let a = cfg(AdvantageParams::new(AdvantageEstimator::reinforce_pp_baseline())).compute(&r, &g, None).unwrap();
    assert_eq!(a.groups[1].verdict, Verdict::Ineffective(IneffectiveReason::AllFailure));
    // centred: [0.5, −0.5, 0, 0]; mean 0, Bessel var 1/6 → ±0.5·sqrt(6), zeros stay 0 here
    close(&a.values, &[0.5 / (1.0f64 / 6.0 + 1e-8).sqrt(), -0.5 / (1.0f64 / 6.0 + 1e-8).sqrt(), 0.0, 0.0], 1e-12);
    // with a non-zero batch mean the zeros move: [1, 0, 0] and a constant group
    let g = Groups::from_ids(&[0, 0, 0, 1, 1]).unwrap();
    let r = [1.0, 1.0, 0.0, 0.0, 0.0];
    let a = cfg(AdvantageParams::new(AdvantageEstimator::reinforce_pp_baseline())).compute(&r, &g, None).unwrap();
    let centred = [1.0 / 3.0, 1.0 / 3.0, -2.0 / 3.0, 0.0, 0.0];
    let mean = centred.iter().sum::<f64>() / 5.0;
    let var = centred.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0;
    let want: Vec<f64> = centred.iter().map(|x| (x - mean) / (var + 1e-8).sqrt()).collect();
    close(&a.values, &want, 1e-12);
    assert!(a.values[3] != 0.0 && a.values[3] == a.values[4]);
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
    let err = cfg(AdvantageParams::new(AdvantageEstimator::Opo)).compute(&r, &g, None);
    assert!(matches!(err, Err(RlvrCoreError::MissingInput { .. })));
}

#[test]
fn outcome_rule_zeroes_phantom_advantages_and_reports_reasons() {
    let g = Groups::uniform(3, 3).unwrap();
    // group 0: shaped all-fail (σ > 0 but nobody correct); group 1: mixed; group 2: all correct
    let r = [0.0, 0.1, 0.0, 1.0, 0.1, 0.0, 1.0, 1.0, 1.0];
    let out = cfg(AdvantageParams::default()).compute(&r, &g, None).unwrap();
    let verdicts: Vec<_> = out.groups.iter().map(|s| s.verdict).collect();
    assert_eq!(
        verdicts,
        [
            Verdict::Ineffective(IneffectiveReason::AllFailure),
            Verdict::Effective,
            Verdict::Ineffective(IneffectiveReason::AllSuccess)
        ]
    );
    assert_eq!(&out.values[..3], &[0.0; 3]);
    assert!(out.values[3] > 1.0);
    let m = out.metrics();
    assert!((m.get("frac_ineffective").unwrap() - 2.0 / 3.0).abs() < 1e-15);
    assert!((m.get("frac_all_failure").unwrap() - 1.0 / 3.0).abs() < 1e-15);
    assert_eq!(m.get("frac_zero_variance"), Some(0.0));
    assert_eq!(out.reasons().total(), 2);
    // verl's numbers with zero_ineffective = false: the shaped group gets phantom advantages
    let v = cfg(AdvantageParams::default().zero_ineffective(false)).compute(&r, &g, None).unwrap();
    assert!(v.values[1] > 1.0);
    // the variance rule with a tolerance absorbs fp noise on a constant group
    let noisy = [1.0, 1.0 + 1e-9, 1.0, 1.0, 0.0, 0.0, 0.3, 0.3, 0.3];
    let sd = cfg(AdvantageParams::default().effectiveness(EffectivenessRule::reward_std()));
    let out = sd.compute(&noisy, &g, None).unwrap();
    assert_eq!(out.groups[0].verdict, Verdict::Ineffective(IneffectiveReason::ZeroVariance));
    assert_eq!(&out.values[..3], &[0.0; 3]);
    assert_eq!(out.metrics().get("frac_zero_variance"), Some(2.0 / 3.0));
    // binary outcomes attached per sequence override the reward threshold
    let o = [false, true, false, true, false, false, true, true, false];
    let out = cfg(AdvantageParams::default()).compute_inputs(&AdvantageInputs::new(&r, &g).outcomes(&o)).unwrap();
    assert!(out.groups.iter().all(|s| s.verdict.is_effective()));
    assert!(out.values[1] > 0.0);
}

#[test]
fn singleton_groups_and_bad_input_are_typed_errors() {
    let g = Groups::from_ids(&[7, 7, 8]).unwrap();
    let p = cfg(AdvantageParams::default());
    assert!(matches!(
        p.compute(&[1.0, 0.0, 1.0], &g, None),
        Err(RlvrCoreError::GroupTooSmall { group: 1, size: 1, .. })
    ));
    let z = cfg(AdvantageParams::default().singleton(SingletonGroups::Zero));
    let out = z.compute(&[1.0, 0.0, 1.0], &g, None).unwrap();
    assert_eq!(out.values[2], 0.0);
    assert_eq!(out.groups[1].verdict, Verdict::Ineffective(IneffectiveReason::Singleton));
    // RLOO and pass@k need 2 responses even when zeroing is off
    let rloo = cfg(AdvantageParams::new(AdvantageEstimator::Rloo).zero_ineffective(false));
    assert!(matches!(rloo.compute(&[1.0, 0.0, 1.0], &g, None), Err(RlvrCoreError::GroupTooSmall { min: 2, .. })));
    assert!(matches!(p.compute(&[1.0, f64::NAN, 1.0], &g, None), Err(RlvrCoreError::NonFinite { index: 1, .. })));
    assert!(matches!(p.compute(&[1.0, 0.0], &g, None), Err(RlvrCoreError::Groups(_))));
    assert!(matches!(p.compute(&[1.0, 0.0, 1.0], &g, Some(&[1, 2])), Err(RlvrCoreError::Groups(_))));
    assert!(matches!(p.compute(&[], &g, None), Err(RlvrCoreError::Empty { .. })));
    let o = AdvantageInputs::new(&[1.0, 0.0, 1.0], &g).outcomes(&[true]);
    assert!(matches!(p.compute_inputs(&o), Err(RlvrCoreError::Groups(_))));
    // REINFORCE++ needs no groups of size > 1
    let rpp = cfg(AdvantageParams::new(AdvantageEstimator::reinforce_pp()));
    assert!(rpp.compute(&[1.0, 0.0, 1.0], &g, None).is_ok());
}

#[test]
fn params_validate_by_field_name_and_setters_set() {
    let field = |p: AdvantageParams| match p.check().unwrap_err() {
        RlvrCoreError::InvalidParameter { name, .. } => name,
        e => panic!("{e:?}"),
    };
    assert_eq!(
        field(AdvantageParams::new(AdvantageEstimator::Grpo { eps: 0.0, std: StdKind::Unbiased })),
        "estimator.eps"
    );
    assert_eq!(field(AdvantageParams::new(AdvantageEstimator::ReinforcePlusPlus { eps: -1.0 })), "estimator.eps");
    assert_eq!(field(AdvantageParams::new(AdvantageEstimator::MaxRl { eps: f64::NAN })), "estimator.eps");
    assert_eq!(field(AdvantageParams::new(AdvantageEstimator::BatchStd { eps: 0.0 })), "estimator.eps");
    assert_eq!(field(AdvantageParams::new(AdvantageEstimator::Gpg { f_norm: 0.0 })), "estimator.f_norm");
    assert_eq!(
        field(AdvantageParams::default().effectiveness(EffectivenessRule::RewardStd { tol: -1.0 })),
        "effectiveness.tol"
    );
    let p = AdvantageParams::default()
        .estimator(AdvantageEstimator::Rloo)
        .effectiveness(EffectivenessRule::reward_std())
        .zero_ineffective(false)
        .singleton(SingletonGroups::Zero);
    assert_eq!(
        p,
        AdvantageParams {
            estimator: AdvantageEstimator::Rloo,
            effectiveness: EffectivenessRule::reward_std(),
            zero_ineffective: false,
            singleton: SingletonGroups::Zero
        }
    );
    let names: Vec<_> = [
        AdvantageEstimator::grpo(),
        AdvantageEstimator::DrGrpo,
        AdvantageEstimator::Rloo,
        AdvantageEstimator::reinforce_pp(),
        AdvantageEstimator::reinforce_pp_baseline(),
        AdvantageEstimator::max_rl(),
        AdvantageEstimator::pass_k(),
        AdvantageEstimator::Opo,
        AdvantageEstimator::batch_std(),
        AdvantageEstimator::ReMax,
        AdvantageEstimator::gpg(),
    ]
    .iter()
    .map(|e| (e.name(), e.uses_groups()))
    .collect();
    assert_eq!(names[3], ("reinforce_plus_plus", false));
    assert_eq!(names[9], ("remax", false));
    assert_eq!(names[10], ("gpg", true));
    assert_eq!(names.iter().filter(|(_, g)| *g).count(), 9);
}

#[test]
fn params_roundtrip_through_json_with_every_field_defaulted() {
    let p = AdvantageParams::new(AdvantageEstimator::pass_k())
        .effectiveness(EffectivenessRule::RewardStd { tol: 1e-3 })
        .zero_ineffective(false);
    let s = serde_json::to_string(&p).unwrap();
    let back: AdvantageParams = serde_json::from_str(&s).unwrap();
    assert_eq!(p, back);
    for (json, est) in [
        (r#"{"kind": "grpo"}"#, AdvantageEstimator::grpo()),
        (r#"{"kind": "grpo", "std": "population"}"#, AdvantageEstimator::Grpo { eps: 1e-6, std: StdKind::Population }),
        (r#"{"kind": "reinforce_plus_plus"}"#, AdvantageEstimator::reinforce_pp()),
        (r#"{"kind": "pass_k", "eps": 0.1}"#, AdvantageEstimator::PassK { normalize_by_std: true, eps: 0.1 }),
        (r#"{"kind": "batch_std"}"#, AdvantageEstimator::batch_std()),
        (r#"{"kind": "remax"}"#, AdvantageEstimator::ReMax),
    ] {
        assert_eq!(serde_json::from_str::<AdvantageEstimator>(json).unwrap(), est, "{json}");
    }
    assert!(serde_json::from_str::<AdvantageEstimator>(r#"{"kind": "grpo", "epsilon": 1}"#).is_err());
    let v: AdvantageParams = serde_json::from_str("{}").unwrap();
    assert_eq!(v, AdvantageParams::default());
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
