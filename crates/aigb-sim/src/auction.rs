//! The per-impression auction: a generalised second-price (GSP) auction over `K` ad slots with
//! a reserve price, position-dependent exposure, pay-on-exposure and Bernoulli conversions, as in
//! AuctionNet's `BiddingEnv` (`alimama-tech/AuctionNet:simul_bidding_env/Environment/BiddingEnv.py`).
//!
//! For one impression with bids `b_(1) ≥ b_(2) ≥ …` (ties: the lower advertiser index ranks
//! first):
//!
//! ```text
//! winner of slot k  = advertiser with the k-th highest bid            (k = 1..K, K = 3)
//! price of slot k   = max(b_(k+1), reserve)                           (second price, floored)
//! least winning cost = max(b_(K+1), reserve)
//! sold(k)           = b_(k+1) > f32(reserve)             ReserveRule::AuctionNet (price == reserve ⇒ unsold;
//!                                                       compared in f32, the bids' type, as the reference does)
//!                   = b_(k) ≥ reserve and b_(k) > 0      ReserveRule::Standard
//! exposed(k)        ~ Bernoulli(e_k), e = [1.0, 0.8, 0.6]; Cascade::AuctionNet: slot k ≥ 3 is
//!                     unexposed when slot k-1's draw was unexposed
//! cost(k)           = price(k) · sold(k) · exposed(k)                 (pay on exposure)
//! value             = pValue + sigma · z,  z ~ N(0,1) truncated to [-2u₁, 2u₂] (u per advertiser and period)
//! conversion(k)     ~ Bernoulli(clip(value, 0, 1)) · sold(k) · exposed(k)
//! ```
//!
//! Random numbers are counter-based: the draws of impression `i` are a hash of `(noise seed, i,
//! purpose, slot)`, so re-running the auction on some impressions (the budget drop loop) redraws
//! exactly the same numbers for the others, and no draw depends on evaluation order. The draws
//! come from a [`DrawSource`]: [`SeededDraws`] (the default, above) or [`RecordedDraws`] (logged
//! outcomes, e.g. of one AuctionNet auction call), through [`TickAuction::run_with`].

use serde::{Deserialize, Serialize};

use crate::error::{check_range, AigbError, Result};

/// Most advertisers a market may have (advertiser ids are `u32` in the auction buffers, with
/// `u32::MAX` meaning "no winner").
pub const MAX_ADVERTISERS: usize = (u32::MAX - 1) as usize;

/// Which exposure draws a lower slot depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Cascade {
    /// AuctionNet: a slot k ≥ 3 is unexposed when slot k−1's exposure draw failed (with three
    /// slots: slot 2 unexposed ⇒ slot 3 unexposed; slot 1 does not affect slot 2).
    #[default]
    AuctionNet,
    /// Every slot needs all slots above it exposed (the full cascade of `rlbidder`).
    Full,
    /// Independent draws per slot.
    Independent,
}

/// When a slot counts as sold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ReserveRule {
    /// AuctionNet: a slot whose (floored) price equals the reserve is unsold, i.e. slot k is
    /// sold only when the (k+1)-th bid exceeds the reserve. The comparison is made in `f32`, the
    /// bids' type, as AuctionNet makes it in its bids' dtype: a next bid equal to `reserve as f32`
    /// leaves the slot unsold even when `reserve as f32 > reserve`. A lone bidder wins nothing.
    #[default]
    AuctionNet,
    /// Textbook GSP with reserve: slot k is sold when its winner bids at least the reserve (and
    /// more than 0); it pays `max(next bid, reserve)`.
    Standard,
}

/// How the realised conversion probability relates to the predicted pValue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ValueNoise {
    /// AuctionNet: `pValue + sigma·z`, `z` a standard normal truncated to `[-2u₁, 2u₂]` with
    /// `u₁, u₂ ~ U(0, 1)` fixed per advertiser and period (a per-advertiser calibration bias).
    #[default]
    TruncatedNormal,
    /// The pValue itself (a perfectly calibrated predictor).
    None,
}

