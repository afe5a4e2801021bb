//! GPS, MPTS and PDTS behind the `Selector` trait: acquisition rules on hand-built cases,
//! resume equivalence, simulator runs, typed errors.
#![cfg(feature = "neural")]

use rand::Rng;
use rl_core::Params;
use rlvr_select::diversity::euclidean;
use rlvr_select::neural::{AllocationParams, Gps, GpsParams, Mpts, MptsParams, Pdts, PdtsDiversity, PdtsParams};
use rlvr_select::sim::{run, PromptPoolSim, RunConfig, SimParams};
use rlvr_select::{
    Candidates, Drm, DrmParams, EpochWindow, Gdrm, GdrmParams, NoRollouts, Outcome, RiskFromRewards, SelectError,
    Selector,
};

fn single_thread() {
    tch::set_num_threads(1);
}

fn risk(x: &[f32]) -> f32 {
    x[0] * x[0] + 0.3 * x[1]
}

fn task_outcomes(ids: &[u64], x: &[f32], pos_of: impl Fn(u64) -> usize) -> Vec<Outcome> {
    ids.iter()
        .map(|&id| Outcome { risk: Some(risk(&x[pos_of(id) * 2..pos_of(id) * 2 + 2])), ..Outcome::new(id, vec![]) })
        .collect()
}

