//! Checkpoint guarantees: non-finite tensors are refused by every loader (naming the tensor),
//! checkpoint directories carry content hashes, and checkpoint units commit several parts as
//! one (a part from another save, a crashed writer or a stale data directory is never loaded).
use std::collections::BTreeMap;
use std::path::Path;

use rl_core::Params;
use rl_nn::checkpoint::{self, LoadMode, UnitWriter, MANIFEST_FILE};
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{Mlp, MlpConfig, RlNnError};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn model(seed: u64) -> (VarStore, Mlp) {
    let vs = VarStore::new(Device::Cpu);
    let net =
        Mlp::new(&vs.root(), 3, 2, &MlpConfig::new([4]).check().unwrap(), &mut rl_core::rng_from_seed(seed)).unwrap();
    (vs, net)
}

fn set(vs: &VarStore, name: &str, flat_index: i64, value: f64) {
    let v = vs.variables()[name].shallow_clone();
    tch::no_grad(|| {
        let _ = v.view([-1]).get(flat_index).fill_(value);
    });
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn non_finite_tensors_are_refused_by_every_loader_naming_the_tensor() {
    let root = tempfile::tempdir().unwrap();
    let (a, _na) = model(0);
    set(&a, "1.weight", 5, f64::NAN);
    let (b, nb) = model(1);
    let before: Vec<Tensor> = checkpoint::var_store_tensors(&b, "").into_iter().map(|(_, t)| t.copy()).collect();
    // one safetensors file (`save` / `load`, `read_tensors`)
    let file = root.path().join("m.safetensors");
    checkpoint::save(&a, &file).unwrap();
    match checkpoint::load(&b, &file, LoadMode::Strict) {
        Err(RlNnError::NonFiniteTensor { name, index, value, path }) => {
            assert_eq!(name, "1.weight");
            assert_eq!(index, 5);
            assert!(value.is_nan());
            assert!(path.ends_with("m.safetensors"), "{path}");
        }
        other => panic!("expected NonFiniteTensor, got {other:?}"),
    }
    assert!(matches!(checkpoint::read_tensors(&file), Err(RlNnError::NonFiniteTensor { .. })));
    // a checkpoint directory (`save_dir` / `load_dir`)
    let dir = root.path().join("ck");
    checkpoint::save_dir(&dir, "thing", 1, &1u32, &checkpoint::var_store_tensors(&a, "model.")).unwrap();
    assert!(
        matches!(checkpoint::load_dir::<u32>(&dir, "thing", 1), Err(RlNnError::NonFiniteTensor { ref name, .. }) if name == "model.1.weight")
    );
    // an in-memory map (`check_map` / `load_map`), with +inf and -inf
    for v in [f64::INFINITY, f64::NEG_INFINITY] {
        let mut map: BTreeMap<String, Tensor> =
            checkpoint::var_store_tensors(&a, "").into_iter().map(|(n, t)| (n, t.copy())).collect();
        let _ = map.get_mut("1.weight").unwrap().fill_(0.5);
        let _ = map.get_mut("0.bias").unwrap().view([-1]).get(2).fill_(v);
        assert!(
            matches!(checkpoint::load_map(&b, &map, "", LoadMode::Strict, "mem"), Err(RlNnError::NonFiniteTensor { ref name, index: 2, value, .. }) if name == "0.bias" && value == v)
        );
    }
    // nothing was copied: the policy still gives finite, unchanged outputs
    for ((_, t), old) in checkpoint::var_store_tensors(&b, "").iter().zip(&before) {
        assert!(t.equal(old));
    }
    let y = nb.f_forward(&Tensor::ones([1, 3], (Kind::Float, Device::Cpu))).unwrap();
    assert!(y.isfinite().all().int64_value(&[]) == 1);
    // optimiser moments: a NaN second moment is refused too
    let (c, _nc) = model(2);
    let opt = Adam::for_var_store(AdamParams::default().check().unwrap(), &c).unwrap();
    let mut tensors = opt.state_tensors("optim.").unwrap();
    let (_, m) = tensors.iter_mut().find(|(n, _)| n.ends_with("exp_avg_sq")).unwrap();
    let _ = m.view([-1]).get(0).fill_(f64::NAN);
    let mut map: BTreeMap<String, Tensor> = tensors.into_iter().collect();
    assert!(matches!(
        opt.check_state_tensors(&map, "optim.", LoadMode::Strict, "mem"),
        Err(RlNnError::NonFiniteTensor { .. })
    ));
    map.clear();
    // integer tensors are not checked (no NaN there), and finite ones pass
    checkpoint::check_finite_tensor(&Tensor::from_slice(&[i64::MAX]), "i", "mem").unwrap();
    checkpoint::check_finite_tensor(&Tensor::from_slice(&[1.0f32, -3e38]), "f", "mem").unwrap();
    assert!(matches!(
        checkpoint::check_finite_tensor(
            &Tensor::from_slice(&[1.0f64, 2.0, 3.0, f64::NAN]).to_kind(Kind::BFloat16),
            "h",
            "mem"
        ),
        Err(RlNnError::NonFiniteTensor { index: 3, .. })
    ));
}

#[test]
fn checkpoint_directories_without_hashes_or_with_other_hashes_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ck");
    let (a, _na) = model(0);
    checkpoint::save_dir(&dir, "thing", 1, &(3u64, 0.25f64), &checkpoint::var_store_tensors(&a, "m.")).unwrap();
    assert_eq!(checkpoint::load_dir::<(u64, f64)>(&dir, "thing", 1).unwrap().state, (3, 0.25));
    let text = std::fs::read_to_string(dir.join(checkpoint::STATE_FILE)).unwrap();
    // the state hash covers every value
    std::fs::write(dir.join(checkpoint::STATE_FILE), text.replace("0.25", "0.5")).unwrap();
    assert!(matches!(checkpoint::load_dir::<(u64, f64)>(&dir, "thing", 1), Err(RlNnError::CorruptCheckpoint { .. })));
    // a checkpoint written before hashes existed: a typed format error
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_object_mut().unwrap().remove("sha256");
    std::fs::write(dir.join(checkpoint::STATE_FILE), serde_json::to_vec(&v).unwrap()).unwrap();
    assert!(
        matches!(checkpoint::load_dir::<(u64, f64)>(&dir, "thing", 1), Err(RlNnError::FormatMismatch { ref what, .. }) if what == "sha256")
    );
    // a tensor file from another save
    std::fs::write(dir.join(checkpoint::STATE_FILE), &text).unwrap();
    checkpoint::load_dir::<(u64, f64)>(&dir, "thing", 1).unwrap();
    let (b, _nb) = model(1);
    checkpoint::save_tensors(&checkpoint::var_store_tensors(&b, "m."), dir.join(checkpoint::TENSORS_FILE)).unwrap();
    assert!(
        matches!(checkpoint::load_dir::<(u64, f64)>(&dir, "thing", 1), Err(RlNnError::CorruptCheckpoint { ref path, .. }) if path.ends_with(checkpoint::TENSORS_FILE))
    );
}

