//! Resume equivalence (run N steps; run k, snapshot through JSON, restore into a fresh
//! environment, run N − k; compare bit for bit) and the behaviour of every wrapper.

use ndarray::{array, Array1, Array2};
use rand::{Rng, SeedableRng};
use rl_core::{Env, Params, RlCoreError, SeededRng, Step};
use rl_envs::classic::{
    CartPole, CartPoleParams, MountainCarContinuous, MountainCarContinuousParams, Pendulum, PendulumParams,
};
use rl_envs::wrappers::{
    DomainRandomization, EpisodicReward, NormalizeObservation, NormalizeObservationParams, RescaleAction,
    TaskDistribution, TimeLimit, VecEnv,
};
use rl_envs::{EnvError, MultiAgentEnv, Snapshot, TaskParams};

fn pendulum() -> Pendulum {
    Pendulum::new(PendulumParams::default().check().unwrap()).unwrap()
}

/// Steps `env` with `actions`, resetting from `rng` whenever an episode ends.
fn run<E: Env>(env: &mut E, actions: &[Array1<f32>], rng: &mut SeededRng) -> Vec<Step> {
    actions
        .iter()
        .map(|a| {
            let s = env.step(a.view()).unwrap();
            if s.done() {
                env.reset(rng).unwrap();
            }
            s
        })
        .collect()
}

fn resume_equivalence<E: Env + Snapshot>(mut make: impl FnMut() -> E, actions: &[Array1<f32>], k: usize) {
    let mut a = make();
    let mut rng_a = rl_core::rng_from_seed(11);
    a.reset(&mut rng_a).unwrap();
    let full = run(&mut a, actions, &mut rng_a);

    let mut b = make();
    let mut rng_b = rl_core::rng_from_seed(11);
    b.reset(&mut rng_b).unwrap();
    let first = run(&mut b, &actions[..k], &mut rng_b);
    let json = serde_json::to_string(&b.snapshot()).unwrap();
    let rng_json = serde_json::to_string(&rng_b).unwrap();
    let mut c = make();
    c.restore(&serde_json::from_str(&json).unwrap()).unwrap();
    let mut rng_c: SeededRng = serde_json::from_str(&rng_json).unwrap();
    let rest = run(&mut c, &actions[k..], &mut rng_c);
    let resumed: Vec<Step> = first.into_iter().chain(rest).collect();
    assert_eq!(full, resumed);
}

fn random_actions(n: usize, dim: usize, lo: f32, hi: f32, seed: u64) -> Vec<Array1<f32>> {
    let mut r = SeededRng::seed_from_u64(seed);
    (0..n).map(|_| (0..dim).map(|_| r.random_range(lo..hi)).collect()).collect()
}

#[test]
fn classic_envs_resume_bit_identically() {
    resume_equivalence(pendulum, &random_actions(450, 1, -2.5, 2.5, 1), 217);
    let cp = || CartPole::new(CartPoleParams::default().check().unwrap()).unwrap();
    let acts: Vec<Array1<f32>> = random_actions(300, 1, 0.0, 2.0, 2).into_iter().map(|a| a.mapv(f32::floor)).collect();
    resume_equivalence(cp, &acts, 123);
    let mc = || MountainCarContinuous::new(MountainCarContinuousParams::default().check().unwrap()).unwrap();
    // k = 1 checks the float64 reset state survives the snapshot
    resume_equivalence(mc, &random_actions(300, 1, -1.5, 1.5, 3), 1);
    resume_equivalence(mc, &random_actions(300, 1, -1.5, 1.5, 4), 150);
}

