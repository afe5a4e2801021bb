//! MuJoCo environments (feature `mujoco`): exact resume from snapshots, task parameters that
//! change the physics, typed errors.
#![cfg(feature = "mujoco")]

use ndarray::Array1;
use rand::{Rng, SeedableRng};
use rl_core::{Env, Params, RlCoreError, SeededRng, Step};
use rl_envs::maze::{MazeLayout, PointMazeParams};
use rl_envs::mujoco::{AntParams, HalfCheetahParams, HopperParams, Locomotion, MujocoPointMaze, Walker2dParams};
use rl_envs::{EnvError, Snapshot, TaskParams};

fn actions(n: usize, dim: usize, seed: u64) -> Vec<Array1<f32>> {
    let mut r = SeededRng::seed_from_u64(seed);
    (0..n).map(|_| (0..dim).map(|_| r.random_range(-1.0..1.0)).collect()).collect()
}

fn run<E: Env>(env: &mut E, acts: &[Array1<f32>], rng: &mut SeededRng) -> Vec<Step> {
    acts.iter()
        .map(|a| {
            let s = env.step(a.view()).unwrap();
            if s.done() {
                env.reset(rng).unwrap();
            }
            s
        })
        .collect()
}

fn resume<E: Env + Snapshot>(mut make: impl FnMut() -> E, acts: &[Array1<f32>], k: usize) {
    let mut a = make();
    let mut ra = rl_core::rng_from_seed(1);
    a.reset(&mut ra).unwrap();
    let full = run(&mut a, acts, &mut ra);
    let mut b = make();
    let mut rb = rl_core::rng_from_seed(1);
    b.reset(&mut rb).unwrap();
    let mut got = run(&mut b, &acts[..k], &mut rb);
    let json = serde_json::to_string(&b.snapshot()).unwrap();
    let mut c = make();
    c.restore(&serde_json::from_str(&json).unwrap()).unwrap();
    got.extend(run(&mut c, &acts[k..], &mut rb));
    assert_eq!(full, got);
}

#[test]
fn locomotion_resumes_bit_identically() {
    resume(|| Locomotion::hopper(HopperParams::default().check().unwrap()).unwrap(), &actions(120, 3, 1), 37);
    resume(|| Locomotion::walker2d(Walker2dParams::default().check().unwrap()).unwrap(), &actions(120, 6, 2), 50);
    resume(|| Locomotion::half_cheetah(HalfCheetahParams::default().check().unwrap()).unwrap(), &actions(80, 6, 3), 41);
    let ant = || Locomotion::ant(AntParams::default().use_contact_forces(true).check().unwrap()).unwrap();
    resume(ant, &actions(60, 8, 4), 23);
    resume(
        || MujocoPointMaze::new(PointMazeParams::default().layout(MazeLayout::Medium).check().unwrap()).unwrap(),
        &actions(300, 2, 5),
        151,
    );
}

#[test]
fn task_parameters_change_the_physics_and_are_validated() {
    let mut light = Locomotion::half_cheetah(HalfCheetahParams::default().check().unwrap()).unwrap();
    let mut heavy = light.clone();
    assert_eq!(heavy.task_spec().len(), 3);
    heavy.set_task(&[2.0, 1.0, 1.0]).unwrap();
    assert_eq!(heavy.task(), vec![2.0, 1.0, 1.0]);
    let mut r1 = rl_core::rng_from_seed(0);
    let mut r2 = rl_core::rng_from_seed(0);
    light.reset(&mut r1).unwrap();
    heavy.reset(&mut r2).unwrap();
    let a = Array1::from_elem(6, 1.0f32);
    let (mut xl, mut xh) = (0.0, 0.0);
    for _ in 0..20 {
        xl += f64::from(light.step(a.view()).unwrap().obs[8]);
        xh += f64::from(heavy.step(a.view()).unwrap().obs[8]);
    }
    assert_ne!(xl, xh, "doubling the masses must change the motion");
    assert!(heavy.set_task(&[0.0, 1.0, 1.0]).is_err());
    assert!(heavy.set_task(&[1.0, f64::NAN, 1.0]).is_err());
    assert_eq!(heavy.task(), vec![2.0, 1.0, 1.0]);
    // back to the defaults: the same motion as an unmodified model
    heavy.set_task(&[1.0, 1.0, 1.0]).unwrap();
    let mut fresh = Locomotion::half_cheetah(HalfCheetahParams::default().check().unwrap()).unwrap();
    heavy.reset(&mut rl_core::rng_from_seed(7)).unwrap();
    fresh.reset(&mut rl_core::rng_from_seed(7)).unwrap();
    assert_eq!(heavy.step(a.view()).unwrap(), fresh.step(a.view()).unwrap());
    // the maze ball's mass, damping and gear go into MuJoCo's model
    let mut maze = MujocoPointMaze::new(PointMazeParams::default().check().unwrap()).unwrap();
    let mut heavy_ball = MujocoPointMaze::new(PointMazeParams::default().check().unwrap()).unwrap();
    heavy_ball.set_task(&[8.0, 1.0, 100.0]).unwrap();
    maze.reset(&mut rl_core::rng_from_seed(2)).unwrap();
    heavy_ball.reset(&mut rl_core::rng_from_seed(2)).unwrap();
    let push = ndarray::array![1.0f32, 0.0];
    let v1 = maze.step(push.view()).unwrap().obs[2];
    let v2 = heavy_ball.step(push.view()).unwrap().obs[2];
    assert!((v1 / v2 - (8.0 + 0.01) / (4.18879 + 0.01)).abs() < 1e-3, "{v1} {v2}");
}

#[test]
fn bad_input_is_a_typed_error() {
    let mut env = Locomotion::hopper(HopperParams::default().check().unwrap()).unwrap();
    assert!(matches!(env.step(Array1::zeros(3).view()), Err(RlCoreError::NeedsReset)));
    env.reset(&mut rl_core::rng_from_seed(0)).unwrap();
    assert!(matches!(env.step(Array1::zeros(4).view()), Err(RlCoreError::ShapeMismatch { .. })));
    assert!(matches!(
        env.step(ndarray::array![0.0, f32::NAN, 0.0].view()),
        Err(RlCoreError::NonFinite { index: 1, .. })
    ));
    assert!(matches!(env.reset_to_state(&[0.0; 5], &[0.0; 6]), Err(EnvError::Shape { .. })));
    let mut bad = env.snapshot();
    bad.physics.pop();
    assert!(matches!(env.restore(&bad), Err(EnvError::BadSnapshot { .. })));
    assert!(HopperParams::default().healthy_z_range([1.0, 0.5]).check().is_err());
    // infinite bounds survive a JSON round trip of the parameters
    let json = serde_json::to_string(&HopperParams::default()).unwrap();
    assert!(json.contains("\"inf\""), "{json}");
    let back: HopperParams = serde_json::from_str(&json).unwrap();
    assert_eq!(back, HopperParams::default());
    let missing = Locomotion::hopper(HopperParams::default().assets_dir(Some("/nonexistent".into())).check().unwrap());
    // hopper.xml is still found in the provisioned folder after the explicit one
    assert!(missing.is_ok());
}
