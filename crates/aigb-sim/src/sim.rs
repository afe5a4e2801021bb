//! The market simulator: one delivery period of `T` ticks for `N` advertisers, each driven by a
//! [`Bidder`], with AuctionNet's budget handling (`alimama-tech/AuctionNet:run/run_test.py`):
//!
//! 1. an advertiser whose remaining budget is below `min_remaining_budget` bids 0 (its bidder
//!    is not asked);
//! 2. the auction runs on every impression of the tick;
//! 3. the **drop loop**: while some advertiser's tick cost exceeds its remaining budget, with
//!    `over = (cost − remaining) / (cost + 1e-4)`, drop `⌈n_k · over⌉` randomly chosen
//!    impressions of every slot `k` it won (its bid becomes 0) and re-run those auctions;
//! 4. costs are charged, every bidder sees its [`TickRecord`].
//!
//! The score of a period is `conversions · min(1, (CPA / realised CPA)^β)`, β = 2 ([`score`]).
//!
//! A period's randomness comes from two sources: a [`PeriodDraws`] (the exposure and conversion
//! draws of every auction call) and a [`DropSource`] (which impressions the drop loop takes
//! from an overspending advertiser). [`Simulator::run_period`] uses the seeded ones
//! ([`SeededPeriodDraws`], [`SeededDrops`]); [`Simulator::run_period_with`] takes any, and
//! [`Simulator::replay_period`] also takes the impressions, so a logged period (e.g. one of
//! AuctionNet's, [`RecordedPeriodDraws`] and [`RecordedDrops`]) replays tick by tick.

use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::auction::{
    AdvertiserTick, AuctionParams, DrawSource, RecordedDraws, SeededDraws, TickAuction, ValueBounds, ValueNoise,
    NO_WINNER,
};
use crate::bidder::{state_features_from_sums, Bidder, PeriodInfo, TickContext, TickRecord, STATE_DIM};
use crate::error::{check_positive, check_range, AigbError, Result};
use crate::traffic::{PeriodTraffic, TickTraffic, TrafficParams, MAX_TICK_PV};
use rl_core::MemoryBudget;

/// The CPA-penalty exponent β of the competition score.
pub const SCORE_BETA: f64 = 2.0;

/// The competition score of a period (`Tracker/PlayerAnalysis.py`):
/// `conversions · min(1, (cpa / realised_cpa)^beta)` with `realised_cpa = cost / (conversions + 1e-10)`.
pub fn score(conversions: f64, cost: f64, cpa: f64, beta: f64) -> f64 {
    let real = cost / (conversions + 1e-10);
    let penalty = if real > cpa { (cpa / (real + 1e-10)).powf(beta) } else { 1.0 };
    penalty * conversions
}

/// AuctionNet behaviours that we consider defects, reproducible for comparisons.
///
/// | name | default | AuctionNet | effect |
/// |---|---|---|---|
/// | `reseed_noise_each_call` | false | true | exposure and conversion noise uses the same seed in every tick and period (AuctionNet re-seeds NumPy with 1 on every auction call), so the noise pattern repeats |
/// | `reseed_drop_choice` | false | true | the drop loop chooses dropped impressions with a generator re-seeded for every advertiser and slot |
/// | `clip_negative_bids` | false | true | negative bids are set to 0 instead of being an error |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CompatParams {
    /// Same noise seed for every auction call.
    pub reseed_noise_each_call: bool,
    /// Re-seeded generator for each drop choice.
    pub reseed_drop_choice: bool,
    /// Clip negative bids to 0.
    pub clip_negative_bids: bool,
}

impl CompatParams {
    /// All of AuctionNet's behaviours.
    pub fn auctionnet() -> Self {
        Self { reseed_noise_each_call: true, reseed_drop_choice: true, clip_negative_bids: true }
    }
}

/// Parameters of the simulator.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `seed` | 1 | master seed: traffic, value bounds, noise, drop choices derive from it and the period | any |
/// | `traffic` | [`TrafficParams::default`] | impression generator | see there |
/// | `auction` | [`AuctionParams::default`] | auction mechanics | see there |
/// | `min_remaining_budget` | 0.1 | below it an advertiser stops bidding (`MIN_REMAINING_BUDGET`) | ≥ 0 |
/// | `max_drop_rounds` | 100 000 | safety limit of the drop loop per tick | ≥ 1 |
/// | `compat` | all off | AuctionNet's defects ([`CompatParams`]) | |
/// | `memory_budget` | 16 GiB ([`MemoryBudget::default`]) | most bytes one period's buffers may take ([`SimParams::memory_bytes`]); `check` applies it for one advertiser, [`Simulator::new`] for the market | bytes |
///
/// Every parameter that sizes an allocation is bounded: `traffic.pv_num` and
/// `traffic.tick_weights` (impressions per tick, ticks) through `memory_budget`,
/// `auction.exposure` (slots) by [`crate::auction::MAX_SLOTS`], the advertisers by
/// [`MAX_ADVERTISERS`], `memory_budget` and their categories by [`MAX_CATEGORY`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimParams {
    /// Master seed.
    pub seed: u64,
    /// Traffic generator.
    pub traffic: TrafficParams,
    /// Auction mechanics.
    pub auction: AuctionParams,
    /// Minimum remaining budget to keep bidding.
    pub min_remaining_budget: f64,
    /// Drop-loop round limit per tick.
    pub max_drop_rounds: usize,
    /// AuctionNet defects to reproduce.
    pub compat: CompatParams,
    /// Most bytes the buffers of one period may take.
    pub memory_budget: MemoryBudget,
}

impl Default for SimParams {
    fn default() -> Self {
        Self {
            seed: 1,
            traffic: TrafficParams::default(),
            auction: AuctionParams::default(),
            min_remaining_budget: 0.1,
            max_drop_rounds: 100_000,
            compat: CompatParams::default(),
            memory_budget: MemoryBudget::default(),
        }
    }
}

crate::traffic::setters!(SimParams {
    seed: u64,
    traffic: TrafficParams,
    auction: AuctionParams,
    min_remaining_budget: f64,
    max_drop_rounds: usize,
    compat: CompatParams,
    memory_budget: MemoryBudget,
});

