//! Gradient steps per second of the offline algorithms at the papers' sizes (batch 256,
//! 256-256 networks, SCAS's 4x256 dynamics model; obs 17, action 6 as Walker2d/HalfCheetah),
//! one libtorch thread, and the matrix-multiply floor of each update: only the products its
//! forward and backward passes need (critic ensembles as batched products), no elementwise
//! work, no optimiser.
//!
//! ```text
//! cargo bench --features offline-rl --bench offline_algos
//! OFFLINE_BENCH_CLOCK=cpu cargo bench --features offline-rl --bench offline_algos   # CPU time
//! ~/.cache/frugal-rl/venv/bin/python benches/offline_algos.py --dmg-dir /tmp/ref-DMG --scas-dir /tmp/ref-SCAS
//! ```
//! (the Python side: the official DMG and SCAS classes from local copies of `thu-rllab/DMG`
//! and `thu-rllab/SCAS`, TD3+BC and IQL written as their reference code; figures and machine in
//! `docs/benchmarks.md`).

use criterion::{criterion_group, criterion_main, Criterion};
#[path = "support/cpu_clock.rs"]
mod cpu_clock;
use cpu_clock::Clock;
use offline_rl::algo::{AlgoKind, AlgorithmParams, DatasetKind, OfflineAlgorithm};
use rl_agents::{Batch, ReplayBuffer, ReplayBufferParams};
use rl_core::Space;
use tch::{Device, Kind, Tensor};

const B: i64 = 256;
const S: i64 = 17;
const A: i64 = 6;
const H: i64 = 256;

fn batch() -> Batch {
    let mut rng = rl_core::rng_from_seed(0);
    let o = (Kind::Float, Device::Cpu);
    let obs = rl_nn::rand::standard_normal(&[B, S], o, &mut rng).unwrap();
    let act = rl_nn::rand::uniform(&[B, A], -1.0, 1.0, o, &mut rng).unwrap();
    let rew = rl_nn::rand::standard_normal(&[B], o, &mut rng).unwrap();
    let next = rl_nn::rand::standard_normal(&[B, S], o, &mut rng).unwrap();
    Batch::from_tensors(obs, act, rew, next, Tensor::zeros([B], o), None).unwrap()
}

fn build(kind: AlgoKind, batch: &Batch) -> Box<dyn OfflineAlgorithm> {
    let obs = Space::symmetric(S as usize, 10.0).unwrap();
    let act = Space::symmetric(A as usize, 1.0).unwrap();
    let mut p = AlgorithmParams::defaults(kind, DatasetKind::Medium);
    if let AlgorithmParams::Scas(s) = &mut p {
        s.dynamics.steps = 1;
    }
    let mut algo = p.build(&obs, &act, Device::Cpu, 0).unwrap();
    if kind == AlgoKind::Scas {
        let t = rl_core::Transitions::from_columns(
            rl_nn::convert::tensor_to_array2(batch.obs()).unwrap(),
            rl_nn::convert::tensor_to_array2(batch.action()).unwrap(),
            ndarray::Array1::zeros(B as usize),
            rl_nn::convert::tensor_to_array2(batch.next_obs()).unwrap(),
            ndarray::Array1::zeros(B as usize),
            ndarray::Array1::zeros(B as usize),
        )
        .unwrap();
        let buf = ReplayBuffer::from_transitions(ReplayBufferParams::default(), &t).unwrap();
        algo.prepare(&buf, false).unwrap();
    }
    algo
}

