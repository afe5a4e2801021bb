//! Held-out evaluation of a bidder: it replaces one advertiser slot of a market of rule-based
//! competitors, slot by slot (round-robin), on periods it was not trained on, under several
//! budget and CPA scalings and seeds; the metric is the competition score.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::bidder::Bidder;
use crate::bidders::{OnlineLpParams, OnlineLpTable};
use crate::error::{check_positive, AigbError, Result};
use crate::market::{build_lineup, build_online_lp_table, default_lineup, BidderSpec};
use crate::sim::{Advertiser, Simulator};
use rl_core::Params;

/// Parameters of an [`Evaluator`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `periods` | 10 000..10 004 | held-out periods (must not be training periods) | non-empty |
/// | `budget_ratios` | [0.5, 0.75, 1.0, 1.25, 1.5] | budget scalings (the "budget 50%–150%" settings of later papers) | > 0 |
/// | `cpa_ratios` | [1.0] | CPA-constraint scalings | > 0 |
/// | `seeds` | [0, 1, 2] | simulator seeds (traffic and noise) | non-empty |
/// | `slots` | [0, 9, 18, 27, 36, 45] | advertiser slots the bidder takes in turn (one per category) | < advertisers |
/// | `scale_competitors` | true | scale every advertiser's budget/CPA, not only the evaluated one | |
/// | `lineup` | [`default_lineup`] | competitor pattern repeated over the slots | non-empty |
/// | `lp_history_periods` | [2 000 000] | periods that build the competitors' OnlineLP table | disjoint from `periods` |
/// | `threads` | 2 | simulations in parallel | 1 ..= [`MAX_THREADS`] |
///
/// The runs (`seeds × periods × budget_ratios × cpa_ratios × slots`) are listed before they
/// start: their number times [`RUN_BYTES`] must fit [`rl_core::MemoryBudget::default`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalParams {
    /// Held-out periods.
    pub periods: Vec<u64>,
    /// Budget scalings.
    pub budget_ratios: Vec<f64>,
    /// CPA scalings.
    pub cpa_ratios: Vec<f64>,
    /// Simulator seeds.
    pub seeds: Vec<u64>,
    /// Evaluated slots.
    pub slots: Vec<usize>,
    /// Scale all advertisers.
    pub scale_competitors: bool,
    /// Competitor pattern.
    pub lineup: Vec<BidderSpec>,
    /// OnlineLP history periods.
    pub lp_history_periods: Vec<u64>,
    /// Threads.
    pub threads: usize,
}

impl Default for EvalParams {
    fn default() -> Self {
        Self {
            periods: (10_000..10_004).collect(),
            budget_ratios: vec![0.5, 0.75, 1.0, 1.25, 1.5],
            cpa_ratios: vec![1.0],
            seeds: vec![0, 1, 2],
            slots: vec![0, 9, 18, 27, 36, 45],
            scale_competitors: true,
            lineup: default_lineup(),
            lp_history_periods: vec![2_000_000],
            threads: 2,
        }
    }
}

crate::traffic::setters!(EvalParams {
    periods: Vec<u64>,
    budget_ratios: Vec<f64>,
    cpa_ratios: Vec<f64>,
    seeds: Vec<u64>,
    slots: Vec<usize>,
    scale_competitors: bool,
    lineup: Vec<BidderSpec>,
    lp_history_periods: Vec<u64>,
    threads: usize,
});

impl rl_core::Params for EvalParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [("periods", self.periods.len()), ("seeds", self.seeds.len()), ("slots", self.slots.len())] {
            if v == 0 {
                return Err(AigbError::invalid(name, "[]", "must not be empty"));
            }
        }
        for (name, v) in [("budget_ratios", &self.budget_ratios), ("cpa_ratios", &self.cpa_ratios)] {
            if v.is_empty() {
                return Err(AigbError::invalid(name, "[]", "must not be empty"));
            }
            for (i, x) in v.iter().enumerate() {
                check_positive(&format!("{name}[{i}]"), *x)?;
            }
        }
        if self.lineup.is_empty() {
            return Err(AigbError::invalid("lineup", "[]", "must not be empty"));
        }
        if let Some(p) = self.periods.iter().find(|p| self.lp_history_periods.contains(p)) {
            return Err(AigbError::invalid("lp_history_periods", p, "overlaps the evaluation periods"));
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(AigbError::invalid("threads", self.threads, format!("must be in 1..={MAX_THREADS}")));
        }
        let runs =
            [self.seeds.len(), self.periods.len(), self.budget_ratios.len(), self.cpa_ratios.len(), self.slots.len()]
                .map(|n| n as u64);
        if let Err(e) = rl_core::MemoryBudget::default().check_elems("evaluation runs", &runs, RUN_BYTES) {
            return Err(AigbError::invalid(
                "periods",
                format!("{runs:?} (seeds, periods, budget ratios, CPA ratios, slots)"),
                e.to_string(),
            ));
        }
        Ok(())
    }
}

