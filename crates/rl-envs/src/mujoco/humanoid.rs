//! Gymnasium's Humanoid (v5, and v4) on MuJoCo.

use std::path::PathBuf;

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Info, Space, Step, Valid};

use super::params::{f64_inf, gym_params};
use super::sim::{numpy_norm, sim_env, GymVersion, Sim, SimEnv};
use crate::error::{EnvError, Result};
use crate::numpy_sum::{pairwise_sum, sum_of_squares_f64};

gym_params! {
    /// Parameters of Humanoid (gymnasium `Humanoid-v5`, or `-v4`); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `version` | V5 | gymnasium version followed | V4: the v5-only ones (†) keep their defaults |
    /// | `xml_file` † | none (`humanoid.xml` of the wheel) | the caller's model file | readable MJCF, a free joint first, `nq >= 3` |
    /// | `frame_skip` † | 5 | MuJoCo steps per environment step | `>= 1` |
    /// | `forward_reward_weight` | 1.25 | weight of the centre-of-mass x velocity | finite |
    /// | `ctrl_cost_weight` | 0.1 | weight of `Σ ctrl²` | `>= 0` |
    /// | `contact_cost_weight` † | 5e-7 | weight of `Σ cfrc_ext²` | `>= 0` |
    /// | `contact_cost_range` † | (−∞, 10) | the contact cost is clipped to it | min < max |
    /// | `healthy_reward` | 5.0 | reward per healthy step | finite |
    /// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
    /// | `healthy_z_range` | (1, 2) | torso height strictly inside | min < max |
    /// | `reset_noise_scale` | 0.01 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
    /// | `exclude_current_positions_from_observation` | true | drop `x, y` from the observation | |
    /// | `include_cinert_in_observation` † | true | body inertias `cinert[1:]` | |
    /// | `include_cvel_in_observation` † | true | body velocities `cvel[1:]` | |
    /// | `include_qfrc_actuator_in_observation` † | true | actuator forces `qfrc_actuator[6:]` | |
    /// | `include_cfrc_ext_in_observation` † | true | external forces `cfrc_ext[1:]` | |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of the wheel's XMLs (see the module docs) | |
    HumanoidParams {
        /// gymnasium version.
        version: GymVersion = GymVersion::V5,
        /// The caller's model file (gymnasium's `xml_file`); `None` = the wheel's.
        xml_file: Option<PathBuf> = None,
        /// MuJoCo steps per environment step.
        frame_skip: usize = 5 => at_least_one,
        /// Forward reward weight.
        forward_reward_weight: f64 = 1.25 => finite,
        /// Control cost weight.
        ctrl_cost_weight: f64 = 0.1 => non_negative,
        /// Contact cost weight (v5).
        contact_cost_weight: f64 = 5e-7 => non_negative,
        /// Contact cost clip (v5).
        #[serde(with = "f64_inf")]
        contact_cost_range: [f64; 2] = [f64::NEG_INFINITY, 10.0] => range,
        /// Healthy reward.
        healthy_reward: f64 = 5.0 => finite,
        /// Terminate when unhealthy.
        terminate_when_unhealthy: bool = true,
        /// Healthy height range.
        #[serde(with = "f64_inf")]
        healthy_z_range: [f64; 2] = [1.0, 2.0] => range,
        /// Reset noise.
        reset_noise_scale: f64 = 1e-2 => non_negative,
        /// Drop `x, y` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Body inertias in the observation (v5).
        include_cinert_in_observation: bool = true,
        /// Body velocities in the observation (v5).
        include_cvel_in_observation: bool = true,
        /// Actuator forces in the observation (v5).
        include_qfrc_actuator_in_observation: bool = true,
        /// External contact forces in the observation (v5).
        include_cfrc_ext_in_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the wheel's model XMLs.
        assets_dir: Option<PathBuf> = None,
    } then Self::v4_rules
}

