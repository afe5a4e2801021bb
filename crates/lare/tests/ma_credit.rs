//! Multi-agent credit beyond the reference comparison (`ma_reference.rs`): per-type decoders
//! learn what one shared decoder cannot, one type is the shared decoder, the default draw,
//! checkpoints of per-type decoders, and typed errors for bad input.

use lare::{
    AgentCreditDecoder, AgentTypes, CreditDraw, CreditParams, DecompositionLoss, LareError, MultiEpisode,
    MultiEpisodeBuffer, NativeEncoder, StateSource, TeamTarget,
};
use ndarray::{Array2, Array3};
use rand::Rng;
use rl_core::Params;
use tch::Device;

/// `n` agents, `t` steps, one observation `x ∈ [−1, 1]`; agent `i`'s hidden reward is
/// `sign[i] · x`.
fn episodes(count: usize, n: usize, t: usize, sign: &[f32], seed: u64) -> Vec<MultiEpisode> {
    let mut rng = rl_core::rng_from_seed(seed);
    (0..count)
        .map(|_| {
            let next = Array3::from_shape_fn((n, t, 1), |_| rng.random_range(-1.0f32..1.0));
            let dense = Array2::from_shape_fn((n, t), |(i, k)| sign[i] * next[[i, k, 0]]);
            MultiEpisode {
                obs: next.clone(),
                actions: Array3::zeros((n, t, 1)),
                next_obs: next,
                team_return: dense.sum(),
                dense_rewards: dense,
            }
        })
        .collect()
}

fn x_encoder() -> NativeEncoder {
    NativeEncoder::new(1, "x", |o, _, _, out| out[0] = o[0]).unwrap().with_state_source(StateSource::Next)
}

fn fill(eps: Vec<MultiEpisode>, width: usize) -> MultiEpisodeBuffer {
    let enc = x_encoder();
    let mut buf = MultiEpisodeBuffer::new(1000, width).unwrap();
    for ep in eps {
        let mut f = Array3::<f32>::zeros((ep.n_agents(), ep.len(), width));
        f.slice_axis_mut(ndarray::Axis(2), (0..1).into()).assign(&ep.featurize(&enc).unwrap());
        buf.push(ep, f).unwrap();
    }
    buf
}

fn mse(dec: &AgentCreditDecoder, buf: &MultiEpisodeBuffer) -> f32 {
    let (ep, f) = buf.get(0).unwrap();
    (&dec.relabel(f).unwrap() - &ep.dense_rewards).mapv(|e| e * e).mean().unwrap()
}

fn centred_mse(dec: &AgentCreditDecoder, buf: &MultiEpisodeBuffer) -> f32 {
    let (ep, f) = buf.get(0).unwrap();
    let centre = |a: Array2<f32>| {
        let m = a.mean_axis(ndarray::Axis(1)).unwrap().insert_axis(ndarray::Axis(1));
        &a - &m
    };
    (centre(dec.relabel(f).unwrap()) - centre(ep.dense_rewards.clone())).mapv(|e| e * e).mean().unwrap()
}

#[test]
fn per_type_decoders_learn_what_a_shared_decoder_cannot() {
    tch::set_num_threads(1);
    // two predators rewarded +x, one prey rewarded −x: one shared function of x cannot be both
    let buf = fill(episodes(200, 3, 5, &[1.0, 1.0, -1.0], 0), 1);
    let p = CreditParams::default().hidden([16]).lr(1e-2).batch_episodes(32).target(TeamTarget::TeamSum);
    let types = AgentTypes::hetero_tag(2, 1, 1, 1).unwrap();
    let mut typed = AgentCreditDecoder::with_types(p.clone().check().unwrap(), types, Device::Cpu).unwrap();
    let mut shared = AgentCreditDecoder::new(p.check().unwrap(), 1, Device::Cpu).unwrap();
    for _ in 0..300 {
        typed.update(&buf).unwrap();
        shared.update(&buf).unwrap();
    }
    // the team sum fixes each type's reward only up to offsets that cancel in the sum (+c for
    // both predators, −2c for the prey), so compare rewards centred per agent
    let (t, s) = (centred_mse(&typed, &buf), centred_mse(&shared, &buf));
    println!("per-agent centred reward MSE: per type {t}, shared {s}");
    assert!(t < 0.01, "per-type decoders: MSE {t}");
    assert!(s > 0.1, "a shared decoder cannot split +x / −x: MSE {s}");
    assert_eq!(typed.updates(), 300);
}

