//! MuJoCo environments against gymnasium 1.4 on mujoco 3.17.0 (feature `mujoco`; fixtures from
//! `scripts/golden_rl_envs.py mujoco` and `maze`): Hopper, Walker2d, HalfCheetah and Ant
//! (with and without contact forces) step for step to 1e-4, seeded resets (Hopper and
//! Walker2d fully, HalfCheetah and Ant their uniform position noise), terminations and the
//! time limit; the MuJoCo point maze against gymnasium-robotics on every fixture step,
//! wall contacts included, with its step and reset infos (`success`) equal.
#![cfg(feature = "mujoco")]

mod common;

use common::{action, assert_close, assert_info, load, max_rel_err, to_f64};
use rl_core::{Env, InfoValue, Params};
use rl_envs::maze::{MazeLayout, MazeReward, PointMazeParams};
use rl_envs::mujoco::{AntParams, HalfCheetahParams, HopperParams, Locomotion, MujocoPointMaze, Walker2dParams};
use rl_envs::rng::NumpyRng;

const TOL: f64 = 1e-4;
/// Info fields are float64 in both (no observation cast): compared exactly.
const INFO_TOL: f64 = 0.0;

fn f64s(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

#[test]
fn locomotion_matches_gymnasium() {
    let fixture = load("mujoco");
    let (mut worst, mut worst_info) = (0.0f64, 0.0f64);
    let (mut steps, mut exact_rewards) = (0, 0);
    for case in &fixture.cases {
        let name = format!("{} seed {} {:?}", case.env, case.seed, case.extra["kwargs"]);
        let kwargs = case.extra["kwargs"].as_object().unwrap();
        let limit = kwargs.get("max_episode_steps").and_then(|v| v.as_u64()).map_or(1000, |v| v as usize);
        let contact = kwargs.get("use_contact_forces").and_then(|v| v.as_bool()).unwrap_or(false);
        let mut env = match case.env.as_str() {
            "Hopper-v4" => Locomotion::hopper(HopperParams::default().max_episode_steps(limit).check().unwrap()),
            "Walker2d-v4" => Locomotion::walker2d(Walker2dParams::default().max_episode_steps(limit).check().unwrap()),
            "HalfCheetah-v4" => Locomotion::half_cheetah(HalfCheetahParams::default().check().unwrap()),
            "Ant-v4" => Locomotion::ant(AntParams::default().use_contact_forces(contact).check().unwrap()),
            other => panic!("unknown env {other}"),
        }
        .unwrap();
        let qpos = f64s(&case.extra["reset_qpos"]);
        let qvel = f64s(&case.extra["reset_qvel"]);
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        // uniform position noise: NumpyRng reproduces gymnasium's draws exactly
        assert_close(&format!("{name} reset qpos"), env.qpos(), &qpos, 0.0);
        if matches!(case.env.as_str(), "Hopper-v4" | "Walker2d-v4") {
            assert_close(&format!("{name} reset qvel"), env.qvel(), &qvel, 0.0);
            assert_close(&format!("{name} reset obs"), &to_f64(&obs), &case.reset_obs, TOL);
        } else {
            // normal velocity noise: start from gymnasium's reset state
            let obs = env.reset_to_state(&qpos, &qvel).unwrap();
            assert_close(&format!("{name} reset obs"), &to_f64(&obs), &case.reset_obs, TOL);
        }
        for (t, a) in case.actions.iter().enumerate() {
            let step = env.step(action(a).view()).unwrap();
            let what = format!("{name} step {t}");
            assert_close(&format!("{what} obs"), &to_f64(&step.obs), &case.obs[t], TOL);
            assert_close(&format!("{what} reward"), &[f64::from(step.reward)], &[case.rewards[t]], TOL);
            assert_eq!(step.terminated, case.terminated[t], "{what} terminated");
            assert_eq!(step.truncated, case.truncated[t], "{what} truncated");
            worst_info = worst_info.max(assert_info(&what, &step.info, &case.extra["infos"][t], INFO_TOL));
            worst = worst.max(max_rel_err(&to_f64(&step.obs), &case.obs[t]));
            // gymnasium's reward is float64; ours is its float32 rounding
            exact_rewards += usize::from(step.reward == case.rewards[t] as f32);
            steps += 1;
        }
    }
    // with NumPy 2's summation order every reward is gymnasium's, rounded to float32
    assert_eq!(exact_rewards, steps, "rewards equal to gymnasium's rounded to float32");
    eprintln!(
        "mujoco locomotion: {steps} steps matched to {TOL:e} (worst observation error {worst:e}), \
         infos to {INFO_TOL:e} (worst {worst_info:e}), {exact_rewards} rewards bit-identical (float32)"
    );
}

#[test]
fn mujoco_point_maze_matches_gymnasium_robotics_with_contacts() {
    let fixture = load("maze");
    let (mut steps, mut worst, mut successes, mut moves) = (0, 0.0f64, 0usize, 0usize);
    for case in &fixture.cases {
        let name = format!("{} seed {}", case.env, case.seed);
        let stem = case.env.trim_start_matches("PointMaze_").trim_end_matches("-v3");
        let layout = match stem.trim_end_matches("Dense") {
            "Open" => MazeLayout::Open,
            "UMaze" => MazeLayout::UMaze,
            "Medium" => MazeLayout::Medium,
            "Large" => MazeLayout::Large,
            "Medium_Diverse_G" => MazeLayout::MediumDiverseG,
            "Large_Diverse_GR" => MazeLayout::LargeDiverseGr,
            other => panic!("unknown maze {other}"),
        };
        let flag = |k: &str, default: bool| case.extra["kwargs"].get(k).and_then(|v| v.as_bool()).unwrap_or(default);
        let params = PointMazeParams::default()
            .layout(layout)
            .reward(if stem.ends_with("Dense") { MazeReward::Dense } else { MazeReward::Sparse })
            .continuing_task(flag("continuing_task", true))
            .reset_target(flag("reset_target", false));
        let mut env = MujocoPointMaze::new(params.check().unwrap()).unwrap();
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        assert_close(&format!("{name} reset"), &to_f64(&obs), &case.reset_obs, TOL);
        assert_info(&format!("{name} reset"), &env.reset_info(), &case.extra["reset_info"], 0.0);
        for (t, a) in case.actions.iter().enumerate() {
            let what = format!("{name} step {t}");
            // reset_target: where gymnasium-robotics moved the goal after step t - 1 (its
            // observation at t shows the goal in force), this env must have moved it too; the
            // new goal comes from another generator, so it is set to gymnasium's
            let goal = |t: usize| [case.obs[t][4], case.obs[t][5]];
            if t > 0 && goal(t) != goal(t - 1) {
                assert_ne!(env.goal(), goal(t - 1), "{what}: the goal did not move");
                env.set_goal(goal(t)).unwrap();
                moves += 1;
            }
            assert_eq!(env.goal(), goal(t), "{what}: goal");
            let step = env.step(action(a).view()).unwrap();
            // `success` is a bool: compared exactly
            assert_info(&what, &step.info, &case.extra["infos"][t], 0.0);
            successes += usize::from(step.info.get("success") == Some(&InfoValue::Bool(true)));
            assert_close(&format!("{what} obs"), &to_f64(&step.obs), &case.obs[t], TOL);
            assert_close(&format!("{what} reward"), &[f64::from(step.reward)], &[case.rewards[t]], TOL);
            assert_eq!((step.terminated, step.truncated), (case.terminated[t], case.truncated[t]), "{what}");
            worst = worst.max(max_rel_err(&to_f64(&step.obs), &case.obs[t]));
            steps += 1;
        }
    }
    eprintln!(
        "mujoco point maze: {steps} steps matched to {TOL:e} (worst observation error {worst:e}); \
         infos equal ({successes} successes, {moves} goal moves)"
    );
    assert!(successes >= 100 && moves >= 5, "{successes} successes, {moves} goal moves");
}
