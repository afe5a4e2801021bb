//! InvertedPendulum, InvertedDoublePendulum, Reacher, Pusher (gymnasium v5, and v4 where
//! gymnasium runs it on MuJoCo 3) and Humanoid (v5 and v4) against gymnasium 1.4 on mujoco
//! 3.17.0 (feature `mujoco`; fixture from `scripts/golden_mujoco_v5_more.py`): every fixture
//! step's observation to 1e-4 (measured bit-identical after the float32 cast), reward equal to
//! gymnasium's rounded to float32, flags, and infos exactly; seeded resets reproduced with
//! `NumpyRng` (InvertedDoublePendulum's normal velocity noise excepted: started from
//! gymnasium's reset state).
#![cfg(feature = "mujoco")]

mod common;

use common::{action, assert_close, assert_info, load, max_rel_err, to_f64, Case};
use ndarray::Array1;
use rl_core::{Env, Info, Params};
use rl_envs::mujoco::{
    GymVersion, Humanoid, HumanoidParams, InvertedDoublePendulum, InvertedDoublePendulumParams, InvertedPendulum,
    InvertedPendulumParams, Pusher, PusherParams, Reacher, ReacherParams,
};
use rl_envs::rng::NumpyRng;
use serde_json::Value;

const TOL: f64 = 1e-4;
/// Info fields are float64 in both (no observation cast): compared exactly.
const INFO_TOL: f64 = 0.0;

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn kw<'a>(case: &'a Case, key: &str) -> Option<&'a Value> {
    case.extra["kwargs"].get(key)
}

fn kw_f64(case: &Case, key: &str, default: f64) -> f64 {
    kw(case, key).and_then(Value::as_f64).unwrap_or(default)
}

fn kw_usize(case: &Case, key: &str, default: usize) -> usize {
    kw(case, key).and_then(Value::as_u64).map_or(default, |v| v as usize)
}

fn kw_bool(case: &Case, key: &str, default: bool) -> bool {
    kw(case, key).and_then(Value::as_bool).unwrap_or(default)
}

fn kw_range(case: &Case, key: &str, default: [f64; 2]) -> [f64; 2] {
    kw(case, key).map_or(default, |v| {
        let r = f64s(v);
        [r[0], r[1]]
    })
}

fn version(case: &Case) -> GymVersion {
    if case.env.ends_with("-v4") {
        GymVersion::V4
    } else {
        GymVersion::V5
    }
}

/// What the runner needs of an environment beyond [`Env`].
trait Replay: Env {
    fn qpos_qvel(&self) -> (Vec<f64>, Vec<f64>);
    fn start_from(&mut self, qpos: &[f64], qvel: &[f64]) -> Array1<f32>;
    /// The reset's info (Humanoid-v5 has one).
    fn reset_info(&self) -> Info {
        Info::default()
    }
}

macro_rules! replay {
    ($t:ty) => {
        impl Replay for $t {
            fn qpos_qvel(&self) -> (Vec<f64>, Vec<f64>) {
                (self.qpos().to_vec(), self.qvel().to_vec())
            }
            fn start_from(&mut self, qpos: &[f64], qvel: &[f64]) -> Array1<f32> {
                self.reset_to_state(qpos, qvel).unwrap()
            }
        }
    };
}
replay!(InvertedPendulum);
replay!(InvertedDoublePendulum);
replay!(Reacher);
replay!(Pusher);

impl Replay for Humanoid {
    fn qpos_qvel(&self) -> (Vec<f64>, Vec<f64>) {
        (self.qpos().to_vec(), self.qvel().to_vec())
    }
    fn start_from(&mut self, qpos: &[f64], qvel: &[f64]) -> Array1<f32> {
        self.reset_to_state(qpos, qvel).unwrap()
    }
    fn reset_info(&self) -> Info {
        Humanoid::reset_info(self)
    }
}

#[derive(Default)]
struct Tally {
    steps: usize,
    exact_rewards: usize,
    exact_obs: usize,
    worst_obs: f64,
    worst_info: f64,
    terminations: usize,
    truncations: usize,
}