fn rrd_fit(loss: DecompositionLoss) -> f32 {
    tch::set_num_threads(1);
    let buf = fill(episodes(200, 3, 8, &[1.0, 1.0, 1.0], 1), 1);
    let p = CreditParams::default()
        .hidden([16])
        .lr(1e-2)
        .batch_episodes(32)
        .target(TeamTarget::TeamSum)
        .loss(loss)
        .rrd_k(4);
    let mut dec = AgentCreditDecoder::new(p.check().unwrap(), 1, Device::Cpu).unwrap();
    for _ in 0..300 {
        let m = dec.update(&buf).unwrap();
        assert_eq!(m.get("reward_model/variance_correction").is_some(), loss == DecompositionLoss::RrdUnbiased);
    }
    mse(&dec, &buf)
}

#[test]
fn multi_agent_rrd_shrinks_rewards_and_its_correction_is_too_small_to_undo_it() {
    // agents rewarded x ∈ [−1, 1] (variance 1/3), K = 4 of T = 8
    let (sum, biased, unbiased) =
        (rrd_fit(DecompositionLoss::Sum), rrd_fit(DecompositionLoss::Rrd), rrd_fit(DecompositionLoss::RrdUnbiased));
    println!("per-agent reward MSE: sum {sum}, RRD biased {biased}, RRD unbiased {unbiased}");
    assert!(sum < 0.02, "sum regression: MSE {sum}");
    // RRD's loss also penalises the sampling variance of the K-step estimate, pulling r̂ towards
    // each episode's mean; LaRe's MPE correction (per-agent variance of the H/K-scaled rewards
    // times (1 − K/H)/K, averaged over agents) is about 1/(N·K²) of that variance, so the
    // "unbiased" form shrinks almost as much (1/(N·K²) for independent agents of equal variance)
    assert!(biased > 2.0 * sum && unbiased > 2.0 * sum, "biased {biased}, unbiased {unbiased}, sum {sum}");
    assert!((unbiased - biased).abs() < 0.3 * biased, "biased {biased}, unbiased {unbiased}");
}

#[test]
fn one_type_is_the_shared_decoder() {
    let buf = fill(episodes(6, 3, 4, &[1.0, 1.0, -1.0], 2), 1);
    let p = CreditParams::default().hidden([8]).batch_episodes(4);
    let mut a = AgentCreditDecoder::new(p.clone().check().unwrap(), 1, Device::Cpu).unwrap();
    let types = AgentTypes::homogeneous(3, 1).unwrap();
    let mut b = AgentCreditDecoder::with_types(p.check().unwrap(), types, Device::Cpu).unwrap();
    for _ in 0..3 {
        assert_eq!(a.update(&buf).unwrap(), b.update(&buf).unwrap());
    }
    let f = &buf.get(1).unwrap().1;
    assert_eq!(a.relabel(f).unwrap(), b.relabel(f).unwrap());
    // ...but it knows the team: another number of agents is an error
    assert!(matches!(b.relabel(&Array3::zeros((2, 4, 1))), Err(LareError::Shape { .. })));
    assert!(a.relabel(&Array3::zeros((2, 4, 1))).is_ok());
}

