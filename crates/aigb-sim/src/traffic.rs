//! Impression (PV) traffic: how many impressions arrive in each tick of a delivery period, and
//! each advertiser's predicted conversion probability `pValue` and its uncertainty `sigma` for
//! every impression.
//!
//! The generative model is AuctionNet's NeurIPS traffic generator
//! (`alimama-tech/AuctionNet:simul_bidding_env/PvGenerator/NeurIPSPvGen.py`), re-implemented with
//! our own seeded streams (bit-exact NumPy reproduction is not a goal; the fidelity tests compare
//! distributions, see `docs/aigb.md`):
//!
//! ```text
//! traffic[t]  = floor(pv_num · w_t f_w(t) / Σ_s w_s f_w(s) · Σ_s w_s)   f ~ U(1-0.4, 1+0.4) per 4-tick window
//! mean[a,t]   = 0.0005 · g_c(t) · h_a(t)     g ~ U(0.3, 1.7) per 8-tick window and category c,
//!                                            h ~ U(0.5, 1.5) per 8-tick window (h = 1 for the first
//!                                            advertiser of each category)
//! ratio[a,t]  ~ N(m_a, 0.2 m_a), m_a ~ N(0.5, 0.1)        (values < 0 → 0.1, > 1 → 1)
//! pValue      ~ N(mean[a,t], ratio[a,t] · mean[a,t])  clipped to [0, 1], per impression × advertiser
//! sigma       = |N(r_a, r_a / 2)| ∧ 0.3 · pValue,  r_a = |N(0.15, 0.06)| (> 0.3 → 0.2)
//! ```
//!
//! Every random number is drawn from a stream derived from `(seed, period, purpose)` and, for the
//! per-impression draws, `(tick, advertiser)`, so a tick can be generated on its own, in any
//! order, on any thread, and two periods never share a stream. Curve-level draws use ChaCha8
//! ([`rl_core::SeededRng`]); the ~10⁸ per-impression draws of a period use SplitMix64 for speed.
//!
//! Deviation, documented: AuctionNet seeds advertiser `i`'s curve with `episode·11111 + i` and
//! category `c`'s curve with `episode·11111 + c`, so advertisers 1–5 reuse the uniforms of
//! categories 1–5. We draw independent streams.

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use rl_core::MemoryBudget;

use crate::error::{check_positive, check_range, AigbError, Result};

/// AuctionNet's base traffic share of each of the 48 ticks (`NeurIPSPvGen.load_traffic_num_ratio_base`,
/// Apache-2.0); sums to 1.
pub const AUCTIONNET_TICK_WEIGHTS: [f64; 48] = [
    0.02301227869859104,
    0.010762491580186426,
    0.008821901210171106,
    0.004815771833139463,
    0.004798848017825916,
    0.0033286522466030154,
    0.003393029871737658,
    0.003033162880076294,
    0.004298719169969498,
    0.004862999633901365,
    0.011135644383826103,
    0.012360252404100745,
    0.018506556921931334,
    0.017290990682316758,
    0.02611926027547618,
    0.02405014108139558,
    0.036408735251439284,
    0.03309464578051337,
    0.03811129136190582,
    0.032375488041034066,
    0.03719169795965519,
    0.03287603678685833,
    0.033527553577337985,
    0.025498437500844198,
    0.023719894875409323,
    0.02221396205784743,
    0.026215595281236393,
    0.020075013906798774,
    0.02223287715563599,
    0.020495297399888097,
    0.022686423942899624,
    0.020808760368362482,
    0.02412421281824744,
    0.020575376772894775,
    0.019990263429615227,
    0.01648567735506885,
    0.01745555889928084,
    0.016890210294343122,
    0.020425629711104402,
    0.0197873391643239,
    0.024950761402728776,
    0.025119778635971764,
    0.03110131195417271,
    0.028594527343256595,
    0.030060816887030082,
    0.02565065380963528,
    0.02538045801878989,
    0.025285011364621513,
];

