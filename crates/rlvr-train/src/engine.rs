//! A [`RolloutEngine`] in the trainer's process: any [`Policy`] (rl-lm's transformer, an
//! [`HfPolicy`](crate::HfPolicy), your own) generating through [`Policy::generate`], so the
//! code that drives an engine runs the same on a vLLM server
//! ([`rlvr_rollout::VllmClient`]) or on a local copy of the policy.
//!
//! The engine owns its policy (a replica of the trainer's, say); [`sync_weights`] loads the
//! update's path with [`Policy::load`] (an HF directory for [`HfPolicy`](crate::HfPolicy), a
//! safetensors file for rl-lm's transformer) and checks the probe against the policy's own
//! teacher-forced log-probs.
//!
//! [`sync_weights`]: RolloutEngine::sync_weights

use rlvr_rollout::{
    Completion, FinishReason, GenerateRequest, Generation, RolloutEngine, RolloutError, WeightUpdate, WeightVersion,
};
use tch::Kind;

use crate::policy::{Policy, Sampling};
use crate::rollout::MAX_GENERATION_ROWS;
use rlvr_tasks::MalformedReason;

/// The name an in-process engine gives in errors where a server URL would be.
pub const IN_PROCESS: &str = "in-process";

/// A [`RolloutEngine`] over a [`Policy`] of this process (see the module docs).
///
/// Behaviour log-probs are the policy's own (`rl-lm`: `log_softmax(logits / T)` without the
/// top-p renormalisation vLLM's `processed_logprobs` applies; see docs/rlvr-rollout.md).
/// The random stream of a call is `rl_core::rng_from_seed(request.seed)`, so the same request
/// gives the same responses.
#[derive(Debug)]
pub struct PolicyEngine<P: Policy> {
    policy: P,
    version: WeightVersion,
}

fn engine_err(e: impl std::fmt::Display) -> RolloutError {
    RolloutError::Engine(e.to_string())
}

impl<P: Policy> PolicyEngine<P> {
    /// An engine serving `policy` as weight version `version`.
    pub fn new(policy: P, version: WeightVersion) -> Self {
        Self { policy, version }
    }

    /// The policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The policy, to hand back.
    pub fn into_policy(self) -> P {
        self.policy
    }
}

