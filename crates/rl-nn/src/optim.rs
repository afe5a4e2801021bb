//! Adam and AdamW with global-norm gradient clipping, whose state (moments and step counts)
//! lives in named tensors, so a checkpoint resumes training exactly.
//!
//! `tch::nn::Optimizer` cannot export its moments, so a run restored from a checkpoint would
//! restart Adam from zero; library code of frugal-rl uses [`Adam`] instead (conventions §4).
//!
//! One step of [`Adam`] on a parameter `p` with gradient `g` follows `torch.optim.Adam` /
//! `torch.optim.AdamW` (single-tensor CPU path, `maximize = False`), operation for operation:
//!
//! ```text
//! t ← t + 1
//! p ← p·(1 − lr·λ)                 if decoupled_weight_decay (AdamW)
//! g ← g + λ·p                      if λ > 0 and not decoupled (Adam's L2 penalty)
//! m ← lerp(m, g, 1 − β1)
//! v ← β2·v + (1 − β2)·g²
//! v̂ ← max(v̂, v)                    if amsgrad (else v̂ = v)
//! p ← p − lr/(1 − β1ᵗ) · m / (√v̂ / √(1 − β2ᵗ) + ε)
//! ```
//!
//! With `max_grad_norm = Some(c)`, the gradients are first scaled as
//! `torch.nn.utils.clip_grad_norm_(params, c)`: `g ← g·min(1, c/(‖g‖₂ + 1e-6))` with `‖g‖₂`
//! the norm of all gradients together.
//!
//! | param | default | meaning | range |
//! |---|---|---|---|
//! | `lr` | 1e-3 | learning rate | `>= 0` |
//! | `beta1` | 0.9 | first-moment decay | `[0, 1)` |
//! | `beta2` | 0.999 | second-moment decay | `[0, 1)` |
//! | `eps` | 1e-8 | added to the denominator, after the bias correction (PyTorch's placement) | `>= 0` |
//! | `weight_decay` | 0 | `λ` | `>= 0` |
//! | `decoupled_weight_decay` | false | AdamW (Loshchilov & Hutter, arXiv 1711.05101) instead of L2 | |
//! | `amsgrad` | false | AMSGrad (Reddi et al., 2018) | |
//! | `max_grad_norm` | none | global-norm clipping threshold | `> 0` |
//!
//! [`AdamParams::adamw`] gives `torch.optim.AdamW`'s defaults (`λ = 0.01`, decoupled).
//!
//! Differences from PyTorch, all documented choices: [`Adam::zero_grad`] zeroes gradients in
//! place (PyTorch's `set_to_none = False`), so a parameter that took no part in the loss is
//! still stepped with a zero gradient (its moments decay); a parameter whose gradient was never
//! defined is skipped and its step count stays put, as in PyTorch. A non-finite gradient norm
//! with clipping on is an error and nothing is changed (PyTorch would write NaN into the
//! parameters).
//!
//! State: for a parameter named `w` and a prefix `optim.`, the tensors `optim.w.exp_avg`,
//! `optim.w.exp_avg_sq`, `optim.w.max_exp_avg_sq` (amsgrad only) and `optim.w.step` (int64,
//! shape `[]`) ([`Adam::state_tensors`]); [`Adam::save`] / [`Adam::load`] write and read a
//! checkpoint directory (`state.json` with the parameters, `tensors.safetensors`).
//!
//! ```
//! use rl_core::Params;
//! use rl_nn::optim::{Adam, AdamParams};
//! use rl_nn::{Mlp, MlpConfig};
//! use tch::{nn::VarStore, Device, Kind, Tensor};
//! let mut rng = rl_core::rng_from_seed(0);
//! let vs = VarStore::new(Device::Cpu);
//! let net = Mlp::new(&vs.root(), 3, 1, &MlpConfig::new([16]).check()?, &mut rng)?;
//! let mut opt = Adam::for_var_store(AdamParams::default().lr(1e-2).max_grad_norm(Some(1.0)).check()?, &vs)?;
//! let x = rl_nn::rand::standard_normal(&[32, 3], (Kind::Float, Device::Cpu), &mut rng)?;
//! let loss = net.f_forward(&x)?.square().mean(Kind::Float);
//! let info = opt.backward_step(&loss)?;
//! assert!(info.grad_norm.is_some());
//! assert_eq!(opt.steps(), 1);
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::checkpoint::{self, LoadMode};
use crate::error::{Result, RlNnError};

