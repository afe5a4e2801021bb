//! Summary statistics of a simulated market, with the same names as the reference statistics
//! that `scripts/aigb_auctionnet_stats.py` records from the AuctionNet simulator, so the two can
//! be compared ([`compare`]; the fidelity tests and `docs/aigb.md`).
//!
//! Traffic (per period): `traffic_share` (48, impressions per tick / total), `traffic_total`,
//! `cat{c}/pvalue_mean`, `cat{c}/pvalue_q` (5%, 25%, 50%, 75%, 95% quantiles over the category's
//! advertisers, ticks and impressions), `cat{c}/pvalue_zero_frac`, `cat{c}/sigma_ratio_q`
//! (quantiles of sigma/pValue), `tick_pvalue_mean` (48).
//!
//! Market (per period): per advertiser `win_rate` (slots won / impressions), `exposure_rate`,
//! `cost_share` (its cost / all cost), `budget_spent`, `conversions_per_1k_pv`,
//! `score_per_1k_pv`, `last_win_tick`; `tick_cost_share` (48), `total_cost_per_pv`; per slot
//! `slot_sold_frac`, `slot_mean_price`, `slot_exposure_rate`, `slot_conversion_calibration`
//! (conversions / Σ pValue of exposed slots); `mean_least_winning_cost`,
//! `lwc_above_reserve_frac`, `drop_rounds`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::auction::{TickAuction, NO_WINNER};
use crate::error::{AigbError, Result};
use crate::sim::{Observer, PeriodResult, Simulator};
use crate::traffic::TickTraffic;

/// The quantile levels of the `_q` statistics.
pub const QUANTILES: [f64; 5] = [0.05, 0.25, 0.5, 0.75, 0.95];

/// Named statistics of one period; scalars are vectors of length 1.
pub type Stats = BTreeMap<String, Vec<f64>>;

/// Traffic statistics of `period` (draws every tick; advertiser categories from the simulator).
///
/// # Errors
/// As [`Simulator::traffic`].
pub fn traffic_stats(sim: &Simulator, period: u64) -> Result<Stats> {
    let tr = sim.traffic(period)?;
    let cats = sim.categories();
    // the categories present, in increasing order; `slot[a]` indexes advertiser a's category
    let mut present = cats.clone();
    present.sort_unstable();
    present.dedup();
    let n_cat = present.len();
    let slot: Vec<usize> = cats.iter().map(|c| present.partition_point(|p| p < c)).collect();
    let counts = tr.counts();
    let total: usize = counts.iter().sum();
    let mut st = Stats::new();
    st.insert("traffic_share".into(), counts.iter().map(|&c| c as f64 / total.max(1) as f64).collect());
    st.insert("traffic_total".into(), vec![total as f64]);
    let mut pv_by_cat: Vec<Vec<f64>> = vec![Vec::new(); n_cat];
    let mut ratio_by_cat: Vec<Vec<f64>> = vec![Vec::new(); n_cat];
    let mut tick_mean = Vec::with_capacity(counts.len());
    let mut tt = TickTraffic::default();
    for t in 0..counts.len() {
        tr.fill_tick(t, &mut tt)?;
        let mut s = 0.0;
        for (a, &c) in slot.iter().enumerate() {
            for (p, sg) in tt.pvalues_of(a).iter().zip(tt.sigmas_of(a)) {
                let p = f64::from(*p);
                s += p;
                pv_by_cat[c].push(p);
                if p > 0.0 {
                    ratio_by_cat[c].push(f64::from(*sg) / p);
                }
            }
        }
        tick_mean.push(if tt.pvalues.is_empty() { 0.0 } else { s / tt.pvalues.len() as f64 });
    }
    st.insert("tick_pvalue_mean".into(), tick_mean);
    for (j, &c) in present.iter().enumerate() {
        let pv = &mut pv_by_cat[j];
        let mean = rl_core::stats::mean(pv);
        let zero = pv.iter().filter(|&&x| x == 0.0).count() as f64 / pv.len().max(1) as f64;
        st.insert(format!("cat{c}/pvalue_mean"), vec![mean]);
        st.insert(format!("cat{c}/pvalue_zero_frac"), vec![zero]);
        st.insert(format!("cat{c}/pvalue_q"), sorted_quantiles(pv)?);
        st.insert(format!("cat{c}/sigma_ratio_q"), sorted_quantiles(&mut ratio_by_cat[j])?);
    }
    Ok(st)
}

/// Type-7 quantiles (NumPy's default) at [`QUANTILES`], sorting `x` in place.
fn sorted_quantiles(x: &mut [f64]) -> Result<Vec<f64>> {
    if x.is_empty() {
        return Err(AigbError::Empty { what: "values for quantiles".into() });
    }
    x.sort_by(f64::total_cmp);
    let n = x.len();
    Ok(QUANTILES
        .iter()
        .map(|q| {
            let h = (n - 1) as f64 * q;
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            x[lo] + (h - lo as f64) * (x[hi] - x[lo])
        })
        .collect())
}

