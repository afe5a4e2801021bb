//! Market line-ups: which rule-based bidder runs in which advertiser slot ([`BidderSpec`]),
//! the OnlineLP table built from history periods, logged-data generation from a heterogeneous
//! bidder mix with exploration noise ([`generate_dataset`]).

use std::sync::Arc;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::bidder::Bidder;
use crate::bidders::{
    FixedCpaBidder, FixedCpaParams, LpHistory, NoiseParams, NoisyBidder, OnlineLpBidder, OnlineLpParams, OnlineLpTable,
    PacingRule, PidBidder, PidParams,
};
use crate::dataset::{DatasetMeta, TrajectoryDataset};
use crate::error::{check_positive, check_range, AigbError, Result};
use crate::sim::Simulator;

/// Most threads [`crate::EvalParams::threads`] and [`DataGenParams::threads`] may ask for.
pub const MAX_THREADS: usize = 1024;
use rl_core::Params;

/// The cap of [`BidderSpec::PidCpa`]: α ≤ 1.5 · CPA (OnlineLP's bound, `onlinelp_bidding_strategy.py`).
///
/// Part 1 documented this cap but [`BidderSpec::build`] never passed it to [`PidParams`], so it
/// never applied (the evaluation numbers did not move when it was "added");
/// `log_pid_cap_binds` in `tests/market.rs` now checks that it binds in a real period.
pub const PID_CPA_CAP: f64 = 1.5;

/// A rule-based bidder, by kind and hyper-parameter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BidderSpec {
    /// [`FixedCpaBidder`] bidding `m · CPA · pValue`.
    FixedCpa {
        /// CPA multiplier.
        cpa_multiplier: f64,
    },
    /// [`PidBidder`] with AuctionNet's rule and initial coefficient α₀.
    Pid {
        /// α₀ (AuctionNet: 15).
        initial_alpha: f64,
    },
    /// [`PidBidder`] with the log-PID rule starting at `m · CPA`, α capped at
    /// [`PID_CPA_CAP`] · CPA.
    PidCpa {
        /// α₀ as a CPA multiple.
        cpa_multiplier: f64,
    },
    /// [`OnlineLpBidder`] on the market's table.
    OnlineLp,
}

impl BidderSpec {
    /// Builds the bidder (`table` is needed for [`BidderSpec::OnlineLp`]).
    ///
    /// # Errors
    /// Invalid hyper-parameters; [`AigbError::NotReady`] for OnlineLP without a table.
    pub fn build(
        &self,
        table: Option<&Arc<OnlineLpTable>>,
        lp: &rl_core::Valid<OnlineLpParams>,
    ) -> Result<Box<dyn Bidder>> {
        Ok(match *self {
            BidderSpec::FixedCpa { cpa_multiplier } => {
                Box::new(FixedCpaBidder::new(FixedCpaParams::default().cpa_multiplier(cpa_multiplier).check()?))
            }
            BidderSpec::Pid { initial_alpha } => {
                Box::new(PidBidder::new(PidParams::default().initial_alpha(initial_alpha).check()?))
            }
            BidderSpec::PidCpa { cpa_multiplier } => Box::new(PidBidder::new(
                PidParams::default()
                    .initial_alpha_cpa_multiplier(Some(cpa_multiplier))
                    .rule(PacingRule::pid())
                    .max_alpha_cpa_multiplier(Some(PID_CPA_CAP))
                    .check()?,
            )),
            BidderSpec::OnlineLp => {
                let t = table.ok_or_else(|| {
                    AigbError::NotReady("OnlineLP bidder needs a table (build_online_lp_table)".into())
                })?;
                Box::new(OnlineLpBidder::new(Arc::clone(t), lp))
            }
        })
    }
}

/// The default competitor pattern, repeated over each category of 8 (our rule-based stand-in
/// for AuctionNet's lineup of PID, OnlineLP and learned bidders).
pub fn default_lineup() -> Vec<BidderSpec> {
    vec![
        BidderSpec::Pid { initial_alpha: 15.0 },
        BidderSpec::FixedCpa { cpa_multiplier: 0.8 },
        BidderSpec::PidCpa { cpa_multiplier: 1.0 },
        BidderSpec::OnlineLp,
        BidderSpec::OnlineLp,
        BidderSpec::FixedCpa { cpa_multiplier: 1.2 },
        BidderSpec::Pid { initial_alpha: 30.0 },
        BidderSpec::PidCpa { cpa_multiplier: 0.7 },
    ]
}

