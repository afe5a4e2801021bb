//! Checkpoints: safetensors files of named tensors, checkpoint directories, and checkpoint
//! units of several parts.
//!
//! A component's checkpoint is a directory (`docs/conventions.md` §4) holding
//!
//! - `state.json`: `{"kind": "...", "format_version": N, "state": ..., "sha256": {"state":
//!   ..., "tensors": ...}}`, the component's serialisable state (parameters, counters,
//!   generator states, buffer contents) and the content hashes of the state (SHA-256 of its
//!   compact JSON) and of the tensor file, and
//! - `tensors.safetensors`: every tensor (weights, target networks, optimiser moments),
//!
//! written by [`save_dir`] into a temporary directory that is then renamed into place, so a
//! crash never leaves a half-written checkpoint under the final name. [`load_dir`] returns
//! both parts after checking the kind, the format version and both hashes; a missing file is
//! [`RlNnError::MissingFile`], an unreadable one or one whose hash differs
//! [`RlNnError::CorruptCheckpoint`], another component's or version's (or one without hashes)
//! [`RlNnError::FormatMismatch`]. Components then *check* every tensor they need
//! ([`check_map`], [`crate::optim::Adam::check_state_tensors`]) before *copying* any
//! ([`load_map`], [`crate::optim::Adam::load_state_tensors`]), so a failed load leaves the
//! object unchanged.
//!
//! Every reader refuses NaN and infinite values in floating-point tensors
//! ([`RlNnError::NonFiniteTensor`], naming the tensor): [`read_tensors`] (so [`load`] and
//! [`load_dir`]), [`check_map`] / [`load_map`] for in-memory maps, and the optimiser's checks
//! ([`check_finite_tensor`] is the check itself).
//!
//! Several checkpoints that must resume together (an algorithm and its training loop) are
//! written as one *unit* ([`UnitWriter`], [`open_unit`]): all parts go into a fresh data
//! directory and a manifest holding every part's step count and every file's SHA-256 is
//! committed by one rename; loading verifies every file and each part's step count and
//! names the part that disagrees ([`RlNnError::CheckpointPart`]).
//!
//! [`save`] / [`load`] write and read the variables of one `VarStore` as a single safetensors
//! file: a missing tensor gives [`RlNnError::MissingTensor`], a wrong shape
//! [`RlNnError::TensorShape`], extra tensors (with [`LoadMode::Strict`])
//! [`RlNnError::UnexpectedTensors`]. A bare safetensors file carries no hash.
//!
//! ```
//! use rl_core::Params;
//! use rl_nn::{checkpoint, LoadMode, Mlp, MlpConfig};
//! use tch::{nn::VarStore, Device};
//! let dir = tempfile::tempdir()?;
//! let ckpt = dir.path().join("agent");
//! let mut rng = rl_core::rng_from_seed(0);
//! let vs = VarStore::new(Device::Cpu);
//! let _net = Mlp::new(&vs.root(), 3, 1, &MlpConfig::new([8]).check()?, &mut rng)?;
//! let counters = (17u64, rng.clone());
//! checkpoint::save_dir(&ckpt, "my_agent", 1, &counters, &checkpoint::var_store_tensors(&vs, "model."))?;
//!
//! let loaded = checkpoint::load_dir::<(u64, rl_core::SeededRng)>(&ckpt, "my_agent", 1)?;
//! let fresh = VarStore::new(Device::Cpu);
//! let _net2 = Mlp::new(&fresh.root(), 3, 1, &MlpConfig::new([8]).check()?, &mut rl_core::rng_from_seed(1))?;
//! checkpoint::load_map(&fresh, &loaded.tensors, "model.", LoadMode::Strict, &loaded.path)?;
//! assert_eq!(loaded.state.0, 17);
//! assert!(checkpoint::load_dir::<(u64, rl_core::SeededRng)>(&ckpt, "other_agent", 1).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::error::{Result, RlNnError};

mod unit;
pub use unit::{open_unit, Unit, UnitWriter, MANIFEST_FILE, UNIT_LAYOUT_VERSION};

/// The JSON file of a checkpoint directory.
pub const STATE_FILE: &str = "state.json";
/// The tensor file of a checkpoint directory.
pub const TENSORS_FILE: &str = "tensors.safetensors";

