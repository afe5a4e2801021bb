//! Simulates delivery periods of the AuctionNet market (48 advertisers, 48 ticks) with
//! `aigb`: a PID-only market (AuctionNet's fidelity setting) or the default rule-based lineup.
//! Prints wall time per period, peak memory and a per-advertiser table; logs one JSONL record
//! per period and plots the per-tick spend of the first period.
//!
//! ```text
//! # one full-size period on one thread (the speed figure of docs/benchmarks.md)
//! cargo run --release --example aigb_simulate --features aigb -- --pv-num 500000 --periods 1
//! # a 48-period sweep on both cores
//! cargo run --release --example aigb_simulate --features aigb -- --pv-num 500000 --periods 48 --threads 2
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use aigb::{
    auctionnet_advertisers, build_lineup, build_online_lp_table, default_lineup, Bidder, OnlineLpParams, PidBidder,
    PidParams, SimParams, Simulator,
};
use anyhow::Result;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rl_core::{JsonlSink, Metrics, MetricsSink, Params};

#[derive(Parser, Debug)]
#[command(about = "Simulate AuctionNet-style delivery periods with aigb")]
struct Args {
    /// Impressions per period (AuctionNet: 500 000).
    #[arg(long, default_value_t = 50_000)]
    pv_num: usize,
    /// Number of periods.
    #[arg(long, default_value_t = 2)]
    periods: u64,
    /// First period index.
    #[arg(long, default_value_t = 0)]
    first_period: u64,
    /// Threads (periods run in parallel).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// `pid` (PID-only market) or `lineup` (the default rule-based lineup with OnlineLP).
    #[arg(long, default_value = "pid")]
    market: String,
    /// Budget scale (default: pv_num / 500 000, the same budget per impression as AuctionNet).
    #[arg(long)]
    budget_scale: Option<f64>,
    /// Simulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output folder (metrics.jsonl, tick_spend.svg).
    #[arg(long, default_value = "target/aigb-simulate")]
    out: PathBuf,
    /// Print only the timing line.
    #[arg(long)]
    quiet: bool,
}

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let scale = args.budget_scale.unwrap_or(args.pv_num as f64 / 500_000.0);
    let sim = Simulator::new(
        SimParams::default().pv_num(args.pv_num).seed(args.seed).check()?,
        auctionnet_advertisers(scale),
    )?;
    let lp = OnlineLpParams::default().budget_scale(scale).check()?;
    let table = if args.market == "lineup" { Some(build_online_lp_table(&sim, &[1_000_000], &lp)?) } else { None };
    let pid = PidParams::default().check()?;
    let make = |_p: u64| -> aigb::Result<Vec<Box<dyn Bidder>>> {
        match args.market.as_str() {
            "pid" => Ok((0..48).map(|_| Box::new(PidBidder::new(pid.clone())) as Box<dyn Bidder>).collect()),
            _ => build_lineup(&default_lineup(), 48, table.as_ref(), &lp),
        }
    };
    let periods: Vec<u64> = (args.first_period..args.first_period + args.periods).collect();
    let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(periods.len() as u64) };
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} periods {elapsed}")?);
    let t0 = Instant::now();
    let results = if args.threads <= 1 {
        let mut out = Vec::new();
        for &p in &periods {
            let t = Instant::now();
            let mut b = make(p)?;
            let r = sim.run_period(p, &mut b, None)?;
            out.push((r, t.elapsed().as_secs_f64()));
            bar.inc(1);
        }
        out
    } else {
        let rs = sim.run_periods(&periods, args.threads, make)?;
        let per = t0.elapsed().as_secs_f64() / periods.len() as f64;
        bar.inc(periods.len() as u64);
        rs.into_iter().map(|r| (r, per)).collect()
    };
    bar.finish_and_clear();
    let total = t0.elapsed().as_secs_f64();
    let mut sink = JsonlSink::create(args.out.join("metrics.jsonl"))?;
    for (r, secs) in &results {
        let ads = &r.advertisers;
        let m = Metrics::new()
            .with("sim/period_seconds", *secs)
            .with("market/impressions", ads[0].num_pv() as f64)
            .with("market/total_cost", ads.iter().map(|a| a.cost()).sum())
            .with("market/conversions", ads.iter().map(|a| a.conversions() as f64).sum())
            .with("market/score_sum", ads.iter().map(|a| a.score()).sum())
            .with("market/drop_rounds", r.drop_rounds as f64);
        sink.log(r.period, &m)?;
    }
    sink.flush()?;
    println!(
        "aigb: {} period(s) of {} impressions x 48 advertisers on {} thread(s): {:.3} s total, {:.3} s/period, peak RSS {:.0} MiB",
        periods.len(),
        args.pv_num,
        args.threads.max(1),
        total,
        total / periods.len() as f64,
        peak_rss_mib().unwrap_or(f64::NAN)
    );
    if args.quiet {
        return Ok(());
    }
    let (first, _) = &results[0];
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "period {}: advertiser | bidder | budget | spent | conversions | CPA / target | score",
        first.period
    )?;
    for a in first.advertisers.iter().step_by(4) {
        writeln!(
            out,
            "  {:>2} | {:<10} | {:>8.1} | {:>5.1}% | {:>4} | {:>7.1} / {:>5.1} | {:>6.2}",
            a.info.advertiser,
            a.bidder,
            a.info.budget,
            100.0 * a.cost() / a.info.budget,
            a.conversions(),
            a.realised_cpa(),
            a.info.cpa,
            a.score()
        )?;
    }
    // spend per tick of the first period, by category
    let path = args.out.join("tick_spend.svg");
    let root = SVGBackend::new(&path, (800, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let ticks = first.advertisers[0].ticks.len();
    let series: Vec<Vec<f64>> = (0..6)
        .map(|c| {
            (0..ticks)
                .map(|t| first.advertisers.iter().filter(|a| a.info.category == c).map(|a| a.ticks[t].cost).sum())
                .collect()
        })
        .collect();
    let ymax = series.iter().flatten().cloned().fold(0.0, f64::max).max(1e-9) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("spend per tick by category, period {}", first.period), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0..ticks, 0.0..ymax)?;
    chart.configure_mesh().x_desc("tick").y_desc("cost").draw()?;
    for (c, s) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                s.iter().enumerate().map(|(t, v)| (t, *v)),
                Palette99::pick(c).stroke_width(2),
            ))?
            .label(format!("category {c}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], Palette99::pick(c)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    root.present()?;
    writeln!(out, "wrote {} and {}", args.out.join("metrics.jsonl").display(), path.display())?;
    Ok(())
}
