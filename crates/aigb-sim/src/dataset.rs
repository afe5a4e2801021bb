//! Logged trajectories in AuctionNet's RL format (`dataloader/rl_data_generator.py`): one row
//! per (period, advertiser, tick) with the 16 state features, the bid coefficient
//! `action = Σ bid / Σ pValue`, `reward` (conversions), `reward_continuous` (Σ pValue of exposed
//! slots), the tick's cost and `done` (last tick, or the budget fell below the minimum before
//! the tick).
//!
//! Files are CSV with a first line `# aigb-trajectories v1 <json metadata>`, then a header, then
//! one row per step. Reading treats the file as untrusted: it validates every row on its own,
//! against the metadata (periods, advertisers with budget/CPA/category, ticks) and against the
//! other rows (contiguous ticks from 0, no duplicate row or trajectory, constant advertiser
//! fields, consistent remaining budgets and `num_pv`), and fails with [`AigbError::Corrupt`]
//! naming the line and column; nothing is skipped. Sizes (line lengths, declared and read steps)
//! are checked against a [`MemoryBudget`] before allocating
//! ([`TrajectoryDataset::load_within`] lists every check).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, BufWriter, Read as _, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bidder::STATE_DIM;
use crate::error::{AigbError, Result};
use crate::sim::{score, Advertiser, PeriodResult, SCORE_BETA};
use rl_core::MemoryBudget;

/// Format version written into the first line.
pub const FORMAT_VERSION: u32 = 1;

const MAGIC: &str = "# aigb-trajectories v1 ";

/// Longest row (step line) [`TrajectoryDataset::load`] reads, in bytes (a row of this format is
/// about 300 bytes; the bidder name is at most [`MAX_BIDDER_NAME`]).
pub const MAX_ROW_BYTES: usize = 64 * 1024;

/// Longest bidder name [`TrajectoryDataset::save`] writes, in bytes.
pub const MAX_BIDDER_NAME: usize = 4096;

/// One step (tick) of a trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Tick index.
    pub tick: usize,
    /// Remaining budget at the start of the tick.
    pub remaining_budget: f64,
    /// The 16 state features ([`crate::STATE_FEATURES`]).
    pub state: [f32; STATE_DIM],
    /// Bid coefficient `Σ bid / Σ pValue`.
    pub action: f64,
    /// Conversions.
    pub reward: f64,
    /// Σ pValue of exposed slots.
    pub reward_continuous: f64,
    /// Cost paid.
    pub cost: f64,
    /// Slots won.
    pub wins: u64,
    /// Slots won and exposed.
    pub exposures: u64,
    /// Impressions in the tick.
    pub num_pv: u64,
    /// Last tick, or out of budget before this tick (AuctionNet's `done`/`isEnd`).
    pub done: bool,
}

/// One advertiser's period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// Period index.
    pub period: u64,
    /// Advertiser slot.
    pub advertiser: usize,
    /// Category.
    pub category: usize,
    /// Budget.
    pub budget: f64,
    /// CPA constraint.
    pub cpa: f64,
    /// The behaviour bidder's name.
    pub bidder: String,
    /// Steps, tick 0 first.
    pub steps: Vec<Step>,
}

impl Trajectory {
    /// Total cost.
    pub fn cost(&self) -> f64 {
        self.steps.iter().map(|s| s.cost).sum()
    }

    /// Total conversions.
    pub fn conversions(&self) -> f64 {
        self.steps.iter().map(|s| s.reward).sum()
    }

    /// The competition score of the trajectory.
    pub fn score(&self) -> f64 {
        score(self.conversions(), self.cost(), self.cpa, SCORE_BETA)
    }

    /// Steps up to and including the first `done` (AuctionNet's episode boundary).
    pub fn active_len(&self) -> usize {
        self.steps.iter().position(|s| s.done).map_or(self.steps.len(), |p| p + 1)
    }
}

