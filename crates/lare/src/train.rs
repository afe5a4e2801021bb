//! Training loops on episodic rewards: an off-policy agent (SAC, TD3 from `rl-agents`) whose
//! every batch is relabelled by a [`RewardRedistributor`], and PPO with parameter sharing over
//! the agents of a cooperative multi-agent task with agent-level credit.
//!
//! Off-policy (LaRe's `mujoco/main.py` + `algos/TD3.py`): uniform random actions for the first
//! `start_steps`; an episode enters the buffer when it ends, with its features; after
//! `start_steps`, every environment step takes `updates_per_step` agent updates, each on a batch
//! sampled by the method and relabelled with its current rewards, followed by
//! `decoder_updates` decoder steps (LaRe: one per agent update). The hidden dense reward is used
//! only for `reward/pred_err` (LaRe's `reward_pred_err`, MSE of the relabelled rewards against
//! it) and for evaluation.
//!
//! Multi-agent (LaRe's `mpe/` PPO): one PPO policy shared by all agents on their local
//! observations (each agent is one row of PPO's batch). At every step each agent's reward is
//! relabelled by the credit decoder from its factors `φ(o^i_{t+1})` and scaled by
//! `reward_scale` (LaRe: `T·N`); the decoder trains every `decoder_every` PPO iterations for
//! `decoder_updates` steps on the last `buffer_episodes` episodes, so one rollout sees one decoder.

use ndarray::{Array1, Array2, Axis};
use rand::RngCore;
use rl_agents::{Agent, Batch, BatchPolicy, OnlineAgent, VecTransition};
use rl_core::{ActMode, Env, Metrics, MetricsSink, Params, Valid};
use rl_envs::wrappers::EpisodicReward;
use rl_envs::MultiAgentEnv;
use serde::{Deserialize, Serialize};

use crate::credit::{AgentCreditDecoder, MultiEpisode, MultiEpisodeBuffer};
use crate::encoder::LatentEncoder;
use crate::episode::{EpisodeBuffer, EpisodeBuilder};
use crate::error::{LareError, Result};
use crate::redistribute::{store_episode, RewardRedistributor};

/// Parameters of [`train_off_policy`]; defaults are LaRe's MuJoCo loop.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `total_steps` | 1 000 000 | environment steps | `>= 1` |
/// | `start_steps` | 10 000 | uniform random actions first (`start_timesteps`) | any |
/// | `batch_size` | 256 | transitions per agent update | `>= 1` |
/// | `updates_per_step` | 1 | agent updates per environment step | `>= 1` |
/// | `decoder_updates` | 1 | decoder steps per agent update | any |
/// | `buffer_capacity` | 1 000 000 | steps kept (whole episodes) | `>= 1` |
/// | `eval_every` | 5 000 | environment steps between evaluations | `>= 1` |
/// | `eval_episodes` | 10 | dense-return episodes per evaluation | `>= 1` |
/// | `log_every` | 1 000 | environment steps between training-metric records | `>= 1` |
/// | `seed` | 0 | master seed (streams `env`, `explore`, `sample`, `eval`) | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffPolicyLoopParams {
    /// Environment steps.
    pub total_steps: u64,
    /// Random steps first.
    pub start_steps: u64,
    /// Batch size.
    pub batch_size: usize,
    /// Agent updates per step.
    pub updates_per_step: usize,
    /// Decoder steps per agent update.
    pub decoder_updates: usize,
    /// Buffer capacity (steps).
    pub buffer_capacity: usize,
    /// Evaluation period.
    pub eval_every: u64,
    /// Evaluation episodes.
    pub eval_episodes: usize,
    /// Metric period.
    pub log_every: u64,
    /// Master seed.
    pub seed: u64,
}

impl Default for OffPolicyLoopParams {
    fn default() -> Self {
        Self {
            total_steps: 1_000_000,
            start_steps: 10_000,
            batch_size: 256,
            updates_per_step: 1,
            decoder_updates: 1,
            buffer_capacity: 1_000_000,
            eval_every: 5_000,
            eval_episodes: 10,
            log_every: 1_000,
            seed: 0,
        }
    }
}

