//! Robust domain randomisation on Pendulum-v1: which training tasks should a SAC agent see?
//! ERM (uniform), DRM (roll out twice as many candidate tasks, train on the worst half), MPTS
//! and PDTS (`rlvr-select`'s neural risk learners predict each candidate's return from its
//! task identifier and choose without extra rollouts). Compared by the CVaR of the return
//! over a fixed test grid of tasks — the robust domain-randomisation claim of the MPTS and
//! PDTS papers, checked with this library's real agents.
//!
//! ```text
//! cargo run --release --features rl-agents,rlvr-select-neural --example robust_dr -- --seeds 3 --iters 20 --parallel  # the reported runs
//! cargo run --features rl-agents,rlvr-select-neural --example robust_dr -- --iters 3 --seeds 1 --hidden 16 --test-grid 2   # CI size
//! ```
//!
//! Setup (ours; PDTS's physical-DR benchmarks are MuJoCo/Box2D tasks with DDPG, see
//! `docs/rl-agents.md`): task = Pendulum mass `m ∈ [0.5, 2]` and length `l ∈ [0.5, 1.5]`
//! (gravity 10, torque limit 2: heavy, long pendulums need several swings); identifier =
//! `(m, l)` scaled to `[0, 1]²`. Each iteration trains on `B = 4` episodes (200 steps each, one
//! task per episode), then makes `4 · 200` SAC updates (64-64 networks, batch 256, SAC v2
//! otherwise; the first 2 iterations act uniformly at random and do not update). Candidates
//! per iteration: ERM `B`, DRM `2B` (every candidate is rolled out; the worst `B` episodes are
//! trained on, the rest only cost environment steps), MPTS `4B` (`MptsParams::
//! domain_randomisation`: UCB over 50 latent draws, γ1 = 5, random half), PDTS `64B`
//! (`PdtsParams::domain_randomisation(1.0)`: one posterior draw + min-distance diversity,
//! random half). Risk = −episode return (standardised by the learner). MPTS/PDTS select
//! uniformly for the first 10% of iterations (reference `uniform_sample_steps = 0.1`) while
//! their learner observes. Candidate tasks of iteration `t` are drawn from a stream seeded by
//! `(seed, t)`, common to all methods. Test: a `G × G` grid over the training box, 2 episodes
//! per task (gymnasium seeds 0, 1), deterministic policy; CVaR_α = mean of the worst
//! `(1 − α)` fraction of the episode returns.
#[path = "support/agents.rs"]
mod support;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Parser;
use ndarray::{Array1, Array2};
use rand::Rng;
use rl_agents::{Agent, BatchLearner, ReplayBuffer, ReplayBufferParams, Sac, SacParams};
use rl_core::stats::{cvar_lower, mean};
use rl_core::{ActMode, Env, Params, SeededRng};
use rl_envs::classic::{Pendulum, PendulumParams};
use rl_envs::TaskParams;
use rlvr_select::neural::{Mpts, MptsParams, Pdts, PdtsParams};
use rlvr_select::{Candidates, Drm, DrmParams, ItemId, NoRollouts, Outcome, RolloutOracle, Selector};

#[derive(Parser, Debug)]
#[command(about = "Robust DR on Pendulum: ERM / DRM / MPTS / PDTS task sampling, CVaR of test return")]
struct Args {
    /// Training iterations (B episodes each).
    #[arg(long, default_value_t = 25)]
    iters: usize,
    /// Seeds.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// First seed: the runs use seeds `first_seed .. first_seed + seeds` (each run depends only
    /// on its method and seed, so runs of different seeds can be made in separate invocations).
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Episodes (tasks) per iteration.
    #[arg(long, default_value_t = 4)]
    batch: usize,
    /// Hidden width of SAC's networks (two layers).
    #[arg(long, default_value_t = 64)]
    hidden: i64,
    /// Test grid side G (G × G tasks).
    #[arg(long, default_value_t = 5)]
    test_grid: usize,
    /// Evaluate on the test grid every this many iterations (and at the end).
    #[arg(long, default_value_t = 5)]
    eval_every: usize,
    /// Comma-separated methods.
    #[arg(long, default_value = "erm,drm,mpts,pdts")]
    methods: String,
    /// Output folder.
    #[arg(long, default_value = "target/robust-dr")]
    out: PathBuf,
    /// Run every (method, seed) in its own thread.
    #[arg(long)]
    parallel: bool,
}

const M_RANGE: (f64, f64) = (0.5, 2.0);
const L_RANGE: (f64, f64) = (0.5, 1.5);
const EP_LEN: usize = 200;
const RANDOM_ITERS: usize = 2;

fn task_of(x: [f64; 2]) -> Vec<f64> {
    vec![10.0, M_RANGE.0 + x[0] * (M_RANGE.1 - M_RANGE.0), L_RANGE.0 + x[1] * (L_RANGE.1 - L_RANGE.0)]
}

