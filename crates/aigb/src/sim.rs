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

use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::auction::{AdvertiserTick, AuctionParams, TickAuction, ValueBounds, ValueNoise, NO_WINNER};
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
/// use aigb::{auctionnet_advertisers, Bidder, PidBidder, PidParams, SimParams, Simulator};
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
/// # Ok::<(), aigb::AigbError>(())
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

    /// Simulates period `period` with `bidders[a]` bidding for advertiser `a`.
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
        mut observer: Option<&mut dyn Observer>,
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
        let num_ticks = p.num_ticks();
        let k = p.auction.slots();
        let traffic = self.traffic(period)?;
        let bounds = self.value_bounds(period);
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
        let mut drop_rounds = 0usize;
        let noise_base = rl_core::derive_seed_named(p.seed, stream::NOISE);
        let drop_base = rl_core::derive_seed(rl_core::derive_seed_named(p.seed, stream::DROP), period);
        let drop_reseed = rl_core::derive_seed_named(p.seed, stream::DROP);
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
            if n > 0 {
                let noise_seed = if p.compat.reseed_noise_each_call {
                    noise_base
                } else {
                    rl_core::derive_seed(rl_core::derive_seed(noise_base, period), t as u64)
                };
                auction.run(&p.auction, &tt, &bids, &bounds, noise_seed)?;
                auction.totals(&tt, &mut totals);
                let mut drop_rng = rl_core::rng_from_seed(rl_core::derive_seed(drop_base, t as u64));
                let mut rounds = 0usize;
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
                            if p.compat.reseed_drop_choice {
                                drop_rng = rl_core::rng_from_seed(drop_reseed);
                            }
                            // partial Fisher–Yates: the first n_drop entries become a uniform sample
                            for j in 0..n_drop {
                                let r = drop_rng.random_range(j..won.len());
                                won.swap(j, r);
                            }
                            for &i in &won[..n_drop] {
                                bids[a * n + i] = 0.0;
                                changed.push(i);
                            }
                        }
                    }
                    changed.sort_unstable();
                    changed.dedup();
                    auction.rerun(&p.auction, &tt, &bids, &bounds, noise_seed, &changed);
                    auction.totals(&tt, &mut totals);
                }
                drop_rounds += rounds;
                lwc_sum = auction.least_winning_cost.iter().map(|&x| f64::from(x)).sum::<f64>();
            } else {
                totals.clear();
                totals.resize(n_a, AdvertiserTick::default());
                lwc_sum = 0.0;
            }
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