/// Replays `case`: seeded reset (its state compared exactly when `seeded_reset`, otherwise
/// restarted from gymnasium's reset state), then every step.
fn run(env: &mut dyn Replay, case: &Case, seeded_reset: bool, tally: &mut Tally) {
    let name = format!("{} seed {} {}", case.env, case.seed, case.extra["kwargs"]);
    let qpos = f64s(&case.extra["reset_qpos"]);
    let qvel = f64s(&case.extra["reset_qvel"]);
    let mut obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
    let (q, v) = env.qpos_qvel();
    if seeded_reset {
        assert_close(&format!("{name} reset qpos"), &q, &qpos, 0.0);
        assert_close(&format!("{name} reset qvel"), &v, &qvel, 0.0);
    } else {
        // only the uniform position noise is NumPy's
        assert_close(&format!("{name} reset qpos"), &q, &qpos, 0.0);
        obs = env.start_from(&qpos, &qvel);
    }
    assert_close(&format!("{name} reset obs"), &to_f64(&obs), &case.reset_obs, TOL);
    tally.worst_info = tally.worst_info.max(assert_info(
        &format!("{name} reset"),
        &env.reset_info(),
        &case.extra["reset_info"],
        INFO_TOL,
    ));
    assert_eq!(env.observation_space().dim(), case.reset_obs.len(), "{name} observation size");
    for (t, a) in case.actions.iter().enumerate() {
        let step = env.step(action(a).view()).unwrap();
        let what = format!("{name} step {t}");
        assert_close(&format!("{what} obs"), &to_f64(&step.obs), &case.obs[t], TOL);
        assert_close(&format!("{what} reward"), &[f64::from(step.reward)], &[case.rewards[t]], TOL);
        assert_eq!(step.terminated, case.terminated[t], "{what} terminated");
        assert_eq!(step.truncated, case.truncated[t], "{what} truncated");
        tally.worst_info = tally.worst_info.max(assert_info(&what, &step.info, &case.extra["infos"][t], INFO_TOL));
        tally.worst_obs = tally.worst_obs.max(max_rel_err(&to_f64(&step.obs), &case.obs[t]));
        // gymnasium's reward is float64 (an int for InvertedPendulum-v5); ours is its float32 rounding
        tally.exact_rewards += usize::from(step.reward == case.rewards[t] as f32);
        tally.exact_obs += usize::from(step.obs.iter().zip(&case.obs[t]).all(|(g, w)| *g == *w as f32));
        tally.terminations += usize::from(step.terminated);
        tally.truncations += usize::from(step.truncated);
        tally.steps += 1;
    }
}

fn cases(prefix: &str) -> Vec<Case> {
    let cases: Vec<Case> = load("mujoco_v5_more").cases.into_iter().filter(|c| c.env.starts_with(prefix)).collect();
    assert!(!cases.is_empty(), "no {prefix} case in the fixture");
    cases
}

fn report(what: &str, t: &Tally) {
    assert_eq!(t.exact_rewards, t.steps, "{what}: rewards equal to gymnasium's rounded to float32");
    assert_eq!(t.exact_obs, t.steps, "{what}: observations equal to gymnasium's rounded to float32");
    eprintln!(
        "{what}: {} steps matched to {TOL:e} (worst observation error {:e}; {} observations equal to gymnasium's \
         rounded to float32), infos to {INFO_TOL:e} (worst {:e}), {} rewards bit-identical (float32), \
         {} terminations, {} truncations",
        t.steps, t.worst_obs, t.exact_obs, t.worst_info, t.exact_rewards, t.terminations, t.truncations
    );
}

#[test]
fn inverted_pendulum_matches_gymnasium() {
    let mut tally = Tally::default();
    for case in cases("InvertedPendulum-") {
        let p = InvertedPendulumParams::default()
            .version(version(&case))
            .frame_skip(kw_usize(&case, "frame_skip", 2))
            .reset_noise_scale(kw_f64(&case, "reset_noise_scale", 0.01))
            .max_episode_steps(kw_usize(&case, "max_episode_steps", 1000));
        let mut env = InvertedPendulum::new(p.check().unwrap()).unwrap();
        run(&mut env, &case, true, &mut tally);
    }
    assert!(tally.terminations >= 2 && tally.truncations >= 1, "fixture covers terminations and the time limit");
    report("InvertedPendulum", &tally);
}

#[test]
fn inverted_double_pendulum_matches_gymnasium() {
    let mut tally = Tally::default();
    for case in cases("InvertedDoublePendulum-") {
        let p = InvertedDoublePendulumParams::default()
            .version(version(&case))
            .frame_skip(kw_usize(&case, "frame_skip", 5))
            .healthy_reward(kw_f64(&case, "healthy_reward", 10.0))
            .reset_noise_scale(kw_f64(&case, "reset_noise_scale", 0.1));
        let mut env = InvertedDoublePendulum::new(p.check().unwrap()).unwrap();
        run(&mut env, &case, false, &mut tally);
    }
    assert!(tally.terminations >= 3, "fixture covers terminations");
    report("InvertedDoublePendulum", &tally);
}

