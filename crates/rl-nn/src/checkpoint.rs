//! Checkpoints in the safetensors format, with typed errors on any mismatch.
//!
//! [`save`] writes every variable of a `VarStore` under its name. [`load`] checks the whole file
//! against the store *before* copying anything, so a failed load leaves the model untouched:
//! a missing tensor gives [`RlNnError::MissingTensor`], a wrong shape
//! [`RlNnError::TensorShape`], extra tensors (with [`LoadMode::Strict`])
//! [`RlNnError::UnexpectedTensors`], and an unreadable file [`RlNnError::CorruptCheckpoint`].

use std::collections::BTreeMap;
use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Tensor};

use crate::error::{Result, RlNnError};

/// How [`load`] treats tensors in the file that the store does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Extra tensors are an error.
    #[default]
    Strict,
    /// Extra tensors are ignored (e.g. optimizer state saved beside the weights).
    AllowExtra,
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// Writes named tensors (moved to CPU, made contiguous) to `path`.
///
/// # Errors
/// I/O or libtorch failures.
pub fn save_tensors<S: AsRef<str>>(tensors: &[(S, Tensor)], path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)?;
        }
    }
    let cpu: Vec<(&str, Tensor)> = tensors
        .iter()
        .map(|(n, t)| Ok((n.as_ref(), t.f_to_device(Device::Cpu)?.f_contiguous()?)))
        .collect::<Result<_>>()?;
    Tensor::write_safetensors(&cpu, path)?;
    Ok(())
}

/// Saves every variable of `vs` to `path`.
///
/// # Errors
/// I/O or libtorch failures.
pub fn save(vs: &VarStore, path: impl AsRef<Path>) -> Result<()> {
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    let list: Vec<(String, Tensor)> = vars.into_iter().collect();
    save_tensors(&list, path)
}

/// Reads every tensor of a safetensors file, by name.
///
/// # Errors
/// [`RlNnError::CorruptCheckpoint`] when the file is missing, truncated or not safetensors.
pub fn read_tensors(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| RlNnError::CorruptCheckpoint { path: path_str(path), reason: e.to_string() })?;
    // Parse the header ourselves first: safetensors' own parser can be handed arbitrary bytes,
    // and we want the reason in our error.
    if bytes.len() < 8 {
        return Err(RlNnError::CorruptCheckpoint {
            path: path_str(path),
            reason: format!("file has {} bytes, too short for a header", bytes.len()),
        });
    }
    Tensor::read_safetensors(path)
        .map(|v| v.into_iter().collect())
        .map_err(|e| RlNnError::CorruptCheckpoint { path: path_str(path), reason: e.to_string() })
}

/// Loads `path` into the variables of `vs` (converted to each variable's kind and device).
///
/// # Errors
/// See the module docs; on error no variable has been modified.
pub fn load(vs: &VarStore, path: impl AsRef<Path>, mode: LoadMode) -> Result<()> {
    let path = path.as_ref();
    let file = read_tensors(path)?;
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    for (name, var) in &vars {
        let t = file.get(name).ok_or_else(|| RlNnError::MissingTensor { path: path_str(path), name: name.clone() })?;
        if t.size() != var.size() {
            return Err(RlNnError::TensorShape {
                path: path_str(path),
                name: name.clone(),
                expected: var.size(),
                got: t.size(),
            });
        }
    }
    if mode == LoadMode::Strict {
        let extra: Vec<String> = file.keys().filter(|k| !vars.contains_key(*k)).cloned().collect();
        if !extra.is_empty() {
            return Err(RlNnError::UnexpectedTensors { path: path_str(path), names: extra });
        }
    }
    tch::no_grad(|| -> Result<()> {
        for (name, var) in &vars {
            let mut v = var.shallow_clone();
            // presence checked above
            if let Some(t) = file.get(name) {
                v.f_copy_(&t.f_to_kind(var.kind())?.f_to_device(var.device())?)?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlp::{Mlp, MlpConfig};
    use tch::Kind;

    fn model(vs: &VarStore, hidden: i64) -> Mlp {
        Mlp::new(&vs.root(), 3, 2, &MlpConfig::new([hidden])).unwrap()
    }

    #[test]
    fn roundtrip_restores_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.safetensors");
        let a = VarStore::new(Device::Cpu);
        let ma = model(&a, 8);
        save(&a, &file).unwrap();
        let b = VarStore::new(Device::Cpu);
        let mb = model(&b, 8);
        load(&b, &file, LoadMode::Strict).unwrap();
        let x = Tensor::randn([4, 3], (Kind::Float, Device::Cpu));
        let d = (ma.f_forward(&x).unwrap() - mb.f_forward(&x).unwrap()).abs().max().double_value(&[]);
        assert_eq!(d, 0.0);
    }

    #[test]
    fn missing_and_misshaped_tensors_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.safetensors");
        let a = VarStore::new(Device::Cpu);
        let _ma = model(&a, 8);
        // drop one tensor
        let mut vars: Vec<(String, Tensor)> = a.variables().into_iter().filter(|(n, _)| n != "1.bias").collect();
        vars.sort_by(|x, y| x.0.cmp(&y.0));
        save_tensors(&vars, &file).unwrap();
        let b = VarStore::new(Device::Cpu);
        let _mb = model(&b, 8);
        let before = b.variables()["0.weight"].copy();
        match load(&b, &file, LoadMode::Strict) {
            Err(RlNnError::MissingTensor { name, .. }) => assert_eq!(name, "1.bias"),
            other => panic!("expected MissingTensor, got {other:?}"),
        }
        // nothing was copied
        assert_eq!((b.variables()["0.weight"].copy() - before).abs().max().double_value(&[]), 0.0);

        save(&a, &file).unwrap();
        let c = VarStore::new(Device::Cpu);
        let _mc = model(&c, 5);
        match load(&c, &file, LoadMode::Strict) {
            Err(RlNnError::TensorShape { name, expected, got, .. }) => {
                assert_eq!(name, "0.bias");
                assert_eq!(expected, vec![5]);
                assert_eq!(got, vec![8]);
            }
            other => panic!("expected TensorShape, got {other:?}"),
        }
    }

    #[test]
    fn extra_and_corrupt_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.safetensors");
        let a = VarStore::new(Device::Cpu);
        let _ma = model(&a, 8);
        let mut vars: Vec<(String, Tensor)> = a.variables().into_iter().collect();
        vars.push(("optim.step".into(), Tensor::from_slice(&[3i64])));
        save_tensors(&vars, &file).unwrap();
        let b = VarStore::new(Device::Cpu);
        let _mb = model(&b, 8);
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
        assert!(matches!(
            load(&b, dir.path().join("nope"), LoadMode::Strict),
            Err(RlNnError::CorruptCheckpoint { .. })
        ));
    }
}
