//! MuJoCo environments (feature `mujoco`): gymnasium v4 and v5 locomotion, the v5 (and v4)
//! pendulums, Reacher, Pusher and Humanoid, and the MuJoCo point maze.
//!
//! | environment | constructor | gymnasium id | obs | act | frame skip × dt |
//! |---|---|---|---|---|---|
//! | Hopper | [`Locomotion::hopper`] | `Hopper-v4` | 11 | 3 | 4 × 0.002 |
//! | HalfCheetah | [`Locomotion::half_cheetah`] | `HalfCheetah-v4` | 17 | 6 | 5 × 0.01 |
//! | Walker2d | [`Locomotion::walker2d`] | `Walker2d-v4` | 17 | 6 | 4 × 0.002 |
//! | Ant | [`Locomotion::ant`] | `Ant-v4` | 27 (111 with contact forces) | 8 | 5 × 0.01 |
//! | Swimmer | [`Locomotion::swimmer`] | `Swimmer-v4` | 8 | 2 | 4 × 0.01 |
//! | Hopper | [`Locomotion::hopper_v5`] | `Hopper-v5` | 11 | 3 | 4 × 0.002 |
//! | HalfCheetah | [`Locomotion::half_cheetah_v5`] | `HalfCheetah-v5` | 17 | 6 | 5 × 0.01 |
//! | Walker2d | [`Locomotion::walker2d_v5`] | `Walker2d-v5` (`walker2d_v5.xml`) | 17 | 6 | 4 × 0.002 |
//! | Ant | [`Locomotion::ant_v5`] | `Ant-v5` | 105 (27 without contact forces) | 8 | 5 × 0.01 |
//! | Swimmer | [`Locomotion::swimmer_v5`] | `Swimmer-v5` | 8 | 2 | 4 × 0.01 |
//! | point maze | [`MujocoPointMaze::new`] | gymnasium-robotics `PointMaze_*-v3` | 6 / 4 | 2 | 1 × 0.01 |
//! | InvertedPendulum | [`InvertedPendulum::new`] | `InvertedPendulum-v5` / `-v4` | 4 | 1 | 2 × 0.02 |
//! | InvertedDoublePendulum | [`InvertedDoublePendulum::new`] | `InvertedDoublePendulum-v5` / `-v4` | 9 / 11 | 1 | 5 × 0.01 |
//! | Reacher | [`Reacher::new`] | `Reacher-v5` / `-v4` | 10 / 11 | 2 | 2 × 0.01 |
//! | Pusher | [`Pusher::new`] | `Pusher-v5` | 23 | 7 | 5 × 0.01 |
//! | Humanoid | [`Humanoid::new`] | `Humanoid-v5` / `-v4` | 348 / 376 | 17 | 5 × 0.003 |
//!
//! The physics is MuJoCo 3.17.0 itself, through `mujoco-rs` 7 and the `libmujoco.so` of the
//! PyPI `mujoco==3.17.0` wheel (`make provision-mujoco` links it as `.mujoco`; the build embeds
//! an rpath to it). The locomotion models are read at run time from the installed gymnasium
//! wheel (`hopper.xml`, `half_cheetah.xml`, `walker2d.xml`, `ant.xml`; not committed), looked up
//! in this order: the `assets_dir` parameter, the environment variable `FRUGAL_GYM_ASSETS`,
//! `$MUJOCO_DYNAMIC_LINK_DIR/gymnasium-assets` (at run time, then as seen at build time), which
//! `make provision-mujoco` links to `gymnasium/envs/mujoco/assets`. A missing file is
//! [`EnvError::Missing`] naming it and the folders searched; a linked MuJoCo other than 3.17.0
//! is [`EnvError::Mujoco`].
//!
//! The v5 environments ([`InvertedPendulum`], [`InvertedDoublePendulum`], [`Reacher`],
//! [`Pusher`], [`Humanoid`]; [`GymVersion`] selects v4 where gymnasium has one on MuJoCo 3)
//! take every kwarg of gymnasium's `*_v5.py`, `xml_file` included (resolved as gymnasium does and
//! as the v5 locomotion's: a path starting with `/` or `.` as given, `~` under `$HOME`, a bare
//! name in the asset folders above; `None` = the wheel's file), and return gymnasium's infos. Their rollouts
//! are bit-identical to gymnasium's after the float32 cast of observations and rewards, infos
//! exactly (`tests/golden_mujoco_v5_more.rs`); seeded resets reproduce gymnasium's draws
//! (Reacher's goal and Pusher's cylinder rejection sampling included), except
//! InvertedDoublePendulum's normal velocity noise.
//!
//! Rewards, terminations, observation layouts, infos and reset noise follow gymnasium 1.4's
//! `*_v4.py` and `*_v5.py` (v5's `xml_file` may name a caller's model: see
//! [`HopperV5Params`]); the calls into MuJoCo are the same (`mj_resetData`, `mj_forward` after setting
//! the state, `frame_skip` × `mj_step`), so rollouts match gymnasium to float rounding of the
//! observation and reward casts (tolerance 1e-4; measured bit-identical, `tests/golden_mujoco.rs`).
//! HalfCheetah's and Ant's velocity noise is `0.1·N(0, 1)`, drawn with a normal sampler that is
//! not NumPy's, so those two resets match gymnasium in distribution only (the test starts them
//! from gymnasium's reset state with [`Locomotion::reset_to_state`]).

