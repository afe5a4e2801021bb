//! The encoder-generation pipeline: candidates, summary, verification, repair.
//!
//! As LaRe's `callgpt` (`thu-rllab/LaRe:mujoco/reward_model/chat_with_gpt.py`):
//!
//! 1. ask for `n_candidates` answers to the task prompt at `candidate_temperature` (5, 1.0);
//! 2. with more than one candidate, append them as one assistant turn and ask for a summary
//!    that combines their factors, at `refine_temperature` (0.3);
//! 3. verify the answer by running it; on failure send the error back and ask again (0.3), at
//!    most `max_repairs` rounds (5), keeping the dialog short: the failing answer and the error
//!    replace the previous pair;
//! 4. return the accepted encoder with the whole dialog and the cache keys of every call.
//!
//! Verification is a superset of LaRe's (which runs the function once on a reset observation
//! duplicated into a batch of two and checks every factor's shape): the answer must parse, the
//! script must compile in the sandbox, run on every probe state (the first is the reset
//! state, the rest come from random-action rollouts) without error, return the same number of
//! factors everywhere (exactly one in [`PromptMode::Direct`]), only finite values, and at least
//! one factor must vary across the probe states (std > `min_factor_std`).

use std::path::Path;

use ndarray::Array2;
use rand::RngCore;
use rl_core::{Env, Params, Valid};
use serde::{Deserialize, Serialize};

use super::cache::{CachedChat, Source};
use super::client::{ChatRequest, Message};
use super::prompt::{error_message, parse_answer, PromptMode, TaskPrompt, SUMMARY_INSTRUCTION};
use crate::encoder::StateSource;
use crate::error::{LareError, Result};
use crate::script::{SandboxLimits, ScriptEncoder, ScriptSpec};

/// Parameters of [`generate_encoder`]; defaults are LaRe's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `model` | `gpt-4o` | model name sent to the endpoint (part of every cache key) | non-empty |
/// | `n_candidates` | 5 | first-round answers (`llm_n`; 1 skips the summary, LaRe's "no self-verification" ablation) | `>= 1` |
/// | `candidate_temperature` | 1.0 | temperature of the first round | `[0, 2]` |
/// | `refine_temperature` | 0.3 | temperature of the summary and repair rounds | `[0, 2]` |
/// | `max_repairs` | 5 | repair rounds | any |
/// | `seed` | none | sampling seed sent to servers that support it | |
/// | `json_mode` | true | `response_format = json_object` | |
/// | `min_factor_std` | 1e-6 | a factor varies when its std over the probe states exceeds this | `>= 0` |
/// | `limits` | [`SandboxLimits::default`] | the sandbox | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineParams {
    /// Model name.
    pub model: String,
    /// First-round answers.
    pub n_candidates: usize,
    /// First-round temperature.
    pub candidate_temperature: f64,
    /// Summary and repair temperature.
    pub refine_temperature: f64,
    /// Repair rounds.
    pub max_repairs: usize,
    /// Sampling seed.
    pub seed: Option<u64>,
    /// JSON mode.
    pub json_mode: bool,
    /// Variance threshold.
    pub min_factor_std: f64,
    /// Sandbox limits.
    pub limits: SandboxLimits,
}

impl Default for PipelineParams {
    fn default() -> Self {
        Self {
            model: "gpt-4o".into(),
            n_candidates: 5,
            candidate_temperature: 1.0,
            refine_temperature: 0.3,
            max_repairs: 5,
            seed: None,
            json_mode: true,
            min_factor_std: 1e-6,
            limits: SandboxLimits::default(),
        }
    }
}

impl PipelineParams {
    /// Sets `model`.
    #[must_use]
    pub fn model(mut self, v: impl Into<String>) -> Self {
        self.model = v.into();
        self
    }
    /// Sets `n_candidates`.
    #[must_use]
    pub fn n_candidates(mut self, v: usize) -> Self {
        self.n_candidates = v;
        self
    }
    /// Sets `candidate_temperature`.
    #[must_use]
    pub fn candidate_temperature(mut self, v: f64) -> Self {
        self.candidate_temperature = v;
        self
    }
    /// Sets `refine_temperature`.
    #[must_use]
    pub fn refine_temperature(mut self, v: f64) -> Self {
        self.refine_temperature = v;
        self
    }
    /// Sets `max_repairs`.
    #[must_use]
    pub fn max_repairs(mut self, v: usize) -> Self {
        self.max_repairs = v;
        self
    }
    /// Sets `seed`.
    #[must_use]
    pub fn seed(mut self, v: Option<u64>) -> Self {
        self.seed = v;
        self
    }
    /// Sets `json_mode`.
    #[must_use]
    pub fn json_mode(mut self, v: bool) -> Self {
        self.json_mode = v;
        self
    }
    /// Sets `min_factor_std`.
    #[must_use]
    pub fn min_factor_std(mut self, v: f64) -> Self {
        self.min_factor_std = v;
        self
    }
    /// Sets `limits`.
    #[must_use]
    pub fn limits(mut self, v: SandboxLimits) -> Self {
        self.limits = v;
        self
    }
}

