//! Parameters of gymnasium's locomotion tasks, v4 and v5, with every keyword of gymnasium
//! 1.4's `*_v4.py` and `*_v5.py` (rendering keywords aside). A v5 set is its v4 set (the same
//! fields, defaults and checks) after `xml_file` and `frame_skip`, which v4 fixes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::mujoco::params::{f64_inf, gym_params};

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

/// A v4 parameter set and its v5 twin from one field list: the v5 one starts with
/// `xml_file` (non-empty) and `frame_skip` (`>= 1`).
macro_rules! v4_v5_params {
    (
        $(#[$doc4:meta])* $v4:ident,
        $(#[$doc5:meta])* $v5:ident { xml_file: $xml:literal, frame_skip: $skip:literal },
        { $($fields:tt)* }
    ) => {
        gym_params! { $(#[$doc4])* $v4 { $($fields)* } }
        gym_params! {
            $(#[$doc5])*
            $v5 {
                /// Model file.
                xml_file: PathBuf = $xml.into() => model_file,
                /// MuJoCo steps per environment step.
                frame_skip: usize = $skip => at_least_one,
                $($fields)*
            }
        }
    };
}

v4_v5_params! {
    /// Parameters of Hopper (gymnasium `Hopper-v4`); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `forward_reward_weight` | 1.0 | weight of the forward velocity | finite |
    /// | `ctrl_cost_weight` | 1e-3 | weight of `Σ a²` | `>= 0` |
    /// | `healthy_reward` | 1.0 | reward per healthy step | finite |
    /// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
    /// | `healthy_state_range` | (−100, 100) | every `qpos[2:]`, `qvel` strictly inside | min < max |
    /// | `healthy_z_range` | (0.7, ∞) | torso height strictly inside | min < max |
    /// | `healthy_angle_range` | (−0.2, 0.2) | torso angle strictly inside | min < max |
    /// | `reset_noise_scale` | 5e-3 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
    /// | `exclude_current_positions_from_observation` | true | drop `x` from the observation | |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of `hopper.xml` (see the module docs) | |
    HopperParams,
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
    HopperV5Params { xml_file: "hopper.xml", frame_skip: 4 },
    {
        /// Forward reward weight.
        forward_reward_weight: f64 = 1.0 => finite,
        /// Control cost weight.
        ctrl_cost_weight: f64 = 1e-3 => non_negative,
        /// Healthy reward.
        healthy_reward: f64 = 1.0 => finite,
        /// Terminate when unhealthy.
        terminate_when_unhealthy: bool = true,
        /// Healthy state range.
        #[serde(with = "f64_inf")]
        healthy_state_range: [f64; 2] = [-100.0, 100.0] => range,
        /// Healthy height range.
        #[serde(with = "f64_inf")]
        healthy_z_range: [f64; 2] = [0.7, f64::INFINITY] => range,
        /// Healthy angle range.
        #[serde(with = "f64_inf")]
        healthy_angle_range: [f64; 2] = [-0.2, 0.2] => range,
        /// Reset noise.
        reset_noise_scale: f64 = 5e-3 => non_negative,
        /// Drop `x` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the model XMLs, searched first (see the module docs).
        assets_dir: Option<PathBuf> = None,
    }
}

v4_v5_params! {
    /// Parameters of Walker2d (gymnasium `Walker2d-v4`); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `forward_reward_weight` | 1.0 | weight of the forward velocity | finite |
    /// | `ctrl_cost_weight` | 1e-3 | weight of `Σ a²` | `>= 0` |
    /// | `healthy_reward` | 1.0 | reward per healthy step | finite |
    /// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
    /// | `healthy_z_range` | (0.8, 2.0) | torso height strictly inside | min < max |
    /// | `healthy_angle_range` | (−1, 1) | torso angle strictly inside | min < max |
    /// | `reset_noise_scale` | 5e-3 | `qpos`, `qvel` += `U(±scale)` at reset | `>= 0` |
    /// | `exclude_current_positions_from_observation` | true | drop `x` from the observation | |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of `walker2d.xml` | |
    Walker2dParams,
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
    Walker2dV5Params { xml_file: "walker2d_v5.xml", frame_skip: 4 },
    {
        /// Forward reward weight.
        forward_reward_weight: f64 = 1.0 => finite,
        /// Control cost weight.
        ctrl_cost_weight: f64 = 1e-3 => non_negative,
        /// Healthy reward.
        healthy_reward: f64 = 1.0 => finite,
        /// Terminate when unhealthy.
        terminate_when_unhealthy: bool = true,
        /// Healthy height range.
        #[serde(with = "f64_inf")]
        healthy_z_range: [f64; 2] = [0.8, 2.0] => range,
        /// Healthy angle range.
        #[serde(with = "f64_inf")]
        healthy_angle_range: [f64; 2] = [-1.0, 1.0] => range,
        /// Reset noise.
        reset_noise_scale: f64 = 5e-3 => non_negative,
        /// Drop `x` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the model XMLs, searched first (see the module docs).
        assets_dir: Option<PathBuf> = None,
    }
}

v4_v5_params! {
    /// Parameters of HalfCheetah (gymnasium `HalfCheetah-v4`); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `forward_reward_weight` | 1.0 | weight of the forward velocity | finite |
    /// | `ctrl_cost_weight` | 0.1 | weight of `Σ a²` | `>= 0` |
    /// | `reset_noise_scale` | 0.1 | `qpos += U(±scale)`, `qvel += scale·N(0, 1)` at reset | `>= 0` |
    /// | `exclude_current_positions_from_observation` | true | drop `x` from the observation | |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of `half_cheetah.xml` | |
    HalfCheetahParams,
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
    HalfCheetahV5Params { xml_file: "half_cheetah.xml", frame_skip: 5 },
    {
        /// Forward reward weight.
        forward_reward_weight: f64 = 1.0 => finite,
        /// Control cost weight.
        ctrl_cost_weight: f64 = 0.1 => non_negative,
        /// Reset noise.
        reset_noise_scale: f64 = 0.1 => non_negative,
        /// Drop `x` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the model XMLs, searched first (see the module docs).
        assets_dir: Option<PathBuf> = None,
    }
}

v4_v5_params! {
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
    SwimmerParams,
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
    SwimmerV5Params { xml_file: "swimmer.xml", frame_skip: 4 },
    {
        /// Forward reward weight.
        forward_reward_weight: f64 = 1.0 => finite,
        /// Control cost weight.
        ctrl_cost_weight: f64 = 1e-4 => non_negative,
        /// Reset noise.
        reset_noise_scale: f64 = 0.1 => non_negative,
        /// Drop `x, y` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the model XMLs, searched first (see the module docs).
        assets_dir: Option<PathBuf> = None,
    }
}

gym_params! {
    /// Parameters of Ant (gymnasium `Ant-v4`); the defaults are gymnasium's.
    ///
    /// | name | default | purpose | range |
    /// |---|---|---|---|
    /// | `ctrl_cost_weight` | 0.5 | weight of `Σ a²` | `>= 0` |
    /// | `use_contact_forces` | false | add the 84 clipped external contact forces to the observation and their cost to the reward | |
    /// | `contact_cost_weight` | 5e-4 | weight of `Σ clip(cfrc_ext)²` | `>= 0` |
    /// | `healthy_reward` | 1.0 | reward per healthy step | finite |
    /// | `terminate_when_unhealthy` | true | end the episode when unhealthy | |
    /// | `healthy_z_range` | [0.2, 1.0] | torso height inside (inclusive), state finite | min < max |
    /// | `contact_force_range` | (−1, 1) | clip of the contact forces | min < max |
    /// | `reset_noise_scale` | 0.1 | `qpos += U(±scale)`, `qvel += scale·N(0, 1)` at reset | `>= 0` |
    /// | `exclude_current_positions_from_observation` | true | drop `x, y` from the observation | |
    /// | `max_episode_steps` | 1000 | time limit; 0 = none | any |
    /// | `assets_dir` | none | folder of `ant.xml` | |
    AntParams {
        /// Control cost weight.
        ctrl_cost_weight: f64 = 0.5 => non_negative,
        /// Contact forces in observation and reward.
        use_contact_forces: bool = false,
        /// Contact cost weight.
        contact_cost_weight: f64 = 5e-4 => non_negative,
        /// Healthy reward.
        healthy_reward: f64 = 1.0 => finite,
        /// Terminate when unhealthy.
        terminate_when_unhealthy: bool = true,
        /// Healthy height range.
        #[serde(with = "f64_inf")]
        healthy_z_range: [f64; 2] = [0.2, 1.0] => range,
        /// Contact force clip.
        #[serde(with = "f64_inf")]
        contact_force_range: [f64; 2] = [-1.0, 1.0] => range,
        /// Reset noise.
        reset_noise_scale: f64 = 0.1 => non_negative,
        /// Drop `x, y` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the model XMLs, searched first (see the module docs).
        assets_dir: Option<PathBuf> = None,
    }
}

gym_params! {
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
    AntV5Params {
        /// Model file.
        xml_file: PathBuf = "ant.xml".into() => model_file,
        /// MuJoCo steps per environment step.
        frame_skip: usize = 5 => at_least_one,
        /// Forward reward weight.
        forward_reward_weight: f64 = 1.0 => finite,
        /// Control cost weight.
        ctrl_cost_weight: f64 = 0.5 => non_negative,
        /// Contact cost weight.
        contact_cost_weight: f64 = 5e-4 => non_negative,
        /// Healthy reward.
        healthy_reward: f64 = 1.0 => finite,
        /// Body whose position measures the velocity.
        main_body: MainBody = MainBody::default() => body,
        /// Terminate when unhealthy.
        terminate_when_unhealthy: bool = true,
        /// Healthy height range.
        #[serde(with = "f64_inf")]
        healthy_z_range: [f64; 2] = [0.2, 1.0] => range,
        /// Contact force clip.
        #[serde(with = "f64_inf")]
        contact_force_range: [f64; 2] = [-1.0, 1.0] => range,
        /// Reset noise.
        reset_noise_scale: f64 = 0.1 => non_negative,
        /// Drop `x, y` from the observation.
        exclude_current_positions_from_observation: bool = true,
        /// Contact forces in the observation.
        include_cfrc_ext_in_observation: bool = true,
        /// Time limit (0 = none).
        max_episode_steps: usize = 1000,
        /// Folder of the model XMLs, searched first (see the module docs).
        assets_dir: Option<PathBuf> = None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use rl_core::Params;

    use super::*;
    use crate::error::EnvError;

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