impl SimParams {
    /// Sets the impressions per period (`traffic.pv_num`).
    #[must_use]
    pub fn pv_num(mut self, pv_num: usize) -> Self {
        self.traffic.pv_num = pv_num;
        self
    }

    /// Ticks per period.
    pub fn num_ticks(&self) -> usize {
        self.traffic.num_ticks()
    }

    /// An upper bound on the bytes the simulator allocates for one period of
    /// `num_advertisers` advertisers in `num_categories` categories: the per-tick buffers of
    /// [`TrafficParams::max_tick_pv`] impressions (traffic and bids, `12` bytes per impression and
    /// advertiser; auction and drop loop, `26·K + 20` per impression for `K` slots) plus the
    /// per-period curves and records (`16 + size_of::<TickRecord>() + 4·16` bytes per
    /// advertiser and tick, `8` per category and tick). `None` when the bound overflows `u64`.
    pub fn memory_bytes(&self, num_advertisers: usize, num_categories: usize) -> Option<u64> {
        self.tick_bytes(num_advertisers)?.checked_add(self.curve_bytes(num_advertisers, num_categories)?)
    }

    /// Bytes of the per-tick buffers (see [`SimParams::memory_bytes`]).
    fn tick_bytes(&self, num_advertisers: usize) -> Option<u64> {
        let n = self.traffic.max_tick_pv();
        if n.is_nan() || n >= MAX_TICK_PV {
            return None;
        }
        let k = self.auction.slots() as u64;
        let per_pv = (num_advertisers as u64).checked_mul(12)?.checked_add(k.checked_mul(26)?.checked_add(20)?)?;
        (n as u64).checked_mul(per_pv)
    }

    /// Bytes of the per-period curves and records (see [`SimParams::memory_bytes`]).
    fn curve_bytes(&self, num_advertisers: usize, num_categories: usize) -> Option<u64> {
        let (a, c, t) = (num_advertisers as u64, num_categories as u64, self.num_ticks() as u64);
        let per_adv_tick = 16 + std::mem::size_of::<TickRecord>() as u64 + 4 * STATE_DIM as u64;
        a.checked_mul(t)?
            .checked_mul(per_adv_tick)?
            .checked_add(c.checked_mul(t)?.checked_mul(8)?)?
            .checked_add(t.checked_mul(16)?)?
            .checked_add(a.checked_mul(256)?)
    }
}

pub use crate::auction::MAX_ADVERTISERS;

/// Largest advertiser category (the OnlineLP table and the statistics are dense in the
/// category id).
pub const MAX_CATEGORY: usize = 65_535;

impl rl_core::Params for SimParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        self.traffic.validate().map_err(|e| e.nested("traffic"))?;
        self.auction.validate().map_err(|e| e.nested("auction"))?;
        check_range("min_remaining_budget", self.min_remaining_budget, 0.0, f64::INFINITY)?;
        if self.max_drop_rounds == 0 {
            return Err(AigbError::invalid("max_drop_rounds", 0, "must be >= 1"));
        }
        // the buffers of the smallest market (one advertiser, one category) must fit the budget
        let over = |what: &str, bytes: Option<u64>| -> Option<String> {
            self.memory_budget.check_bytes(what, bytes.unwrap_or(u64::MAX)).err().map(|e| e.to_string())
        };
        if let Some(e) = over("per-tick buffers of one advertiser", self.tick_bytes(1)) {
            return Err(AigbError::invalid(
                "traffic.pv_num",
                self.traffic.pv_num,
                format!("{e} (raise memory_budget)"),
            ));
        }
        if let Some(e) = over("per-period buffers of one advertiser", self.memory_bytes(1, 1)) {
            return Err(AigbError::invalid(
                "traffic.tick_weights",
                format!("{} ticks", self.num_ticks()),
                format!("{e} (raise memory_budget)"),
            ));
        }
        Ok(())
    }
}

/// One advertiser of the market.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Advertiser {
    /// Budget per period (> 0).
    pub budget: f64,
    /// CPA constraint (> 0).
    pub cpa: f64,
    /// Industry category (≤ [`MAX_CATEGORY`]).
    pub category: usize,
}

impl Advertiser {
    /// Checks budget, CPA and category.
    ///
    /// # Errors
    /// [`AigbError::InvalidParameter`] naming `advertisers[i].budget` / `.cpa` / `.category`.
    pub fn validate(&self, i: usize) -> Result<()> {
        check_positive(&format!("advertisers[{i}].budget"), self.budget)?;
        check_positive(&format!("advertisers[{i}].cpa"), self.cpa)?;
        if self.category > MAX_CATEGORY {
            return Err(AigbError::invalid(
                format!("advertisers[{i}].category"),
                self.category,
                format!("must be <= {MAX_CATEGORY}"),
            ));
        }
        Ok(())
    }
}

/// AuctionNet's Controller budgets of the 48 advertisers (`Controller.calculate_budget`).
pub const AUCTIONNET_BUDGETS: [f64; 48] = [
    2900.0, 4350.0, 3000.0, 2400.0, 4800.0, 2000.0, 2050.0, 3500.0, 4600.0, 2000.0, 2800.0, 2350.0, 2050.0, 2900.0,
    4750.0, 3450.0, 2000.0, 3500.0, 2200.0, 2700.0, 3100.0, 2100.0, 4850.0, 4100.0, 2000.0, 4800.0, 3050.0, 4250.0,
    2850.0, 2250.0, 2000.0, 3900.0, 2000.0, 3250.0, 4450.0, 3550.0, 2700.0, 2100.0, 4650.0, 2000.0, 3400.0, 2650.0,
    2300.0, 4100.0, 4800.0, 4450.0, 2000.0, 2050.0,
];