impl Params for OffPolicyLoopParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("total_steps", self.total_steps),
            ("batch_size", self.batch_size as u64),
            ("updates_per_step", self.updates_per_step as u64),
            ("buffer_capacity", self.buffer_capacity as u64),
            ("eval_every", self.eval_every),
            ("eval_episodes", self.eval_episodes as u64),
            ("log_every", self.log_every),
        ] {
            if v == 0 {
                return Err(LareError::invalid(name, 0, "must be >= 1"));
            }
        }
        Ok(())
    }
}

/// What a training run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// `(env steps, mean dense return)` of every evaluation.
    pub evals: Vec<(u64, f64)>,
    /// `(env steps, dense return)` of every training episode.
    pub train_returns: Vec<(u64, f64)>,
    /// Mean of the last evaluation.
    pub final_return: f64,
}

/// Mean dense return of `episodes` deterministic episodes of `policy` in `env`.
///
/// # Errors
/// Environment and policy failures.
pub fn evaluate_policy(
    env: &mut dyn Env,
    policy: &dyn BatchPolicy,
    episodes: usize,
    rng: &mut dyn RngCore,
) -> Result<f64> {
    let mut total = 0.0;
    for _ in 0..episodes {
        let mut obs = env.reset(rng)?;
        loop {
            let a = policy.act_batch(obs.view().insert_axis(Axis(0)), ActMode::Deterministic, rng)?;
            let step = env.step(a.row(0))?;
            total += f64::from(step.reward);
            if step.done() {
                break;
            }
            obs = step.obs;
        }
    }
    Ok(total / episodes.max(1) as f64)
}

/// Trains `agent` on the episodic-reward environment `env` with the per-step rewards of
/// `method`, evaluating the dense return on `eval_env` (see the module docs). Metrics go to
/// `sink` (`eval/return_mean`, `train/episode_return`, `reward/pred_err`, the agent's and the
/// decoder's losses); `progress` is called with the step count after every step.
///
/// # Errors
/// Environment, agent and method failures; an agent of other widths than the environment.
pub fn train_off_policy<E: Env>(
    env: &mut EpisodicReward<E>,
    eval_env: &mut dyn Env,
    agent: &mut dyn Agent,
    method: &mut dyn RewardRedistributor,
    params: &Valid<OffPolicyLoopParams>,
    sink: &mut dyn MetricsSink,
    progress: &mut dyn FnMut(u64),
) -> Result<RunSummary> {
    let p = params.get();
    let od = env.observation_space().dim();
    let ad = env.action_space().dim();
    let seed = |name: &str| rl_core::rng_from_seed(rl_core::derive_seed_named(p.seed, name));
    let (mut env_rng, mut explore_rng, mut sample_rng, mut eval_rng) =
        (seed("env"), seed("explore"), seed("sample"), seed("eval"));
    let mut buffer = EpisodeBuffer::new(od, ad, method.feature_dim(), p.buffer_capacity)?;
    let mut builder = EpisodeBuilder::new(od, ad);
    let mut summary = RunSummary::default();
    let mut obs = env.reset(&mut env_rng)?;
    let mut pending = Metrics::new();
    let device = agent.device();
    for t in 0..p.total_steps {
        let action: Array1<f32> = if t < p.start_steps {
            env.action_space().sample(&mut explore_rng)
        } else {
            agent.explore(obs.view().insert_axis(Axis(0)))?.row(0).to_owned()
        };
        let step = env.step(action.view())?;
        builder.push(obs.view(), action.view(), step.obs.view(), env.last_dense_reward())?;
        if step.done() {
            let dense_return = env.return_so_far();
            let ep = builder.finish(step.reward, step.terminated)?;
            store_episode(&mut buffer, method, ep)?;
            summary.train_returns.push((t + 1, dense_return));
            sink.log(t + 1, &Metrics::new().with("train/episode_return", dense_return))?;
            obs = env.reset(&mut env_rng)?;
        } else {
            obs = step.obs;
        }
        if t + 1 >= p.start_steps && !buffer.is_empty() {
            for _ in 0..p.updates_per_step {
                let batch = method.sample(&buffer, p.batch_size, &mut sample_rng)?;
                let rewards = method.relabel(&batch)?;
                let tr = batch.to_transitions(&rewards)?;
                let m = agent.update(&Batch::from_transitions(&tr, device)?)?;
                for _ in 0..p.decoder_updates {
                    let dm = method.update(&buffer)?;
                    if (t + 1) % p.log_every == 0 {
                        pending.extend_prefixed("", &dm);
                    }
                }
                if (t + 1) % p.log_every == 0 {
                    pending.extend_prefixed("", &m.to_metrics()?);
                    let err = (&rewards - &batch.dense_rewards).mapv(|e| f64::from(e * e)).mean().unwrap_or(0.0);
                    pending.insert("reward/pred_err", err);
                }
            }
        }
        if (t + 1) % p.log_every == 0 && !pending.is_empty() {
            sink.log(t + 1, &std::mem::take(&mut pending))?;
        }
        if (t + 1) % p.eval_every == 0 || t + 1 == p.total_steps {
            let r = evaluate_policy(eval_env, agent.policy(), p.eval_episodes, &mut eval_rng)?;
            summary.evals.push((t + 1, r));
            summary.final_return = r;
            sink.log(t + 1, &Metrics::new().with("eval/return_mean", r))?;
        }
        progress(t + 1);
    }
    sink.flush()?;
    Ok(summary)
}