/// Parameters of the auction (AuctionNet's `BiddingEnv` with `config/test.gin`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `reserve_price` | 0.0001 | price floor (`RESERVE_PV_PRICE` of `test.gin`; the class default is 0.01) | ≥ 0 |
/// | `exposure` | [1.0, 0.8, 0.6] | exposure probability per slot; its length is the number of slots | each in [0, 1], 1–8 slots |
/// | `cascade` | `auction_net` | exposure dependence between slots | [`Cascade`] |
/// | `reserve_rule` | `auction_net` | when a slot counts as sold | [`ReserveRule`] |
/// | `value_noise` | `truncated_normal` | realised value model | [`ValueNoise`] |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuctionParams {
    /// Price floor.
    pub reserve_price: f64,
    /// Exposure probability of each slot (top first).
    pub exposure: Vec<f64>,
    /// Exposure dependence between slots.
    pub cascade: Cascade,
    /// When a slot counts as sold.
    pub reserve_rule: ReserveRule,
    /// Realised value model.
    pub value_noise: ValueNoise,
}

impl Default for AuctionParams {
    fn default() -> Self {
        Self {
            reserve_price: 0.0001,
            exposure: vec![1.0, 0.8, 0.6],
            cascade: Cascade::AuctionNet,
            reserve_rule: ReserveRule::AuctionNet,
            value_noise: ValueNoise::TruncatedNormal,
        }
    }
}

crate::traffic::setters!(AuctionParams {
    reserve_price: f64,
    exposure: Vec<f64>,
    cascade: Cascade,
    reserve_rule: ReserveRule,
    value_noise: ValueNoise,
});

/// Most slots an auction may have.
pub const MAX_SLOTS: usize = 8;

impl rl_core::Params for AuctionParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        check_range("reserve_price", self.reserve_price, 0.0, f64::INFINITY)?;
        if self.exposure.is_empty() || self.exposure.len() > MAX_SLOTS {
            return Err(AigbError::invalid(
                "exposure",
                format!("{} slots", self.exposure.len()),
                format!("must have 1..={MAX_SLOTS} slots"),
            ));
        }
        for (k, e) in self.exposure.iter().enumerate() {
            check_range(&format!("exposure[{k}]"), *e, 0.0, 1.0)?;
        }
        Ok(())
    }
}

impl AuctionParams {
    /// Number of ad slots.
    pub fn slots(&self) -> usize {
        self.exposure.len()
    }
}

/// No winner (unsold slot).
pub const NO_WINNER: u32 = u32::MAX;

/// Truncation bounds of one advertiser's value noise, as standard-normal CDF values
/// `(Φ(a), Φ(b))` of `z ∈ [a, b]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ValueBounds {
    /// Φ(a).
    pub lo: f64,
    /// Φ(b).
    pub hi: f64,
}

impl ValueBounds {
    /// Bounds `[-2u₁, 2u₂]` (AuctionNet's per-advertiser truncation).
    pub fn from_uniforms(u1: f64, u2: f64) -> Self {
        Self { lo: std_normal_cdf(-2.0 * u1), hi: std_normal_cdf(2.0 * u2) }
    }

    /// The untruncated standard normal.
    pub fn untruncated() -> Self {
        Self { lo: 0.0, hi: 1.0 }
    }

    /// The draw `z = Φ⁻¹(lo + u (hi − lo))` for a uniform `u ∈ (0, 1)`.
    pub fn sample(&self, u: f64) -> f64 {
        let p = (self.lo + u * (self.hi - self.lo)).clamp(1e-300, 1.0 - 1e-16);
        std_normal_inv_cdf(p)
    }
}

/// Standard normal CDF.
pub fn std_normal_cdf(x: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)
}

