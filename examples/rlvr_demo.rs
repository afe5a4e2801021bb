//! The end-to-end RLVR demo (`make demo`): a small transformer learns Countdown on CPU.
//!
//! Warm start on solver solutions to partial accuracy, then RL with DPS prompt selection and
//! POPO group replay (by default), held-out pass@1 / pass@k along the way, a JSONL log with the
//! per-step wall-time split, an accuracy-vs-rollouts plot and a summary table.
//!
//! ```text
//! cargo run --release --features full --example rlvr_demo                     # the default pipeline
//! cargo run --release --features full --example rlvr_demo -- --config run.toml
//! cargo run --release --features full --example rlvr_demo -- --selector uniform --no-replay   # plain GRPO
//! cargo run --release --features full --example rlvr_demo -- --compare --seeds 3              # docs/rlvr-demo.md
//! ```
//!
//! Outputs go to `--out` (default `target/rlvr-demo/`): `config.toml`, `metrics.jsonl`,
//! `eval.jsonl`, `summary.json`, `accuracy.svg`.
use std::cell::RefCell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use frugal_rl::core::{JsonlSink, Metrics, MetricsSink};
use frugal_rl::rlvr_core::{LpoParams, PolicyLoss, PpoParams, Projection};
use frugal_rl::rlvr_replay::ReplayParams;
use frugal_rl::rlvr_select::neural::GpsParams;
use frugal_rl::rlvr_select::{DpsParams, MoppsParams};
use frugal_rl::rlvr_train::report::{plot_curves, plot_panels, summary_table, Curve, Panel};
use frugal_rl::rlvr_train::{HfPolicyConfig, RunConfig, RunSummary, SelectorConfig, Trainer};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(about = "End-to-end RLVR on Countdown: warm start, selection, POPO replay, any rlvr-core loss")]
struct Args {
    /// TOML run config (fields not given keep their defaults; flags below override it).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output folder.
    #[arg(long, default_value = "target/rlvr-demo")]
    out: PathBuf,
    /// The policy: `rl-lm` (the config's `[model]`, the default) or `hf:DIR`, a Hugging Face
    /// model directory (Qwen2/2.5, Qwen3, Llama 3.x with its tokenizer; the config's `[hf]`
    /// table with `dir = DIR`). The trained HF model is written to `OUT/model` (transformers'
    /// layout) at the end.
    #[arg(long, value_name = "rl-lm|hf:DIR")]
    model: Option<String>,
    /// With an HF policy: train a LoRA adapter of this rank on every projection (alpha = 2 x
    /// rank) instead of every weight; `OUT/model` then holds the merged model and the PEFT
    /// adapter under `adapter/`. The config's `[hf.lora]` table sets the other fields.
    #[arg(long, value_name = "RANK")]
    lora: Option<i64>,
    /// Continue the run whose output folder is DIR from its checkpoint (`DIR/checkpoint`,
    /// written after the warm start, at evaluations and at the end): its config, its logs, the
    /// same end as without the interruption. Only --steps and --budget may change (to extend).
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// Write the checkpoint every N steps (at evaluation steps; 0: at every evaluation).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: usize,
    /// Seed.
    #[arg(long)]
    seed: Option<u64>,
    /// RL steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Stop after this many rollouts.
    #[arg(long)]
    budget: Option<u64>,
    /// Selector: uniform, hr, ds, odf, mopps, dps, gps, mpts, pdts, drm, gdrm.
    #[arg(long)]
    selector: Option<String>,
    /// Turn POPO replay off.
    #[arg(long)]
    no_replay: bool,
    /// Policy loss: grpo (PPO-clip), dapo (clip-higher 0.28), lpo (forward), lpo-rev.
    #[arg(long)]
    loss: Option<String>,
    /// Warm-start steps (0: none).
    #[arg(long)]
    sft_steps: Option<usize>,
    /// Load warm-start weights instead of training them.
    #[arg(long)]
    init_checkpoint: Option<PathBuf>,
    /// Save the warm-started weights here (before RL).
    #[arg(long)]
    save_warm_start: Option<PathBuf>,
    /// Training prompts.
    #[arg(long)]
    train_prompts: Option<usize>,
    /// Held-out prompts.
    #[arg(long)]
    eval_prompts: Option<usize>,
    /// Evaluate every N steps.
    #[arg(long)]
    eval_every: Option<usize>,
    /// Run the method comparison instead of one run.
    #[arg(long)]
    compare: bool,
    /// Seeds per method in --compare.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Methods in --compare (comma separated; default all).
    #[arg(long, default_value = "grpo,ds,mopps,dps,gps,popo,lpo,dps+popo")]
    methods: String,
    /// In --compare, load runs that already have a `summary.json` under --out instead of
    /// running them again (resume an interrupted comparison, or re-render its report).
    #[arg(long)]
    reuse: bool,
    /// Pass@1 target of the "rollouts to reach" column (default: dynamic sampling's final mean
    /// pass@1 when `ds` is among the methods).
    #[arg(long)]
    target: Option<f64>,
    /// Name of the marked section of --report to replace (`<!-- NAME:begin -->` ... `<!-- NAME:end -->`).
    #[arg(long, default_value = "results")]
    section: String,
    /// Markdown report of --compare (the part between the results markers is replaced).
    #[arg(long, default_value = "docs/rlvr-demo.md")]
    report: PathBuf,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn selector_from_name(name: &str) -> Result<SelectorConfig> {
    SelectorConfig::from_short_name(name)
        .with_context(|| format!("unknown selector {name:?} ({})", SelectorConfig::SHORT_NAMES.join(", ")))
}

fn loss_from_name(name: &str) -> Result<PolicyLoss> {
    Ok(match name {
        "grpo" | "ppo" => PolicyLoss::Ppo(PpoParams::default()),
        "dapo" => PolicyLoss::Ppo(PpoParams::dapo()),
        "lpo" | "lpo-fwd" => PolicyLoss::Lpo(LpoParams { projection: Projection::Forward, ..LpoParams::default() }),
        "lpo-rev" => PolicyLoss::Lpo(LpoParams { projection: Projection::Reverse, ..LpoParams::default() }),
        other => bail!("unknown loss {other:?} (grpo, dapo, lpo, lpo-rev)"),
    })
}

fn config_from_args(a: &Args) -> Result<RunConfig> {
    let mut cfg = match &a.config {
        Some(p) => RunConfig::from_toml_file(p).with_context(|| format!("loading {}", p.display()))?,
        None => RunConfig::default(),
    };
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if let Some(s) = a.steps {
        cfg.rl.steps = s;
    }
    if a.budget.is_some() {
        cfg.rl.rollout_budget = a.budget;
    }
    if let Some(s) = &a.selector {
        cfg.selector = selector_from_name(s)?;
    }
    if a.no_replay {
        cfg.replay = None;
    }
    if let Some(l) = &a.loss {
        cfg.loss.policy = loss_from_name(l)?;
    }
    if let Some(s) = a.sft_steps {
        cfg.sft.steps = s;
    }
    if a.init_checkpoint.is_some() {
        cfg.sft.init_checkpoint.clone_from(&a.init_checkpoint);
    }
    if let Some(n) = a.train_prompts {
        cfg.task.train_prompts = n;
    }
    if let Some(n) = a.eval_prompts {
        cfg.task.eval_prompts = n;
    }
    if let Some(n) = a.eval_every {
        cfg.eval.every = n;
    }
    match a.model.as_deref() {
        None => {}
        Some("rl-lm") => cfg.hf = None,
        Some(m) => match m.strip_prefix("hf:") {
            Some(dir) if !dir.is_empty() => {
                let mut hf = cfg.hf.take().unwrap_or_else(|| HfPolicyConfig::new(dir));
                hf.dir = PathBuf::from(dir);
                cfg.hf = Some(hf);
            }
            _ => bail!("--model {m:?}: expected `rl-lm` or `hf:DIR`"),
        },
    }
    if let Some(r) = a.lora {
        let Some(hf) = cfg.hf.as_mut() else { bail!("--lora needs an HF policy (--model hf:DIR or an [hf] table)") };
        let targets = frugal_rl::rl_hf::LoraTarget::ALL;
        hf.lora = Some(frugal_rl::rl_hf::LoraParams::default().r(r).alpha(2.0 * r as f64).targets(targets));
    }
    frugal_rl::core::Params::validate(&cfg)?;
    Ok(cfg)
}

fn bar(quiet: bool, len: u64, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(&format!("{what:>10} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

/// Keeps the JSONL lines of `path` whose `step` passes `keep` (a resumed run drops what was
/// logged after its checkpoint, so the logs read as one uninterrupted run).
fn truncate_jsonl(path: &Path, keep: impl Fn(u64) -> bool) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(()) };
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("reading {}", path.display()))?;
        if v.get("step").and_then(serde_json::Value::as_u64).is_some_and(&keep) {
            out.push_str(line);
            out.push('\n');
        }
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// FNV-1a over every logged step metric and evaluation of a run folder, wall times excluded:
/// an interrupted and resumed run prints the same digest as the uninterrupted one.
fn run_digest(out: &Path) -> Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in ["metrics.jsonl", "eval.jsonl"] {
        let text = std::fs::read_to_string(out.join(file))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let Some(obj) = v.as_object() else { continue };
            let mut keys: Vec<&String> = obj.keys().filter(|k| !k.starts_with("time/")).collect();
            keys.sort();
            for k in keys {
                eat(k.as_bytes());
                eat(&obj[k].as_f64().map_or(u64::MAX, f64::to_bits).to_le_bytes());
            }
        }
    }
    Ok(h)
}

