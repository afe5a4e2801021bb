//! Cross-selector tests: resume equivalence, selection validity (proptest), rollout-based
//! selectors' accounting and shortfalls, Thompson sampling against statrs, simulator runs.

use proptest::prelude::*;
use rl_core::Params;
use rlvr_select::sim::{run, PromptPoolSim, RunConfig, SimParams};
use rlvr_select::{
    BudgetedOracle, CandidateSource, Candidates, Dps, DpsParams, DynamicSampling, EpochWindow, FilterParams, Gdrm,
    GdrmParams, HistoryResampling, HistoryResamplingParams, Mopps, MoppsAcquisition, MoppsParams, NoRollouts,
    OnlineDifficultyFilter, Outcome, RolloutOracle, SelectError, Selector, Shortfall, Uniform,
};

fn all_selectors(n: usize) -> anyhow::Result<Vec<Box<dyn Selector>>> {
    Ok(vec![
        Box::new(Uniform::new()),
        Box::new(HistoryResampling::new(HistoryResamplingParams { epoch_steps: Some(5) }.check()?)?),
        Box::new(DynamicSampling::new(
            FilterParams { max_gen_batches: 3, ..FilterParams::dynamic_sampling() }.check()?,
        )?),
        Box::new(OnlineDifficultyFilter::new(
            FilterParams { max_gen_batches: 3, ..FilterParams::online_difficulty() }.check()?,
        )?),
        Box::new(Mopps::new(MoppsParams::default().decay(0.5).check()?, n)?),
        Box::new(Mopps::new(
            MoppsParams::default().acquisition(MoppsAcquisition::Threshold { lo: 0.3, hi: 0.7 }).check()?,
            n,
        )?),
        Box::new(Dps::new(DpsParams::default().check()?, n)?),
        Box::new(Dps::new(DpsParams::default().entropy_weight(0.1).check()?, n)?),
        Box::new(Gdrm::new(GdrmParams::default().check()?)?),
    ])
}

/// Drives `sel` for `steps` steps, returning the selections.
fn drive(
    sel: &mut dyn Selector,
    sim: &mut PromptPoolSim,
    src: &mut EpochWindow,
    rng: &mut rl_core::SeededRng,
    steps: std::ops::Range<u64>,
) -> anyhow::Result<Vec<Vec<u64>>> {
    let mut out = Vec::new();
    for step in steps {
        let c = src.next_candidates(16, rng)?;
        let s = sel.select(step, c, 16, sim, rng)?;
        let missing: Vec<u64> = s.ids.iter().copied().filter(|&id| s.prefetched_for(id).is_none()).collect();
        let mut outcomes = s.prefetched.clone();
        outcomes.extend(sim.rollout_for_training(&missing, rng)?);
        sim.train(&outcomes, rng)?;
        sel.observe(step, &outcomes, rng)?;
        if step % 4 == 3 {
            sel.observe(step, &[], rng)?; // an extra propagation tick is legal
        }
        out.push(s.ids);
    }
    Ok(out)
}

#[test]
fn resume_equivalence_for_every_selector() -> anyhow::Result<()> {
    let n = 300;
    for (a, b) in all_selectors(n)?.into_iter().zip(all_selectors(n)?) {
        let (mut original, mut restored) = (a, b);
        let mut sim = PromptPoolSim::new(SimParams { n_prompts: n, ..SimParams::default() }.check()?, 3)?;
        let mut src = EpochWindow::new(n, 4)?;
        let mut rng = rl_core::rng_from_seed(11);
        drive(original.as_mut(), &mut sim, &mut src, &mut rng, 0..7)?;
        // Checkpoint: selector state + everything else of the run.
        let state = original.save_state()?;
        let (mut sim2, mut src2, mut rng2) = (sim.clone(), src.clone(), rng.clone());
        let json = serde_json::to_string(&state)?;
        restored.load_state(&serde_json::from_str(&json)?)?;
        let cont = drive(original.as_mut(), &mut sim, &mut src, &mut rng, 7..15)?;
        let resumed = drive(restored.as_mut(), &mut sim2, &mut src2, &mut rng2, 7..15)?;
        assert_eq!(cont, resumed, "{}", original.name());
        assert_eq!(original.save_state()?, restored.save_state()?, "{}", original.name());
    }
    Ok(())
}

