//! `AlgorithmParams` read from a config: every algorithm round-trips, and an unknown `algo`,
//! an unknown key or a value of the wrong type is an error naming its key by its path inside
//! the table (serde's internally tagged derive reports such errors at the table itself).

use offline_rl::algo::{AlgorithmParams, BcParams, DmgParams, IqlParams, ScasParams, Td3BcParams};
use rl_core::de::join_at;

fn refused_at(json: &str, key: &str) {
    match serde_json::from_str::<AlgorithmParams>(json) {
        Ok(v) => panic!("accepted {json} as {v:?}"),
        Err(e) => assert_eq!(join_at("", &e.to_string()).0, key, "{json}: {e}"),
    }
}

#[test]
fn every_algorithm_round_trips() -> anyhow::Result<()> {
    for p in [
        AlgorithmParams::Bc(BcParams::default()),
        AlgorithmParams::Td3Bc(Td3BcParams::default()),
        AlgorithmParams::Iql(IqlParams::default()),
        AlgorithmParams::Dmg(DmgParams::default()),
        AlgorithmParams::Scas(ScasParams::default()),
    ] {
        let json = serde_json::to_string(&p)?;
        anyhow::ensure!(serde_json::from_str::<AlgorithmParams>(&json)? == p, "{json}");
    }
    let p: AlgorithmParams = serde_json::from_str(r#"{"algo": "td3_bc", "gamma": 0.9}"#)?;
    anyhow::ensure!(matches!(p, AlgorithmParams::Td3Bc(ref t) if t.td3.gamma == 0.9), "{p:?}");
    Ok(())
}

#[test]
fn config_errors_name_their_key() {
    refused_at(r#"{"algo": "td3_bc", "gamm": 0.9}"#, "gamm");
    refused_at(r#"{"algo": "td3_bc", "gamma": "x"}"#, "gamma");
    refused_at(r#"{"algo": "td3_bc", "actor": {"hiden": [4]}}"#, "actor.hiden");
    refused_at(r#"{"algo": "sac"}"#, "algo");
    refused_at(r#"{"gamma": 0.9}"#, "algo");
}
