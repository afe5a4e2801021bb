//! LPO: the golden table of research/rlvr.md section 8, the paper's invariants (Corollary 1,
//! Proposition 1) and off-policy use with behaviour log-probs.
//! The coefficient tests need no libtorch; the loss tests (feature `tch`) do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::needless_range_loop)]
use proptest::prelude::*;
use rlvr_core::{lpo_coefficients, AdvantageParams, Groups, LpoParams, Projection};
use rlvr_core::{AdvantageConfig, Params};
#[cfg(feature = "tch")]
use rlvr_core::{AdvantageEstimator, Aggregation, GlobalCounts, LossConfig, LossInputs, LossParams, PolicyLoss};
#[cfg(feature = "tch")]
use tch::{Device, Kind, Tensor};

#[cfg(feature = "tch")]
const D: (Kind, Device) = (Kind::Double, Device::Cpu);

#[test]
fn golden_table_on_policy() {
    // R = [1, 0 × 7], on-policy (s_θ = s_t = 0, P_θ = 1/8): w* = softmax(R/τ), c_fwd = 1/K − w*,
    // c_rev = −A/K with A = (R − μ)/τ (zero-mean). Values from research/rlvr.md section 8.
    let g = Groups::uniform(1, 8).unwrap();
    let r = [1.0, 0., 0., 0., 0., 0., 0., 0.];
    let zeros = [0.0; 8];
    let table = [
        (0.330719, 0.746078, 0.036275, -0.621078, 0.088725),
        (0.353553, 0.707344, 0.041808, -0.582344, 0.083192),
        (1.0, 0.279708, 0.102899, -0.154708, 0.022101),
        (0.125, 0.997657, 0.000335, -0.872657, 0.124665),
    ];
    for (tau, w1, wo, c1, co) in table {
        // Dr.GRPO advantages R − μ with the temperature multiplier τ give φ = (R − μ)/τ
        let a: Vec<f64> = r.iter().map(|x| x - 0.125).collect();
        let p = LpoParams::new(Projection::Forward).temperature(tau);
        let c = lpo_coefficients(&zeros, &zeros, &a, &g, &p).unwrap();
        let tol = 2e-6;
        assert!((c.target[0] - w1).abs() < tol && (c.target[1] - wo).abs() < tol, "τ {tau}: {:?}", c.target);
        assert!((c.coef[0] - c1).abs() < tol && (c.coef[5] - co).abs() < tol, "τ {tau}: {:?}", c.coef);
        let rev =
            lpo_coefficients(&zeros, &zeros, &a, &g, &LpoParams::new(Projection::Reverse).temperature(tau)).unwrap();
        for k in 0..8 {
            assert!((rev.coef[k] + a[k] / tau / 8.0).abs() < 1e-12, "c_rev = −A/K");
        }
        let pw =
            lpo_coefficients(&zeros, &zeros, &a, &g, &LpoParams::new(Projection::Pointwise).temperature(tau)).unwrap();
        assert!((pw.coef.iter().sum::<f64>() + 1.0).abs() < 1e-12, "pointwise: Σc = −1");
    }
}

#[test]
fn zero_variance_groups_give_exactly_zero_coefficients_on_policy() {
    let g = Groups::uniform(2, 4).unwrap();
    let rewards = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0];
    let adv =
        AdvantageConfig::new(AdvantageParams::default().check().unwrap()).compute(&rewards, &g, None).unwrap().values;
    let zeros = [0.0; 8];
    for proj in [Projection::Forward, Projection::Reverse] {
        let c = lpo_coefficients(&zeros, &zeros, &adv, &g, &LpoParams::new(proj)).unwrap();
        assert_eq!(&c.coef[..4], &[0.0; 4], "{proj:?}");
        assert!(c.coef[4..].iter().any(|x| *x != 0.0));
    }
}

