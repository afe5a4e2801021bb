//! Evaluates the rule-based bidders of `aigb` on held-out periods: each bidder takes one
//! advertiser slot at a time (round-robin over one slot per category) in a market of the
//! default rule-based competitors, under budget scalings 50%–150%, for several seeds; the
//! metric is AuctionNet's score. Writes a markdown table, JSONL rows and a plot of score
//! against budget ratio.
//!
//! ```text
//! # the table of docs/aigb.md
//! cargo run --release --example aigb_evaluate --features aigb -- --pv-num 100000 --periods 2 --seeds 3 --out target/aigb-eval
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;

use aigb::{
    auctionnet_advertisers, Bidder, BidderSpec, EvalParams, EvalReport, Evaluator, OnlineLpParams, SimParams, Simulator,
};
use anyhow::Result;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rl_core::{JsonlSink, Metrics, MetricsSink, Params};

#[derive(Parser, Debug)]
#[command(about = "Evaluate rule-based bidders on held-out periods across budget levels and seeds")]
struct Args {
    /// Impressions per period (budgets scaled by pv_num / 500 000).
    #[arg(long, default_value_t = 50_000)]
    pv_num: usize,
    /// Held-out periods (10 000, 10 001, ...).
    #[arg(long, default_value_t = 1)]
    periods: u64,
    /// Seeds.
    #[arg(long, default_value_t = 2)]
    seeds: u64,
    /// Budget ratios.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.5, 0.75, 1.0, 1.25, 1.5])]
    budget_ratios: Vec<f64>,
    /// Advertiser slots the bidder takes in turn.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0, 9, 18, 27, 36, 45])]
    slots: Vec<usize>,
    /// Threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Output folder (results.md, rows.jsonl, score_vs_budget.svg).
    #[arg(long, default_value = "target/aigb-eval")]
    out: PathBuf,
    /// No progress bar or table on stdout.
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let scale = args.pv_num as f64 / 500_000.0;
    let sim = Simulator::new(SimParams::default().pv_num(args.pv_num).check()?, auctionnet_advertisers(scale))?;
    let params = EvalParams::default()
        .periods((10_000..10_000 + args.periods).collect())
        .seeds((0..args.seeds).collect())
        .budget_ratios(args.budget_ratios.clone())
        .slots(args.slots.clone())
        .threads(args.threads)
        .check()?;
    let lp = OnlineLpParams::default().budget_scale(scale);
    // rule-based bidders have no training periods
    let ev = Evaluator::new(params, &sim, &[], lp.clone())?;
    let lpv = lp.check()?;
    let table = aigb::build_online_lp_table(&sim, &[3_000_000], &lpv)?;
    let candidates: Vec<(&str, BidderSpec)> = vec![
        ("PID (AuctionNet)", BidderSpec::Pid { initial_alpha: 15.0 }),
        ("PID (log, α₀ = CPA)", BidderSpec::PidCpa { cpa_multiplier: 1.0 }),
        ("OnlineLP", BidderSpec::OnlineLp),
        ("fixed CPA", BidderSpec::FixedCpa { cpa_multiplier: 1.0 }),
    ];
    let mut reports: Vec<EvalReport> = Vec::new();
    let mut sink = JsonlSink::create(args.out.join("rows.jsonl"))?;
    for (name, spec) in &candidates {
        let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(0) };
        bar.set_style(ProgressStyle::with_template(&format!(
            "{name:<22} {{bar:30}} {{pos}}/{{len}} runs {{elapsed}}"
        ))?);
        let make = || -> aigb::Result<Box<dyn Bidder>> { spec.build(Some(&table), &lpv) };
        let rep = ev.evaluate(name, &make, &|d, t| {
            bar.set_length(t as u64);
            bar.set_position(d as u64);
        })?;
        bar.finish_and_clear();
        for (i, r) in rep.rows.iter().enumerate() {
            let m = Metrics::new()
                .with("eval/period", r.period as f64)
                .with("eval/seed", r.seed as f64)
                .with("eval/budget_ratio", r.budget_ratio)
                .with("eval/slot", r.slot as f64)
                .with("eval/score", r.score)
                .with("eval/conversions", r.conversions)
                .with("eval/cost", r.cost)
                .with("eval/budget", r.budget);
            sink.log(i as u64, &m)?;
        }
        reports.push(rep);
    }
    sink.flush()?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "| bidder | {} |",
        args.budget_ratios.iter().map(|b| format!("budget {:.0}%", 100.0 * b)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(md, "|---|{}", "---|".repeat(args.budget_ratios.len()));
    for rep in &reports {
        let cells: Vec<String> =
            rep.summary.iter().map(|s| format!("{:.2} ± {:.2}", s.score_mean, s.score_sd)).collect();
        let _ = writeln!(md, "| {} | {} |", rep.bidder, cells.join(" | "));
    }
    let _ = writeln!(md, "\nbudget spent / share of runs over the CPA constraint:\n");
    let _ = writeln!(
        md,
        "| bidder | {} |",
        args.budget_ratios.iter().map(|b| format!("{:.0}%", 100.0 * b)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(md, "|---|{}", "---|".repeat(args.budget_ratios.len()));
    for rep in &reports {
        let cells: Vec<String> = rep
            .summary
            .iter()
            .map(|s| format!("{:.0}% / {:.0}%", 100.0 * s.budget_spent, 100.0 * s.cpa_exceeded))
            .collect();
        let _ = writeln!(md, "| {} | {} |", rep.bidder, cells.join(" | "));
    }
    std::fs::write(args.out.join("results.md"), &md)?;
    let svg = args.out.join("score_vs_budget.svg");
    let root = SVGBackend::new(&svg, (700, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let ymax =
        reports.iter().flat_map(|r| r.summary.iter().map(|s| s.score_mean + s.score_sd)).fold(0.0, f64::max).max(1e-6)
            * 1.1;
    let xmin = args.budget_ratios.iter().cloned().fold(f64::INFINITY, f64::min) - 0.05;
    let xmax = args.budget_ratios.iter().cloned().fold(0.0, f64::max) + 0.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("held-out score vs budget ({} impressions/period)", args.pv_num), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(45)
        .build_cartesian_2d(xmin..xmax, 0.0..ymax)?;
    chart.configure_mesh().x_desc("budget ratio").y_desc("score").draw()?;
    for (i, rep) in reports.iter().enumerate() {
        let pts: Vec<(f64, f64)> = rep.summary.iter().map(|s| (s.budget_ratio, s.score_mean)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), Palette99::pick(i).stroke_width(2)))?
            .label(rep.bidder.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], Palette99::pick(i)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, Palette99::pick(i).filled())))?;
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    root.present()?;
    if !args.quiet {
        println!("{md}");
        println!("wrote {}, rows.jsonl and {}", args.out.join("results.md").display(), svg.display());
    }
    Ok(())
}
