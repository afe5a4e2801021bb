//! The error type of `aigb-sim` and `aigb` (one enum for both: `aigb` re-exports it and turns on
//! this crate's `tch` feature, which adds the variants of the learned bidders' errors).

use std::path::PathBuf;

/// Errors returned by `aigb-sim` and `aigb`. Every variant names the offending value; a call
/// that returns an error leaves the simulator, bidders and datasets as they were.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AigbError {
    /// A parameter was outside its valid range (`name` is the dotted field path).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Field name, dotted for nested parameters (`auction.reserve_price`).
        name: String,
        /// The value passed, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A bid was NaN, infinite or (unless negative bids are clipped) negative.
    #[error(
        "invalid bid {value} from advertiser {advertiser} ({bidder}) at tick {tick}, impression {index}: {reason}"
    )]
    InvalidBid {
        /// Advertiser slot.
        advertiser: usize,
        /// The bidder's name.
        bidder: String,
        /// Tick of the period.
        tick: usize,
        /// Index of the impression inside the tick.
        index: usize,
        /// The offending bid.
        value: f64,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// An array had a different length than required.
    #[error("shape mismatch for `{what}`: expected {expected}, got {got}")]
    Shape {
        /// What was being checked.
        what: String,
        /// The expected shape, formatted.
        expected: String,
        /// The shape that was passed, formatted.
        got: String,
    },
    /// A value that must be finite was NaN or infinite.
    #[error("non-finite value {value} in `{what}` at index {index}")]
    NonFinite {
        /// What was being checked.
        what: String,
        /// The first offending index.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// An input that must be non-empty was empty (no advertisers, no impressions, no periods).
    #[error("`{what}` is empty")]
    Empty {
        /// What was empty.
        what: String,
    },
    /// An id (advertiser slot, period, tick, category) outside its range.
    #[error("unknown {what} {id}")]
    UnknownId {
        /// What kind of id.
        what: String,
        /// The id.
        id: String,
    },
    /// Evaluation periods overlap the periods a bidder was trained on.
    #[error(
        "evaluation period {period} is also a training period; held-out evaluation must share nothing with training"
    )]
    Leak {
        /// The shared period index.
        period: u64,
    },
    /// The overspend drop loop did not converge within its round limit.
    #[error("budget drop loop did not converge at tick {tick} after {rounds} rounds")]
    DropLoop {
        /// Tick of the period.
        tick: usize,
        /// Rounds run.
        rounds: usize,
    },
    /// A recorded stream (auction draws, drop choices) does not fit the period being replayed:
    /// it ran out, has calls or choices left over, or disagrees with what the replay needs.
    #[error("replay mismatch in {what}: {reason}")]
    Replay {
        /// Which stream and where (tick, call or drop round, advertiser, slot).
        what: String,
        /// What the replay needed and what the recording holds.
        reason: String,
    },
    /// A dataset or checkpoint file is malformed; nothing was loaded.
    #[error("corrupt file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong (line and column where known).
        reason: String,
    },
    /// A learned bidder was used before it was trained or loaded.
    #[error("{0}")]
    NotReady(String),
    /// Errors from `rl-core`.
    #[error(transparent)]
    Core(#[from] rl_core::RlCoreError),
    /// Errors from `rl-nn` (feature `tch`, which `aigb` turns on).
    #[cfg(feature = "tch")]
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// Errors from `offline-rl` (the IQL bidder: its parameters, training and checkpoints;
    /// feature `tch`).
    #[cfg(feature = "tch")]
    #[error(transparent)]
    Offline(#[from] offline_rl::OfflineError),
    /// Errors from libtorch (feature `tch`).
    #[cfg(feature = "tch")]
    #[error(transparent)]
    Tch(#[from] tch::TchError),
    /// I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON (de)serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl AigbError {
    /// [`AigbError::InvalidParameter`] for field `name` holding `value`.
    pub fn invalid(name: impl Into<String>, value: impl std::fmt::Display, reason: impl Into<String>) -> Self {
        AigbError::InvalidParameter { name: name.into(), value: value.to_string(), reason: reason.into() }
    }

    /// Prefixes the field name of an [`AigbError::InvalidParameter`] with `prefix.` (nested
    /// parameters); other errors pass through.
    pub fn nested(self, prefix: &str) -> Self {
        match self {
            AigbError::InvalidParameter { name, value, reason } => {
                AigbError::InvalidParameter { name: format!("{prefix}.{name}"), value, reason }
            }
            other => other,
        }
    }
}

/// `Result` with [`AigbError`].
pub type Result<T, E = AigbError> = std::result::Result<T, E>;

/// Checks that `x` is finite and `lo <= x <= hi` (either bound may be infinite); the
/// [`AigbError::InvalidParameter`] names `name` (shared with `aigb`'s learned bidders).
pub fn check_range(name: &str, x: f64, lo: f64, hi: f64) -> Result<()> {
    if !x.is_finite() || x < lo || x > hi {
        return Err(AigbError::invalid(name, x, format!("must be finite and in [{lo}, {hi}]")));
    }
    Ok(())
}

/// Checks that `x` is finite and `> 0`; the [`AigbError::InvalidParameter`] names `name`.
pub fn check_positive(name: &str, x: f64) -> Result<()> {
    if !(x.is_finite() && x > 0.0) {
        return Err(AigbError::invalid(name, x, "must be finite and > 0"));
    }
    Ok(())
}
