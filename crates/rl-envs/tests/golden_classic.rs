//! Classic control against gymnasium 1.4 (fixtures from `scripts/golden_rl_envs.py classic`):
//! resets with `NumpyRng::new(seed)` equal gymnasium's `reset(seed=seed)`, and every step's
//! observation, reward and flags match to 1e-6 (relative to `max(1, |x|)`).

mod common;

use common::{action, assert_close, load, max_rel_err, to_f64};
use rl_core::{Env, Params};
use rl_envs::classic::{
    CartPole, CartPoleParams, MountainCarContinuous, MountainCarContinuousParams, Pendulum, PendulumParams,
};
use rl_envs::rng::NumpyRng;

const TOL: f64 = 1e-6;

fn make(id: &str) -> Box<dyn Env> {
    match id {
        "Pendulum-v1" => Box::new(Pendulum::new(PendulumParams::default().check().unwrap()).unwrap()),
        "CartPole-v1" => Box::new(CartPole::new(CartPoleParams::default().check().unwrap()).unwrap()),
        "MountainCarContinuous-v0" => {
            Box::new(MountainCarContinuous::new(MountainCarContinuousParams::default().check().unwrap()).unwrap())
        }
        other => panic!("unknown env {other}"),
    }
}

#[test]
fn classic_control_matches_gymnasium() {
    let fixture = load("classic");
    assert!(fixture.cases.len() >= 10);
    let mut worst = 0.0f64;
    for case in &fixture.cases {
        let name = format!("{} seed {}", case.env, case.seed);
        let mut env = make(&case.env);
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        assert_close(&format!("{name} reset"), &to_f64(&obs), &case.reset_obs, TOL);
        for (t, a) in case.actions.iter().enumerate() {
            let step = env.step(action(a).view()).unwrap();
            let what = format!("{name} step {t}");
            assert_close(&format!("{what} obs"), &to_f64(&step.obs), &case.obs[t], TOL);
            assert_close(&format!("{what} reward"), &[f64::from(step.reward)], &[case.rewards[t]], TOL);
            assert_eq!(step.terminated, case.terminated[t], "{what} terminated");
            assert_eq!(step.truncated, case.truncated[t], "{what} truncated");
            worst = worst.max(max_rel_err(&to_f64(&step.obs), &case.obs[t]));
        }
        // the episode is over where gymnasium's is
        assert!(env.step(action(&case.actions[0]).view()).is_err(), "{name}: stepped past the end");
    }
    eprintln!("classic control: worst observation error {worst:e}");
}

/// CartPole stepped on after termination (`scripts/golden_rl_envs.py cartpole_after`): with
/// `continue_after_termination`, observations, rewards (0, or −1 with Sutton and Barto's reward,
/// while still terminated; the ordinary reward when the state comes back inside the
/// thresholds), flags and `steps_beyond_terminated` equal gymnasium's, bit for bit.
#[test]
fn cartpole_after_termination_matches_gymnasium() {
    let fixture = load("cartpole_after_termination");
    assert!(fixture.cases.len() >= 4);
    let (mut beyond_steps, mut back_inside) = (0, 0);
    for case in &fixture.cases {
        let name = format!("{} seed {} {:?}", case.env, case.seed, case.extra["kwargs"]);
        let sutton_barto = case.extra["kwargs"].get("sutton_barto_reward").and_then(|v| v.as_bool()).unwrap_or(false);
        let p = CartPoleParams::default().continue_after_termination(true).sutton_barto_reward(sutton_barto);
        let mut env = CartPole::new(p.check().unwrap()).unwrap();
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        assert_close(&format!("{name} reset"), &to_f64(&obs), &case.reset_obs, 0.0);
        assert_eq!(env.steps_beyond_terminated(), None);
        let beyond = case.extra["steps_beyond_terminated"].as_array().unwrap();
        for (t, a) in case.actions.iter().enumerate() {
            let step = env.step(action(a).view()).unwrap();
            let what = format!("{name} step {t}");
            assert_close(&format!("{what} obs"), &to_f64(&step.obs), &case.obs[t], 0.0);
            assert_eq!(f64::from(step.reward), case.rewards[t], "{what} reward");
            assert_eq!(step.terminated, case.terminated[t], "{what} terminated");
            assert_eq!(step.truncated, case.truncated[t], "{what} truncated");
            let want = beyond[t].as_u64().map(|v| v as usize);
            assert_eq!(env.steps_beyond_terminated(), want, "{what} steps_beyond_terminated");
            if want.is_some_and(|b| b > 0) {
                beyond_steps += 1;
                back_inside += usize::from(!step.terminated);
            }
        }
    }
    // both branches were exercised: still terminated (reward 0 / −1) and back inside
    assert!(beyond_steps >= 100 && back_inside >= 20, "{beyond_steps} steps beyond, {back_inside} back inside");
    // without the flag a step after termination is an error, as before
    let mut env = CartPole::new(CartPoleParams::default().check().unwrap()).unwrap();
    env.reset(&mut NumpyRng::new(0)).unwrap();
    while !env.step(action(&[1.0]).view()).unwrap().terminated {}
    assert!(env.step(action(&[1.0]).view()).is_err());
}
