//! Multi-layer perceptrons and batched ensembles of them, initialised from the caller's
//! generator ([`crate::init`]).

use rand::Rng;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::{Device, Kind, Tensor};

pub use crate::activation::Activation;
use crate::check;
use crate::error::{Result, RlNnError};
use crate::init::{self, Fans, Init};

/// Configuration of an [`Mlp`] or [`EnsembleMlp`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `hidden` | `[256, 256]` | hidden layer widths (may be empty: a single linear map), each `>= 1` |
/// | `activation` | `relu` | activation after each hidden layer |
/// | `layer_norm` | `false` | LayerNorm (ε = 1e-5, affine) after each hidden linear map, before the activation |
/// | `output_activation` | `identity` | activation on the output |
/// | `weight_init` | `torch_linear` | initialiser of hidden weights ([`Init`]) |
/// | `bias_init` | `torch_linear` | initialiser of every bias (fans of its layer) |
/// | `output_weight_init` | none | initialiser of the output weight (none: `weight_init`); e.g. `orthogonal` with gain 0.01 for a PPO policy head |
///
/// The defaults reproduce PyTorch's `nn.Linear` initialisation, `U(±1/√fan_in)` for weight and
/// bias.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MlpConfig {
    /// Hidden layer widths.
    pub hidden: Vec<i64>,
    /// Hidden activation.
    pub activation: Activation,
    /// LayerNorm on hidden layers.
    pub layer_norm: bool,
    /// Output activation.
    pub output_activation: Activation,
    /// Initialiser of hidden weights.
    pub weight_init: Init,
    /// Initialiser of biases.
    pub bias_init: Init,
    /// Initialiser of the output weight (`None`: `weight_init`).
    pub output_weight_init: Option<Init>,
}

impl Default for MlpConfig {
    fn default() -> Self {
        Self {
            hidden: vec![256, 256],
            activation: Activation::Relu,
            layer_norm: false,
            output_activation: Activation::Identity,
            weight_init: Init::TorchLinear,
            bias_init: Init::TorchLinear,
            output_weight_init: None,
        }
    }
}

impl MlpConfig {
    /// A config with the given hidden widths and the other fields at their defaults.
    pub fn new(hidden: impl Into<Vec<i64>>) -> Self {
        Self { hidden: hidden.into(), ..Self::default() }
    }
    /// Sets the hidden widths.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>>) -> Self {
        self.hidden = hidden.into();
        self
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
    /// Sets the hidden-weight initialiser.
    #[must_use]
    pub fn weight_init(mut self, init: Init) -> Self {
        self.weight_init = init;
        self
    }
    /// Sets the bias initialiser.
    #[must_use]
    pub fn bias_init(mut self, init: Init) -> Self {
        self.bias_init = init;
        self
    }
    /// Sets the output-weight initialiser.
    #[must_use]
    pub fn output_weight_init(mut self, init: Option<Init>) -> Self {
        self.output_weight_init = init;
        self
    }

    fn widths(&self, input: i64, output: i64) -> Vec<(i64, i64)> {
        let mut dims = vec![input];
        dims.extend(&self.hidden);
        dims.push(output);
        dims.windows(2).map(|w| (w[0], w[1])).collect()
    }

    fn weight_init_of(&self, layer: usize, n_layers: usize) -> Init {
        if layer + 1 == n_layers {
            self.output_weight_init.unwrap_or(self.weight_init)
        } else {
            self.weight_init
        }
    }
}

impl Params for MlpConfig {
    type Error = RlNnError;

    fn validate(&self) -> Result<()> {
        if let Some((i, h)) = self.hidden.iter().enumerate().find(|(_, h)| **h <= 0) {
            return Err(RlNnError::invalid(format!("hidden[{i}]"), h, "layer widths must be >= 1"));
        }
        let named = |name: &str, i: &Init| {
            i.validate().map_err(|e| match e {
                RlNnError::InvalidParameter { name: n, value, reason } => RlNnError::InvalidParameter {
                    name: format!("{name}.{}", n.trim_start_matches("init.")),
                    value,
                    reason,
                },
                other => other,
            })
        };
        named("weight_init", &self.weight_init)?;
        named("bias_init", &self.bias_init)?;
        if let Some(o) = &self.output_weight_init {
            named("output_weight_init", o)?;
        }
        Ok(())
    }
}

