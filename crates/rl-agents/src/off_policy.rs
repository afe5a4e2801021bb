//! The online loop of an off-policy [`Agent`]: replay buffer, random warm-up, update schedule.

use std::path::Path;
use tch::Device;

use ndarray::{Array2, ArrayView2};
use rl_core::{Params, SeededRng, Space, Valid};
use serde::{Deserialize, Serialize};

use crate::agent::{Agent, BatchLearner, BatchPolicy, OnlineAgent, UpdateMetrics, VecTransition};
use crate::buffer::{BufferMeta, ReplayBuffer, ReplayBufferParams};
use crate::error::{check, AgentError, Result};

/// Parameters of [`OffPolicy`].
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `buffer` | capacity 1e6, 1-step | the replay buffer ([`ReplayBufferParams`]) | | SAC/TD3 papers |
/// | `batch_size` | 256 | transitions per update | `>= 1` | SAC Table 1, TD3 code |
/// | `random_steps` | 5,000 | environment steps with uniform random actions | `>= 0` | CleanRL SAC / CORL `learning_starts` (TD3 code: 25,000, see [`OffPolicyParams::td3`]) |
/// | `learning_starts` | 5,000 | environment steps before the first update | `>= 1` | as `random_steps` |
/// | `update_every` | 1 | environment steps (transitions) per round of updates | `>= 1` | papers |
/// | `updates_per_round` | 1 | gradient updates per round | `>= 1` | papers |
///
/// Environment steps count transitions: a batch of `n` environments adds `n` per step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffPolicyParams {
    /// Replay buffer.
    pub buffer: ReplayBufferParams,
    /// Batch size.
    pub batch_size: usize,
    /// Uniform random actions for this many environment steps.
    pub random_steps: u64,
    /// First update after this many environment steps.
    pub learning_starts: u64,
    /// Environment steps per round of updates.
    pub update_every: u64,
    /// Updates per round.
    pub updates_per_round: usize,
}

impl Default for OffPolicyParams {
    fn default() -> Self {
        Self {
            buffer: ReplayBufferParams::default(),
            batch_size: 256,
            random_steps: 5_000,
            learning_starts: 5_000,
            update_every: 1,
            updates_per_round: 1,
        }
    }
}

crate::sac::setters!(OffPolicyParams {
    buffer: ReplayBufferParams,
    batch_size: usize,
    random_steps: u64,
    learning_starts: u64,
    update_every: u64,
    updates_per_round: usize,
});

impl OffPolicyParams {
    /// The TD3 authors' schedule (`start_timesteps` = 25,000 random steps; `main.py`).
    pub fn td3() -> Self {
        Self { random_steps: 25_000, learning_starts: 25_000, ..Self::default() }
    }
}

impl Params for OffPolicyParams {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        self.buffer.validate().map_err(|e| e.prefixed("buffer"))?;
        check::at_least("batch_size", self.batch_size, 1)?;
        check::at_least("learning_starts", self.learning_starts as usize, 1)?;
        check::at_least("update_every", self.update_every as usize, 1)?;
        check::at_least("updates_per_round", self.updates_per_round, 1)?;
        Ok(())
    }
}

