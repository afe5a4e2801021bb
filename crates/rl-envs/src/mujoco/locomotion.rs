//! Gymnasium locomotion on MuJoCo: Hopper, HalfCheetah, Walker2d, Ant (v4 and v5), Swimmer (v4
//! and v5).

use std::path::{Path, PathBuf};

use mujoco_rs::prelude::*;
use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Info, Space, Step, Valid};
use serde::{Deserialize, Serialize};

use super::sim::{check_physics, edit_model, physics, set_physics, sim_env, Sim, SimEnv};
use crate::common::{positive, EpisodeClock};
use crate::error::{EnvError, Result};
use crate::numpy_sum::{sum_of_squares_f32, sum_of_squares_f64};
use crate::traits::{check_task, Snapshot, TaskParam, TaskParams};

/// `np.linalg.norm(xy, ord=2)` of a 2-vector: NumPy computes `sqrt(dot(x, x))`, and the BLAS
/// `ddot` of the PyPI wheel (OpenBLAS) fuses the second product: `sqrt(fma(y, y, x·x))`.
fn numpy_norm2(xy: [f64; 2]) -> f64 {
    xy[1].mul_add(xy[1], xy[0] * xy[0]).sqrt()
}

/// gymnasium's infos of a planar position `xy` (`x_position`, `y_position`,
/// `distance_from_origin`) and, when given, its velocity (`x_velocity`, `y_velocity`).
fn planar_info(info: &mut Info, xy: [f64; 2], vel: Option<[f64; 2]>) {
    info.insert("x_position", xy[0]);
    info.insert("y_position", xy[1]);
    info.insert("distance_from_origin", numpy_norm2(xy));
    if let Some([vx, vy]) = vel {
        info.insert("x_velocity", vx);
        info.insert("y_velocity", vy);
    }
}

/// v4's healthy reward: paid on every step unless an unhealthy state does not end the episode.
fn alive_v4(healthy: bool, terminate_when_unhealthy: bool, healthy_reward: f64) -> f64 {
    f64::from(u8::from(healthy || terminate_when_unhealthy)) * healthy_reward
}

/// v5's healthy reward: paid only while healthy.
fn survive_v5(healthy: bool, healthy_reward: f64) -> f64 {
    f64::from(u8::from(healthy)) * healthy_reward
}

mod params;

pub use params::{
    AntParams, AntV5Params, HalfCheetahParams, HalfCheetahV5Params, HopperParams, HopperV5Params, MainBody,
    SwimmerParams, SwimmerV5Params, Walker2dParams, Walker2dV5Params,
};

/// Which locomotion task a [`Locomotion`] runs, with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocomotionTask {
    /// `Hopper-v4`.
    Hopper(HopperParams),
    /// `HalfCheetah-v4`.
    HalfCheetah(HalfCheetahParams),
    /// `Walker2d-v4`.
    Walker2d(Walker2dParams),
    /// `Ant-v4`.
    Ant(AntParams),
    /// `Swimmer-v4`.
    Swimmer(SwimmerParams),
    /// `Hopper-v5`.
    HopperV5(HopperV5Params),
    /// `HalfCheetah-v5`.
    HalfCheetahV5(HalfCheetahV5Params),
    /// `Walker2d-v5`.
    Walker2dV5(Walker2dV5Params),
    /// `Ant-v5`.
    AntV5(AntV5Params),
    /// `Swimmer-v5`.
    SwimmerV5(SwimmerV5Params),
}

/// `match` over every [`LocomotionTask`], binding its parameters to `$v4` in the v4 tasks and
/// to `$v5` in the v5 ones (one expression for all when only one is given).
macro_rules! each_task {
    ($task:expr, $p:pat => $e:expr) => {
        each_task!($task, $p => $e, $p => $e)
    };
    ($task:expr, $v4:pat => $e4:expr, $v5:pat => $e5:expr) => {
        match $task {
            LocomotionTask::Hopper($v4) => $e4,
            LocomotionTask::HalfCheetah($v4) => $e4,
            LocomotionTask::Walker2d($v4) => $e4,
            LocomotionTask::Ant($v4) => $e4,
            LocomotionTask::Swimmer($v4) => $e4,
            LocomotionTask::HopperV5($v5) => $e5,
            LocomotionTask::HalfCheetahV5($v5) => $e5,
            LocomotionTask::Walker2dV5($v5) => $e5,
            LocomotionTask::AntV5($v5) => $e5,
            LocomotionTask::SwimmerV5($v5) => $e5,
        }
    };
}

