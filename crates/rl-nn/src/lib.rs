//! # rl-nn
//!
//! libtorch foundations for [frugal-rl](https://example.invalid/frugal-rl), through
//! [`tch`] 0.24 (PyTorch 2.11.0):
//!
//! - [`Mlp`] and [`EnsembleMlp`] builders ([`MlpConfig`]: widths, [`Activation`], LayerNorm,
//!   output activation); ensembles run all members in one batched matmul per layer.
//! - [`soft_update`] / [`hard_update`] for target networks.
//! - [`default_device`]: CUDA when available, overridden by `FRUGAL_DEVICE=cpu|cuda|cuda:N`.
//! - [`checkpoint`]: safetensors save/load with typed errors naming any missing or wrongly shaped
//!   tensor (nothing is modified by a failed load).
//! - [`convert`]: `Tensor` <-> `ndarray`.
//!
//! ```
//! use rl_nn::{Mlp, MlpConfig, Activation};
//! use tch::{nn::VarStore, Device, Kind, Tensor};
//! let vs = VarStore::new(Device::Cpu);
//! let net = Mlp::new(&vs.root(), 4, 1, &MlpConfig::new([32, 32]).activation(Activation::Tanh))?;
//! let y = net.f_forward(&Tensor::zeros([8, 4], (Kind::Float, Device::Cpu)))?;
//! assert_eq!(y.size(), [8, 1]);
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```
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

pub mod checkpoint;
pub mod convert;
pub mod device;
pub mod error;
pub mod mlp;
pub mod target;

pub use checkpoint::LoadMode;
pub use device::{default_device, device_name, parse_device};
pub use error::{Result, RlNnError};
pub use mlp::{Activation, EnsembleMlp, Mlp, MlpConfig};
pub use target::{hard_update, soft_update};

/// Seeds libtorch's CPU and CUDA generators from a 64-bit seed (see [`rl_core::seed`]).
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
    }
}
