//! Generates D4RL-style datasets with our own agents (`offline_rl::generate`): for a task, an
//! online SAC run with evaluated snapshots, then `random`, `medium`, `medium-replay`,
//! `medium-expert` and `expert` datasets (`OUT/{task}-{kind}.safetensors`, report
//! `OUT/{task}-suite.json`); for `maze2d-*`, one dataset from D4RL's waypoint controller.
//! Full-size data is made by this command, never committed.
//!
//! ```text
//! # CI size (pure Rust, minutes)
//! cargo run --release --features offline-rl --example offline_generate -- --task pendulum \
//!     --online-steps 15000 --snapshot-every 1000 --transitions 20000 --hidden 64,64 --out target/offline-data
//! cargo run --release --features offline-rl --example offline_generate -- --task maze2d-umaze --transitions 100000
//! # MuJoCo (hours on a CPU; D4RL itself used 10^6 online steps and 10^6 transitions)
//! cargo run --release --features offline-rl-mujoco --example offline_generate -- --task hopper \
//!     --online-steps 300000 --snapshot-every 10000 --transitions 200000
//! ```

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use offline_rl::generate::{generate_maze2d, generate_suite, Maze2dParams, SuiteParams};
use offline_rl::tasks::Task;
use rl_core::Params;

#[derive(Parser, Debug)]
#[command(about = "Generate D4RL-style offline datasets with our own agents")]
struct Args {
    /// pendulum, pointmaze-umaze, pointmaze-open, maze2d-umaze/medium/large, hopper, halfcheetah, walker2d.
    #[arg(long)]
    task: String,
    /// Online SAC environment steps.
    #[arg(long, default_value_t = 1_000_000)]
    online_steps: u64,
    /// Steps between evaluated policy snapshots.
    #[arg(long, default_value_t = 10_000)]
    snapshot_every: u64,
    /// SAC warm-up steps.
    #[arg(long, default_value_t = 5_000)]
    random_steps: u64,
    /// Transitions per dataset.
    #[arg(long, default_value_t = 1_000_000)]
    transitions: usize,
    /// SAC hidden widths.
    #[arg(long, value_delimiter = ',', default_values_t = vec![256, 256])]
    hidden: Vec<i64>,
    /// maze2d: action noise std (D4RL's --noisy: 0.5).
    #[arg(long, default_value_t = 0.5)]
    action_noise: f64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output folder.
    #[arg(long, default_value = "target/offline-data")]
    out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let task: Task = args.task.parse()?;
    std::fs::create_dir_all(&args.out)?;
    if task.name().starts_with("maze2d") {
        let p =
            Maze2dParams { transitions: args.transitions, action_noise: args.action_noise, ..Maze2dParams::default() };
        let d = generate_maze2d(task, &p.check()?, 20, args.seed)?;
        let path = args.out.join(format!("{}.safetensors", task.name()));
        offline_rl::data::write_native(&d, &path)?;
        let s = d.summary();
        println!(
            "{}: {} transitions, {} episodes, mean return {:.1} (random {:.1}, controller {:.1}) -> {}",
            task.name(),
            s.transitions,
            s.episodes,
            s.return_mean,
            d.info().ref_min.unwrap_or(f64::NAN),
            d.info().ref_max.unwrap_or(f64::NAN),
            path.display()
        );
        return Ok(());
    }
    let p = SuiteParams::default()
        .online_steps(args.online_steps)
        .snapshot_every(args.snapshot_every)
        .random_steps(args.random_steps)
        .transitions(args.transitions)
        .hidden(args.hidden.clone())
        .progress(!args.quiet);
    let r = generate_suite(task, &p.check()?, args.seed, &args.out)?;
    println!(
        "{}: random return {:.1}; medium snapshot at {} steps ({:.1}); expert snapshot at {} steps ({:.1})",
        task.name(),
        r.random_return,
        r.snapshots[r.medium].step,
        r.snapshots[r.medium].eval.mean_return,
        r.snapshots[r.expert].step,
        r.snapshots[r.expert].eval.mean_return
    );
    for ((kind, n), (_, ret)) in r.sizes.iter().zip(&r.returns) {
        println!("  {:<14} {:>8} transitions, mean episode return {:.1}", kind.as_str(), n, ret);
    }
    Ok(())
}
