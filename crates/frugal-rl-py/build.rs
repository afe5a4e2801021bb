//! Run-time path to libtorch for this package's own tests and examples, never for the Python module.
//!
//! The bindings use only tch-free code, but in a workspace build (`cargo test --workspace`) Cargo
//! unifies features: other members turn on `rlvr-select`'s `neural` feature, so this package's
//! test and example executables then link `libtorch_cpu.so` too and need an rpath to find it, as
//! every other package's do (see the root `build.rs`). This package has no `tch` dependency of its
//! own (the wheel must not link libtorch), so the folder comes from `LIBTORCH`, which
//! `.cargo/config.toml` sets to the provisioned `.libtorch` link. An rpath to a library an
//! executable does not link is inert, so the argument is harmless when `neural` is off. The
//! `python` feature (maturin's build of the extension module) gets no rpath.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if std::env::var_os("CARGO_FEATURE_PYTHON").is_some() {
        return;
    }
    let Some(libtorch) = std::env::var_os("LIBTORCH") else { return };
    let lib = Path::new(&libtorch).join("lib");
    if lib.is_dir() {
        // Plain `rustc-link-arg` (every target): `rustc-link-arg-tests` would cover the library's
        // unit-test harness, but Cargo refuses it for a package without an integration test.
        println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.display());
    }
}
