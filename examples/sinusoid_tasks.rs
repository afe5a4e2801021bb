//! Sinusoid K-shot regression with MAML: ERM vs DRM vs GDRM vs MPTS vs PDTS task sampling,
//! compared by CVaR_α of the adapted test MSE over a fixed set of test tasks (the benchmark of
//! MPTS / PDTS; recipe: thu-rllab/MPTS `sinusoid/`, see `docs/rlvr-select-neural.md`).
//!
//! ```text
//! cargo run --release --example sinusoid_tasks --features rlvr-select            # tiny (seconds)
//! cargo run --release --example sinusoid_tasks --features rlvr-select -- --full  # the reported run
//! ```
//!
//! Recipe: tasks `y = a sin(x + b)`, `a ~ U[0.1, 5]`, `b ~ U[0, π]`, `x ~ U[−5, 5]`, identifier
//! `(a, b)`; net 1-40-40-1 ReLU; MAML with K = 10 support / 10 query points, one inner SGD step
//! (lr 1e-3) whose gradient is not differentiated through (the reference calls
//! `torch.autograd.grad` without `create_graph`, i.e. first-order MAML); outer Adam lr 1e-3 on
//! the *sum* of the B = 16 query losses. Candidates per iteration: ERM 16, DRM 32 (trains on the
//! worst 16), GDRM 16 (exponentiated weights, η = 1e-3), MPTS 32 (γ0 = 1, γ1 = 3), PDTS 512
//! (one posterior draw, γ_div = 1); the candidate draws of iteration t are seeded by (seed, t),
//! common to all methods. Test: 1000 fixed tasks (seed 1e6), 10 SGD steps (lr 1e-3) on K = 10
//! points, MSE on a 1000-point grid over [−5, 5].

use anyhow::Result;
use clap::Parser;
use rand::Rng;
use rl_core::stats::{cvar_upper, mean, pearson, std_dev};
use rl_core::Params;
use rlvr_select::neural::{Mpts, MptsParams, Pdts, PdtsParams};
use rlvr_select::{
    Candidates, Drm, DrmParams, Gdrm, GdrmParams, ItemId, NoRollouts, Outcome, RolloutOracle, Selector, Uniform,
};
use std::f64::consts::PI;
use std::time::Instant;
use tch::{nn, nn::OptimizerConfig, Device, Kind, Tensor};

#[derive(Parser, Debug)]
#[command(about = "Sinusoid MAML: ERM / DRM / GDRM / MPTS / PDTS by CVaR of test MSE")]
struct Args {
    /// The reported run: 20000 iterations, 5 seeds, 1000 test tasks.
    #[arg(long)]
    full: bool,
    /// Meta-training iterations (default 300, or 20000 with --full).
    #[arg(long)]
    iters: Option<usize>,
    /// Seeds (default 2, or 5 with --full).
    #[arg(long)]
    seeds: Option<u64>,
    /// Test tasks (default 200, or 1000 with --full).
    #[arg(long)]
    test_tasks: Option<usize>,
    /// Comma-separated methods.
    #[arg(long, default_value = "erm,drm,gdrm,mpts,pdts")]
    methods: String,
    /// Write one JSON line per (method, seed) here.
    #[arg(long)]
    jsonl: Option<std::path::PathBuf>,
}

const K: i64 = 10;
const B: usize = 16;
const ALPHA: f64 = 1e-3; // inner lr
const BETA: f64 = 1e-3; // outer lr
const TEST_STEPS: usize = 10;
const TEST_LR: f64 = 1e-3;

/// Meta-parameters of the 1-40-40-1 network.
struct Net {
    vs: nn::VarStore,
    w: Vec<Tensor>,
}

impl Net {
    fn new(seed: u64) -> Self {
        tch::manual_seed(rl_core::seed::torch_seed(seed));
        let vs = nn::VarStore::new(Device::Cpu);
        let root = vs.root();
        let lin = |name: &str, i: i64, o: i64| {
            let b = 1.0 / (i as f64).sqrt();
            (
                root.var(&format!("{name}_w"), &[o, i], nn::Init::Uniform { lo: -b, up: b }),
                root.var(&format!("{name}_b"), &[o], nn::Init::Uniform { lo: -b, up: b }),
            )
        };
        let (w1, b1) = lin("l1", 1, 40);
        let (w2, b2) = lin("l2", 40, 40);
        let (w3, b3) = lin("l3", 40, 1);
        Self { vs, w: vec![w1, b1, w2, b2, w3, b3] }
    }
}

