//! Multi-agent particle environments (MPE), step for step with PettingZoo's successor `mpe2`
//! 1.1.1 (parallel API), behind [`MultiAgentEnv`].
//!
//! | environment | mpe2 id | agents | observation (per agent) |
//! |---|---|---|---|
//! | [`SimpleSpread`] | `simple_spread_v3` | `agent_0..N` (cooperative navigation) | own vel, pos, landmark offsets, other agents' offsets, comm (zeros) |
//! | [`SimpleTag`] | `simple_tag_v3` | `adversary_0..` (predators), `agent_0..` (prey) | own vel, pos, obstacle offsets, other agents' offsets, prey velocities |
//! | [`SimpleAdversary`] | `simple_adversary_v3` | `adversary_0`, `agent_0..N` (physical deception) | good agents: goal offset; all: landmark and agent offsets |
//! | [`SimpleReference`] | `simple_reference_v3` | `agent_0`, `agent_1` (speaking, `dim_c` 10) | own vel, landmark offsets, own goal's colour, the other's message |
//! | [`SimpleSpeakerListener`] | `simple_speaker_listener_v4` | `speaker_0` (fixed, speaking, `dim_c` 3), `listener_0` | speaker: goal colour; listener: own vel, landmark offsets, the speaker's message |
//! | [`SimpleCrypto`] | `simple_crypto_v3` | `eve_0`, `bob_0`, `alice_0` (fixed, speaking, `dim_c` 4) | Alice: goal, key; Bob: key, Alice's message; Eve: Alice's message |
//! | [`SimpleWorldComm`] | `simple_world_comm_v3` | `leadadversary_0` (speaking, `dim_c` 4), `adversary_0..`, `agent_0..` | own vel, pos, landmark/food/forest offsets, other agents' offsets (hidden by forests), prey velocities, in-forest flags; predators: the leader's message |
//! | [`SimplePush`] | `simple_push_v3` | `adversary_0`, `agent_0` (keep-away) | own vel; good agent: goal offset, own colour; all: landmark offsets; good agent: landmark colours; other agent's offset |
//!
//! Actions are PettingZoo's: discrete (a one-element vector holding 0 no-op, 1 −x, 2 +x, 3 −y,
//! 4 +y) or, with `continuous_actions`, `[0, 1]^5` where the force is
//! `(a[2] − a[1], a[4] − a[3])` (values outside `[0, 1]` are clipped, like mpe2's
//! `ClipOutOfBoundsWrapper`), scaled by the agent's acceleration (5 unless the scenario sets
//! one). Agents that speak (scenarios with a communication channel of `dim_c` values) have
//! mpe2's combined layout: discrete `a` is movement `a % 5` and word `a / 5` (one-hot message),
//! or only the word for agents that cannot move; continuous actions are the movement part (if
//! the agent moves) followed by `dim_c` message values (clipped to `[0, 1]`), which become the
//! agent's communication state after the step. Episodes are truncated after `max_cycles` (25)
//! steps.
//!
//! Physics (mpe2 `World.step`): contact forces `100·k·softplus(−(d − d_min)/k)` along the line
//! of centres (`k` = 0.001) between colliding entities, then `x += v·dt`,
//! `v ← 0.75 v + F·dt`, speed caps. [`MpeIntegrator::VelocityFirst`] selects the original
//! OpenAI MPE order (used by LaRe's `multiagent-particle-envs`).
//!
//! Resets with [`NumpyRng::new(seed)`](crate::rng::NumpyRng) equal mpe2's `reset(seed=seed)`.
//! The golden test (`tests/golden_mpe.rs`) matches observations and rewards to 1e-6 (spread, tag,
//! adversary) and bit for bit (push, reference, speaker-listener, crypto, world comm: float32
//! observations equal, rewards equal to mpe2's float64 rounded to float32).

mod scenarios;
mod world;

use ndarray::Array1;
use rand::RngCore;
use rl_core::{RlCoreError, Space, Valid};
use serde::{Deserialize, Serialize};

pub use scenarios::{
    Adversary, CommParams, Crypto, Push, Reference, Scenario, SimpleAdversaryParams, SimplePushParams,
    SimpleReferenceParams, SimpleSpreadParams, SimpleTagParams, SimpleWorldCommParams, SpeakerListener, Spread, Tag,
    WorldComm,
};
pub use world::{Entity, MpeIntegrator, MpeWorldParams, World};

