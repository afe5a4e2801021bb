//! The point maze: D4RL's maze2d task as gymnasium-robotics' `PointMaze_*-v3` implements it,
//! and D4RL's waypoint controller.
//!
//! | item | what | source of truth |
//! |---|---|---|
//! | [`MazeLayout`] | open, U, medium, large (+ "diverse" variants, custom maps) | gymnasium-robotics 1.4.2 `envs/maze/maps.py` (= D4RL's maze2d maps) |
//! | [`PointMaze`] | pure-Rust ball: MuJoCo's Euler step in free flight, rigid walls | `PointMaze_*-v3` (`point_maze.py`, `maze_v4.py`, `point.py`, `point.xml`) |
//! | [`WaypointController`] | the expert that generated D4RL's maze2d data | D4RL `pointmaze/waypoint_controller.py`, `q_iteration.py` |
//!
//! Goals, starts, rewards and terminations match gymnasium-robotics exactly (seeded resets
//! included); the ball's motion matches MuJoCo to 1e-6 while it is clear of the walls. At the
//! walls the pure-Rust ball uses rigid contact where MuJoCo uses soft contact; with the
//! `mujoco` feature, `rl_envs::mujoco::MujocoPointMaze` runs gymnasium-robotics' model in
//! MuJoCo itself.

mod layout;
mod point_maze;
mod waypoint;

pub use layout::{Cell, Maze, MazeLayout};
pub use point_maze::{
    MazeObs, MazeReward, PointMassParams, PointMaze, PointMazeEnv, PointMazeParams, PointMazeState, PointPhysics,
    RigidPointMass, RigidState,
};
pub use waypoint::{WaypointController, WaypointParams, WaypointState};