/// Where a run keeps its checkpoint.
fn checkpoint_dir(out: &Path) -> PathBuf {
    out.join("checkpoint")
}

/// One full run (warm start + RL) with logs under `out`, or (`resume`) the rest of the run
/// whose checkpoint is in `out`. A checkpoint is written after the warm start, at every
/// `checkpoint_every`-th step that is an evaluation step, and at the end.
fn run_one(
    cfg: RunConfig,
    out: &Path,
    quiet: bool,
    save_warm_start: Option<&Path>,
    resume: bool,
    checkpoint_every: usize,
) -> Result<RunSummary> {
    std::fs::create_dir_all(out)?;
    let mut trainer = Trainer::new(cfg.clone())?;
    let ckpt = checkpoint_dir(out);
    if resume {
        trainer.load_checkpoint(&ckpt).with_context(|| format!("resuming from {}", ckpt.display()))?;
        let done = trainer.steps_done();
        truncate_jsonl(&out.join("metrics.jsonl"), |s| s < done)?;
        truncate_jsonl(&out.join("eval.jsonl"), |s| s <= done)?;
        if !quiet {
            println!("resumed from {} at step {done} ({} rollouts)", ckpt.display(), trainer.rollouts().total());
        }
    } else {
        std::fs::write(out.join("config.toml"), cfg.to_toml()?)?;
        // A fresh run: its logs and any older checkpoint start over.
        for f in ["metrics.jsonl", "eval.jsonl"] {
            std::fs::write(out.join(f), "")?;
        }
    }
    if !trainer.warm_started() {
        if cfg.sft.init_checkpoint.is_none() && cfg.sft.steps > 0 {
            let pb = bar(quiet, cfg.sft.steps as u64, "warm start");
            let t0 = Instant::now();
            let nll = trainer.warm_start(&mut |_, loss| {
                pb.set_message(format!("nll {loss:.3}"));
                pb.inc(1);
            })?;
            pb.finish_and_clear();
            if let (false, Some(first), Some(last)) = (quiet, nll.first(), nll.last()) {
                println!(
                    "warm start: {} supervised steps on solver solutions, token nll {first:.3} -> {last:.3} ({:.1} s)",
                    nll.len(),
                    t0.elapsed().as_secs_f64()
                );
            }
        } else {
            trainer.warm_start(&mut |_, _| {})?;
        }
        if let Some(p) = save_warm_start {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            trainer.policy().save(p)?;
        }
    }
    let logs = RefCell::new((
        JsonlSink::append(out.join("metrics.jsonl"))?,
        JsonlSink::append(out.join("eval.jsonl"))?,
        None::<frugal_rl::core::RlCoreError>,
    ));
    let pb = bar(quiet, cfg.rl.steps as u64, "rl");
    pb.set_position(trainer.steps_done());
    let every = if checkpoint_every == 0 { cfg.eval.every } else { checkpoint_every } as u64;
    let summary = trainer.run_checkpointed(
        &mut |rec| {
            let mut l = logs.borrow_mut();
            if let Err(e) = l.0.log(rec.step, &rec.metrics) {
                l.2.get_or_insert(e);
            }
            pb.set_message(format!(
                "reward {:.3} success {:.3} rollouts {}",
                rec.reward_mean,
                rec.success_rate,
                rec.rollouts.total()
            ));
            pb.inc(1);
        },
        &mut |p| {
            let mut m = Metrics::new();
            m.insert("rollouts", p.rollouts as f64);
            m.insert("eval/pass@1", p.report.pass_at_1);
            m.insert(format!("eval/pass@{}", p.report.k), p.report.pass_at_k);
            m.insert("eval/mean_reward", p.report.mean_reward);
            m.insert("eval/malformed", p.report.malformed);
            for (l, v) in &p.report.pass_at_1_by_level {
                m.insert(format!("eval/pass@1/{l}"), *v);
            }
            let mut l = logs.borrow_mut();
            // Flushed at every evaluation, so what a checkpoint has seen is on disk.
            let res = l.1.log(p.step, &m).and_then(|()| l.1.flush()).and_then(|()| l.0.flush());
            if let Err(e) = res {
                l.2.get_or_insert(e);
            }
            // `suspend` (not `println`) so the line also appears when stderr is not a terminal.
            if !quiet {
                pb.suspend(|| {
                    println!(
                        "  eval @ step {:>3} ({:>6} rollouts): pass@1 {:.3}  pass@{} {:.3}",
                        p.step, p.rollouts, p.report.pass_at_1, p.report.k, p.report.pass_at_k
                    );
                });
            }
        },
        Some((&ckpt, every)),
    )?;
    pb.finish_and_clear();
    let (mut steps_log, mut eval_log, err) = logs.into_inner();
    if let Some(e) = err {
        return Err(e.into());
    }
    steps_log.flush()?;
    eval_log.flush()?;
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
    if cfg.hf.is_some() {
        // The trained model in transformers' layout (what an inference engine reloads).
        let dir = out.join("model");
        std::fs::create_dir_all(&dir)?;
        trainer.policy().save(&dir)?;
        if !quiet {
            println!("trained model written to {}", dir.display());
        }
    }
    Ok(summary)
}