use crate::common::{snapshot_finite, EpisodeClock};
use crate::error::{EnvError, Result};
use crate::traits::{MultiAgentEnv, MultiStep, Snapshot};

/// A multi-agent particle environment running scenario `S`; see the module docs.
#[derive(Debug, Clone)]
pub struct Mpe<S: Scenario> {
    scenario: S,
    world: World,
    names: Vec<String>,
    obs_spaces: Vec<Space>,
    act_spaces: Vec<Space>,
    clock: EpisodeClock,
}

/// Cooperative navigation (`simple_spread_v3`).
pub type SimpleSpread = Mpe<Spread>;
/// Predator-prey (`simple_tag_v3`).
pub type SimpleTag = Mpe<Tag>;
/// Physical deception (`simple_adversary_v3`).
pub type SimpleAdversary = Mpe<Adversary>;
/// Keep-away (`simple_push_v3`).
pub type SimplePush = Mpe<Push>;
/// Two agents guiding each other to landmarks by communication (`simple_reference_v3`).
pub type SimpleReference = Mpe<Reference>;
/// Cooperative communication (`simple_speaker_listener_v4`).
pub type SimpleSpeakerListener = Mpe<SpeakerListener>;
/// Covert communication (`simple_crypto_v3`).
pub type SimpleCrypto = Mpe<Crypto>;
/// Predator-prey with a speaking leader, food and forests (`simple_world_comm_v3`).
pub type SimpleWorldComm = Mpe<WorldComm>;

impl SimpleSpread {
    /// Simple spread with `params`.
    ///
    /// ```
    /// use rl_core::Params;
    /// use rl_envs::mpe::{SimpleSpread, SimpleSpreadParams};
    /// use rl_envs::rng::NumpyRng;
    /// use rl_envs::MultiAgentEnv;
    /// let mut env = SimpleSpread::new(SimpleSpreadParams::default().check()?)?;
    /// let obs = env.reset(&mut NumpyRng::new(0))?; // mpe2: parallel_env().reset(seed=0)
    /// assert_eq!((obs.len(), obs[0].len()), (3, 18));
    /// let step = env.step(&vec![ndarray::array![2.0]; 3])?; // everyone moves +x
    /// assert_eq!(step.rewards.len(), 3);
    /// # Ok::<(), rl_envs::EnvError>(())
    /// ```
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<SimpleSpreadParams>) -> Result<Self> {
        Mpe::build(Spread { p: params.into_inner() })
    }
}

impl SimpleTag {
    /// Simple tag with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<SimpleTagParams>) -> Result<Self> {
        Mpe::build(Tag { p: params.into_inner() })
    }
}

impl SimpleAdversary {
    /// Simple adversary with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<SimpleAdversaryParams>) -> Result<Self> {
        Mpe::build(Adversary { p: params.into_inner(), goal: 0 })
    }
}

impl SimplePush {
    /// Simple push with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<SimplePushParams>) -> Result<Self> {
        Mpe::build(Push { p: params.into_inner(), goal: 0 })
    }
}

impl SimpleReference {
    /// Simple reference with `params`.
    ///
    /// ```
    /// use rl_core::Params;
    /// use rl_envs::mpe::{SimpleReference, SimpleReferenceParams};
    /// use rl_envs::rng::NumpyRng;
    /// use rl_envs::MultiAgentEnv;
    /// let mut env = SimpleReference::new(SimpleReferenceParams::default().check()?)?;
    /// env.reset(&mut NumpyRng::new(0))?;
    /// // discrete action a: movement a % 5, word a / 5 (of 10); agent_0 says word 3
    /// let step = env.step(&[ndarray::array![17.0], ndarray::array![0.0]])?;
    /// assert_eq!(step.obs[1].len(), 21);
    /// assert_eq!(step.obs[1][11 + 3], 1.0); // agent_1 hears it
    /// # Ok::<(), rl_envs::EnvError>(())
    /// ```
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<SimpleReferenceParams>) -> Result<Self> {
        Mpe::build(Reference { p: params.into_inner(), goals: [0, 0] })
    }
}

