//! # rl-nn
//!
//! libtorch foundations for [frugal-rl](https://example.invalid/frugal-rl), through
//! [`tch`] 0.24 (PyTorch 2.11.0). Every crate that builds a network (agents, transformers,
//! diffusion models) builds it from these pieces, so that the whole workspace shares one way
//! to draw random numbers, check inputs, optimise and checkpoint:
//!
//! - [`init`]: seeded, global-free initialisation ([`init::Init`]: PyTorch's `nn.Linear`
//!   default, orthogonal, Xavier/Glorot, Kaiming, (truncated) normal, uniform, constants) from a
//!   caller's `&mut impl Rng`, never from libtorch's process-wide generator.
//! - [`rand`]: runtime noise (normal, uniform, Bernoulli, dropout masks, categorical sampling)
//!   from the component's own generator, moved to the device.
//! - [`optim`]: [`optim::Adam`] / AdamW (PyTorch's update, operation for operation) with
//!   global-norm gradient clipping; moments and step counts are named tensors, so a checkpoint
//!   resumes bit for bit.
//! - [`checkpoint`]: checkpoint directories (`state.json` + `tensors.safetensors`, written to
//!   a temporary name and renamed, verified by content hashes on load), checkpoint units
//!   (several parts committed as one by a manifest renamed into place, every file's SHA-256
//!   and every part's step count checked on load) and safetensors files, with typed errors
//!   for missing, corrupt, mismatched and non-finite data; a failed load changes nothing.
//! - [`parts`]: a component's variable stores, optimisers and loose tensors under name
//!   prefixes ([`parts::Parts`]): collected for a checkpoint, checked completely against a
//!   loaded file, then restored; every agent and offline algorithm checkpoints through it.
//! - [`check`]: checks of caller tensors (rank, every dimension, kind, device, device
//!   availability) before any libtorch op.
//! - [`layers`]: [`layers::Linear`], [`layers::LayerNorm`] and a pre-LayerNorm causal
//!   self-attention [`layers::TransformerBlock`] (attention + MLP, optional KV cache), the
//!   shared pieces of rl-lm's language model and aigb's transformers.
//! - [`Mlp`] and [`EnsembleMlp`] ([`MlpConfig`]: widths, [`Activation`], LayerNorm,
//!   initialisers); ensembles run all members in one batched matmul per layer.
//! - [`soft_update`] / [`hard_update`] for target networks; [`default_device`]: CUDA when
//!   available, overridden by `FRUGAL_DEVICE=cpu|cuda|cuda:N`; [`convert`]: `Tensor` <-> `ndarray`.
//!
//! ```
//! use rl_core::Params;
//! use rl_nn::optim::{Adam, AdamParams};
//! use rl_nn::{Activation, Mlp, MlpConfig};
//! use tch::{nn::VarStore, Device, Kind};
//! let mut rng = rl_core::rng_from_seed(0); // the component's own stream
//! let vs = VarStore::new(Device::Cpu);
//! let net = Mlp::new(&vs.root(), 4, 1, &MlpConfig::new([32, 32]).activation(Activation::Tanh).check()?, &mut rng)?;
//! let mut opt = Adam::for_var_store(AdamParams::default().check()?, &vs)?;
//! let x = rl_nn::rand::standard_normal(&[8, 4], (Kind::Float, Device::Cpu), &mut rng)?;
//! let y = net.f_forward(&x)?;
//! assert_eq!(y.size(), [8, 1]);
//! opt.backward_step(&y.square().mean(Kind::Float))?;
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```
//!
//! Guide: `docs/rl-nn.md`.
//!
//! ## Using this crate from your own binary
//!
//! Linker arguments do not propagate from a library to the binaries that use it. A binary crate
//! (or any crate whose tests/examples link libtorch) needs, like this crate:
//!
//! 1. a direct dependency `torch-sys = "=0.24.0"` (so its build script sees
//!    `DEP_TCH_LIBTORCH_LIB`), and
//! 2. this `build.rs`:
//!
//! ```text
//! fn main() {
//!     if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
//!         println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.to_string_lossy());
//!     }
//!     println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
//!     println!("cargo:rustc-link-arg=-ltorch");
//! }
//! ```
//!
//! The rpath lets the binary run without `LD_LIBRARY_PATH`; `--no-as-needed` keeps
//! `libtorch_cuda.so` linked so CUDA is visible when the machine has it. libtorch itself comes
//! from the PyPI `torch==2.11.0` wheel (`LIBTORCH_USE_PYTORCH=1` or `LIBTORCH=<site-packages>/torch`).
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod activation;
pub mod check;
pub mod checkpoint;
pub mod convert;
pub mod device;
pub mod error;
pub mod init;
pub mod layers;
pub mod mlp;
pub mod optim;
pub mod parts;
pub mod rand;
pub mod target;

pub use checkpoint::LoadMode;
pub use device::{default_device, device_name, parse_device};
pub use error::{Result, RlNnError};
pub use mlp::{Activation, EnsembleMlp, Mlp, MlpConfig};
pub use optim::{Adam, AdamParams};
pub use target::{hard_update, soft_update};

/// Seeds libtorch's process-wide CPU and CUDA generators from a 64-bit seed (see
/// [`rl_core::seed`]).
///
/// Library code never calls this (conventions §3): models draw from [`init`] and [`rand`]. It
/// remains for programs that call libtorch's own random functions themselves.
pub fn seed_torch(seed: u64) {
    tch::manual_seed(rl_core::seed::torch_seed(seed));
}

#[cfg(test)]
mod autotraits {
    fn has_send<T: Send + Sized>() {}

    #[test]
    fn models_are_send() {
        has_send::<super::Mlp>();
        has_send::<super::EnsembleMlp>();
        has_send::<super::RlNnError>();
        has_send::<super::Adam>();
        has_send::<super::layers::TransformerBlock>();
    }
}
