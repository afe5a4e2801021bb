//! D4RL normalised scores: `score = 100 · (R − R_random) / (R_expert − R_random)` with the
//! published reference returns (`Farama-Foundation/D4RL`, `d4rl/infos.py`, `REF_MIN_SCORE` /
//! `REF_MAX_SCORE`), the number every D4RL table reports (`env.get_normalized_score(R) · 100`).
//!
//! Ids are D4RL dataset names (`hopper-medium-v2`, `maze2d-umaze-v1`, `antmaze-large-diverse-v2`)
//! or their families (`hopper`, `maze2d-umaze`, `antmaze`). On data generated here (ours, not
//! D4RL's) the locomotion references still give a "D4RL-normalised" score, which compares our
//! algorithms with each other on the same data, not with published D4RL tables.

use crate::error::{OfflineError, Result};

/// `(family, REF_MIN_SCORE, REF_MAX_SCORE)` of `d4rl/infos.py`. Locomotion references are
/// shared by every dataset (`random`, `medium`, `medium-replay`, `medium-expert`, `expert`,
/// `full-replay`) and version (`v0`, `v1`, `v2`) of the environment.
pub const D4RL_REFERENCES: &[(&str, f64, f64)] = &[
    ("halfcheetah", -280.178953, 12135.0),
    ("hopper", -20.272305, 3234.3),
    ("walker2d", 1.629008, 4592.3),
    ("ant", -325.6, 3879.7),
    ("maze2d-open", 0.01, 20.66),
    ("maze2d-umaze", 23.85, 161.86),
    ("maze2d-medium", 13.13, 277.39),
    ("maze2d-large", 6.7, 273.99),
    ("maze2d-open-dense", 11.17817, 27.166538620695782),
    ("maze2d-umaze-dense", 68.537689, 193.66285642381482),
    ("maze2d-medium-dense", 44.264742, 297.4552547777125),
    ("maze2d-large-dense", 30.569041, 303.4857382709002),
    ("antmaze", 0.0, 1.0),
    ("kitchen", 0.0, 4.0),
    ("pen", 96.262799, 3076.8331017826877),
    ("hammer", -274.856578, 12794.134825156867),
    ("relocate", -6.425911, 4233.877797728884),
    ("door", -56.512833, 2880.5693087298737),
];

/// The reference family of a D4RL dataset name: `hopper-medium-replay-v2` → `hopper`,
/// `maze2d-umaze-dense-v1` → `maze2d-umaze-dense`, `antmaze-large-play-v2` → `antmaze`, a
/// family name itself → itself. `None` for anything else.
pub fn d4rl_family(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let lookup = |f: &str| D4RL_REFERENCES.iter().find(|(k, _, _)| *k == f).map(|(k, _, _)| *k);
    if let Some(k) = lookup(&name) {
        return Some(k);
    }
    if let Some(rest) = name.strip_prefix("maze2d-") {
        let layout = rest.split('-').next()?;
        let dense = rest.contains("-dense");
        return lookup(&format!("maze2d-{layout}{}", if dense { "-dense" } else { "" }));
    }
    let head = name.split(['-', '_']).next()?;
    match head {
        "halfcheetah" | "hopper" | "walker2d" | "ant" | "antmaze" | "kitchen" | "pen" | "hammer" | "relocate"
        | "door" => lookup(head),
        _ => None,
    }
}

/// The reference family of a Minari dataset id (`mujoco/hopper/medium-v0` → `hopper`,
/// `D4RL/antmaze/large-play-v1` → `antmaze`); `None` when unknown (Minari's metadata then
/// usually carries `ref_min_score` / `ref_max_score`).
pub fn minari_family(id: &str) -> Option<&'static str> {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        [_, env, _] => d4rl_family(env),
        _ => d4rl_family(id),
    }
}