impl SimpleSpeakerListener {
    /// Simple speaker-listener with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<CommParams>) -> Result<Self> {
        Mpe::build(SpeakerListener { p: params.into_inner(), goal: 0 })
    }
}

impl SimpleCrypto {
    /// Simple crypto with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<CommParams>) -> Result<Self> {
        Mpe::build(Crypto { p: params.into_inner(), goal: 0, key: 0 })
    }
}

impl SimpleWorldComm {
    /// Simple world comm with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<SimpleWorldCommParams>) -> Result<Self> {
        Mpe::build(WorldComm { p: params.into_inner() })
    }
}

/// The state of an [`Mpe`] environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MpeState {
    /// Positions of every entity (agents, then landmarks).
    pub pos: Vec<[f64; 2]>,
    /// Velocities of every entity.
    pub vel: Vec<[f64; 2]>,
    /// Every agent's communication state (empty, or absent in older snapshots, for worlds
    /// without a communication channel).
    #[serde(default)]
    pub comm: Vec<Vec<f64>>,
    /// Scenario state (the adversary and push scenarios' goal landmark).
    pub scenario: Option<usize>,
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
}

impl<S: Scenario> Mpe<S> {
    /// An environment running a custom `scenario`.
    ///
    /// # Errors
    /// None (kept fallible for the shape of every constructor).
    pub fn from_scenario(scenario: S) -> Result<Self> {
        Self::build(scenario)
    }

    fn build(mut scenario: S) -> Result<Self> {
        let (mut world, names) = scenario.make_world();
        // observation sizes do not depend on the state: measure them on a zero reset
        scenario.reset(&mut world, &mut rl_core::rng_from_seed(0));
        let obs_spaces = (0..world.n_agents)
            .map(|i| Space::symmetric(scenario.observation(i, &world).len(), f32::INFINITY))
            .collect::<rl_core::Result<Vec<Space>>>()?;
        let act_spaces = (0..world.n_agents)
            .map(|i| action_space(&world.entities[i], world.dim_c, scenario.continuous_actions()))
            .collect::<Result<Vec<Space>>>()?;
        Ok(Self { scenario, world, names, obs_spaces, act_spaces, clock: EpisodeClock::default() })
    }

    /// The scenario.
    pub fn scenario(&self) -> &S {
        &self.scenario
    }

    /// Positions of every entity (agents first, then landmarks).
    pub fn positions(&self) -> &[[f64; 2]] {
        &self.world.pos
    }

    /// Velocities of every entity.
    pub fn velocities(&self) -> &[[f64; 2]] {
        &self.world.vel
    }

    /// The global state: every agent's observation, concatenated (PettingZoo's `state()`).
    pub fn global_state(&self) -> Array1<f32> {
        (0..self.world.n_agents).flat_map(|i| self.scenario.observation(i, &self.world)).map(|v| v as f32).collect()
    }

    fn observations(&self) -> Vec<Array1<f32>> {
        (0..self.world.n_agents)
            .map(|i| self.scenario.observation(i, &self.world).into_iter().map(|v| v as f32).collect())
            .collect()
    }

    /// Agent `i`'s action (checked): its force, scaled by its sensitivity (zero for a fixed
    /// agent), and its communication vector (`None` for a silent agent).
    fn parse_action(&self, i: usize, action: &Array1<f32>) -> Result<([f64; 2], Option<Vec<f64>>)> {
        let what = format!("action of {}", self.names[i]);
        let space = &self.act_spaces[i];
        let entity = &self.world.entities[i];
        let dim_c = self.world.dim_c;
        let (direction, comm) = if self.scenario.continuous_actions() {
            crate::common::check_box_action(space, action.view()).map_err(|e| relabel(e, &what))?;
            let a: Vec<f32> = action.iter().map(|v| v.clamp(0.0, 1.0)).collect();
            let (direction, rest) = if entity.movable {
                ([f64::from(a[2] - a[1]), f64::from(a[4] - a[3])], &a[5..])
            } else {
                ([0.0, 0.0], &a[..])
            };
            (direction, (!entity.silent).then(|| rest.iter().map(|&v| f64::from(v)).collect()))
        } else {
            space.check(&what, action.view())?;
            let a = action[0] as usize;
            let (mv, word) = if entity.movable { (a % 5, a / 5) } else { (0, a) };
            let direction = match mv {
                1 => [-1.0, 0.0],
                2 => [1.0, 0.0],
                3 => [0.0, -1.0],
                4 => [0.0, 1.0],
                _ => [0.0, 0.0],
            };
            let comm = (!entity.silent).then(|| {
                let mut c = vec![0.0; dim_c];
                // `word < dim_c`: the space check bounds `a`
                if let Some(v) = c.get_mut(word) {
                    *v = 1.0;
                }
                c
            });
            (direction, comm)
        };
        let sensitivity = entity.accel.unwrap_or(5.0);
        Ok(([direction[0] * sensitivity, direction[1] * sensitivity], comm))
    }
}

