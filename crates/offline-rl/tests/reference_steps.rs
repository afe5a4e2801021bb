//! One TD3+BC, DMG and SCAS update against the official code (`sfujim/TD3_BC`,
//! `thu-rllab/DMG`, `thu-rllab/SCAS`): identical initial weights, one fixed batch and the same
//! injected noise on both sides; the losses and every updated weight (networks and targets)
//! must agree. Fixture: `scripts/offline_rl_reference_fixture.py`.

use std::collections::BTreeMap;

use offline_rl::algo::{Dmg, DmgParams, DynamicsParams, Scas, ScasParams, Td3Bc, Td3BcParams};
use rl_agents::{Agent, Batch, BatchLearner, UpdateMetrics};
use rl_core::{Params, Space};
use rl_nn::MlpConfig;
use serde_json::Value;
use tch::{Device, Kind, Tensor};

const FIXTURE: &str = include_str!("fixtures/reference_steps.json");
/// Losses and weights are float32 on both sides; one Adam step moves a weight by about the
/// learning rate, so 1e-6 would catch a wrong gradient sign, scale or a missing term.
const TOL: f64 = 2e-6;

fn fixture() -> Value {
    serde_json::from_str(FIXTURE).unwrap()
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<i64> = v["shape"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    let data: Vec<f32> = v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    Tensor::from_slice(&data).view(shape.as_slice())
}

fn tensors(v: &Value) -> BTreeMap<String, Tensor> {
    v.as_object().unwrap().iter().map(|(k, t)| (k.clone(), tensor(t))).collect()
}

fn batch(v: &Value) -> Batch {
    Batch::from_tensors(
        tensor(&v["obs"]),
        tensor(&v["action"]),
        tensor(&v["reward"]),
        tensor(&v["next_obs"]),
        tensor(&v["terminal"]),
        None,
    )
    .unwrap()
}

fn spaces(f: &Value) -> (Space, Space, i64) {
    let o = f["obs_dim"].as_u64().unwrap() as usize;
    let a = f["act_dim"].as_u64().unwrap() as usize;
    let m = f["max_action"].as_f64().unwrap() as f32;
    (Space::symmetric(o, 10.0).unwrap(), Space::symmetric(a, m).unwrap(), f["hidden"].as_i64().unwrap())
}

fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size());
    a.f_sub(b).unwrap().abs().max().to_kind(Kind::Double).double_value(&[])
}

/// Compares losses and weights; returns the largest error of each (printed by the caller).
fn compare(name: &str, m: &UpdateMetrics, ours: Vec<(String, Tensor)>, want: &Value) -> (f64, f64) {
    let m = m.to_metrics().unwrap();
    let mut loss_err: f64 = 0.0;
    for (k, v) in want["losses"].as_object().unwrap() {
        let got = m.get(k).unwrap_or_else(|| panic!("{name}: no metric {k}"));
        let w = v.as_f64().unwrap();
        let err = (got - w).abs() / w.abs().max(1.0);
        assert!(err < 1e-5, "{name} {k}: ours {got}, reference {w}");
        loss_err = loss_err.max(err);
    }
    let after = tensors(&want["after"]);
    let before = tensors(&want["before"]);
    let ours: BTreeMap<String, Tensor> = ours.into_iter().collect();
    assert_eq!(ours.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "{name}: tensor names");
    let mut w_err: f64 = 0.0;
    let mut moved: f64 = 0.0;
    for (k, t) in &after {
        let err = max_abs(&ours[k], t);
        assert!(err < TOL, "{name} {k}: max abs error {err}");
        w_err = w_err.max(err);
        moved = moved.max(max_abs(&before[k], t));
    }
    // the step moved the weights far more than the tolerance: the comparison has teeth
    assert!(moved > 100.0 * TOL, "{name}: the reference step moved nothing ({moved})");
    eprintln!("{name}: max rel loss error {loss_err:.2e}, max abs weight error {w_err:.2e}");
    (loss_err, w_err)
}

#[test]
fn td3bc_step_matches_official_code() {
    let f = fixture();
    let r = &f["td3bc"];
    let (obs, act, h) = spaces(&f);
    let p = Td3BcParams::default().hidden([h, h]).policy_delay(1).check().unwrap();
    let mut algo = Td3Bc::new(p, &obs, &act, Device::Cpu, 0).unwrap();
    algo.set_weights(&tensors(&r["before"])).unwrap();
    let m = algo.update_with_noise(&batch(&r["batch"]), &tensor(&r["eps"])).unwrap();
    compare("td3bc", &m, algo.weights(), r);
}