#[test]
fn bad_input_leaves_every_selector_untouched() -> anyhow::Result<()> {
    let n = 50;
    let mut rng = rl_core::rng_from_seed(2);
    let mut sim = PromptPoolSim::new(SimParams { n_prompts: n, ..SimParams::default() }.check()?, 2)?;
    for mut sel in all_selectors(n)? {
        let ids: Vec<u64> = (0..20).collect();
        let s = sel.select(0, Candidates::new(&ids), 4, &mut sim, &mut rng)?;
        let o = sim.rollout_for_training(&s.ids, &mut rng)?;
        sel.observe(0, &o, &mut rng)?;
        let before = sel.save_state()?;
        let dup = [1u64, 2, 2, 3];
        assert!(matches!(
            sel.select(1, Candidates::new(&dup), 2, &mut sim, &mut rng),
            Err(SelectError::DuplicateId { .. })
        ));
        assert!(matches!(
            sel.select(1, Candidates::new(&ids[..3]), 4, &mut sim, &mut rng),
            Err(SelectError::BatchTooLarge { .. })
        ));
        for bad in [
            vec![Outcome::from_successes(1, 3, 8)?, Outcome::new(2, vec![f32::NAN; 8])],
            vec![Outcome::from_successes(1, 3, 8)?, Outcome::from_successes(2, 3, 6)?],
            vec![Outcome::from_successes(1, 3, 8)?, Outcome::from_successes(1, 3, 8)?],
        ] {
            assert!(sel.observe(1, &bad, &mut rng).is_err(), "{}", sel.name());
        }
        assert_eq!(sel.save_state()?, before, "{}", sel.name());
        assert!(sel.load_state(&serde_json::json!({"nonsense": 1})).is_err());
        assert_eq!(sel.save_state()?, before, "{}", sel.name());
    }
    // Unknown ids for the selectors with per-prompt state.
    for mut sel in [
        Box::new(Dps::new(DpsParams::default().check()?, n)?) as Box<dyn Selector>,
        Box::new(Mopps::new(MoppsParams::default().check()?, n)?),
    ] {
        let before = sel.save_state()?;
        assert!(matches!(
            sel.observe(0, &[Outcome::from_successes(99, 1, 8)?], &mut rng),
            Err(SelectError::UnknownId { id: 99, .. })
        ));
        assert_eq!(sel.save_state()?, before);
    }
    Ok(())
}

#[test]
fn dynamic_sampling_accounts_rollouts_and_reports_its_cap() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(4);
    let mut sim = PromptPoolSim::new(SimParams { n_prompts: 400, ..SimParams::default() }.check()?, 4)?;
    let ids: Vec<u64> = (0..400).collect();
    let mut ds =
        DynamicSampling::new(FilterParams { max_gen_batches: 2, ..FilterParams::dynamic_sampling() }.check()?)?;
    let before = sim.rollouts_spent();
    let s = ds.select(0, Candidates::new(&ids), 100, &mut sim, &mut rng)?;
    assert_eq!(s.selection_rollouts, sim.rollouts_spent() - before);
    assert!(s.prefetched.iter().all(|o| !o.is_degenerate()));
    assert_eq!(s.ids.len(), s.prefetched.len());
    if s.ids.len() < 100 {
        assert_eq!(s.shortfall, Some(Shortfall::GenerationCap { batches: 2 }));
        assert_eq!(s.selection_rollouts, 2 * 100 * 8);
    }
    // A dry oracle: returns what it has, says so.
    let mut dry = BudgetedOracle::new(sim.clone(), sim.rollouts_spent() + 8 * 30);
    let s = ds.select(1, Candidates::new(&ids), 100, &mut dry, &mut rng)?;
    assert!(s.ids.len() <= 30);
    assert_eq!(s.shortfall, Some(Shortfall::OracleDry));
    assert_eq!(s.selection_rollouts, 240);
    // Predictive selectors never touch the oracle; rollout-based ones need one.
    assert!(matches!(
        ds.select(2, Candidates::new(&ids), 10, &mut NoRollouts, &mut rng),
        Err(SelectError::OracleUnavailable { selector: "dynamic-sampling" })
    ));
    let mut odf = OnlineDifficultyFilter::new(FilterParams::online_difficulty().check()?)?;
    let s = odf.select(0, Candidates::new(&ids), 20, &mut sim, &mut rng)?;
    assert!(s.prefetched.iter().all(|o| (0.25..=0.75).contains(&o.success_rate())));
    Ok(())
}

