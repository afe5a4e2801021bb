//! The generative bidders end to end on one logged dataset: trains the DiffBid planner
//! (`aigb::planner`), the behaviour-cloning, IQL (`aigb::iql`) and decision-transformer
//! baselines, AIGB-Pearl's
//! trajectory evaluator (`aigb::traj_eval`), runs AIGB-Pearl's policy search with rounds of
//! expert feedback (`aigb::search`) and its three ablations (no pairwise loss, no expert
//! feedback, no KL / shared-noise constraint), then evaluates every bidder next to the rule-based
//! ones on held-out periods (the evaluator refuses the dataset's periods) across budget levels
//! and seeds. Writes JSONL logs of every training curve, SVG plots, `rows.jsonl` of every
//! evaluation run and `results.md`.
//!
//! ```text
//! cargo run --release --example aigb_generate --features aigb -- --pv-num 50000 --periods 16 --out target/aigb-data-50k
//! cargo run --release --example aigb_generative --features aigb-tch -- --data target/aigb-data-50k/trajectories.csv \
//!     --pv-num 50000 --out target/aigb-generative
//! ```
//!
//! `--only` trains and evaluates a subset (keys `pid`, `onlinelp`, `fixed`, `bc`, `iql`, `dt`,
//! `diffbid`, `pearl`, `ablations`; Pearl and its ablations train DiffBid first): every bidder's
//! training and evaluation use their own seeded streams, so a subset run reproduces the rows
//! of a full run with the same arguments.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aigb::diffusion::UnetParams;
use aigb::dt::{DtBidder, DtParams, DtTrainer};
use aigb::iql::{IqlBidder, IqlBidderParams, IqlTrainer};
use aigb::learned::{BcParams, BcTrainer};
use aigb::planner::{PlannerBidder, PlannerParams, PlannerSnapshot, PlannerTrainer};
use aigb::search::{expert_feedback, PolicySearch, SearchParams};
use aigb::traj_eval::{ScoredTrajectory, TrajEvalParams, TrajEvaluator};
use aigb::{
    auctionnet_advertisers, default_lineup, Bidder, BidderSpec, EvalParams, EvalReport, Evaluator, OnlineLpParams,
    PolicyBidder, SimParams, Simulator, TrajectoryDataset,
};
use anyhow::Result;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rl_core::{JsonlSink, Metrics, MetricsSink, Params};

#[derive(Parser, Debug, Clone)]
#[command(about = "Train DiffBid, AIGB-Pearl (and ablations), BC and DT on logged data; evaluate on held-out periods")]
struct Args {
    /// Dataset CSV from aigb_generate.
    #[arg(long)]
    data: PathBuf,
    /// Impressions per period (must match the data's market).
    #[arg(long, default_value_t = 50_000)]
    pv_num: usize,
    /// Planner training steps.
    #[arg(long, default_value_t = 3000)]
    planner_steps: usize,
    /// Planner batch size.
    #[arg(long, default_value_t = 64)]
    planner_batch: usize,
    /// U-Net base width (reference: 128).
    #[arg(long, default_value_t = 32)]
    unet_dim: i64,
    /// Diffusion steps K.
    #[arg(long, default_value_t = 10)]
    diffusion_steps: usize,
    /// Re-plan every this many ticks.
    #[arg(long, default_value_t = 1)]
    replan_every: usize,
    /// BC steps.
    #[arg(long, default_value_t = 3000)]
    bc_steps: usize,
    /// IQL steps (`offline-rl`'s IQL with AuctionNet's settings, `IqlBidderParams::default()`).
    #[arg(long, default_value_t = 3000)]
    iql_steps: u64,
    /// Decision-transformer steps.
    #[arg(long, default_value_t = 3000)]
    dt_steps: usize,
    /// Evaluator training steps before the search.
    #[arg(long, default_value_t = 800)]
    evaluator_steps: usize,
    /// Search rounds (each: search steps, then expert feedback and evaluator steps).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Policy-search steps per round.
    #[arg(long, default_value_t = 20)]
    search_steps: usize,
    /// Search learning rate.
    #[arg(long, default_value_t = 1e-4)]
    search_lr: f64,
    /// KL bound δ (nats per plan).
    #[arg(long, default_value_t = 2.0)]
    kl_bound: f64,
    /// Simulated expert-feedback runs per round (training periods × slots).
    #[arg(long, default_value_t = 12)]
    feedback_runs: usize,
    /// Evaluator steps after each round's feedback.
    #[arg(long, default_value_t = 200)]
    evaluator_refresh_steps: usize,
    /// Skip the three ablations.
    #[arg(long)]
    no_ablations: bool,
    /// Train and evaluate only these bidders (keys: pid, onlinelp, fixed, bc, iql, dt, diffbid,
    /// pearl, ablations); all when empty.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Held-out periods (10 000, ...).
    #[arg(long, default_value_t = 1)]
    periods: u64,
    /// Seeds.
    #[arg(long, default_value_t = 2)]
    seeds: u64,
    /// Budget ratios.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.5, 1.0, 1.5])]
    budget_ratios: Vec<f64>,
    /// Slots the evaluated bidder takes in turn.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0, 9, 18, 27, 36, 45])]
    slots: Vec<usize>,
    /// Worker threads for simulation.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Output folder.
    #[arg(long, default_value = "target/aigb-generative")]
    out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

impl Args {
    /// Whether the bidder `key` is trained and evaluated.
    fn wants(&self, key: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|k| k == key)
    }
}

