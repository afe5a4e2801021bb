//! Parameters of gymnasium's v5 locomotion tasks (and `Swimmer-v4`), with every keyword of
//! gymnasium 1.4's `*_v5.py` (rendering keywords aside).

use std::path::{Path, PathBuf};

use rl_core::Params;
use serde::{Deserialize, Serialize};

use super::{check_range, f64_inf, finite};
use crate::common::non_negative;
use crate::error::{EnvError, Result};

fn frame_skip_ok(v: usize) -> Result<()> {
    if v == 0 {
        return Err(EnvError::invalid("frame_skip", v, "must be >= 1"));
    }
    Ok(())
}

fn xml_file_ok(p: &Path) -> Result<()> {
    if p.as_os_str().is_empty() {
        return Err(EnvError::invalid("xml_file", "\"\"", "must name a model file"));
    }
    Ok(())
}

/// The body whose `xpos` measures Ant's velocity (gymnasium's `main_body`: an id or a name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MainBody {
    /// Body id (`1`, the torso, by default).
    Id(usize),
    /// Body name.
    Name(String),
}

impl Default for MainBody {
    fn default() -> Self {
        MainBody::Id(1)
    }
}

/// Parameters of `Hopper-v5`; the defaults are gymnasium's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `xml_file` | `hopper.xml` | model file (a bare name is looked up in the assets folders) | non-empty |
/// | `frame_skip` | 4 | MuJoCo steps per environment step | `>= 1` |
/// | `forward_reward_weight` | 1.0 | weight of the forward velocity | finite |
/// | `ctrl_cost_weight` | 1e-3 | weight of `Σ a²` | `>= 0` |
/// | `healthy_reward` | 1.0 | reward per healthy step (0 when unhealthy) | finite |
/// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
/// | `healthy_state_range` | (−100, 100) | every `qpos[2:]`, `qvel` strictly inside | min < max |
/// | `healthy_z_range` | (0.7, ∞) | torso height strictly inside | min < max |
/// | `healthy_angle_range` | (−0.2, 0.2) | torso angle strictly inside | min < max |
/// | `reset_noise_scale` | 5e-3 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
/// | `exclude_current_positions_from_observation` | true | drop `x` from the observation | |
/// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
/// | `assets_dir` | none | first folder searched for a bare `xml_file` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HopperV5Params {
    /// Model file.
    pub xml_file: PathBuf,
    /// MuJoCo steps per environment step.
    pub frame_skip: usize,
    /// Forward reward weight.
    pub forward_reward_weight: f64,
    /// Control cost weight.
    pub ctrl_cost_weight: f64,
    /// Healthy reward.
    pub healthy_reward: f64,
    /// Terminate when unhealthy.
    pub terminate_when_unhealthy: bool,
    /// Healthy state range.
    #[serde(with = "f64_inf")]
    pub healthy_state_range: [f64; 2],
    /// Healthy height range.
    #[serde(with = "f64_inf")]
    pub healthy_z_range: [f64; 2],
    /// Healthy angle range.
    #[serde(with = "f64_inf")]
    pub healthy_angle_range: [f64; 2],
    /// Reset noise.
    pub reset_noise_scale: f64,
    /// Drop `x` from the observation.
    pub exclude_current_positions_from_observation: bool,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// First folder searched for a bare `xml_file`.
    pub assets_dir: Option<PathBuf>,
}

impl Default for HopperV5Params {
    fn default() -> Self {
        Self {
            xml_file: "hopper.xml".into(),
            frame_skip: 4,
            forward_reward_weight: 1.0,
            ctrl_cost_weight: 1e-3,
            healthy_reward: 1.0,
            terminate_when_unhealthy: true,
            healthy_state_range: [-100.0, 100.0],
            healthy_z_range: [0.7, f64::INFINITY],
            healthy_angle_range: [-0.2, 0.2],
            reset_noise_scale: 5e-3,
            exclude_current_positions_from_observation: true,
            max_episode_steps: 1000,
            assets_dir: None,
        }
    }
}

setters!(HopperV5Params {
    xml_file: PathBuf,
    frame_skip: usize,
    forward_reward_weight: f64,
    ctrl_cost_weight: f64,
    healthy_reward: f64,
    terminate_when_unhealthy: bool,
    healthy_state_range: [f64; 2],
    healthy_z_range: [f64; 2],
    healthy_angle_range: [f64; 2],
    reset_noise_scale: f64,
    exclude_current_positions_from_observation: bool,
    max_episode_steps: usize,
    assets_dir: Option<PathBuf>,
});

