//! Gymnasium's InvertedPendulum and InvertedDoublePendulum (v5, and v4) on MuJoCo.

use std::path::PathBuf;

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Info, Space, Step, Valid};

use super::params::gym_params;
use super::sim::{sim_env, GymVersion, Sim, SimEnv};
use crate::error::{EnvError, Result};

/// Under [`GymVersion::V4`], gymnasium fixes the model file, the frame skip and the reset
/// noise: they must keep their defaults.
fn v4_fixed(version: GymVersion, xml_file: &Option<PathBuf>, frame_skip: usize, skip: usize) -> Result<()> {
    if version == GymVersion::V4 {
        if let Some(p) = xml_file {
            return Err(EnvError::invalid("xml_file", p.display(), "gymnasium v4 has no `xml_file`; use version V5"));
        }
        if frame_skip != skip {
            return Err(EnvError::invalid("frame_skip", frame_skip, format!("gymnasium v4 fixes it at {skip}")));
        }
    }
    Ok(())
}

gym_params! {
    /// Parameters of InvertedPendulum (gymnasium `InvertedPendulum-v5`, or `-v4`); the defaults
    /// are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `version` | V5 | gymnasium version followed | V4: the others keep their defaults |
    /// | `xml_file` | none (`inverted_pendulum.xml` of the wheel) | the caller's model file | readable MJCF, `nq >= 2` |
    /// | `frame_skip` | 2 | MuJoCo steps per environment step | `>= 1` |
    /// | `reset_noise_scale` | 0.01 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of the wheel's XMLs (see the module docs) | |
    InvertedPendulumParams {
        /// gymnasium version.
        version: GymVersion = GymVersion::V5,
        /// The caller's model file (gymnasium's `xml_file`); `None` = the wheel's.
        xml_file: Option<PathBuf> = None,
        /// MuJoCo steps per environment step.
        frame_skip: usize = 2 => at_least_one,
        /// Reset noise.
        reset_noise_scale: f64 = 0.01 => non_negative,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the wheel's model XMLs.
        assets_dir: Option<PathBuf> = None,
    } then Self::v4_rules
}

impl InvertedPendulumParams {
    /// The rules gymnasium v4 adds (parameters it fixes).
    fn v4_rules(&self) -> Result<()> {
        v4_fixed(self.version, &self.xml_file, self.frame_skip, 2)?;
        if self.version == GymVersion::V4 && self.reset_noise_scale != 0.01 {
            return Err(EnvError::invalid(
                "reset_noise_scale",
                self.reset_noise_scale,
                "gymnasium v4 fixes it at 0.01",
            ));
        }
        Ok(())
    }
}

/// Gymnasium's `InvertedPendulum-v5` (or `-v4`): a cart (`qpos[0]`) with a hinged pole
/// (`qpos[1]`), 1 actuator in `[-3, 3]`.
///
/// ```text
/// obs = [qpos, qvel]                           (4)
/// terminated = !finite(obs) || |qpos[1]| > 0.2
/// v5: r = 1 if !terminated else 0, info {reward_survive: r}      v4: r = 1, no info
/// ```
#[derive(Debug, Clone)]
pub struct InvertedPendulum {
    params: InvertedPendulumParams,
    sim: Sim,
    obs_space: Space,
}

impl InvertedPendulum {
    /// Builds the environment.
    ///
    /// # Errors
    /// [`EnvError::Missing`] when the model file is not found or unreadable,
    /// [`EnvError::Mujoco`] when MuJoCo rejects it, is not 3.17.0, or the model has fewer than
    /// 2 positions.
    pub fn new(params: Valid<InvertedPendulumParams>) -> Result<Self> {
        let params = params.into_inner();
        let sim = Sim::load(
            params.xml_file.as_deref(),
            "inverted_pendulum.xml",
            params.assets_dir.as_deref(),
            params.frame_skip,
        )?;
        sim.at_least(2, 0)?;
        let dim = sim.init_qpos.len() + sim.init_qvel.len();
        Ok(Self { params, sim, obs_space: Space::symmetric(dim, f32::INFINITY)? })
    }
}

sim_env!(
    InvertedPendulum,
    /// The parameters.
    params: InvertedPendulumParams,
    snapshot
);

impl SimEnv for InvertedPendulum {
    fn observe(&self) -> Array1<f32> {
        self.sim.data.qpos().iter().chain(self.sim.data.qvel()).map(|&v| v as f32).collect()
    }

    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>) {
        self.sim.noisy_state(rng, self.params.reset_noise_scale, false)
    }

    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.sim.simulate(action)?;
        let d = &self.sim.data;
        // the float64 observation, as gymnasium tests it
        let finite = d.qpos().iter().chain(d.qvel()).all(|v| v.is_finite());
        let terminated = !finite || d.qpos()[1].abs() > 0.2;
        let mut info = Info::with_capacity(1);
        let reward = match self.params.version {
            GymVersion::V5 => {
                let r = f64::from(u8::from(!terminated));
                info.insert("reward_survive", r);
                r
            }
            GymVersion::V4 => 1.0,
        };
        let truncated = self.sim.clock.tick(terminated, self.params.max_episode_steps);
        Ok(Step::new(self.observe(), reward as f32, terminated, truncated).with_info(info))
    }
}

