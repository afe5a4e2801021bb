//! The tensor-holding parts of a stateful component (variable stores, Adam optimisers, loose
//! tensors), each under a name prefix: gathered into one tensor list for
//! [`crate::checkpoint::save_dir`], checked completely against a loaded file before anything
//! is copied, then restored. Every agent and algorithm of the workspace checkpoints through
//! this (rl-agents' TD3/SAC/PPO, offline-rl's algorithms), so their checkpoints name their
//! tensors the same way:
//!
//! | part | tensor names |
//! |---|---|
//! | store `"actor"` | `actor.<variable path>` |
//! | optimiser `"actor"` | `optim.actor.<Adam state name>` |
//! | tensor `"log_alpha"` | `log_alpha` |
//!
//! ```
//! use rl_nn::optim::{Adam, AdamParams};
//! use rl_nn::parts::Parts;
//! use rl_core::Params;
//! use tch::nn::VarStore;
//! use tch::{Device, Kind, Tensor};
//!
//! let vs = VarStore::new(Device::Cpu);
//! let _w = vs.root().zeros("w", &[2, 3]);
//! let opt = Adam::for_var_store(AdamParams::default().check()?, &vs)?;
//! let scale = Tensor::ones([1], (Kind::Float, Device::Cpu));
//! let parts = Parts::new().store("net", &vs).optim("net", &opt).tensor("scale", &scale);
//! let file: std::collections::BTreeMap<String, Tensor> = parts.collect()?.into_iter().collect();
//! assert!(file.contains_key("net.w") && file.contains_key("scale"));
//! parts.check(&file, "<memory>")?; // exactly these names, shapes and finite values
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};

use tch::nn::VarStore;
use tch::Tensor;

use crate::checkpoint::{self, LoadMode};
use crate::error::{Result, RlNnError};
use crate::optim::Adam;

/// The parts of a component that hold tensors, each under a name prefix (see the module
/// docs for the naming). Built with [`Parts::new`] and the `store` / `optim` / `tensor`
/// methods; read-only: restoring takes mutable access and is [`restore`].
#[derive(Debug, Default)]
pub struct Parts<'a> {
    /// Variable stores, saved as `prefix.<variable>`.
    pub stores: Vec<(&'a str, &'a VarStore)>,
    /// Adam optimisers, saved as `optim.prefix.<state>`.
    pub optims: Vec<(&'a str, &'a Adam)>,
    /// Loose tensors (a temperature, a normaliser), saved under their own name.
    pub tensors: Vec<(&'a str, &'a Tensor)>,
}

impl<'a> Parts<'a> {
    /// No parts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a variable store under `prefix`.
    #[must_use]
    pub fn store(mut self, prefix: &'a str, vs: &'a VarStore) -> Self {
        self.stores.push((prefix, vs));
        self
    }

    /// Adds an optimiser's state under `optim.prefix`.
    #[must_use]
    pub fn optim(mut self, prefix: &'a str, opt: &'a Adam) -> Self {
        self.optims.push((prefix, opt));
        self
    }

    /// Adds a loose tensor under `name`.
    #[must_use]
    pub fn tensor(mut self, name: &'a str, t: &'a Tensor) -> Self {
        self.tensors.push((name, t));
        self
    }