/// The robot of a [`LocomotionTask`], whichever gymnasium version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Robot {
    Hopper,
    HalfCheetah,
    Walker2d,
    Ant,
    Swimmer,
}

impl Robot {
    /// v4's model file and frame skip.
    fn v4_model(self) -> (&'static str, usize) {
        match self {
            Robot::Hopper => ("hopper.xml", 4),
            Robot::HalfCheetah => ("half_cheetah.xml", 5),
            Robot::Walker2d => ("walker2d.xml", 4),
            Robot::Ant => ("ant.xml", 5),
            Robot::Swimmer => ("swimmer.xml", 4),
        }
    }
}

impl LocomotionTask {
    fn robot(&self) -> Robot {
        match self {
            LocomotionTask::Hopper(_) | LocomotionTask::HopperV5(_) => Robot::Hopper,
            LocomotionTask::HalfCheetah(_) | LocomotionTask::HalfCheetahV5(_) => Robot::HalfCheetah,
            LocomotionTask::Walker2d(_) | LocomotionTask::Walker2dV5(_) => Robot::Walker2d,
            LocomotionTask::Ant(_) | LocomotionTask::AntV5(_) => Robot::Ant,
            LocomotionTask::Swimmer(_) | LocomotionTask::SwimmerV5(_) => Robot::Swimmer,
        }
    }

    /// The model file: v4's fixed name (looked up in the assets folders) or v5's `xml_file`.
    fn model_path(&self) -> Result<PathBuf> {
        let file = self.robot().v4_model().0;
        each_task!(self,
            p => super::find_asset(file, p.assets_dir.as_deref()),
            p => super::resolve_xml(&p.xml_file, p.assets_dir.as_deref()))
    }

    fn frame_skip(&self) -> usize {
        each_task!(self, _ => self.robot().v4_model().1, p => p.frame_skip)
    }

    fn max_steps(&self) -> usize {
        each_task!(self, p => p.max_episode_steps)
    }

    /// How many leading `qpos` the observation drops: `x` (Ant and Swimmer: `x, y`) when
    /// `exclude_current_positions_from_observation`.
    fn excluded_positions(&self) -> usize {
        let n = if matches!(self.robot(), Robot::Ant | Robot::Swimmer) { 2 } else { 1 };
        n * usize::from(each_task!(self, p => p.exclude_current_positions_from_observation))
    }

    /// `(noise scale, whether qvel noise is normal rather than uniform)`: HalfCheetah's and
    /// Ant's is normal.
    fn reset_noise(&self) -> (f64, bool) {
        (each_task!(self, p => p.reset_noise_scale), matches!(self.robot(), Robot::HalfCheetah | Robot::Ant))
    }

    /// Hopper and Walker2d clip `qvel` to `[-10, 10]` in the observation.
    fn clips_velocity(&self) -> bool {
        matches!(self.robot(), Robot::Hopper | Robot::Walker2d)
    }

    /// Whether the step needs `mj_rnePostConstraint` (contact forces in the reward).
    fn needs_contact_forces(&self) -> bool {
        matches!(self, LocomotionTask::Ant(p) if p.use_contact_forces) || matches!(self, LocomotionTask::AntV5(_))
    }
}

/// Unscaled model values, for the task parameters.
#[derive(Debug, Clone)]
struct BaseModel {
    mass: Vec<f64>,
    inertia: Vec<[f64; 3]>,
    friction: Vec<[f64; 3]>,
    damping: Vec<f64>,
}

