//! Gymnasium's Reacher (v5, and v4) and Pusher (v5) on MuJoCo.

use std::path::PathBuf;

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Info, Space, Step, Valid};

use super::params::gym_params;
use super::sim::{add_uniform, numpy_norm, sim_env, GymVersion, Sim, SimEnv};
use crate::error::{EnvError, Result};
use crate::numpy_sum::sum_of_squares_f32;
use crate::rng::uniform;

/// gymnasium's `-np.square(action).sum() * w`: float32 throughout (NumPy 2 keeps the float32
/// action's dtype and casts the Python weight to it), NumPy's pairwise sum.
fn ctrl_reward(weight: f64, action: ArrayView1<'_, f32>) -> f64 {
    f64::from(-sum_of_squares_f32(action.iter().copied()) * weight as f32)
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

gym_params! {
    /// Parameters of Reacher (gymnasium `Reacher-v5`, or `-v4`); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `version` | V5 | gymnasium version followed | V4: the others keep their defaults |
    /// | `xml_file` | none (`reacher.xml` of the wheel) | the caller's model file | readable MJCF with bodies `fingertip`, `target`, `nq >= 4` |
    /// | `frame_skip` | 2 | MuJoCo steps per environment step | `>= 1` |
    /// | `reward_dist_weight` | 1.0 | weight of `−‖fingertip − target‖` | finite |
    /// | `reward_control_weight` | 1.0 | weight of `−Σ a²` | finite |
    /// | `max_episode_steps` | 50 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of the wheel's XMLs (see the module docs) | |
    ReacherParams {
        /// gymnasium version.
        version: GymVersion = GymVersion::V5,
        /// The caller's model file (gymnasium's `xml_file`); `None` = the wheel's.
        xml_file: Option<PathBuf> = None,
        /// MuJoCo steps per environment step.
        frame_skip: usize = 2 => at_least_one,
        /// Weight of the distance reward.
        reward_dist_weight: f64 = 1.0 => finite,
        /// Weight of the control reward.
        reward_control_weight: f64 = 1.0 => finite,
        /// Time limit (0 = none).
        max_episode_steps: usize = 50,
        /// Folder of the wheel's model XMLs.
        assets_dir: Option<PathBuf> = None,
    } then Self::v4_rules
}

impl ReacherParams {
    /// The rules gymnasium v4 adds (parameters it fixes).
    fn v4_rules(&self) -> Result<()> {
        if self.version == GymVersion::V4 {
            let fixed = [
                ("xml_file", self.xml_file.is_none()),
                ("frame_skip", self.frame_skip == 2),
                ("reward_dist_weight", self.reward_dist_weight == 1.0),
                ("reward_control_weight", self.reward_control_weight == 1.0),
            ];
            if let Some((name, _)) = fixed.iter().find(|(_, ok)| !ok) {
                return Err(EnvError::invalid(*name, "non-default", "gymnasium v4 fixes it; use version V5"));
            }
        }
        Ok(())
    }
}

/// Gymnasium's `Reacher-v5` (or `-v4`): a two-link arm (`qpos[0..2]`) reaching for a target
/// (`qpos[2..4]`, drawn at reset inside the disc of radius 0.2), 2 actuators in `[-1, 1]`.
///
/// ```text
/// obs = [cos(qpos[:2]), sin(qpos[:2]), qpos[2:], qvel[:2], (fingertip − target)[:2]]
///       (v5: 10; v4 keeps the z difference: 11)
/// r = −w_dist·‖fingertip − target‖ − w_ctrl·Σa²   (v5 after the step; v4 before it)
/// info {reward_dist, reward_ctrl}; never terminates, time limit 50
/// ```
#[derive(Debug, Clone)]
pub struct Reacher {
    params: ReacherParams,
    sim: Sim,
    fingertip: usize,
    target: usize,
    /// `fingertip − target` as the last step (or reset) left it: v4's reward reads it before
    /// the next step.
    tip: [f64; 3],
    obs_space: Space,
}

impl Reacher {
    /// Builds the environment.
    ///
    /// # Errors
    /// [`EnvError::Missing`] when the model file is not found or unreadable,
    /// [`EnvError::Mujoco`] when MuJoCo rejects it, is not 3.17.0, or the model lacks the
    /// bodies `fingertip` / `target` or 4 positions.
    pub fn new(params: Valid<ReacherParams>) -> Result<Self> {
        let params = params.into_inner();
        let sim =
            Sim::load(params.xml_file.as_deref(), "reacher.xml", params.assets_dir.as_deref(), params.frame_skip)?;
        sim.at_least(4, 2)?;
        let (fingertip, target) = (sim.body("fingertip")?, sim.body("target")?);
        let mut env =
            Self { params, sim, fingertip, target, tip: [0.0; 3], obs_space: Space::symmetric(1, f32::INFINITY)? };
        env.tip = env.tip_to_target();
        env.obs_space = Space::symmetric(env.observe().len(), f32::INFINITY)?;
        Ok(env)
    }

    fn tip_to_target(&self) -> [f64; 3] {
        sub(self.sim.xpos(self.fingertip), self.sim.xpos(self.target))
    }

    fn rewards(&self, action: ArrayView1<'_, f32>) -> (f64, f64) {
        let dist = -numpy_norm(&self.tip) * self.params.reward_dist_weight;
        (dist, ctrl_reward(self.params.reward_control_weight, action))
    }
}

sim_env!(
    Reacher,
    /// The parameters.
    params: ReacherParams,
    snapshot
);

impl SimEnv for Reacher {
    const CARRY: usize = 3;

    fn observe(&self) -> Array1<f32> {
        let d = &self.sim.data;
        let q = d.qpos();
        let mut o: Vec<f32> = q[..2].iter().map(|v| v.cos() as f32).collect();
        o.extend(q[..2].iter().map(|v| v.sin() as f32));
        o.extend(q[2..].iter().map(|&v| v as f32));
        o.extend(d.qvel()[..2].iter().map(|&v| v as f32));
        let n = if self.params.version == GymVersion::V5 { 2 } else { 3 };
        o.extend(self.tip[..n].iter().map(|&v| v as f32));
        Array1::from(o)
    }

    fn started(&mut self) {
        self.tip = self.tip_to_target();
    }

    fn carry(&self) -> Vec<f64> {
        self.tip.to_vec()
    }

    fn set_carry(&mut self, carry: &[f64]) {
        self.tip = [carry[0], carry[1], carry[2]];
    }

    /// gymnasium's draws, in order, with NumPy's uniform: `qpos += U(±0.1)`, the goal
    /// `U(±0.2)²` until `‖goal‖ < 0.2`, `qvel += U(±0.005)`; the target's velocity is 0.
    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>) {
        let mut qpos = add_uniform(rng, &self.sim.init_qpos, -0.1, 0.1);
        let goal = loop {
            let g = [uniform(rng, -0.2, 0.2), uniform(rng, -0.2, 0.2)];
            if numpy_norm(&g) < 0.2 {
                break g;
            }
        };
        let n = qpos.len();
        qpos[n - 2..].copy_from_slice(&goal);
        let mut qvel = add_uniform(rng, &self.sim.init_qvel, -0.005, 0.005);
        let m = qvel.len();
        qvel[m.saturating_sub(2)..].fill(0.0);
        (qpos, qvel)
    }

    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        // v4 measures the reward before the step (its length is checked by `simulate` first)
        self.sim.clock.guard()?;
        crate::common::check_box_action(&self.sim.act_space, action)?;
        let before = (self.params.version == GymVersion::V4).then(|| self.rewards(action));
        self.sim.simulate(action)?;
        self.tip = self.tip_to_target();
        let (dist, ctrl) = before.unwrap_or_else(|| self.rewards(action));
        let mut info = Info::with_capacity(2);
        info.insert("reward_dist", dist);
        info.insert("reward_ctrl", ctrl);
        let truncated = self.sim.clock.tick(false, self.params.max_episode_steps);
        Ok(Step::new(self.observe(), (dist + ctrl) as f32, false, truncated).with_info(info))
    }
}

