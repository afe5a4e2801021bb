//! The MuJoCo plumbing shared by the gymnasium v5 environments of this crate (pendulums,
//! manipulators, Humanoid): model loading (`xml_file`), `set_state`, `do_simulation`, snapshots.

use std::path::{Path, PathBuf};

use mujoco_rs::prelude::*;
use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{RlCoreError, Space, Step};
use serde::{Deserialize, Serialize};

use crate::common::{check_box_action, EpisodeClock};
use crate::error::{EnvError, Result};

/// Which gymnasium version of an environment to follow (`Foo-v4` or `Foo-v5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GymVersion {
    /// gymnasium's `*_v4.py`.
    V4,
    /// gymnasium's `*_v5.py` (the default).
    #[default]
    V5,
}

/// The state of a MuJoCo environment of this module (InvertedPendulum, InvertedDoublePendulum,
/// Reacher, Pusher, Humanoid): everything a step depends on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MujocoState {
    /// MuJoCo's integration state (`mj_getState` with `mjSTATE_INTEGRATION`).
    pub physics: Vec<f64>,
    /// Values a step reads that `mj_forward` after restoring `physics` would not reproduce
    /// (MuJoCo's positions after `mj_step` are those of the last substep's start): Humanoid,
    /// the centre of mass `[x, y]` the next velocity is measured from; Reacher, the
    /// fingertip − target vector (v4's reward reads it before the step); empty for the others.
    pub carry: Vec<f64>,
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
}

/// `np.linalg.norm(v)` of a float64 vector of length 1 to 3: NumPy computes
/// `sqrt(dot(v, v))` and the PyPI wheel's OpenBLAS `ddot` accumulates with fused multiply-adds,
/// `sqrt(fma(z, z, fma(y, y, x·x)))` (checked on 3000 random 3-vectors against NumPy 2.4 on
/// this machine's OpenBLAS kernel).
pub(crate) fn numpy_norm(v: &[f64]) -> f64 {
    let mut it = v.iter();
    let Some(first) = it.next() else { return 0.0 };
    it.fold(first * first, |acc, x| x.mul_add(*x, acc)).sqrt()
}

/// MuJoCo's model and data, as this module holds them.
pub(crate) type Data = MjData<Box<MjModel>>;

const INTEGRATION: u32 = MjtState::mjSTATE_INTEGRATION as u32;

/// MuJoCo's integration state (`mj_getState` with `mjSTATE_INTEGRATION`: time, `qpos`, `qvel`,
/// actuator state, warm start, controls, applied forces, ...).
pub(crate) fn physics(data: &Data) -> Vec<f64> {
    data.state(INTEGRATION).to_vec()
}

/// Checks a saved integration state against `data`'s model: its length, finite values.
///
/// # Errors
/// [`EnvError::BadSnapshot`] naming what is wrong.
pub(crate) fn check_physics(data: &Data, physics: &[f64]) -> Result<()> {
    let expected = data.model().state_size(INTEGRATION);
    if physics.len() != expected {
        return Err(EnvError::snapshot(format!(
            "MuJoCo state of length {}, this model's is {expected}",
            physics.len()
        )));
    }
    crate::common::snapshot_finite("MuJoCo state", physics)
}

/// Sets an integration state checked by [`check_physics`] (`mj_setState`), then `mj_forward`.
///
/// # Errors
/// [`EnvError::BadSnapshot`] when MuJoCo refuses it.
pub(crate) fn set_physics(data: &mut Data, physics: &[f64]) -> Result<()> {
    data.set_state(physics, INTEGRATION).map_err(|e| EnvError::snapshot(format!("{e:?}")))?;
    data.forward();
    Ok(())
}

/// Replaces the model by a copy changed by `edit`, keeping the integration state: the new
/// model's constants are recomputed (`mj_setConst`), the state set again, then `mj_forward`.
///
/// # Errors
/// [`EnvError::Mujoco`] when MuJoCo refuses the model or the state.
pub(crate) fn edit_model(data: &mut Data, edit: impl FnOnce(&mut MjModel)) -> Result<()> {
    let state = data.state(INTEGRATION);
    let mut model: MjModel = data.model().clone();
    edit(&mut model);
    data.try_swap_model(Box::new(model)).map_err(|e| EnvError::Mujoco(format!("{e:?}")))?;
    data.set_const();
    data.set_state(&state, INTEGRATION).map_err(|e| EnvError::Mujoco(format!("{e:?}")))?;
    data.forward();
    Ok(())
}

