//! LaRe against RD, RRD (biased, unbiased), IRCR, the raw episodic reward and the dense-reward
//! reference, on episodic-reward (delayed) versions of Pendulum-v1 and, with `--features
//! mujoco`, Hopper-v4 / HalfCheetah-v4 / Walker2d-v4; SAC (default) or TD3 from `rl-agents`.
//!
//! ```text
//! # tiny (CI)
//! cargo run --features lare --example lare_compare -- --steps 300 --start-steps 100 --hidden 32 \
//!     --decoder-hidden 32 --eval-every 150 --eval-episodes 1 --seeds 1 --methods lare,rd --out target/lare-compare-tiny
//! # the reported Pendulum run (docs/lare.md)
//! nice -n 10 cargo run --release --features lare --example lare_compare -- --env pendulum --steps 8000 \
//!     --start-steps 1000 --hidden 64 --decoder-hidden 64 --eval-every 1000 --eval-episodes 3 --seeds 3 \
//!     --methods lare,rrd_unbiased,rd,ircr,episodic,dense --jobs 2 --quiet --out target/lare-results/pendulum-release
//! # MuJoCo
//! nice cargo run --release --features lare,mujoco --example lare_compare -- --env hopper --steps 200000 --seeds 1
//! ```
//!
//! Every environment returns only the episodic reward (`rl_envs::wrappers::EpisodicReward`);
//! evaluation reports the **dense** return of deterministic episodes. LaRe's encoder comes
//! from an `EncoderRecord` (`crates/lare/encoders/<env>.json` by default): the committed ones
//! were written by hand (no LLM endpoint is reachable here) and every table says so. Finished
//! runs (`OUT/<method>/seed<k>/summary.json`) are reused, so a long comparison can be split.
//! `--checkpoint-every N` writes each run's checkpoint unit to `OUT/<method>/seed<k>/checkpoint`
//! every N environment steps (and at the end); `--resume` continues an interrupted run from it
//! (same flags), ending with the numbers of the uninterrupted run (`lare::train::run_off_policy`;
//! `metrics.jsonl` keeps its records up to the checkpoint's step and continues from there).
//! Outputs: per-run `metrics.jsonl` and `summary.json`, `OUT/curves.svg` (mean dense return per
//! method), `OUT/report.md` (final returns, mean ± std over seeds).

#[path = "support/lare.rs"]
mod support;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;
use lare::llm::EncoderRecord;
use lare::train::{run_off_policy, Checkpointing, OffPolicyLoopParams, OffPolicyRun, RunSummary};
use lare::{
    DecoderParams, Decomposition, DecompositionLoss, DenseOracle, EpisodicBaseline, Ircr, IrcrParams, RawEncoder,
    RawFeatures, RewardRedistributor, SandboxLimits,
};
use rl_agents::{BatchLearner, Sac, SacParams, Td3, Td3Params};
use rl_core::{Env, Params};
use rl_envs::wrappers::EpisodicReward;
use rl_envs::Snapshot;

