//! The point maze against gymnasium-robotics 1.4.2 (`PointMaze_*-v3`, MuJoCo 3.17; fixtures
//! from `scripts/golden_rl_envs.py maze`): maps, seeded goals and starts, rewards and flags
//! match to 1e-6, and so does the pure-Rust ball's motion, wall contacts included (its soft
//! contact is MuJoCo's model, solved as MuJoCo does). Every step's info and the reset info
//! (`success`) are compared key for key and value for value, including episodes that end at
//! the goal and continuing tasks with `reset_target` whose goal moves each time it is reached.

mod common;

use common::{action, assert_close, assert_info, load, max_rel_err, to_f64, Case};
use rl_core::{Env, Params};
use rl_envs::maze::{MazeLayout, MazeReward, PointMaze, PointMazeEnv, PointMazeParams, PointPhysics};
use rl_envs::rng::NumpyRng;

const TOL: f64 = 1e-6;
const RADIUS: f64 = 0.1;
/// MuJoCo includes a contact below the sum of both geoms' margins (0.002 each in point.xml).
const MARGIN: f64 = 0.004;

pub fn params_for(case: &Case) -> PointMazeParams {
    let name = case.env.trim_start_matches("PointMaze_").trim_end_matches("-v3");
    let dense = name.ends_with("Dense");
    let layout = match name.trim_end_matches("Dense") {
        "Open" => MazeLayout::Open,
        "UMaze" => MazeLayout::UMaze,
        "Medium" => MazeLayout::Medium,
        "Large" => MazeLayout::Large,
        "Medium_Diverse_G" => MazeLayout::MediumDiverseG,
        "Large_Diverse_GR" => MazeLayout::LargeDiverseGr,
        other => panic!("unknown maze {other}"),
    };
    let kwargs = case.extra.get("kwargs").and_then(|v| v.as_object()).cloned().unwrap_or_default();
    let continuing = kwargs.get("continuing_task").and_then(|v| v.as_bool()).unwrap_or(true);
    let reset_target = kwargs.get("reset_target").and_then(|v| v.as_bool()).unwrap_or(false);
    PointMazeParams::default()
        .layout(layout)
        .reward(if dense { MazeReward::Dense } else { MazeReward::Sparse })
        .continuing_task(continuing)
        .reset_target(reset_target)
}

/// The goal in force during step `t` of `case`: the observation of step `t` is computed before
/// gymnasium-robotics moves the goal, so it shows that goal.
fn goal_during(case: &Case, t: usize) -> [f64; 2] {
    [case.obs[t][4], case.obs[t][5]]
}

/// Before step `t`: where gymnasium-robotics moved the goal at the end of step `t − 1`
/// (`reset_target`), checks that `env` moved it too, then puts it where gymnasium's is (the new
/// goal is drawn from another generator here, see `PointMazeEnv`). Returns whether it moved.
pub fn follow_goal<P: PointPhysics>(env: &mut PointMazeEnv<P>, case: &Case, t: usize, what: &str) -> bool {
    if t == 0 {
        return false;
    }
    let (before, now) = (goal_during(case, t - 1), goal_during(case, t));
    if before == now {
        assert_eq!(env.goal(), now, "{what}: the goal must stay");
        return false;
    }
    assert_ne!(env.goal(), before, "{what}: gymnasium-robotics moved the goal, this env did not");
    let (p, g) = (env.position(), env.goal());
    assert!((p[0] - g[0]).hypot(p[1] - g[1]) > env.params().goal_threshold, "{what}: new goal within reach");
    env.set_goal(now).unwrap();
    true
}

fn wall_dists(case: &Case) -> Vec<f64> {
    let mut d = vec![case.extra["reset_wall_dist"].as_f64().unwrap()];
    d.extend(case.extra["wall_dist"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()));
    d
}

