//! CUDA smoke test: run with `cargo test -p rl-nn --features cuda-tests` on a GPU machine.
//! It fails (on purpose) where CUDA is not usable, so it is off by default.
#![cfg(feature = "cuda-tests")]

use rl_nn::{checkpoint, EnsembleMlp, LoadMode, Mlp, MlpConfig};
use tch::{nn::VarStore, Device, Kind, Tensor};

#[test]
fn cuda_is_linked_and_usable() {
    assert!(tch::utils::has_cuda(), "libtorch_cuda is not linked (check build.rs --no-as-needed)");
    assert!(tch::Cuda::is_available(), "no usable CUDA device");
    let dev = Device::Cuda(0);
    assert_eq!(rl_nn::parse_device("cuda").unwrap(), dev);
    let vs = VarStore::new(dev);
    let mlp = Mlp::new(&vs.root().sub("mlp"), 8, 3, &MlpConfig::new([64]).layer_norm(true)).unwrap();
    let ens = EnsembleMlp::new(&vs.root().sub("ens"), 5, 8, 3, &MlpConfig::new([64])).unwrap();
    let x = Tensor::randn([16, 8], (Kind::Float, dev));
    let y = mlp.f_forward(&x).unwrap();
    let z = ens.f_forward(&x).unwrap();
    assert_eq!(y.device(), dev);
    assert_eq!(z.size(), vec![5, 16, 3]);
    (y.sum(Kind::Float) + z.sum(Kind::Float)).backward();
    // checkpoint written from CUDA, read back on CPU
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cuda.safetensors");
    checkpoint::save(&vs, &file).unwrap();
    let cpu = VarStore::new(Device::Cpu);
    let _m = Mlp::new(&cpu.root().sub("mlp"), 8, 3, &MlpConfig::new([64]).layer_norm(true)).unwrap();
    let _e = EnsembleMlp::new(&cpu.root().sub("ens"), 5, 8, 3, &MlpConfig::new([64])).unwrap();
    checkpoint::load(&cpu, &file, LoadMode::Strict).unwrap();
}
