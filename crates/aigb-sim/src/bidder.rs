//! The [`Bidder`] trait, what a bidder sees at each tick ([`TickContext`]), its per-tick history
//! ([`TickRecord`]) and AuctionNet's 16-dimensional state features ([`state_features`]).

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Dimension of AuctionNet's trajectory state.
pub const STATE_DIM: usize = 16;

/// Names of the 16 state features, in AuctionNet's order
/// (`strategy_train_env/.../train_data_generator.py` and the bidding strategies).
pub const STATE_FEATURES: [&str; STATE_DIM] = [
    "time_left",
    "budget_left",
    "avg_bid_all",
    "avg_bid_last3",
    "avg_least_winning_cost_all",
    "avg_pvalue_all",
    "avg_conversion_all",
    "avg_xi_all",
    "avg_least_winning_cost_last3",
    "avg_pvalue_last3",
    "avg_conversion_last3",
    "avg_xi_last3",
    "current_pvalue_mean",
    "current_pv_num",
    "last3_pv_num",
    "history_pv_num",
];

/// What an advertiser is, for one period: its slot, budget, CPA constraint and category.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeriodInfo {
    /// Delivery period index.
    pub period: u64,
    /// Advertiser slot (0-based).
    pub advertiser: usize,
    /// Budget of the period.
    pub budget: f64,
    /// CPA constraint (target cost per conversion).
    pub cpa: f64,
    /// Industry category.
    pub category: usize,
    /// Ticks in the period.
    pub num_ticks: usize,
}

/// One advertiser's outcome of one tick (what the bidder learns after the tick, and one step of
/// its logged trajectory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TickRecord {
    /// Tick index.
    pub tick: usize,
    /// Impressions in the tick.
    pub num_pv: u64,
    /// Remaining budget at the start of the tick.
    pub remaining_budget: f64,
    /// Whether the advertiser took part (remaining budget at least the minimum).
    pub active: bool,
    /// Σ bids (after the drop loop zeroed some).
    pub bid_sum: f64,
    /// Σ pValue.
    pub pvalue_sum: f64,
    /// Σ least winning cost of the tick's impressions (shared by all advertisers).
    pub least_winning_cost_sum: f64,
    /// Slots won.
    pub wins: u64,
    /// Slots won and exposed.
    pub exposures: u64,
    /// Conversions.
    pub conversions: u64,
    /// Cost paid.
    pub cost: f64,
    /// Σ pValue over exposed slots.
    pub exposed_pvalue: f64,
}

impl TickRecord {
    /// The tick's bid coefficient `Σ bid / Σ pValue` (AuctionNet's logged action; 0 without
    /// pValue mass).
    pub fn action(&self) -> f64 {
        if self.pvalue_sum > 0.0 {
            self.bid_sum / self.pvalue_sum
        } else {
            0.0
        }
    }

    fn per_pv(&self, x: f64) -> f64 {
        if self.num_pv > 0 {
            x / self.num_pv as f64
        } else {
            0.0
        }
    }
}

/// AuctionNet's 16 state features at the start of `tick` (order: [`STATE_FEATURES`]).
///
/// Averages are means of per-tick means over the past ticks (`_all`) or the last three
/// (`_last3`), 0 without history; pValue, bid, least winning cost, conversion and win (`xi`)
/// means are per impression. This follows the training-data generator; the reference bidding
/// strategies compute `_last3` over ticks 0–2 instead of the last three (their
/// `mean_of_last_n_elements(history, 3)`), which we do not reproduce.
pub fn state_features(
    history: &[TickRecord],
    tick: usize,
    num_ticks: usize,
    budget: f64,
    remaining_budget: f64,
    current_pvalues: &[f32],
) -> [f32; STATE_DIM] {
    let sum: f64 = current_pvalues.iter().map(|&x| f64::from(x)).sum();
    state_features_from_sums(history, tick, num_ticks, budget, remaining_budget, sum, current_pvalues.len())
}