/// AuctionNet's Controller CPA constraints of the 48 advertisers (`Controller.get_cpa_constraints`).
pub const AUCTIONNET_CPAS: [f64; 48] = [
    100.0, 70.0, 90.0, 110.0, 60.0, 130.0, 120.0, 80.0, 70.0, 130.0, 100.0, 110.0, 120.0, 90.0, 60.0, 80.0, 130.0,
    80.0, 110.0, 100.0, 90.0, 120.0, 60.0, 70.0, 120.0, 60.0, 90.0, 70.0, 100.0, 110.0, 130.0, 80.0, 120.0, 90.0, 70.0,
    80.0, 100.0, 110.0, 60.0, 130.0, 90.0, 100.0, 110.0, 80.0, 60.0, 70.0, 130.0, 120.0,
];

/// AuctionNet's market: 48 advertisers, 6 categories of 8, the Controller's budgets (times
/// `budget_scale`, e.g. `pv_num / 500 000` for a smaller market with the same budget per
/// impression) and CPA constraints.
pub fn auctionnet_advertisers(budget_scale: f64) -> Vec<Advertiser> {
    AUCTIONNET_BUDGETS
        .iter()
        .zip(AUCTIONNET_CPAS.iter())
        .enumerate()
        .map(|(i, (b, c))| Advertiser { budget: b * budget_scale, cpa: *c, category: i / 8 })
        .collect()
}

/// Sees every tick of a period after its drop loop (statistics, traffic-level logs, OnlineLP
/// history).
pub trait Observer {
    /// Called once per tick with the impressions, the final bids (advertiser-major) and the
    /// auction outcome.
    fn on_tick(&mut self, period: u64, traffic: &TickTraffic, bids: &[f32], auction: &TickAuction);
}

/// One advertiser's period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdvertiserResult {
    /// Who and what budget.
    pub info: PeriodInfo,
    /// The bidder's name.
    pub bidder: String,
    /// One record per tick.
    pub ticks: Vec<TickRecord>,
    /// The 16 state features at the start of each tick (before bidding).
    pub states: Vec<[f32; STATE_DIM]>,
}

impl AdvertiserResult {
    /// Total cost.
    pub fn cost(&self) -> f64 {
        self.ticks.iter().map(|t| t.cost).sum()
    }

    /// Total conversions.
    pub fn conversions(&self) -> u64 {
        self.ticks.iter().map(|t| t.conversions).sum()
    }

    /// Total slots won.
    pub fn wins(&self) -> u64 {
        self.ticks.iter().map(|t| t.wins).sum()
    }

    /// Total impressions seen.
    pub fn num_pv(&self) -> u64 {
        self.ticks.iter().map(|t| t.num_pv).sum()
    }

    /// Realised cost per conversion (`cost / (conversions + 1e-10)`).
    pub fn realised_cpa(&self) -> f64 {
        self.cost() / (self.conversions() as f64 + 1e-10)
    }

    /// The competition score ([`score`] with β = 2).
    pub fn score(&self) -> f64 {
        score(self.conversions() as f64, self.cost(), self.info.cpa, SCORE_BETA)
    }

    /// Last tick with a won slot (`None` without any).
    pub fn last_win_tick(&self) -> Option<usize> {
        self.ticks.iter().rev().find(|t| t.wins > 0).map(|t| t.tick)
    }
}

/// One simulated period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeriodResult {
    /// Period index.
    pub period: u64,
    /// Per advertiser, in slot order.
    pub advertisers: Vec<AdvertiserResult>,
    /// Drop-loop rounds over the whole period.
    pub drop_rounds: usize,
}

/// The market simulator: parameters plus the advertisers' budgets, CPAs and categories.
///
/// ```
/// use aigb_sim::{auctionnet_advertisers, Bidder, PidBidder, PidParams, SimParams, Simulator};
/// use rl_core::Params;
///
/// let params = SimParams::default().pv_num(5_000).check()?;
/// let sim = Simulator::new(params, auctionnet_advertisers(5_000.0 / 500_000.0))?;
/// let pid = PidParams::default().check()?;
/// let mut bidders: Vec<Box<dyn Bidder>> =
///     (0..48).map(|_| Box::new(PidBidder::new(pid.clone())) as Box<dyn Bidder>).collect();
/// let res = sim.run_period(0, &mut bidders, None)?;
/// assert_eq!(res.advertisers.len(), 48);
/// assert!(res.advertisers.iter().all(|a| a.cost() <= a.info.budget + 1e-9));
/// # Ok::<(), aigb_sim::AigbError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Simulator {
    params: rl_core::Valid<SimParams>,
    advertisers: Vec<Advertiser>,
}

/// Stream names of the simulator's randomness.
mod stream {
    pub const VALUE_BOUNDS: &str = "value-bounds";
    pub const NOISE: &str = "auction-noise";
    pub const DROP: &str = "drop";
}

impl Simulator {
    /// A simulator of `advertisers` (slot order) under `params`.
    ///
    /// # Errors
    /// [`AigbError::Empty`] without advertisers; [`AigbError::InvalidParameter`] for a budget or
    /// CPA that is not finite and > 0, a category above [`MAX_CATEGORY`], more than
    /// [`MAX_ADVERTISERS`] advertisers, or a market whose period buffers
    /// ([`SimParams::memory_bytes`]) exceed `params.memory_budget`.
    pub fn new(params: rl_core::Valid<SimParams>, advertisers: Vec<Advertiser>) -> Result<Self> {
        if advertisers.is_empty() {
            return Err(AigbError::Empty { what: "advertisers".into() });
        }
        if advertisers.len() > MAX_ADVERTISERS {
            return Err(AigbError::invalid(
                "advertisers",
                format!("{} advertisers", advertisers.len()),
                format!("at most {MAX_ADVERTISERS}"),
            ));
        }
        for (i, a) in advertisers.iter().enumerate() {
            a.validate(i)?;
        }
        let mut cats: Vec<usize> = advertisers.iter().map(|a| a.category).collect();
        cats.sort_unstable();
        cats.dedup();
        let bytes = params.memory_bytes(advertisers.len(), cats.len()).unwrap_or(u64::MAX);
        if let Err(e) = params.memory_budget.check_bytes("one period's buffers", bytes) {
            return Err(AigbError::invalid(
                "advertisers",
                format!("{} advertisers, traffic.pv_num = {}", advertisers.len(), params.traffic.pv_num),
                format!("{e} (raise memory_budget)"),
            ));
        }
        Ok(Self { params, advertisers })
    }

