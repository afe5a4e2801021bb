//! The parameter convention (docs/conventions.md §1) for every parameter set of offline-rl:
//! `{}` = defaults, one field changes only that field, misspelt fields are refused, setters set
//! their field, `check` names the first bad field at the ends of each range.

use std::fmt::Debug;

use offline_rl::algo::{
    AlgoKind, AlgorithmParams, BcParams, DatasetKind, DmgParams, DynamicsParams, FinetuneSchedule, IqlParams,
    IqlPolicy, ScasParams, TargetAggregation, Td3BcParams,
};
use offline_rl::finetune::FinetuneParams;
use offline_rl::generate::{Maze2dParams, SuiteParams};
use offline_rl::train::FitParams;
use offline_rl::OfflineError;
use rl_core::Params;
use serde::de::DeserializeOwned;

fn rejects<P: Params<Error = OfflineError> + Debug>(p: P, field: &str) {
    match p.check() {
        Err(OfflineError::InvalidParameter { name, .. }) => assert_eq!(name, field),
        other => panic!("expected `{field}` to be rejected, got {other:?}"),
    }
}

fn accepts<P: Params<Error = OfflineError> + Debug>(p: P) {
    if let Err(e) = p.check() {
        panic!("expected valid parameters, got {e}");
    }
}