/// mpe2's action space of an agent: discrete `(5 if movable else 1)·(dim_c if it speaks else 1)`
/// choices, or continuous `[0, 1]^((5 if movable) + (dim_c if it speaks))`.
fn action_space(e: &Entity, dim_c: usize, continuous: bool) -> Result<Space> {
    let speaks = !e.silent;
    if continuous {
        let n = if e.movable { 5 } else { 0 } + if speaks { dim_c } else { 0 };
        Ok(Space::boxed(Array1::zeros(n), Array1::ones(n))?)
    } else {
        let n = if e.movable { 5 } else { 1 } * if speaks { dim_c } else { 1 };
        Ok(Space::discrete(n)?)
    }
}

fn relabel(e: RlCoreError, what: &str) -> EnvError {
    match e {
        RlCoreError::ShapeMismatch { expected, got, .. } => EnvError::Shape { what: what.to_owned(), expected, got },
        RlCoreError::NonFinite { index, value, .. } => EnvError::NonFinite { what: what.to_owned(), index, value },
        other => other.into(),
    }
}

impl<S: Scenario> MultiAgentEnv for Mpe<S> {
    fn n_agents(&self) -> usize {
        self.world.n_agents
    }

    fn agent_names(&self) -> &[String] {
        &self.names
    }

    fn observation_spaces(&self) -> &[Space] {
        &self.obs_spaces
    }

    fn action_spaces(&self) -> &[Space] {
        &self.act_spaces
    }

    fn reset(&mut self, rng: &mut dyn RngCore) -> Result<Vec<Array1<f32>>> {
        self.world.clear_comm();
        self.scenario.reset(&mut self.world, rng);
        self.clock.start();
        Ok(self.observations())
    }

    fn step(&mut self, actions: &[Array1<f32>]) -> Result<MultiStep> {
        self.clock.guard()?;
        let n = self.world.n_agents;
        if actions.len() != n {
            return Err(EnvError::Shape {
                what: "actions (one per agent)".into(),
                expected: format!("{n}"),
                got: format!("{}", actions.len()),
            });
        }
        let parsed = actions.iter().enumerate().map(|(i, a)| self.parse_action(i, a)).collect::<Result<Vec<_>>>()?;
        let forces: Vec<[f64; 2]> = parsed.iter().map(|(f, _)| *f).collect();
        self.world.step(&forces);
        // mpe2's `update_agent_state`: the communication state is the action's (no noise);
        // `World::comm` is public, so a custom scenario may have resized it
        self.world.comm.resize(n, Vec::new());
        for (i, (_, comm)) in parsed.into_iter().enumerate() {
            self.world.comm[i] = comm.unwrap_or_else(|| vec![0.0; self.world.dim_c]);
        }
        let rewards = (0..n).map(|i| self.scenario.reward(i, &self.world) as f32).collect();
        // mpe2: the time limit is checked before termination (a step may only be one of both)
        let at_limit = self.clock.steps + 1 >= self.scenario.max_cycles();
        let terminated = !at_limit && self.scenario.is_terminal(&self.world);
        let truncated = self.clock.tick(terminated, self.scenario.max_cycles());
        Ok(MultiStep {
            obs: self.observations(),
            rewards,
            terminated: vec![terminated; n],
            truncated: vec![truncated; n],
        })
    }
}

impl<S: Scenario> Snapshot for Mpe<S> {
    type State = MpeState;

    fn snapshot(&self) -> MpeState {
        MpeState {
            pos: self.world.pos.clone(),
            vel: self.world.vel.clone(),
            comm: if self.world.dim_c == 0 { Vec::new() } else { self.world.comm.clone() },
            scenario: self.scenario.state(),
            clock: self.clock,
        }
    }