const KEYS: [&str; 9] = ["pid", "onlinelp", "fixed", "bc", "iql", "dt", "diffbid", "pearl", "ablations"];

fn bar(args: &Args, len: u64, label: &str) -> Result<ProgressBar> {
    let b = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(len) };
    b.set_style(ProgressStyle::with_template(&format!("{label:<24} {{bar:30}} {{pos}}/{{len}} {{msg}} {{elapsed}}"))?);
    Ok(b)
}

/// Plots named curves `(x, y)` into `path`.
fn plot(path: &Path, title: &str, ylabel: &str, curves: &[(String, Vec<(f64, f64)>)]) -> Result<()> {
    let pts = curves.iter().flat_map(|c| c.1.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in pts.filter(|p| p.0.is_finite() && p.1.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        return Ok(());
    }
    let (dx, dy) = ((x1 - x0).max(1e-9) * 0.05, (y1 - y0).max(1e-9) * 0.1);
    let root = SVGBackend::new(path, (700, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(55)
        .build_cartesian_2d((x0 - dx)..(x1 + dx), (y0 - dy)..(y1 + dy))?;
    chart.configure_mesh().y_desc(ylabel).draw()?;
    for (i, (name, c)) in curves.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(c.clone(), Palette99::pick(i).stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], Palette99::pick(i)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    root.present()?;
    Ok(())
}

/// One AIGB-Pearl variant's switches.
#[derive(Debug, Clone, Copy)]
struct Variant {
    name: &'static str,
    pairwise: bool,
    feedback: bool,
    constrained: bool,
}

struct PearlOut {
    snapshot: PlannerSnapshot,
    log: String,
}

/// Evaluator training, then `rounds` × (policy search, expert feedback, evaluator refresh).
#[allow(clippy::too_many_arguments)]
fn pearl(
    args: &Args,
    v: Variant,
    data: &TrajectoryDataset,
    reference: &PlannerSnapshot,
    sim: &Simulator,
    table: &Arc<aigb::OnlineLpTable>,
    lp: &rl_core::Valid<OnlineLpParams>,
    sink: &mut JsonlSink,
) -> Result<PearlOut> {
    let ep = TrajEvalParams::default().pairwise_weight(if v.pairwise { 1.0 } else { 0.0 }).lr(1e-3);
    let mut ev = TrajEvaluator::new(ep.check()?, data)?;
    let b = bar(args, args.evaluator_steps as u64, &format!("{} evaluator", v.name))?;
    ev.train(args.evaluator_steps, &mut |step, l| {
        if step % 20 == 0 {
            let m = Metrics::new().with("evaluator/pointwise", l.pointwise).with("evaluator/pairwise", l.pairwise);
            let _ = sink.log(step, &m);
            b.set_message(format!("pt {:.4} pw {:.4}", l.pointwise, l.pairwise));
        }
        b.inc(1);
    })?;
    b.finish_and_clear();
    let mut sp = SearchParams::default().lr(args.search_lr).kl_bound(args.kl_bound).batch_size(16);
    if !v.constrained {
        sp = sp.unconstrained();
    }
    let mut search = PolicySearch::new(sp.check()?, reference, data)?;
    let start = search.measure(&mut ev, 64, 7)?;
    let mut log = format!(
        "{}: evaluator score of plans {:.3} (±{:.3} ensemble sd) at the start",
        v.name, start.score, start.uncertainty
    );
    let periods = data.periods();
    let slots = [0usize, 9, 18, 27, 36, 45];
    let mut k = 0usize;
    for round in 0..args.rounds {
        let b = bar(args, args.search_steps as u64, &format!("{} search r{round}", v.name))?;
        search.train(&mut ev, args.search_steps, &mut |step, st| {
            let m = Metrics::new()
                .with("search/score", st.score)
                .with("search/uncertainty", st.uncertainty)
                .with("search/kl", st.kl)
                .with("search/kl_after", st.kl_after)
                .with("search/w2", st.w2)
                .with("search/backtracks", st.backtracks as f64)
                .with("search/kl_weight", st.kl_weight);
            let _ = sink.log(step, &m);
            b.set_message(format!("score {:.3} KL {:.2}", st.score, st.kl_after));
            b.inc(1);
        })?;
        b.finish_and_clear();
        if v.feedback && args.feedback_runs > 0 {
            let snap = Arc::new(search.snapshot(v.name)?);
            let runs: Vec<(u64, usize)> = (0..args.feedback_runs)
                .map(|_| {
                    k += 1;
                    (periods[(k * 7) % periods.len()], slots[k % slots.len()])
                })
                .collect();
            let fb = expert_feedback(&snap, sim, &default_lineup(), table, lp, &runs, args.threads)?;
            let mut trajs: Vec<ScoredTrajectory> = Vec::new();
            for r in &fb {
                trajs.push(r.realised.clone());
                trajs.push(r.plan.clone());
            }
            let pred = ev.predict(&trajs)?;
            let gap: f64 = trajs
                .iter()
                .zip(&pred)
                .skip(1)
                .step_by(2)
                .map(|(t, p)| p.0 - t.quality / ev.quality_scale())
                .sum::<f64>()
                / fb.len() as f64;
            let w = ev.add_expert(&trajs)?;
            let mean_score = fb.iter().map(|r| r.score).sum::<f64>() / fb.len() as f64;
            let _ = write!(
                log,
                "; round {round}: feedback score {mean_score:.2}, evaluator over-estimate of plans {gap:+.3}, mean expert weight {:.2}",
                w.iter().sum::<f64>() / w.len() as f64
            );
            let m = Metrics::new().with("feedback/score", mean_score).with("feedback/overestimate", gap);
            let _ = sink.log(search.steps(), &m);
            ev.train(args.evaluator_refresh_steps, &mut |_, _| {})?;
        }
    }
    let end = search.measure(&mut ev, 64, 7)?;
    let _ = write!(
        log,
        "; end: score {:.3} (±{:.3}), KL {:.2}, shared-noise distance {:.2}",
        end.score, end.uncertainty, end.kl, end.w2
    );
    Ok(PearlOut { snapshot: search.snapshot(v.name)?, log })
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(k) = args.only.iter().find(|k| !KEYS.contains(&k.as_str())) {
        anyhow::bail!("unknown --only key `{k}` (one of {KEYS:?})");
    }
    tch::set_num_threads(1);
    std::fs::create_dir_all(&args.out)?;
    let data = TrajectoryDataset::load(&args.data)?;
    let scale = args.pv_num as f64 / 500_000.0;
    let sim = Simulator::new(SimParams::default().pv_num(args.pv_num).check()?, auctionnet_advertisers(scale))?;
    let lp_params = OnlineLpParams::default().budget_scale(scale);
    let lp = lp_params.clone().check()?;
    let table = aigb::build_online_lp_table(&sim, &[2_000_000], &lp)?;
    let mut notes = String::new();
    let _ = writeln!(notes, "data: {} trajectories from periods {:?}\n", data.trajectories.len(), data.periods());

    // DiffBid planner (also the reference of AIGB-Pearl and its ablations)
    let pearl_keys = args.wants("pearl") || (args.wants("ablations") && !args.no_ablations);
    let diffbid: Option<PlannerSnapshot> = if args.wants("diffbid") || pearl_keys {
        let pp = PlannerParams::default()
            .unet(UnetParams::default().dim(args.unet_dim))
            .steps(args.diffusion_steps)
            .inverse_hidden(vec![256, 256, 256])
            .batch_size(args.planner_batch)
            .lr(2e-4)
            .inverse_lr(1e-3)
            .replan_every(args.replan_every);
        let mut pt = PlannerTrainer::new(pp.check()?, &data)?;
        let mut sink = JsonlSink::create(args.out.join("planner.jsonl"))?;
        let (mut diff_c, mut inv_c) = (Vec::new(), Vec::new());
        let (mut sd, mut si) = (0.0, 0.0);
        let b = bar(&args, args.planner_steps as u64, "DiffBid planner")?;
        pt.train(args.planner_steps, &mut |step, l| {
            sd += l.diffusion;
            si += l.inverse;
            if step % 50 == 0 {
                let (d, i) = (sd / 50.0, si / 50.0);
                sd = 0.0;
                si = 0.0;
                diff_c.push((step as f64, d));
                inv_c.push((step as f64, i));
                let _ = sink.log(step, &Metrics::new().with("planner/diffusion", d).with("planner/inverse", i));
                b.set_message(format!("diff {d:.4} inv {i:.4}"));
            }
            b.inc(1);
        })?;
        b.finish_and_clear();
        sink.flush()?;
        let held = pt.eval_losses(256, 11)?;
        let _ = writeln!(
            notes,
            "DiffBid: {} steps, final 50-step means diffusion {:.4} / inverse {:.4}; fresh-noise batch {:.4} / {:.4}\n",
            args.planner_steps,
            diff_c.last().map_or(f64::NAN, |p| p.1),
            inv_c.last().map_or(f64::NAN, |p| p.1),
            held.diffusion,
            held.inverse
        );
        plot(
            &args.out.join("planner.svg"),
            "DiffBid training (50-step means)",
            "loss",
            &[("diffusion".into(), diff_c), ("inverse dynamics".into(), inv_c)],
        )?;
        Some(pt.planner().snapshot("DiffBid")?)
    } else {
        None
    };

    // BC, IQL and DT
    type Make = Box<dyn Fn() -> aigb::Result<Box<dyn Bidder>> + Sync>;
    let mut learned: Vec<(String, Make)> = Vec::new();
    if args.wants("bc") {
        let mut bc = BcTrainer::new(BcParams::default().check()?, &data)?;
        let b = bar(&args, args.bc_steps as u64, "BC")?;
        bc.train(args.bc_steps, &mut |_, _| b.inc(1))?;
        b.finish_and_clear();
        let p = Arc::new(bc.policy("BC")?);
        learned
            .push(("BC".into(), Box::new(move || Ok(Box::new(PolicyBidder::new(Arc::clone(&p))?) as Box<dyn Bidder>))));
    }
    if args.wants("iql") {
        // AuctionNet's IQL settings (the defaults)
        let mut iql = IqlTrainer::new(IqlBidderParams::default().steps(args.iql_steps).check()?, &data)?;
        let mut sink = JsonlSink::create(args.out.join("iql.jsonl"))?;
        let summary = iql.train(&mut sink)?;
        let _ = writeln!(
            notes,
            "IQL: {} updates on {} transitions ({:.0} updates/s)\n",
            summary.steps,
            iql.len(),
            summary.updates_per_second
        );
        let p = Arc::new(iql.into_policy("IQL"));
        learned.push(("IQL".into(), Box::new(move || Ok(Box::new(IqlBidder::new(Arc::clone(&p))) as Box<dyn Bidder>))));
    }
    if args.wants("dt") {
        // AuctionNet's DT sizes (the defaults); a shorter warm-up for short runs
        let mut dt = DtTrainer::new(DtParams::default().warmup_steps(200).check()?, &data)?;
        let mut sink = JsonlSink::create(args.out.join("dt.jsonl"))?;
        let b = bar(&args, args.dt_steps as u64, "DT")?;
        dt.train(args.dt_steps, &mut |step, l| {
            if step % 50 == 0 {
                let _ = sink.log(step, &Metrics::new().with("dt/loss", l));
            }
            b.inc(1);
        })?;
        b.finish_and_clear();
        sink.flush()?;
        let p = Arc::new(dt.policy("DT")?);
        learned.push(("DT".into(), Box::new(move || Ok(Box::new(DtBidder::new(Arc::clone(&p))?) as Box<dyn Bidder>))));
    }

    // AIGB-Pearl and its ablations
    let mut variants = Vec::new();
    if args.wants("pearl") {
        variants.push(Variant { name: "AIGB-Pearl", pairwise: true, feedback: true, constrained: true });
    }
    if !args.no_ablations && args.wants("ablations") {
        variants.push(Variant { name: "Pearl − pairwise", pairwise: false, feedback: true, constrained: true });
        variants.push(Variant { name: "Pearl − feedback", pairwise: true, feedback: false, constrained: true });
        variants.push(Variant { name: "Pearl − constraint", pairwise: true, feedback: true, constrained: false });
    }
    let mut searched: Vec<Arc<PlannerSnapshot>> = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let Some(diffbid) = diffbid.as_ref() else { break };
        let mut sink = JsonlSink::create(args.out.join(format!("pearl-{i}.jsonl")))?;
        let out = pearl(&args, *v, &data, diffbid, &sim, &table, &lp, &mut sink)?;
        sink.flush()?;
        let _ = writeln!(notes, "{}\n", out.log);
        if !args.quiet {
            println!("{}", out.log);
        }
        searched.push(Arc::new(out.snapshot));
    }

    // held-out evaluation
    let params = EvalParams::default()
        .periods((10_000..10_000 + args.periods).collect())
        .seeds((0..args.seeds).collect())
        .budget_ratios(args.budget_ratios.clone())
        .slots(args.slots.clone())
        .threads(args.threads)
        .check()?;
    let ev = Evaluator::new(params, &sim, &data.periods(), lp_params)?;
    let mut cands: Vec<(String, Make)> = Vec::new();
    for (key, name, spec) in [
        ("pid", "PID (AuctionNet)", BidderSpec::Pid { initial_alpha: 15.0 }),
        ("onlinelp", "OnlineLP", BidderSpec::OnlineLp),
        ("fixed", "fixed CPA", BidderSpec::FixedCpa { cpa_multiplier: 1.0 }),
    ] {
        if !args.wants(key) {
            continue;
        }
        let (t, l) = (Arc::clone(&table), lp.clone());
        cands.push((name.into(), Box::new(move || spec.build(Some(&t), &l))));
    }
    cands.extend(learned);
    if let (true, Some(d)) = (args.wants("diffbid"), diffbid) {
        let p = Arc::new(d);
        cands.push((
            "DiffBid".into(),
            Box::new(move || Ok(Box::new(PlannerBidder::new(Arc::clone(&p))?) as Box<dyn Bidder>)),
        ));
    }
    for (v, s) in variants.iter().zip(&searched) {
        let p = Arc::clone(s);
        cands.push((
            v.name.into(),
            Box::new(move || Ok(Box::new(PlannerBidder::new(Arc::clone(&p))?) as Box<dyn Bidder>)),
        ));
    }
    let mut reports: Vec<EvalReport> = Vec::new();
    let mut sink = JsonlSink::create(args.out.join("rows.jsonl"))?;
    let mut row = 0u64;
    for (bi, (name, make)) in cands.iter().enumerate() {
        let b = bar(&args, 0, name)?;
        let rep = ev.evaluate(name, make.as_ref(), &|d, t| {
            b.set_length(t as u64);
            b.set_position(d as u64);
        })?;
        b.finish_and_clear();
        for r in &rep.rows {
            let m = Metrics::new()
                .with("eval/period", r.period as f64)
                .with("eval/seed", r.seed as f64)
                .with("eval/budget_ratio", r.budget_ratio)
                .with("eval/slot", r.slot as f64)
                .with("eval/score", r.score)
                .with("eval/conversions", r.conversions)
                .with("eval/cost", r.cost)
                .with("eval/budget", r.budget);
            sink.log(row, &m.with("eval/bidder_index", bi as f64))?;
            row += 1;
        }
        reports.push(rep);
    }
    sink.flush()?;
    let mut md = String::new();
    let ratios = &args.budget_ratios;
    let _ = writeln!(
        md,
        "| bidder | {} | mean |",
        ratios.iter().map(|b| format!("budget {:.0}%", 100.0 * b)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(md, "|---|{}---|", "---|".repeat(ratios.len()));
    for rep in &reports {
        let cells: Vec<String> =
            rep.summary.iter().map(|s| format!("{:.2} ± {:.2}", s.score_mean, s.score_sd)).collect();
        let mean = rep.summary.iter().map(|s| s.score_mean).sum::<f64>() / rep.summary.len().max(1) as f64;
        let _ = writeln!(md, "| {} | {} | {mean:.2} |", rep.bidder, cells.join(" | "));
    }
    let _ = writeln!(md, "\nbudget spent / share of runs over the CPA constraint:\n");
    let _ = writeln!(
        md,
        "| bidder | {} |",
        ratios.iter().map(|b| format!("{:.0}%", 100.0 * b)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(md, "|---|{}", "---|".repeat(ratios.len()));
    for rep in &reports {
        let cells: Vec<String> = rep
            .summary
            .iter()
            .map(|s| format!("{:.0}% / {:.0}%", 100.0 * s.budget_spent, 100.0 * s.cpa_exceeded))
            .collect();
        let _ = writeln!(md, "| {} | {} |", rep.bidder, cells.join(" | "));
    }
    md = format!("{notes}{md}");
    std::fs::write(args.out.join("results.md"), &md)?;
    let curves: Vec<(String, Vec<(f64, f64)>)> = reports
        .iter()
        .map(|r| (r.bidder.clone(), r.summary.iter().map(|s| (s.budget_ratio, s.score_mean)).collect()))
        .collect();
    plot(&args.out.join("score_vs_budget.svg"), "held-out score vs budget ratio", "score", &curves)?;
    if !args.quiet {
        println!("{md}");
    }
    Ok(())
}