pub use crate::market::MAX_THREADS;

/// Bytes [`Evaluator::evaluate`] allocates per run before the runs start (the run list and its
/// result slot).
pub const RUN_BYTES: u64 =
    (std::mem::size_of::<(usize, u64, f64, f64, usize)>() + std::mem::size_of::<Option<EvalRow>>()) as u64;

/// One evaluated run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRow {
    /// Period.
    pub period: u64,
    /// Seed.
    pub seed: u64,
    /// Budget scaling.
    pub budget_ratio: f64,
    /// CPA scaling.
    pub cpa_ratio: f64,
    /// Slot taken.
    pub slot: usize,
    /// Budget after scaling.
    pub budget: f64,
    /// CPA constraint after scaling.
    pub cpa: f64,
    /// Conversions.
    pub conversions: f64,
    /// Cost.
    pub cost: f64,
    /// Competition score.
    pub score: f64,
}

/// Scores by setting: mean over periods and slots per seed, then mean and standard deviation
/// across seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// Budget scaling.
    pub budget_ratio: f64,
    /// CPA scaling.
    pub cpa_ratio: f64,
    /// Mean score across seeds.
    pub score_mean: f64,
    /// Standard deviation across seeds (ddof 1; 0 with one seed).
    pub score_sd: f64,
    /// Mean budget spent (cost / budget).
    pub budget_spent: f64,
    /// Share of runs whose realised CPA exceeded the constraint.
    pub cpa_exceeded: f64,
}

/// All runs of one bidder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Bidder name.
    pub bidder: String,
    /// Every run.
    pub rows: Vec<EvalRow>,
    /// Per setting.
    pub summary: Vec<EvalSummary>,
}

/// Evaluates bidders on held-out periods of a market.
#[derive(Debug)]
pub struct Evaluator {
    params: rl_core::Valid<EvalParams>,
    sims: Vec<(u64, Simulator)>,
    table: Arc<OnlineLpTable>,
    lp: rl_core::Valid<OnlineLpParams>,
}

