//! The algorithms through their public API: offline RL beats behaviour cloning on a dataset of
//! random actions, runs resume bit for bit, models are reproducible across threads, bad
//! parameters name their field.

use ndarray::{Array1, ArrayView1};
use offline_rl::algo::{AlgoKind, AlgorithmParams, DatasetKind, OfflineAlgorithm};
use offline_rl::train::{FitParams, OfflineData, Preprocess, Trainer};
use offline_rl::{Dataset, DatasetInfo, OfflineError};
use rand::{Rng, RngCore};
use rl_agents::{BatchPolicy, Evaluator};
use rl_core::{ActMode, Env, MemorySink, Params, Space, Step, Transitions};

/// A contextual bandit: `s ~ U(-1, 1)²`, one action in `[-1, 1]`, reward `1 − (a − s₀)²`, every
/// episode one step long (terminal). Optimal return 1; the mean action of uniform data (0)
/// earns `2/3` on average.
#[derive(Debug)]
struct Reach {
    obs: Space,
    act: Space,
    s: [f32; 2],
}

impl Reach {
    fn new() -> Self {
        Self { obs: Space::symmetric(2, 1.0).unwrap(), act: Space::symmetric(1, 1.0).unwrap(), s: [0.0; 2] }
    }
}

impl Env for Reach {
    fn observation_space(&self) -> &Space {
        &self.obs
    }
    fn action_space(&self) -> &Space {
        &self.act
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        self.s = [rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)];
        Ok(Array1::from(self.s.to_vec()))
    }
    fn step(&mut self, a: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        let r = 1.0 - (a[0].clamp(-1.0, 1.0) - self.s[0]).powi(2);
        Ok(Step::new(Array1::from(self.s.to_vec()), r, true, false))
    }
}

fn reach_dataset(n: usize, seed: u64) -> Dataset {
    let mut rng = rl_core::rng_from_seed(seed);
    let mut env = Reach::new();
    let mut t = Transitions::empty(2, 1);
    for _ in 0..n {
        let o = env.reset(&mut rng).unwrap();
        let a = Array1::from(vec![rng.random_range(-1.0f32..1.0)]);
        let s = env.step(a.view()).unwrap();
        t.push(o.view(), a.view(), s.reward, s.obs.view(), true, false).unwrap();
    }
    let info =
        DatasetInfo { name: "reach-random".into(), ref_min: Some(0.0), ref_max: Some(1.0), ..Default::default() };
    Dataset::new(t, info).unwrap()
}

fn params(kind: AlgoKind, hidden: i64) -> AlgorithmParams {
    let p = AlgorithmParams::defaults(kind, DatasetKind::Random).hidden(vec![hidden, hidden]);
    let mut v = serde_json::to_value(&p).unwrap();
    // one-step episodes: learning rates of the toy, not the papers'
    for k in ["actor_lr", "critic_lr", "value_lr", "lr"] {
        if v.get(k).is_some() {
            v[k] = serde_json::json!(1e-3);
        }
    }
    if v.get("cosine_steps").is_some() {
        v["cosine_steps"] = serde_json::json!(0);
    }
    if kind == AlgoKind::Scas {
        v["dynamics"]["steps"] = serde_json::json!(200);
        v["dynamics"]["net"]["hidden"] = serde_json::json!([hidden, hidden]);
    }
    serde_json::from_value(v).unwrap()
}

fn train(kind: AlgoKind, data: &OfflineData, steps: u64, seed: u64) -> (Box<dyn OfflineAlgorithm>, f64) {
    let env = Reach::new();
    let mut algo = params(kind, 64).build(env.observation_space(), env.action_space(), tch::Device::Cpu, seed).unwrap();
    let mut eval = Evaluator::new(200, 77, |_| Ok(Reach::new())).unwrap();
    let fit = FitParams::default().steps(steps).batch_size(128).eval_every(0).progress(false).check().unwrap();
    let s =
        Trainer::new(fit, seed).run(algo.as_mut(), data, Some(&mut eval), &mut MemorySink::default(), None).unwrap();
    let last = s.last().unwrap().returns.mean_return;
    (algo, last)
}

#[test]
fn offline_rl_beats_behaviour_cloning_on_random_data() {
    tch::set_num_threads(1);
    let d = reach_dataset(2000, 1);
    let data = OfflineData::new(&d, &Preprocess { normalize_states: false, ..Preprocess::default() }).unwrap();
    let (_, bc) = train(AlgoKind::Bc, &data, 600, 0);
    assert!((bc - 2.0 / 3.0).abs() < 0.1, "BC should imitate the uniform mean: {bc}");
    for kind in [AlgoKind::Td3Bc, AlgoKind::Iql, AlgoKind::Dmg, AlgoKind::Scas] {
        let (_, r) = train(kind, &data, 600, 0);
        assert!(r > bc + 0.1, "{} {r:.3} vs BC {bc:.3}", kind.as_str());
    }
}

