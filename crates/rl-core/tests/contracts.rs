//! The documented contracts of rl-core's small pieces, each against values computed
//! independently (by hand, from published constants, or by a separate reference in the
//! comment), so a changed constant, comparison or branch is caught.
use ndarray::{array, Array1, Array2};
use rl_core::params::{Params, Valid};
use rl_core::seed::{derive_seed, derive_seed_named, splitmix64, torch_seed};
use rl_core::space::{Space, SpaceKind};
use rl_core::stats::{cvar_lower, cvar_upper, mean, pearson, quantile, ranks, spearman, std_dev, variance};
use rl_core::{EpisodeStats, EpisodeSummary, Metrics, RlCoreError, Transitions};

#[test]
fn seeds_match_the_published_splitmix64_and_fnv1a() {
    // SplitMix64's first output for state 0 (Steele et al.; Vigna's reference code).
    assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
    assert_eq!(splitmix64(1), 0x910a_2dec_8902_5cc1);
    // derive_seed(s, k) = splitmix64(s ^ splitmix64(k + 0xD1B54A32D192ED03)), FNV-1a for names;
    // values from an independent Python transcription.
    assert_eq!(derive_seed(7, 0), 0xd914_5ab4_62ff_7114);
    assert_eq!(derive_seed(7, 1), 0x11fd_a5ed_f10d_a667);
    assert_eq!(derive_seed_named(7, "env"), 0x9d27_abe7_b160_0fab);
    assert_eq!(torch_seed(u64::MAX), i64::MAX);
    assert_eq!(torch_seed(5), 5);
    assert_eq!(torch_seed(1 << 63), 0);
}

fn batch() -> Transitions {
    let mut t = Transitions::empty(3, 2);
    for i in 0..3 {
        let x = i as f32;
        t.push(
            array![x, x + 0.5, -x].view(),
            array![0.25 * x, -1.0].view(),
            x - 1.0,
            array![x + 1.0, x, 0.0].view(),
            i == 2,
            i == 0,
        )
        .unwrap();
    }
    t
}

#[test]
fn transitions_accessors_and_columns() {
    let t = batch();
    assert_eq!((t.len(), t.obs_dim(), t.act_dim(), t.is_empty()), (3, 3, 2, false));
    assert_eq!(t.reward(), &array![-1.0, 0.0, 1.0]);
    assert_eq!(t.action().row(1), array![0.25, -1.0]);
    assert_eq!(t.obs().row(2), array![2.0, 2.5, -2.0]);
    assert_eq!(t.next_obs().row(0), array![1.0, 0.0, 0.0]);
    assert_eq!(t.terminal(), &array![0.0, 0.0, 1.0]);
    assert_eq!(t.timeout(), &array![1.0, 0.0, 0.0]);
    assert!(Transitions::empty(3, 2).is_empty());
    // returns-to-go restart after a timeout or terminal flag: r = (-1, 0, 1), γ = 0.5
    assert_eq!(t.returns_to_go(0.5), array![-1.0, 0.5, 1.0]);
    let c = t.clone().into_columns();
    assert_eq!((c.obs.nrows(), c.timeout.len()), (3, 3));
    // every column is checked, and named
    let cols = |f: &dyn Fn(&mut rl_core::TransitionColumns)| {
        let mut c = t.clone().into_columns();
        f(&mut c);
        Transitions::from_columns(c.obs, c.action, c.reward, c.next_obs, c.terminal, c.timeout)
    };
    let named = |r: Result<Transitions, RlCoreError>, what: &str| match r {
        Err(RlCoreError::ShapeMismatch { what: w, .. }) | Err(RlCoreError::NonFinite { what: w, .. }) => {
            assert_eq!(w, what)
        }
        Err(RlCoreError::InvalidParameter { name, .. }) => assert!(name.starts_with(what), "{name}"),
        other => panic!("{what}: {other:?}"),
    };
    named(cols(&|c| c.next_obs = Array2::zeros((3, 2))), "next_obs");
    named(cols(&|c| c.next_obs = Array2::zeros((2, 3))), "next_obs");
    named(cols(&|c| c.terminal = Array1::zeros(2)), "terminal");
    named(cols(&|c| c.timeout = Array1::zeros(4)), "timeout");
    named(cols(&|c| c.obs = Array2::zeros((2, 3))), "obs");
    named(cols(&|c| c.obs[[1, 1]] = f32::NAN), "obs");
    named(cols(&|c| c.action[[0, 1]] = f32::INFINITY), "action");
    named(cols(&|c| c.reward[2] = f32::NAN), "reward");
    named(cols(&|c| c.next_obs[[2, 0]] = f32::NEG_INFINITY), "next_obs");
    named(cols(&|c| c.timeout[1] = 2.0), "timeout");
    named(cols(&|c| c.terminal[0] = -1.0), "terminal");
    let mut tt = t.clone();
    assert!(tt
        .push(array![0.0, 0.0, 0.0].view(), array![0.0].view(), 0.0, array![0.0, 0.0, 0.0].view(), false, false)
        .is_err());
    assert!(tt
        .push(array![0.0, 0.0, 0.0].view(), array![0.0, 0.0].view(), 0.0, array![0.0, 0.0].view(), false, false)
        .is_err());
    assert!(tt
        .push(
            array![0.0, f32::NAN, 0.0].view(),
            array![0.0, 0.0].view(),
            0.0,
            array![0.0, 0.0, 0.0].view(),
            false,
            false
        )
        .is_err());
    assert!(tt
        .push(
            array![0.0, 0.0, 0.0].view(),
            array![f32::NAN, 0.0].view(),
            0.0,
            array![0.0, 0.0, 0.0].view(),
            false,
            false
        )
        .is_err());
    assert!(tt
        .push(
            array![0.0, 0.0, 0.0].view(),
            array![0.0, 0.0].view(),
            0.0,
            array![0.0, f32::INFINITY, 0.0].view(),
            false,
            false
        )
        .is_err());
    assert_eq!(tt, t);
    assert!(matches!(t.gather(&[3]), Err(RlCoreError::IndexOutOfRange { index: 3, len: 3, .. })));
    assert_eq!(t.gather(&[2, 2]).unwrap().reward(), &array![1.0, 1.0]);
}

