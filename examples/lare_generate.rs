//! `generate`: runs LaRe's encoder-generation pipeline for a task and stores the accepted
//! latent reward encoder (an auditable JSON record: script, dialog, cache keys, provenance).
//!
//! ```text
//! # against a live OpenAI-compatible endpoint (vLLM, llama.cpp's llama-server, OpenAI with --features lare,https)
//! export LARE_LLM_BASE_URL=http://127.0.0.1:8000/v1 LARE_LLM_MODEL=Qwen2.5-7B-Instruct   # LARE_LLM_API_KEY if needed
//! cargo run --release --features lare --example lare_generate -- --task pendulum \
//!     --cache crates/lare/llm_cache --out crates/lare/encoders/pendulum_llm.json
//!
//! # replay a recorded run offline (no endpoint; a missing answer is an error)
//! cargo run --release --features lare --example lare_generate -- --task pendulum --mode replay \
//!     --cache crates/lare/llm_cache --model hand-written --n-candidates 1 --out /tmp/pendulum.json
//!
//! # pass a HAND-WRITTEN encoder through the same pipeline (verified, cached, labelled hand_written)
//! cargo run --release --features lare --example lare_generate -- --task pendulum \
//!     --hand-written crates/lare/encoders/hand_written/pendulum.rhai \
//!     --cache crates/lare/llm_cache --out crates/lare/encoders/pendulum.json
//! ```
//!
//! No language model is reachable from the machines this project is built on: the committed
//! encoders under `crates/lare/encoders/` were written by hand and carry `"source":
//! "hand_written"` in their record and in every cache entry.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;
use lare::llm::{
    generate_encoder, tasks, CacheMode, CachedChat, ChatBackend, ChatConfig, HttpChat, PipelineParams, ProbeSet,
    ResponseCache, ScriptedChat, ScriptedTurn, Source,
};
use rl_core::Params;

#[derive(Parser, Debug)]
#[command(about = "Generate (or replay) a latent reward encoder with LaRe's LLM pipeline")]
struct Args {
    /// Task: pendulum, mountain_car, simple_spread, half_cheetah, hopper, walker2d.
    #[arg(long)]
    task: String,
    /// Response cache directory.
    #[arg(long, default_value = "crates/lare/llm_cache")]
    cache: PathBuf,
    /// Where to write the accepted encoder record.
    #[arg(long)]
    out: PathBuf,
    /// replay (cache only), record-missing (call the endpoint on a miss) or live (always call).
    #[arg(long, default_value = "record-missing")]
    mode: String,
    /// A Rhai file written by a person: answered as the model's single candidate, labelled
    /// `hand_written` (no endpoint is called).
    #[arg(long)]
    hand_written: Option<PathBuf>,
    /// What the person understood of the task (goes into the hand-written answer).
    #[arg(long, default_value = "Written by hand by the lare developers; no language model was involved.")]
    note: String,
    /// Model name (default: LARE_LLM_MODEL; `hand-written` with --hand-written).
    #[arg(long)]
    model: Option<String>,
    /// First-round candidates (LaRe: 5; forced to 1 with --hand-written).
    #[arg(long, default_value_t = 5)]
    n_candidates: usize,
    /// Repair rounds.
    #[arg(long, default_value_t = 5)]
    max_repairs: usize,
    /// Probe states for verification.
    #[arg(long, default_value_t = 32)]
    probe_states: usize,
    /// Seed of the probe rollouts.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn probe(task: &str, n: usize, seed: u64) -> Result<ProbeSet> {
    let mut rng = rl_core::rng_from_seed(seed);
    Ok(match task {
        "pendulum" => {
            let mut env = rl_envs::classic::Pendulum::new(rl_envs::classic::PendulumParams::default().check()?)?;
            ProbeSet::from_env(&mut env, n, &mut rng)?
        }
        "mountain_car" => {
            let p = rl_envs::classic::MountainCarContinuousParams::default().check()?;
            let mut env = rl_envs::classic::MountainCarContinuous::new(p)?;
            ProbeSet::from_env(&mut env, n, &mut rng)?
        }
        "simple_spread" => {
            let mut env = rl_envs::mpe::SimpleSpread::new(rl_envs::mpe::SimpleSpreadParams::default().check()?)?;
            ProbeSet::from_multi_env(&mut env, n.div_ceil(3), &mut rng)?
        }
        #[cfg(feature = "mujoco")]
        "half_cheetah" | "hopper" | "walker2d" => {
            use rl_envs::mujoco::{HalfCheetahParams, HopperParams, Locomotion, Walker2dParams};
            let mut env = match task {
                "half_cheetah" => Locomotion::half_cheetah(HalfCheetahParams::default().check()?)?,
                "hopper" => Locomotion::hopper(HopperParams::default().check()?)?,
                _ => Locomotion::walker2d(Walker2dParams::default().check()?)?,
            };
            ProbeSet::from_env(&mut env, n, &mut rng)?
        }
        other => bail!("no probe environment for task `{other}` (MuJoCo tasks need --features mujoco)"),
    })
}

fn main() -> Result<()> {
    let a = Args::parse();
    let prompt = tasks::by_name(&a.task)?;
    let cache = ResponseCache::new(&a.cache);
    let (mut chat, model, n_candidates) = if let Some(path) = &a.hand_written {
        let source = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let answer = serde_json::json!({
            "Understand": a.note,
            "Analyze": format!("Hand-written encoder from {}.", path.display()),
            "Functions": source,
        })
        .to_string();
        let backend = ScriptedChat::new(
            format!("hand-written: {}", path.display()),
            vec![ScriptedTurn { expect: Some("TASK: ".into()), answers: vec![answer] }],
        );
        let chat =
            CachedChat::new(cache, CacheMode::RecordMissing, Box::new(backend), Source::HandWritten, a.note.clone());
        (chat, a.model.clone().unwrap_or_else(|| "hand-written".into()), 1)
    } else {
        let mode = match a.mode.as_str() {
            "replay" => CacheMode::Replay,
            "record-missing" => CacheMode::RecordMissing,
            "live" => CacheMode::Live,
            other => bail!("unknown --mode `{other}`"),
        };
        if mode == CacheMode::Replay {
            let model = a.model.clone().context("--mode replay needs --model (the recorded requests' model)")?;
            (CachedChat::replay(cache), model, a.n_candidates)
        } else {
            let config = ChatConfig::from_env().context("set LARE_LLM_BASE_URL and LARE_LLM_MODEL")?;
            let model = a.model.clone().unwrap_or_else(|| config.model.clone());
            let http = HttpChat::new(ChatConfig { model: model.clone(), ..config });
            eprintln!("calling {}", http.describe());
            (CachedChat::new(cache, mode, Box::new(http), Source::Llm, ""), model, a.n_candidates)
        }
    };
    let params =
        PipelineParams::default().model(model).n_candidates(n_candidates).max_repairs(a.max_repairs).check()?;
    let probe = probe(&a.task, a.probe_states, a.seed)?;
    let record = generate_encoder(&mut chat, &prompt, &probe, &params)?;
    record.save(&a.out)?;
    println!(
        "{}: accepted {} ({} factors, {} repair rounds, {} calls); written to {}",
        a.task,
        record.label(),
        record.spec.n_factors,
        record.repair_rounds,
        record.cache_keys.len(),
        a.out.display()
    );
    Ok(())
}
