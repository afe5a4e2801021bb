//! The Rust side of the Python-wheel benchmark (docs/benchmarks.md, "Python wheel (issue 25)"):
//! per step, DPS or MoPPS `observe` of the last step's `B` outcomes, then `select` of `B` among
//! a random window of `8·B` candidates, with `N` tracked prompts; the same work as
//! `python/bench/bench_select.py --impl frugal`. Inputs are generated before timing.
//!
//! `cargo run --release -p frugal-rl-py --example bench_select -- dps 100000 200`

use rand::{Rng, SeedableRng};
use rl_core::Params;
use rlvr_select::{Candidates, Dps, DpsParams, Mopps, MoppsParams, NoRollouts, Outcome, Selector};
use std::time::Instant;

const B: usize = 256;
const K: usize = 8;
const RATIO: usize = 8;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let kind = a.get(1).map_or("dps", String::as_str);
    let n: usize = a.get(2).map_or(Ok(100_000), |s| s.parse())?;
    let steps: usize = a.get(3).map_or(Ok(100), |s| s.parse())?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let windows: Vec<Vec<u64>> = (0..steps)
        .map(|_| rand::seq::index::sample(&mut rng, n, RATIO * B).into_iter().map(|i| i as u64).collect())
        .collect();
    let succ: Vec<Vec<usize>> = (0..steps).map(|_| (0..B).map(|_| rng.random_range(0..=K)).collect()).collect();
    let mut sel: Box<dyn Selector> = match kind {
        "dps" => Box::new(Dps::new(DpsParams::default().check()?, n)?),
        "mopps" => Box::new(Mopps::new(MoppsParams::default().check()?, n)?),
        other => anyhow::bail!("unknown kind {other}"),
    };
    let mut prev: Vec<u64> = Vec::new();
    let t0 = Instant::now();
    for t in 0..steps {
        let outs = prev
            .iter()
            .zip(&succ[t])
            .map(|(&id, &s)| Outcome::from_successes(id, s, K))
            .collect::<Result<Vec<_>, _>>()?;
        sel.observe(t as u64, &outs, &mut rng)?;
        prev = sel.select(t as u64, Candidates::new(&windows[t]), B, &mut NoRollouts, &mut rng)?.ids;
    }
    let per = t0.elapsed().as_secs_f64() / steps as f64;
    println!("rust {kind} N={n} B={B} window={} steps={steps}: {:.3} ms/step", RATIO * B, per * 1e3);
    Ok(())
}