/// How loaders treat tensors that the target does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Extra tensors (under the prefix being loaded) are an error.
    #[default]
    Strict,
    /// Extra tensors are ignored.
    AllowExtra,
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{nanos}-{n}", std::process::id())
}

/// `dir/.name.what-<unique>`: a sibling of `path` for temporary files.
fn sibling(path: &Path, what: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "checkpoint".into());
    path.with_file_name(format!(".{name}.{what}-{}", unique_suffix()))
}

fn ensure_parent(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)?;
        }
    }
    Ok(())
}

/// The SHA-256 of the file `path`, as 64 lowercase hex digits (read in 1 MiB blocks, so any
/// size works).
///
/// # Errors
/// [`RlNnError::MissingFile`] when it does not exist, [`RlNnError::CorruptCheckpoint`] when it
/// cannot be read.
pub fn sha256_file(path: impl AsRef<Path>) -> Result<String> {
    use std::io::Read;
    let path = path.as_ref();
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RlNnError::MissingFile { path: path_str(path) })
        }
        Err(e) => return Err(RlNnError::CorruptCheckpoint { path: path_str(path), reason: e.to_string() }),
    };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| RlNnError::CorruptCheckpoint { path: path_str(path), reason: e.to_string() })?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Errors with [`RlNnError::NonFiniteTensor`] (naming `name` in checkpoint `path`, the first
/// offending flat index and value) when the floating-point tensor `t` holds a NaN or an
/// infinity; tensors of other kinds pass. One pass on the tensor's device; the host copy is
/// made only to report the offending element.
///
/// # Errors
/// [`RlNnError::NonFiniteTensor`]; libtorch failures.
pub fn check_finite_tensor(t: &Tensor, name: &str, path: &str) -> Result<()> {
    if !t.defined() || !crate::check::is_float(t.f_kind()?) || t.numel() == 0 {
        return Ok(());
    }
    let flat = t.f_detach()?.f_reshape([-1])?;
    let finite = flat.f_isfinite()?;
    if finite.f_all()?.f_int64_value(&[])? != 0 {
        return Ok(());
    }
    let bad = finite.f_logical_not()?.f_nonzero()?;
    let index = bad.f_int64_value(&[0, 0])?;
    let value = flat.f_to_kind(Kind::Double)?.f_double_value(&[index])?;
    Err(RlNnError::NonFiniteTensor { path: path.into(), name: name.into(), index: index.max(0) as usize, value })
}

/// Writes named tensors (moved to CPU, made contiguous) to the safetensors file `path`, through
/// a temporary file renamed into place.
///
/// # Errors
/// [`RlNnError::InvalidName`] for a repeated name; I/O or libtorch failures.
pub fn save_tensors<S: AsRef<str>>(tensors: &[(S, Tensor)], path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let mut seen = std::collections::BTreeSet::new();
    for (n, _) in tensors {
        if !seen.insert(n.as_ref()) {
            return Err(RlNnError::InvalidName { name: n.as_ref().into(), reason: "repeated tensor name".into() });
        }
    }
    ensure_parent(path)?;
    let cpu: Vec<(&str, Tensor)> = tensors
        .iter()
        .map(|(n, t)| Ok((n.as_ref(), t.f_detach()?.f_to_device(Device::Cpu)?.f_contiguous()?)))
        .collect::<Result<_>>()?;
    let tmp = sibling(path, "tmp");
    let written = Tensor::write_safetensors(&cpu, &tmp).map_err(RlNnError::from).and_then(|()| {
        std::fs::rename(&tmp, path)?;
        Ok(())
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The variables of `vs` as `(prefix + name, tensor)` pairs, sorted by name (shallow: they
/// share storage with the store).
pub fn var_store_tensors(vs: &VarStore, prefix: &str) -> Vec<(String, Tensor)> {
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    vars.into_iter().map(|(n, t)| (format!("{prefix}{n}"), t)).collect()
}

/// Saves every variable of `vs` to the safetensors file `path`.
///
/// # Errors
/// I/O or libtorch failures.
pub fn save(vs: &VarStore, path: impl AsRef<Path>) -> Result<()> {
    save_tensors(&var_store_tensors(vs, ""), path)
}

/// Reads every tensor of a safetensors file, by name, and refuses any floating-point tensor
/// that holds a NaN or an infinity.
///
/// # Errors
/// [`RlNnError::MissingFile`] when the file does not exist, [`RlNnError::CorruptCheckpoint`]
/// when it is truncated or not safetensors, [`RlNnError::NonFiniteTensor`] naming the first
/// tensor (sorted by name) with a non-finite value.
pub fn read_tensors(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RlNnError::MissingFile { path: path_str(path) })
        }
        Err(e) => return Err(RlNnError::CorruptCheckpoint { path: path_str(path), reason: e.to_string() }),
    };
    if !meta.is_file() {
        return Err(RlNnError::CorruptCheckpoint { path: path_str(path), reason: "not a regular file".into() });
    }
    if meta.len() < 8 {
        return Err(RlNnError::CorruptCheckpoint {
            path: path_str(path),
            reason: format!("file has {} bytes, too short for a header", meta.len()),
        });
    }
    let tensors: BTreeMap<String, Tensor> = Tensor::read_safetensors(path)
        .map(|v| v.into_iter().collect())
        .map_err(|e| RlNnError::CorruptCheckpoint { path: path_str(path), reason: e.to_string() })?;
    let shown = path_str(path);
    for (name, t) in &tensors {
        check_finite_tensor(t, name, &shown)?;
    }
    Ok(tensors)
}

/// Checks that `file` holds every variable of `vs` under `prefix` with the variable's shape
/// and only finite values (and, with [`LoadMode::Strict`], nothing else under `prefix`),
/// changing nothing. `path` names the source in errors.
///
/// # Errors
/// [`RlNnError::MissingTensor`] (the first missing name, sorted), [`RlNnError::TensorShape`],
/// [`RlNnError::UnexpectedTensors`], [`RlNnError::CorruptCheckpoint`] for a non-floating
/// tensor where the variable is floating, [`RlNnError::NonFiniteTensor`].
pub fn check_map(
    vs: &VarStore,
    file: &BTreeMap<String, Tensor>,
    prefix: &str,
    mode: LoadMode,
    path: &str,
) -> Result<()> {
    let vars = var_store_tensors(vs, prefix);
    for (key, var) in &vars {
        let t = file.get(key).ok_or_else(|| RlNnError::MissingTensor { path: path.into(), name: key.clone() })?;
        if t.size() != var.size() {
            return Err(RlNnError::TensorShape {
                path: path.into(),
                name: key.clone(),
                expected: var.size(),
                got: t.size(),
            });
        }
        if crate::check::is_float(var.f_kind()?) && !crate::check::is_float(t.f_kind()?) {
            return Err(RlNnError::CorruptCheckpoint {
                path: path.into(),
                reason: format!("`{key}` has kind {:?}, the variable is {:?}", t.kind(), var.kind()),
            });
        }
        check_finite_tensor(t, key, path)?;
    }
    if mode == LoadMode::Strict {
        let known: std::collections::BTreeSet<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        let extra: Vec<String> =
            file.keys().filter(|k| k.starts_with(prefix) && !known.contains(k.as_str())).cloned().collect();
        if !extra.is_empty() {
            return Err(RlNnError::UnexpectedTensors { path: path.into(), names: extra });
        }
    }
    Ok(())
}

/// Copies the tensors of `file` under `prefix` into the variables of `vs` (converted to each
/// variable's kind and device) after [`check_map`]; on error no variable has been modified.
///
/// # Errors
/// As [`check_map`]; libtorch failures.
pub fn load_map(
    vs: &VarStore,
    file: &BTreeMap<String, Tensor>,
    prefix: &str,
    mode: LoadMode,
    path: &str,
) -> Result<()> {
    check_map(vs, file, prefix, mode, path)?;
    let vars = var_store_tensors(vs, prefix);
    let staged = vars
        .iter()
        .map(|(key, var)| Ok(file[key].f_to_kind(var.f_kind()?)?.f_to_device(var.device())?))
        .collect::<Result<Vec<Tensor>>>()?;
    tch::no_grad(|| -> Result<()> {
        for ((_, var), src) in vars.iter().zip(&staged) {
            let mut v = var.shallow_clone();
            v.f_copy_(src)?;
        }
        Ok(())
    })
}

/// Loads the safetensors file `path` into the variables of `vs` (see [`load_map`]).
///
/// # Errors
/// See the module docs; on error no variable has been modified.
pub fn load(vs: &VarStore, path: impl AsRef<Path>, mode: LoadMode) -> Result<()> {
    let path = path.as_ref();
    let file = read_tensors(path)?;
    load_map(vs, &file, "", mode, &path_str(path))
}

/// The content hashes `state.json` records: `state` is the SHA-256 of the state's compact JSON
/// (`serde_json::to_vec` of the parsed value, so whitespace does not matter and every value
/// does), `tensors` the SHA-256 of `tensors.safetensors`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sums {
    state: String,
    tensors: String,
}

#[derive(Serialize)]
struct EnvelopeOut<'a> {
    kind: &'a str,
    format_version: u32,
    state: &'a serde_json::Value,
    sha256: Sums,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeIn {
    kind: String,
    format_version: u32,
    state: serde_json::Value,
    #[serde(default)]
    sha256: Option<Sums>,
}

/// The hash of a state value: SHA-256 of its compact JSON. Objects serialise with sorted keys
/// and numbers in one canonical form, so two values hash alike exactly when they are equal.
fn state_sha256(state: &serde_json::Value) -> Result<String> {
    Ok(sha256_bytes(&serde_json::to_vec(state)?))
}

/// Refuses to replace anything but a checkpoint directory (only our two files inside).
fn replaceable(dir: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e.into()),
        Ok(m) if !m.is_dir() => Err(RlNnError::InvalidName {
            name: path_str(dir),
            reason: "exists and is not a checkpoint directory; refusing to replace it".into(),
        }),
        Ok(_) => {
            for entry in std::fs::read_dir(dir)? {
                let name = entry?.file_name();
                if name != STATE_FILE && name != TENSORS_FILE {
                    return Err(RlNnError::InvalidName {
                        name: path_str(dir),
                        reason: format!(
                            "holds `{}`, not only {STATE_FILE} and {TENSORS_FILE}; refusing to replace it",
                            name.to_string_lossy()
                        ),
                    });
                }
            }
            Ok(true)
        }
    }
}