/// A unit of two parts, `learner` (tensors) and `loop` (state only), at `step`.
fn write_unit(dir: &Path, vs: &VarStore, step: u64) {
    let mut unit = UnitWriter::new(dir, "test_run", 1).unwrap();
    checkpoint::save_dir(
        unit.part("learner", step).unwrap(),
        "learner",
        1,
        &step,
        &checkpoint::var_store_tensors(vs, "model."),
    )
    .unwrap();
    checkpoint::save_dir::<_, &str>(unit.part("loop", step).unwrap(), "loop", 1, &step, &[]).unwrap();
    unit.commit().unwrap();
}

/// Loads a unit written by [`write_unit`] the way a run's loader does: open (verifies every
/// file), load each part, check each part's step against the manifest.
fn read_unit(dir: &Path, vs: &VarStore) -> rl_nn::Result<u64> {
    let unit = checkpoint::open_unit(dir, "test_run", 1)?;
    let learner = checkpoint::load_dir::<u64>(unit.part("learner")?, "learner", 1)?;
    let lp = checkpoint::load_dir::<u64>(unit.part("loop")?, "loop", 1)?;
    unit.check_step("learner", learner.state)?;
    unit.check_step("loop", lp.state)?;
    checkpoint::load_map(vs, &learner.tensors, "model.", LoadMode::Strict, &learner.path)?;
    Ok(lp.state)
}