/// `x: [T, N, 1]`, weights with a leading task dim `[T, ...]` (or broadcastable `[1, ...]`).
fn forward(x: &Tensor, w: &[Tensor]) -> Tensor {
    let lin = |h: &Tensor, w: &Tensor, b: &Tensor| h.matmul(&w.transpose(-1, -2)) + b.unsqueeze(-2);
    let h = lin(x, &w[0], &w[1]).relu();
    let h = lin(&h, &w[2], &w[3]).relu();
    lin(&h, &w[4], &w[5])
}

/// Per-task MSE `[T]`.
fn mse(pred: &Tensor, y: &Tensor) -> Tensor {
    (pred - y).square().mean_dim(Some([1i64, 2].as_slice()), false, Kind::Float)
}

#[derive(Clone, Copy)]
struct Task {
    a: f64,
    b: f64,
}

fn draw_tasks(n: usize, rng: &mut impl Rng) -> Vec<Task> {
    (0..n).map(|_| Task { a: rng.random_range(0.1..5.0), b: rng.random_range(0.0..PI) }).collect()
}

fn points(tasks: &[Task], k: usize, rng: &mut impl Rng) -> (Tensor, Tensor) {
    let mut xs = Vec::with_capacity(tasks.len() * k);
    let mut ys = Vec::with_capacity(tasks.len() * k);
    for t in tasks {
        for _ in 0..k {
            let x: f64 = rng.random_range(-5.0..5.0);
            xs.push(x as f32);
            ys.push((t.a * (x + t.b).sin()) as f32);
        }
    }
    let shape = [tasks.len() as i64, k as i64, 1];
    (Tensor::from_slice(&xs).reshape(shape), Tensor::from_slice(&ys).reshape(shape))
}

/// First-order MAML query losses `[T]` of `tasks` (graph to the meta-parameters).
fn maml_losses(net: &Net, tasks: &[Task], rng: &mut impl Rng) -> Tensor {
    let t = tasks.len() as i64;
    let (xs, ys) = points(tasks, K as usize, rng);
    let (xq, yq) = points(tasks, K as usize, rng);
    let tw: Vec<Tensor> = net
        .w
        .iter()
        .map(|w| {
            let mut shape = vec![t];
            shape.extend(w.size());
            w.detach().unsqueeze(0).expand(shape.as_slice(), false).contiguous().set_requires_grad(true)
        })
        .collect();
    let support = mse(&forward(&xs, &tw), &ys).sum(Kind::Float);
    let grads = Tensor::run_backward(&[support], &tw, false, false);
    let adapted: Vec<Tensor> = net.w.iter().zip(&grads).map(|(w, g)| w.unsqueeze(0) - g.detach() * ALPHA).collect();
    mse(&forward(&xq, &adapted), &yq)
}

/// Adapted test MSE of every test task (10 SGD steps on K points, MSE on a 1000-point grid).
fn test_mse(net: &Net, n: usize) -> Vec<f64> {
    let mut rng = rl_core::rng_from_seed(1_000_000);
    let tasks = draw_tasks(n, &mut rng);
    let (xs_all, ys_all) = points(&tasks, K as usize, &mut rng);
    let grid = Tensor::linspace(-5.0, 5.0, 1000, (Kind::Float, Device::Cpu));
    let mut out = Vec::with_capacity(n);
    for start in (0..n).step_by(100) {
        let len = 100.min(n - start) as i64;
        let xs = xs_all.narrow(0, start as i64, len);
        let ys = ys_all.narrow(0, start as i64, len);
        let mut tw: Vec<Tensor> = net
            .w
            .iter()
            .map(|w| {
                let mut shape = vec![len];
                shape.extend(w.size());
                w.detach().unsqueeze(0).expand(shape.as_slice(), false).contiguous().set_requires_grad(true)
            })
            .collect();
        for _ in 0..TEST_STEPS {
            let loss = mse(&forward(&xs, &tw), &ys).sum(Kind::Float);
            let g = Tensor::run_backward(&[loss], &tw, false, false);
            tw = tw.iter().zip(&g).map(|(w, g)| (w.detach() - g * TEST_LR).set_requires_grad(true)).collect();
        }
        tch::no_grad(|| {
            let chunk = &tasks[start..start + len as usize];
            let a = Tensor::from_slice(&chunk.iter().map(|t| t.a as f32).collect::<Vec<_>>()).view([len, 1, 1]);
            let b = Tensor::from_slice(&chunk.iter().map(|t| t.b as f32).collect::<Vec<_>>()).view([len, 1, 1]);
            let x = grid.view([1, 1000, 1]).expand([len, 1000, 1], false);
            let y = a * (&x + b).sin();
            let pred = forward(&x, &tw.iter().map(|w| w.detach()).collect::<Vec<_>>());
            let m = mse(&pred, &y);
            out.extend(Vec::<f32>::try_from(&m).unwrap_or_default().into_iter().map(f64::from));
        });
    }
    out
}