impl HumanoidParams {
    /// The rules gymnasium v4 adds (parameters it fixes).
    fn v4_rules(&self) -> Result<()> {
        if self.version == GymVersion::V4 {
            let d = Self::default();
            let fixed = [
                ("xml_file", self.xml_file.is_none()),
                ("frame_skip", self.frame_skip == d.frame_skip),
                ("contact_cost_weight", self.contact_cost_weight == d.contact_cost_weight),
                ("contact_cost_range", self.contact_cost_range == d.contact_cost_range),
                ("include_cinert_in_observation", self.include_cinert_in_observation),
                ("include_cvel_in_observation", self.include_cvel_in_observation),
                ("include_qfrc_actuator_in_observation", self.include_qfrc_actuator_in_observation),
                ("include_cfrc_ext_in_observation", self.include_cfrc_ext_in_observation),
            ];
            if let Some((name, _)) = fixed.iter().find(|(_, ok)| !ok) {
                return Err(EnvError::invalid(
                    *name,
                    "non-default",
                    "gymnasium v4 has no such parameter; use version V5",
                ));
            }
        }
        Ok(())
    }
}

/// Gymnasium's `Humanoid-v5` (or `-v4`): a 3D humanoid (free joint + 17 hinges), 17 actuators
/// in `[-0.4, 0.4]`; `com` is the mass-weighted mean of the bodies' centres of mass.
///
/// ```text
/// v5 obs = [qpos[2:], qvel, cinert[1:], cvel[1:], qfrc_actuator[6:], cfrc_ext[1:]]  (348)
/// v4 obs = [qpos[2:], qvel, cinert,     cvel,     qfrc_actuator,     cfrc_ext    ]  (376)
/// v5: r = w_f·ẋ_com + healthy·5 − 0.1·Σctrl² − clip(5e-7·Σcfrc_ext², −∞, 10)
/// v4: r = w_f·ẋ_com + (healthy or terminate_when_unhealthy)·5 − 0.1·Σctrl²
/// terminated = terminate_when_unhealthy && !(1 < z < 2)
/// ```
///
/// The infos are gymnasium's (v5: positions, tendon lengths and velocities, distance from the
/// origin, velocities, reward terms; v4: its reward terms and the centre of mass).
#[derive(Debug, Clone)]
pub struct Humanoid {
    params: HumanoidParams,
    sim: Sim,
    /// `np.sum(model.body_mass)`.
    total_mass: f64,
    /// The centre of mass the next step's velocity is measured from (gymnasium recomputes it
    /// from MuJoCo's positions before the step, which after `mj_step` are the last substep's).
    com: [f64; 2],
    obs_space: Space,
}

impl Humanoid {
    /// Builds the environment.
    ///
    /// # Errors
    /// [`EnvError::Missing`] when the model file is not found or unreadable,
    /// [`EnvError::Mujoco`] when MuJoCo rejects it, is not 3.17.0, or the model has fewer than
    /// 3 positions or 6 velocities.
    pub fn new(params: Valid<HumanoidParams>) -> Result<Self> {
        let params = params.into_inner();
        let sim =
            Sim::load(params.xml_file.as_deref(), "humanoid.xml", params.assets_dir.as_deref(), params.frame_skip)?;
        sim.at_least(3, 6)?;
        let total_mass = pairwise_sum(sim.data.model().body_mass());
        let mut env = Self { params, sim, total_mass, com: [0.0; 2], obs_space: Space::symmetric(1, f32::INFINITY)? };
        env.com = env.mass_center();
        env.obs_space = Space::symmetric(env.observe().len(), f32::INFINITY)?;
        Ok(env)
    }

    /// gymnasium's reset info for the current state (v5: `x_position`, `y_position`,
    /// `tendon_length`, `tendon_velocity`, `distance_from_origin`; v4: none).
    pub fn reset_info(&self) -> Info {
        let mut info = Info::with_capacity(5);
        if self.params.version == GymVersion::V5 {
            self.position_info(&mut info);
        }
        info
    }

    fn position_info(&self, info: &mut Info) {
        let d = &self.sim.data;
        let q = d.qpos();
        info.insert("x_position", q[0]);
        info.insert("y_position", q[1]);
        info.insert("tendon_length", d.ten_length().to_vec());
        info.insert("tendon_velocity", d.ten_velocity().to_vec());
        info.insert("distance_from_origin", numpy_norm(&q[..2]));
    }

    /// gymnasium's `mass_center`: `np.einsum("b,bj->j", body_mass, xipos) / np.sum(body_mass)`
    /// (einsum accumulates over the bodies in order, without fused multiply-adds).
    fn mass_center(&self) -> [f64; 2] {
        let mass = self.sim.data.model().body_mass();
        let mut num = [0.0f64; 2];
        for (m, x) in mass.iter().zip(self.sim.data.xipos()) {
            num[0] += m * x[0];
            num[1] += m * x[1];
        }
        [num[0] / self.total_mass, num[1] / self.total_mass]
    }
}

