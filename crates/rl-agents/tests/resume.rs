//! Resume equivalence: training N steps equals training k, checkpointing agent (weights,
//! targets, Adam moments, generator), buffer/rollout and environments, loading into fresh
//! objects built from another seed, and training N − k — every weight bit for bit.

use std::path::Path;

use rl_agents::{
    load_run, save_run, Agent, BatchLearner, OffPolicy, OffPolicyParams, OnlineAgent, OnlineTrainer, Ppo, PpoParams,
    ReplayBufferParams, Sac, SacParams, Td3, Td3Params,
};
use rl_core::{Env, Params};
use rl_envs::classic::{CartPole, CartPoleParams, Pendulum, PendulumParams};
use rl_envs::wrappers::VecEnv;
use tch::nn::VarStore;
use tch::Device;

fn pendulums(seed: u64) -> OnlineTrainer<Pendulum> {
    let envs = VecEnv::from_fn(2, seed, |_| Pendulum::new(PendulumParams::default().check()?)).unwrap();
    OnlineTrainer::new(envs).unwrap()
}

fn sched() -> OffPolicyParams {
    OffPolicyParams::default()
        .random_steps(40)
        .learning_starts(40)
        .batch_size(16)
        .buffer(ReplayBufferParams::default().capacity(10_000).n_step(3))
}

fn steps<E: Env>(agent: &mut dyn OnlineAgent, trainer: &mut OnlineTrainer<E>, n: usize) {
    for _ in 0..n {
        trainer.step(agent).unwrap();
    }
}

fn same_stores(a: &[&VarStore], b: &[&VarStore]) {
    for (x, y) in a.iter().zip(b) {
        let (vx, vy) = (x.variables(), y.variables());
        assert_eq!(vx.len(), vy.len());
        for (name, t) in &vx {
            assert!(t.equal(&vy[name]), "variable {name} differs");
        }
    }
}

fn off_policy_roundtrip<A: BatchLearner>(make: impl Fn(u64) -> A, stores: impl Fn(&A) -> Vec<&VarStore>, dir: &Path) {
    let obs = rl_core::Space::symmetric(3, 8.0).unwrap();
    let act = rl_core::Space::symmetric(1, 2.0).unwrap();
    let new = |seed: u64| OffPolicy::new(sched().check().unwrap(), make(seed), &obs, &act, seed).unwrap();
    // uninterrupted: 70 batch steps (140 transitions; updates from transition 40)
    let mut a = new(7);
    let mut ta = pendulums(7);
    steps(&mut a, &mut ta, 70);
    // interrupted after 35 steps, resumed into objects built from another seed
    let mut b = new(7);
    let mut tb = pendulums(7);
    steps(&mut b, &mut tb, 35);
    save_run(dir, &b, &tb).unwrap();
    let mut c = new(99);
    let mut tc = pendulums(99);
    load_run(dir, &mut c, &mut tc).unwrap();
    assert_eq!(Agent::updates(&c), Agent::updates(&b));
    steps(&mut c, &mut tc, 35);
    assert!(Agent::updates(&a) > 50);
    assert_eq!(Agent::updates(&a), Agent::updates(&c));
    same_stores(&stores(a.agent()), &stores(c.agent()));
    assert_eq!(a.buffer().transitions().unwrap(), c.buffer().transitions().unwrap());
    assert_eq!(ta.steps(), tc.steps());
    // the next exploration actions agree too (generator state restored)
    let o = ndarray::Array2::from_elem((2, 3), 0.1f32);
    assert_eq!(a.explore(o.view()).unwrap(), c.explore(o.view()).unwrap());
}

#[test]
fn sac_resumes_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let obs = rl_core::Space::symmetric(3, 8.0).unwrap();
    let act = rl_core::Space::symmetric(1, 2.0).unwrap();
    off_policy_roundtrip(
        |seed| Sac::new(SacParams::default().hidden([16, 16]).check().unwrap(), &obs, &act, Device::Cpu, seed).unwrap(),
        |s| {
            let (a, b, c) = s.var_stores();
            vec![a, b, c]
        },
        &dir.path().join("run"),
    );
}

#[test]
fn td3_resumes_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let obs = rl_core::Space::symmetric(3, 8.0).unwrap();
    let act = rl_core::Space::symmetric(1, 2.0).unwrap();
    off_policy_roundtrip(
        |seed| Td3::new(Td3Params::default().hidden([16, 16]).check().unwrap(), &obs, &act, Device::Cpu, seed).unwrap(),
        |t| t.var_stores().to_vec(),
        &dir.path().join("run"),
    );
}

#[test]
fn ppo_resumes_bit_for_bit_mid_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let params = PpoParams::classic_control(400).num_steps(16).num_minibatches(4).update_epochs(2);
    let make_envs = |seed| {
        OnlineTrainer::new(VecEnv::from_fn(2, seed, |_| CartPole::new(CartPoleParams::default().check()?)).unwrap())
            .unwrap()
    };
    let obs = rl_core::Space::symmetric(4, 10.0).unwrap();
    let act = rl_core::Space::discrete(2).unwrap();
    let new = |seed| Ppo::new(params.clone().check().unwrap(), &obs, &act, Device::Cpu, seed).unwrap();
    let mut a = new(3);
    let mut ta = make_envs(3);
    steps(&mut a, &mut ta, 90);
    let mut b = new(3);
    let mut tb = make_envs(3);
    steps(&mut b, &mut tb, 41); // mid-rollout (16 steps per rollout)
    save_run(&dir.path().join("run"), &b, &tb).unwrap();
    let mut c = new(50);
    let mut tc = make_envs(50);
    load_run(&dir.path().join("run"), &mut c, &mut tc).unwrap();
    steps(&mut c, &mut tc, 49);
    assert_eq!(a.iterations(), 5);
    assert_eq!(a.iterations(), c.iterations());
    same_stores(&[a.var_store()], &[c.var_store()]);
    let o = ndarray::Array2::from_elem((2, 4), 0.05f32);
    assert_eq!(a.explore(o.view()).unwrap(), c.explore(o.view()).unwrap());
}