/// Drives a selector for `steps` steps on fresh 2-D tasks; returns (ids, scores) per step.
fn drive(
    sel: &mut dyn Selector,
    rng: &mut rl_core::SeededRng,
    steps: std::ops::Range<u64>,
    n: usize,
    b: usize,
) -> anyhow::Result<Vec<(Vec<u64>, Vec<f64>)>> {
    let mut out = Vec::new();
    for step in steps {
        let ids: Vec<u64> = (step * n as u64..(step + 1) * n as u64).collect();
        let x: Vec<f32> = (0..2 * n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let s = sel.select(step, Candidates::with_features(&ids, &x, 2)?, b, &mut NoRollouts, rng)?;
        let base = step * n as u64;
        sel.observe(step, &task_outcomes(&s.ids, &x, |id| (id - base) as usize), rng)?;
        out.push((s.ids, s.scores));
    }
    Ok(out)
}

#[test]
fn mpts_selects_the_top_b_of_its_ucb() -> anyhow::Result<()> {
    single_thread();
    let mut rng = rl_core::rng_from_seed(3);
    let mut mpts = Mpts::new(MptsParams::default().check()?, 2)?;
    drive(&mut mpts, &mut rng, 0..5, 32, 8)?;
    let ids: Vec<u64> = (1000..1064).collect();
    let x: Vec<f32> = (0..128).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let mut r1 = rng.clone();
    let a = mpts.acquisition_scores(&x, &mut r1)?;
    let sel = mpts.select(5, Candidates::with_features(&ids, &x, 2)?, 8, &mut NoRollouts, &mut rng)?;
    // same RNG stream => same draws; the selection is the top 8 by a, best first
    let mut order: Vec<usize> = (0..64).collect();
    order.sort_by(|&i, &j| a[j].total_cmp(&a[i]));
    let expect: Vec<u64> = order[..8].iter().map(|&p| ids[p]).collect();
    assert_eq!(sel.ids, expect);
    for w in sel.scores.windows(2) {
        assert!(w[0] >= w[1]);
    }
    // UCB ordering: a = γ0·mean + γ1·std with the learner's own mean/std for the same draws
    let mut r2 = r1.clone();
    let (m, s) = mpts.learner().predict(&x, 20, &mut r2)?;
    let a2 = mpts.acquisition_scores(&x, &mut r1)?;
    for i in 0..64 {
        let manual = f64::from(m[i]) + 3.0 * f64::from(s[i]);
        assert!((a2[i] - manual).abs() < 1e-5, "{} vs {manual}", a2[i]);
    }
    Ok(())
}

#[test]
fn mpts_ucb_prefers_uncertain_candidates_when_gamma_std_dominates() -> anyhow::Result<()> {
    single_thread();
    let mut rng = rl_core::rng_from_seed(4);
    let p = MptsParams { gamma_mean: 0.0, gamma_std: 1.0, ..MptsParams::default() };
    let mut mpts = Mpts::new(p.check()?, 2)?;
    drive(&mut mpts, &mut rng, 0..3, 32, 8)?;
    let ids: Vec<u64> = (0..40).collect();
    let x: Vec<f32> = (0..80).map(|_| rng.random_range(-3.0f32..3.0)).collect();
    let mut r = rng.clone();
    let (_, s) = mpts.learner().predict(&x, 20, &mut r)?;
    let sel = mpts.select(3, Candidates::with_features(&ids, &x, 2)?, 5, &mut NoRollouts, &mut rng)?;
    let mut order: Vec<usize> = (0..40).collect();
    order.sort_by(|&i, &j| s[j].total_cmp(&s[i]));
    assert_eq!(sel.ids, order[..5].iter().map(|&p| ids[p]).collect::<Vec<_>>());
    Ok(())
}

fn mean_pairwise(ids: &[u64], x: &[f32]) -> f64 {
    let mut s = 0.0;
    let mut c = 0;
    for i in 0..ids.len() {
        for j in i + 1..ids.len() {
            let (a, b) = (ids[i] as usize, ids[j] as usize);
            s += euclidean(&x[a * 2..a * 2 + 2], &x[b * 2..b * 2 + 2]);
            c += 1;
        }
    }
    s / c as f64
}

#[test]
fn pdts_diversity_spreads_the_batch() -> anyhow::Result<()> {
    single_thread();
    let ids: Vec<u64> = (0..512).collect();
    let mut rng = rl_core::rng_from_seed(9);
    let x: Vec<f32> = (0..1024).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let mut spreads = Vec::new();
    for (gamma, kind) in
        [(0.0, PdtsDiversity::SumDistance), (1000.0, PdtsDiversity::SumDistance), (1000.0, PdtsDiversity::MinDistance)]
    {
        let mut r = rl_core::rng_from_seed(1);
        let mut pdts =
            Pdts::new(PdtsParams { gamma_div: gamma, diversity: kind, ..PdtsParams::default() }.check()?, 2)?;
        drive(&mut pdts, &mut r, 0..3, 64, 16)?;
        let mut r_score = r.clone();
        let a: Vec<f32> = pdts.learner().sample_risks(&x, 1, &mut r_score)?;
        let sel = pdts.select(3, Candidates::with_features(&ids, &x, 2)?, 16, &mut NoRollouts, &mut r)?;
        if gamma == 0.0 {
            // no diversity: the top 16 of the single posterior draw
            let mut order: Vec<usize> = (0..512).collect();
            order.sort_by(|&i, &j| a[j].total_cmp(&a[i]).then(i.cmp(&j)));
            assert_eq!(sel.ids, order[..16].iter().map(|&p| p as u64).collect::<Vec<_>>());
        }
        spreads.push(mean_pairwise(&sel.ids, &x));
    }
    assert!(spreads[1] > 1.3 * spreads[0], "{spreads:?}");
    assert!(spreads[2] > 1.3 * spreads[0], "{spreads:?}");
    Ok(())
}

/// Saves mid-run, restores into a fresh selector, and checks both continue identically.
fn check_resume(mut a: Box<dyn Selector>, mut b: Box<dyn Selector>) -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(77);
    drive(a.as_mut(), &mut rng, 0..3, 48, 8)?;
    let state = a.save_state()?;
    let json = serde_json::to_string(&state)?;
    b.load_state(&serde_json::from_str(&json)?)?;
    assert_eq!(b.save_state()?, state, "{}", a.name());
    let mut rng_b = rng.clone();
    let ra = drive(a.as_mut(), &mut rng, 3..6, 48, 8)?;
    let rb = drive(b.as_mut(), &mut rng_b, 3..6, 48, 8)?;
    assert_eq!(ra, rb, "{}", a.name());
    assert_eq!(a.save_state()?, b.save_state()?, "{}", a.name());
    Ok(())
}