/// [`state_features`] from the current tick's pValue sum and impression count.
pub fn state_features_from_sums(
    history: &[TickRecord],
    tick: usize,
    num_ticks: usize,
    budget: f64,
    remaining_budget: f64,
    current_pvalue_sum: f64,
    current_num_pv: usize,
) -> [f32; STATE_DIM] {
    let mean_of = |recs: &[TickRecord], f: &dyn Fn(&TickRecord) -> f64| -> f64 {
        if recs.is_empty() {
            0.0
        } else {
            recs.iter().map(f).sum::<f64>() / recs.len() as f64
        }
    };
    let last3 = &history[history.len().saturating_sub(3)..];
    let bid = |r: &TickRecord| r.per_pv(r.bid_sum);
    let lwc = |r: &TickRecord| r.per_pv(r.least_winning_cost_sum);
    let pv = |r: &TickRecord| r.per_pv(r.pvalue_sum);
    let conv = |r: &TickRecord| r.per_pv(r.conversions as f64);
    let xi = |r: &TickRecord| r.per_pv(r.wins as f64);
    let cur_mean = if current_num_pv == 0 { 0.0 } else { current_pvalue_sum / current_num_pv as f64 };
    let s = [
        (num_ticks.saturating_sub(tick)) as f64 / num_ticks.max(1) as f64,
        if budget > 0.0 { remaining_budget / budget } else { 0.0 },
        mean_of(history, &bid),
        mean_of(last3, &bid),
        mean_of(history, &lwc),
        mean_of(history, &pv),
        mean_of(history, &conv),
        mean_of(history, &xi),
        mean_of(last3, &lwc),
        mean_of(last3, &pv),
        mean_of(last3, &conv),
        mean_of(last3, &xi),
        cur_mean,
        current_num_pv as f64,
        last3.iter().map(|r| r.num_pv as f64).sum(),
        history.iter().map(|r| r.num_pv as f64).sum(),
    ];
    s.map(|x| x as f32)
}

/// Everything a bidder sees when it bids in one tick.
#[derive(Debug, Clone, Copy)]
pub struct TickContext<'a> {
    /// The advertiser and period.
    pub info: &'a PeriodInfo,
    /// Tick index.
    pub tick: usize,
    /// Remaining budget now.
    pub remaining_budget: f64,
    /// This tick's pValues (one per impression).
    pub pvalues: &'a [f32],
    /// This tick's sigmas.
    pub sigmas: &'a [f32],
    /// The advertiser's past ticks of this period.
    pub history: &'a [TickRecord],
}

impl TickContext<'_> {
    /// AuctionNet's 16 state features now (see [`state_features`]).
    pub fn state(&self) -> [f32; STATE_DIM] {
        state_features(
            self.history,
            self.tick,
            self.info.num_ticks,
            self.info.budget,
            self.remaining_budget,
            self.pvalues,
        )
    }

    /// Ticks left including this one.
    pub fn ticks_left(&self) -> usize {
        self.info.num_ticks.saturating_sub(self.tick)
    }

    /// Cost paid in the previous tick (0 at the first tick).
    pub fn last_cost(&self) -> f64 {
        self.history.last().map_or(0.0, |r| r.cost)
    }
}

/// An auto-bidding agent: called once per tick with that tick's impressions, writes one bid
/// per impression.
///
/// The simulator calls [`Bidder::begin_period`] before the first tick, [`Bidder::bid`] at each
/// tick while the advertiser's remaining budget is at least the market's minimum (otherwise it
/// bids 0 without asking), and [`Bidder::end_tick`] after every tick. Bids must be finite and
/// non-negative (the simulator rejects others with [`crate::AigbError::InvalidBid`]). Most
/// bidders bid `α_t · pValue` with one coefficient per tick ([`write_linear_bids`]).
///
/// Implementations are `Send` so periods can run on several threads.
pub trait Bidder: Send + std::fmt::Debug {
    /// A short name for logs and tables.
    fn name(&self) -> String;