/// What produced a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct DatasetMeta {
    /// Format version.
    pub format_version: u32,
    /// Free description (generator parameters as JSON).
    pub generator: serde_json::Value,
    /// Periods in the dataset.
    pub periods: Vec<u64>,
    /// Ticks per period.
    pub num_ticks: usize,
    /// The market's advertisers in slot order (budget, CPA, category) the trajectories were
    /// logged in; empty when not declared. When declared, every row's advertiser id must be
    /// listed here with the row's budget, CPA and category.
    pub advertisers: Vec<Advertiser>,
}

/// A set of logged trajectories.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TrajectoryDataset {
    /// Provenance.
    pub meta: DatasetMeta,
    /// The trajectories.
    pub trajectories: Vec<Trajectory>,
}

/// Dense arrays for training: `[N, T, 16]` states, `[N, T]` actions/rewards/costs, `[N, T]`
/// mask (1 up to and including the first `done`), row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Padded {
    /// Trajectories.
    pub n: usize,
    /// Ticks per trajectory.
    pub horizon: usize,
    /// States, `n · horizon · 16`.
    pub states: Vec<f32>,
    /// Actions, `n · horizon`.
    pub actions: Vec<f32>,
    /// Rewards (conversions), `n · horizon`.
    pub rewards: Vec<f32>,
    /// Costs, `n · horizon`.
    pub costs: Vec<f32>,
    /// Valid-step mask, `n · horizon`.
    pub mask: Vec<f32>,
    /// Score of each trajectory.
    pub scores: Vec<f32>,
}

const COLUMNS_HEAD: [&str; 7] = ["period", "advertiser", "category", "budget", "cpa", "bidder", "tick"];
const COLUMNS_TAIL: [&str; 9] =
    ["remaining_budget", "action", "reward", "reward_continuous", "cost", "wins", "exposures", "num_pv", "done"];

fn header() -> String {
    let mut cols: Vec<String> = COLUMNS_HEAD.iter().map(|s| (*s).to_owned()).collect();
    cols.extend((0..STATE_DIM).map(|i| format!("state_{i}")));
    cols.extend(COLUMNS_TAIL.iter().map(|s| (*s).to_owned()));
    cols.join(",")
}

impl TrajectoryDataset {
    /// An empty dataset with `meta`.
    pub fn new(meta: DatasetMeta) -> Self {
        Self { meta, trajectories: Vec::new() }
    }

    /// Appends every advertiser of a simulated period (all ticks; `done` marks the end as in
    /// AuctionNet's logs).
    pub fn push_period(&mut self, result: &PeriodResult, min_remaining_budget: f64) {
        for a in &result.advertisers {
            let n = a.ticks.len();
            let steps = a
                .ticks
                .iter()
                .zip(&a.states)
                .map(|(r, s)| Step {
                    tick: r.tick,
                    remaining_budget: r.remaining_budget,
                    state: *s,
                    action: r.action(),
                    reward: r.conversions as f64,
                    reward_continuous: r.exposed_pvalue,
                    cost: r.cost,
                    wins: r.wins,
                    exposures: r.exposures,
                    num_pv: r.num_pv,
                    done: r.tick + 1 == n || r.remaining_budget < min_remaining_budget,
                })
                .collect();
            self.trajectories.push(Trajectory {
                period: result.period,
                advertiser: a.info.advertiser,
                category: a.info.category,
                budget: a.info.budget,
                cpa: a.info.cpa,
                bidder: a.bidder.clone(),
                steps,
            });
        }
        if !self.meta.periods.contains(&result.period) {
            self.meta.periods.push(result.period);
        }
    }

    /// Number of steps.
    pub fn num_steps(&self) -> usize {
        self.trajectories.iter().map(|t| t.steps.len()).sum()
    }

