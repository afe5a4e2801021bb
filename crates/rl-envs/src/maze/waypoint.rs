//! D4RL's waypoint controller (`d4rl/pointmaze/waypoint_controller.py`), the expert that
//! generated the maze2d datasets.

use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

use crate::common::{non_negative, positive};
use crate::error::{check_finite_f64, EnvError, Result};
use crate::maze::layout::Maze;
use crate::rng::next_double;
use crate::traits::Snapshot;

/// Parameters of [`WaypointController`]; the defaults are D4RL's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `p_gain` | 10.0 | proportional gain towards the waypoint | `> 0` |
/// | `d_gain` | −1.0 | gain on the velocity | finite |
/// | `solve_thresh` | 0.1 | distance at which a waypoint (or the goal) counts as reached | `> 0` |
/// | `vel_thresh` | 0.1 | ... and the displacement per step must be below this | `> 0` |
/// | `q_iterations` | 50 | Q-iteration sweeps on the grid | `>= 1` |
/// | `discount` | 0.99 | Q-iteration discount | `(0, 1)` |
/// | `jitter` | 0.2 | intermediate waypoints are moved by `−U(0, 1)·jitter` cells per axis | `>= 0` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WaypointParams {
    /// Proportional gain.
    pub p_gain: f64,
    /// Velocity gain.
    pub d_gain: f64,
    /// Waypoint radius.
    pub solve_thresh: f64,
    /// Speed threshold.
    pub vel_thresh: f64,
    /// Q-iteration sweeps.
    pub q_iterations: usize,
    /// Q-iteration discount.
    pub discount: f64,
    /// Waypoint jitter (cells).
    pub jitter: f64,
}

impl Default for WaypointParams {
    fn default() -> Self {
        Self {
            p_gain: 10.0,
            d_gain: -1.0,
            solve_thresh: 0.1,
            vel_thresh: 0.1,
            q_iterations: 50,
            discount: 0.99,
            jitter: 0.2,
        }
    }
}

impl Params for WaypointParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        positive("p_gain", self.p_gain)?;
        if !self.d_gain.is_finite() {
            return Err(EnvError::invalid("d_gain", self.d_gain, "must be finite"));
        }
        positive("solve_thresh", self.solve_thresh)?;
        positive("vel_thresh", self.vel_thresh)?;
        if self.q_iterations == 0 {
            return Err(EnvError::invalid("q_iterations", 0, "must be >= 1"));
        }
        if !(self.discount > 0.0 && self.discount < 1.0) {
            return Err(EnvError::invalid("discount", self.discount, "must be in (0, 1)"));
        }
        non_negative("jitter", self.jitter)?;
        Ok(())
    }
}

/// The planner state of a [`WaypointController`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WaypointState {
    /// The goal cell `(row, col)` the waypoints lead to.
    pub target_cell: Option<(usize, usize)>,
    /// The waypoints (`xy`), the last one the target cell's centre.
    pub waypoints: Vec<[f64; 2]>,
    /// Index of the waypoint being approached.
    pub index: usize,
    /// The position at the previous call.
    pub prev_loc: [f64; 2],
}

/// D4RL's maze2d expert: plans a path of cells to the goal's cell by Q-iteration on the grid
/// (reward 1 in the goal cell, deterministic moves, greedy rollout), jitters the intermediate
/// waypoints by `−U(0, 1)·0.2` cells per axis, and steers with
/// `a = clip(p_gain·(waypoint − xy) + d_gain·v, -1, 1)`, advancing to the next waypoint once
/// within `solve_thresh` and slower than `vel_thresh` per step. It replans whenever the goal
/// moves to another cell. D4RL made its maze2d datasets by following this controller (with
/// `N(0, 0.5²)` action noise for the noisy variants) and drawing a new goal every episode
/// without resetting the ball (`PointMaze::set_goal`).
///
/// D4RL works in a frame where `x` is the row and `y` the column; the controller here works in
/// gymnasium-robotics' frame. Moves are tried in D4RL's order (no-op, column −1, column +1,
/// row −1, row +1), so ties between equally short paths break the same way; the jitter is drawn
/// from the caller's generator instead of NumPy's global one.
///
/// ```
/// use rl_core::{Env, Params};
/// use rl_envs::maze::{PointMaze, PointMazeParams, WaypointController, WaypointParams};
/// let mut env = PointMaze::new(PointMazeParams::default().check()?)?;
/// let mut ctrl = WaypointController::new(WaypointParams::default().check()?, env.maze().clone());
/// let mut rng = rl_core::rng_from_seed(0);
/// env.reset(&mut rng)?;
/// let mut reward = 0.0;
/// for _ in 0..300 {
///     let (a, _) = ctrl.act(env.position(), env.velocity(), env.goal(), &mut rng)?;
///     reward += env.step(ndarray::arr1(&a).view())?.reward;
/// }
/// assert!(reward > 0.0); // reached the goal
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct WaypointController {
    params: WaypointParams,
    maze: Maze,
    state: WaypointState,
}

