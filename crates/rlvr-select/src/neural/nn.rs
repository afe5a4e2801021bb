//! Small dense networks on `tch` whose weights are initialised from a Rust RNG, a hand-written
//! Adam whose moments serialise exactly, and `f32` tensor (de)serialisation.
//!
//! Everything random in the neural selectors comes from Rust generators (ChaCha8 seeded by the
//! caller), never from libtorch's global generator, so a selector restored from its saved state
//! and driven by an RNG in the same state reproduces the original bit for bit.

use crate::error::{Result, SelectError};
use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};
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

/// Uniform `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` values (PyTorch's `nn.Linear` default for weight
/// and bias), drawn from `rng`.
fn uniform_init(n: usize, fan_in: i64, rng: &mut dyn RngCore) -> Vec<f32> {
    let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
    (0..n)
        .map(|_| {
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
            ((2.0 * u - 1.0) * bound) as f32
        })
        .collect()
}

/// Standard normal draws as a tensor of `shape`.
pub(crate) fn randn(shape: &[i64], rng: &mut dyn RngCore) -> Result<Tensor> {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n.max(0)).map(|_| StandardNormal.sample(rng)).collect();
    Ok(Tensor::f_from_slice(&v)?.f_reshape(shape)?)
}

/// A dense map `y = x W^T + b` with `W: [out, in]`.
#[derive(Debug)]
pub(crate) struct Linear {
    pub(crate) w: Tensor,
    pub(crate) b: Tensor,
}

impl Linear {
    fn new(input: i64, output: i64, rng: &mut dyn RngCore) -> Result<Self> {
        let w = uniform_init((input * output) as usize, input, rng);
        let b = uniform_init(output as usize, input, rng);
        Ok(Self {
            w: Tensor::f_from_slice(&w)?.f_reshape([output, input])?.f_set_requires_grad(true)?,
            b: Tensor::f_from_slice(&b)?.f_set_requires_grad(true)?,
        })
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

/// Adam hyper-parameters (PyTorch defaults except the learning rate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamParams {
    /// Learning rate.
    pub lr: f64,
    /// First-moment decay `β1` (0.9).
    pub beta1: f64,
    /// Second-moment decay `β2` (0.999).
    pub beta2: f64,
    /// Denominator epsilon (1e-8).
    pub eps: f64,
}

impl AdamParams {
    /// PyTorch's defaults with learning rate `lr`.
    pub fn with_lr(lr: f64) -> Self {
        Self { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8 }
    }

    pub(crate) fn check(&self) -> Result<()> {
        use crate::error::invalid;
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(invalid("lr", self.lr, "the learning rate must be finite and > 0"));
        }
        if !(0.0..1.0).contains(&self.beta1) || !(0.0..1.0).contains(&self.beta2) {
            return Err(invalid("beta1/beta2", format!("{}/{}", self.beta1, self.beta2), "must lie in [0, 1)"));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(invalid("eps", self.eps, "must be finite and > 0"));
        }
        Ok(())
    }
}

/// Adam (Kingma & Ba 2015) exactly as `torch.optim.Adam` (no weight decay, no amsgrad):
/// `m ← β1 m + (1−β1) g`, `v ← β2 v + (1−β2) g²`,
/// `p ← p − lr / (1−β1^t) · m / (sqrt(v) / sqrt(1−β2^t) + ε)`.
#[derive(Debug)]
pub(crate) struct Adam {
    pub(crate) params: AdamParams,
    pub(crate) m: Vec<Tensor>,
    pub(crate) v: Vec<Tensor>,
    pub(crate) t: u64,
}

impl Adam {
    pub(crate) fn new(params: AdamParams, shapes: &[Vec<i64>]) -> Result<Self> {
        let zeros = |s: &Vec<i64>| Tensor::f_zeros(s.as_slice(), (Kind::Float, Device::Cpu));
        Ok(Self {
            params,
            m: shapes.iter().map(zeros).collect::<std::result::Result<_, _>>()?,
            v: shapes.iter().map(zeros).collect::<std::result::Result<_, _>>()?,
            t: 0,
        })
    }

    /// One step on `vars` (whose `.grad()` holds the gradients); gradients are zeroed after.
    pub(crate) fn step(&mut self, vars: &mut [&mut Tensor]) -> Result<()> {
        self.t += 1;
        let p = self.params;
        let bc1 = 1.0 - p.beta1.powi(self.t.min(i32::MAX as u64) as i32);
        let bc2 = 1.0 - p.beta2.powi(self.t.min(i32::MAX as u64) as i32);
        tch::no_grad(|| -> Result<()> {
            for ((var, m), v) in vars.iter_mut().zip(&mut self.m).zip(&mut self.v) {
                let g = var.grad();
                if !g.defined() {
                    continue;
                }
                let _ = m.f_mul_scalar_(p.beta1)?.f_add_(&g.f_mul_scalar(1.0 - p.beta1)?)?;
                let _ = v.f_mul_scalar_(p.beta2)?.f_add_(&g.f_mul(&g)?.f_mul_scalar(1.0 - p.beta2)?)?;
                let denom = v.f_sqrt()?.f_div_scalar(bc2.sqrt())?.f_add_scalar(p.eps)?;
                let upd = m.f_div(&denom)?.f_mul_scalar(p.lr / bc1)?;
                let _ = var.f_sub_(&upd)?;
                var.zero_grad();
            }
            Ok(())
        })
    }

    pub(crate) fn state(&self) -> Result<AdamState> {
        Ok(AdamState {
            m: self.m.iter().map(TensorData::from_tensor).collect::<Result<_>>()?,
            v: self.v.iter().map(TensorData::from_tensor).collect::<Result<_>>()?,
            t: self.t,
        })
    }
}

/// Serialised Adam moments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdamState {
    /// First moments, one per parameter tensor.
    pub m: Vec<TensorData>,
    /// Second moments.
    pub v: Vec<TensorData>,
    /// Steps taken.
    pub t: u64,
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

/// Rebuilds Adam moments from a saved state, checking shapes against `shapes`.
pub(crate) fn adam_from_state(params: AdamParams, shapes: &[Vec<i64>], s: &AdamState) -> Result<Adam> {
    if s.m.len() != shapes.len() || s.v.len() != shapes.len() {
        return Err(SelectError::InvalidState(format!(
            "adam: expected {} moment tensors, got {}/{}",
            shapes.len(),
            s.m.len(),
            s.v.len()
        )));
    }
    for (i, sh) in shapes.iter().enumerate() {
        if &s.m[i].shape != sh || &s.v[i].shape != sh {
            return Err(SelectError::InvalidState(format!("adam: moment {i} does not have shape {sh:?}")));
        }
    }
    Ok(Adam {
        params,
        m: s.m.iter().map(TensorData::to_tensor).collect::<Result<_>>()?,
        v: s.v.iter().map(TensorData::to_tensor).collect::<Result<_>>()?,
        t: s.t,
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
        let mut net = Dense::new(3, &[4], 1, &mut rng)?;
        let before: Vec<TensorData> = net.params().iter().map(|t| TensorData::from_tensor(t)).collect::<Result<_>>()?;
        let x = randn(&[5, 3], &mut rng)?;
        net.forward(&x)?.sum(Kind::Float).backward();
        let shapes: Vec<Vec<i64>> = net.params().iter().map(|t| t.size()).collect();
        let mut adam = Adam::new(AdamParams::with_lr(0.01), &shapes)?;
        adam.step(&mut net.params_mut())?;
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