#[allow(clippy::excessive_precision)] // the published AS 241 coefficients
/// Standard normal quantile, Wichura's algorithm AS 241 (PPND16, relative accuracy ~1e-16).
pub fn std_normal_inv_cdf(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        let num =
            (((((((2.509_080_928_730_122_7e3 * r + 3.343_057_558_358_812_8e4) * r + 6.726_577_092_700_870_1e4) * r
                + 4.592_195_393_154_987_1e4)
                * r
                + 1.373_169_376_550_946e4)
                * r
                + 1.971_590_950_306_551_4e3)
                * r
                + 1.331_416_678_917_843_8e2)
                * r
                + 3.387_132_872_796_366_5)
                * q;
        let den = ((((((5.226_495_278_852_545_6e3 * r + 2.872_908_573_572_194_3e4) * r + 3.930_789_580_009_271e4)
            * r
            + 2.121_379_430_158_659_7e4)
            * r
            + 5.394_196_021_424_751e3)
            * r
            + 6.871_870_074_920_579e2)
            * r
            + 4.231_333_070_160_091e1)
            * r
            + 1.0;
        return num / den;
    }
    let r0 = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r0.ln()).sqrt();
    let val = if r <= 5.0 {
        let r = r - 1.6;
        let num = ((((((7.745_450_142_783_414e-4 * r + 2.272_384_498_926_918_4e-2) * r + 2.417_807_251_774_506e-1)
            * r
            + 1.270_458_252_452_368_4)
            * r
            + 3.647_848_324_763_204_5)
            * r
            + 5.769_497_221_460_691)
            * r
            + 4.630_337_846_156_545)
            * r
            + 1.423_437_110_749_683_5;
        let den =
            ((((((1.050_750_071_644_416_9e-9 * r + 5.475_938_084_995_345e-4) * r + 1.519_866_656_361_645_7e-2) * r
                + 1.481_039_764_274_800_8e-1)
                * r
                + 6.897_673_349_851e-1)
                * r
                + 1.676_384_830_183_803_8)
                * r
                + 2.053_191_626_637_759)
                * r
                + 1.0;
        num / den
    } else {
        let r = r - 5.0;
        let num = ((((((2.010_334_399_292_288_1e-7 * r + 2.711_555_568_743_487_6e-5) * r
            + 1.242_660_947_388_078_4e-3)
            * r
            + 2.653_218_952_657_612_4e-2)
            * r
            + 2.965_605_718_285_048_7e-1)
            * r
            + 1.784_826_539_917_291_3)
            * r
            + 5.463_784_911_164_114)
            * r
            + 6.657_904_643_501_103;
        let den = ((((((2.044_263_103_389_939_7e-15 * r + 1.421_511_758_316_445_9e-7) * r
            + 1.846_318_317_510_054_8e-5)
            * r
            + 7.868_691_311_456_133e-4)
            * r
            + 1.487_536_129_085_061_5e-2)
            * r
            + 1.369_298_809_227_358e-1)
            * r
            + 5.998_322_065_558_88e-1)
            * r
            + 1.0;
        num / den
    };
    if q < 0.0 {
        -val
    } else {
        val
    }
}