#[test]
fn default_draw_is_seeded_and_update_is_draw_then_update_with() {
    let buf = fill(episodes(5, 2, 6, &[1.0, 1.0], 3), 1);
    let p = CreditParams::default().hidden([8]).batch_episodes(4).loss(DecompositionLoss::Rrd).rrd_k(3).seed(7);
    let mut a = AgentCreditDecoder::new(p.clone().check().unwrap(), 1, Device::Cpu).unwrap();
    let mut b = AgentCreditDecoder::new(p.check().unwrap(), 1, Device::Cpu).unwrap();
    for _ in 0..3 {
        let d = b.draw(&buf).unwrap();
        assert_eq!(d.episodes.len(), 4);
        assert!(d.episodes.iter().all(|&i| i < 5));
        assert_eq!(d.steps.len(), 3);
        let mut s = d.steps.clone();
        s.sort_unstable();
        s.dedup();
        assert!(s.len() == 3 && s.iter().all(|&t| t < 6), "{:?}", d.steps);
        assert_eq!(a.update(&buf).unwrap(), b.update_with(&buf, &d).unwrap());
    }
    let sum = CreditParams::default().hidden([8]).batch_episodes(2).check().unwrap();
    let d = AgentCreditDecoder::new(sum, 1, Device::Cpu).unwrap().draw(&buf).unwrap();
    assert!(d.steps.is_empty());
}

#[test]
fn per_type_checkpoint_resumes_bit_identically() {
    let buf = fill(episodes(6, 3, 4, &[1.0, 1.0, -1.0], 4), 2);
    let p = CreditParams::default().hidden([8]).batch_episodes(3);
    let types = AgentTypes::new(&[("scout", 1), ("carrier", 2)], &["carrier", "scout", "carrier"]).unwrap();
    let mut a = AgentCreditDecoder::with_types(p.clone().check().unwrap(), types.clone(), Device::Cpu).unwrap();
    a.update(&buf).unwrap();
    let dir = tempfile::tempdir().unwrap();
    a.save(dir.path().join("credit")).unwrap();
    let mut b = AgentCreditDecoder::with_types(p.clone().check().unwrap(), types.clone(), Device::Cpu).unwrap();
    b.load(dir.path().join("credit")).unwrap();
    for _ in 0..3 {
        assert_eq!(a.update(&buf).unwrap(), b.update(&buf).unwrap());
    }
    let f = &buf.get(0).unwrap().1;
    assert_eq!(a.relabel(f).unwrap(), b.relabel(f).unwrap());
    let other = AgentTypes::new(&[("scout", 1), ("carrier", 2)], &["scout", "carrier", "carrier"]).unwrap();
    let mut c = AgentCreditDecoder::with_types(p.check().unwrap(), other, Device::Cpu).unwrap();
    assert!(matches!(c.load(dir.path().join("credit")), Err(LareError::Corrupt { .. })));
    let names: Vec<String> = a.var_store().variables().into_keys().filter(|k| k.ends_with("0.weight")).collect();
    assert!(names.contains(&"decoder.scout.0.weight".to_string()), "{names:?}");
}

#[test]
fn featurize_typed_pads_each_type_to_the_widest() {
    let types = AgentTypes::hetero_tag(1, 1, 1, 2).unwrap();
    let one = x_encoder();
    let two = NativeEncoder::new(2, "x,2x", |o, _, _, out| {
        out[0] = o[0];
        out[1] = 2.0 * o[0];
    })
    .unwrap();
    let ep = episodes(1, 2, 3, &[1.0, 1.0], 5).remove(0);
    let f = ep.featurize_typed(&[&one, &two], &types).unwrap();
    assert_eq!(f.dim(), (2, 3, 2));
    for t in 0..3 {
        assert_eq!(f[[0, t, 1]], 0.0, "predator padding");
        assert_eq!(f[[1, t, 1]], 2.0 * f[[1, t, 0]]);
    }
    assert!(matches!(ep.featurize_typed(&[&one], &types), Err(LareError::Shape { .. })));
    assert!(matches!(ep.featurize_typed(&[&two, &one], &types), Err(LareError::Shape { .. })));
    let three = AgentTypes::hetero_tag(2, 1, 1, 2).unwrap();
    assert!(matches!(ep.featurize_typed(&[&one, &two], &three), Err(LareError::Shape { .. })));
}