/// gymnasium's `MujocoEnv` core: the model and data, the initial state, the episode clock.
#[derive(Debug, Clone)]
pub(crate) struct Sim {
    pub data: Data,
    pub init_qpos: Vec<f64>,
    pub init_qvel: Vec<f64>,
    pub frame_skip: usize,
    pub dt: f64,
    pub act_space: Space,
    pub clock: EpisodeClock,
    /// Whether a step ends with `mj_rnePostConstraint` (gymnasium 1.4 calls it on every step;
    /// the v4 locomotion tasks only when they read `cfrc_ext`, which nothing else reads).
    pub post_constraint: bool,
}

impl Sim {
    /// Loads `xml_file` when given, resolved as gymnasium's `expand_model_path` does
    /// ([`super::resolve_xml`]: a path starting with `/` or `.` as given, `~` under `$HOME`, a
    /// bare file name in the asset folders), otherwise gymnasium's `default_xml` found in the
    /// asset folders ([`super::find_asset`]).
    ///
    /// # Errors
    /// [`EnvError::Missing`] for an unreadable file, [`EnvError::Mujoco`] when MuJoCo rejects
    /// it or is not 3.17.0, [`EnvError::InvalidParameter`] for `frame_skip == 0`.
    pub fn load(
        xml_file: Option<&Path>,
        default_xml: &str,
        assets_dir: Option<&Path>,
        frame_skip: usize,
    ) -> Result<Self> {
        super::check_mujoco_version()?;
        if frame_skip == 0 {
            return Err(EnvError::invalid("frame_skip", 0, "must be >= 1"));
        }
        let path: PathBuf = match xml_file {
            Some(p) => super::resolve_xml(p, assets_dir)?,
            None => super::find_asset(default_xml, assets_dir)?,
        };
        let model =
            MjModel::from_xml(&path).map_err(|e| EnvError::Mujoco(format!("cannot load {}: {e:?}", path.display())))?;
        let data = MjData::try_new(Box::new(model)).map_err(|e| EnvError::Mujoco(format!("{e:?}")))?;
        Self::from_data(data, frame_skip)
    }

    /// The core around a compiled model: `dt = timestep · frame_skip`, the actuators' control
    /// ranges as the action space, the initial `qpos`/`qvel` (the model's), then `mj_forward`.
    ///
    /// # Errors
    /// [`EnvError::Core`] for a control range that is not a box.
    pub fn from_data(data: Data, frame_skip: usize) -> Result<Self> {
        let m = data.model();
        let dt = m.opt().timestep * frame_skip as f64;
        let ranges = m.actuator_ctrlrange();
        let low: Vec<f32> = ranges.iter().map(|r| r[0] as f32).collect();
        let high: Vec<f32> = ranges.iter().map(|r| r[1] as f32).collect();
        let init_qpos = data.qpos().to_vec();
        let init_qvel = data.qvel().to_vec();
        let mut sim = Self {
            act_space: Space::boxed(low.into(), high.into())?,
            data,
            init_qpos,
            init_qvel,
            frame_skip,
            dt,
            clock: EpisodeClock::default(),
            post_constraint: true,
        };
        sim.data.forward();
        Ok(sim)
    }

    /// The id of body `name`.
    ///
    /// # Errors
    /// [`EnvError::Mujoco`] when the model has no such body (a caller's `xml_file`).
    pub fn body(&self, name: &str) -> Result<usize> {
        self.data
            .model()
            .name_to_id(MjtObjBase::mjOBJ_BODY, name)
            .ok_or_else(|| EnvError::Mujoco(format!("the model has no body named `{name}`")))
    }