/// Parameters of [`Adam`] (see the module docs for the table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdamParams {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay `β1`.
    pub beta1: f64,
    /// Second-moment decay `β2`.
    pub beta2: f64,
    /// Denominator epsilon.
    pub eps: f64,
    /// Weight decay `λ`.
    pub weight_decay: f64,
    /// Decoupled weight decay (AdamW) instead of the L2 penalty.
    pub decoupled_weight_decay: bool,
    /// AMSGrad: normalise by the running maximum of the second moment.
    pub amsgrad: bool,
    /// Global-norm gradient clipping threshold (`None`: no clipping).
    pub max_grad_norm: Option<f64>,
}

impl Default for AdamParams {
    /// `torch.optim.Adam`'s defaults, no clipping.
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_weight_decay: false,
            amsgrad: false,
            max_grad_norm: None,
        }
    }
}

impl AdamParams {
    /// `torch.optim.AdamW`'s defaults: Adam's with `weight_decay = 0.01`, decoupled.
    pub fn adamw() -> Self {
        Self { weight_decay: 0.01, decoupled_weight_decay: true, ..Self::default() }
    }
    /// Sets `lr`.
    #[must_use]
    pub fn lr(mut self, lr: f64) -> Self {
        self.lr = lr;
        self
    }
    /// Sets `beta1`.
    #[must_use]
    pub fn beta1(mut self, beta1: f64) -> Self {
        self.beta1 = beta1;
        self
    }
    /// Sets `beta2`.
    #[must_use]
    pub fn beta2(mut self, beta2: f64) -> Self {
        self.beta2 = beta2;
        self
    }
    /// Sets `eps`.
    #[must_use]
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
    /// Sets `weight_decay`.
    #[must_use]
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }
    /// Sets `decoupled_weight_decay`.
    #[must_use]
    pub fn decoupled_weight_decay(mut self, on: bool) -> Self {
        self.decoupled_weight_decay = on;
        self
    }
    /// Sets `amsgrad`.
    #[must_use]
    pub fn amsgrad(mut self, on: bool) -> Self {
        self.amsgrad = on;
        self
    }
    /// Sets `max_grad_norm`.
    #[must_use]
    pub fn max_grad_norm(mut self, max_grad_norm: Option<f64>) -> Self {
        self.max_grad_norm = max_grad_norm;
        self
    }
}

impl Params for AdamParams {
    type Error = RlNnError;

    fn validate(&self) -> Result<()> {
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return Err(RlNnError::invalid("lr", self.lr, "must be finite and >= 0"));
        }
        if !(0.0..1.0).contains(&self.beta1) {
            return Err(RlNnError::invalid("beta1", self.beta1, "must lie in [0, 1)"));
        }
        if !(0.0..1.0).contains(&self.beta2) {
            return Err(RlNnError::invalid("beta2", self.beta2, "must lie in [0, 1)"));
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(RlNnError::invalid("eps", self.eps, "must be finite and >= 0"));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(RlNnError::invalid("weight_decay", self.weight_decay, "must be finite and >= 0"));
        }
        if let Some(c) = self.max_grad_norm {
            if !(c.is_finite() && c > 0.0) {
                return Err(RlNnError::invalid("max_grad_norm", c, "must be finite and > 0"));
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Slot {
    name: String,
    var: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    max_exp_avg_sq: Option<Tensor>,
    step: u64,
}

/// What one [`Adam::step`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepInfo {
    /// The global gradient norm before clipping (only computed when clipping is on).
    pub grad_norm: Option<f64>,
    /// Number of parameters updated (those with a defined gradient).
    pub updated: usize,
}

/// Adam / AdamW over named parameters (see the module docs).
#[derive(Debug)]
pub struct Adam {
    params: Valid<AdamParams>,
    slots: Vec<Slot>,
}

impl Adam {
    /// An optimiser over `vars` (name, parameter), in the given order. Moments start at zero
    /// on each parameter's device, in its kind.
    ///
    /// # Errors
    /// [`RlNnError::InvalidName`] for an empty or repeated name, [`RlNnError::Kind`] for a
    /// non-floating parameter, libtorch failures.
    pub fn new(params: Valid<AdamParams>, vars: Vec<(String, Tensor)>) -> Result<Self> {
        let mut seen = BTreeSet::new();
        let mut slots = Vec::with_capacity(vars.len());
        for (name, var) in vars {
            if name.is_empty() || !seen.insert(name.clone()) {
                return Err(RlNnError::InvalidName {
                    name,
                    reason: "parameter names must be non-empty and unique".into(),
                });
            }
            crate::check::floating(&name, &var)?;
            let zeros = || -> Result<Tensor> { Ok(var.f_detach()?.f_zeros_like()?) };
            let exp_avg = zeros()?;
            let exp_avg_sq = zeros()?;
            let max_exp_avg_sq = if params.amsgrad { Some(zeros()?) } else { None };
            slots.push(Slot { name, var, exp_avg, exp_avg_sq, max_exp_avg_sq, step: 0 });
        }
        Ok(Self { params, slots })
    }

    /// An optimiser over the trainable variables of `vs`, sorted by name.
    ///
    /// # Errors
    /// As [`Adam::new`].
    pub fn for_var_store(params: Valid<AdamParams>, vs: &VarStore) -> Result<Self> {
        let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().filter(|(_, t)| t.requires_grad()).collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        Self::new(params, vars)
    }

    /// The parameters.
    pub fn params(&self) -> &AdamParams {
        &self.params
    }

    /// The current learning rate.
    pub fn lr(&self) -> f64 {
        self.params.lr
    }

    /// Sets the learning rate (schedules).
    ///
    /// # Errors
    /// [`RlNnError::InvalidParameter`] for a negative or non-finite rate (nothing changes).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.params = self.params.clone().into_inner().lr(lr).check()?;
        Ok(())
    }

    /// Names of the parameters, in order.
    pub fn names(&self) -> Vec<&str> {
        self.slots.iter().map(|s| s.name.as_str()).collect()
    }

    /// The largest per-parameter step count (the number of steps taken when every parameter
    /// always had a gradient).
    pub fn steps(&self) -> u64 {
        self.slots.iter().map(|s| s.step).max().unwrap_or(0)
    }

    /// Zeroes every gradient in place.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn zero_grad(&mut self) -> Result<()> {
        for s in &self.slots {
            let mut g = s.var.grad();
            if g.defined() {
                let _ = g.f_detach_()?;
                let _ = g.f_zero_()?;
            }
        }
        Ok(())
    }

