//! Environment steps per second on one thread, for every pure-Rust environment of `rl-envs`,
//! and a batch of 64 stepped together (`VecEnv`). Each iteration takes 1000 steps with fixed
//! pseudo-random actions, resetting when an episode ends (the resets are part of the cost, as
//! in an RL loop). The Python side by side is `benches/envs_gym.py`.
//!
//! `cargo bench --bench envs --features rl-envs`
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rl_core::{Env, Params, SeededRng};
use rl_envs::classic::{
    CartPole, CartPoleParams, MountainCarContinuous, MountainCarContinuousParams, Pendulum, PendulumParams,
};
use rl_envs::maze::{MazeLayout, PointMaze, PointMazeParams};
use rl_envs::mpe::{
    SimpleAdversary, SimpleAdversaryParams, SimpleSpread, SimpleSpreadParams, SimpleTag, SimpleTagParams,
};
use rl_envs::wrappers::VecEnv;
use rl_envs::MultiAgentEnv;

const STEPS: usize = 1000;
const BATCH: usize = 64;

/// Fixed actions: uniform in `[lo, hi)` per dimension, or integers `0..n` when `discrete`.
fn actions(dim: usize, lo: f32, hi: f32, discrete: Option<usize>) -> Vec<Array1<f32>> {
    let mut r = SeededRng::seed_from_u64(0);
    (0..STEPS)
        .map(|_| match discrete {
            Some(n) => Array1::from_elem(1, r.random_range(0..n) as f32),
            None => (0..dim).map(|_| r.random_range(lo..hi)).collect(),
        })
        .collect()
}

fn bench_single<E: Env>(c: &mut Criterion, name: &str, mut env: E, acts: Vec<Array1<f32>>) {
    let mut g = c.benchmark_group("envs/step");
    g.sample_size(20).measurement_time(Duration::from_secs(3)).throughput(Throughput::Elements(STEPS as u64));
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

fn bench_multi<E: MultiAgentEnv>(c: &mut Criterion, name: &str, mut env: E, discrete: bool) {
    let n = env.n_agents();
    let mut r = SeededRng::seed_from_u64(0);
    let acts: Vec<Vec<Array1<f32>>> = (0..STEPS)
        .map(|_| {
            (0..n)
                .map(|_| {
                    if discrete {
                        Array1::from_elem(1, r.random_range(0..5) as f32)
                    } else {
                        (0..5).map(|_| r.random_range(0.0..1.0)).collect()
                    }
                })
                .collect()
        })
        .collect();
    let mut g = c.benchmark_group("envs/step");
    g.sample_size(20).measurement_time(Duration::from_secs(3)).throughput(Throughput::Elements(STEPS as u64));
    let mut rng = rl_core::rng_from_seed(1);
    env.reset(&mut rng).expect("reset");
    g.bench_function(name, |b| {
        b.iter(|| {
            for a in &acts {
                let s = env.step(a).expect("step");
                if s.done() {
                    env.reset(&mut rng).expect("reset");
                }
                black_box(&s);
            }
        })
    });
    g.finish();
}

fn bench_batch<E: Env>(c: &mut Criterion, name: &str, make: impl FnMut(usize) -> rl_envs::Result<E>, lo: f32, hi: f32) {
    let mut batch = VecEnv::from_fn(BATCH, 0, make).expect("batch");
    batch.reset().expect("reset");
    let dim = batch.action_space().dim();
    let discrete = batch.action_space().is_discrete();
    let mut r = SeededRng::seed_from_u64(0);
    let rounds = STEPS / 10;
    let acts: Vec<Array2<f32>> = (0..rounds)
        .map(|_| {
            Array2::from_shape_fn((BATCH, dim), |_| {
                if discrete {
                    r.random_range(0..2) as f32
                } else {
                    r.random_range(lo..hi)
                }
            })
        })
        .collect();
    let mut g = c.benchmark_group("envs/batch64");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements((rounds * BATCH) as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            for a in &acts {
                black_box(batch.step(a.view()).expect("step"));
            }
        })
    });
    g.finish();
}

fn pendulum() -> rl_envs::Result<Pendulum> {
    Pendulum::new(PendulumParams::default().check()?)
}

fn cartpole() -> rl_envs::Result<CartPole> {
    CartPole::new(CartPoleParams::default().check()?)
}

fn maze() -> rl_envs::Result<PointMaze> {
    PointMaze::new(PointMazeParams::default().layout(MazeLayout::Medium).check()?)
}

fn bench(c: &mut Criterion) {
    bench_single(c, "Pendulum-v1", pendulum().expect("env"), actions(1, -2.0, 2.0, None));
    bench_single(c, "CartPole-v1", cartpole().expect("env"), actions(1, 0.0, 0.0, Some(2)));
    let mc = MountainCarContinuous::new(MountainCarContinuousParams::default().check().expect("params")).expect("env");
    bench_single(c, "MountainCarContinuous-v0", mc, actions(1, -1.0, 1.0, None));
    bench_single(c, "PointMaze_Medium-v3", maze().expect("env"), actions(2, -1.0, 1.0, None));
    let spread = SimpleSpread::new(SimpleSpreadParams::default().check().expect("params")).expect("env");
    bench_multi(c, "simple_spread_v3", spread, true);
    let tag = SimpleTag::new(SimpleTagParams::default().check().expect("params")).expect("env");
    bench_multi(c, "simple_tag_v3", tag, true);
    let adv = SimpleAdversary::new(SimpleAdversaryParams::default().check().expect("params")).expect("env");
    bench_multi(c, "simple_adversary_v3", adv, true);
    bench_batch(c, "Pendulum-v1", |_| pendulum(), -2.0, 2.0);
    bench_batch(c, "CartPole-v1", |_| cartpole(), 0.0, 0.0);
    bench_batch(c, "PointMaze_Medium-v3", |_| maze(), -1.0, 1.0);
}

criterion_group!(benches, bench);
criterion_main!(benches);
