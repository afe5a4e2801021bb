//! Agent-level credit on cooperative navigation (mpe2 `simple_spread_v3`) with an episodic team
//! reward: PPO with one policy shared by all agents (LaRe's MPE setup), rewarded by LaRe's
//! shared decoder over latent factors, by RD (the same decoder on the raw next observation), by
//! the raw episodic reward (`R_team / N` at the last step), or by the dense rewards (reference).
//!
//! ```text
//! # tiny (CI)
//! cargo run --features lare --example lare_mpe -- --steps 200 --num-steps 40 --seeds 1 --methods lare,episodic \
//!     --decoder-every 1 --decoder-updates 2 --decoder-batch 8 --eval-every 200 --eval-episodes 1 --out target/lare-mpe-tiny
//! # the reported run (docs/lare.md)
//! nice cargo run --release --features lare --example lare_mpe -- --steps 150000 --seeds 3 --out results/lare-mpe
//! ```
//!
//! LaRe's encoder comes from `crates/lare/encoders/simple_spread.json` (written by hand: no LLM
//! endpoint is reachable here; the tables say so). Outputs as `lare_compare`, and so are
//! `--checkpoint-every N` / `--resume` (`lare::train::run_multi_agent_ppo`: a resumed run ends
//! with the uninterrupted run's numbers).

#[path = "support/lare.rs"]
mod support;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;
use lare::llm::EncoderRecord;
use lare::train::{
    run_multi_agent_ppo, Checkpointing, MultiAgentLoopParams, MultiAgentMethod, MultiAgentRun, RunSummary,
};
use lare::{AgentCreditDecoder, CreditParams, RawEncoder, RawFeatures, SandboxLimits};
use rl_agents::{Ppo, PpoParams};
use rl_core::Params;
use rl_envs::mpe::{SimpleSpread, SimpleSpreadParams};
use rl_envs::MultiAgentEnv;