    /// Zeroes the gradients, back-propagates `loss` (a scalar), and takes one [`step`](Self::step).
    ///
    /// # Errors
    /// [`RlNnError::Shape`] for a loss with more than one element; as [`step`](Self::step).
    pub fn backward_step(&mut self, loss: &Tensor) -> Result<StepInfo> {
        if !loss.defined() || loss.numel() != 1 {
            return Err(RlNnError::Shape {
                what: "loss".into(),
                expected: "a scalar".into(),
                got: if loss.defined() { loss.size() } else { vec![] },
            });
        }
        self.zero_grad()?;
        loss.f_backward()?;
        self.step()
    }

    /// One update from the current gradients (clipped first when `max_grad_norm` is set).
    ///
    /// # Errors
    /// [`RlNnError::NonFinite`] when clipping is on and the gradient norm is NaN or infinite
    /// (nothing is changed); libtorch failures.
    pub fn step(&mut self) -> Result<StepInfo> {
        let grads: Vec<Tensor> = self.slots.iter().map(|s| s.var.grad()).collect();
        let p = self.params.get().clone();
        let grad_norm = match p.max_grad_norm {
            Some(c) => {
                let defined: Vec<Tensor> = grads.iter().filter(|g| g.defined()).map(Tensor::shallow_clone).collect();
                Some(clip_grad_norm(&defined, c)?)
            }
            None => None,
        };
        let mut updated = 0;
        tch::no_grad(|| -> Result<()> {
            for (s, g) in self.slots.iter_mut().zip(grads) {
                if !g.defined() {
                    continue;
                }
                s.step += 1;
                updated += 1;
                let var = &mut s.var;
                let mut g = g;
                if p.weight_decay != 0.0 {
                    if p.decoupled_weight_decay {
                        let _ = var.f_mul_scalar_(1.0 - p.lr * p.weight_decay)?;
                    } else {
                        g = g.f_add(&var.f_mul_scalar(p.weight_decay)?)?;
                    }
                }
                let _ = s.exp_avg.f_lerp_(&g, 1.0 - p.beta1)?;
                let _ = s.exp_avg_sq.f_mul_scalar_(p.beta2)?;
                // addcmul with value 1 on (1 − β2)·g: PyTorch's rounding (its kernel may fuse
                // the multiply-add), bit for bit.
                let _ = s.exp_avg_sq.f_addcmul_(&g.f_mul_scalar(1.0 - p.beta2)?, &g)?;
                let step = s.step as f64;
                let bias_correction1 = 1.0 - p.beta1.powf(step);
                let bias_correction2 = 1.0 - p.beta2.powf(step);
                let step_size = p.lr / bias_correction1;
                let bias_correction2_sqrt = bias_correction2.powf(0.5);
                let second = match &mut s.max_exp_avg_sq {
                    Some(mx) => {
                        let m = mx.f_maximum(&s.exp_avg_sq)?;
                        mx.f_copy_(&m)?;
                        mx.shallow_clone()
                    }
                    None => s.exp_avg_sq.shallow_clone(),
                };
                let denom = second.f_sqrt()?.f_div_scalar(bias_correction2_sqrt)?.f_add_scalar(p.eps)?;
                let upd = s.exp_avg.f_mul_scalar(-step_size)?.f_div(&denom)?;
                let _ = var.f_add_(&upd)?;
            }
            Ok(())
        })?;
        Ok(StepInfo { grad_norm, updated })
    }

