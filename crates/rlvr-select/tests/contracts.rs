//! The small documented contracts of the selectors and their types (names, accessors, oracles,
//! outcome helpers, `predict` of the model-free selectors), each against values known by hand.
use rl_core::Params;
use rlvr_select::{
    BudgetedOracle, Candidates, Dps, DpsParams, Drm, DrmParams, DynamicSampling, EpochWindow, FilterParams, FnOracle,
    Gdrm, GdrmParams, HistoryResampling, HistoryResamplingParams, ItemId, Mopps, MoppsParams, NoRollouts,
    OnlineDifficultyFilter, Outcome, RolloutOracle, SelectError, Selection, Selector, SolveState, Uniform,
};

type Res = Result<(), SelectError>;

#[test]
fn names_and_model_free_predictions() -> Res {
    let ids = [0u64, 1, 2];
    let model_free: Vec<(Box<dyn Selector>, &str)> = vec![
        (Box::new(Uniform::new()), "uniform"),
        (Box::new(HistoryResampling::new(HistoryResamplingParams::default().check()?)?), "history-resampling"),
        (Box::new(DynamicSampling::new(FilterParams::dynamic_sampling().check()?)?), "dynamic-sampling"),
        (
            Box::new(OnlineDifficultyFilter::new(FilterParams::online_difficulty().check()?)?),
            "online-difficulty-filter",
        ),
        (Box::new(Drm::new(DrmParams::default().check()?)?), "drm"),
        (Box::new(Gdrm::new(GdrmParams::default().check()?)?), "gdrm"),
    ];
    for (s, name) in &model_free {
        assert_eq!(s.name(), *name);
        assert!(s.predict(Candidates::new(&ids))?.is_none(), "{name}");
    }
    assert_eq!(Dps::new(DpsParams::default().check()?, 3)?.name(), "dps");
    assert_eq!(Mopps::new(MoppsParams::default().check()?, 3)?.name(), "mopps");
    Ok(())
}

#[test]
fn dps_and_mopps_accessors() -> Res {
    let mut rng = rl_core::rng_from_seed(1);
    let mut dps = Dps::new(DpsParams::default().decay(0.4).check()?, 5)?;
    assert_eq!((dps.n_items(), dps.steps(), dps.params().decay), (5, 0, 0.4));
    assert_eq!(Dps::bytes_per_prompt(), 57);
    dps.observe(0, &[], &mut rng)?;
    dps.observe(1, &[Outcome::from_successes(3, 2, 4)?], &mut rng)?;
    assert_eq!((dps.steps(), dps.n_tracked(), dps.times_sampled(3)?), (2, 1, 1));
    dps.track_all();
    assert_eq!(dps.n_tracked(), 5);
    // P(α) columns sum to 1
    let p = dps.transition_matrix(3)?;
    let col_sums: Vec<f32> = (0..3).map(|c| p.iter().map(|row| row[c]).sum()).collect();
    assert!(col_sums.iter().all(|s| (s - 1.0).abs() < 1e-6), "{col_sums:?}");
    assert!(matches!(dps.transition_matrix(5), Err(SelectError::UnknownId { id: 5, n_items: 5 })));
    assert!(dps.times_sampled(9).is_err() && dps.alpha(9).is_err() && dps.belief(9).is_err());

    let mut m = Mopps::new(MoppsParams::default().prior(2.0, 3.0).check()?, 4)?;
    assert_eq!((m.n_items(), m.params().prior_alpha, Mopps::bytes_per_prompt()), (4, 2.0, 12));
    // α = w·s + α0, β = w·f + β0
    m.warm_start(1, 3.0, 1.0, 2.0)?;
    assert_eq!(m.posterior(1)?, (8.0, 5.0));
    assert_eq!(m.posterior(0)?, (2.0, 3.0));
    assert!(
        matches!(m.warm_start(1, -1.0, 0.0, 1.0), Err(SelectError::InvalidParameter { ref name, .. }) if name == "successes")
    );
    assert!(
        matches!(m.warm_start(1, 0.0, f32::NAN, 1.0), Err(SelectError::InvalidParameter { ref name, .. }) if name == "failures")
    );
    assert!(
        matches!(m.warm_start(1, 0.0, 0.0, -2.0), Err(SelectError::InvalidParameter { ref name, .. }) if name == "weight")
    );
    assert!(m.warm_start(4, 0.0, 0.0, 1.0).is_err());
    assert_eq!(m.posterior(1)?, (8.0, 5.0));
    m.observe(0, &[Outcome::from_successes(2, 1, 4)?], &mut rng)?;
    assert_eq!((m.times_sampled(2)?, m.times_sampled(0)?), (1, 0));
    // predict: the posterior mean and std of Beta(α, β)
    let p = m.predict(Candidates::new(&[1]))?.ok_or(SelectError::InvalidState("no prediction".into()))?;
    let (a, b) = (8.0f64, 5.0f64);
    assert!((p[0].mean - a / (a + b)).abs() < 1e-12);
    assert!((p[0].std.unwrap_or(0.0) - (a * b / ((a + b) * (a + b) * (a + b + 1.0))).sqrt()).abs() < 1e-12);
    Ok(())
}