/// Parameters of the traffic generator (AuctionNet's `NeurIPSPvGen`; defaults are its values).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `pv_num` | 500 000 | impressions per period (before the per-tick floor) | ≥ 1; [`TrafficParams::max_tick_pv`] < 2⁵³; the buffers it implies fit `SimParams::memory_budget` |
/// | `tick_weights` | [`AUCTIONNET_TICK_WEIGHTS`] | base traffic share per tick; its length is the number of ticks | non-empty, ≥ 0, sum > 0 |
/// | `traffic_scale` | 0.4 | per-window traffic factor `U(1-s, 1+s)` | [0, 1) |
/// | `traffic_window` | 4 | ticks sharing one traffic factor | ≥ 1 |
/// | `pvalue_mean_base` | 0.0005 | mean pValue before the category/advertiser factors | (0, 1] |
/// | `category_scale` | 0.7 | category factor `U(1-s, 1+s)` | [0, 1) |
/// | `category_window` | 8 | ticks sharing one category factor | ≥ 1 |
/// | `advertiser_scale` | 0.5 | advertiser factor `U(1-s, 1+s)` | [0, 1) |
/// | `advertiser_window` | 8 | ticks sharing one advertiser factor | ≥ 1 |
/// | `std_ratio_mean` | 0.5 | mean of the advertiser's pValue std/mean ratio | [0, 1] |
/// | `std_ratio_sd` | 0.1 | its spread across advertisers | ≥ 0 |
/// | `std_ratio_tick_scale` | 0.2 | per-tick spread, relative | ≥ 0 |
/// | `sigma_ratio_mean` | 0.15 | mean of the advertiser's sigma/pValue ratio | [0, 0.3] |
/// | `sigma_ratio_sd` | 0.06 | its spread across advertisers | ≥ 0 |
///
/// The memory these parameters imply (per-tick buffers of `max_tick_pv` impressions, per-tick
/// curves) is checked against a [`MemoryBudget`] by `SimParams::check` (for one advertiser),
/// `Simulator::new` (for the market) and [`PeriodTraffic::new_within`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrafficParams {
    /// Impressions per period.
    pub pv_num: usize,
    /// Base traffic share per tick (length = ticks per period).
    pub tick_weights: Vec<f64>,
    /// Per-window traffic factor half-width.
    pub traffic_scale: f64,
    /// Ticks per traffic window.
    pub traffic_window: usize,
    /// Base mean pValue.
    pub pvalue_mean_base: f64,
    /// Category factor half-width.
    pub category_scale: f64,
    /// Ticks per category window.
    pub category_window: usize,
    /// Advertiser factor half-width.
    pub advertiser_scale: f64,
    /// Ticks per advertiser window.
    pub advertiser_window: usize,
    /// Mean std/mean ratio of pValues.
    pub std_ratio_mean: f64,
    /// Spread of that ratio across advertisers.
    pub std_ratio_sd: f64,
    /// Relative per-tick spread of that ratio.
    pub std_ratio_tick_scale: f64,
    /// Mean sigma/pValue ratio.
    pub sigma_ratio_mean: f64,
    /// Spread of that ratio across advertisers.
    pub sigma_ratio_sd: f64,
}

impl Default for TrafficParams {
    fn default() -> Self {
        Self {
            pv_num: 500_000,
            tick_weights: AUCTIONNET_TICK_WEIGHTS.to_vec(),
            traffic_scale: 0.4,
            traffic_window: 4,
            pvalue_mean_base: 0.0005,
            category_scale: 0.7,
            category_window: 8,
            advertiser_scale: 0.5,
            advertiser_window: 8,
            std_ratio_mean: 0.5,
            std_ratio_sd: 0.1,
            std_ratio_tick_scale: 0.2,
            sigma_ratio_mean: 0.15,
            sigma_ratio_sd: 0.06,
        }
    }
}

/// One `#[must_use]` builder setter per listed field (`setters!(FooParams { lr: f64 })`); exported
/// for the parameter sets of `aigb`'s learned bidders, not part of the documented API.
#[doc(hidden)]
#[macro_export]
macro_rules! setters {
    ($ty:ty { $($field:ident : $t:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, v: $t) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }
    };
}
#[doc(hidden)]
pub use setters;

setters!(TrafficParams {
    pv_num: usize,
    tick_weights: Vec<f64>,
    traffic_scale: f64,
    traffic_window: usize,
    pvalue_mean_base: f64,
    category_scale: f64,
    category_window: usize,
    advertiser_scale: f64,
    advertiser_window: usize,
    std_ratio_mean: f64,
    std_ratio_sd: f64,
    std_ratio_tick_scale: f64,
    sigma_ratio_mean: f64,
    sigma_ratio_sd: f64,
});