#[test]
fn spaces_contain_clip_and_check() {
    let d = Space::discrete(3).unwrap();
    assert!(d.contains(array![0.0].view()) && d.contains(array![2.0].view()));
    for bad in [array![3.0], array![-1.0], array![1.5], array![f32::NAN]] {
        assert!(!d.contains(bad.view()), "{bad}");
    }
    assert!(Space::discrete(1).is_ok());
    let one = Space::discrete(1).unwrap();
    assert_eq!(one.clip(array![5.0].view()), array![0.0]);
    assert_eq!(d.clip(array![1.4].view()), array![1.0]);
    let mut rng = rl_core::rng_from_seed(2);
    let draws: Vec<f32> = (0..300).map(|_| d.sample(&mut rng)[0]).collect();
    for v in [0.0, 1.0, 2.0] {
        assert!(draws.contains(&v), "{v} never drawn");
    }
    let b = Space::boxed(array![-1.0, 0.0], array![1.0, 0.0]).unwrap();
    assert_eq!(b.kind(), SpaceKind::Box { low: &array![-1.0, 0.0], high: &array![1.0, 0.0] });
    assert!(b.contains(array![-1.0, 0.0].view()) && b.contains(array![1.0, 0.0].view()));
    assert!(!b.contains(array![1.01, 0.0].view()) && !b.contains(array![0.0, -0.01].view()));
    assert!(!b.contains(array![0.0].view()) && !b.contains(array![f32::NAN, 0.0].view()));
    assert_eq!(b.clip(array![-3.0, 2.0].view()), array![-1.0, 0.0]);
    assert!(matches!(b.check("a", array![2.0, 0.0].view()), Err(RlCoreError::OutOfSpace(_))));
    assert!(b.check("a", array![0.5, 0.0].view()).is_ok());
    // a degenerate interval samples its point
    assert_eq!(b.sample(&mut rng)[1], 0.0);
    // the interval is sampled over its whole width, not a sub-range
    let wide = Space::boxed(array![10.0], array![20.0]).unwrap();
    let xs: Vec<f32> = (0..500).map(|_| wide.sample(&mut rng)[0]).collect();
    assert!(xs.iter().any(|&x| x < 11.0) && xs.iter().any(|&x| x > 19.0));
    assert!(
        matches!(Space::boxed(array![0.0, 1.0], array![1.0, 0.5]), Err(RlCoreError::InvalidParameter { ref name, .. }) if name == "bounds[1]")
    );
    assert!(Space::boxed(array![0.0], array![f32::NAN]).is_err());
    assert_eq!(Space::symmetric(2, 3.0).unwrap().bounds().unwrap().0, &array![-3.0, -3.0]);
}