fn serde_defaults<P: DeserializeOwned + Default + PartialEq + Debug>(json: &str, want: P) {
    assert_eq!(serde_json::from_str::<P>("{}").unwrap(), P::default());
    assert_eq!(serde_json::from_str::<P>(json).unwrap(), want);
    assert!(serde_json::from_str::<P>(r#"{"no_such_field": 1}"#).is_err());
}

#[test]
fn td3bc_params() {
    let d = Td3BcParams::default();
    accepts(d.clone());
    assert_eq!(
        (d.alpha, d.td3.policy_delay, d.td3.policy_noise, d.td3.noise_clip, d.td3.n_critics),
        (2.5, 2, 0.2, 0.5, 2)
    );
    serde_defaults(r#"{"alpha": 1.0}"#, d.clone().alpha(1.0));
    let p = d
        .clone()
        .gamma(0.9)
        .tau(0.01)
        .actor_lr(1e-3)
        .critic_lr(2e-3)
        .policy_delay(3)
        .n_critics(4)
        .exploration_noise(0.2);
    assert_eq!(
        (
            p.td3.gamma,
            p.td3.tau,
            p.td3.actor_lr,
            p.td3.critic_lr,
            p.td3.policy_delay,
            p.td3.n_critics,
            p.td3.exploration_noise
        ),
        (0.9, 0.01, 1e-3, 2e-3, 3, 4, 0.2)
    );
    for g in [0.0, 1.0] {
        accepts(d.clone().gamma(g));
    }
    rejects(d.clone().gamma(1.01), "gamma");
    rejects(d.clone().tau(-0.1), "tau");
    rejects(d.clone().alpha(0.0), "alpha");
    rejects(d.clone().policy_delay(0), "policy_delay");
    rejects(d.clone().n_critics(0), "n_critics");
    rejects(d.clone().actor_lr(f64::NAN), "actor_lr");
    rejects(d.clone().noise_clip(-1.0), "noise_clip");
    rejects(d.clone().hidden([0]), "actor.hidden[0]");
}

#[test]
fn dmg_params() {
    let d = DmgParams::default();
    accepts(d.clone());
    assert_eq!(
        (d.lambda, d.nu, d.expectile, d.temperature, d.max_weight, d.cosine_steps),
        (0.25, 0.1, 0.7, 3.0, 3.0, 500_000)
    );
    assert_eq!(DmgParams::gym(DatasetKind::MediumExpert).nu, 10.0);
    assert_eq!(DmgParams::gym(DatasetKind::Expert).nu, 10.0);
    assert_eq!(DmgParams::gym(DatasetKind::MediumReplay).nu, 0.1);
    let a = DmgParams::antmaze();
    assert_eq!((a.nu, a.expectile, a.temperature, a.max_weight), (0.5, 0.9, 10.0, 100.0));
    serde_defaults(
        r#"{"nu": 10.0, "finetune": {"nu_end": 0.01}}"#,
        d.clone().nu(10.0).finetune(FinetuneSchedule::default().nu_end(0.01)),
    );
    for l in [0.0, 1.0] {
        accepts(d.clone().lambda(l));
    }
    rejects(d.clone().lambda(1.5), "lambda");
    rejects(d.clone().nu(-1.0), "nu");
    rejects(d.clone().expectile(1.0), "expectile");
    rejects(d.clone().expectile(0.0), "expectile");
    rejects(d.clone().max_weight(0.0), "max_weight");
    rejects(d.clone().temperature(-1.0), "temperature");
    rejects(d.clone().value_lr(0.0), "value_lr");
    rejects(d.clone().finetune(FinetuneSchedule::default().decay(1.5)), "finetune.decay");
    rejects(d.clone().finetune(FinetuneSchedule::default().every(0)), "finetune.every");
}

#[test]
fn scas_params() {
    let d = ScasParams::default();
    accepts(d.clone());
    assert_eq!(
        (d.td3.n_critics, d.temperature, d.lambda, d.beta, d.max_weight, d.td3.actor_lr, d.td3.critic_lr),
        (4, 5.0, 0.25, 3e-3, 50.0, 2e-4, 3e-4)
    );
    assert_eq!(d.dynamics.net.hidden, vec![256, 256, 256, 256]);
    assert_eq!(ScasParams::antmaze().target, TargetAggregation::Mean);
    serde_defaults(
        r#"{"target": "mean", "dynamics": {"steps": 10}}"#,
        d.clone().target(TargetAggregation::Mean).dynamics(DynamicsParams::default().steps(10)),
    );
    rejects(d.clone().beta(-1.0), "beta");
    rejects(d.clone().lambda(2.0), "lambda");
    rejects(d.clone().dynamics(DynamicsParams::default().holdout(1.0)), "dynamics.holdout");
    rejects(d.clone().dynamics(DynamicsParams::default().lr(0.0)), "dynamics.lr");
    rejects(d.clone().dynamics(DynamicsParams::default().batch_size(0)), "dynamics.batch_size");
    accepts(d.clone().dynamics(DynamicsParams::default().holdout(0.0)));
    let p = d.perturbed_policy_input(true).cosine_steps(0);
    assert!(p.perturbed_policy_input);
    assert_eq!(p.cosine_steps, 0);
}

#[test]
fn iql_and_bc_params() {
    let d = IqlParams::default();
    accepts(d.clone());
    assert_eq!((d.expectile, d.temperature, d.max_weight, d.policy), (0.7, 3.0, 100.0, IqlPolicy::Gaussian));
    assert_eq!((IqlParams::antmaze().expectile, IqlParams::antmaze().temperature), (0.9, 10.0));
    serde_defaults(r#"{"policy": "deterministic"}"#, d.clone().policy(IqlPolicy::Deterministic));
    rejects(d.clone().log_std_min(2.0), "log_std_min");
    rejects(d.clone().expectile(1.2), "expectile");
    let b = BcParams::default();
    accepts(b.clone());
    serde_defaults(r#"{"lr": 0.01}"#, b.clone().lr(0.01));
    rejects(b.lr(-1.0), "lr");
}

#[test]
fn run_params() {
    accepts(FitParams::default());
    serde_defaults(r#"{"steps": 10}"#, FitParams::default().steps(10));
    rejects(FitParams::default().steps(0), "steps");
    rejects(FitParams::default().batch_size(0), "batch_size");
    rejects(FitParams::default().log_every(0), "log_every");
    accepts(FinetuneParams::default());
    serde_defaults(r#"{"steps": 5}"#, FinetuneParams::default().steps(5));
    rejects(FinetuneParams::default().eval_every(0), "eval_every");
    accepts(SuiteParams::default());
    rejects(SuiteParams::default().medium_fraction(1.0), "medium_fraction");
    rejects(SuiteParams::default().hidden(vec![]), "hidden");
    accepts(Maze2dParams::default());
    rejects(Maze2dParams { action_noise: -0.1, ..Maze2dParams::default() }, "action_noise");
}

#[test]
fn tagged_algorithm_params() {
    let p: AlgorithmParams = serde_json::from_str(r#"{"algo": "dmg", "nu": 10.0}"#).unwrap();
    assert_eq!(p, AlgorithmParams::Dmg(DmgParams::default().nu(10.0)));
    assert_eq!(p.kind(), AlgoKind::Dmg);
    assert!(serde_json::from_str::<AlgorithmParams>(r#"{"algo": "dmg", "nuu": 1}"#).is_err());
    assert!(serde_json::from_str::<AlgorithmParams>(r#"{"algo": "cql"}"#).is_err());
    for k in AlgoKind::ALL {
        assert_eq!(k.as_str().parse::<AlgoKind>().unwrap(), k);
        assert_eq!(AlgorithmParams::defaults(k, DatasetKind::Medium).kind(), k);
    }
    assert!("TD3+BC".parse::<AlgoKind>().is_ok());
    assert!(matches!("cql".parse::<AlgoKind>(), Err(OfflineError::UnknownId { .. })));
    // the cosine schedule follows the run length
    match AlgorithmParams::defaults(AlgoKind::Dmg, DatasetKind::Medium).anneal_over(10_000) {
        AlgorithmParams::Dmg(p) => assert_eq!(p.cosine_steps, 5_000),
        _ => unreachable!(),
    }
    assert_eq!(DatasetKind::from_name("hopper-medium-replay-v2"), DatasetKind::MediumReplay);
    assert_eq!(DatasetKind::from_name("walker2d_medium_expert"), DatasetKind::MediumExpert);
    assert_eq!(DatasetKind::from_name("maze2d-umaze"), DatasetKind::Other);
}
