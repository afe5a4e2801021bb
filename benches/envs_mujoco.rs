//! MuJoCo environment steps per second on one thread (Hopper, HalfCheetah, Walker2d, Ant,
//! MuJoCo point maze) and a batch of 64 HalfCheetahs stepped together. Each iteration takes
//! 1000 steps (100 rounds for the batch) with fixed pseudo-random actions in `[-1, 1]`,
//! resetting when an episode ends. The Python side by side is `benches/envs_gym.py --mujoco`.
//!
//! `cargo bench --bench envs_mujoco --features mujoco` (after `make provision-mujoco`)
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rl_core::{Env, Params, SeededRng};
use rl_envs::maze::{MazeLayout, PointMazeParams};
use rl_envs::mujoco::{AntParams, HalfCheetahParams, HopperParams, Locomotion, MujocoPointMaze, Walker2dParams};
use rl_envs::wrappers::VecEnv;

const STEPS: usize = 1000;
const BATCH: usize = 64;

fn bench_single<E: Env>(c: &mut Criterion, name: &str, mut env: E) {
    let dim = env.action_space().dim();
    let mut r = SeededRng::seed_from_u64(0);
    let acts: Vec<Array1<f32>> = (0..STEPS).map(|_| (0..dim).map(|_| r.random_range(-1.0..1.0)).collect()).collect();
    let mut g = c.benchmark_group("envs_mujoco/step");
    g.sample_size(10).measurement_time(Duration::from_secs(5)).throughput(Throughput::Elements(STEPS as u64));
    let mut rng = rl_core::rng_from_seed(1);
    env.reset(&mut rng).expect("reset");
    g.bench_function(name, |b| {
        b.iter(|| {
            for a in &acts {
                let s = env.step(a.view()).expect("step");
                if s.done() {
                    env.reset(&mut rng).expect("reset");
                }
                black_box(&s);
            }
        })
    });
    g.finish();
}

fn cheetah() -> rl_envs::Result<Locomotion> {
    Locomotion::half_cheetah(HalfCheetahParams::default().check()?)
}

fn bench(c: &mut Criterion) {
    bench_single(c, "Hopper-v4", Locomotion::hopper(HopperParams::default().check().expect("p")).expect("env"));
    bench_single(c, "HalfCheetah-v4", cheetah().expect("env"));
    bench_single(c, "Walker2d-v4", Locomotion::walker2d(Walker2dParams::default().check().expect("p")).expect("env"));
    bench_single(c, "Ant-v4", Locomotion::ant(AntParams::default().check().expect("p")).expect("env"));
    let maze = MujocoPointMaze::new(PointMazeParams::default().layout(MazeLayout::Medium).check().expect("p"));
    bench_single(c, "PointMaze_Medium-v3 (MuJoCo)", maze.expect("env"));

    let mut batch = VecEnv::from_fn(BATCH, 0, |_| cheetah()).expect("batch");
    batch.reset().expect("reset");
    let mut r = SeededRng::seed_from_u64(0);
    let rounds = 100;
    let acts: Vec<Array2<f32>> =
        (0..rounds).map(|_| Array2::from_shape_fn((BATCH, 6), |_| r.random_range(-1.0..1.0))).collect();
    let mut g = c.benchmark_group("envs_mujoco/batch64");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements((rounds * BATCH) as u64));
    g.bench_function("HalfCheetah-v4", |b| {
        b.iter(|| {
            for a in &acts {
                black_box(batch.step(a.view()).expect("step"));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
