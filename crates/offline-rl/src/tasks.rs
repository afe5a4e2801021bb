//! The environments of the benchmark: one enum [`TaskEnv`] (an [`Env`] and a [`Snapshot`]) over
//! Pendulum, the pure-Rust point maze and (feature `mujoco`) MuJoCo locomotion, named by
//! [`Task`].

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Params, Space, Step};
use rl_envs::classic::{Pendulum, PendulumParams, PendulumState};
use rl_envs::maze::{MazeLayout, MazeReward, PointMassState, PointMaze, PointMazeParams, PointMazeState};
use rl_envs::Snapshot;
use serde::{Deserialize, Serialize};

use crate::error::{OfflineError, Result};

/// A benchmark task.
///
/// | name | environment | episode | score references |
/// |---|---|---|---|
/// | `pendulum` | Pendulum-v1 (pure Rust, gymnasium-exact) | 200 steps | ours (random and expert returns of the generation run) |
/// | `pointmaze-umaze`, `pointmaze-open` | PointMaze, D4RL layout and goal, `(x, y, vx, vy)`, dense reward `exp(−d)` | 300 steps | ours |
/// | `maze2d-umaze`, `maze2d-medium`, `maze2d-large` | PointMaze as D4RL's maze2d: sparse reward (`d ≤ 0.5`), fixed goal | 300 / 600 / 800 steps | ours (random and waypoint-controller returns) |
/// | `hopper`, `halfcheetah`, `walker2d` | gymnasium v4 on MuJoCo 3.17 (feature `mujoco`) | 1000 steps | D4RL's published references |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// Pendulum-v1.
    Pendulum,
    /// The U-maze, dense reward.
    PointMazeUmaze,
    /// The open maze, dense reward.
    PointMazeOpen,
    /// maze2d-umaze (sparse).
    Maze2dUmaze,
    /// maze2d-medium (sparse).
    Maze2dMedium,
    /// maze2d-large (sparse).
    Maze2dLarge,
    /// Hopper-v4.
    Hopper,
    /// HalfCheetah-v4.
    HalfCheetah,
    /// Walker2d-v4.
    Walker2d,
}

impl Task {
    /// Every task.
    pub const ALL: [Task; 9] = [
        Task::Pendulum,
        Task::PointMazeUmaze,
        Task::PointMazeOpen,
        Task::Maze2dUmaze,
        Task::Maze2dMedium,
        Task::Maze2dLarge,
        Task::Hopper,
        Task::HalfCheetah,
        Task::Walker2d,
    ];

    /// The name used in dataset names and on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Task::Pendulum => "pendulum",
            Task::PointMazeUmaze => "pointmaze-umaze",
            Task::PointMazeOpen => "pointmaze-open",
            Task::Maze2dUmaze => "maze2d-umaze",
            Task::Maze2dMedium => "maze2d-medium",
            Task::Maze2dLarge => "maze2d-large",
            Task::Hopper => "hopper",
            Task::HalfCheetah => "halfcheetah",
            Task::Walker2d => "walker2d",
        }
    }

    /// The environment id recorded in datasets.
    pub fn env_id(&self) -> &'static str {
        match self {
            Task::Pendulum => "Pendulum-v1",
            Task::PointMazeUmaze => "PointMaze_UMazeDense-v3 (D4RL goal, (x, y, vx, vy))",
            Task::PointMazeOpen => "PointMaze_OpenDense-v3 (D4RL goal, (x, y, vx, vy))",
            Task::Maze2dUmaze => "PointMaze_UMaze-v3 as maze2d-umaze",
            Task::Maze2dMedium => "PointMaze_Medium-v3 as maze2d-medium",
            Task::Maze2dLarge => "PointMaze_Large-v3 as maze2d-large",
            Task::Hopper => "Hopper-v4",
            Task::HalfCheetah => "HalfCheetah-v4",
            Task::Walker2d => "Walker2d-v4",
        }
    }

    /// The D4RL family whose published references score this task, if any.
    pub fn d4rl_family(&self) -> Option<&'static str> {
        match self {
            Task::Hopper => Some("hopper"),
            Task::HalfCheetah => Some("halfcheetah"),
            Task::Walker2d => Some("walker2d"),
            _ => None,
        }
    }

    /// Whether the task needs the `mujoco` feature.
    pub fn needs_mujoco(&self) -> bool {
        matches!(self, Task::Hopper | Task::HalfCheetah | Task::Walker2d)
    }

    /// The maze layout of a maze task.
    pub fn maze_layout(&self) -> Option<MazeLayout> {
        match self {
            Task::PointMazeUmaze | Task::Maze2dUmaze => Some(MazeLayout::UMaze),
            Task::PointMazeOpen => Some(MazeLayout::Open),
            Task::Maze2dMedium => Some(MazeLayout::Medium),
            Task::Maze2dLarge => Some(MazeLayout::Large),
            _ => None,
        }
    }

    /// The maze parameters of a maze task (D4RL goal and observations).
    pub fn maze_params(&self) -> Option<PointMazeParams> {
        let layout = self.maze_layout()?;
        let reward = if matches!(self, Task::PointMazeUmaze | Task::PointMazeOpen) {
            MazeReward::Dense
        } else {
            MazeReward::Sparse
        };
        Some(PointMazeParams::d4rl(layout, reward))
    }

    /// A fresh environment.
    ///
    /// # Errors
    /// [`OfflineError::Unsupported`] for a MuJoCo task without the `mujoco` feature;
    /// environment errors (e.g. MuJoCo not provisioned).
    pub fn make(&self) -> Result<TaskEnv> {
        match self {
            Task::Pendulum => Ok(TaskEnv::Pendulum(Box::new(Pendulum::new(PendulumParams::default().check()?)?))),
            Task::PointMazeUmaze | Task::PointMazeOpen | Task::Maze2dUmaze | Task::Maze2dMedium | Task::Maze2dLarge => {
                let p = self
                    .maze_params()
                    .ok_or_else(|| OfflineError::UnknownId { what: "maze".into(), id: self.name().into() })?;
                Ok(TaskEnv::Maze(Box::new(PointMaze::new(p.check()?)?)))
            }
            Task::Hopper | Task::HalfCheetah | Task::Walker2d => make_mujoco(*self),
        }
    }
}