    /// The parameters.
    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// The advertisers.
    pub fn advertisers(&self) -> &[Advertiser] {
        &self.advertisers
    }

    /// Categories of the advertisers, in slot order.
    pub fn categories(&self) -> Vec<usize> {
        self.advertisers.iter().map(|a| a.category).collect()
    }

    /// The same market with other advertisers (e.g. scaled budgets).
    ///
    /// # Errors
    /// As [`Simulator::new`].
    pub fn with_advertisers(&self, advertisers: Vec<Advertiser>) -> Result<Self> {
        Self::new(self.params.clone(), advertisers)
    }

    /// The traffic curves of `period`.
    ///
    /// # Errors
    /// As [`PeriodTraffic::new_within`] (with `memory_budget`).
    pub fn traffic(&self, period: u64) -> Result<PeriodTraffic> {
        PeriodTraffic::new_within(
            &self.params.traffic,
            &self.categories(),
            self.params.seed,
            period,
            self.params.memory_budget,
        )
    }

    /// Value-noise truncation of every advertiser in `period` (AuctionNet draws `u₁, u₂` per
    /// advertiser and episode).
    pub fn value_bounds(&self, period: u64) -> Vec<ValueBounds> {
        let base = rl_core::derive_seed(rl_core::derive_seed_named(self.params.seed, stream::VALUE_BOUNDS), period);
        (0..self.advertisers.len())
            .map(|a| {
                if self.params.auction.value_noise == ValueNoise::None {
                    return ValueBounds::untruncated();
                }
                let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(base, a as u64));
                let (u1, u2): (f64, f64) = (rng.random(), rng.random());
                ValueBounds::from_uniforms(u1, u2)
            })
            .collect()
    }

    /// The seeded auction draws of `period` (what [`Simulator::run_period`] uses): tick `t`'s
    /// noise seed derives from the master seed, the period and `t` (one seed for every call with
    /// `compat.reseed_noise_each_call`).
    pub fn seeded_draws(&self, period: u64) -> SeededPeriodDraws {
        SeededPeriodDraws {
            base: rl_core::derive_seed_named(self.params.seed, stream::NOISE),
            period,
            reseed_each_call: self.params.compat.reseed_noise_each_call,
            current: SeededDraws::new(0),
        }
    }

    /// The seeded drop choices of `period` (what [`Simulator::run_period`] uses): a partial
    /// Fisher–Yates on one generator per tick (re-seeded for every choice with
    /// `compat.reseed_drop_choice`).
    pub fn seeded_drops(&self, period: u64) -> SeededDrops {
        let drop = rl_core::derive_seed_named(self.params.seed, stream::DROP);
        SeededDrops {
            base: rl_core::derive_seed(drop, period),
            reseed: self.params.compat.reseed_drop_choice.then_some(drop),
            rng: None,
            scratch: Vec::new(),
        }
    }

    /// Simulates period `period` with `bidders[a]` bidding for advertiser `a`, on the seeded
    /// draws and drop choices ([`Simulator::seeded_draws`], [`Simulator::seeded_drops`]).
    ///
    /// # Errors
    /// [`AigbError::Shape`] when the number of bidders differs from the advertisers;
    /// [`AigbError::InvalidBid`] for a NaN, infinite or negative bid (negative bids are clipped
    /// with `compat.clip_negative_bids`); a bidder's own error; [`AigbError::DropLoop`] if the
    /// drop loop hits its limit.
    pub fn run_period(
        &self,
        period: u64,
        bidders: &mut [Box<dyn Bidder>],
        observer: Option<&mut dyn Observer>,
    ) -> Result<PeriodResult> {
        let (mut draws, mut drops) = (self.seeded_draws(period), self.seeded_drops(period));
        self.run_period_with(period, bidders, observer, &mut draws, &mut drops)
    }

    /// [`Simulator::run_period`] with the auction draws from `draws` and the drop choices from
    /// `drops` (the seeded sources give exactly [`Simulator::run_period`]).
    ///
    /// # Errors
    /// As [`Simulator::run_period`], and the sources' errors ([`AigbError::Replay`] for a
    /// recording that does not fit the period, [`AigbError::Shape`] for draws of another shape);
    /// [`AigbError::Replay`] when `drops` returns a choice that is not `n_drop` distinct
    /// impressions the advertiser won in that slot.
    pub fn run_period_with<D: PeriodDraws, S: DropSource>(
        &self,
        period: u64,
        bidders: &mut [Box<dyn Bidder>],
        observer: Option<&mut dyn Observer>,
        draws: &mut D,
        drops: &mut S,
    ) -> Result<PeriodResult> {
        let traffic = self.traffic(period)?;
        self.run_ticks(period, &Ticks::Generated(&traffic), bidders, observer, draws, drops)
    }

    /// Replays a period on given impressions: `traffic[t]` is tick `t` (the number of ticks is
    /// `traffic.len()`, not `traffic.tick_weights`), the draws and drop choices come from
    /// `draws` and `drops`. The value-noise bounds are [`Simulator::value_bounds`] of `period`
    /// (they matter only to draws that use them; recorded conversions do not).
    ///
    /// # Errors
    /// [`AigbError::Empty`] without ticks; [`AigbError::Shape`] when a tick's advertisers differ
    /// from the market's or its arrays from `num_pv × advertisers`; the impressions' own checks
    /// ([`TickTraffic::from_values`]); otherwise as [`Simulator::run_period_with`].
    pub fn replay_period<D: PeriodDraws, S: DropSource>(
        &self,
        period: u64,
        traffic: &[TickTraffic],
        bidders: &mut [Box<dyn Bidder>],
        observer: Option<&mut dyn Observer>,
        draws: &mut D,
        drops: &mut S,
    ) -> Result<PeriodResult> {
        if traffic.is_empty() {
            return Err(AigbError::Empty { what: "ticks of the replayed period".into() });
        }
        let n_a = self.advertisers.len();
        for (t, tt) in traffic.iter().enumerate() {
            if tt.num_advertisers != n_a {
                return Err(AigbError::Shape {
                    what: format!("advertisers of replayed tick {t}"),
                    expected: n_a.to_string(),
                    got: tt.num_advertisers.to_string(),
                });
            }
            let cells = tt.num_pv.checked_mul(n_a);
            if cells != Some(tt.pvalues.len()) || cells != Some(tt.sigmas.len()) {
                return Err(AigbError::Shape {
                    what: format!("pvalues/sigmas of replayed tick {t}"),
                    expected: format!("{} × {n_a}", tt.num_pv),
                    got: format!("{} / {}", tt.pvalues.len(), tt.sigmas.len()),
                });
            }
            if tt.num_pv > 0 {
                TickTraffic::from_values(t, tt.num_pv, tt.pvalues.clone(), tt.sigmas.clone())?;
            }
        }
        self.run_ticks(period, &Ticks::Given(traffic), bidders, observer, draws, drops)
    }

    /// The period loop shared by [`Simulator::run_period_with`] and [`Simulator::replay_period`].
    fn run_ticks<D: PeriodDraws, S: DropSource>(
        &self,
        period: u64,
        traffic: &Ticks<'_>,
        bidders: &mut [Box<dyn Bidder>],
        mut observer: Option<&mut dyn Observer>,
        draws: &mut D,
        drops: &mut S,
    ) -> Result<PeriodResult> {
        let n_a = self.advertisers.len();
        if bidders.len() != n_a {
            return Err(AigbError::Shape {
                what: "bidders".into(),
                expected: n_a.to_string(),
                got: bidders.len().to_string(),
            });
        }
        let p = &*self.params;
        let num_ticks = traffic.len();
        let k = p.auction.slots();
        let bounds = self.value_bounds(period);
        draws.begin_period(num_ticks)?;
        drops.begin_period(num_ticks)?;
        let same_draws = draws.same_draws_every_call();
        let infos: Vec<PeriodInfo> = self
            .advertisers
            .iter()
            .enumerate()
            .map(|(i, a)| PeriodInfo {
                period,
                advertiser: i,
                budget: a.budget,
                cpa: a.cpa,
                category: a.category,
                num_ticks,
            })
            .collect();
        for (b, info) in bidders.iter_mut().zip(&infos) {
            b.begin_period(info)?;
        }
        let names: Vec<String> = bidders.iter().map(|b| b.name()).collect();
        let mut remaining: Vec<f64> = self.advertisers.iter().map(|a| a.budget).collect();
        let mut history: Vec<Vec<TickRecord>> = vec![Vec::with_capacity(num_ticks); n_a];
        let mut states: Vec<Vec<[f32; STATE_DIM]>> = vec![Vec::with_capacity(num_ticks); n_a];
        let mut tt = TickTraffic::default();
        let mut bids: Vec<f32> = Vec::new();
        let mut auction = TickAuction::new();
        let mut totals: Vec<AdvertiserTick> = Vec::new();
        let mut over = vec![0.0f64; n_a];
        let mut changed: Vec<usize> = Vec::new();
        let mut won: Vec<usize> = Vec::new();
        let mut dropped: Vec<usize> = Vec::new();
        let mut marked: Vec<bool> = Vec::new();
        let mut drop_rounds = 0usize;
        for t in 0..num_ticks {
            traffic.fill_tick(t, &mut tt)?;
            let n = tt.num_pv;
            bids.clear();
            bids.resize(n * n_a, 0.0);
            let mut active = vec![false; n_a];
            let mut pv_sums = vec![0.0f64; n_a];
            for a in 0..n_a {
                let pv = tt.pvalues_of(a);
                pv_sums[a] = pv.iter().map(|&x| f64::from(x)).sum();
                states[a].push(state_features_from_sums(
                    &history[a],
                    t,
                    num_ticks,
                    infos[a].budget,
                    remaining[a],
                    pv_sums[a],
                    n,
                ));
                if remaining[a] < p.min_remaining_budget || n == 0 {
                    continue;
                }
                active[a] = true;
                let ctx = TickContext {
                    info: &infos[a],
                    tick: t,
                    remaining_budget: remaining[a],
                    pvalues: pv,
                    sigmas: tt.sigmas_of(a),
                    history: &history[a],
                };
                let out = &mut bids[a * n..(a + 1) * n];
                bidders[a].bid(&ctx, out)?;
                check_bids(out, a, &names[a], t, p.compat.clip_negative_bids)?;
            }
            let lwc_sum;
            let mut calls = 0usize;
            let mut rounds = 0usize;
            if n > 0 {
                auction.run_with(&p.auction, &tt, &bids, &bounds, draws.draws(t, 0)?)?;
                calls += 1;
                auction.totals(&tt, &mut totals);
                marked.clear();
                marked.resize(n, false);
                loop {
                    let mut any = false;
                    for a in 0..n_a {
                        let c = totals[a].cost;
                        over[a] = ((c - remaining[a]) / (c + 1e-4)).max(0.0);
                        any |= over[a] > 0.0;
                    }
                    if !any {
                        break;
                    }
                    rounds += 1;
                    if rounds > p.max_drop_rounds {
                        return Err(AigbError::DropLoop { tick: t, rounds: rounds - 1 });
                    }
                    changed.clear();
                    for a in (0..n_a).filter(|&a| over[a] > 0.0) {
                        for s in 0..k {
                            won.clear();
                            won.extend((0..n).filter(|&i| auction.winner[i * k + s] == a as u32));
                            let n_drop = ((won.len() as f64) * over[a]).ceil() as usize;
                            let n_drop = n_drop.min(won.len());
                            if n_drop == 0 {
                                continue;
                            }
                            let choice = DropChoice {
                                tick: t,
                                round: rounds,
                                advertiser: a,
                                slot: s,
                                won: &won,
                                n_drop,
                                over_ratio: over[a],
                            };
                            dropped.clear();
                            drops.choose(&choice, &mut dropped)?;
                            check_drop_choice(&choice, &dropped, &mut marked)?;
                            for &i in &dropped {
                                bids[a * n + i] = 0.0;
                                changed.push(i);
                            }
                        }
                    }
                    changed.sort_unstable();
                    changed.dedup();
                    let d = draws.draws(t, rounds)?;
                    if same_draws {
                        d.check(n, k, n_a)?;
                        auction.rerun_with(&p.auction, &tt, &bids, &bounds, d, &changed);
                    } else {
                        auction.run_with(&p.auction, &tt, &bids, &bounds, d)?;
                    }
                    calls += 1;
                    auction.totals(&tt, &mut totals);
                }
                drop_rounds += rounds;
                lwc_sum = auction.least_winning_cost.iter().map(|&x| f64::from(x)).sum::<f64>();
            } else {
                totals.clear();
                totals.resize(n_a, AdvertiserTick::default());
                lwc_sum = 0.0;
            }
            draws.end_tick(t, calls)?;
            drops.end_tick(t, rounds)?;
            for a in 0..n_a {
                let tot = totals[a];
                let rec = TickRecord {
                    tick: t,
                    num_pv: n as u64,
                    remaining_budget: remaining[a],
                    active: active[a],
                    bid_sum: bids[a * n..(a + 1) * n].iter().map(|&x| f64::from(x)).sum(),
                    pvalue_sum: pv_sums[a],
                    least_winning_cost_sum: lwc_sum,
                    wins: tot.wins,
                    exposures: tot.exposures,
                    conversions: tot.conversions,
                    cost: tot.cost,
                    exposed_pvalue: tot.exposed_pvalue,
                };
                remaining[a] -= tot.cost;
                history[a].push(rec);
                bidders[a].end_tick(&rec);
            }
            if let (Some(obs), true) = (observer.as_deref_mut(), n > 0) {
                obs.on_tick(period, &tt, &bids, &auction);
            }
        }
        let advertisers = infos
            .into_iter()
            .zip(names)
            .zip(history.into_iter().zip(states))
            .map(|((info, bidder), (ticks, states))| AdvertiserResult { info, bidder, ticks, states })
            .collect();
        Ok(PeriodResult { period, advertisers, drop_rounds })
    }

    /// Simulates `periods` on `threads` threads (≥ 1); `make_bidders(period)` builds each
    /// period's bidders. Results come back in the order of `periods`.
    ///
    /// If the system refuses a thread, the periods run on the threads already started.
    ///
    /// # Errors
    /// The first error of any period (by position); [`AigbError::Io`] when not even one thread
    /// could be started.
    pub fn run_periods<F>(&self, periods: &[u64], threads: usize, make_bidders: F) -> Result<Vec<PeriodResult>>
    where
        F: Fn(u64) -> Result<Vec<Box<dyn Bidder>>> + Sync,
    {
        let threads = threads.max(1).min(periods.len().max(1));
        let next = AtomicUsize::new(0);
        let mut slots: Vec<Option<Result<PeriodResult>>> = (0..periods.len()).map(|_| None).collect();
        let work = || {
            let mut out = Vec::new();
            loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some(&period) = periods.get(j) else { break };
                let r = make_bidders(period).and_then(|mut b| self.run_period(period, &mut b, None));
                out.push((j, r));
            }
            out
        };
        let results: Vec<Vec<(usize, Result<PeriodResult>)>> = scoped_workers(threads, &work)?;
        for (j, r) in results.into_iter().flatten() {
            slots[j] = Some(r);
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(j, r)| r.unwrap_or_else(|| Err(AigbError::NotReady(format!("period at position {j} did not run")))))
            .collect()
    }
}

