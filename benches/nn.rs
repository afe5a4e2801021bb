//! Forward+backward of `rl-nn` models at RL-typical sizes, and one optimiser step of
//! `rl_nn::optim::Adam` (checkpointable state) next to libtorch's C++ Adam (`tch::nn::Adam`).
//! `cargo bench --bench nn`
use criterion::{criterion_group, criterion_main, Criterion};
use rl_core::Params;
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{EnsembleMlp, Mlp, MlpConfig};
use tch::nn::{self, OptimizerConfig, VarStore};
use tch::{Device, Kind};

fn zero_grad(vs: &VarStore) {
    for mut t in vs.trainable_variables() {
        t.zero_grad();
    }
}

fn bench(c: &mut Criterion) {
    let dev = Device::Cpu;
    let vs = VarStore::new(dev);
    let mut rng = rl_core::rng_from_seed(0);
    let mlp = Mlp::new(&vs.root().sub("mlp"), 17, 6, &MlpConfig::new([256, 256]).check().unwrap(), &mut rng).unwrap();
    let ens =
        EnsembleMlp::new(&vs.root().sub("ens"), 10, 23, 1, &MlpConfig::new([256, 256, 256]).check().unwrap(), &mut rng)
            .unwrap();
    let x = rl_nn::rand::standard_normal(&[256, 17], (Kind::Float, dev), &mut rng).unwrap();
    let xa = rl_nn::rand::standard_normal(&[256, 23], (Kind::Float, dev), &mut rng).unwrap();
    c.bench_function("cpu/mlp_256x256/batch256/fwd+bwd", |b| {
        b.iter(|| {
            zero_grad(&vs);
            mlp.f_forward(&x).unwrap().sum(Kind::Float).backward();
        })
    });
    c.bench_function("cpu/ensemble10_256x3/batch256/fwd+bwd", |b| {
        b.iter(|| {
            zero_grad(&vs);
            ens.f_forward(&xa).unwrap().sum(Kind::Float).backward();
        })
    });
    // One optimiser step on the [17 -> 256 -> 256 -> 6] MLP (72k parameters) after fwd+bwd.
    let vs_a = VarStore::new(dev);
    let net_a = Mlp::new(&vs_a.root(), 17, 6, &MlpConfig::new([256, 256]).check().unwrap(), &mut rng).unwrap();
    let mut ours = Adam::for_var_store(AdamParams::default().check().unwrap(), &vs_a).unwrap();
    c.bench_function("cpu/mlp_256x256/batch256/fwd+bwd+adam(rl_nn)", |b| {
        b.iter(|| {
            let loss = net_a.f_forward(&x).unwrap().square().mean(Kind::Float);
            ours.backward_step(&loss).unwrap();
        })
    });
    let vs_b = VarStore::new(dev);
    let net_b = Mlp::new(&vs_b.root(), 17, 6, &MlpConfig::new([256, 256]).check().unwrap(), &mut rng).unwrap();
    let mut theirs = nn::Adam::default().build(&vs_b, 1e-3).unwrap();
    c.bench_function("cpu/mlp_256x256/batch256/fwd+bwd+adam(tch)", |b| {
        b.iter(|| {
            let loss = net_b.f_forward(&x).unwrap().square().mean(Kind::Float);
            theirs.backward_step(&loss);
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