gym_params! {
    /// Parameters of Pusher (gymnasium `Pusher-v5`; `Pusher-v4` is not offered: gymnasium refuses
    /// it on MuJoCo 3); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `xml_file` | none (`pusher_v5.xml` of the wheel) | the caller's model file | readable MJCF with bodies `tips_arm`, `object`, `goal`, `nq, nv >= 7` |
    /// | `frame_skip` | 5 | MuJoCo steps per environment step | `>= 1` |
    /// | `reward_near_weight` | 0.5 | weight of `−‖object − tips_arm‖` | finite |
    /// | `reward_dist_weight` | 1.0 | weight of `−‖object − goal‖` | finite |
    /// | `reward_control_weight` | 0.1 | weight of `−Σ a²` | finite |
    /// | `max_episode_steps` | 100 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of the wheel's XMLs (see the module docs) | |
    PusherParams {
        /// The caller's model file (gymnasium's `xml_file`); `None` = the wheel's.
        xml_file: Option<PathBuf> = None,
        /// MuJoCo steps per environment step.
        frame_skip: usize = 5 => at_least_one,
        /// Weight of the arm-to-object reward.
        reward_near_weight: f64 = 0.5 => finite,
        /// Weight of the object-to-goal reward.
        reward_dist_weight: f64 = 1.0 => finite,
        /// Weight of the control reward.
        reward_control_weight: f64 = 0.1 => finite,
        /// Time limit (0 = none).
        max_episode_steps: usize = 100,
        /// Folder of the wheel's model XMLs.
        assets_dir: Option<PathBuf> = None,
    }
}

