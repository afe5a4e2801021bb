//! With the `mujoco` feature: checks that the MuJoCo library is where `MUJOCO_DYNAMIC_LINK_DIR`
//! points (set by `.cargo/config.toml` to the `.mujoco` link that `make provision-mujoco`
//! creates) and embeds an rpath to it in this package's tests, examples and benches, so they
//! run without `LD_LIBRARY_PATH`. Without the feature it does nothing.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MUJOCO_DYNAMIC_LINK_DIR");
    if std::env::var_os("CARGO_FEATURE_MUJOCO").is_none() {
        return;
    }
    let hint = "run `make provision-mujoco` in the repository root (it installs mujoco==3.17.0 from \
                PyPI and links `.mujoco`), or set MUJOCO_DYNAMIC_LINK_DIR to an absolute folder \
                holding libmujoco.so (MuJoCo 3.17.0)";
    let Some(dir) = std::env::var_os("MUJOCO_DYNAMIC_LINK_DIR") else {
        println!("cargo:warning=rl-envs feature `mujoco`: MUJOCO_DYNAMIC_LINK_DIR is not set; {hint}");
        return;
    };
    let lib = Path::new(&dir).join("libmujoco.so");
    if !lib.exists() {
        println!("cargo:warning=rl-envs feature `mujoco`: MuJoCo library not found at {}; {hint}", lib.display());
        return;
    }
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", Path::new(&dir).display());
}