fn print_summary(cfg: &RunConfig, s: &RunSummary, plot: &Path) {
    println!();
    println!(
        "selector {} | loss {} | replay {} | seed {} | {} steps",
        s.selector,
        s.loss,
        if s.replay { "POPO" } else { "off" },
        s.seed,
        s.steps
    );
    println!(
        "held-out pass@1:        {:.3} -> {:.3}   ({} prompts x {} samples, T = {})",
        s.initial.pass_at_1,
        s.last.pass_at_1,
        cfg.task.total_eval_prompts(),
        cfg.eval.samples,
        cfg.eval.temperature
    );
    println!(
        "train/held-out overlap: {} of {} held-out prompts are training prompts (by canonical form)",
        s.held_out_overlap,
        cfg.task.total_eval_prompts()
    );
    println!("held-out pass@{}:        {:.3} -> {:.3}", s.last.k, s.initial.pass_at_k, s.last.pass_at_k);
    for (l, v) in &s.last.pass_at_1_by_level {
        let before = s.initial.pass_at_1_by_level.get(l).copied().unwrap_or(f64::NAN);
        println!("  {l:<14} pass@1: {before:.3} -> {v:.3}");
    }
    println!(
        "rollouts used:          {} (training {}, selection {})",
        s.rollouts.total(),
        s.rollouts.train,
        s.rollouts.selection
    );
    println!(
        "effective-sample ratio: {:.3} of generated groups had right and wrong answers (by outcome; {:.3} had reward variance)",
        s.generated_mixed_outcome_ratio, s.generated_reward_variance_ratio
    );
    println!(
        "                        {:.3} of trained groups were effective by the run's rule ({})",
        s.batch_effective_ratio, s.effectiveness
    );
    let t = s.seconds;
    println!(
        "wall time:              warm start {:.1} s; RL generation {:.1} s, scoring {:.2} s, selection {:.2} s, loss {:.1} s, eval {:.1} s",
        s.warm_start_seconds, t.generation, t.scoring, t.selection, t.loss, t.eval
    );
    println!("plot:                   {}", plot.display());
}

