//! The particle world of the multi-agent particle environments (mpe2 `_mpe_utils/core.py`).

use serde::{Deserialize, Serialize};

use crate::common::{non_negative, positive};
use crate::error::{EnvError, Result};

/// The order of the world's semi-implicit update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MpeIntegrator {
    /// mpe2 / PettingZoo: `x += v·dt`, then `v ← v·(1 − damping) + F/m·dt`, then the speed cap.
    #[default]
    PositionFirst,
    /// The original OpenAI MPE (`openai/multiagent-particle-envs`, used by LaRe): velocity
    /// first (damping, force, speed cap), then `x += v'·dt`.
    VelocityFirst,
}

/// Physical constants of a particle world; the defaults are mpe2's `World`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `dt` | 0.1 | seconds per step | `> 0` |
/// | `damping` | 0.25 | velocity damping per step | `[0, 1]` |
/// | `contact_force` | 100.0 | contact stiffness | `>= 0` |
/// | `contact_margin` | 0.001 | softness of the contact (`k` in `k·softplus(−(d − d_min)/k)`) | `> 0` |
/// | `integrator` | `position_first` | [`MpeIntegrator`] | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MpeWorldParams {
    /// Time step.
    pub dt: f64,
    /// Velocity damping.
    pub damping: f64,
    /// Contact stiffness.
    pub contact_force: f64,
    /// Contact softness.
    pub contact_margin: f64,
    /// Update order.
    pub integrator: MpeIntegrator,
}

impl Default for MpeWorldParams {
    fn default() -> Self {
        Self {
            dt: 0.1,
            damping: 0.25,
            contact_force: 100.0,
            contact_margin: 1e-3,
            integrator: MpeIntegrator::PositionFirst,
        }
    }
}

impl MpeWorldParams {
    pub(crate) fn validate(&self) -> Result<()> {
        positive("world.dt", self.dt)?;
        non_negative("world.damping", self.damping)?;
        if self.damping > 1.0 {
            return Err(EnvError::invalid("world.damping", self.damping, "must be in [0, 1]"));
        }
        non_negative("world.contact_force", self.contact_force)?;
        positive("world.contact_margin", self.contact_margin)?;
        Ok(())
    }
}

/// Static properties of one entity (agent or landmark), as mpe2's `Entity` / `Agent`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// Radius.
    pub size: f64,
    /// Whether it moves (agents) or stays put (landmarks).
    pub movable: bool,
    /// Whether it takes part in contacts.
    pub collide: bool,
    /// Speed cap.
    pub max_speed: Option<f64>,
    /// Action sensitivity (force per unit action; 5 when `None`).
    pub accel: Option<f64>,
    /// Mass.
    pub mass: f64,
    /// Whether the agent cannot communicate (its communication state stays zero and its action
    /// has no communication part). Ignored for landmarks.
    pub silent: bool,
}

impl Entity {
    /// A silent agent of radius `size` (movable, mass 1).
    pub fn agent(size: f64, collide: bool) -> Self {
        Self { size, movable: true, collide, max_speed: None, accel: None, mass: 1.0, silent: true }
    }
    /// A landmark of radius `size` (fixed).
    pub fn landmark(size: f64, collide: bool) -> Self {
        Self { size, movable: false, collide, max_speed: None, accel: None, mass: 1.0, silent: true }
    }
    /// The same entity, able to communicate.
    #[must_use]
    pub fn speaking(mut self) -> Self {
        self.silent = false;
        self
    }
    /// The same entity, fixed in place.
    #[must_use]
    pub fn fixed(mut self) -> Self {
        self.movable = false;
        self
    }
}

/// NumPy's `logaddexp(0, v)` (same branches, so the same rounding).
fn logaddexp0(v: f64) -> f64 {
    if v == 0.0 {
        return std::f64::consts::LN_2;
    }
    let tmp = -v;
    if tmp > 0.0 {
        v.exp().ln_1p()
    } else {
        v + (-v).exp().ln_1p()
    }
}

/// A particle world: entities (agents first, then landmarks) and their state. Scenarios (see
/// [`Scenario`](crate::mpe::Scenario)) build one and read it for rewards and observations.
#[derive(Debug, Clone, PartialEq)]
pub struct World {
    /// Physical constants.
    pub params: MpeWorldParams,
    /// Every entity, agents first.
    pub entities: Vec<Entity>,
    /// Number of agents (the first `n_agents` entities).
    pub n_agents: usize,
    /// Positions.
    pub pos: Vec<[f64; 2]>,
    /// Velocities.
    pub vel: Vec<[f64; 2]>,
    /// Dimension of the communication channel (mpe2's `dim_c`; 0 when nobody speaks).
    pub dim_c: usize,
    /// Every agent's communication state (mpe2's `state.c`, `dim_c` values each; zeros for
    /// silent agents), set from the agents' communication actions after each step.
    pub comm: Vec<Vec<f64>>,
    forces: Vec<Option<[f64; 2]>>,
}

