//! The scenarios: simple spread, tag, adversary, push, reference, speaker-listener, crypto, world comm
//! (mpe2 1.1.1).

use rand::RngCore;
use rl_core::Params;
use serde::{Deserialize, Serialize};

use crate::error::{EnvError, Result};
use crate::mpe::world::{Entity, MpeWorldParams, World};
use crate::rng::{integers, uniform};

/// What a scenario decides: the world, resets, rewards, observations, termination. Implement
/// it for a custom scenario (e.g. LaRe's triangle-area task) and run it with
/// [`Mpe::from_scenario`](crate::mpe::Mpe::from_scenario).
pub trait Scenario: std::fmt::Debug + Clone {
    /// Builds the world (agents first, then landmarks) and the agent names.
    fn make_world(&self) -> (World, Vec<String>);
    /// Draws the initial state.
    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore);
    /// Agent `i`'s reward after a step.
    fn reward(&self, i: usize, world: &World) -> f64;
    /// Agent `i`'s observation.
    fn observation(&self, i: usize, world: &World) -> Vec<f64>;
    /// Whether the episode terminates (all agents).
    fn is_terminal(&self, world: &World) -> bool;
    /// The time limit (`max_cycles`).
    fn max_cycles(&self) -> usize;
    /// Whether actions are continuous (`[0, 1]^5`) rather than discrete (5 choices).
    fn continuous_actions(&self) -> bool;
    /// Per-episode scenario state (e.g. the adversary scenario's goal landmark).
    fn state(&self) -> Option<usize> {
        None
    }
    /// Restores [`Scenario::state`].
    ///
    /// # Errors
    /// [`EnvError::BadSnapshot`] when it does not fit.
    fn set_state(&mut self, state: Option<usize>) -> Result<()> {
        match state {
            None => Ok(()),
            Some(s) => Err(EnvError::snapshot(format!("this scenario has no episode state, got {s}"))),
        }
    }
}

/// `[e.pos − agent.pos for e in entities]`, or the `n` nearest ones padded with zeros
/// (mpe2's `padded_relative_positions`).
fn relative_positions(world: &World, agent: usize, entities: &[usize], n: Option<usize>, out: &mut Vec<f64>) {
    let selected = nearest(world, agent, entities, n);
    for &e in &selected {
        out.push(world.pos[e][0] - world.pos[agent][0]);
        out.push(world.pos[e][1] - world.pos[agent][1]);
    }
    if let Some(n) = n {
        for _ in selected.len()..n {
            out.extend([0.0, 0.0]);
        }
    }
}

/// The `n` entities nearest to `agent` (all of them, in order, for `None`).
fn nearest(world: &World, agent: usize, entities: &[usize], n: Option<usize>) -> Vec<usize> {
    match n {
        None => entities.to_vec(),
        Some(n) => {
            let mut order: Vec<(f64, usize)> = entities.iter().map(|&e| (world.dist(e, agent), e)).collect();
            order.sort_by(|a, b| a.0.total_cmp(&b.0));
            order.into_iter().take(n).map(|(_, e)| e).collect()
        }
    }
}

fn check_neighbors(name: &str, n: Option<usize>) -> Result<()> {
    if n == Some(0) {
        return Err(EnvError::invalid(name, 0, "must be >= 1 (or absent for all)"));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------

/// Parameters of [`SimpleSpread`](crate::mpe::SimpleSpread) (cooperative navigation,
/// `simple_spread_v3`); the defaults are mpe2's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `n_agents` | 3 | agents and landmarks (`N`) | `>= 1` |
/// | `local_ratio` | 0.5 | reward = global·(1 − r) + local·r | `[0, 1]` |
/// | `max_cycles` | 25 | time limit | `>= 1` |
/// | `continuous_actions` | false | `[0, 1]^5` actions instead of 5 discrete moves | |
/// | `collision_penalty` | true | −1 per other agent in contact (mpe2's curriculum stage 1 / no curriculum) | |
/// | `terminate_on_success` | false | terminate when every landmark has an agent within 0.1 | |
/// | `num_agent_neighbors` | none | observe only the nearest other agents (zero-padded) | `>= 1` |
/// | `num_landmark_neighbors` | none | observe only the nearest landmarks (zero-padded) | `>= 1` |
/// | `world` | see [`MpeWorldParams`] | physics | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimpleSpreadParams {
    /// Number of agents (= landmarks).
    pub n_agents: usize,
    /// Weight of the local (collision) reward.
    pub local_ratio: f64,
    /// Time limit.
    pub max_cycles: usize,
    /// Continuous actions.
    pub continuous_actions: bool,
    /// Collision penalty on.
    pub collision_penalty: bool,
    /// Terminate when all landmarks are covered.
    pub terminate_on_success: bool,
    /// Nearest other agents observed.
    pub num_agent_neighbors: Option<usize>,
    /// Nearest landmarks observed.
    pub num_landmark_neighbors: Option<usize>,
    /// Physics.
    pub world: MpeWorldParams,
}

impl Default for SimpleSpreadParams {
    fn default() -> Self {
        Self {
            n_agents: 3,
            local_ratio: 0.5,
            max_cycles: 25,
            continuous_actions: false,
            collision_penalty: true,
            terminate_on_success: false,
            num_agent_neighbors: None,
            num_landmark_neighbors: None,
            world: MpeWorldParams::default(),
        }
    }
}

impl SimpleSpreadParams {
    /// Sets `n_agents`.
    #[must_use]
    pub fn n_agents(mut self, v: usize) -> Self {
        self.n_agents = v;
        self
    }
    /// Sets `local_ratio`.
    #[must_use]
    pub fn local_ratio(mut self, v: f64) -> Self {
        self.local_ratio = v;
        self
    }
    /// Sets `max_cycles`.
    #[must_use]
    pub fn max_cycles(mut self, v: usize) -> Self {
        self.max_cycles = v;
        self
    }
    /// Sets `continuous_actions`.
    #[must_use]
    pub fn continuous_actions(mut self, v: bool) -> Self {
        self.continuous_actions = v;
        self
    }
    /// Sets `collision_penalty`.
    #[must_use]
    pub fn collision_penalty(mut self, v: bool) -> Self {
        self.collision_penalty = v;
        self
    }
    /// Sets `terminate_on_success`.
    #[must_use]
    pub fn terminate_on_success(mut self, v: bool) -> Self {
        self.terminate_on_success = v;
        self
    }
    /// Sets `num_agent_neighbors`.
    #[must_use]
    pub fn num_agent_neighbors(mut self, v: Option<usize>) -> Self {
        self.num_agent_neighbors = v;
        self
    }
    /// Sets `num_landmark_neighbors`.
    #[must_use]
    pub fn num_landmark_neighbors(mut self, v: Option<usize>) -> Self {
        self.num_landmark_neighbors = v;
        self
    }
    /// Sets `world`.
    #[must_use]
    pub fn world(mut self, v: MpeWorldParams) -> Self {
        self.world = v;
        self
    }
}

impl Params for SimpleSpreadParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        if self.n_agents == 0 {
            return Err(EnvError::invalid("n_agents", 0, "must be >= 1"));
        }
        if !(0.0..=1.0).contains(&self.local_ratio) {
            return Err(EnvError::invalid("local_ratio", self.local_ratio, "must be in [0, 1]"));
        }
        if self.max_cycles == 0 {
            return Err(EnvError::invalid("max_cycles", 0, "must be >= 1"));
        }
        check_neighbors("num_agent_neighbors", self.num_agent_neighbors)?;
        check_neighbors("num_landmark_neighbors", self.num_landmark_neighbors)?;
        self.world.validate()
    }
}

