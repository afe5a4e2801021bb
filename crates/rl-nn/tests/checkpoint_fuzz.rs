//! Fuzz-style test of checkpoint loading (issue 22): every byte of a small checkpoint unit (a
//! tiny `VarStore` saved with `save_dir` plus its state JSON, and the unit's manifest) and of a
//! bare checkpoint directory is flipped (`^ 0x01`, `^ 0x80`) and set to a space, and every file
//! is truncated at every offset. The claim, asserted exactly: no load panics, a load that
//! succeeds returns values identical to the saved ones, and a load succeeds exactly when the
//! change turned JSON whitespace outside a string into other JSON whitespace in a file that is
//! verified by the hash of its parsed value (a unit's manifest; a bare directory's `state.json`),
//! which leaves every parsed value as it was; every other change is a typed error.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rl_nn::checkpoint::{self, UnitWriter};
use rl_nn::init::{self, Init};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::Device;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct State {
    step: u64,
    lr: f64,
    name: String,
    rng: rl_core::SeededRng,
}

/// What a load returns: the state, the unit's steps (empty for a bare directory) and every
/// tensor's shape and bytes.
type Loaded = (State, BTreeMap<String, u64>, BTreeMap<String, (Vec<i64>, Vec<u8>)>);

fn tensors_of(ck: &checkpoint::Checkpoint<State>) -> BTreeMap<String, (Vec<i64>, Vec<u8>)> {
    ck.tensors
        .iter()
        .map(|(n, t)| {
            let t = t.contiguous();
            let mut bytes = vec![0u8; t.numel() * t.kind().elt_size_in_bytes()];
            t.copy_data_u8(&mut bytes, t.numel());
            (n.clone(), (t.size(), bytes))
        })
        .collect()
}

fn load_unit(dir: &Path) -> rl_nn::Result<Loaded> {
    let unit = checkpoint::open_unit(dir, "fuzz_run", 1)?;
    let ck = checkpoint::load_dir::<State>(unit.part("learner")?, "learner", 3)?;
    unit.check_step("learner", ck.state.step)?;
    let t = tensors_of(&ck);
    Ok((ck.state, unit.parts().clone(), t))
}

fn load_plain(dir: &Path) -> rl_nn::Result<Loaded> {
    let ck = checkpoint::load_dir::<State>(dir, "learner", 3)?;
    let t = tensors_of(&ck);
    Ok((ck.state, BTreeMap::new(), t))
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// `ws[i]`: byte `i` is JSON whitespace outside every string.
fn whitespace_outside_strings(bytes: &[u8]) -> Vec<bool> {
    let (mut in_str, mut esc) = (false, false);
    bytes
        .iter()
        .map(|&b| {
            if in_str {
                if esc {
                    esc = false;
                } else if b == b'\\' {
                    esc = true;
                } else if b == b'"' {
                    in_str = false;
                }
                false
            } else {
                if b == b'"' {
                    in_str = true;
                }
                matches!(b, b' ' | b'\n' | b'\r' | b'\t')
            }
        })
        .collect()
}

/// Runs every mutation of every file under `dir`; returns (mutations, accepted).
/// `tolerant(file)`: whether whitespace changes in that JSON file are harmless (the file is
/// verified by the hash of its parsed value, not of its bytes).
fn fuzz(
    dir: &Path,
    load: fn(&Path) -> rl_nn::Result<Loaded>,
    tolerant: fn(&Path) -> bool,
    reference: &Loaded,
) -> (usize, usize) {
    let mut all = Vec::new();
    files(dir, &mut all);
    let (mut tried, mut accepted) = (0, 0);
    for f in &all {
        let pristine = std::fs::read(f).unwrap();
        let ws = if tolerant(f) { whitespace_outside_strings(&pristine) } else { vec![false; pristine.len()] };
        let mut trial = |bytes: &[u8], harmless: bool, what: &str| {
            std::fs::write(f, bytes).unwrap();
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load(dir)))
                .unwrap_or_else(|_| panic!("load panicked: {} {what}", f.display()));
            match out {
                Ok(v) => {
                    assert_eq!(&v, reference, "silent change: {} {what}", f.display());
                    assert!(harmless, "accepted a change that is not JSON whitespace: {} {what}", f.display());
                    accepted += 1;
                }
                Err(e) => {
                    assert!(!harmless, "refused a whitespace change: {} {what}: {e}", f.display());
                    assert!(!e.to_string().is_empty());
                }
            }
            tried += 1;
        };
        for i in 0..pristine.len() {
            for (m, name) in [(0x01u8, "^0x01"), (0x80, "^0x80")] {
                let mut b = pristine.clone();
                b[i] ^= m;
                trial(&b, false, &format!("byte {i} {name}"));
            }
            if pristine[i] != b' ' {
                let mut b = pristine.clone();
                b[i] = b' ';
                trial(&b, ws[i], &format!("byte {i} = ' '"));
            }
            trial(&pristine[..i], false, &format!("truncated to {i} bytes"));
        }
        std::fs::write(f, &pristine).unwrap();
    }
    (tried, accepted)
}

#[test]
fn flipped_and_truncated_checkpoints_are_refused_or_load_identically() {
    let root = tempfile::tempdir().unwrap();
    let vs = VarStore::new(Device::Cpu);
    let mut rng = rl_core::rng_from_seed(7);
    let _ = init::var(&vs.root(), "w", &[2, 3], Init::Normal { mean: 0.0, std: 1.0 }, &mut rng).unwrap();
    let _ = init::var(&vs.root(), "b", &[3], Init::Constant { value: 0.125 }, &mut rng).unwrap();
    let state = State { step: 42, lr: 3e-4, name: "tiny".into(), rng };
    let tensors = checkpoint::var_store_tensors(&vs, "m.");

    let unit_dir = root.path().join("run");
    let mut w = UnitWriter::new(&unit_dir, "fuzz_run", 1).unwrap();
    checkpoint::save_dir(w.part("learner", 42).unwrap(), "learner", 3, &state, &tensors).unwrap();
    w.commit().unwrap();
    let plain_dir = root.path().join("plain");
    checkpoint::save_dir(&plain_dir, "learner", 3, &state, &tensors).unwrap();

    let unit_ref = load_unit(&unit_dir).unwrap();
    assert_eq!(unit_ref.0, state);
    assert_eq!(unit_ref.2.len(), 2);
    // in a unit, the manifest is verified by the hash of its parsed value and every part's
    // file by the hash of its bytes: only the manifest's whitespace may change
    let (tried, accepted) = fuzz(&unit_dir, load_unit, |f| f.ends_with(checkpoint::MANIFEST_FILE), &unit_ref);
    eprintln!("unit: {tried} mutations, {accepted} accepted");
    assert!(tried > 2000 && accepted > 10, "{tried} mutations, {accepted} accepted");
    let plain_ref = load_plain(&plain_dir).unwrap();
    // a bare directory: `state.json` is verified by the hash of its parsed state, the tensors
    // by the hash of their bytes
    let (tried, accepted) = fuzz(&plain_dir, load_plain, |f| f.ends_with(checkpoint::STATE_FILE), &plain_ref);
    eprintln!("bare directory: {tried} mutations, {accepted} accepted");
    assert!(tried > 1000 && accepted > 5, "{tried} mutations, {accepted} accepted");
    // the pristine files were restored
    assert_eq!(load_unit(&unit_dir).unwrap(), unit_ref);
}