#[test]
fn thompson_draws_follow_the_beta_posterior_ks_test() -> anyhow::Result<()> {
    use statrs::distribution::{Beta, ContinuousCDF};
    let mut rng = rl_core::rng_from_seed(9);
    for &(succ, fail) in &[(2usize, 6usize), (7, 1), (0, 0)] {
        let mut m = Mopps::new(MoppsParams::default().check()?, 1)?;
        if succ + fail > 0 {
            m.observe(0, &[Outcome::from_successes(0, succ, succ + fail)?], &mut rng)?;
        }
        let (a, b) = m.posterior(0)?;
        let ids = [0u64];
        let mut draws: Vec<f64> = (0..3000)
            .map(|t| m.select(t, Candidates::new(&ids), 1, &mut NoRollouts, &mut rng).map(|s| s.scores[0]))
            .collect::<Result<_, _>>()?;
        draws.sort_by(f64::total_cmp);
        let beta = Beta::new(f64::from(a), f64::from(b))?;
        let n = draws.len() as f64;
        let d = draws
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = beta.cdf(x);
                (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
            })
            .fold(0.0, f64::max);
        // Kolmogorov critical value at level 0.001: 1.95 / sqrt(n).
        assert!(d < 1.95 / n.sqrt(), "Beta({a}, {b}): KS D = {d}");
    }
    Ok(())
}