#[test]
fn history_resampling_epochs() -> Res {
    let mut rng = rl_core::rng_from_seed(2);
    let mut h = HistoryResampling::new(HistoryResamplingParams::default().epoch_steps(Some(3)).check()?)?;
    h.observe(0, &[Outcome::from_successes(1, 4, 4)?, Outcome::from_successes(2, 2, 4)?], &mut rng)?;
    assert_eq!(h.solved_this_epoch(), 1);
    // within the epoch the solved prompt is excluded while others remain
    for _ in 0..10 {
        let s = h.select(2, Candidates::new(&[0, 1, 2]), 2, &mut NoRollouts, &mut rng)?;
        assert!(!s.ids.contains(&1), "{:?}", s.ids);
    }
    // step 3 starts epoch 1: the set is cleared
    let _ = h.select(3, Candidates::new(&[0, 1, 2]), 2, &mut NoRollouts, &mut rng)?;
    assert_eq!(h.solved_this_epoch(), 0);
    h.observe(3, &[Outcome::from_successes(0, 4, 4)?], &mut rng)?;
    assert_eq!(h.save_state()?["epoch"], 1);
    h.new_epoch();
    assert_eq!(h.solved_this_epoch(), 0);
    assert_eq!(h.save_state()?["epoch"], 2);
    h.new_epoch();
    assert_eq!(h.save_state()?["epoch"], 3);
    // with too few eligible candidates the batch is topped up from the excluded ones
    h.observe(4, &[Outcome::from_successes(0, 4, 4)?, Outcome::from_successes(1, 4, 4)?], &mut rng)?;
    let s = h.select(4, Candidates::new(&[0, 1, 2]), 3, &mut NoRollouts, &mut rng)?;
    assert_eq!(s.ids.len(), 3);
    assert_eq!(s.ids[0], 2);
    Ok(())
}

#[test]
fn oracles_count_and_budget() -> Res {
    let mut rng = rl_core::rng_from_seed(3);
    let mut f = FnOracle::new(|id: ItemId, k: usize, _: &mut dyn rand::RngCore| {
        Ok(vec![if id % 2 == 0 { 1.0 } else { 0.0 }; k])
    });
    let got = f.rollout(&[2, 3], 4, &mut rng)?;
    assert_eq!((got[0].successes(), got[1].successes(), f.rollouts_spent()), (4.0, 0.0, 8));
    let mut b = BudgetedOracle::new(f, 18);
    assert_eq!(b.remaining(), 10);
    // 10 left: two whole groups of 4 fit, the third id is dropped
    let got = b.rollout(&[0, 1, 2], 4, &mut rng)?;
    assert_eq!((got.len(), b.rollouts_spent(), b.remaining()), (2, 16, 2));
    assert!(b.rollout(&[5], 4, &mut rng)?.is_empty());
    let inner = b.into_inner();
    assert_eq!(inner.rollouts_spent(), 16);
    assert!(matches!(NoRollouts.rollout(&[1], 2, &mut rng), Err(SelectError::OracleUnavailable { .. })));
    assert_eq!(NoRollouts.rollouts_spent(), 0);
    Ok(())
}

