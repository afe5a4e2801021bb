//! Selector speed at pool scale: DPS and MoPPS `observe` + `select` with 10^6 and 10^7 tracked
//! prompts on one thread, beside the memory-bandwidth floor of DPS's per-step pass.
//!
//! ```text
//! cargo bench --bench select --no-default-features --features rlvr-select
//! ```
//! Results and the machine: `docs/benchmarks.md` (section rlvr-select).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::Rng;
use rl_core::Params;
use rlvr_select::{Candidates, Dps, DpsParams, Mopps, MoppsParams, NoRollouts, Outcome, Selector};
use std::hint::black_box;
use std::time::Duration;

const B: usize = 256;
const K: usize = 8;
const RATIO: usize = 8;
const SIZES: [usize; 2] = [1_000_000, 10_000_000];

/// One step's inputs: a random candidate window of `RATIO * B` and `B` random outcomes.
fn step_inputs(n: usize, rng: &mut impl Rng) -> (Vec<u64>, Vec<Outcome>) {
    let cands: Vec<u64> = rand::seq::index::sample(rng, n, RATIO * B).into_iter().map(|i| i as u64).collect();
    let outcomes = cands[..B]
        .iter()
        .map(|&id| Outcome::from_successes(id, rng.random_range(0..=K), K).expect("successes <= K"))
        .collect();
    (cands, outcomes)
}

fn configure(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("select");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    g
}

fn dps(c: &mut Criterion) {
    let mut g = configure(c);
    for n in SIZES {
        let mut rng = rl_core::rng_from_seed(0);
        let Ok(mut dps) = Dps::new(DpsParams::default().check().unwrap(), n) else { return };
        dps.track_all();
        // Warm the state: a few steps so beliefs are not all at the prior.
        let mut inputs: Vec<(Vec<u64>, Vec<Outcome>)> = (0..8).map(|_| step_inputs(n, &mut rng)).collect();
        for (s, (_, o)) in inputs.iter().enumerate() {
            let _ = dps.observe(s as u64, o, &mut rng);
        }
        g.throughput(Throughput::Elements(n as u64));
        let mut t = 0usize;
        g.bench_function(BenchmarkId::new("dps_observe_select_window", n), |b| {
            b.iter(|| {
                let (cands, outcomes) = &inputs[t % inputs.len()];
                t += 1;
                let _ = dps.observe(t as u64, outcomes, &mut rng);
                black_box(dps.select(t as u64, Candidates::new(cands), B, &mut NoRollouts, &mut rng).ok());
            })
        });
        g.bench_function(BenchmarkId::new("dps_observe_empty", n), |b| {
            b.iter(|| black_box(dps.observe(0, &[], &mut rng).ok()))
        });
        let all: Vec<u64> = (0..n as u64).collect();
        g.bench_function(BenchmarkId::new("dps_select_whole_pool", n), |b| {
            b.iter(|| black_box(dps.select(0, Candidates::new(&all), B, &mut NoRollouts, &mut rng).ok()))
        });
        inputs.clear();
    }
    g.finish();
}

fn mopps(c: &mut Criterion) {
    let mut g = configure(c);
    for n in SIZES {
        let mut rng = rl_core::rng_from_seed(1);
        let Ok(mut m) = Mopps::new(MoppsParams::default().decay(0.5).check().unwrap(), n) else { return };
        let inputs: Vec<(Vec<u64>, Vec<Outcome>)> = (0..8).map(|_| step_inputs(n, &mut rng)).collect();
        g.throughput(Throughput::Elements(n as u64));
        let mut t = 0usize;
        g.bench_function(BenchmarkId::new("mopps_observe_select_window", n), |b| {
            b.iter(|| {
                let (cands, outcomes) = &inputs[t % inputs.len()];
                t += 1;
                let _ = m.observe(t as u64, outcomes, &mut rng);
                black_box(m.select(t as u64, Candidates::new(cands), B, &mut NoRollouts, &mut rng).ok());
            })
        });
        if n <= 1_000_000 {
            let all: Vec<u64> = (0..n as u64).collect();
            g.bench_function(BenchmarkId::new("mopps_select_whole_pool", n), |b| {
                b.iter(|| black_box(m.select(0, Candidates::new(&all), B, &mut NoRollouts, &mut rng).ok()))
            });
        }
    }
    g.finish();
}

/// The floor: one pass with exactly DPS's per-step memory traffic (structure of arrays; read
/// 9 + 3 + 1 `f32` and one status byte, write 3 + 1 `f32` and the status byte per prompt) and
/// trivial arithmetic.
fn bandwidth_floor(c: &mut Criterion) {
    let mut g = configure(c);
    for n in SIZES {
        let alpha: Vec<Vec<f32>> = (0..9).map(|_| vec![1.0f32; n]).collect();
        let mut before: Vec<Vec<f32>> = (0..3).map(|_| vec![1.0f32 / 3.0; n]).collect();
        let mut decay = vec![1.0f32; n];
        let mut status = vec![2u8; n];
        g.throughput(Throughput::Bytes((n * (57 + 17)) as u64));
        g.bench_function(BenchmarkId::new("floor_dps_traffic", n), |b| {
            b.iter(|| {
                let a: Vec<&[f32]> = alpha.iter().map(|v| &v[..n]).collect();
                let [b0, b1, b2] = &mut before[..] else { return };
                let (b0, b1, b2) = (&mut b0[..n], &mut b1[..n], &mut b2[..n]);
                let (f, st) = (&mut decay[..n], &mut status[..n]);
                let (a0, a1, a2, a3, a4, a5, a6, a7, a8) = (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]);
                for j in 0..n {
                    let s = a0[j] + a1[j] + a2[j] + a3[j] + a4[j] + a5[j] + a6[j] + a7[j] + a8[j];
                    b0[j] += s * 1e-30;
                    b1[j] += f[j] * 1e-30;
                    b2[j] += 1e-30;
                    f[j] *= 1.0;
                    st[j] |= 2;
                }
                black_box(&before);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, dps, mopps, bandwidth_floor);
criterion_main!(benches);