impl Params for PipelineParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        if self.model.trim().is_empty() {
            return Err(LareError::invalid("model", "\"\"", "must name a model"));
        }
        if self.n_candidates == 0 {
            return Err(LareError::invalid("n_candidates", 0, "must be >= 1"));
        }
        for (name, t) in
            [("candidate_temperature", self.candidate_temperature), ("refine_temperature", self.refine_temperature)]
        {
            if !(0.0..=2.0).contains(&t) {
                return Err(LareError::invalid(name, t, "must be in [0, 2]"));
            }
        }
        if !(self.min_factor_std >= 0.0 && self.min_factor_std.is_finite()) {
            return Err(LareError::invalid("min_factor_std", self.min_factor_std, "must be finite and >= 0"));
        }
        self.limits.validate().map_err(|e| match e {
            LareError::InvalidParameter { name, value, reason } => {
                LareError::InvalidParameter { name: format!("limits.{name}"), value, reason }
            }
            other => other,
        })
    }
}

/// The states a candidate is run on.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSet {
    /// `s_t`, `[M, obs_dim]` (row 0: a reset state, as LaRe's check).
    pub obs: Array2<f32>,
    /// `a_t`, `[M, act_dim]`.
    pub actions: Array2<f32>,
    /// `s_{t+1}`, `[M, obs_dim]`.
    pub next_obs: Array2<f32>,
}

impl ProbeSet {
    /// `n_states` transitions of uniformly random actions in `env` (reset when an episode ends;
    /// the first is the reset state).
    ///
    /// # Errors
    /// `n_states == 0`; environment failures.
    pub fn from_env(env: &mut dyn Env, n_states: usize, rng: &mut dyn RngCore) -> Result<Self> {
        if n_states == 0 {
            return Err(LareError::invalid("n_states", 0, "must be >= 1"));
        }
        let (od, ad) = (env.observation_space().dim(), env.action_space().dim());
        let mut obs = Array2::zeros((n_states, od));
        let mut act = Array2::zeros((n_states, ad));
        let mut next = Array2::zeros((n_states, od));
        let mut o = env.reset(rng)?;
        for i in 0..n_states {
            let a = env.action_space().sample(rng);
            let step = env.step(a.view())?;
            obs.row_mut(i).assign(&o);
            act.row_mut(i).assign(&a);
            next.row_mut(i).assign(&step.obs);
            o = if step.done() { env.reset(rng)? } else { step.obs };
        }
        Ok(Self { obs, actions: act, next_obs: next })
    }

    /// `n_steps` steps of uniformly random actions in a multi-agent environment, every agent's
    /// transition a probe state (agents must share observation and action widths).
    ///
    /// # Errors
    /// `n_steps == 0`; agents of different widths; environment failures.
    pub fn from_multi_env(env: &mut dyn rl_envs::MultiAgentEnv, n_steps: usize, rng: &mut dyn RngCore) -> Result<Self> {
        if n_steps == 0 {
            return Err(LareError::invalid("n_steps", 0, "must be >= 1"));
        }
        let n = env.n_agents();
        let od = env.observation_spaces().first().map_or(0, rl_core::Space::dim);
        let ad = env.action_spaces().first().map_or(0, rl_core::Space::dim);
        if env.observation_spaces().iter().any(|s| s.dim() != od) || env.action_spaces().iter().any(|s| s.dim() != ad) {
            return Err(LareError::invalid(
                "env",
                "agents",
                "a shared encoder needs equal observation and action widths",
            ));
        }
        let rows = n * n_steps;
        let (mut obs, mut act, mut next) =
            (Array2::zeros((rows, od)), Array2::zeros((rows, ad)), Array2::zeros((rows, od)));
        let mut o = env.reset(rng)?;
        for k in 0..n_steps {
            let actions: Vec<ndarray::Array1<f32>> = env.action_spaces().iter().map(|s| s.sample(rng)).collect();
            let step = env.step(&actions)?;
            for i in 0..n {
                obs.row_mut(k * n + i).assign(&o[i]);
                act.row_mut(k * n + i).assign(&actions[i]);
                next.row_mut(k * n + i).assign(&step.obs[i]);
            }
            o = if step.done() { env.reset(rng)? } else { step.obs };
        }
        Ok(Self { obs, actions: act, next_obs: next })
    }