/// Gymnasium's `Pusher-v5`: a 7-joint arm pushing a cylinder (`qpos[-4..-2]`, drawn at reset)
/// to a goal (`qpos[-2..]` = 0), 7 actuators in `[-2, 2]`.
///
/// ```text
/// obs = [qpos[:7], qvel[:7], tips_arm, object, goal]   (23; body positions)
/// r = −w_dist·‖object − goal‖ − w_ctrl·Σa² − w_near·‖object − tips_arm‖
/// info {reward_dist, reward_ctrl, reward_near}; never terminates, time limit 100
/// ```
#[derive(Debug, Clone)]
pub struct Pusher {
    params: PusherParams,
    sim: Sim,
    /// `tips_arm`, `object`, `goal`.
    bodies: [usize; 3],
    obs_space: Space,
}

impl Pusher {
    /// Builds the environment.
    ///
    /// # Errors
    /// As [`Reacher::new`]; the model needs the bodies `tips_arm`, `object`, `goal` and 7
    /// positions and velocities.
    pub fn new(params: Valid<PusherParams>) -> Result<Self> {
        let params = params.into_inner();
        let sim =
            Sim::load(params.xml_file.as_deref(), "pusher_v5.xml", params.assets_dir.as_deref(), params.frame_skip)?;
        sim.at_least(7, 7)?;
        let bodies = [sim.body("tips_arm")?, sim.body("object")?, sim.body("goal")?];
        Ok(Self { params, sim, bodies, obs_space: Space::symmetric(23, f32::INFINITY)? })
    }
}

sim_env!(
    Pusher,
    /// The parameters.
    params: PusherParams,
    snapshot
);

impl SimEnv for Pusher {
    fn observe(&self) -> Array1<f32> {
        let d = &self.sim.data;
        let mut o: Vec<f32> = d.qpos()[..7].iter().map(|&v| v as f32).collect();
        o.extend(d.qvel()[..7].iter().map(|&v| v as f32));
        for b in self.bodies {
            o.extend(self.sim.xpos(b).iter().map(|&v| v as f32));
        }
        Array1::from(o)
    }

    /// gymnasium's draws, in order, with NumPy's uniform: the cylinder
    /// `(U(−0.3, 0), U(±0.2))` until it is farther than 0.17 from the goal (0, 0), then
    /// `qvel += U(±0.005)`; the arm starts at `init_qpos`, the object and goal at rest.
    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>) {
        let mut qpos = self.sim.init_qpos.clone();
        let cylinder = loop {
            let c = [uniform(rng, -0.3, 0.0), uniform(rng, -0.2, 0.2)];
            if numpy_norm(&c) > 0.17 {
                break c;
            }
        };
        let n = qpos.len();
        qpos[n - 4..n - 2].copy_from_slice(&cylinder);
        qpos[n - 2..].fill(0.0);
        let mut qvel = add_uniform(rng, &self.sim.init_qvel, -0.005, 0.005);
        let m = qvel.len();
        qvel[m - 4..].fill(0.0);
        (qpos, qvel)
    }

    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.sim.simulate(action)?;
        let [tips, object, goal] = self.bodies.map(|b| self.sim.xpos(b));
        let p = &self.params;
        let near = -numpy_norm(&sub(object, tips)) * p.reward_near_weight;
        let dist = -numpy_norm(&sub(object, goal)) * p.reward_dist_weight;
        let ctrl = ctrl_reward(p.reward_control_weight, action);
        let mut info = Info::with_capacity(3);
        info.insert("reward_dist", dist);
        info.insert("reward_ctrl", ctrl);
        info.insert("reward_near", near);
        let truncated = self.sim.clock.tick(false, p.max_episode_steps);
        Ok(Step::new(self.observe(), (dist + ctrl + near) as f32, false, truncated).with_info(info))
    }
}