#[cfg(feature = "tch")]
#[test]
fn reverse_kl_gradient_equals_pg_gradient_on_policy() {
    // Proposition 1: at π_θ = π_b, ∇ L_rev = −g_PG. With the K factor the per-token LPO loss
    // gradient equals the REINFORCE loss gradient −A ∇logp under any aggregation.
    let groups = Groups::uniform(3, 4).unwrap();
    let rewards = [1.0, 0., 0., 1., 0., 0., 0., 1., 0.3, 0.9, 0.1, 0.5];
    let adv = AdvantageConfig::new(AdvantageParams::new(AdvantageEstimator::grpo()).check().unwrap())
        .compute(&rewards, &groups, None)
        .unwrap();
    let adv = Tensor::from_slice(&adv.values); // f64: zero-mean to rounding
    tch::manual_seed(1);
    let old = Tensor::randn([12, 6], D) - 2.0;
    let mask = Tensor::ones([12, 6], D);
    let _ = mask.get(3).narrow(0, 4, 2).fill_(0.0);
    let counts = GlobalCounts::local(&mask).unwrap();
    for agg in [Aggregation::TokenMean, Aggregation::SeqMeanTokenSum, Aggregation::SeqMeanTokenMean] {
        let grad = |loss: PolicyLoss| {
            let x = old.copy().set_requires_grad(true);
            let cfg = LossConfig::new(LossParams::new(loss).aggregation(agg).check().unwrap());
            let out = cfg.loss(&LossInputs::new(&x, &old, &adv, &mask).groups(&groups), &counts).unwrap();
            out.loss.backward();
            x.grad()
        };
        let g_rev = grad(PolicyLoss::Lpo(LpoParams::new(Projection::Reverse)));
        let g_pg = grad(PolicyLoss::Reinforce);
        let d = f64::try_from((&g_rev - &g_pg).abs().max()).unwrap();
        assert!(d < 1e-12, "{}: {d}", agg.name());
        // forward KL differs from PG (it is the projection onto softmax(A), not its linearisation)
        let g_fwd = grad(PolicyLoss::Lpo(LpoParams::new(Projection::Forward)));
        assert!(f64::try_from((&g_fwd - &g_pg).abs().max()).unwrap() > 1e-3);
    }
}

#[cfg(feature = "tch")]
#[test]
fn off_policy_lpo_uses_behaviour_log_probs_in_the_listwise_softmax() {
    // s_θ = Σ m (logp − behave), s_t = Σ m (old − behave); with seq-mean-token-sum and no clip,
    // ∂L/∂logp_kt = K c_k / N_seq on every response token
    let groups = Groups::uniform(2, 3).unwrap();
    tch::manual_seed(3);
    let behave = Tensor::randn([6, 4], D) * 0.3 - 1.0;
    let old = &behave + Tensor::randn([6, 4], D) * 0.05;
    let logp = (&old + Tensor::randn([6, 4], D) * 0.05).set_requires_grad(true);
    let adv = Tensor::from_slice(&[1.0f64, -0.5, -0.5, 0.2, 0.3, -0.5]);
    let mask = Tensor::ones([6, 4], D);
    let counts = GlobalCounts::local(&mask).unwrap();
    for proj in [Projection::Forward, Projection::Reverse] {
        let p = LpoParams::new(proj).clip_eps(None);
        let cfg = LossConfig::new(
            LossParams::new(PolicyLoss::Lpo(p)).aggregation(Aggregation::SeqMeanTokenSum).check().unwrap(),
        );
        let x = logp.detach().copy().set_requires_grad(true);
        let out =
            cfg.loss(&LossInputs::new(&x, &old, &adv, &mask).groups(&groups).behaviour(&behave), &counts).unwrap();
        out.loss.backward();
        let rs = |t: Tensor| Vec::<f64>::try_from(t.sum_dim_intlist(1, false, Kind::Double)).unwrap();
        let s_theta = rs(logp.detach() - &behave);
        let s_t = rs(&old - &behave);
        let a = Vec::<f64>::try_from(&adv).unwrap();
        let c = lpo_coefficients(&s_theta, &s_t, &a, &groups, &p).unwrap();
        let g = x.grad();
        for k in 0..6 {
            let want = 3.0 * c.coef[k] / 6.0;
            let got = f64::try_from(g.get(k as i64).get(2)).unwrap();
            assert!((got - want).abs() < 1e-12, "{proj:?} seq {k}: {got} vs {want}");
        }
        let m = out.metrics;
        assert!(m.lpo_coef_l1.unwrap() > 0.0 && m.lpo_target_entropy.unwrap() > 0.0);
        assert!(m.lpo_listwise_entropy.unwrap() <= 3f64.ln() + 1e-12);
    }
}