#[derive(Parser, Debug)]
#[command(about = "LaRe vs RD / RRD / IRCR on episodic-reward control tasks")]
struct Args {
    /// pendulum (classic control) or, with --features mujoco, hopper, half_cheetah, walker2d.
    #[arg(long, default_value = "pendulum")]
    env: String,
    /// sac or td3.
    #[arg(long, default_value = "sac")]
    agent: String,
    /// Comma-separated: lare, lare_rd, rrd_unbiased, rrd, rd, ircr, episodic, dense.
    #[arg(long, default_value = "lare,rrd_unbiased,rrd,rd,ircr,episodic,dense")]
    methods: String,
    /// Seeds 0..n.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Environment steps per run.
    #[arg(long, default_value_t = 20_000)]
    steps: u64,
    /// Uniform random steps first (LaRe: 10 000 on MuJoCo).
    #[arg(long, default_value_t = 1_000)]
    start_steps: u64,
    /// Hidden width of actor and critics (two layers).
    #[arg(long, default_value_t = 256)]
    hidden: i64,
    /// Hidden width of the reward decoder (two hidden layers; LaRe: 256).
    #[arg(long, default_value_t = 256)]
    decoder_hidden: i64,
    /// RRD's K.
    #[arg(long, default_value_t = 64)]
    rrd_k: usize,
    /// Steps between evaluations.
    #[arg(long, default_value_t = 1_000)]
    eval_every: u64,
    /// Deterministic dense-return episodes per evaluation.
    #[arg(long, default_value_t = 5)]
    eval_episodes: usize,
    /// LaRe's encoder record (default crates/lare/encoders/<env>.json).
    #[arg(long)]
    encoder: Option<PathBuf>,
    /// Output folder.
    #[arg(long, default_value = "target/lare-compare")]
    out: PathBuf,
    /// Runs in parallel (each a thread).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// libtorch intra-op threads per process (1: small networks only lose to thread hand-offs).
    #[arg(long, default_value_t = 1)]
    threads: i32,
    /// Rerun finished runs.
    #[arg(long)]
    rerun: bool,
    /// Environment steps between checkpoints of each run (0: none).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: u64,
    /// Continue runs from their checkpoints (`OUT/<method>/seed<k>/checkpoint`) where present.
    #[arg(long)]
    resume: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs job `(name, seed)` on a fresh pair (training, evaluation) of the `--env` task.
fn run(a: &Args, name: &str, seed: u64, record: Option<&EncoderRecord>, dir: &Path) -> Result<RunSummary> {
    match a.env.as_str() {
        "pendulum" => {
            let make = || rl_envs::classic::Pendulum::new(rl_envs::classic::PendulumParams::default().check()?);
            run_on(a, name, seed, record, dir, make()?, make()?)
        }
        #[cfg(feature = "mujoco")]
        "hopper" | "half_cheetah" | "walker2d" => {
            use rl_envs::mujoco::{HalfCheetahParams, HopperParams, Locomotion, Walker2dParams};
            let make = || -> Result<Locomotion> {
                Ok(match a.env.as_str() {
                    "hopper" => Locomotion::hopper(HopperParams::default().check()?)?,
                    "half_cheetah" => Locomotion::half_cheetah(HalfCheetahParams::default().check()?)?,
                    _ => Locomotion::walker2d(Walker2dParams::default().check()?)?,
                })
            };
            run_on(a, name, seed, record, dir, make()?, make()?)
        }
        other => bail!("unknown --env `{other}` (MuJoCo tasks need --features mujoco)"),
    }
}

fn method(
    name: &str,
    a: &Args,
    od: usize,
    ad: usize,
    record: Option<&EncoderRecord>,
    seed: u64,
) -> Result<Box<dyn RewardRedistributor>> {
    let dec = |loss: DecompositionLoss| -> Result<rl_core::Valid<DecoderParams>> {
        Ok(DecoderParams::default()
            .hidden([a.decoder_hidden, a.decoder_hidden])
            .loss(loss)
            .rrd_k(a.rrd_k)
            .seed(seed)
            .check()?)
    };
    let raw = || Box::new(RawEncoder::new(od, ad, RawFeatures::StateActionDelta));
    let dev = tch::Device::Cpu;
    Ok(match name {
        "episodic" => Box::new(EpisodicBaseline),
        "dense" => Box::new(DenseOracle),
        "ircr" => Box::new(Ircr::new(IrcrParams::default().check()?)),
        "rd" => Box::new(Decomposition::new("rd", raw(), dec(DecompositionLoss::Sum)?, dev)?),
        "rrd" => Box::new(Decomposition::new("rrd", raw(), dec(DecompositionLoss::Rrd)?, dev)?),
        "rrd_unbiased" => {
            Box::new(Decomposition::new("rrd_unbiased", raw(), dec(DecompositionLoss::RrdUnbiased)?, dev)?)
        }
        "lare" | "lare_rd" => {
            let r = record.context("LaRe needs an encoder record (--encoder)")?;
            let enc = r.encoder(SandboxLimits::default().check()?)?;
            let loss = if name == "lare" { DecompositionLoss::RrdUnbiased } else { DecompositionLoss::Sum };
            Box::new(Decomposition::new(name, Box::new(enc), dec(loss)?, dev)?)
        }
        other => bail!("unknown method `{other}`"),
    })
}

fn agent(a: &Args, env: &dyn Env, seed: u64, tau: Option<f64>) -> Result<Box<dyn BatchLearner>> {
    let (obs, act) = (env.observation_space(), env.action_space());
    Ok(match a.agent.as_str() {
        "sac" => {
            let mut p = SacParams::default().hidden([a.hidden, a.hidden]);
            if let Some(t) = tau {
                p = p.tau(t);
            }
            Box::new(Sac::new(p.check()?, obs, act, tch::Device::Cpu, seed)?)
        }
        "td3" => {
            let mut p = Td3Params::default().hidden([a.hidden, a.hidden]);
            if let Some(t) = tau {
                p = p.tau(t);
            }
            Box::new(Td3::new(p.check()?, obs, act, tch::Device::Cpu, seed)?)
        }
        other => bail!("unknown --agent `{other}`"),
    })
}

fn run_on<E: Env + Snapshot>(
    a: &Args,
    name: &str,
    seed: u64,
    record: Option<&EncoderRecord>,
    dir: &Path,
    env: E,
    mut eval_env: E,
) -> Result<RunSummary> {
    let summary_path = dir.join("summary.json");
    if summary_path.exists() && !a.rerun {
        return Ok(serde_json::from_str(&std::fs::read_to_string(&summary_path)?)?);
    }
    std::fs::create_dir_all(dir)?;
    let mut env = EpisodicReward::new(env);
    let (od, ad) = (env.observation_space().dim(), env.action_space().dim());
    let mut m = method(name, a, od, ad, record, seed)?;
    // LaRe's IRCR runs use batch 512 and τ = 0.001 (mujoco/main.py); the others the agent's defaults
    let (batch, tau) = if name == "ircr" { (512, Some(0.001)) } else { (256, None) };
    let mut ag = agent(a, &env, seed, tau)?;
    let params = OffPolicyLoopParams {
        total_steps: a.steps,
        start_steps: a.start_steps,
        batch_size: batch,
        eval_every: a.eval_every,
        eval_episodes: a.eval_episodes,
        log_every: 1_000.min(a.steps),
        seed,
        ..OffPolicyLoopParams::default()
    }
    .check()?;
    let ckpt_dir = dir.join("checkpoint");
    let checkpoint = (a.checkpoint_every > 0).then(|| Checkpointing::new(&ckpt_dir, a.checkpoint_every)).transpose()?;
    let metrics = dir.join("metrics.jsonl");
    let (mut run, mut sink) = if a.resume && ckpt_dir.is_dir() {
        let run = OffPolicyRun::load(&ckpt_dir, &mut env, &mut eval_env, ag.as_mut(), m.as_mut(), &params)?;
        println!("{name} seed {seed}: resumed at {} steps", run.steps());
        let sink = support::resume_jsonl(&metrics, run.steps())?;
        (run, sink)
    } else {
        (OffPolicyRun::new(&mut env, m.as_ref(), &params)?, rl_core::JsonlSink::create(&metrics)?)
    };
    let bar = support::bar(a.steps, &format!("{name} s{seed}"), a.quiet);
    let t0 = std::time::Instant::now();
    let s = run_off_policy(
        &mut run,
        &mut env,
        &mut eval_env,
        ag.as_mut(),
        m.as_mut(),
        &mut sink,
        &mut |t| bar.set_position(t),
        checkpoint.as_ref(),
    )?;
    bar.finish_and_clear();
    println!("{name} seed {seed}: final dense return {:.1} ({:.0} s)", s.final_return, t0.elapsed().as_secs_f64());
    std::fs::write(&summary_path, serde_json::to_string_pretty(&s)?)?;
    Ok(s)
}

fn main() -> Result<()> {
    let a = Args::parse();
    tch::set_num_threads(a.threads.max(1));
    std::fs::create_dir_all(&a.out)?;
    let methods: Vec<&str> = a.methods.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let record = if methods.iter().any(|m| m.starts_with("lare")) {
        let path = a.encoder.clone().unwrap_or_else(|| PathBuf::from(format!("crates/lare/encoders/{}.json", a.env)));
        let r = EncoderRecord::load(&path).with_context(|| format!("reading {}", path.display()))?;
        println!("LaRe encoder: {} ({} factors) from {}", r.label(), r.spec.n_factors, path.display());
        Some(r)
    } else {
        None
    };
    let jobs: Vec<(&str, u64)> = methods.iter().flat_map(|m| (0..a.seeds).map(move |s| (*m, s))).collect();
    let results = support::run_jobs(&jobs, a.jobs, |&(name, seed)| {
        run(&a, name, seed, record.as_ref(), &a.out.join(name).join(format!("seed{seed}")))
    })?;
    let mut rows = Vec::new();
    for name in &methods {
        let runs: Vec<&RunSummary> =
            jobs.iter().zip(&results).filter(|((m, _), _)| m == name).map(|(_, r)| r).collect();
        let finals: Vec<f64> = runs.iter().map(|r| r.final_return).collect();
        let curves: Vec<Vec<(u64, f64)>> = runs.iter().map(|r| r.evals.clone()).collect();
        let label = support::method_label(name, record.as_ref());
        rows.push(support::Row { method: name.to_string(), label, finals, mean_curve: support::mean_curve(&curves) });
    }
    let title = format!("{} (episodic reward), {}; dense return, mean of {} seeds", a.env, a.agent, a.seeds);
    support::plot(&a.out.join("curves.svg"), &title, &rows)?;
    let report = support::report(&title, &rows, &format!("{a:?}"));
    std::fs::write(a.out.join("report.md"), &report)?;
    println!("{report}");
    Ok(())
}