/// `(REF_MIN_SCORE, REF_MAX_SCORE)` for a D4RL dataset name or family.
pub fn d4rl_reference(name: &str) -> Option<(f64, f64)> {
    let f = d4rl_family(name)?;
    D4RL_REFERENCES.iter().find(|(k, _, _)| *k == f).map(|(_, lo, hi)| (*lo, *hi))
}

/// `100 · (ret − lo) / (hi − lo)`.
///
/// # Errors
/// [`OfflineError::InvalidParameter`] unless `lo < hi` and every value is finite.
pub fn normalize(ret: f64, lo: f64, hi: f64) -> Result<f64> {
    rl_core::check_finite_f64("score", [ret, lo, hi].iter())?;
    if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
        return Err(OfflineError::invalid("ref_max", hi, format!("must exceed ref_min = {lo}")));
    }
    Ok(100.0 * (ret - lo) / (hi - lo))
}

/// D4RL's normalised score of the undiscounted return `ret` on `name` (a D4RL dataset name or
/// family): `env.get_normalized_score(ret) · 100`.
///
/// ```
/// let s = offline_rl::score::d4rl_score("hopper-medium-v2", 3234.3)?;
/// assert!((s - 100.0).abs() < 1e-9);
/// assert!(offline_rl::score::d4rl_score("pendulum", 0.0).is_err());
/// # Ok::<(), offline_rl::OfflineError>(())
/// ```
///
/// # Errors
/// [`OfflineError::UnknownId`] for a name without a published reference; non-finite `ret`.
pub fn d4rl_score(name: &str, ret: f64) -> Result<f64> {
    let (lo, hi) = d4rl_reference(name)
        .ok_or_else(|| OfflineError::UnknownId { what: "D4RL environment".into(), id: name.into() })?;
    normalize(ret, lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_references() {
        assert_eq!(d4rl_family("hopper-medium-replay-v2"), Some("hopper"));
        assert_eq!(d4rl_family("halfcheetah-expert-v2"), Some("halfcheetah"));
        assert_eq!(d4rl_family("walker2d_medium_expert-v1"), Some("walker2d"));
        assert_eq!(d4rl_family("ant-random-v2"), Some("ant"));
        assert_eq!(d4rl_family("antmaze-large-diverse-v2"), Some("antmaze"));
        assert_eq!(d4rl_family("maze2d-umaze-v1"), Some("maze2d-umaze"));
        assert_eq!(d4rl_family("maze2d-large-dense-v1"), Some("maze2d-large-dense"));
        assert_eq!(d4rl_family("pendulum-medium"), None);
        assert_eq!(minari_family("mujoco/walker2d/expert-v0"), Some("walker2d"));
        assert_eq!(d4rl_reference("hopper"), Some((-20.272305, 3234.3)));
        assert_eq!(d4rl_reference("maze2d-medium-v1"), Some((13.13, 277.39)));
    }

    #[test]
    fn scores_against_published_references() {
        // halfcheetah: random -280.178953 -> 0, expert 12135 -> 100
        assert!((d4rl_score("halfcheetah-medium-v2", -280.178953).unwrap()).abs() < 1e-12);
        let mid = (12135.0 + -280.178953) / 2.0;
        assert!((d4rl_score("halfcheetah", mid).unwrap() - 50.0).abs() < 1e-9);
        // walker2d-medium at return 3000
        let w = d4rl_score("walker2d-medium-v2", 3000.0).unwrap();
        assert!((w - 100.0 * (3000.0 - 1.629008) / (4592.3 - 1.629008)).abs() < 1e-12);
        assert!((d4rl_score("antmaze-umaze-v2", 0.6).unwrap() - 60.0).abs() < 1e-12);
        assert!(matches!(d4rl_score("cartpole", 1.0), Err(OfflineError::UnknownId { .. })));
        assert!(d4rl_score("hopper", f64::NAN).is_err());
        assert!(normalize(1.0, 2.0, 2.0).is_err());
    }
}