impl TrafficParams {
    /// Ticks per period (`tick_weights.len()`).
    pub fn num_ticks(&self) -> usize {
        self.tick_weights.len()
    }

    /// An upper bound on the impressions of any one tick these parameters can generate:
    /// `pv_num · min(Σ w, max_t w_t · (1 + s) / (1 − s))` (`s = traffic_scale`), rounded up, plus
    /// one for rounding. It sizes the per-tick buffers of the simulator; `check` requires it to
    /// be below 2⁵³ (so the per-tick counts are exact integers) and `NaN`-free.
    pub fn max_tick_pv(&self) -> f64 {
        let total: f64 = self.tick_weights.iter().sum();
        let max_w = self.tick_weights.iter().copied().fold(0.0f64, f64::max);
        let s = self.traffic_scale;
        let share = total.min(max_w * (1.0 + s) / (1.0 - s));
        (self.pv_num as f64 * share * (1.0 + 1e-9)).ceil() + 1.0
    }
}

/// The largest per-tick impression bound [`TrafficParams::max_tick_pv`] may reach (2⁵³: every
/// count below it is exact in `f64`).
pub const MAX_TICK_PV: f64 = 9_007_199_254_740_992.0;

/// Bytes of the per-impression traffic buffers of one advertiser (`pValue` and `sigma`, `f32`).
pub(crate) const TRAFFIC_BYTES_PER_PV: u64 = 8;

impl rl_core::Params for TrafficParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        if self.pv_num == 0 {
            return Err(AigbError::invalid("pv_num", self.pv_num, "must be >= 1"));
        }
        if self.tick_weights.is_empty() {
            return Err(AigbError::invalid("tick_weights", "[]", "must have one weight per tick"));
        }
        for (i, w) in self.tick_weights.iter().enumerate() {
            if !(w.is_finite() && *w >= 0.0) {
                return Err(AigbError::invalid(format!("tick_weights[{i}]"), w, "must be finite and >= 0"));
            }
        }
        if self.tick_weights.iter().sum::<f64>() <= 0.0 {
            return Err(AigbError::invalid("tick_weights", "all zero", "must have a positive sum"));
        }
        for (name, v) in [
            ("traffic_scale", self.traffic_scale),
            ("category_scale", self.category_scale),
            ("advertiser_scale", self.advertiser_scale),
        ] {
            check_range(name, v, 0.0, 0.999_999)?;
        }
        for (name, v) in [
            ("traffic_window", self.traffic_window),
            ("category_window", self.category_window),
            ("advertiser_window", self.advertiser_window),
        ] {
            if v == 0 {
                return Err(AigbError::invalid(name, v, "must be >= 1"));
            }
        }
        check_positive("pvalue_mean_base", self.pvalue_mean_base)?;
        check_range("pvalue_mean_base", self.pvalue_mean_base, 0.0, 1.0)?;
        check_range("std_ratio_mean", self.std_ratio_mean, 0.0, 1.0)?;
        check_range("std_ratio_sd", self.std_ratio_sd, 0.0, f64::INFINITY)?;
        check_range("std_ratio_tick_scale", self.std_ratio_tick_scale, 0.0, f64::INFINITY)?;
        check_range("sigma_ratio_mean", self.sigma_ratio_mean, 0.0, 0.3)?;
        check_range("sigma_ratio_sd", self.sigma_ratio_sd, 0.0, f64::INFINITY)?;
        let bound = self.max_tick_pv();
        if bound.is_nan() || bound >= MAX_TICK_PV {
            return Err(AigbError::invalid(
                "pv_num",
                self.pv_num,
                format!("with these tick weights a tick could hold {bound:e} impressions; the limit is 2^53"),
            ));
        }
        Ok(())
    }
}

/// Stream ids of the traffic generator (mixed into [`rl_core::derive_seed`]).
mod stream {
    pub const COUNTS: u64 = 1;
    pub const CATEGORY: u64 = 2;
    pub const ADVERTISER: u64 = 3;
    pub const STD_RATIO: u64 = 4;
    pub const SIGMA_RATIO: u64 = 5;
    pub const TICK: u64 = 6;
}

fn normal(rng: &mut impl Rng) -> f64 {
    StandardNormal.sample(rng)
}