#[test]
fn foreign_and_mismatched_checkpoints_are_rejected_without_change() {
    let dir = tempfile::tempdir().unwrap();
    let obs = rl_core::Space::symmetric(3, 8.0).unwrap();
    let act = rl_core::Space::symmetric(1, 2.0).unwrap();
    let sac = Sac::new(SacParams::default().hidden([8]).check().unwrap(), &obs, &act, Device::Cpu, 0).unwrap();
    sac.save(&dir.path().join("sac")).unwrap();
    // a TD3 cannot read a SAC checkpoint
    let mut td3 = Td3::new(Td3Params::default().hidden([8]).check().unwrap(), &obs, &act, Device::Cpu, 0).unwrap();
    let before = td3.actor().bounds().low().to_vec();
    assert!(td3.load(&dir.path().join("sac")).is_err());
    assert_eq!(td3.actor().bounds().low(), before.as_slice());
    // other widths: parameters differ
    let mut other = Sac::new(SacParams::default().hidden([16]).check().unwrap(), &obs, &act, Device::Cpu, 1).unwrap();
    let w = other.var_stores().0.variables()["0.weight"].copy();
    let e = other.load(&dir.path().join("sac")).unwrap_err();
    assert!(e.to_string().contains("params"), "{e}");
    assert!(other.var_stores().0.variables()["0.weight"].equal(&w));
    // a truncated tensor file
    std::fs::write(dir.path().join("sac/tensors.safetensors"), b"garbage").unwrap();
    let mut same = Sac::new(SacParams::default().hidden([8]).check().unwrap(), &obs, &act, Device::Cpu, 1).unwrap();
    assert!(same.load(&dir.path().join("sac")).is_err());
    assert!(same.load(&dir.path().join("missing")).is_err());
}

fn data_dir(unit: &Path) -> std::path::PathBuf {
    let d: Vec<_> = std::fs::read_dir(unit)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("data-"))
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    d[0].clone()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A run's checkpoint is one unit (issue 22): the trainer's part of one save next to the agent
/// of another (what a crash between two renames used to leave) is refused, naming the part,
/// and so is a replay buffer from another save inside the agent's own unit.
#[test]
fn parts_of_two_saves_are_refused_naming_the_part() {
    let root = tempfile::tempdir().unwrap();
    let obs = rl_core::Space::symmetric(3, 8.0).unwrap();
    let act = rl_core::Space::symmetric(1, 2.0).unwrap();
    let new = |seed: u64| {
        let sac = Sac::new(SacParams::default().hidden([8]).check().unwrap(), &obs, &act, Device::Cpu, seed).unwrap();
        OffPolicy::new(sched().check().unwrap(), sac, &obs, &act, seed).unwrap()
    };
    let mut a = new(7);
    let mut ta = pendulums(7);
    steps(&mut a, &mut ta, 25);
    let (early, late) = (root.path().join("early"), root.path().join("late"));
    save_run(&early, &a, &ta).unwrap();
    steps(&mut a, &mut ta, 5);
    save_run(&late, &a, &ta).unwrap();
    let (de, dl) = (data_dir(&early), data_dir(&late));
    // the trainer at step 60 next to the agent at step 50
    std::fs::remove_dir_all(de.join("trainer")).unwrap();
    copy_dir(&dl.join("trainer"), &de.join("trainer"));
    let mut c = new(99);
    let mut tc = pendulums(99);
    match load_run(&early, &mut c, &mut tc) {
        Err(rl_agents::AgentError::Nn(rl_nn::RlNnError::CheckpointPart { part, .. })) => assert_eq!(part, "trainer"),
        other => panic!("expected CheckpointPart, got {other:?}"),
    }
    assert_eq!((tc.steps(), OnlineAgent::env_steps(&c)), (0, 0), "nothing changed");
    // inside the agent's own unit: a replay buffer of the later save
    let mut b = new(7);
    let mut tb = pendulums(7);
    steps(&mut b, &mut tb, 25);
    Agent::save(&b, &root.path().join("agent_early")).unwrap();
    steps(&mut b, &mut tb, 5);
    Agent::save(&b, &root.path().join("agent_late")).unwrap();
    let (ae, al) = (data_dir(&root.path().join("agent_early")), data_dir(&root.path().join("agent_late")));
    std::fs::remove_dir_all(ae.join("replay")).unwrap();
    copy_dir(&al.join("replay"), &ae.join("replay"));
    match Agent::load(&mut c, &root.path().join("agent_early")) {
        Err(rl_agents::AgentError::Nn(rl_nn::RlNnError::CheckpointPart { part, .. })) => assert_eq!(part, "replay"),
        other => panic!("expected CheckpointPart, got {other:?}"),
    }
    // the intact one loads
    Agent::load(&mut c, &root.path().join("agent_late")).unwrap();
    assert_eq!(OnlineAgent::env_steps(&c), 60);
    load_run(&late, &mut c, &mut tc).unwrap();
    assert_eq!(tc.steps(), 60);
}