#[cfg(feature = "mujoco")]
fn make_mujoco(task: Task) -> Result<TaskEnv> {
    use rl_envs::mujoco::{HalfCheetahParams, HopperParams, Locomotion, Walker2dParams};
    let env = match task {
        Task::Hopper => Locomotion::hopper(HopperParams::default().check()?)?,
        Task::HalfCheetah => Locomotion::half_cheetah(HalfCheetahParams::default().check()?)?,
        _ => Locomotion::walker2d(Walker2dParams::default().check()?)?,
    };
    Ok(TaskEnv::Mujoco(Box::new(env)))
}

#[cfg(not(feature = "mujoco"))]
fn make_mujoco(task: Task) -> Result<TaskEnv> {
    Err(OfflineError::Unsupported {
        path: task.name().into(),
        what: "task".into(),
        reason: "MuJoCo tasks need the `mujoco` feature (make provision-mujoco)".into(),
    })
}

impl std::str::FromStr for Task {
    type Err = OfflineError;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.to_ascii_lowercase().replace('_', "-");
        Task::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| OfflineError::UnknownId { what: "task".into(), id: s })
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An environment of a [`Task`].
#[derive(Debug)]
pub enum TaskEnv {
    /// Pendulum-v1.
    Pendulum(Box<Pendulum>),
    /// A point maze.
    Maze(Box<PointMaze>),
    /// MuJoCo locomotion.
    #[cfg(feature = "mujoco")]
    Mujoco(Box<rl_envs::mujoco::Locomotion>),
}

/// The state of a [`TaskEnv`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskEnvState {
    /// Pendulum.
    Pendulum(PendulumState),
    /// Point maze.
    Maze(Box<PointMazeState<PointMassState>>),
    /// MuJoCo locomotion.
    #[cfg(feature = "mujoco")]
    Mujoco(Box<rl_envs::mujoco::LocomotionState>),
}

impl TaskEnv {
    /// The point maze, if this is one (goals, waypoint controller).
    pub fn maze(&mut self) -> Option<&mut PointMaze> {
        match self {
            TaskEnv::Maze(m) => Some(m),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

impl Env for TaskEnv {
    fn observation_space(&self) -> &Space {
        match self {
            TaskEnv::Pendulum(e) => e.observation_space(),
            TaskEnv::Maze(e) => e.observation_space(),
            #[cfg(feature = "mujoco")]
            TaskEnv::Mujoco(e) => e.observation_space(),
        }
    }

    fn action_space(&self) -> &Space {
        match self {
            TaskEnv::Pendulum(e) => e.action_space(),
            TaskEnv::Maze(e) => e.action_space(),
            #[cfg(feature = "mujoco")]
            TaskEnv::Mujoco(e) => e.action_space(),
        }
    }

    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        match self {
            TaskEnv::Pendulum(e) => e.reset(rng),
            TaskEnv::Maze(e) => e.reset(rng),
            #[cfg(feature = "mujoco")]
            TaskEnv::Mujoco(e) => e.reset(rng),
        }
    }

    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        match self {
            TaskEnv::Pendulum(e) => e.step(action),
            TaskEnv::Maze(e) => e.step(action),
            #[cfg(feature = "mujoco")]
            TaskEnv::Mujoco(e) => e.step(action),
        }
    }
}

impl Snapshot for TaskEnv {
    type State = TaskEnvState;

    fn snapshot(&self) -> TaskEnvState {
        match self {
            TaskEnv::Pendulum(e) => TaskEnvState::Pendulum(e.snapshot()),
            TaskEnv::Maze(e) => TaskEnvState::Maze(Box::new(e.snapshot())),
            #[cfg(feature = "mujoco")]
            TaskEnv::Mujoco(e) => TaskEnvState::Mujoco(Box::new(e.snapshot())),
        }
    }

    fn restore(&mut self, state: &TaskEnvState) -> rl_envs::Result<()> {
        match (self, state) {
            (TaskEnv::Pendulum(e), TaskEnvState::Pendulum(s)) => e.restore(s),
            (TaskEnv::Maze(e), TaskEnvState::Maze(s)) => e.restore(s),
            #[cfg(feature = "mujoco")]
            (TaskEnv::Mujoco(e), TaskEnvState::Mujoco(s)) => e.restore(s),
            #[allow(unreachable_patterns)]
            _ => Err(rl_envs::EnvError::snapshot("state of another task")),
        }
    }
}
