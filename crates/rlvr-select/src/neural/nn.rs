//! Small dense networks on `tch` initialised through `rl_nn::init`, `rl_nn::optim::Adam` with
//! its state as plain data, and `f32` tensor (de)serialisation.
//!
//! Everything random in the neural selectors comes from Rust generators (ChaCha8 seeded by the
//! caller) through `rl_nn::init` / `rl_nn::rand`, never from libtorch's global generator, so a
//! selector restored from its saved state and driven by an RNG in the same state reproduces the
//! original bit for bit.

use std::collections::BTreeMap;

use crate::error::{Result, SelectError};
use rand::RngCore;
use rl_core::Params;
use rl_nn::init::{Fans, Init};
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::LoadMode;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// A tensor as plain data: shape and row-major `f32` values (exact through JSON: `serde_json`
/// prints the shortest representation that parses back to the same `f32`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorData {
    /// Shape.
    pub shape: Vec<i64>,
    /// Values, row-major.
    pub data: Vec<f32>,
}

impl TensorData {
    /// Copies a tensor out (moved to CPU, converted to `f32`).
    pub(crate) fn from_tensor(t: &Tensor) -> Result<Self> {
        let flat = t.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?.f_view([-1])?;
        let data = Vec::<f32>::try_from(&flat).map_err(SelectError::from)?;
        Ok(Self { shape: t.size(), data })
    }

    /// A tensor with these values.
    pub(crate) fn to_tensor(&self) -> Result<Tensor> {
        let n: i64 = self.shape.iter().product();
        if self.shape.iter().any(|&d| d < 0) || n as usize != self.data.len() {
            return Err(SelectError::InvalidState(format!(
                "tensor of shape {:?} needs {} values, got {}",
                self.shape,
                n.max(0),
                self.data.len()
            )));
        }
        if let Some(x) = self.data.iter().find(|x| !x.is_finite()) {
            return Err(SelectError::InvalidState(format!("tensor value {x} is not finite")));
        }
        Ok(Tensor::f_from_slice(&self.data)?.f_reshape(&self.shape)?)
    }
}

/// Standard normal draws as a tensor of `shape` (`rl_nn::rand`: from `rng`, never from
/// libtorch's generator).
pub(crate) fn randn(shape: &[i64], rng: &mut dyn RngCore) -> Result<Tensor> {
    Ok(rl_nn::rand::standard_normal(shape, (Kind::Float, Device::Cpu), rng)?)
}

/// A dense map `y = x W^T + b` with `W: [out, in]`.
#[derive(Debug)]
pub(crate) struct Linear {
    pub(crate) w: Tensor,
    pub(crate) b: Tensor,
}

impl Linear {
    /// PyTorch's `nn.Linear` initialisation `U(±1/√input)` for weight then bias, drawn from
    /// `rng` through `rl_nn::init`.
    fn new(input: i64, output: i64, rng: &mut dyn RngCore) -> Result<Self> {
        let fans = Some(Fans::new(input, output));
        let opts = (Kind::Float, Device::Cpu);
        let w = rl_nn::init::tensor_with_fans(Init::TorchLinear, &[output, input], fans, opts, rng)?;
        let b = rl_nn::init::tensor_with_fans(Init::TorchLinear, &[output], fans, opts, rng)?;
        Ok(Self { w: w.f_set_requires_grad(true)?, b: b.f_set_requires_grad(true)? })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.f_matmul(&self.w.f_tr()?)?.f_add(&self.b)?)
    }
}

/// An MLP `in -> hidden... -> out` with ReLU after every hidden layer and a linear output.
#[derive(Debug)]
pub(crate) struct Dense {
    pub(crate) layers: Vec<Linear>,
}

impl Dense {
    pub(crate) fn new(input: i64, hidden: &[i64], output: i64, rng: &mut dyn RngCore) -> Result<Self> {
        let mut dims = vec![input];
        dims.extend_from_slice(hidden);
        dims.push(output);
        let layers = dims.windows(2).map(|w| Linear::new(w[0], w[1], rng)).collect::<Result<Vec<_>>>()?;
        Ok(Self { layers })
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_from(x, 0)
    }

    /// Runs layers `start..` on `x` (the input of layer `start`); ReLU between layers.
    pub(crate) fn forward_from(&self, x: &Tensor, start: usize) -> Result<Tensor> {
        let mut h = x.shallow_clone();
        let last = self.layers.len().saturating_sub(1);
        for (i, l) in self.layers.iter().enumerate().skip(start) {
            h = l.forward(&h)?;
            if i < last {
                h = h.f_relu()?;
            }
        }
        Ok(h)
    }