/// The state of a [`Locomotion`] environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocomotionState {
    /// MuJoCo's integration state (`mj_getState` with `mjSTATE_INTEGRATION`: time, `qpos`,
    /// `qvel`, actuator state, warm start, controls, applied forces, ...).
    pub physics: Vec<f64>,
    /// Ant: the torso position the next step's velocity is measured from.
    pub torso_xy: [f64; 2],
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
}

/// A gymnasium v4 or v5 locomotion task on MuJoCo: see the [module docs](crate::mujoco).
///
/// ```text
/// Hopper, Walker2d:  r = w·(x' − x)/dt + healthy_reward − c·Σa²   terminated = !healthy
///                    (v4: healthy_reward also when unhealthy if not terminating; v5: only when healthy)
/// HalfCheetah:       r = w·(x' − x)/dt − 0.1·Σa²                  never terminates
/// Ant v4:            r = (x'_torso − x_torso)/dt + 1 − 0.5·Σa² [− 5e-4·Σclip(cfrc_ext)²]
/// Ant v5:            r = w·(x'_main − x_main)/dt + healthy·1 − 0.5·Σa² − 5e-4·Σclip(cfrc_ext)²
/// Swimmer:           r = w·(x' − x)/dt − 1e-4·Σa²                 never terminates
/// ```
///
/// Actions outside `[-1, 1]` are clamped by MuJoCo (`ctrllimited`) while the control cost
/// uses the raw action, as in gymnasium; NaN actions and wrong lengths are errors. A simulation
/// that turns unstable (non-finite state, or MuJoCo's bad-acceleration reset) is an error and
/// ends the episode.
#[derive(Debug, Clone)]
pub struct Locomotion {
    task: LocomotionTask,
    sim: Sim,
    base: BaseModel,
    scales: [f64; 3],
    torso: usize,
    torso_xy: [f64; 2],
    obs_space: Space,
}

/// The public constructors of [`Locomotion`], one a task: `name(Params) => Variant;`
/// writes `pub fn name(params: Valid<Params>) -> Result<Self>` starting [`LocomotionTask::Variant`].
macro_rules! constructors {
    ($($(#[$doc:meta])* $name:ident($params:ty) => $variant:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(params: Valid<$params>) -> Result<Self> {
                Self::new(LocomotionTask::$variant(params.into_inner()))
            }
        )*
    };
}

impl Locomotion {
    constructors! {
        /// `Hopper-v4`.
        ///
        /// # Errors
        /// [`EnvError::Missing`] when `hopper.xml` is not found, [`EnvError::Mujoco`] when MuJoCo
        /// rejects it or is not version 3.17.0.
        hopper(HopperParams) => Hopper;

        /// `HalfCheetah-v4`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper`].
        half_cheetah(HalfCheetahParams) => HalfCheetah;

        /// `Walker2d-v4`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper`].
        walker2d(Walker2dParams) => Walker2d;

        /// `Ant-v4`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper`].
        ant(AntParams) => Ant;

        /// `Swimmer-v4`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper`].
        swimmer(SwimmerParams) => Swimmer;

        /// `Hopper-v5`.
        ///
        /// # Errors
        /// [`EnvError::Missing`] when `xml_file` is not found (naming it and where it was looked
        /// for), [`EnvError::InvalidParameter`] (`xml_file`) when it cannot be read,
        /// [`EnvError::Mujoco`] when MuJoCo rejects it or is not version 3.17.0.
        hopper_v5(HopperV5Params) => HopperV5;

        /// `HalfCheetah-v5`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper_v5`].
        half_cheetah_v5(HalfCheetahV5Params) => HalfCheetahV5;

        /// `Walker2d-v5`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper_v5`].
        walker2d_v5(Walker2dV5Params) => Walker2dV5;

        /// `Ant-v5`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper_v5`]; [`EnvError::InvalidParameter`] (`main_body`) when the
        /// model has no such body.
        ant_v5(AntV5Params) => AntV5;

        /// `Swimmer-v5`.
        ///
        /// # Errors
        /// As [`Locomotion::hopper_v5`].
        swimmer_v5(SwimmerV5Params) => SwimmerV5;
    }