#[test]
fn point_maze_and_controller_resume_bit_identically() {
    use rl_envs::maze::{MazeLayout, PointMaze, PointMazeParams, WaypointController, WaypointParams};
    // random pushes into walls, goals that move (reset_target draws from the env's own stream)
    let make = || {
        PointMaze::new(PointMazeParams::default().layout(MazeLayout::Open).reset_target(true).check().unwrap()).unwrap()
    };
    resume_equivalence(make, &random_actions(700, 2, -1.5, 1.5, 6), 333);
    // the controller's plan (jittered waypoints) is part of its snapshot
    let mut env = make();
    let mut ctrl = WaypointController::new(WaypointParams::default().check().unwrap(), env.maze().clone());
    let mut rng = rl_core::rng_from_seed(8);
    env.reset(&mut rng).unwrap();
    for _ in 0..20 {
        let (a, _) = ctrl.act(env.position(), env.velocity(), env.goal(), &mut rng).unwrap();
        env.step(ndarray::arr1(&a).view()).unwrap();
    }
    let (saved_env, saved_ctrl, saved_rng) = (env.snapshot(), ctrl.snapshot(), rng.clone());
    let run = |env: &mut PointMaze, ctrl: &mut WaypointController, rng: &mut SeededRng| {
        (0..100)
            .map(|_| {
                let (a, _) = ctrl.act(env.position(), env.velocity(), env.goal(), rng).unwrap();
                env.step(ndarray::arr1(&a).view()).unwrap()
            })
            .collect::<Vec<_>>()
    };
    let first = run(&mut env, &mut ctrl, &mut rng);
    let mut env2 = make();
    let mut ctrl2 = WaypointController::new(WaypointParams::default().check().unwrap(), env2.maze().clone());
    env2.restore(&saved_env).unwrap();
    ctrl2.restore(&saved_ctrl).unwrap();
    let mut rng2 = saved_rng;
    assert_eq!(first, run(&mut env2, &mut ctrl2, &mut rng2));
}

#[test]
fn wrappers_resume_bit_identically() {
    let acts = random_actions(500, 1, -1.0, 1.0, 5);
    resume_equivalence(|| TimeLimit::new(pendulum(), 37).unwrap(), &acts, 100);
    resume_equivalence(|| EpisodicReward::new(TimeLimit::new(pendulum(), 50).unwrap()), &acts, 75);
    resume_equivalence(
        || NormalizeObservation::new(pendulum(), NormalizeObservationParams::default().check().unwrap()).unwrap(),
        &acts,
        260,
    );
    resume_equivalence(|| RescaleAction::new(pendulum(), -1.0, 1.0).unwrap(), &acts, 10);
    resume_equivalence(
        || {
            let env = TimeLimit::new(pendulum(), 40).unwrap();
            let dist = TaskDistribution::relative(&env.task_spec(), 0.5);
            DomainRandomization::new(env, dist).unwrap()
        },
        &acts,
        130,
    );
}

#[test]
fn bad_snapshots_are_rejected_and_leave_env_unchanged() {
    let mut env = pendulum();
    env.reset(&mut rl_core::rng_from_seed(0)).unwrap();
    let good = env.snapshot();
    let mut bad = good;
    bad.theta = f64::NAN;
    assert!(matches!(env.restore(&bad), Err(EnvError::BadSnapshot { .. })));
    assert_eq!(env.snapshot(), good);
    let mut batch = VecEnv::from_fn(3, 0, |_| Ok(pendulum())).unwrap();
    batch.reset().unwrap();
    let before = batch.snapshot();
    let mut s = before.clone();
    s.envs[2].theta_dot = f64::INFINITY;
    assert!(batch.restore(&s).is_err());
    assert_eq!(batch.snapshot(), before);
    s.envs.pop();
    assert!(batch.restore(&s).is_err());
}

#[test]
fn time_limit_truncates_and_needs_reset() {
    let mut env = TimeLimit::new(pendulum(), 3).unwrap();
    assert!(TimeLimit::new(pendulum(), 0).is_err());
    env.reset(&mut rl_core::rng_from_seed(0)).unwrap();
    let flags: Vec<bool> = (0..3).map(|_| env.step(array![0.0].view()).unwrap().truncated).collect();
    assert_eq!(flags, [false, false, true]);
    assert!(matches!(env.step(array![0.0].view()), Err(RlCoreError::NeedsReset)));
}

#[test]
fn episodic_reward_pays_the_sum_at_the_end() {
    let mut dense = TimeLimit::new(pendulum(), 20).unwrap();
    let mut sparse = EpisodicReward::new(TimeLimit::new(pendulum(), 20).unwrap());
    let mut r1 = rl_core::rng_from_seed(4);
    let mut r2 = rl_core::rng_from_seed(4);
    dense.reset(&mut r1).unwrap();
    sparse.reset(&mut r2).unwrap();
    let mut total = 0.0f64;
    for t in 0..20 {
        let a = array![(t as f32 * 0.3).sin()];
        let d = dense.step(a.view()).unwrap();
        let s = sparse.step(a.view()).unwrap();
        assert_eq!(d.obs, s.obs);
        assert_eq!(sparse.last_dense_reward(), d.reward);
        total += f64::from(d.reward);
        if t < 19 {
            assert_eq!(s.reward, 0.0);
        } else {
            assert!(s.truncated);
            assert!((f64::from(s.reward) - total).abs() < 1e-3, "{} vs {total}", s.reward);
        }
    }
}

