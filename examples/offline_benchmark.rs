//! The results table: every algorithm × dataset × seed on the datasets of a task (written by
//! `offline_generate`), final and best normalised scores (mean ± std over seeds), and
//! optionally the robustness of each final policy under test-time perturbations (SCAS §5).
//! Runs are resumable: a finished run (its `result.json`) is read, not retrained.
//!
//! ```text
//! cargo run --release --features offline-rl --example offline_benchmark -- --task pendulum \
//!     --data-dir target/offline-data --kinds medium,medium-replay,medium-expert --seeds 3 \
//!     --steps 20000 --eval-every 5000 --hidden 64,64 --dynamics-steps 5000 \
//!     --robustness obs:0.1,obs:0.3,act:0.1,act:0.3 --out target/offline-bench
//! ```
//!
//! Writes `OUT/{task}-{kind}/{algo}/seed-K/{metrics.jsonl, result.json, checkpoint/}` and
//! `OUT/results.md` (markdown tables), `OUT/results.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Parser;
use offline_rl::algo::{AlgoKind, AlgorithmParams, DatasetKind, NormalizedPolicy};
use offline_rl::robust::{Perturbation, PerturbedPolicy};
use offline_rl::tasks::Task;
use offline_rl::train::{FitParams, OfflineData, Preprocess, Trainer};
use offline_rl::RewardTransform;
use rl_agents::Evaluator;
use rl_core::{Env, EpisodeSummary, JsonlSink, Params, SpaceKind};
use serde::{Deserialize, Serialize};