struct Method {
    name: &'static str,
    apply: fn(&mut RunConfig),
}

fn methods() -> Vec<Method> {
    fn no_replay(c: &mut RunConfig) {
        c.replay = None;
        c.loss.correction = None;
    }
    fn replay(c: &mut RunConfig) {
        c.replay = Some(ReplayParams::new(c.rl.group_size));
    }
    vec![
        Method {
            name: "grpo",
            apply: |c| {
                c.selector = SelectorConfig::Uniform;
                no_replay(c);
            },
        },
        Method {
            name: "ds",
            apply: |c| {
                c.selector = SelectorConfig::DynamicSampling { max_gen_batches: 10 };
                no_replay(c);
            },
        },
        Method {
            name: "mopps",
            apply: |c| {
                c.selector = SelectorConfig::Mopps { params: MoppsParams::default() };
                no_replay(c);
            },
        },
        Method {
            name: "dps",
            apply: |c| {
                c.selector = SelectorConfig::Dps { params: DpsParams::default() };
                no_replay(c);
            },
        },
        Method {
            name: "gps",
            apply: |c| {
                c.selector = SelectorConfig::Gps { params: GpsParams::default(), embed_dim: 32 };
                no_replay(c);
            },
        },
        Method {
            name: "popo",
            apply: |c| {
                c.selector = SelectorConfig::Uniform;
                replay(c);
            },
        },
        Method {
            name: "lpo",
            apply: |c| {
                c.selector = SelectorConfig::Uniform;
                no_replay(c);
                c.loss.policy = PolicyLoss::Lpo(LpoParams::default());
            },
        },
        Method {
            name: "dps+popo",
            apply: |c| {
                c.selector = SelectorConfig::Dps { params: DpsParams::default() };
                replay(c);
            },
        },
    ]
}

