//! Forward+backward of `rl-nn` models at RL-typical sizes.
//! `cargo bench --bench nn`
use criterion::{criterion_group, criterion_main, Criterion};
use rl_nn::{EnsembleMlp, Mlp, MlpConfig};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn zero_grad(vs: &VarStore) {
    for mut t in vs.trainable_variables() {
        t.zero_grad();
    }
}

fn bench(c: &mut Criterion) {
    let dev = Device::Cpu;
    let vs = VarStore::new(dev);
    let mlp = Mlp::new(&vs.root().sub("mlp"), 17, 6, &MlpConfig::new([256, 256])).unwrap();
    let ens = EnsembleMlp::new(&vs.root().sub("ens"), 10, 23, 1, &MlpConfig::new([256, 256, 256])).unwrap();
    let x = Tensor::randn([256, 17], (Kind::Float, dev));
    let xa = Tensor::randn([256, 23], (Kind::Float, dev));
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