    /// Number of probe states.
    pub fn len(&self) -> usize {
        self.obs.nrows()
    }

    /// Whether there is no probe state.
    pub fn is_empty(&self) -> bool {
        self.obs.nrows() == 0
    }
}

/// An accepted encoder with everything needed to reproduce and audit it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderRecord {
    /// Record format.
    pub format_version: u32,
    /// The task.
    pub task: String,
    /// The script and its interface.
    pub spec: ScriptSpec,
    /// The answer's reading of the task.
    pub understand: String,
    /// The answer's analysis.
    pub analyze: String,
    /// Who wrote the accepted answer's dialog: `hand_written` when any answer was written by a
    /// person, `test_fixture` when any came from a fixture, `llm` only when every answer did.
    pub source: Source,
    /// The distinct authors/endpoints of the answers.
    pub by: Vec<String>,
    /// Model name the requests carried.
    pub model: String,
    /// Cache keys of every call, in order (replaying them reproduces this record).
    pub cache_keys: Vec<String>,
    /// The whole dialog, every repair turn included.
    pub dialog: Vec<Message>,
    /// Repair rounds used.
    pub repair_rounds: usize,
    /// First-round candidates.
    pub n_candidates: usize,
}

const RECORD_FORMAT: u32 = 1;

impl EncoderRecord {
    /// Compiles the accepted script in a sandbox with `limits`.
    ///
    /// # Errors
    /// As [`ScriptEncoder::new`].
    pub fn encoder(&self, limits: Valid<SandboxLimits>) -> Result<ScriptEncoder> {
        ScriptEncoder::new(self.spec.clone(), limits)
    }

    /// Writes the record as pretty JSON.
    ///
    /// # Errors
    /// I/O failures.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)?;
            }
        }
        std::fs::write(path, serde_json::to_string_pretty(self)?)?;
        Ok(())
    }

    /// Reads a record.
    ///
    /// # Errors
    /// I/O failures; [`LareError::Corrupt`] for bad JSON or another format version.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)?;
        let corrupt = |reason: String| LareError::Corrupt { path: path.display().to_string(), reason };
        let r: Self = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if r.format_version != RECORD_FORMAT {
            return Err(corrupt(format!("format_version {} (this code reads {RECORD_FORMAT})", r.format_version)));
        }
        Ok(r)
    }

    /// A label for result tables: `LaRe (hand-written encoder)`, `LaRe (LLM encoder: model)`.
    pub fn label(&self) -> String {
        match self.source {
            Source::Llm => format!("LLM-written encoder ({})", self.model),
            Source::HandWritten => "hand-written encoder (no LLM)".into(),
            Source::TestFixture => "test-fixture encoder".into(),
        }
    }
}

/// Runs one answer through verification; returns the compiled encoder or the error message to
/// send back.
pub fn verify_answer(
    content: &str,
    prompt: &TaskPrompt,
    probe: &ProbeSet,
    params: &PipelineParams,
) -> std::result::Result<(ScriptEncoder, super::prompt::Answer), String> {
    let answer = parse_answer(content)?;
    let limits = params.limits.clone().check().map_err(|e| e.to_string())?;
    if probe.is_empty() {
        return Err("no probe state to run the function on".into());
    }
    if probe.obs.ncols() != prompt.obs_layout.dim || probe.actions.ncols() != prompt.act_dim {
        return Err(format!(
            "probe states have widths {} / {}, the task {} / {}",
            probe.obs.ncols(),
            probe.actions.ncols(),
            prompt.obs_layout.dim,
            prompt.act_dim
        ));
    }
    let state = |i: usize| -> Vec<f32> {
        match prompt.state_source {
            StateSource::Current => probe.obs.row(i).to_vec(),
            StateSource::Next => probe.next_obs.row(i).to_vec(),
        }
    };
    let act0 = probe.actions.row(0).to_vec();
    let enc = ScriptEncoder::probe(
        &answer.functions,
        &prompt.obs_layout,
        prompt.act_dim,
        prompt.state_source,
        limits,
        &state(0),
        &act0,
    )
    .map_err(|e| e.to_string())?;
    let n = enc.spec().n_factors;
    if prompt.mode == PromptMode::Direct && n != 1 {
        return Err(format!("The output should be an array with only one element, the reward; it has {n}."));
    }
    let mut values = vec![Vec::with_capacity(probe.len()); n];
    for i in 0..probe.len() {
        let f = enc.call(&state(i), &probe.actions.row(i).to_vec()).map_err(|e| format!("on probe state {i}: {e}"))?;
        if f.len() != n {
            return Err(format!(
                "The function returned {} factors on probe state {i} but {n} on probe state 0; it must always return the same number of factors.",
                f.len()
            ));
        }
        for (k, v) in f.iter().enumerate() {
            if !v.is_finite() {
                return Err(format!("Factor {k} is {v} on probe state {i}; every factor must be a finite number."));
            }
            values[k].push(f64::from(*v));
        }
    }
    if probe.len() > 1 {
        let varies = values.iter().any(|v| rl_core::stats::std_dev(v, 0) > params.min_factor_std);
        if !varies {
            return Err(format!(
                "Every factor is constant over {} different states; the factors must depend on the observation or the action.",
                probe.len()
            ));
        }
    }
    Ok((enc, answer))
}

