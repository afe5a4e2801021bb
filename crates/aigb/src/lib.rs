//! # aigb
//!
//! Auto-bidding under budget and CPA constraints: the learned bidders, on the AuctionNet-faithful
//! simulator of [`aigb_sim`], which this crate re-exports whole (`aigb::Simulator`,
//! `aigb::market::generate_dataset`, `aigb::AigbError`, ... are `aigb_sim`'s items, so one
//! import path serves both halves).
//!
//! From `aigb-sim` (no libtorch): [`traffic`], [`auction`], [`sim`] (the market
//! [`Simulator`], the score, logged-period replay), the [`Bidder`] trait and the rule-based
//! [`bidders`], [`market`] (line-ups, logged-data generation), [`dataset`] (AuctionNet-format
//! trajectories), [`eval`] (held-out evaluation), [`policy`] (plain-Rust MLP policies,
//! [`PolicyBidder`]), [`stats`], and the error type [`AigbError`].
//!
//! Here, with the `tch` feature (default; libtorch through `tch`/`rl-nn`/`offline-rl`):
//! - `learned`: behaviour cloning on logged trajectories, exported to a [`PolicyBidder`];
//! - `iql`: `offline-rl`'s IQL trained on them (`IqlBidder`);
//! - `dt`: the decision transformer (`DtBidder`) on `nn`'s causal transformer;
//! - `diffusion`, `planner`: the DiffBid / AIGB planner (a conditional DDPM over state
//!   trajectories with an inverse-dynamics model); `traj_eval`, `search`: AIGB-Pearl's
//!   trajectory evaluator and the policy search that fine-tunes the planner against it;
//! - `nn`: the network pieces they share (layers, the causal transformer, plain-Rust weights).
//!
//! ```
//! use aigb::{auctionnet_advertisers, Bidder, FixedCpaBidder, FixedCpaParams, PidBidder, PidParams, SimParams, Simulator};
//! use rl_core::Params;
//!
//! let pv_num = 10_000;
//! let sim = Simulator::new(SimParams::default().pv_num(pv_num).check()?, auctionnet_advertisers(pv_num as f64 / 500_000.0))?;
//! let (fixed, pid) = (FixedCpaParams::default().check()?, PidParams::default().check()?);
//! let mut bidders: Vec<Box<dyn Bidder>> = (0..48)
//!     .map(|i| -> Box<dyn Bidder> {
//!         if i == 0 { Box::new(FixedCpaBidder::new(fixed.clone())) } else { Box::new(PidBidder::new(pid.clone())) }
//!     })
//!     .collect();
//! let period = sim.run_period(7, &mut bidders, None)?;
//! let me = &period.advertisers[0];
//! println!("{}: {} conversions, cost {:.2}, score {:.2}", me.bidder, me.conversions(), me.cost(), me.score());
//! # Ok::<(), aigb::AigbError>(())
//! ```
//!
//! Features: `tch` (default) adds the learned bidders (a binary using them needs the `build.rs`
//! of `rl-nn`'s docs) and turns on `aigb-sim/tch` (the learned bidders' variants of
//! [`AigbError`]). `--no-default-features` is `aigb-sim` alone, under this crate's name (the
//! facade's tch-free `aigb` feature).
//!
//! Guide: `docs/aigb.md`; speed: `docs/benchmarks.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

/// Everything of the simulator crate: its modules (`aigb::sim`, `aigb::market`, ...) and its
/// root items (`aigb::Simulator`, `aigb::AigbError`, ...).
pub use aigb_sim::*;

#[cfg(feature = "tch")]
pub mod diffusion;
#[cfg(feature = "tch")]
pub mod dt;
#[cfg(all(test, feature = "tch"))]
mod fixture;
#[cfg(feature = "tch")]
pub mod iql;
#[cfg(feature = "tch")]
pub mod learned;
#[cfg(feature = "tch")]
pub mod nn;
#[cfg(feature = "tch")]
pub mod planner;
#[cfg(feature = "tch")]
pub mod search;
#[cfg(feature = "tch")]
pub mod traj_eval;
