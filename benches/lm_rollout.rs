//! Rollout throughput of the `rl-lm` transformer policy, with and without the KV cache.
//!
//! A policy one layer deeper than the RLVR demo's (d_model 128, 4 layers where the demo's
//! default has 3, 4 heads, d_ff 512, the 24-token task vocabulary, `max_len` 160 where the demo
//! has 40, so that 128 new tokens fit) samples 64 prompts of 8 tokens for 32, 64 and 128 new
//! tokens (no stop token, so every row runs to the end). Throughput is in generated tokens per second
//! (`B * new_tokens` per iteration). Without the cache every step re-runs the whole prefix.
//!
//! ```text
//! cargo bench --bench lm_rollout --features rl-lm
//! ```
//!
//! Results and the machine they ran on are in `docs/benchmarks.md` ("rl-lm rollout
//! throughput"). `FRUGAL_DEVICE=cpu|cuda` picks the device (default: CUDA when present).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rl_lm::{LmConfig, SamplingParams, TransformerLm};

const BATCH: usize = 64;
const PROMPT_LEN: usize = 8;

fn rollout(c: &mut Criterion) {
    let device = rl_nn::default_device().unwrap_or(tch::Device::Cpu);
    let cfg = LmConfig::new(24, 160).d_model(128).n_layers(4).n_heads(4).d_ff(512);
    let lm = match TransformerLm::new(&cfg, device, &mut rl_core::rng_from_seed(0)) {
        Ok(lm) => lm,
        Err(e) => {
            eprintln!("cannot build the model: {e}");
            return;
        }
    };
    // Prompts like "<bos>12,7,3>19:" (8 tokens).
    let prompts: Vec<Vec<i64>> = (0..BATCH)
        .map(|i| (0..PROMPT_LEN).map(|j| if j == 0 { 1 } else { 3 + ((i * 7 + j * 3) % 21) as i64 }).collect())
        .collect();
    let mut group = c.benchmark_group(format!("lm_rollout/{}", rl_nn::device_name(device)));
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for new_tokens in [32i64, 64, 128] {
        group.throughput(Throughput::Elements(BATCH as u64 * new_tokens as u64));
        for use_cache in [true, false] {
            let params = SamplingParams::new(new_tokens).use_cache(use_cache);
            let id = BenchmarkId::new(if use_cache { "kv_cache" } else { "no_cache" }, new_tokens);
            let mut rng = rl_core::rng_from_seed(1);
            group.bench_with_input(id, &params, |b, params| {
                b.iter(|| match lm.generate(&prompts, params, &mut rng) {
                    // `finished` is read back from the device, so CUDA work is complete here.
                    Ok(out) => out.finished.len(),
                    Err(e) => {
                        eprintln!("generation failed: {e}");
                        0
                    }
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, rollout);
criterion_main!(benches);