#[test]
fn v4_rejects_v5_only_parameters_and_xml_file_is_the_callers() {
    let e = InvertedPendulumParams::default().version(GymVersion::V4).frame_skip(3).check().unwrap_err();
    assert!(e.to_string().contains("frame_skip"), "{e}");
    let e = InvertedDoublePendulumParams::default().version(GymVersion::V4).healthy_reward(5.0).check().unwrap_err();
    assert!(e.to_string().contains("healthy_reward"), "{e}");
    let e = InvertedPendulum::new(
        InvertedPendulumParams::default().xml_file(Some("/nonexistent/pendulum.xml".into())).check().unwrap(),
    )
    .unwrap_err();
    assert!(matches!(e, rl_envs::EnvError::Missing { .. }) && e.to_string().contains("/nonexistent"), "{e}");
    // the wheel's own file passed as the caller's path gives the same environment
    let path = rl_envs::mujoco::find_asset("inverted_pendulum.xml", None).unwrap();
    let mut a = InvertedPendulum::new(InvertedPendulumParams::default().xml_file(Some(path)).check().unwrap()).unwrap();
    let mut b = InvertedPendulum::new(InvertedPendulumParams::default().check().unwrap()).unwrap();
    let (oa, ob) = (a.reset(&mut NumpyRng::new(3)).unwrap(), b.reset(&mut NumpyRng::new(3)).unwrap());
    assert_eq!(oa, ob);
    let act = ndarray::arr1(&[0.5f32]);
    assert_eq!(a.step(act.view()).unwrap().obs, b.step(act.view()).unwrap().obs);
}

#[test]
fn reacher_matches_gymnasium() {
    let mut tally = Tally::default();
    for case in cases("Reacher-") {
        let p = ReacherParams::default()
            .version(version(&case))
            .frame_skip(kw_usize(&case, "frame_skip", 2))
            .reward_dist_weight(kw_f64(&case, "reward_dist_weight", 1.0))
            .reward_control_weight(kw_f64(&case, "reward_control_weight", 1.0));
        let mut env = Reacher::new(p.check().unwrap()).unwrap();
        // the goal's rejection sampling included
        run(&mut env, &case, true, &mut tally);
    }
    assert!(tally.truncations >= 2, "fixture covers the time limit");
    report("Reacher", &tally);
}

#[test]
fn pusher_matches_gymnasium() {
    let mut tally = Tally::default();
    for case in cases("Pusher-") {
        let p = PusherParams::default()
            .frame_skip(kw_usize(&case, "frame_skip", 5))
            .reward_near_weight(kw_f64(&case, "reward_near_weight", 0.5))
            .reward_dist_weight(kw_f64(&case, "reward_dist_weight", 1.0))
            .reward_control_weight(kw_f64(&case, "reward_control_weight", 0.1));
        let mut env = Pusher::new(p.check().unwrap()).unwrap();
        run(&mut env, &case, true, &mut tally);
    }
    assert!(tally.truncations >= 1, "fixture covers the time limit");
    report("Pusher", &tally);
}

#[test]
fn humanoid_matches_gymnasium() {
    let mut tally = Tally::default();
    for case in cases("Humanoid-") {
        let d = HumanoidParams::default();
        let p = HumanoidParams::default()
            .version(version(&case))
            .frame_skip(kw_usize(&case, "frame_skip", 5))
            .forward_reward_weight(kw_f64(&case, "forward_reward_weight", d.forward_reward_weight))
            .ctrl_cost_weight(kw_f64(&case, "ctrl_cost_weight", d.ctrl_cost_weight))
            .contact_cost_weight(kw_f64(&case, "contact_cost_weight", d.contact_cost_weight))
            .contact_cost_range(kw_range(&case, "contact_cost_range", d.contact_cost_range))
            .healthy_reward(kw_f64(&case, "healthy_reward", d.healthy_reward))
            .terminate_when_unhealthy(kw_bool(&case, "terminate_when_unhealthy", true))
            .healthy_z_range(kw_range(&case, "healthy_z_range", d.healthy_z_range))
            .reset_noise_scale(kw_f64(&case, "reset_noise_scale", d.reset_noise_scale))
            .exclude_current_positions_from_observation(kw_bool(
                &case,
                "exclude_current_positions_from_observation",
                true,
            ))
            .include_cinert_in_observation(kw_bool(&case, "include_cinert_in_observation", true))
            .include_cvel_in_observation(kw_bool(&case, "include_cvel_in_observation", true))
            .include_qfrc_actuator_in_observation(kw_bool(&case, "include_qfrc_actuator_in_observation", true))
            .include_cfrc_ext_in_observation(kw_bool(&case, "include_cfrc_ext_in_observation", true));
        let mut env = Humanoid::new(p.check().unwrap()).unwrap();
        run(&mut env, &case, true, &mut tally);
    }
    assert!(tally.terminations >= 2, "fixture covers terminations");
    report("Humanoid", &tally);
}

