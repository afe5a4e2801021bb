//! PPO on CartPole-v1 (CleanRL `ppo.py` defaults: 4 environments × 128 steps, lr 2.5e-4
//! annealed, 4 epochs of 4 minibatches, clip 0.2, entropy 0.01, 64-64 tanh networks).
//!
//! ```text
//! cargo run --release --features rl-agents --example ppo_cartpole                   # 500k steps, 1 seed
//! cargo run --release --features rl-agents --example ppo_cartpole -- --seeds 3      # the reported run
//! cargo run --features rl-agents --example ppo_cartpole -- --steps 2048 --eval-every 1024  # CI size
//! ```
//!
//! Writes `OUT/seed{k}/metrics.jsonl`, `OUT/seed{k}/checkpoint/`, `OUT/curves.svg`,
//! `OUT/summary.json`. Evaluation: 10 deterministic (greedy) episodes, gymnasium seeds 1000..1009.
#[path = "support/agents.rs"]
mod support;

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use rl_agents::{train, Evaluator, OnlineTrainer, Ppo, PpoParams, TrainParams};
use rl_core::Params;
use rl_envs::classic::{CartPole, CartPoleParams};
use rl_envs::wrappers::VecEnv;

#[derive(Parser, Debug)]
#[command(about = "PPO on CartPole-v1")]
struct Args {
    /// Environment steps per seed (CleanRL: 500000).
    #[arg(long, default_value_t = 500_000)]
    steps: u64,
    /// Number of seeds.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Parallel environments (CleanRL: 4).
    #[arg(long, default_value_t = 4)]
    envs: usize,
    /// Steps between evaluations.
    #[arg(long, default_value_t = 10_000)]
    eval_every: u64,
    /// Output folder.
    #[arg(long, default_value = "target/ppo-cartpole")]
    out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Run the seeds in parallel threads (one libtorch thread each).
    #[arg(long)]
    parallel: bool,
}

fn run_seed(args: &Args, seed: u64) -> Result<(f64, support::Curve)> {
    let make = |_| CartPole::new(CartPoleParams::default().check()?);
    let envs = VecEnv::from_fn(args.envs, seed, make)?;
    let (obs, act) = (envs.observation_space().clone(), envs.action_space().clone());
    let mut ppo = Ppo::new(PpoParams::classic_control(args.steps).check()?, &obs, &act, tch::Device::Cpu, seed)?;
    let mut trainer = OnlineTrainer::new(envs)?;
    let mut eval = Evaluator::new(10, 1000, |_| Ok(make(0)?))?;
    let dir = args.out.join(format!("seed{seed}"));
    let mut sink = rl_core::JsonlSink::create(dir.join("metrics.jsonl"))?;
    let tp = TrainParams::default()
        .total_steps(args.steps)
        .eval_every(args.eval_every)
        .log_every(2_048)
        .checkpoint_every(args.steps)
        .progress(!args.quiet && !args.parallel)
        .check()?;
    let s = train(&mut ppo, &mut trainer, &tp, Some(&mut eval), &mut sink, Some(&dir.join("checkpoint")))?;
    let last = s.evaluations.last().map_or(f64::NAN, |(_, e)| e.mean_return);
    println!(
        "seed {seed}: final eval return {last:.1}; {} steps, {} updates, {:.0} s",
        s.env_steps, s.updates, s.seconds
    );
    drop(sink);
    Ok((last, support::eval_curve(&format!("seed {seed}"), &dir.join("metrics.jsonl"))?))
}

fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let results: Vec<(f64, support::Curve)> = if args.parallel {
        tch::set_num_threads(1);
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
        "PPO on CartPole-v1",
        "eval return (10 episodes)",
        &curves,
        Some(500.0),
    )?;
    let reach: Vec<Option<f64>> = curves.iter().map(|c| support::steps_to(c, 500.0)).collect();
    println!("final eval return over seeds: {}", support::mean_std(&finals));
    println!("steps to first eval of 500: {reach:?}");
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&serde_json::json!({"final_eval_return": finals, "steps_to_500": reach}))?,
    )?;
    Ok(())
}