    /// The decoder trick: `f([x, z])` for every pair of `x: [N, dx]` and `z: [M, dz]` without
    /// materialising the `[M, N, dx + dz]` input: the first layer is split into its `x` and `z`
    /// columns, `h1 = relu(x Wx^T + (z Wz^T + b))`. Returns `[M, N, out]`.
    pub(crate) fn forward_pairs(&self, x: &Tensor, z: &Tensor) -> Result<Tensor> {
        let first = &self.layers[0];
        let dx = x.size()[1];
        let dz = z.size()[1];
        let wx = first.w.f_narrow(1, 0, dx)?;
        let wz = first.w.f_narrow(1, dx, dz)?;
        let hx = x.f_matmul(&wx.f_tr()?)?; // [N, h]
        let hz = z.f_matmul(&wz.f_tr()?)?.f_add(&first.b)?; // [M, h]
        let mut h = hx.f_unsqueeze(0)?.f_add(&hz.f_unsqueeze(1)?)?; // [M, N, h]
        if self.layers.len() > 1 {
            h = h.f_relu()?;
            h = self.forward_from(&h, 1)?;
        }
        Ok(h)
    }

    pub(crate) fn params(&self) -> Vec<&Tensor> {
        self.layers.iter().flat_map(|l| [&l.w, &l.b]).collect()
    }

    pub(crate) fn params_mut(&mut self) -> Vec<&mut Tensor> {
        self.layers.iter_mut().flat_map(|l| [&mut l.w, &mut l.b]).collect()
    }
}

/// Checks a learning rate of the neural selectors (finite, `> 0`).
pub(crate) fn check_lr(lr: f64) -> Result<()> {
    if !(lr.is_finite() && lr > 0.0) {
        return Err(crate::error::invalid("lr", lr, "the learning rate must be finite and > 0"));
    }
    Ok(())
}

/// `rl_nn::optim::Adam` with PyTorch's defaults and learning rate `lr` over `vars` (named
/// `p0`, `p1`, ... in order).
pub(crate) fn new_adam(lr: f64, vars: Vec<&Tensor>) -> Result<Adam> {
    check_lr(lr)?;
    let params = AdamParams::default().lr(lr).check()?;
    let named = vars.into_iter().enumerate().map(|(i, t)| (format!("p{i}"), t.shallow_clone())).collect();
    Ok(Adam::new(params, named)?)
}

/// Serialised Adam state (`rl_nn::optim::Adam`'s moments and step counts), one entry per
/// parameter tensor in the model's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdamState {
    /// First moments.
    pub m: Vec<TensorData>,
    /// Second moments.
    pub v: Vec<TensorData>,
    /// Steps taken, per parameter.
    pub steps: Vec<u64>,
}

/// The state of `adam` as plain data.
pub(crate) fn adam_state(adam: &Adam) -> Result<AdamState> {
    let tensors: BTreeMap<String, Tensor> = adam.state_tensors("")?.into_iter().collect();
    let mut s = AdamState { m: Vec::new(), v: Vec::new(), steps: Vec::new() };
    for name in adam.names() {
        let get = |what: &str| {
            tensors
                .get(&format!("{name}.{what}"))
                .ok_or_else(|| SelectError::InvalidState(format!("adam: no `{name}.{what}`")))
        };
        s.m.push(TensorData::from_tensor(get("exp_avg")?)?);
        s.v.push(TensorData::from_tensor(get("exp_avg_sq")?)?);
        s.steps.push(u64::try_from(get("step")?.f_int64_value(&[])?).unwrap_or(0));
    }
    Ok(s)
}

/// Restores `adam` from `s` after checking every shape and count (nothing changes on error).
pub(crate) fn load_adam(adam: &mut Adam, s: &AdamState) -> Result<()> {
    let names: Vec<String> = adam.names().iter().map(|n| (*n).to_string()).collect();
    if s.m.len() != names.len() || s.v.len() != names.len() || s.steps.len() != names.len() {
        return Err(SelectError::InvalidState(format!(
            "adam: expected {} moment tensors and step counts, got {}/{}/{}",
            names.len(),
            s.m.len(),
            s.v.len(),
            s.steps.len()
        )));
    }
    let mut map = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        map.insert(format!("{name}.exp_avg"), s.m[i].to_tensor()?);
        map.insert(format!("{name}.exp_avg_sq"), s.v[i].to_tensor()?);
        let step =
            i64::try_from(s.steps[i]).map_err(|_| SelectError::InvalidState("adam: step count too large".into()))?;
        map.insert(format!("{name}.step"), Tensor::f_from_slice(&[step])?.f_reshape([0i64; 0])?);
    }
    adam.load_state_tensors(&map, "", LoadMode::Strict, "adam state")
        .map_err(|e| SelectError::InvalidState(format!("adam: {e}")))
}