fn data_dir(dir: &Path) -> std::path::PathBuf {
    let d: Vec<String> = names(dir).into_iter().filter(|n| n.starts_with("data-")).collect();
    assert_eq!(d.len(), 1, "{d:?}");
    dir.join(&d[0])
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

#[test]
fn units_roundtrip_and_name_the_part_that_disagrees() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    let (a, _na) = model(0);
    write_unit(&dir, &a, 100);
    assert_eq!(names(&dir).len(), 2, "manifest.json and one data directory");
    let (b, _nb) = model(1);
    assert_eq!(read_unit(&dir, &b).unwrap(), 100);
    assert!(b.variables()["0.weight"].equal(&a.variables()["0.weight"]));
    let unit = checkpoint::open_unit(&dir, "test_run", 1).unwrap();
    assert_eq!(
        unit.parts().iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(),
        [("learner", 100), ("loop", 100)]
    );
    assert!(matches!(unit.check_step("loop", 99), Err(RlNnError::CheckpointPart { ref part, .. }) if part == "loop"));
    assert!(matches!(unit.part("nope"), Err(RlNnError::CheckpointPart { ref part, .. }) if part == "nope"));
    assert!(
        matches!(checkpoint::open_unit(&dir, "other", 1), Err(RlNnError::FormatMismatch { ref what, .. }) if what == "kind")
    );
    assert!(
        matches!(checkpoint::open_unit(&dir, "test_run", 2), Err(RlNnError::FormatMismatch { ref what, .. }) if what == "format_version")
    );
    // rewriting replaces the unit: still one data directory
    write_unit(&dir, &a, 150);
    assert_eq!(names(&dir).len(), 2);
    assert_eq!(read_unit(&dir, &b).unwrap(), 150);

    // an extra or a missing file is named with its part
    let data = data_dir(&dir);
    std::fs::write(data.join("loop/notes.txt"), b"x").unwrap();
    assert!(
        matches!(checkpoint::open_unit(&dir, "test_run", 1), Err(RlNnError::CheckpointPart { ref part, ref reason, .. }) if part == "loop" && reason.contains("notes.txt"))
    );
    std::fs::remove_file(data.join("loop/notes.txt")).unwrap();
    std::fs::remove_file(data.join("learner/tensors.safetensors")).unwrap();
    assert!(
        matches!(checkpoint::open_unit(&dir, "test_run", 1), Err(RlNnError::CheckpointPart { ref part, .. }) if part == "learner")
    );
    std::fs::remove_dir_all(data.join("learner")).unwrap();
    assert!(
        matches!(checkpoint::open_unit(&dir, "test_run", 1), Err(RlNnError::CheckpointPart { ref part, .. }) if part == "learner")
    );
}

