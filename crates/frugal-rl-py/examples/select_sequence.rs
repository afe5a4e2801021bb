//! Writes the selection sequence of DPS and MoPPS for a fixed seed and a fixed outcome stream,
//! driven directly through `rlvr-select` (not through these bindings), as JSON:
//! `cargo run -p frugal-rl-py --example select_sequence -- OUT.json`.
//! `python/tests/test_cross_language.py` drives `frugal_rl.Selector` the same way and compares.
//!
//! Outcome stream: prompt `id` at step `t` solves `(id * 2654435761 + t * 40503) % (K + 1)` of
//! its `K = 8` responses.

use rand::SeedableRng;
use rl_core::Params;
use rlvr_select::{Candidates, Dps, DpsParams, Mopps, MoppsParams, NoRollouts, Outcome, Selector};

const N: u64 = 500;
const K: usize = 8;
const BATCH: usize = 16;
const STEPS: u64 = 30;
const SEED: u64 = 7;

fn successes(id: u64, t: u64) -> usize {
    ((id.wrapping_mul(2_654_435_761).wrapping_add(t * 40_503)) % (K as u64 + 1)) as usize
}

fn run(mut sel: Box<dyn Selector>) -> anyhow::Result<Vec<Vec<u64>>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(SEED);
    let pool: Vec<u64> = (0..N).collect();
    let mut seq = Vec::new();
    for t in 0..STEPS {
        let s = sel.select(t, Candidates::new(&pool), BATCH, &mut NoRollouts, &mut rng)?;
        let outs =
            s.ids.iter().map(|&id| Outcome::from_successes(id, successes(id, t), K)).collect::<Result<Vec<_>, _>>()?;
        sel.observe(t, &outs, &mut rng)?;
        seq.push(s.ids);
    }
    Ok(seq)
}

fn main() -> anyhow::Result<()> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "select_sequence.json".into());
    let dps = run(Box::new(Dps::new(DpsParams::default().check()?, N as usize)?))?;
    let mopps = run(Box::new(Mopps::new(MoppsParams::default().check()?, N as usize)?))?;
    let v = serde_json::json!({
        "n": N, "k": K, "batch": BATCH, "steps": STEPS, "seed": SEED,
        "dps": dps, "mopps": mopps,
    });
    std::fs::write(&out, serde_json::to_string(&v)?)?;
    println!("wrote {out}: {} DPS and {} MoPPS steps", dps.len(), mopps.len());
    Ok(())
}
