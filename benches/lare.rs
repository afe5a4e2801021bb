//! lare speed: reward-decoder training steps (LaRe's 3×256 decoder, RRD unbiased K = 64 and RD
//! sum regression, batch 256), relabelling a batch of 256 transitions, and the cost per state of
//! the sandboxed Rhai encoder against the same factors as a native Rust closure.
//!
//! ```text
//! cargo bench --bench lare --features lare
//! ```
//! Results and the machine: `docs/benchmarks.md` (section lare).
//!
//! libtorch runs on one intra-op thread, as the `lare_compare`/`lare_mpe` examples do by default
//! (`--threads 1`): these networks are too small to gain from more, and on a loaded machine a
//! second thread made every forward pass wait for a descheduled worker (milliseconds).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lare::{
    DecoderParams, DecompositionLoss, EpisodeBuffer, LatentEncoder, Layout, NativeEncoder, RewardDecoder,
    SandboxLimits, ScriptEncoder, ScriptSpec, StateSource,
};
use ndarray::{Array1, Array2};
use rand::Rng;
use rl_core::Params;
use std::hint::black_box;
use std::time::Duration;

/// 50 episodes of 200 steps with `dim` features (Pendulum-sized).
fn buffer(dim: usize) -> EpisodeBuffer {
    let mut rng = rl_core::rng_from_seed(0);
    let mut buf = EpisodeBuffer::new(3, 1, dim, 1_000_000).unwrap();
    for _ in 0..50 {
        let t = 200;
        let obs = Array2::from_shape_fn((t, 3), |_| rng.random_range(-1.0f32..1.0));
        let feats = Array2::from_shape_fn((t, dim), |_| rng.random_range(-1.0f32..1.0));
        let ep = lare::Episode {
            obs: obs.clone(),
            actions: Array2::zeros((t, 1)),
            next_obs: obs,
            dense_rewards: Array1::zeros(t),
            terminated: false,
            episodic_return: rng.random_range(-1000.0f32..0.0),
        };
        buf.push(ep, feats).unwrap();
    }
    buf
}

fn configure(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    tch::set_num_threads(1);
    let mut g = c.benchmark_group("lare");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    g
}

fn decoder(c: &mut Criterion) {
    let mut g = configure(c);
    // LaRe's Pendulum factors (3) and RD's raw [s, a, s - s'] (7)
    for dim in [3usize, 7] {
        let buf = buffer(dim);
        for (name, loss) in [("rrd_unbiased_k64", DecompositionLoss::RrdUnbiased), ("rd_sum", DecompositionLoss::Sum)] {
            let p = DecoderParams::default().loss(loss).check().unwrap();
            let mut dec = RewardDecoder::new(p, dim, tch::Device::Cpu).unwrap();
            g.throughput(Throughput::Elements(1));
            g.bench_function(BenchmarkId::new(format!("decoder_update_{name}"), dim), |b| {
                b.iter(|| black_box(dec.update(&buf).unwrap()))
            });
        }
        let p = DecoderParams::default().check().unwrap();
        let dec = RewardDecoder::new(p, dim, tch::Device::Cpu).unwrap();
        let mut rng = rl_core::rng_from_seed(1);
        g.throughput(Throughput::Elements(256));
        g.bench_function(BenchmarkId::new("relabel_batch256_sample_and_predict", dim), |b| {
            b.iter(|| {
                let batch = buf.sample_steps(256, &mut rng).unwrap();
                black_box(dec.predict(batch.features.view()).unwrap())
            })
        });
        let batch = buf.sample_steps(256, &mut rng).unwrap();
        g.bench_function(BenchmarkId::new("relabel_batch256_predict_only", dim), |b| {
            b.iter(|| black_box(dec.predict(batch.features.view()).unwrap()))
        });
    }
}

const PENDULUM: &str = "fn evaluation_func(obs, act) {
    let angle = atan(obs.sin_theta, obs.cos_theta);
    [sq(angle), sq(obs.theta_dot), sq(act[0])]
}";

const SPREAD: &str = "fn evaluation_func(obs, act) {
    let lm = obs.landmark_rel;
    let best = 1000000.0;
    for i in 0..lm.len() / 2 {
        let d = sqrt(sq(lm[2 * i]) + sq(lm[2 * i + 1]));
        if d < best { best = d; }
    }
    let others = obs.other_rel;
    let collisions = 0.0;
    for j in 0..others.len() / 2 {
        let d = sqrt(sq(others[2 * j]) + sq(others[2 * j + 1]));
        if d < 0.3 { collisions += 1.0; }
    }
    [best, collisions, norm(obs.vel)]
}";