#[test]
fn statistics_against_hand_values() {
    assert_eq!(mean(&[]), 0.0);
    assert_eq!(mean(&[1.0, 2.0, 6.0]), 3.0);
    assert_eq!(variance(&[1.0, 2.0, 6.0], 0), 14.0 / 3.0);
    assert_eq!(variance(&[1.0, 2.0, 6.0], 1), 7.0);
    assert_eq!(variance(&[4.0], 1), 0.0);
    assert_eq!(variance(&[4.0, 4.0], 2), 0.0);
    assert_eq!(std_dev(&[1.0, 3.0], 0), 1.0);
    assert_eq!(quantile(&[5.0], 0.3).unwrap(), 5.0);
    assert!((quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.1).unwrap() - 1.4).abs() < 1e-12);
    assert!(quantile(&[1.0], -0.1).is_err());
    // CVaR tails: (1 − 0.9)·10 = 1 value (not 2, despite rounding), (1 − 0.75)·10 = 2.5 → 3
    let x: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(cvar_upper(&x, 0.9).unwrap(), 10.0);
    assert_eq!(cvar_upper(&x, 0.75).unwrap(), 9.0);
    assert_eq!(cvar_lower(&x, 0.75).unwrap(), 2.0);
    assert_eq!(cvar_lower(&x, 1.0).unwrap(), 1.0);
    assert_eq!(cvar_upper(&x, 1.0).unwrap(), 10.0);
    assert!(cvar_lower(&[], 0.5).is_err() && cvar_lower(&x, 1.5).is_err());
    // two points are perfectly (anti-)correlated
    assert!((pearson(&[1.0, 2.0], &[3.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
    assert_eq!(pearson(&[1.0], &[1.0]), None);
    assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
    assert_eq!(pearson(&[1.0, 1.0], &[1.0, 2.0]), None);
    // Pearson of (1, 2, 3) and (1, 2, 4): Σxy = 3 (centred), Σxx = 2, Σyy = 14/3
    assert!((pearson(&[1.0, 2.0, 3.0], &[1.0, 2.0, 4.0]).unwrap() - 3.0 / (2.0f64 * 14.0 / 3.0).sqrt()).abs() < 1e-12);
    assert_eq!(ranks(&[10.0, 30.0, 20.0, 20.0]), vec![1.0, 4.0, 2.5, 2.5]);
    assert_eq!(spearman(&[1.0, 2.0], &[1.0]), None);
    assert!((spearman(&[1.0, 2.0, 3.0], &[9.0, 4.0, 1.0]).unwrap() + 1.0).abs() < 1e-12);
}

#[test]
fn running_mean_std_updates_like_chan_et_al() {
    // one row into the prior (mean 0, var 1, count 1e-4): exact pooled moments
    let mut r = rl_core::stats::RunningMeanStd::new(1);
    r.update(&[[2.0]]).unwrap();
    let c0 = 1e-4;
    let tot = c0 + 1.0;
    assert!((r.mean()[0] - 2.0 / tot).abs() < 1e-15);
    assert!((r.var()[0] - (c0 + 4.0 * c0 / tot) / tot).abs() < 1e-15);
    assert_eq!(r.count(), tot);
    r.update::<[f64; 1]>(&[]).unwrap();
    assert_eq!(r.count(), tot);
    let n = r.normalize(&[2.0], 1e-8);
    assert!((n[0] - (2.0 - r.mean()[0]) / (r.var()[0] + 1e-8).sqrt()).abs() < 1e-12);
}

#[test]
fn random_policy_samples_its_space() {
    use rl_core::{ActMode, Policy, RandomPolicy};
    let policy = RandomPolicy::new(Space::symmetric(2, 1.0).unwrap());
    let mut rng = rl_core::rng_from_seed(4);
    let acts: Vec<Array1<f32>> =
        (0..20).map(|_| policy.act(array![0.0].view(), ActMode::Deterministic, &mut rng).unwrap()).collect();
    assert!(acts.iter().all(|a| a.len() == 2 && a.iter().all(|v| (-1.0..=1.0).contains(v))));
    assert!(acts.windows(2).any(|w| w[0] != w[1]));
    assert!(acts.iter().any(|a| a[0] < -0.5) && acts.iter().any(|a| a[0] > 0.5));
}

#[test]
fn episodes_metrics_and_params() {
    let mut e = EpisodeStats::default();
    e.record(1.5);
    e.record(-0.5);
    assert_eq!((e.ret, e.length), (1.0, 2));
    let s = EpisodeSummary::from_episodes(&[e, EpisodeStats { ret: 3.0, length: 4, terminated: true }]);
    assert_eq!((s.min_return, s.max_return, s.mean_length), (1.0, 3.0, 3.0));
    assert_eq!(EpisodeSummary::normalized_score(30.0, 10.0, 50.0), 50.0);
    let m = Metrics::new().with("a", 1.0).with("b", 2.0);
    assert_eq!((m.len(), m.get("a"), m.get("c"), m.is_empty()), (2, Some(1.0), None, false));
    assert!(Metrics::new().is_empty());
    assert_eq!(m.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["a", "b"]);

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct P {
        n: u32,
    }
    impl Params for P {
        type Error = RlCoreError;
        fn validate(&self) -> Result<(), RlCoreError> {
            if self.n == 0 {
                return Err(RlCoreError::invalid("n", self.n, "must be >= 1"));
            }
            Ok(())
        }
    }
    let v: Valid<P> = P { n: 3 }.check_ref().unwrap();
    assert_eq!((v.get().n, v.as_ref().n, v.n), (3, 3, 3));
    assert!(P { n: 0 }.check_ref().is_err());
    assert_eq!(v.clone().into_inner(), P { n: 3 });
    assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"n":3}"#);
    assert!(rl_core::check_finite("r", &[0.0, f32::NEG_INFINITY]).is_err());
}
