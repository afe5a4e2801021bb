//! rpath + `--no-as-needed -ltorch` for this crate's own tests and examples.
//! Downstream binary crates copy this file (see the crate docs and `docs/setup.md`).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.to_string_lossy());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