/// The failure of issue 22: parts renamed into place one by one, a crash between two renames,
/// and a resume that mixes the weights of one save with the counters of another. Units refuse
/// the mix: by the file hashes, and (when the manifest is rewritten to match the files) by the
/// step counts.
#[test]
fn a_part_from_another_save_is_refused_and_named() {
    let root = tempfile::tempdir().unwrap();
    let (early, late) = (root.path().join("early"), root.path().join("late"));
    let (a, _na) = model(0);
    write_unit(&early, &a, 100);
    set(&a, "0.weight", 0, 0.75);
    write_unit(&late, &a, 200);
    let (b, _nb) = model(1);
    let untouched = b.variables()["0.weight"].copy();
    // the learner (weights at step 200) lands in the step-100 unit
    let (de, dl) = (data_dir(&early), data_dir(&late));
    std::fs::remove_dir_all(de.join("learner")).unwrap();
    copy_dir(&dl.join("learner"), &de.join("learner"));
    match read_unit(&early, &b) {
        Err(RlNnError::CheckpointPart { part, reason, .. }) => {
            assert_eq!(part, "learner");
            assert!(reason.contains("sha256"), "{reason}");
        }
        other => panic!("expected CheckpointPart, got {other:?}"),
    }
    assert!(b.variables()["0.weight"].equal(&untouched));
    // a manifest rewritten with the new files' hashes (and a valid self-hash) still records
    // step 100 for the learner: the step check names it
    let mpath = early.join(MANIFEST_FILE);
    let mut file: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    let late_file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(late.join(MANIFEST_FILE)).unwrap()).unwrap();
    for f in ["learner/state.json", "learner/tensors.safetensors"] {
        file["manifest"]["files"][f] = late_file["manifest"]["files"][f].clone();
    }
    let sum = checkpoint::sha256_bytes(&serde_json::to_vec(&file["manifest"]).unwrap());
    file["sha256"] = serde_json::Value::String(sum);
    std::fs::write(&mpath, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    match read_unit(&early, &b) {
        Err(RlNnError::CheckpointPart { part, reason, .. }) => {
            assert_eq!(part, "learner");
            assert!(reason.contains("step 200") && reason.contains("step 100"), "{reason}");
        }
        other => panic!("expected CheckpointPart, got {other:?}"),
    }
    // ... and without the self-hash update the manifest itself is refused
    file["manifest"]["parts"]["learner"] = serde_json::json!(200);
    std::fs::write(&mpath, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    assert!(matches!(checkpoint::open_unit(&early, "test_run", 1), Err(RlNnError::CorruptCheckpoint { .. })));
}

#[test]
fn a_crashed_writer_is_never_loaded_and_is_cleaned_up() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    let (a, _na) = model(0);
    // a first save that crashes before its commit: nothing to load (not a half unit)
    let mut w = UnitWriter::new(&dir, "test_run", 1).unwrap();
    checkpoint::save_dir::<_, &str>(w.part("loop", 5).unwrap(), "loop", 1, &5u64, &[]).unwrap();
    std::mem::forget(w); // a crash: no drop, no commit
    assert!(matches!(checkpoint::open_unit(&dir, "test_run", 1), Err(RlNnError::MissingFile { .. })));
    write_unit(&dir, &a, 100);
    // a save that crashes after writing every part, and a manifest temporary left behind
    let mut w = UnitWriter::new(&dir, "test_run", 1).unwrap();
    let (b, _nb) = model(1);
    checkpoint::save_dir(
        w.part("learner", 200).unwrap(),
        "learner",
        1,
        &200u64,
        &checkpoint::var_store_tensors(&b, "model."),
    )
    .unwrap();
    checkpoint::save_dir::<_, &str>(w.part("loop", 200).unwrap(), "loop", 1, &200u64, &[]).unwrap();
    std::mem::forget(w);
    std::fs::write(dir.join(".manifest.json.tmp-1-2-3"), b"{\"half").unwrap();
    assert_eq!(names(&dir).len(), 4);
    let (c, _nc) = model(2);
    assert_eq!(read_unit(&dir, &c).unwrap(), 100, "the committed unit, not the crashed one");
    assert!(c.variables()["0.weight"].equal(&a.variables()["0.weight"]));
    // a writer that fails (dropped without commit) removes its own data directory
    {
        let mut w = UnitWriter::new(&dir, "test_run", 1).unwrap();
        checkpoint::save_dir::<_, &str>(w.part("loop", 300).unwrap(), "loop", 1, &300u64, &[]).unwrap();
    }
    assert_eq!(names(&dir).len(), 4);
    // the next commit removes every leftover
    write_unit(&dir, &b, 400);
    assert_eq!(names(&dir).len(), 2, "{:?}", names(&dir));
    assert_eq!(read_unit(&dir, &c).unwrap(), 400);
}