/// Runs `work` on up to `threads` scoped threads and returns each thread's output. A thread the
/// system refuses is not started (the others share the work); no thread at all is an I/O error.
pub(crate) fn scoped_workers<T: Send + Default>(threads: usize, work: &(dyn Fn() -> T + Sync)) -> Result<Vec<T>> {
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        let mut refused = None;
        for _ in 0..threads {
            match std::thread::Builder::new().spawn_scoped(s, work) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        match (handles.is_empty(), refused) {
            (true, Some(e)) => Err(AigbError::Io(e)),
            _ => Ok(handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()),
        }
    })
}

/// The impressions a period runs on: the generator's or given ones.
enum Ticks<'a> {
    Generated(&'a PeriodTraffic),
    Given(&'a [TickTraffic]),
}

impl Ticks<'_> {
    fn len(&self) -> usize {
        match self {
            Ticks::Generated(p) => p.counts().len(),
            Ticks::Given(t) => t.len(),
        }
    }

    fn fill_tick(&self, t: usize, out: &mut TickTraffic) -> Result<()> {
        match self {
            Ticks::Generated(p) => p.fill_tick(t, out),
            Ticks::Given(ticks) => {
                let tick =
                    ticks.get(t).ok_or_else(|| AigbError::UnknownId { what: "tick".into(), id: t.to_string() })?;
                out.clone_from(tick);
                Ok(())
            }
        }
    }
}