#[test]
fn outcome_and_candidate_helpers() -> Res {
    // More successes than rollouts is an error naming `successes`, not a silent clamp.
    match Outcome::from_successes(7, 9, 4) {
        Err(SelectError::InvalidParameter { name, .. }) => assert_eq!(name, "successes"),
        other => panic!("expected InvalidParameter, got {other:?}"),
    }
    let o = Outcome::from_successes(7, 4, 4)?;
    assert_eq!((o.k(), o.successes(), o.success_rate(), o.state()), (4, 4.0, 1.0, SolveState::Solved));
    assert!(o.is_degenerate());
    let p = Outcome::new(1, vec![1.0, 0.0, 0.5]);
    assert_eq!((p.state(), p.is_degenerate()), (SolveState::Partial, false));
    assert!((p.success_rate() - 0.5).abs() < 1e-12);
    assert_eq!(Outcome::new(2, vec![0.0, 0.0]).state(), SolveState::Unsolved);
    assert_eq!(Outcome::new(2, vec![]).success_rate(), 0.0);
    for (i, s) in [SolveState::Unsolved, SolveState::Partial, SolveState::Solved].into_iter().enumerate() {
        assert_eq!((s.index(), SolveState::from_index(i)), (i, Some(s)));
    }
    assert_eq!(SolveState::from_index(3), None);

    let ids = [4u64, 5];
    let feats = [0.5f32, 1.0, 1.5, 2.0];
    let c = Candidates::with_features(&ids, &feats, 2)?;
    assert_eq!((c.len(), c.is_empty(), c.feature_dim(), c.ids()), (2, false, 2, &ids[..]));
    assert_eq!((c.features_of(1), c.features_of(2)), (Some(&feats[2..]), None));
    let plain = Candidates::new(&[]);
    assert!(plain.is_empty() && plain.feature_dim() == 0 && plain.features_of(0).is_none());
    assert!(Candidates::with_features(&ids, &feats, 0).is_err());
    assert!(Candidates::with_features(&ids, &feats[..3], 2).is_err());
    assert!(Candidates::with_features(&ids, &[0.0, f32::NAN, 0.0, 0.0], 2).is_err());
    // `ids.len() * dim` overflowing is a typed error, not an overflow panic.
    assert!(matches!(Candidates::with_features(&ids, &feats, usize::MAX), Err(SelectError::Features(_))));

    let s = Selection { ids: vec![4, 5], prefetched: vec![Outcome::from_successes(5, 1, 2)?], ..Selection::default() };
    assert_eq!(s.prefetched_for(5).map(|o| o.id), Some(5));
    assert!(s.prefetched_for(4).is_none());
    Ok(())
}

/// MoPPS's discounted posterior update by hand, and its state's array lengths checked.
#[test]
fn mopps_discounted_update_and_state_lengths() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut m = Mopps::new(MoppsParams::default().prior(2.0, 3.0).decay(0.5).check()?, 2)?;
    m.observe(0, &[Outcome::from_successes(0, 3, 4)?], &mut rng)?;
    let s = m.save_state()?;
    // α = 0.5·2 + 0.5·2 + 3 = 5, β = 0.5·3 + 0.5·3 + (4 − 3) = 4; prompt 1 keeps its prior
    assert_eq!((s["alpha"][0].as_f64(), s["beta"][0].as_f64()), (Some(5.0), Some(4.0)));
    assert_eq!((s["alpha"][1].as_f64(), s["beta"][1].as_f64()), (Some(2.0), Some(3.0)));
    for key in ["alpha", "beta", "n_sampled"] {
        let mut bad = s.clone();
        bad[key] = serde_json::json!([1]);
        assert!(matches!(m.load_state(&bad), Err(SelectError::InvalidState(_))), "{key}");
    }
    assert_eq!(m.save_state()?, s);
    Ok(())
}