/// Simple spread's scenario.
#[derive(Debug, Clone)]
pub struct Spread {
    pub(crate) p: SimpleSpreadParams,
}

const SPREAD_CAPTURE_RADIUS: f64 = 0.1;

impl Spread {
    fn landmarks(&self, world: &World) -> std::ops::Range<usize> {
        world.n_agents..world.entities.len()
    }

    fn global_reward(&self, world: &World) -> f64 {
        let mut rew = 0.0;
        for lm in self.landmarks(world) {
            let min = (0..world.n_agents).map(|a| world.dist(a, lm)).fold(f64::INFINITY, f64::min);
            rew -= min;
        }
        rew
    }
}

impl Scenario for Spread {
    fn make_world(&self) -> (World, Vec<String>) {
        let n = self.p.n_agents;
        let agents = (0..n).map(|_| Entity::agent(0.15, true)).collect();
        let landmarks = (0..n).map(|_| Entity::landmark(0.05, false)).collect();
        (World::new(self.p.world.clone(), agents, landmarks), (0..n).map(|i| format!("agent_{i}")).collect())
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        for i in 0..world.entities.len() {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        let mut local = 0.0;
        if self.p.collision_penalty {
            for a in 0..world.n_agents {
                if a != i && world.is_collision(a, i) {
                    local -= 1.0;
                }
            }
        }
        let r = self.p.local_ratio;
        self.global_reward(world) * (1.0 - r) + local * r
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let mut o = vec![world.vel[i][0], world.vel[i][1], world.pos[i][0], world.pos[i][1]];
        let landmarks: Vec<usize> = self.landmarks(world).collect();
        relative_positions(world, i, &landmarks, self.p.num_landmark_neighbors, &mut o);
        let others: Vec<usize> = (0..world.n_agents).filter(|&a| a != i).collect();
        relative_positions(world, i, &others, self.p.num_agent_neighbors, &mut o);
        // silent agents: their communication state is zeros of dim_c = 2
        let n_comm = self.p.num_agent_neighbors.unwrap_or(others.len());
        o.extend(std::iter::repeat_n(0.0, 2 * n_comm));
        o
    }

    fn is_terminal(&self, world: &World) -> bool {
        self.p.terminate_on_success
            && self.landmarks(world).all(|lm| {
                (0..world.n_agents).map(|a| world.dist(a, lm)).fold(f64::INFINITY, f64::min) < SPREAD_CAPTURE_RADIUS
            })
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }
}

// ------------------------------------------------------------------------------------------

/// Parameters of [`SimpleTag`](crate::mpe::SimpleTag) (predator-prey, `simple_tag_v3`); the
/// defaults are mpe2's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `num_good` | 1 | prey | `>= 1` |
/// | `num_adversaries` | 3 | predators | `>= 1` |
/// | `num_obstacles` | 2 | obstacles (radius 0.2) | any |
/// | `max_cycles` | 25 | time limit | `>= 1` |
/// | `continuous_actions` | false | `[0, 1]^5` actions | |
/// | `prey_speed_factor` | 1.0 | prey max speed `1.3·f` and acceleration `4·f` (mpe2's curriculum stages use 0.5, 0.75, 1) | `> 0` |
/// | `terminate_on_success` | false | terminate when every prey touches a predator | |
/// | `num_agent_neighbors`, `num_landmark_neighbors` | none | nearest-neighbour observations | `>= 1` |
/// | `world` | see [`MpeWorldParams`] | physics | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimpleTagParams {
    /// Prey.
    pub num_good: usize,
    /// Predators.
    pub num_adversaries: usize,
    /// Obstacles.
    pub num_obstacles: usize,
    /// Time limit.
    pub max_cycles: usize,
    /// Continuous actions.
    pub continuous_actions: bool,
    /// Prey speed factor.
    pub prey_speed_factor: f64,
    /// Terminate when all prey are caught.
    pub terminate_on_success: bool,
    /// Nearest other agents observed.
    pub num_agent_neighbors: Option<usize>,
    /// Nearest obstacles observed.
    pub num_landmark_neighbors: Option<usize>,
    /// Physics.
    pub world: MpeWorldParams,
}

impl Default for SimpleTagParams {
    fn default() -> Self {
        Self {
            num_good: 1,
            num_adversaries: 3,
            num_obstacles: 2,
            max_cycles: 25,
            continuous_actions: false,
            prey_speed_factor: 1.0,
            terminate_on_success: false,
            num_agent_neighbors: None,
            num_landmark_neighbors: None,
            world: MpeWorldParams::default(),
        }
    }
}

