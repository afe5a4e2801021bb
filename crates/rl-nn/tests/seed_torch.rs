//! `seed_torch` seeds libtorch's process-wide generator (for programs that call libtorch's own
//! random functions). In its own test binary: no other test shares this process's generator.
#![allow(clippy::unwrap_used)]
use tch::{Device, Kind, Tensor};

#[test]
fn seed_torch_makes_libtorch_draws_repeatable() {
    let draw = || Vec::<f32>::try_from(Tensor::randn([8], (Kind::Float, Device::Cpu))).unwrap();
    rl_nn::seed_torch(5);
    let a = draw();
    rl_nn::seed_torch(5);
    assert_eq!(draw(), a);
    rl_nn::seed_torch(6);
    assert_ne!(draw(), a);
}
