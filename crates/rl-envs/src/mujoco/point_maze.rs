//! The point maze with MuJoCo physics: gymnasium-robotics' model, soft wall contact included.

use std::fmt::Write as _;

use mujoco_rs::prelude::*;
use rl_core::Valid;
use serde::{Deserialize, Serialize};

use super::sim::{check_physics, edit_model, physics, set_physics, Data};
use crate::error::{EnvError, Result};
use crate::maze::{Maze, PointMassParams, PointMazeEnv, PointMazeParams, PointPhysics};

/// The ball of gymnasium-robotics' point maze simulated by MuJoCo: the model is
/// gymnasium-robotics' `point.xml` with the maze's wall blocks added as it does
/// (`Maze.make_maze`), written out by this crate (maze height 0.4, the blocks' margins and
/// contact flags, the target site); visual-only elements are left out.
#[derive(Debug, Clone)]
pub struct MujocoPointMass {
    data: Data,
    particle: usize,
}

/// The state of a [`MujocoPointMass`]: MuJoCo's integration state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MujocoPointState {
    /// `mj_getState` with `mjSTATE_INTEGRATION`.
    pub physics: Vec<f64>,
}

/// The MJCF of gymnasium-robotics' point maze for `maze` (height 0.4) and ball `params`.
pub fn point_maze_xml(maze: &Maze, params: &PointMassParams) -> String {
    let s = maze.scaling();
    let h = 0.4;
    let mut xml = String::new();
    let _ = write!(
        xml,
        r#"<mujoco>
  <compiler inertiafromgeom="true" angle="radian"/>
  <option timestep="{dt}" gravity="0 0 0" iterations="20" integrator="Euler"/>
  <default>
    <joint damping="{damping}" limited="false"/>
    <geom friction=".5 .1 .1" density="1000" margin="{margin}" condim="1" contype="2" conaffinity="1"/>
  </default>
  <worldbody>
    <geom name="ground" size="40 40 0.25" pos="0 0 -0.1" type="plane" contype="1" conaffinity="0"/>
    <body name="particle" pos="0 0 0">
      <geom name="particle_geom" type="sphere" size="{radius}" contype="1"/>
      <site name="particle_site" pos="0.0 0.0 0.0" size="0.2"/>
      <joint name="ball_x" type="slide" pos="0 0 0" axis="1 0 0"/>
      <joint name="ball_y" type="slide" pos="0 0 0" axis="0 1 0"/>
    </body>
"#,
        dt = params.timestep,
        damping = params.damping,
        radius = params.radius,
        margin = params.contact_margin / 2.0,
    );
    for i in 0..maze.n_rows() {
        for j in 0..maze.n_cols() {
            if maze.cell(i, j) == Some(crate::maze::Cell::Wall) {
                let [x, y] = maze.cell_to_xy(i, j);
                let _ = writeln!(
                    xml,
                    r#"    <geom name="block_{i}_{j}" pos="{x} {y} {z}" size="{hs} {hs} {z}" type="box" contype="1" conaffinity="1"/>"#,
                    z = h / 2.0 * s,
                    hs = 0.5 * s,
                );
            }
        }
    }
    let _ = write!(
        xml,
        r#"    <site name="target" pos="0 0 {z}" size="{r}" type="sphere"/>
  </worldbody>
  <actuator>
    <motor name="motor_x" joint="ball_x" ctrlrange="-1.0 1.0" ctrllimited="true" gear="{gear}"/>
    <motor name="motor_y" joint="ball_y" ctrlrange="-1.0 1.0" ctrllimited="true" gear="{gear}"/>
  </actuator>
</mujoco>
"#,
        z = h / 2.0 * s,
        r = 0.2 * s,
        gear = params.gear,
    );
    xml
}

