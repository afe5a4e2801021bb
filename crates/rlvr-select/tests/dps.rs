//! DPS updates against hand-computed values and an independent, literal f64 implementation of
//! the equations; HMM ground-truth convergence; bad input.
#![allow(clippy::needless_range_loop)] // index loops mirror the equations

use rl_core::Params;
use rlvr_select::sim::{Dynamics, HmmParams, PromptPoolSim, SimParams};
use rlvr_select::{
    Candidates, Dps, DpsParams, DpsPrior, InitialBelief, NoRollouts, Outcome, RolloutOracle, SelectError, Selector,
};
use std::collections::BTreeMap;

fn close(a: f32, b: f64, tol: f64) -> bool {
    (f64::from(a) - b).abs() <= tol
}

/// λ = 0.5, α0 = 1 (all ones), μ0 uniform, k = 8.
///
/// step 0, prompt 0 observed partial (o = 2nd state):
///   P(α0) = 1/3 everywhere, μ_before = (1/3, 1/3, 1/3)
///   ξ(partial, j) = (1/3 · 1/3) / (3 · 1/9) = 1/3
///   α = 0.5·1 + 0.5·1 + ξ  => row "partial" = 4/3, other rows 1
///   μ_prior = column "partial" of α, normalised = (1, 4/3, 1) / (10/3) = (0.3, 0.4, 0.3)
/// step 1, prompt 0 observed solved:
///   P(solved, j) = 1 / (10/3) = 0.3 for every j; μ_before = e_partial => ξ(solved, partial) = 1
///   α = 0.5 α + 0.5 + ξ => rows (1, 1, 1), (7/6, 7/6, 7/6), (1, 2, 1)
///   μ_prior = (1, 7/6, 1) / (19/6) = (6/19, 7/19, 6/19)
/// step 2, nothing observed (propagation):
///   α = 0.5 α + 0.5 => rows (1, 1, 1), (13/12, 13/12, 13/12), (1, 1.5, 1)
///   column sums (37/12, 43/12, 37/12); w = μ_post / colsum = (72/703, 84/817, 72/703)
///   μ_prior = (Σw, 13/12 Σw, w0 + 1.5 w1 + w2) = (0.3076516, 0.3332892, 0.3590592)
#[test]
fn dps_updates_match_hand_computation() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut dps = Dps::new(DpsParams::default().decay(0.5).check()?, 4)?;
    let ids = [0u64, 1];
    let _ = dps.select(0, Candidates::new(&ids), 1, &mut NoRollouts, &mut rng)?;
    dps.observe(0, &[Outcome::from_successes(0, 4, 8)?], &mut rng)?;
    let b = dps.belief(0)?;
    assert!(close(b[0], 0.3, 1e-6) && close(b[1], 0.4, 1e-6) && close(b[2], 0.3, 1e-6), "{b:?}");
    // Prompt 1 was a candidate: tracked, propagated with α0 (uniform prior is a fixed point).
    assert!(dps.belief(1)?.iter().all(|&x| close(x, 1.0 / 3.0, 1e-6)));
    assert_eq!(dps.n_tracked(), 2);

    dps.observe(1, &[Outcome::from_successes(0, 8, 8)?], &mut rng)?;
    let b = dps.belief(0)?;
    assert!(close(b[0], 6.0 / 19.0, 1e-6) && close(b[1], 7.0 / 19.0, 1e-6) && close(b[2], 6.0 / 19.0, 1e-6));
    let a = dps.alpha(0)?;
    assert!(close(a[1][0], 7.0 / 6.0, 1e-6) && close(a[2][1], 2.0, 1e-6) && close(a[2][0], 1.0, 1e-6));

    dps.observe(2, &[], &mut rng)?;
    let b = dps.belief(0)?;
    for (got, want) in b.iter().zip([0.3076516, 0.3332892, 0.3590592]) {
        assert!(close(*got, want, 2e-6), "{b:?}");
    }
    let a = dps.alpha(0)?;
    assert!(close(a[1][2], 13.0 / 12.0, 1e-6) && close(a[2][1], 1.5, 1e-6) && close(a[0][0], 1.0, 1e-6));
    assert_eq!(dps.times_sampled(0)?, 2);
    Ok(())
}