/// An [`Observer`] accumulating the per-slot statistics of a period.
#[derive(Debug, Clone, Default)]
pub struct SlotStats {
    reserve: f64,
    num_pv: f64,
    sold: Vec<f64>,
    price: Vec<f64>,
    exposed: Vec<f64>,
    conversions: Vec<f64>,
    exposed_pvalue: Vec<f64>,
    lwc_sum: f64,
    lwc_above: f64,
}

impl SlotStats {
    /// A collector for a market with `slots` slots and reserve price `reserve`.
    pub fn new(slots: usize, reserve: f64) -> Self {
        Self {
            reserve,
            sold: vec![0.0; slots],
            price: vec![0.0; slots],
            exposed: vec![0.0; slots],
            conversions: vec![0.0; slots],
            exposed_pvalue: vec![0.0; slots],
            ..Self::default()
        }
    }
}

impl Observer for SlotStats {
    fn on_tick(&mut self, _period: u64, traffic: &TickTraffic, _bids: &[f32], auction: &TickAuction) {
        let (n, k) = (traffic.num_pv, auction.slots().min(self.sold.len()));
        self.num_pv += n as f64;
        for i in 0..n {
            let lwc = f64::from(auction.least_winning_cost[i]);
            self.lwc_sum += lwc;
            if lwc > self.reserve {
                self.lwc_above += 1.0;
            }
            for s in 0..k {
                let idx = i * auction.slots() + s;
                let a = auction.winner[idx];
                if a == NO_WINNER {
                    continue;
                }
                self.sold[s] += 1.0;
                self.price[s] += f64::from(auction.price[idx]);
                if auction.exposed[idx] {
                    self.exposed[s] += 1.0;
                    self.exposed_pvalue[s] += f64::from(traffic.pvalues[a as usize * n + i]);
                    if auction.conversion[idx] {
                        self.conversions[s] += 1.0;
                    }
                }
            }
        }
    }
}

/// Market statistics of a simulated period (with the slot statistics observed during it).
pub fn market_stats(result: &PeriodResult, slots: &SlotStats) -> Stats {
    let mut st = Stats::new();
    let ads = &result.advertisers;
    let total_cost: f64 = ads.iter().map(|a| a.cost()).sum();
    let total_pv = ads.first().map_or(0.0, |a| a.num_pv() as f64);
    let per = |f: &dyn Fn(&crate::sim::AdvertiserResult) -> f64| -> Vec<f64> { ads.iter().map(f).collect() };
    let safe = |x: f64, d: f64| if d > 0.0 { x / d } else { 0.0 };
    st.insert("win_rate".into(), per(&|a| safe(a.wins() as f64, a.num_pv() as f64)));
    st.insert(
        "exposure_rate".into(),
        per(&|a| safe(a.ticks.iter().map(|t| t.exposures as f64).sum(), a.num_pv() as f64)),
    );
    st.insert("cost_share".into(), per(&|a| safe(a.cost(), total_cost)));
    st.insert("budget_spent".into(), per(&|a| a.cost() / a.info.budget));
    st.insert("conversions_per_1k_pv".into(), per(&|a| safe(a.conversions() as f64 * 1000.0, total_pv)));
    st.insert("score_per_1k_pv".into(), per(&|a| safe(a.score() * 1000.0, total_pv)));
    st.insert("last_win_tick".into(), per(&|a| a.last_win_tick().map_or(-1.0, |t| t as f64)));
    let num_ticks = ads.first().map_or(0, |a| a.ticks.len());
    st.insert(
        "tick_cost_share".into(),
        (0..num_ticks).map(|t| safe(ads.iter().map(|a| a.ticks[t].cost).sum(), total_cost)).collect(),
    );
    st.insert("total_cost_per_pv".into(), vec![safe(total_cost, total_pv)]);
    let k = slots.sold.len();
    st.insert("slot_sold_frac".into(), (0..k).map(|s| safe(slots.sold[s], slots.num_pv)).collect());
    st.insert("slot_mean_price".into(), (0..k).map(|s| safe(slots.price[s], slots.sold[s])).collect());
    st.insert("slot_exposure_rate".into(), (0..k).map(|s| safe(slots.exposed[s], slots.sold[s])).collect());
    st.insert(
        "slot_conversion_calibration".into(),
        (0..k).map(|s| safe(slots.conversions[s], slots.exposed_pvalue[s])).collect(),
    );
    st.insert("mean_least_winning_cost".into(), vec![safe(slots.lwc_sum, slots.num_pv)]);
    st.insert("lwc_above_reserve_frac".into(), vec![safe(slots.lwc_above, slots.num_pv)]);
    st.insert("drop_rounds".into(), vec![result.drop_rounds as f64]);
    st
}

/// Mean, standard deviation (ddof 1) and count of a statistic across periods (the shape of the
/// reference JSON's entries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Mean per component.
    pub mean: Vec<f64>,
    /// Standard deviation per component (0 with one period).
    pub sd: Vec<f64>,
    /// Periods.
    pub n: usize,
}

