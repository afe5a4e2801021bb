//! The point maze (gymnasium-robotics `PointMaze_*-v3`, D4RL maze2d).

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{derive_seed, rng_from_seed, Env, Info, Params, RlCoreError, SeededRng, Space, Step, Valid};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::common::{boxed, check_box_action, non_negative, positive, snapshot_finite, EpisodeClock};
use crate::error::{EnvError, Result};
use crate::maze::contact;
use crate::maze::layout::{Maze, MazeLayout};
use crate::rng::{integers, uniform};
use crate::traits::{check_task, Snapshot, TaskParam, TaskParams};

/// The reward of a point maze.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MazeReward {
    /// `1` within `goal_threshold` of the goal, else `0` (`PointMaze_*-v3`, D4RL `maze2d-*`).
    #[default]
    Sparse,
    /// `exp(−‖xy − goal‖)` (`PointMaze_*Dense-v3`, D4RL `maze2d-*-dense`).
    Dense,
}

/// What a point-maze observation holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MazeObs {
    /// `[x, y, vx, vy, goal_x, goal_y]`: gymnasium-robotics' `observation` and `desired_goal`
    /// (its `achieved_goal` is `[x, y]`).
    #[default]
    WithGoal,
    /// `[x, y, vx, vy]`, as D4RL's maze2d (the goal is fixed per dataset).
    PositionVelocity,
}

/// Physical parameters of the point mass (gymnasium-robotics' `point.xml`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `mass` | 4.18879 | `1000 · 4/3 π 0.1³` (sphere of radius 0.1, density 1000) | `> 0` |
/// | `damping` | 1.0 | joint damping (implicit, as MuJoCo's Euler integrator) | `>= 0` |
/// | `gear` | 100.0 | motor gear: force = gear · ctrl | `> 0` |
/// | `timestep` | 0.01 | seconds per step (`frame_skip` 1) | `> 0` |
/// | `max_velocity` | 5.0 | velocities clipped to ±this before each step | `> 0` |
/// | `radius` | 0.1 | the ball's radius (wall contact) | `(0, 0.5)` |
/// | `contact_margin` | 0.004 | distance below which a wall contact acts (the ball's and the block's MuJoCo margins, 0.002 each) | `>= 0` |
/// | `wall_contact` | `soft` | [`WallContact`] model of the pure-Rust ball | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PointMassParams {
    /// Mass.
    pub mass: f64,
    /// Joint damping.
    pub damping: f64,
    /// Motor gear.
    pub gear: f64,
    /// Time step.
    pub timestep: f64,
    /// Velocity clip.
    pub max_velocity: f64,
    /// Ball radius.
    pub radius: f64,
    /// Contact distance.
    pub contact_margin: f64,
    /// Wall contact model (pure-Rust ball only; the MuJoCo ball always uses MuJoCo's).
    pub wall_contact: WallContact,
}

/// How the pure-Rust ball meets the walls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WallContact {
    /// MuJoCo's soft contact (default `solref`/`solimp`, frictionless), solved exactly as
    /// MuJoCo does: the same motion as gymnasium-robotics' MuJoCo ball.
    #[default]
    Soft,
    /// Rigid, frictionless, inelastic walls (the ball is pushed out along the normal and loses
    /// its normal velocity): simpler, not MuJoCo's motion.
    Rigid,
}

impl Default for PointMassParams {
    fn default() -> Self {
        Self {
            mass: 1000.0 * 4.0 / 3.0 * std::f64::consts::PI * 0.1 * 0.1 * 0.1,
            damping: 1.0,
            gear: 100.0,
            timestep: 0.01,
            max_velocity: 5.0,
            radius: 0.1,
            contact_margin: 0.004,
            wall_contact: WallContact::Soft,
        }
    }
}