impl SimpleTagParams {
    /// Sets `num_good`.
    #[must_use]
    pub fn num_good(mut self, v: usize) -> Self {
        self.num_good = v;
        self
    }
    /// Sets `num_adversaries`.
    #[must_use]
    pub fn num_adversaries(mut self, v: usize) -> Self {
        self.num_adversaries = v;
        self
    }
    /// Sets `num_obstacles`.
    #[must_use]
    pub fn num_obstacles(mut self, v: usize) -> Self {
        self.num_obstacles = v;
        self
    }
    /// Sets `max_cycles`.
    #[must_use]
    pub fn max_cycles(mut self, v: usize) -> Self {
        self.max_cycles = v;
        self
    }
    /// Sets `continuous_actions`.
    #[must_use]
    pub fn continuous_actions(mut self, v: bool) -> Self {
        self.continuous_actions = v;
        self
    }
    /// Sets `prey_speed_factor`.
    #[must_use]
    pub fn prey_speed_factor(mut self, v: f64) -> Self {
        self.prey_speed_factor = v;
        self
    }
    /// Sets `terminate_on_success`.
    #[must_use]
    pub fn terminate_on_success(mut self, v: bool) -> Self {
        self.terminate_on_success = v;
        self
    }
    /// Sets `num_agent_neighbors`.
    #[must_use]
    pub fn num_agent_neighbors(mut self, v: Option<usize>) -> Self {
        self.num_agent_neighbors = v;
        self
    }
    /// Sets `num_landmark_neighbors`.
    #[must_use]
    pub fn num_landmark_neighbors(mut self, v: Option<usize>) -> Self {
        self.num_landmark_neighbors = v;
        self
    }
    /// Sets `world`.
    #[must_use]
    pub fn world(mut self, v: MpeWorldParams) -> Self {
        self.world = v;
        self
    }
}

impl Params for SimpleTagParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        if self.num_good == 0 {
            return Err(EnvError::invalid("num_good", 0, "must be >= 1"));
        }
        if self.num_adversaries == 0 {
            return Err(EnvError::invalid("num_adversaries", 0, "must be >= 1"));
        }
        if self.max_cycles == 0 {
            return Err(EnvError::invalid("max_cycles", 0, "must be >= 1"));
        }
        crate::common::positive("prey_speed_factor", self.prey_speed_factor)?;
        check_neighbors("num_agent_neighbors", self.num_agent_neighbors)?;
        check_neighbors("num_landmark_neighbors", self.num_landmark_neighbors)?;
        self.world.validate()
    }
}

/// Simple tag's scenario.
#[derive(Debug, Clone)]
pub struct Tag {
    pub(crate) p: SimpleTagParams,
}

impl Tag {
    fn is_adversary(&self, i: usize) -> bool {
        i < self.p.num_adversaries
    }
}

fn bound(x: f64) -> f64 {
    if x < 0.9 {
        0.0
    } else if x < 1.0 {
        (x - 0.9) * 10.0
    } else {
        (2.0 * x - 2.0).exp().min(10.0)
    }
}

impl Scenario for Tag {
    fn make_world(&self) -> (World, Vec<String>) {
        let p = &self.p;
        let n = p.num_adversaries + p.num_good;
        let mut agents = Vec::with_capacity(n);
        let mut names = Vec::with_capacity(n);
        for i in 0..n {
            let adv = i < p.num_adversaries;
            let mut e = Entity::agent(if adv { 0.075 } else { 0.05 }, true);
            if adv {
                e.accel = Some(3.0);
                e.max_speed = Some(1.0);
                names.push(format!("adversary_{i}"));
            } else {
                e.accel = Some(4.0 * p.prey_speed_factor);
                e.max_speed = Some(1.3 * p.prey_speed_factor);
                names.push(format!("agent_{}", i - p.num_adversaries));
            }
            agents.push(e);
        }
        let landmarks = (0..p.num_obstacles).map(|_| Entity::landmark(0.2, true)).collect();
        (World::new(p.world.clone(), agents, landmarks), names)
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        for i in 0..world.n_agents {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
        for i in world.n_agents..world.entities.len() {
            world.pos[i] = [uniform(rng, -0.9, 0.9), uniform(rng, -0.9, 0.9)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        let n = world.n_agents;
        let na = self.p.num_adversaries;
        let mut rew = 0.0;
        if self.is_adversary(i) {
            for ag in na..n {
                for adv in 0..na {
                    if world.is_collision(ag, adv) {
                        rew += 10.0;
                    }
                }
            }
        } else {
            for a in 0..na {
                if world.is_collision(a, i) {
                    rew -= 10.0;
                }
            }
            for p in 0..2 {
                rew -= bound(world.pos[i][p].abs());
            }
        }
        rew
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let mut o = vec![world.vel[i][0], world.vel[i][1], world.pos[i][0], world.pos[i][1]];
        let landmarks: Vec<usize> = (world.n_agents..world.entities.len()).collect();
        relative_positions(world, i, &landmarks, self.p.num_landmark_neighbors, &mut o);
        let others: Vec<usize> = (0..world.n_agents).filter(|&a| a != i).collect();
        relative_positions(world, i, &others, self.p.num_agent_neighbors, &mut o);
        match self.p.num_agent_neighbors {
            None => {
                for &a in others.iter().filter(|&&a| !self.is_adversary(a)) {
                    o.extend(world.vel[a]);
                }
            }
            Some(n) => {
                let selected = nearest(world, i, &others, Some(n));
                for &a in &selected {
                    o.extend(if self.is_adversary(a) { [0.0, 0.0] } else { world.vel[a] });
                }
                for _ in selected.len()..n {
                    o.extend([0.0, 0.0]);
                }
            }
        }
        o
    }

    fn is_terminal(&self, world: &World) -> bool {
        let na = self.p.num_adversaries;
        self.p.terminate_on_success && (na..world.n_agents).all(|prey| (0..na).any(|adv| world.is_collision(prey, adv)))
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }
}

// ------------------------------------------------------------------------------------------

/// Parameters of [`SimpleAdversary`](crate::mpe::SimpleAdversary) (physical deception,
/// `simple_adversary_v3`); the defaults are mpe2's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `n_good` | 2 | good agents (`N`) and landmarks; one adversary | `>= 1` |
/// | `max_cycles` | 25 | time limit | `>= 1` |
/// | `continuous_actions` | false | `[0, 1]^5` actions | |
/// | `num_agent_neighbors`, `num_landmark_neighbors` | none | nearest-neighbour observations | `>= 1` |
/// | `world` | see [`MpeWorldParams`] | physics | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimpleAdversaryParams {
    /// Good agents (= landmarks).
    pub n_good: usize,
    /// Time limit.
    pub max_cycles: usize,
    /// Continuous actions.
    pub continuous_actions: bool,
    /// Nearest other agents observed.
    pub num_agent_neighbors: Option<usize>,
    /// Nearest landmarks observed.
    pub num_landmark_neighbors: Option<usize>,
    /// Physics.
    pub world: MpeWorldParams,
}

impl Default for SimpleAdversaryParams {
    fn default() -> Self {
        Self {
            n_good: 2,
            max_cycles: 25,
            continuous_actions: false,
            num_agent_neighbors: None,
            num_landmark_neighbors: None,
            world: MpeWorldParams::default(),
        }
    }
}

impl SimpleAdversaryParams {
    /// Sets `n_good`.
    #[must_use]
    pub fn n_good(mut self, v: usize) -> Self {
        self.n_good = v;
        self
    }
    /// Sets `max_cycles`.
    #[must_use]
    pub fn max_cycles(mut self, v: usize) -> Self {
        self.max_cycles = v;
        self
    }
    /// Sets `continuous_actions`.
    #[must_use]
    pub fn continuous_actions(mut self, v: bool) -> Self {
        self.continuous_actions = v;
        self
    }
    /// Sets `num_agent_neighbors`.
    #[must_use]
    pub fn num_agent_neighbors(mut self, v: Option<usize>) -> Self {
        self.num_agent_neighbors = v;
        self
    }
    /// Sets `num_landmark_neighbors`.
    #[must_use]
    pub fn num_landmark_neighbors(mut self, v: Option<usize>) -> Self {
        self.num_landmark_neighbors = v;
        self
    }
    /// Sets `world`.
    #[must_use]
    pub fn world(mut self, v: MpeWorldParams) -> Self {
        self.world = v;
        self
    }
}

impl Params for SimpleAdversaryParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        if self.n_good == 0 {
            return Err(EnvError::invalid("n_good", 0, "must be >= 1"));
        }
        if self.max_cycles == 0 {
            return Err(EnvError::invalid("max_cycles", 0, "must be >= 1"));
        }
        check_neighbors("num_agent_neighbors", self.num_agent_neighbors)?;
        check_neighbors("num_landmark_neighbors", self.num_landmark_neighbors)?;
        self.world.validate()
    }
}

