//! Gradient updates per second of SAC and TD3 at batch 256 (Hopper widths: 11 observations, 3
//! actions), next to the matrix-multiply floor of the same update: the time of exactly the
//! GEMMs one update needs (forward, input and weight gradients where autograd computes them),
//! with nothing else. Prints one JSON line per measurement (calls per wall-clock second and per
//! CPU second of the calling thread); `benches/agents_torch.py` runs this
//! binary and CORL's PyTorch SAC-N/TD3+BC side by side.
//!
//! ```text
//! cargo build --release --features rl-agents --example agents_speed
//! target/release/examples/agents_speed --algo sac --hidden 256,256 --seconds 10
//! cargo run --features rl-agents --example agents_speed -- --seconds 0.2 --hidden 32,32   # CI size
//! ```
use std::time::Instant;

use anyhow::Result;
use clap::Parser;
use rl_agents::{Batch, BatchLearner, ReplayBuffer, ReplayBufferParams, Sac, SacParams, Td3, Td3Params};
use rl_core::{Params, Space};
use tch::{Device, Kind, Tensor};

#[derive(Parser, Debug)]
#[command(about = "SAC/TD3 updates per second and their matmul floor")]
struct Args {
    /// `sac`, `td3` or `all`.
    #[arg(long, default_value = "all")]
    algo: String,
    /// Hidden widths, comma separated.
    #[arg(long, default_value = "256,256")]
    hidden: String,
    /// Batch size.
    #[arg(long, default_value_t = 256)]
    batch: i64,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// libtorch intra-op threads (0: libtorch's default).
    #[arg(long, default_value_t = 0)]
    threads: i32,
    /// Also time a whole buffer-sample + update step (host gather and copy included).
    #[arg(long)]
    with_sampling: bool,
}

const OBS: i64 = 11;
const ACT: i64 = 3;

/// CPU time of the calling thread in seconds (`/proc/thread-self/schedstat`, nanoseconds; the
/// clock Python's `time.thread_time()` reads). With one libtorch thread every operation runs on
/// the calling thread, so this counts the update's own work whatever else the machine runs.
/// `None` where the file does not exist (not Linux).
fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// Calls per wall-clock second and per CPU second of this thread (`None` without a CPU clock).
#[derive(Debug, Clone, Copy)]
struct Rate {
    wall: f64,
    cpu: Option<f64>,
}

fn timed(seconds: f64, mut f: impl FnMut() -> Result<()>) -> Result<Rate> {
    for _ in 0..20 {
        f()?;
    }
    let (t0, c0) = (Instant::now(), thread_cpu_seconds());
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < seconds || n < 10 {
        f()?;
        n += 1;
    }
    let wall = n as f64 / t0.elapsed().as_secs_f64();
    let cpu = match (c0, thread_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => Some(n as f64 / (b - a)),
        _ => None,
    };
    Ok(Rate { wall, cpu })
}

fn randn(shape: &[i64], rng: &mut rl_core::SeededRng) -> Result<Tensor> {
    Ok(rl_nn::rand::standard_normal(shape, (Kind::Float, Device::Cpu), rng)?)
}

/// The GEMMs of one MLP: forward `(rows, in) x (in, out)` per layer; backward adds the weight
/// gradient of every layer (`w_grad`) and the input gradient of every layer but the first
/// (of the first too with `input_grad`). `members > 1`: batched (`bmm`).
#[derive(Clone, Copy)]
struct Pass {
    members: i64,
    backward: bool,
    w_grad: bool,
    input_grad: bool,
}

struct Floor {
    ops: Vec<(Tensor, Tensor)>,
}

impl Floor {
    fn new() -> Self {
        Self { ops: Vec::new() }
    }

    fn mlp(&mut self, widths: &[i64], batch: i64, p: Pass, rng: &mut rl_core::SeededRng) -> Result<()> {
        let e = p.members;
        let shape = |r: i64, c: i64| if e > 1 { vec![e, r, c] } else { vec![r, c] };
        for (l, w) in widths.windows(2).enumerate() {
            let (i, o) = (w[0], w[1]);
            self.ops.push((randn(&shape(batch, i), rng)?, randn(&shape(i, o), rng)?));
            if p.backward {
                if p.w_grad {
                    self.ops.push((randn(&shape(i, batch), rng)?, randn(&shape(batch, o), rng)?));
                }
                if l > 0 || p.input_grad {
                    self.ops.push((randn(&shape(batch, o), rng)?, randn(&shape(o, i), rng)?));
                }
            }
        }
        Ok(())
    }

    fn run(&self) -> Result<()> {
        tch::no_grad(|| -> Result<()> {
            for (a, b) in &self.ops {
                let _ = a.f_matmul(b)?;
            }
            Ok(())
        })
    }
}

fn widths(input: i64, hidden: &[i64], output: i64) -> Vec<i64> {
    let mut w = vec![input];
    w.extend(hidden);
    w.push(output);
    w
}