#[test]
fn humanoid_v4_rejects_v5_only_parameters() {
    let v4 = || HumanoidParams::default().version(GymVersion::V4);
    for (p, name) in [
        (v4().include_cvel_in_observation(false), "include_cvel_in_observation"),
        (v4().contact_cost_weight(1e-3), "contact_cost_weight"),
        (v4().frame_skip(3), "frame_skip"),
    ] {
        let e = p.check().unwrap_err();
        assert!(e.to_string().contains(name), "{e}");
    }
    let e = HumanoidParams::default().contact_cost_range([1.0, 0.0]).check().unwrap_err();
    assert!(e.to_string().contains("contact_cost_range"), "{e}");
    assert!(v4().ctrl_cost_weight(0.3).healthy_z_range([1.2, 2.0]).check().is_ok());
}

/// Snapshots restore every environment exactly; a foreign snapshot, a step outside an episode
/// and a NaN or wrong-length action are typed errors.
#[test]
fn snapshots_restore_and_bad_input_is_an_error() {
    use rl_envs::mujoco::MujocoState;
    use rl_envs::{EnvError, Snapshot};

    fn check<E: Env + Snapshot<State = MujocoState>>(mut env: E, name: &str) {
        let dim = env.action_space().dim();
        let a = ndarray::Array1::from_elem(dim, 0.1f32);
        assert!(env.step(a.view()).is_err(), "{name}: step before reset");
        env.reset(&mut NumpyRng::new(5)).unwrap();
        env.step(a.view()).unwrap();
        let snap = env.snapshot();
        let first: Vec<_> = (0..3).map(|_| env.step(a.view()).unwrap()).collect();
        env.restore(&snap).unwrap();
        for (t, want) in first.iter().enumerate() {
            let got = env.step(a.view()).unwrap();
            assert_eq!((&got.obs, got.reward), (&want.obs, want.reward), "{name}: step {t} after restore");
        }
        let mut bad = snap.clone();
        bad.carry.push(0.0);
        assert!(matches!(env.restore(&bad), Err(EnvError::BadSnapshot { .. })), "{name}: extra carried value");
        let mut bad = snap.clone();
        bad.physics.pop();
        assert!(matches!(env.restore(&bad), Err(EnvError::BadSnapshot { .. })), "{name}: short snapshot");
        let mut nan = snap.clone();
        nan.physics[1] = f64::NAN;
        assert!(matches!(env.restore(&nan), Err(EnvError::BadSnapshot { .. })), "{name}: NaN snapshot");
        let wrong = ndarray::Array1::from_elem(dim + 1, 0.0f32);
        assert!(env.step(wrong.view()).is_err(), "{name}: wrong action length");
        let mut nan_action = a.clone();
        nan_action[0] = f32::NAN;
        assert!(env.step(nan_action.view()).is_err(), "{name}: NaN action");
        assert!(env.step(a.view()).is_ok(), "{name}: the episode goes on after rejected actions");
    }
    check(InvertedPendulum::new(InvertedPendulumParams::default().check().unwrap()).unwrap(), "InvertedPendulum");
    check(
        InvertedDoublePendulum::new(InvertedDoublePendulumParams::default().check().unwrap()).unwrap(),
        "InvertedDoublePendulum",
    );
    check(Reacher::new(ReacherParams::default().check().unwrap()).unwrap(), "Reacher");
    check(Reacher::new(ReacherParams::default().version(GymVersion::V4).check().unwrap()).unwrap(), "Reacher-v4");
    check(Pusher::new(PusherParams::default().check().unwrap()).unwrap(), "Pusher");
    check(Humanoid::new(HumanoidParams::default().check().unwrap()).unwrap(), "Humanoid");
    check(Humanoid::new(HumanoidParams::default().version(GymVersion::V4).check().unwrap()).unwrap(), "Humanoid-v4");
}

/// A caller's model without the bodies an environment reads is a typed error.
#[test]
fn xml_file_without_the_needed_bodies_is_an_error() {
    let pendulum = rl_envs::mujoco::find_asset("inverted_pendulum.xml", None).unwrap();
    let e = Reacher::new(ReacherParams::default().xml_file(Some(pendulum.clone())).check().unwrap()).unwrap_err();
    assert!(matches!(e, rl_envs::EnvError::Mujoco(_)), "{e}");
    let e = Pusher::new(PusherParams::default().xml_file(Some(pendulum)).check().unwrap()).unwrap_err();
    assert!(matches!(e, rl_envs::EnvError::Mujoco(_)), "{e}");
}