/// The auction draws of a whole period: one [`DrawSource`] for every auction call of every
/// tick. A tick with impressions makes call 0 (every impression), then one call after each
/// drop round (call `r` follows drop round `r`); a tick without impressions makes none.
pub trait PeriodDraws {
    /// The draws of one auction call.
    type Draws: DrawSource;

    /// Called once before the first tick with the period's number of ticks.
    ///
    /// # Errors
    /// [`AigbError::Replay`] when a recording holds another number of ticks.
    fn begin_period(&mut self, _num_ticks: usize) -> Result<()> {
        Ok(())
    }

    /// The draws of call `call` of tick `tick`.
    ///
    /// # Errors
    /// [`AigbError::Replay`] when a recording has no such call.
    fn draws(&mut self, tick: usize, call: usize) -> Result<&mut Self::Draws>;

    /// Whether an impression's draws are the same in every call of a tick. Then a drop round
    /// re-runs only the impressions whose bids changed (the same outcome, less work); otherwise
    /// every call re-runs every impression with that call's draws, as AuctionNet re-runs its
    /// whole tick (re-seeding NumPy at every call).
    fn same_draws_every_call(&self) -> bool;

    /// Called after tick `tick` with the number of auction calls it made.
    ///
    /// # Errors
    /// [`AigbError::Replay`] when a recording holds another number of calls for the tick.
    fn end_tick(&mut self, _tick: usize, _calls: usize) -> Result<()> {
        Ok(())
    }
}