    fn restore(&mut self, state: &MpeState) -> Result<()> {
        let n = self.world.entities.len();
        if state.pos.len() != n || state.vel.len() != n {
            return Err(EnvError::snapshot(format!(
                "{} positions / {} velocities for a world of {n} entities",
                state.pos.len(),
                state.vel.len()
            )));
        }
        for (p, v) in state.pos.iter().zip(&state.vel) {
            snapshot_finite("entity state", &[p[0], p[1], v[0], v[1]])?;
        }
        let (n_agents, dim_c) = (self.world.n_agents, self.world.dim_c);
        let comm = if dim_c == 0 && state.comm.iter().all(Vec::is_empty) {
            vec![Vec::new(); n_agents]
        } else {
            if state.comm.len() != n_agents || state.comm.iter().any(|c| c.len() != dim_c) {
                return Err(EnvError::snapshot(format!(
                    "communication states {:?} for {n_agents} agents of dim_c {dim_c}",
                    state.comm.iter().map(Vec::len).collect::<Vec<_>>()
                )));
            }
            for c in &state.comm {
                snapshot_finite("communication state", c)?;
            }
            state.comm.clone()
        };
        let mut scenario = self.scenario.clone();
        scenario.set_state(state.scenario)?;
        self.scenario = scenario;
        self.world.pos.clone_from(&state.pos);
        self.world.vel.clone_from(&state.vel);
        self.world.comm = comm;
        self.clock = state.clock;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::NumpyRng;
    use ndarray::array;
    use rl_core::Params;

    #[test]
    fn spaces_and_names_match_mpe2() {
        let e = SimpleTag::new(SimpleTagParams::default().check().unwrap()).unwrap();
        assert_eq!(e.agent_names(), ["adversary_0", "adversary_1", "adversary_2", "agent_0"]);
        // predators: 4 + 2·2 obstacles + 3·2 others + 1·2 prey velocity = 16; prey: 14
        let dims: Vec<usize> = e.observation_spaces().iter().map(Space::dim).collect();
        assert_eq!(dims, [16, 16, 16, 14]);
        let e = SimpleAdversary::new(SimpleAdversaryParams::default().check().unwrap()).unwrap();
        let dims: Vec<usize> = e.observation_spaces().iter().map(Space::dim).collect();
        assert_eq!(dims, [8, 10, 10]);
        let e = SimpleSpread::new(SimpleSpreadParams::default().continuous_actions(true).check().unwrap()).unwrap();
        assert_eq!(e.action_spaces()[0].dim(), 5);
        let e = SimplePush::new(SimplePushParams::default().check().unwrap()).unwrap();
        assert_eq!(e.agent_names(), ["adversary_0", "agent_0"]);
        let dims: Vec<usize> = e.observation_spaces().iter().map(Space::dim).collect();
        assert_eq!(dims, [8, 19]);
    }

    #[test]
    fn bad_actions_are_typed_errors_naming_the_agent() {
        let mut e = SimpleSpread::new(SimpleSpreadParams::default().check().unwrap()).unwrap();
        assert!(matches!(
            e.step(&[array![0.0], array![0.0], array![0.0]]),
            Err(EnvError::Core(RlCoreError::NeedsReset))
        ));
        e.reset(&mut NumpyRng::new(0)).unwrap();
        assert!(matches!(e.step(&[array![0.0], array![0.0]]), Err(EnvError::Shape { .. })));
        let err = e.step(&[array![0.0], array![7.0], array![0.0]]).unwrap_err();
        assert!(err.to_string().contains("agent_1"), "{err}");
        let mut c = SimpleSpread::new(SimpleSpreadParams::default().continuous_actions(true).check().unwrap()).unwrap();
        c.reset(&mut NumpyRng::new(0)).unwrap();
        let a = array![0.0, 0.0, 1.0, 0.0, 0.0];
        let err = c.step(&[a.clone(), array![0.0, f32::NAN, 0.0, 0.0, 0.0], a.clone()]).unwrap_err();
        assert!(matches!(err, EnvError::NonFinite { index: 1, .. }), "{err}");
        assert!(matches!(c.step(&[a.clone(), array![0.0], a]), Err(EnvError::Shape { .. })));
    }

    #[test]
    fn communication_action_spaces_match_mpe2() {
        let dims = |e: &dyn MultiAgentEnv| -> Vec<usize> { e.action_spaces().iter().map(Space::dim).collect() };
        let disc =
            |e: &dyn MultiAgentEnv| -> Vec<usize> { e.action_spaces().iter().map(|s| s.n().unwrap_or(0)).collect() };
        let p = CommParams::default().check().unwrap();
        let pc = CommParams::default().continuous_actions(true).check().unwrap();
        let r = SimpleReference::new(SimpleReferenceParams::default().check().unwrap()).unwrap();
        let rc =
            SimpleReference::new(SimpleReferenceParams::default().continuous_actions(true).check().unwrap()).unwrap();
        assert_eq!((disc(&r), dims(&rc)), (vec![50, 50], vec![15, 15]));
        let sl = SimpleSpeakerListener::new(p.clone()).unwrap();
        let slc = SimpleSpeakerListener::new(pc.clone()).unwrap();
        assert_eq!((disc(&sl), dims(&slc)), (vec![3, 5], vec![3, 5]));
        let c = SimpleCrypto::new(p).unwrap();
        let cc = SimpleCrypto::new(pc).unwrap();
        assert_eq!(c.agent_names(), ["eve_0", "bob_0", "alice_0"]);
        assert_eq!((disc(&c), dims(&cc)), (vec![4, 4, 4], vec![4, 4, 4]));
        let obs: Vec<usize> = cc.observation_spaces().iter().map(Space::dim).collect();
        assert_eq!(obs, [4, 8, 8]);
        let w = SimpleWorldComm::new(SimpleWorldCommParams::default().check().unwrap()).unwrap();
        let wc =
            SimpleWorldComm::new(SimpleWorldCommParams::default().continuous_actions(true).check().unwrap()).unwrap();
        assert_eq!(w.agent_names()[..2], ["leadadversary_0", "adversary_0"]);
        assert_eq!((disc(&w), dims(&wc)), (vec![20, 5, 5, 5, 5, 5], vec![9, 5, 5, 5, 5, 5]));
        let obs: Vec<usize> = w.observation_spaces().iter().map(Space::dim).collect();
        assert_eq!(obs, [34, 34, 34, 34, 28, 28]);
        assert!(SimpleWorldCommParams::default().num_food(0).check().is_err());
    }

    #[test]
    fn messages_are_heard_and_survive_snapshots() {
        let mut e = SimpleSpeakerListener::new(CommParams::default().check().unwrap()).unwrap();
        e.reset(&mut NumpyRng::new(3)).unwrap();
        // the speaker says word 2; the listener hears it after the step (obs[1][8..11])
        let s = e.step(&[array![2.0], array![0.0]]).unwrap();
        assert_eq!(s.obs[1].as_slice().unwrap()[8..], [0.0, 0.0, 1.0]);
        assert!(e.step(&[array![3.0], array![0.0]]).is_err(), "word 3 of 3");
        let snap = e.snapshot();
        let s2 = e.step(&[array![0.0], array![4.0]]).unwrap();
        assert_eq!(s2.obs[1].as_slice().unwrap()[8..], [1.0, 0.0, 0.0]);
        e.restore(&snap).unwrap();
        assert_eq!(e.world.comm[0], [0.0, 0.0, 1.0]);
        let mut bad = snap.clone();
        bad.comm[0].pop();
        assert!(matches!(e.restore(&bad), Err(EnvError::BadSnapshot { .. })));
        let mut bad = snap;
        bad.scenario = Some(3);
        assert!(e.restore(&bad).is_err());
    }

    #[test]
    fn truncates_after_max_cycles() {
        let mut e = SimpleAdversary::new(SimpleAdversaryParams::default().max_cycles(3).check().unwrap()).unwrap();
        e.reset(&mut NumpyRng::new(1)).unwrap();
        let acts = vec![array![4.0]; 3];
        assert!(!e.step(&acts).unwrap().done());
        assert!(!e.step(&acts).unwrap().done());
        let last = e.step(&acts).unwrap();
        assert!(last.done() && last.truncated.iter().all(|&t| t));
        assert!(e.step(&acts).is_err());
    }
}
