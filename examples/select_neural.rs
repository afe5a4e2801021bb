//! GPS, MPTS and PDTS on the synthetic prompt pool of `rlvr_select::sim`, against uniform
//! sampling, DAPO dynamic sampling, MoPPS and DPS: rollouts to reach a target mean success rate,
//! effective-sample ratio, and — for the shared predictors — how well the success rate of
//! prompts **never selected in training** (a held-out fifth of the pool) is predicted.
//!
//! ```text
//! cargo run --release --example select_neural --features rlvr-select                  # tiny
//! cargo run --release --example select_neural --features rlvr-select -- --steps 1500 --seeds 3
//! ```
//!
//! Prompt features are the simulator's (feature 0 correlates with difficulty at
//! `--feature-correlation`, the rest is noise) and serve as GPS's "embeddings" and MPTS/PDTS's
//! identifiers. MPTS/PDTS learn the normalised Bernoulli variance `4p(1−p)` as their "risk"
//! ([`RiskFromRewards::Informativeness`]), so selecting high risk means selecting informative
//! prompts.

use anyhow::Result;
use clap::Parser;
use rl_core::stats::{mean, pearson, spearman, std_dev};
use rl_core::Params;
use rlvr_select::neural::{Gps, GpsParams, Mpts, MptsParams, Pdts, PdtsParams};
use rlvr_select::sim::{run, PromptPoolSim, RunConfig, RunReport, SimParams};
use rlvr_select::{
    CandidateSource, Candidates, Dps, DpsParams, DynamicSampling, EpochWindow, FilterParams, Mopps, MoppsParams,
    RiskFromRewards, Selector, Uniform,
};

#[derive(Parser, Debug)]
#[command(about = "GPS / MPTS / PDTS vs uniform, DS, MoPPS, DPS on the synthetic prompt pool")]
struct Args {
    /// Number of seeds.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Prompts in the pool (the last fifth is held out from training).
    #[arg(long, default_value_t = 1000)]
    n_prompts: usize,
    /// Prompts per step (B).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Candidate ratio of the predictive selectors (window of r·B).
    #[arg(long, default_value_t = 8)]
    ratio: usize,
    /// DAPO's cap on generation batches.
    #[arg(long, default_value_t = 10)]
    max_gen_batches: usize,
    /// Maximum training steps.
    #[arg(long, default_value_t = 300)]
    steps: u64,
    /// Target mean success rate of the pool.
    #[arg(long, default_value_t = 0.6)]
    target: f64,
    /// Correlation of feature 0 with difficulty.
    #[arg(long, default_value_t = 0.2)]
    feature_correlation: f64,
    /// GPS intra-batch diversity weight.
    #[arg(long, default_value_t = GpsParams::default().intra_weight)]
    gps_intra: f64,
    /// GPS inter-step diversity weight.
    #[arg(long, default_value_t = GpsParams::default().inter_weight)]
    gps_inter: f64,
    /// Comma-separated methods.
    #[arg(long, default_value = "uniform,dynamic-sampling,mopps,dps,gps,mpts,pdts")]
    methods: String,
}

const DIM: usize = 8;

fn selector(name: &str, a: &Args, n: usize, seed: u64) -> Result<Box<dyn Selector>> {
    Ok(match name {
        "uniform" => Box::new(Uniform::new()),
        "dynamic-sampling" => Box::new(DynamicSampling::new(
            FilterParams { max_gen_batches: a.max_gen_batches, ..FilterParams::dynamic_sampling() }.check()?,
        )?),
        "mopps" => Box::new(Mopps::new(MoppsParams::default().check()?, n)?),
        "dps" => Box::new(Dps::new(DpsParams::default().decay(0.7).check()?, n)?),
        "gps" => Box::new(Gps::new(GpsParams::default().seed(seed).diversity(a.gps_intra, a.gps_inter).check()?, DIM)?),
        "mpts" => Box::new(Mpts::new(
            MptsParams { risk_from_rewards: RiskFromRewards::Informativeness, ..MptsParams::default().seed(seed) }
                .check()?,
            DIM,
        )?),
        "pdts" => Box::new(Pdts::new(
            PdtsParams { risk_from_rewards: RiskFromRewards::Informativeness, ..PdtsParams::default().seed(seed) }
                .check()?,
            DIM,
        )?),
        other => anyhow::bail!("unknown method {other}"),
    })
}