impl<P: Policy> RolloutEngine for PolicyEngine<P> {
    fn generate(&mut self, req: &GenerateRequest<'_>) -> rlvr_rollout::Result<Generation> {
        req.validate()?;
        let s = &**req.sampling;
        if let Some(k) = s.top_k {
            return Err(RolloutError::InvalidParameter {
                name: "sampling.top_k".into(),
                value: k.to_string(),
                reason: "the in-process policies sample without a top-k cut".into(),
            });
        }
        let own = self.policy.stop_token_ids();
        if let Some(id) = s.stop_token_ids.iter().find(|&&id| !own.contains(&i64::from(id))) {
            return Err(RolloutError::InvalidParameter {
                name: "sampling.stop_token_ids".into(),
                value: id.to_string(),
                reason: format!("an in-process policy stops on its own stop ids only ({own:?})"),
            });
        }
        let sampling = Sampling { max_new_tokens: i64::from(s.max_tokens), temperature: s.temperature, top_p: s.top_p };
        let prompts: Vec<Vec<i64>> = req.prompts.iter().map(|p| p.iter().map(|&t| i64::from(t)).collect()).collect();
        let mut rng = rl_core::rng_from_seed(req.seed);
        let mut completions: Vec<Vec<Completion>> = Vec::with_capacity(prompts.len());
        let per_call = (MAX_GENERATION_ROWS / req.n).max(1);
        for chunk in prompts.chunks(per_call) {
            let rows: Vec<&[i64]> = chunk.iter().flat_map(|p| std::iter::repeat_n(p.as_slice(), req.n)).collect();
            let gen = self.policy.generate(&rows, &sampling, &mut rng).map_err(engine_err)?;
            if gen.responses.len() != rows.len() || gen.logprobs.len() != rows.len() {
                return Err(engine_err(format!(
                    "the policy returned {} responses for {} rows",
                    gen.responses.len(),
                    rows.len()
                )));
            }
            let mut it = gen.responses.into_iter().zip(gen.logprobs);
            for p in 0..chunk.len() {
                let mut group = Vec::with_capacity(req.n);
                for (j, (ids, lps)) in it.by_ref().take(req.n).enumerate() {
                    let choice = p * req.n + j;
                    if ids.len() != lps.len() {
                        return Err(RolloutError::LengthMismatch {
                            server: IN_PROCESS.into(),
                            choice,
                            tokens: ids.len(),
                            logprobs: lps.len(),
                            what: "behaviour log-probs".into(),
                        });
                    }
                    if let Some((position, v)) = lps.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                        return Err(RolloutError::NonFinite {
                            server: IN_PROCESS.into(),
                            choice,
                            position,
                            value: v.to_string(),
                        });
                    }
                    let finish_reason = if ids.len() < sampling.max_new_tokens as usize
                        || !matches!(self.policy.completion_text(&ids), Err(MalformedReason::MissingEos))
                    {
                        FinishReason::Stop
                    } else {
                        FinishReason::Length
                    };
                    let token_ids = ids
                        .iter()
                        .enumerate()
                        .map(|(position, &t)| {
                            u32::try_from(t).map_err(|_| RolloutError::OutOfVocab {
                                server: IN_PROCESS.into(),
                                choice,
                                position,
                                id: t,
                                vocab_size: u32::MAX,
                            })
                        })
                        .collect::<rlvr_rollout::Result<Vec<u32>>>()?;
                    group.push(Completion { token_ids, logprobs: lps, finish_reason });
                }
                if group.len() != req.n {
                    return Err(RolloutError::ChoiceCount {
                        server: IN_PROCESS.into(),
                        expected: req.n,
                        got: group.len(),
                    });
                }
                completions.push(group);
            }
        }
        Ok(Generation { completions, version: self.version })
    }

    fn sync_weights(&mut self, update: &WeightUpdate<'_>) -> rlvr_rollout::Result<()> {
        update.probe.validate()?;
        if update.version <= self.version {
            return Err(RolloutError::InvalidParameter {
                name: "update.version".into(),
                value: update.version.to_string(),
                reason: format!("must be greater than the served version {}", self.version),
            });
        }
        self.policy.load(update.dir).map_err(engine_err)?;
        let p = update.probe;
        let prompt: Vec<i64> = p.prompt.iter().map(|&t| i64::from(t)).collect();
        let cont: Vec<i64> = p.continuation.iter().map(|&t| i64::from(t)).collect();
        let got: Vec<f32> = {
            let _guard = tch::no_grad_guard();
            let out = self.policy.response_logprobs(&[&prompt], &[&cont], 1.0, false).map_err(engine_err)?;
            let flat = out.logprobs.f_to_kind(Kind::Float).and_then(|t| t.f_flatten(0, -1)).map_err(engine_err)?;
            Vec::<f32>::try_from(flat).map_err(engine_err)?
        };
        if got.len() != p.expected.len() {
            return Err(engine_err(format!("{} probe log-probs for {} tokens", got.len(), p.expected.len())));
        }
        let worst = got
            .iter()
            .zip(&p.expected)
            .enumerate()
            .map(|(i, (&g, &e))| (i, e, f64::from(g), (f64::from(g) - e).abs()))
            .fold(None, |acc: Option<(usize, f64, f64, f64)>, x| match acc {
                Some(a) if a.3 >= x.3 => Some(a),
                _ => Some(x),
            });
        if let Some((position, expected, got, diff)) = worst {
            if diff.is_nan() || diff > p.tolerance {
                return Err(RolloutError::StaleWeights {
                    server: IN_PROCESS.into(),
                    version: update.version,
                    position,
                    expected,
                    got,
                    diff,
                    tolerance: p.tolerance,
                });
            }
        }
        self.version = update.version;
        Ok(())
    }

    fn weight_version(&self) -> WeightVersion {
        self.version
    }
}