    /// Every tensor, named: the stores' variables (shallow copies), the optimisers' state and
    /// deep copies of the loose tensors.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn collect(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = weights(&self.stores);
        for (prefix, opt) in &self.optims {
            out.extend(opt.state_tensors(&format!("optim.{prefix}."))?);
        }
        for (name, t) in &self.tensors {
            let mut c = t.f_detach()?.f_zeros_like()?;
            c.f_copy_(t)?;
            out.push(((*name).to_owned(), c));
        }
        Ok(out)
    }

    /// Checks that `file` holds exactly the tensors of these parts (names, shapes, finite
    /// values), copying nothing; `path` names the file in errors.
    ///
    /// # Errors
    /// [`RlNnError::MissingTensor`], [`RlNnError::TensorShape`], [`RlNnError::NonFiniteTensor`],
    /// [`RlNnError::UnexpectedTensors`] (a name no part has), and the optimisers' state checks.
    pub fn check(&self, file: &BTreeMap<String, Tensor>, path: &str) -> Result<()> {
        let mut known = check_stores(&self.stores, file, path)?;
        for (prefix, opt) in &self.optims {
            let p = format!("optim.{prefix}.");
            opt.check_state_tensors(file, &p, LoadMode::Strict, path)?;
            known.extend(opt.state_tensors(&p)?.into_iter().map(|(k, _)| k));
        }
        for (name, t) in &self.tensors {
            let f = file
                .get(*name)
                .ok_or_else(|| RlNnError::MissingTensor { path: path.into(), name: (*name).to_owned() })?;
            if f.size() != t.size() {
                return Err(RlNnError::TensorShape {
                    path: path.into(),
                    name: (*name).to_owned(),
                    expected: t.size(),
                    got: f.size(),
                });
            }
            checkpoint::check_finite_tensor(f, name, path)?;
            known.insert((*name).to_owned());
        }
        refuse_extra(file, &known, path)
    }
}

/// Copies `file` back into the parts (call [`Parts::check`] on the same parts first: this
/// assumes every name is there with its shape). Loose tensors keep their kind and device.
///
/// # Errors
/// libtorch failures, and the optimisers' own load checks.
pub fn restore(
    stores: &[(&str, &VarStore)],
    optims: &mut [(&str, &mut Adam)],
    tensors: &mut [(&str, &mut Tensor)],
    file: &BTreeMap<String, Tensor>,
    path: &str,
) -> Result<()> {
    for (prefix, vs) in stores {
        checkpoint::load_map(vs, file, &format!("{prefix}."), LoadMode::Strict, path)?;
    }
    for (prefix, opt) in optims.iter_mut() {
        opt.load_state_tensors(file, &format!("optim.{prefix}."), LoadMode::Strict, path)?;
    }
    for (name, t) in tensors.iter_mut() {
        let src =
            file.get(*name).ok_or_else(|| RlNnError::MissingTensor { path: path.into(), name: (*name).to_owned() })?;
        let src = src.f_to_kind(t.f_kind()?)?.f_to_device(t.device())?;
        tch::no_grad(|| t.f_copy_(&src))?;
    }
    Ok(())
}

/// The variables of `stores` under `prefix.` names (shallow copies; no optimiser state): the
/// weights alone, e.g. to compare two runs or to hand to another implementation.
pub fn weights(stores: &[(&str, &VarStore)]) -> Vec<(String, Tensor)> {
    stores.iter().flat_map(|(prefix, vs)| checkpoint::var_store_tensors(vs, &format!("{prefix}."))).collect()
}

/// Copies the weights `file` (as [`weights`] names them) into `stores`: every variable must be
/// present with its shape and finite, and `file` may hold no other name; all of it is checked
/// before anything is copied. Errors name the source `"<weights>"`.
///
/// # Errors
/// As [`Parts::check`].
pub fn set_weights(stores: &[(&str, &VarStore)], file: &BTreeMap<String, Tensor>) -> Result<()> {
    const WHAT: &str = "<weights>";
    let known = check_stores(stores, file, WHAT)?;
    refuse_extra(file, &known, WHAT)?;
    for (prefix, vs) in stores {
        checkpoint::load_map(vs, file, &format!("{prefix}."), LoadMode::Strict, WHAT)?;
    }
    Ok(())
}

fn check_stores(stores: &[(&str, &VarStore)], file: &BTreeMap<String, Tensor>, path: &str) -> Result<BTreeSet<String>> {
    let mut known = BTreeSet::new();
    for (prefix, vs) in stores {
        let p = format!("{prefix}.");
        checkpoint::check_map(vs, file, &p, LoadMode::Strict, path)?;
        known.extend(checkpoint::var_store_tensors(vs, &p).into_iter().map(|(k, _)| k));
    }
    Ok(known)
}