/// The OnlineLP table of a market, from a PID-only market run on `history_periods` (AuctionNet
/// builds it from earlier logged periods).
///
/// The samples are bounded before the history runs: `periods × sample_fraction × pv_num · Σ w ×
/// advertisers` samples (with 1 % margin) of `size_of::<LpSample>()` bytes must fit the
/// simulator's `memory_budget`.
///
/// # Errors
/// [`AigbError::Empty`] without history periods or samples; [`AigbError::Core`]
/// ([`rl_core::RlCoreError::TooLarge`]) when the samples could exceed the budget; simulation
/// errors.
pub fn build_online_lp_table(
    sim: &Simulator,
    history_periods: &[u64],
    params: &rl_core::Valid<OnlineLpParams>,
) -> Result<Arc<OnlineLpTable>> {
    if history_periods.is_empty() {
        return Err(AigbError::Empty { what: "OnlineLP history periods".into() });
    }
    let tr = &sim.params().traffic;
    let per_period = params.sample_fraction
        * tr.pv_num as f64
        * tr.tick_weights.iter().sum::<f64>()
        * sim.advertisers().len() as f64;
    let samples = (per_period * 1.01 + 1000.0) * history_periods.len() as f64;
    let bytes = samples * std::mem::size_of::<crate::bidders::LpSample>() as f64;
    let bytes = if bytes < u64::MAX as f64 { bytes as u64 } else { u64::MAX };
    sim.params().memory_budget.check_bytes("OnlineLP history samples", bytes)?;
    let mut hist = LpHistory::new(sim.categories(), params);
    let pid = PidParams::default().check()?;
    for &p in history_periods {
        let mut bidders: Vec<Box<dyn Bidder>> =
            (0..sim.advertisers().len()).map(|_| Box::new(PidBidder::new(pid.clone())) as Box<dyn Bidder>).collect();
        sim.run_period(p, &mut bidders, Some(&mut hist))?;
    }
    Ok(Arc::new(OnlineLpTable::build(&hist.samples, sim.params().num_ticks(), params)?))
}

/// Builds the bidders of a market from a pattern repeated over the slots.
///
/// # Errors
/// As [`BidderSpec::build`]; [`AigbError::Empty`] for an empty pattern.
pub fn build_lineup(
    pattern: &[BidderSpec],
    num_advertisers: usize,
    table: Option<&Arc<OnlineLpTable>>,
    lp: &rl_core::Valid<OnlineLpParams>,
) -> Result<Vec<Box<dyn Bidder>>> {
    if pattern.is_empty() {
        return Err(AigbError::Empty { what: "lineup".into() });
    }
    (0..num_advertisers).map(|a| pattern[a % pattern.len()].build(table, lp)).collect()
}

/// Parameters of [`generate_dataset`] (our choices; AuctionNet's logs come from its fixed
/// lineup, whose learned members we do not have).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `weights` | [0.3, 0.3, 0.2, 0.2] | chance of PID (α₀ log-uniform), log-PID (α₀ = m·CPA), fixed-CPA (m), OnlineLP per slot and period | ≥ 0, sum > 0 |
/// | `multiplier_range` | [0.6, 1.4] | range of the CPA multiplier m | 0 < lo ≤ hi |
/// | `pid_alpha_range` | [5, 60] | range of AuctionNet-PID α₀ (log-uniform) | 0 < lo ≤ hi |
/// | `noise_sigma_max` | 0.3 | exploration noise σ ~ U(0, max) per slot and period ([`NoisyBidder`]) | ≥ 0 |
/// | `lp_history_periods` | [1 000 000] | periods of the PID market that builds the OnlineLP table | non-empty, disjoint from the data periods |
/// | `online_lp` | default, costs × budget scale | OnlineLP parameters | |
/// | `seed` | 0 | mix and noise seed | any |
/// | `threads` | 2 | periods simulated in parallel | 1 ..= [`MAX_THREADS`] |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataGenParams {
    /// Mix weights: PID, log-PID, fixed-CPA, OnlineLP.
    pub weights: [f64; 4],
    /// CPA multiplier range.
    pub multiplier_range: [f64; 2],
    /// PID α₀ range.
    pub pid_alpha_range: [f64; 2],
    /// Largest exploration noise.
    pub noise_sigma_max: f64,
    /// History periods of the OnlineLP table.
    pub lp_history_periods: Vec<u64>,
    /// OnlineLP parameters.
    pub online_lp: OnlineLpParams,
    /// Seed.
    pub seed: u64,
    /// Threads.
    pub threads: usize,
}

impl Default for DataGenParams {
    fn default() -> Self {
        Self {
            weights: [0.3, 0.3, 0.2, 0.2],
            multiplier_range: [0.6, 1.4],
            pid_alpha_range: [5.0, 60.0],
            noise_sigma_max: 0.3,
            lp_history_periods: vec![1_000_000],
            online_lp: OnlineLpParams::default(),
            seed: 0,
            threads: 2,
        }
    }
}