/// A uniform in (0, 1) from `(seed, impression, purpose)` (SplitMix64 of the counter).
#[inline]
pub(crate) fn unit(seed: u64, i: usize, purpose: usize) -> f64 {
    let x = rl_core::seed::splitmix64(seed ^ rl_core::seed::splitmix64(((i as u64) << 5) | purpose as u64));
    ((x >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

/// The outcome of one tick's auctions, per impression and slot (`[i·K + k]`), and the buffers
/// to compute it. Reused across ticks to avoid allocation.
#[derive(Debug, Clone, Default)]
pub struct TickAuction {
    slots: usize,
    num_pv: usize,
    num_advertisers: usize,
    /// `[i·(K+1) + r]`: the r-th highest bid (then advertiser) of impression i.
    top_bid: Vec<f32>,
    top_adv: Vec<u32>,
    /// Winner of each slot, [`NO_WINNER`] when unsold.
    pub winner: Vec<u32>,
    /// Price of each slot (0 when unsold); paid only when exposed.
    pub price: Vec<f32>,
    /// Whether each slot was exposed (false when unsold).
    pub exposed: Vec<bool>,
    /// Whether each slot converted (false when unsold or unexposed).
    pub conversion: Vec<bool>,
    /// Least winning cost of each impression: `max(b_(K+1), reserve)`.
    pub least_winning_cost: Vec<f32>,
}

/// Per-advertiser totals of one tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AdvertiserTick {
    /// Slots won (sold), exposed or not (AuctionNet's `xi`).
    pub wins: u64,
    /// Slots won and exposed.
    pub exposures: u64,
    /// Conversions.
    pub conversions: u64,
    /// Cost paid (exposed slots only).
    pub cost: f64,
    /// Σ pValue over exposed slots (AuctionNet's `reward_continuous`).
    pub exposed_pvalue: f64,
}

impl TickAuction {
    /// Empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of slots of the last run.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Impressions of the last run.
    pub fn num_pv(&self) -> usize {
        self.num_pv
    }

    /// Runs the auction of every impression.
    ///
    /// `bids` is advertiser-major like [`crate::TickTraffic`] (`bids[a·n + i]`), already checked
    /// (finite, ≥ 0); `bounds[a]` is advertiser a's value-noise truncation.
    ///
    /// # Errors
    /// [`AigbError::Empty`] without impressions or advertisers, [`AigbError::Shape`] when the
    /// lengths disagree.
    pub fn run(
        &mut self,
        params: &AuctionParams,
        traffic: &crate::TickTraffic,
        bids: &[f32],
        bounds: &[ValueBounds],
        noise_seed: u64,
    ) -> Result<()> {
        self.run_with(params, traffic, bids, bounds, &mut SeededDraws::new(noise_seed))
    }

    /// [`TickAuction::run`] with the exposure and conversion draws taken from `draws` (a
    /// [`SeededDraws`] gives exactly [`TickAuction::run`]; a [`RecordedDraws`] replays logged
    /// outcomes).
    ///
    /// # Errors
    /// As [`TickAuction::run`], and [`AigbError::Shape`] when `draws` was recorded for another
    /// number of impressions, slots or advertisers.
    pub fn run_with<D: DrawSource>(
        &mut self,
        params: &AuctionParams,
        traffic: &crate::TickTraffic,
        bids: &[f32],
        bounds: &[ValueBounds],
        draws: &mut D,
    ) -> Result<()> {
        let (n, n_a) = (traffic.num_pv, traffic.num_advertisers);
        if n == 0 {
            return Err(AigbError::Empty { what: "impressions of the auction".into() });
        }
        if n_a == 0 {
            return Err(AigbError::Empty { what: "bidders of the auction".into() });
        }
        if n_a > MAX_ADVERTISERS {
            return Err(AigbError::invalid("advertisers", n_a, format!("at most {}", MAX_ADVERTISERS)));
        }
        let cells = n.checked_mul(n_a).ok_or_else(|| AigbError::Shape {
            what: "impressions × advertisers".into(),
            expected: "a product that fits in usize".into(),
            got: format!("{n} × {n_a}"),
        })?;
        check_len("bids", bids.len(), cells)?;
        check_len("pvalues", traffic.pvalues.len(), cells)?;
        check_len("sigmas", traffic.sigmas.len(), cells)?;
        check_len("value bounds", bounds.len(), n_a)?;
        let k = params.slots();
        draws.check(n, k, n_a)?;
        let r = k + 1;
        self.slots = k;
        self.num_pv = n;
        self.num_advertisers = n_a;
        self.top_bid.clear();
        self.top_bid.resize(n * r, -1.0);
        self.top_adv.clear();
        self.top_adv.resize(n * r, NO_WINNER);
        // advertiser-major scan: every advertiser's bids are one sequential stream
        for a in 0..n_a {
            let col = &bids[a * n..(a + 1) * n];
            for (i, &b) in col.iter().enumerate() {
                let tb = &mut self.top_bid[i * r..(i + 1) * r];
                if b > tb[r - 1] {
                    let ta = &mut self.top_adv[i * r..(i + 1) * r];
                    insert_top(tb, ta, b, a as u32);
                }
            }
        }
        self.winner.clear();
        self.winner.resize(n * k, NO_WINNER);
        self.price.clear();
        self.price.resize(n * k, 0.0);
        self.exposed.clear();
        self.exposed.resize(n * k, false);
        self.conversion.clear();
        self.conversion.resize(n * k, false);
        self.least_winning_cost.clear();
        self.least_winning_cost.resize(n, 0.0);
        for i in 0..n {
            self.resolve(params, traffic, bounds, draws, i);
        }
        Ok(())
    }

    /// Re-runs the auction of the impressions in `changed` after their bids changed (the budget
    /// drop loop); all other impressions keep their outcome. With a [`SeededDraws`] of the same
    /// seed as the last run, the re-run impressions redraw the same random numbers. Shapes are
    /// those of the last [`TickAuction::run_with`] (the simulator's own buffers).
    pub(crate) fn rerun_with<D: DrawSource>(
        &mut self,
        params: &AuctionParams,
        traffic: &crate::TickTraffic,
        bids: &[f32],
        bounds: &[ValueBounds],
        draws: &mut D,
        changed: &[usize],
    ) {
        let (n, n_a, r) = (self.num_pv, self.num_advertisers, self.slots + 1);
        for &i in changed {
            let tb = &mut self.top_bid[i * r..(i + 1) * r];
            let ta = &mut self.top_adv[i * r..(i + 1) * r];
            tb.fill(-1.0);
            ta.fill(NO_WINNER);
            for a in 0..n_a {
                let b = bids[a * n + i];
                if b > tb[r - 1] {
                    insert_top(tb, ta, b, a as u32);
                }
            }
            self.resolve(params, traffic, bounds, draws, i);
        }
    }

    /// Slot allocation, prices, exposure and conversions of impression `i` from its top bids.
    #[allow(clippy::needless_range_loop)] // s indexes the slot arrays and the exposure table
    #[inline]
    fn resolve<D: DrawSource>(
        &mut self,
        params: &AuctionParams,
        traffic: &crate::TickTraffic,
        bounds: &[ValueBounds],
        draws: &mut D,
        i: usize,
    ) {
        let (n, k, r) = (self.num_pv, self.slots, self.slots + 1);
        let reserve = params.reserve_price;
        let tb = &self.top_bid[i * r..(i + 1) * r];
        let ta = &self.top_adv[i * r..(i + 1) * r];
        let next = |j: usize| f64::from(tb[j].max(0.0));
        // AuctionNet floors and compares prices in the bids' dtype (float32 for our bids): a slot
        // is unsold when its floored price equals float32(reserve), i.e. next bid ≤ f32(reserve)
        let reserve32 = reserve as f32;
        self.least_winning_cost[i] = next(k).max(reserve) as f32;
        let mut draw_prev = true; // exposure draw of the slot above
        let mut exposed_prev = true; // final exposure of the slot above
        for s in 0..k {
            let idx = i * k + s;
            let a = ta[s];
            let draw = draws.exposure(i, s, params.exposure[s]);
            let exposed = match params.cascade {
                Cascade::AuctionNet => draw && (s < 2 || draw_prev),
                Cascade::Full => draw && exposed_prev,
                Cascade::Independent => draw,
            };
            draw_prev = draw;
            exposed_prev = exposed;
            let sold = a != NO_WINNER
                && match params.reserve_rule {
                    ReserveRule::AuctionNet => tb[s + 1].max(0.0) > reserve32,
                    ReserveRule::Standard => next(s) >= reserve && next(s) > 0.0,
                };
            if !sold {
                self.winner[idx] = NO_WINNER;
                self.price[idx] = 0.0;
                self.exposed[idx] = false;
                self.conversion[idx] = false;
                continue;
            }
            self.winner[idx] = a;
            self.price[idx] = next(s + 1).max(reserve) as f32;
            self.exposed[idx] = exposed;
            self.conversion[idx] = exposed && {
                let a = a as usize;
                let cell = ValueCell {
                    pvalue: f64::from(traffic.pvalues[a * n + i]),
                    sigma: f64::from(traffic.sigmas[a * n + i]),
                    bounds: bounds[a],
                    noise: params.value_noise,
                };
                draws.converts(i, s, a, &cell)
            };
        }
    }

    /// Per-advertiser totals of the current outcome (`out[a]`, resized to the advertisers).
    pub fn totals(&self, traffic: &crate::TickTraffic, out: &mut Vec<AdvertiserTick>) {
        out.clear();
        out.resize(self.num_advertisers, AdvertiserTick::default());
        let (n, k) = (self.num_pv, self.slots);
        for i in 0..n {
            for s in 0..k {
                let idx = i * k + s;
                let a = self.winner[idx];
                if a == NO_WINNER {
                    continue;
                }
                let a = a as usize;
                let t = &mut out[a];
                t.wins += 1;
                if self.exposed[idx] {
                    t.exposures += 1;
                    t.cost += f64::from(self.price[idx]);
                    t.exposed_pvalue += f64::from(traffic.pvalues[a * n + i]);
                    t.conversions += u64::from(self.conversion[idx]);
                }
            }
        }
    }
}

/// What a conversion draw sees of the winning advertiser's impression.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueCell {
    /// Predicted conversion probability (pValue).
    pub pvalue: f64,
    /// Its noise scale.
    pub sigma: f64,
    /// The advertiser's value-noise truncation.
    pub bounds: ValueBounds,
    /// The realised value model.
    pub noise: ValueNoise,
}

impl ValueCell {
    /// The realised value `pValue + sigma·z` for the truncated-normal draw `z = bounds.sample(u)`
    /// (the pValue itself under [`ValueNoise::None`] or when `sigma ≤ 0`).
    #[inline]
    pub fn value(&self, u: f64) -> f64 {
        match self.noise {
            ValueNoise::TruncatedNormal if self.sigma > 0.0 => self.pvalue + self.sigma * self.bounds.sample(u),
            _ => self.pvalue,
        }
    }
}

/// Where an auction's random outcomes come from: the exposure draw of each sold slot (before
/// the cascade) and the conversion of each exposed slot.
pub trait DrawSource {
    /// Checks that the source fits a tick of `num_pv` impressions, `slots` slots and
    /// `num_advertisers` advertisers (called once per [`TickAuction::run_with`]).
    ///
    /// # Errors
    /// [`AigbError::Shape`] when it does not.
    fn check(&self, num_pv: usize, slots: usize, num_advertisers: usize) -> Result<()>;
    /// The exposure draw of slot `slot` of impression `i`, whose exposure probability is `prob`
    /// (the cascade is applied afterwards).
    fn exposure(&mut self, i: usize, slot: usize, prob: f64) -> bool;
    /// Whether the exposed slot `slot` of impression `i`, won by `advertiser`, converts.
    fn converts(&mut self, i: usize, slot: usize, advertiser: usize, cell: &ValueCell) -> bool;
}

/// The default source: counter-based uniforms from a noise seed (see the module docs); the
/// draws of impression `i` depend only on `(seed, i, purpose, slot)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeededDraws {
    seed: u64,
}