#[test]
fn domain_randomization_samples_queues_and_validates() {
    let env = pendulum();
    let spec = env.task_spec();
    assert_eq!(spec.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["g", "m", "l"]);
    let dist = TaskDistribution::Uniform { low: vec![5.0, 1.0, 0.5], high: vec![15.0, 1.0, 1.5] };
    let mut dr = DomainRandomization::new(env, dist).unwrap();
    let mut rng = rl_core::rng_from_seed(9);
    let mut gs = vec![];
    for _ in 0..50 {
        dr.reset(&mut rng).unwrap();
        let t = dr.current_task().to_vec();
        assert!((5.0..=15.0).contains(&t[0]) && t[1] == 1.0 && (0.5..=1.5).contains(&t[2]));
        assert_eq!(dr.inner().task(), t);
        gs.push(t[0]);
    }
    assert!(gs.iter().cloned().fold(f64::INFINITY, f64::min) < 6.0);
    assert!(gs.iter().cloned().fold(0.0, f64::max) > 14.0);
    dr.set_next_task(&[3.0, 2.0, 2.0]).unwrap();
    dr.reset(&mut rng).unwrap();
    assert_eq!(dr.current_task(), &[3.0, 2.0, 2.0]);
    assert!(dr.set_next_task(&[3.0, -2.0, 2.0]).is_err());
    assert!(dr.set_next_task(&[3.0]).is_err());
    // bounds outside the valid range or inverted are rejected at construction
    let bad = TaskDistribution::Uniform { low: vec![5.0, 0.0, 0.5], high: vec![15.0, 1.0, 1.5] };
    assert!(DomainRandomization::new(pendulum(), bad).is_err());
    let inverted = TaskDistribution::Uniform { low: vec![15.0, 1.0, 0.5], high: vec![5.0, 1.0, 1.5] };
    assert!(DomainRandomization::new(pendulum(), inverted).is_err());
    assert!(DomainRandomization::new(pendulum(), TaskDistribution::Choice(vec![])).is_err());
    // a heavier, longer pendulum falls more slowly: the task really changes the physics
    let mut light = pendulum();
    let mut heavy = pendulum();
    heavy.set_task(&[10.0, 1.0, 3.0]).unwrap();
    light.reset(&mut rl_core::rng_from_seed(1)).unwrap();
    heavy.reset(&mut rl_core::rng_from_seed(1)).unwrap();
    let a = light.step(array![0.0].view()).unwrap();
    let b = heavy.step(array![0.0].view()).unwrap();
    assert_ne!(a.obs, b.obs);
}

#[test]
fn normalize_observation_tracks_and_freezes() {
    let mut env =
        NormalizeObservation::new(pendulum(), NormalizeObservationParams::default().check().unwrap()).unwrap();
    let mut raw = pendulum();
    let (mut r1, mut r2) = (rl_core::rng_from_seed(2), rl_core::rng_from_seed(2));
    env.reset(&mut r1).unwrap();
    let mut seen = vec![raw.reset(&mut r2).unwrap()];
    let mut last = Array1::zeros(3);
    for t in 0..700 {
        let a = array![(t as f32 * 0.05).sin() * 2.0];
        let s = env.step(a.view()).unwrap();
        let r = raw.step(a.view()).unwrap();
        seen.push(r.obs.clone());
        last = s.obs.clone();
        if s.done() {
            env.reset(&mut r1).unwrap();
            seen.push(raw.reset(&mut r2).unwrap());
        }
    }
    // the statistics are the mean and variance of every raw observation seen
    let n = seen.len() as f64;
    let stats = env.stats();
    for d in 0..3 {
        let m: f64 = seen.iter().map(|z| f64::from(z[d])).sum::<f64>() / n;
        let v: f64 = seen.iter().map(|z| (f64::from(z[d]) - m).powi(2)).sum::<f64>() / n;
        assert!((stats.mean()[d] - m).abs() < 1e-6 && (stats.var()[d] - v).abs() < 1e-5 * v.max(1.0), "dim {d}");
    }
    let x = seen.last().unwrap();
    // the last returned observation is the normalised raw one (last step was not a reset)
    for d in 0..3 {
        let want = ((f64::from(x[d]) - stats.mean()[d]) / (stats.var()[d] + 1e-8).sqrt()).clamp(-10.0, 10.0);
        assert!((f64::from(last[d]) - want).abs() < 1e-5, "dim {d}: {} vs {want}", last[d]);
    }
    env.set_training(false);
    let frozen = env.stats().clone();
    env.step(array![0.0].view()).unwrap();
    assert_eq!(env.stats(), &frozen);
    assert!(NormalizeObservationParams::default().epsilon(0.0).check().is_err());
}