/// D4RL's move order: no-op, up (col − 1), down (col + 1), left (row − 1), right (row + 1).
const MOVES: [(i64, i64); 5] = [(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)];

impl WaypointController {
    /// A controller for `maze`.
    pub fn new(params: Valid<WaypointParams>, maze: Maze) -> Self {
        Self { params: params.into_inner(), maze, state: WaypointState::default() }
    }

    /// The current plan.
    pub fn state(&self) -> &WaypointState {
        &self.state
    }

    fn cell_of(&self, xy: [f64; 2]) -> Result<(usize, usize)> {
        let (r, c) = self.maze.xy_to_cell(xy);
        if r < 0 || c < 0 || !self.maze.is_free(r as usize, c as usize) {
            return Err(EnvError::invalid(
                "position",
                format!("{xy:?}"),
                format!("is in cell ({r}, {c}), not a free cell"),
            ));
        }
        Ok((r as usize, c as usize))
    }

    fn step_cell(&self, s: (usize, usize), a: usize) -> (usize, usize) {
        let (dr, dc) = MOVES[a];
        let (r, c) = (s.0 as i64 + dr, s.1 as i64 + dc);
        if r >= 0 && c >= 0 && self.maze.is_free(r as usize, c as usize) {
            (r as usize, c as usize)
        } else {
            s
        }
    }

    /// The cells of the greedy path from `start` to `target` (both free), target last; at most
    /// 100 cells (D4RL's rollout limit).
    pub fn plan(&self, start: (usize, usize), target: (usize, usize)) -> Vec<(usize, usize)> {
        let (nr, nc) = (self.maze.n_rows(), self.maze.n_cols());
        let idx = |s: (usize, usize)| s.0 * nc + s.1;
        let mut q = vec![[0.0f64; 5]; nr * nc];
        for _ in 0..self.params.q_iterations {
            let v: Vec<f64> = q.iter().map(|qs| qs.iter().copied().fold(f64::NEG_INFINITY, f64::max)).collect();
            let mut new_q = vec![[0.0f64; 5]; nr * nc];
            for r in 0..nr {
                for c in 0..nc {
                    if !self.maze.is_free(r, c) {
                        continue;
                    }
                    let reward = if (r, c) == target { 1.0 } else { 0.0 };
                    for (a, slot) in new_q[idx((r, c))].iter_mut().enumerate() {
                        *slot = reward + self.params.discount * v[idx(self.step_cell((r, c), a))];
                    }
                }
            }
            q = new_q;
        }
        let mut s = start;
        let mut path = Vec::new();
        for _ in 0..100 {
            let qs = &q[idx(s)];
            // first maximum, as numpy.argmax
            let mut a = 0;
            for k in 1..5 {
                if qs[k] > qs[a] {
                    a = k;
                }
            }
            s = self.step_cell(s, a);
            path.push(s);
            if s == target {
                break;
            }
        }
        path
    }

    fn new_target(&mut self, start: [f64; 2], target: (usize, usize), rng: &mut dyn RngCore) -> Result<()> {
        let start_cell = self.cell_of(start)?;
        let path = self.plan(start_cell, target);
        let waypoints = path
            .iter()
            .map(|&(r, c)| {
                let mut rc = [r as f64, c as f64];
                if (r, c) != target {
                    rc[0] -= next_double(rng) * self.params.jitter;
                    rc[1] -= next_double(rng) * self.params.jitter;
                }
                self.maze.rowcol_f_to_xy(rc)
            })
            .collect();
        self.state = WaypointState {
            target_cell: Some(target),
            waypoints,
            index: 0,
            prev_loc: self.maze.cell_to_xy(start_cell.0, start_cell.1),
        };
        Ok(())
    }

