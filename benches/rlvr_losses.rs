//! Forward + backward of every `rlvr-core` policy loss at `[64, 512]` and `[512, 4096]`
//! (fp32, CPU), plus a memory-copy bench that measures the machine's bandwidth (the floor
//! for the memory-bound losses). The PyTorch side-by-side is `benches/rlvr_losses_torch.py`.
//!
//! ```text
//! cargo bench --bench rlvr_losses --features rlvr-core-tch
//! RLVR_BENCH_THREADS=1 cargo bench --bench rlvr_losses --features rlvr-core-tch
//! ```
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rlvr_core::{
    Aggregation, CispoParams, GlobalCounts, GmpoParams, Groups, GspoParams, LossInputs, LossParams, LpoParams,
    PolicyLoss, PpoParams, Projection, SapoParams,
};
use std::time::Duration;
use tch::{Device, Kind, Tensor};

fn losses() -> Vec<(&'static str, LossParams)> {
    vec![
        ("ppo", LossParams::new(PolicyLoss::Ppo(PpoParams::default()))),
        ("gspo", LossParams::new(PolicyLoss::Gspo(GspoParams::default())).aggregation(Aggregation::SeqMeanTokenMean)),
        ("cispo", LossParams::new(PolicyLoss::Cispo(CispoParams::default()))),
        ("sapo", LossParams::new(PolicyLoss::Sapo(SapoParams::default())).aggregation(Aggregation::SeqMeanTokenMean)),
        ("reinforce", LossParams::new(PolicyLoss::Reinforce)),
        ("gmpo", LossParams::new(PolicyLoss::Gmpo(GmpoParams::default())).aggregation(Aggregation::SeqMeanTokenMean)),
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

fn bench(c: &mut Criterion) {
    let dev = Device::Cpu;
    // tch uses every core by default; RLVR_BENCH_THREADS=N pins it (match the Python side's --threads)
    if let Some(n) = std::env::var("RLVR_BENCH_THREADS").ok().and_then(|v| v.parse().ok()) {
        tch::set_num_threads(n);
    }
    eprintln!("torch threads: {}", tch::get_num_threads());
    for (b, t) in [(64i64, 512i64), (512, 4096)] {
        tch::manual_seed(0);
        let old = Tensor::randn([b, t], (Kind::Float, dev)) * 0.5 - 2.0;
        let logp = (&old + Tensor::randn([b, t], (Kind::Float, dev)) * 0.1).detach().set_requires_grad(true);
        let adv = Tensor::randn([b], (Kind::Float, dev));
        let lens = Tensor::randint_low(t / 4, t + 1, [b, 1], (Kind::Int64, dev));
        let mask = Tensor::arange(t, (Kind::Int64, dev)).unsqueeze(0).lt_tensor(&lens).to_kind(Kind::Float);
        let groups = Groups::uniform((b / 8) as usize, 8).unwrap();
        let counts = GlobalCounts::local(&mask).unwrap();
        let mut group = c.benchmark_group(format!("cpu/rlvr_loss/{b}x{t}"));
        group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
        for (name, params) in losses() {
            let cfg = rlvr_core::LossConfig::new(rlvr_core::Params::check(params).unwrap());
            group.bench_function(name, |bch| {
                bch.iter(|| {
                    let inputs = LossInputs::new(&logp, &old, &adv, &mask).groups(&groups);
                    let out = cfg.loss(&inputs, &counts).unwrap();
                    Tensor::run_backward(&[&out.loss], &[&logp], false, false)
                })
            });
        }
        group.finish();
    }
    // memory bandwidth: copy 64 Mi floats (256 MiB read + 256 MiB written)
    let n = 64 * 1024 * 1024;
    let src = Tensor::ones([n], (Kind::Float, dev));
    let mut dst = Tensor::zeros([n], (Kind::Float, dev));
    let mut group = c.benchmark_group("cpu/memory");
    group.sample_size(10).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(2 * 4 * n as u64));
    group.bench_function("copy_256MiB", |bch| bch.iter(|| dst.copy_(&src)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