gym_params! {
    /// Parameters of InvertedDoublePendulum (gymnasium `InvertedDoublePendulum-v5`, or `-v4`);
    /// the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `version` | V5 | gymnasium version followed | V4: the others keep their defaults |
    /// | `xml_file` | none (`inverted_double_pendulum.xml` of the wheel) | the caller's model file | readable MJCF, `nq, nv >= 3`, a site |
    /// | `frame_skip` | 5 | MuJoCo steps per environment step | `>= 1` |
    /// | `healthy_reward` | 10.0 | reward per step while the tip is above 1 | finite |
    /// | `reset_noise_scale` | 0.1 | `qpos` += `U(±scale)`, `qvel` += `scale·N(0, 1)` at reset | `>= 0` |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of the wheel's XMLs (see the module docs) | |
    InvertedDoublePendulumParams {
        /// gymnasium version.
        version: GymVersion = GymVersion::V5,
        /// The caller's model file (gymnasium's `xml_file`); `None` = the wheel's.
        xml_file: Option<PathBuf> = None,
        /// MuJoCo steps per environment step.
        frame_skip: usize = 5 => at_least_one,
        /// Reward per healthy step.
        healthy_reward: f64 = 10.0 => finite,
        /// Reset noise.
        reset_noise_scale: f64 = 0.1 => non_negative,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the wheel's model XMLs.
        assets_dir: Option<PathBuf> = None,
    } then Self::v4_rules
}

impl InvertedDoublePendulumParams {
    /// The rules gymnasium v4 adds (parameters it fixes).
    fn v4_rules(&self) -> Result<()> {
        v4_fixed(self.version, &self.xml_file, self.frame_skip, 5)?;
        if self.version == GymVersion::V4 {
            if self.healthy_reward != 10.0 {
                return Err(EnvError::invalid("healthy_reward", self.healthy_reward, "gymnasium v4 fixes it at 10"));
            }
            if self.reset_noise_scale != 0.1 {
                return Err(EnvError::invalid(
                    "reset_noise_scale",
                    self.reset_noise_scale,
                    "gymnasium v4 fixes it at 0.1",
                ));
            }
        }
        Ok(())
    }
}

/// Gymnasium's `InvertedDoublePendulum-v5` (or `-v4`): a cart with two hinged poles, 1
/// actuator in `[-1, 1]`; `(x, _, y)` is the tip site's position.
///
/// ```text
/// obs = [qpos[0], sin(qpos[1:]), cos(qpos[1:]), clip(qvel, ±10), clip(qfrc_constraint, ±10)[:1]]
///       (v5: 9; v4 keeps all of qfrc_constraint: 11)
/// terminated = y <= 1
/// r = alive − (0.01·x² + (y − 2)²) − (1e-3·v1² + 5e-3·v2²)
///       v5: alive = healthy_reward·!terminated, info {reward_survive, distance_penalty,
///       velocity_penalty};   v4: alive = 10 on every step, no info
/// ```
#[derive(Debug, Clone)]
pub struct InvertedDoublePendulum {
    params: InvertedDoublePendulumParams,
    sim: Sim,
    obs_space: Space,
}

impl InvertedDoublePendulum {
    /// Builds the environment.
    ///
    /// # Errors
    /// As [`InvertedPendulum::new`]; the model needs 3 positions and velocities and a site.
    pub fn new(params: Valid<InvertedDoublePendulumParams>) -> Result<Self> {
        let params = params.into_inner();
        let sim = Sim::load(
            params.xml_file.as_deref(),
            "inverted_double_pendulum.xml",
            params.assets_dir.as_deref(),
            params.frame_skip,
        )?;
        sim.at_least(3, 3)?;
        sim.expect("sites", sim.data.site_xpos().len(), 1)?;
        let mut env = Self { params, sim, obs_space: Space::symmetric(1, f32::INFINITY)? };
        env.obs_space = Space::symmetric(env.observe().len(), f32::INFINITY)?;
        Ok(env)
    }
}

sim_env!(
    InvertedDoublePendulum,
    /// The parameters.
    params: InvertedDoublePendulumParams,
    snapshot
);

impl SimEnv for InvertedDoublePendulum {
    fn observe(&self) -> Array1<f32> {
        let d = &self.sim.data;
        let q = d.qpos();
        let mut o: Vec<f32> = vec![q[0] as f32];
        o.extend(q[1..].iter().map(|v| v.sin() as f32));
        o.extend(q[1..].iter().map(|v| v.cos() as f32));
        o.extend(d.qvel().iter().map(|v| v.clamp(-10.0, 10.0) as f32));
        let fc = d.qfrc_constraint();
        let n = if self.params.version == GymVersion::V5 { 1 } else { fc.len() };
        o.extend(fc[..n].iter().map(|v| v.clamp(-10.0, 10.0) as f32));
        Array1::from(o)
    }

    /// `qpos` += `U(±scale)` as NumPy draws it; `qvel` += `scale·N(0, 1)` from this crate's
    /// normal sampler (not NumPy's: equal in distribution only).
    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>) {
        self.sim.noisy_state(rng, self.params.reset_noise_scale, true)
    }

    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.sim.simulate(action)?;
        let d = &self.sim.data;
        let [x, _, y] = d.site_xpos()[0];
        let qvel = d.qvel();
        let (v1, v2) = (qvel[1], qvel[2]);
        let terminated = y <= 1.0;
        let dist_penalty = 0.01 * x.powi(2) + (y - 2.0).powi(2);
        let vel_penalty = 1e-3 * v1.powi(2) + 5e-3 * v2.powi(2);
        let mut info = Info::with_capacity(3);
        let alive = match self.params.version {
            GymVersion::V5 => {
                let alive = self.params.healthy_reward * f64::from(u8::from(!terminated));
                info.insert("reward_survive", alive);
                info.insert("distance_penalty", -dist_penalty);
                info.insert("velocity_penalty", -vel_penalty);
                alive
            }
            GymVersion::V4 => 10.0,
        };
        let reward = alive - dist_penalty - vel_penalty;
        let truncated = self.sim.clock.tick(terminated, self.params.max_episode_steps);
        Ok(Step::new(self.observe(), reward as f32, terminated, truncated).with_info(info))
    }
}