impl SeededDraws {
    /// The source of noise seed `seed`.
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }
}

impl DrawSource for SeededDraws {
    fn check(&self, _: usize, _: usize, _: usize) -> Result<()> {
        Ok(())
    }
    #[inline]
    fn exposure(&mut self, i: usize, slot: usize, prob: f64) -> bool {
        unit(self.seed, i, slot) < prob
    }
    #[inline]
    fn converts(&mut self, i: usize, slot: usize, _: usize, cell: &ValueCell) -> bool {
        let value = cell.value(unit(self.seed, i, MAX_SLOTS + slot));
        unit(self.seed, i, 2 * MAX_SLOTS + slot) < value.clamp(0.0, 1.0)
    }
}

/// Logged outcomes, e.g. one `simulate_ad_bidding` call of AuctionNet: the exposure draw of
/// every (impression, slot) before the cascade, and the conversion draw of every (impression,
/// advertiser) (AuctionNet draws a conversion for every cell, whoever wins, and keeps it only
/// for exposed winners).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedDraws {
    num_pv: usize,
    slots: usize,
    num_advertisers: usize,
    exposure: Vec<bool>,
    conversion: Vec<bool>,
}

impl RecordedDraws {
    /// `exposure[i·slots + k]` and `conversion[i·num_advertisers + a]`.
    ///
    /// # Errors
    /// [`AigbError::Empty`] for zero impressions, slots or advertisers; [`AigbError::Shape`]
    /// when a length differs from its product.
    pub fn new(
        num_pv: usize,
        slots: usize,
        num_advertisers: usize,
        exposure: Vec<bool>,
        conversion: Vec<bool>,
    ) -> Result<Self> {
        if num_pv == 0 || slots == 0 || num_advertisers == 0 {
            return Err(AigbError::Empty { what: "recorded draws (impressions, slots or advertisers)".into() });
        }
        let cells = |a: usize, b: usize, what: &str| {
            a.checked_mul(b).ok_or_else(|| AigbError::Shape {
                what: what.into(),
                expected: "a product that fits in usize".into(),
                got: format!("{a} × {b}"),
            })
        };
        check_len("recorded exposure draws", exposure.len(), cells(num_pv, slots, "impressions × slots")?)?;
        check_len(
            "recorded conversion draws",
            conversion.len(),
            cells(num_pv, num_advertisers, "impressions × advertisers")?,
        )?;
        Ok(Self { num_pv, slots, num_advertisers, exposure, conversion })
    }
}

