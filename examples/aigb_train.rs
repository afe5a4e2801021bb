//! Trains a learned bidder on a logged dataset written by `aigb_generate`: behaviour cloning
//! (`--algo bc`, `aigb::learned::BcTrainer`, AuctionNet's BC baseline; exported as a plain-Rust
//! policy, `policy.json`) or IQL (`--algo iql`, `aigb::iql::IqlTrainer`, `offline-rl`'s IQL
//! with AuctionNet's IQL settings; checkpoint in `checkpoint/`). Then evaluates it on held-out
//! periods (the evaluator refuses periods of the dataset) across budget levels and seeds. Logs
//! the loss as JSONL and plots it.
//!
//! ```text
//! cargo run --release --example aigb_generate --features aigb -- --pv-num 100000 --periods 16 --out target/aigb-data
//! cargo run --release --example aigb_train --features aigb-tch -- --data target/aigb-data/trajectories.csv \
//!     --pv-num 100000 --steps 5000 --periods 2 --seeds 3 --out target/aigb-bc
//! cargo run --release --example aigb_train --features aigb-tch -- --algo iql --data target/aigb-data/trajectories.csv \
//!     --pv-num 100000 --steps 5000 --periods 2 --seeds 3 --out target/aigb-iql
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use aigb::iql::{IqlBidder, IqlBidderParams, IqlTrainer};
use aigb::learned::{BcParams, BcTrainer};
use aigb::{
    auctionnet_advertisers, Bidder, EvalParams, Evaluator, OnlineLpParams, PolicyBidder, SimParams, Simulator,
    TrajectoryDataset,
};
use anyhow::Result;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use rl_core::{JsonlSink, Metrics, MetricsSink, Params};