/// Summarises per-period statistics across periods.
///
/// # Errors
/// [`AigbError::Empty`] without periods; [`AigbError::Shape`] if a statistic changes length.
pub fn summarize(per_period: &[Stats]) -> Result<BTreeMap<String, Summary>> {
    let first = per_period.first().ok_or_else(|| AigbError::Empty { what: "periods".into() })?;
    let n = per_period.len();
    let mut out = BTreeMap::new();
    for (name, v0) in first {
        let d = v0.len();
        let mut cols = vec![Vec::with_capacity(n); d];
        for st in per_period {
            let v = st.get(name).map_or(&[][..], |v| v.as_slice());
            if v.len() != d {
                return Err(AigbError::Shape { what: name.clone(), expected: d.to_string(), got: v.len().to_string() });
            }
            for (c, x) in cols.iter_mut().zip(v) {
                c.push(*x);
            }
        }
        let mean = cols.iter().map(|c| rl_core::stats::mean(c)).collect();
        let sd = cols.iter().map(|c| rl_core::stats::std_dev(c, 1)).collect();
        out.insert(name.clone(), Summary { mean, sd, n });
    }
    Ok(out)
}

/// One compared component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Statistic name and component (`win_rate[3]`).
    pub name: String,
    /// Ours (mean across periods).
    pub ours: f64,
    /// Reference (mean across episodes).
    pub reference: f64,
    /// Allowed absolute difference.
    pub tolerance: f64,
    /// `|ours − reference| ≤ tolerance`.
    pub ok: bool,
}

/// Compares two summaries component by component: the tolerance is
/// `z · sqrt(sd_ours²/n_ours + sd_ref²/n_ref) + floor` (a z-test of two means; `floor` covers
/// the sampling noise a statistic has even when both sides' spreads are tiny, e.g. binomial
/// noise under AuctionNet's re-seeded exposure draws).
///
/// # Errors
/// [`AigbError::UnknownId`] for a name missing from one side; [`AigbError::Shape`] for a length
/// mismatch.
pub fn compare(
    ours: &BTreeMap<String, Summary>,
    reference: &BTreeMap<String, Summary>,
    name: &str,
    z: f64,
    floor: f64,
) -> Result<Vec<Comparison>> {
    let missing = |side: &str| AigbError::UnknownId { what: format!("statistic ({side})"), id: name.into() };
    let a = ours.get(name).ok_or_else(|| missing("ours"))?;
    let b = reference.get(name).ok_or_else(|| missing("reference"))?;
    if a.mean.len() != b.mean.len() {
        return Err(AigbError::Shape {
            what: name.into(),
            expected: b.mean.len().to_string(),
            got: a.mean.len().to_string(),
        });
    }
    Ok((0..a.mean.len())
        .map(|i| {
            let sa = a.sd.get(i).copied().unwrap_or(0.0);
            let sb = b.sd.get(i).copied().unwrap_or(0.0);
            let se = (sa * sa / a.n.max(1) as f64 + sb * sb / b.n.max(1) as f64).sqrt();
            let tolerance = z * se + floor;
            let name = if a.mean.len() == 1 { name.to_owned() } else { format!("{name}[{i}]") };
            let (x, y) = (a.mean[i], b.mean[i]);
            Comparison { name, ours: x, reference: y, tolerance, ok: (x - y).abs() <= tolerance }
        })
        .collect())
}

/// Reads the reference JSON written by `scripts/aigb_auctionnet_stats.py`: its `traffic` and
/// `market` sections merged into one map (entries whose `sd` is a scalar become vectors).
///
/// # Errors
/// [`AigbError::Corrupt`] naming the file and what is wrong.
pub fn load_reference(path: &std::path::Path) -> Result<(serde_json::Value, BTreeMap<String, Summary>)> {
    let corrupt = |reason: String| AigbError::Corrupt { path: path.to_owned(), reason };
    let text = std::fs::read_to_string(path)?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    let mut out = BTreeMap::new();
    for section in ["traffic", "market"] {
        let obj =
            v.get(section).and_then(|s| s.as_object()).ok_or_else(|| corrupt(format!("no `{section}` object")))?;
        for (name, entry) in obj {
            let vec_of = |x: Option<&serde_json::Value>| -> Result<Vec<f64>> {
                match x {
                    Some(serde_json::Value::Array(a)) => a
                        .iter()
                        .map(|e| e.as_f64().ok_or_else(|| corrupt(format!("`{name}`: non-numeric entry"))))
                        .collect(),
                    Some(serde_json::Value::Number(n)) => Ok(vec![n.as_f64().unwrap_or(f64::NAN)]),
                    _ => Err(corrupt(format!("`{name}`: missing mean/sd"))),
                }
            };
            let mean = vec_of(entry.get("mean"))?;
            let mut sd = vec_of(entry.get("sd"))?;
            if sd.len() == 1 && mean.len() > 1 {
                sd = vec![sd[0]; mean.len()];
            }
            let n = entry.get("n").and_then(|n| n.as_u64()).ok_or_else(|| corrupt(format!("`{name}`: missing n")))?;
            out.insert(name.clone(), Summary { mean, sd, n: n as usize });
        }
    }
    Ok((v, out))
}