impl MujocoPointMass {
    /// The ball in `maze` with `params` (mass from the sphere's density unless `params.mass`
    /// differs from the default, in which case the body mass is set to it).
    ///
    /// # Errors
    /// [`EnvError::Mujoco`] when MuJoCo is not 3.17.0 or rejects the model.
    pub fn new(maze: &Maze, params: &PointMassParams) -> Result<Self> {
        super::check_mujoco_version()?;
        let xml = point_maze_xml(maze, params);
        let model = MjModel::from_xml_string(&xml).map_err(|e| EnvError::Mujoco(format!("point maze model: {e:?}")))?;
        let data = MjData::try_new(Box::new(model)).map_err(|e| EnvError::Mujoco(format!("{e:?}")))?;
        let particle = data
            .model()
            .name_to_id(MjtObjBase::mjOBJ_BODY, "particle")
            .ok_or_else(|| EnvError::Mujoco("point maze model has no body `particle`".into()))?;
        let mut me = Self { data, particle };
        if params.mass != PointMassParams::default().mass {
            me.set_physical(params.mass, params.damping, params.gear)?;
        }
        Ok(me)
    }
}

impl PointPhysics for MujocoPointMass {
    type State = MujocoPointState;

    fn reset(&mut self, pos: [f64; 2]) {
        self.data.reset();
        self.set(pos, [0.0, 0.0]);
    }

    fn set(&mut self, pos: [f64; 2], vel: [f64; 2]) {
        self.data.qpos_mut().copy_from_slice(&pos);
        self.data.qvel_mut().copy_from_slice(&vel);
        self.data.forward();
    }

    fn step(&mut self, ctrl: [f64; 2]) {
        self.data.ctrl_mut().copy_from_slice(&ctrl);
        self.data.step();
    }

    fn pos(&self) -> [f64; 2] {
        let q = self.data.qpos();
        [q[0], q[1]]
    }

    fn vel(&self) -> [f64; 2] {
        let v = self.data.qvel();
        [v[0], v[1]]
    }

    fn save(&self) -> MujocoPointState {
        MujocoPointState { physics: physics(&self.data) }
    }

    fn load(&mut self, state: &MujocoPointState) -> Result<()> {
        check_physics(&self.data, &state.physics)?;
        set_physics(&mut self.data, &state.physics)
    }

    fn set_physical(&mut self, mass: f64, damping: f64, gear: f64) -> Result<()> {
        let particle = self.particle;
        edit_model(&mut self.data, |model| {
            if let Some(m) = model.body_mass_mut().get_mut(particle) {
                *m = mass;
            }
            for d in model.dof_damping_mut() {
                *d = damping;
            }
            for g in model.actuator_gear_mut() {
                g[0] = gear;
            }
        })
    }
}

/// The point maze on MuJoCo (gymnasium-robotics' physics, wall contact included).
pub type MujocoPointMaze = PointMazeEnv<MujocoPointMass>;

impl PointMazeEnv<MujocoPointMass> {
    /// A MuJoCo point maze with `params` (the same parameters as [`crate::maze::PointMaze`]).
    ///
    /// ```
    /// use rl_core::{Env, Params};
    /// use rl_envs::maze::PointMazeParams;
    /// use rl_envs::mujoco::MujocoPointMaze;
    /// use rl_envs::rng::NumpyRng;
    /// let mut env = MujocoPointMaze::new(PointMazeParams::default().check()?)?;
    /// let obs = env.reset(&mut NumpyRng::new(0))?; // = gymnasium-robotics PointMaze_UMaze-v3, seed 0
    /// let step = env.step(ndarray::array![1.0, 0.0].view())?;
    /// assert!(step.obs[2] > obs[2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`EnvError::Mujoco`] when MuJoCo is not 3.17.0 or rejects the model.
    pub fn new(params: Valid<PointMazeParams>) -> Result<Self> {
        let maze = Maze::new(&params.layout, params.maze_size_scaling)?;
        let physics = MujocoPointMass::new(&maze, &params.physics)?;
        Self::with_physics(params, physics)
    }
}
