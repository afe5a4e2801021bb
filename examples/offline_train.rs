//! Trains any offline algorithm on any dataset, evaluates it with the protocol of DMG/SCAS (N
//! deterministic episodes every M updates, final and best normalised scores), over several
//! seeds; optionally fine-tunes online afterwards (DMG offline-to-online).
//!
//! ```text
//! # CI size (Pendulum data from offline_generate)
//! cargo run --release --features offline-rl --example offline_train -- --algo dmg \
//!     --data target/offline-data/pendulum-medium-replay.safetensors --task pendulum --steps 2000 --seeds 1
//! # MuJoCo (data from offline_generate --task hopper; feature offline-rl-mujoco)
//! cargo run --release --features offline-rl-mujoco --example offline_train -- --algo scas \
//!     --data target/offline-data/hopper-medium.safetensors --task hopper --steps 100000 --seeds 3
//! # any D4RL/Minari file: --data hopper-medium-v2.hdf5 (or a Minari dataset directory)
//! ```
//!
//! Defaults per algorithm are the papers' (DMG's `ν` from the dataset name); the actor's cosine
//! schedule is stretched over `--steps`. Writes `OUT/seed-K/metrics.jsonl`,
//! `OUT/seed-K/checkpoint/` (`--resume` continues it), `OUT/summary.json`, `OUT/curve.svg`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;
use offline_rl::algo::{AlgoKind, AlgorithmParams, DatasetKind};
use offline_rl::finetune::{finetune, FinetuneParams};
use offline_rl::tasks::Task;
use offline_rl::train::{FitParams, FitSummary, OfflineData, Preprocess, Trainer};
use offline_rl::RewardTransform;
use plotters::prelude::*;
use rl_agents::Evaluator;
use rl_core::{Env, JsonlSink, Params};

