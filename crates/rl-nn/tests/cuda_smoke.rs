//! CUDA smoke test: run with `cargo test -p rl-nn --features cuda-tests` on a GPU machine.
//! It fails (on purpose) where CUDA is not usable, so it is off by default.
#![cfg(feature = "cuda-tests")]

use rl_core::Params;
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{checkpoint, EnsembleMlp, LoadMode, Mlp, MlpConfig, RlNnError};
use tch::{nn::VarStore, Device, Kind};

fn build(vs: &VarStore, seed: u64) -> (Mlp, EnsembleMlp) {
    let mut rng = rl_core::rng_from_seed(seed);
    let mlp = Mlp::new(&vs.root().sub("mlp"), 8, 3, &MlpConfig::new([64]).layer_norm(true).check().unwrap(), &mut rng)
        .unwrap();
    let ens =
        EnsembleMlp::new(&vs.root().sub("ens"), 5, 8, 3, &MlpConfig::new([64]).check().unwrap(), &mut rng).unwrap();
    (mlp, ens)
}

#[test]
fn cuda_is_linked_and_usable() {
    assert!(tch::utils::has_cuda(), "libtorch_cuda is not linked (check build.rs --no-as-needed)");
    assert!(tch::Cuda::is_available(), "no usable CUDA device");
    let dev = Device::Cuda(0);
    assert_eq!(rl_nn::parse_device("cuda").unwrap(), dev);
    let vs = VarStore::new(dev);
    let (mlp, ens) = build(&vs, 0);
    // the same seed gives the same weights on CUDA as on CPU (drawn on the host)
    let cpu = VarStore::new(Device::Cpu);
    let _c = build(&cpu, 0);
    let (g, c) = (vs.variables(), cpu.variables());
    for (name, t) in &g {
        assert!(t.to_device(Device::Cpu).equal(&c[name]), "{name}");
    }
    let mut rng = rl_core::rng_from_seed(1);
    let x = rl_nn::rand::standard_normal(&[16, 8], (Kind::Float, dev), &mut rng).unwrap();
    assert_eq!(x.device(), dev);
    let y = mlp.f_forward(&x).unwrap();
    let z = ens.f_forward(&x).unwrap();
    assert_eq!(y.device(), dev);
    assert_eq!(z.size(), vec![5, 16, 3]);
    // a CPU input to a CUDA model is a typed error, not a libtorch exception
    assert!(matches!(mlp.f_forward(&x.to_device(Device::Cpu)), Err(RlNnError::Device { .. })));
    let tok = rl_nn::rand::categorical(&y, &mut rng).unwrap();
    assert_eq!((tok.device(), tok.size()), (dev, vec![16]));
    let mut opt = Adam::for_var_store(AdamParams::default().max_grad_norm(Some(1.0)).check().unwrap(), &vs).unwrap();
    let info = opt.backward_step(&(y.sum(Kind::Float) + z.sum(Kind::Float))).unwrap();
    assert!(info.grad_norm.unwrap().is_finite());
    // checkpoint written from CUDA, read back on CPU
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuda.safetensors");
    checkpoint::save(&vs, &file).unwrap();
    checkpoint::load(&cpu, &file, LoadMode::Strict).unwrap();
    opt.save(dir.path().join("adam")).unwrap();
}
