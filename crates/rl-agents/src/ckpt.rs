//! Checkpoint plumbing shared by the agents: named variable stores and optimisers saved into
//! one `tensors.safetensors`, checked completely before anything is copied back.

use std::collections::BTreeMap;

use rl_nn::optim::Adam;
use rl_nn::LoadMode;
use tch::nn::VarStore;
use tch::Tensor;

use crate::error::{AgentError, Result};

/// The parts of an agent that hold tensors, each under a name prefix.
pub(crate) struct Parts<'a> {
    pub(crate) stores: Vec<(&'a str, &'a VarStore)>,
    pub(crate) optims: Vec<(&'a str, &'a Adam)>,
    pub(crate) tensors: Vec<(&'a str, &'a Tensor)>,
}

impl Parts<'_> {
    pub(crate) fn collect(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        for (prefix, vs) in &self.stores {
            out.extend(rl_nn::checkpoint::var_store_tensors(vs, &format!("{prefix}.")));
        }
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

    /// Checks that `file` holds exactly the tensors of these parts (names, shapes, kinds,
    /// finite values).
    pub(crate) fn check(&self, file: &BTreeMap<String, Tensor>, path: &str) -> Result<()> {
        let mut known = std::collections::BTreeSet::new();
        for (prefix, vs) in &self.stores {
            let p = format!("{prefix}.");
            rl_nn::checkpoint::check_map(vs, file, &p, LoadMode::Strict, path)?;
            known.extend(rl_nn::checkpoint::var_store_tensors(vs, &p).into_iter().map(|(k, _)| k));
        }
        for (prefix, opt) in &self.optims {
            let p = format!("optim.{prefix}.");
            opt.check_state_tensors(file, &p, LoadMode::Strict, path)?;
            known.extend(opt.state_tensors(&p)?.into_iter().map(|(k, _)| k));
        }
        for (name, t) in &self.tensors {
            let f = file
                .get(*name)
                .ok_or_else(|| rl_nn::RlNnError::MissingTensor { path: path.into(), name: (*name).to_owned() })?;
            if f.size() != t.size() {
                return Err(rl_nn::RlNnError::TensorShape {
                    path: path.into(),
                    name: (*name).to_owned(),
                    expected: t.size(),
                    got: f.size(),
                }
                .into());
            }
            rl_nn::checkpoint::check_finite_tensor(f, name, path)?;
            known.insert((*name).to_owned());
        }
        let extra: Vec<String> = file.keys().filter(|k| !known.contains(*k)).cloned().collect();
        if !extra.is_empty() {
            return Err(rl_nn::RlNnError::UnexpectedTensors { path: path.into(), names: extra }.into());
        }
        Ok(())
    }
}

/// Copies everything back (call [`Parts::check`] first).
pub(crate) fn restore(
    stores: &[(&str, &VarStore)],
    optims: &mut [(&str, &mut Adam)],
    tensors: &mut [(&str, &mut Tensor)],
    file: &BTreeMap<String, Tensor>,
    path: &str,
) -> Result<()> {
    for (prefix, vs) in stores {
        rl_nn::checkpoint::load_map(vs, file, &format!("{prefix}."), LoadMode::Strict, path)?;
    }
    for (prefix, opt) in optims.iter_mut() {
        opt.load_state_tensors(file, &format!("optim.{prefix}."), LoadMode::Strict, path)?;
    }
    for (name, t) in tensors.iter_mut() {
        let src = file[*name].f_to_kind(t.f_kind()?)?.f_to_device(t.device())?;
        tch::no_grad(|| t.f_copy_(&src))?;
    }
    Ok(())
}

/// `AgentError::Corrupt` when a saved field differs from this object's.
pub(crate) fn same<T: PartialEq + std::fmt::Debug>(path: &str, what: &str, saved: &T, ours: &T) -> Result<()> {
    if saved != ours {
        return Err(AgentError::Corrupt {
            path: path.into(),
            reason: format!("{what} differs: checkpoint {saved:?}, this object {ours:?}"),
        });
    }
    Ok(())
}
