//! SAC on Pendulum-v1 (SAC v2 defaults: 256-256 networks, lr 3e-4, batch 256, τ = 0.005,
//! automatic entropy tuning; 5,000 random steps).
//!
//! ```text
//! cargo run --release --features rl-agents --example sac_pendulum                       # 20k steps, 1 seed
//! cargo run --release --features rl-agents --example sac_pendulum -- --seeds 3          # the reported run
//! cargo run --features rl-agents --example sac_pendulum -- --steps 600 --random-steps 200 --hidden 32  # CI size
//! ```
//!
//! Writes `OUT/seed{k}/metrics.jsonl` (JSONL metrics), `OUT/seed{k}/checkpoint/` (one checkpoint
//! unit, `rl_agents::save_run`: agent, replay buffer and trainer state at the end),
//! `OUT/curves.svg` (evaluation return of every seed) and `OUT/summary.json`. Evaluation: 10
//! deterministic episodes, gymnasium seeds 1000..1009.
#[path = "support/agents.rs"]
mod support;

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use rl_agents::{train, Evaluator, OffPolicy, OffPolicyParams, OnlineTrainer, Sac, SacParams, TrainParams};
use rl_core::{Params, Space};
use rl_envs::classic::{Pendulum, PendulumParams};
use rl_envs::wrappers::VecEnv;

#[derive(Parser, Debug)]
#[command(about = "SAC on Pendulum-v1")]
struct Args {
    /// Environment steps per seed.
    #[arg(long, default_value_t = 20_000)]
    steps: u64,
    /// Number of seeds (0, 1, ...).
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Uniform random steps before learning (CleanRL / CORL: 5000).
    #[arg(long, default_value_t = 5_000)]
    random_steps: u64,
    /// Hidden width of actor and critics (two layers).
    #[arg(long, default_value_t = 256)]
    hidden: i64,
    /// Steps between evaluations.
    #[arg(long, default_value_t = 1_000)]
    eval_every: u64,
    /// Output folder.
    #[arg(long, default_value = "target/sac-pendulum")]
    out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Run the seeds in parallel threads.
    #[arg(long)]
    parallel: bool,
    /// libtorch intra-op threads (1: the networks are small, and the CPU time printed per seed
    /// then counts all of a seed's work).
    #[arg(long, default_value_t = 1)]
    threads: i32,
}

fn run_seed(args: &Args, seed: u64) -> Result<(f64, support::Curve)> {
    let cpu0 = support::thread_cpu_seconds();
    let make = |_| Pendulum::new(PendulumParams::default().check()?);
    let envs = VecEnv::from_fn(1, seed, make)?;
    let (obs, act): (Space, Space) = (envs.observation_space().clone(), envs.action_space().clone());
    let params = SacParams::default().hidden([args.hidden, args.hidden]).check()?;
    let sac = Sac::new(params, &obs, &act, tch::Device::Cpu, seed)?;
    let sched = OffPolicyParams::default().random_steps(args.random_steps).learning_starts(args.random_steps.max(1));
    let mut agent = OffPolicy::new(sched.check()?, sac, &obs, &act, seed)?;
    let mut trainer = OnlineTrainer::new(envs)?;
    let mut eval = Evaluator::new(10, 1000, |_| Ok(make(0)?))?;
    let dir = args.out.join(format!("seed{seed}"));
    let mut sink = rl_core::JsonlSink::create(dir.join("metrics.jsonl"))?;
    let tp = TrainParams::default()
        .total_steps(args.steps)
        .eval_every(args.eval_every)
        .log_every(1_000)
        .checkpoint_every(args.steps)
        .progress(!args.quiet && !args.parallel)
        .check()?;
    let s = train(&mut agent, &mut trainer, &tp, Some(&mut eval), &mut sink, Some(&dir.join("checkpoint")))?;
    let last = s.evaluations.last().map_or(f64::NAN, |(_, e)| e.mean_return);
    println!(
        "seed {seed}: final eval return {last:.1} after {} steps, {} updates, {:.0} s wall ({:.1} env steps per s){}",
        s.env_steps,
        s.updates,
        s.seconds,
        s.env_steps as f64 / s.seconds,
        support::cpu_rates(cpu0, s.env_steps, s.updates)
    );
    drop(sink);
    Ok((last, support::eval_curve(&format!("seed {seed}"), &dir.join("metrics.jsonl"))?))
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    tch::set_num_threads(args.threads);
    let results: Vec<(f64, support::Curve)> = if args.parallel {
        std::thread::scope(|sc| {
            let handles: Vec<_> = (0..args.seeds)
                .map(|seed| {
                    sc.spawn({
                        let args = &args;
                        move || run_seed(args, seed)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow::anyhow!("a seed's thread panicked"))?)
                .collect::<Result<Vec<_>>>()
        })?
    } else {
        (0..args.seeds).map(|seed| run_seed(&args, seed)).collect::<Result<Vec<_>>>()?
    };
    let finals: Vec<f64> = results.iter().map(|r| r.0).collect();
    let curves: Vec<support::Curve> = results.into_iter().map(|r| r.1).collect();
    support::plot(
        &args.out.join("curves.svg"),
        "SAC on Pendulum-v1",
        "eval return (10 episodes)",
        &curves,
        Some(-200.0),
    )?;
    let reach: Vec<Option<f64>> = curves.iter().map(|c| support::steps_to(c, -200.0)).collect();
    println!("final eval return over seeds: {}", support::mean_std(&finals));
    println!("steps to reach -200: {reach:?}");
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&serde_json::json!({"final_eval_return": finals, "steps_to_minus_200": reach}))?,
    )?;
    Ok(())
}