mod humanoid;
mod locomotion;
mod manipulation;
mod params;
mod pendulum;
mod point_maze;
mod sim;

use std::path::{Path, PathBuf};

pub use humanoid::{Humanoid, HumanoidParams};
pub use locomotion::{
    AntParams, AntV5Params, HalfCheetahParams, HalfCheetahV5Params, HopperParams, HopperV5Params, Locomotion,
    LocomotionState, LocomotionTask, MainBody, SwimmerParams, SwimmerV5Params, Walker2dParams, Walker2dV5Params,
};
pub use manipulation::{Pusher, PusherParams, Reacher, ReacherParams};
pub use pendulum::{InvertedDoublePendulum, InvertedDoublePendulumParams, InvertedPendulum, InvertedPendulumParams};
pub use point_maze::{MujocoPointMass, MujocoPointMaze, MujocoPointState};
pub use sim::{GymVersion, MujocoState};

use crate::error::{EnvError, Result};

/// The MuJoCo version the bindings (`mujoco-rs` 7.0.0) were generated for.
pub const MUJOCO_VERSION: &str = "3.17.0";

/// Checks that the linked MuJoCo library is [`MUJOCO_VERSION`].
///
/// # Errors
/// [`EnvError::Mujoco`] naming both versions.
pub fn check_mujoco_version() -> Result<()> {
    let linked = mujoco_rs::mujoco_version();
    if linked != MUJOCO_VERSION {
        return Err(EnvError::Mujoco(format!(
            "linked MuJoCo library is {linked}, rl-envs needs {MUJOCO_VERSION} (the PyPI wheel mujoco=={MUJOCO_VERSION}; \
             run `make provision-mujoco`)"
        )));
    }
    Ok(())
}

