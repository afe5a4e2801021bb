//! Peak memory of training log-probs + backward with `rl-hf` at B = 4, T = 1024, V = 151 936
//! (Qwen2.5's vocabulary), one mode per process, so each peak is its own:
//!
//! ```text
//! cargo run --release --features rl-hf --example hf_logprob_memory -- --mode materialise
//! cargo run --release --features rl-hf --example hf_logprob_memory -- --mode deferred --chunk 128
//! ```
//!
//! The model is `benches/hf.rs`'s log-prob model (random Qwen2, hidden 128, 2 layers, tied
//! head: 19.7 M parameters). `materialise` runs `HfModel::token_logprobs` with one chunk of all
//! positions (the `[B, T, V]` logits and their log-softmax in the autograd graph), `deferred`
//! runs `HfModel::token_logprobs_deferred` (the LM head recomputed chunk by chunk in the
//! backward pass). Printed: the process's peak resident memory (`VmHWM` of `/proc/self/status`)
//! after building the model and after one forward + backward, and their difference (Linux only).
//! Figures: `docs/benchmarks.md` ("rl-hf").
use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use frugal_rl::core::Params;
use frugal_rl::rl_hf::{HfConfig, HfDtype, HfModel, LogProbParams};
use tch::{Device, Kind, Tensor};

#[derive(Parser, Debug)]
struct Args {
    /// `materialise` or `deferred`.
    #[arg(long)]
    mode: String,
    /// Positions per LM-head chunk (deferred).
    #[arg(long, default_value_t = 128)]
    chunk: i64,
    /// Batch rows.
    #[arg(long, default_value_t = 4)]
    batch: i64,
    /// Sequence length.
    #[arg(long, default_value_t = 1024)]
    seq: i64,
    /// Vocabulary size.
    #[arg(long, default_value_t = 151_936)]
    vocab: i64,
    /// libtorch threads.
    #[arg(long, default_value_t = 1)]
    threads: i32,
}

/// Peak resident set size of this process in MiB (`VmHWM`).
fn peak_mib() -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status (Linux only)")?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).context("no VmHWM line")?;
    let kb: f64 = line.split_whitespace().nth(1).context("VmHWM value")?.parse()?;
    Ok(kb / 1024.0)
}

fn main() -> Result<()> {
    let a = Args::parse();
    tch::set_num_threads(a.threads);
    let text = format!(
        r#"{{"model_type": "qwen2", "vocab_size": {}, "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
        "rope_parameters": {{"rope_type": "default", "rope_theta": 10000.0}}}}"#,
        a.vocab
    );
    let cfg = HfConfig::from_json_str(&text, "<example>")?;
    tch::manual_seed(5);
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
    let m = HfModel::from_tensors(cfg, &tensors, Device::Cpu, HfDtype::F32)?;
    drop(tensors);
    tch::manual_seed(9);
    let ids = Tensor::randint(a.vocab, [a.batch, a.seq], (Kind::Int64, Device::Cpu));
    let coef = Tensor::randn([a.batch, a.seq - 1], (Kind::Float, Device::Cpu));
    let before = peak_mib()?;
    let t0 = Instant::now();
    let loss_of = |lp: &Tensor, ent: &Tensor| (lp * &coef).sum(Kind::Float) + ent.sum(Kind::Float) * 0.01;
    let value = match a.mode.as_str() {
        "materialise" => {
            let p = LogProbParams::default().chunk(a.seq).entropy(true).check()?;
            let out = m.token_logprobs(&ids, None, 1, &p)?;
            let loss = loss_of(&out.logprobs, out.entropy.as_ref().context("entropy")?);
            loss.backward();
            loss.double_value(&[])
        }
        "deferred" => {
            let p = LogProbParams::default().chunk(a.chunk).entropy(true).check()?;
            let out = m.token_logprobs_deferred(&ids, None, 1, &p)?;
            let loss = loss_of(&out.logprobs, out.entropy.as_ref().context("entropy")?);
            let v = loss.double_value(&[]);
            out.backward(&m, &loss)?;
            v
        }
        other => bail!("--mode {other:?}: expected materialise or deferred"),
    };
    let seconds = t0.elapsed().as_secs_f64();
    let after = peak_mib()?;
    let grad = m.lm_head_weight().grad().abs().sum(Kind::Float).double_value(&[]);
    println!(
        "mode {} chunk {} B {} T {} V {}: loss {value:.6} |grad head|_1 {grad:.6}; peak RSS {before:.0} MiB before, {after:.0} MiB after: +{:.0} MiB; {seconds:.2} s",
        a.mode,
        if a.mode == "deferred" { a.chunk } else { a.seq },
        a.batch,
        a.seq,
        a.vocab,
        after - before
    );
    Ok(())
}