fn policy_bits(p: &dyn BatchPolicy) -> Vec<u32> {
    let obs = ndarray::array![[0.3f32, -0.7], [-0.9, 0.1], [0.0, 0.5]];
    p.act_batch(obs.view(), ActMode::Deterministic, &mut rl_core::rng_from_seed(0))
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

#[test]
fn runs_resume_bit_for_bit() {
    let d = reach_dataset(300, 2);
    let data = OfflineData::new(&d, &Preprocess::default()).unwrap();
    let env = Reach::new();
    for kind in AlgoKind::ALL {
        let p = params(kind, 16);
        let fit =
            |steps| FitParams::default().steps(steps).batch_size(32).eval_every(3).progress(false).check().unwrap();
        let make = || p.build(env.observation_space(), env.action_space(), tch::Device::Cpu, 5).unwrap();
        let mut eval = Evaluator::new(4, 9, |_| Ok(Reach::new())).unwrap();
        // straight through
        let mut a = make();
        let full =
            Trainer::new(fit(8), 3).run(a.as_mut(), &data, Some(&mut eval), &mut MemorySink::default(), None).unwrap();
        // 6 updates, checkpoint, fresh objects, 2 more
        let tmp = tempfile::tempdir().unwrap();
        let mut b = make();
        let mut t1 = Trainer::new(fit(6), 3);
        t1.run(b.as_mut(), &data, Some(&mut eval), &mut MemorySink::default(), Some(tmp.path())).unwrap();
        let mut c = p.build(env.observation_space(), env.action_space(), tch::Device::Cpu, 99).unwrap();
        let mut t2 = Trainer::new(fit(8), 42);
        t2.load(&tmp.path().join("checkpoint"), c.as_mut(), &data).unwrap();
        let resumed = t2.run(c.as_mut(), &data, Some(&mut eval), &mut MemorySink::default(), None).unwrap();
        assert_eq!(policy_bits(a.policy()), policy_bits(c.policy()), "{}", kind.as_str());
        assert_eq!(full.evaluations, resumed.evaluations, "{}", kind.as_str());
        // the same checkpoint does not load into another algorithm or dataset
        let other = if kind == AlgoKind::Bc { AlgoKind::Td3Bc } else { AlgoKind::Bc };
        let mut wrong =
            params(other, 16).build(env.observation_space(), env.action_space(), tch::Device::Cpu, 0).unwrap();
        assert!(Trainer::new(fit(8), 0).load(&tmp.path().join("checkpoint"), wrong.as_mut(), &data).is_err());
        let d2 = reach_dataset(300, 3);
        let data2 = OfflineData::new(&d2, &Preprocess::default()).unwrap();
        let mut again = make();
        let e = Trainer::new(fit(8), 0).load(&tmp.path().join("checkpoint"), again.as_mut(), &data2).unwrap_err();
        assert!(matches!(e, OfflineError::Corrupt { .. }), "{e}");
    }
}

#[test]
fn same_seed_same_model_in_threads() {
    let d = reach_dataset(200, 4);
    let run = move |kind: AlgoKind| {
        let d = d.clone();
        std::thread::spawn(move || {
            let data = OfflineData::new(&d, &Preprocess::default()).unwrap();
            let env = Reach::new();
            let mut a =
                params(kind, 16).build(env.observation_space(), env.action_space(), tch::Device::Cpu, 11).unwrap();
            let fit = FitParams::default().steps(4).batch_size(16).eval_every(0).progress(false).check().unwrap();
            Trainer::new(fit, 1).run::<Reach>(a.as_mut(), &data, None, &mut MemorySink::default(), None).unwrap();
            policy_bits(a.policy())
        })
    };
    for kind in AlgoKind::ALL {
        let (x, y) = (run(kind), run(kind));
        assert_eq!(x.join().unwrap(), y.join().unwrap(), "{}", kind.as_str());
    }
}

#[test]
fn scas_needs_its_dynamics_model() {
    let env = Reach::new();
    let mut s =
        params(AlgoKind::Scas, 8).build(env.observation_space(), env.action_space(), tch::Device::Cpu, 0).unwrap();
    let d = reach_dataset(50, 0);
    let b = rl_agents::Batch::from_transitions(d.transitions(), tch::Device::Cpu).unwrap();
    assert!(matches!(s.update(&b), Err(rl_agents::AgentError::Protocol(_))));
}
