//! `rl-hf`: greedy KV-cached generation throughput, and training log-probs + backward with
//! the `[B, T, V]` logits materialised versus the deferred (recompute-in-backward) LM head.
//!
//! ```text
//! cargo bench --bench hf --features rl-hf                    # both groups
//! OMP_NUM_THREADS=1 ~/.cache/frugal-rl/venv/bin/python scripts/bench_hf_generate.py   # transformers, same models
//! cargo run --release --features rl-hf --example hf_logprob_memory -- --mode materialise   # peak memory, one mode per process
//! ```
//!
//! **Generation** (`hf_generate`): batch 8, prompts of 16 tokens, 64 new tokens (no stop id, so
//! every row runs to the end), greedy, f32, on two random Qwen2 models written once under
//! `target/rl-hf-bench/` (or `RL_HF_BENCH_DIR`) by this bench, which the Python script loads
//! too: `tiny` (hidden 64, 2 layers, vocab 320: 95 k parameters, as the RLVR fixture) and
//! `50m` (hidden 512, 8 layers, 8 heads / 2 KV heads, MLP 1408, vocab 50 000, tied: 48.2 M).
//! Throughput in generated tokens per second.
//!
//! **Log-probs** (`hf_logprobs`): B = 4, T = 1024 (response from position 1), V = 151 936 (Qwen2.5's
//! vocabulary) on a random Qwen2 with hidden 128 and 2 layers (19.7 M parameters, most in the
//! tied embedding), one forward + backward of `sum(coef * logprobs) + 0.01 * sum(entropy)`:
//! `materialise` = [`HfModel::token_logprobs`] with one chunk of all T positions (the `[B, T,
//! V]` logits and their log-softmax live in the autograd graph: what a plain PyTorch trainer
//! does), `deferred` = [`HfModel::token_logprobs_deferred`] with chunks of 128 positions.
//!
//! libtorch threads: `RL_HF_BENCH_THREADS` (default 1, as the Python script's default).
//! Results: `docs/benchmarks.md` ("rl-hf").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rl_core::Params;
use rl_hf::{HfConfig, HfDtype, HfModel, LogProbParams, SaveParams};
use tch::{Device, Kind, Tensor};

const BATCH: i64 = 8;
const PROMPT: i64 = 16;
const NEW: i64 = 64;

fn threads() {
    let n = std::env::var("RL_HF_BENCH_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    tch::set_num_threads(n);
}

/// A random Qwen2 config (tied head, default rope).
fn config(vocab: i64, hidden: i64, layers: i64, heads: i64, kv: i64, mlp: i64) -> HfConfig {
    let text = format!(
        r#"{{"model_type": "qwen2", "vocab_size": {vocab}, "hidden_size": {hidden}, "intermediate_size": {mlp},
        "num_hidden_layers": {layers}, "num_attention_heads": {heads}, "num_key_value_heads": {kv},
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
        "rope_parameters": {{"rope_type": "default", "rope_theta": 10000.0}}}}"#
    );
    HfConfig::from_json_str(&text, "<bench>").expect("bench config")
}

/// A model with seeded N(0, 0.02) weights (norm weights 1, biases 0).
fn random_model(cfg: HfConfig, seed: i64) -> HfModel {
    tch::manual_seed(seed);
    let tensors: BTreeMap<String, Tensor> = cfg
        .expected_tensors()
        .into_iter()
        .map(|(name, shape)| {
            let t = if name.ends_with("norm.weight") {
                Tensor::ones(&shape, (Kind::Float, Device::Cpu))
            } else if name.ends_with(".bias") {
                Tensor::zeros(&shape, (Kind::Float, Device::Cpu))
            } else {
                Tensor::randn(&shape, (Kind::Float, Device::Cpu)) * 0.02
            };
            (name, t)
        })
        .collect();
    HfModel::from_tensors(cfg, &tensors, Device::Cpu, HfDtype::F32).expect("bench model")
}

/// The generation models, written once (the Python side-by-side script loads the same files).
fn generation_model(root: &Path, name: &str) -> HfModel {
    let dir = root.join(name);
    if !dir.join("config.json").is_file() {
        let cfg = match name {
            "tiny" => config(320, 64, 2, 4, 2, 128),
            _ => config(50_000, 512, 8, 8, 2, 1408),
        };
        let m = random_model(cfg, 3);
        std::fs::create_dir_all(&dir).expect("bench dir");
        m.save_pretrained(&dir, &SaveParams::default().max_shard_bytes(1 << 40).check().expect("params"))
            .expect("save");
    }
    HfModel::from_pretrained(&dir, Device::Cpu, HfDtype::F32).expect("load bench model")
}

/// The prompt ids both sides use: row `i`, position `j` -> `3 + (7 i + 3 j) mod 250`.
fn prompts() -> Tensor {
    let ids: Vec<i64> = (0..BATCH).flat_map(|i| (0..PROMPT).map(move |j| 3 + (7 * i + 3 * j) % 250)).collect();
    Tensor::from_slice(&ids).view([BATCH, PROMPT])
}

fn generate(c: &mut Criterion) {
    threads();
    let root = std::env::var_os("RL_HF_BENCH_DIR").map_or_else(|| PathBuf::from("target/rl-hf-bench"), PathBuf::from);
    let ids = prompts();
    let mask = Tensor::ones([BATCH, PROMPT], (Kind::Int64, Device::Cpu));
    let mut g = c.benchmark_group("hf_generate/cpu");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements((BATCH * NEW) as u64));
    for name in ["tiny", "50m"] {
        let m = generation_model(&root, name);
        g.bench_function(BenchmarkId::new("greedy_kv_batch8_prompt16_new64", name), |b| {
            b.iter(|| m.generate_greedy(&ids, &mask, NEW).expect("generate").size()[1])
        });
    }
    g.finish();
}

fn logprobs(c: &mut Criterion) {
    threads();
    let (b, t, v) = (4i64, 1024i64, 151_936i64);
    let m = random_model(config(v, 128, 2, 4, 2, 256), 5);
    tch::manual_seed(9);
    let ids = Tensor::randint(v, [b, t], (Kind::Int64, Device::Cpu));
    let coef = Tensor::randn([b, t - 1], (Kind::Float, Device::Cpu));
    let mut g = c.benchmark_group("hf_logprobs/cpu");
    g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(30));
    g.throughput(Throughput::Elements((b * t) as u64));
    let loss_of = |lp: &Tensor, ent: &Tensor| (lp * &coef).sum(Kind::Float) + ent.sum(Kind::Float) * 0.01;
    let plain = LogProbParams::default().chunk(t).entropy(true).check().expect("params");
    g.bench_function("materialise_B4_T1024_V151936", |bch| {
        bch.iter(|| {
            let out = m.token_logprobs(&ids, None, 1, &plain).expect("logprobs");
            let loss = loss_of(&out.logprobs, out.entropy.as_ref().expect("entropy"));
            loss.backward();
            loss.double_value(&[])
        })
    });
    let deferred = LogProbParams::default().chunk(128).entropy(true).check().expect("params");
    g.bench_function("deferred_chunk128_B4_T1024_V151936", |bch| {
        bch.iter(|| {
            let out = m.token_logprobs_deferred(&ids, None, 1, &deferred).expect("logprobs");
            let loss = loss_of(&out.logprobs, out.entropy.as_ref().expect("entropy"));
            let value = loss.double_value(&[]);
            out.backward(&m, &loss).expect("backward");
            value
        })
    });
    g.finish();
}

criterion_group!(benches, generate, logprobs);
criterion_main!(benches);