#[derive(Parser, Debug)]
#[command(about = "Train every algorithm on every dataset of a task over seeds; write the results table")]
struct Args {
    /// Task (pendulum, pointmaze-umaze, maze2d-umaze, hopper, halfcheetah, walker2d).
    #[arg(long)]
    task: String,
    /// Folder of `{task}-{kind}.safetensors` files.
    #[arg(long, default_value = "target/offline-data")]
    data_dir: PathBuf,
    /// Dataset kinds (file suffixes); `maze2d-*` tasks have one dataset: use `other`.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["medium".to_string(), "medium-replay".into(), "medium-expert".into()])]
    kinds: Vec<String>,
    /// Algorithms.
    #[arg(long, value_delimiter = ',', default_values_t = vec!["bc".to_string(), "td3bc".into(), "iql".into(), "dmg".into(), "scas".into()])]
    algos: Vec<String>,
    /// Seeds 0..seeds.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Gradient updates per run.
    #[arg(long, default_value_t = 1_000_000)]
    steps: u64,
    /// Updates between evaluations.
    #[arg(long, default_value_t = 20_000)]
    eval_every: u64,
    /// Episodes per evaluation.
    #[arg(long, default_value_t = 10)]
    eval_episodes: usize,
    /// Hidden widths (default: the papers' 256,256).
    #[arg(long, value_delimiter = ',')]
    hidden: Option<Vec<i64>>,
    /// SCAS dynamics pretraining steps (paper: 500001).
    #[arg(long)]
    dynamics_steps: Option<u64>,
    /// Perturbations for the robustness table, e.g. obs:0.1,act:0.2.
    #[arg(long, value_delimiter = ',')]
    robustness: Vec<String>,
    /// Output folder.
    #[arg(long, default_value = "target/offline-bench")]
    out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunResult {
    task: String,
    dataset: String,
    algo: String,
    seed: u64,
    steps: u64,
    final_score: f64,
    best_score: f64,
    final_return: f64,
    updates_per_second: f64,
    seconds: f64,
    robustness: BTreeMap<String, f64>,
}

fn perturbation(s: &str) -> Result<Perturbation> {
    let (k, v) = s.split_once(':').context("perturbation as obs:STD or act:STD")?;
    let std: f64 = v.parse()?;
    Ok(match k {
        "obs" => Perturbation::Observation { std },
        "act" => Perturbation::Action { std },
        _ => anyhow::bail!("perturbation kind {k} (obs or act)"),
    })
}

fn score(e: &offline_rl::train::Evaluation) -> f64 {
    e.score.unwrap_or(e.returns.mean_return)
}

#[allow(clippy::too_many_arguments)]
fn run(
    args: &Args,
    task: Task,
    dataset: &offline_rl::Dataset,
    kind: AlgoKind,
    seed: u64,
    dir: &Path,
    perturbations: &[Perturbation],
) -> Result<RunResult> {
    let done = dir.join("result.json");
    if done.exists() {
        return Ok(serde_json::from_str(&std::fs::read_to_string(&done)?)?);
    }
    std::fs::create_dir_all(dir)?;
    let data_kind = DatasetKind::from_name(&dataset.info().name);
    let mut p = AlgorithmParams::defaults(kind, data_kind).anneal_over(args.steps);
    if let Some(h) = &args.hidden {
        p = p.hidden(h.clone());
    }
    if let (AlgorithmParams::Scas(s), Some(n)) = (&mut p, args.dynamics_steps) {
        s.dynamics.steps = n;
    }
    let reward = if kind == AlgoKind::Iql && task.d4rl_family().is_some() {
        RewardTransform::ReturnRange { target: 1000.0 }
    } else {
        RewardTransform::None
    };
    let data = OfflineData::new(dataset, &Preprocess { reward, ..Preprocess::default() })?;
    let env = task.make()?;
    let (obs, act) = (env.observation_space().clone(), env.action_space().clone());
    let mut algo = p.build(&obs, &act, tch::Device::Cpu, seed)?;
    let fit = FitParams::default().steps(args.steps).eval_every(args.eval_every).progress(!args.quiet).check()?;
    let mut trainer = Trainer::new(fit, seed);
    let mut sink = JsonlSink::create(dir.join("metrics.jsonl"))?;
    let make = |_| task.make().map_err(|e| rl_agents::AgentError::Protocol(e.to_string()));
    let mut evaluator = Evaluator::new(args.eval_episodes, 1000 + 100 * seed, make)?;
    let s = trainer.run(algo.as_mut(), &data, Some(&mut evaluator), &mut sink, Some(dir))?;
    let last = s.last().context("no evaluation")?;
    let mut robustness = BTreeMap::new();
    let (low, high) = match act.kind() {
        SpaceKind::Box { low, high } => (low.to_vec(), high.to_vec()),
        SpaceKind::Discrete { .. } => (vec![], vec![]),
    };
    for pert in perturbations {
        let base = NormalizedPolicy { inner: algo.policy(), norm: data.norm() };
        let pp = PerturbedPolicy::new(&base, *pert, data.norm(), low.clone(), high.clone());
        let eps = evaluator.run(&pp)?;
        let ret = EpisodeSummary::from_episodes(&eps).mean_return;
        robustness.insert(pert.label(), data.score(ret).unwrap_or(ret));
    }
    let r = RunResult {
        task: task.name().into(),
        dataset: dataset.info().name.clone(),
        algo: kind.as_str().into(),
        seed,
        steps: s.steps,
        final_score: score(last),
        best_score: s.best().map(score).unwrap_or(f64::NAN),
        final_return: last.returns.mean_return,
        updates_per_second: s.updates_per_second,
        seconds: s.seconds,
        robustness,
    };
    std::fs::write(&done, serde_json::to_string_pretty(&r)?)?;
    Ok(r)
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let task: Task = args.task.parse()?;
    let algos: Vec<AlgoKind> = args.algos.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
    let perts: Vec<Perturbation> = args.robustness.iter().map(|s| perturbation(s)).collect::<Result<_>>()?;
    let mut all: Vec<RunResult> = Vec::new();
    for kind in &args.kinds {
        let name = if kind == "other" { task.name().to_string() } else { format!("{}-{}", task.name(), kind) };
        let path = args.data_dir.join(format!("{name}.safetensors"));
        let (mut dataset, _) = offline_rl::data::load(&path).with_context(|| format!("loading {}", path.display()))?;
        if dataset.info().score_env.is_empty() {
            if let Some(f) = task.d4rl_family() {
                dataset.info_mut().score_env = f.into();
            }
        }
        for algo in &algos {
            for seed in 0..args.seeds {
                let dir = args.out.join(&name).join(algo.as_str()).join(format!("seed-{seed}"));
                let r = run(&args, task, &dataset, *algo, seed, &dir, &perts)?;
                println!(
                    "{name:<28} {:<6} seed {seed}: final {:>7.1} best {:>7.1} ({:.0} updates/s)",
                    r.algo, r.final_score, r.best_score, r.updates_per_second
                );
                all.push(r);
            }
        }
    }
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("results.json"), serde_json::to_string_pretty(&all)?)?;
    let mut md = format!(
        "Task `{}`, {} updates per run, {} seeds, {} evaluation episodes every {} updates. Cells: final score mean ± std over seeds (best score mean in brackets).\n\n| dataset |",
        task.name(), args.steps, args.seeds, args.eval_episodes, args.eval_every
    );
    for a in &algos {
        md += &format!(" {} |", a.as_str());
    }
    md += "\n|---|";
    md += &"---|".repeat(algos.len());
    md += "\n";
    let datasets: Vec<String> = {
        let mut d: Vec<String> = all.iter().map(|r| r.dataset.clone()).collect();
        d.dedup();
        d
    };
    for d in &datasets {
        md += &format!("| {d} |");
        for a in &algos {
            let runs: Vec<&RunResult> = all.iter().filter(|r| &r.dataset == d && r.algo == a.as_str()).collect();
            let (m, s) = mean_std(&runs.iter().map(|r| r.final_score).collect::<Vec<_>>());
            let (b, _) = mean_std(&runs.iter().map(|r| r.best_score).collect::<Vec<_>>());
            md += &format!(" {m:.1} ± {s:.1} ({b:.1}) |");
        }
        md += "\n";
    }
    if !perts.is_empty() {
        md += "\nRobustness: final policies evaluated under test-time perturbations (score mean over datasets and seeds).\n\n| perturbation |";
        for a in &algos {
            md += &format!(" {} |", a.as_str());
        }
        md += "\n|---|";
        md += &"---|".repeat(algos.len());
        md += "\n| none (final) |";
        for a in &algos {
            let v: Vec<f64> = all.iter().filter(|r| r.algo == a.as_str()).map(|r| r.final_score).collect();
            md += &format!(" {:.1} |", mean_std(&v).0);
        }
        md += "\n";
        for p in &perts {
            md += &format!("| {} |", p.label());
            for a in &algos {
                let v: Vec<f64> = all
                    .iter()
                    .filter(|r| r.algo == a.as_str())
                    .filter_map(|r| r.robustness.get(&p.label()).copied())
                    .collect();
                md += &format!(" {:.1} |", mean_std(&v).0);
            }
            md += "\n";
        }
    }
    std::fs::write(args.out.join("results.md"), &md)?;
    println!("\n{md}");
    Ok(())
}