fn refuse_extra(file: &BTreeMap<String, Tensor>, known: &BTreeSet<String>, path: &str) -> Result<()> {
    let extra: Vec<String> = file.keys().filter(|k| !known.contains(*k)).cloned().collect();
    if !extra.is_empty() {
        return Err(RlNnError::UnexpectedTensors { path: path.into(), names: extra });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::AdamParams;
    use rl_core::Params;
    use tch::{Device, Kind};

    fn setup() -> (VarStore, Adam, Tensor) {
        let vs = VarStore::new(Device::Cpu);
        let w = vs.root().ones("w", &[2, 3]);
        let opt = Adam::for_var_store(AdamParams::default().check().unwrap(), &vs).unwrap();
        // one step so the optimiser holds moments and a step count
        let mut opt = opt;
        opt.backward_step(&w.sum(Kind::Float)).unwrap();
        (vs, opt, Tensor::from_slice(&[0.5f32]))
    }

    #[test]
    fn round_trip_and_refusals() {
        let (vs, opt, t) = setup();
        let file: BTreeMap<String, Tensor> = Parts::new()
            .store("net", &vs)
            .optim("net", &opt)
            .tensor("scale", &t)
            .collect()
            .unwrap()
            .into_iter()
            .collect();
        let (vs2, mut opt2, mut t2) = {
            let vs2 = VarStore::new(Device::Cpu);
            let _ = vs2.root().zeros("w", &[2, 3]);
            let o = Adam::for_var_store(AdamParams::default().check().unwrap(), &vs2).unwrap();
            (vs2, o, Tensor::from_slice(&[0.0f32]))
        };
        // the fresh optimiser has no state yet: its own parts describe it, the file is checked
        // against the source's parts
        Parts::new().store("net", &vs).optim("net", &opt).tensor("scale", &t).check(&file, "f").unwrap();
        restore(&[("net", &vs2)], &mut [("net", &mut opt2)], &mut [("scale", &mut t2)], &file, "f").unwrap();
        assert_eq!(t2.double_value(&[0]), 0.5);
        let (w, w2) = (&weights(&[("net", &vs)])[0].1, &weights(&[("net", &vs2)])[0].1);
        assert!(w.double_value(&[0, 0]) < 1.0, "the source moved");
        assert!(w.equal(w2), "weights restored");
        for ((ka, ta), (kb, tb)) in opt.state_tensors("").unwrap().iter().zip(opt2.state_tensors("").unwrap().iter()) {
            assert_eq!(ka, kb);
            assert!(ta.equal(tb), "optimiser state {ka} restored");
        }
        // a missing, an extra, a misshapen and a NaN tensor are refused before any copy
        let parts = Parts::new().store("net", &vs).tensor("scale", &t);
        let mut f: BTreeMap<String, Tensor> = parts.collect().unwrap().into_iter().collect();
        f.remove("scale");
        assert!(matches!(parts.check(&f, "f"), Err(RlNnError::MissingTensor { .. })));
        let mut f: BTreeMap<String, Tensor> = parts.collect().unwrap().into_iter().collect();
        f.insert("other".into(), Tensor::zeros([1], (Kind::Float, Device::Cpu)));
        assert!(matches!(parts.check(&f, "f"), Err(RlNnError::UnexpectedTensors { .. })));
        f.remove("other");
        f.insert("scale".into(), Tensor::zeros([2], (Kind::Float, Device::Cpu)));
        assert!(matches!(parts.check(&f, "f"), Err(RlNnError::TensorShape { .. })));
        f.insert("scale".into(), Tensor::from_slice(&[f32::NAN]));
        assert!(matches!(parts.check(&f, "f"), Err(RlNnError::NonFiniteTensor { .. })));
    }

    #[test]
    fn set_weights_is_all_or_nothing() {
        let (vs, _, _) = setup();
        let vs2 = VarStore::new(Device::Cpu);
        let w2 = vs2.root().zeros("w", &[2, 3]);
        let mut file: BTreeMap<String, Tensor> = weights(&[("net", &vs)]).into_iter().collect();
        file.insert("net.extra".into(), Tensor::zeros([1], (Kind::Float, Device::Cpu)));
        assert!(set_weights(&[("net", &vs2)], &file).is_err());
        assert_eq!(w2.sum(Kind::Float).double_value(&[]), 0.0, "nothing copied");
        file.remove("net.extra");
        set_weights(&[("net", &vs2)], &file).unwrap();
        assert!(w2.equal(&file["net.w"]));
    }
}