fn encoders(c: &mut Criterion) {
    let mut g = configure(c);
    let limits = SandboxLimits::default().check().unwrap();
    let mut rng = rl_core::rng_from_seed(2);
    // Pendulum: 3 fields, 3 factors
    let layout = Layout::new().scalar("cos_theta", "").scalar("sin_theta", "").scalar("theta_dot", "");
    let spec = ScriptSpec {
        source: PENDULUM.into(),
        obs_layout: layout,
        act_dim: 1,
        n_factors: 3,
        state_source: StateSource::Current,
    };
    let script = ScriptEncoder::new(spec, limits.clone()).unwrap();
    let native = NativeEncoder::new(3, "pendulum", |o, a, _, out| {
        let angle = o[1].atan2(o[0]);
        out[0] = angle * angle;
        out[1] = o[2] * o[2];
        out[2] = a[0] * a[0];
    })
    .unwrap();
    let obs = Array2::from_shape_fn((256, 3), |_| rng.random_range(-1.0f32..1.0));
    let act = Array2::from_shape_fn((256, 1), |_| rng.random_range(-2.0f32..2.0));
    g.throughput(Throughput::Elements(256));
    g.bench_function("pendulum_script_256_states", |b| {
        b.iter(|| black_box(script.encode_batch(obs.view(), act.view(), obs.view()).unwrap()))
    });
    g.bench_function("pendulum_native_256_states", |b| {
        b.iter(|| black_box(native.encode_batch(obs.view(), act.view(), obs.view()).unwrap()))
    });
    // cooperative navigation, 3 agents: 18 observations in 5 fields, loops over landmarks and agents
    let spread_layout = lare::llm::tasks::simple_spread(3).unwrap().obs_layout;
    let spec = ScriptSpec {
        source: SPREAD.into(),
        obs_layout: spread_layout,
        act_dim: 1,
        n_factors: 3,
        state_source: StateSource::Next,
    };
    let script = ScriptEncoder::new(spec, limits).unwrap();
    let native = NativeEncoder::new(3, "spread", |o, _, _, out| {
        let mut best = f32::INFINITY;
        for i in 0..3 {
            best = best.min((o[4 + 2 * i].powi(2) + o[5 + 2 * i].powi(2)).sqrt());
        }
        let mut coll = 0.0;
        for j in 0..2 {
            if (o[10 + 2 * j].powi(2) + o[11 + 2 * j].powi(2)).sqrt() < 0.3 {
                coll += 1.0;
            }
        }
        out[0] = best;
        out[1] = coll;
        out[2] = (o[0] * o[0] + o[1] * o[1]).sqrt();
    })
    .unwrap()
    .with_state_source(StateSource::Next);
    let obs = Array2::from_shape_fn((256, 18), |_| rng.random_range(-1.0f32..1.0));
    let act = Array2::from_shape_fn((256, 1), |_| rng.random_range(0..5) as f32);
    g.bench_function("spread_script_256_states", |b| {
        b.iter(|| black_box(script.encode_batch(obs.view(), act.view(), obs.view()).unwrap()))
    });
    g.bench_function("spread_native_256_states", |b| {
        b.iter(|| black_box(native.encode_batch(obs.view(), act.view(), obs.view()).unwrap()))
    });
    // the two agree
    let s = script.encode_batch(obs.view(), act.view(), obs.view()).unwrap();
    let n = native.encode_batch(obs.view(), act.view(), obs.view()).unwrap();
    assert!(s.iter().zip(n.iter()).all(|(a, b)| (a - b).abs() < 1e-4));
}

/// What the sandbox's limits cost: one `call` outside a batch (its own sandbox thread), and the
/// slowest built-in left (`contains` scanning a full 10 000-element array, element comparisons
/// not counted as operations), which bounds how far past `max_wall_ms` a call can run.
fn sandbox_limits(c: &mut Criterion) {
    let mut g = configure(c);
    let limits = SandboxLimits::default().check().unwrap();
    let layout = Layout::new().scalar("cos_theta", "").scalar("sin_theta", "").scalar("theta_dot", "");
    let spec = ScriptSpec {
        source: PENDULUM.into(),
        obs_layout: layout,
        act_dim: 1,
        n_factors: 3,
        state_source: StateSource::Current,
    };
    let script = ScriptEncoder::new(spec, limits.clone()).unwrap();
    g.throughput(Throughput::Elements(1));
    g.bench_function("pendulum_script_call_1_state", |b| {
        b.iter(|| black_box(script.call(&[1.0, 0.0, 0.5], &[0.2]).unwrap()))
    });
    let scan = |n_scans: usize| {
        let source = format!(
            "fn evaluation_func(obs, act) {{ let a = []; a.pad(10000, 1.5); let n = 0;
             for i in 0..{n_scans} {{ if a.contains(2.0) {{ n += 1; }} }} [n] }}"
        );
        let spec = ScriptSpec {
            source,
            obs_layout: Layout::new().scalar("x", ""),
            act_dim: 1,
            n_factors: 1,
            state_source: StateSource::Current,
        };
        ScriptEncoder::new(spec, limits.clone()).unwrap()
    };
    let (zero, one) = (scan(0), scan(1));
    g.bench_function("slowest_builtin_pad_10k_only", |b| b.iter(|| black_box(zero.call(&[0.0], &[0.0]).unwrap())));
    g.bench_function("slowest_builtin_pad_10k_and_contains_10k", |b| {
        b.iter(|| black_box(one.call(&[0.0], &[0.0]).unwrap()))
    });
}

criterion_group!(benches, decoder, encoders, sandbox_limits);
criterion_main!(benches);