#[test]
fn rescale_action_maps_linearly() {
    let env = RescaleAction::new(pendulum(), -1.0, 1.0).unwrap();
    assert_eq!(env.to_inner(array![-1.0].view()), array![-2.0]);
    assert_eq!(env.to_inner(array![0.5].view()), array![1.0]);
    assert!(RescaleAction::new(CartPole::new(CartPoleParams::default().check().unwrap()).unwrap(), -1.0, 1.0).is_err());
    assert!(RescaleAction::new(pendulum(), 1.0, 1.0).is_err());
    // the wrapped pendulum at a = 0.5 behaves as the raw one at torque 1.0
    let mut w = RescaleAction::new(pendulum(), -1.0, 1.0).unwrap();
    let mut raw = pendulum();
    w.reset(&mut rl_core::rng_from_seed(3)).unwrap();
    raw.reset(&mut rl_core::rng_from_seed(3)).unwrap();
    assert_eq!(w.step(array![0.5].view()).unwrap(), raw.step(array![1.0].view()).unwrap());
}

#[test]
fn vec_env_autoresets_and_checks_actions_first() {
    let mut batch = VecEnv::from_fn(4, 1, |i| TimeLimit::new(pendulum(), 3 + i)).unwrap();
    assert!(VecEnv::<Pendulum>::new(vec![], 0).is_err());
    let obs0 = batch.reset().unwrap();
    // each env resets from its own stream
    assert_ne!(obs0.row(0), obs0.row(1));
    let mut ends = vec![0; 4];
    for _ in 0..12 {
        let s = batch.step(Array2::zeros((4, 1)).view()).unwrap();
        for (i, end) in ends.iter_mut().enumerate() {
            assert_eq!(s.final_obs[i].is_some(), s.truncated[i]);
            if s.truncated[i] {
                *end += 1;
            }
        }
    }
    assert_eq!(ends, [4, 3, 2, 2]);
    assert!(matches!(batch.step(Array2::zeros((3, 1)).view()), Err(EnvError::Shape { .. })));
    let before = batch.snapshot();
    let mut bad = Array2::zeros((4, 1));
    bad[[2, 0]] = f32::NAN;
    assert!(matches!(batch.step(bad.view()), Err(EnvError::InBatch { index: 2, .. })));
    assert_eq!(batch.snapshot(), before, "a rejected action must not move any environment");
    // the batch resumes bit-identically
    let mut other = VecEnv::from_fn(4, 99, |i| TimeLimit::new(pendulum(), 3 + i)).unwrap();
    other.restore(&serde_json::from_str(&serde_json::to_string(&before).unwrap()).unwrap()).unwrap();
    let acts = Array2::from_shape_fn((4, 1), |(i, _)| i as f32 * 0.4 - 0.6);
    for _ in 0..10 {
        assert_eq!(batch.step(acts.view()).unwrap(), other.step(acts.view()).unwrap());
    }
}

fn run_multi<E: rl_envs::MultiAgentEnv>(
    env: &mut E,
    actions: &[Vec<Array1<f32>>],
    rng: &mut SeededRng,
) -> Vec<rl_envs::MultiStep> {
    actions
        .iter()
        .map(|a| {
            let s = env.step(a).unwrap();
            if s.done() {
                env.reset(rng).unwrap();
            }
            s
        })
        .collect()
}

