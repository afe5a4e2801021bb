//! Resume equivalence (conventions §4): train N steps; or train k, checkpoint the model, the
//! optimiser and the data generator into a directory, load into a fresh model and optimiser,
//! train N − k. The parameters and the optimiser state are equal bit for bit (CPU).
use std::collections::BTreeMap;

use rl_core::{Params, SeededRng};
use rl_nn::checkpoint::{self, LoadMode};
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{Mlp, MlpConfig, RlNnError};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind};

const CPU: (Kind, Device) = (Kind::Float, Device::Cpu);

struct Learner {
    vs: VarStore,
    net: Mlp,
    opt: Adam,
    data_rng: SeededRng,
    step: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct LearnerState {
    data_rng: SeededRng,
    step: u64,
    optim: AdamParams,
}

fn params() -> AdamParams {
    AdamParams::adamw().lr(3e-3).amsgrad(true).max_grad_norm(Some(0.5))
}

impl Learner {
    fn new(init_seed: u64) -> Self {
        let vs = VarStore::new(Device::Cpu);
        let cfg = MlpConfig::new([16, 16]).layer_norm(true).check().unwrap();
        let net = Mlp::new(&vs.root(), 4, 2, &cfg, &mut rl_core::rng_from_seed(init_seed)).unwrap();
        let opt = Adam::for_var_store(params().check().unwrap(), &vs).unwrap();
        Self { vs, net, opt, data_rng: rl_core::rng_from_seed(100), step: 0 }
    }

    fn train_step(&mut self) {
        let x = rl_nn::rand::standard_normal(&[32, 4], CPU, &mut self.data_rng).unwrap();
        let target = x.narrow(1, 0, 2).sin() * 3.0;
        let loss = (self.net.f_forward(&x).unwrap() - target).square().mean(Kind::Float);
        let info = self.opt.backward_step(&loss).unwrap();
        assert!(info.grad_norm.is_some());
        self.step += 1;
        if self.step == 2 {
            self.opt.set_lr(1e-3).unwrap(); // a schedule: the learning rate is state too
        }
    }

    fn save(&self, dir: &std::path::Path) {
        let mut tensors = checkpoint::var_store_tensors(&self.vs, "model.");
        tensors.extend(self.opt.state_tensors("optim.").unwrap());
        let state = LearnerState { data_rng: self.data_rng.clone(), step: self.step, optim: self.opt.params().clone() };
        checkpoint::save_dir(dir, "test_learner", 1, &state, &tensors).unwrap();
    }

    fn load(&mut self, dir: &std::path::Path) -> Result<(), RlNnError> {
        let ck = checkpoint::load_dir::<LearnerState>(dir, "test_learner", 1)?;
        // check everything, then apply: a failed load changes nothing
        checkpoint::check_map(&self.vs, &ck.tensors, "model.", LoadMode::Strict, &ck.path)?;
        self.opt.check_state_tensors(&ck.tensors, "optim.", LoadMode::Strict, &ck.path)?;
        checkpoint::load_map(&self.vs, &ck.tensors, "model.", LoadMode::Strict, &ck.path)?;
        self.opt.load_state_tensors(&ck.tensors, "optim.", LoadMode::Strict, &ck.path)?;
        self.opt.set_lr(ck.state.optim.lr)?;
        self.data_rng = ck.state.data_rng;
        self.step = ck.state.step;
        Ok(())
    }

    fn snapshot(&self) -> BTreeMap<String, Vec<u32>> {
        let mut all = checkpoint::var_store_tensors(&self.vs, "model.");
        all.extend(self.opt.state_tensors("optim.").unwrap());
        all.into_iter()
            .map(|(n, t)| {
                (
                    n,
                    Vec::<f64>::try_from(&t.to_kind(Kind::Double).view([-1]))
                        .unwrap()
                        .iter()
                        .map(|x| (*x as f32).to_bits())
                        .collect(),
                )
            })
            .collect()
    }
}

#[test]
fn train_save_load_continue_equals_uninterrupted_training() {
    const N: usize = 7;
    const K: usize = 3;
    let mut straight = Learner::new(0);
    for _ in 0..N {
        straight.train_step();
    }

    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("learner");
    let mut first = Learner::new(0);
    for _ in 0..K {
        first.train_step();
    }
    first.save(&ckpt);
    let mut resumed = Learner::new(12345); // different weights until loaded
    resumed.load(&ckpt).unwrap();
    assert_eq!(resumed.opt.lr(), 1e-3);
    for _ in K..N {
        resumed.train_step();
    }
    assert_eq!(resumed.step, N as u64);
    let (a, b) = (straight.snapshot(), resumed.snapshot());
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, va) in &a {
        assert_eq!(va, &b[name], "{name} differs after resuming");
    }
    assert_eq!(resumed.opt.steps(), N as u64);
}

#[test]
fn a_mismatched_checkpoint_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("learner");
    let mut a = Learner::new(0);
    a.train_step();
    // drop one optimiser tensor: the model must not be half-loaded
    let mut tensors = checkpoint::var_store_tensors(&a.vs, "model.");
    tensors.extend(a.opt.state_tensors("optim.").unwrap().into_iter().filter(|(n, _)| !n.ends_with("exp_avg_sq")));
    let state = LearnerState { data_rng: a.data_rng.clone(), step: 1, optim: a.opt.params().clone() };
    checkpoint::save_dir(&ckpt, "test_learner", 1, &state, &tensors).unwrap();
    let mut b = Learner::new(9);
    let before = b.snapshot();
    assert!(matches!(b.load(&ckpt), Err(RlNnError::MissingTensor { .. })));
    assert_eq!(before, b.snapshot());
}

#[test]
fn adam_save_and_load_directories() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Learner::new(0);
    for _ in 0..3 {
        a.train_step();
    }
    a.opt.save(dir.path().join("adam")).unwrap();
    let mut b = Learner::new(0);
    b.opt.load(dir.path().join("adam")).unwrap();
    assert_eq!(b.opt.steps(), 3);
    assert_eq!(b.opt.lr(), 1e-3);
    for ((na, ta), (nb, tb)) in a.opt.state_tensors("").unwrap().iter().zip(b.opt.state_tensors("").unwrap().iter()) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{na}");
    }
    // another parameter set is refused, unchanged
    let vs = VarStore::new(Device::Cpu);
    let _n = Mlp::new(
        &vs.root(),
        5,
        2,
        &MlpConfig::new([16, 16]).layer_norm(true).check().unwrap(),
        &mut rl_core::rng_from_seed(0),
    )
    .unwrap();
    let mut other = Adam::for_var_store(params().check().unwrap(), &vs).unwrap();
    assert!(matches!(other.load(dir.path().join("adam")), Err(RlNnError::TensorShape { .. })));
    assert_eq!(other.steps(), 0);
    let vs2 = VarStore::new(Device::Cpu);
    let _t = vs2.root().zeros("w", &[3]);
    let mut named = Adam::for_var_store(params().check().unwrap(), &vs2).unwrap();
    assert!(matches!(named.load(dir.path().join("adam")), Err(RlNnError::StoreMismatch(_))));
    let mut plain = Adam::for_var_store(AdamParams::default().check().unwrap(), &a.vs).unwrap();
    assert!(matches!(plain.load(dir.path().join("adam")), Err(RlNnError::InvalidParameter { .. })));
}