#[test]
fn dmg_step_matches_official_code() {
    let f = fixture();
    let r = &f["dmg"];
    let (obs, act, h) = spaces(&f);
    let p = DmgParams::code_defaults().hidden([h, h]).policy_delay(1).check().unwrap();
    let mut algo = Dmg::new(p, &obs, &act, Device::Cpu, 0).unwrap();
    algo.set_weights(&tensors(&r["before"])).unwrap();
    let m = algo.update_with_noise(&batch(&r["batch"]), &tensor(&r["eps"])).unwrap();
    compare("dmg", &m, algo.weights(), r);
}

#[test]
fn dmg_scaled_target_noise_departs_from_official_code() {
    // the switch is live: with the action scale 2 of the fixture, scaling the clipped noise
    // changes the critic target and so the critic loss
    let f = fixture();
    let r = &f["dmg"];
    let (obs, act, h) = spaces(&f);
    let p = DmgParams::code_defaults().hidden([h, h]).policy_delay(1).scale_target_noise(true).check().unwrap();
    let mut algo = Dmg::new(p, &obs, &act, Device::Cpu, 0).unwrap();
    algo.set_weights(&tensors(&r["before"])).unwrap();
    let m = algo.update_with_noise(&batch(&r["batch"]), &tensor(&r["eps"])).unwrap().to_metrics().unwrap();
    let want = r["losses"]["loss/critic"].as_f64().unwrap();
    assert!((m.get("loss/critic").unwrap() - want).abs() > 1e-4);
}

fn scas(f: &Value) -> Scas {
    let (obs, act, h) = spaces(f);
    let p = ScasParams::default()
        .hidden([h, h])
        .policy_delay(1)
        .dynamics(DynamicsParams::default().net(MlpConfig::new([h, h, h, h])))
        .check()
        .unwrap();
    Scas::new(p, &obs, &act, Device::Cpu, 0).unwrap()
}

#[test]
fn scas_step_matches_official_code() {
    let f = fixture();
    let r = &f["scas"];
    let mut algo = scas(&f);
    algo.set_weights(&tensors(&r["before"])).unwrap();
    assert!(!algo.dynamics_ready());
    algo.freeze_dynamics();
    let m = algo.update_with_noise(&batch(&r["batch"]), &tensor(&r["eps"]), Some(&tensor(&r["state_noise"]))).unwrap();
    compare("scas", &m, algo.weights(), r);
}

#[test]
fn injected_noise_is_checked() {
    let f = fixture();
    let r = &f["scas"];
    let mut algo = scas(&f);
    algo.set_weights(&tensors(&r["before"])).unwrap();
    algo.freeze_dynamics();
    let b = batch(&r["batch"]);
    let eps = tensor(&r["eps"]);
    // an actor update without its state noise
    let e = algo.update_with_noise(&b, &eps, None).unwrap_err();
    assert!(matches!(e, rl_agents::AgentError::Protocol(_)), "{e}");
    // noise of the wrong width, or of the wrong kind
    let e = algo.update_with_noise(&b, &eps.narrow(1, 0, 1), Some(&tensor(&r["state_noise"]))).unwrap_err();
    assert!(matches!(&e, rl_agents::AgentError::Shape { what, .. } if what == "eps"), "{e}");
    let e = algo.update_with_noise(&b, &eps, Some(&tensor(&r["state_noise"]).to_kind(Kind::Double))).unwrap_err();
    assert!(matches!(&e, rl_agents::AgentError::Shape { what, .. } if what == "state_noise"), "{e}");
    assert_eq!(algo.updates(), 0, "a refused update changes nothing");
    // weights: a missing or unexpected name is refused before anything is copied
    let mut w = tensors(&r["before"]);
    w.insert("actor.9.weight".into(), Tensor::zeros([1], (Kind::Float, Device::Cpu)));
    assert!(algo.set_weights(&w).is_err());
    let mut w = tensors(&r["before"]);
    w.remove("dynamics.0.bias");
    assert!(algo.set_weights(&w).is_err());
}