/// The seeded draws of [`Simulator::run_period`] ([`Simulator::seeded_draws`]): every call of
/// tick `t` uses the counter-based [`SeededDraws`] of one noise seed, so an impression's draws
/// are the same in every call.
#[derive(Debug, Clone)]
pub struct SeededPeriodDraws {
    base: u64,
    period: u64,
    reseed_each_call: bool,
    current: SeededDraws,
}

impl SeededPeriodDraws {
    /// The noise seed of tick `tick`.
    pub fn noise_seed(&self, tick: usize) -> u64 {
        if self.reseed_each_call {
            self.base
        } else {
            rl_core::derive_seed(rl_core::derive_seed(self.base, self.period), tick as u64)
        }
    }
}

impl PeriodDraws for SeededPeriodDraws {
    type Draws = SeededDraws;

    fn draws(&mut self, tick: usize, _call: usize) -> Result<&mut SeededDraws> {
        self.current = SeededDraws::new(self.noise_seed(tick));
        Ok(&mut self.current)
    }

    fn same_draws_every_call(&self) -> bool {
        true
    }
}

/// Recorded draws of a period: `ticks[t][c]` are the draws of call `c` of tick `t` (e.g. every
/// `simulate_ad_bidding` call of an AuctionNet period, drop rounds included). Every call
/// re-runs every impression with its own draws, so a recording need not keep an unchanged
/// impression's draws from one call to the next (AuctionNet's happen to keep them: see
/// `docs/aigb.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedPeriodDraws {
    ticks: Vec<Vec<RecordedDraws>>,
}

impl RecordedPeriodDraws {
    /// The draws of every call of every tick (a tick without impressions has no calls).
    pub fn new(ticks: Vec<Vec<RecordedDraws>>) -> Self {
        Self { ticks }
    }

    /// Recorded calls of each tick.
    pub fn calls(&self) -> Vec<usize> {
        self.ticks.iter().map(Vec::len).collect()
    }
}

impl PeriodDraws for RecordedPeriodDraws {
    type Draws = RecordedDraws;

    fn begin_period(&mut self, num_ticks: usize) -> Result<()> {
        if self.ticks.len() != num_ticks {
            return Err(AigbError::Replay {
                what: "recorded auction draws".into(),
                reason: format!("the period has {num_ticks} ticks, the recording {}", self.ticks.len()),
            });
        }
        Ok(())
    }

    fn draws(&mut self, tick: usize, call: usize) -> Result<&mut RecordedDraws> {
        let held = self.ticks.get(tick).map_or(0, Vec::len);
        self.ticks.get_mut(tick).and_then(|c| c.get_mut(call)).ok_or_else(|| AigbError::Replay {
            what: format!("recorded auction draws of tick {tick}"),
            reason: format!("the replay needs call {call} (0-based), the recording ran out after {held} calls"),
        })
    }

    fn same_draws_every_call(&self) -> bool {
        false
    }

    fn end_tick(&mut self, tick: usize, calls: usize) -> Result<()> {
        let held = self.ticks.get(tick).map_or(0, Vec::len);
        if held != calls {
            return Err(AigbError::Replay {
                what: format!("recorded auction draws of tick {tick}"),
                reason: format!("the replay made {calls} auction calls, the recording holds {held}"),
            });
        }
        Ok(())
    }
}

/// One choice of the drop loop: advertiser `advertiser` overspent in tick `tick`; in drop round
/// `round` (1 = the first) it loses `n_drop = ⌈|won| · over_ratio⌉` of the impressions `won`
/// in which it won slot `slot` (0-based). Choices come advertiser by advertiser (ascending),
/// slot by slot, as in AuctionNet's `adjust_over_cost`, and only when `n_drop > 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropChoice<'a> {
    /// Tick of the period.
    pub tick: usize,
    /// Drop round within the tick (1-based).
    pub round: usize,
    /// The overspending advertiser.
    pub advertiser: usize,
    /// The slot (0-based).
    pub slot: usize,
    /// Impressions (ascending) in which the advertiser won this slot in the last auction call.
    pub won: &'a [usize],
    /// How many to drop (1..=`won.len()`).
    pub n_drop: usize,
    /// `(cost − remaining) / (cost + 1e-4)` of the advertiser in the last call.
    pub over_ratio: f64,
}

/// Which impressions the drop loop takes from an overspending advertiser (its bids on them
/// become 0).
pub trait DropSource {
    /// Called once before the first tick with the period's number of ticks.
    ///
    /// # Errors
    /// [`AigbError::Replay`] when a recording has choices outside the period.
    fn begin_period(&mut self, _num_ticks: usize) -> Result<()> {
        Ok(())
    }

    /// Writes `choice.n_drop` distinct impressions of `choice.won` into `out` (empty on entry);
    /// the simulator checks them.
    ///
    /// # Errors
    /// [`AigbError::Replay`] when a recording ran out or holds another choice next.
    fn choose(&mut self, choice: &DropChoice<'_>, out: &mut Vec<usize>) -> Result<()>;

    /// Called after tick `tick` with its number of drop rounds.
    ///
    /// # Errors
    /// [`AigbError::Replay`] when a recording has unused choices for this tick or earlier.
    fn end_tick(&mut self, _tick: usize, _rounds: usize) -> Result<()> {
        Ok(())
    }
}

/// The seeded drop choices of [`Simulator::run_period`] ([`Simulator::seeded_drops`]): a
/// uniform sample without replacement (partial Fisher–Yates over `won`) from one generator per
/// tick, or from a generator re-seeded for every choice (`compat.reseed_drop_choice`).
#[derive(Debug, Clone)]
pub struct SeededDrops {
    base: u64,
    reseed: Option<u64>,
    /// The current tick and its generator.
    rng: Option<(usize, rl_core::SeededRng)>,
    scratch: Vec<usize>,
}

impl DropSource for SeededDrops {
    fn begin_period(&mut self, _num_ticks: usize) -> Result<()> {
        self.rng = None;
        Ok(())
    }

