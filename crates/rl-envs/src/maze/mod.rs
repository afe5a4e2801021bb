//! The point maze: D4RL's maze2d task as gymnasium-robotics' `PointMaze_*-v3` implements it,
//! and D4RL's waypoint controller.
//!
//! | item | what | source of truth |
//! |---|---|---|
//! | [`MazeLayout`] | open, U, medium, large (+ "diverse" variants, custom maps) | gymnasium-robotics 1.4.2 `envs/maze/maps.py` (= D4RL's maze2d maps) |
//! | [`PointMaze`] | pure-Rust ball: MuJoCo's Euler step and soft wall contact, re-implemented | `PointMaze_*-v3` (`point_maze.py`, `maze_v4.py`, `point.py`, `point.xml`) |
//! | [`WaypointController`] | the expert that generated D4RL's maze2d data | D4RL `pointmaze/waypoint_controller.py`, `q_iteration.py` |
//!
//! Goals, starts, rewards and terminations match gymnasium-robotics exactly (seeded resets
//! included), and the ball's motion matches MuJoCo to 1e-6, wall contacts included: the
//! pure-Rust ball computes MuJoCo's soft contact forces itself. With the `mujoco` feature,
//! `rl_envs::mujoco::MujocoPointMaze` runs gymnasium-robotics' model in MuJoCo itself.

mod contact;
mod layout;
mod point_maze;
mod waypoint;

pub use layout::{Cell, Maze, MazeLayout};
pub use point_maze::{
    MazeObs, MazeReward, PointMass, PointMassParams, PointMassState, PointMaze, PointMazeEnv, PointMazeParams,
    PointMazeState, PointPhysics, WallContact,
};
pub use waypoint::{WaypointController, WaypointParams, WaypointState};