impl Params for HopperV5Params {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        xml_file_ok(&self.xml_file)?;
        frame_skip_ok(self.frame_skip)?;
        finite("forward_reward_weight", self.forward_reward_weight)?;
        non_negative("ctrl_cost_weight", self.ctrl_cost_weight)?;
        finite("healthy_reward", self.healthy_reward)?;
        check_range("healthy_state_range", self.healthy_state_range)?;
        check_range("healthy_z_range", self.healthy_z_range)?;
        check_range("healthy_angle_range", self.healthy_angle_range)?;
        Ok(non_negative("reset_noise_scale", self.reset_noise_scale)?)
    }
}

/// Parameters of `Walker2d-v5`; the defaults are gymnasium's (its model is `walker2d_v5.xml`,
/// whose two feet have the same friction, unlike v4's `walker2d.xml`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `xml_file` | `walker2d_v5.xml` | model file (a bare name is looked up in the assets folders) | non-empty |
/// | `frame_skip` | 4 | MuJoCo steps per environment step | `>= 1` |
/// | `forward_reward_weight` | 1.0 | weight of the forward velocity | finite |
/// | `ctrl_cost_weight` | 1e-3 | weight of `Σ a²` | `>= 0` |
/// | `healthy_reward` | 1.0 | reward per healthy step (0 when unhealthy) | finite |
/// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
/// | `healthy_z_range` | (0.8, 2.0) | torso height strictly inside | min < max |
/// | `healthy_angle_range` | (−1, 1) | torso angle strictly inside | min < max |
/// | `reset_noise_scale` | 5e-3 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
/// | `exclude_current_positions_from_observation` | true | drop `x` from the observation | |
/// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
/// | `assets_dir` | none | first folder searched for a bare `xml_file` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Walker2dV5Params {
    /// Model file.
    pub xml_file: PathBuf,
    /// MuJoCo steps per environment step.
    pub frame_skip: usize,
    /// Forward reward weight.
    pub forward_reward_weight: f64,
    /// Control cost weight.
    pub ctrl_cost_weight: f64,
    /// Healthy reward.
    pub healthy_reward: f64,
    /// Terminate when unhealthy.
    pub terminate_when_unhealthy: bool,
    /// Healthy height range.
    #[serde(with = "f64_inf")]
    pub healthy_z_range: [f64; 2],
    /// Healthy angle range.
    #[serde(with = "f64_inf")]
    pub healthy_angle_range: [f64; 2],
    /// Reset noise.
    pub reset_noise_scale: f64,
    /// Drop `x` from the observation.
    pub exclude_current_positions_from_observation: bool,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// First folder searched for a bare `xml_file`.
    pub assets_dir: Option<PathBuf>,
}

impl Default for Walker2dV5Params {
    fn default() -> Self {
        Self {
            xml_file: "walker2d_v5.xml".into(),
            frame_skip: 4,
            forward_reward_weight: 1.0,
            ctrl_cost_weight: 1e-3,
            healthy_reward: 1.0,
            terminate_when_unhealthy: true,
            healthy_z_range: [0.8, 2.0],
            healthy_angle_range: [-1.0, 1.0],
            reset_noise_scale: 5e-3,
            exclude_current_positions_from_observation: true,
            max_episode_steps: 1000,
            assets_dir: None,
        }
    }
}

setters!(Walker2dV5Params {
    xml_file: PathBuf,
    frame_skip: usize,
    forward_reward_weight: f64,
    ctrl_cost_weight: f64,
    healthy_reward: f64,
    terminate_when_unhealthy: bool,
    healthy_z_range: [f64; 2],
    healthy_angle_range: [f64; 2],
    reset_noise_scale: f64,
    exclude_current_positions_from_observation: bool,
    max_episode_steps: usize,
    assets_dir: Option<PathBuf>,
});

impl Params for Walker2dV5Params {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        xml_file_ok(&self.xml_file)?;
        frame_skip_ok(self.frame_skip)?;
        finite("forward_reward_weight", self.forward_reward_weight)?;
        non_negative("ctrl_cost_weight", self.ctrl_cost_weight)?;
        finite("healthy_reward", self.healthy_reward)?;
        check_range("healthy_z_range", self.healthy_z_range)?;
        check_range("healthy_angle_range", self.healthy_angle_range)?;
        Ok(non_negative("reset_noise_scale", self.reset_noise_scale)?)
    }
}