    fn key(prefix: &str, name: &str, what: &str) -> String {
        format!("{prefix}{name}.{what}")
    }

    /// The optimiser state as named tensors (copies): `{prefix}{name}.exp_avg`,
    /// `.exp_avg_sq`, `.max_exp_avg_sq` (amsgrad) and `.step` (int64, shape `[]`).
    ///
    /// # Errors
    /// libtorch failures.
    pub fn state_tensors(&self, prefix: &str) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::with_capacity(self.slots.len() * 4);
        for s in &self.slots {
            out.push((Self::key(prefix, &s.name, "exp_avg"), dup(&s.exp_avg)?));
            out.push((Self::key(prefix, &s.name, "exp_avg_sq"), dup(&s.exp_avg_sq)?));
            if let Some(m) = &s.max_exp_avg_sq {
                out.push((Self::key(prefix, &s.name, "max_exp_avg_sq"), dup(m)?));
            }
            let step = i64::try_from(s.step).map_err(|_| RlNnError::invalid("step", s.step, "exceeds i64"))?;
            out.push((Self::key(prefix, &s.name, "step"), Tensor::f_from_slice(&[step])?.f_reshape([0i64; 0])?));
        }
        Ok(out)
    }

    /// Checks that `tensors` holds this optimiser's whole state under `prefix` (every name,
    /// shape, finite moments; step counts as one non-negative integer), without changing
    /// anything. With [`LoadMode::Strict`], other tensors under `prefix` are an error. `path`
    /// names the source in errors.
    ///
    /// # Errors
    /// [`RlNnError::MissingTensor`], [`RlNnError::TensorShape`],
    /// [`RlNnError::UnexpectedTensors`], [`RlNnError::CorruptCheckpoint`] (a bad step count),
    /// [`RlNnError::NonFiniteTensor`] (a NaN or infinite moment).
    pub fn check_state_tensors(
        &self,
        tensors: &BTreeMap<String, Tensor>,
        prefix: &str,
        mode: LoadMode,
        path: &str,
    ) -> Result<()> {
        self.read_steps(tensors, prefix, mode, path).map(|_| ())
    }

    fn read_steps(
        &self,
        tensors: &BTreeMap<String, Tensor>,
        prefix: &str,
        mode: LoadMode,
        path: &str,
    ) -> Result<Vec<u64>> {
        let get = |key: String| -> Result<&Tensor> {
            tensors.get(&key).ok_or_else(|| RlNnError::MissingTensor { path: path.into(), name: key })
        };
        let mut expected = BTreeSet::new();
        let mut steps = Vec::with_capacity(self.slots.len());
        for s in &self.slots {
            let mut moments = vec!["exp_avg", "exp_avg_sq"];
            if s.max_exp_avg_sq.is_some() {
                moments.push("max_exp_avg_sq");
            }
            for m in moments {
                let key = Self::key(prefix, &s.name, m);
                let t = get(key.clone())?;
                if t.size() != s.var.size() {
                    return Err(RlNnError::TensorShape {
                        path: path.into(),
                        name: key,
                        expected: s.var.size(),
                        got: t.size(),
                    });
                }
                if !crate::check::is_float(t.f_kind()?) {
                    return Err(RlNnError::CorruptCheckpoint {
                        path: path.into(),
                        reason: format!("`{key}` has kind {:?}, expected floating point", t.kind()),
                    });
                }
                checkpoint::check_finite_tensor(t, &key, path)?;
                expected.insert(key);
            }
            let key = Self::key(prefix, &s.name, "step");
            let t = get(key.clone())?;
            let bad = |why: &str| RlNnError::CorruptCheckpoint { path: path.into(), reason: format!("`{key}` {why}") };
            if t.numel() != 1 || !matches!(t.f_kind()?, Kind::Int64 | Kind::Int | Kind::Float | Kind::Double) {
                return Err(bad("must be one integer"));
            }
            let v = t.f_to_kind(Kind::Double)?.f_double_value(&[])?;
            if !(v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(62)) {
                return Err(bad(&format!("holds {v}, not a step count")));
            }
            steps.push(v as u64);
            expected.insert(key);
        }
        if mode == LoadMode::Strict {
            let extra: Vec<String> =
                tensors.keys().filter(|k| k.starts_with(prefix) && !expected.contains(*k)).cloned().collect();
            if !extra.is_empty() {
                return Err(RlNnError::UnexpectedTensors { path: path.into(), names: extra });
            }
        }
        Ok(steps)
    }

    /// Restores the state from `tensors` (see [`check_state_tensors`](Self::check_state_tensors));
    /// on error nothing is changed.
    ///
    /// # Errors
    /// As [`check_state_tensors`](Self::check_state_tensors); libtorch failures.
    pub fn load_state_tensors(
        &mut self,
        tensors: &BTreeMap<String, Tensor>,
        prefix: &str,
        mode: LoadMode,
        path: &str,
    ) -> Result<()> {
        let steps = self.read_steps(tensors, prefix, mode, path)?;
        // Convert everything first, then copy: a libtorch failure midway is the only way to a
        // partial load, and it cannot come from the file's contents.
        let mut staged = Vec::with_capacity(self.slots.len());
        for s in &self.slots {
            let conv = |what: &str, like: &Tensor| -> Result<Tensor> {
                let t = &tensors[&Self::key(prefix, &s.name, what)];
                Ok(t.f_to_kind(like.f_kind()?)?.f_to_device(like.device())?)
            };
            let m = conv("exp_avg", &s.exp_avg)?;
            let v = conv("exp_avg_sq", &s.exp_avg_sq)?;
            let mx = match &s.max_exp_avg_sq {
                Some(x) => Some(conv("max_exp_avg_sq", x)?),
                None => None,
            };
            staged.push((m, v, mx));
        }
        tch::no_grad(|| -> Result<()> {
            for ((s, (m, v, mx)), step) in self.slots.iter_mut().zip(staged).zip(steps) {
                s.exp_avg.f_copy_(&m)?;
                s.exp_avg_sq.f_copy_(&v)?;
                if let (Some(dst), Some(src)) = (&mut s.max_exp_avg_sq, mx) {
                    dst.f_copy_(&src)?;
                }
                s.step = step;
            }
            Ok(())
        })
    }

    /// Writes a checkpoint directory: `state.json` (kind `"rl_nn.adam"`, the parameters and
    /// names) and `tensors.safetensors` (the state tensors, no prefix).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let state = AdamCheckpoint {
            params: self.params.get().clone(),
            names: self.slots.iter().map(|s| s.name.clone()).collect(),
        };
        checkpoint::save_dir(dir, ADAM_KIND, ADAM_FORMAT, &state, &self.state_tensors("")?)
    }

    /// Reads a directory written by [`save`](Self::save) for the same parameters: restores the
    /// hyper-parameters (the learning rate of a schedule included) and the state. On error
    /// nothing is changed.
    ///
    /// # Errors
    /// [`RlNnError::MissingFile`], [`RlNnError::CorruptCheckpoint`],
    /// [`RlNnError::FormatMismatch`], [`RlNnError::StoreMismatch`] when the parameter names
    /// differ, the errors of [`load_state_tensors`](Self::load_state_tensors);
    /// [`RlNnError::InvalidParameter`] when the saved parameters fail their checks or switch
    /// `amsgrad`.
    pub fn load(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        let checkpoint::Checkpoint { state, tensors, path } =
            checkpoint::load_dir::<AdamCheckpoint>(dir, ADAM_KIND, ADAM_FORMAT)?;
        let names: Vec<String> = self.slots.iter().map(|s| s.name.clone()).collect();
        if state.names != names {
            return Err(RlNnError::StoreMismatch(format!(
                "{path}: the checkpoint optimises {:?}, this optimiser {:?}",
                state.names, names
            )));
        }
        if state.params.amsgrad != self.params.amsgrad {
            return Err(RlNnError::invalid("amsgrad", state.params.amsgrad, "differs from this optimiser's"));
        }
        let params = state.params.check()?;
        self.load_state_tensors(&tensors, "", LoadMode::Strict, &path)?;
        self.params = params;
        Ok(())
    }
}