/// Simple adversary's scenario.
#[derive(Debug, Clone)]
pub struct Adversary {
    pub(crate) p: SimpleAdversaryParams,
    pub(crate) goal: usize,
}

impl Adversary {
    fn goal_entity(&self, world: &World) -> usize {
        world.n_agents + self.goal
    }
}

impl Scenario for Adversary {
    fn make_world(&self) -> (World, Vec<String>) {
        let n = self.p.n_good + 1;
        let agents = (0..n).map(|_| Entity::agent(0.15, false)).collect();
        let landmarks = (0..self.p.n_good).map(|_| Entity::landmark(0.08, false)).collect();
        let names =
            (0..n).map(|i| if i == 0 { "adversary_0".to_owned() } else { format!("agent_{}", i - 1) }).collect();
        (World::new(self.p.world.clone(), agents, landmarks), names)
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        self.goal = integers(rng, self.p.n_good).min(self.p.n_good - 1);
        for i in 0..world.entities.len() {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        let g = self.goal_entity(world);
        if i == 0 {
            -world.dist(0, g)
        } else {
            let adv_rew = 0.0 + world.dist(0, g);
            let pos_rew = -(1..world.n_agents).map(|a| world.dist(a, g)).fold(f64::INFINITY, f64::min);
            pos_rew + adv_rew
        }
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let mut o = Vec::new();
        if i != 0 {
            let g = self.goal_entity(world);
            o.extend([world.pos[g][0] - world.pos[i][0], world.pos[g][1] - world.pos[i][1]]);
        }
        let landmarks: Vec<usize> = (world.n_agents..world.entities.len()).collect();
        relative_positions(world, i, &landmarks, self.p.num_landmark_neighbors, &mut o);
        let others: Vec<usize> = (0..world.n_agents).filter(|&a| a != i).collect();
        relative_positions(world, i, &others, self.p.num_agent_neighbors, &mut o);
        o
    }

    fn is_terminal(&self, _world: &World) -> bool {
        false
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }

    fn state(&self) -> Option<usize> {
        Some(self.goal)
    }

    fn set_state(&mut self, state: Option<usize>) -> Result<()> {
        match state {
            Some(g) if g < self.p.n_good => {
                self.goal = g;
                Ok(())
            }
            other => Err(EnvError::snapshot(format!("goal landmark {other:?} outside 0..{}", self.p.n_good))),
        }
    }
}

// ------------------------------------------------------------------------------------------

/// Parameters of [`SimplePush`](crate::mpe::SimplePush) (keep-away, `simple_push_v3`): the
/// same three as the other scenarios whose make-up mpe2 fixes ([`CommParams`]). The scenario
/// itself is fixed by mpe2: one adversary, one good agent, two landmarks, one of which (drawn at
/// reset) is the goal; continuous actions are `[0, 1]^5`.
pub type SimplePushParams = CommParams;

/// Simple push's scenario: agent 0 is `adversary_0`, agent 1 `agent_0`; entities 2 and 3 are
/// the landmarks.
#[derive(Debug, Clone)]
pub struct Push {
    pub(crate) p: SimplePushParams,
    pub(crate) goal: usize,
}

const PUSH_LANDMARKS: usize = 2;

impl Push {
    /// Landmark `l`'s colour (mpe2: grey 0.1 with channel `l + 1` raised by 0.8).
    fn landmark_color(l: usize) -> [f64; 3] {
        let mut c = [0.1; 3];
        c[l + 1] += 0.8;
        c
    }