/// An off-policy [`Agent`] (SAC, TD3, or an offline algorithm being fine-tuned) as an
/// [`OnlineAgent`]: it acts uniformly at random for `random_steps` environment steps, then
/// with [`Agent::explore`]; every observed transition goes into its [`ReplayBuffer`] (the
/// environment's index is the buffer stream, so `n`-step returns follow each environment);
/// from `learning_starts` on, every `update_every` environment steps it samples
/// `updates_per_round` batches and updates the agent.
///
/// Time-limit truncations are stored as non-terminal (`timeout` = 1) with the true last
/// observation, so targets bootstrap from it.
#[derive(Debug)]
pub struct OffPolicy<A> {
    params: Valid<OffPolicyParams>,
    agent: A,
    buffer: ReplayBuffer,
    action_space: Space,
    obs_dim: usize,
    rng: SeededRng,
    env_steps: u64,
    due: u64,
    pending: Option<usize>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffPolicyState {
    params: OffPolicyParams,
    env_steps: u64,
    due: u64,
    pending: Option<usize>,
    rng: SeededRng,
    buffer: BufferMeta,
}

const KIND: &str = "rl_agents.off_policy";
const FORMAT: u32 = 1;
/// The checkpoint unit of an off-policy learner: parts `agent` (at its update count) and
/// `replay` (at the environment step count), committed together.
const UNIT_KIND: &str = "rl_agents.off_policy_unit";
const UNIT_FORMAT: u32 = 1;

impl<A: BatchLearner> OffPolicy<A> {
    /// Wraps `agent`; `seed` seeds the random warm-up actions and the batch sampling
    /// (`derive_seed_named(seed, "off-policy")`).
    ///
    /// # Errors
    /// [`AgentError::Shape`] when the agent's policy widths differ from the spaces.
    pub fn new(
        params: Valid<OffPolicyParams>,
        agent: A,
        obs_space: &Space,
        action_space: &Space,
        seed: u64,
    ) -> Result<Self> {
        let (o, a) = (obs_space.dim(), action_space.dim());
        if agent.policy().obs_dim() != o || agent.policy().act_dim() != a {
            return Err(AgentError::shape(
                "agent widths",
                format!("obs {o}, action {a}"),
                format!("obs {}, action {}", agent.policy().obs_dim(), agent.policy().act_dim()),
            ));
        }
        let buffer = ReplayBuffer::new(params.buffer.clone().check()?, o, a)?;
        Ok(Self {
            params,
            agent,
            buffer,
            action_space: action_space.clone(),
            obs_dim: o,
            rng: rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "off-policy")),
            env_steps: 0,
            due: 0,
            pending: None,
        })
    }

    /// The agent.
    pub fn agent(&self) -> &A {
        &self.agent
    }

    /// The agent, mutably.
    pub fn agent_mut(&mut self) -> &mut A {
        &mut self.agent
    }

    /// Unwraps the agent.
    pub fn into_agent(self) -> A {
        self.agent
    }

    /// The replay buffer.
    pub fn buffer(&self) -> &ReplayBuffer {
        &self.buffer
    }

    /// The parameters.
    pub fn params(&self) -> &OffPolicyParams {
        &self.params
    }

    /// Samples a batch and updates the agent once (also usable outside the schedule).
    ///
    /// # Errors
    /// [`AgentError::Empty`] for an empty buffer; update failures.
    pub fn update_once(&mut self) -> Result<UpdateMetrics> {
        let batch = self.buffer.sample(self.params.batch_size, self.agent.device(), &mut self.rng)?;
        self.agent.update(&batch)
    }
}

impl<A: BatchLearner> Agent for OffPolicy<A> {
    fn device(&self) -> Device {
        self.agent.device()
    }