#[test]
fn particle_worlds_resume_bit_identically() {
    use rl_envs::mpe::{SimpleAdversary, SimpleAdversaryParams, SimpleTag, SimpleTagParams};
    use rl_envs::wrappers::{EpisodicRewardMulti, MultiRewardSplit};
    let mut r = SeededRng::seed_from_u64(12);
    let acts: Vec<Vec<Array1<f32>>> =
        (0..90).map(|_| (0..4).map(|_| array![r.random_range(0..5) as f32]).collect()).collect();
    let tag = || SimpleTag::new(SimpleTagParams::default().check().unwrap()).unwrap();
    for k in [0, 13, 40] {
        let mut a = tag();
        let mut ra = rl_core::rng_from_seed(3);
        a.reset(&mut ra).unwrap();
        let full = run_multi(&mut a, &acts, &mut ra);
        let mut b = tag();
        let mut rb = rl_core::rng_from_seed(3);
        b.reset(&mut rb).unwrap();
        let mut got = run_multi(&mut b, &acts[..k], &mut rb);
        let json = serde_json::to_string(&b.snapshot()).unwrap();
        let mut c = tag();
        c.restore(&serde_json::from_str(&json).unwrap()).unwrap();
        got.extend(run_multi(&mut c, &acts[k..], &mut rb));
        assert_eq!(full, got, "k = {k}");
    }
    // the adversary scenario's goal landmark is part of the state
    let adv = || SimpleAdversary::new(SimpleAdversaryParams::default().check().unwrap()).unwrap();
    let acts3: Vec<Vec<Array1<f32>>> = acts.iter().map(|a| a[..3].to_vec()).collect();
    let mut a = adv();
    let mut ra = rl_core::rng_from_seed(5);
    a.reset(&mut ra).unwrap();
    let saved = a.snapshot();
    let x = run_multi(&mut a, &acts3[..10], &mut ra);
    let mut b = adv();
    b.reset(&mut rl_core::rng_from_seed(999)).unwrap();
    b.restore(&saved).unwrap();
    let mut rb = rl_core::rng_from_seed(5);
    assert_eq!(x, run_multi(&mut b, &acts3[..10], &mut rb));
    let mut bad = saved.clone();
    bad.scenario = Some(7);
    assert!(b.restore(&bad).is_err());
    bad.scenario = saved.scenario;
    bad.pos.pop();
    assert!(b.restore(&bad).is_err());

    // episodic multi-agent rewards: LaRe's team return / n at the last step, 0 before
    let mut dense = tag();
    let mut sparse = EpisodicRewardMulti::new(tag(), MultiRewardSplit::TeamMean);
    dense.reset(&mut rl_core::rng_from_seed(1)).unwrap();
    sparse.reset(&mut rl_core::rng_from_seed(1)).unwrap();
    let mut team = 0.0f64;
    for (t, a) in acts.iter().enumerate().take(25) {
        let d = dense.step(a).unwrap();
        let s = sparse.step(a).unwrap();
        team += d.rewards.iter().map(|&r| f64::from(r)).sum::<f64>();
        assert_eq!(sparse.last_dense_rewards(), d.rewards.as_slice());
        if t < 24 {
            assert!(s.rewards.iter().all(|&r| r == 0.0));
        } else {
            assert!(s.done());
            for r in &s.rewards {
                assert!((f64::from(*r) - team / 4.0).abs() < 1e-4, "{r} vs {}", team / 4.0);
            }
        }
    }
    resume_multi_wrapper();
}

fn resume_multi_wrapper() {
    use rl_envs::mpe::{SimpleSpread, SimpleSpreadParams};
    use rl_envs::wrappers::{EpisodicRewardMulti, MultiRewardSplit};
    let make = || {
        EpisodicRewardMulti::new(
            SimpleSpread::new(SimpleSpreadParams::default().continuous_actions(true).check().unwrap()).unwrap(),
            MultiRewardSplit::PerAgent,
        )
    };
    let mut r = SeededRng::seed_from_u64(2);
    let acts: Vec<Vec<Array1<f32>>> =
        (0..60).map(|_| (0..3).map(|_| (0..5).map(|_| r.random_range(0.0..1.0)).collect()).collect()).collect();
    let mut a = make();
    let mut ra = rl_core::rng_from_seed(4);
    a.reset(&mut ra).unwrap();
    let full = run_multi(&mut a, &acts, &mut ra);
    let mut b = make();
    let mut rb = rl_core::rng_from_seed(4);
    b.reset(&mut rb).unwrap();
    let mut got = run_multi(&mut b, &acts[..17], &mut rb);
    let mut c = make();
    c.restore(&b.snapshot()).unwrap();
    got.extend(run_multi(&mut c, &acts[17..], &mut rb));
    assert_eq!(full, got);
}