impl PointMassParams {
    fn validate(&self) -> Result<()> {
        positive("physics.mass", self.mass)?;
        non_negative("physics.damping", self.damping)?;
        positive("physics.gear", self.gear)?;
        positive("physics.timestep", self.timestep)?;
        positive("physics.max_velocity", self.max_velocity)?;
        positive("physics.radius", self.radius)?;
        non_negative("physics.contact_margin", self.contact_margin)?;
        if self.radius >= 0.5 {
            return Err(EnvError::invalid("physics.radius", self.radius, "must be < 0.5 (half a cell)"));
        }
        Ok(())
    }
}

/// Parameters of [`PointMaze`]; the defaults are gymnasium-robotics' `PointMaze_UMaze-v3`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `layout` | `u_maze` | the map ([`MazeLayout`]) | |
/// | `reward` | `sparse` | [`MazeReward`] | |
/// | `continuing_task` | true | the episode does not end at the goal | |
/// | `reset_target` | false | with `continuing_task`, a new goal is drawn when the goal is reached | |
/// | `goal_threshold` | 0.45 | success radius (D4RL maze2d: 0.5) | `> 0` |
/// | `position_noise_range` | 0.25 | goal and start drawn uniformly within ±this (× scaling) around a cell centre | `[0, 0.5)` |
/// | `maze_size_scaling` | 1.0 | cell size | `> 0` |
/// | `goal_cell` | none | fix the goal cell `[row, col]` (gymnasium's `options["goal_cell"]`) | a free cell |
/// | `reset_cell` | none | fix the start cell `[row, col]` | a free cell |
/// | `max_episode_steps` | none = the layout's registered limit (300 / 600 / 800) | time limit; `0` = none | any |
/// | `observation` | `with_goal` | [`MazeObs`] | |
/// | `physics` | see [`PointMassParams`] | the point mass | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PointMazeParams {
    /// The map.
    pub layout: MazeLayout,
    /// Sparse or dense reward.
    pub reward: MazeReward,
    /// Whether reaching the goal does not end the episode.
    pub continuing_task: bool,
    /// Whether a reached goal is replaced by a new one (with `continuing_task`).
    pub reset_target: bool,
    /// Success radius.
    pub goal_threshold: f64,
    /// Position noise of goals and starts.
    pub position_noise_range: f64,
    /// Cell size.
    pub maze_size_scaling: f64,
    /// A fixed goal cell `[row, col]`.
    pub goal_cell: Option<[usize; 2]>,
    /// A fixed start cell `[row, col]`.
    pub reset_cell: Option<[usize; 2]>,
    /// Time limit (`None` = the layout's registered limit, `Some(0)` = none).
    pub max_episode_steps: Option<usize>,
    /// Observation layout.
    pub observation: MazeObs,
    /// The point mass.
    pub physics: PointMassParams,
}

impl Default for PointMazeParams {
    fn default() -> Self {
        Self {
            layout: MazeLayout::UMaze,
            reward: MazeReward::Sparse,
            continuing_task: true,
            reset_target: false,
            goal_threshold: 0.45,
            position_noise_range: 0.25,
            maze_size_scaling: 1.0,
            goal_cell: None,
            reset_cell: None,
            max_episode_steps: None,
            observation: MazeObs::WithGoal,
            physics: PointMassParams::default(),
        }
    }
}