/// Runs the pipeline (see the module docs) through `chat` and returns the accepted encoder.
///
/// # Errors
/// [`LareError::CacheMiss`] when replaying a dialog that was never recorded; chat failures;
/// [`LareError::RepairExhausted`] when no answer passes within `max_repairs` rounds.
pub fn generate_encoder(
    chat: &mut CachedChat,
    prompt: &TaskPrompt,
    probe: &ProbeSet,
    params: &Valid<PipelineParams>,
) -> Result<EncoderRecord> {
    let p = params.get();
    let request = |messages: &[Message], temperature: f64, n: usize| ChatRequest {
        model: p.model.clone(),
        messages: messages.to_vec(),
        temperature,
        n,
        seed: p.seed,
        json_mode: p.json_mode,
    };
    let mut keys = Vec::new();
    let mut provenance = Vec::new();
    let mut messages = vec![Message::user(prompt.user_message())];
    let mut dialog = messages.clone();

    let first = chat.complete(&request(&messages, p.candidate_temperature, p.n_candidates))?;
    keys.extend(first.keys.clone());
    provenance.extend(first.provenance.clone());
    let candidates_turn = Message::assistant(serde_json::to_string(&first.choices)?);
    messages.push(candidates_turn.clone());
    dialog.push(candidates_turn);
    let mut out = first.choices;
    if p.n_candidates > 1 {
        let ask = Message::user(SUMMARY_INSTRUCTION);
        messages.push(ask.clone());
        dialog.push(ask);
        let s = chat.complete(&request(&messages, p.refine_temperature, 1))?;
        keys.extend(s.keys.clone());
        provenance.extend(s.provenance.clone());
        let turn = Message::assistant(s.choices.first().cloned().unwrap_or_default());
        messages.push(turn.clone());
        dialog.push(turn);
        out = s.choices;
    }
    let mut last_error = String::new();
    for round in 0..=p.max_repairs {
        let mut failure = None;
        let mut accepted = None;
        for (i, content) in out.iter().enumerate() {
            match verify_answer(content, prompt, probe, p) {
                Ok(ok) => {
                    if accepted.is_none() {
                        accepted = Some(ok);
                    }
                }
                Err(e) => {
                    failure = Some((i, e));
                    break;
                }
            }
        }
        match (failure, accepted) {
            (None, Some((enc, answer))) => {
                let source = if provenance.iter().any(|x| x.source == Source::HandWritten) {
                    Source::HandWritten
                } else if provenance.iter().any(|x| x.source == Source::TestFixture) {
                    Source::TestFixture
                } else {
                    Source::Llm
                };
                let mut by: Vec<String> = provenance.iter().map(|x| x.by.clone()).collect();
                by.dedup();
                return Ok(EncoderRecord {
                    format_version: RECORD_FORMAT,
                    task: prompt.task.clone(),
                    spec: enc.spec().clone(),
                    understand: answer.understand,
                    analyze: answer.analyze,
                    source,
                    by,
                    model: p.model.clone(),
                    cache_keys: keys,
                    dialog,
                    repair_rounds: round,
                    n_candidates: p.n_candidates,
                });
            }
            (Some((idx, err)), _) => {
                last_error = err.clone();
                if round == p.max_repairs {
                    break;
                }
                let failing = Message::assistant(out.get(idx).cloned().unwrap_or_default());
                let fix = Message::user(error_message(&err));
                let len = messages.len();
                if round == 0 {
                    messages[len - 1] = failing;
                    messages.push(fix.clone());
                } else {
                    messages[len - 2] = failing;
                    messages[len - 1] = fix.clone();
                }
                dialog.push(fix);
                let r = chat.complete(&request(&messages, p.refine_temperature, 1))?;
                keys.extend(r.keys.clone());
                provenance.extend(r.provenance.clone());
                dialog.push(Message::assistant(r.choices.first().cloned().unwrap_or_default()));
                out = r.choices;
            }
            (None, None) => {
                return Err(LareError::BadResponse("the model returned no answer".into()));
            }
        }
    }
    Err(LareError::RepairExhausted { rounds: p.max_repairs, last_error })
}