#[derive(Parser, Debug)]
#[command(about = "Train an offline RL algorithm on a dataset and evaluate it")]
struct Args {
    /// bc, td3bc, iql, dmg or scas.
    #[arg(long)]
    algo: String,
    /// Dataset: .safetensors (ours), .hdf5 (D4RL) or a Minari directory.
    #[arg(long)]
    data: PathBuf,
    /// Evaluation task (pendulum, pointmaze-umaze, maze2d-umaze, hopper, halfcheetah, walker2d).
    #[arg(long)]
    task: String,
    /// Gradient updates.
    #[arg(long, default_value_t = 1_000_000)]
    steps: u64,
    /// Updates between evaluations.
    #[arg(long, default_value_t = 20_000)]
    eval_every: u64,
    /// Episodes per evaluation.
    #[arg(long, default_value_t = 10)]
    eval_episodes: usize,
    /// Seeds (0..seeds).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Hidden widths of every network (default: the paper's 256,256).
    #[arg(long, value_delimiter = ',')]
    hidden: Option<Vec<i64>>,
    /// JSON object of parameter overrides, e.g. '{"nu": 10.0}'.
    #[arg(long)]
    config: Option<String>,
    /// SCAS: dynamics pretraining steps (paper: 500001).
    #[arg(long)]
    dynamics_steps: Option<u64>,
    /// Reward transform: none, return_range (IQL on locomotion), sparse_minus_one.
    #[arg(long, default_value = "auto")]
    reward: String,
    /// Do not normalise states.
    #[arg(long)]
    no_normalize: bool,
    /// Online fine-tuning steps after offline training (DMG offline-to-online); 0: none.
    #[arg(long, default_value_t = 0)]
    finetune_steps: u64,
    /// Updates between checkpoints (0: at the end only).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: u64,
    /// Continue each seed from OUT/seed-K/checkpoint.
    #[arg(long)]
    resume: bool,
    /// Output folder.
    #[arg(long, default_value = "target/offline-train")]
    out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

fn params_for(args: &Args, kind: AlgoKind, data_kind: DatasetKind) -> Result<AlgorithmParams> {
    let mut p = AlgorithmParams::defaults(kind, data_kind).anneal_over(args.steps);
    if let Some(h) = &args.hidden {
        p = p.hidden(h.clone());
    }
    if let (AlgorithmParams::Scas(s), Some(n)) = (&mut p, args.dynamics_steps) {
        s.dynamics.steps = n;
    }
    if let Some(c) = &args.config {
        let mut v = serde_json::to_value(&p)?;
        let over: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(c).context("--config must be a JSON object")?;
        for (k, x) in over {
            v[k] = x;
        }
        p = serde_json::from_value(v).context("--config")?;
    }
    Ok(p)
}

fn run_seed(
    args: &Args,
    params: &AlgorithmParams,
    data: &mut OfflineData,
    task: Task,
    seed: u64,
    dir: &Path,
) -> Result<(FitSummary, Option<FitSummary>)> {
    std::fs::create_dir_all(dir)?;
    let env = task.make()?;
    let (obs, act) = (env.observation_space().clone(), env.action_space().clone());
    let mut algo = params.build(&obs, &act, tch::Device::Cpu, seed)?;
    let fit = FitParams::default()
        .steps(args.steps)
        .eval_every(args.eval_every)
        .checkpoint_every(args.checkpoint_every)
        .progress(!args.quiet)
        .check()?;
    let mut trainer = Trainer::new(fit, seed);
    let ckpt = dir.join("checkpoint");
    let mut sink = if args.resume && ckpt.exists() {
        trainer.load(&ckpt, algo.as_mut(), data)?;
        JsonlSink::append(dir.join("metrics.jsonl"))?
    } else {
        JsonlSink::create(dir.join("metrics.jsonl"))?
    };
    let mut evaluator = Evaluator::new(args.eval_episodes, 1000 + 100 * seed, |_| {
        task.make().map_err(|e| rl_agents::AgentError::Protocol(e.to_string()))
    })?;
    let summary = trainer.run(algo.as_mut(), data, Some(&mut evaluator), &mut sink, Some(dir))?;
    let mut online = None;
    if args.finetune_steps > 0 {
        let mut env = task.make()?;
        let ft = FinetuneParams::default()
            .steps(args.finetune_steps)
            .eval_every(args.eval_every.max(1))
            .progress(!args.quiet)
            .check()?;
        let mut sink = JsonlSink::create(dir.join("finetune.jsonl"))?;
        online = Some(finetune(algo.as_mut(), data, &mut env, &ft, Some(&mut evaluator), &mut sink, seed)?);
    }
    Ok((summary, online))
}

fn key(e: &offline_rl::train::Evaluation) -> f64 {
    e.score.unwrap_or(e.returns.mean_return)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let kind: AlgoKind = args.algo.parse()?;
    let task: Task = args.task.parse()?;
    let (dataset, report) =
        offline_rl::data::load(&args.data).with_context(|| format!("loading {}", args.data.display()))?;
    let mut dataset = dataset;
    if dataset.info().score_env.is_empty() {
        if let Some(f) = task.d4rl_family() {
            dataset.info_mut().score_env = f.into();
        }
    }
    let data_kind = DatasetKind::from_name(&dataset.info().name);
    let params = params_for(&args, kind, data_kind)?;
    let reward = match args.reward.as_str() {
        "auto" if kind == AlgoKind::Iql && task.d4rl_family().is_some() => {
            RewardTransform::ReturnRange { target: 1000.0 }
        }
        "auto" | "none" => RewardTransform::None,
        "return_range" => RewardTransform::ReturnRange { target: 1000.0 },
        "sparse_minus_one" => RewardTransform::SparseMinusOne,
        other => anyhow::bail!("unknown --reward {other}"),
    };
    let pre = Preprocess { normalize_states: !args.no_normalize, reward, ..Preprocess::default() };
    println!(
        "{}: {} transitions, {} episodes ({} rows dropped), algo {}, {} updates x {} seeds",
        dataset.info().name,
        dataset.len(),
        report.episodes,
        report.dropped_total(),
        kind.as_str(),
        args.steps,
        args.seeds
    );
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("params.json"), serde_json::to_string_pretty(&params)?)?;
    let mut results = Vec::new();
    for seed in args.first_seed..args.first_seed + args.seeds {
        let dir = args.out.join(format!("seed-{seed}"));
        // fresh per seed: fine-tuning appends online transitions to the buffer
        let mut data = OfflineData::with_room(&dataset, &pre, args.finetune_steps as usize)?;
        let (s, online) = run_seed(&args, &params, &mut data, task, seed, &dir)?;
        let (last, best) = (s.last().map(key), s.best().map(key));
        println!(
            "seed {seed}: final {:.1}, best {:.1}, {:.0} updates/s",
            last.unwrap_or(f64::NAN),
            best.unwrap_or(f64::NAN),
            s.updates_per_second
        );
        if let Some(o) = &online {
            println!(
                "seed {seed}: online fine-tuning {} steps: {:.1} -> {:.1}",
                o.steps,
                o.evaluations.first().map(key).unwrap_or(f64::NAN),
                o.last().map(key).unwrap_or(f64::NAN)
            );
        }
        results.push(serde_json::json!({"seed": seed, "offline": s, "online": online}));
    }
    let finals: Vec<f64> =
        results.iter().filter_map(|r| r["offline"]["evaluations"].as_array()?.last()?.get("score")?.as_f64()).collect();
    let summary = serde_json::json!({
        "algo": kind.as_str(), "dataset": dataset.info().name, "task": task.name(), "steps": args.steps,
        "load_report": report, "runs": results, "final_scores": finals,
    });
    std::fs::write(args.out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
    plot(&args.out, &results)?;
    Ok(())
}

fn plot(out: &Path, results: &[serde_json::Value]) -> Result<()> {
    let series: Vec<Vec<(f64, f64)>> = results
        .iter()
        .map(|r| {
            r["offline"]["evaluations"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter_map(|e| {
                            Some((
                                e["step"].as_f64()?,
                                e["score"].as_f64().or_else(|| e["returns"]["mean_return"].as_f64())?,
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let pts: Vec<&(f64, f64)> = series.iter().flatten().collect();
    if pts.is_empty() {
        return Ok(());
    }
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
    let ymin = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let ymax = pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let pad = ((ymax - ymin) * 0.1).max(1.0);
    let path = out.join("curve.svg");
    let root = SVGBackend::new(&path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("evaluation (score, or return without references)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..xmax, (ymin - pad)..(ymax + pad))?;
    chart.configure_mesh().x_desc("gradient updates").draw()?;
    for (i, s) in series.iter().enumerate() {
        let c = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.iter().copied(), c))?
            .label(format!("seed {i}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], c));
    }
    chart.configure_series_labels().border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