fn compare(a: &Args, base: &RunConfig) -> Result<()> {
    let wanted: Vec<&str> = a.methods.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let all = methods();
    for w in &wanted {
        if !all.iter().any(|m| m.name == *w) {
            bail!("unknown method {w:?}; known: {}", all.iter().map(|m| m.name).collect::<Vec<_>>().join(", "));
        }
    }
    let started = Instant::now();
    let mut results: Vec<(&'static str, Vec<RunSummary>)> = Vec::new();
    for m in all.iter().filter(|m| wanted.contains(&m.name)) {
        results.push((m.name, Vec::new()));
    }
    for seed in 0..a.seeds {
        // One warm start per seed, shared by every method: same initial policy.
        let mut ws = base.clone();
        ws.seed = base.seed + seed;
        let ckpt = a.out.join(format!("seed{seed}")).join("warm_start.safetensors");
        if base.sft.init_checkpoint.is_none() && !(a.reuse && ckpt.exists()) {
            let mut t = Trainer::new(ws.clone())?;
            t.warm_start(&mut |_, _| {})?;
            std::fs::create_dir_all(ckpt.parent().unwrap_or(Path::new(".")))?;
            t.policy().save(&ckpt)?;
        }
        for (name, runs) in &mut results {
            let Some(m) = all.iter().find(|m| m.name == *name) else { continue };
            let mut cfg = ws.clone();
            (m.apply)(&mut cfg);
            if cfg.sft.init_checkpoint.is_none() {
                cfg.sft.init_checkpoint = Some(ckpt.clone());
            }
            frugal_rl::core::Params::validate(&cfg)?;
            let out = a.out.join(format!("seed{seed}")).join(name.replace('+', "_"));
            let saved = out.join("summary.json");
            let s = if a.reuse && saved.exists() {
                serde_json::from_str(&std::fs::read_to_string(&saved)?)
                    .with_context(|| format!("reading {}", saved.display()))?
            } else {
                // An interrupted comparison resumes each unfinished run from its checkpoint.
                let resume = a.reuse && checkpoint_dir(&out).join("state.json").exists();
                run_one(cfg, &out, true, None, resume, a.checkpoint_every)?
            };
            println!(
                "seed {seed} {name:>9}: pass@1 {:.3} -> {:.3}, {} rollouts, {} steps ({:.0} s elapsed)",
                s.initial.pass_at_1,
                s.last.pass_at_1,
                s.rollouts.total(),
                s.steps,
                started.elapsed().as_secs_f64()
            );
            runs.push(s);
        }
    }
    println!("comparison done in {:.0} s", started.elapsed().as_secs_f64());
    write_report(a, base, &results)
}

fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = if xs.len() > 1 { xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, v.sqrt())
}

