//! Target-network updates.

use std::collections::HashMap;

use tch::nn::VarStore;
use tch::Tensor;

use crate::error::{Result, RlNnError};

fn paired(target: &VarStore, source: &VarStore) -> Result<Vec<(Tensor, Tensor)>> {
    let t = target.variables();
    let s: HashMap<String, Tensor> = source.variables();
    if t.len() != s.len() {
        return Err(RlNnError::StoreMismatch(format!("target has {} variables, source {}", t.len(), s.len())));
    }
    let mut names: Vec<&String> = t.keys().collect();
    names.sort();
    let mut pairs = Vec::with_capacity(t.len());
    for name in names {
        let tv = &t[name];
        let sv = s.get(name).ok_or_else(|| RlNnError::StoreMismatch(format!("source lacks `{name}`")))?;
        if tv.size() != sv.size() {
            return Err(RlNnError::TensorShape {
                path: "<source store>".into(),
                name: name.clone(),
                expected: tv.size(),
                got: sv.size(),
            });
        }
        pairs.push((tv.shallow_clone(), sv.shallow_clone()));
    }
    Ok(pairs)
}

/// Polyak averaging `target <- tau * source + (1 - tau) * target` for every variable.
///
/// # Errors
/// [`RlNnError::InvalidParameter`] for `tau` outside `[0, 1]`; [`RlNnError::StoreMismatch`] /
/// [`RlNnError::TensorShape`] when the stores do not hold the same variables (nothing is updated).
pub fn soft_update(target: &VarStore, source: &VarStore, tau: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&tau) {
        return Err(RlNnError::invalid("tau", tau, "must lie in [0, 1]"));
    }
    let pairs = paired(target, source)?;
    tch::no_grad(|| -> Result<()> {
        for (mut t, s) in pairs {
            let s = s.f_to_device(t.device())?;
            let _ = t.f_mul_scalar_(1.0 - tau)?;
            let _ = t.f_add_(&s.f_mul_scalar(tau)?)?;
        }
        Ok(())
    })
}

/// Copies every variable of `source` into `target`.
///
/// # Errors
/// As [`soft_update`].
pub fn hard_update(target: &VarStore, source: &VarStore) -> Result<()> {
    let pairs = paired(target, source)?;
    tch::no_grad(|| -> Result<()> {
        for (mut t, s) in pairs {
            t.f_copy_(&s)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlp::{Mlp, MlpConfig};
    use rl_core::Params;
    use tch::Device;

    #[test]
    fn soft_and_hard_updates() {
        let a = VarStore::new(Device::Cpu);
        let b = VarStore::new(Device::Cpu);
        let cfg = MlpConfig::new([4]).check().unwrap();
        let mut rng = rl_core::rng_from_seed(0);
        let _ma = Mlp::new(&a.root(), 2, 1, &cfg, &mut rng).unwrap();
        let _mb = Mlp::new(&b.root(), 2, 1, &cfg, &mut rng).unwrap();
        let before_t = a.variables()["0.weight"].copy();
        let src = b.variables()["0.weight"].copy();
        soft_update(&a, &b, 0.25).unwrap();
        let want = &before_t * 0.75 + &src * 0.25;
        assert!((a.variables()["0.weight"].copy() - want).abs().max().double_value(&[]) < 1e-6);
        hard_update(&a, &b).unwrap();
        assert!((a.variables()["0.weight"].copy() - src).abs().max().double_value(&[]) == 0.0);
        assert!(soft_update(&a, &b, 1.5).is_err());
        let c = VarStore::new(Device::Cpu);
        let _mc = Mlp::new(&c.root(), 3, 1, &cfg, &mut rng).unwrap();
        assert!(matches!(hard_update(&a, &c), Err(RlNnError::TensorShape { .. })));
        // tau at its ends: 0 keeps the target, 1 copies the source
        let d = VarStore::new(Device::Cpu);
        let _md = Mlp::new(&d.root(), 2, 1, &cfg, &mut rng).unwrap();
        let keep = a.variables()["0.weight"].copy();
        soft_update(&a, &d, 0.0).unwrap();
        assert!(a.variables()["0.weight"].equal(&keep));
        soft_update(&a, &d, 1.0).unwrap();
        assert!(a.variables()["0.weight"].equal(&d.variables()["0.weight"]));
        assert!(soft_update(&a, &b, -0.1).is_err());
        // a store with other names or another count of variables
        let e = VarStore::new(Device::Cpu);
        let _me = Mlp::new(&e.root().sub("other"), 2, 1, &cfg, &mut rng).unwrap();
        assert!(matches!(soft_update(&a, &e, 0.5), Err(RlNnError::StoreMismatch(_))));
        let f = VarStore::new(Device::Cpu);
        let _mf = Mlp::new(&f.root(), 2, 1, &MlpConfig::new([4, 4]).check().unwrap(), &mut rng).unwrap();
        assert!(matches!(hard_update(&a, &f), Err(RlNnError::StoreMismatch(_))));
    }
}