#[test]
fn bad_types_params_and_draws_are_typed_errors() {
    // agent types
    let unknown = AgentTypes::new(&[("predator", 2)], &["predator", "prey"]).unwrap_err();
    assert!(matches!(&unknown, LareError::UnknownId { id, .. } if id == "prey"), "{unknown}");
    assert!(matches!(AgentTypes::new(&[("a", 1), ("a", 1)], &["a"]), Err(LareError::InvalidParameter { .. })));
    assert!(matches!(AgentTypes::new(&[("a", 0)], &["a"]), Err(LareError::InvalidParameter { .. })));
    assert!(matches!(AgentTypes::new(&[("a.b", 1)], &["a.b"]), Err(LareError::InvalidParameter { .. })));
    assert!(matches!(AgentTypes::new(&[("a", 1), ("b", 1)], &["a"]), Err(LareError::InvalidParameter { .. })));
    assert!(matches!(AgentTypes::new(&[], &["a"]), Err(LareError::Empty { .. })));
    assert!(matches!(AgentTypes::new::<&str>(&[("a", 1)], &[]), Err(LareError::Empty { .. })));
    assert!(AgentTypes::hetero_tag(0, 1, 1, 1).is_err());
    let t = AgentTypes::hetero_tag(2, 3, 1, 4).unwrap();
    assert_eq!((t.n_types(), t.n_agents(), t.max_feature_dim(), t.type_of(2), t.type_of(3)), (2, 3, 4, Some(1), None));
    assert_eq!(t.index_of("prey").unwrap(), 1);
    assert!(matches!(t.index_of("wolf"), Err(LareError::UnknownId { .. })));
    // parameters
    let rrd = CreditParams::default().loss(DecompositionLoss::Rrd);
    assert!(rrd.clone().rrd_k(0).check().is_err());
    assert!(rrd.clone().rrd_k(1).check().is_ok());
    assert!(rrd.clone().loss(DecompositionLoss::RrdUnbiased).rrd_k(1).check().is_err());
    assert!(rrd.clone().horizon(Some(0)).check().is_err());
    assert!(rrd.clone().rrd_k(5).horizon(Some(4)).check().is_err());
    assert!(rrd.clone().variance_reg(0.5).check().is_err());
    assert!(CreditParams::default().rrd_k(50).horizon(Some(25)).check().is_ok(), "K is unused by the sum loss");
    // draws
    let buf = fill(episodes(3, 3, 4, &[1.0, 1.0, 1.0], 6), 1);
    let p = CreditParams::default().hidden([4]).batch_episodes(2);
    let mut sum = AgentCreditDecoder::new(p.clone().check().unwrap(), 1, Device::Cpu).unwrap();
    let empty = CreditDraw { episodes: vec![], steps: vec![] };
    assert!(matches!(sum.update_with(&buf, &empty), Err(LareError::Empty { .. })));
    let far = CreditDraw { episodes: vec![0, 3], steps: vec![] };
    assert!(matches!(sum.update_with(&buf, &far), Err(LareError::InvalidParameter { .. })));
    let steps = CreditDraw { episodes: vec![0], steps: vec![1] };
    assert!(matches!(sum.update_with(&buf, &steps), Err(LareError::InvalidParameter { .. })));
    assert!(matches!(sum.update(&MultiEpisodeBuffer::new(1, 1).unwrap()), Err(LareError::Empty { .. })));
    assert!(matches!(sum.update(&fill(episodes(1, 3, 4, &[1.0; 3], 0), 2)), Err(LareError::Shape { .. })));
    let mut r =
        AgentCreditDecoder::new(p.clone().loss(DecompositionLoss::Rrd).rrd_k(2).check().unwrap(), 1, Device::Cpu)
            .unwrap();
    for bad in [vec![0], vec![1, 1], vec![0, 4], vec![0, 1, 2]] {
        let d = CreditDraw { episodes: vec![0, 1], steps: bad.clone() };
        assert!(matches!(r.update_with(&buf, &d), Err(LareError::InvalidParameter { .. })), "{bad:?}");
    }
    assert!(r.update_with(&buf, &CreditDraw { episodes: vec![0, 1], steps: vec![3, 0] }).is_ok());
    let mut short = AgentCreditDecoder::new(
        p.clone().loss(DecompositionLoss::Rrd).rrd_k(2).horizon(Some(3)).check().unwrap(),
        1,
        Device::Cpu,
    )
    .unwrap();
    let d = CreditDraw { episodes: vec![0], steps: vec![0, 1] };
    assert!(matches!(short.update_with(&buf, &d), Err(LareError::InvalidParameter { .. })), "episode longer than H");
    let mut big_k =
        AgentCreditDecoder::new(p.clone().loss(DecompositionLoss::Rrd).rrd_k(5).check().unwrap(), 1, Device::Cpu)
            .unwrap();
    assert!(matches!(big_k.draw(&buf), Err(LareError::InvalidParameter { .. })), "K > the batch's horizon");
    // per type: another team size
    let types = AgentTypes::hetero_tag(1, 1, 1, 1).unwrap();
    let mut typed = AgentCreditDecoder::with_types(p.check().unwrap(), types, Device::Cpu).unwrap();
    assert!(matches!(typed.update(&buf), Err(LareError::Shape { .. })));
    assert!(matches!(typed.relabel(&Array3::zeros((3, 2, 1))), Err(LareError::Shape { .. })));
    let nan = Array3::from_elem((2, 2, 1), f32::NAN);
    assert!(matches!(typed.relabel(&nan), Err(LareError::NonFinite { .. })));
}