/// Errors if any variable an MLP of `n` layers would create under `path` exists already, so
/// that a failed constructor adds nothing to the store.
fn check_free(path: &Path<'_>, n: usize, layer_norm: bool) -> Result<()> {
    for i in 0..n {
        let p = path.sub(i.to_string());
        let mut taken = ["weight", "bias"].iter().find(|v| p.get(v).is_some()).map(|v| p.path(v));
        if taken.is_none() && layer_norm && i + 1 < n {
            let q = p.sub("ln");
            taken = ["weight", "bias"].iter().find(|v| q.get(v).is_some()).map(|v| q.path(v));
        }
        if let Some(name) = taken {
            return Err(RlNnError::InvalidName { name, reason: "a variable of this name exists".into() });
        }
    }
    Ok(())
}

fn check_io(input: i64, output: i64) -> Result<()> {
    if input <= 0 {
        return Err(RlNnError::invalid("input", input, "layer widths must be >= 1"));
    }
    if output <= 0 {
        return Err(RlNnError::invalid("output", output, "layer widths must be >= 1"));
    }
    Ok(())
}

#[derive(Debug)]
struct Layer {
    w: Tensor,
    b: Tensor,
    ln: Option<(Tensor, Tensor)>,
}

/// A multi-layer perceptron `input -> hidden... -> output` with variables named
/// `{i}.weight` (`[out, in]`), `{i}.bias`, and `{i}.ln.weight` / `{i}.ln.bias` for LayerNorm.
///
/// ```
/// use rl_core::Params;
/// use rl_nn::{init::Init, Activation, Mlp, MlpConfig};
/// use tch::{nn::VarStore, Device, Kind, Tensor};
/// let mut rng = rl_core::rng_from_seed(0);
/// let vs = VarStore::new(Device::Cpu);
/// let cfg = MlpConfig::new([64, 64])
///     .activation(Activation::Tanh)
///     .weight_init(Init::Orthogonal { gain: 2f64.sqrt() })
///     .bias_init(Init::Zeros)
///     .output_weight_init(Some(Init::Orthogonal { gain: 0.01 }))
///     .check()?;
/// let policy = Mlp::new(&vs.root().sub("pi"), 8, 4, &cfg, &mut rng)?;
/// let logits = policy.f_forward(&Tensor::zeros([5, 8], (Kind::Float, Device::Cpu)))?;
/// assert_eq!(logits.size(), [5, 4]);
/// assert!(policy.f_forward(&Tensor::zeros([5, 7], (Kind::Float, Device::Cpu))).is_err());
/// # Ok::<(), rl_nn::RlNnError>(())
/// ```
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<Layer>,
    input: i64,
    output: i64,
    cfg: MlpConfig,
}

impl Mlp {
    /// Creates the variables under `path` (in the store's kind, on its device), drawing every
    /// initial value from `rng`: layer by layer, weight then bias.
    ///
    /// # Errors
    /// [`RlNnError::InvalidParameter`] for non-positive `input`/`output`,
    /// [`RlNnError::InvalidName`] when the names exist under `path`,
    /// [`RlNnError::DeviceUnavailable`], libtorch failures.
    pub fn new<R: Rng + ?Sized>(
        path: &Path<'_>,
        input: i64,
        output: i64,
        cfg: &Valid<MlpConfig>,
        rng: &mut R,
    ) -> Result<Self> {
        check_io(input, output)?;
        check::available(path.device())?;
        let widths = cfg.widths(input, output);
        let n = widths.len();
        check_free(path, n, cfg.layer_norm)?;
        let mut layers = Vec::with_capacity(n);
        for (i, (fi, fo)) in widths.into_iter().enumerate() {
            let fans = Some(Fans::new(fi, fo));
            let w = init::var_with_fans(path, &format!("{i}.weight"), &[fo, fi], cfg.weight_init_of(i, n), fans, rng)?;
            let b = init::var_with_fans(path, &format!("{i}.bias"), &[fo], cfg.bias_init, fans, rng)?;
            let ln = if cfg.layer_norm && i + 1 < n {
                Some((
                    init::var(path, &format!("{i}.ln.weight"), &[fo], Init::Ones, rng)?,
                    init::var(path, &format!("{i}.ln.bias"), &[fo], Init::Zeros, rng)?,
                ))
            } else {
                None
            };
            layers.push(Layer { w, b, ln });
        }
        Ok(Self { layers, input, output, cfg: cfg.get().clone() })
    }