fn fmt(xs: &[f64], digits: usize) -> String {
    match xs.len() {
        0 => "–".into(),
        1 => format!("{:.*}", digits, xs[0]),
        _ => format!("{:.*} ± {:.*}", digits, mean(xs), digits, std_dev(xs, 1)),
    }
}

fn main() -> Result<()> {
    let a = Args::parse();
    tch::set_num_threads(1);
    let n = a.n_prompts;
    let n_train = n - n / 5;
    let params = SimParams { n_prompts: n, feature_correlation: a.feature_correlation, ..SimParams::default() };
    let cfg = RunConfig { batch_size: a.batch, steps: a.steps, target_success: a.target, stop_at_target: true };
    println!(
        "pool {n} prompts ({n_train} trainable, {} held out), B = {}, ratio {}, feature correlation {}, target {}, {} seeds, ≤ {} steps\n",
        n - n_train,
        a.batch,
        a.ratio,
        a.feature_correlation,
        a.target,
        a.seeds,
        a.steps
    );
    println!("| method | reached | rollouts to target | steps to target | ESR | held-out Pearson | held-out Spearman | select+observe ms/step |");
    println!("|---|---|---|---|---|---|---|---|");
    for name in a.methods.split(',').map(str::trim) {
        let mut reports: Vec<RunReport> = Vec::new();
        let (mut pr, mut sr, mut ms) = (Vec::new(), Vec::new(), Vec::new());
        for seed in 0..a.seeds {
            let mut sim = PromptPoolSim::new(params.check()?, seed)?;
            let table = sim.features()[..n_train * DIM].to_vec();
            let ratio = if name == "dynamic-sampling" {
                a.max_gen_batches
            } else if name == "uniform" {
                1
            } else {
                a.ratio
            };
            let mut src: Box<dyn CandidateSource> =
                Box::new(EpochWindow::new(n_train, ratio)?.with_features(table, DIM)?);
            let mut sel = selector(name, &a, n, seed)?;
            let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(seed, 1));
            let t0 = std::time::Instant::now();
            let r = run(sel.as_mut(), &mut sim, src.as_mut(), &cfg, &mut rng)?;
            ms.push(t0.elapsed().as_secs_f64() * 1e3 / r.records.len().max(1) as f64);
            // predictions for prompts never trained on
            let held: Vec<u64> = (n_train as u64..n as u64).collect();
            let feats = sim.features()[n_train * DIM..].to_vec();
            if let Some(pred) = sel.predict(Candidates::with_features(&held, &feats, DIM)?)? {
                let p: Vec<f64> = pred.iter().map(|p| p.mean).collect();
                let truth: Vec<f64> = held.iter().map(|&id| sim.success_prob(id)).collect::<Result<_, _>>()?;
                if let (Some(x), Some(y)) = (pearson(&p, &truth), spearman(&p, &truth)) {
                    pr.push(x);
                    sr.push(y);
                }
            }
            reports.push(r);
        }
        let roll: Vec<f64> = reports.iter().filter_map(|r| r.rollouts_to_target).map(|x| x as f64).collect();
        let steps: Vec<f64> = reports.iter().filter_map(|r| r.steps_to_target).map(|x| x as f64).collect();
        let esr: Vec<f64> = reports.iter().map(|r| r.diagnostics.esr).collect();
        println!(
            "| {name} | {}/{} | {} | {} | {:.3} | {} | {} | {:.2} |",
            roll.len(),
            reports.len(),
            fmt(&roll, 0),
            fmt(&steps, 0),
            mean(&esr),
            fmt(&pr, 3),
            fmt(&sr, 3),
            mean(&ms)
        );
    }
    Ok(())
}