/// `E_I[L_rrd] − L_sum` (the sampling variance of the K-step estimate) and `E_I[L_rrd −
/// L_rrd_unbiased]` (the reference's correction), averaged over all `C(H, K)` draws of one
/// episode of `n` agents.
fn variance_and_correction(n: usize, h: usize, k: usize) -> (f64, f64) {
    let buf = fill(episodes(1, n, h, &vec![1.0; n], 9), 1);
    let base = CreditParams::default().hidden([8]).batch_episodes(1).target(TeamTarget::TeamSum).rrd_k(k);
    let dec = |loss| AgentCreditDecoder::new(base.clone().loss(loss).check().unwrap(), 1, Device::Cpu).unwrap();
    let (sum, rrd, unb) =
        (dec(DecompositionLoss::Sum), dec(DecompositionLoss::Rrd), dec(DecompositionLoss::RrdUnbiased));
    let value = |d: &AgentCreditDecoder, steps: Vec<usize>| {
        d.loss(&buf, &CreditDraw { episodes: vec![0], steps }).unwrap().loss.double_value(&[])
    };
    let full = value(&sum, vec![]);
    let subsets: Vec<Vec<usize>> = (0..1usize << h)
        .filter(|m| m.count_ones() as usize == k)
        .map(|m| (0..h).filter(|t| m >> t & 1 == 1).collect())
        .collect();
    let (mut var, mut corr) = (0.0, 0.0);
    for s in &subsets {
        let (b, u) = (value(&rrd, s.clone()), value(&unb, s.clone()));
        var += b - full;
        corr += b - u;
    }
    (var / subsets.len() as f64, corr / subsets.len() as f64)
}

#[test]
fn the_reference_rrd_correction_is_a_fraction_of_the_sampling_variance() {
    // same initial weights for the three decoders (same seed); one agent: exactly 1/K²
    let (h, k) = (6, 3);
    let (var, corr) = variance_and_correction(1, h, k);
    let ratio = corr / var;
    println!("one agent: sampling variance {var}, correction {corr}, ratio {ratio} (1/K² = {})", 1.0 / (k * k) as f64);
    assert!((ratio - 1.0 / (k * k) as f64).abs() < 1e-4, "ratio {ratio}");
    let (var, corr) = variance_and_correction(3, h, k);
    println!("three agents: sampling variance {var}, correction {corr}, ratio {}", corr / var);
    assert!(corr / var < 0.5 / (k * k) as f64, "ratio {}", corr / var);
}