    /// Starts a period for the given advertiser.
    ///
    /// # Errors
    /// Bidder-specific (e.g. a learned bidder that was not trained).
    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()>;

    /// Writes one bid per impression of `ctx.pvalues` into `out` (same length).
    ///
    /// # Errors
    /// Bidder-specific.
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()>;

    /// Observes the tick's outcome (after the budget drop loop). Default: nothing.
    fn end_tick(&mut self, _record: &TickRecord) {}
}

impl<B: Bidder + ?Sized> Bidder for Box<B> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()> {
        (**self).begin_period(info)
    }
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        (**self).bid(ctx, out)
    }
    fn end_tick(&mut self, record: &TickRecord) {
        (**self).end_tick(record)
    }
}

/// `out[i] = alpha · pvalues[i]` (a linear bid; `alpha` below 0 or non-finite bids 0).
pub fn write_linear_bids(alpha: f64, pvalues: &[f32], out: &mut [f32]) {
    let a = if alpha.is_finite() && alpha > 0.0 { alpha as f32 } else { 0.0 };
    for (o, p) in out.iter_mut().zip(pvalues) {
        *o = a * p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tick: usize, n: u64, bid: f64, pv: f64, lwc: f64, wins: u64, conv: u64) -> TickRecord {
        TickRecord {
            tick,
            num_pv: n,
            remaining_budget: 0.0,
            active: true,
            bid_sum: bid,
            pvalue_sum: pv,
            least_winning_cost_sum: lwc,
            wins,
            exposures: wins,
            conversions: conv,
            cost: 0.0,
            exposed_pvalue: 0.0,
        }
    }

    #[test]
    fn state_features_by_hand() {
        let h = [
            rec(0, 10, 1.0, 0.1, 2.0, 5, 1),
            rec(1, 20, 4.0, 0.4, 2.0, 4, 0),
            rec(2, 10, 2.0, 0.1, 1.0, 0, 0),
            rec(3, 40, 4.0, 0.4, 4.0, 8, 2),
        ];
        let s = state_features(&h, 4, 48, 100.0, 25.0, &[0.5, 0.25]);
        assert_eq!(s[0], 44.0 / 48.0);
        assert_eq!(s[1], 0.25);
        // per-tick mean bids: 0.1, 0.2, 0.2, 0.1 → all 0.15, last3 (0.2+0.2+0.1)/3
        assert!((s[2] - 0.15).abs() < 1e-7);
        assert!((s[3] - 0.5 / 3.0).abs() < 1e-7);
        // lwc per tick: 0.2, 0.1, 0.1, 0.1
        assert!((s[4] - 0.125).abs() < 1e-7);
        assert!((s[8] - 0.1).abs() < 1e-7);
        // pvalue per tick 0.01, 0.02, 0.01, 0.01
        assert!((s[5] - 0.0125).abs() < 1e-7);
        // conversions per tick 0.1, 0, 0, 0.05 ; xi 0.5, 0.2, 0, 0.2
        assert!((s[6] - 0.0375).abs() < 1e-7);
        assert!((s[7] - 0.225).abs() < 1e-7);
        assert!((s[10] - 0.05 / 3.0).abs() < 1e-7);
        assert!((s[11] - 0.4 / 3.0).abs() < 1e-7);
        assert_eq!(s[12], 0.375);
        assert_eq!(s[13], 2.0);
        assert_eq!(s[14], 70.0);
        assert_eq!(s[15], 80.0);
        let s0 = state_features(&[], 0, 48, 100.0, 100.0, &[]);
        assert_eq!(s0[0], 1.0);
        assert!(s0[2..].iter().all(|&x| x == 0.0));
        assert_eq!(h[1].action(), 10.0);
    }
}