    /// The kind and device of the parameters now (a store may have been converted or moved
    /// since construction).
    fn param_kind_device(&self) -> Result<(Kind, Device)> {
        let w = &self.layers[0].w;
        Ok((w.f_kind()?, w.device()))
    }

    /// Input width.
    pub fn input_dim(&self) -> i64 {
        self.input
    }

    /// Output width.
    pub fn output_dim(&self) -> i64 {
        self.output
    }

    /// The configuration.
    pub fn config(&self) -> &MlpConfig {
        &self.cfg
    }

    /// Checked forward pass: `x` must be `[..., input]` (rank >= 1), of the parameters' kind,
    /// on their device.
    ///
    /// # Errors
    /// [`RlNnError::Shape`], [`RlNnError::Kind`], [`RlNnError::Device`]; libtorch failures.
    pub fn f_forward(&self, x: &Tensor) -> Result<Tensor> {
        let (kind, device) = self.param_kind_device()?;
        check::kind("mlp input", x, kind)?;
        check::device("mlp input", x, device)?;
        let size = x.size();
        if size.last() != Some(&self.input) {
            return Err(RlNnError::Shape {
                what: "mlp input".into(),
                expected: format!("[..., {}]", self.input),
                got: size,
            });
        }
        let last = self.layers.len() - 1;
        let mut h = x.shallow_clone();
        for (i, l) in self.layers.iter().enumerate() {
            h = h.f_linear(&l.w, Some(&l.b))?;
            if let Some((g, b)) = &l.ln {
                h = h.f_layer_norm(g.size().as_slice(), Some(g), Some(b), 1e-5, false)?;
            }
            h = if i < last { self.cfg.activation.f_apply(&h)? } else { self.cfg.output_activation.f_apply(&h)? };
        }
        Ok(h)
    }
}

/// `E` independent MLPs evaluated in one batched matrix multiply per layer (the layout of
/// EDAC/SAC-N critics and ensemble dynamics models).
///
/// Variables: `{i}.weight` `[E, in, out]`, `{i}.bias` `[E, 1, out]`, `{i}.ln.weight` /
/// `{i}.ln.bias` `[E, 1, out]`. Each member is initialised like a PyTorch `nn.Linear`: its
/// weight is drawn as an `[out, in]` matrix (fans `in`, `out`) and stored transposed. Draw
/// order per layer: the weights of members `0..E`, then their biases.
///
/// ```
/// use rl_core::Params;
/// use rl_nn::{EnsembleMlp, MlpConfig};
/// use tch::{nn::VarStore, Device, Kind, Tensor};
/// let vs = VarStore::new(Device::Cpu);
/// let q = EnsembleMlp::new(&vs.root(), 10, 23, 1, &MlpConfig::new([256, 256]).check()?, &mut rl_core::rng_from_seed(0))?;
/// let y = q.f_forward(&Tensor::zeros([32, 23], (Kind::Float, Device::Cpu)))?;
/// assert_eq!(y.size(), [10, 32, 1]);
/// # Ok::<(), rl_nn::RlNnError>(())
/// ```
#[derive(Debug)]
pub struct EnsembleMlp {
    layers: Vec<Layer>,
    members: i64,
    input: i64,
    output: i64,
    cfg: MlpConfig,
}

