//! `Td3Params` embeds the shared `Td3Core` (field `td3`) but keeps the flat configuration and
//! checkpoint format it had when it declared the eleven TD3 fields itself: the same top-level
//! keys, defaults for left-out keys, unknown and repeated keys refused by name, key paths in
//! errors, and the setters of the old struct.

use std::collections::BTreeSet;

use rl_agents::{ActorObjective, AgentError, Td3Core, Td3Params};
use rl_core::Params;

/// The keys of `Td3Params` before the core was split out, in their old order.
const OLD_KEYS: [&str; 12] = [
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
    "actor_objective",
];

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().expect("a JSON object").keys().cloned().collect()
}

#[test]
fn json_keys_are_flat_and_round_trip() {
    let p = Td3Params::default().gamma(0.9).n_critics(3).actor_objective(ActorObjective::Mean).hidden([7]);
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(keys(&v), OLD_KEYS.iter().map(|k| k.to_string()).collect());
    assert_eq!(v["gamma"], serde_json::json!(0.9));
    assert_eq!(v["n_critics"], serde_json::json!(3));
    assert_eq!(v["actor"]["hidden"], serde_json::json!([7]));
    assert_eq!(v["actor_objective"], serde_json::json!("mean"));
    let back: Td3Params = serde_json::from_value(v).unwrap();
    assert_eq!(back, p);
    let s = serde_json::to_string_pretty(&p).unwrap();
    assert_eq!(serde_json::from_str::<Td3Params>(&s).unwrap(), p);
    // f64 values keep their bits through the flat reader (checkpoints compare params exactly)
    let odd = Td3Params::default().tau(0.1 + 0.2).actor_lr(1.0 / 3.0);
    assert_eq!(serde_json::from_str::<Td3Params>(&serde_json::to_string(&odd).unwrap()).unwrap(), odd);
}