#[test]
fn update_is_update_with_noise_fed_from_its_generator() {
    // update() draws, in this order, the smoothing noise of every update and the state noise of
    // actor updates from the "scas-noise" stream of its seed, and is otherwise
    // update_with_noise(): a copy fed those draws by hand ends bit-identical
    let f = fixture();
    let r = &f["scas"];
    let (obs, act, h) = spaces(&f);
    let p = || {
        ScasParams::default()
            .hidden([h, h])
            .dynamics(DynamicsParams::default().net(MlpConfig::new([h, h, h, h])))
            .check()
            .unwrap()
    };
    let mut a = Scas::new(p(), &obs, &act, Device::Cpu, 5).unwrap();
    let mut b = Scas::new(p(), &obs, &act, Device::Cpu, 5).unwrap();
    for s in [&mut a, &mut b] {
        s.set_weights(&tensors(&r["before"])).unwrap();
        s.freeze_dynamics();
    }
    let bt = batch(&r["batch"]);
    let (n, o, d) = (bt.len() as i64, obs.dim() as i64, act.dim() as i64);
    let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(5, "scas-noise"));
    let opts = (Kind::Float, Device::Cpu);
    for step in 1..=4u64 {
        let ma = a.update(&bt).unwrap().to_metrics().unwrap();
        let eps = rl_nn::rand::standard_normal(&[n, d], opts, &mut rng).unwrap();
        let sn = (step % 2 == 0).then(|| rl_nn::rand::standard_normal(&[n, o], opts, &mut rng).unwrap());
        let mb = b.update_with_noise(&bt, &eps, sn.as_ref()).unwrap().to_metrics().unwrap();
        assert_eq!(ma.get("loss/critic"), mb.get("loss/critic"), "step {step}");
        assert_eq!(ma.get("loss/actor"), mb.get("loss/actor"), "step {step}");
    }
    for ((ka, ta), (kb, tb)) in a.weights().iter().zip(b.weights().iter()) {
        assert_eq!(ka, kb);
        assert_eq!(max_abs(ta, tb), 0.0, "{ka}");
    }
}

#[test]
fn scas_dynamics_pretraining_step_matches_official_code() {
    // one step of thu-rllab/SCAS pretrain.py: Adam(1e-3) on F.mse_loss(dynamics(s, a), s')
    let f = fixture();
    let r = &f["scas_dynamics"];
    let mut algo = scas(&f);
    algo.set_weights(&tensors(&r["before"])).unwrap();
    let m = algo.pretrain_dynamics(&[batch(&r["batch"])]).unwrap();
    let want = r["loss"].as_f64().unwrap();
    let got = m.get("dynamics/train_mse").unwrap();
    assert!((got - want).abs() < 1e-6 * want.max(1.0), "ours {got}, reference {want}");
    let (after, before) = (tensors(&r["after"]), tensors(&r["before"]));
    let (mut err, mut moved): (f64, f64) = (0.0, 0.0);
    for (k, t) in algo.weights() {
        err = err.max(max_abs(&t, &after[&k]));
        if k.starts_with("dynamics.") {
            moved = moved.max(max_abs(&before[&k], &after[&k]));
        }
    }
    assert!(err < TOL, "dynamics: max abs weight error {err}");
    assert!(moved > 100.0 * TOL, "the reference step moved nothing ({moved})");
    eprintln!("scas dynamics: loss error {:.2e}, max abs weight error {err:.2e}", (got - want).abs());
}