/// The folders searched for gymnasium's model XMLs, in order.
pub fn asset_dirs(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = explicit {
        dirs.push(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("FRUGAL_GYM_ASSETS") {
        dirs.push(PathBuf::from(p));
    }
    if let Some(p) = std::env::var_os("MUJOCO_DYNAMIC_LINK_DIR") {
        dirs.push(Path::new(&p).join("gymnasium-assets"));
    }
    if let Some(p) = option_env!("MUJOCO_DYNAMIC_LINK_DIR") {
        let p = Path::new(p).join("gymnasium-assets");
        if !dirs.contains(&p) {
            dirs.push(p);
        }
    }
    dirs
}

/// Finds gymnasium's model `file` (e.g. `hopper.xml`).
///
/// # Errors
/// [`EnvError::Missing`] naming the file and every folder searched.
pub fn find_asset(file: &str, explicit: Option<&Path>) -> Result<PathBuf> {
    let dirs = asset_dirs(explicit);
    for d in &dirs {
        let p = d.join(file);
        if p.is_file() {
            return Ok(p);
        }
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(EnvError::Missing {
        what: format!("MuJoCo model `{file}` of the gymnasium wheel"),
        looked_in: if looked.is_empty() { "no folder (none configured)".into() } else { looked.join(", ") },
        hint: "run `make provision-mujoco` (installs gymnasium and links .mujoco/gymnasium-assets), set \
               FRUGAL_GYM_ASSETS to gymnasium/envs/mujoco/assets, or pass assets_dir"
            .into(),
    })
}

/// Resolves gymnasium's `xml_file` as its `expand_model_path` does: a path starting with `/`
/// or `.` is used as given, one starting with `~` is under `$HOME`, any other is a file name
/// looked up in gymnasium's assets folder (here: [`asset_dirs`]).
///
/// # Errors
/// [`EnvError::Missing`] when the file does not exist.
pub(crate) fn resolve_xml(xml_file: &Path, assets_dir: Option<&Path>) -> Result<PathBuf> {
    let text = xml_file.to_string_lossy();
    let direct = if text.starts_with('/') || text.starts_with('.') {
        Some(xml_file.to_path_buf())
    } else if let Some(rest) = text.strip_prefix('~') {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        Some(home.join(rest.trim_start_matches('/')))
    } else {
        None
    };
    match direct {
        Some(p) if p.is_file() => Ok(p),
        Some(p) => Err(EnvError::Missing {
            what: format!("MuJoCo model `{}` (xml_file)", xml_file.display()),
            looked_in: p.display().to_string(),
            hint: "pass the path of an existing MJCF file, or a file name of gymnasium's assets folder".into(),
        }),
        None => find_asset(&text, assets_dir),
    }
}

/// Removes the compiler attribute `settotalmass="m"` from an MJCF text, returning `m` (to be
/// applied with `mj_setTotalmass` + `mj_setConst`, which is what the attribute does).
///
/// # Errors
/// [`EnvError::Mujoco`] when the value is not a number.
pub(crate) fn strip_settotalmass(xml: &str) -> Result<(String, Option<f64>)> {
    const KEY: &str = "settotalmass=\"";
    let Some(start) = xml.find(KEY) else {
        return Ok((xml.to_owned(), None));
    };
    let value_start = start + KEY.len();
    let len =
        xml[value_start..].find('"').ok_or_else(|| EnvError::Mujoco("unterminated settotalmass attribute".into()))?;
    let raw = &xml[value_start..value_start + len];
    let mass: f64 =
        raw.trim().parse().map_err(|_| EnvError::Mujoco(format!("settotalmass = {raw:?} is not a number")))?;
    let out = format!("{}{}", &xml[..start], &xml[value_start + len + 1..]);
    Ok((out, (mass > 0.0).then_some(mass)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_assets_name_the_file_and_folders() {
        let e = find_asset("no_such_model.xml", Some(Path::new("/nonexistent/dir"))).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("no_such_model.xml") && msg.contains("/nonexistent/dir"), "{msg}");
        assert!(matches!(e, EnvError::Missing { .. }));
    }

    #[test]
    fn settotalmass_is_stripped() {
        let (xml, m) = strip_settotalmass(r#"<compiler angle="radian" settotalmass="14"/>"#).unwrap();
        assert_eq!((xml.as_str(), m), (r#"<compiler angle="radian" />"#, Some(14.0)));
        assert_eq!(strip_settotalmass("<compiler/>").unwrap().1, None);
        assert!(strip_settotalmass(r#"settotalmass="x""#).is_err());
    }

    #[test]
    fn linked_version_is_checked() {
        check_mujoco_version().unwrap();
    }
}
