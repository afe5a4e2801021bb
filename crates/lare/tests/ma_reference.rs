//! Multi-agent decoder steps against the official LaRe MPE code (`thu-rllab/LaRe`, `mpe/`):
//! multi-agent RRD (biased and unbiased, the reference's K-step draw passed in), the shared
//! factor decoder, and `hetero_tag`'s per-type decoders with and without the variance
//! regulariser. The fixture `tests/fixtures/ma_reference.json` is written by
//! `scripts/lare_ma_fixture.py`, which runs the reference's own train steps; here the same
//! initial weights are copied in and the loss, every gradient and the weights after one Adam
//! step are compared.

use std::collections::HashMap;

use lare::{
    AgentCreditDecoder, AgentTypes, CreditDraw, CreditParams, DecompositionLoss, MultiEpisode, MultiEpisodeBuffer,
    TeamTarget,
};
use ndarray::{Array2, Array3, Array4, ArrayD, Axis, IxDyn};
use rl_core::Params;
use serde_json::Value;
use tch::Tensor;

/// Largest error allowed relative to the largest magnitude of the compared tensor (f32 with a
/// different summation order).
const REL_TOL: f64 = 1e-6;

fn fixture() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ma_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn array(v: &Value) -> ArrayD<f32> {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    let data: Vec<f32> = v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap()
}

fn tensor(v: &Value) -> Tensor {
    let a = array(v);
    let shape: Vec<i64> = a.shape().iter().map(|&s| s as i64).collect();
    Tensor::from_slice(a.as_slice().unwrap()).reshape(shape)
}

fn lengths(f: &Value) -> Vec<usize> {
    f["meta"]["lengths"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect()
}

fn returns(v: &Value) -> Vec<f32> {
    array(v).iter().copied().collect()
}

/// Episodes from padded per-agent features `[B, N, H, d]` cut to their lengths.
fn buffer(features: &Array4<f32>, lens: &[usize], rets: &[f32]) -> MultiEpisodeBuffer {
    let (_, n, _, d) = features.dim();
    let mut buf = MultiEpisodeBuffer::new(100, d).unwrap();
    for (b, (&t, &r)) in lens.iter().zip(rets).enumerate() {
        let f: Array3<f32> = features.index_axis(Axis(0), b).slice_axis(Axis(1), (0..t).into()).to_owned();
        let ep = MultiEpisode {
            obs: f.clone(),
            actions: Array3::zeros((n, t, 1)),
            next_obs: f.clone(),
            dense_rewards: Array2::zeros((n, t)),
            team_return: r,
        };
        buf.push(ep, f).unwrap();
    }
    buf
}

/// Both types' layers of `v` (`{"predator": [...], "prey": [...]}`).
fn layers(v: &Value) -> Vec<(String, &Value)> {
    let mut l = named("decoder.predator", &v["predator"]);
    l.extend(named("decoder.prey", &v["prey"]));
    l
}

/// Our variable names of the reference's layers `layers` under `prefix`.
fn named<'a>(prefix: &str, layers: &'a Value) -> Vec<(String, &'a Value)> {
    let mut out = vec![];
    for (i, l) in layers.as_array().unwrap().iter().enumerate() {
        out.push((format!("{prefix}.{i}.weight"), &l["weight"]));
        out.push((format!("{prefix}.{i}.bias"), &l["bias"]));
    }
    out
}

fn vars(dec: &AgentCreditDecoder) -> HashMap<String, Tensor> {
    dec.var_store().variables()
}

fn set_weights(dec: &AgentCreditDecoder, layers: &[(String, &Value)]) {
    let v = vars(dec);
    assert_eq!(v.len(), layers.len(), "variables {:?}", v.keys().collect::<Vec<_>>());
    tch::no_grad(|| {
        for (name, w) in layers {
            let mut t = v[name].shallow_clone();
            t.copy_(&tensor(w));
        }
    });
}