    /// The action for a ball at `position` with `velocity` heading for `goal`, and whether the
    /// goal cell's centre is reached (within `solve_thresh`, slow).
    ///
    /// # Errors
    /// [`EnvError::NonFinite`] for NaN inputs; [`EnvError::InvalidParameter`] when the ball or
    /// the goal is not in a free cell.
    pub fn act(
        &mut self,
        position: [f64; 2],
        velocity: [f64; 2],
        goal: [f64; 2],
        rng: &mut dyn RngCore,
    ) -> Result<([f32; 2], bool)> {
        check_finite_f64("position", &position)?;
        check_finite_f64("velocity", &velocity)?;
        check_finite_f64("goal", &goal)?;
        let goal_cell = self.cell_of(goal)?;
        if self.state.target_cell != Some(goal_cell) || self.state.waypoints.is_empty() {
            self.new_target(position, goal_cell, rng)?;
        }
        let target = self.maze.cell_to_xy(goal_cell.0, goal_cell.1);
        let norm = |d: [f64; 2]| (d[0] * d[0] + d[1] * d[1]).sqrt();
        let dist = norm([position[0] - target[0], position[1] - target[1]]);
        let moved = norm([self.state.prev_loc[0] - position[0], self.state.prev_loc[1] - position[1]]);
        let p = &self.params;
        let not_solved = dist >= p.solve_thresh || moved >= p.vel_thresh;
        let last = self.state.waypoints.len() - 1;
        let next = if not_solved { self.state.waypoints[self.state.index.min(last)] } else { target };
        let a = [
            p.p_gain * (next[0] - position[0]) + p.d_gain * velocity[0],
            p.p_gain * (next[1] - position[1]) + p.d_gain * velocity[1],
        ];
        let dist_next = norm([position[0] - next[0], position[1] - next[1]]);
        if not_solved && dist_next < p.solve_thresh && moved < p.vel_thresh && self.state.index < last {
            self.state.index += 1;
        }
        self.state.prev_loc = position;
        Ok(([a[0].clamp(-1.0, 1.0) as f32, a[1].clamp(-1.0, 1.0) as f32], !not_solved))
    }
}

impl Snapshot for WaypointController {
    type State = WaypointState;
    fn snapshot(&self) -> WaypointState {
        self.state.clone()
    }
    fn restore(&mut self, state: &WaypointState) -> Result<()> {
        if let Some((r, c)) = state.target_cell {
            if !self.maze.is_free(r, c) {
                return Err(EnvError::snapshot(format!("target cell ({r}, {c}) is not free in this maze")));
            }
            if state.waypoints.is_empty() || state.index >= state.waypoints.len() {
                return Err(EnvError::snapshot("waypoint index outside the plan"));
            }
        }
        for w in &state.waypoints {
            crate::common::snapshot_finite("waypoint", w)?;
        }
        crate::common::snapshot_finite("prev_loc", &state.prev_loc)?;
        self.state = state.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maze::{MazeLayout, PointMaze, PointMazeParams};
    use rl_core::Env;

    #[test]
    fn plans_shortest_paths() {
        let maze = Maze::new(&MazeLayout::UMaze, 1.0).unwrap();
        let ctrl = WaypointController::new(WaypointParams::default().check().unwrap(), maze);
        // U maze: (1,1) -> (3,1) goes around through (1,3) and (3,3): 6 moves
        let path = ctrl.plan((1, 1), (3, 1));
        assert_eq!(path, vec![(1, 2), (1, 3), (2, 3), (3, 3), (3, 2), (3, 1)]);
        assert_eq!(ctrl.plan((3, 1), (3, 1)), vec![(3, 1)]);
    }

    #[test]
    fn reaches_goals_in_the_d4rl_mazes() {
        for (layout, steps) in [(MazeLayout::UMaze, 300), (MazeLayout::Medium, 600), (MazeLayout::Large, 800)] {
            let mut env = PointMaze::new(PointMazeParams::default().layout(layout.clone()).check().unwrap()).unwrap();
            let mut ctrl = WaypointController::new(WaypointParams::default().check().unwrap(), env.maze().clone());
            let mut rng = rl_core::rng_from_seed(5);
            for episode in 0..3 {
                env.reset(&mut rng).unwrap();
                let mut reached = false;
                for _ in 0..steps {
                    let (a, _) = ctrl.act(env.position(), env.velocity(), env.goal(), &mut rng).unwrap();
                    if env.step(ndarray::arr1(&a).view()).unwrap().reward > 0.0 {
                        reached = true;
                        break;
                    }
                }
                assert!(reached, "{layout:?} episode {episode}: goal not reached");
            }
        }
    }

    #[test]
    fn rejects_bad_inputs() {
        let maze = Maze::new(&MazeLayout::UMaze, 1.0).unwrap();
        let mut ctrl = WaypointController::new(WaypointParams::default().check().unwrap(), maze);
        let mut rng = rl_core::rng_from_seed(0);
        assert!(ctrl.act([f64::NAN, 0.0], [0.0; 2], [1.0, 1.0], &mut rng).is_err());
        assert!(ctrl.act([-1.0, 1.0], [0.0; 2], [0.0, 0.0], &mut rng).is_err()); // goal in a wall
        assert!(WaypointParams { discount: 1.0, ..WaypointParams::default() }.check().is_err());
    }
}