/// A network as its layers' `(in, out)`.
fn net(i: i64, o: i64, hidden: &[i64]) -> Vec<(i64, i64)> {
    let mut dims = vec![i];
    dims.extend_from_slice(hidden);
    dims.push(o);
    dims.windows(2).map(|w| (w[0], w[1])).collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Pass {
    /// Forward only (no gradient).
    Forward,
    /// Forward, weight gradients, input gradients of the inner layers (training a network on data).
    Train,
    /// Forward and input gradients of every layer (a frozen network between the loss and the actor).
    Through,
}

/// The products of one pass: `(members, m, k, n)` with `members = 0` for a plain `mm`.
fn products(layers: &[(i64, i64)], rows: i64, members: i64, pass: Pass, out: &mut Vec<(i64, i64, i64, i64)>) {
    for (l, &(i, o)) in layers.iter().enumerate() {
        out.push((members, rows, i, o));
        if pass == Pass::Train {
            out.push((members, i, rows, o)); // dW = x^T dY
        }
        if pass == Pass::Through || (pass == Pass::Train && l > 0) {
            out.push((members, rows, o, i)); // dX = dY W^T
        }
    }
}

/// The matrix products of one update of `kind` (the actor-step part at `1 / policy_delay`):
/// `(every update, every second update)`.
#[allow(clippy::type_complexity)]
fn floor_plan(kind: AlgoKind) -> (Vec<(i64, i64, i64, i64)>, Vec<(i64, i64, i64, i64)>) {
    let actor = net(S, A, &[H, H]);
    let critic = net(S + A, 1, &[H, H]);
    let value = net(S, 1, &[H, H]);
    let dynamics = net(S + A, S, &[H, H, H, H]);
    let (mut every, mut half) = (vec![], vec![]);
    use Pass::*;
    match kind {
        AlgoKind::Bc => products(&actor, B, 0, Train, &mut every),
        AlgoKind::Td3Bc => {
            products(&actor, B, 0, Forward, &mut every);
            products(&critic, B, 2, Forward, &mut every);
            products(&critic, B, 2, Train, &mut every);
            products(&actor, B, 0, Train, &mut half);
            products(&critic, B, 0, Through, &mut half);
        }
        AlgoKind::Iql => {
            products(&value, B, 0, Forward, &mut every);
            products(&critic, B, 2, Forward, &mut every);
            products(&value, B, 0, Train, &mut every);
            products(&critic, B, 2, Train, &mut every);
            products(&actor, B, 0, Train, &mut every);
        }
        AlgoKind::Dmg => {
            products(&actor, B, 0, Forward, &mut every);
            products(&critic, 2 * B, 2, Forward, &mut every);
            products(&value, B, 0, Train, &mut every);
            products(&value, 2 * B, 0, Forward, &mut every);
            products(&critic, B, 2, Train, &mut every);
            products(&actor, B, 0, Train, &mut half);
            products(&critic, B, 2, Through, &mut half);
        }
        AlgoKind::Scas => {
            products(&actor, B, 0, Forward, &mut every);
            products(&critic, B, 4, Forward, &mut every);
            products(&critic, B, 4, Train, &mut every);
            products(&actor, B, 0, Train, &mut half);
            products(&critic, B, 4, Through, &mut half);
            products(&actor, B, 0, Forward, &mut half);
            products(&critic, B, 4, Forward, &mut half);
            products(&dynamics, B, 0, Through, &mut half);
        }
    }
    (every, half)
}

fn operands(plan: &[(i64, i64, i64, i64)]) -> Vec<(Tensor, Tensor)> {
    let o = (Kind::Float, Device::Cpu);
    plan.iter()
        .map(|&(e, m, k, n)| {
            if e == 0 {
                (Tensor::ones([m, k], o), Tensor::ones([k, n], o))
            } else {
                (Tensor::ones([e, m, k], o), Tensor::ones([e, k, n], o))
            }
        })
        .collect()
}

fn run_products(ops: &[(Tensor, Tensor)]) {
    for (x, y) in ops {
        let _ = if x.dim() == 2 { x.mm(y) } else { x.bmm(y) };
    }
}

/// `OFFLINE_BENCH_CLOCK=cpu`: the calling thread's CPU time instead of wall time (the Python
/// side's `--clock cpu`).
const CLOCK_VAR: &str = "OFFLINE_BENCH_CLOCK";

fn bench(c: &mut Criterion<Clock>) {
    tch::set_num_threads(1);
    eprintln!("clock: {}", if Clock::from_env(CLOCK_VAR).cpu() { "cpu" } else { "wall" });
    let b = batch();
    let mut g = c.benchmark_group("offline_update_b256");
    g.sample_size(30);
    for kind in [AlgoKind::Td3Bc, AlgoKind::Iql, AlgoKind::Dmg, AlgoKind::Scas] {
        let mut algo = build(kind, &b);
        // two updates per iteration: one critic-only and one with the actor step
        g.bench_function(format!("{}/2 updates", kind.as_str()), |bch| {
            bch.iter(|| {
                algo.update(&b).unwrap();
                algo.update(&b).unwrap();
            })
        });
        let (every, half) = floor_plan(kind);
        let (e, h) = (operands(&every), operands(&half));
        g.bench_function(format!("{}/floor 2 updates", kind.as_str()), |bch| {
            bch.iter(|| {
                run_products(&e);
                run_products(&e);
                run_products(&h);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(Clock::from_env(CLOCK_VAR));
    targets = bench
}
criterion_main!(benches);