#[test]
fn resume_is_exact() -> anyhow::Result<()> {
    single_thread();
    check_resume(
        Box::new(Mpts::new(MptsParams::default().seed(1).check()?, 2)?),
        Box::new(Mpts::new(MptsParams::default().seed(2).check()?, 2)?),
    )?;
    check_resume(
        Box::new(Mpts::new(MptsParams { random_ratio: 0.5, ..MptsParams::domain_randomisation() }.check()?, 2)?),
        Box::new(Mpts::new(MptsParams::domain_randomisation().check()?, 2)?),
    )?;
    check_resume(
        Box::new(Pdts::new(PdtsParams::default().check()?, 2)?),
        Box::new(Pdts::new(PdtsParams::default().seed(5).check()?, 2)?),
    )?;
    check_resume(
        Box::new(Pdts::new(PdtsParams::domain_randomisation(1.0).check()?, 2)?),
        Box::new(Pdts::new(PdtsParams::domain_randomisation(1.0).check()?, 2)?),
    )?;
    check_resume(
        Box::new(Gdrm::new(GdrmParams::default().check()?)?),
        Box::new(Gdrm::new(GdrmParams::default().check()?)?),
    )?;
    // GPS learns from success rates: drive it on a simulator instead
    let sim_params = SimParams { n_prompts: 300, ..SimParams::default() };
    let mk = |seed| -> anyhow::Result<(PromptPoolSim, EpochWindow)> {
        let sim = PromptPoolSim::new(sim_params.check()?, seed)?;
        let src = EpochWindow::new(300, 4)?.with_features(sim.features().to_vec(), 8)?;
        Ok((sim, src))
    };
    let cfg = RunConfig { batch_size: 16, steps: 4, stop_at_target: false, ..RunConfig::default() };
    let (mut sim, mut src) = mk(3)?;
    let mut gps = Gps::new(GpsParams::default().check()?, 8)?;
    let mut rng = rl_core::rng_from_seed(8);
    run(&mut gps, &mut sim, &mut src, &cfg, &mut rng)?;
    let state = gps.save_state()?;
    let (sim_state, src_state) = (sim.clone(), src.clone());
    let mut gps2 = Gps::new(GpsParams::default().seed(9).check()?, 8)?;
    gps2.load_state(&state)?;
    let (mut sim2, mut src2, mut rng2) = (sim_state, src_state, rng.clone());
    let ra = run(&mut gps, &mut sim, &mut src, &cfg, &mut rng)?;
    let rb = run(&mut gps2, &mut sim2, &mut src2, &cfg, &mut rng2)?;
    assert_eq!(ra.records, rb.records);
    assert_eq!(gps.save_state()?, gps2.save_state()?);
    Ok(())
}

#[test]
fn neural_selectors_run_on_the_simulator() -> anyhow::Result<()> {
    single_thread();
    let sim_params = SimParams { n_prompts: 400, ..SimParams::default() };
    let cfg = RunConfig { batch_size: 16, steps: 6, stop_at_target: false, ..RunConfig::default() };
    let selectors: Vec<Box<dyn Selector>> = vec![
        Box::new(Gps::new(GpsParams::default().check()?, 8)?),
        Box::new(Mpts::new(
            MptsParams { risk_from_rewards: RiskFromRewards::Informativeness, ..MptsParams::default() }.check()?,
            8,
        )?),
        Box::new(Pdts::new(
            PdtsParams { risk_from_rewards: RiskFromRewards::Informativeness, ..PdtsParams::default() }.check()?,
            8,
        )?),
    ];
    for mut s in selectors {
        let mut sim = PromptPoolSim::new(sim_params.check()?, 1)?;
        let mut src = EpochWindow::new(400, 4)?.with_features(sim.features().to_vec(), 8)?;
        let mut rng = rl_core::rng_from_seed(2);
        let report = run(s.as_mut(), &mut sim, &mut src, &cfg, &mut rng)?;
        assert_eq!(report.records.len(), 6, "{}", s.name());
        assert_eq!(report.diagnostics.trained, 96);
    }
    Ok(())
}