    /// The good agent's colour (grey 0.25 with the goal's channel raised by 0.5).
    fn good_color(&self) -> [f64; 3] {
        let mut c = [0.25; 3];
        c[self.goal + 1] += 0.5;
        c
    }
}

impl Scenario for Push {
    fn make_world(&self) -> (World, Vec<String>) {
        let agents = (0..2).map(|_| Entity::agent(0.05, true)).collect();
        let landmarks = (0..PUSH_LANDMARKS).map(|_| Entity::landmark(0.05, false)).collect();
        (World::new(self.p.world.clone(), agents, landmarks), vec!["adversary_0".into(), "agent_0".into()])
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        self.goal = integers(rng, PUSH_LANDMARKS).min(PUSH_LANDMARKS - 1);
        for i in 0..world.entities.len() {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        let g = world.n_agents + self.goal;
        if i == 0 {
            // the (only) good agent's distance to the goal, minus the adversary's
            world.dist(1, g) - world.dist(g, 0)
        } else {
            -world.dist(i, g)
        }
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let landmarks = world.n_agents..world.entities.len();
        let mut o = vec![world.vel[i][0], world.vel[i][1]];
        if i != 0 {
            let g = world.n_agents + self.goal;
            o.extend([world.pos[g][0] - world.pos[i][0], world.pos[g][1] - world.pos[i][1]]);
            o.extend(self.good_color());
        }
        for l in landmarks.clone() {
            o.extend([world.pos[l][0] - world.pos[i][0], world.pos[l][1] - world.pos[i][1]]);
        }
        if i != 0 {
            for l in 0..landmarks.len() {
                o.extend(Self::landmark_color(l));
            }
        }
        let other = 1 - i;
        o.extend([world.pos[other][0] - world.pos[i][0], world.pos[other][1] - world.pos[i][1]]);
        o
    }

    fn is_terminal(&self, _world: &World) -> bool {
        false
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }

    fn state(&self) -> Option<usize> {
        Some(self.goal)
    }

    fn set_state(&mut self, state: Option<usize>) -> Result<()> {
        match state {
            Some(g) if g < PUSH_LANDMARKS => {
                self.goal = g;
                Ok(())
            }
            other => Err(EnvError::snapshot(format!("goal landmark {other:?} outside 0..{PUSH_LANDMARKS}"))),
        }
    }
}

// ------------------------------------------------------------------------------------------

/// Parameters of the scenarios whose make-up mpe2 fixes: the communication scenarios
/// [`SimpleSpeakerListener`] and [`SimpleCrypto`], and [`SimplePush`] (as
/// [`SimplePushParams`]); the defaults are mpe2's.
///
/// [`SimpleSpeakerListener`]: crate::mpe::SimpleSpeakerListener
/// [`SimpleCrypto`]: crate::mpe::SimpleCrypto
/// [`SimplePush`]: crate::mpe::SimplePush
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `max_cycles` | 25 | time limit | `>= 1` |
/// | `continuous_actions` | false | continuous actions (movement `[0, 1]^5` if the agent moves, then `[0, 1]^dim_c` if it speaks) | |
/// | `world` | see [`MpeWorldParams`] | physics | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommParams {
    /// Time limit.
    pub max_cycles: usize,
    /// Continuous actions.
    pub continuous_actions: bool,
    /// Physics.
    pub world: MpeWorldParams,
}

impl Default for CommParams {
    fn default() -> Self {
        Self { max_cycles: 25, continuous_actions: false, world: MpeWorldParams::default() }
    }
}

impl CommParams {
    /// Sets `max_cycles`.
    #[must_use]
    pub fn max_cycles(mut self, v: usize) -> Self {
        self.max_cycles = v;
        self
    }
    /// Sets `continuous_actions`.
    #[must_use]
    pub fn continuous_actions(mut self, v: bool) -> Self {
        self.continuous_actions = v;
        self
    }
    /// Sets `world`.
    #[must_use]
    pub fn world(mut self, v: MpeWorldParams) -> Self {
        self.world = v;
        self
    }
}

impl Params for CommParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        if self.max_cycles == 0 {
            return Err(EnvError::invalid("max_cycles", 0, "must be >= 1"));
        }
        self.world.validate()
    }
}

/// Parameters of [`SimpleReference`](crate::mpe::SimpleReference) (`simple_reference_v3`); the
/// defaults are mpe2's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `local_ratio` | 0.5 | reward = mean·(1 − r) + own·r | `[0, 1]` |
/// | `max_cycles` | 25 | time limit | `>= 1` |
/// | `continuous_actions` | false | `[0, 1]^15` actions (5 movement, 10 communication) instead of 50 discrete ones | |
/// | `world` | see [`MpeWorldParams`] | physics | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimpleReferenceParams {
    /// Weight of the agent's own reward.
    pub local_ratio: f64,
    /// Time limit.
    pub max_cycles: usize,
    /// Continuous actions.
    pub continuous_actions: bool,
    /// Physics.
    pub world: MpeWorldParams,
}

impl Default for SimpleReferenceParams {
    fn default() -> Self {
        Self { local_ratio: 0.5, max_cycles: 25, continuous_actions: false, world: MpeWorldParams::default() }
    }
}

impl SimpleReferenceParams {
    /// Sets `local_ratio`.
    #[must_use]
    pub fn local_ratio(mut self, v: f64) -> Self {
        self.local_ratio = v;
        self
    }
    /// Sets `max_cycles`.
    #[must_use]
    pub fn max_cycles(mut self, v: usize) -> Self {
        self.max_cycles = v;
        self
    }
    /// Sets `continuous_actions`.
    #[must_use]
    pub fn continuous_actions(mut self, v: bool) -> Self {
        self.continuous_actions = v;
        self
    }
    /// Sets `world`.
    #[must_use]
    pub fn world(mut self, v: MpeWorldParams) -> Self {
        self.world = v;
        self
    }
}

