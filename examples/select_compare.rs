//! Compares the prompt selectors of `rlvr-select` on the synthetic prompt pool: rollouts needed
//! to reach a target mean success rate, effective-sample ratio, rollouts spent in selection,
//! predicted-vs-realised correlation and the DPS confusion statistics, over several seeds.
//!
//! ```text
//! cargo run --release --example select_compare --no-default-features --features rlvr-select -- --seeds 5
//! ```
//! The defaults are tiny so the example runs in seconds; see `docs/rlvr-select.md` for the
//! table and the command that produced it.

use anyhow::Result;
use clap::Parser;
use rl_core::stats::{mean, std_dev};
use rl_core::Params;
use rl_core::{JsonlSink, MetricsSink};
use rlvr_select::sim::{run, Dynamics, PromptPoolSim, RunConfig, RunReport, SimParams, SkillParams};
use rlvr_select::{
    CandidateSource, Dps, DpsParams, DynamicSampling, EpochWindow, FilterParams, HistoryResampling,
    HistoryResamplingParams, Mopps, MoppsParams, OnlineDifficultyFilter, Selector, WholePool,
};

#[derive(Parser, Debug)]
#[command(about = "Compare prompt selectors on the synthetic prompt pool")]
struct Args {
    /// Number of seeds.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Prompts in the pool.
    #[arg(long, default_value_t = 1000)]
    n_prompts: usize,
    /// Prompts per training step (B).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Rollouts per prompt (k).
    #[arg(long, default_value_t = 8)]
    k: usize,
    /// Candidate ratio r of the predictive selectors (window of r·B; 0 = whole pool).
    #[arg(long, default_value_t = 8)]
    ratio: usize,
    /// DAPO's cap on generation batches (its candidate window is this many batches).
    #[arg(long, default_value_t = 10)]
    max_gen_batches: usize,
    /// Maximum training steps.
    #[arg(long, default_value_t = 1500)]
    steps: u64,
    /// Target mean success rate of the pool.
    #[arg(long, default_value_t = 0.6)]
    target: f64,
    /// DPS retention λ.
    #[arg(long, default_value_t = 0.7)]
    dps_decay: f32,
    /// MoPPS retention λ.
    #[arg(long, default_value_t = 1.0)]
    mopps_decay: f32,
    /// Correlation of feature 0 with difficulty (for the feature-based selectors GPS, MPTS, PDTS).
    #[arg(long, default_value_t = 0.2)]
    feature_correlation: f64,
    /// Simulator: global skill gain per effective group (default: `SkillParams::default()`).
    #[arg(long)]
    global_lr: Option<f64>,
    /// Simulator: per-prompt skill gain per effective group.
    #[arg(long)]
    local_lr: Option<f64>,
    /// Simulator: spread of prompt difficulties (logits).
    #[arg(long)]
    difficulty_std: Option<f64>,
    /// Simulator: per-step decay of the per-prompt skill.
    #[arg(long)]
    forgetting: Option<f64>,
    /// Write every run's summary metrics as JSON lines here (`method` = index in the table).
    #[arg(long)]
    jsonl: Option<std::path::PathBuf>,
}

fn selectors(a: &Args) -> Result<Vec<Box<dyn Selector>>> {
    let n = a.n_prompts;
    let filt = |p: FilterParams| FilterParams { group_size: a.k, max_gen_batches: a.max_gen_batches, ..p };
    let epoch_steps = (n / a.batch.max(1)).max(1) as u64;
    Ok(vec![
        Box::new(rlvr_select::Uniform::new()),
        Box::new(HistoryResampling::new(HistoryResamplingParams { epoch_steps: Some(epoch_steps) }.check()?)?),
        Box::new(DynamicSampling::new(filt(FilterParams::dynamic_sampling()).check()?)?),
        Box::new(OnlineDifficultyFilter::new(filt(FilterParams::online_difficulty()).check()?)?),
        Box::new(Mopps::new(MoppsParams::default().decay(a.mopps_decay).check()?, n)?),
        Box::new(Dps::new(DpsParams::default().decay(a.dps_decay).check()?, n)?),
    ])
}

fn source(a: &Args, name: &str) -> Result<Box<dyn CandidateSource>> {
    let ratio = match name {
        "uniform" => 1,
        "dynamic-sampling" | "online-difficulty-filter" => a.max_gen_batches.max(1),
        _ => a.ratio,
    };
    Ok(if ratio == 0 { Box::new(WholePool::new(a.n_prompts)) } else { Box::new(EpochWindow::new(a.n_prompts, ratio)?) })
}

fn fmt_ms(xs: &[f64]) -> String {
    if xs.is_empty() {
        return "-".into();
    }
    if xs.len() == 1 {
        return format!("{:.0}", xs[0]);
    }
    format!("{:.0} ± {:.0}", mean(xs), std_dev(xs, 1))
}