fn write_report(a: &Args, base: &RunConfig, results: &[(&str, Vec<RunSummary>)]) -> Result<()> {
    let device = frugal_rl::nn::device_name(frugal_rl::rlvr_train::device_of(base)?);
    let curves: Vec<Curve> = results
        .iter()
        .map(|(name, runs)| {
            let cs: Vec<Curve> = runs.iter().map(|r| Curve::pass_at_1(*name, &r.curve)).collect();
            Curve::mean(*name, &cs)
        })
        .collect();
    let by_step: Vec<Curve> = results
        .iter()
        .map(|(name, runs)| {
            let cs: Vec<Curve> = runs.iter().map(|r| Curve::pass_at_1_by_step(*name, &r.curve)).collect();
            Curve::mean(*name, &cs)
        })
        .collect();
    // `docs/rlvr-demo.md` -> `docs/rlvr-demo.svg` (section `results`) or `docs/rlvr-demo-<section>.svg`.
    let stem = a.report.file_stem().and_then(|f| f.to_str()).unwrap_or("report");
    let plot = match a.section.as_str() {
        "results" => a.report.with_extension("svg"),
        section => a.report.with_file_name(format!("{stem}-{section}.svg")),
    };
    plot_panels(
        &plot,
        "Countdown: held-out pass@1 (mean over seeds)",
        &[
            Panel { x_label: "rollouts (training + selection)".into(), curves: curves.clone() },
            Panel { x_label: "training steps".into(), curves: by_step },
        ],
    )?;
    // Target: dynamic sampling's final accuracy (mean over seeds), when DS ran.
    let ds_target = a.target.or_else(|| {
        results
            .iter()
            .find(|(n, _)| *n == "ds")
            .map(|(_, runs)| mean_std(&runs.iter().map(|r| r.last.pass_at_1).collect::<Vec<_>>()).0)
    });
    let target_name = if a.target.is_some() { "the target" } else { "DS's final" };
    // A target every method reaches: the lowest final mean pass@1.
    let finals: Vec<f64> = results
        .iter()
        .map(|(_, runs)| mean_std(&runs.iter().map(|r| r.last.pass_at_1).collect::<Vec<_>>()).0)
        .collect();
    let common = finals.iter().copied().fold(f64::INFINITY, f64::min);
    let run_seconds: f64 = results
        .iter()
        .flat_map(|(_, runs)| runs.iter())
        .map(|r| r.seconds.generation + r.seconds.scoring + r.seconds.selection + r.seconds.loss + r.seconds.eval)
        .sum();
    let mut md = String::new();
    let budget = match base.rl.rollout_budget {
        Some(b) => format!("the same rollout budget ({b} rollouts, at most {} training steps)", base.rl.steps),
        None => format!(
            "the same number of training steps ({}; dynamic sampling spends more rollouts per step)",
            base.rl.steps
        ),
    };
    writeln!(
        md,
        "Every method runs {budget} from the same warm start per seed; {} seeds; {} held-out prompts × {} samples at T = {}. Mean ± sample std over seeds. Run time: {:.0} s of RL and evaluation summed over the runs (device: {}).\n",
        a.seeds, base.task.total_eval_prompts(), base.eval.samples, base.eval.temperature, run_seconds, device
    )?;
    writeln!(
        md,
        "| method | pass@1 before | pass@1 after | pass@{k} after | steps | rollouts | generated effective (outcome) | generated with reward variance | batch effective | rollouts to pass@1 {common:.3} (lowest final) | rollouts to {target_name} pass@1{t} |",
        k = base.eval.k,
        t = ds_target.map_or(String::new(), |t| format!(" ({t:.3})"))
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for ((name, runs), curve) in results.iter().zip(&curves) {
        let col = |f: &dyn Fn(&RunSummary) -> f64| mean_std(&runs.iter().map(f).collect::<Vec<_>>());
        let (b, bs) = col(&|r| r.initial.pass_at_1);
        let (p, ps) = col(&|r| r.last.pass_at_1);
        let (k, ks) = col(&|r| r.last.pass_at_k);
        let (st, _) = col(&|r| r.steps as f64);
        let (ro, _) = col(&|r| r.rollouts.total() as f64);
        let (ge, _) = col(&|r| r.generated_mixed_outcome_ratio);
        let (gv, _) = col(&|r| r.generated_reward_variance_ratio);
        let (be, _) = col(&|r| r.batch_effective_ratio);
        let reach_common = curve.rollouts_to_reach(common).map_or("not reached".to_string(), |x| format!("{x:.0}"));
        let reach = match ds_target {
            Some(t) => curve.rollouts_to_reach(t).map_or("not reached".to_string(), |x| format!("{x:.0}")),
            None => "-".into(),
        };
        writeln!(
            md,
            "| {name} | {b:.3} ± {bs:.3} | {p:.3} ± {ps:.3} | {k:.3} ± {ks:.3} | {st:.0} | {ro:.0} | {ge:.2} | {gv:.2} | {be:.2} | {reach_common} | {reach} |"
        )?;
    }
    writeln!(
        md,
        "\n![held-out pass@1 vs rollouts]({})\n",
        plot.file_name().and_then(|f| f.to_str()).unwrap_or("rlvr-demo.svg")
    )?;
    // Held-out pass@1 per level (mean over seeds), before and after: whether a level saturates.
    let levels: std::collections::BTreeSet<&String> =
        results.iter().flat_map(|(_, runs)| runs.iter().flat_map(|r| r.last.pass_at_1_by_level.keys())).collect();
    if levels.len() > 1 {
        let head: Vec<String> = levels.iter().map(|l| format!("{l}: before → after")).collect();
        writeln!(md, "Held-out pass@1 per level (mean over seeds):\n")?;
        writeln!(md, "| method | {} |", head.join(" | "))?;
        writeln!(md, "|---|{}", "---|".repeat(levels.len()))?;
        for (name, runs) in results {
            let cells: Vec<String> = levels
                .iter()
                .map(|l| {
                    let at = |p: &frugal_rl::rlvr_train::EvalReport| {
                        p.pass_at_1_by_level.get(*l).copied().unwrap_or(f64::NAN)
                    };
                    let (b, _) = mean_std(&runs.iter().map(|r| at(&r.initial)).collect::<Vec<_>>());
                    let (e, _) = mean_std(&runs.iter().map(|r| at(&r.last)).collect::<Vec<_>>());
                    format!("{b:.3} → {e:.3}")
                })
                .collect();
            writeln!(md, "| {name} | {} |", cells.join(" | "))?;
        }
        writeln!(md)?;
    }
    writeln!(md, "Per-seed runs:\n")?;
    let rows: Vec<(String, &RunSummary)> = results
        .iter()
        .flat_map(|(name, runs)| runs.iter().map(move |r| (format!("{name} (seed {})", r.seed), r)))
        .collect();
    md.push_str(&summary_table(&rows));

    let begin = format!("<!-- {}:begin -->", a.section);
    let end = format!("<!-- {}:end -->", a.section);
    let block = format!("{begin}\n{md}{end}");
    let text = match std::fs::read_to_string(&a.report) {
        Ok(old) => match (old.find(&begin), old.find(&end)) {
            (Some(i), Some(j)) if j > i => format!("{}{block}{}", &old[..i], &old[j + end.len()..]),
            _ => format!("{old}\n{block}\n"),
        },
        Err(_) => format!("# RLVR demo: method comparison\n\n{block}\n"),
    };
    std::fs::write(&a.report, text)?;
    println!("\n{md}");
    println!("report: {}\nplot:   {}", a.report.display(), plot.display());
    Ok(())
}

fn main() -> Result<()> {
    let mut a = Args::parse();
    let cfg = match a.resume.clone() {
        Some(dir) => {
            let others = a.config.is_some()
                || a.seed.is_some()
                || a.selector.is_some()
                || a.model.is_some()
                || a.lora.is_some()
                || a.no_replay
                || a.loss.is_some()
                || a.sft_steps.is_some()
                || a.init_checkpoint.is_some()
                || a.train_prompts.is_some()
                || a.eval_prompts.is_some()
                || a.eval_every.is_some()
                || a.compare;
            if others {
                bail!("--resume continues a run with its own config: only --steps, --budget and --quiet may be given");
            }
            let mut cfg = Trainer::checkpoint_config(checkpoint_dir(&dir))
                .with_context(|| format!("no checkpoint to resume in {}", dir.display()))?;
            if let Some(s) = a.steps {
                cfg.rl.steps = s;
            }
            if a.budget.is_some() {
                cfg.rl.rollout_budget = a.budget;
            }
            a.out = dir;
            cfg
        }
        None => config_from_args(&a)?,
    };
    let device = frugal_rl::rlvr_train::device_of(&cfg)?;
    let mut pools = format!("{:?} levels {:?}", cfg.task.pool.family, cfg.task.pool.drawn_levels());
    for m in &cfg.task.mix {
        pools.push_str(&format!(" + {:?} levels {:?}", m.pool.family, m.pool.drawn_levels()));
    }
    let (train, eval) = (cfg.task.total_train_prompts(), cfg.task.total_eval_prompts());
    let model = match &cfg.hf {
        Some(hf) => {
            let c = frugal_rl::rl_hf::HfConfig::from_file(hf.dir.join(frugal_rl::rl_hf::CONFIG_FILE))
                .with_context(|| format!("reading the model of hf.dir = {}", hf.dir.display()))?;
            format!("{} {} ({} parameters)", c.family.model_type(), hf.dir.display(), c.num_parameters())
        }
        None => format!("rl-lm transformer ({} parameters)", cfg.model.num_parameters()),
    };
    println!(
        "device {} | {pools} | {train} train / {eval} held-out prompts (disjoint) | {model}",
        frugal_rl::nn::device_name(device),
    );
    if a.compare {
        return compare(&a, &cfg);
    }
    let s =
        run_one(cfg.clone(), &a.out, a.quiet, a.save_warm_start.as_deref(), a.resume.is_some(), a.checkpoint_every)?;
    let plot = a.out.join("accuracy.svg");
    let label = format!("{}{}", s.selector, if s.replay { " + POPO" } else { "" });
    plot_curves(&plot, "held-out pass@1 vs rollouts", &[Curve::pass_at_1(label.clone(), &s.curve)])?;
    print_summary(&cfg, &s, &plot);
    println!(
        "run digest:             {:016x} (every step metric and evaluation, wall times excluded)",
        run_digest(&a.out)?
    );
    println!("\n{}", summary_table(&[(label, &s)]));
    println!("metrics: {}", a.out.join("metrics.jsonl").display());
    Ok(())
}
