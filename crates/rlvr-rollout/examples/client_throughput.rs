//! Tokens per second through `VllmClient` against a running vLLM server, for comparison with
//! `client_throughput.py` (a plain Python `httpx` client at the same concurrency) on the same
//! server in the same sitting (docs/benchmarks.md, "rlvr-rollout client overhead").
//!
//! ```sh
//! cargo run --release -p rlvr-rollout --example client_throughput -- \
//!     --url http://127.0.0.1:18431 --model /path/to/model --vocab 512 \
//!     --prompts 32 --n 8 --max-tokens 64 --concurrency 8 --seed 1
//! ```
//! Prints one line: `rust tokens=<sampled tokens> seconds=<wall> tokens_per_s=<rate>`.

use std::time::Instant;

use rl_core::Params;
use rlvr_rollout::{GenerateRequest, RolloutEngine, SamplingParams, VllmClient, VllmConfig, WeightVersion};

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--url", "http://127.0.0.1:8000");
    let model = arg(&args, "--model", "");
    let vocab: u32 = arg(&args, "--vocab", "512").parse()?;
    let prompts: usize = arg(&args, "--prompts", "32").parse()?;
    let n: usize = arg(&args, "--n", "8").parse()?;
    let max_tokens: u32 = arg(&args, "--max-tokens", "64").parse()?;
    let concurrency: usize = arg(&args, "--concurrency", "8").parse()?;
    let seed: u64 = arg(&args, "--seed", "1").parse()?;
    let prompt_len: u32 = arg(&args, "--prompt-len", "16").parse()?;
    // the same prompts as the Python client: ids 3 + (i * 7919 + j * 104729) % (vocab - 3)
    let ps: Vec<Vec<u32>> = (0..prompts as u32)
        .map(|i| (0..prompt_len).map(|j| 3 + (i * 7919 + j * 104_729) % (vocab - 3)).collect())
        .collect();
    let cfg = VllmConfig::new(vec![url], model, vocab).max_in_flight(concurrency).check()?;
    let mut client = VllmClient::new(cfg, WeightVersion(0))?;
    client.check_servers()?;
    let sampling = SamplingParams::default().temperature(1.0).max_tokens(max_tokens).check()?;
    let t0 = Instant::now();
    let g = client.generate(&GenerateRequest { prompts: &ps, n, sampling: &sampling, seed })?;
    let secs = t0.elapsed().as_secs_f64();
    let tokens = g.total_tokens();
    println!("rust tokens={tokens} seconds={secs:.3} tokens_per_s={:.1}", tokens as f64 / secs);
    Ok(())
}