/// SplitMix64 as a sequential generator (Steele, Lea & Flood 2014): the per-impression
/// streams draw ~10⁸ numbers per period, where ChaCha8 would dominate the run time. Each stream
/// is seeded from a ChaCha-quality derived seed, so streams stay independent.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }
}

impl rand::RngCore for SplitMix64 {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Window factors `U(1-s, 1+s)` repeated over windows of `window` ticks.
fn window_factors(rng: &mut impl Rng, num_ticks: usize, scale: f64, window: usize) -> Vec<f64> {
    let n_windows = num_ticks.div_ceil(window);
    let f: Vec<f64> = (0..n_windows).map(|_| rng.random_range(1.0 - scale..=1.0 + scale)).collect();
    (0..num_ticks).map(|t| f[t / window]).collect()
}

/// The per-period curves of the traffic model: impressions per tick, each advertiser's pValue
/// mean and std per tick, each advertiser's sigma ratio. Per-impression values are drawn by
/// [`PeriodTraffic::fill_tick`].
#[derive(Debug, Clone, PartialEq)]
pub struct PeriodTraffic {
    period: u64,
    seed: u64,
    counts: Vec<usize>,
    /// `[advertiser][tick]`
    mean: Vec<Vec<f64>>,
    /// `[advertiser][tick]`
    std: Vec<Vec<f64>>,
    sigma_ratio: Vec<f64>,
    budget: MemoryBudget,
}

impl PeriodTraffic {
    /// The curves of period `period` for advertisers with the given categories (in slot order;
    /// the first advertiser of each category follows the category curve exactly).
    ///
    /// The buffers are checked against [`MemoryBudget::default`]; see
    /// [`PeriodTraffic::new_within`].
    ///
    /// # Errors
    /// As [`PeriodTraffic::new_within`].
    pub fn new(params: &TrafficParams, categories: &[usize], seed: u64, period: u64) -> Result<Self> {
        Self::new_within(params, categories, seed, period, MemoryBudget::default())
    }

