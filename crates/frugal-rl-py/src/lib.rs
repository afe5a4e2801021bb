//! Python bindings of frugal-rl's tch-free crates (`import frugal_rl`).
//!
//! The pure-Rust half (this module and [`build`]) turns a selector kind and a JSON parameter
//! object into a boxed [`rlvr_select::Selector`] and carries the run state the Python class
//! keeps next to it (RNG, step). The Python half (module `py`, feature `python`) is the PyO3
//! extension `frugal_rl._native`; see `docs/python.md`.
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg(feature = "python")]
mod py;

pub mod build;

pub use build::{selector_from_json, SelectorKind, KINDS};