/// How the multi-agent loop turns the team's episodic return into per-agent rewards.
#[derive(Debug)]
pub enum MultiAgentMethod {
    /// The raw episodic reward: `R_team / N` to every agent at the last step (LaRe's sparse PPO).
    Episodic,
    /// The hidden dense per-agent rewards (a reference).
    Dense,
    /// A shared credit decoder over the factors of `encoder` (LaRe with an LLM or hand-written
    /// encoder; RD with [`RawEncoder`](crate::encoder::RawEncoder) on `o'`).
    Credit {
        /// Name in logs.
        name: String,
        /// The factors.
        encoder: Box<dyn LatentEncoder>,
        /// The decoder.
        decoder: Box<AgentCreditDecoder>,
    },
}

impl MultiAgentMethod {
    /// The method's name.
    pub fn name(&self) -> String {
        match self {
            MultiAgentMethod::Episodic => "episodic".into(),
            MultiAgentMethod::Dense => "dense".into(),
            MultiAgentMethod::Credit { name, .. } => name.clone(),
        }
    }
}

/// Parameters of [`train_multi_agent_ppo`]; defaults are LaRe's MPE setup where it has one.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `total_steps` | 2 000 000 | environment steps (each moves every agent) | `>= 1` |
/// | `decoder_every` | 10 | PPO iterations between decoder rounds (`reward_model_update_freq`) | `>= 1` |
/// | `decoder_updates` | 50 | decoder steps per round (`updates_per_step`) | any |
/// | `buffer_episodes` | 5 000 | episodes kept for the decoder | `>= 1` |
/// | `reward_scale` | 1 | multiplies relabelled rewards (LaRe: `T·N`, 75 for 3 agents and 25 steps) | `> 0` |
/// | `eval_every` | 25 000 | environment steps between evaluations | `>= 1` |
/// | `eval_episodes` | 20 | evaluation episodes (dense team return, greedy actions) | `>= 1` |
/// | `seed` | 0 | master seed | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MultiAgentLoopParams {
    /// Environment steps.
    pub total_steps: u64,
    /// PPO iterations between decoder rounds.
    pub decoder_every: u64,
    /// Decoder steps per round.
    pub decoder_updates: usize,
    /// Episodes kept.
    pub buffer_episodes: usize,
    /// Reward scale of relabelled rewards.
    pub reward_scale: f64,
    /// Evaluation period.
    pub eval_every: u64,
    /// Evaluation episodes.
    pub eval_episodes: usize,
    /// Master seed.
    pub seed: u64,
}