    fn choose(&mut self, choice: &DropChoice<'_>, out: &mut Vec<usize>) -> Result<()> {
        let tick = choice.tick;
        let rng = match (&mut self.rng, self.reseed) {
            (_, Some(seed)) => &mut self.rng.insert((tick, rl_core::rng_from_seed(seed))).1,
            (Some((t, rng)), None) if *t == tick => rng,
            (_, None) => {
                &mut self.rng.insert((tick, rl_core::rng_from_seed(rl_core::derive_seed(self.base, tick as u64)))).1
            }
        };
        let w = &mut self.scratch;
        w.clear();
        w.extend_from_slice(choice.won);
        let n_drop = choice.n_drop.min(w.len());
        // partial Fisher–Yates: the first n_drop entries become a uniform sample
        for j in 0..n_drop {
            let r = rng.random_range(j..w.len());
            w.swap(j, r);
        }
        out.extend_from_slice(&w[..n_drop]);
        Ok(())
    }

    fn end_tick(&mut self, _tick: usize, _rounds: usize) -> Result<()> {
        self.rng = None;
        Ok(())
    }
}

/// One recorded drop choice (see [`DropChoice`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedDrop {
    /// Tick of the period.
    pub tick: usize,
    /// Drop round within the tick (1-based).
    pub round: usize,
    /// The overspending advertiser.
    pub advertiser: usize,
    /// The slot (0-based).
    pub slot: usize,
    /// The dropped impressions.
    pub dropped: Vec<usize>,
}

/// Recorded drop choices of a period, in the order the drop loop asks for them (tick, round,
/// advertiser, slot); each request must match the next recorded choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedDrops {
    drops: Vec<RecordedDrop>,
    next: usize,
}

impl RecordedDrops {
    /// The choices, in the drop loop's order.
    pub fn new(drops: Vec<RecordedDrop>) -> Self {
        Self { drops, next: 0 }
    }

    /// Choices used so far.
    pub fn used(&self) -> usize {
        self.next
    }
}

impl DropSource for RecordedDrops {
    fn begin_period(&mut self, num_ticks: usize) -> Result<()> {
        self.next = 0;
        if let Some(d) = self.drops.iter().find(|d| d.tick >= num_ticks) {
            return Err(AigbError::Replay {
                what: "recorded drop choices".into(),
                reason: format!("a choice is recorded for tick {}, the period has {num_ticks} ticks", d.tick),
            });
        }
        Ok(())
    }

    fn choose(&mut self, choice: &DropChoice<'_>, out: &mut Vec<usize>) -> Result<()> {
        let what = || {
            format!(
                "recorded drop choices at tick {}, round {}, advertiser {}, slot {}",
                choice.tick, choice.round, choice.advertiser, choice.slot
            )
        };
        let d = self.drops.get(self.next).ok_or_else(|| AigbError::Replay {
            what: what(),
            reason: format!("the recording ran out after {} choices", self.drops.len()),
        })?;
        if (d.tick, d.round, d.advertiser, d.slot) != (choice.tick, choice.round, choice.advertiser, choice.slot) {
            return Err(AigbError::Replay {
                what: what(),
                reason: format!(
                    "the next recorded choice (number {}) is for tick {}, round {}, advertiser {}, slot {}",
                    self.next, d.tick, d.round, d.advertiser, d.slot
                ),
            });
        }
        out.extend_from_slice(&d.dropped);
        self.next += 1;
        Ok(())
    }

    fn end_tick(&mut self, tick: usize, _rounds: usize) -> Result<()> {
        match self.drops.get(self.next) {
            Some(d) if d.tick <= tick => Err(AigbError::Replay {
                what: format!("recorded drop choices of tick {}", d.tick),
                reason: format!(
                    "choice number {} (round {}, advertiser {}, slot {}) was not used: the replay's drop loop ended before it",
                    self.next, d.round, d.advertiser, d.slot
                ),
            }),
            _ => Ok(()),
        }
    }
}

/// Checks that a source's choice is `n_drop` distinct impressions of `won`; `marked` is all
/// false on entry and on return.
fn check_drop_choice(choice: &DropChoice<'_>, dropped: &[usize], marked: &mut [bool]) -> Result<()> {
    let what = || {
        format!(
            "drop choice at tick {}, round {}, advertiser {}, slot {}",
            choice.tick, choice.round, choice.advertiser, choice.slot
        )
    };
    if dropped.len() != choice.n_drop {
        return Err(AigbError::Replay {
            what: what(),
            reason: format!("the drop loop needs {} impressions, the source gave {}", choice.n_drop, dropped.len()),
        });
    }
    let mut bad = None;
    for (j, &i) in dropped.iter().enumerate() {
        if choice.won.binary_search(&i).is_err() {
            bad = Some(format!("impression {i} is not one the advertiser won in this slot"));
        } else if marked[i] {
            bad = Some(format!("impression {i} is given twice"));
        }
        if bad.is_some() {
            for &i in &dropped[..j] {
                marked[i] = false;
            }
            break;
        }
        marked[i] = true;
    }
    match bad {
        Some(reason) => Err(AigbError::Replay { what: what(), reason }),
        None => {
            for &i in dropped {
                marked[i] = false;
            }
            Ok(())
        }
    }
}

fn check_bids(out: &mut [f32], a: usize, name: &str, tick: usize, clip: bool) -> Result<()> {
    for (i, b) in out.iter_mut().enumerate() {
        if !b.is_finite() {
            return Err(AigbError::InvalidBid {
                advertiser: a,
                bidder: name.to_owned(),
                tick,
                index: i,
                value: f64::from(*b),
                reason: "not finite",
            });
        }
        if *b < 0.0 {
            if clip {
                *b = 0.0;
            } else {
                return Err(AigbError::InvalidBid {
                    advertiser: a,
                    bidder: name.to_owned(),
                    tick,
                    index: i,
                    value: f64::from(*b),
                    reason: "negative (set compat.clip_negative_bids to clip like AuctionNet)",
                });
            }
        }
    }
    Ok(())
}

/// Whether `winner` holds a sold slot (helper for observers).
pub fn is_sold(winner: u32) -> bool {
    winner != NO_WINNER
}
