//! TD3+BC, DMG and SCAS embed the shared `rl_agents::Td3Core` (field `td3`) but keep the flat
//! configuration and checkpoint format they had when each declared the eleven TD3 fields
//! itself: the same top-level keys, each learner's own defaults for left-out keys, unknown keys
//! refused by name, key paths in errors.

use std::collections::BTreeSet;
use std::fmt::Debug;

use offline_rl::algo::{AlgorithmParams, DmgParams, ScasParams, TargetAggregation, Td3BcParams};
use rl_core::de::join_at;
use serde::de::DeserializeOwned;
use serde::Serialize;

const CORE: [&str; 11] = [
    "actor",
    "critic",
    "n_critics",
    "gamma",
    "tau",
    "actor_lr",
    "critic_lr",
    "policy_noise",
    "noise_clip",
    "policy_delay",
    "exploration_noise",
];

/// Each struct's keys before the core was split out.
const TD3BC_OWN: &[&str] = &["alpha"];
const DMG_OWN: &[&str] = &[
    "value",
    "value_lr",
    "cosine_steps",
    "scale_target_noise",
    "lambda",
    "nu",
    "expectile",
    "temperature",
    "max_weight",
    "finetune",
];
const SCAS_OWN: &[&str] = &[
    "target",
    "cosine_steps",
    "scale_target_noise",
    "lambda",
    "temperature",
    "beta",
    "max_weight",
    "perturbed_policy_input",
    "dynamics",
];

fn flat_round_trip<P: Serialize + DeserializeOwned + PartialEq + Debug + Default>(p: &P, own: &[&str]) {
    let v = serde_json::to_value(p).unwrap();
    let got: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = CORE.iter().chain(own).copied().collect();
    assert_eq!(got, want);
    assert_eq!(&serde_json::from_value::<P>(v).unwrap(), p);
    assert_eq!(&serde_json::from_str::<P>(&serde_json::to_string_pretty(p).unwrap()).unwrap(), p);
    assert_eq!(serde_json::from_str::<P>("{}").unwrap(), P::default());
    let e = serde_json::from_str::<P>(r#"{"gamma": 0.9, "gama": 0.9}"#).unwrap_err().to_string();
    assert!(e.starts_with("unknown field `gama`, expected one of `actor`, `critic`"), "{e}");
    assert!(own.iter().all(|k| e.contains(&format!("`{k}`"))), "{e}");
    let e = serde_json::from_str::<P>(r#"{"td3": {"gamma": 0.9}}"#).unwrap_err().to_string();
    assert!(e.starts_with("unknown field `td3`"), "{e}");
    let e = serde_json::from_str::<P>(r#"{"gamma": 0.9, "gamma": 0.8}"#).unwrap_err().to_string();
    assert!(e.starts_with("duplicate field `gamma`"), "{e}");
}

#[test]
fn td3bc_keeps_its_flat_format() {
    let p = Td3BcParams::default().gamma(0.9).alpha(1.5).hidden([8]).policy_noise(0.1 + 0.2);
    flat_round_trip(&p, TD3BC_OWN);
    let q: Td3BcParams = serde_json::from_str(
        r#"{"alpha": 1.5, "gamma": 0.9, "actor": {"hidden": [8]},
        "critic": {"hidden": [8]}, "policy_noise": 0.30000000000000004}"#,
    )
    .unwrap();
    assert_eq!(q, p);
}

#[test]
fn dmg_keeps_its_flat_format() {
    let p = DmgParams::antmaze().tau(0.01).value_lr(1e-3).hidden([8, 8]).scale_target_noise(true);
    flat_round_trip(&p, DMG_OWN);
    let q: DmgParams = serde_json::from_str(
        r#"{"nu": 0.5, "expectile": 0.9, "temperature": 10, "max_weight": 100,
        "tau": 0.01, "value_lr": 0.001, "actor": {"hidden": [8, 8]}, "critic": {"hidden": [8, 8]},
        "value": {"hidden": [8, 8]}, "scale_target_noise": true}"#,
    )
    .unwrap();
    assert_eq!(q, p);
}

#[test]
fn scas_keeps_its_flat_format_and_defaults() {
    let p = ScasParams::antmaze().n_critics(6).exploration_noise(0.2).beta(1e-2);
    flat_round_trip(&p, SCAS_OWN);
    // a left-out core key keeps SCAS's default (4 critics, actor step 2e-4), not TD3's
    let q: ScasParams = serde_json::from_str(r#"{"gamma": 0.9, "target": "mean"}"#).unwrap();
    assert_eq!((q.td3.n_critics, q.td3.actor_lr, q.td3.gamma, q.target), (4, 2e-4, 0.9, TargetAggregation::Mean));
    assert_eq!(q, ScasParams::default().gamma(0.9).target(TargetAggregation::Mean));
}

fn refused_at(json: &str, key: &str) {
    match serde_json::from_str::<AlgorithmParams>(json) {
        Ok(v) => panic!("accepted {json} as {v:?}"),
        Err(e) => assert_eq!(join_at("", &e.to_string()).0, key, "{json}: {e}"),
    }
}

#[test]
fn algorithm_configs_name_core_and_own_keys() {
    for algo in ["td3_bc", "dmg", "scas"] {
        refused_at(&format!(r#"{{"algo": "{algo}", "gama": 0.9}}"#), "gama");
        refused_at(&format!(r#"{{"algo": "{algo}", "policy_delay": -1}}"#), "policy_delay");
        refused_at(&format!(r#"{{"algo": "{algo}", "tau": "x"}}"#), "tau");
        refused_at(&format!(r#"{{"algo": "{algo}", "critic": {{"hidden": [4, "x"]}}}}"#), "critic.hidden[1]");
        // unknown to TD3+BC, the wrong type for DMG and SCAS
        refused_at(&format!(r#"{{"algo": "{algo}", "lambda": "x"}}"#), "lambda");
    }
    refused_at(r#"{"algo": "scas", "dynamics": {"stepz": 1}}"#, "dynamics.stepz");
    refused_at(r#"{"algo": "dmg", "finetune": {"decay": "x"}}"#, "finetune.decay");
    let p: AlgorithmParams = serde_json::from_str(r#"{"algo": "scas", "noise_clip": 0.25}"#).unwrap();
    assert_eq!(p, AlgorithmParams::Scas(ScasParams::default().noise_clip(0.25)));
    let p: AlgorithmParams = serde_json::from_str(r#"{"algo": "dmg", "policy_delay": 3, "nu": 1}"#).unwrap();
    assert_eq!(p, AlgorithmParams::Dmg(DmgParams::default().policy_delay(3).nu(1.0)));
}