/// A literal f64 transcription of the reference algorithm (dicts of tracked prompts, full α
/// updated every step), used as the oracle for random sequences.
struct Literal {
    lam: f64,
    a0: [[f64; 3]; 3],
    mu0: [f64; 3],
    alpha: BTreeMap<u64, [[f64; 3]; 3]>,
    pi: BTreeMap<u64, [f64; 3]>,
    before: BTreeMap<u64, [f64; 3]>,
}

impl Literal {
    fn new(p: &DpsParams) -> Self {
        let m = p.prior.matrix().map(|r| r.map(f64::from));
        let v = p.initial_belief.vector().map(f64::from);
        let s: f64 = v.iter().sum();
        Self {
            lam: f64::from(p.decay),
            a0: m,
            mu0: v.map(|x| x / s),
            alpha: BTreeMap::new(),
            pi: BTreeMap::new(),
            before: BTreeMap::new(),
        }
    }
    fn register(&mut self, id: u64) {
        self.alpha.entry(id).or_insert(self.a0);
        self.pi.entry(id).or_insert(self.mu0);
        self.before.entry(id).or_insert(self.mu0);
    }
    fn expected(a: &[[f64; 3]; 3]) -> [[f64; 3]; 3] {
        let mut p = *a;
        for c in 0..3 {
            let s = a[0][c] + a[1][c] + a[2][c];
            for row in p.iter_mut() {
                row[c] /= s;
            }
        }
        p
    }
    fn predict(a: &[[f64; 3]; 3], mu: &[f64; 3]) -> [f64; 3] {
        let p = Self::expected(a);
        let mut out = [0.0; 3];
        for r in 0..3 {
            out[r] = (0..3).map(|c| p[r][c] * mu[c]).sum();
        }
        let s: f64 = out.iter().sum();
        out.map(|x| x / s)
    }
    fn step(&mut self, observed: &[(u64, usize)]) {
        for &(id, _) in observed {
            self.register(id);
        }
        let ids: Vec<u64> = self.alpha.keys().copied().collect();
        for id in ids {
            let a = self.alpha[&id];
            let (post, xi) = match observed.iter().find(|(i, _)| *i == id) {
                Some(&(_, o)) => {
                    let p = Self::expected(&a);
                    let b = self.before[&id];
                    let mut xi = [[0.0; 3]; 3];
                    let mut den = 0.0;
                    for c in 0..3 {
                        xi[o][c] = b[c] * p[o][c];
                        den += xi[o][c];
                    }
                    for c in 0..3 {
                        xi[o][c] /= den;
                    }
                    let mut e = [0.0; 3];
                    e[o] = 1.0;
                    (e, xi)
                }
                None => (self.pi[&id], [[0.0; 3]; 3]),
            };
            let mut an = [[0.0; 3]; 3];
            for r in 0..3 {
                for c in 0..3 {
                    an[r][c] = self.lam * a[r][c] + (1.0 - self.lam) * self.a0[r][c] + xi[r][c];
                }
            }
            self.alpha.insert(id, an);
            self.before.insert(id, post);
            self.pi.insert(id, Self::predict(&an, &post));
        }
    }
}