/// The `*_delayed` cases: eight calls of the official update with its default `policy_freq = 2`
/// (the actor, the targets and, for DMG and SCAS, the cosine step of the actor rate every second
/// call; the schedule shortened to `CosineAnnealingLR(3)`, our `cosine_steps(3)`), a new batch
/// and new noise at every call. Every call's losses and the final weights must agree.
fn delayed(name: &str, algo: &mut dyn FnMut(&Batch, &Tensor, Option<&Tensor>) -> UpdateMetrics, r: &Value) -> f64 {
    let calls = r["calls"].as_u64().unwrap() as usize;
    let batches: Vec<Batch> = r["batches"].as_array().unwrap().iter().map(batch).collect();
    let eps: Vec<Tensor> = r["eps"].as_array().unwrap().iter().map(tensor).collect();
    let noise: Option<Vec<Tensor>> = r.get("state_noise").map(|v| v.as_array().unwrap().iter().map(tensor).collect());
    let mut loss_err: f64 = 0.0;
    for i in 0..calls {
        let actor_call = i % 2 == 1;
        let sn = noise.as_ref().filter(|_| actor_call).map(|n| &n[i / 2]);
        let m = algo(&batches[i], &eps[i], sn).to_metrics().unwrap();
        let want: Vec<f64> = r["losses"][i].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        // the reference backpropagates, in order: [value (DMG)], critic, [actor on actor calls]
        let mut names: Vec<&str> = if name == "dmg" { vec!["loss/value", "loss/critic"] } else { vec!["loss/critic"] };
        if actor_call {
            names.push("loss/actor");
        } else {
            assert!(m.get("loss/actor").is_none(), "{name} call {i}: an actor update on a critic-only call");
        }
        assert_eq!(names.len(), want.len(), "{name} call {i}: losses");
        for (k, w) in names.iter().zip(&want) {
            let got = m.get(k).unwrap_or_else(|| panic!("{name} call {i}: no metric {k}"));
            let err = (got - w).abs() / w.abs().max(1.0);
            assert!(err < 1e-5, "{name} call {i} {k}: ours {got}, reference {w}");
            loss_err = loss_err.max(err);
        }
    }
    loss_err
}

fn compare_weights(name: &str, ours: Vec<(String, Tensor)>, r: &Value) -> f64 {
    let after = tensors(&r["after"]);
    let before = tensors(&r["before"]);
    let ours: BTreeMap<String, Tensor> = ours.into_iter().collect();
    assert_eq!(ours.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "{name}: tensor names");
    let (mut err, mut moved): (f64, f64) = (0.0, 0.0);
    for (k, t) in &after {
        let e = max_abs(&ours[k], t);
        // eight Adam steps: errors compound a little beyond one step's
        assert!(e < 4.0 * TOL, "{name} {k}: max abs error {e}");
        err = err.max(e);
        moved = moved.max(max_abs(&before[k], t));
    }
    assert!(moved > 100.0 * TOL, "{name}: the reference moved nothing ({moved})");
    err
}

#[test]
fn delayed_actor_updates_match_official_code() {
    let f = fixture();
    let (obs, act, h) = spaces(&f);

    let r = &f["td3bc_delayed"];
    let p = Td3BcParams::default().hidden([h, h]).check().unwrap();
    let mut a = Td3Bc::new(p, &obs, &act, Device::Cpu, 0).unwrap();
    a.set_weights(&tensors(&r["before"])).unwrap();
    let l = delayed("td3bc", &mut |b, e, _| a.update_with_noise(b, e).unwrap(), r);
    let w = compare_weights("td3bc", a.weights(), r);
    eprintln!("td3bc delayed: max rel loss error {l:.2e}, max abs weight error {w:.2e}");

    let r = &f["dmg_delayed"];
    let steps = r["cosine_steps"].as_u64().unwrap();
    let p = DmgParams::code_defaults().hidden([h, h]).cosine_steps(steps).check().unwrap();
    let mut d = Dmg::new(p, &obs, &act, Device::Cpu, 0).unwrap();
    d.set_weights(&tensors(&r["before"])).unwrap();
    let l = delayed("dmg", &mut |b, e, _| d.update_with_noise(b, e).unwrap(), r);
    let w = compare_weights("dmg", d.weights(), r);
    eprintln!("dmg delayed + cosine: max rel loss error {l:.2e}, max abs weight error {w:.2e}");

    let r = &f["scas_delayed"];
    let p = ScasParams::default()
        .hidden([h, h])
        .cosine_steps(r["cosine_steps"].as_u64().unwrap())
        .dynamics(DynamicsParams::default().net(MlpConfig::new([h, h, h, h])))
        .check()
        .unwrap();
    let mut s = Scas::new(p, &obs, &act, Device::Cpu, 0).unwrap();
    s.set_weights(&tensors(&r["before"])).unwrap();
    s.freeze_dynamics();
    let l = delayed("scas", &mut |b, e, n| s.update_with_noise(b, e, n).unwrap(), r);
    let w = compare_weights("scas", s.weights(), r);
    eprintln!("scas delayed + cosine: max rel loss error {l:.2e}, max abs weight error {w:.2e}");
}