impl World {
    /// A world of `agents` and `landmarks`, all at the origin.
    pub fn new(params: MpeWorldParams, agents: Vec<Entity>, landmarks: Vec<Entity>) -> Self {
        let n_agents = agents.len();
        let entities: Vec<Entity> = agents.into_iter().chain(landmarks).collect();
        let n = entities.len();
        Self {
            params,
            entities,
            n_agents,
            pos: vec![[0.0; 2]; n],
            vel: vec![[0.0; 2]; n],
            dim_c: 0,
            comm: vec![Vec::new(); n_agents],
            forces: vec![None; n],
        }
    }

    /// The same world with a communication channel of `dim_c` values (states all zero).
    #[must_use]
    pub fn with_dim_c(mut self, dim_c: usize) -> Self {
        self.dim_c = dim_c;
        self.comm = vec![vec![0.0; dim_c]; self.n_agents];
        self
    }

    /// Sets every agent's communication state to zeros.
    pub fn clear_comm(&mut self) {
        self.comm = vec![vec![0.0; self.dim_c]; self.n_agents];
    }

    /// Distance between the centres of entities `a` and `b`.
    pub fn dist(&self, a: usize, b: usize) -> f64 {
        let d = [self.pos[a][0] - self.pos[b][0], self.pos[a][1] - self.pos[b][1]];
        (d[0] * d[0] + d[1] * d[1]).sqrt()
    }

    /// `dist < size_a + size_b` (mpe2's `is_collision`).
    pub fn is_collision(&self, a: usize, b: usize) -> bool {
        self.dist(a, b) < self.entities[a].size + self.entities[b].size
    }

    /// One world step with the agents' action forces `u` (already scaled by their
    /// sensitivity).
    pub fn step(&mut self, u: &[[f64; 2]]) {
        let n = self.entities.len();
        for f in &mut self.forces {
            *f = None;
        }
        for (i, ui) in u.iter().enumerate().take(self.n_agents) {
            if self.entities[i].movable {
                self.forces[i] = Some(*ui);
            }
        }
        let (cf, k) = (self.params.contact_force, self.params.contact_margin);
        for a in 0..n {
            for b in (a + 1)..n {
                if !(self.entities[a].collide && self.entities[b].collide) {
                    continue;
                }
                let delta = [self.pos[a][0] - self.pos[b][0], self.pos[a][1] - self.pos[b][1]];
                let dist = (delta[0] * delta[0] + delta[1] * delta[1]).sqrt();
                let dist_min = self.entities[a].size + self.entities[b].size;
                let penetration = logaddexp0(-(dist - dist_min) / k) * k;
                let force = [cf * delta[0] / dist * penetration, cf * delta[1] / dist * penetration];
                if self.entities[a].movable {
                    let prev = self.forces[a].unwrap_or([0.0; 2]);
                    self.forces[a] = Some([force[0] + prev[0], force[1] + prev[1]]);
                }
                if self.entities[b].movable {
                    let prev = self.forces[b].unwrap_or([0.0; 2]);
                    self.forces[b] = Some([-force[0] + prev[0], -force[1] + prev[1]]);
                }
            }
        }
        let (dt, keep) = (self.params.dt, 1.0 - self.params.damping);
        for i in 0..n {
            let e = &self.entities[i];
            if !e.movable {
                continue;
            }
            let position_first = self.params.integrator == MpeIntegrator::PositionFirst;
            if position_first {
                self.pos[i][0] += self.vel[i][0] * dt;
                self.pos[i][1] += self.vel[i][1] * dt;
            }
            let mut v = [self.vel[i][0] * keep, self.vel[i][1] * keep];
            if let Some(f) = self.forces[i] {
                v[0] += f[0] / e.mass * dt;
                v[1] += f[1] / e.mass * dt;
            }
            if let Some(max) = e.max_speed {
                let speed = (v[0] * v[0] + v[1] * v[1]).sqrt();
                if speed > max {
                    v = [v[0] / speed * max, v[1] / speed * max];
                }
            }
            self.vel[i] = v;
            if !position_first {
                self.pos[i][0] += v[0] * dt;
                self.pos[i][1] += v[1] * dt;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logaddexp_branches() {
        assert_eq!(logaddexp0(0.0), std::f64::consts::LN_2);
        assert!((logaddexp0(3.0) - (1.0 + 3f64.exp()).ln()).abs() < 1e-12);
        assert!((logaddexp0(-3.0) - (1.0 + (-3f64).exp()).ln()).abs() < 1e-15);
        assert!(logaddexp0(1000.0).is_finite());
    }

    #[test]
    fn overlapping_agents_push_apart() {
        let mut w =
            World::new(MpeWorldParams::default(), vec![Entity::agent(0.1, true), Entity::agent(0.1, true)], vec![]);
        w.pos = vec![[0.0, 0.0], [0.1, 0.0]];
        w.step(&[[0.0; 2], [0.0; 2]]);
        w.step(&[[0.0; 2], [0.0; 2]]);
        assert!(w.vel[0][0] < 0.0 && w.vel[1][0] > 0.0);
        assert!(w.dist(0, 1) > 0.1);
    }
}