impl Default for MultiAgentLoopParams {
    fn default() -> Self {
        Self {
            total_steps: 2_000_000,
            decoder_every: 10,
            decoder_updates: 50,
            buffer_episodes: 5_000,
            reward_scale: 1.0,
            eval_every: 25_000,
            eval_episodes: 20,
            seed: 0,
        }
    }
}

impl Params for MultiAgentLoopParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("total_steps", self.total_steps),
            ("decoder_every", self.decoder_every),
            ("buffer_episodes", self.buffer_episodes as u64),
            ("eval_every", self.eval_every),
            ("eval_episodes", self.eval_episodes as u64),
        ] {
            if v == 0 {
                return Err(LareError::invalid(name, 0, "must be >= 1"));
            }
        }
        if !(self.reward_scale > 0.0 && self.reward_scale.is_finite()) {
            return Err(LareError::invalid("reward_scale", self.reward_scale, "must be finite and > 0"));
        }
        Ok(())
    }
}

fn stack(rows: &[Array1<f32>]) -> Result<Array2<f32>> {
    let views: Vec<_> = rows.iter().map(|r| r.view()).collect();
    ndarray::stack(Axis(0), &views).map_err(|e| LareError::shape("observations", "equal widths", e))
}

/// Mean dense team return of `episodes` greedy episodes of the shared `policy`.
///
/// # Errors
/// Environment and policy failures.
pub fn evaluate_multi_agent(
    env: &mut dyn MultiAgentEnv,
    policy: &dyn BatchPolicy,
    episodes: usize,
    rng: &mut dyn RngCore,
) -> Result<f64> {
    let mut total = 0.0;
    for _ in 0..episodes {
        let mut obs = env.reset(rng)?;
        loop {
            let a = policy.act_batch(stack(&obs)?.view(), ActMode::Deterministic, rng)?;
            let actions: Vec<Array1<f32>> = a.rows().into_iter().map(|r| r.to_owned()).collect();
            let step = env.step(&actions)?;
            total += f64::from(step.team_reward());
            if step.done() {
                break;
            }
            obs = step.obs;
        }
    }
    Ok(total / episodes.max(1) as f64)
}