    /// The distinct periods of the trajectories.
    pub fn periods(&self) -> Vec<u64> {
        let mut p: Vec<u64> = self.trajectories.iter().map(|t| t.period).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Dense arrays padded to `horizon` ticks, within [`MemoryBudget::default`]
    /// ([`TrajectoryDataset::padded_within`]).
    ///
    /// # Errors
    /// As [`TrajectoryDataset::padded_within`].
    pub fn padded(&self, horizon: usize) -> Result<Padded> {
        self.padded_within(horizon, MemoryBudget::default())
    }

    /// Dense arrays padded to `horizon` ticks; the arrays (`n · horizon · (16 + 5)` floats)
    /// are checked against `budget` before they are allocated.
    ///
    /// # Errors
    /// [`AigbError::Empty`] without trajectories; [`AigbError::Shape`] for a trajectory longer
    /// than `horizon`; [`AigbError::Core`] ([`rl_core::RlCoreError::TooLarge`]) when the arrays
    /// exceed `budget` (or their size overflows).
    pub fn padded_within(&self, horizon: usize, budget: MemoryBudget) -> Result<Padded> {
        if self.trajectories.is_empty() {
            return Err(AigbError::Empty { what: "trajectories".into() });
        }
        let n = self.trajectories.len();
        if let Some((j, tr)) = self.trajectories.iter().enumerate().find(|(_, t)| t.steps.len() > horizon) {
            return Err(AigbError::Shape {
                what: format!("trajectory {j} length"),
                expected: format!("<= {horizon}"),
                got: tr.steps.len().to_string(),
            });
        }
        budget.check_elems(
            "padded trajectories (n × horizon × (16 + 5) floats)",
            &[n as u64, horizon as u64, STATE_DIM as u64 + 5],
            4,
        )?;
        let mut p = Padded {
            n,
            horizon,
            states: vec![0.0; n * horizon * STATE_DIM],
            actions: vec![0.0; n * horizon],
            rewards: vec![0.0; n * horizon],
            costs: vec![0.0; n * horizon],
            mask: vec![0.0; n * horizon],
            scores: vec![0.0; n],
        };
        for (j, tr) in self.trajectories.iter().enumerate() {
            if tr.steps.len() > horizon {
                return Err(AigbError::Shape {
                    what: format!("trajectory {j} length"),
                    expected: format!("<= {horizon}"),
                    got: tr.steps.len().to_string(),
                });
            }
            let act = tr.active_len();
            for (t, s) in tr.steps.iter().enumerate() {
                let o = j * horizon + t;
                p.states[o * STATE_DIM..(o + 1) * STATE_DIM].copy_from_slice(&s.state);
                p.actions[o] = s.action as f32;
                p.rewards[o] = s.reward as f32;
                p.costs[o] = s.cost as f32;
                p.mask[o] = if t < act { 1.0 } else { 0.0 };
            }
            p.scores[j] = tr.score() as f32;
        }
        Ok(p)
    }

    /// Writes the dataset (CSV, see the module docs) to `path` through a temporary file.
    ///
    /// # Errors
    /// [`AigbError::InvalidParameter`] for a bidder name with a comma or newline, or a
    /// non-finite value; I/O errors.
    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("tmp");
        {
            let f = std::fs::File::create(&tmp)?;
            let mut w = BufWriter::new(f);
            let mut meta = self.meta.clone();
            meta.format_version = FORMAT_VERSION;
            writeln!(w, "{MAGIC}{}", serde_json::to_string(&meta)?)?;
            writeln!(w, "{}", header())?;
            let mut line = String::new();
            for (j, tr) in self.trajectories.iter().enumerate() {
                if tr.bidder.contains([',', '\n', '\r']) || tr.bidder.len() > MAX_BIDDER_NAME {
                    return Err(AigbError::invalid(
                        format!("trajectories[{j}].bidder"),
                        &tr.bidder,
                        format!("must not contain ',' or newlines and be at most {MAX_BIDDER_NAME} bytes"),
                    ));
                }
                for s in &tr.steps {
                    line.clear();
                    let _ = write!(
                        line,
                        "{},{},{},{},{},{},{},",
                        tr.period, tr.advertiser, tr.category, tr.budget, tr.cpa, tr.bidder, s.tick
                    );
                    for x in s.state {
                        if !x.is_finite() {
                            return Err(AigbError::NonFinite {
                                what: format!("trajectories[{j}] state"),
                                index: s.tick,
                                value: f64::from(x),
                            });
                        }
                        let _ = write!(line, "{x},");
                    }
                    for (name, x) in [
                        ("remaining_budget", s.remaining_budget),
                        ("action", s.action),
                        ("reward", s.reward),
                        ("reward_continuous", s.reward_continuous),
                        ("cost", s.cost),
                    ] {
                        if !x.is_finite() {
                            return Err(AigbError::NonFinite {
                                what: format!("trajectories[{j}].{name}"),
                                index: s.tick,
                                value: x,
                            });
                        }
                        let _ = write!(line, "{x},");
                    }
                    let _ = write!(line, "{},{},{},{}", s.wins, s.exposures, s.num_pv, u8::from(s.done));
                    writeln!(w, "{line}")?;
                }
            }
            w.flush()?;
        }
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Reads and validates a dataset written by [`TrajectoryDataset::save`], within
    /// [`MemoryBudget::default`] ([`TrajectoryDataset::load_within`]).
    ///
    /// # Errors
    /// As [`TrajectoryDataset::load_within`].
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_within(path, MemoryBudget::default())
    }

