//! Generates logged auto-bidding data with `aigb`: every advertiser slot of every period runs a
//! behaviour bidder drawn from a heterogeneous rule-based mix (AuctionNet PID, log-PID, fixed
//! CPA, OnlineLP) with log-normal exploration noise on its bid coefficient; every advertiser's
//! period becomes one trajectory in AuctionNet's RL format (16-dim state, action
//! `Σbid/ΣpValue`, reward, cost). Writes the dataset CSV, a JSONL line per period and a plot of
//! score against mean action.
//!
//! ```text
//! # 21 training periods at full size (AuctionNet's general-track periods 7–27 are 21 periods)
//! cargo run --release --example aigb_generate --features aigb -- --pv-num 500000 --periods 21 --out target/aigb-data
//! ```

use std::path::PathBuf;

use aigb::{auctionnet_advertisers, generate_dataset, DataGenParams, OnlineLpParams, SimParams, Simulator};
use anyhow::Result;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rl_core::{JsonlSink, Metrics, MetricsSink, Params};

#[derive(Parser, Debug)]
#[command(about = "Generate logged trajectories from a heterogeneous noisy bidder mix")]
struct Args {
    /// Impressions per period.
    #[arg(long, default_value_t = 50_000)]
    pv_num: usize,
    /// Number of periods (0..periods).
    #[arg(long, default_value_t = 4)]
    periods: u64,
    /// Largest exploration noise σ.
    #[arg(long, default_value_t = 0.3)]
    noise: f64,
    /// Simulator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Output folder (trajectories.csv, metrics.jsonl, score_vs_action.svg).
    #[arg(long, default_value = "target/aigb-data")]
    out: PathBuf,
    /// No progress bar or summary.
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let scale = args.pv_num as f64 / 500_000.0;
    let sim = Simulator::new(
        SimParams::default().pv_num(args.pv_num).seed(args.seed).check()?,
        auctionnet_advertisers(scale),
    )?;
    let params = DataGenParams::default()
        .noise_sigma_max(args.noise)
        .threads(args.threads)
        .online_lp(OnlineLpParams::default().budget_scale(scale))
        .check()?;
    let periods: Vec<u64> = (0..args.periods).collect();
    let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(periods.len() as u64) };
    bar.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} periods started {elapsed}")?);
    let ds = generate_dataset(&sim, &periods, &params, &|k| bar.set_position(k as u64))?;
    bar.finish_and_clear();
    let path = args.out.join("trajectories.csv");
    ds.save(&path)?;
    let mut sink = JsonlSink::create(args.out.join("metrics.jsonl"))?;
    for &p in &periods {
        let tr: Vec<_> = ds.trajectories.iter().filter(|t| t.period == p).collect();
        let scores: Vec<f64> = tr.iter().map(|t| t.score()).collect();
        let m = Metrics::new()
            .with("data/trajectories", tr.len() as f64)
            .with("data/score_mean", rl_core::stats::mean(&scores))
            .with("data/score_sd", rl_core::stats::std_dev(&scores, 1))
            .with("data/conversions", tr.iter().map(|t| t.conversions()).sum())
            .with(
                "data/budget_spent_mean",
                rl_core::stats::mean(&tr.iter().map(|t| t.cost() / t.budget).collect::<Vec<_>>()),
            );
        sink.log(p, &m)?;
    }
    sink.flush()?;
    // score vs mean action per trajectory (behaviour diversity)
    let pts: Vec<(f64, f64)> = ds
        .trajectories
        .iter()
        .map(|t| {
            let n = t.active_len().max(1);
            (t.steps[..n].iter().map(|s| s.action / t.cpa).sum::<f64>() / n as f64, t.score())
        })
        .collect();
    let svg = args.out.join("score_vs_action.svg");
    let root = SVGBackend::new(&svg, (700, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let xmax = pts.iter().map(|p| p.0).fold(0.0, f64::max).max(1e-6) * 1.05;
    let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-6) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption("logged trajectories: score vs mean bid coefficient / CPA", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
    chart.configure_mesh().x_desc("mean action / CPA").y_desc("score").draw()?;
    chart.draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 2, BLUE.mix(0.5).filled())))?;
    root.present()?;
    if !args.quiet {
        println!(
            "{} trajectories ({} steps) from {} periods → {}; score mean {:.2}; wrote {}",
            ds.trajectories.len(),
            ds.num_steps(),
            periods.len(),
            path.display(),
            rl_core::stats::mean(&pts.iter().map(|p| p.1).collect::<Vec<_>>()),
            svg.display()
        );
    }
    Ok(())
}