impl Params for SimpleReferenceParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.local_ratio) {
            return Err(EnvError::invalid("local_ratio", self.local_ratio, "must be in [0, 1]"));
        }
        if self.max_cycles == 0 {
            return Err(EnvError::invalid("max_cycles", 0, "must be >= 1"));
        }
        self.world.validate()
    }
}

/// `Σ (a_k − b_k)²`, summed left to right (NumPy's order for short vectors).
fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).fold(0.0, |acc, (x, y)| acc + (x - y) * (x - y))
}

/// Restores a scenario state that encodes `parts.len()` choices, choice `k` in `0..parts[k]`,
/// as one number (first choice most significant).
fn decode_choices(state: Option<usize>, parts: &[usize]) -> Result<Vec<usize>> {
    let total: usize = parts.iter().product();
    match state {
        Some(s) if s < total => {
            let mut rest = s;
            let mut out = vec![0; parts.len()];
            for k in (0..parts.len()).rev() {
                out[k] = rest % parts[k];
                rest /= parts[k];
            }
            Ok(out)
        }
        other => Err(EnvError::snapshot(format!("scenario state {other:?} outside 0..{total}"))),
    }
}

const REFERENCE_DIM_C: usize = 10;
const REFERENCE_LANDMARKS: usize = 3;
const REFERENCE_COLORS: [[f64; 3]; REFERENCE_LANDMARKS] = [[0.75, 0.25, 0.25], [0.25, 0.75, 0.25], [0.25, 0.25, 0.75]];

/// Simple reference's scenario: `agent_0` and `agent_1` (speaking, `dim_c` = 10), three
/// landmarks; each agent knows the landmark the *other* one should reach.
#[derive(Debug, Clone)]
pub struct Reference {
    pub(crate) p: SimpleReferenceParams,
    /// Agent `i`'s goal landmark, which agent `1 − i` should reach.
    pub(crate) goals: [usize; 2],
}

impl Reference {
    /// mpe2's `Scenario.reward`: minus the other agent's distance to agent `i`'s goal.
    fn own_reward(&self, i: usize, world: &World) -> f64 {
        -world.dist(1 - i, world.n_agents + self.goals[i])
    }
}

