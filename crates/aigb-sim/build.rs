//! With the `tch` feature (libtorch): the rpath and `--no-as-needed -ltorch` link arguments for
//! this crate's own tests, examples and doctests (as `rl-nn/build.rs`). Without it nothing is
//! linked, so `--no-default-features` builds and tests without libtorch.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.to_string_lossy());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