impl PointMazeParams {
    /// Sets `layout`.
    #[must_use]
    pub fn layout(mut self, v: MazeLayout) -> Self {
        self.layout = v;
        self
    }
    /// Sets `reward`.
    #[must_use]
    pub fn reward(mut self, v: MazeReward) -> Self {
        self.reward = v;
        self
    }
    /// Sets `continuing_task`.
    #[must_use]
    pub fn continuing_task(mut self, v: bool) -> Self {
        self.continuing_task = v;
        self
    }
    /// Sets `reset_target`.
    #[must_use]
    pub fn reset_target(mut self, v: bool) -> Self {
        self.reset_target = v;
        self
    }
    /// Sets `goal_threshold`.
    #[must_use]
    pub fn goal_threshold(mut self, v: f64) -> Self {
        self.goal_threshold = v;
        self
    }
    /// Sets `position_noise_range`.
    #[must_use]
    pub fn position_noise_range(mut self, v: f64) -> Self {
        self.position_noise_range = v;
        self
    }
    /// Sets `maze_size_scaling`.
    #[must_use]
    pub fn maze_size_scaling(mut self, v: f64) -> Self {
        self.maze_size_scaling = v;
        self
    }
    /// Sets `goal_cell`.
    #[must_use]
    pub fn goal_cell(mut self, v: Option<[usize; 2]>) -> Self {
        self.goal_cell = v;
        self
    }
    /// Sets `reset_cell`.
    #[must_use]
    pub fn reset_cell(mut self, v: Option<[usize; 2]>) -> Self {
        self.reset_cell = v;
        self
    }
    /// Sets `max_episode_steps`.
    #[must_use]
    pub fn max_episode_steps(mut self, v: Option<usize>) -> Self {
        self.max_episode_steps = v;
        self
    }
    /// Sets `observation`.
    #[must_use]
    pub fn observation(mut self, v: MazeObs) -> Self {
        self.observation = v;
        self
    }
    /// Sets `physics`.
    #[must_use]
    pub fn physics(mut self, v: PointMassParams) -> Self {
        self.physics = v;
        self
    }

    /// D4RL's maze2d setting for `layout` (open, U, medium, large): its fixed goal cell,
    /// success radius 0.5, `(x, y, vx, vy)` observations. (D4RL also used another frame, reset
    /// noise ±0.1 with velocity noise and a 0.2 offset between the ball and the walls; see
    /// `docs/rl-envs.md`.)
    #[must_use]
    pub fn d4rl(layout: MazeLayout, reward: MazeReward) -> Self {
        let goal = layout.d4rl_goal_cell().map(|(r, c)| [r, c]);
        Self {
            goal_cell: goal,
            goal_threshold: 0.5,
            observation: MazeObs::PositionVelocity,
            reward,
            layout,
            ..Self::default()
        }
    }
}

