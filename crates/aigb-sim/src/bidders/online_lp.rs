//! OnlineLP (AuctionNet's `onlineLp.py` / `onlinelp_bidding_strategy.py`): a table, built from
//! past periods, of the cost of buying an advertiser's cheapest impressions, and a bidder that
//! reads its bid coefficient from it.
//!
//! Table, per category `c` and tick `t`: take a sample of past impressions of category `c` from
//! ticks ≥ t (pValue > 0, least winning cost above the reserve), sort them by
//! `realCPA = lwc / (pValue + 1e-4)` and accumulate their least winning costs; keep points every
//! `interval` of cumulative cost up to `max_cum_cost`. Bidder: `α = realCPA` of the first point
//! whose cumulative cost exceeds the remaining budget (the CPA at which the remaining budget
//! would be spent, the LP dual price), `α = CPA` when none does, capped at `1.5 · CPA`.

use serde::{Deserialize, Serialize};

use crate::auction::TickAuction;
use crate::bidder::{write_linear_bids, Bidder, PeriodInfo, TickContext};
use crate::error::{check_positive, check_range, AigbError, Result};
use crate::sim::Observer;
use crate::traffic::TickTraffic;

/// One sampled past impression.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LpSample {
    /// Category of the advertiser it was sampled for.
    pub category: usize,
    /// Tick.
    pub tick: usize,
    /// That advertiser's pValue.
    pub pvalue: f32,
    /// The impression's least winning cost.
    pub least_winning_cost: f32,
}

/// Parameters of the OnlineLP table and bidder.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `sample_fraction` | 0.125 | share of (impression, advertiser) rows sampled (AuctionNet: 1/8, one advertiser's worth per category) | (0, 1] |
/// | `max_cum_cost` | 6000 | table cut-off (AuctionNet's `max_budget`) | > 0 |
/// | `interval` | 10 | cost spacing of kept points | > 0 |
/// | `cap_cpa_multiplier` | 1.5 | α ≤ this · CPA | > 0 |
/// | `reserve_price` | 0.0001 | samples need a least winning cost above it | ≥ 0 |
/// | `seed` | 0 | seed of the row sampling | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnlineLpParams {
    /// Row sampling share.
    pub sample_fraction: f64,
    /// Table cut-off.
    pub max_cum_cost: f64,
    /// Point spacing.
    pub interval: f64,
    /// α cap as a CPA multiple.
    pub cap_cpa_multiplier: f64,
    /// Reserve price of the market the samples come from.
    pub reserve_price: f64,
    /// Sampling seed.
    pub seed: u64,
}

impl Default for OnlineLpParams {
    fn default() -> Self {
        Self {
            sample_fraction: 0.125,
            max_cum_cost: 6000.0,
            interval: 10.0,
            cap_cpa_multiplier: 1.5,
            reserve_price: 0.0001,
            seed: 0,
        }
    }
}

crate::traffic::setters!(OnlineLpParams {
    sample_fraction: f64,
    max_cum_cost: f64,
    interval: f64,
    cap_cpa_multiplier: f64,
    reserve_price: f64,
    seed: u64,
});

impl OnlineLpParams {
    /// Scales the cost quantities (`max_cum_cost`, `interval`) for a market whose budgets are
    /// `budget_scale` times AuctionNet's.
    #[must_use]
    pub fn budget_scale(mut self, budget_scale: f64) -> Self {
        self.max_cum_cost *= budget_scale;
        self.interval *= budget_scale;
        self
    }
}

impl rl_core::Params for OnlineLpParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        check_range("sample_fraction", self.sample_fraction, f64::MIN_POSITIVE, 1.0)?;
        check_positive("max_cum_cost", self.max_cum_cost)?;
        check_positive("interval", self.interval)?;
        check_positive("cap_cpa_multiplier", self.cap_cpa_multiplier)?;
        check_range("reserve_price", self.reserve_price, 0.0, f64::INFINITY)
    }
}

/// An [`Observer`] collecting OnlineLP samples from simulated periods.
#[derive(Debug, Clone)]
pub struct LpHistory {
    categories: Vec<usize>,
    fraction: f64,
    reserve: f64,
    seed: u64,
    /// The samples so far.
    pub samples: Vec<LpSample>,
}

impl LpHistory {
    /// A collector for advertisers with `categories` (slot order).
    pub fn new(categories: Vec<usize>, params: &OnlineLpParams) -> Self {
        Self {
            categories,
            fraction: params.sample_fraction,
            reserve: params.reserve_price,
            seed: rl_core::derive_seed_named(params.seed, "online-lp-sample"),
            samples: Vec::new(),
        }
    }
}

