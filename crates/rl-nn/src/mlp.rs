//! Multi-layer perceptrons and batched ensembles of them.

use serde::{Deserialize, Serialize};
use tch::nn::{Init, Module, Path};
use tch::Tensor;

use crate::error::{Result, RlNnError};

/// Element-wise activation functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `x`.
    Identity,
    /// `max(x, 0)`.
    #[default]
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// Gaussian error linear unit (exact erf form).
    Gelu,
    /// `x * sigmoid(x)`.
    Silu,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x` for `x > 0`, `exp(x) - 1` otherwise.
    Elu,
    /// `x` for `x > 0`, `0.01 x` otherwise.
    LeakyRelu,
}

impl Activation {
    /// Applies the activation.
    pub fn apply(self, x: &Tensor) -> Tensor {
        match self {
            Activation::Identity => x.shallow_clone(),
            Activation::Relu => x.relu(),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => x.sigmoid(),
            Activation::Gelu => x.gelu("none"),
            Activation::Silu => x.silu(),
            Activation::Mish => x.mish(),
            Activation::Elu => x.elu(),
            Activation::LeakyRelu => x.leaky_relu(),
        }
    }
}

/// Configuration of an [`Mlp`] or [`EnsembleMlp`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `hidden` | `[256, 256]` | hidden layer widths (may be empty: a single linear map) |
/// | `activation` | `relu` | activation after each hidden layer |
/// | `layer_norm` | `false` | LayerNorm after each hidden linear map, before the activation |
/// | `output_activation` | `identity` | activation on the output |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MlpConfig {
    /// Hidden layer widths.
    pub hidden: Vec<i64>,
    /// Hidden activation.
    pub activation: Activation,
    /// LayerNorm on hidden layers.
    pub layer_norm: bool,
    /// Output activation.
    pub output_activation: Activation,
}

impl Default for MlpConfig {
    fn default() -> Self {
        Self {
            hidden: vec![256, 256],
            activation: Activation::Relu,
            layer_norm: false,
            output_activation: Activation::Identity,
        }
    }
}

impl MlpConfig {
    /// A config with the given hidden widths and the other fields at their defaults.
    pub fn new(hidden: impl Into<Vec<i64>>) -> Self {
        Self { hidden: hidden.into(), ..Self::default() }
    }
    /// Sets the hidden activation.
    #[must_use]
    pub fn activation(mut self, a: Activation) -> Self {
        self.activation = a;
        self
    }
    /// Enables or disables hidden LayerNorm.
    #[must_use]
    pub fn layer_norm(mut self, on: bool) -> Self {
        self.layer_norm = on;
        self
    }
    /// Sets the output activation.
    #[must_use]
    pub fn output_activation(mut self, a: Activation) -> Self {
        self.output_activation = a;
        self
    }

    fn check(&self, input: i64, output: i64) -> Result<()> {
        let bad = |name: &str, v: i64| RlNnError::InvalidConfig {
            name: name.into(),
            value: v.to_string(),
            reason: "layer widths must be positive".into(),
        };
        if input <= 0 {
            return Err(bad("input", input));
        }
        if output <= 0 {
            return Err(bad("output", output));
        }
        if let Some(h) = self.hidden.iter().find(|h| **h <= 0) {
            return Err(bad("hidden", *h));
        }
        Ok(())
    }

    fn widths(&self, input: i64, output: i64) -> Vec<(i64, i64)> {
        let mut dims = vec![input];
        dims.extend(&self.hidden);
        dims.push(output);
        dims.windows(2).map(|w| (w[0], w[1])).collect()
    }
}

/// PyTorch's default `nn.Linear` initialisation: `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` for both
/// weight and bias.
fn linear_init(fan_in: i64) -> Init {
    let b = 1.0 / (fan_in as f64).sqrt();
    Init::Uniform { lo: -b, up: b }
}

#[derive(Debug)]
struct Layer {
    w: Tensor,
    b: Tensor,
    ln: Option<(Tensor, Tensor)>,
}

/// A multi-layer perceptron `input -> hidden... -> output` with variables named
/// `{i}.weight` (`[out, in]`), `{i}.bias`, and `{i}.ln.weight` / `{i}.ln.bias` for LayerNorm.
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<Layer>,
    input: i64,
    output: i64,
    cfg: MlpConfig,
}

impl Mlp {
    /// Creates the variables under `path`.
    ///
    /// # Errors
    /// Non-positive widths, or a libtorch failure.
    pub fn new(path: &Path<'_>, input: i64, output: i64, cfg: &MlpConfig) -> Result<Self> {
        cfg.check(input, output)?;
        let widths = cfg.widths(input, output);
        let last = widths.len() - 1;
        let mut layers = Vec::with_capacity(widths.len());
        for (i, (fi, fo)) in widths.into_iter().enumerate() {
            let p = path.sub(i.to_string());
            let w = p.f_var("weight", &[fo, fi], linear_init(fi))?;
            let b = p.f_var("bias", &[fo], linear_init(fi))?;
            let ln = if cfg.layer_norm && i < last {
                let q = p.sub("ln");
                Some((q.f_ones("weight", &[fo])?, q.f_zeros("bias", &[fo])?))
            } else {
                None
            };
            layers.push(Layer { w, b, ln });
        }
        Ok(Self { layers, input, output, cfg: cfg.clone() })
    }

    /// Input width.
    pub fn input_dim(&self) -> i64 {
        self.input
    }

    /// Output width.
    pub fn output_dim(&self) -> i64 {
        self.output
    }

    /// Checked forward pass: `x` must be `[..., input]`.
    ///
    /// # Errors
    /// [`RlNnError::Shape`] when the last dimension is not `input`.
    pub fn f_forward(&self, x: &Tensor) -> Result<Tensor> {
        let size = x.size();
        if size.last() != Some(&self.input) {
            return Err(RlNnError::Shape {
                what: "mlp input".into(),
                expected: format!("[..., {}]", self.input),
                got: size,
            });
        }
        Ok(self.forward_unchecked(x))
    }

    fn forward_unchecked(&self, x: &Tensor) -> Tensor {
        let last = self.layers.len() - 1;
        let mut h = x.shallow_clone();
        for (i, l) in self.layers.iter().enumerate() {
            h = h.linear(&l.w, Some(&l.b));
            if let Some((g, b)) = &l.ln {
                h = h.layer_norm([g.size()[0]], Some(g), Some(b), 1e-5, false);
            }
            h = if i < last { self.cfg.activation.apply(&h) } else { self.cfg.output_activation.apply(&h) };
        }
        h
    }
}

impl Module for Mlp {
    /// Unchecked forward; prefer [`Mlp::f_forward`] on caller-supplied tensors.
    fn forward(&self, xs: &Tensor) -> Tensor {
        self.forward_unchecked(xs)
    }
}

/// `E` independent MLPs evaluated in one batched matrix multiply per layer (the layout of
/// EDAC/SAC-N critics and ensemble dynamics models).
///
/// Variables: `{i}.weight` `[E, in, out]`, `{i}.bias` `[E, 1, out]`, `{i}.ln.weight` /
/// `{i}.ln.bias` `[E, 1, out]`. Each member is initialised like a PyTorch `nn.Linear`.
#[derive(Debug)]
pub struct EnsembleMlp {
    layers: Vec<Layer>,
    members: i64,
    input: i64,
    output: i64,
    cfg: MlpConfig,
}

impl EnsembleMlp {
    /// Creates `members` MLPs under `path`.
    ///
    /// # Errors
    /// Non-positive widths or member count, or a libtorch failure.
    pub fn new(path: &Path<'_>, members: i64, input: i64, output: i64, cfg: &MlpConfig) -> Result<Self> {
        cfg.check(input, output)?;
        if members <= 0 {
            return Err(RlNnError::InvalidConfig {
                name: "members".into(),
                value: members.to_string(),
                reason: "an ensemble needs at least one member".into(),
            });
        }
        let widths = cfg.widths(input, output);
        let last = widths.len() - 1;
        let mut layers = Vec::with_capacity(widths.len());
        for (i, (fi, fo)) in widths.into_iter().enumerate() {
            let p = path.sub(i.to_string());
            let w = p.f_var("weight", &[members, fi, fo], linear_init(fi))?;
            let b = p.f_var("bias", &[members, 1, fo], linear_init(fi))?;
            let ln = if cfg.layer_norm && i < last {
                let q = p.sub("ln");
                Some((q.f_ones("weight", &[members, 1, fo])?, q.f_zeros("bias", &[members, 1, fo])?))
            } else {
                None
            };
            layers.push(Layer { w, b, ln });
        }
        Ok(Self { layers, members, input, output, cfg: cfg.clone() })
    }

    /// Number of members.
    pub fn members(&self) -> i64 {
        self.members
    }

    /// Output width of each member.
    pub fn output_dim(&self) -> i64 {
        self.output
    }

    /// Forward pass. `x` is `[B, input]` (shared by all members) or `[E, B, input]` (one batch
    /// per member); the result is `[E, B, output]`.
    ///
    /// # Errors
    /// [`RlNnError::Shape`] for any other shape.
    pub fn f_forward(&self, x: &Tensor) -> Result<Tensor> {
        let size = x.size();
        let h = match size.as_slice() {
            [_, d] if *d == self.input => x.unsqueeze(0).expand([self.members, -1, -1], false),
            [e, _, d] if *e == self.members && *d == self.input => x.shallow_clone(),
            _ => {
                return Err(RlNnError::Shape {
                    what: "ensemble input".into(),
                    expected: format!("[B, {}] or [{}, B, {}]", self.input, self.members, self.input),
                    got: size,
                })
            }
        };
        let last = self.layers.len() - 1;
        let mut h = h;
        for (i, l) in self.layers.iter().enumerate() {
            h = l.b.baddbmm(&h, &l.w, 1.0, 1.0);
            if let Some((g, b)) = &l.ln {
                let width = g.size()[2];
                h = h.layer_norm([width], None::<&Tensor>, None::<&Tensor>, 1e-5, false) * g + b;
            }
            h = if i < last { self.cfg.activation.apply(&h) } else { self.cfg.output_activation.apply(&h) };
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{nn::VarStore, Device, Kind};

    #[test]
    fn mlp_shapes_and_names() {
        let vs = VarStore::new(Device::Cpu);
        let cfg = MlpConfig::new([8, 8]).layer_norm(true).output_activation(Activation::Tanh);
        let mlp = Mlp::new(&vs.root(), 3, 2, &cfg).unwrap();
        let y = mlp.f_forward(&Tensor::randn([5, 3], (Kind::Float, Device::Cpu))).unwrap();
        assert_eq!(y.size(), vec![5, 2]);
        assert!(y.abs().max().double_value(&[]) <= 1.0);
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "0.bias",
                "0.ln.bias",
                "0.ln.weight",
                "0.weight",
                "1.bias",
                "1.ln.bias",
                "1.ln.weight",
                "1.weight",
                "2.bias",
                "2.weight"
            ]
        );
        assert!(matches!(
            mlp.f_forward(&Tensor::zeros([5, 4], (Kind::Float, Device::Cpu))),
            Err(RlNnError::Shape { .. })
        ));
        assert!(Mlp::new(&vs.root().sub("bad"), 0, 2, &cfg).is_err());
    }

    #[test]
    fn ensemble_members_are_independent_mlps() {
        let vs = VarStore::new(Device::Cpu);
        let cfg = MlpConfig::new([16]).layer_norm(true);
        let ens = EnsembleMlp::new(&vs.root(), 4, 3, 2, &cfg).unwrap();
        let x = Tensor::randn([7, 3], (Kind::Float, Device::Cpu));
        let y = ens.f_forward(&x).unwrap();
        assert_eq!(y.size(), vec![4, 7, 2]);
        // member 2 computed by hand from its slices
        let vars = vs.variables();
        let (w0, b0) = (vars["0.weight"].get(2), vars["0.bias"].get(2));
        let (g, beta) = (vars["0.ln.weight"].get(2), vars["0.ln.bias"].get(2));
        let (w1, b1) = (vars["1.weight"].get(2), vars["1.bias"].get(2));
        let h = (x.matmul(&w0) + b0).layer_norm([16], None::<&Tensor>, None::<&Tensor>, 1e-5, false) * g + beta;
        let want = h.relu().matmul(&w1) + b1;
        let diff = (y.get(2) - want).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "diff {diff}");
        let per_member = Tensor::randn([4, 7, 3], (Kind::Float, Device::Cpu));
        assert_eq!(ens.f_forward(&per_member).unwrap().size(), vec![4, 7, 2]);
        assert!(ens.f_forward(&Tensor::zeros([3, 7, 3], (Kind::Float, Device::Cpu))).is_err());
    }
}
