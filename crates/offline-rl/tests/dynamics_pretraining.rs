//! SCAS's dynamics pretraining on caller batches is resumable: the Adam moments and step count
//! live in the checkpoint, so two calls on two halves (with a save and load between them)
//! equal one call on the whole list.

use offline_rl::algo::{DynamicsParams, Scas, ScasParams};
use rl_agents::{Agent, AgentError, Batch, BatchLearner};
use rl_core::{Params, Space};
use rl_nn::MlpConfig;
use tch::{Device, Kind, Tensor};

fn scas() -> Scas {
    let p = ScasParams::default()
        .hidden([8])
        .dynamics(DynamicsParams::default().net(MlpConfig::new([8, 8])).lr(1e-2))
        .check()
        .unwrap();
    Scas::new(p, &Space::symmetric(3, 10.0).unwrap(), &Space::symmetric(2, 1.0).unwrap(), Device::Cpu, 7).unwrap()
}

fn batches(n: usize) -> Vec<Batch> {
    let mut rng = rl_core::rng_from_seed(11);
    let o = (Kind::Float, Device::Cpu);
    (0..n)
        .map(|_| {
            let s = rl_nn::rand::standard_normal(&[8, 3], o, &mut rng).unwrap();
            let a = rl_nn::rand::uniform(&[8, 2], -1.0, 1.0, o, &mut rng).unwrap();
            let next = &s + a.narrow(1, 0, 1) * 0.5;
            Batch::from_tensors(s, a, Tensor::zeros([8], o), next, Tensor::zeros([8], o), None).unwrap()
        })
        .collect()
}

fn max_diff(a: &Scas, b: &Scas) -> f64 {
    a.weights()
        .iter()
        .zip(b.weights().iter())
        .map(|((ka, ta), (kb, tb))| {
            assert_eq!(ka, kb);
            (ta - tb).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

#[test]
fn two_halves_through_a_checkpoint_equal_one_call() {
    let data = batches(6);
    let mut whole = scas();
    let m = whole.pretrain_dynamics(&data).unwrap();
    assert_eq!(m.get("dynamics/steps"), Some(6.0));
    let mut first = scas();
    first.pretrain_dynamics(&data[..3]).unwrap();
    assert!(max_diff(&whole, &first) > 1e-4, "three more steps must move the model");
    let dir = tempfile::tempdir().unwrap();
    first.save(dir.path()).unwrap();
    let mut second = scas();
    second.load(dir.path()).unwrap();
    assert_eq!(second.dynamics_steps(), 3);
    second.pretrain_dynamics(&data[3..]).unwrap();
    assert_eq!(second.dynamics_steps(), 6);
    assert_eq!(max_diff(&whole, &second), 0.0);
    // and without the checkpoint
    first.pretrain_dynamics(&data[3..]).unwrap();
    assert_eq!(max_diff(&whole, &first), 0.0);
}

#[test]
fn frozen_model_takes_no_steps_and_bad_input_is_refused() {
    let data = batches(2);
    let mut s = scas();
    assert!(matches!(s.pretrain_dynamics(&[]), Err(AgentError::Empty { .. })));
    let o = (Kind::Float, Device::Cpu);
    let wide = Batch::from_tensors(
        Tensor::zeros([4, 5], o),
        Tensor::zeros([4, 2], o),
        Tensor::zeros([4], o),
        Tensor::zeros([4, 5], o),
        Tensor::zeros([4], o),
        None,
    )
    .unwrap();
    assert!(matches!(s.pretrain_dynamics(&[wide]), Err(AgentError::Shape { .. })));
    assert!(s.update(&data[0]).is_err(), "update needs a frozen model");
    s.pretrain_dynamics(&data).unwrap();
    s.freeze_dynamics();
    assert!(s.dynamics_ready());
    assert!(matches!(s.pretrain_dynamics(&data), Err(AgentError::Protocol(_))));
    s.update(&data[0]).unwrap();
    // a checkpoint of the frozen model loads frozen; one taken mid-pretraining loads trainable
    let mut mid = scas();
    mid.pretrain_dynamics(&data[..1]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    mid.save(dir.path()).unwrap();
    let frozen_dir = tempfile::tempdir().unwrap();
    s.save(frozen_dir.path()).unwrap();
    let mut t = scas();
    t.load(frozen_dir.path()).unwrap();
    assert!(t.dynamics_ready());
    t.load(dir.path()).unwrap();
    assert!(!t.dynamics_ready());
    t.pretrain_dynamics(&data[1..]).unwrap();
    assert_eq!(t.dynamics_steps(), 2);
}