/// GDRM's exponentiated-gradient weights by hand, and DRM reports no shortfall when the
/// oracle answers every candidate.
#[test]
fn gdrm_weights_and_drm_shortfall() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let ids: Vec<ItemId> = vec![0, 1];
    let mut g = Gdrm::new(GdrmParams { step_size: 1.0, ..GdrmParams::default() }.check()?)?;
    // first observation with uniform weights: w_i = K·exp(ℓ_i)/Σ exp(ℓ_j), ℓ = [0, ln 3]
    let with_risk = |id, r: f32| Outcome { risk: Some(r), ..Outcome::new(id, vec![0.0]) };
    g.observe(0, &[with_risk(0, 0.0), with_risk(1, 3f32.ln())], &mut rng)?;
    let w = g.select(1, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?.weights.unwrap_or_default();
    assert_eq!(w.len(), 2);
    assert!((w[0] - 0.5).abs() < 1e-6 && (w[1] - 1.5).abs() < 1e-6, "{w:?}");
    let mut drm = Drm::new(DrmParams { group_size: 2, ..DrmParams::default() }.check()?)?;
    let mut f = FnOracle::new(|id: ItemId, k: usize, _: &mut dyn rand::RngCore| Ok(vec![(id % 2) as f32; k]));
    let s = drm.select(0, Candidates::new(&ids), 2, &mut f, &mut rng)?;
    assert_eq!((s.ids.len(), s.shortfall), (2, None));
    Ok(())
}

/// MoPPS's threshold acquisition prefers draws inside `[lo, hi]`: with sharp posteriors at
/// about 0.01, 0.5 and 0.99, the middle prompt is chosen every time.
#[test]
fn mopps_threshold_prefers_the_band() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let acq = rlvr_select::MoppsAcquisition::Threshold { lo: 0.3, hi: 0.7 };
    let mut m = Mopps::new(MoppsParams::default().acquisition(acq).check()?, 3)?;
    for step in 0..10 {
        let o =
            [Outcome::from_successes(0, 0, 8)?, Outcome::from_successes(1, 4, 8)?, Outcome::from_successes(2, 8, 8)?];
        m.observe(step, &o, &mut rng)?;
    }
    let ids: Vec<ItemId> = vec![0, 1, 2];
    for step in 10..30 {
        assert_eq!(m.select(step, Candidates::new(&ids), 1, &mut NoRollouts, &mut rng)?.ids, vec![1]);
    }
    Ok(())
}

/// Absurd sizes are typed errors before anything is allocated or multiplied: a pool too large
/// for the memory budget, a feature table whose `n * dim` overflows, a saved window whose
/// declared pool size contradicts its permutation.
#[test]
fn absurd_sizes_are_typed_errors() -> Res {
    match EpochWindow::new(usize::MAX, 1) {
        Err(SelectError::Core(rl_core::RlCoreError::TooLarge { .. })) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(matches!(
        EpochWindow::new(3, 1)?.with_features(vec![0.0; 3], usize::MAX),
        Err(SelectError::InvalidParameter { .. })
    ));
    let w = EpochWindow::new(3, 1)?.with_features(vec![0.0; 6], 2)?;
    let mut saved = serde_json::to_value(&w)?;
    saved["n"] = serde_json::json!(u64::MAX);
    assert!(serde_json::from_value::<EpochWindow>(saved).is_err());
    Ok(())
}