fn sac_floor(h: &[i64], b: i64, rng: &mut rl_core::SeededRng) -> Result<Floor> {
    let mut f = Floor::new();
    let actor = widths(OBS, h, 2 * ACT);
    let critic = widths(OBS + ACT, h, 1);
    let fwd = Pass { members: 1, backward: false, w_grad: false, input_grad: false };
    f.mlp(&actor, b, Pass { backward: true, w_grad: true, ..fwd }, rng)?; // actor on s, backward
    f.mlp(&actor, b, fwd, rng)?; // actor on s' (no grad)
    f.mlp(&critic, b, Pass { members: 2, ..fwd }, rng)?; // target critics
    f.mlp(&critic, b, Pass { members: 2, backward: true, w_grad: true, input_grad: false }, rng)?; // critics
    f.mlp(&critic, b, Pass { members: 2, backward: true, w_grad: false, input_grad: true }, rng)?; // frozen critics on a~
    Ok(f)
}

fn td3_floor(h: &[i64], b: i64, rng: &mut rl_core::SeededRng) -> Result<(Floor, Floor)> {
    let mut critic_part = Floor::new();
    let mut actor_part = Floor::new();
    let actor = widths(OBS, h, ACT);
    let critic = widths(OBS + ACT, h, 1);
    let fwd = Pass { members: 1, backward: false, w_grad: false, input_grad: false };
    critic_part.mlp(&actor, b, fwd, rng)?; // target actor on s'
    critic_part.mlp(&critic, b, Pass { members: 2, ..fwd }, rng)?;
    critic_part.mlp(&critic, b, Pass { members: 2, backward: true, w_grad: true, input_grad: false }, rng)?;
    actor_part.mlp(&actor, b, Pass { backward: true, w_grad: true, ..fwd }, rng)?;
    actor_part.mlp(&critic, b, Pass { backward: true, w_grad: false, input_grad: true, ..fwd }, rng)?; // Q1 only
    Ok((critic_part, actor_part))
}

fn filled_buffer(rng: &mut rl_core::SeededRng) -> Result<ReplayBuffer> {
    let mut buf =
        ReplayBuffer::new(ReplayBufferParams::default().capacity(100_000).check()?, OBS as usize, ACT as usize)?;
    for i in 0..20_000 {
        let o = ndarray::Array1::from_shape_fn(OBS as usize, |_| rand::Rng::random::<f32>(rng));
        let a = ndarray::Array1::from_shape_fn(ACT as usize, |_| rand::Rng::random::<f32>(rng) * 2.0 - 1.0);
        let n = ndarray::Array1::from_shape_fn(OBS as usize, |_| rand::Rng::random::<f32>(rng));
        buf.push(o.view(), a.view(), 1.0, n.view(), i % 1000 == 999, false, 0)?;
    }
    Ok(buf)
}

fn report(algo: &str, what: &str, hidden: &[i64], batch: i64, threads: i32, rate: Rate) {
    println!(
        "{}",
        serde_json::json!({"impl": "rust", "algo": algo, "what": what, "hidden": hidden, "batch": batch,
                           "threads": threads, "per_second": rate.wall, "per_cpu_second": rate.cpu})
    );
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.threads > 0 {
        tch::set_num_threads(args.threads);
    }
    let threads = tch::get_num_threads();
    let hidden: Vec<i64> = args.hidden.split(',').map(|s| s.trim().parse()).collect::<Result<_, _>>()?;
    let obs = Space::symmetric(OBS as usize, 10.0)?;
    let act = Space::symmetric(ACT as usize, 1.0)?;
    let mut rng = rl_core::rng_from_seed(0);
    let buf = filled_buffer(&mut rng)?;
    let batch: Batch = buf.sample(args.batch as usize, Device::Cpu, &mut rng)?;
    let algos: Vec<&str> = if args.algo == "all" { vec!["sac", "td3"] } else { vec![args.algo.as_str()] };
    for algo in algos {
        let mut agent: Box<dyn BatchLearner> = match algo {
            "sac" => {
                Box::new(Sac::new(SacParams::default().hidden(hidden.clone()).check()?, &obs, &act, Device::Cpu, 0)?)
            }
            "td3" => {
                Box::new(Td3::new(Td3Params::default().hidden(hidden.clone()).check()?, &obs, &act, Device::Cpu, 0)?)
            }
            other => anyhow::bail!("unknown algo {other}"),
        };
        let ups = timed(args.seconds, || {
            agent.update(&batch)?;
            Ok(())
        })?;
        report(algo, "update", &hidden, args.batch, threads, ups);
        if args.with_sampling {
            let mut srng = rl_core::rng_from_seed(1);
            let ups = timed(args.seconds, || {
                let b = buf.sample(args.batch as usize, Device::Cpu, &mut srng)?;
                agent.update(&b)?;
                Ok(())
            })?;
            report(algo, "sample+update", &hidden, args.batch, threads, ups);
        }
        let floor = match algo {
            "sac" => {
                let f = sac_floor(&hidden, args.batch, &mut rng)?;
                timed(args.seconds, || f.run())?
            }
            _ => {
                // per update: the critic part every time, the actor part every 2nd (policy delay)
                let (c, a) = td3_floor(&hidden, args.batch, &mut rng)?;
                let mut k = 0u64;
                timed(args.seconds, || {
                    c.run()?;
                    if k % 2 == 0 {
                        a.run()?;
                    }
                    k += 1;
                    Ok(())
                })?
            }
        };
        report(algo, "matmul_floor", &hidden, args.batch, threads, floor);
    }
    Ok(())
}
