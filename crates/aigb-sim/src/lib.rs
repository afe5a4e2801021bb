//! # aigb-sim
//!
//! The libtorch-free half of auto-bidding under budget and CPA constraints: a fast
//! re-implementation of the public AuctionNet simulator (`alimama-tech/AuctionNet`, "AuctionNet: A Novel Benchmark for
//! Decision-Making in Large-Scale Games", arXiv 2412.10798).
//!
//! - [`traffic`]: impressions per tick and per-advertiser pValue/sigma curves
//!   ([`PeriodTraffic`], AuctionNet's NeurIPS generator), seeded per period, tick and advertiser.
//! - [`auction`]: 3-slot GSP with reserve price, exposure, pay-on-exposure and conversions
//!   ([`TickAuction`]); AuctionNet's quirks behind [`CompatParams`] and the enums of
//!   [`AuctionParams`].
//! - [`sim`]: the market ([`Simulator`]): 48 ticks, budget cut-off, the overspend drop loop,
//!   the score `conversions · min(1, (CPA / realised CPA)²)` ([`score`]), periods on threads;
//!   the auction draws and drop choices from caller sources ([`PeriodDraws`], [`DropSource`]),
//!   so a logged AuctionNet period replays tick by tick ([`Simulator::replay_period`]).
//! - [`Bidder`]: the bidding trait; rule-based bidders in [`bidders`] ([`FixedCpaBidder`],
//!   [`PidBidder`], [`OnlineLpBidder`], [`NoisyBidder`]).
//! - [`market`]: competitor line-ups ([`BidderSpec`]), the OnlineLP table, logged-data
//!   generation from a heterogeneous noisy mix ([`generate_dataset`]).
//! - [`dataset`]: AuctionNet-format trajectories (16-dim state, bid coefficient, reward, cost)
//!   and validated CSV files ([`TrajectoryDataset`]).
//! - [`eval`]: held-out evaluation across budget/CPA scalings, slots and seeds ([`Evaluator`]).
//! - [`policy`]: state → bid-coefficient MLP policies in plain Rust ([`PolicyBidder`]); the
//!   `aigb` crate's learned bidders (behaviour cloning, IQL, decision transformer, diffusion
//!   planners) train on this crate's logged trajectories and run in its simulator.
//! - [`stats`]: market statistics and the comparison with AuctionNet's reference statistics.
//!
//! ```
//! use aigb_sim::{auctionnet_advertisers, Bidder, FixedCpaBidder, FixedCpaParams, PidBidder, PidParams, SimParams, Simulator};
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
//! # Ok::<(), aigb_sim::AigbError>(())
//! ```
//!
//! Features: none by default, and no libtorch (`cargo tree -p aigb-sim -e normal` has no
//! `tch`). `tch` only adds the error variants of `aigb`'s learned bidders ([`AigbError`] is one
//! enum for both crates); `aigb` turns it on.
//!
//! Guide: `docs/aigb.md`; speed: `docs/benchmarks.md`.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod auction;
pub mod bidder;
pub mod bidders;
pub mod dataset;
pub mod error;
pub mod eval;
pub mod market;
pub mod policy;
pub mod sim;
pub mod stats;
pub mod traffic;

pub use auction::{
    AdvertiserTick, AuctionParams, Cascade, DrawSource, RecordedDraws, ReserveRule, SeededDraws, TickAuction,
    ValueBounds, ValueCell, ValueNoise,
};
pub use bidder::{
    state_features, write_linear_bids, Bidder, PeriodInfo, TickContext, TickRecord, STATE_DIM, STATE_FEATURES,
};
pub use bidders::{
    FixedCpaBidder, FixedCpaParams, LpHistory, LpSample, NoiseParams, NoisyBidder, OnlineLpBidder, OnlineLpParams,
    OnlineLpTable, PacingRule, PidBidder, PidParams,
};
pub use dataset::{DatasetMeta, Padded, Step, Trajectory, TrajectoryDataset};
pub use error::{AigbError, Result};
pub use eval::{EvalParams, EvalReport, EvalRow, EvalSummary, Evaluator};
pub use market::{
    build_lineup, build_online_lp_table, default_lineup, generate_dataset, BidderSpec, DataGenParams, PID_CPA_CAP,
};
pub use policy::{MlpPolicy, PolicyBidder, StateNorm};
pub use sim::{
    auctionnet_advertisers, score, Advertiser, AdvertiserResult, CompatParams, DropChoice, DropSource, Observer,
    PeriodDraws, PeriodResult, RecordedDrop, RecordedDrops, RecordedPeriodDraws, SeededDrops, SeededPeriodDraws,
    SimParams, Simulator, AUCTIONNET_BUDGETS, AUCTIONNET_CPAS, MAX_ADVERTISERS, MAX_CATEGORY, SCORE_BETA,
};
pub use traffic::{PeriodTraffic, TickTraffic, TrafficParams, AUCTIONNET_TICK_WEIGHTS, MAX_TICK_PV};