crate::traffic::setters!(DataGenParams {
    weights: [f64; 4],
    multiplier_range: [f64; 2],
    pid_alpha_range: [f64; 2],
    noise_sigma_max: f64,
    lp_history_periods: Vec<u64>,
    online_lp: OnlineLpParams,
    seed: u64,
    threads: usize,
});

impl rl_core::Params for DataGenParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        for (i, w) in self.weights.iter().enumerate() {
            check_range(&format!("weights[{i}]"), *w, 0.0, f64::INFINITY)?;
        }
        if self.weights.iter().sum::<f64>() <= 0.0 {
            return Err(AigbError::invalid("weights", "all zero", "need a positive sum"));
        }
        for (name, r) in [("multiplier_range", self.multiplier_range), ("pid_alpha_range", self.pid_alpha_range)] {
            check_positive(&format!("{name}[0]"), r[0])?;
            check_positive(&format!("{name}[1]"), r[1])?;
            if r[0] > r[1] {
                return Err(AigbError::invalid(name, format!("{r:?}"), "lo must be <= hi"));
            }
        }
        check_range("noise_sigma_max", self.noise_sigma_max, 0.0, f64::INFINITY)?;
        if self.lp_history_periods.is_empty() {
            return Err(AigbError::invalid("lp_history_periods", "[]", "need at least one period"));
        }
        self.online_lp.validate().map_err(|e| e.nested("online_lp"))?;
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(AigbError::invalid("threads", self.threads, format!("must be in 1..={}", MAX_THREADS)));
        }
        Ok(())
    }
}

/// Draws the behaviour bidder of one slot and period.
fn draw_bidder(
    params: &DataGenParams,
    rng: &mut rl_core::SeededRng,
    table: &Arc<OnlineLpTable>,
    lp: &rl_core::Valid<OnlineLpParams>,
    noise_seed: u64,
) -> Result<Box<dyn Bidder>> {
    let total: f64 = params.weights.iter().sum();
    let mut u = rng.random::<f64>() * total;
    let mut kind = 3;
    for (i, w) in params.weights.iter().enumerate() {
        if u < *w {
            kind = i;
            break;
        }
        u -= w;
    }
    let [lo, hi] = params.multiplier_range;
    let m = rng.random_range(lo..=hi);
    let [alo, ahi] = params.pid_alpha_range;
    let a0 = (alo.ln() + rng.random::<f64>() * (ahi.ln() - alo.ln())).exp();
    let spec = match kind {
        0 => BidderSpec::Pid { initial_alpha: a0 },
        1 => BidderSpec::PidCpa { cpa_multiplier: m },
        2 => BidderSpec::FixedCpa { cpa_multiplier: m },
        _ => BidderSpec::OnlineLp,
    };
    let inner = spec.build(Some(table), lp)?;
    let sigma = rng.random::<f64>() * params.noise_sigma_max;
    Ok(Box::new(NoisyBidder::new(inner, NoiseParams::default().sigma(sigma).seed(noise_seed).check()?)))
}

/// Simulates `periods` with a heterogeneous, noisy bidder mix in every slot and returns every
/// advertiser's trajectory. `progress` is called with the number of finished periods.
///
/// # Errors
/// [`AigbError::Leak`] if a data period is also an OnlineLP history period; simulation errors.
pub fn generate_dataset(
    sim: &Simulator,
    periods: &[u64],
    params: &rl_core::Valid<DataGenParams>,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<TrajectoryDataset> {
    if periods.is_empty() {
        return Err(AigbError::Empty { what: "periods".into() });
    }
    if let Some(&p) = periods.iter().find(|p| params.lp_history_periods.contains(p)) {
        return Err(AigbError::Leak { period: p });
    }
    let lp = params.online_lp.clone().check()?;
    let table = build_online_lp_table(sim, &params.lp_history_periods, &lp)?;
    let n_a = sim.advertisers().len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results = sim.run_periods(periods, params.threads, |period| {
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(
            rl_core::derive_seed_named(params.seed, "datagen-mix"),
            period,
        ));
        let bidders = (0..n_a)
            .map(|_| {
                draw_bidder(params, &mut rng, &table, &lp, rl_core::derive_seed_named(params.seed, "datagen-noise"))
            })
            .collect::<Result<Vec<_>>>();
        let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        progress(k);
        bidders
    })?;
    let mut ds = TrajectoryDataset::new(DatasetMeta {
        format_version: crate::dataset::FORMAT_VERSION,
        generator: serde_json::json!({ "datagen": &**params, "sim": sim.params(), "advertisers": sim.advertisers() }),
        periods: Vec::new(),
        num_ticks: sim.params().num_ticks(),
        advertisers: sim.advertisers().to_vec(),
    });
    for r in &results {
        ds.push_period(r, sim.params().min_remaining_budget);
    }
    progress(periods.len());
    Ok(ds)
}