/// A detached deep copy.
fn dup(t: &Tensor) -> Result<Tensor> {
    let mut r = t.f_detach()?.f_zeros_like()?;
    r.f_copy_(t)?;
    Ok(r)
}

const ADAM_KIND: &str = "rl_nn.adam";
const ADAM_FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdamCheckpoint {
    params: AdamParams,
    names: Vec<String>,
}

/// `torch.nn.utils.clip_grad_norm_(grads' parameters, max_norm)` on the gradients themselves:
/// scales every gradient in place by `min(1, max_norm/(‖g‖₂ + 1e-6))` and returns the total norm
/// before scaling. Undefined gradients are skipped; an empty list has norm 0.
///
/// # Errors
/// [`RlNnError::InvalidParameter`] for a non-positive `max_norm`, [`RlNnError::NonFinite`]
/// for a NaN or infinite total norm (nothing is scaled), libtorch failures.
pub fn clip_grad_norm(grads: &[Tensor], max_norm: f64) -> Result<f64> {
    if !(max_norm.is_finite() && max_norm > 0.0) {
        return Err(RlNnError::invalid("max_norm", max_norm, "must be finite and > 0"));
    }
    let grads: Vec<&Tensor> = grads.iter().filter(|g| g.defined()).collect();
    let Some(first) = grads.first() else {
        return Ok(0.0);
    };
    let device: Device = first.device();
    tch::no_grad(|| -> Result<f64> {
        let norms = grads.iter().map(|g| Ok(g.f_norm()?.f_to_device(device)?)).collect::<Result<Vec<Tensor>>>()?;
        let total = Tensor::f_stack(&norms, 0)?.f_norm()?;
        let value = total.f_to_kind(Kind::Double)?.f_double_value(&[])?;
        if !value.is_finite() {
            return Err(RlNnError::NonFinite { what: "gradient norm".into(), index: 0, value });
        }
        let coef = total.f_add_scalar(1e-6)?.f_reciprocal()?.f_mul_scalar(max_norm)?.f_clamp_max(1.0)?;
        for g in grads {
            let mut g = g.shallow_clone();
            let _ = g.f_mul_(&coef.f_to_device(g.device())?)?;
        }
        Ok(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quad(w: &Tensor) -> Tensor {
        // a fixed quadratic with a non-trivial gradient
        let target = Tensor::from_slice(&[1.0f32, -2.0, 0.5, 3.0]).view([2, 2]);
        (w - target).square().sum(Kind::Float) * 0.5 + w.sum(Kind::Float).square()
    }

    #[test]
    fn params_validate_every_field_and_default_from_serde() {
        AdamParams::default().check().unwrap();
        AdamParams::adamw().check().unwrap();
        let bad = [
            ("lr", AdamParams::default().lr(-1.0)),
            ("beta1", AdamParams::default().beta1(1.0)),
            ("beta2", AdamParams::default().beta2(-0.1)),
            ("eps", AdamParams::default().eps(f64::NAN)),
            ("weight_decay", AdamParams::default().weight_decay(-0.1)),
            ("max_grad_norm", AdamParams::default().max_grad_norm(Some(0.0))),
        ];
        for (name, p) in bad {
            match p.check() {
                Err(RlNnError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{name}: {other:?}"),
            }
        }
        // the ends of each range are valid
        AdamParams::default().lr(0.0).beta1(0.0).beta2(0.0).eps(0.0).weight_decay(0.0).check().unwrap();
        AdamParams::default().max_grad_norm(Some(1e-12)).check().unwrap();
        for (name, p) in [
            ("lr", AdamParams::default().lr(f64::INFINITY)),
            ("beta1", AdamParams::default().beta1(-0.1)),
            ("beta2", AdamParams::default().beta2(1.0)),
            ("eps", AdamParams::default().eps(-1e-9)),
            ("weight_decay", AdamParams::default().weight_decay(f64::NAN)),
            ("max_grad_norm", AdamParams::default().max_grad_norm(Some(f64::INFINITY))),
        ] {
            assert!(matches!(p.check(), Err(RlNnError::InvalidParameter { name: ref n, .. }) if n == name), "{name}");
        }
        let w = AdamParams::adamw();
        assert!(w.decoupled_weight_decay && w.weight_decay == 0.01 && w.lr == 1e-3 && !w.amsgrad);
        let p: AdamParams = serde_json::from_str(r#"{"lr": 0.01, "amsgrad": true}"#).unwrap();
        assert_eq!(p, AdamParams::default().lr(0.01).amsgrad(true));
        assert!(serde_json::from_str::<AdamParams>(r#"{"learning_rate": 0.01}"#).is_err());
        let p = AdamParams::default()
            .beta1(0.5)
            .beta2(0.6)
            .eps(1e-3)
            .weight_decay(0.2)
            .decoupled_weight_decay(true)
            .max_grad_norm(Some(2.0));
        assert_eq!((p.beta1, p.beta2, p.eps, p.weight_decay), (0.5, 0.6, 1e-3, 0.2));
        assert!(p.decoupled_weight_decay && p.max_grad_norm == Some(2.0));
    }

    #[test]
    fn first_step_moves_each_coordinate_by_lr() {
        let w = Tensor::from_slice(&[0.0f32, 0.0, 0.0, 0.0]).view([2, 2]).set_requires_grad(true);
        let mut opt =
            Adam::new(AdamParams::default().lr(0.1).check().unwrap(), vec![("w".into(), w.shallow_clone())]).unwrap();
        let info = opt.backward_step(&quad(&w)).unwrap();
        assert_eq!(info, StepInfo { grad_norm: None, updated: 1 });
        // g = w - target + 2 sum(w) = -target; m̂ / √v̂ = sign(g) up to eps
        let got = Vec::<f32>::try_from(&w.detach().view([-1])).unwrap();
        for (x, t) in got.iter().zip([1.0f32, -2.0, 0.5, 3.0]) {
            assert!((x - 0.1 * t.signum()).abs() < 1e-6, "{got:?}");
        }
        assert_eq!(opt.steps(), 1);
        assert!(opt.backward_step(&w).is_err(), "a non-scalar loss is refused");
    }

    #[test]
    fn clipping_scales_to_the_threshold_and_rejects_nan() {
        let a = Tensor::from_slice(&[3.0f32, 0.0]).set_requires_grad(true);
        let b = Tensor::from_slice(&[0.0f32, 4.0]).set_requires_grad(true);
        (a.sum(Kind::Float) * 3.0 + b.sum(Kind::Float) * 4.0).backward();
        // grads (3, 3) and (4, 4): norm sqrt(18 + 32) = sqrt(50)
        let n = clip_grad_norm(&[a.grad(), b.grad()], 1.0).unwrap();
        assert!((n - 50f64.sqrt()).abs() < 1e-5);
        let after = (a.grad().square().sum(Kind::Float) + b.grad().square().sum(Kind::Float)).sqrt();
        assert!((after.double_value(&[]) - 1.0).abs() < 1e-5);
        // below the threshold nothing changes
        let before = a.grad().copy();
        let n2 = clip_grad_norm(&[a.grad(), b.grad()], 10.0).unwrap();
        assert!((n2 - 1.0).abs() < 1e-5 && a.grad().equal(&before));
        let mut g = a.grad();
        let _ = g.fill_(f64::NAN);
        assert!(matches!(clip_grad_norm(&[a.grad(), b.grad()], 1.0), Err(RlNnError::NonFinite { .. })));
        assert!(clip_grad_norm(&[], 1.0).unwrap() == 0.0);
        assert!(clip_grad_norm(&[b.grad()], -1.0).is_err());
    }

    #[test]
    fn parameters_without_gradient_are_skipped_and_lr_can_change() {
        let used = Tensor::zeros([2], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let unused = Tensor::zeros([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut opt = Adam::new(
            AdamParams::default().lr(0.5).check().unwrap(),
            vec![("b_used".into(), used.shallow_clone()), ("a_unused".into(), unused.shallow_clone())],
        )
        .unwrap();
        assert_eq!(opt.names(), ["b_used", "a_unused"]);
        let info = opt.backward_step(&(&used * 2.0).sum(Kind::Float)).unwrap();
        assert_eq!(info.updated, 1);
        let tensors: BTreeMap<String, Tensor> = opt.state_tensors("").unwrap().into_iter().collect();
        assert_eq!(tensors["a_unused.step"].int64_value(&[]), 0);
        assert_eq!(tensors["b_used.step"].int64_value(&[]), 1);
        assert_eq!(unused.abs().sum(Kind::Double).double_value(&[]), 0.0);
        assert!((used.double_value(&[0]) + 0.5).abs() < 1e-6);
        assert!(opt.set_lr(-1.0).is_err());
        assert_eq!(opt.lr(), 0.5);
        opt.set_lr(0.25).unwrap();
        assert_eq!((opt.lr(), opt.params().lr), (0.25, 0.25));
        assert!(opt.backward_step(&Tensor::new()).is_err());
        // a store's non-trainable variables are not optimised
        let vs = VarStore::new(Device::Cpu);
        let _w = vs.root().zeros("w", &[2]);
        let _buf = vs.root().zeros_no_train("running_mean", &[2]);
        let o = Adam::for_var_store(AdamParams::default().check().unwrap(), &vs).unwrap();
        assert_eq!(o.names(), ["w"]);
        assert_eq!(o.steps(), 0);
    }

    #[test]
    fn names_must_be_unique_and_parameters_floating() {
        let p = AdamParams::default().check().unwrap();
        let t = Tensor::zeros([2], (Kind::Float, Device::Cpu));
        assert!(matches!(
            Adam::new(p.clone(), vec![("a".into(), t.shallow_clone()), ("a".into(), t.shallow_clone())]),
            Err(RlNnError::InvalidName { .. })
        ));
        assert!(matches!(
            Adam::new(p.clone(), vec![(String::new(), t.shallow_clone())]),
            Err(RlNnError::InvalidName { .. })
        ));
        assert!(matches!(Adam::new(p, vec![("i".into(), Tensor::from_slice(&[1i64]))]), Err(RlNnError::Kind { .. })));
    }

    #[test]
    fn state_tensors_check_names_shapes_and_steps_before_loading() {
        let mk = || {
            let w = Tensor::zeros([2, 2], (Kind::Float, Device::Cpu)).set_requires_grad(true);
            let opt =
                Adam::new(AdamParams::default().amsgrad(true).check().unwrap(), vec![("w".into(), w.shallow_clone())])
                    .unwrap();
            (w, opt)
        };
        let (w, mut a) = mk();
        for _ in 0..3 {
            a.backward_step(&quad(&w)).unwrap();
        }
        let saved: BTreeMap<String, Tensor> = a.state_tensors("optim.").unwrap().into_iter().collect();
        let keys: Vec<&str> = saved.keys().map(String::as_str).collect();
        assert_eq!(keys, ["optim.w.exp_avg", "optim.w.exp_avg_sq", "optim.w.max_exp_avg_sq", "optim.w.step"]);
        let (_, mut b) = mk();
        // missing, misshaped, bad step, extra: each an error, b unchanged
        let mut missing = saved.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect::<BTreeMap<_, _>>();
        missing.remove("optim.w.max_exp_avg_sq");
        assert!(matches!(
            b.load_state_tensors(&missing, "optim.", LoadMode::Strict, "x"),
            Err(RlNnError::MissingTensor { .. })
        ));
        let mut shaped = saved.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect::<BTreeMap<_, _>>();
        shaped.insert("optim.w.exp_avg".into(), Tensor::zeros([4], (Kind::Float, Device::Cpu)));
        assert!(matches!(
            b.load_state_tensors(&shaped, "optim.", LoadMode::Strict, "x"),
            Err(RlNnError::TensorShape { .. })
        ));
        let mut step = saved.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect::<BTreeMap<_, _>>();
        step.insert("optim.w.step".into(), Tensor::from_slice(&[-1i64]));
        assert!(matches!(
            b.load_state_tensors(&step, "optim.", LoadMode::Strict, "x"),
            Err(RlNnError::CorruptCheckpoint { .. })
        ));
        for bad_step in [Tensor::from_slice(&[1.5f64]), Tensor::from_slice(&[1i64, 2]), Tensor::from_slice(&[true])] {
            let mut step = saved.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect::<BTreeMap<_, _>>();
            step.insert("optim.w.step".into(), bad_step);
            assert!(matches!(
                b.check_state_tensors(&step, "optim.", LoadMode::Strict, "x"),
                Err(RlNnError::CorruptCheckpoint { .. })
            ));
        }
        let mut ints = saved.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect::<BTreeMap<_, _>>();
        ints.insert("optim.w.exp_avg".into(), Tensor::zeros([2, 2], (Kind::Int64, Device::Cpu)));
        assert!(matches!(
            b.load_state_tensors(&ints, "optim.", LoadMode::Strict, "x"),
            Err(RlNnError::CorruptCheckpoint { .. })
        ));
        let mut extra = saved.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect::<BTreeMap<_, _>>();
        extra.insert("optim.v.step".into(), Tensor::from_slice(&[1i64]));
        extra.insert("model.w".into(), Tensor::from_slice(&[1i64]));
        assert!(
            matches!(b.load_state_tensors(&extra, "optim.", LoadMode::Strict, "x"), Err(RlNnError::UnexpectedTensors { ref names, .. }) if names == &["optim.v.step"])
        );
        assert_eq!(b.steps(), 0);
        b.load_state_tensors(&extra, "optim.", LoadMode::AllowExtra, "x").unwrap();
        assert_eq!(b.steps(), 3);
        for (k, v) in b.state_tensors("optim.").unwrap() {
            assert!(v.equal(&saved[&k]), "{k}");
        }
    }
}