#[test]
fn missing_features_and_bad_outcomes_are_typed_errors() -> anyhow::Result<()> {
    single_thread();
    let mut rng = rl_core::rng_from_seed(0);
    let mut mpts = Mpts::new(MptsParams::default().check()?, 2)?;
    let ids = [1u64, 2, 3];
    assert!(matches!(
        mpts.select(0, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng),
        Err(SelectError::Features(_))
    ));
    let x3 = [0.0f32; 9];
    assert!(matches!(
        mpts.select(0, Candidates::with_features(&ids, &x3, 3)?, 2, &mut NoRollouts, &mut rng),
        Err(SelectError::Features(_))
    ));
    let before = mpts.save_state()?;
    assert!(matches!(mpts.observe(0, &[Outcome::new(7, vec![0.5])], &mut rng), Err(SelectError::Features(_))));
    let nan = Outcome { risk: Some(f32::NAN), features: Some(vec![0.0, 0.0]), ..Outcome::new(1, vec![]) };
    assert!(mpts.observe(0, &[nan], &mut rng).is_err());
    assert_eq!(mpts.save_state()?, before);
    // with a table, feature-less candidates and outcomes work
    let mut mpts = Mpts::new(MptsParams::default().check()?, 2)?
        .with_feature_table(vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])?;
    let sel = mpts.select(0, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?;
    mpts.observe(
        0,
        &sel.ids.iter().map(|&id| Outcome::from_successes(id, 1, 4)).collect::<Result<Vec<_>, _>>()?,
        &mut rng,
    )?;
    assert!(mpts.predict(Candidates::new(&[0, 3]))?.is_some());
    assert!(matches!(
        MptsParams::default().samples(1).check(),
        Err(SelectError::InvalidParameter { ref name, .. }) if name == "samples"
    ));
    let mut gps = Gps::new(GpsParams::default().check()?, 2)?;
    assert!(matches!(
        gps.observe(0, &[Outcome::new(1, vec![])], &mut rng),
        Err(SelectError::EmptyGroup { id: 1 }) | Err(SelectError::Features(_))
    ));
    Ok(())
}

#[test]
fn gps_allocation_spends_the_budget_on_solvable_prompts() -> anyhow::Result<()> {
    single_thread();
    let mut rng = rl_core::rng_from_seed(12);
    let dim = 2;
    let truth = |e: &[f32]| 1.0 / (1.0 + (-(4.0 * e[0])).exp());
    let pool: Vec<f32> = (0..200 * dim).map(|_| rng.random_range(-1.5f32..1.5)).collect();
    let ids: Vec<u64> = (0..200).collect();
    let mut gps = Gps::new(GpsParams::default().diversity(0.0, 0.0).check()?, dim)?;
    for step in 0..80 {
        let sel = gps.select(step, Candidates::with_features(&ids, &pool, dim)?, 32, &mut NoRollouts, &mut rng)?;
        let outcomes: Vec<Outcome> = sel
            .ids
            .iter()
            .map(|&id| {
                let p = truth(&pool[id as usize * dim..(id as usize + 1) * dim]);
                Outcome::from_successes(id, (0..8).filter(|_| rng.random::<f32>() < p).count(), 8)
            })
            .collect::<Result<_, _>>()?;
        gps.observe(step, &outcomes, &mut rng)?;
    }
    let test: Vec<f32> = vec![-1.5, 0.0, 0.0, 0.0, 1.5, 0.0];
    let tid = [0u64, 1, 2];
    let alloc =
        gps.allocate(Candidates::with_features(&tid, &test, dim)?, &AllocationParams::with_budget(30).check()?)?;
    assert_eq!(alloc.samples.iter().sum::<usize>(), 30);
    assert!(alloc.samples.iter().all(|&s| (1..=64).contains(&s)));
    assert!(
        alloc.predicted[0] < alloc.predicted[1] && alloc.predicted[1] < alloc.predicted[2],
        "{:?}",
        alloc.predicted
    );
    // the intermediate prompt gets more samples than the easy one
    assert!(alloc.samples[1] > alloc.samples[2], "{:?}", alloc.samples);
    assert!(gps
        .allocate(Candidates::with_features(&tid, &test, dim)?, &AllocationParams::with_budget(2).check()?)
        .is_err());
    Ok(())
}

#[test]
fn drm_evaluates_everything_and_keeps_the_worst() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut oracle = rlvr_select::FnOracle::new(|id, k, _r: &mut dyn rand::RngCore| {
        Ok(vec![if id % 3 == 0 { 0.0 } else { 1.0 }; k])
    });
    let ids: Vec<u64> = (0..12).collect();
    let mut drm = Drm::new(DrmParams { group_size: 2, ..DrmParams::default() }.check()?)?;
    let sel = drm.select(0, Candidates::new(&ids), 4, &mut oracle, &mut rng)?;
    let mut got = sel.ids.clone();
    got.sort_unstable();
    assert_eq!(got, vec![0, 3, 6, 9]);
    assert_eq!(sel.selection_rollouts, 24);
    assert_eq!(sel.prefetched.len(), 4);
    assert!(matches!(
        drm.select(0, Candidates::new(&ids), 4, &mut NoRollouts, &mut rng),
        Err(SelectError::OracleUnavailable { selector: "drm" })
    ));
    Ok(())
}