    /// Compiles the model at `path`. `settotalmass` (half_cheetah.xml) is deprecated in MuJoCo
    /// 3.17, whose compiler then appends a warning to ./MUJOCO_LOG.TXT; it is applied as MuJoCo
    /// advises instead (the edited text is given to MuJoCo under the file's own path, in a
    /// virtual file system, so that files it includes still resolve next to it).
    fn load_model(path: &Path) -> Result<(MjModel, Option<f64>)> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| EnvError::invalid("xml_file", path.display(), format!("cannot read the model: {e}")))?;
        let (text, total_mass) = super::strip_settotalmass(&text)?;
        let cannot = |e: &dyn std::fmt::Debug| EnvError::Mujoco(format!("cannot load {}: {e:?}", path.display()));
        let model = if total_mass.is_none() {
            MjModel::from_xml(path).map_err(|e| cannot(&e))?
        } else {
            let mut vfs = mujoco_rs::wrappers::mj_auxiliary::MjVfs::new();
            vfs.add_from_buffer(path, text.as_bytes()).map_err(|e| cannot(&e))?;
            MjModel::from_xml_vfs(path, &vfs).map_err(|e| cannot(&e))?
        };
        Ok((model, total_mass))
    }

    fn new(task: LocomotionTask) -> Result<Self> {
        super::check_mujoco_version()?;
        let path = task.model_path()?;
        let (mut model, total_mass) = Self::load_model(&path)?;
        if let Some(mass) = total_mass {
            model.set_totalmass(mass);
        }
        let mut data = MjData::try_new(Box::new(model)).map_err(|e| EnvError::Mujoco(format!("{e:?}")))?;
        if total_mass.is_some() {
            data.set_const();
        }
        let m = data.model();
        let base = BaseModel {
            mass: m.body_mass().to_vec(),
            inertia: m.body_inertia().to_vec(),
            friction: m.geom_friction().to_vec(),
            damping: m.dof_damping().to_vec(),
        };
        let torso = match &task {
            LocomotionTask::AntV5(p) => {
                let found = match &p.main_body {
                    MainBody::Id(i) => (*i < m.body_pos().len()).then_some(*i),
                    MainBody::Name(n) => m.name_to_id(MjtObjBase::mjOBJ_BODY, n),
                };
                found.ok_or_else(|| {
                    EnvError::invalid("main_body", format!("{:?}", p.main_body), "no such body in the model")
                })?
            }
            _ => m.name_to_id(MjtObjBase::mjOBJ_BODY, "torso").unwrap_or(1),
        };
        let mut sim = Sim::from_data(data, task.frame_skip())?;
        sim.post_constraint = task.needs_contact_forces();
        let mut env = Self {
            obs_space: Space::symmetric(1, f32::INFINITY)?,
            task,
            sim,
            base,
            scales: [1.0; 3],
            torso,
            torso_xy: [0.0; 2],
        };
        let dim = env.observe().len();
        env.obs_space = Space::symmetric(dim, f32::INFINITY)?;
        Ok(env)
    }

    fn torso_position(&self) -> [f64; 2] {
        let x = self.sim.data.xpos()[self.torso];
        [x[0], x[1]]
    }

    fn contact_forces(&self, range: [f64; 2]) -> impl Iterator<Item = f64> + '_ {
        self.sim.data.cfrc_ext().iter().flat_map(move |f| f.iter().map(move |v| v.clamp(range[0], range[1])))
    }

    /// The observation in float64, as gymnasium returns it (the [`Env`](rl_core::Env) observation is its
    /// float32 rounding).
    pub fn observation_f64(&self) -> Vec<f64> {
        let skip = self.task.excluded_positions();
        let qpos = &self.sim.data.qpos()[skip..];
        let qvel = self.sim.data.qvel();
        let clip_vel = self.task.clips_velocity();
        let mut o: Vec<f64> = qpos.to_vec();
        o.extend(qvel.iter().map(|&v| if clip_vel { v.clamp(-10.0, 10.0) } else { v }));
        match &self.task {
            LocomotionTask::Ant(p) if p.use_contact_forces => o.extend(self.contact_forces(p.contact_force_range)),
            // v5: every body but the world
            LocomotionTask::AntV5(p) if p.include_cfrc_ext_in_observation => {
                o.extend(self.contact_forces(p.contact_force_range).skip(6));
            }
            _ => {}
        }
        o
    }

    /// The info gymnasium's `reset` returns (its `_get_reset_info`), for the current state:
    /// v5 Hopper and Walker2d `x_position`, `z_distance_from_origin`; HalfCheetah-v5
    /// `x_position`; Ant-v5 and Swimmer-v5 `x_position`, `y_position`, `distance_from_origin`
    /// (from `qpos`); empty for the v4 tasks, as in gymnasium.
    pub fn reset_info(&self) -> Info {
        let q = self.sim.data.qpos();
        let mut info = Info::with_capacity(3);
        match &self.task {
            LocomotionTask::HopperV5(_) | LocomotionTask::Walker2dV5(_) => {
                info.insert("x_position", q[0]);
                info.insert("z_distance_from_origin", q[1] - self.sim.init_qpos[1]);
            }
            LocomotionTask::HalfCheetahV5(_) => info.insert("x_position", q[0]),
            LocomotionTask::AntV5(_) | LocomotionTask::SwimmerV5(_) => {
                planar_info(&mut info, [q[0], q[1]], None);
            }
            _ => {}
        }
        info
    }

    /// gymnasium's `control_cost`: `w · Σ a²` evaluated in float32 (NumPy 2 keeps the float32
    /// action's dtype).
    ///
    /// The sum is NumPy 2's pairwise sum ([`crate::numpy_sum`]).
    fn ctrl_cost(weight: f64, action: ArrayView1<'_, f32>) -> f64 {
        let sum = sum_of_squares_f32(action.iter().copied());
        f64::from(weight as f32 * sum)
    }

    /// gymnasium's `contact_cost`: `w · np.sum(np.square(clip(cfrc_ext)))` over every body's
    /// 6 external forces (float64, NumPy 2's pairwise sum).
    fn contact_cost(&self, weight: f64, range: [f64; 2]) -> f64 {
        weight * sum_of_squares_f64(self.contact_forces(range))
    }

    /// gymnasium's `is_healthy` after a step: Hopper every `qpos[2:]`, `qvel` inside
    /// `healthy_state_range` and, as Walker2d, the height `qpos[1]` and angle `qpos[2]` inside
    /// theirs (open ranges); Ant `qpos[2]` inside `healthy_z_range` (closed); the others always.
    fn is_healthy(&self) -> bool {
        let (q, v) = (self.sim.data.qpos(), self.sim.data.qvel());
        let inside = |r: [f64; 2], x: f64| r[0] < x && x < r[1];
        let upright = |z: [f64; 2], angle: [f64; 2]| inside(z, q[1]) && inside(angle, q[2]);
        match &self.task {
            LocomotionTask::Hopper(HopperParams {
                healthy_state_range: s,
                healthy_z_range: z,
                healthy_angle_range: a,
                ..
            })
            | LocomotionTask::HopperV5(HopperV5Params {
                healthy_state_range: s,
                healthy_z_range: z,
                healthy_angle_range: a,
                ..
            }) => q[2..].iter().chain(v).all(|&x| inside(*s, x)) && upright(*z, *a),
            LocomotionTask::Walker2d(Walker2dParams { healthy_z_range: z, healthy_angle_range: a, .. })
            | LocomotionTask::Walker2dV5(Walker2dV5Params { healthy_z_range: z, healthy_angle_range: a, .. }) => {
                upright(*z, *a)
            }
            LocomotionTask::Ant(AntParams { healthy_z_range: z, .. })
            | LocomotionTask::AntV5(AntV5Params { healthy_z_range: z, .. }) => z[0] <= q[2] && q[2] <= z[1],
            _ => true,
        }
    }

    fn apply_scales(&mut self, scales: [f64; 3]) -> Result<()> {
        let base = &self.base;
        edit_model(&mut self.sim.data, |model| {
            for (m, b) in model.body_mass_mut().iter_mut().zip(&base.mass) {
                *m = b * scales[0];
            }
            for (m, b) in model.body_inertia_mut().iter_mut().zip(&base.inertia) {
                *m = [b[0] * scales[0], b[1] * scales[0], b[2] * scales[0]];
            }
            for (f, b) in model.geom_friction_mut().iter_mut().zip(&base.friction) {
                *f = [b[0] * scales[1], b[1] * scales[1], b[2] * scales[1]];
            }
            for (d, b) in model.dof_damping_mut().iter_mut().zip(&base.damping) {
                *d = b * scales[2];
            }
        })?;
        self.scales = scales;
        Ok(())
    }
}