impl Observer for LpHistory {
    fn on_tick(&mut self, period: u64, traffic: &TickTraffic, _bids: &[f32], auction: &TickAuction) {
        let seed = rl_core::derive_seed(rl_core::derive_seed(self.seed, period), traffic.tick as u64);
        for (a, &c) in self.categories.iter().enumerate().take(traffic.num_advertisers) {
            let pv = traffic.pvalues_of(a);
            let s = rl_core::derive_seed(seed, a as u64);
            for (i, (&p, &lwc)) in pv.iter().zip(&auction.least_winning_cost).enumerate() {
                if p <= 0.0 || f64::from(lwc) <= self.reserve {
                    continue;
                }
                if crate::auction::unit(s, i, 0) < self.fraction {
                    self.samples.push(LpSample { category: c, tick: traffic.tick, pvalue: p, least_winning_cost: lwc });
                }
            }
        }
    }
}

/// The OnlineLP table: per category and tick, `(realCPA, cumulative cost)` points in increasing
/// order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OnlineLpTable {
    num_ticks: usize,
    /// `[category][tick]` → points.
    points: Vec<Vec<Vec<(f64, f64)>>>,
}

impl OnlineLpTable {
    /// Builds the table from samples.
    ///
    /// The table is dense in `(category, tick)`: its `(max category + 1) × num_ticks` point
    /// lists are checked against [`rl_core::MemoryBudget::default`] before they are allocated.
    ///
    /// # Errors
    /// [`AigbError::Empty`] without samples or ticks; [`AigbError::NonFinite`] for a
    /// non-finite sample; [`AigbError::UnknownId`] for a tick ≥ `num_ticks` or a category above
    /// [`crate::sim::MAX_CATEGORY`]; [`AigbError::Core`] when the table exceeds the budget.
    pub fn build(samples: &[LpSample], num_ticks: usize, params: &OnlineLpParams) -> Result<Self> {
        if samples.is_empty() {
            return Err(AigbError::Empty { what: "OnlineLP samples".into() });
        }
        if num_ticks == 0 {
            return Err(AigbError::Empty { what: "ticks".into() });
        }
        if let Some(s) = samples.iter().find(|s| s.category > crate::sim::MAX_CATEGORY) {
            return Err(AigbError::UnknownId { what: "category".into(), id: s.category.to_string() });
        }
        let n_cat = samples.iter().map(|s| s.category).max().map_or(0, |m| m + 1);
        rl_core::MemoryBudget::default().check_elems(
            "OnlineLP table (categories × ticks)",
            &[n_cat as u64, num_ticks as u64],
            std::mem::size_of::<Vec<(f64, f64)>>() as u64,
        )?;
        // per category: (tick, realCPA, cost)
        let mut by_cat: Vec<Vec<(usize, f64, f64)>> = vec![Vec::new(); n_cat];
        for (i, s) in samples.iter().enumerate() {
            if !(s.pvalue.is_finite() && s.least_winning_cost.is_finite()) {
                return Err(AigbError::NonFinite { what: "OnlineLP samples".into(), index: i, value: f64::NAN });
            }
            if s.tick >= num_ticks {
                return Err(AigbError::UnknownId { what: "tick".into(), id: s.tick.to_string() });
            }
            let lwc = f64::from(s.least_winning_cost);
            by_cat[s.category].push((s.tick, lwc / (f64::from(s.pvalue) + 1e-4), lwc));
        }
        let mut points = vec![vec![Vec::new(); num_ticks]; n_cat];
        for (c, rows) in by_cat.iter_mut().enumerate() {
            rows.sort_by(|x, y| x.1.total_cmp(&y.1));
            for (t, pts) in points[c].iter_mut().enumerate() {
                let mut cum = 0.0;
                let mut last = 0.0;
                let mut pending: Option<(f64, f64)> = None;
                for &(tick, cpa, cost) in rows.iter() {
                    if tick < t {
                        continue;
                    }
                    cum += cost;
                    if cum >= params.max_cum_cost {
                        break;
                    }
                    if cum - last >= params.interval {
                        pts.push((cpa, cum));
                        last = cum;
                        pending = None;
                    } else {
                        pending = Some((cpa, cum));
                    }
                }
                // AuctionNet also keeps the last row below the cut-off
                if let Some(p) = pending {
                    pts.push(p);
                }
            }
        }
        Ok(Self { num_ticks, points })
    }

