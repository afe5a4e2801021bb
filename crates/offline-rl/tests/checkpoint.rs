//! A run's checkpoint is one unit (issue 22): the parts `algo` and `trainer` are committed
//! together, and a checkpoint whose parts come from two saves (the old crash between two
//! renames: trainer at step 4, weights at update 8) or whose weights are not finite is refused
//! with an error that names the part or the tensor, before the trainer changes.

use std::path::{Path, PathBuf};

use ndarray::{Array1, ArrayView1};
use offline_rl::algo::{AlgoKind, AlgorithmParams, DatasetKind, OfflineAlgorithm};
use offline_rl::train::{FitParams, OfflineData, Preprocess, Trainer};
use offline_rl::{Dataset, DatasetInfo, OfflineError};
use rand::{Rng, RngCore};
use rl_core::{Env, MemorySink, Params, Space, Step, Transitions};
use rl_nn::checkpoint;
use rl_nn::RlNnError;

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

fn data() -> OfflineData {
    let mut rng = rl_core::rng_from_seed(1);
    let mut env = Reach::new();
    let mut t = Transitions::empty(2, 1);
    for _ in 0..200 {
        let o = env.reset(&mut rng).unwrap();
        let a = Array1::from(vec![rng.random_range(-1.0f32..1.0)]);
        let s = env.step(a.view()).unwrap();
        t.push(o.view(), a.view(), s.reward, s.obs.view(), true, false).unwrap();
    }
    let d = Dataset::new(t, DatasetInfo { name: "reach-random".into(), ..Default::default() }).unwrap();
    OfflineData::new(&d, &Preprocess::default()).unwrap()
}

fn algo(seed: u64) -> Box<dyn OfflineAlgorithm> {
    let env = Reach::new();
    AlgorithmParams::defaults(AlgoKind::Td3Bc, DatasetKind::Random)
        .hidden(vec![16, 16])
        .build(env.observation_space(), env.action_space(), tch::Device::Cpu, seed)
        .unwrap()
}

fn fit(steps: u64) -> rl_core::Valid<FitParams> {
    FitParams::default().steps(steps).batch_size(16).eval_every(0).progress(false).check().unwrap()
}