/// Parameters of `HalfCheetah-v5`; the defaults are gymnasium's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `xml_file` | `half_cheetah.xml` | model file (a bare name is looked up in the assets folders) | non-empty |
/// | `frame_skip` | 5 | MuJoCo steps per environment step | `>= 1` |
/// | `forward_reward_weight` | 1.0 | weight of the forward velocity | finite |
/// | `ctrl_cost_weight` | 0.1 | weight of `Σ a²` | `>= 0` |
/// | `reset_noise_scale` | 0.1 | `qpos += U(±scale)`, `qvel += scale·N(0, 1)` at reset | `>= 0` |
/// | `exclude_current_positions_from_observation` | true | drop `x` from the observation | |
/// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
/// | `assets_dir` | none | first folder searched for a bare `xml_file` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HalfCheetahV5Params {
    /// Model file.
    pub xml_file: PathBuf,
    /// MuJoCo steps per environment step.
    pub frame_skip: usize,
    /// Forward reward weight.
    pub forward_reward_weight: f64,
    /// Control cost weight.
    pub ctrl_cost_weight: f64,
    /// Reset noise.
    pub reset_noise_scale: f64,
    /// Drop `x` from the observation.
    pub exclude_current_positions_from_observation: bool,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// First folder searched for a bare `xml_file`.
    pub assets_dir: Option<PathBuf>,
}

impl Default for HalfCheetahV5Params {
    fn default() -> Self {
        Self {
            xml_file: "half_cheetah.xml".into(),
            frame_skip: 5,
            forward_reward_weight: 1.0,
            ctrl_cost_weight: 0.1,
            reset_noise_scale: 0.1,
            exclude_current_positions_from_observation: true,
            max_episode_steps: 1000,
            assets_dir: None,
        }
    }
}

setters!(HalfCheetahV5Params {
    xml_file: PathBuf,
    frame_skip: usize,
    forward_reward_weight: f64,
    ctrl_cost_weight: f64,
    reset_noise_scale: f64,
    exclude_current_positions_from_observation: bool,
    max_episode_steps: usize,
    assets_dir: Option<PathBuf>,
});

impl Params for HalfCheetahV5Params {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        xml_file_ok(&self.xml_file)?;
        frame_skip_ok(self.frame_skip)?;
        finite("forward_reward_weight", self.forward_reward_weight)?;
        non_negative("ctrl_cost_weight", self.ctrl_cost_weight)?;
        Ok(non_negative("reset_noise_scale", self.reset_noise_scale)?)
    }
}

/// Parameters of `Ant-v5`; the defaults are gymnasium's. Unlike v4 the contact cost is always
/// part of the reward (v4's `use_contact_forces` is gone) and the observation holds the clipped
/// contact forces of every body but the world (`cfrc_ext[1:]`, 78 values) by default.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `xml_file` | `ant.xml` | model file (a bare name is looked up in the assets folders) | non-empty |
/// | `frame_skip` | 5 | MuJoCo steps per environment step | `>= 1` |
/// | `forward_reward_weight` | 1.0 | weight of the main body's x velocity | finite |
/// | `ctrl_cost_weight` | 0.5 | weight of `Σ a²` | `>= 0` |
/// | `contact_cost_weight` | 5e-4 | weight of `Σ clip(cfrc_ext)²` | `>= 0` |
/// | `healthy_reward` | 1.0 | reward per healthy step (0 when unhealthy) | finite |
/// | `main_body` | id 1 | body whose `xpos` gives the velocity (id or name) | a body of the model |
/// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
/// | `healthy_z_range` | [0.2, 1.0] | `qpos[2]` inside (inclusive), state finite | min < max |
/// | `contact_force_range` | (−1, 1) | clip of the contact forces | min < max |
/// | `reset_noise_scale` | 0.1 | `qpos += U(±scale)`, `qvel += scale·N(0, 1)` at reset | `>= 0` |
/// | `exclude_current_positions_from_observation` | true | drop `x, y` from the observation | |
/// | `include_cfrc_ext_in_observation` | true | append `clip(cfrc_ext[1:])` to the observation | |
/// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
/// | `assets_dir` | none | first folder searched for a bare `xml_file` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AntV5Params {
    /// Model file.
    pub xml_file: PathBuf,
    /// MuJoCo steps per environment step.
    pub frame_skip: usize,
    /// Forward reward weight.
    pub forward_reward_weight: f64,
    /// Control cost weight.
    pub ctrl_cost_weight: f64,
    /// Contact cost weight.
    pub contact_cost_weight: f64,
    /// Healthy reward.
    pub healthy_reward: f64,
    /// Body whose position measures the velocity.
    pub main_body: MainBody,
    /// Terminate when unhealthy.
    pub terminate_when_unhealthy: bool,
    /// Healthy height range.
    #[serde(with = "f64_inf")]
    pub healthy_z_range: [f64; 2],
    /// Contact force clip.
    #[serde(with = "f64_inf")]
    pub contact_force_range: [f64; 2],
    /// Reset noise.
    pub reset_noise_scale: f64,
    /// Drop `x, y` from the observation.
    pub exclude_current_positions_from_observation: bool,
    /// Contact forces in the observation.
    pub include_cfrc_ext_in_observation: bool,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// First folder searched for a bare `xml_file`.
    pub assets_dir: Option<PathBuf>,
}