impl EnsembleMlp {
    /// Creates `members` MLPs under `path`, drawing every initial value from `rng`.
    ///
    /// # Errors
    /// As [`Mlp::new`]; [`RlNnError::InvalidParameter`] for `members < 1`.
    pub fn new<R: Rng + ?Sized>(
        path: &Path<'_>,
        members: i64,
        input: i64,
        output: i64,
        cfg: &Valid<MlpConfig>,
        rng: &mut R,
    ) -> Result<Self> {
        check_io(input, output)?;
        if members <= 0 {
            return Err(RlNnError::invalid("members", members, "an ensemble needs at least one member"));
        }
        check::available(path.device())?;
        let opts = (path.kind(), path.device());
        let widths = cfg.widths(input, output);
        let n = widths.len();
        check_free(path, n, cfg.layer_norm)?;
        let mut layers = Vec::with_capacity(n);
        for (i, (fi, fo)) in widths.into_iter().enumerate() {
            let fans = Some(Fans::new(fi, fo));
            let (rows, cols) = (fo as usize, fi as usize);
            let mut w = Vec::with_capacity(members as usize * rows * cols);
            for _ in 0..members {
                let v = init::values(cfg.weight_init_of(i, n), &[fo, fi], fans, rng)?;
                // [out, in] -> [in, out]
                for c in 0..cols {
                    for r in 0..rows {
                        w.push(v[r * cols + c]);
                    }
                }
            }
            let mut b = Vec::with_capacity(members as usize * rows);
            for _ in 0..members {
                b.extend(init::values(cfg.bias_init, &[fo], fans, rng)?);
            }
            let wt = init::from_values(&w, &[members, fi, fo], opts)?;
            let bt = init::from_values(&b, &[members, 1, fo], opts)?;
            let p = path.sub(i.to_string());
            let w = p.add("weight", wt, true);
            let b = p.add("bias", bt, true);
            let ln = if cfg.layer_norm && i + 1 < n {
                Some((
                    init::var(path, &format!("{i}.ln.weight"), &[members, 1, fo], Init::Ones, rng)?,
                    init::var(path, &format!("{i}.ln.bias"), &[members, 1, fo], Init::Zeros, rng)?,
                ))
            } else {
                None
            };
            layers.push(Layer { w, b, ln });
        }
        Ok(Self { layers, members, input, output, cfg: cfg.get().clone() })
    }

    fn param_kind_device(&self) -> Result<(Kind, Device)> {
        let w = &self.layers[0].w;
        Ok((w.f_kind()?, w.device()))
    }

    /// Number of members.
    pub fn members(&self) -> i64 {
        self.members
    }

    /// Input width of each member.
    pub fn input_dim(&self) -> i64 {
        self.input
    }

    /// Output width of each member.
    pub fn output_dim(&self) -> i64 {
        self.output
    }

    /// The configuration.
    pub fn config(&self) -> &MlpConfig {
        &self.cfg
    }