/// Writes the checkpoint directory `dir`: `state.json` = `{"kind": kind, "format_version":
/// format_version, "state": state, "sha256": {"state": .., "tensors": ..}}` and
/// `tensors.safetensors` = `tensors`. Everything is written to a temporary sibling directory
/// first, then renamed to `dir` (an existing checkpoint directory there is replaced; anything
/// else there is an error). The replacement takes two renames (old away, new in): a crash
/// between them leaves no `dir` (loading it is [`RlNnError::MissingFile`]), never a mixed
/// one. Several directories that must resume together go into one [`UnitWriter`].
///
/// # Errors
/// [`RlNnError::InvalidName`] when `dir` exists and is not a checkpoint directory, or a tensor
/// name repeats; JSON, I/O and libtorch failures (the temporary directory is removed).
pub fn save_dir<S: Serialize, N: AsRef<str>>(
    dir: impl AsRef<Path>,
    kind: &str,
    format_version: u32,
    state: &S,
    tensors: &[(N, Tensor)],
) -> Result<()> {
    let dir = dir.as_ref();
    let exists = replaceable(dir)?;
    ensure_parent(dir)?;
    let tmp = sibling(dir, "tmp");
    let write = || -> Result<()> {
        std::fs::create_dir(&tmp)?;
        let value = serde_json::to_value(state)?;
        save_tensors(tensors, tmp.join(TENSORS_FILE))?;
        let sha256 = Sums { state: state_sha256(&value)?, tensors: sha256_file(tmp.join(TENSORS_FILE))? };
        let json = serde_json::to_vec_pretty(&EnvelopeOut { kind, format_version, state: &value, sha256 })?;
        std::fs::write(tmp.join(STATE_FILE), json)?;
        if exists {
            let old = sibling(dir, "old");
            std::fs::rename(dir, &old)?;
            if let Err(e) = std::fs::rename(&tmp, dir) {
                let _ = std::fs::rename(&old, dir);
                return Err(e.into());
            }
            let _ = std::fs::remove_dir_all(&old);
        } else {
            std::fs::rename(&tmp, dir)?;
        }
        Ok(())
    };
    let out = write();
    if out.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    out
}