impl Default for AntV5Params {
    fn default() -> Self {
        Self {
            xml_file: "ant.xml".into(),
            frame_skip: 5,
            forward_reward_weight: 1.0,
            ctrl_cost_weight: 0.5,
            contact_cost_weight: 5e-4,
            healthy_reward: 1.0,
            main_body: MainBody::default(),
            terminate_when_unhealthy: true,
            healthy_z_range: [0.2, 1.0],
            contact_force_range: [-1.0, 1.0],
            reset_noise_scale: 0.1,
            exclude_current_positions_from_observation: true,
            include_cfrc_ext_in_observation: true,
            max_episode_steps: 1000,
            assets_dir: None,
        }
    }
}

setters!(AntV5Params {
    xml_file: PathBuf,
    frame_skip: usize,
    forward_reward_weight: f64,
    ctrl_cost_weight: f64,
    contact_cost_weight: f64,
    healthy_reward: f64,
    main_body: MainBody,
    terminate_when_unhealthy: bool,
    healthy_z_range: [f64; 2],
    contact_force_range: [f64; 2],
    reset_noise_scale: f64,
    exclude_current_positions_from_observation: bool,
    include_cfrc_ext_in_observation: bool,
    max_episode_steps: usize,
    assets_dir: Option<PathBuf>,
});

impl Params for AntV5Params {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        xml_file_ok(&self.xml_file)?;
        frame_skip_ok(self.frame_skip)?;
        finite("forward_reward_weight", self.forward_reward_weight)?;
        non_negative("ctrl_cost_weight", self.ctrl_cost_weight)?;
        non_negative("contact_cost_weight", self.contact_cost_weight)?;
        finite("healthy_reward", self.healthy_reward)?;
        if let MainBody::Name(n) = &self.main_body {
            if n.is_empty() || n.contains('\0') {
                return Err(EnvError::invalid("main_body", format!("{n:?}"), "must name a body (non-empty, no NUL)"));
            }
        }
        check_range("healthy_z_range", self.healthy_z_range)?;
        check_range("contact_force_range", self.contact_force_range)?;
        Ok(non_negative("reset_noise_scale", self.reset_noise_scale)?)
    }
}

/// Parameters of `Swimmer-v5`; the defaults are gymnasium's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `xml_file` | `swimmer.xml` | model file (a bare name is looked up in the assets folders) | non-empty |
/// | `frame_skip` | 4 | MuJoCo steps per environment step | `>= 1` |
/// | `forward_reward_weight` | 1.0 | weight of the x velocity | finite |
/// | `ctrl_cost_weight` | 1e-4 | weight of `Σ a²` | `>= 0` |
/// | `reset_noise_scale` | 0.1 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
/// | `exclude_current_positions_from_observation` | true | drop `x, y` from the observation | |
/// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
/// | `assets_dir` | none | first folder searched for a bare `xml_file` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwimmerV5Params {
    /// Model file.
    pub xml_file: PathBuf,
    /// MuJoCo steps per environment step.
    pub frame_skip: usize,
    /// Forward reward weight.
    pub forward_reward_weight: f64,
    /// Control cost weight.
    pub ctrl_cost_weight: f64,
    /// Reset noise.
    pub reset_noise_scale: f64,
    /// Drop `x, y` from the observation.
    pub exclude_current_positions_from_observation: bool,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// First folder searched for a bare `xml_file`.
    pub assets_dir: Option<PathBuf>,
}

impl Default for SwimmerV5Params {
    fn default() -> Self {
        Self {
            xml_file: "swimmer.xml".into(),
            frame_skip: 4,
            forward_reward_weight: 1.0,
            ctrl_cost_weight: 1e-4,
            reset_noise_scale: 0.1,
            exclude_current_positions_from_observation: true,
            max_episode_steps: 1000,
            assets_dir: None,
        }
    }
}