/// One episode's transitions and return.
struct Episode {
    obs: Array2<f32>,
    action: Array2<f32>,
    reward: Array1<f32>,
    next_obs: Array2<f32>,
    ret: f64,
}

/// Runs one episode per task in lock step (one batched forward per step). `random`: uniform
/// actions; otherwise SAC's exploration (`explore`) or its deterministic policy (`eval`).
fn episodes(
    sac: &mut Sac,
    tasks: &[[f64; 2]],
    mode: Option<ActMode>,
    reset_seeds: &[u64],
    rng: &mut SeededRng,
) -> Result<Vec<Episode>> {
    let n = tasks.len();
    let mut envs: Vec<Pendulum> = Vec::with_capacity(n);
    let mut obs = Array2::<f32>::zeros((n, 3));
    for (i, x) in tasks.iter().enumerate() {
        let mut env = Pendulum::new(PendulumParams::default().check()?)?;
        env.set_task(&task_of(*x))?;
        let o = env.reset(&mut rl_envs::rng::NumpyRng::new(reset_seeds[i]))?;
        obs.row_mut(i).assign(&o);
        envs.push(env);
    }
    let mut out: Vec<Episode> = (0..n)
        .map(|_| Episode {
            obs: Array2::zeros((EP_LEN, 3)),
            action: Array2::zeros((EP_LEN, 1)),
            reward: Array1::zeros(EP_LEN),
            next_obs: Array2::zeros((EP_LEN, 3)),
            ret: 0.0,
        })
        .collect();
    for t in 0..EP_LEN {
        let actions = match mode {
            None => Array2::from_shape_fn((n, 1), |_| rng.random_range(-2.0f32..2.0)),
            Some(ActMode::Stochastic) => sac.explore(obs.view())?,
            Some(ActMode::Deterministic) => sac.policy().act_batch(obs.view(), ActMode::Deterministic, rng)?,
        };
        for i in 0..n {
            let step = envs[i].step(actions.row(i))?;
            let e = &mut out[i];
            e.obs.row_mut(t).assign(&obs.row(i));
            e.action.row_mut(t).assign(&actions.row(i));
            e.reward[t] = step.reward;
            e.next_obs.row_mut(t).assign(&step.obs);
            e.ret += f64::from(step.reward);
            obs.row_mut(i).assign(&step.obs);
        }
    }
    Ok(out)
}

fn push(buf: &mut ReplayBuffer, e: &Episode, stream: u32) -> Result<()> {
    for t in 0..EP_LEN {
        // Pendulum never terminates; the 200th step is a time-limit truncation
        buf.push(e.obs.row(t), e.action.row(t), e.reward[t], e.next_obs.row(t), false, t + 1 == EP_LEN, stream)?;
    }
    Ok(())
}

/// DRM's oracle: "rolling out" a candidate = one exploration episode of the current policy.
struct EpisodeOracle<'a> {
    sac: &'a mut Sac,
    tasks: &'a [[f64; 2]],
    rng: &'a mut SeededRng,
    random: bool,
    episodes: Vec<Option<Episode>>,
    spent: u64,
}

impl RolloutOracle for EpisodeOracle<'_> {
    fn rollout(
        &mut self,
        ids: &[ItemId],
        _k: usize,
        _rng: &mut dyn rand::RngCore,
    ) -> rlvr_select::Result<Vec<Outcome>> {
        let tasks: Vec<[f64; 2]> = ids.iter().map(|&i| self.tasks[i as usize]).collect();
        let seeds: Vec<u64> = ids.iter().map(|_| self.rng.random::<u32>() as u64).collect();
        let mode = if self.random { None } else { Some(ActMode::Stochastic) };
        let eps = episodes(self.sac, &tasks, mode, &seeds, self.rng)
            .map_err(|e| rlvr_select::SelectError::Oracle(e.to_string()))?;
        self.spent += ids.len() as u64;
        let mut outcomes = Vec::with_capacity(ids.len());
        for (&id, e) in ids.iter().zip(eps) {
            outcomes.push(Outcome { risk: Some(-e.ret as f32), ..Outcome::new(id, vec![]) });
            self.episodes[id as usize] = Some(e);
        }
        Ok(outcomes)
    }

    fn rollouts_spent(&self) -> u64 {
        self.spent
    }
}

/// Deterministic returns on the test grid (2 episodes per task).
fn test_returns(sac: &mut Sac, g: usize) -> Result<Vec<f64>> {
    let mut tasks = Vec::new();
    let mut seeds = Vec::new();
    for i in 0..g {
        for j in 0..g {
            let x = [i as f64 / (g.max(2) - 1) as f64, j as f64 / (g.max(2) - 1) as f64];
            for s in 0..2 {
                tasks.push(x);
                seeds.push(s);
            }
        }
    }
    let mut rng = rl_core::rng_from_seed(0);
    Ok(episodes(sac, &tasks, Some(ActMode::Deterministic), &seeds, &mut rng)?.iter().map(|e| e.ret).collect())
}