#[cfg(feature = "tch")]
#[test]
fn token_clip_removes_the_gradient_outside_the_band() {
    // δ = ln 1.5 > ln 1.2 for token 0: no gradient there; δ = 0 for the rest
    let groups = Groups::uniform(1, 2).unwrap();
    let old = Tensor::zeros([2, 2], D);
    let logp = Tensor::from_slice(&[1.5f64.ln(), 0.0, 0.0, 0.0]).view([2, 2]).set_requires_grad(true);
    let adv = Tensor::from_slice(&[1.0f64, -1.0]);
    let mask = Tensor::ones([2, 2], D);
    let cfg = LossConfig::new(LossParams::new(PolicyLoss::Lpo(LpoParams::default())).check().unwrap());
    let out = cfg
        .loss(&LossInputs::new(&logp, &old, &adv, &mask).groups(&groups), &GlobalCounts::local(&mask).unwrap())
        .unwrap();
    out.loss.backward();
    let g = Vec::<f64>::try_from(logp.grad().flatten(0, -1)).unwrap();
    assert_eq!(g[0], 0.0);
    assert!(g[1] != 0.0 && g[2] != 0.0);
    assert_eq!(out.metrics.clipfrac, Some(0.25));
}

#[test]
fn coefficients_are_finite_difference_gradients_of_the_divergences() {
    // c_fwd = ∂/∂s D_KL(w*‖softmax(s)), c_rev = ∂/∂s D_KL(softmax(s)‖w*) (Eq. 10, 11, 14–17)
    let g = Groups::uniform(1, 5).unwrap();
    let s = [0.3, -1.2, 0.8, 0.0, -0.4];
    let st = [0.1, -0.2, 0.05, 0.0, 0.3];
    let a = [1.5, -0.5, 0.2, -0.9, -0.3];
    let softmax = |x: &[f64]| {
        let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = x.iter().map(|v| (v - m).exp()).sum();
        x.iter().map(|v| (v - m).exp() / z).collect::<Vec<_>>()
    };
    let phi: Vec<f64> = a.iter().zip(&st).map(|(a, s)| a + s).collect();
    let w = softmax(&phi);
    let kl = |p: &[f64], q: &[f64]| p.iter().zip(q).map(|(p, q)| p * (p / q).ln()).sum::<f64>();
    let fwd = |x: &[f64]| kl(&w, &softmax(x));
    let rev = |x: &[f64]| kl(&softmax(x), &w);
    let h = 1e-6;
    for (proj, div) in [(Projection::Forward, &fwd as &dyn Fn(&[f64]) -> f64), (Projection::Reverse, &rev)] {
        let c = lpo_coefficients(&s, &st, &a, &g, &LpoParams::new(proj)).unwrap();
        for k in 0..5 {
            let (mut up, mut dn) = (s, s);
            up[k] += h;
            dn[k] -= h;
            let fd = (div(&up) - div(&dn)) / (2.0 * h);
            assert!((fd - c.coef[k]).abs() < 1e-8, "{proj:?} k {k}: {} vs fd {fd}", c.coef[k]);
        }
    }
}

proptest! {
    #[test]
    fn coefficients_are_zero_sum_and_bounded(
        s in proptest::collection::vec(-5.0f64..5.0, 8),
        st in proptest::collection::vec(-2.0f64..2.0, 8),
        a in proptest::collection::vec(-3.0f64..3.0, 8),
        tau in 0.05f64..5.0,
    ) {
        let g = Groups::uniform(2, 4).unwrap();
        for proj in [Projection::Forward, Projection::Reverse] {
            let c = lpo_coefficients(&s, &st, &a, &g, &LpoParams::new(proj).temperature(tau)).unwrap();
            for m in g.iter() {
                let sum: f64 = m.iter().map(|&i| c.coef[i]).sum();
                prop_assert!(sum.abs() < 1e-12, "{:?}: Σc = {}", proj, sum);
                let ws: f64 = m.iter().map(|&i| c.target[i]).sum();
                prop_assert!((ws - 1.0).abs() < 1e-12);
            }
            if proj == Projection::Forward {
                prop_assert!(c.coef.iter().all(|x| x.abs() <= 1.0));
                prop_assert!(g.iter().all(|m| m.iter().map(|&i| c.coef[i].abs()).sum::<f64>() <= 2.0 + 1e-12));
            }
        }
    }

    #[test]
    fn on_policy_reverse_is_minus_centred_advantage_over_k(a in proptest::collection::vec(-3.0f64..3.0, 5)) {
        let g = Groups::uniform(1, 5).unwrap();
        let z = [0.0; 5];
        let c = lpo_coefficients(&z, &z, &a, &g, &LpoParams::new(Projection::Reverse)).unwrap();
        let mean = a.iter().sum::<f64>() / 5.0;
        for k in 0..5 {
            prop_assert!((c.coef[k] + (a[k] - mean) / 5.0).abs() < 1e-12);
        }
    }
}