fn main() -> Result<()> {
    let a = Args::parse();
    let d = SkillParams::default();
    let skill = SkillParams {
        global_lr: a.global_lr.unwrap_or(d.global_lr),
        local_lr: a.local_lr.unwrap_or(d.local_lr),
        difficulty_std: a.difficulty_std.unwrap_or(d.difficulty_std),
        forgetting: a.forgetting.unwrap_or(d.forgetting),
        ..d
    };
    let params = SimParams {
        n_prompts: a.n_prompts,
        group_size: a.k,
        feature_correlation: a.feature_correlation,
        dynamics: Dynamics::Skill(skill),
        ..SimParams::default()
    };
    let cfg = RunConfig { batch_size: a.batch, steps: a.steps, target_success: a.target, stop_at_target: true };
    let mut sink = a.jsonl.as_ref().map(JsonlSink::create).transpose()?;
    let names: Vec<&'static str> = selectors(&a)?.iter().map(|s| s.name()).collect();
    let mut reports: Vec<Vec<RunReport>> = vec![Vec::new(); names.len()];
    for seed in 0..a.seeds {
        for (m, mut sel) in selectors(&a)?.into_iter().enumerate() {
            // Same pool and same random stream for every method (common random numbers).
            let mut sim = PromptPoolSim::new(params.check()?, seed)?;
            let mut src = source(&a, sel.name())?;
            let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(seed, 1));
            let r = run(sel.as_mut(), &mut sim, src.as_mut(), &cfg, &mut rng)?;
            if let Some(sink) = sink.as_mut() {
                let mut m = r.diagnostics.to_metrics().with("seed", seed as f64).with("method", m as f64);
                m.insert("final_success", r.final_success);
                if let Some(x) = r.rollouts_to_target {
                    m.insert("rollouts_to_target", x as f64);
                }
                sink.log(r.records.len() as u64, &m)?;
            }
            reports[m].push(r);
        }
    }
    let start = PromptPoolSim::new(params.check()?, 0)?.mean_success();
    println!(
        "pool {} prompts, B = {}, k = {}, predictive candidate ratio {}, DS cap {} gen batches, target {:.2} (start {:.3}), {} seeds, ≤ {} steps\n",
        a.n_prompts, a.batch, a.k, a.ratio, a.max_gen_batches, a.target, start, a.seeds, a.steps
    );
    println!("| method | reached | rollouts to target | steps to target | ESR | selection rollouts | Spearman | class-2 P/R | count std |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let ds_rollouts: Vec<f64> = names
        .iter()
        .position(|n| *n == "dynamic-sampling")
        .map(|i| reports[i].iter().filter_map(|r| r.rollouts_to_target).map(|x| x as f64).collect())
        .unwrap_or_default();
    for (name, rs) in names.iter().zip(&reports) {
        let roll: Vec<f64> = rs.iter().filter_map(|r| r.rollouts_to_target).map(|x| x as f64).collect();
        let steps: Vec<f64> = rs.iter().filter_map(|r| r.steps_to_target).map(|x| x as f64).collect();
        let esr: Vec<f64> = rs.iter().map(|r| r.diagnostics.esr).collect();
        let sel_share: Vec<f64> = rs
            .iter()
            .map(|r| r.diagnostics.selection_rollouts as f64 / r.diagnostics.total_rollouts().max(1) as f64)
            .collect();
        let sp: Vec<f64> = rs.iter().filter_map(|r| r.diagnostics.spearman_mean).collect();
        let p2: Vec<f64> = rs.iter().filter_map(|r| r.diagnostics.class2_precision).collect();
        let r2: Vec<f64> = rs.iter().filter_map(|r| r.diagnostics.class2_recall).collect();
        let cs: Vec<f64> = rs.iter().map(|r| r.diagnostics.count_std).collect();
        let rel = if !roll.is_empty() && !ds_rollouts.is_empty() {
            format!(" ({:.2}× DS)", mean(&roll) / mean(&ds_rollouts))
        } else {
            String::new()
        };
        println!(
            "| {name} | {}/{} | {}{rel} | {} | {:.3} | {:.0}% | {} | {} | {:.2} |",
            roll.len(),
            rs.len(),
            fmt_ms(&roll),
            fmt_ms(&steps),
            mean(&esr),
            100.0 * mean(&sel_share),
            if sp.is_empty() { "-".into() } else { format!("{:.2}", mean(&sp)) },
            if p2.is_empty() { "-".into() } else { format!("{:.2}/{:.2}", mean(&p2), mean(&r2)) },
            mean(&cs),
        );
    }
    Ok(())
}
