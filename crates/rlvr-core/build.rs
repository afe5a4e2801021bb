//! With feature `tch`: rpath + `--no-as-needed -ltorch` for this crate's own tests and examples
//! (downstream binary crates copy this file, see `docs/setup.md`). Without it, nothing links
//! libtorch and this does nothing.
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