sim_env!(
    Humanoid,
    /// The parameters.
    params: HumanoidParams,
    snapshot
);

impl SimEnv for Humanoid {
    const CARRY: usize = 2;

    fn observe(&self) -> Array1<f32> {
        let d = &self.sim.data;
        let p = &self.params;
        let v5 = p.version == GymVersion::V5;
        let skip = if p.exclude_current_positions_from_observation { 2 } else { 0 };
        let mut o: Vec<f32> = d.qpos()[skip..].iter().map(|&v| v as f32).collect();
        o.extend(d.qvel().iter().map(|&v| v as f32));
        let first = usize::from(v5);
        if p.include_cinert_in_observation {
            o.extend(d.cinert()[first..].iter().flatten().map(|&v| v as f32));
        }
        if p.include_cvel_in_observation {
            o.extend(d.cvel()[first..].iter().flatten().map(|&v| v as f32));
        }
        if p.include_qfrc_actuator_in_observation {
            let f = d.qfrc_actuator();
            o.extend(f[if v5 { 6 } else { 0 }..].iter().map(|&v| v as f32));
        }
        if p.include_cfrc_ext_in_observation {
            o.extend(d.cfrc_ext()[first..].iter().flatten().map(|&v| v as f32));
        }
        Array1::from(o)
    }

    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>) {
        self.sim.noisy_state(rng, self.params.reset_noise_scale, false)
    }

    fn started(&mut self) {
        self.com = self.mass_center();
    }

    fn carry(&self) -> Vec<f64> {
        self.com.to_vec()
    }

    fn set_carry(&mut self, carry: &[f64]) {
        self.com = [carry[0], carry[1]];
    }

    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        let before = self.com;
        self.sim.simulate(action)?;
        let after = self.mass_center();
        self.com = after;
        let dt = self.sim.dt;
        let (x_vel, y_vel) = ((after[0] - before[0]) / dt, (after[1] - before[1]) / dt);
        let p = &self.params;
        let d = &self.sim.data;
        let z = d.qpos()[2];
        let healthy = p.healthy_z_range[0] < z && z < p.healthy_z_range[1];
        let forward = p.forward_reward_weight * x_vel;
        // gymnasium's control cost is over `data.ctrl`, the float64 copy of the (unclamped) action
        let ctrl = p.ctrl_cost_weight * sum_of_squares_f64(d.ctrl().iter().copied());
        let terminated = p.terminate_when_unhealthy && !healthy;
        let mut info = Info::with_capacity(11);
        let reward = match p.version {
            GymVersion::V5 => {
                let survive = f64::from(u8::from(healthy)) * p.healthy_reward;
                let contact = (p.contact_cost_weight * sum_of_squares_f64(d.cfrc_ext().iter().flatten().copied()))
                    .max(p.contact_cost_range[0])
                    .min(p.contact_cost_range[1]);
                self.position_info(&mut info);
                info.insert("x_velocity", x_vel);
                info.insert("y_velocity", y_vel);
                info.insert("reward_survive", survive);
                info.insert("reward_forward", forward);
                info.insert("reward_ctrl", -ctrl);
                info.insert("reward_contact", -contact);
                (forward + survive) - (ctrl + contact)
            }
            GymVersion::V4 => {
                let alive = f64::from(u8::from(healthy || p.terminate_when_unhealthy)) * p.healthy_reward;
                info.insert("reward_linvel", forward);
                info.insert("reward_quadctrl", -ctrl);
                info.insert("reward_alive", alive);
                info.insert("x_position", after[0]);
                info.insert("y_position", after[1]);
                info.insert("distance_from_origin", numpy_norm(&after));
                info.insert("x_velocity", x_vel);
                info.insert("y_velocity", y_vel);
                info.insert("forward_reward", forward);
                (forward + alive) - ctrl
            }
        };
        let truncated = self.sim.clock.tick(terminated, p.max_episode_steps);
        Ok(Step::new(self.observe(), reward as f32, terminated, truncated).with_info(info))
    }
}