fn data_dir(unit: &Path) -> PathBuf {
    let d: Vec<PathBuf> = std::fs::read_dir(unit)
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

/// Rewrites the manifest of the unit `dir` so that it matches the files now on disk (what a
/// careless copy tool or a forger would do): the file hashes then agree, only the step counts
/// can still tell.
fn reseal(dir: &Path) {
    let mpath = dir.join(checkpoint::MANIFEST_FILE);
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    let data = data_dir(dir);
    let files = m["manifest"]["files"].as_object_mut().unwrap();
    for (key, entry) in files.iter_mut() {
        let p = data.join(key);
        entry["bytes"] = serde_json::json!(std::fs::metadata(&p).unwrap().len());
        entry["sha256"] = serde_json::json!(checkpoint::sha256_file(&p).unwrap());
    }
    m["sha256"] = serde_json::json!(checkpoint::sha256_bytes(&serde_json::to_vec(&m["manifest"]).unwrap()));
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

/// Writes one tensor of a checkpoint directory's tensor file with `value` at flat index 0 and
/// updates the directory's own hash (a weight that diverged before it was saved).
fn poison(dir: &Path, name: &str, value: f64) {
    let tpath = dir.join(checkpoint::TENSORS_FILE);
    let mut tensors: Vec<(String, tch::Tensor)> = tch::Tensor::read_safetensors(&tpath).unwrap();
    let (_, t) = tensors.iter_mut().find(|(n, _)| n == name).unwrap();
    let _ = t.view([-1]).get(0).fill_(value);
    checkpoint::save_tensors(&tensors, &tpath).unwrap();
    let spath = dir.join(checkpoint::STATE_FILE);
    let mut s: serde_json::Value = serde_json::from_slice(&std::fs::read(&spath).unwrap()).unwrap();
    s["sha256"]["tensors"] = serde_json::json!(checkpoint::sha256_file(&tpath).unwrap());
    std::fs::write(&spath, serde_json::to_vec_pretty(&s).unwrap()).unwrap();
}

#[test]
fn parts_of_two_saves_never_resume_together() {
    let data = data();
    // a run checkpointed at step 4, continued to step 8 with a checkpoint elsewhere
    let (early, late) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = algo(5);
    let mut t = Trainer::new(fit(4), 3);
    t.run::<Reach>(a.as_mut(), &data, None, &mut MemorySink::default(), Some(early.path())).unwrap();
    let mut t = Trainer::new(fit(8), 3);
    t.load(&early.path().join("checkpoint"), a.as_mut(), &data).unwrap();
    assert_eq!(t.steps(), 4);
    t.run::<Reach>(a.as_mut(), &data, None, &mut MemorySink::default(), Some(late.path())).unwrap();
    assert_eq!(a.updates(), 8);
    let (e, l) = (early.path().join("checkpoint"), late.path().join("checkpoint"));
    let unit = checkpoint::open_unit(&e, "offline_rl.run", 1).unwrap();
    assert_eq!(unit.step("algo").unwrap(), 4);
    assert_eq!(unit.step("trainer").unwrap(), 4);

    // the old failure: the trainer's part from step 4 next to the weights of update 8
    let de = data_dir(&e);
    std::fs::remove_dir_all(de.join("algo")).unwrap();
    copy_dir(&data_dir(&l).join("algo"), &de.join("algo"));
    let mut fresh = algo(99);
    let mut t2 = Trainer::new(fit(12), 3);
    match t2.load(&e, fresh.as_mut(), &data) {
        Err(OfflineError::Nn(RlNnError::CheckpointPart { part, reason, .. })) => {
            assert_eq!(part, "algo");
            assert!(reason.contains("sha256"), "{reason}");
        }
        other => panic!("expected the algo part to be refused, got {other:?}"),
    }
    assert_eq!((t2.steps(), fresh.updates()), (0, 0), "nothing changed");
    // with a manifest rewritten to the new files, the step counts still disagree
    reseal(&e);
    match t2.load(&e, fresh.as_mut(), &data) {
        Err(OfflineError::Nn(RlNnError::CheckpointPart { part, reason, .. })) => {
            assert_eq!(part, "algo");
            assert!(reason.contains("holds step 8") && reason.contains("step 4"), "{reason}");
        }
        other => panic!("expected the algo step to be refused, got {other:?}"),
    }
    assert_eq!(t2.steps(), 0, "the trainer is unchanged");
    // the intact checkpoint resumes
    let mut b = algo(99);
    let mut t3 = Trainer::new(fit(12), 3);
    t3.load(&l, b.as_mut(), &data).unwrap();
    assert_eq!((t3.steps(), b.updates()), (8, 8));
}

#[test]
fn non_finite_weights_do_not_load() {
    let data = data();
    let run = tempfile::tempdir().unwrap();
    let mut a = algo(5);
    Trainer::new(fit(3), 3)
        .run::<Reach>(a.as_mut(), &data, None, &mut MemorySink::default(), Some(run.path()))
        .unwrap();
    let ck = run.path().join("checkpoint");
    let names: Vec<String> = checkpoint::read_tensors(data_dir(&ck).join("algo").join(checkpoint::TENSORS_FILE))
        .unwrap()
        .into_keys()
        .collect();
    let weight = names.iter().find(|n| n.starts_with("actor.") && n.ends_with("weight")).unwrap().clone();
    poison(&data_dir(&ck).join("algo"), &weight, f64::NAN);
    reseal(&ck);
    let mut fresh = algo(99);
    let mut t = Trainer::new(fit(6), 3);
    match t.load(&ck, fresh.as_mut(), &data) {
        Err(OfflineError::Agent(rl_agents::AgentError::Nn(RlNnError::NonFiniteTensor { name, index, .. }))) => {
            assert_eq!(name, weight);
            assert_eq!(index, 0);
        }
        other => panic!("expected NonFiniteTensor, got {other:?}"),
    }
    assert_eq!((t.steps(), fresh.updates()), (0, 0));
}