impl Scenario for Reference {
    fn make_world(&self) -> (World, Vec<String>) {
        let agents = (0..2).map(|_| Entity::agent(0.05, false).speaking()).collect();
        let landmarks = (0..REFERENCE_LANDMARKS).map(|_| Entity::landmark(0.05, false)).collect();
        let world = World::new(self.p.world.clone(), agents, landmarks).with_dim_c(REFERENCE_DIM_C);
        (world, vec!["agent_0".into(), "agent_1".into()])
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        for g in &mut self.goals {
            *g = integers(rng, REFERENCE_LANDMARKS).min(REFERENCE_LANDMARKS - 1);
        }
        for i in 0..world.entities.len() {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        // mpe2's SimpleEnv: global = sum(rewards) / n, mixed with the agent's own by local_ratio
        let global = (0.0 + self.own_reward(0, world) + self.own_reward(1, world)) / 2.0;
        let r = self.p.local_ratio;
        global * (1.0 - r) + self.own_reward(i, world) * r
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let mut o = vec![world.vel[i][0], world.vel[i][1]];
        for l in world.n_agents..world.entities.len() {
            o.extend([world.pos[l][0] - world.pos[i][0], world.pos[l][1] - world.pos[i][1]]);
        }
        o.extend(REFERENCE_COLORS[self.goals[i]]);
        o.extend_from_slice(&world.comm[1 - i]);
        o
    }

    fn is_terminal(&self, _world: &World) -> bool {
        false
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }

    fn state(&self) -> Option<usize> {
        Some(self.goals[0] * REFERENCE_LANDMARKS + self.goals[1])
    }

    fn set_state(&mut self, state: Option<usize>) -> Result<()> {
        let g = decode_choices(state, &[REFERENCE_LANDMARKS, REFERENCE_LANDMARKS])?;
        self.goals = [g[0], g[1]];
        Ok(())
    }
}

const SPEAKER_DIM_C: usize = 3;
const SPEAKER_LANDMARKS: usize = 3;
const SPEAKER_COLORS: [[f64; 3]; SPEAKER_LANDMARKS] = [[0.65, 0.15, 0.15], [0.15, 0.65, 0.15], [0.15, 0.15, 0.65]];

/// Simple speaker-listener's scenario: `speaker_0` (fixed, speaking, `dim_c` = 3) sees the goal
/// landmark's colour; `listener_0` (moving, silent) must reach it.
#[derive(Debug, Clone)]
pub struct SpeakerListener {
    pub(crate) p: CommParams,
    pub(crate) goal: usize,
}

impl Scenario for SpeakerListener {
    fn make_world(&self) -> (World, Vec<String>) {
        let agents = vec![Entity::agent(0.075, false).fixed().speaking(), Entity::agent(0.075, false)];
        let landmarks = (0..SPEAKER_LANDMARKS).map(|_| Entity::landmark(0.04, false)).collect();
        let world = World::new(self.p.world.clone(), agents, landmarks).with_dim_c(SPEAKER_DIM_C);
        (world, vec!["speaker_0".into(), "listener_0".into()])
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        self.goal = integers(rng, SPEAKER_LANDMARKS).min(SPEAKER_LANDMARKS - 1);
        for i in 0..world.entities.len() {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, _i: usize, world: &World) -> f64 {
        let g = world.n_agents + self.goal;
        -squared_distance(&world.pos[1], &world.pos[g])
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        if i == 0 {
            return SPEAKER_COLORS[self.goal].to_vec();
        }
        let mut o = vec![world.vel[i][0], world.vel[i][1]];
        for l in world.n_agents..world.entities.len() {
            o.extend([world.pos[l][0] - world.pos[i][0], world.pos[l][1] - world.pos[i][1]]);
        }
        o.extend_from_slice(&world.comm[0]);
        o
    }

    fn is_terminal(&self, _world: &World) -> bool {
        false
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }

    fn state(&self) -> Option<usize> {
        Some(self.goal)
    }

    fn set_state(&mut self, state: Option<usize>) -> Result<()> {
        self.goal = decode_choices(state, &[SPEAKER_LANDMARKS])?[0];
        Ok(())
    }
}

const CRYPTO_DIM_C: usize = 4;
const CRYPTO_LANDMARKS: usize = 2;

/// Simple crypto's scenario: `eve_0` (the adversary), `bob_0` (the listener) and `alice_0`
/// (the speaker), all fixed and speaking (`dim_c` = 4); two landmarks whose "colours" are the
/// one-hot vectors `e_0`, `e_1` of length 4. Alice sees the goal and the key, Bob the key and
/// Alice's message, Eve only the message.
#[derive(Debug, Clone)]
pub struct Crypto {
    pub(crate) p: CommParams,
    pub(crate) goal: usize,
    pub(crate) key: usize,
}

const EVE: usize = 0;
const BOB: usize = 1;
const ALICE: usize = 2;

fn one_hot(k: usize) -> [f64; CRYPTO_DIM_C] {
    let mut v = [0.0; CRYPTO_DIM_C];
    v[k] = 1.0;
    v
}

impl Crypto {
    /// `Σ (c − goal)²` of agent `a`'s message, `None` while its message is all zeros.
    fn message_error(&self, a: usize, world: &World) -> Option<f64> {
        let c = &world.comm[a];
        (!c.iter().all(|&v| v == 0.0)).then(|| squared_distance(c, &one_hot(self.goal)))
    }
}

impl Scenario for Crypto {
    fn make_world(&self) -> (World, Vec<String>) {
        let agents = (0..3).map(|_| Entity::agent(0.05, false).fixed().speaking()).collect();
        let landmarks = (0..CRYPTO_LANDMARKS).map(|_| Entity::landmark(0.05, false)).collect();
        let world = World::new(self.p.world.clone(), agents, landmarks).with_dim_c(CRYPTO_DIM_C);
        (world, vec!["eve_0".into(), "bob_0".into(), "alice_0".into()])
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        self.goal = integers(rng, CRYPTO_LANDMARKS).min(CRYPTO_LANDMARKS - 1);
        self.key = integers(rng, CRYPTO_LANDMARKS).min(CRYPTO_LANDMARKS - 1);
        for i in 0..world.entities.len() {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        let eve = self.message_error(EVE, world);
        if i == EVE {
            return eve.map_or(0.0, |e| 0.0 - e);
        }
        // good agents: Eve's error counts for them, Bob's against them
        let adv = eve.map_or(0.0, |e| 0.0 + e);
        let good = self.message_error(BOB, world).map_or(0.0, |e| 0.0 - e);
        adv + good
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let key = one_hot(self.key);
        match i {
            ALICE => one_hot(self.goal).into_iter().chain(key).collect(),
            BOB => key.into_iter().chain(world.comm[ALICE].iter().copied()).collect(),
            _ => world.comm[ALICE].clone(),
        }
    }

    fn is_terminal(&self, _world: &World) -> bool {
        false
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }

    fn state(&self) -> Option<usize> {
        Some(self.goal * CRYPTO_LANDMARKS + self.key)
    }

    fn set_state(&mut self, state: Option<usize>) -> Result<()> {
        let g = decode_choices(state, &[CRYPTO_LANDMARKS, CRYPTO_LANDMARKS])?;
        (self.goal, self.key) = (g[0], g[1]);
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------

/// Parameters of [`SimpleWorldComm`](crate::mpe::SimpleWorldComm) (`simple_world_comm_v3`);
/// the defaults are mpe2's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `num_good` | 2 | prey | `>= 1` |
/// | `num_adversaries` | 4 | predators, the first of them the speaking leader | `>= 1` |
/// | `num_obstacles` | 1 | obstacles (radius 0.2, colliding) | any |
/// | `num_food` | 2 | food (radius 0.03) | `>= 1` |
/// | `num_forests` | 2 | forests (radius 0.3) that hide agents | any |
/// | `max_cycles` | 25 | time limit | `>= 1` |
/// | `continuous_actions` | false | continuous actions (the leader's: 5 movement + 4 message values) | |
/// | `world` | see [`MpeWorldParams`] | physics | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimpleWorldCommParams {
    /// Prey.
    pub num_good: usize,
    /// Predators (leader included).
    pub num_adversaries: usize,
    /// Obstacles.
    pub num_obstacles: usize,
    /// Food.
    pub num_food: usize,
    /// Forests.
    pub num_forests: usize,
    /// Time limit.
    pub max_cycles: usize,
    /// Continuous actions.
    pub continuous_actions: bool,
    /// Physics.
    pub world: MpeWorldParams,
}

impl Default for SimpleWorldCommParams {
    fn default() -> Self {
        Self {
            num_good: 2,
            num_adversaries: 4,
            num_obstacles: 1,
            num_food: 2,
            num_forests: 2,
            max_cycles: 25,
            continuous_actions: false,
            world: MpeWorldParams::default(),
        }
    }
}

impl SimpleWorldCommParams {
    /// Sets `num_good`.
    #[must_use]
    pub fn num_good(mut self, v: usize) -> Self {
        self.num_good = v;
        self
    }
    /// Sets `num_adversaries`.
    #[must_use]
    pub fn num_adversaries(mut self, v: usize) -> Self {
        self.num_adversaries = v;
        self
    }
    /// Sets `num_obstacles`.
    #[must_use]
    pub fn num_obstacles(mut self, v: usize) -> Self {
        self.num_obstacles = v;
        self
    }
    /// Sets `num_food`.
    #[must_use]
    pub fn num_food(mut self, v: usize) -> Self {
        self.num_food = v;
        self
    }
    /// Sets `num_forests`.
    #[must_use]
    pub fn num_forests(mut self, v: usize) -> Self {
        self.num_forests = v;
        self
    }
    /// Sets `max_cycles`.
    #[must_use]
    pub fn max_cycles(mut self, v: usize) -> Self {
        self.max_cycles = v;
        self
    }
    /// Sets `continuous_actions`.
    #[must_use]
    pub fn continuous_actions(mut self, v: bool) -> Self {
        self.continuous_actions = v;
        self
    }
    /// Sets `world`.
    #[must_use]
    pub fn world(mut self, v: MpeWorldParams) -> Self {
        self.world = v;
        self
    }
}

impl Params for SimpleWorldCommParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        for (name, v) in
            [("num_good", self.num_good), ("num_adversaries", self.num_adversaries), ("num_food", self.num_food)]
        {
            if v == 0 {
                return Err(EnvError::invalid(name, 0, "must be >= 1"));
            }
        }
        if self.max_cycles == 0 {
            return Err(EnvError::invalid("max_cycles", 0, "must be >= 1"));
        }
        self.world.validate()
    }
}

const WORLD_COMM_DIM_C: usize = 4;

/// Simple world comm's scenario: `leadadversary_0` (speaking, `dim_c` = 4), `adversary_*`,
/// `agent_*` (prey); then obstacles, food and forests. Agents in a forest are seen only by
/// agents in the same forest and by the leader.
#[derive(Debug, Clone)]
pub struct WorldComm {
    pub(crate) p: SimpleWorldCommParams,
}

impl WorldComm {
    fn n_agents(&self) -> usize {
        self.p.num_adversaries + self.p.num_good
    }
    fn food(&self) -> std::ops::Range<usize> {
        let start = self.n_agents() + self.p.num_obstacles;
        start..start + self.p.num_food
    }
    fn forests(&self) -> std::ops::Range<usize> {
        let start = self.food().end;
        start..start + self.p.num_forests
    }
    fn good(&self) -> std::ops::Range<usize> {
        self.p.num_adversaries..self.n_agents()
    }
    fn in_forests(&self, a: usize, world: &World) -> Vec<bool> {
        self.forests().map(|f| world.is_collision(a, f)).collect()
    }
}

impl Scenario for WorldComm {
    fn make_world(&self) -> (World, Vec<String>) {
        let p = &self.p;
        let mut agents = Vec::with_capacity(self.n_agents());
        let mut names = Vec::with_capacity(self.n_agents());
        for i in 0..self.n_agents() {
            let adv = i < p.num_adversaries;
            let mut e = Entity::agent(if adv { 0.075 } else { 0.045 }, true);
            e.accel = Some(if adv { 3.0 } else { 4.0 });
            e.max_speed = Some(if adv { 1.0 } else { 1.3 });
            if i == 0 {
                e = e.speaking();
                names.push("leadadversary_0".to_owned());
            } else if adv {
                names.push(format!("adversary_{}", i - 1));
            } else {
                names.push(format!("agent_{}", i - p.num_adversaries));
            }
            agents.push(e);
        }
        let landmarks = (0..p.num_obstacles)
            .map(|_| Entity::landmark(0.2, true))
            .chain((0..p.num_food).map(|_| Entity::landmark(0.03, false)))
            .chain((0..p.num_forests).map(|_| Entity::landmark(0.3, false)))
            .collect();
        (World::new(p.world.clone(), agents, landmarks).with_dim_c(WORLD_COMM_DIM_C), names)
    }