#[test]
fn dps_matches_a_literal_f64_implementation_on_random_sequences() -> anyhow::Result<()> {
    use rand::Rng;
    for (case, params) in [
        DpsParams::default(),
        DpsParams::default().decay(0.5).prior(DpsPrior::Progress),
        DpsParams::default().decay(0.9).prior(DpsPrior::Stability).initial_belief(InitialBelief::Partial),
        DpsParams::default().decay(1.0).prior(DpsPrior::Constant(0.5)),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = rl_core::rng_from_seed(100 + case as u64);
        let n = 40u64;
        let mut dps = Dps::new(params.check()?, n as usize)?;
        let mut lit = Literal::new(&params);
        for step in 0..60u64 {
            // candidates: a random window; select 5 of them; outcomes random states.
            let start = rng.random_range(0..n - 10);
            let ids: Vec<u64> = (start..start + 10).collect();
            for &id in &ids {
                lit.register(id);
            }
            let sel = dps.select(step, Candidates::new(&ids), 5, &mut NoRollouts, &mut rng)?;
            let outcomes: Vec<Outcome> = sel
                .ids
                .iter()
                .map(|&id| Outcome::from_successes(id, [0, 3, 8][rng.random_range(0..3)], 8))
                .collect::<Result<_, _>>()?;
            let obs: Vec<(u64, usize)> = outcomes.iter().map(|o| (o.id, o.state().index())).collect();
            // Sometimes a step without observations.
            if step % 7 == 3 {
                dps.observe(step, &[], &mut rng)?;
                lit.step(&[]);
            } else {
                dps.observe(step, &outcomes, &mut rng)?;
                lit.step(&obs);
            }
            for (&id, want) in &lit.pi {
                let got = dps.belief(id)?;
                for c in 0..3 {
                    assert!(close(got[c], want[c], 2e-4), "case {case} step {step} id {id}: {got:?} vs {want:?}");
                }
            }
        }
        assert_eq!(dps.n_tracked(), lit.alpha.len());
    }
    Ok(())
}

#[test]
fn top_b_by_partial_probability_and_entropy_term() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(1);
    let mut dps = Dps::new(DpsParams::default().check()?, 10)?;
    let ids: Vec<u64> = (0..10).collect();
    let _ = dps.select(0, Candidates::new(&ids), 10, &mut NoRollouts, &mut rng)?;
    // 0, 1 partial; 2, 3 solved; 4, 5 unsolved; the rest unobserved.
    let o: Vec<Outcome> = [(0, 4), (1, 4), (2, 8), (3, 8), (4, 0), (5, 0)]
        .iter()
        .map(|&(id, s)| Outcome::from_successes(id, s, 8))
        .collect::<Result<_, _>>()?;
    for step in 0..3 {
        dps.observe(step, &o, &mut rng)?;
    }
    let sel = dps.select(3, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?;
    let mut top = sel.ids.clone();
    top.sort_unstable();
    assert_eq!(top, vec![0, 1]);
    assert!(sel.scores[0] >= sel.scores[1]);
    // With a large entropy weight the uncertain, never-observed prompts win.
    let mut state = dps.save_state()?;
    state["params"]["entropy_weight"] = serde_json::json!(10.0);
    dps.load_state(&state)?;
    let sel = dps.select(3, Candidates::new(&ids), 4, &mut NoRollouts, &mut rng)?;
    assert!(sel.ids.iter().all(|&id| id >= 6), "{:?}", sel.ids);
    Ok(())
}