/// A checkpoint directory read by [`load_dir`].
#[derive(Debug)]
pub struct Checkpoint<S> {
    /// The component's state from `state.json`.
    pub state: S,
    /// Every tensor of `tensors.safetensors`, by name.
    pub tensors: BTreeMap<String, Tensor>,
    /// The directory, for error messages.
    pub path: String,
}

/// Reads the checkpoint directory `dir` written by [`save_dir`] for component `kind`, format
/// `format_version`, after verifying both content hashes that `state.json` records (every
/// change to a value of the state or to a byte of the tensor file is caught) and that every
/// floating-point tensor is finite. Nothing is applied to any object: check, then copy.
///
/// # Errors
/// [`RlNnError::MissingFile`] (the directory or one of its files), [`RlNnError::CorruptCheckpoint`]
/// (bad JSON, a hash that differs, a state that does not deserialise, a bad tensor file),
/// [`RlNnError::FormatMismatch`] (another kind or format version, or no hashes: a checkpoint
/// written before they existed), [`RlNnError::NonFiniteTensor`].
pub fn load_dir<S: DeserializeOwned>(dir: impl AsRef<Path>, kind: &str, format_version: u32) -> Result<Checkpoint<S>> {
    let dir = dir.as_ref();
    if !dir.is_dir() {
        return Err(RlNnError::MissingFile { path: path_str(dir) });
    }
    let state_path = dir.join(STATE_FILE);
    let shown = path_str(&state_path);
    let bytes = match std::fs::read(&state_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(RlNnError::MissingFile { path: shown }),
        Err(e) => return Err(RlNnError::CorruptCheckpoint { path: shown, reason: e.to_string() }),
    };
    let env: EnvelopeIn = serde_json::from_slice(&bytes)
        .map_err(|e| RlNnError::CorruptCheckpoint { path: shown.clone(), reason: e.to_string() })?;
    if env.kind != kind {
        return Err(RlNnError::FormatMismatch {
            path: shown,
            what: "kind".into(),
            expected: kind.into(),
            got: env.kind,
        });
    }
    if env.format_version != format_version {
        return Err(RlNnError::FormatMismatch {
            path: shown,
            what: "format_version".into(),
            expected: format_version.to_string(),
            got: env.format_version.to_string(),
        });
    }
    let Some(sums) = env.sha256 else {
        return Err(RlNnError::FormatMismatch {
            path: shown,
            what: "sha256".into(),
            expected: "the content hashes of the state and the tensors".into(),
            got: "none (written by rl-nn before checkpoints carried hashes; save it again)".into(),
        });
    };
    let state_sum = state_sha256(&env.state)?;
    if state_sum != sums.state {
        return Err(RlNnError::CorruptCheckpoint {
            path: shown,
            reason: format!("the state hashes to sha256 {state_sum}, the file records {}", sums.state),
        });
    }
    let tensors_path = dir.join(TENSORS_FILE);
    let tensors_sum = sha256_file(&tensors_path)?;
    if tensors_sum != sums.tensors {
        return Err(RlNnError::CorruptCheckpoint {
            path: path_str(&tensors_path),
            reason: format!("the file hashes to sha256 {tensors_sum}, {STATE_FILE} records {}", sums.tensors),
        });
    }
    let state: S = serde_json::from_value(env.state)
        .map_err(|e| RlNnError::CorruptCheckpoint { path: shown.clone(), reason: e.to_string() })?;
    let tensors = read_tensors(&tensors_path)?;
    Ok(Checkpoint { state, tensors, path: path_str(dir) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlp::{Mlp, MlpConfig};
    use rl_core::Params;
    use tch::Kind;

    fn model(vs: &VarStore, hidden: i64, seed: u64) -> Mlp {
        Mlp::new(&vs.root(), 3, 2, &MlpConfig::new([hidden]).check().unwrap(), &mut rl_core::rng_from_seed(seed))
            .unwrap()
    }

    fn x() -> Tensor {
        crate::rand::standard_normal(&[4, 3], (Kind::Float, Device::Cpu), &mut rl_core::rng_from_seed(99)).unwrap()
    }

    #[test]
    fn roundtrip_restores_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.safetensors");
        let a = VarStore::new(Device::Cpu);
        let ma = model(&a, 8, 0);
        save(&a, &file).unwrap();
        let b = VarStore::new(Device::Cpu);
        let mb = model(&b, 8, 1);
        assert!(!ma.f_forward(&x()).unwrap().equal(&mb.f_forward(&x()).unwrap()));
        load(&b, &file, LoadMode::Strict).unwrap();
        assert!(ma.f_forward(&x()).unwrap().equal(&mb.f_forward(&x()).unwrap()));
        // no temporary file is left behind
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["m.safetensors"]);
    }

    #[test]
    fn missing_and_misshaped_tensors_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.safetensors");
        let a = VarStore::new(Device::Cpu);
        let _ma = model(&a, 8, 0);
        // drop one tensor
        let vars: Vec<(String, Tensor)> =
            var_store_tensors(&a, "").into_iter().filter(|(n, _)| n != "1.bias").collect();
        save_tensors(&vars, &file).unwrap();
        let b = VarStore::new(Device::Cpu);
        let _mb = model(&b, 8, 1);
        let before = b.variables()["0.weight"].copy();
        match load(&b, &file, LoadMode::Strict) {
            Err(RlNnError::MissingTensor { name, .. }) => assert_eq!(name, "1.bias"),
            other => panic!("expected MissingTensor, got {other:?}"),
        }
        // nothing was copied
        assert!(b.variables()["0.weight"].equal(&before));

        save(&a, &file).unwrap();
        let c = VarStore::new(Device::Cpu);
        let _mc = model(&c, 5, 0);
        match load(&c, &file, LoadMode::Strict) {
            Err(RlNnError::TensorShape { name, expected, got, .. }) => {
                assert_eq!(name, "0.bias");
                assert_eq!(expected, vec![5]);
                assert_eq!(got, vec![8]);
            }
            other => panic!("expected TensorShape, got {other:?}"),
        }
        let mut ints = var_store_tensors(&a, "");
        ints[0].1 = ints[0].1.to_kind(Kind::Int64);
        save_tensors(&ints, &file).unwrap();
        assert!(matches!(load(&b, &file, LoadMode::Strict), Err(RlNnError::CorruptCheckpoint { .. })));
        assert!(matches!(
            save_tensors(&[("a", Tensor::from(1.0)), ("a", Tensor::from(2.0))], &file),
            Err(RlNnError::InvalidName { .. })
        ));
    }

    #[test]
    fn extra_and_corrupt_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.safetensors");
        let a = VarStore::new(Device::Cpu);
        let _ma = model(&a, 8, 0);
        let mut vars = var_store_tensors(&a, "");
        vars.push(("optim.step".into(), Tensor::from_slice(&[3i64])));
        save_tensors(&vars, &file).unwrap();
        let b = VarStore::new(Device::Cpu);
        let _mb = model(&b, 8, 1);
        assert!(
            matches!(load(&b, &file, LoadMode::Strict), Err(RlNnError::UnexpectedTensors { ref names, .. }) if names == &["optim.step"])
        );
        load(&b, &file, LoadMode::AllowExtra).unwrap();

        let bad = dir.path().join("bad.safetensors");
        std::fs::write(&bad, b"\xff\xff\xff\xff\xff\xff\xff\x7fgarbage").unwrap();
        assert!(matches!(load(&b, &bad, LoadMode::Strict), Err(RlNnError::CorruptCheckpoint { .. })));
        std::fs::write(&bad, b"abc").unwrap();
        assert!(matches!(load(&b, &bad, LoadMode::Strict), Err(RlNnError::CorruptCheckpoint { .. })));
        // truncated real file
        let full = std::fs::read(&file).unwrap();
        std::fs::write(&bad, &full[..full.len() / 2]).unwrap();
        assert!(matches!(load(&b, &bad, LoadMode::Strict), Err(RlNnError::CorruptCheckpoint { .. })));
        assert!(matches!(load(&b, dir.path().join("nope"), LoadMode::Strict), Err(RlNnError::MissingFile { .. })));
        assert!(matches!(load(&b, dir.path(), LoadMode::Strict), Err(RlNnError::CorruptCheckpoint { .. })));
    }

    #[test]
    fn checkpoint_directories_roundtrip_and_report_each_problem() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ckpt");
        let a = VarStore::new(Device::Cpu);
        let _ma = model(&a, 8, 0);
        let state = (7u32, String::from("hello"));
        save_dir(&dir, "thing", 2, &state, &var_store_tensors(&a, "net.")).unwrap();
        let ck = load_dir::<(u32, String)>(&dir, "thing", 2).unwrap();
        assert_eq!(ck.state, state);
        assert_eq!(ck.tensors.len(), 4);
        let b = VarStore::new(Device::Cpu);
        let _mb = model(&b, 8, 1);
        load_map(&b, &ck.tensors, "net.", LoadMode::Strict, &ck.path).unwrap();
        assert!(b.variables()["1.weight"].equal(&a.variables()["1.weight"]));
        // overwriting replaces the directory atomically; no temporaries are left
        save_dir(&dir, "thing", 2, &(8u32, String::from("again")), &var_store_tensors(&a, "net.")).unwrap();
        assert_eq!(load_dir::<(u32, String)>(&dir, "thing", 2).unwrap().state.0, 8);
        let names: Vec<_> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["ckpt"]);

        assert!(
            matches!(load_dir::<(u32, String)>(&dir, "other", 2), Err(RlNnError::FormatMismatch { ref what, .. }) if what == "kind")
        );
        assert!(matches!(
            load_dir::<(u32, String)>(&dir, "thing", 3),
            Err(RlNnError::FormatMismatch { ref what, .. }) if what == "format_version"
        ));
        assert!(matches!(load_dir::<(String, u32)>(&dir, "thing", 2), Err(RlNnError::CorruptCheckpoint { .. })));
        assert!(matches!(
            load_dir::<(u32, String)>(root.path().join("none"), "thing", 2),
            Err(RlNnError::MissingFile { .. })
        ));
        std::fs::write(dir.join(STATE_FILE), b"{not json").unwrap();
        assert!(matches!(load_dir::<(u32, String)>(&dir, "thing", 2), Err(RlNnError::CorruptCheckpoint { .. })));
        std::fs::remove_file(dir.join(STATE_FILE)).unwrap();
        assert!(matches!(load_dir::<(u32, String)>(&dir, "thing", 2), Err(RlNnError::MissingFile { .. })));
        save_dir(&dir, "thing", 2, &state, &var_store_tensors(&a, "net.")).unwrap();
        std::fs::remove_file(dir.join(TENSORS_FILE)).unwrap();
        assert!(matches!(load_dir::<(u32, String)>(&dir, "thing", 2), Err(RlNnError::MissingFile { .. })));

        // a directory with other files in it, or a file, is never replaced
        let other = root.path().join("mine");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes.txt"), b"keep").unwrap();
        assert!(matches!(
            save_dir(&other, "thing", 2, &state, &var_store_tensors(&a, "")),
            Err(RlNnError::InvalidName { .. })
        ));
        assert_eq!(std::fs::read(other.join("notes.txt")).unwrap(), b"keep");
        let f = root.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        assert!(save_dir(&f, "thing", 2, &state, &var_store_tensors(&a, "")).is_err());
        // a strict map load names the extras under its prefix only
        let mut map: BTreeMap<String, Tensor> = var_store_tensors(&a, "net.").into_iter().collect();
        map.insert("net.extra".into(), Tensor::from(1.0));
        map.insert("optim.x".into(), Tensor::from(1.0));
        assert!(
            matches!(check_map(&b, &map, "net.", LoadMode::Strict, "m"), Err(RlNnError::UnexpectedTensors { ref names, .. }) if names == &["net.extra"])
        );
        check_map(&b, &map, "net.", LoadMode::AllowExtra, "m").unwrap();
    }
}