#[test]
fn simulator_run_reproduces_the_papers_ordering() -> anyhow::Result<()> {
    let cfg = RunConfig { batch_size: 32, steps: 150, target_success: 0.9, stop_at_target: false };
    let params = SimParams { n_prompts: 1000, ..SimParams::default() };
    let mut esr = Vec::new();
    for mut sel in [
        Box::new(Uniform::new()) as Box<dyn Selector>,
        Box::new(Dps::new(DpsParams::default().check()?, 1000)?),
        Box::new(Mopps::new(MoppsParams::default().check()?, 1000)?),
    ] {
        let mut sim = PromptPoolSim::new(params.check()?, 1)?;
        let mut src = EpochWindow::new(1000, 8)?;
        let mut rng = rl_core::rng_from_seed(1);
        let r = run(sel.as_mut(), &mut sim, &mut src, &cfg, &mut rng)?;
        assert_eq!(r.records.len(), 150);
        assert_eq!(r.diagnostics.selection_rollouts, 0);
        assert_eq!(r.diagnostics.training_rollouts, 150 * 32 * 8);
        esr.push(r.diagnostics.esr);
    }
    assert!(esr[1] > esr[0] + 0.1 && esr[2] > esr[0] + 0.1, "ESR uniform/DPS/MoPPS = {esr:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn selections_are_valid(n in 5usize..120, frac in 0.05f64..1.0, bfrac in 0.01f64..1.0, seed in 0u64..1000, which in 0usize..8) {
        let mut rng = rl_core::rng_from_seed(seed);
        let mut sim = PromptPoolSim::new(SimParams { n_prompts: n, ..SimParams::default() }.check()?, seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let c = ((n as f64 * frac) as usize).max(1);
        let b = ((c as f64 * bfrac) as usize).clamp(1, c);
        let mut src = EpochWindow::new(n, 1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut sel = all_selectors(n).map_err(|e| TestCaseError::fail(e.to_string()))?.swap_remove(which);
        let budget = sim.rollouts_spent() + (seed % 7) * 8 * b as u64; // sometimes runs dry
        let mut oracle = BudgetedOracle::new(sim.clone(), budget);
        for step in 0..3 {
            let cands = src.next_candidates(c, &mut rng).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let ids = cands.ids().to_vec();
            let s = sel.select(step, cands, b, &mut oracle, &mut rng).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(s.ids.iter().all(|id| ids.contains(id)));
            let mut u = s.ids.clone();
            u.sort_unstable();
            u.dedup();
            prop_assert_eq!(u.len(), s.ids.len());
            prop_assert_eq!(s.scores.len(), s.ids.len());
            if s.shortfall.is_none() {
                prop_assert_eq!(s.ids.len(), b);
            } else {
                prop_assert!(s.ids.len() < b);
            }
            let missing: Vec<u64> = s.ids.iter().copied().filter(|&id| s.prefetched_for(id).is_none()).collect();
            let mut outcomes = s.prefetched.clone();
            outcomes.extend(sim.rollout_for_training(&missing, &mut rng).map_err(|e| TestCaseError::fail(e.to_string()))?);
            sel.observe(step, &outcomes, &mut rng).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}

/// An oracle whose prompt `id` always succeeds `id mod (k + 1)` times of `k`.
struct Fixed {
    spent: u64,
}

impl RolloutOracle for Fixed {
    fn rollout(&mut self, ids: &[u64], k: usize, _rng: &mut dyn rand::RngCore) -> rlvr_select::Result<Vec<Outcome>> {
        self.spent += (ids.len() * k) as u64;
        ids.iter().map(|&id| Outcome::from_successes(id, id as usize % (k + 1), k)).collect()
    }

    fn rollouts_spent(&self) -> u64 {
        self.spent
    }
}

/// The filters' bands, open and closed, on known success rates (k = 4: ids 0..5 have
/// p = 0, 1/4, 1/2, 3/4, 1), and the generation cap counted exactly.
#[test]
fn filter_bands_and_generation_cap_on_known_rates() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let ids: Vec<u64> = (0..5).collect();
    let kept = |p: FilterParams, rng: &mut rl_core::seed::SeededRng| -> anyhow::Result<Vec<u64>> {
        let mut f = OnlineDifficultyFilter::new(p.check()?)?;
        let mut ids_kept = f.select(0, Candidates::new(&ids), 5, &mut Fixed { spent: 0 }, rng)?.ids;
        ids_kept.sort_unstable();
        Ok(ids_kept)
    };
    let base = FilterParams { group_size: 4, gen_batch: Some(5), max_gen_batches: 1, ..FilterParams::default() };
    assert_eq!(kept(base.band(0.0, 0.5, true), &mut rng)?, vec![1]);
    assert_eq!(kept(base.band(0.1, 0.9, true), &mut rng)?, vec![1, 2, 3]);
    assert_eq!(kept(base.band(0.0, 1.0, true), &mut rng)?, vec![1, 2, 3]);
    assert_eq!(kept(base.band(0.25, 0.75, false), &mut rng)?, vec![1, 2, 3]);
    assert_eq!(kept(base.band(0.5, 1.0, false), &mut rng)?, vec![2, 3, 4]);
    // never enough kept prompts: the cap stops after exactly `max_gen_batches` batches
    let many: Vec<u64> = (0..50).map(|i| 5 * i + 4).collect(); // all p = 1
    let mut ds = DynamicSampling::new(
        FilterParams { group_size: 4, gen_batch: Some(5), max_gen_batches: 2, ..FilterParams::dynamic_sampling() }
            .check()?,
    )?;
    let mut oracle = Fixed { spent: 0 };
    let s = ds.select(0, Candidates::new(&many), 5, &mut oracle, &mut rng)?;
    assert!(s.ids.is_empty());
    assert_eq!(s.shortfall, Some(Shortfall::GenerationCap { batches: 2 }));
    assert_eq!((s.selection_rollouts, oracle.spent), (2 * 5 * 4, 40));
    Ok(())
}