/// Copies saved values into `vars` after checking every shape (nothing is written on error).
pub(crate) fn load_into(vars: &mut [&mut Tensor], saved: &[TensorData], what: &str) -> Result<()> {
    if vars.len() != saved.len() {
        return Err(SelectError::InvalidState(format!("{what}: expected {} tensors, got {}", vars.len(), saved.len())));
    }
    let mut new = Vec::with_capacity(saved.len());
    for (i, (v, s)) in vars.iter().zip(saved).enumerate() {
        if v.size() != s.shape {
            return Err(SelectError::InvalidState(format!(
                "{what}: tensor {i} has shape {:?}, the model expects {:?}",
                s.shape,
                v.size()
            )));
        }
        new.push(s.to_tensor()?);
    }
    tch::no_grad(|| -> Result<()> {
        for (v, n) in vars.iter_mut().zip(&new) {
            v.f_copy_(n)?;
        }
        Ok(())
    })
}

/// `KL(N(mu_q, s_q²) || N(mu_p, s_p²))` summed over the last dimension.
pub(crate) fn kl_normal(mu_q: &Tensor, s_q: &Tensor, mu_p: &Tensor, s_p: &Tensor) -> Result<Tensor> {
    // log(s_p / s_q) + (s_q² + (mu_q − mu_p)²) / (2 s_p²) − 1/2
    let var_p = s_p.f_square()?;
    let t1 = s_p.f_log()?.f_sub(&s_q.f_log()?)?;
    let t2 = s_q.f_square()?.f_add(&mu_q.f_sub(mu_p)?.f_square()?)?.f_div(&var_p.f_mul_scalar(2.0)?)?;
    Ok(t1.f_add(&t2)?.f_sub_scalar(0.5)?.f_sum_dim_intlist(-1, false, Kind::Float)?)
}

/// A `[rows, dim]` float tensor from a row-major slice.
pub(crate) fn matrix(data: &[f32], rows: usize, dim: usize) -> Result<Tensor> {
    Ok(Tensor::f_from_slice(data)?.f_reshape([rows as i64, dim as i64])?)
}

/// Sample standard deviation over dim 0 (Bessel-corrected, as `torch.std`).
pub(crate) fn std0(t: &Tensor) -> Result<Tensor> {
    Ok(t.f_std_dim(Some([0i64].as_slice()), true, false)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_matches_the_closed_form_first_step() -> anyhow::Result<()> {
        // First Adam step moves every coordinate by lr * sign(g) (up to eps).
        let mut rng = rl_core::rng_from_seed(0);
        let net = Dense::new(3, &[4], 1, &mut rng)?;
        let before: Vec<TensorData> = net.params().iter().map(|t| TensorData::from_tensor(t)).collect::<Result<_>>()?;
        let x = randn(&[5, 3], &mut rng)?;
        net.forward(&x)?.sum(Kind::Float).backward();
        let mut adam = new_adam(0.01, net.params())?;
        adam.step()?;
        for (b, a) in before.iter().zip(net.params()) {
            let a = TensorData::from_tensor(a)?;
            for (x0, x1) in b.data.iter().zip(&a.data) {
                let d = (x0 - x1).abs();
                assert!(d < 0.0101 && (d > 0.0099 || d == 0.0), "step {d}");
            }
        }
        Ok(())
    }

    #[test]
    fn tensor_data_roundtrips_exactly() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(1);
        let t = randn(&[3, 7], &mut rng)?;
        let d = TensorData::from_tensor(&t)?;
        let json = serde_json::to_string(&d)?;
        let back: TensorData = serde_json::from_str(&json)?;
        assert_eq!(back, d);
        let t2 = back.to_tensor()?;
        assert_eq!(t2.size(), vec![3, 7]);
        assert_eq!(TensorData::from_tensor(&t2)?, d);
        Ok(())
    }

    #[test]
    fn kl_of_equal_normals_is_zero() -> anyhow::Result<()> {
        let mu = Tensor::from_slice(&[0.3f32, -1.0]);
        let s = Tensor::from_slice(&[0.5f32, 2.0]);
        assert!(kl_normal(&mu, &s, &mu, &s)?.double_value(&[]).abs() < 1e-7);
        // KL(N(0,1) || N(1,1)) = 0.5
        let k = kl_normal(
            &Tensor::from_slice(&[0.0f32]),
            &Tensor::from_slice(&[1.0f32]),
            &Tensor::from_slice(&[1.0f32]),
            &Tensor::from_slice(&[1.0f32]),
        )?;
        assert!((k.double_value(&[]) - 0.5).abs() < 1e-6);
        Ok(())
    }
}
