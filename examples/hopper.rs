//! TD3 or SAC on Hopper-v4 (MuJoCo; `--features mujoco`, needs `make provision-mujoco`).
//!
//! ```text
//! cargo run --release --features rl-agents,mujoco --example hopper -- --algo sac --steps 300000   # the reported run (docs/rl-agents.md)
//! cargo run --release --features rl-agents,mujoco --example hopper -- --algo td3 --steps 300000
//! cargo run --features rl-agents,mujoco --example hopper -- --steps 400 --random-steps 200 --hidden 32 --eval-every 200  # CI size
//! ```
//!
//! Defaults: TD3 with the authors' code (`sfujimoto/TD3`: 256-256, lr 3e-4, batch 256,
//! policy noise 0.2, clip 0.5, delay 2, exploration 0.1, 25,000 random steps); SAC v2 (5,000
//! random steps). Evaluation: 10 deterministic episodes (gymnasium seeds 1000..1009).
//! Writes `OUT/metrics.jsonl`, `OUT/checkpoint/` (every `--checkpoint-every` steps; `--resume`
//! continues from it), `OUT/curve.svg`.
#[path = "support/agents.rs"]
mod support;

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use rl_agents::{
    load_run, train, Agent, BatchLearner, Evaluator, OffPolicy, OffPolicyParams, OnlineTrainer, Sac, SacParams, Td3,
    Td3Params, TrainParams,
};
use rl_core::Params;
use rl_envs::mujoco::{HopperParams, Locomotion};
use rl_envs::wrappers::VecEnv;

#[derive(Parser, Debug)]
#[command(about = "TD3 or SAC on Hopper-v4")]
struct Args {
    /// `td3` or `sac`.
    #[arg(long, default_value = "td3")]
    algo: String,
    /// Environment steps.
    #[arg(long, default_value_t = 300_000)]
    steps: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Uniform random steps before learning (default: 25000 for TD3, 5000 for SAC).
    #[arg(long)]
    random_steps: Option<u64>,
    /// Hidden width (two layers).
    #[arg(long, default_value_t = 256)]
    hidden: i64,
    /// Steps between evaluations.
    #[arg(long, default_value_t = 5_000)]
    eval_every: u64,
    /// Steps between checkpoints.
    #[arg(long, default_value_t = 50_000)]
    checkpoint_every: u64,
    /// Continue from OUT/checkpoint.
    #[arg(long)]
    resume: bool,
    /// Output folder (default target/hopper-ALGO).
    #[arg(long)]
    out: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// libtorch intra-op threads (1: the networks are small; more threads mostly add overhead).
    #[arg(long, default_value_t = 1)]
    threads: i32,
}

fn run<A: BatchLearner>(args: &Args, agent: A, random_steps: u64, out: &std::path::Path) -> Result<()> {
    let cpu0 = support::thread_cpu_seconds();
    let make = |_| Locomotion::hopper(HopperParams::default().check()?);
    let envs = VecEnv::from_fn(1, args.seed, make)?;
    let (obs, act) = (envs.observation_space().clone(), envs.action_space().clone());
    let sched = OffPolicyParams::default().random_steps(random_steps).learning_starts(random_steps.max(1));
    let mut agent = OffPolicy::new(sched.check()?, agent, &obs, &act, args.seed)?;
    let mut trainer = OnlineTrainer::new(envs)?;
    let ckpt = out.join("checkpoint");
    let mut sink = if args.resume {
        load_run(&ckpt, &mut agent, &mut trainer)?;
        println!("resumed at {} steps, {} updates", trainer.steps(), Agent::updates(&agent));
        rl_core::JsonlSink::append(out.join("metrics.jsonl"))?
    } else {
        rl_core::JsonlSink::create(out.join("metrics.jsonl"))?
    };
    let (steps0, updates0) = (trainer.steps(), Agent::updates(&agent));
    let mut eval = Evaluator::new(10, 1000, |_| Ok(make(0)?))?;
    let tp = TrainParams::default()
        .total_steps(args.steps)
        .eval_every(args.eval_every)
        .log_every(1_000)
        .checkpoint_every(args.checkpoint_every)
        .progress(!args.quiet)
        .check()?;
    let s = train(&mut agent, &mut trainer, &tp, Some(&mut eval), &mut sink, Some(&ckpt))?;
    let best = s.evaluations.iter().map(|(_, e)| e.mean_return).fold(f64::NEG_INFINITY, f64::max);
    let last = s.evaluations.last().map_or(f64::NAN, |(_, e)| e.mean_return);
    println!(
        "{} Hopper seed {}: last eval {last:.1}, best {best:.1}; {} steps, {} updates in {:.0} s wall{}",
        args.algo,
        args.seed,
        s.env_steps,
        s.updates,
        s.seconds,
        support::cpu_rates(cpu0, s.env_steps - steps0, s.updates - updates0)
    );
    let curve = support::eval_curve(&args.algo, &out.join("metrics.jsonl"))?;
    println!("first eval >= 1000 at step {:?}", support::steps_to(&curve, 1000.0));
    support::plot(
        &out.join("curve.svg"),
        &format!("{} on Hopper-v4", args.algo.to_uppercase()),
        "eval return",
        &[curve],
        Some(1000.0),
    )?;
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    tch::set_num_threads(args.threads);
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("target/hopper-{}", args.algo)));
    std::fs::create_dir_all(&out)?;
    let env = Locomotion::hopper(HopperParams::default().check()?)?;
    let (obs, act) = (rl_core::Env::observation_space(&env).clone(), rl_core::Env::action_space(&env).clone());
    let h = [args.hidden, args.hidden];
    match args.algo.as_str() {
        "td3" => {
            let agent = Td3::new(Td3Params::default().hidden(h).check()?, &obs, &act, tch::Device::Cpu, args.seed)?;
            run(&args, agent, args.random_steps.unwrap_or(25_000), &out)
        }
        "sac" => {
            let agent = Sac::new(SacParams::default().hidden(h).check()?, &obs, &act, tch::Device::Cpu, args.seed)?;
            run(&args, agent, args.random_steps.unwrap_or(5_000), &out)
        }
        other => anyhow::bail!("unknown --algo {other} (td3 or sac)"),
    }
}