    /// Checks that the model has `n` generalised positions, velocities or actuators.
    ///
    /// # Errors
    /// [`EnvError::Mujoco`] naming what differs.
    pub fn expect(&self, what: &str, got: usize, need: usize) -> Result<()> {
        if got < need {
            return Err(EnvError::Mujoco(format!("the model has {got} {what}, this environment needs {need}")));
        }
        Ok(())
    }

    /// Checks that the model has at least `positions` generalised positions and `velocities`
    /// velocities.
    ///
    /// # Errors
    /// [`EnvError::Mujoco`] naming what the model lacks (positions first).
    pub fn at_least(&self, positions: usize, velocities: usize) -> Result<()> {
        self.expect("positions", self.init_qpos.len(), positions)?;
        self.expect("velocities", self.init_qvel.len(), velocities)
    }

    /// `data.xpos[body]` (gymnasium's `get_body_com`).
    pub fn xpos(&self, body: usize) -> [f64; 3] {
        self.data.xpos()[body]
    }

    /// gymnasium's `mj_resetData` + `set_state(qpos, qvel)` (which calls `mj_forward`); starts
    /// an episode.
    ///
    /// # Errors
    /// [`EnvError::Shape`] for wrong lengths, [`EnvError::NonFinite`] for NaN.
    pub fn set_state(&mut self, qpos: &[f64], qvel: &[f64]) -> Result<()> {
        crate::error::check_len("qpos", self.init_qpos.len(), qpos.len())?;
        crate::error::check_len("qvel", self.init_qvel.len(), qvel.len())?;
        crate::error::check_finite_f64("qpos", qpos)?;
        crate::error::check_finite_f64("qvel", qvel)?;
        self.data.reset();
        self.data.qpos_mut().copy_from_slice(qpos);
        self.data.qvel_mut().copy_from_slice(qvel);
        self.data.forward();
        self.clock.start();
        Ok(())
    }

    /// gymnasium's `do_simulation`: `ctrl = action` (MuJoCo clamps it to the control range),
    /// `frame_skip` × `mj_step`, then `mj_rnePostConstraint` (for `cfrc_ext`; see
    /// [`Sim::post_constraint`]).
    ///
    /// # Errors
    /// Outside an episode, for a wrong length or NaN, and when the simulation turns unstable
    /// (which ends the episode).
    pub fn simulate(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<()> {
        self.clock.guard()?;
        check_box_action(&self.act_space, action)?;
        for (c, a) in self.data.ctrl_mut().iter_mut().zip(action.iter()) {
            *c = f64::from(*a);
        }
        for _ in 0..self.frame_skip {
            self.data.step();
        }
        if self.post_constraint {
            self.data.rne_post_constraint();
        }
        let w = self.data.warning();
        let bad = [MjtWarning::mjWARN_BADQACC, MjtWarning::mjWARN_BADQPOS, MjtWarning::mjWARN_BADQVEL];
        if bad.iter().any(|k| w[*k as usize].number > 0)
            || !self.data.qpos().iter().chain(self.data.qvel()).all(|v| v.is_finite())
        {
            self.clock.needs_reset = true;
            return Err(RlCoreError::NonFinite {
                what: "MuJoCo simulation state (the simulation diverged)".into(),
                index: 0,
                value: f64::NAN,
            });
        }
        Ok(())
    }

    pub fn snapshot(&self, carry: Vec<f64>) -> MujocoState {
        MujocoState { physics: physics(&self.data), carry, clock: self.clock }
    }

    /// Restores `state`, whose `carry` must have `carry_len` values (the caller applies them).
    ///
    /// # Errors
    /// [`EnvError::BadSnapshot`] for a state of another length or with non-finite values.
    pub fn restore(&mut self, state: &MujocoState, carry_len: usize) -> Result<()> {
        if state.carry.len() != carry_len {
            return Err(EnvError::snapshot(format!(
                "{} carried values, this environment has {carry_len}",
                state.carry.len()
            )));
        }
        crate::common::snapshot_finite("carried values", &state.carry)?;
        check_physics(&self.data, &state.physics)?;
        set_physics(&mut self.data, &state.physics)?;
        self.clock = state.clock;
        Ok(())
    }

    /// gymnasium's usual reset noise, drawn in this order: `qpos + U(±scale)` with NumPy's
    /// uniform, then `qvel + U(±scale)`, or `qvel + scale·N(0, 1)` with this crate's normal
    /// sampler when `normal_vel` (not NumPy's: equal in distribution only).
    pub fn noisy_state(&self, rng: &mut dyn RngCore, scale: f64, normal_vel: bool) -> (Vec<f64>, Vec<f64>) {
        let qpos = add_uniform(rng, &self.init_qpos, -scale, scale);
        let qvel = if normal_vel {
            self.init_qvel.iter().map(|v| v + scale * crate::rng::standard_normal(rng)).collect()
        } else {
            add_uniform(rng, &self.init_qvel, -scale, scale)
        };
        (qpos, qvel)
    }
}

/// Access to an environment's [`Sim`] (written by [`sim_env!`]).
pub(crate) trait HasSim {
    fn sim(&self) -> &Sim;
    fn sim_mut(&mut self) -> &mut Sim;
}

/// What a gymnasium `MujocoEnv` of this module adds to [`Sim`]: its observation, its reset
/// draws and its step; the provided methods are the shared rest (`reset_to_state`, `reset`,
/// snapshots), which [`sim_env!`] exposes as the public methods and trait impls.
pub(crate) trait SimEnv: HasSim {
    /// How many values [`MujocoState::carry`] holds.
    const CARRY: usize = 0;