/// The DRM oracle: "rolling out" a candidate = computing its MAML query loss (all at once).
struct SineOracle<'a> {
    net: &'a Net,
    tasks: &'a [Task],
    rng: rl_core::SeededRng,
    losses: Option<Tensor>,
    spent: u64,
}

impl RolloutOracle for SineOracle<'_> {
    fn rollout(
        &mut self,
        ids: &[ItemId],
        _k: usize,
        _rng: &mut dyn rand::RngCore,
    ) -> rlvr_select::Result<Vec<Outcome>> {
        let tasks: Vec<Task> = ids.iter().map(|&i| self.tasks[i as usize]).collect();
        let l = maml_losses(self.net, &tasks, &mut self.rng);
        let v = Vec::<f32>::try_from(&l.detach()).unwrap_or_default();
        self.losses = Some(l);
        self.spent += ids.len() as u64;
        Ok(ids.iter().zip(v).map(|(&id, r)| Outcome { risk: Some(r), ..Outcome::new(id, vec![]) }).collect())
    }

    fn rollouts_spent(&self) -> u64 {
        self.spent
    }
}

struct RunResult {
    test: Vec<f64>,
    pcc: Option<f64>,
    seconds: f64,
    evaluated: u64,
}

fn run(method: &str, seed: u64, iters: usize, test_tasks: usize) -> Result<RunResult> {
    let net = Net::new(rl_core::derive_seed_named(seed, "maml-net"));
    let mut opt = nn::Adam::default().build(&net.vs, BETA)?;
    let n_cand = match method {
        "erm" | "gdrm" => 16,
        "drm" | "mpts" => 32,
        "pdts" => 512,
        other => anyhow::bail!("unknown method {other}"),
    };
    let mut gdrm = Gdrm::new(GdrmParams::default().check()?)?;
    let mut boxed: Box<dyn Selector> = match method {
        "erm" | "gdrm" => Box::new(Uniform::new()),
        "drm" => Box::new(Drm::new(DrmParams::default().check()?)?),
        "mpts" => Box::new(Mpts::new(MptsParams::default().seed(seed).check()?, 2)?),
        _ => Box::new(Pdts::new(PdtsParams::default().seed(seed).check()?, 2)?),
    };
    let mut sel_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "selector"));
    let (mut pcc_sum, mut pcc_n) = (0.0, 0usize);
    let mut evaluated = 0u64;
    let t0 = Instant::now();
    for it in 0..iters {
        let sel: &mut dyn Selector = if method == "gdrm" { &mut gdrm } else { boxed.as_mut() };
        // candidates of iteration `it`: common random numbers across methods
        let mut cand_rng =
            rl_core::rng_from_seed(rl_core::derive_seed(rl_core::derive_seed_named(seed, "candidates"), it as u64));
        let tasks = draw_tasks(n_cand, &mut cand_rng);
        let ids: Vec<ItemId> = (0..n_cand as u64).collect();
        let feats: Vec<f32> = tasks.iter().flat_map(|t| [t.a as f32, t.b as f32]).collect();
        let data_rng =
            rl_core::rng_from_seed(rl_core::derive_seed(rl_core::derive_seed_named(seed, "data"), it as u64));
        let cands = Candidates::with_features(&ids, &feats, 2)?;
        let meta_loss = if method == "drm" {
            let mut oracle = SineOracle { net: &net, tasks: &tasks, rng: data_rng, losses: None, spent: 0 };
            let s = sel.select(it as u64, cands, B, &mut oracle, &mut sel_rng)?;
            evaluated += oracle.spent;
            let all = oracle.losses.take().ok_or_else(|| anyhow::anyhow!("DRM did not evaluate"))?;
            let idx = Tensor::from_slice(&s.ids.iter().map(|&i| i as i64).collect::<Vec<_>>());
            all.index_select(0, &idx).sum(Kind::Float)
        } else {
            let s = sel.select(it as u64, cands, B, &mut NoRollouts, &mut sel_rng)?;
            let chosen: Vec<Task> = s.ids.iter().map(|&i| tasks[i as usize]).collect();
            let mut data_rng = data_rng;
            let losses = maml_losses(&net, &chosen, &mut data_rng);
            evaluated += B as u64;
            let lv: Vec<f32> = Vec::<f32>::try_from(&losses.detach())?;
            match method {
                "gdrm" => {
                    let outcomes: Vec<Outcome> = s
                        .ids
                        .iter()
                        .zip(&lv)
                        .map(|(&id, &l)| Outcome { risk: Some(l), ..Outcome::new(id, vec![]) })
                        .collect();
                    sel.observe(it as u64, &outcomes, &mut sel_rng)?;
                    let w: Vec<f32> = gdrm.weights().to_vec();
                    (losses * Tensor::from_slice(&w)).sum(Kind::Float)
                }
                "mpts" | "pdts" => {
                    // risk = query MSE / K (reference `Risk_Y = metaloss / k`)
                    let risks: Vec<f32> = lv.iter().map(|l| l / K as f32).collect();
                    if let Some(pred) = sel.predict(Candidates::new(&s.ids))? {
                        let p: Vec<f64> = pred.iter().map(|p| p.mean).collect();
                        let r: Vec<f64> = risks.iter().map(|&v| f64::from(v)).collect();
                        if let Some(c) = pearson(&p, &r) {
                            pcc_sum += c;
                            pcc_n += 1;
                        }
                    }
                    let outcomes: Vec<Outcome> = s
                        .ids
                        .iter()
                        .zip(&risks)
                        .map(|(&id, &r)| Outcome { risk: Some(r), ..Outcome::new(id, vec![]) })
                        .collect();
                    sel.observe(it as u64, &outcomes, &mut sel_rng)?;
                    losses.sum(Kind::Float)
                }
                _ => losses.sum(Kind::Float),
            }
        };
        opt.zero_grad();
        meta_loss.backward();
        opt.step();
    }
    let seconds = t0.elapsed().as_secs_f64();
    Ok(RunResult {
        test: test_mse(&net, test_tasks),
        pcc: (pcc_n > 0).then(|| pcc_sum / pcc_n as f64),
        seconds,
        evaluated,
    })
}