#[test]
fn a_config_written_in_the_old_order_still_loads() {
    // the key order of the struct before the split: actor_objective last
    let old = r#"{"actor": {"hidden": [16, 16]}, "critic": {"hidden": [16, 16]}, "n_critics": 2, "gamma": 0.98,
        "tau": 0.01, "actor_lr": 0.001, "critic_lr": 0.002, "policy_noise": 0.3, "noise_clip": 0.4,
        "policy_delay": 3, "exploration_noise": 0.05, "actor_objective": "min"}"#;
    let p: Td3Params = serde_json::from_str(old).unwrap();
    let want = Td3Params::default()
        .hidden([16, 16])
        .gamma(0.98)
        .tau(0.01)
        .actor_lr(0.001)
        .critic_lr(0.002)
        .policy_noise(0.3)
        .noise_clip(0.4)
        .policy_delay(3)
        .exploration_noise(0.05)
        .actor_objective(ActorObjective::Min);
    assert_eq!(p, want);
    assert_eq!(serde_json::from_str::<Td3Params>("{}").unwrap(), Td3Params::default());
    // an integer is read as a float, as before
    assert_eq!(serde_json::from_str::<Td3Params>(r#"{"gamma": 1}"#).unwrap().td3.gamma, 1.0);
}

#[test]
fn unknown_and_repeated_keys_are_refused_by_name() {
    let e = serde_json::from_str::<Td3Params>(r#"{"gamma": 0.9, "gama": 0.9}"#).unwrap_err().to_string();
    assert!(e.starts_with("unknown field `gama`, expected one of `actor`, `critic`, `n_critics`"), "{e}");
    assert!(e.contains("`actor_objective`"), "{e}");
    let e = serde_json::from_str::<Td3Params>(r#"{"td3": {}}"#).unwrap_err().to_string();
    assert!(e.starts_with("unknown field `td3`"), "{e}");
    let e = serde_json::from_str::<Td3Params>(r#"{"tau": 0.1, "tau": 0.2}"#).unwrap_err().to_string();
    assert!(e.starts_with("duplicate field `tau`"), "{e}");
    let e = serde_json::from_str::<Td3Params>(r#"{"actor": {"hiden": [4]}}"#).unwrap_err().to_string();
    assert!(e.starts_with("unknown field `hiden`"), "{e}");
    assert!(serde_json::from_str::<Td3Params>("[]").is_err());
}

/// The key path of the error reading `json`, as a config reader reports it
/// (`rl_core::de::nested` tracks it with `serde_path_to_error`).
fn error_path(json: &str) -> String {
    let raw: rl_core::de::Raw = serde_json::from_str(json).unwrap();
    match rl_core::de::nested::<Td3Params, serde_json::Error>(raw, 0) {
        Ok(p) => panic!("accepted {json} as {p:?}"),
        Err(e) => rl_core::de::join_at("", &e.to_string()).0,
    }
}

#[test]
fn errors_carry_the_key_path() {
    assert_eq!(error_path(r#"{"actor_objective": "first", "gamma": "x"}"#), "gamma");
    assert_eq!(error_path(r#"{"critic": {"hidden": [4, "x"]}}"#), "critic.hidden[1]");
    assert_eq!(error_path(r#"{"actor": {"hiden": [4]}}"#), "actor.hiden");
    assert_eq!(error_path(r#"{"actor_objective": "max"}"#), "actor_objective");
}

#[test]
fn the_core_alone_and_its_checks() {
    let c: Td3Core = serde_json::from_str(r#"{"policy_delay": 4}"#).unwrap();
    assert_eq!(c, Td3Core::default().policy_delay(4));
    assert!(serde_json::from_str::<Td3Core>(r#"{"actor_objective": "min"}"#).is_err());
    let d = Td3Core::default();
    assert_eq!(
        (d.n_critics, d.gamma, d.tau, d.actor_lr, d.critic_lr, d.policy_noise, d.noise_clip, d.policy_delay),
        (2, 0.99, 0.005, 3e-4, 3e-4, 0.2, 0.5, 2)
    );
    assert_eq!(
        (d.exploration_noise, d.actor.hidden.clone(), d.critic.hidden.clone()),
        (0.1, vec![256, 256], vec![256, 256])
    );
    assert!(d.clone().check().is_ok());
    let rejects = |c: Td3Core, field: &str| match c.check() {
        Err(AgentError::InvalidParameter { name, .. }) => assert_eq!(name, field),
        other => panic!("expected `{field}` to be rejected, got {other:?}"),
    };
    rejects(d.clone().hidden([0]), "actor.hidden[0]");
    rejects(d.clone().critic(rl_nn::MlpConfig::new([0])), "critic.hidden[0]");
    rejects(
        d.clone().critic(rl_nn::MlpConfig::new([4]).output_activation(rl_nn::Activation::Tanh)),
        "critic.output_activation",
    );
    rejects(d.clone().n_critics(0), "n_critics");
    rejects(d.clone().gamma(1.5), "gamma");
    rejects(d.clone().tau(-0.1), "tau");
    rejects(d.clone().actor_lr(0.0), "actor_lr");
    rejects(d.clone().critic_lr(f64::NAN), "critic_lr");
    rejects(d.clone().policy_noise(-1.0), "policy_noise");
    rejects(d.clone().noise_clip(-1.0), "noise_clip");
    rejects(d.clone().policy_delay(0), "policy_delay");
    rejects(d.clone().exploration_noise(f64::INFINITY), "exploration_noise");
    for ok in [d.clone().gamma(0.0), d.clone().gamma(1.0), d.clone().tau(1.0), d.clone().policy_noise(0.0)] {
        assert!(ok.check().is_ok());
    }
    // the same messages through Td3Params
    let e = Td3Params::default().noise_clip(-1.0).check().unwrap_err();
    assert_eq!(e.to_string(), Td3Core::default().noise_clip(-1.0).check().unwrap_err().to_string());
}

#[test]
fn setters_set_the_core() {
    let p = Td3Params::default()
        .n_critics(5)
        .gamma(0.5)
        .tau(0.5)
        .actor_lr(1e-3)
        .critic_lr(2e-3)
        .policy_noise(0.1)
        .noise_clip(0.2)
        .policy_delay(7)
        .exploration_noise(0.3)
        .actor(rl_nn::MlpConfig::new([3]))
        .critic(rl_nn::MlpConfig::new([4]));
    let c = &p.td3;
    assert_eq!(
        (c.n_critics, c.gamma, c.tau, c.actor_lr, c.critic_lr, c.policy_noise, c.noise_clip, c.policy_delay),
        (5, 0.5, 0.5, 1e-3, 2e-3, 0.1, 0.2, 7)
    );
    assert_eq!((c.exploration_noise, c.actor.hidden.clone(), c.critic.hidden.clone()), (0.3, vec![3], vec![4]));
    assert_eq!(Td3Params::default().td3(c.clone()).td3, *c);
    assert_eq!(p.actor_objective, ActorObjective::First);
}