#[test]
fn dps_beliefs_converge_to_the_true_state_distribution_in_hmm_mode() -> anyhow::Result<()> {
    // A stationary ground-truth chain (same matrix whether trained or not).
    let phi = [[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.2, 0.7]];
    let hmm = HmmParams { phi_trained: phi, phi_idle: phi, initial: [1.0 / 3.0; 3] };
    let params = SimParams { n_prompts: 200, dynamics: Dynamics::Hmm(hmm), ..SimParams::default() };
    let mut sim = PromptPoolSim::new(params.check()?, 5)?;
    let mut rng = rl_core::rng_from_seed(5);
    let n = sim.n_prompts();
    let mut dps = Dps::new(DpsParams::default().decay(1.0).check()?, n)?;
    let ids: Vec<u64> = (0..n as u64).collect();
    // Observe every prompt every step: α learns each prompt's transition matrix.
    for step in 0..400 {
        let sel = dps.select(step, Candidates::new(&ids), n, &mut NoRollouts, &mut rng)?;
        let outcomes = sim.rollout(&sel.ids, 8, &mut rng)?;
        dps.observe(step, &outcomes, &mut rng)?;
        sim.train(&[], &mut rng)?;
    }
    // Learned transition matrices are close to the truth.
    let mut err = 0.0;
    for id in 0..n as u64 {
        let p = dps.transition_matrix(id)?;
        for r in 0..3 {
            for c in 0..3 {
                err += (f64::from(p[r][c]) - phi[r][c]).abs();
            }
        }
    }
    let mean_abs = err / (9 * n) as f64;
    assert!(mean_abs < 0.05, "mean |P - Φ| = {mean_abs}");
    // Stop observing: the mean belief tracks the true state frequencies of the pool.
    for h in 0..4 {
        let mut mean_belief = [0.0f64; 3];
        for id in 0..n as u64 {
            let b = dps.belief(id)?;
            for c in 0..3 {
                mean_belief[c] += f64::from(b[c]) / n as f64;
            }
        }
        // The belief predicts the state *after* the next transition: compare with the truth
        // after one more step of the chain.
        sim.train(&[], &mut rng)?;
        let truth = sim.state_frequencies();
        let l1: f64 = (0..3).map(|c| (mean_belief[c] - truth[c]).abs()).sum();
        assert!(l1 < 0.15, "h = {h}: belief {mean_belief:?} vs truth {truth:?}");
        dps.observe(400 + h, &[], &mut rng)?;
    }
    Ok(())
}

#[test]
fn bad_input_is_rejected_and_state_untouched() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut dps = Dps::new(DpsParams::default().check()?, 8)?;
    let ids: Vec<u64> = (0..6).collect();
    let _ = dps.select(0, Candidates::new(&ids), 3, &mut NoRollouts, &mut rng)?;
    dps.observe(0, &[Outcome::from_successes(1, 3, 8)?], &mut rng)?;
    let before = dps.save_state()?;
    let dup = [0u64, 1, 1];
    assert!(matches!(
        dps.select(1, Candidates::new(&dup), 2, &mut NoRollouts, &mut rng),
        Err(SelectError::DuplicateId { id: 1, .. })
    ));
    assert!(matches!(
        dps.select(1, Candidates::new(&ids), 7, &mut NoRollouts, &mut rng),
        Err(SelectError::BatchTooLarge { batch_size: 7, candidates: 6 })
    ));
    assert!(matches!(dps.select(1, Candidates::new(&ids), 0, &mut NoRollouts, &mut rng), Err(SelectError::ZeroBatch)));
    let unknown = [0u64, 8];
    assert!(matches!(
        dps.select(1, Candidates::new(&unknown), 1, &mut NoRollouts, &mut rng),
        Err(SelectError::UnknownId { id: 8, n_items: 8 })
    ));
    let cases: Vec<Vec<Outcome>> = vec![
        vec![Outcome::from_successes(0, 3, 8)?, Outcome::from_successes(9, 3, 8)?],
        vec![Outcome::from_successes(0, 3, 8)?, Outcome::from_successes(0, 3, 8)?],
        vec![Outcome::from_successes(0, 3, 8)?, Outcome::from_successes(2, 3, 4)?],
        vec![Outcome::from_successes(0, 3, 8)?, Outcome::new(2, vec![0.0, f32::INFINITY])],
        vec![Outcome::from_successes(0, 3, 8)?, Outcome::new(2, vec![])],
        vec![Outcome::new(3, vec![0.0, 2.0])],
    ];
    for bad in &cases {
        assert!(dps.observe(1, bad, &mut rng).is_err(), "{bad:?}");
    }
    assert_eq!(dps.save_state()?, before);
    let mut broken = before.clone();
    broken["status"][0] = serde_json::json!(7);
    assert!(matches!(dps.load_state(&broken), Err(SelectError::InvalidState(_))));
    assert_eq!(dps.save_state()?, before);
    // a state's parameters go through `check`, and its arrays through the same checks
    for (path, value) in [
        (&["params", "decay"][..], serde_json::json!(2.0)),
        (&["params", "prior"][..], serde_json::json!({"constant": -1.0})),
        (&["params", "decy"][..], serde_json::json!(0.5)),
        (&["decay"][..], serde_json::json!([0.5])),
        (&["n_tracked"][..], serde_json::json!(5)),
        (&["extra"][..], serde_json::json!(1)),
    ] {
        let mut bad = before.clone();
        let mut v = &mut bad;
        for key in &path[..path.len() - 1] {
            v = &mut v[*key];
        }
        v[path[path.len() - 1]] = value;
        assert!(dps.load_state(&bad).is_err(), "{path:?}");
        assert_eq!(dps.save_state()?, before);
    }
    let mut other = Dps::new(DpsParams::default().decay(0.1).check()?, 8)?;
    other.load_state(&before)?;
    assert_eq!(other.save_state()?, before);
    assert_eq!(other.params().decay, 0.7);
    assert!(DpsParams::default().decay(1.5).check().is_err());
    assert!(DpsParams::default().prior(DpsPrior::Custom([[0.0; 3]; 3])).check().is_err());
    Ok(())
}