#[test]
fn writers_refuse_what_is_not_a_unit_and_incomplete_commits() {
    let root = tempfile::tempdir().unwrap();
    // the layout before units (parts side by side, no manifest)
    let old = root.path().join("old");
    checkpoint::save_dir::<_, &str>(old.join("trainer"), "loop", 1, &1u64, &[]).unwrap();
    assert!(
        matches!(checkpoint::open_unit(&old, "test_run", 1), Err(RlNnError::FormatMismatch { ref what, .. }) if what == "layout")
    );
    assert!(matches!(UnitWriter::new(&old, "test_run", 1), Err(RlNnError::InvalidName { .. })));
    assert_eq!(names(&old), ["trainer"], "left as it was");
    let f = root.path().join("file");
    std::fs::write(&f, b"x").unwrap();
    assert!(UnitWriter::new(&f, "test_run", 1).is_err());
    assert!(matches!(
        checkpoint::open_unit(root.path().join("none"), "test_run", 1),
        Err(RlNnError::MissingFile { .. })
    ));

    let dir = root.path().join("run");
    let mut w = UnitWriter::new(&dir, "test_run", 1).unwrap();
    for bad in ["", ".hidden", "a/b", "..", "x y"] {
        assert!(matches!(w.part(bad, 0), Err(RlNnError::InvalidName { .. })), "{bad:?}");
    }
    w.part("loop", 1).unwrap();
    assert!(matches!(w.part("loop", 2), Err(RlNnError::InvalidName { .. })));
    assert!(matches!(w.commit(), Err(RlNnError::CheckpointPart { ref part, .. }) if part == "loop"));
    let mut w = UnitWriter::new(&dir, "test_run", 1).unwrap();
    let p = w.part("loop", 1).unwrap();
    checkpoint::save_dir::<_, &str>(&p, "loop", 1, &1u64, &[]).unwrap();
    std::fs::write(p.with_file_name("stray"), b"x").unwrap();
    assert!(matches!(w.commit(), Err(RlNnError::CheckpointPart { ref part, .. }) if part == "stray"));
    assert!(matches!(UnitWriter::new(&dir, "test_run", 1).unwrap().commit(), Err(RlNnError::Empty { .. })));
    assert!(names(&dir).is_empty(), "failed writers leave nothing: {:?}", names(&dir));

    // units nest: a part may itself be a unit
    let mut outer = UnitWriter::new(&dir, "test_run", 1).unwrap();
    let mut inner = UnitWriter::new(outer.part("agent", 7).unwrap(), "agent", 1).unwrap();
    checkpoint::save_dir::<_, &str>(inner.part("replay", 7).unwrap(), "replay", 1, &7u64, &[]).unwrap();
    inner.commit().unwrap();
    checkpoint::save_tensors(&[("x", Tensor::from(1.0))], outer.part("extra.safetensors", 7).unwrap()).unwrap();
    outer.commit().unwrap();
    let u = checkpoint::open_unit(&dir, "test_run", 1).unwrap();
    let inner = checkpoint::open_unit(u.part("agent").unwrap(), "agent", 1).unwrap();
    inner
        .check_step("replay", checkpoint::load_dir::<u64>(inner.part("replay").unwrap(), "replay", 1).unwrap().state)
        .unwrap();
    assert_eq!(checkpoint::read_tensors(u.part("extra.safetensors").unwrap()).unwrap().len(), 1);
}
