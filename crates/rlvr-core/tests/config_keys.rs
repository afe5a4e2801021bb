//! The internally tagged enums of a loss config (`PolicyLoss`, `Aggregation`,
//! `AdvantageEstimator`) drop no key: a stray key next to a variant without fields is an error
//! naming it (serde's derive drops such keys silently), and errors inside a variant name their
//! key. Every variant still round-trips.

use rl_core::de::join_at;
use rlvr_core::{
    AdvantageEstimator, Aggregation, CispoParams, ClipCovParams, GmpoParams, GspoParams, KlCovParams, LossParams,
    LpoParams, PolicyLoss, PpoParams, SapoParams, StdKind,
};
use serde::de::DeserializeOwned;

/// The JSON must be refused, with an error naming `key` (relative to the value).
fn refused_at<T: DeserializeOwned + std::fmt::Debug>(json: &str, key: &str) {
    match serde_json::from_str::<T>(json) {
        Ok(v) => panic!("accepted {json} as {v:?}"),
        Err(e) => assert_eq!(join_at("", &e.to_string()).0, key, "{json}: {e}"),
    }
}

fn round_trips<T: serde::Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    let json = serde_json::to_string(v).unwrap_or_default();
    assert_eq!(serde_json::from_str::<T>(&json).ok().as_ref(), Some(v), "{json}");
}

#[test]
fn every_variant_round_trips() {
    for p in [
        PolicyLoss::Ppo(PpoParams::default()),
        PolicyLoss::Gspo(GspoParams::default()),
        PolicyLoss::Cispo(CispoParams::default()),
        PolicyLoss::Sapo(SapoParams::default()),
        PolicyLoss::Reinforce,
        PolicyLoss::Gmpo(GmpoParams::default()),
        PolicyLoss::ClipCov(ClipCovParams::default()),
        PolicyLoss::KlCov(KlCovParams::default()),
        PolicyLoss::Lpo(LpoParams::default()),
    ] {
        round_trips(&p);
    }
    for a in [
        Aggregation::TokenMean,
        Aggregation::SeqMeanTokenSum,
        Aggregation::SeqMeanTokenMean,
        Aggregation::SeqMeanTokenSumNorm { scale: None },
        Aggregation::SeqMeanTokenSumNorm { scale: Some(4096.0) },
    ] {
        round_trips(&a);
    }
    for e in [
        AdvantageEstimator::Grpo { eps: 1e-4, std: StdKind::Population },
        AdvantageEstimator::DrGrpo,
        AdvantageEstimator::Rloo,
        AdvantageEstimator::ReinforcePlusPlus { eps: 1e-8 },
        AdvantageEstimator::ReinforcePlusPlusBaseline { eps: 1e-8 },
        AdvantageEstimator::MaxRl { eps: 1e-6 },
        AdvantageEstimator::PassK { normalize_by_std: false, eps: 1e-6 },
        AdvantageEstimator::Opo,
        AdvantageEstimator::BatchStd { eps: 1e-4 },
        AdvantageEstimator::ReMax,
        AdvantageEstimator::Gpg { f_norm: 2.0 },
    ] {
        round_trips(&e);
    }
    round_trips(&LossParams::default().policy(PolicyLoss::Reinforce));
    // Fields still default: `{"kind": "grpo"}` is verl's GRPO.
    assert_eq!(
        serde_json::from_str::<AdvantageEstimator>(r#"{"kind": "grpo"}"#).ok(),
        Some(AdvantageEstimator::grpo())
    );
}

#[test]
fn a_stray_key_next_to_a_variant_without_fields_is_refused() {
    refused_at::<PolicyLoss>(r#"{"kind": "reinforce", "eps_high": 0.2}"#, "eps_high");
    refused_at::<Aggregation>(r#"{"mode": "token-mean", "scale": 4096}"#, "scale");
    refused_at::<Aggregation>(r#"{"scale": 4096, "mode": "seq-mean-token-sum"}"#, "scale");
    for kind in ["dr_grpo", "rloo", "opo", "remax"] {
        refused_at::<AdvantageEstimator>(&format!(r#"{{"kind": "{kind}", "eps": 1e-6}}"#), "eps");
    }
    refused_at::<LossParams>(r#"{"policy": {"kind": "reinforce", "clip": 1}}"#, "clip");
}

#[test]
fn errors_inside_a_variant_name_their_key() {
    refused_at::<PolicyLoss>(r#"{"kind": "ppo", "clip_hgh": 0.2}"#, "clip_hgh");
    refused_at::<PolicyLoss>(r#"{"kind": "ppo", "eps_high": "x"}"#, "eps_high");
    refused_at::<PolicyLoss>(r#"{"kind": "oracle"}"#, "kind");
    refused_at::<PolicyLoss>(r#"{"eps_high": 0.2}"#, "kind");
    refused_at::<Aggregation>(r#"{"mode": "seq-mean-token-sum-norm", "scale": "x"}"#, "scale");
    refused_at::<AdvantageEstimator>(r#"{"kind": "grpo", "std": "bessel"}"#, "std");
}