    /// The coefficient for `category` at `tick` with `remaining` budget: the realCPA of the
    /// first point whose cumulative cost exceeds `remaining`, `None` when no point does.
    pub fn alpha(&self, category: usize, tick: usize, remaining: f64) -> Option<f64> {
        let pts = self.points.get(category)?.get(tick)?;
        let j = pts.partition_point(|p| p.1 <= remaining);
        pts.get(j).map(|p| p.0)
    }

    /// Points of `category` at `tick`.
    pub fn points(&self, category: usize, tick: usize) -> &[(f64, f64)] {
        self.points.get(category).and_then(|c| c.get(tick)).map_or(&[], |v| v.as_slice())
    }

    /// Ticks covered.
    pub fn num_ticks(&self) -> usize {
        self.num_ticks
    }
}

/// AuctionNet's OnlineLP bidder on an [`OnlineLpTable`].
#[derive(Debug, Clone)]
pub struct OnlineLpBidder {
    table: std::sync::Arc<OnlineLpTable>,
    cap: f64,
    info: Option<PeriodInfo>,
}

impl OnlineLpBidder {
    /// A bidder reading `table`.
    pub fn new(table: std::sync::Arc<OnlineLpTable>, params: &rl_core::Valid<OnlineLpParams>) -> Self {
        Self { table, cap: params.cap_cpa_multiplier, info: None }
    }
}

impl Bidder for OnlineLpBidder {
    fn name(&self) -> String {
        "online-lp".into()
    }
    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()> {
        self.info = Some(*info);
        Ok(())
    }
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        let info = ctx.info;
        let alpha = self
            .table
            .alpha(info.category, ctx.tick, ctx.remaining_budget)
            .unwrap_or(info.cpa)
            .min(self.cap * info.cpa);
        write_linear_bids(alpha, ctx.pvalues, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn table_by_hand() {
        // category 0: realCPA = lwc / (pv + 1e-4); pv = 0.0099 → realCPA = 100·lwc
        let s = |tick, lwc: f32| LpSample { category: 0, tick, pvalue: 0.0099, least_winning_cost: lwc };
        let samples = [s(0, 0.5), s(1, 0.2), s(1, 0.3), s(0, 0.1)];
        let p = OnlineLpParams::default().interval(0.25).max_cum_cost(10.0).check().unwrap();
        let tab = OnlineLpTable::build(&samples, 2, &p).unwrap();
        // tick 0: sorted costs 0.1, 0.2, 0.3, 0.5 → cum 0.1, 0.3 (kept), 0.6 (kept), 1.1 (kept)
        let pts = tab.points(0, 0);
        let cum: Vec<f64> = pts.iter().map(|p| (p.1 * 1e6).round() / 1e6).collect();
        assert_eq!(cum, vec![0.3, 0.6, 1.1]);
        // tick 1 uses only ticks ≥ 1: costs 0.2, 0.3 → cum 0.2 pending, 0.5 kept
        let cum1: Vec<f64> = tab.points(0, 1).iter().map(|p| (p.1 * 1e6).round() / 1e6).collect();
        assert_eq!(cum1, vec![0.5]);
        // remaining 0.4 → first point above is cum 0.6 with realCPA 100·0.3
        assert!((tab.alpha(0, 0, 0.4).unwrap() - 30.0).abs() < 1e-4);
        assert_eq!(tab.alpha(0, 0, 5.0), None);
        assert!(OnlineLpTable::build(&[], 2, &p).is_err());
        assert!(OnlineLpTable::build(&[s(5, 0.1)], 2, &p).is_err());
        // bidder: capped at 1.5 CPA, CPA when the budget exceeds the table
        let b = OnlineLpBidder::new(std::sync::Arc::new(tab), &p);
        let mut b = b;
        let info = PeriodInfo { period: 0, advertiser: 0, budget: 10.0, cpa: 10.0, category: 0, num_ticks: 2 };
        b.begin_period(&info).unwrap();
        let pv = [1.0f32];
        let mut out = [0.0f32];
        let ctx = TickContext { info: &info, tick: 0, remaining_budget: 0.4, pvalues: &pv, sigmas: &pv, history: &[] };
        b.bid(&ctx, &mut out).unwrap();
        assert_eq!(out[0], 15.0);
        let ctx = TickContext { remaining_budget: 5.0, ..ctx };
        b.bid(&ctx, &mut out).unwrap();
        assert_eq!(out[0], 10.0);
    }
}