    fn name(&self) -> &'static str {
        self.agent.name()
    }

    fn explore(&mut self, obs: ArrayView2<'_, f32>) -> Result<Array2<f32>> {
        if obs.ncols() != self.obs_dim || obs.nrows() == 0 {
            return Err(AgentError::shape("obs", format!("[n >= 1, {}]", self.obs_dim), format!("{:?}", obs.shape())));
        }
        let actions = if self.env_steps < self.params.random_steps {
            rl_core::check_finite("obs", obs.iter())?;
            let mut a = Array2::zeros((obs.nrows(), self.action_space.dim()));
            for mut row in a.rows_mut() {
                row.assign(&self.action_space.sample(&mut self.rng));
            }
            a
        } else {
            self.agent.explore(obs)?
        };
        self.pending = Some(obs.nrows());
        Ok(actions)
    }

    fn policy(&self) -> &dyn BatchPolicy {
        self.agent.policy()
    }

    fn updates(&self) -> u64 {
        self.agent.updates()
    }

    /// Writes the checkpoint unit `dir` ([`rl_nn::checkpoint::UnitWriter`]): part `agent`
    /// ([`Agent::save`], at its update count) and part `replay` (buffer, schedule, generator,
    /// at the environment step count), committed together.
    fn save(&self, dir: &Path) -> Result<()> {
        let mut unit = rl_nn::checkpoint::UnitWriter::new(dir, UNIT_KIND, UNIT_FORMAT)?;
        self.agent.save(&unit.part("agent", self.agent.updates())?)?;
        let state = OffPolicyState {
            params: self.params.get().clone(),
            env_steps: self.env_steps,
            due: self.due,
            pending: self.pending,
            rng: self.rng.clone(),
            buffer: self.buffer.meta(),
        };
        let replay = unit.part("replay", self.env_steps)?;
        rl_nn::checkpoint::save_dir(replay, KIND, FORMAT, &state, &self.buffer.state_tensors("buffer.")?)?;
        unit.commit()?;
        Ok(())
    }

    /// Restores what [`Agent::save`] wrote: the unit is verified (every file as its
    /// manifest recorded it), the replay part's step count checked, everything checked, then
    /// applied; the agent's update count is checked against the manifest last.
    fn load(&mut self, dir: &Path) -> Result<()> {
        let unit = rl_nn::checkpoint::open_unit(dir, UNIT_KIND, UNIT_FORMAT)?;
        let ck = rl_nn::checkpoint::load_dir::<OffPolicyState>(unit.part("replay")?, KIND, FORMAT)?;
        unit.check_step("replay", ck.state.env_steps)?;
        AgentError::ensure_same(&ck.path, "params", &ck.state.params, self.params.get())?;
        let buffer = ReplayBuffer::restore(ck.state.buffer, &ck.tensors, "buffer.", &ck.path)?;
        if buffer.obs_dim() != self.obs_dim || buffer.act_dim() != self.action_space.dim() {
            return Err(AgentError::Corrupt { path: ck.path, reason: "buffer widths differ".into() });
        }
        self.agent.load(&unit.part("agent")?)?;
        unit.check_step("agent", self.agent.updates())?;
        self.buffer = buffer;
        self.env_steps = ck.state.env_steps;
        self.due = ck.state.due;
        self.pending = ck.state.pending;
        self.rng = ck.state.rng;
        Ok(())
    }
}

impl<A: BatchLearner> OnlineAgent for OffPolicy<A> {
    fn observe(&mut self, step: &VecTransition<'_>) -> Result<Option<UpdateMetrics>> {
        match self.pending {
            Some(n) if n == step.len() => {}
            other => {
                return Err(AgentError::Protocol(format!(
                    "observe of {} environments after explore of {other:?}",
                    step.len()
                )))
            }
        }
        step.check(self.obs_dim, self.action_space.dim())?;
        rl_core::check_finite("action", step.action.iter())?;
        rl_core::check_finite("obs", step.obs.iter())?;
        for i in 0..step.len() {
            let terminal = step.terminated[i];
            let timeout = step.truncated[i] && !terminal;
            self.buffer.push(
                step.obs.row(i),
                step.action.row(i),
                step.reward[i],
                step.next_obs.row(i),
                terminal,
                timeout,
                i as u32,
            )?;
        }
        self.pending = None;
        let n = step.len() as u64;
        self.env_steps += n;
        if self.env_steps < self.params.learning_starts {
            return Ok(None);
        }
        self.due += n;
        let mut last = None;
        while self.due >= self.params.update_every {
            self.due -= self.params.update_every;
            for _ in 0..self.params.updates_per_round {
                last = Some(self.update_once()?);
            }
        }
        Ok(last)
    }

    fn env_steps(&self) -> u64 {
        self.env_steps
    }
}