impl Params for PointMazeParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        positive("goal_threshold", self.goal_threshold)?;
        non_negative("position_noise_range", self.position_noise_range)?;
        if self.position_noise_range >= 0.5 {
            return Err(EnvError::invalid("position_noise_range", self.position_noise_range, "must be < 0.5"));
        }
        positive("maze_size_scaling", self.maze_size_scaling)?;
        self.physics.validate()?;
        let maze = Maze::new(&self.layout, self.maze_size_scaling)?;
        for (name, cell) in [("goal_cell", self.goal_cell), ("reset_cell", self.reset_cell)] {
            if let Some([r, c]) = cell {
                if !maze.is_free(r, c) {
                    return Err(EnvError::invalid(name, format!("[{r}, {c}]"), "must be a free cell of the map"));
                }
            }
        }
        if self.reset_cell.is_none() {
            // gymnasium-robotics draws starts until one is farther than half a cell from the
            // goal; make sure one exists for every goal.
            let goals: Vec<[f64; 2]> = match self.goal_cell {
                Some([r, c]) => vec![maze.cell_to_xy(r, c)],
                None => maze.goal_locations().to_vec(),
            };
            for g in goals {
                if !maze.reset_locations().iter().any(|r| r != &g) {
                    return Err(EnvError::invalid(
                        "layout",
                        format!("{:?}", self.layout),
                        "needs a start cell other than each goal cell",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The physics of a point maze's ball: [`PointMass`] (pure Rust) or, with the `mujoco`
/// feature, `rl_envs::mujoco::MujocoPointMass` (gymnasium-robotics' model in MuJoCo).
pub trait PointPhysics: std::fmt::Debug {
    /// The physics state kept in snapshots.
    type State: Clone + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned;
    /// Starts an episode with the ball at rest at `pos` (a simulator also clears its history).
    fn reset(&mut self, pos: [f64; 2]) {
        self.set(pos, [0.0, 0.0]);
    }
    /// Sets the ball's position and velocity (within an episode).
    fn set(&mut self, pos: [f64; 2], vel: [f64; 2]);
    /// Advances one step with controls `ctrl` (already clipped to `[-1, 1]`); the velocity has
    /// been clipped to `±max_velocity` with [`PointPhysics::set`].
    fn step(&mut self, ctrl: [f64; 2]);
    /// Position.
    fn pos(&self) -> [f64; 2];
    /// Velocity.
    fn vel(&self) -> [f64; 2];
    /// The snapshot state.
    fn save(&self) -> Self::State;
    /// Restores a snapshot state.
    ///
    /// # Errors
    /// [`EnvError::BadSnapshot`] when it does not fit.
    fn load(&mut self, state: &Self::State) -> Result<()>;
    /// Sets mass, damping and gear.
    ///
    /// # Errors
    /// [`EnvError::InvalidParameter`] when the backend cannot apply them.
    fn set_physical(&mut self, mass: f64, damping: f64, gear: f64) -> Result<()>;
}

/// The pure-Rust point mass: MuJoCo's Euler step of gymnasium-robotics' ball (implicit joint
/// damping: `a = (gear·u − b·v + F_c) / (m + h·b)`, `v' = v + h·a`, `x' = x + h·v'`) with the
/// wall-contact force `F_c` of MuJoCo's soft contact model, computed as MuJoCo computes it (see
/// `contact.rs`): the motion of gymnasium-robotics' MuJoCo ball, walls included, without
/// MuJoCo. [`WallContact::Rigid`] replaces the contact model by rigid walls.
#[derive(Debug, Clone)]
pub struct PointMass {
    params: PointMassParams,
    walls: Vec<[f64; 2]>,
    half: f64,
    state: PointMassState,
}

/// State of a [`PointMass`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PointMassState {
    /// Position.
    pub pos: [f64; 2],
    /// Velocity.
    pub vel: [f64; 2],
}

impl PointMass {
    /// A ball with `params` in `maze`.
    pub fn new(params: PointMassParams, maze: &Maze) -> Self {
        Self {
            params,
            walls: maze.walls().to_vec(),
            half: 0.5 * maze.scaling(),
            state: PointMassState { pos: [0.0; 2], vel: [0.0; 2] },
        }
    }

    fn resolve_walls(&mut self) {
        let r = self.params.radius;
        let h = self.half;
        for _ in 0..2 {
            for w in &self.walls {
                let p = self.state.pos;
                let closest = [p[0].clamp(w[0] - h, w[0] + h), p[1].clamp(w[1] - h, w[1] + h)];
                let d = [p[0] - closest[0], p[1] - closest[1]];
                let dist2 = d[0] * d[0] + d[1] * d[1];
                if dist2 >= r * r {
                    continue;
                }
                let n = if dist2 > 0.0 {
                    let dist = dist2.sqrt();
                    let n = [d[0] / dist, d[1] / dist];
                    self.state.pos = [closest[0] + n[0] * r, closest[1] + n[1] * r];
                    n
                } else if h - (p[0] - w[0]).abs() < h - (p[1] - w[1]).abs() {
                    // centre inside the block: leave along the axis of least penetration
                    let n = [if p[0] >= w[0] { 1.0 } else { -1.0 }, 0.0];
                    self.state.pos[0] = w[0] + n[0] * (h + r);
                    n
                } else {
                    let n = [0.0, if p[1] >= w[1] { 1.0 } else { -1.0 }];
                    self.state.pos[1] = w[1] + n[1] * (h + r);
                    n
                };
                let vn = self.state.vel[0] * n[0] + self.state.vel[1] * n[1];
                if vn < 0.0 {
                    self.state.vel[0] -= vn * n[0];
                    self.state.vel[1] -= vn * n[1];
                }
            }
        }
    }
}

impl PointPhysics for PointMass {
    type State = PointMassState;
    fn set(&mut self, pos: [f64; 2], vel: [f64; 2]) {
        self.state = PointMassState { pos, vel };
    }
    fn step(&mut self, ctrl: [f64; 2]) {
        let p = &self.params;
        let (m, b, h) = (p.mass, p.damping, p.timestep);
        let v = self.state.vel;
        // MuJoCo: qfrc_smooth = passive (−b·v) + actuator (gear·u)
        let smooth = [-b * v[0] + p.gear * ctrl[0], -b * v[1] + p.gear * ctrl[1]];
        let constraint = if p.wall_contact == WallContact::Soft {
            let inv_m = 1.0 / m;
            let a0 = [smooth[0] * inv_m, smooth[1] * inv_m];
            let ball = contact::Ball { pos: self.state.pos, vel: v, radius: p.radius, mass: m };
            let rows = contact::rows(&ball, &self.walls, self.half, p.contact_margin, h);
            contact::constraint_force(&rows, a0, inv_m)
        } else {
            [0.0, 0.0]
        };
        let inv = 1.0 / (m + h * b);
        for k in 0..2 {
            let qacc = (smooth[k] + constraint[k]) * inv;
            self.state.vel[k] += qacc * h;
            self.state.pos[k] += h * self.state.vel[k];
        }
        if p.wall_contact == WallContact::Rigid {
            self.resolve_walls();
        }
    }
    fn pos(&self) -> [f64; 2] {
        self.state.pos
    }
    fn vel(&self) -> [f64; 2] {
        self.state.vel
    }
    fn save(&self) -> PointMassState {
        self.state
    }
    fn load(&mut self, state: &PointMassState) -> Result<()> {
        snapshot_finite("point mass", &[state.pos[0], state.pos[1], state.vel[0], state.vel[1]])?;
        self.state = *state;
        Ok(())
    }
    fn set_physical(&mut self, mass: f64, damping: f64, gear: f64) -> Result<()> {
        self.params.mass = mass;
        self.params.damping = damping;
        self.params.gear = gear;
        Ok(())
    }
}

/// The state of a [`PointMazeEnv`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointMazeState<S> {
    /// The ball.
    pub physics: S,
    /// The goal.
    pub goal: [f64; 2],
    /// Generator of in-episode goal changes (`reset_target`), seeded at reset.
    pub goal_rng: Option<SeededRng>,
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
}

/// A point maze with the physics backend `P`; [`PointMaze`] is the pure-Rust one.
///
/// gymnasium-robotics' `PointMazeEnv` (the D4RL maze2d task): a ball of radius 0.1 driven by
/// two motors (`a ∈ [-1, 1]²`, force `100·a`) in a maze of unit cells.
///
/// ```text
/// reset: goal  = a goal cell (uniform) + U(±0.25)² noise; start = a reset cell farther than
///        half a cell from the goal + U(±0.25)² noise; velocity 0
/// step:  a ← clip(a, -1, 1); v ← clip(v, -5, 5); one MuJoCo Euler step (dt 0.01)
///        d = ‖xy − goal‖; reward = [d ≤ 0.45] (sparse) or exp(−d) (dense)
///        terminated = !continuing_task and d ≤ 0.45
/// ```
///
/// Resets with [`NumpyRng::new(seed)`](crate::rng::NumpyRng) reproduce gymnasium-robotics'
/// `reset(seed=seed)` exactly (goal and start). With `reset_target`, goal changes during an
/// episode draw from a generator seeded from the reset generator (gymnasium-robotics keeps
/// drawing from its reset generator, so those episodes match it in distribution only).
#[derive(Debug, Clone)]
pub struct PointMazeEnv<P: PointPhysics> {
    params: PointMazeParams,
    maze: Maze,
    max_steps: usize,
    obs_space: Space,
    act_space: Space,
    physics: P,
    goal: [f64; 2],
    goal_rng: Option<SeededRng>,
    clock: EpisodeClock,
}

/// The pure-Rust point maze (MuJoCo's motion re-implemented, walls included).
pub type PointMaze = PointMazeEnv<PointMass>;

impl PointMaze {
    /// A point maze with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<PointMazeParams>) -> Result<Self> {
        let maze = Maze::new(&params.layout, params.maze_size_scaling)?;
        let physics = PointMass::new(params.physics.clone(), &maze);
        Self::with_physics(params, physics)
    }
}

impl<P: PointPhysics> PointMazeEnv<P> {
    /// A point maze with `params` on the physics backend `physics` (built for the same maze).
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn with_physics(params: Valid<PointMazeParams>, physics: P) -> Result<Self> {
        let params = params.into_inner();
        let maze = Maze::new(&params.layout, params.maze_size_scaling)?;
        let max_steps = params.max_episode_steps.unwrap_or_else(|| params.layout.registered_max_steps());
        let obs_dim = match params.observation {
            MazeObs::WithGoal => 6,
            MazeObs::PositionVelocity => 4,
        };
        Ok(Self {
            obs_space: Space::symmetric(obs_dim, f32::INFINITY)?,
            act_space: boxed(vec![-1.0, -1.0], vec![1.0, 1.0])?,
            maze,
            max_steps,
            params,
            physics,
            goal: [0.0; 2],
            goal_rng: None,
            clock: EpisodeClock::default(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &PointMazeParams {
        &self.params
    }

    /// The maze geometry.
    pub fn maze(&self) -> &Maze {
        &self.maze
    }

    /// The current goal.
    pub fn goal(&self) -> [f64; 2] {
        self.goal
    }

    /// Moves the goal (D4RL's `set_target`, e.g. when collecting a dataset without resets).
    ///
    /// # Errors
    /// [`EnvError::NonFinite`] for a NaN or infinite coordinate.
    pub fn set_goal(&mut self, goal: [f64; 2]) -> Result<()> {
        crate::error::check_finite_f64("goal", &goal)?;
        self.goal = goal;
        Ok(())
    }

    /// The info gymnasium-robotics' `reset` returns, for the current state: `success`
    /// (`‖xy − goal‖ <= goal_threshold`), the key every step's info also holds.
    pub fn reset_info(&self) -> Info {
        Info::new().with("success", self.distance(self.physics.pos()) <= self.params.goal_threshold)
    }

    /// The ball's position.
    pub fn position(&self) -> [f64; 2] {
        self.physics.pos()
    }

    /// The ball's velocity.
    pub fn velocity(&self) -> [f64; 2] {
        self.physics.vel()
    }

    /// The time limit in force (0 = none).
    pub fn max_episode_steps(&self) -> usize {
        self.max_steps
    }

    /// The physics backend.
    pub fn physics(&self) -> &P {
        &self.physics
    }

    fn noisy(&self, xy: [f64; 2], rng: &mut dyn RngCore) -> [f64; 2] {
        let r = self.params.position_noise_range;
        let s = self.maze.scaling();
        let nx = uniform(rng, -r, r) * s;
        let ny = uniform(rng, -r, r) * s;
        [xy[0] + nx, xy[1] + ny]
    }

    fn draw_goal(&self, rng: &mut dyn RngCore) -> [f64; 2] {
        let goals = self.maze.goal_locations();
        let g = goals[integers(rng, goals.len()).min(goals.len() - 1)];
        self.noisy(g, rng)
    }

    fn obs(&self) -> Array1<f32> {
        let (p, v) = (self.physics.pos(), self.physics.vel());
        let mut o = vec![p[0] as f32, p[1] as f32, v[0] as f32, v[1] as f32];
        if self.params.observation == MazeObs::WithGoal {
            o.extend([self.goal[0] as f32, self.goal[1] as f32]);
        }
        Array1::from(o)
    }

    fn distance(&self, p: [f64; 2]) -> f64 {
        let d = [p[0] - self.goal[0], p[1] - self.goal[1]];
        (d[0] * d[0] + d[1] * d[1]).sqrt()
    }
}

impl<P: PointPhysics> Env for PointMazeEnv<P> {
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    fn action_space(&self) -> &Space {
        &self.act_space
    }

    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let goal = match self.params.goal_cell {
            Some([r, c]) => self.noisy(self.maze.cell_to_xy(r, c), rng),
            None => self.draw_goal(rng),
        };
        self.goal = goal;
        let start = match self.params.reset_cell {
            Some([r, c]) => self.maze.cell_to_xy(r, c),
            None => {
                let resets = self.maze.reset_locations();
                let limit = 0.5 * self.maze.scaling();
                let mut pos = goal;
                let mut tries = 0;
                while self.distance(pos) <= limit {
                    pos = resets[integers(rng, resets.len()).min(resets.len() - 1)];
                    tries += 1;
                    if tries > 100_000 {
                        return Err(RlCoreError::invalid("layout", "?", "no start cell far enough from the goal"));
                    }
                }
                pos
            }
        };
        let start = self.noisy(start, rng);
        self.physics.reset(start);
        self.goal_rng = (self.params.continuing_task && self.params.reset_target)
            .then(|| rng_from_seed(derive_seed(rng.next_u64(), 0x6d61_7a65)));
        self.clock.start();
        Ok(self.obs())
    }

    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.clock.guard()?;
        check_box_action(&self.act_space, action)?;
        let ctrl = [f64::from(action[0].clamp(-1.0, 1.0)), f64::from(action[1].clamp(-1.0, 1.0))];
        let vmax = self.params.physics.max_velocity;
        let v = self.physics.vel();
        self.physics.set(self.physics.pos(), [v[0].clamp(-vmax, vmax), v[1].clamp(-vmax, vmax)]);
        self.physics.step(ctrl);
        let pos = self.physics.pos();
        let dist = self.distance(pos);
        if !(dist.is_finite() && self.physics.vel().iter().all(|v| v.is_finite())) {
            self.clock.needs_reset = true;
            return Err(RlCoreError::NonFinite { what: "point maze state".into(), index: 0, value: dist });
        }
        let thr = self.params.goal_threshold;
        let reward = match self.params.reward {
            MazeReward::Dense => (-dist).exp(),
            MazeReward::Sparse => f64::from(u8::from(dist <= thr)),
        };
        let success = dist <= thr;
        let terminated = !self.params.continuing_task && success;
        let truncated = self.clock.tick(terminated, self.max_steps);
        let obs = self.obs();
        // gymnasium-robotics updates the goal after computing the observation
        if self.params.continuing_task
            && self.params.reset_target
            && dist <= thr
            && self.maze.goal_locations().len() > 1
        {
            if let Some(mut g) = self.goal_rng.take() {
                let mut tries = 0;
                while self.distance(pos) <= thr && tries < 100_000 {
                    self.goal = self.draw_goal(&mut g);
                    tries += 1;
                }
                self.goal_rng = Some(g);
            }
        }
        // gymnasium-robotics: info["success"], measured before the goal moves
        Ok(Step::new(obs, reward as f32, terminated, truncated).with_info(Info::new().with("success", success)))
    }
}

impl<P: PointPhysics> Snapshot for PointMazeEnv<P> {
    type State = PointMazeState<P::State>;
    fn snapshot(&self) -> Self::State {
        PointMazeState {
            physics: self.physics.save(),
            goal: self.goal,
            goal_rng: self.goal_rng.clone(),
            clock: self.clock,
        }
    }
    fn restore(&mut self, state: &Self::State) -> Result<()> {
        snapshot_finite("goal", &state.goal)?;
        self.physics.load(&state.physics)?;
        self.goal = state.goal;
        self.goal_rng.clone_from(&state.goal_rng);
        self.clock = state.clock;
        Ok(())
    }
}

impl<P: PointPhysics> TaskParams for PointMazeEnv<P> {
    fn task_spec(&self) -> Vec<TaskParam> {
        let d = PointMassParams::default();
        vec![
            TaskParam::new("mass", d.mass, 1e-3, 1e3),
            TaskParam::new("damping", d.damping, 0.0, 1e3),
            TaskParam::new("gear", d.gear, 1e-3, 1e4),
        ]
    }
    fn task(&self) -> Vec<f64> {
        let p = &self.params.physics;
        vec![p.mass, p.damping, p.gear]
    }
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        check_task(&self.task_spec(), task)?;
        self.physics.set_physical(task[0], task[1], task[2])?;
        let p = &mut self.params.physics;
        (p.mass, p.damping, p.gear) = (task[0], task[1], task[2]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::NumpyRng;
    use ndarray::array;

    fn env(p: PointMazeParams) -> PointMaze {
        PointMaze::new(p.check().unwrap()).unwrap()
    }

    #[test]
    fn walls_stop_the_ball() {
        let mut e = env(PointMazeParams::default().reset_cell(Some([1, 1])).goal_cell(Some([3, 1])));
        e.reset(&mut NumpyRng::new(0)).unwrap();
        // push up into the top wall (row 0) for a while
        for _ in 0..140 {
            e.step(array![0.0, 1.0].view()).unwrap();
        }
        let p = e.position();
        let m = e.maze().clone();
        assert!(m.wall_clearance(p) >= 0.1 - 1e-9, "{p:?} clearance {}", m.wall_clearance(p));
        assert!(e.velocity()[1].abs() < 1e-9);
        // and left into the left wall
        for _ in 0..140 {
            e.step(array![-1.0, 0.0].view()).unwrap();
        }
        assert!(m.wall_clearance(e.position()) >= 0.1 - 1e-9);
    }

    #[test]
    fn rigid_walls_option() {
        let physics = PointMassParams { wall_contact: WallContact::Rigid, ..PointMassParams::default() };
        let mut e = env(PointMazeParams::default().reset_cell(Some([1, 1])).goal_cell(Some([3, 1])).physics(physics));
        e.reset(&mut NumpyRng::new(0)).unwrap();
        for _ in 0..140 {
            e.step(array![0.0, 1.0].view()).unwrap();
        }
        // rigid: the ball sits exactly on the wall, at rest against it
        let clearance = e.maze().wall_clearance(e.position());
        assert!((clearance - 0.1).abs() < 1e-9, "{clearance}");
        assert_eq!(e.velocity()[1], 0.0);
    }

    #[test]
    fn sparse_terminal_and_reset_target() {
        // start on the goal cell's neighbour, not continuing: reaching the goal terminates
        let p = PointMazeParams::default()
            .layout(MazeLayout::Open)
            .continuing_task(false)
            .goal_cell(Some([2, 3]))
            .reset_cell(Some([2, 2]))
            .position_noise_range(0.0);
        let mut e = env(p);
        e.reset(&mut NumpyRng::new(1)).unwrap();
        let mut done = false;
        for _ in 0..300 {
            let s = e.step(array![0.3, 0.0].view()).unwrap();
            if s.terminated {
                assert_eq!(s.reward, 1.0);
                done = true;
                break;
            }
        }
        assert!(done);
        assert!(matches!(e.step(array![0.0, 0.0].view()), Err(RlCoreError::NeedsReset)));
        // continuing with reset_target: the goal moves away once reached
        let p = PointMazeParams::default()
            .layout(MazeLayout::Open)
            .reset_target(true)
            .goal_cell(Some([2, 3]))
            .reset_cell(Some([2, 2]))
            .position_noise_range(0.0);
        let mut e = env(p);
        e.reset(&mut NumpyRng::new(1)).unwrap();
        let g0 = e.goal();
        for _ in 0..300 {
            e.step(array![0.3, 0.0].view()).unwrap();
            if e.goal() != g0 {
                assert!(e.distance(e.position()) > 0.45);
                return;
            }
        }
        panic!("goal never moved");
    }

    #[test]
    fn params_are_checked() {
        assert!(PointMazeParams::default().goal_cell(Some([0, 0])).check().is_err());
        assert!(PointMazeParams::default().position_noise_range(0.6).check().is_err());
        let one = MazeLayout::Custom { rows: vec!["###".into(), "#.#".into(), "###".into()] };
        assert!(PointMazeParams::default().layout(one).check().is_err());
        let p = PointMazeParams::d4rl(MazeLayout::Medium, MazeReward::Dense);
        assert_eq!(p.goal_cell, Some([6, 6]));
        let e = env(p);
        assert_eq!(e.observation_space().dim(), 4);
        assert_eq!(e.max_episode_steps(), 600);
    }
}