fn fmt(v: &[f64]) -> String {
    if v.len() > 1 {
        format!("{:.3} ± {:.3}", mean(v), std_dev(v, 1))
    } else {
        format!("{:.3}", mean(v))
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    tch::set_num_threads(1);
    let iters = args.iters.unwrap_or(if args.full { 20_000 } else { 300 });
    let seeds = args.seeds.unwrap_or(if args.full { 5 } else { 2 });
    let test_tasks = args.test_tasks.unwrap_or(if args.full { 1000 } else { 200 });
    let mut jsonl = match &args.jsonl {
        Some(p) => Some(std::fs::File::create(p)?),
        None => None,
    };
    println!("sinusoid MAML: {iters} iterations, {seeds} seeds, {test_tasks} test tasks, B = {B}\n");
    println!("| method | mean MSE | CVaR_0.5 | CVaR_0.7 | CVaR_0.9 | risk PCC | tasks evaluated / iter | s / run |");
    println!("|---|---|---|---|---|---|---|---|");
    for method in args.methods.split(',').map(str::trim) {
        let mut cols: [Vec<f64>; 4] = Default::default();
        let (mut pccs, mut secs, mut evals) = (Vec::new(), Vec::new(), 0u64);
        for seed in 0..seeds {
            let r = run(method, seed, iters, test_tasks)?;
            let row = [mean(&r.test), cvar_upper(&r.test, 0.5)?, cvar_upper(&r.test, 0.7)?, cvar_upper(&r.test, 0.9)?];
            for (c, v) in cols.iter_mut().zip(row) {
                c.push(v);
            }
            if let Some(p) = r.pcc {
                pccs.push(p);
            }
            secs.push(r.seconds);
            evals = r.evaluated;
            if let Some(f) = jsonl.as_mut() {
                use std::io::Write;
                writeln!(
                    f,
                    "{{\"method\":\"{method}\",\"seed\":{seed},\"iters\":{iters},\"mean\":{},\"cvar_0.5\":{},\"cvar_0.7\":{},\"cvar_0.9\":{},\"pcc\":{},\"seconds\":{}}}",
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    r.pcc.map_or("null".to_string(), |p| p.to_string()),
                    r.seconds
                )?;
            }
        }
        println!(
            "| {method} | {} | {} | {} | {} | {} | {} | {:.1} |",
            fmt(&cols[0]),
            fmt(&cols[1]),
            fmt(&cols[2]),
            fmt(&cols[3]),
            if pccs.is_empty() { "–".to_string() } else { fmt(&pccs) },
            evals / iters.max(1) as u64,
            mean(&secs)
        );
    }
    Ok(())
}