    /// [`PeriodTraffic::new`] with the memory of the curves (`advertisers × ticks × 16` bytes,
    /// `categories × ticks × 8`) and of one tick's impressions (`largest tick × advertisers × 8`
    /// bytes, allocated by [`PeriodTraffic::fill_tick`]) checked against `budget` before anything
    /// of that size is allocated. Categories may be any `usize`: only those present get a curve.
    ///
    /// # Errors
    /// [`AigbError::Empty`] without advertisers; [`AigbError::InvalidParameter`] for invalid
    /// `params`; [`AigbError::Core`] ([`rl_core::RlCoreError::TooLarge`]) when the buffers exceed
    /// `budget`.
    pub fn new_within(
        params: &TrafficParams,
        categories: &[usize],
        seed: u64,
        period: u64,
        budget: MemoryBudget,
    ) -> Result<Self> {
        use rl_core::Params as _;
        if categories.is_empty() {
            return Err(AigbError::Empty { what: "advertisers".into() });
        }
        params.validate().map_err(|e| e.nested("traffic"))?;
        let mut distinct = categories.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let (n_a, t_u) = (categories.len() as u64, params.num_ticks() as u64);
        let curve_bytes = n_a
            .checked_mul(t_u)
            .and_then(|x| x.checked_mul(16))
            .and_then(|x| (distinct.len() as u64).checked_mul(t_u).and_then(|c| c.checked_mul(8)).map(|c| (x, c)))
            .and_then(|(x, c)| x.checked_add(c))
            .unwrap_or(u64::MAX);
        budget.check_bytes("traffic curves (advertisers × ticks)", curve_bytes)?;
        let pseed = rl_core::derive_seed(rl_core::derive_seed_named(seed, "traffic"), period);
        let t_n = params.num_ticks();
        // impressions per tick
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(pseed, stream::COUNTS));
        let f = window_factors(&mut rng, t_n, params.traffic_scale, params.traffic_window);
        let total: f64 = params.tick_weights.iter().sum();
        let scaled: f64 = params.tick_weights.iter().zip(&f).map(|(w, f)| w * f).sum();
        let counts: Vec<usize> = params
            .tick_weights
            .iter()
            .zip(&f)
            .map(|(w, f)| (w * f * total / scaled * params.pv_num as f64).floor() as usize)
            .collect();
        let largest = counts.iter().copied().max().unwrap_or(0) as u64;
        budget.check_elems(
            "one tick's impressions (impressions × advertisers)",
            &[largest, n_a],
            TRAFFIC_BYTES_PER_PV,
        )?;
        // category curves (only the categories present; each from its own stream), then
        // advertiser curves
        let cat_curves: Vec<Vec<f64>> = distinct
            .iter()
            .map(|&c| {
                let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(
                    rl_core::derive_seed(pseed, stream::CATEGORY),
                    c as u64,
                ));
                window_factors(&mut rng, t_n, params.category_scale, params.category_window)
            })
            .collect();
        let mut seen = vec![false; distinct.len()];
        let mut mean = Vec::with_capacity(categories.len());
        for (a, c) in categories.iter().enumerate() {
            let c = distinct
                .binary_search(c)
                .map_err(|_| AigbError::UnknownId { what: "category".into(), id: c.to_string() })?;
            let mut m: Vec<f64> = cat_curves[c].iter().map(|g| g * params.pvalue_mean_base).collect();
            if seen[c] {
                let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(
                    rl_core::derive_seed(pseed, stream::ADVERTISER),
                    a as u64,
                ));
                let h = window_factors(&mut rng, t_n, params.advertiser_scale, params.advertiser_window);
                for (x, h) in m.iter_mut().zip(h) {
                    *x *= h;
                }
            }
            seen[c] = true;
            for x in &mut m {
                if *x < 0.0 {
                    *x = params.pvalue_mean_base * 0.01;
                }
                *x = x.min(1.0);
            }
            mean.push(m);
        }
        // std ratios
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(pseed, stream::STD_RATIO));
        let clip = |x: f64| if x < 0.0 { 0.1 } else { x.min(1.0) };
        let std = mean
            .iter()
            .map(|m| {
                let am = clip(params.std_ratio_mean + params.std_ratio_sd * normal(&mut rng));
                m.iter().map(|mu| clip(am + params.std_ratio_tick_scale * am * normal(&mut rng)) * mu).collect()
            })
            .collect();
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(pseed, stream::SIGMA_RATIO));
        let sigma_ratio = (0..categories.len())
            .map(|_| {
                let r = (params.sigma_ratio_mean + params.sigma_ratio_sd * normal(&mut rng)).abs();
                if r > 0.3 {
                    0.2
                } else {
                    r
                }
            })
            .collect();
        Ok(Self { period, seed: pseed, counts, mean, std, sigma_ratio, budget })
    }

    /// The period index.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// Impressions in each tick.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Number of advertisers.
    pub fn num_advertisers(&self) -> usize {
        self.mean.len()
    }

    /// Mean pValue of advertiser `a` at tick `t` (before clipping to [0, 1] per impression).
    pub fn pvalue_mean(&self, a: usize, t: usize) -> Option<f64> {
        self.mean.get(a).and_then(|m| m.get(t)).copied()
    }

    /// The seed of the stream that draws tick `t`'s impressions for advertiser `a` (distinct for
    /// every `(seed, period, tick, advertiser)`; used by the held-out tests).
    pub fn tick_stream_seed(&self, t: usize, a: usize) -> u64 {
        rl_core::derive_seed(rl_core::derive_seed(rl_core::derive_seed(self.seed, stream::TICK), t as u64), a as u64)
    }

    /// Draws tick `t`'s impressions into `out` (advertiser-major: `pvalues[a·n + i]`).
    ///
    /// # Errors
    /// [`AigbError::UnknownId`] for a tick outside the period; [`AigbError::Core`] when the
    /// tick's buffers exceed the budget the curves were built with.
    pub fn fill_tick(&self, t: usize, out: &mut TickTraffic) -> Result<()> {
        let n = *self.counts.get(t).ok_or_else(|| AigbError::UnknownId { what: "tick".into(), id: t.to_string() })?;
        let n_a = self.mean.len();
        self.budget.check_elems(
            "one tick's impressions (impressions × advertisers)",
            &[n as u64, n_a as u64],
            TRAFFIC_BYTES_PER_PV,
        )?;
        out.tick = t;
        out.num_pv = n;
        out.num_advertisers = n_a;
        out.pvalues.clear();
        out.pvalues.resize(n * n_a, 0.0);
        out.sigmas.clear();
        out.sigmas.resize(n * n_a, 0.0);
        for a in 0..n_a {
            let mut rng = SplitMix64::new(self.tick_stream_seed(t, a));
            let (mu, sd) = (self.mean[a][t], self.std[a][t]);
            let pv = &mut out.pvalues[a * n..(a + 1) * n];
            for x in pv.iter_mut() {
                *x = (mu + sd * normal(&mut rng)).clamp(0.0, 1.0) as f32;
            }
            let r = self.sigma_ratio[a];
            let sg = &mut out.sigmas[a * n..(a + 1) * n];
            for (s, p) in sg.iter_mut().zip(pv.iter()) {
                let k = (r + 0.5 * r * normal(&mut rng)).abs().min(0.3);
                *s = (k * f64::from(*p)) as f32;
            }
        }
        Ok(())
    }
}