    /// Reads and validates a dataset written by [`TrajectoryDataset::save`]; nothing beyond
    /// `budget` is allocated.
    ///
    /// Sizes: the metadata line may be at most `budget` bytes and a row [`MAX_ROW_BYTES`]; the
    /// steps the metadata declares (`periods × advertisers × num_ticks`, when all three are
    /// given) and the steps read so far must fit `budget` at `size_of::<Step>()` bytes each.
    ///
    /// Checks, each failing with the line and the column: the magic line, format version and
    /// header; field counts, numbers, finiteness, 0/1 `done`; positive budget/CPA, non-negative
    /// action/reward/reward_continuous/cost; `exposures ≤ wins ≤ num_pv` and
    /// `reward ≤ exposures`; against the metadata: the period is one of `meta.periods`, the
    /// advertiser id is listed in `meta.advertisers` with the row's budget, CPA and category,
    /// `tick < meta.num_ticks` (each when declared); between rows: ticks contiguous from 0 (a
    /// repeated tick is a duplicate row), budget/CPA/category/bidder constant within a
    /// trajectory, no trajectory twice, the remaining budget starting at the budget and falling by
    /// each tick's cost (relative tolerance 1e-9), `done` never returning to 0, every tick of a
    /// period logging the same `num_pv` for every advertiser; at the end, the metadata's tick count.
    ///
    /// # Errors
    /// [`AigbError::Corrupt`] naming the file, line and problem; [`AigbError::Core`]
    /// ([`rl_core::RlCoreError::TooLarge`]) naming the file when a size exceeds `budget`; I/O
    /// errors.
    pub fn load_within(path: &Path, budget: MemoryBudget) -> Result<Self> {
        let corrupt = |line: usize, reason: String| AigbError::Corrupt {
            path: path.to_owned(),
            reason: format!("line {line}: {reason}"),
        };
        let too_large = |what: &str, bytes: u64| budget.check_bytes(&format!("{}: {what}", path.display()), bytes);
        let f = std::fs::File::open(path)?;
        let mut reader = BufReader::new(f);
        let mut buf = String::new();
        let meta_limit = usize::try_from(budget.limit()).unwrap_or(usize::MAX);
        if !read_line_limited(&mut reader, &mut buf, meta_limit).map_err(|e| corrupt(1, e))? {
            return Err(corrupt(1, "empty file".into()));
        }
        let meta_json = buf
            .strip_prefix(MAGIC)
            .ok_or_else(|| corrupt(1, format!("not an aigb trajectory file (expected `{}`)", MAGIC.trim())))?;
        let meta: DatasetMeta = serde_json::from_str(meta_json).map_err(|e| corrupt(1, format!("metadata: {e}")))?;
        if meta.format_version != FORMAT_VERSION {
            return Err(corrupt(
                1,
                format!("format version {} (this build reads {FORMAT_VERSION})", meta.format_version),
            ));
        }
        for (i, a) in meta.advertisers.iter().enumerate() {
            a.validate(i).map_err(|e| corrupt(1, format!("metadata: {e}")))?;
        }
        let step_bytes = std::mem::size_of::<Step>() as u64;
        if !meta.periods.is_empty() && !meta.advertisers.is_empty() && meta.num_ticks > 0 {
            let declared = [meta.periods.len() as u64, meta.advertisers.len() as u64, meta.num_ticks as u64];
            budget.check_elems(
                &format!("{}: steps the metadata declares (periods × advertisers × ticks)", path.display()),
                &declared,
                step_bytes,
            )?;
        }
        buf.clear();
        if !read_line_limited(&mut reader, &mut buf, MAX_ROW_BYTES).map_err(|e| corrupt(2, e))? {
            return Err(corrupt(2, "missing header".into()));
        }
        if buf != header() {
            return Err(corrupt(2, "header does not match the expected columns".into()));
        }
        let n_cols = COLUMNS_HEAD.len() + STATE_DIM + COLUMNS_TAIL.len();
        let periods: HashSet<u64> = meta.periods.iter().copied().collect();
        let mut ds = TrajectoryDataset::new(meta);
        // (period, advertiser) → line of its first row; (period, tick) → (num_pv, line)
        let mut first_line: HashMap<(u64, usize), usize> = HashMap::new();
        let mut tick_pv: HashMap<(u64, usize), (u64, usize)> = HashMap::new();
        let mut bytes = 0u64;
        let mut ln = 2;
        loop {
            buf.clear();
            ln += 1;
            if !read_line_limited(&mut reader, &mut buf, MAX_ROW_BYTES).map_err(|e| corrupt(ln, e))? {
                break;
            }
            let f: Vec<&str> = buf.split(',').collect();
            if f.len() != n_cols {
                return Err(corrupt(ln, format!("{} fields, expected {n_cols}", f.len())));
            }
            let col = |i: usize| format!("column {} (`{}`)", i + 1, column_name(i));
            let num = |i: usize| -> Result<f64> {
                let v: f64 =
                    f[i].trim().parse().map_err(|_| corrupt(ln, format!("{} is not a number: `{}`", col(i), f[i])))?;
                if !v.is_finite() {
                    return Err(corrupt(ln, format!("{} is not finite", col(i))));
                }
                Ok(v)
            };
            let int = |i: usize| -> Result<u64> {
                f[i].trim()
                    .parse::<u64>()
                    .map_err(|_| corrupt(ln, format!("{} is not a non-negative integer: `{}`", col(i), f[i])))
            };
            let index = |i: usize| -> Result<usize> {
                usize::try_from(int(i)?).map_err(|_| corrupt(ln, format!("{} does not fit in usize", col(i))))
            };
            let period = int(0)?;
            let advertiser = index(1)?;
            let category = index(2)?;
            let budget = num(3)?;
            let cpa = num(4)?;
            if budget <= 0.0 || cpa <= 0.0 {
                return Err(corrupt(ln, format!("budget {budget} and cpa {cpa} must be > 0")));
            }
            let bidder = f[5].to_owned();
            let tick = index(6)?;
            let mut state = [0.0f32; STATE_DIM];
            for (d, x) in state.iter_mut().enumerate() {
                *x = num(7 + d)? as f32;
            }
            let o = 7 + STATE_DIM;
            let step = Step {
                tick,
                remaining_budget: num(o)?,
                state,
                action: num(o + 1)?,
                reward: num(o + 2)?,
                reward_continuous: num(o + 3)?,
                cost: num(o + 4)?,
                wins: int(o + 5)?,
                exposures: int(o + 6)?,
                num_pv: int(o + 7)?,
                done: match f[o + 8].trim() {
                    "0" => false,
                    "1" => true,
                    other => return Err(corrupt(ln, format!("`done` must be 0 or 1, got `{other}`"))),
                },
            };
            if step.action < 0.0 || step.reward < 0.0 || step.cost < 0.0 || step.reward_continuous < 0.0 {
                return Err(corrupt(ln, "action, reward, reward_continuous and cost must be >= 0".into()));
            }
            if step.exposures > step.wins {
                return Err(corrupt(ln, format!("{} = {} exceeds `wins` = {}", col(o + 6), step.exposures, step.wins)));
            }
            if step.wins > step.num_pv {
                return Err(corrupt(ln, format!("{} = {} exceeds `num_pv` = {}", col(o + 5), step.wins, step.num_pv)));
            }
            if step.reward > step.exposures as f64 {
                return Err(corrupt(
                    ln,
                    format!(
                        "{} = {} exceeds `exposures` = {} (conversions need exposed slots)",
                        col(o + 2),
                        step.reward,
                        step.exposures
                    ),
                ));
            }
            // against the metadata
            if !periods.is_empty() && !periods.contains(&period) {
                return Err(corrupt(ln, format!("{}: period {period} is not among the metadata's periods", col(0))));
            }
            if !ds.meta.advertisers.is_empty() {
                let Some(m) = ds.meta.advertisers.get(advertiser) else {
                    return Err(corrupt(
                        ln,
                        format!(
                            "{}: unknown advertiser {advertiser} (the metadata lists {})",
                            col(1),
                            ds.meta.advertisers.len()
                        ),
                    ));
                };
                for (i, got, want) in [(2, category as f64, m.category as f64), (3, budget, m.budget), (4, cpa, m.cpa)]
                {
                    if got != want {
                        return Err(corrupt(
                            ln,
                            format!("{} = {got} differs from the metadata's advertiser {advertiser} ({want})", col(i)),
                        ));
                    }
                }
            }
            if ds.meta.num_ticks > 0 && tick >= ds.meta.num_ticks {
                return Err(corrupt(
                    ln,
                    format!("{} = {tick} is out of range: the metadata has {} ticks", col(6), ds.meta.num_ticks),
                ));
            }
            // between rows
            match tick_pv.get(&(period, tick)) {
                Some(&(pv, l)) if pv != step.num_pv => {
                    return Err(corrupt(
                        ln,
                        format!(
                            "{} = {} differs from line {l} ({pv}) for the same period {period} and tick {tick}",
                            col(o + 7),
                            step.num_pv
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    tick_pv.insert((period, tick), (step.num_pv, ln));
                }
            }
            let tol = 1e-9 * budget;
            let continues = ds.trajectories.last().is_some_and(|t| t.period == period && t.advertiser == advertiser);
            bytes = bytes.saturating_add(step_bytes);
            if continues {
                let t = ds.trajectories.last_mut().ok_or_else(|| corrupt(ln, "internal".into()))?;
                let expected = t.steps.len();
                let start = first_line.get(&(period, advertiser)).copied().unwrap_or(ln);
                if tick < expected {
                    return Err(corrupt(
                        ln,
                        format!(
                            "duplicate row: period {period}, advertiser {advertiser}, tick {tick} is already on line {}",
                            start + tick
                        ),
                    ));
                }
                if tick != expected {
                    return Err(corrupt(
                        ln,
                        format!("tick {tick} of period {period}, advertiser {advertiser}: expected {expected} (a tick is missing)"),
                    ));
                }
                if t.budget != budget || t.cpa != cpa || t.category != category || t.bidder != bidder {
                    return Err(corrupt(
                        ln,
                        format!("budget, cpa, category and bidder must be constant within a trajectory (it starts on line {start})"),
                    ));
                }
                if let Some(prev) = t.steps.last() {
                    let want = prev.remaining_budget - prev.cost;
                    if (step.remaining_budget - want).abs() > tol {
                        return Err(corrupt(
                            ln,
                            format!(
                                "{} = {} contradicts the previous row: {} − cost {} = {want}",
                                col(o),
                                step.remaining_budget,
                                prev.remaining_budget,
                                prev.cost
                            ),
                        ));
                    }
                    if prev.done && !step.done {
                        return Err(corrupt(ln, "`done` returns to 0 after the trajectory ended".into()));
                    }
                }
                too_large("steps read", bytes)?;
                t.steps.push(step);
            } else {
                if let Some(l) = first_line.get(&(period, advertiser)) {
                    return Err(corrupt(
                        ln,
                        format!("period {period}, advertiser {advertiser} appears twice (first on line {l})"),
                    ));
                }
                if tick != 0 {
                    return Err(corrupt(
                        ln,
                        format!(
                            "trajectory of period {period}, advertiser {advertiser} starts at tick {tick}, expected 0"
                        ),
                    ));
                }
                if (step.remaining_budget - budget).abs() > tol {
                    return Err(corrupt(
                        ln,
                        format!("{} = {} at tick 0 differs from the budget {budget}", col(o), step.remaining_budget),
                    ));
                }
                bytes = bytes.saturating_add(
                    (std::mem::size_of::<Trajectory>() + bidder.len() + 4 * std::mem::size_of::<(u64, usize, usize)>())
                        as u64,
                );
                too_large("steps read", bytes)?;
                first_line.insert((period, advertiser), ln);
                ds.trajectories.push(Trajectory {
                    period,
                    advertiser,
                    category,
                    budget,
                    cpa,
                    bidder,
                    steps: vec![step],
                });
            }
        }
        if ds.meta.num_ticks > 0 {
            if let Some(t) = ds.trajectories.iter().find(|t| t.steps.len() != ds.meta.num_ticks) {
                return Err(AigbError::Corrupt {
                    path: path.to_owned(),
                    reason: format!(
                        "period {}, advertiser {} has {} ticks, metadata says {}",
                        t.period,
                        t.advertiser,
                        t.steps.len(),
                        ds.meta.num_ticks
                    ),
                });
            }
        }
        Ok(ds)
    }
}

/// Reads one line into `buf` (without its `\n` / `\r\n`), refusing lines longer than `limit`
/// bytes before buffering more; `Ok(false)` at the end of the file.
fn read_line_limited(reader: &mut impl BufRead, buf: &mut String, limit: usize) -> std::result::Result<bool, String> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let n = reader.by_ref().take(cap).read_line(buf).map_err(|e| format!("unreadable ({e})"))?;
    if n == 0 {
        return Ok(false);
    }
    if buf.ends_with('\n') {
        buf.pop();
        if buf.ends_with('\r') {
            buf.pop();
        }
    } else if buf.len() > limit {
        return Err(format!("line longer than {limit} bytes"));
    }
    Ok(true)
}

fn column_name(i: usize) -> String {
    if i < COLUMNS_HEAD.len() {
        COLUMNS_HEAD[i].to_owned()
    } else if i < COLUMNS_HEAD.len() + STATE_DIM {
        format!("state_{}", i - COLUMNS_HEAD.len())
    } else {
        COLUMNS_TAIL.get(i - COLUMNS_HEAD.len() - STATE_DIM).map_or_else(|| format!("#{i}"), |s| (*s).to_owned())
    }
}