/// Trains a PPO policy shared by the agents of `env` (its hidden rewards are the dense ones; the
/// learner sees only what `method` hands out), evaluating the dense team return on `eval_env`.
///
/// # Errors
/// Environment, agent and decoder failures; agents of different widths.
pub fn train_multi_agent_ppo(
    env: &mut dyn MultiAgentEnv,
    eval_env: &mut dyn MultiAgentEnv,
    ppo: &mut dyn OnlineAgent,
    method: &mut MultiAgentMethod,
    params: &Valid<MultiAgentLoopParams>,
    sink: &mut dyn MetricsSink,
    progress: &mut dyn FnMut(u64),
) -> Result<RunSummary> {
    let p = params.get();
    let n = env.n_agents();
    let seed = |name: &str| rl_core::rng_from_seed(rl_core::derive_seed_named(p.seed, name));
    let (mut env_rng, mut eval_rng) = (seed("env"), seed("eval"));
    let feat_dim = match method {
        MultiAgentMethod::Credit { encoder, .. } => encoder.dim(),
        _ => 0,
    };
    let mut buffer = MultiEpisodeBuffer::new(p.buffer_episodes, feat_dim)?;
    let mut summary = RunSummary::default();
    let mut obs = env.reset(&mut env_rng)?;
    let (mut ep_obs, mut ep_act, mut ep_next, mut ep_dense) = (vec![], vec![], vec![], vec![]);
    let mut iterations = 0u64;
    let mut team_return = 0.0f64;
    for t in 0..p.total_steps {
        let o = stack(&obs)?;
        let a = ppo.explore(o.view())?;
        let actions: Vec<Array1<f32>> = a.rows().into_iter().map(|r| r.to_owned()).collect();
        let step = env.step(&actions)?;
        let next = stack(&step.obs)?;
        let dense = Array1::from(step.rewards.clone());
        team_return += f64::from(step.team_reward());
        let done = step.done();
        let rewards: Array1<f32> = match method {
            MultiAgentMethod::Dense => dense.clone(),
            MultiAgentMethod::Episodic => {
                if done {
                    Array1::from_elem(n, (team_return / n as f64) as f32)
                } else {
                    Array1::zeros(n)
                }
            }
            MultiAgentMethod::Credit { encoder, decoder, .. } => {
                let f = encoder.encode_batch(o.view(), a.view(), next.view())?;
                let f3 = f.insert_axis(Axis(1));
                let r = decoder.relabel(&f3)?.remove_axis(Axis(1));
                r.mapv(|x| x * p.reward_scale as f32)
            }
        };
        let terminated: Vec<bool> = step.terminated.clone();
        let truncated: Vec<bool> = step.truncated.clone();
        let continue_obs = if done {
            let reset = env.reset(&mut env_rng)?;
            stack(&reset)?
        } else {
            next.clone()
        };
        let tr = VecTransition {
            obs: o.view(),
            action: a.view(),
            reward: rewards.view(),
            next_obs: next.view(),
            continue_obs: continue_obs.view(),
            terminated: &terminated,
            truncated: &truncated,
        };
        let learned = ppo.observe(&tr)?;
        ep_obs.push(o);
        ep_act.push(a);
        ep_next.push(next);
        ep_dense.push(dense);
        if done {
            let to3 = |v: &[Array2<f32>]| -> Result<ndarray::Array3<f32>> {
                let views: Vec<_> = v.iter().map(|x| x.view()).collect();
                let s = ndarray::stack(Axis(1), &views).map_err(|e| LareError::shape("episode", "equal widths", e))?;
                Ok(s)
            };
            let dv: Vec<_> = ep_dense.iter().map(|x| x.view()).collect();
            let dense_rewards =
                ndarray::stack(Axis(1), &dv).map_err(|e| LareError::shape("episode rewards", "equal widths", e))?;
            let episode = MultiEpisode {
                obs: to3(&ep_obs)?,
                actions: to3(&ep_act)?,
                next_obs: to3(&ep_next)?,
                dense_rewards,
                team_return: team_return as f32,
            };
            if let MultiAgentMethod::Credit { encoder, .. } = method {
                let f = episode.featurize(encoder.as_ref())?;
                buffer.push(episode, f)?;
            }
            summary.train_returns.push((t + 1, team_return));
            sink.log(t + 1, &Metrics::new().with("train/episode_return", team_return))?;
            ep_obs.clear();
            ep_act.clear();
            ep_next.clear();
            ep_dense.clear();
            team_return = 0.0;
            obs = continue_obs.rows().into_iter().map(|r| r.to_owned()).collect();
        } else {
            obs = step.obs;
        }
        if let Some(m) = learned {
            iterations += 1;
            let mut metrics = m.to_metrics()?;
            if let MultiAgentMethod::Credit { decoder, .. } = method {
                if iterations % p.decoder_every == 0 && !buffer.is_empty() {
                    for _ in 0..p.decoder_updates {
                        let dm = decoder.update(&buffer)?;
                        metrics.extend_prefixed("", &dm);
                    }
                }
            }
            sink.log(t + 1, &metrics)?;
        }
        if (t + 1) % p.eval_every == 0 || t + 1 == p.total_steps {
            let r = evaluate_multi_agent(eval_env, ppo.policy(), p.eval_episodes, &mut eval_rng)?;
            summary.evals.push((t + 1, r));
            summary.final_return = r;
            sink.log(t + 1, &Metrics::new().with("eval/return_mean", r))?;
        }
        progress(t + 1);
    }
    sink.flush()?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credit::CreditParams;
    use crate::encoder::{RawEncoder, RawFeatures};
    use rl_agents::{Ppo, PpoParams};
    use rl_core::MemorySink;
    use rl_envs::mpe::{SimpleSpread, SimpleSpreadParams};

    #[test]
    fn loop_params_reject_zero_and_bad_scale() {
        assert!(OffPolicyLoopParams::default().check().is_ok());
        assert!(OffPolicyLoopParams { batch_size: 0, ..Default::default() }.check().is_err());
        assert!(OffPolicyLoopParams { eval_episodes: 0, ..Default::default() }.check().is_err());
        assert!(MultiAgentLoopParams::default().check().is_ok());
        assert!(MultiAgentLoopParams { decoder_every: 0, ..Default::default() }.check().is_err());
        assert!(MultiAgentLoopParams { reward_scale: f64::NAN, ..Default::default() }.check().is_err());
        assert!(MultiAgentLoopParams { reward_scale: 0.0, ..Default::default() }.check().is_err());
    }

    fn spread() -> SimpleSpread {
        SimpleSpread::new(SimpleSpreadParams::default().n_agents(2).check().unwrap()).unwrap()
    }

    fn tiny_run(method: &mut MultiAgentMethod) -> (RunSummary, MemorySink) {
        tch::set_num_threads(1);
        let (mut env, mut eval) = (spread(), spread());
        let (os, acts) = (env.observation_spaces()[0].clone(), env.action_spaces()[0].clone());
        let pp = PpoParams::default().num_steps(25).num_minibatches(2).update_epochs(1).check().unwrap();
        let mut ppo = Ppo::new(pp, &os, &acts, tch::Device::Cpu, 0).unwrap();
        let params = MultiAgentLoopParams {
            total_steps: 100,
            decoder_every: 1,
            decoder_updates: 2,
            reward_scale: 50.0,
            eval_every: 50,
            eval_episodes: 1,
            ..Default::default()
        }
        .check()
        .unwrap();
        let mut sink = MemorySink::default();
        let s = train_multi_agent_ppo(&mut env, &mut eval, &mut ppo, method, &params, &mut sink, &mut |_| {}).unwrap();
        (s, sink)
    }

    #[test]
    fn multi_agent_loop_trains_the_credit_decoder_and_evaluates() {
        let od = spread().observation_spaces()[0].dim();
        let cp = CreditParams::default().batch_episodes(2).check().unwrap();
        let mut m = MultiAgentMethod::Credit {
            name: "rd".into(),
            encoder: Box::new(RawEncoder::new(od, 1, RawFeatures::NextState)),
            decoder: Box::new(AgentCreditDecoder::new(cp, od, tch::Device::Cpu).unwrap()),
        };
        let (s, sink) = tiny_run(&mut m);
        // 100 steps of 25-step episodes: 4 training episodes, evaluations at 50 and 100
        assert_eq!(s.train_returns.len(), 4);
        assert_eq!(s.evals.iter().map(|e| e.0).collect::<Vec<_>>(), vec![50, 100]);
        assert!(s.evals.iter().all(|e| e.1.is_finite() && e.1 < 0.0), "{:?}", s.evals);
        // four PPO iterations, each followed by a decoder round (the buffer is never empty then)
        // logged with the iteration's record (the last of its two decoder steps)
        assert_eq!(sink.series("reward_model/loss").len(), 4);
        assert!(sink.series("reward_model/loss").iter().all(|(_, l)| l.is_finite()));
    }

    #[test]
    fn multi_agent_episodic_and_dense_methods_run() {
        for mut m in [MultiAgentMethod::Episodic, MultiAgentMethod::Dense] {
            let (s, sink) = tiny_run(&mut m);
            assert_eq!(s.evals.len(), 2, "{}", m.name());
            assert!(sink.series("reward_model/loss").is_empty());
        }
    }
}