setters!(SwimmerV5Params {
    xml_file: PathBuf,
    frame_skip: usize,
    forward_reward_weight: f64,
    ctrl_cost_weight: f64,
    reset_noise_scale: f64,
    exclude_current_positions_from_observation: bool,
    max_episode_steps: usize,
    assets_dir: Option<PathBuf>,
});

impl Params for SwimmerV5Params {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        xml_file_ok(&self.xml_file)?;
        frame_skip_ok(self.frame_skip)?;
        finite("forward_reward_weight", self.forward_reward_weight)?;
        non_negative("ctrl_cost_weight", self.ctrl_cost_weight)?;
        Ok(non_negative("reset_noise_scale", self.reset_noise_scale)?)
    }
}

/// Parameters of `Swimmer-v4` (model `swimmer.xml`, frame skip 4); the defaults are gymnasium's.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `forward_reward_weight` | 1.0 | weight of the x velocity | finite |
/// | `ctrl_cost_weight` | 1e-4 | weight of `Σ a²` | `>= 0` |
/// | `reset_noise_scale` | 0.1 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
/// | `exclude_current_positions_from_observation` | true | drop `x, y` from the observation | |
/// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
/// | `assets_dir` | none | folder of `swimmer.xml` | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwimmerParams {
    /// Forward reward weight.
    pub forward_reward_weight: f64,
    /// Control cost weight.
    pub ctrl_cost_weight: f64,
    /// Reset noise.
    pub reset_noise_scale: f64,
    /// Drop `x, y` from the observation.
    pub exclude_current_positions_from_observation: bool,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// Folder of the model XML.
    pub assets_dir: Option<PathBuf>,
}

impl Default for SwimmerParams {
    fn default() -> Self {
        Self {
            forward_reward_weight: 1.0,
            ctrl_cost_weight: 1e-4,
            reset_noise_scale: 0.1,
            exclude_current_positions_from_observation: true,
            max_episode_steps: 1000,
            assets_dir: None,
        }
    }
}

setters!(SwimmerParams {
    forward_reward_weight: f64,
    ctrl_cost_weight: f64,
    reset_noise_scale: f64,
    exclude_current_positions_from_observation: bool,
    max_episode_steps: usize,
    assets_dir: Option<PathBuf>,
});

impl Params for SwimmerParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        finite("forward_reward_weight", self.forward_reward_weight)?;
        non_negative("ctrl_cost_weight", self.ctrl_cost_weight)?;
        Ok(non_negative("reset_noise_scale", self.reset_noise_scale)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_are_named() {
        let e = HopperV5Params::default().frame_skip(0).check().unwrap_err().to_string();
        assert!(e.contains("frame_skip"), "{e}");
        let e = AntV5Params::default().main_body(MainBody::Name(String::new())).check().unwrap_err().to_string();
        assert!(e.contains("main_body"), "{e}");
        let e = SwimmerV5Params::default().xml_file(PathBuf::new()).check().unwrap_err().to_string();
        assert!(e.contains("xml_file"), "{e}");
        let e = Walker2dV5Params::default().healthy_z_range([2.0, 1.0]).check().unwrap_err().to_string();
        assert!(e.contains("healthy_z_range"), "{e}");
        assert!(SwimmerParams::default().ctrl_cost_weight(-1.0).check().is_err());
        assert!(HalfCheetahV5Params::default().forward_reward_weight(f64::NAN).check().is_err());
    }

    #[test]
    fn main_body_reads_an_id_or_a_name() {
        let p: AntV5Params = serde_json::from_str(r#"{"main_body": "torso"}"#).unwrap();
        assert_eq!(p.main_body, MainBody::Name("torso".into()));
        let p: AntV5Params = serde_json::from_str(r#"{"main_body": 1, "healthy_z_range": [0.3, "inf"]}"#).unwrap();
        assert_eq!((p.main_body, p.healthy_z_range), (MainBody::Id(1), [0.3, f64::INFINITY]));
        assert!(serde_json::from_str::<AntV5Params>(r#"{"use_contact_forces": true}"#).is_err());
    }

    #[test]
    fn missing_xml_files_are_named() {
        let e = crate::mujoco::resolve_xml(Path::new("/nonexistent/model.xml"), None).unwrap_err();
        assert!(matches!(e, EnvError::Missing { .. }) && e.to_string().contains("/nonexistent/model.xml"), "{e}");
        let e =
            crate::mujoco::resolve_xml(Path::new("no_such_model_v5.xml"), Some(Path::new("/nonexistent"))).unwrap_err();
        assert!(e.to_string().contains("no_such_model_v5.xml"), "{e}");
    }
}