    /// The observation of the current state.
    fn observe(&self) -> Array1<f32>;

    /// gymnasium's reset draws: the `qpos`, `qvel` an episode starts from.
    fn initial_state(&self, rng: &mut dyn RngCore) -> (Vec<f64>, Vec<f64>);

    /// One environment step (gymnasium's `step`).
    fn transition(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step>;

    /// Recomputes what the step carries over after the state was set (default: nothing).
    fn started(&mut self) {}

    /// The carried values for [`MujocoState::carry`] (default: none).
    fn carry(&self) -> Vec<f64> {
        Vec::new()
    }

    /// Applies restored carried values, [`SimEnv::CARRY`] of them (default: none).
    fn set_carry(&mut self, _carry: &[f64]) {}

    /// gymnasium's `mj_resetData` + `set_state(qpos, qvel)`; returns the observation.
    ///
    /// # Errors
    /// [`EnvError::Shape`] for wrong lengths, [`EnvError::NonFinite`] for NaN.
    fn start(&mut self, qpos: &[f64], qvel: &[f64]) -> Result<Array1<f32>> {
        self.sim_mut().set_state(qpos, qvel)?;
        self.started();
        Ok(self.observe())
    }

    /// [`SimEnv::initial_state`], then [`SimEnv::start`].
    ///
    /// # Errors
    /// As [`SimEnv::start`], as an [`RlCoreError`].
    fn reset_from(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let (qpos, qvel) = self.initial_state(rng);
        self.start(&qpos, &qvel).map_err(|e| RlCoreError::invalid("reset state", "?", e.to_string()))
    }

    fn save(&self) -> MujocoState {
        self.sim().snapshot(self.carry())
    }

    /// # Errors
    /// As [`Sim::restore`].
    fn load(&mut self, state: &MujocoState) -> Result<()> {
        self.sim_mut().restore(state, Self::CARRY)?;
        self.set_carry(&state.carry);
        Ok(())
    }
}

/// The public surface of an environment `$t` with the fields `sim: Sim`, `obs_space: Space`
/// and its parameters `$field: $params`, on its [`SimEnv`] impl: `params()`, `qpos()`,
/// `qvel()`, `dt()`, `reset_to_state`, [`rl_core::Env`], and with `snapshot`,
/// [`crate::traits::Snapshot`] with [`MujocoState`].
macro_rules! sim_env {
    ($t:ty, $(#[$pdoc:meta])* $field:ident: $params:ty $(, $snapshot:ident)?) => {
        impl $crate::mujoco::sim::HasSim for $t {
            fn sim(&self) -> &$crate::mujoco::sim::Sim {
                &self.sim
            }
            fn sim_mut(&mut self) -> &mut $crate::mujoco::sim::Sim {
                &mut self.sim
            }
        }

        impl $t {
            $(#[$pdoc])*
            pub fn params(&self) -> &$params {
                &self.$field
            }

            /// Generalised positions.
            pub fn qpos(&self) -> &[f64] {
                self.sim.data.qpos()
            }

            /// Generalised velocities.
            pub fn qvel(&self) -> &[f64] {
                self.sim.data.qvel()
            }

            /// Seconds per environment step (`timestep · frame_skip`).
            pub fn dt(&self) -> f64 {
                self.sim.dt
            }

            /// Starts an episode from `qpos`, `qvel` (gymnasium's `mj_resetData` + `set_state`),
            /// e.g. a state from a dataset; returns the observation.
            ///
            /// # Errors
            /// [`EnvError::Shape`](crate::EnvError::Shape) for wrong lengths,
            /// [`EnvError::NonFinite`](crate::EnvError::NonFinite) for NaN.
            pub fn reset_to_state(&mut self, qpos: &[f64], qvel: &[f64]) -> $crate::Result<::ndarray::Array1<f32>> {
                $crate::mujoco::sim::SimEnv::start(self, qpos, qvel)
            }
        }

        impl ::rl_core::Env for $t {
            fn observation_space(&self) -> &::rl_core::Space {
                &self.obs_space
            }

            fn action_space(&self) -> &::rl_core::Space {
                &self.sim.act_space
            }

            fn reset(&mut self, rng: &mut dyn ::rand::RngCore) -> ::rl_core::Result<::ndarray::Array1<f32>> {
                $crate::mujoco::sim::SimEnv::reset_from(self, rng)
            }

            fn step(&mut self, action: ::ndarray::ArrayView1<'_, f32>) -> ::rl_core::Result<::rl_core::Step> {
                $crate::mujoco::sim::SimEnv::transition(self, action)
            }
        }

        $($crate::mujoco::sim::sim_env!(@$snapshot $t);)?
    };
    (@snapshot $t:ty) => {
        impl $crate::traits::Snapshot for $t {
            type State = $crate::mujoco::MujocoState;

            fn snapshot(&self) -> $crate::mujoco::MujocoState {
                $crate::mujoco::sim::SimEnv::save(self)
            }

            fn restore(&mut self, state: &$crate::mujoco::MujocoState) -> $crate::Result<()> {
                $crate::mujoco::sim::SimEnv::load(self, state)
            }
        }
    };
}
pub(crate) use sim_env;

/// Gymnasium's reset noise `x + U(low, high)` per entry, drawn in order with NumPy's uniform.
pub(crate) fn add_uniform(rng: &mut dyn RngCore, base: &[f64], low: f64, high: f64) -> Vec<f64> {
    base.iter().map(|b| b + crate::rng::uniform(rng, low, high)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_is_the_fused_dot() {
        assert_eq!(numpy_norm(&[3.0, 4.0]), 5.0);
        assert_eq!(numpy_norm(&[]), 0.0);
        assert_eq!(numpy_norm(&[2.0, 3.0, 6.0]), 7.0);
    }

    #[test]
    fn unreadable_xml_file_is_a_typed_error() {
        let e = Sim::load(Some(Path::new("/nonexistent/model.xml")), "x.xml", None, 1).unwrap_err();
        assert!(matches!(e, EnvError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("/nonexistent/model.xml"), "{e}");
        let e = Sim::load(None, "inverted_pendulum.xml", None, 0).unwrap_err();
        assert!(matches!(e, EnvError::InvalidParameter { .. }), "{e}");
        // a bare name is looked up in the asset folders, as gymnasium's expand_model_path
        let named = Sim::load(Some(Path::new("inverted_pendulum.xml")), "x.xml", None, 2).unwrap();
        let default = Sim::load(None, "inverted_pendulum.xml", None, 2).unwrap();
        assert_eq!(named.init_qpos, default.init_qpos);
        let e = Sim::load(Some(Path::new("no_such_model.xml")), "x.xml", None, 2).unwrap_err();
        assert!(matches!(e, EnvError::Missing { .. }), "{e}");
    }
}