sim_env!(
    Locomotion,
    /// The task and its parameters.
    task: LocomotionTask
);

impl SimEnv for Locomotion {
    fn observe(&self) -> Array1<f32> {
        self.observation_f64().into_iter().map(|v| v as f32).collect()
    }

    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>) {
        let (scale, normal_vel) = self.task.reset_noise();
        self.sim.noisy_state(rng, scale, normal_vel)
    }

    fn started(&mut self) {
        self.torso_xy = self.torso_position();
    }

    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        // Ant's velocity is its main body's (`xpos`), the others' that of `qpos[0]`, `qpos[1]`
        let ant = self.task.robot() == Robot::Ant;
        let planar = |q: &[f64]| [q[0], q[1]];
        let before = if ant { self.torso_xy } else { planar(self.sim.data.qpos()) };
        self.sim.simulate(action)?;
        let after = if ant { self.torso_position() } else { planar(self.sim.data.qpos()) };
        let dt = self.sim.dt;
        let (x_vel, y_vel) = ((after[0] - before[0]) / dt, (after[1] - before[1]) / dt);
        let ctrl = Self::ctrl_cost(each_task!(&self.task, p => p.ctrl_cost_weight), action);
        let healthy = self.is_healthy();
        let qpos = self.sim.data.qpos();
        let mut info = Info::with_capacity(9);
        let (reward, terminated) = match &self.task {
            LocomotionTask::Hopper(HopperParams {
                forward_reward_weight: w,
                healthy_reward: h,
                terminate_when_unhealthy: t,
                ..
            })
            | LocomotionTask::Walker2d(Walker2dParams {
                forward_reward_weight: w,
                healthy_reward: h,
                terminate_when_unhealthy: t,
                ..
            }) => {
                info.insert("x_position", qpos[0]);
                info.insert("x_velocity", x_vel);
                (w * x_vel + alive_v4(healthy, *t, *h) - ctrl, *t && !healthy)
            }
            LocomotionTask::HopperV5(HopperV5Params {
                forward_reward_weight: w,
                healthy_reward: h,
                terminate_when_unhealthy: t,
                ..
            })
            | LocomotionTask::Walker2dV5(Walker2dV5Params {
                forward_reward_weight: w,
                healthy_reward: h,
                terminate_when_unhealthy: t,
                ..
            }) => {
                let forward = w * x_vel;
                let survive = survive_v5(healthy, *h);
                info.insert("x_position", qpos[0]);
                info.insert("z_distance_from_origin", qpos[1] - self.sim.init_qpos[1]);
                info.insert("x_velocity", x_vel);
                info.insert("reward_forward", forward);
                info.insert("reward_ctrl", -ctrl);
                info.insert("reward_survive", survive);
                (forward + survive - ctrl, *t && !healthy)
            }
            LocomotionTask::HalfCheetah(HalfCheetahParams { forward_reward_weight: w, .. })
            | LocomotionTask::HalfCheetahV5(HalfCheetahV5Params { forward_reward_weight: w, .. }) => {
                let forward = w * x_vel;
                info.insert("x_position", qpos[0]);
                info.insert("x_velocity", x_vel);
                // v4 calls the forward reward `reward_run`
                let v4 = matches!(self.task, LocomotionTask::HalfCheetah(_));
                info.insert(if v4 { "reward_run" } else { "reward_forward" }, forward);
                info.insert("reward_ctrl", -ctrl);
                (forward - ctrl, false)
            }
            LocomotionTask::Ant(p) => {
                let healthy_reward = alive_v4(healthy, p.terminate_when_unhealthy, p.healthy_reward);
                let mut costs = ctrl;
                info.insert("reward_forward", x_vel);
                info.insert("reward_ctrl", -ctrl);
                info.insert("reward_survive", healthy_reward);
                planar_info(&mut info, after, Some([x_vel, y_vel]));
                info.insert("forward_reward", x_vel);
                if p.use_contact_forces {
                    let contact = self.contact_cost(p.contact_cost_weight, p.contact_force_range);
                    costs += contact;
                    // gymnasium's Ant-v4 overwrites `reward_ctrl` with the contact cost
                    info.insert("reward_ctrl", -contact);
                }
                (x_vel + healthy_reward - costs, p.terminate_when_unhealthy && !healthy)
            }
            LocomotionTask::AntV5(p) => {
                let forward = x_vel * p.forward_reward_weight;
                let survive = survive_v5(healthy, p.healthy_reward);
                let contact = self.contact_cost(p.contact_cost_weight, p.contact_force_range);
                planar_info(&mut info, [qpos[0], qpos[1]], Some([x_vel, y_vel]));
                info.insert("reward_forward", forward);
                info.insert("reward_ctrl", -ctrl);
                info.insert("reward_contact", -contact);
                info.insert("reward_survive", survive);
                (forward + survive - (ctrl + contact), p.terminate_when_unhealthy && !healthy)
            }
            LocomotionTask::Swimmer(p) => {
                let forward = p.forward_reward_weight * x_vel;
                info.insert("reward_fwd", forward);
                info.insert("reward_ctrl", -ctrl);
                planar_info(&mut info, after, Some([x_vel, y_vel]));
                info.insert("forward_reward", forward);
                (forward - ctrl, false)
            }
            LocomotionTask::SwimmerV5(p) => {
                let forward = p.forward_reward_weight * x_vel;
                planar_info(&mut info, after, Some([x_vel, y_vel]));
                info.insert("reward_forward", forward);
                info.insert("reward_ctrl", -ctrl);
                (forward - ctrl, false)
            }
        };
        if ant {
            self.torso_xy = after;
        }
        let truncated = self.sim.clock.tick(terminated, self.task.max_steps());
        Ok(Step::new(self.observe(), reward as f32, terminated, truncated).with_info(info))
    }
}