impl Evaluator {
    /// An evaluator on `sim`'s market. `train_periods` are the periods the evaluated bidders
    /// were trained on (from their dataset); sharing one with `params.periods` is an error.
    ///
    /// # Errors
    /// [`AigbError::Leak`] for a shared period; [`AigbError::UnknownId`] for a slot outside
    /// the market; errors building the competitors' OnlineLP table.
    pub fn new(
        params: rl_core::Valid<EvalParams>,
        sim: &Simulator,
        train_periods: &[u64],
        online_lp: OnlineLpParams,
    ) -> Result<Self> {
        if let Some(&p) = params.periods.iter().find(|p| train_periods.contains(p)) {
            return Err(AigbError::Leak { period: p });
        }
        if let Some(&p) = params.lp_history_periods.iter().find(|p| train_periods.contains(p)) {
            return Err(AigbError::Leak { period: p });
        }
        let n_a = sim.advertisers().len();
        if let Some(&s) = params.slots.iter().find(|&&s| s >= n_a) {
            return Err(AigbError::UnknownId { what: "advertiser slot".into(), id: s.to_string() });
        }
        let lp = online_lp.check()?;
        let table = build_online_lp_table(sim, &params.lp_history_periods, &lp)?;
        let sims = params
            .seeds
            .iter()
            .map(|&s| {
                let p = sim.params().clone().seed(rl_core::derive_seed(sim.params().seed, s)).check()?;
                Ok((s, Simulator::new(p, sim.advertisers().to_vec())?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { params, sims, table, lp })
    }

    /// The parameters.
    pub fn params(&self) -> &EvalParams {
        &self.params
    }

    /// Evaluates the bidders `make()` builds (one per run); `progress(done, total)` is called
    /// after every run.
    ///
    /// # Errors
    /// The first error of any run.
    pub fn evaluate(
        &self,
        name: &str,
        make: &(dyn Fn() -> Result<Box<dyn Bidder>> + Sync),
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<EvalReport> {
        let p = &*self.params;
        let mut jobs = Vec::new();
        for (si, _) in self.sims.iter().enumerate() {
            for &period in &p.periods {
                for &br in &p.budget_ratios {
                    for &cr in &p.cpa_ratios {
                        for &slot in &p.slots {
                            jobs.push((si, period, br, cr, slot));
                        }
                    }
                }
            }
        }
        let total = jobs.len();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let threads = p.threads.min(total).max(1);
        let work = || {
            let mut out = Vec::new();
            loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(si, period, br, cr, slot)) = jobs.get(j) else { break };
                let r = self.run_one(si, period, br, cr, slot, make);
                out.push((j, r));
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            }
            out
        };
        let outs: Vec<Vec<(usize, Result<EvalRow>)>> = crate::sim::scoped_workers(threads, &work)?;
        let mut rows: Vec<Option<EvalRow>> = vec![None; total];
        for (j, r) in outs.into_iter().flatten() {
            rows[j] = Some(r?);
        }
        let rows: Vec<EvalRow> = rows.into_iter().flatten().collect();
        if rows.len() != total {
            return Err(AigbError::NotReady(format!(
                "{} of {total} evaluation runs did not finish",
                total - rows.len()
            )));
        }
        let mut summary = Vec::new();
        for &br in &p.budget_ratios {
            for &cr in &p.cpa_ratios {
                let sel: Vec<&EvalRow> = rows.iter().filter(|r| r.budget_ratio == br && r.cpa_ratio == cr).collect();
                let per_seed: Vec<f64> = self
                    .sims
                    .iter()
                    .map(|(seed, _)| {
                        let v: Vec<f64> = sel.iter().filter(|r| r.seed == *seed).map(|r| r.score).collect();
                        rl_core::stats::mean(&v)
                    })
                    .collect();
                let spent: Vec<f64> = sel.iter().map(|r| r.cost / r.budget).collect();
                let exceeded = sel.iter().filter(|r| r.cost / (r.conversions + 1e-10) > r.cpa).count();
                summary.push(EvalSummary {
                    budget_ratio: br,
                    cpa_ratio: cr,
                    score_mean: rl_core::stats::mean(&per_seed),
                    score_sd: rl_core::stats::std_dev(&per_seed, 1),
                    budget_spent: rl_core::stats::mean(&spent),
                    cpa_exceeded: exceeded as f64 / sel.len().max(1) as f64,
                });
            }
        }
        Ok(EvalReport { bidder: name.to_owned(), rows, summary })
    }

    fn run_one(
        &self,
        si: usize,
        period: u64,
        br: f64,
        cr: f64,
        slot: usize,
        make: &(dyn Fn() -> Result<Box<dyn Bidder>> + Sync),
    ) -> Result<EvalRow> {
        let (seed, base) = &self.sims[si];
        let p = &*self.params;
        let ads: Vec<Advertiser> = base
            .advertisers()
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if p.scale_competitors || i == slot {
                    Advertiser { budget: a.budget * br, cpa: a.cpa * cr, category: a.category }
                } else {
                    *a
                }
            })
            .collect();
        let sim = base.with_advertisers(ads)?;
        let mut bidders = build_lineup(&p.lineup, sim.advertisers().len(), Some(&self.table), &self.lp)?;
        bidders[slot] = make()?;
        let res = sim.run_period(period, &mut bidders, None)?;
        let me = &res.advertisers[slot];
        Ok(EvalRow {
            period,
            seed: *seed,
            budget_ratio: br,
            cpa_ratio: cr,
            slot,
            budget: me.info.budget,
            cpa: me.info.cpa,
            conversions: me.conversions() as f64,
            cost: me.cost(),
            score: me.score(),
        })
    }
}