    /// Forward pass. `x` is `[B, input]` (shared by all members) or `[E, B, input]` (one batch
    /// per member), of the parameters' kind and on their device; the result is
    /// `[E, B, output]`.
    ///
    /// # Errors
    /// [`RlNnError::Shape`], [`RlNnError::Kind`], [`RlNnError::Device`]; libtorch failures.
    pub fn f_forward(&self, x: &Tensor) -> Result<Tensor> {
        let (kind, device) = self.param_kind_device()?;
        check::kind("ensemble input", x, kind)?;
        check::device("ensemble input", x, device)?;
        let size = x.size();
        let mut h = match size.as_slice() {
            [_, d] if *d == self.input => x.f_unsqueeze(0)?.f_expand([self.members, -1, -1], false)?,
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
        for (i, l) in self.layers.iter().enumerate() {
            h = l.b.f_baddbmm(&h, &l.w, 1.0, 1.0)?;
            if let Some((g, b)) = &l.ln {
                let width = g.size()[2];
                h = h.f_layer_norm([width], None::<&Tensor>, None::<&Tensor>, 1e-5, false)?.f_mul(g)?.f_add(b)?;
            }
            h = if i < last { self.cfg.activation.f_apply(&h)? } else { self.cfg.output_activation.f_apply(&h)? };
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;

    const CPU: (Kind, Device) = (Kind::Float, Device::Cpu);

    #[test]
    fn only_the_names_an_mlp_creates_must_be_free() {
        // the output layer (2) has no layer norm, so a variable at `2.ln.weight` does not clash
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let _ = vs.root().sub("2").sub("ln").zeros("weight", &[1]);
        let cfg = MlpConfig::new([8, 8]).layer_norm(true).check().unwrap();
        assert!(Mlp::new(&vs.root(), 3, 2, &cfg, &mut rng).is_ok());
        // but one at `1.ln.weight` does, and nothing is added
        let vs = VarStore::new(Device::Cpu);
        let _ = vs.root().sub("1").sub("ln").zeros("weight", &[1]);
        assert!(matches!(Mlp::new(&vs.root(), 3, 2, &cfg, &mut rng), Err(RlNnError::InvalidName { .. })));
        assert_eq!(vs.variables().len(), 1);
    }

    #[test]
    fn mlp_shapes_names_and_checked_input() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let cfg = MlpConfig::new([8, 8]).layer_norm(true).output_activation(Activation::Tanh).check().unwrap();
        let mlp = Mlp::new(&vs.root(), 3, 2, &cfg, &mut rng).unwrap();
        let x = crate::rand::standard_normal(&[5, 3], CPU, &mut rng).unwrap();
        let y = mlp.f_forward(&x).unwrap();
        assert_eq!(y.size(), vec![5, 2]);
        assert!(y.abs().max().double_value(&[]) <= 1.0);
        assert_eq!(mlp.f_forward(&x.view([5, 1, 3])).unwrap().size(), [5, 1, 2]);
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
        assert!(matches!(mlp.f_forward(&Tensor::zeros([5, 4], CPU)), Err(RlNnError::Shape { .. })));
        assert_eq!(mlp.f_forward(&Tensor::zeros([3], CPU)).unwrap().size(), [2]);
        assert!(matches!(mlp.f_forward(&Tensor::from(1.0f32)), Err(RlNnError::Shape { .. })));
        assert!(matches!(
            mlp.f_forward(&Tensor::zeros([5, 3], (Kind::Double, Device::Cpu))),
            Err(RlNnError::Kind { .. })
        ));
        assert!(matches!(
            mlp.f_forward(&Tensor::zeros([5, 3], (Kind::Int64, Device::Cpu))),
            Err(RlNnError::Kind { .. })
        ));
        assert!(matches!(mlp.f_forward(&Tensor::new()), Err(RlNnError::Empty { .. })));
        {
            let mut vs64 = VarStore::new(Device::Cpu);
            let m64 = Mlp::new(&vs64.root(), 3, 2, &cfg, &mut rng).unwrap();
            vs64.double();
            assert_eq!(
                m64.f_forward(&Tensor::zeros([5, 3], (Kind::Double, Device::Cpu))).unwrap().kind(),
                Kind::Double
            );
            assert!(matches!(m64.f_forward(&Tensor::zeros([5, 3], CPU)), Err(RlNnError::Kind { .. })));
        }
        assert!(matches!(
            Mlp::new(&vs.root().sub("bad"), 0, 2, &cfg, &mut rng),
            Err(RlNnError::InvalidParameter { ref name, .. }) if name == "input"
        ));
        assert!(matches!(Mlp::new(&vs.root(), 3, 2, &cfg, &mut rng), Err(RlNnError::InvalidName { .. })));
        let e = MlpConfig::new([4, 0]).check().unwrap_err();
        assert!(matches!(e, RlNnError::InvalidParameter { ref name, .. } if name == "hidden[1]"), "{e}");
        let e = MlpConfig::new([4]).bias_init(Init::Normal { mean: 0.0, std: -1.0 }).check().unwrap_err();
        assert!(matches!(e, RlNnError::InvalidParameter { ref name, .. } if name == "bias_init.std"), "{e}");
        let e = MlpConfig::new([4]).output_weight_init(Some(Init::Orthogonal { gain: f64::NAN })).check().unwrap_err();
        assert!(matches!(e, RlNnError::InvalidParameter { ref name, .. } if name == "output_weight_init.gain"), "{e}");
        assert!(MlpConfig::new([4]).weight_init(Init::Uniform { lo: 1.0, hi: 0.0 }).check().is_err());
    }

    #[test]
    fn initialisers_reach_the_right_layers() {
        let vs = VarStore::new(Device::Cpu);
        let cfg = MlpConfig::new([6])
            .weight_init(Init::Constant { value: 0.5 })
            .bias_init(Init::Zeros)
            .output_weight_init(Some(Init::Ones))
            .check()
            .unwrap();
        let mlp = Mlp::new(&vs.root(), 2, 1, &cfg, &mut rl_core::rng_from_seed(0)).unwrap();
        let v = vs.variables();
        assert_eq!(v["0.weight"].mean(Kind::Double).double_value(&[]), 0.5);
        assert_eq!(v["1.weight"].mean(Kind::Double).double_value(&[]), 1.0);
        assert_eq!(v["0.bias"].abs().sum(Kind::Double).double_value(&[]), 0.0);
        // y = sum over 6 units of relu(0.5 (x1 + x2)) = 6 relu(0.5 (x1 + x2))
        let y = mlp.f_forward(&Tensor::from_slice(&[1.0f32, 3.0]).view([1, 2])).unwrap();
        assert_eq!(y.double_value(&[0, 0]), 12.0);
        // the default reproduces nn.Linear's bound 1/sqrt(fan_in) for weight and bias
        let vs = VarStore::new(Device::Cpu);
        let _m = Mlp::new(&vs.root(), 100, 50, &MlpConfig::new([]).check().unwrap(), &mut rl_core::rng_from_seed(0))
            .unwrap();
        let v = vs.variables();
        for name in ["0.weight", "0.bias"] {
            let m = v[name].abs().max().double_value(&[]);
            assert!(m <= 0.1 && m > 0.09, "{name}: {m}");
        }
    }

    #[test]
    fn ensemble_members_are_independent_mlps() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(1);
        let cfg = MlpConfig::new([16]).layer_norm(true).check().unwrap();
        let ens = EnsembleMlp::new(&vs.root(), 4, 3, 2, &cfg, &mut rng).unwrap();
        let x = crate::rand::standard_normal(&[7, 3], CPU, &mut rng).unwrap();
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
        // members differ
        assert!(!vars["0.weight"].get(0).equal(&vars["0.weight"].get(1)));
        let per_member = crate::rand::standard_normal(&[4, 7, 3], CPU, &mut rng).unwrap();
        assert_eq!(ens.f_forward(&per_member).unwrap().size(), vec![4, 7, 2]);
        assert!(matches!(ens.f_forward(&Tensor::zeros([3, 7, 3], CPU)), Err(RlNnError::Shape { .. })));
        assert!(matches!(ens.f_forward(&Tensor::zeros([7, 4], CPU)), Err(RlNnError::Shape { .. })));
        assert!(matches!(ens.f_forward(&Tensor::zeros([2, 4, 7, 3], CPU)), Err(RlNnError::Shape { .. })));
        assert!(matches!(
            ens.f_forward(&Tensor::zeros([7, 3], (Kind::Double, Device::Cpu))),
            Err(RlNnError::Kind { .. })
        ));
        assert!(matches!(
            EnsembleMlp::new(&vs.root().sub("e"), 0, 3, 2, &cfg, &mut rng),
            Err(RlNnError::InvalidParameter { ref name, .. }) if name == "members"
        ));
        // ensemble bounds follow the member layer's fan_in (3), not the stored layout
        let m = vars["0.weight"].abs().max().double_value(&[]);
        assert!(m <= 1.0 / 3f64.sqrt() && m > 0.4, "{m}");
        assert_eq!((ens.members(), ens.input_dim(), ens.output_dim()), (4, 3, 2));
    }

    #[test]
    fn config_serde_defaults_and_rejects_unknown_fields() {
        let c: MlpConfig =
            serde_json::from_str(r#"{"hidden": [32], "weight_init": {"kind": "orthogonal", "gain": 2.0}}"#).unwrap();
        assert_eq!(c, MlpConfig::new([32]).weight_init(Init::Orthogonal { gain: 2.0 }));
        assert!(serde_json::from_str::<MlpConfig>(r#"{"hiden": [32]}"#).is_err());
        assert!(serde_json::from_str::<Valid<MlpConfig>>(r#"{"hidden": [0]}"#).is_err());
        assert_eq!(MlpConfig::default().hidden([3]).hidden, vec![3]);
        let acts = [
            Activation::Identity,
            Activation::Relu,
            Activation::Tanh,
            Activation::Sigmoid,
            Activation::Gelu,
            Activation::Silu,
            Activation::Mish,
            Activation::Elu,
            Activation::LeakyRelu,
        ];
        let x = Tensor::from_slice(&[-1.0f64, 0.5]);
        let want = [
            [-1.0, 0.5],
            [0.0, 0.5],
            [(-1.0f64).tanh(), 0.5f64.tanh()],
            [1.0 / (1.0 + 1f64.exp()), 1.0 / (1.0 + (-0.5f64).exp())],
            [-0.15865525393145707, 0.34573123063700656],
            [-1.0 / (1.0 + 1f64.exp()), 0.5 / (1.0 + (-0.5f64).exp())],
            [-(1.0 + (-1f64).exp()).ln().tanh(), 0.5 * (1.0 + 0.5f64.exp()).ln().tanh()],
            [(-1f64).exp() - 1.0, 0.5],
            [-0.01, 0.5],
        ];
        for (a, w) in acts.iter().zip(want) {
            let y = Vec::<f64>::try_from(&a.f_apply(&x).unwrap()).unwrap();
            assert!((y[0] - w[0]).abs() < 1e-12 && (y[1] - w[1]).abs() < 1e-12, "{a:?}: {y:?}");
        }
    }
}