#[derive(Parser, Debug)]
#[command(about = "Train a BC or IQL bidder on logged data and evaluate it on held-out periods")]
struct Args {
    /// Dataset CSV from aigb_generate.
    #[arg(long)]
    data: PathBuf,
    /// `bc` (behaviour cloning) or `iql`.
    #[arg(long, default_value = "bc")]
    algo: String,
    /// Gradient steps.
    #[arg(long, default_value_t = 2000)]
    steps: usize,
    /// Regress α (AuctionNet) instead of α / CPA.
    #[arg(long)]
    absolute: bool,
    /// Impressions per evaluation period (must match the data's market for a fair test).
    #[arg(long, default_value_t = 50_000)]
    pv_num: usize,
    /// Held-out periods (10 000, ...).
    #[arg(long, default_value_t = 1)]
    periods: u64,
    /// Seeds.
    #[arg(long, default_value_t = 2)]
    seeds: u64,
    /// Budget ratios.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.5, 0.75, 1.0, 1.25, 1.5])]
    budget_ratios: Vec<f64>,
    /// Slots.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0, 9, 18, 27, 36, 45])]
    slots: Vec<usize>,
    /// Output folder (policy.json or checkpoint/, loss.jsonl, loss.svg, results.md).
    #[arg(long, default_value = "target/aigb-bc")]
    out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    // one libtorch thread: the network is tiny, and the evaluation uses the cores
    tch::set_num_threads(1);
    std::fs::create_dir_all(&args.out)?;
    let data = TrajectoryDataset::load(&args.data)?;
    let mut sink = JsonlSink::create(args.out.join("loss.jsonl"))?;
    let mut curve = Vec::new();
    type Make = Box<dyn Fn() -> aigb::Result<Box<dyn Bidder>> + Sync>;
    let (name, make, trained): (&str, Make, String) = match args.algo.as_str() {
        "bc" => {
            let mut bc = BcTrainer::new(BcParams::default().cpa_relative(!args.absolute).check()?, &data)?;
            let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(args.steps as u64) };
            bar.set_style(ProgressStyle::with_template("BC {bar:40} {pos}/{len} steps {msg} {elapsed}")?);
            let mut avg = 0.0;
            bc.train(args.steps, &mut |step, loss| {
                avg += loss;
                if step % 100 == 0 {
                    let m = avg / 100.0;
                    avg = 0.0;
                    curve.push((step as f64, m));
                    let _ = sink.log(step, &Metrics::new().with("loss/bc", m));
                    bar.set_message(format!("loss {m:.4}"));
                }
                bar.inc(1);
            })?;
            bar.finish_and_clear();
            let policy = Arc::new(bc.policy("BC")?);
            std::fs::write(args.out.join("policy.json"), serde_json::to_string(&*policy)?)?;
            let trained = format!("{} examples, final MSE {:.4}", bc.len(), bc.mse()?);
            let make =
                move || -> aigb::Result<Box<dyn Bidder>> { Ok(Box::new(PolicyBidder::new(Arc::clone(&policy))?)) };
            ("BC", Box::new(make), trained)
        }
        "iql" => {
            let p = IqlBidderParams::default()
                .steps(args.steps as u64)
                .cpa_relative(!args.absolute)
                .progress(!args.quiet)
                .check()?;
            let mut iql = IqlTrainer::new(p, &data)?;
            let mut mem = rl_core::MemorySink::default();
            let summary = iql.train(&mut mem)?;
            for (step, m) in &mem.records {
                sink.log(*step, m)?;
            }
            curve = mem.series("loss/critic").into_iter().map(|(s, v)| (s as f64, v)).collect();
            iql.save(&args.out.join("checkpoint"))?;
            let trained = format!(
                "{} transitions, {} updates ({:.0}/s), final critic loss {:.4}",
                iql.len(),
                summary.steps,
                summary.updates_per_second,
                curve.last().map_or(f64::NAN, |c| c.1)
            );
            let policy = Arc::new(iql.into_policy("IQL"));
            let make = move || -> aigb::Result<Box<dyn Bidder>> { Ok(Box::new(IqlBidder::new(Arc::clone(&policy)))) };
            ("IQL", Box::new(make), trained)
        }
        other => anyhow::bail!("unknown --algo `{other}` (bc or iql)"),
    };
    sink.flush()?;
    let svg = args.out.join("loss.svg");
    {
        let root = SVGBackend::new(&svg, (600, 350)).into_drawing_area();
        root.fill(&WHITE)?;
        let ymax = curve.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
        let what = if name == "BC" { "behaviour cloning loss (100-step means)" } else { "IQL critic loss" };
        let mut chart = ChartBuilder::on(&root)
            .caption(what, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..(args.steps as f64).max(1.0), 0.0..ymax * 1.05)?;
        chart.configure_mesh().x_desc("step").y_desc("loss").draw()?;
        chart.draw_series(LineSeries::new(curve.clone(), BLUE.stroke_width(2)))?;
        root.present()?;
    }
    // held-out evaluation: the evaluator refuses any period of the dataset
    let scale = args.pv_num as f64 / 500_000.0;
    let sim = Simulator::new(SimParams::default().pv_num(args.pv_num).check()?, auctionnet_advertisers(scale))?;
    let params = EvalParams::default()
        .periods((10_000..10_000 + args.periods).collect())
        .seeds((0..args.seeds).collect())
        .budget_ratios(args.budget_ratios.clone())
        .slots(args.slots.clone())
        .check()?;
    let ev = Evaluator::new(params, &sim, &data.periods(), OnlineLpParams::default().budget_scale(scale))?;
    let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(0) };
    bar.set_style(ProgressStyle::with_template("eval {bar:40} {pos}/{len} runs {elapsed}")?);
    let rep = ev.evaluate(name, make.as_ref(), &|d, t| {
        bar.set_length(t as u64);
        bar.set_position(d as u64);
    })?;
    bar.finish_and_clear();
    let mut md = format!(
        "| bidder | {} |\n|---|{}\n| {name} | ",
        args.budget_ratios.iter().map(|b| format!("budget {:.0}%", 100.0 * b)).collect::<Vec<_>>().join(" | "),
        "---|".repeat(args.budget_ratios.len())
    );
    md +=
        &rep.summary.iter().map(|s| format!("{:.2} ± {:.2}", s.score_mean, s.score_sd)).collect::<Vec<_>>().join(" | ");
    md += " |\n\nbudget spent / runs over the CPA constraint: ";
    md += &rep
        .summary
        .iter()
        .map(|s| format!("{:.0}% / {:.0}%", 100.0 * s.budget_spent, 100.0 * s.cpa_exceeded))
        .collect::<Vec<_>>()
        .join(", ");
    md += &format!("\n\ntraining: {trained}\n");
    std::fs::write(args.out.join("results.md"), &md)?;
    if !args.quiet {
        println!("{md}");
    }
    Ok(())
}