impl DrawSource for RecordedDraws {
    fn check(&self, num_pv: usize, slots: usize, num_advertisers: usize) -> Result<()> {
        if (num_pv, slots, num_advertisers) != (self.num_pv, self.slots, self.num_advertisers) {
            return Err(AigbError::Shape {
                what: "recorded draws (impressions, slots, advertisers)".into(),
                expected: format!("({num_pv}, {slots}, {num_advertisers})"),
                got: format!("({}, {}, {})", self.num_pv, self.slots, self.num_advertisers),
            });
        }
        Ok(())
    }
    fn exposure(&mut self, i: usize, slot: usize, _: f64) -> bool {
        self.exposure.get(i * self.slots + slot).copied().unwrap_or(false)
    }
    fn converts(&mut self, i: usize, _: usize, advertiser: usize, _: &ValueCell) -> bool {
        self.conversion.get(i * self.num_advertisers + advertiser).copied().unwrap_or(false)
    }
}

fn check_len(what: &str, got: usize, expected: usize) -> Result<()> {
    if got != expected {
        return Err(AigbError::Shape { what: what.into(), expected: expected.to_string(), got: got.to_string() });
    }
    Ok(())
}

/// Inserts `(b, a)` into the descending top list (strictly greater than the last entry).
#[inline]
fn insert_top(tb: &mut [f32], ta: &mut [u32], b: f32, a: u32) {
    let r = tb.len();
    let mut p = r - 1;
    while p > 0 && b > tb[p - 1] {
        tb[p] = tb[p - 1];
        ta[p] = ta[p - 1];
        p -= 1;
    }
    tb[p] = b;
    ta[p] = a;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TickTraffic;
    use rl_core::Params;

    fn tick(pv: &[&[f32]]) -> TickTraffic {
        // pv[a][i]
        let n = pv[0].len();
        let pvalues: Vec<f32> = pv.iter().flat_map(|c| c.iter().copied()).collect();
        let sig = vec![0.0; pvalues.len()];
        TickTraffic::from_values(0, n, pvalues, sig).unwrap()
    }

    fn bids(b: &[&[f32]]) -> Vec<f32> {
        b.iter().flat_map(|c| c.iter().copied()).collect()
    }

    #[test]
    fn inverse_cdf_matches_the_cdf() {
        // golden values: scipy.stats.norm.ppf (scipy 1.17)
        let golden = [
            (1e-12, -7.034483825301131),
            (1e-6, -4.753424308822899),
            (0.001, -3.090232306167813),
            (0.02, -2.053748910631823),
            (0.3, -0.5244005127080409),
            (0.7, 0.5244005127080407),
            (0.975, 1.959963984540054),
            (0.999999, 4.753424308817087),
        ];
        for (p, x) in golden {
            let y = std_normal_inv_cdf(p);
            assert!((y - x).abs() <= 1e-12 * x.abs(), "{p}: {y} vs {x}");
        }
        for &p in &[0.01, 0.2, 0.5, 0.8, 0.99] {
            assert!((std_normal_cdf(std_normal_inv_cdf(p)) - p).abs() <= 1e-9, "{p}");
            // statrs erfc is good to ~1e-10
        }
        assert_eq!(std_normal_inv_cdf(0.5), 0.0);
    }

    #[test]
    fn gsp_allocation_prices_and_least_winning_cost() {
        // 5 advertisers, 1 impression: bids 0.5, 0.9, 0.1, 0.7, 0.3
        let t = tick(&[&[0.0], &[0.0], &[0.0], &[0.0], &[0.0]]);
        let b = bids(&[&[0.5], &[0.9], &[0.1], &[0.7], &[0.3]]);
        let p = AuctionParams::default().exposure(vec![1.0, 1.0, 1.0]).check().unwrap();
        let mut au = TickAuction::new();
        au.run(&p, &t, &b, &[ValueBounds::untruncated(); 5], 1).unwrap();
        assert_eq!(au.winner, vec![1, 3, 0]);
        assert_eq!(au.price, vec![0.7, 0.5, 0.3]);
        assert_eq!(au.least_winning_cost, vec![0.3]);
        assert_eq!(au.exposed, vec![true, true, true]);
        let mut tot = Vec::new();
        au.totals(&t, &mut tot);
        assert_eq!(tot[1].cost, f64::from(0.7f32));
        assert_eq!(tot[2].wins, 0);
        assert_eq!(tot[4].wins, 0);
    }

    #[test]
    fn ties_go_to_the_lower_index_and_reserve_rules_differ() {
        let t = tick(&[&[0.0], &[0.0], &[0.0]]);
        // a lone positive bid: AuctionNet leaves every slot unsold, Standard sells at the reserve
        let b = bids(&[&[0.0], &[0.4], &[0.0]]);
        let p = AuctionParams::default().exposure(vec![1.0, 1.0, 1.0]).check().unwrap();
        let mut au = TickAuction::new();
        au.run(&p, &t, &b, &[ValueBounds::untruncated(); 3], 1).unwrap();
        assert_eq!(au.winner, vec![NO_WINNER; 3]);
        assert_eq!(au.least_winning_cost, vec![0.0001]);
        let ps =
            AuctionParams::default().exposure(vec![1.0, 1.0, 1.0]).reserve_rule(ReserveRule::Standard).check().unwrap();
        au.run(&ps, &t, &b, &[ValueBounds::untruncated(); 3], 1).unwrap();
        assert_eq!(au.winner, vec![1, NO_WINNER, NO_WINNER]);
        assert_eq!(au.price[0], 0.0001);
        // equal bids: the lower index ranks first
        let b = bids(&[&[0.2], &[0.2], &[0.2]]);
        au.run(&p, &t, &b, &[ValueBounds::untruncated(); 3], 1).unwrap();
        assert_eq!(au.winner, vec![0, 1, NO_WINNER]); // slot 3's next bid (none) is below the reserve
        assert_eq!(au.price, vec![0.2, 0.2, 0.0]);
    }

    #[test]
    fn exposure_cascade_and_pay_on_exposure() {
        let t = tick(&[&[1.0], &[1.0], &[1.0], &[0.0]]);
        let b = bids(&[&[0.9], &[0.8], &[0.7], &[0.6]]);
        let mut au = TickAuction::new();
        let bnd = [ValueBounds::untruncated(); 4];
        // slot 2 never exposed: AuctionNet's cascade hides slot 3 too, Independent does not
        let p = AuctionParams::default().exposure(vec![1.0, 0.0, 1.0]).check().unwrap();
        au.run(&p, &t, &b, &bnd, 3).unwrap();
        assert_eq!(au.exposed, vec![true, false, false]);
        assert_eq!(au.conversion, vec![true, false, false]); // pValue 1, sigma 0
        let mut tot = Vec::new();
        au.totals(&t, &mut tot);
        assert_eq!((tot[1].wins, tot[1].exposures, tot[1].cost), (1, 0, 0.0)); // won, not exposed: pays nothing
        let p = p.into_inner().cascade(Cascade::Independent).check().unwrap();
        au.run(&p, &t, &b, &bnd, 3).unwrap();
        assert_eq!(au.exposed, vec![true, false, true]);
        // slot 1 never exposed: AuctionNet's cascade leaves slot 2 alone, Full hides everything
        let p = AuctionParams::default().exposure(vec![0.0, 1.0, 1.0]).check().unwrap();
        au.run(&p, &t, &b, &bnd, 3).unwrap();
        assert_eq!(au.exposed, vec![false, true, true]);
        let p = p.into_inner().cascade(Cascade::Full).check().unwrap();
        au.run(&p, &t, &b, &bnd, 3).unwrap();
        assert_eq!(au.exposed, vec![false, false, false]);
    }

    #[test]
    fn exposure_rates_and_conversion_rates_are_as_configured() {
        let n = 20_000;
        let pv = vec![0.3f32; n * 4];
        let t = TickTraffic::from_values(0, n, pv, vec![0.0; n * 4]).unwrap();
        let b: Vec<f32> = (0..4).flat_map(|a| std::iter::repeat_n(1.0 - 0.1 * a as f32, n)).collect();
        let p = AuctionParams::default().check().unwrap();
        let mut au = TickAuction::new();
        au.run(&p, &t, &b, &[ValueBounds::untruncated(); 4], 11).unwrap();
        let rate = |s: usize| (0..n).filter(|i| au.exposed[i * 3 + s]).count() as f64 / n as f64;
        assert!((rate(0) - 1.0).abs() < 1e-12);
        assert!((rate(1) - 0.8).abs() < 0.015, "{}", rate(1));
        assert!((rate(2) - 0.48).abs() < 0.015, "{}", rate(2)); // 0.6 · 0.8 through the cascade
        let conv = (0..n).filter(|i| au.conversion[i * 3]).count() as f64 / n as f64;
        assert!((conv - 0.3).abs() < 0.015, "{conv}");
    }

    #[test]
    fn bad_shapes_and_empty_auctions_are_errors() {
        let p = AuctionParams::default().check().unwrap();
        let t = tick(&[&[0.1, 0.2], &[0.1, 0.2]]);
        let mut au = TickAuction::new();
        let bnd = [ValueBounds::untruncated(); 2];
        assert!(matches!(au.run(&p, &t, &[0.1; 3], &bnd, 0), Err(AigbError::Shape { .. })));
        let empty = TickTraffic { tick: 0, num_pv: 0, num_advertisers: 2, pvalues: vec![], sigmas: vec![] };
        assert!(matches!(au.run(&p, &empty, &[], &bnd, 0), Err(AigbError::Empty { .. })));
        // public fields: sizes whose product overflows are a shape error, not a panic
        let absurd = TickTraffic { num_pv: usize::MAX / 2, num_advertisers: 3, ..t.clone() };
        assert!(matches!(au.run(&p, &absurd, &[], &bnd, 0), Err(AigbError::Shape { .. })));
        assert!(AuctionParams::default().exposure(vec![]).check().is_err());
        assert!(AuctionParams::default().exposure(vec![1.2]).check().is_err());
        assert!(AuctionParams::default().reserve_price(f64::NAN).check().is_err());
    }

    #[test]
    fn truncated_value_noise_stays_in_its_bounds() {
        let b = ValueBounds::from_uniforms(0.25, 0.75); // z in [-0.5, 1.5]
        for j in 0..1000 {
            let z = b.sample((j as f64 + 0.5) / 1000.0);
            assert!((-0.5 - 1e-9..=1.5 + 1e-9).contains(&z), "{z}");
        }
    }
}