#[test]
fn local_prior_with_impossible_transition_stays_finite() -> anyhow::Result<()> {
    // 'local' forbids solved -> unsolved (α0 = 0); the reference divides 0 by 0 here.
    let mut rng = rl_core::rng_from_seed(0);
    let mut dps = Dps::new(DpsParams::default().prior(DpsPrior::Local).decay(0.5).check()?, 2)?;
    dps.observe(0, &[Outcome::from_successes(0, 8, 8)?], &mut rng)?;
    dps.observe(1, &[Outcome::from_successes(0, 0, 8)?], &mut rng)?;
    let b = dps.belief(0)?;
    assert!(b.iter().all(|x| x.is_finite()) && (b.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{b:?}");
    Ok(())
}

#[test]
fn state_is_at_most_64_bytes_per_prompt() {
    assert!(Dps::bytes_per_prompt() <= 64);
    assert_eq!(Dps::bytes_per_prompt(), 57);
}

#[test]
fn long_unobserved_runs_never_produce_subnormal_state() -> anyhow::Result<()> {
    // λ^n underflows into the subnormal range after ~250 steps at λ = 0.7; the propagation pass
    // flushes such values to zero (subnormal arithmetic is ~100x slower), and beliefs stay valid.
    let mut rng = rl_core::rng_from_seed(5);
    let mut dps = Dps::new(DpsParams::default().check()?, 4)?;
    dps.track_all();
    let outcomes =
        [Outcome::from_successes(0, 0, 8)?, Outcome::from_successes(1, 4, 8)?, Outcome::from_successes(2, 8, 8)?];
    dps.observe(0, &outcomes, &mut rng)?;
    for t in 1..400 {
        dps.observe(t, &[], &mut rng)?;
        // the decay factors λ^n live in the saved state
        let state = dps.save_state()?;
        let decay = state["decay"].as_array().ok_or_else(|| anyhow::anyhow!("no decay in state"))?;
        for v in decay {
            let v = v.as_f64().ok_or_else(|| anyhow::anyhow!("decay not a number"))? as f32;
            assert!(!v.is_subnormal(), "subnormal decay {v:e} at step {t}");
        }
    }
    for id in 0..4 {
        let b = dps.belief(id)?;
        assert!(b.iter().all(|v| v.is_finite() && !v.is_subnormal() && *v >= 0.0), "belief {b:?}");
        assert!((b.iter().sum::<f32>() - 1.0).abs() < 1e-5, "belief {b:?}");
    }
    Ok(())
}

/// `predict`'s scalar is `0.5 μ(partial) + μ(solved)` of the class probabilities it reports.
#[test]
fn predict_mean_is_half_partial_plus_solved() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut dps = Dps::new(DpsParams::default().check()?, 4)?;
    let ids: Vec<u64> = (0..4).collect();
    let _ = dps.select(0, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?;
    dps.observe(0, &[Outcome::from_successes(0, 8, 8)?, Outcome::from_successes(1, 3, 8)?], &mut rng)?;
    let preds = dps.predict(Candidates::new(&ids))?.ok_or_else(|| anyhow::anyhow!("DPS predicts"))?;
    for p in &preds {
        let mu = p.class_probs.ok_or_else(|| anyhow::anyhow!("class probabilities"))?;
        assert!((p.mean - (0.5 * mu[1] + mu[2])).abs() < 1e-12, "{p:?}");
        assert!(mu[2] > 0.05, "{mu:?}");
    }
    Ok(())
}

/// A state's beliefs must be non-negative; a transition column may hold zeros as long as its
/// sum is positive.
#[test]
fn load_state_checks_signs_and_column_sums() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut dps = Dps::new(DpsParams::default().check()?, 3)?;
    let ids: Vec<u64> = (0..3).collect();
    let _ = dps.select(0, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?;
    let before = dps.save_state()?;
    let mut neg = before.clone();
    neg["before"][0][0] = serde_json::json!(-0.5);
    assert!(matches!(dps.load_state(&neg), Err(SelectError::InvalidState(_))));
    assert_eq!(dps.save_state()?, before);
    let mut zeros = before.clone();
    zeros["alpha"][0][0] = serde_json::json!(0.0);
    zeros["alpha"][3][0] = serde_json::json!(1.0);
    zeros["alpha"][6][0] = serde_json::json!(0.0);
    dps.load_state(&zeros)?;
    assert_eq!(dps.save_state()?, zeros);
    let mut empty = zeros.clone();
    empty["alpha"][3][0] = serde_json::json!(0.0);
    assert!(matches!(dps.load_state(&empty), Err(SelectError::InvalidState(_))));
    Ok(())
}

/// A belief must be a distribution: an all-zero one (NaN predictions) or one that does not sum
/// to 1 is refused with the prompt named, and the selector keeps its state.
#[test]
fn load_state_refuses_beliefs_that_are_not_distributions() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let mut dps = Dps::new(DpsParams::default().check()?, 3)?;
    let ids: Vec<u64> = (0..3).collect();
    let sel = dps.select(0, Candidates::new(&ids), 2, &mut NoRollouts, &mut rng)?;
    let outcomes: Vec<Outcome> =
        sel.ids.iter().map(|&id| Outcome::from_successes(id, 4, 8)).collect::<Result<_, _>>()?;
    dps.observe(0, &outcomes, &mut rng)?;
    let before = dps.save_state()?;
    for (i, belief) in [(1usize, [0.0, 0.0, 0.0]), (2, [0.5, 0.5, 0.5]), (0, [0.2, 0.2, 0.2])] {
        let mut bad = before.clone();
        for (c, v) in belief.iter().enumerate() {
            bad["before"][c][i] = serde_json::json!(v);
        }
        match dps.load_state(&bad) {
            Err(SelectError::InvalidState(m)) => assert!(m.contains(&format!("prompt {i}")), "{m}"),
            other => panic!("{belief:?}: expected InvalidState, got {other:?}"),
        }
        assert_eq!(dps.save_state()?, before);
        for id in 0..3 {
            assert!(dps.belief(id)?.iter().all(|p| p.is_finite()));
        }
    }
    dps.load_state(&before)?;
    Ok(())
}

/// Ties (fresh prompts have equal beliefs) are broken at random: over many calls every prompt
/// is chosen first about equally often.
#[test]
fn ties_are_broken_uniformly() -> anyhow::Result<()> {
    let mut rng = rl_core::rng_from_seed(0);
    let ids: Vec<u64> = (0..4).collect();
    let mut hits = [0u32; 4];
    for _ in 0..400 {
        let mut dps = Dps::new(DpsParams::default().check()?, 4)?;
        hits[dps.select(0, Candidates::new(&ids), 1, &mut NoRollouts, &mut rng)?.ids[0] as usize] += 1;
    }
    assert!(hits.iter().all(|&h| (60..=140).contains(&h)), "{hits:?}");
    Ok(())
}