struct RunResult {
    test: Vec<f64>,
    curve: Vec<(f64, f64)>,
    train_steps: u64,
    selection_steps: u64,
    seconds: f64,
}

fn run(method: &str, seed: u64, args: &Args) -> Result<RunResult> {
    let b = args.batch;
    let n_cand = match method {
        "erm" => b,
        "drm" => 2 * b,
        "mpts" => 4 * b,
        "pdts" => 64 * b,
        other => anyhow::bail!("unknown method {other}"),
    };
    let mut selector: Option<Box<dyn Selector>> = match method {
        "drm" => Some(Box::new(Drm::new(DrmParams::default().check()?)?)),
        "mpts" => Some(Box::new(Mpts::new(MptsParams::domain_randomisation().seed(seed).check()?, 2)?)),
        "pdts" => Some(Box::new(Pdts::new(PdtsParams::domain_randomisation(1.0).seed(seed).check()?, 2)?)),
        _ => None,
    };
    let obs_space = Pendulum::new(PendulumParams::default().check()?)?.observation_space().clone();
    let act_space = Pendulum::new(PendulumParams::default().check()?)?.action_space().clone();
    let mut sac = Sac::new(
        SacParams::default().hidden([args.hidden, args.hidden]).check()?,
        &obs_space,
        &act_space,
        tch::Device::Cpu,
        seed,
    )?;
    let mut buf = ReplayBuffer::new(ReplayBufferParams::default().check()?, 3, 1)?;
    let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "dr-run"));
    let mut sel_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "selector"));
    let warm = (args.iters / 10).max(RANDOM_ITERS);
    let (mut train_steps, mut selection_steps) = (0u64, 0u64);
    let mut curve = Vec::new();
    let t0 = Instant::now();
    for it in 0..args.iters {
        let mut cand_rng =
            rl_core::rng_from_seed(rl_core::derive_seed(rl_core::derive_seed_named(seed, "candidates"), it as u64));
        let tasks: Vec<[f64; 2]> = (0..n_cand).map(|_| [cand_rng.random::<f64>(), cand_rng.random::<f64>()]).collect();
        let ids: Vec<ItemId> = (0..n_cand as u64).collect();
        let feats: Vec<f32> = tasks.iter().flat_map(|x| [x[0] as f32, x[1] as f32]).collect();
        let random = it < RANDOM_ITERS;
        let chosen: Vec<Episode> = match (&mut selector, method) {
            (Some(sel), "drm") => {
                let mut oracle = EpisodeOracle {
                    sac: &mut sac,
                    tasks: &tasks,
                    rng: &mut rng,
                    random,
                    episodes: (0..n_cand).map(|_| None).collect(),
                    spent: 0,
                };
                let s =
                    sel.select(it as u64, Candidates::with_features(&ids, &feats, 2)?, b, &mut oracle, &mut sel_rng)?;
                selection_steps += (oracle.spent - b as u64) * EP_LEN as u64;
                let mut eps = std::mem::take(&mut oracle.episodes);
                s.ids
                    .iter()
                    .map(|&i| {
                        eps[i as usize]
                            .take()
                            .ok_or_else(|| anyhow::anyhow!("DRM chose an episode it did not roll out"))
                    })
                    .collect::<Result<_>>()?
            }
            (Some(sel), _) => {
                let chosen_ids: Vec<ItemId> = if it < warm {
                    ids[..b].to_vec() // uniform warm-up: the candidates are i.i.d. uniform draws
                } else {
                    sel.select(
                        it as u64,
                        Candidates::with_features(&ids, &feats, 2)?,
                        b,
                        &mut NoRollouts,
                        &mut sel_rng,
                    )?
                    .ids
                };
                let ts: Vec<[f64; 2]> = chosen_ids.iter().map(|&i| tasks[i as usize]).collect();
                let seeds: Vec<u64> = ts.iter().map(|_| rng.random::<u32>() as u64).collect();
                let eps =
                    episodes(&mut sac, &ts, if random { None } else { Some(ActMode::Stochastic) }, &seeds, &mut rng)?;
                let outcomes: Vec<Outcome> = chosen_ids
                    .iter()
                    .zip(&eps)
                    .map(|(&id, e)| Outcome {
                        risk: Some(-e.ret as f32),
                        features: Some(vec![tasks[id as usize][0] as f32, tasks[id as usize][1] as f32]),
                        ..Outcome::new(id, vec![])
                    })
                    .collect();
                sel.observe(it as u64, &outcomes, &mut sel_rng)?;
                eps
            }
            (None, _) => {
                let seeds: Vec<u64> = tasks.iter().map(|_| rng.random::<u32>() as u64).collect();
                episodes(&mut sac, &tasks, if random { None } else { Some(ActMode::Stochastic) }, &seeds, &mut rng)?
            }
        };
        for (k, e) in chosen.iter().enumerate() {
            push(&mut buf, e, k as u32)?;
        }
        train_steps += (chosen.len() * EP_LEN) as u64;
        if !random {
            for _ in 0..chosen.len() * EP_LEN {
                let batch = buf.sample(256, tch::Device::Cpu, &mut rng)?;
                sac.update(&batch)?;
            }
        }
        if (it + 1) % args.eval_every == 0 || it + 1 == args.iters {
            let r = test_returns(&mut sac, args.test_grid)?;
            curve.push((train_steps as f64, cvar_lower(&r, 0.9)?));
        }
    }
    Ok(RunResult {
        test: test_returns(&mut sac, args.test_grid)?,
        curve,
        train_steps,
        selection_steps,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    tch::set_num_threads(1);
    std::fs::create_dir_all(&args.out)?;
    let methods: Vec<String> = args.methods.split(',').map(|m| m.trim().to_string()).collect();
    let jobs: Vec<(String, u64)> = methods
        .iter()
        .flat_map(|m| (args.first_seed..args.first_seed + args.seeds).map(move |s| (m.clone(), s)))
        .collect();
    let results: Vec<RunResult> = if args.parallel {
        std::thread::scope(|sc| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|(m, seed)| {
                    let args = &args;
                    sc.spawn(move || run(m, *seed, args))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow::anyhow!("a run's thread panicked"))?)
                .collect::<Result<Vec<_>>>()
        })?
    } else {
        jobs.iter().map(|(m, seed)| run(m, *seed, &args)).collect::<Result<Vec<_>>>()?
    };
    let mut jsonl = std::fs::File::create(args.out.join("runs.jsonl"))?;
    println!(
        "robust DR, Pendulum (m in {M_RANGE:?}, l in {L_RANGE:?}): {} iterations x {} episodes, {} seeds, test grid {g}x{g} x 2 episodes\n",
        args.iters,
        args.batch,
        args.seeds,
        g = args.test_grid
    );
    println!("| method | mean return | CVaR_0.5 | CVaR_0.7 | CVaR_0.9 | worst episode | train env steps | selection env steps | s / run |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut curves = Vec::new();
    for method in &methods {
        let mut cols: [Vec<f64>; 5] = Default::default();
        let (mut secs, mut sel_steps, mut train_steps) = (Vec::new(), 0u64, 0u64);
        let mut method_curves = Vec::new();
        for ((m, seed), r) in jobs.iter().zip(&results).filter(|((m, _), _)| m == method) {
            let worst = r.test.iter().copied().fold(f64::INFINITY, f64::min);
            let row =
                [mean(&r.test), cvar_lower(&r.test, 0.5)?, cvar_lower(&r.test, 0.7)?, cvar_lower(&r.test, 0.9)?, worst];
            for (c, v) in cols.iter_mut().zip(row) {
                c.push(v);
            }
            secs.push(r.seconds);
            sel_steps = r.selection_steps;
            train_steps = r.train_steps;
            use std::io::Write;
            writeln!(
                jsonl,
                "{}",
                serde_json::json!({"method": m, "seed": seed, "mean": row[0], "cvar_0.5": row[1], "cvar_0.7": row[2],
                                   "cvar_0.9": row[3], "worst": row[4], "train_env_steps": r.train_steps,
                                   "selection_env_steps": r.selection_steps, "seconds": r.seconds, "curve_cvar_0.9": r.curve})
            )?;
            method_curves.push(r.curve.clone());
        }
        println!(
            "| {method} | {} | {} | {} | {} | {} | {train_steps} | {sel_steps} | {:.0} |",
            support::mean_std(&cols[0]),
            support::mean_std(&cols[1]),
            support::mean_std(&cols[2]),
            support::mean_std(&cols[3]),
            support::mean_std(&cols[4]),
            mean(&secs)
        );
        let len = method_curves.iter().map(Vec::len).min().unwrap_or(0);
        let points = (0..len)
            .map(|i| {
                (method_curves[0][i].0, method_curves.iter().map(|c| c[i].1).sum::<f64>() / method_curves.len() as f64)
            })
            .collect();
        curves.push(support::Curve { label: method.to_string(), points });
    }
    support::plot(
        &args.out.join("cvar.svg"),
        "Robust DR on Pendulum: CVaR_0.9 of test return (mean over seeds)",
        "CVaR_0.9 return",
        &curves,
        None,
    )?;
    Ok(())
}