impl Snapshot for Locomotion {
    type State = LocomotionState;

    fn snapshot(&self) -> LocomotionState {
        LocomotionState { physics: physics(&self.sim.data), torso_xy: self.torso_xy, clock: self.sim.clock }
    }

    fn restore(&mut self, state: &LocomotionState) -> Result<()> {
        check_physics(&self.sim.data, &state.physics)?;
        crate::common::snapshot_finite("torso position", &state.torso_xy)?;
        set_physics(&mut self.sim.data, &state.physics)?;
        self.torso_xy = state.torso_xy;
        self.sim.clock = state.clock;
        Ok(())
    }
}

impl TaskParams for Locomotion {
    /// `[mass_scale, friction_scale, damping_scale]`: multipliers of every body's mass and
    /// inertia, every geom's friction and every joint's damping (a common robust-RL family).
    fn task_spec(&self) -> Vec<TaskParam> {
        vec![
            TaskParam::new("mass_scale", 1.0, 0.05, 20.0),
            TaskParam::new("friction_scale", 1.0, 0.0, 20.0),
            TaskParam::new("damping_scale", 1.0, 0.0, 20.0),
        ]
    }
    fn task(&self) -> Vec<f64> {
        self.scales.to_vec()
    }
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        check_task(&self.task_spec(), task)?;
        positive("mass_scale", task[0])?;
        self.apply_scales([task[0], task[1], task[2]])
    }
}