#[derive(Parser, Debug)]
#[command(about = "LaRe vs RD vs episodic reward on cooperative navigation (shared PPO)")]
struct Args {
    /// Comma-separated: lare, rd, episodic, dense.
    #[arg(long, default_value = "lare,rd,episodic,dense")]
    methods: String,
    /// Agents (= landmarks).
    #[arg(long, default_value_t = 3)]
    agents: usize,
    /// Seeds 0..n.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Environment steps per run (each moves every agent; 25 per episode).
    #[arg(long, default_value_t = 150_000)]
    steps: u64,
    /// PPO rollout length (environment steps per iteration).
    #[arg(long, default_value_t = 400)]
    num_steps: usize,
    /// PPO learning rate (LaRe MPE: 5e-4).
    #[arg(long, default_value_t = 5e-4)]
    lr: f64,
    /// PPO discount.
    #[arg(long, default_value_t = 0.99)]
    gamma: f64,
    /// Decoder steps every `decoder_every` PPO iterations (LaRe: 50 every 10).
    #[arg(long, default_value_t = 50)]
    decoder_updates: usize,
    /// PPO iterations between decoder rounds.
    #[arg(long, default_value_t = 10)]
    decoder_every: u64,
    /// Episodes per decoder step (LaRe: 256).
    #[arg(long, default_value_t = 256)]
    decoder_batch: usize,
    /// Steps between evaluations.
    #[arg(long, default_value_t = 5_000)]
    eval_every: u64,
    /// Greedy evaluation episodes.
    #[arg(long, default_value_t = 20)]
    eval_episodes: usize,
    /// LaRe's encoder record.
    #[arg(long, default_value = "crates/lare/encoders/simple_spread.json")]
    encoder: PathBuf,
    /// Output folder.
    #[arg(long, default_value = "target/lare-mpe")]
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

fn env(a: &Args) -> Result<SimpleSpread> {
    Ok(SimpleSpread::new(SimpleSpreadParams::default().n_agents(a.agents).check()?)?)
}

fn run(a: &Args, name: &str, seed: u64, record: Option<&EncoderRecord>, dir: &Path) -> Result<RunSummary> {
    let summary_path = dir.join("summary.json");
    if summary_path.exists() && !a.rerun {
        return Ok(serde_json::from_str(&std::fs::read_to_string(&summary_path)?)?);
    }
    std::fs::create_dir_all(dir)?;
    let mut e = env(a)?;
    let mut eval_env = env(a)?;
    let obs_space = e.observation_spaces()[0].clone();
    let act_space = e.action_spaces()[0].clone();
    let od = obs_space.dim();
    let credit = |feat: usize| -> Result<AgentCreditDecoder> {
        let p = CreditParams::default().batch_episodes(a.decoder_batch).seed(seed).check()?;
        Ok(AgentCreditDecoder::new(p, feat, tch::Device::Cpu)?)
    };
    let mut method = match name {
        "episodic" => MultiAgentMethod::Episodic,
        "dense" => MultiAgentMethod::Dense,
        "rd" => MultiAgentMethod::Credit {
            name: "rd".into(),
            encoder: Box::new(RawEncoder::new(od, 1, RawFeatures::NextState)),
            decoder: Box::new(credit(od)?),
        },
        "lare" => {
            let r = record.context("LaRe needs --encoder")?;
            let enc = r.encoder(SandboxLimits::default().check()?)?;
            let d = credit(enc.spec().n_factors)?;
            MultiAgentMethod::Credit { name: "lare".into(), encoder: Box::new(enc), decoder: Box::new(d) }
        }
        other => bail!("unknown method `{other}`"),
    };
    let ppo_params = PpoParams::default()
        .lr(a.lr)
        .gamma(a.gamma)
        .num_steps(a.num_steps)
        .num_minibatches(4)
        .update_epochs(10)
        .ent_coef(0.01)
        .check()?;
    let mut ppo = Ppo::new(ppo_params, &obs_space, &act_space, tch::Device::Cpu, seed)?;
    let params = MultiAgentLoopParams {
        total_steps: a.steps,
        decoder_every: a.decoder_every,
        decoder_updates: a.decoder_updates,
        reward_scale: (25 * a.agents) as f64, // LaRe: T · N
        eval_every: a.eval_every,
        eval_episodes: a.eval_episodes,
        seed,
        ..MultiAgentLoopParams::default()
    }
    .check()?;
    let ckpt_dir = dir.join("checkpoint");
    let checkpoint = (a.checkpoint_every > 0).then(|| Checkpointing::new(&ckpt_dir, a.checkpoint_every)).transpose()?;
    let metrics = dir.join("metrics.jsonl");
    let (mut run, mut sink) = if a.resume && ckpt_dir.is_dir() {
        let run = MultiAgentRun::load(&ckpt_dir, &mut e, &mut eval_env, &mut ppo, &mut method, &params)?;
        println!("{name} seed {seed}: resumed at {} steps", run.steps());
        let sink = support::resume_jsonl(&metrics, run.steps())?;
        (run, sink)
    } else {
        (MultiAgentRun::new(&mut e, &method, &params)?, rl_core::JsonlSink::create(&metrics)?)
    };
    let bar = support::bar(a.steps, &format!("{name} s{seed}"), a.quiet);
    let t0 = std::time::Instant::now();
    let s = run_multi_agent_ppo(
        &mut run,
        &mut e,
        &mut eval_env,
        &mut ppo,
        &mut method,
        &mut sink,
        &mut |t| bar.set_position(t),
        checkpoint.as_ref(),
    )?;
    bar.finish_and_clear();
    println!("{name} seed {seed}: final dense team return {:.2} ({:.0} s)", s.final_return, t0.elapsed().as_secs_f64());
    std::fs::write(&summary_path, serde_json::to_string_pretty(&s)?)?;
    Ok(s)
}

fn main() -> Result<()> {
    let a = Args::parse();
    tch::set_num_threads(a.threads.max(1));
    std::fs::create_dir_all(&a.out)?;
    let methods: Vec<&str> = a.methods.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let record = if methods.contains(&"lare") {
        let r = EncoderRecord::load(&a.encoder).with_context(|| format!("reading {}", a.encoder.display()))?;
        println!("LaRe encoder: {} ({} factors)", r.label(), r.spec.n_factors);
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
        let label = match *name {
            "lare" => support::method_label("lare", record.as_ref()).replace("RRD unbiased; ", "shared decoder; "),
            "rd" => "RD (shared decoder on o')".into(),
            other => support::method_label(other, None),
        };
        rows.push(support::Row { method: name.to_string(), label, finals, mean_curve: support::mean_curve(&curves) });
    }
    let title = format!(
        "cooperative navigation, {} agents (episodic team reward), shared PPO; mean of {} seeds",
        a.agents, a.seeds
    );
    support::plot(&a.out.join("curves.svg"), &title, &rows)?;
    let report = support::report(&title, &rows, &format!("{a:?}"));
    std::fs::write(a.out.join("report.md"), &report)?;
    println!("{report}");
    Ok(())
}