    fn reset(&mut self, world: &mut World, rng: &mut dyn RngCore) {
        for i in 0..world.n_agents {
            world.pos[i] = [uniform(rng, -1.0, 1.0), uniform(rng, -1.0, 1.0)];
            world.vel[i] = [0.0, 0.0];
        }
        // mpe2 draws every landmark (food and forests included), then food and forests again
        let all = world.n_agents..world.entities.len();
        for i in all.chain(self.food()).chain(self.forests()) {
            world.pos[i] = [uniform(rng, -0.9, 0.9), uniform(rng, -0.9, 0.9)];
            world.vel[i] = [0.0, 0.0];
        }
    }

    fn reward(&self, i: usize, world: &World) -> f64 {
        let na = self.p.num_adversaries;
        let mut rew = 0.0;
        if i < na {
            rew -= 0.1 * self.good().map(|a| world.dist(a, i)).fold(f64::INFINITY, f64::min);
            for ag in self.good() {
                for adv in 0..na {
                    if world.is_collision(ag, adv) {
                        rew += 5.0;
                    }
                }
            }
        } else {
            for a in 0..na {
                if world.is_collision(a, i) {
                    rew -= 5.0;
                }
            }
            for p in 0..2 {
                rew -= 2.0 * bound(world.pos[i][p].abs());
            }
            for f in self.food() {
                if world.is_collision(i, f) {
                    rew += 2.0;
                }
            }
            rew -= 0.05 * self.food().map(|f| world.dist(f, i)).fold(f64::INFINITY, f64::min);
        }
        rew
    }

    fn observation(&self, i: usize, world: &World) -> Vec<f64> {
        let na = self.p.num_adversaries;
        let mut o = vec![world.vel[i][0], world.vel[i][1], world.pos[i][0], world.pos[i][1]];
        for l in world.n_agents..world.entities.len() {
            o.extend([world.pos[l][0] - world.pos[i][0], world.pos[l][1] - world.pos[i][1]]);
        }
        let inf = self.in_forests(i, world);
        let mut other_vel = Vec::new();
        for other in (0..world.n_agents).filter(|&a| a != i) {
            let oth = self.in_forests(other, world);
            let same_forest = inf.iter().zip(&oth).any(|(&a, &b)| a && b);
            let visible = same_forest || (!inf.iter().any(|&v| v) && !oth.iter().any(|&v| v)) || i == 0;
            if visible {
                o.extend([world.pos[other][0] - world.pos[i][0], world.pos[other][1] - world.pos[i][1]]);
            } else {
                o.extend([0.0, 0.0]);
            }
            if other >= na {
                other_vel.extend(if visible { world.vel[other] } else { [0.0, 0.0] });
            }
        }
        let in_forest = inf.iter().map(|&v| if v { 1.0 } else { -1.0 });
        if i < na {
            o.extend(other_vel);
            o.extend(in_forest);
            o.extend_from_slice(&world.comm[0]);
        } else {
            o.extend(in_forest);
            o.extend(other_vel);
        }
        o
    }

    fn is_terminal(&self, _world: &World) -> bool {
        false
    }

    fn max_cycles(&self) -> usize {
        self.p.max_cycles
    }

    fn continuous_actions(&self) -> bool {
        self.p.continuous_actions
    }
}