/// One tick's impressions: `pValue` and `sigma` of every advertiser for every impression,
/// advertiser-major (`pvalues[a·num_pv + i]`), so each advertiser reads one contiguous slice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickTraffic {
    /// Tick index.
    pub tick: usize,
    /// Impressions in this tick.
    pub num_pv: usize,
    /// Advertisers.
    pub num_advertisers: usize,
    /// `pValue` (conversion probability if exposed), advertiser-major.
    pub pvalues: Vec<f32>,
    /// `sigma` (uncertainty of the pValue), advertiser-major.
    pub sigmas: Vec<f32>,
}

impl TickTraffic {
    /// Advertiser `a`'s pValues (empty for an unknown advertiser).
    pub fn pvalues_of(&self, a: usize) -> &[f32] {
        self.range_of(a).and_then(|r| self.pvalues.get(r)).unwrap_or(&[])
    }

    /// Advertiser `a`'s sigmas (empty for an unknown advertiser).
    pub fn sigmas_of(&self, a: usize) -> &[f32] {
        self.range_of(a).and_then(|r| self.sigmas.get(r)).unwrap_or(&[])
    }

    /// Advertiser `a`'s range in the advertiser-major buffers (`None` on overflow).
    fn range_of(&self, a: usize) -> Option<std::ops::Range<usize>> {
        let start = a.checked_mul(self.num_pv)?;
        Some(start..start.checked_add(self.num_pv)?)
    }

    /// Builds a tick from explicit values (tests, replays of logged traffic).
    ///
    /// # Errors
    /// [`AigbError::Shape`] when the lengths differ from `num_pv · num_advertisers`,
    /// [`AigbError::NonFinite`] / [`AigbError::InvalidParameter`] for values outside [0, 1] or
    /// negative sigmas.
    pub fn from_values(tick: usize, num_pv: usize, pvalues: Vec<f32>, sigmas: Vec<f32>) -> Result<Self> {
        if num_pv == 0 || pvalues.is_empty() {
            return Err(AigbError::Empty { what: "impressions".into() });
        }
        if pvalues.len() % num_pv != 0 || sigmas.len() != pvalues.len() {
            return Err(AigbError::Shape {
                what: "pvalues/sigmas".into(),
                expected: format!("num_pv ({num_pv}) × advertisers, equal lengths"),
                got: format!("{} / {}", pvalues.len(), sigmas.len()),
            });
        }
        for (i, v) in pvalues.iter().enumerate() {
            if !v.is_finite() {
                return Err(AigbError::NonFinite { what: "pvalues".into(), index: i, value: f64::from(*v) });
            }
            if !(0.0..=1.0).contains(v) {
                return Err(AigbError::invalid(format!("pvalues[{i}]"), v, "must be in [0, 1]"));
            }
        }
        for (i, v) in sigmas.iter().enumerate() {
            if !v.is_finite() {
                return Err(AigbError::NonFinite { what: "sigmas".into(), index: i, value: f64::from(*v) });
            }
            if *v < 0.0 {
                return Err(AigbError::invalid(format!("sigmas[{i}]"), v, "must be >= 0"));
            }
        }
        let num_advertisers = pvalues.len() / num_pv;
        Ok(Self { tick, num_pv, num_advertisers, pvalues, sigmas })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    fn cats() -> Vec<usize> {
        (0..48).map(|i| i / 8).collect()
    }

    #[test]
    fn counts_follow_the_window_shape_and_total() {
        let p = TrafficParams::default().pv_num(100_000);
        let tr = PeriodTraffic::new(&p, &cats(), 3, 0).unwrap();
        let c = tr.counts();
        assert_eq!(c.len(), 48);
        let total: usize = c.iter().sum();
        assert!(total <= 100_000 && total > 100_000 - 48, "{total}");
        // inside a 4-tick window the factor is shared, so ratios follow the base weights
        for w in 0..12 {
            let (a, b) = (4 * w, 4 * w + 3);
            let r = c[a] as f64 / c[b] as f64;
            let r0 = AUCTIONNET_TICK_WEIGHTS[a] / AUCTIONNET_TICK_WEIGHTS[b];
            assert!((r / r0 - 1.0).abs() < 0.02, "window {w}: {r} vs {r0}");
        }
    }

    #[test]
    fn periods_and_ticks_are_reproducible_and_distinct() {
        let p = TrafficParams::default().pv_num(5_000);
        let a = PeriodTraffic::new(&p, &cats(), 1, 7).unwrap();
        let b = PeriodTraffic::new(&p, &cats(), 1, 7).unwrap();
        let c = PeriodTraffic::new(&p, &cats(), 1, 8).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.counts(), c.counts());
        let (mut x, mut y) = (TickTraffic::default(), TickTraffic::default());
        a.fill_tick(20, &mut x).unwrap();
        b.fill_tick(20, &mut y).unwrap();
        assert_eq!(x, y);
        assert!(x.pvalues.iter().all(|v| (0.0..=1.0).contains(v)));
        assert!(x.sigmas.iter().zip(&x.pvalues).all(|(s, p)| *s >= 0.0 && *s <= 0.3 * p + 1e-9));
        assert!(a.fill_tick(48, &mut x).is_err());
    }

