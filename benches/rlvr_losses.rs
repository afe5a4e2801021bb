//! Forward + backward (loss, gradient with respect to `logp`, metrics read back) of every
//! `rlvr-core` policy loss at `[64, 512]` and `[512, 4096]` (fp32, CPU): the fused CPU kernels
//! (the default) and the libtorch path (`fused_cpu(false)`), plus a memory-copy bench that
//! measures the machine's bandwidth (the floor of these memory-bound losses). The side-by-side
//! with verl's own `core_algos` functions is `benches/rlvr_losses_torch.py`.
//!
//! ```text
//! cargo bench --bench rlvr_losses --features rlvr-core-tch            # one thread (default)
//! RLVR_BENCH_THREADS=2 cargo bench --bench rlvr_losses --features rlvr-core-tch
//! RLVR_BENCH_CLOCK=cpu cargo bench --bench rlvr_losses --features rlvr-core-tch   # CPU time
//! ```
//!
//! `RLVR_BENCH_CLOCK=cpu` measures the calling thread's CPU time (Linux
//! `/proc/thread-self/schedstat`, nanoseconds) instead of wall time: with one libtorch thread
//! every op and the backward pass run on the calling thread, and on a loaded machine wall time
//! mostly measures the wait for a core. The Python side's equivalent is `--clock cpu`.
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
#[path = "support/cpu_clock.rs"]
mod cpu_clock;
use cpu_clock::Clock;
use rand::Rng;
use rlvr_core::{
    Aggregation, CispoParams, ClipCovParams, GlobalCounts, GmpoParams, Groups, GspoParams, KlCovParams, LossConfig,
    LossInputs, LossParams, LpoParams, Params, PolicyLoss, PpoParams, Projection, SapoParams,
};
use std::time::Duration;
use tch::{Device, Kind, Tensor};

/// The losses with verl's aggregation for each (GSPO, SAPO and GMPO force a sequence mean in
/// verl; LPO uses Algorithm 1's `seq-mean-token-sum`).
fn losses() -> Vec<(&'static str, LossParams)> {
    vec![
        ("ppo", LossParams::new(PolicyLoss::Ppo(PpoParams::default()))),
        ("gspo", LossParams::new(PolicyLoss::Gspo(GspoParams::default())).aggregation(Aggregation::SeqMeanTokenMean)),
        ("cispo", LossParams::new(PolicyLoss::Cispo(CispoParams::default()))),
        ("sapo", LossParams::new(PolicyLoss::Sapo(SapoParams::default())).aggregation(Aggregation::SeqMeanTokenMean)),
        ("gpg", LossParams::new(PolicyLoss::Reinforce)),
        // the work verl's `gpg` does: it returns no metrics (`{}`), so none are computed here
        ("gpg_nometrics", LossParams::new(PolicyLoss::Reinforce).metrics(false)),
        ("gmpo", LossParams::new(PolicyLoss::Gmpo(GmpoParams::default())).aggregation(Aggregation::SeqMeanTokenMean)),
        ("clip_cov", LossParams::new(PolicyLoss::ClipCov(ClipCovParams::default()))),
        ("kl_cov", LossParams::new(PolicyLoss::KlCov(KlCovParams::default()))),
        (
            "lpo_fwd",
            LossParams::new(PolicyLoss::Lpo(LpoParams::new(Projection::Forward)))
                .aggregation(Aggregation::SeqMeanTokenSum),
        ),
        (
            "lpo_rev",
            LossParams::new(PolicyLoss::Lpo(LpoParams::new(Projection::Reverse)))
                .aggregation(Aggregation::SeqMeanTokenSum),
        ),
    ]
}

/// The same inputs as the Python side: old log-probs `0.5 N − 2`, log-ratio noise `0.1 N`,
/// advantages `N`, lengths uniform in `[T/4, T]`, groups of 8 (seeded, in Rust).
fn inputs(b: i64, t: i64) -> (Tensor, Tensor, Tensor, Tensor) {
    let mut rng = rl_core::rng_from_seed(0);
    let mut normal = move |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                // Box–Muller
                let (u, v): (f32, f32) = (rng.random::<f32>().max(1e-7), rng.random());
                (-2.0 * u.ln()).sqrt() * (2.0 * std::f32::consts::PI * v).cos()
            })
            .collect()
    };
    let n = (b * t) as usize;
    let old: Vec<f32> = normal(n).iter().map(|z| 0.5 * z - 2.0).collect();
    let logp: Vec<f32> = old.iter().zip(normal(n)).map(|(o, z)| o + 0.1 * z).collect();
    let adv = normal(b as usize);
    let mut r2 = rl_core::rng_from_seed(1);
    let mask: Vec<f32> = (0..b)
        .flat_map(|_| {
            let len = r2.random_range(t / 4..=t);
            (0..t).map(move |j| f32::from(u8::from(j < len)))
        })
        .collect();
    let tt = |v: &[f32]| Tensor::from_slice(v).view([b, t]);
    (tt(&logp).set_requires_grad(true), tt(&old), Tensor::from_slice(&adv), tt(&mask))
}

/// `RLVR_BENCH_CLOCK=cpu`: the calling thread's CPU time instead of wall time.
const CLOCK_VAR: &str = "RLVR_BENCH_CLOCK";

fn bench(c: &mut Criterion<Clock>) {
    let threads = std::env::var("RLVR_BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    tch::set_num_threads(threads);
    eprintln!(
        "torch threads: {}, clock: {}",
        tch::get_num_threads(),
        if Clock::from_env(CLOCK_VAR).cpu() { "cpu" } else { "wall" }
    );
    for (b, t) in [(64i64, 512i64), (512, 4096)] {
        let (logp, old, adv, mask) = inputs(b, t);
        let groups = Groups::uniform((b / 8) as usize, 8).unwrap_or_else(|e| unreachable!("{e}"));
        let counts = GlobalCounts::local(&mask).unwrap_or_else(|e| unreachable!("{e}"));
        let mut group = c.benchmark_group(format!("cpu/rlvr_loss/{b}x{t}"));
        group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
        for (name, params) in losses() {
            for (path, fused) in [("fused", true), ("torch", false)] {
                let cfg = LossConfig::new(params.fused_cpu(fused).check().unwrap_or_else(|e| unreachable!("{e}")));
                group.bench_function(format!("{name}/{path}"), |bch| {
                    bch.iter(|| {
                        let inputs = LossInputs::new(&logp, &old, &adv, &mask).groups(&groups).seed(7);
                        let out = cfg.loss(&inputs, &counts).unwrap_or_else(|e| unreachable!("{e}"));
                        (out.metrics.loss, Tensor::run_backward(&[&out.loss], &[&logp], false, false))
                    })
                });
            }
        }
        group.finish();
    }
    // memory bandwidth: copy 64 Mi floats (256 MiB read + 256 MiB written)
    let n = 64 * 1024 * 1024;
    let src = Tensor::ones([n], (Kind::Float, Device::Cpu));
    let mut dst = Tensor::zeros([n], (Kind::Float, Device::Cpu));
    let mut group = c.benchmark_group("cpu/memory");
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(2 * 4 * n as u64));
    group.bench_function("copy_256MiB", |bch| bch.iter(|| dst.copy_(&src)));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(Clock::from_env(CLOCK_VAR));
    targets = bench
}
criterion_main!(benches);
