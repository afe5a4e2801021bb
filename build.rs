//! Link wiring for binaries built from this package (examples, tests, benches).
//!
//! `cargo:rustc-link-arg` does not propagate to dependents, so every package that produces
//! executables linking libtorch must carry these lines (see `docs/setup.md`):
//! - an rpath to libtorch's `lib/` folder, so executables run without `LD_LIBRARY_PATH`;
//! - `--no-as-needed -ltorch`, so `libtorch_cuda.so` stays linked and CUDA is visible when present;
//! - with the `mujoco` feature, an rpath to the MuJoCo library folder (`MUJOCO_DYNAMIC_LINK_DIR`).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MUJOCO_DYNAMIC_LINK_DIR");
    // `mujoco`: an rpath to the folder of libmujoco.so (the `.mujoco` link of
    // `make provision-mujoco`), so benches and examples run without LD_LIBRARY_PATH.
    if std::env::var_os("CARGO_FEATURE_MUJOCO").is_some() {
        if let Some(dir) = std::env::var_os("MUJOCO_DYNAMIC_LINK_DIR") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.to_string_lossy());
        }
    }
    if std::env::var_os("CARGO_FEATURE_NN").is_none() {
        return;
    }
    if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.to_string_lossy());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