    #[test]
    fn first_advertiser_of_a_category_follows_the_category_curve() {
        let p = TrafficParams::default();
        let tr = PeriodTraffic::new(&p, &cats(), 5, 2).unwrap();
        for t in 0..48 {
            let m = tr.pvalue_mean(0, t).unwrap();
            assert!((0.0005 * 0.3..=0.0005 * 1.7).contains(&m));
            let m1 = tr.pvalue_mean(1, t).unwrap();
            assert!((0.0005 * 0.3 * 0.5..=0.0005 * 1.7 * 1.5).contains(&m1));
        }
        // factors are constant inside 8-tick windows
        assert_eq!(tr.pvalue_mean(3, 8), tr.pvalue_mean(3, 15));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// `max_tick_pv` (which sizes the simulator's memory check) bounds every tick's count.
        #[test]
        fn max_tick_pv_bounds_every_tick(
            pv_num in 1usize..5_000_000,
            weights in proptest::collection::vec(0.0f64..10.0, 1..60),
            scale in 0.0f64..0.999,
            window in 1usize..9,
            period in 0u64..1000,
        ) {
            let mut weights = weights;
            weights[0] += 1e-3;
            let p = TrafficParams::default().pv_num(pv_num).tick_weights(weights).traffic_scale(scale).traffic_window(window);
            p.clone().check().unwrap();
            let tr = PeriodTraffic::new(&p, &[0], 7, period).unwrap();
            let bound = p.max_tick_pv();
            for &c in tr.counts() {
                proptest::prop_assert!((c as f64) <= bound, "{c} > {bound}");
            }
        }
    }

    #[test]
    fn params_are_validated() {
        assert!(TrafficParams::default().pv_num(0).check().is_err());
        assert!(TrafficParams::default().traffic_scale(1.5).check().is_err());
        assert!(TrafficParams::default().tick_weights(vec![]).check().is_err());
        assert!(TrafficParams::default().tick_weights(vec![1.0, f64::NAN]).check().is_err());
        let e = TrafficParams::default().category_window(0).check().unwrap_err();
        assert!(e.to_string().contains("category_window"), "{e}");
        assert!(serde_json::from_str::<TrafficParams>(r#"{"pv_numm": 3}"#).is_err());
        assert!(TickTraffic::from_values(0, 2, vec![0.1, 2.0], vec![0.0, 0.0]).is_err());
        assert!(TickTraffic::from_values(0, 2, vec![0.1, f32::NAN], vec![0.0, 0.0]).is_err());
        assert!(TickTraffic::from_values(0, 0, vec![], vec![]).is_err());
        // public fields: an absurd impression count reads as empty, not an overflow
        let t = TickTraffic { num_pv: usize::MAX / 2, ..TickTraffic::default() };
        assert!(t.pvalues_of(3).is_empty() && t.sigmas_of(3).is_empty());
    }
}