#[test]
fn maps_match_gymnasium_robotics() {
    let fixture = load("maze");
    let maps = fixture_maps();
    for (name, layout) in [
        ("OPEN", MazeLayout::Open),
        ("U_MAZE", MazeLayout::UMaze),
        ("MEDIUM_MAZE", MazeLayout::Medium),
        ("LARGE_MAZE", MazeLayout::Large),
        ("OPEN_DIVERSE_G", MazeLayout::OpenDiverseG),
        ("OPEN_DIVERSE_GR", MazeLayout::OpenDiverseGr),
        ("MEDIUM_MAZE_DIVERSE_G", MazeLayout::MediumDiverseG),
        ("MEDIUM_MAZE_DIVERSE_GR", MazeLayout::MediumDiverseGr),
        ("LARGE_MAZE_DIVERSE_G", MazeLayout::LargeDiverseG),
        ("LARGE_MAZE_DIVERSE_GR", MazeLayout::LargeDiverseGr),
    ] {
        let want = &maps[name];
        let got: Vec<String> = layout.rows();
        assert_eq!(&got, want, "{name}");
    }
    assert!(!fixture.cases.is_empty());
}

fn fixture_maps() -> std::collections::HashMap<String, Vec<String>> {
    let path = format!("{}/tests/fixtures/maze.json", env!("CARGO_MANIFEST_DIR"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["maps"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, rows)| {
            let rows = rows
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().iter().map(|c| c.as_str().unwrap().chars().next().unwrap()).collect())
                .collect();
            (k.clone(), rows)
        })
        .collect()
}

#[test]
fn point_maze_matches_gymnasium_robotics() {
    let fixture = load("maze");
    let (mut steps, mut contact_steps, mut worst) = (0usize, 0usize, 0.0f64);
    let (mut successes, mut terminal_successes, mut moves) = (0usize, 0usize, 0usize);
    for case in &fixture.cases {
        let name = format!("{} seed {}", case.env, case.seed);
        let mut env = PointMaze::new(params_for(case).check().unwrap()).unwrap();
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        assert_close(&format!("{name} reset"), &to_f64(&obs), &case.reset_obs, TOL);
        assert_info(&format!("{name} reset"), &env.reset_info(), &case.extra["reset_info"], 0.0);
        let dists = wall_dists(case);
        for (t, a) in case.actions.iter().enumerate() {
            let what = format!("{name} step {t}");
            moves += usize::from(follow_goal(&mut env, case, t, &what));
            let step = env.step(action(a).view()).unwrap();
            assert_info(&what, &step.info, &case.extra["infos"][t], 0.0);
            let success = step.info.get("success") == Some(&rl_core::InfoValue::Bool(true));
            successes += usize::from(success);
            terminal_successes += usize::from(success && step.terminated);
            // MuJoCo's step t+1 sees a contact when the ball starts it within the margin
            if dists[t] - RADIUS < MARGIN {
                contact_steps += 1;
            }
            assert_close(&format!("{what} obs"), &to_f64(&step.obs), &case.obs[t], TOL);
            assert_close(&format!("{what} reward"), &[f64::from(step.reward)], &[case.rewards[t]], TOL);
            assert_eq!(step.terminated, case.terminated[t], "{what} terminated");
            assert_eq!(step.truncated, case.truncated[t], "{what} truncated");
            worst = worst.max(max_rel_err(&to_f64(&step.obs), &case.obs[t]));
            steps += 1;
            if step.done() {
                break;
            }
        }
    }
    eprintln!(
        "point maze: {steps} steps ({contact_steps} with wall contact) matched to {TOL:e}; worst observation error {worst:e}; \
         infos equal ({successes} successes, {terminal_successes} terminal, {moves} goal moves)"
    );
    assert!(contact_steps >= 300, "only {contact_steps} steps with wall contact");
    // the fixture holds episodes that end at the goal and continuing ones whose goal moves
    assert!(successes >= 100 && terminal_successes == 2 && moves >= 5, "{successes} {terminal_successes} {moves}");
}