/// max |ours − reference| / max |reference| over one tensor.
fn rel_err(ours: &Tensor, reference: &Tensor) -> f64 {
    assert_eq!(ours.size(), reference.size());
    let diff = (ours - reference).abs().max().double_value(&[]);
    diff / reference.abs().max().double_value(&[]).max(1e-30)
}

/// Largest relative error over `layers` of the variables (`grad = false`) or their gradients.
fn worst(dec: &AgentCreditDecoder, layers: &[(String, &Value)], grad: bool, what: &str) -> f64 {
    let v = vars(dec);
    let mut w = 0.0f64;
    for (name, r) in layers {
        let ours = if grad { v[name].grad() } else { v[name].shallow_clone() };
        let e = rel_err(&ours, &tensor(r));
        assert!(e <= REL_TOL, "{what} {name}: relative error {e:e}");
        w = w.max(e);
    }
    w
}

/// Weights after the step: compared as the change from the initial weights (a step of about
/// `lr` on weights of order 1 would hide errors in the step), relative to the largest change.
fn worst_step(dec: &AgentCreditDecoder, init: &[(String, &Value)], after: &[(String, &Value)], what: &str) -> f64 {
    let v = vars(dec);
    let mut w = 0.0f64;
    for ((name, i), (_, a)) in init.iter().zip(after) {
        let ours = &v[name].detach() - tensor(i);
        let reference = tensor(a) - tensor(i);
        let e = rel_err(&ours, &reference);
        assert!(e <= 1e-3, "{what} {name}: relative error of the step {e:e}");
        let abs = (&v[name].detach() - tensor(a)).abs().max().double_value(&[]);
        assert!(abs <= 1e-7, "{what} {name}: weight error {abs:e}");
        w = w.max(abs);
    }
    w
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

fn params(f: &Value) -> CreditParams {
    let hidden: Vec<i64> = f["meta"]["hidden"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect();
    CreditParams::default()
        .hidden(hidden)
        .lr(f["meta"]["lr"].as_f64().unwrap())
        .weight_decay(f["meta"]["weight_decay"].as_f64().unwrap())
        .target(TeamTarget::TeamSum)
        .batch_episodes(3)
}

#[test]
fn multi_agent_rrd_matches_the_reference_with_its_draw() {
    tch::set_num_threads(1);
    let f = fixture();
    let r = &f["rrd"];
    let feats = array(&r["next_obs"]).into_dimensionality::<ndarray::Ix4>().unwrap();
    let lens = lengths(&f);
    let buf = buffer(&feats, &lens, &returns(&r["episode_return"]));
    let steps: Vec<usize> = r["steps"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    let draw = CreditDraw { episodes: vec![0, 1, 2], steps };
    let horizon = f["meta"]["horizon"].as_u64().unwrap() as usize;
    let k = r["k"].as_u64().unwrap() as usize;
    let init = named("decoder", &r["init"]);
    for (case, loss) in [("biased", DecompositionLoss::Rrd), ("unbiased", DecompositionLoss::RrdUnbiased)] {
        let c = &r["cases"][case];
        let p = params(&f).loss(loss).rrd_k(k).horizon(Some(horizon)).check().unwrap();
        let mut dec = AgentCreditDecoder::new(p, feats.dim().3, tch::Device::Cpu).unwrap();
        set_weights(&dec, &init);
        let l = dec.loss(&buf, &draw).unwrap();
        l.loss.backward();
        let g = worst(&dec, &named("decoder", &c["grads"]), true, case);
        let m = dec.update_with(&buf, &draw).unwrap();
        let ours = m.get("reward_model/loss").unwrap();
        let want = c["loss"].as_f64().unwrap();
        assert!(rel(ours, want) <= 1e-6, "{case}: loss {ours} vs {want}");
        let w = worst_step(&dec, &init, &named("decoder", &c["after"]), case);
        println!(
            "rrd {case}: loss {ours} vs {want} (rel {:.1e}), grads rel {g:.1e}, weights abs {w:.1e}",
            rel(ours, want)
        );
    }
}

#[test]
fn shared_factor_decoder_matches_the_reference() {
    tch::set_num_threads(1);
    let f = fixture();
    let s = &f["shared"];
    let feats = array(&s["features"]).into_dimensionality::<ndarray::Ix4>().unwrap();
    let buf = buffer(&feats, &lengths(&f), &returns(&s["episode_return"]));
    let mut dec = AgentCreditDecoder::new(params(&f).check().unwrap(), feats.dim().3, tch::Device::Cpu).unwrap();
    let init = named("decoder", &s["init"]);
    set_weights(&dec, &init);
    let draw = CreditDraw { episodes: vec![0, 1, 2], steps: vec![] };
    dec.loss(&buf, &draw).unwrap().loss.backward();
    let g = worst(&dec, &named("decoder", &s["grads"]), true, "shared");
    let ours = dec.update_with(&buf, &draw).unwrap().get("reward_model/loss").unwrap();
    let want = s["loss"].as_f64().unwrap();
    assert!(rel(ours, want) <= 1e-6, "loss {ours} vs {want}");
    let w = worst_step(&dec, &init, &named("decoder", &s["after"]), "shared");
    println!("shared: loss {ours} vs {want} (rel {:.1e}), grads rel {g:.1e}, weights abs {w:.1e}", rel(ours, want));
}

#[test]
fn per_type_decoders_match_the_reference_hetero_tag() {
    tch::set_num_threads(1);
    let f = fixture();
    let t = &f["typed"];
    let n_advs = t["n_advs"].as_u64().unwrap() as usize;
    let dims: Vec<usize> = t["feature_dims"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    let pred = array(&t["features"]["predator"]).into_dimensionality::<ndarray::Ix4>().unwrap();
    let prey = array(&t["features"]["prey"]).into_dimensionality::<ndarray::Ix4>().unwrap();
    let (b, _, h, _) = pred.dim();
    let n = n_advs + prey.dim().1;
    // one [B, N, H, max_dim] array, predators' factors zero-padded to the prey's width
    let mut feats = Array4::<f32>::zeros((b, n, h, dims[1]));
    feats.slice_axis_mut(Axis(1), (0..n_advs).into()).slice_axis_mut(Axis(3), (0..dims[0]).into()).assign(&pred);
    feats.slice_axis_mut(Axis(1), (n_advs..n).into()).assign(&prey);
    let buf = buffer(&feats, &lengths(&f), &returns(&t["episode_return"]));
    let types = AgentTypes::hetero_tag(n_advs, dims[0], n - n_advs, dims[1]).unwrap();
    let draw = CreditDraw { episodes: vec![0, 1, 2], steps: vec![] };
    let init = layers(&t["init"]);
    for case in ["sum", "reg"] {
        let c = &t["cases"][case];
        let p = params(&f).variance_reg(c["alpha"].as_f64().unwrap()).check().unwrap();
        let mut dec = AgentCreditDecoder::with_types(p, types.clone(), tch::Device::Cpu).unwrap();
        set_weights(&dec, &init);
        dec.loss(&buf, &draw).unwrap().loss.backward();
        let g = worst(&dec, &layers(&c["grads"]), true, case);
        let ours = dec.update_with(&buf, &draw).unwrap().get("reward_model/loss").unwrap();
        let want = c["loss"].as_f64().unwrap();
        assert!(rel(ours, want) <= 1e-6, "{case}: loss {ours} vs {want}");
        // one Adam over both decoders
        let w = worst_step(&dec, &init, &layers(&c["after_one_optimizer"]), case);
        // the reference runner's Adam holds only the predator decoder: its predator step is the
        // same, its prey decoder is never stepped (ours is)
        let reference = &c["after_reference"];
        let pred_l = named("decoder.predator", &reference["predator"]);
        worst_step(&dec, &init[..pred_l.len()], &pred_l, case);
        assert_eq!(reference["prey"], t["init"]["prey"], "the reference leaves the prey decoder at its init");
        println!(
            "typed {case}: loss {ours} vs {want} (rel {:.1e}), grads rel {g:.1e}, weights abs {w:.1e}",
            rel(ours, want)
        );
    }
}
