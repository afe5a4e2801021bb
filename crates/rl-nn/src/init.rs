//! Seeded, global-free parameter initialisation.
//!
//! Every initial weight of frugal-rl is drawn here, in Rust, from the caller's generator
//! (`&mut impl Rng`, usually a [`rl_core::SeededRng`] derived from the run's seed), then moved to
//! the device. libtorch's process-wide generator is never touched, so two models built in two
//! threads from the same seed are bit-identical, and building one model never shifts another's
//! weights.
//!
//! | [`Init`] | values | PyTorch equivalent |
//! |---|---|---|
//! | `zeros`, `ones`, `constant` | the constant | `nn.init.zeros_`, `ones_`, `constant_` |
//! | `uniform { lo, hi }` | `U(lo, hi)` | `nn.init.uniform_` |
//! | `normal { mean, std }` | `N(mean, std²)` | `nn.init.normal_` |
//! | `truncated_normal { mean, std, lo, hi }` | `N(mean, std²)` restricted to `[lo, hi]` (inverse CDF) | `nn.init.trunc_normal_` |
//! | `torch_linear` | `U(±1/√fan_in)` | `nn.Linear`'s default (weight and bias) |
//! | `xavier_uniform { gain }` | `U(±gain·√(6/(fan_in+fan_out)))` | `nn.init.xavier_uniform_` |
//! | `xavier_normal { gain }` | `N(0, gain²·2/(fan_in+fan_out))` | `nn.init.xavier_normal_` |
//! | `kaiming_uniform { gain, mode }` | `U(±gain·√(3/fan))` | `nn.init.kaiming_uniform_` (pass the gain, see [`calculate_gain`]) |
//! | `kaiming_normal { gain, mode }` | `N(0, gain²/fan)` | `nn.init.kaiming_normal_` |
//! | `orthogonal { gain }` | `gain·Q`, `Q` from the QR of a Gaussian matrix, `diag(R) > 0` | `nn.init.orthogonal_` |
//!
//! Fans follow `torch.nn.init._calculate_fan_in_and_fan_out`: for a shape `[out, in, k...]`,
//! `fan_in = in·Πk` and `fan_out = out·Πk` ([`Fans::of_shape`]); a bias or a non-standard layout
//! (the `[E, in, out]` weights of an [`crate::EnsembleMlp`]) passes its fans explicitly.
//!
//! The distributions equal PyTorch's; the streams do not (PyTorch draws from its own
//! generator), so a model is reproducible from its seed here, not bit-equal to a PyTorch model
//! with the same seed. Uniform draws use the top 53 bits of one `u64` per value
//! (`u = (x >> 11)·2⁻⁵³`); normal draws use `rand_distr::StandardNormal` (ziggurat). Values
//! are computed in `f64` and rounded once to the tensor's kind.
//!
//! ```
//! use rl_nn::init::{self, Init};
//! use tch::{nn::VarStore, Device, Kind};
//! let mut rng = rl_core::rng_from_seed(0);
//! let vs = VarStore::new(Device::Cpu);
//! let w = init::var(&vs.root(), "actor.0.weight", &[64, 17], Init::Orthogonal { gain: 2f64.sqrt() }, &mut rng)?;
//! let b = init::var(&vs.root(), "actor.0.bias", &[64], Init::Zeros, &mut rng)?;
//! assert_eq!(w.size(), [64, 17]);
//! assert!(vs.variables().contains_key("actor.0.weight"));
//! // The same seed gives the same tensor, in any thread.
//! let a = init::tensor(Init::TorchLinear, &[3, 4], (Kind::Float, Device::Cpu), &mut rl_core::rng_from_seed(1))?;
//! let c = init::tensor(Init::TorchLinear, &[3, 4], (Kind::Float, Device::Cpu), &mut rl_core::rng_from_seed(1))?;
//! assert!(a.equal(&c));
//! # let _ = b;
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::{Device, Kind, Tensor};

use crate::activation::Activation;
use crate::check;
use crate::error::{Result, RlNnError};

/// Which fan [`Init::KaimingUniform`] / [`Init::KaimingNormal`] scale by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FanMode {
    /// `fan_in` (preserves the forward variance; PyTorch's default).
    #[default]
    FanIn,
    /// `fan_out` (preserves the backward variance).
    FanOut,
}

fn one() -> f64 {
    1.0
}

fn sqrt2() -> f64 {
    std::f64::consts::SQRT_2
}

/// An initialiser: a distribution of the initial values of one tensor. See the module docs
/// for the table of formulas. In a config file: `{ kind = "orthogonal", gain = 1.41 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum Init {
    /// All zeros.
    Zeros,
    /// All ones.
    Ones,
    /// Every value equal to `value`.
    Constant {
        /// The value.
        value: f64,
    },
    /// `U(lo, hi)`.
    Uniform {
        /// Lower bound.
        lo: f64,
        /// Upper bound (`>= lo`).
        hi: f64,
    },
    /// `N(mean, std²)`.
    Normal {
        /// Mean.
        #[serde(default)]
        mean: f64,
        /// Standard deviation (`>= 0`).
        std: f64,
    },
    /// `N(mean, std²)` restricted to `[lo, hi]`, drawn by the inverse CDF as
    /// `torch.nn.init.trunc_normal_` (default bounds `±2`, absolute, as PyTorch's).
    TruncatedNormal {
        /// Mean.
        #[serde(default)]
        mean: f64,
        /// Standard deviation (`> 0`).
        std: f64,
        /// Lower bound (absolute).
        #[serde(default = "minus_two")]
        lo: f64,
        /// Upper bound (absolute, `> lo`).
        #[serde(default = "two")]
        hi: f64,
    },
    /// `U(-1/√fan_in, 1/√fan_in)`: PyTorch's `nn.Linear` default for weight and bias (a
    /// bias passes its layer's fans).
    TorchLinear,
    /// Glorot uniform: `U(±gain·√(6/(fan_in+fan_out)))`.
    XavierUniform {
        /// Gain ([`calculate_gain`]).
        #[serde(default = "one")]
        gain: f64,
    },
    /// Glorot normal: `N(0, gain²·2/(fan_in+fan_out))`.
    XavierNormal {
        /// Gain.
        #[serde(default = "one")]
        gain: f64,
    },
    /// He uniform: `U(±gain·√(3/fan))`.
    KaimingUniform {
        /// Gain (√2 for ReLU, PyTorch's default).
        #[serde(default = "sqrt2")]
        gain: f64,
        /// Which fan.
        #[serde(default)]
        mode: FanMode,
    },
    /// He normal: `N(0, gain²/fan)`.
    KaimingNormal {
        /// Gain (√2 for ReLU).
        #[serde(default = "sqrt2")]
        gain: f64,
        /// Which fan.
        #[serde(default)]
        mode: FanMode,
    },
    /// A (semi-)orthogonal matrix times `gain` (PPO nets: `√2` hidden, `0.01` policy head,
    /// `1` value head). Tensors of rank > 2 are flattened to `[shape[0], rest]`.
    Orthogonal {
        /// Gain.
        #[serde(default = "one")]
        gain: f64,
    },
}

fn minus_two() -> f64 {
    -2.0
}

fn two() -> f64 {
    2.0
}

impl Init {
    /// Checks the initialiser's own parameters.
    ///
    /// # Errors
    /// [`RlNnError::InvalidParameter`] naming the bad field.
    pub fn validate(&self) -> Result<()> {
        let finite = |name: &str, v: f64| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(RlNnError::invalid(name, v, "must be finite"))
            }
        };
        match *self {
            Init::Zeros | Init::Ones | Init::TorchLinear => Ok(()),
            Init::Constant { value } => finite("init.value", value),
            Init::Uniform { lo, hi } => {
                finite("init.lo", lo)?;
                finite("init.hi", hi)?;
                if lo > hi {
                    return Err(RlNnError::invalid("init.hi", hi, format!("must be >= lo = {lo}")));
                }
                Ok(())
            }
            Init::Normal { mean, std } => {
                finite("init.mean", mean)?;
                finite("init.std", std)?;
                if std < 0.0 {
                    return Err(RlNnError::invalid("init.std", std, "must be >= 0"));
                }
                Ok(())
            }
            Init::TruncatedNormal { mean, std, lo, hi } => {
                finite("init.mean", mean)?;
                finite("init.std", std)?;
                finite("init.lo", lo)?;
                finite("init.hi", hi)?;
                if std <= 0.0 {
                    return Err(RlNnError::invalid("init.std", std, "must be > 0"));
                }
                if lo >= hi {
                    return Err(RlNnError::invalid("init.hi", hi, format!("must be > lo = {lo}")));
                }
                Ok(())
            }
            Init::XavierUniform { gain }
            | Init::XavierNormal { gain }
            | Init::KaimingUniform { gain, .. }
            | Init::KaimingNormal { gain, .. }
            | Init::Orthogonal { gain } => finite("init.gain", gain),
        }
    }

    /// Whether the initialiser reads the tensor's fans.
    pub fn needs_fans(&self) -> bool {
        matches!(
            self,
            Init::TorchLinear
                | Init::XavierUniform { .. }
                | Init::XavierNormal { .. }
                | Init::KaimingUniform { .. }
                | Init::KaimingNormal { .. }
        )
    }
}

/// PyTorch's `nn.init.calculate_gain` for an [`Activation`]: `1` (identity, sigmoid), `5/3`
/// (tanh), `√2` (ReLU), `√(2/(1+0.01²))` (leaky ReLU with slope 0.01). `None` where PyTorch
/// defines no gain (GELU, SiLU, Mish, ELU): choose one explicitly.
pub fn calculate_gain(activation: Activation) -> Option<f64> {
    match activation {
        Activation::Identity | Activation::Sigmoid => Some(1.0),
        Activation::Tanh => Some(5.0 / 3.0),
        Activation::Relu => Some(std::f64::consts::SQRT_2),
        Activation::LeakyRelu => Some((2.0 / (1.0 + 0.01f64 * 0.01)).sqrt()),
        Activation::Gelu | Activation::Silu | Activation::Mish | Activation::Elu => None,
    }
}

/// The fans of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fans {
    /// Inputs per output unit.
    pub fan_in: i64,
    /// Outputs per input unit.
    pub fan_out: i64,
}

impl Fans {
    /// Explicit fans (a bias passes its layer's).
    pub fn new(fan_in: i64, fan_out: i64) -> Self {
        Self { fan_in, fan_out }
    }

    /// PyTorch's rule for a weight of shape `[out, in, k...]`: `fan_in = in·Πk`,
    /// `fan_out = out·Πk`.
    ///
    /// # Errors
    /// [`RlNnError::Shape`] for fewer than two dimensions (PyTorch refuses them too).
    pub fn of_shape(shape: &[i64]) -> Result<Self> {
        if shape.len() < 2 {
            return Err(RlNnError::Shape {
                what: "fans of a tensor".into(),
                expected: "at least 2 dimensions [out, in, ...] (pass the fans of a bias explicitly)".into(),
                got: shape.to_vec(),
            });
        }
        let receptive: i64 = shape[2..].iter().product();
        Ok(Self { fan_in: shape[1] * receptive, fan_out: shape[0] * receptive })
    }
}

/// One uniform `[0, 1)` value from the top 53 bits of a `u64`.
pub(crate) fn unit<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `U(lo, hi)` as `mid + half·(2u − 1)`: exactly `(2u − 1)·b` for the symmetric `U(−b, b)`
/// (adding `mid = 0.0` is exact, and `(2u − 1)·b` is never `−0.0`).
pub(crate) fn uniform_value<R: Rng + ?Sized>(lo: f64, hi: f64, rng: &mut R) -> f64 {
    let (mid, half) = ((lo + hi) / 2.0, (hi - lo) / 2.0);
    mid + (2.0 * unit(rng) - 1.0) * half
}

fn numel(shape: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| RlNnError::Shape {
            what: "tensor to initialise".into(),
            expected: "non-negative dimensions".into(),
            got: shape.to_vec(),
        })?;
        n = n.checked_mul(d).ok_or_else(|| RlNnError::Shape {
            what: "tensor to initialise".into(),
            expected: "fewer than 2^64 elements".into(),
            got: shape.to_vec(),
        })?;
    }
    Ok(n)
}

fn fan_checked(name: &str, fan: i64) -> Result<f64> {
    if fan <= 0 {
        return Err(RlNnError::invalid(name, fan, "must be >= 1"));
    }
    Ok(fan as f64)
}

/// The initial values of a tensor of `shape` (row-major, `f64`), drawn from `rng`.
///
/// `fans` is needed only by initialisers that read it ([`Init::needs_fans`]); `None` computes
/// them from `shape` by PyTorch's rule.
///
/// # Errors
/// [`RlNnError::InvalidParameter`] for a bad initialiser or non-positive fans,
/// [`RlNnError::Shape`] for a negative dimension, a rank below 2 where fans or an orthogonal
/// matrix are needed.
pub fn values<R: Rng + ?Sized>(init: Init, shape: &[i64], fans: Option<Fans>, rng: &mut R) -> Result<Vec<f64>> {
    init.validate()?;
    let n = numel(shape)?;
    let fans = match (init.needs_fans(), fans) {
        (false, _) => Fans::new(1, 1),
        (true, Some(f)) => f,
        (true, None) => Fans::of_shape(shape)?,
    };
    let uniform = |b: f64, rng: &mut R| -> Vec<f64> { (0..n).map(|_| uniform_value(-b, b, rng)).collect() };
    let normal = |mean: f64, std: f64, rng: &mut R| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let z: f64 = StandardNormal.sample(rng);
                mean + std * z
            })
            .collect()
    };
    Ok(match init {
        Init::Zeros => vec![0.0; n],
        Init::Ones => vec![1.0; n],
        Init::Constant { value } => vec![value; n],
        Init::Uniform { lo, hi } => (0..n).map(|_| uniform_value(lo, hi, rng)).collect(),
        Init::Normal { mean, std } => normal(mean, std, rng),
        Init::TruncatedNormal { mean, std, lo, hi } => truncated_normal(n, mean, std, lo, hi, rng),
        Init::TorchLinear => uniform(1.0 / fan_checked("fan_in", fans.fan_in)?.sqrt(), rng),
        Init::XavierUniform { gain } => {
            let f = fan_checked("fan_in", fans.fan_in)? + fan_checked("fan_out", fans.fan_out)?;
            uniform(gain * (6.0 / f).sqrt(), rng)
        }
        Init::XavierNormal { gain } => {
            let f = fan_checked("fan_in", fans.fan_in)? + fan_checked("fan_out", fans.fan_out)?;
            normal(0.0, gain * (2.0 / f).sqrt(), rng)
        }
        Init::KaimingUniform { gain, mode } => {
            let f = kaiming_fan(fans, mode)?;
            uniform(gain * (3.0 / f).sqrt(), rng)
        }
        Init::KaimingNormal { gain, mode } => {
            let f = kaiming_fan(fans, mode)?;
            normal(0.0, gain / f.sqrt(), rng)
        }
        Init::Orthogonal { gain } => {
            if shape.len() < 2 {
                return Err(RlNnError::Shape {
                    what: "orthogonal initialisation".into(),
                    expected: "at least 2 dimensions".into(),
                    got: shape.to_vec(),
                });
            }
            let rows = shape[0] as usize;
            let cols = n.checked_div(rows).unwrap_or(0);
            orthogonal(rows, cols, gain, rng)
        }
    })
}

fn kaiming_fan(fans: Fans, mode: FanMode) -> Result<f64> {
    match mode {
        FanMode::FanIn => fan_checked("fan_in", fans.fan_in),
        FanMode::FanOut => fan_checked("fan_out", fans.fan_out),
    }
}

/// Inverse-CDF truncated normal, PyTorch's `trunc_normal_` method: `u ~ U(2Φ(a)−1, 2Φ(b)−1)`,
/// `x = mean + std·√2·erfinv(u)`, clamped to `[lo, hi]`.
fn truncated_normal<R: Rng + ?Sized>(n: usize, mean: f64, std: f64, lo: f64, hi: f64, rng: &mut R) -> Vec<f64> {
    let cdf = |x: f64| (1.0 + statrs::function::erf::erf(x / std::f64::consts::SQRT_2)) / 2.0;
    let l = cdf((lo - mean) / std);
    let u = cdf((hi - mean) / std);
    (0..n)
        .map(|_| {
            let v = (2.0 * l - 1.0) + (2.0 * u - 2.0 * l) * unit(rng);
            let x = mean + std * std::f64::consts::SQRT_2 * statrs::function::erf::erf_inv(v);
            x.clamp(lo, hi)
        })
        .collect()
}

/// `gain·Q` for a `rows × cols` Gaussian matrix, as `torch.nn.init.orthogonal_`: transpose
/// when `rows < cols`, QR (Householder, `f64`), multiply each column of `Q` by the sign of
/// `diag(R)`, transpose back. Row-major output.
fn orthogonal<R: Rng + ?Sized>(rows: usize, cols: usize, gain: f64, rng: &mut R) -> Vec<f64> {
    let flat: Vec<f64> = (0..rows * cols).map(|_| StandardNormal.sample(rng)).collect();
    if rows == 0 || cols == 0 {
        return flat;
    }
    // A column-major m×n matrix with m >= n.
    let (m, n, a) = if rows >= cols {
        let mut a = vec![0.0; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                a[j * rows + i] = flat[i * cols + j];
            }
        }
        (rows, cols, a)
    } else {
        // A = flatᵀ (cols × rows); its column-major storage is `flat` itself.
        (cols, rows, flat)
    };
    let q = householder_q(m, n, a);
    let mut out = vec![0.0; rows * cols];
    if rows >= cols {
        for i in 0..rows {
            for j in 0..cols {
                out[i * cols + j] = gain * q[j * m + i];
            }
        }
    } else {
        // out = Qᵀ: out[i][j] = Q[j][i] = q[i*m + j], i.e. q itself row-major.
        for (o, x) in out.iter_mut().zip(&q) {
            *o = gain * x;
        }
    }
    out
}

/// The `m × n` factor `Q` (column-major) of the thin QR of a column-major `m × n` matrix
/// (`m >= n`), with the signs of PyTorch's `orthogonal_` (`Q·sign(diag(R))`).
pub(crate) fn householder_q(m: usize, n: usize, mut a: Vec<f64>) -> Vec<f64> {
    let mut vs: Vec<Vec<f64>> = Vec::with_capacity(n);
    let mut sign = vec![0.0f64; n];
    for k in 0..n {
        let col = &a[k * m + k..k * m + m];
        let norm = col.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 {
            vs.push(Vec::new());
            continue;
        }
        let alpha = if col[0] >= 0.0 { -norm } else { norm };
        sign[k] = alpha.signum();
        let mut v = col.to_vec();
        v[0] -= alpha;
        let vn = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if vn > 0.0 {
            v.iter_mut().for_each(|x| *x /= vn);
            for j in k..n {
                let c = &mut a[j * m + k..j * m + m];
                let s: f64 = v.iter().zip(c.iter()).map(|(x, y)| x * y).sum();
                c.iter_mut().zip(&v).for_each(|(y, x)| *y -= 2.0 * s * x);
            }
            vs.push(v);
        } else {
            vs.push(Vec::new());
        }
    }
    let mut q = vec![0.0; m * n];
    for j in 0..n {
        q[j * m + j] = 1.0;
    }
    for k in (0..n).rev() {
        let v = &vs[k];
        if v.is_empty() {
            continue;
        }
        for j in 0..n {
            let c = &mut q[j * m + k..j * m + m];
            let s: f64 = v.iter().zip(c.iter()).map(|(x, y)| x * y).sum();
            c.iter_mut().zip(v).for_each(|(y, x)| *y -= 2.0 * s * x);
        }
    }
    for (j, s) in sign.iter().enumerate() {
        q[j * m..(j + 1) * m].iter_mut().for_each(|x| *x *= s);
    }
    q
}

/// Errors unless `kind` is floating and `device` available.
pub(crate) fn check_opts((kind, device): (Kind, Device)) -> Result<()> {
    if !check::is_float(kind) {
        return Err(RlNnError::Kind {
            what: "tensor to initialise".into(),
            expected: "a floating-point kind".into(),
            got: format!("{kind:?}"),
        });
    }
    check::available(device)
}

/// A tensor of `values` (row-major) with `shape`, of floating kind `kind`, on `device`.
///
/// # Errors
/// [`RlNnError::Kind`] for a non-floating kind, [`RlNnError::DeviceUnavailable`],
/// [`RlNnError::Shape`] when the counts differ, libtorch failures.
pub fn from_values(values: &[f64], shape: &[i64], (kind, device): (Kind, Device)) -> Result<Tensor> {
    check_opts((kind, device))?;
    if numel(shape)? != values.len() {
        return Err(RlNnError::Shape {
            what: "values".into(),
            expected: format!("{} values", values.len()),
            got: shape.to_vec(),
        });
    }
    // f64 values stay f64; every other kind is rounded once to f32 in Rust (as PyTorch's f32
    // init), then converted by libtorch (a no-op for f32).
    let t = if kind == Kind::Double {
        Tensor::f_from_slice(values)?
    } else {
        let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
        Tensor::f_from_slice(&v)?.f_to_kind(kind)?
    };
    Ok(t.f_reshape(shape)?.f_to_device(device)?)
}

/// A fresh tensor initialised by `init` (fans from `shape`), drawn from `rng`.
///
/// # Errors
/// As [`values`] and [`from_values`].
pub fn tensor<R: Rng + ?Sized>(init: Init, shape: &[i64], opts: (Kind, Device), rng: &mut R) -> Result<Tensor> {
    tensor_with_fans(init, shape, None, opts, rng)
}

/// A fresh tensor initialised by `init` with explicit fans (a bias, or a non-standard layout).
///
/// # Errors
/// As [`values`] and [`from_values`].
pub fn tensor_with_fans<R: Rng + ?Sized>(
    init: Init,
    shape: &[i64],
    fans: Option<Fans>,
    opts: (Kind, Device),
    rng: &mut R,
) -> Result<Tensor> {
    // Check kind and device before drawing, so a failed call consumes no randomness.
    check_opts(opts)?;
    let v = values(init, shape, fans, rng)?;
    from_values(&v, shape, opts)
}

/// Splits `a.b.c` into the sub-path `a.b` of `path` and the leaf name `c` (tch forbids dots in
/// names), checking every segment.
fn leaf<'a>(path: &Path<'a>, dotted: &str) -> Result<(Path<'a>, String)> {
    let parts: Vec<&str> = dotted.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(RlNnError::InvalidName { name: dotted.into(), reason: "empty name segment".into() });
    }
    let (name, subs) = parts
        .split_last()
        .ok_or_else(|| RlNnError::InvalidName { name: dotted.into(), reason: "empty name".into() })?;
    let p = subs.iter().fold(path.clone(), |p, s| p.sub(*s));
    if p.get(name).is_some() {
        return Err(RlNnError::InvalidName { name: p.path(name), reason: "a variable of this name exists".into() });
    }
    Ok((p, (*name).to_string()))
}

/// Creates the trainable variable `name` (dots make sub-paths: `"attn.qkv.weight"`) under
/// `path`, initialised by `init` (fans from `shape`) in the store's kind and on its device.
///
/// # Errors
/// [`RlNnError::InvalidName`] for an empty segment or an existing name; as [`values`].
pub fn var<R: Rng + ?Sized>(path: &Path<'_>, name: &str, shape: &[i64], init: Init, rng: &mut R) -> Result<Tensor> {
    var_with_fans(path, name, shape, init, None, rng)
}

/// As [`var`] with explicit fans.
///
/// # Errors
/// As [`var`].
pub fn var_with_fans<R: Rng + ?Sized>(
    path: &Path<'_>,
    name: &str,
    shape: &[i64],
    init: Init,
    fans: Option<Fans>,
    rng: &mut R,
) -> Result<Tensor> {
    let (p, leaf_name) = leaf(path, name)?;
    let t = tensor_with_fans(init, shape, fans, (p.kind(), p.device()), rng)?;
    Ok(p.add(&leaf_name, t, true))
}

/// Creates a non-trainable variable (a buffer: running statistics, masks) under `path`; it is
/// saved in checkpoints but gets no gradient.
///
/// # Errors
/// As [`var`].
pub fn buffer<R: Rng + ?Sized>(path: &Path<'_>, name: &str, shape: &[i64], init: Init, rng: &mut R) -> Result<Tensor> {
    let (p, leaf_name) = leaf(path, name)?;
    let t = tensor_with_fans(init, shape, None, (p.kind(), p.device()), rng)?;
    Ok(p.add(&leaf_name, t, false))
}

/// The weight `[out, in]` and bias `[out]` of a PyTorch-default `nn.Linear` (`U(±1/√in)` for
/// both), as variables `{name}.weight` and `{name}.bias` under `path`. The weight is drawn first,
/// then the bias, as PyTorch does.
///
/// # Errors
/// As [`var`].
pub fn linear<R: Rng + ?Sized>(
    path: &Path<'_>,
    name: &str,
    input: i64,
    output: i64,
    bias: bool,
    rng: &mut R,
) -> Result<(Tensor, Option<Tensor>)> {
    let fans = Fans::new(input, output);
    let w = var_with_fans(path, &format!("{name}.weight"), &[output, input], Init::TorchLinear, Some(fans), rng)?;
    let b = if bias {
        Some(var_with_fans(path, &format!("{name}.bias"), &[output], Init::TorchLinear, Some(fans), rng)?)
    } else {
        None
    };
    Ok((w, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;

    fn stats(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (m, (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt())
    }

    #[test]
    fn buffers_are_saved_but_not_trained() -> Result<()> {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let b = buffer(&vs.root().sub("stats"), "mean", &[2, 3], Init::Constant { value: 1.5 }, &mut rng)?;
        assert_eq!(b.size(), vec![2, 3]);
        assert!(!b.requires_grad());
        assert_eq!(Vec::<f32>::try_from(b.flatten(0, -1))?, vec![1.5f32; 6]);
        assert!(vs.variables().contains_key("stats.mean"));
        assert!(vs.trainable_variables().is_empty());
        Ok(())
    }

    #[test]
    fn distributions_have_their_moments_and_bounds() {
        let mut rng = rl_core::rng_from_seed(3);
        let v = values(Init::TorchLinear, &[200, 100], None, &mut rng).unwrap();
        let b = 0.1;
        assert!(v.iter().all(|x| x.abs() <= b));
        let (m, s) = stats(&v);
        assert!(m.abs() < 0.003 && (s - b / 3f64.sqrt()).abs() < 0.002, "{m} {s}");
        let v = values(Init::Normal { mean: 1.0, std: 0.5 }, &[20_000], None, &mut rng).unwrap();
        let (m, s) = stats(&v);
        assert!((m - 1.0).abs() < 0.02 && (s - 0.5).abs() < 0.01, "{m} {s}");
        let v = values(Init::XavierUniform { gain: 2.0 }, &[30, 70], None, &mut rng).unwrap();
        let bound = 2.0 * (6.0f64 / 100.0).sqrt();
        assert!(v.iter().all(|x| x.abs() <= bound) && v.iter().any(|x| x.abs() > 0.9 * bound));
        let v = values(Init::XavierNormal { gain: 1.0 }, &[100, 100], None, &mut rng).unwrap();
        assert!((stats(&v).1 - 0.1).abs() < 0.003);
        let v = values(Init::KaimingNormal { gain: 2f64.sqrt(), mode: FanMode::FanOut }, &[50, 200], None, &mut rng)
            .unwrap();
        assert!((stats(&v).1 - (2.0f64 / 50.0).sqrt()).abs() < 0.005);
        let v = values(Init::KaimingUniform { gain: 1.0, mode: FanMode::FanIn }, &[50, 3, 4], None, &mut rng).unwrap();
        assert!(v.iter().all(|x| x.abs() <= (3.0f64 / 12.0).sqrt()));
        let v =
            values(Init::TruncatedNormal { mean: 0.0, std: 1.0, lo: -0.5, hi: 1.0 }, &[5000], None, &mut rng).unwrap();
        assert!(v.iter().all(|x| (-0.5..=1.0).contains(x)));
        assert!(v.iter().any(|x| *x < -0.45) && v.iter().any(|x| *x > 0.95));
        assert_eq!(values(Init::Constant { value: 2.5 }, &[3], None, &mut rng).unwrap(), vec![2.5; 3]);
        assert_eq!(values(Init::Ones, &[2, 0], None, &mut rng).unwrap(), Vec::<f64>::new());
        let v = values(Init::Uniform { lo: 2.0, hi: 3.0 }, &[1000], None, &mut rng).unwrap();
        assert!(v.iter().all(|x| (2.0..3.0).contains(x)));
    }

    #[test]
    fn truncated_normal_has_the_moments_of_the_truncated_law() {
        // N(0, 1) on [0, 2]: mean = (φ(0) − φ(2)) / Z = 0.72278, std = 0.50133 (Z = Φ(2) − ½).
        let mut rng = rl_core::rng_from_seed(5);
        let v =
            values(Init::TruncatedNormal { mean: 0.0, std: 1.0, lo: 0.0, hi: 2.0 }, &[40_000], None, &mut rng).unwrap();
        let (m, s) = stats(&v);
        assert!((m - 0.72278).abs() < 0.01 && (s - 0.50133).abs() < 0.01, "{m} {s}");
        // shifted and scaled: N(1, 2²) on [1, 5] is 1 + 2·(the law above)
        let v =
            values(Init::TruncatedNormal { mean: 1.0, std: 2.0, lo: 1.0, hi: 5.0 }, &[40_000], None, &mut rng).unwrap();
        let (m, s) = stats(&v);
        assert!((m - (1.0 + 2.0 * 0.72278)).abs() < 0.02 && (s - 2.0 * 0.50133).abs() < 0.02, "{m} {s}");
    }

    #[test]
    fn fans_gains_and_kinds() {
        assert_eq!(Fans::of_shape(&[6, 3, 4, 5]).unwrap(), Fans::new(60, 120));
        assert_eq!(Fans::of_shape(&[6, 3]).unwrap(), Fans::new(3, 6));
        let mut rng = rl_core::rng_from_seed(8);
        // fan_out of a conv-like shape: bound sqrt(3 / (6·20)) for kaiming fan_out, gain 1
        let v =
            values(Init::KaimingUniform { gain: 1.0, mode: FanMode::FanOut }, &[6, 3, 4, 5], None, &mut rng).unwrap();
        let b = (3.0f64 / 120.0).sqrt();
        assert!(v.iter().all(|x| x.abs() <= b) && v.iter().any(|x| x.abs() > 0.9 * b));
        let v = values(Init::XavierUniform { gain: 1.0 }, &[6, 3, 4, 5], None, &mut rng).unwrap();
        let b = (6.0f64 / 180.0).sqrt();
        assert!(v.iter().all(|x| x.abs() <= b) && v.iter().any(|x| x.abs() > 0.9 * b));
        for (a, g) in [
            (Activation::Identity, Some(1.0)),
            (Activation::Sigmoid, Some(1.0)),
            (Activation::Relu, Some(2f64.sqrt())),
            (Activation::LeakyRelu, Some((2.0 / 1.0001f64).sqrt())),
            (Activation::Silu, None),
            (Activation::Mish, None),
            (Activation::Elu, None),
        ] {
            assert_eq!(calculate_gain(a), g, "{a:?}");
        }
        // f64 values are kept exactly; other kinds are rounded once
        let d = tensor(Init::Constant { value: 0.1 }, &[2], (Kind::Double, Device::Cpu), &mut rng).unwrap();
        assert_eq!(Vec::<f64>::try_from(&d).unwrap(), vec![0.1, 0.1]);
        let f = tensor(Init::Constant { value: 0.1 }, &[2], (Kind::Float, Device::Cpu), &mut rng).unwrap();
        assert_eq!((f.kind(), Vec::<f32>::try_from(&f).unwrap()), (Kind::Float, vec![0.1f32, 0.1]));
        let h = tensor(Init::Ones, &[3], (Kind::Half, Device::Cpu), &mut rng).unwrap();
        assert_eq!(h.kind(), Kind::Half);
        assert!(matches!(from_values(&[1.0, 2.0], &[3], (Kind::Float, Device::Cpu)), Err(RlNnError::Shape { .. })));
        assert!(matches!(values(Init::Zeros, &[i64::MAX, i64::MAX], None, &mut rng), Err(RlNnError::Shape { .. })));
        assert!(Init::Uniform { lo: 1.0, hi: 1.0 }.validate().is_ok());
        assert_eq!(values(Init::Uniform { lo: 1.0, hi: 1.0 }, &[3], None, &mut rng).unwrap(), vec![1.0; 3]);
        assert!(!Init::Normal { mean: 0.0, std: 1.0 }.needs_fans() && Init::TorchLinear.needs_fans());
    }

    #[test]
    fn orthogonal_matches_torch_qr_on_the_same_matrix() {
        for (rows, cols) in [(6usize, 4usize), (4, 6), (5, 5), (1, 3)] {
            let mut rng = rl_core::rng_from_seed(9);
            let q = values(Init::Orthogonal { gain: 1.5 }, &[rows as i64, cols as i64], None, &mut rng).unwrap();
            // the same Gaussian matrix, factorised by libtorch (LAPACK)
            let mut rng = rl_core::rng_from_seed(9);
            let g: Vec<f64> = (0..rows * cols).map(|_| StandardNormal.sample(&mut rng)).collect();
            let mut a = Tensor::from_slice(&g).view([rows as i64, cols as i64]);
            if rows < cols {
                a = a.tr();
            }
            let (tq, tr) = Tensor::linalg_qr(&a, "reduced");
            let mut tq = tq * tr.diagonal(0, 0, 1).sign();
            if rows < cols {
                tq = tq.tr();
            }
            let want = Vec::<f64>::try_from(&(tq * 1.5).contiguous().view([-1])).unwrap();
            let err = q.iter().zip(&want).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            assert!(err < 1e-12, "{rows}x{cols}: {err}");
            // rows (or columns) orthonormal up to the gain
            let t = Tensor::from_slice(&q).view([rows as i64, cols as i64]) / 1.5;
            let gram = if rows >= cols { t.tr().matmul(&t) } else { t.matmul(&t.tr()) };
            let eye = Tensor::eye(rows.min(cols) as i64, (Kind::Double, Device::Cpu));
            assert!(f64::try_from((gram - eye).abs().max()).unwrap() < 1e-12);
        }
    }

    #[test]
    fn bad_parameters_and_shapes_are_errors() {
        let mut rng = rl_core::rng_from_seed(0);
        assert!(matches!(values(Init::TorchLinear, &[5], None, &mut rng), Err(RlNnError::Shape { .. })));
        values(Init::TorchLinear, &[5], Some(Fans::new(3, 5)), &mut rng).unwrap();
        assert!(matches!(
            values(Init::TorchLinear, &[5], Some(Fans::new(0, 5)), &mut rng),
            Err(RlNnError::InvalidParameter { ref name, .. }) if name == "fan_in"
        ));
        assert!(matches!(values(Init::Orthogonal { gain: 1.0 }, &[4], None, &mut rng), Err(RlNnError::Shape { .. })));
        assert!(matches!(values(Init::Zeros, &[-1], None, &mut rng), Err(RlNnError::Shape { .. })));
        let bad = [
            (Init::Normal { mean: 0.0, std: -1.0 }, "init.std"),
            (Init::Normal { mean: f64::NAN, std: 1.0 }, "init.mean"),
            (Init::Normal { mean: 0.0, std: f64::INFINITY }, "init.std"),
            (Init::Uniform { lo: 1.0, hi: 0.0 }, "init.hi"),
            (Init::Uniform { lo: f64::NAN, hi: 0.0 }, "init.lo"),
            (Init::Uniform { lo: 0.0, hi: f64::INFINITY }, "init.hi"),
            (Init::Constant { value: f64::NAN }, "init.value"),
            (Init::TruncatedNormal { mean: 0.0, std: 1.0, lo: 1.0, hi: 1.0 }, "init.hi"),
            (Init::TruncatedNormal { mean: 0.0, std: 0.0, lo: 0.0, hi: 1.0 }, "init.std"),
            (Init::TruncatedNormal { mean: f64::NAN, std: 1.0, lo: 0.0, hi: 1.0 }, "init.mean"),
            (Init::TruncatedNormal { mean: 0.0, std: f64::NAN, lo: 0.0, hi: 1.0 }, "init.std"),
            (Init::TruncatedNormal { mean: 0.0, std: 1.0, lo: f64::NEG_INFINITY, hi: 1.0 }, "init.lo"),
            (Init::TruncatedNormal { mean: 0.0, std: 1.0, lo: 0.0, hi: f64::INFINITY }, "init.hi"),
            (Init::Orthogonal { gain: f64::INFINITY }, "init.gain"),
            (Init::XavierUniform { gain: f64::NAN }, "init.gain"),
            (Init::XavierNormal { gain: f64::NAN }, "init.gain"),
            (Init::KaimingUniform { gain: f64::NAN, mode: FanMode::FanIn }, "init.gain"),
            (Init::KaimingNormal { gain: f64::NAN, mode: FanMode::FanIn }, "init.gain"),
        ];
        for (b, field) in bad {
            match values(b, &[2, 2], None, &mut rng) {
                Err(RlNnError::InvalidParameter { name, .. }) => assert_eq!(name, field, "{b:?}"),
                other => panic!("{b:?}: {other:?}"),
            }
        }
        assert!(Init::Normal { mean: 0.0, std: 0.0 }.validate().is_ok());
        assert!(matches!(
            values(Init::KaimingNormal { gain: 1.0, mode: FanMode::FanOut }, &[0, 3], None, &mut rng),
            Err(RlNnError::InvalidParameter { ref name, .. }) if name == "fan_out"
        ));
        assert!(matches!(
            values(Init::XavierNormal { gain: 1.0 }, &[4], Some(Fans::new(2, 0)), &mut rng),
            Err(RlNnError::InvalidParameter { ref name, .. }) if name == "fan_out"
        ));
        let opts = (Kind::Int64, Device::Cpu);
        assert!(matches!(tensor(Init::Zeros, &[2], opts, &mut rng), Err(RlNnError::Kind { .. })));
        let cuda = (Kind::Float, Device::Cuda(63));
        // a failed call draws nothing
        let before = rng.clone();
        assert!(matches!(tensor(Init::Ones, &[2], cuda, &mut rng), Err(RlNnError::DeviceUnavailable(_))));
        assert_eq!(before, rng);
    }

    #[test]
    fn variables_are_named_and_checked() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let (w, b) = linear(&vs.root(), "blocks.0.fc", 3, 2, true, &mut rng).unwrap();
        assert_eq!(w.size(), [2, 3]);
        assert!(w.requires_grad());
        assert_eq!(b.unwrap().size(), [2]);
        let (w2, none) = linear(&vs.root(), "head", 3, 5, false, &mut rng).unwrap();
        assert!(none.is_none() && w2.size() == [5, 3]);
        // the bias is drawn with the layer's fan_in: bound 1/sqrt(400)
        let (_, wide_b) = linear(&vs.root(), "wide", 400, 300, true, &mut rng).unwrap();
        let m = wide_b.unwrap().abs().max().double_value(&[]);
        assert!(m <= 0.05 && m > 0.04, "{m}");
        let names: std::collections::BTreeSet<String> = vs.variables().into_keys().collect();
        assert!(names.contains("blocks.0.fc.weight") && names.contains("blocks.0.fc.bias"));
        assert!(matches!(
            var(&vs.root(), "blocks.0.fc.weight", &[1], Init::Zeros, &mut rng),
            Err(RlNnError::InvalidName { .. })
        ));
        assert!(matches!(var(&vs.root(), "a..b", &[1], Init::Zeros, &mut rng), Err(RlNnError::InvalidName { .. })));
        assert!(matches!(var(&vs.root(), "", &[1], Init::Zeros, &mut rng), Err(RlNnError::InvalidName { .. })));
        let m = buffer(&vs.root(), "stats.mean", &[4], Init::Zeros, &mut rng).unwrap();
        assert!(!m.requires_grad());
        assert_eq!(vs.trainable_variables().len(), 5);
        // the double-kind store gets double variables
        let mut vs2 = VarStore::new(Device::Cpu);
        vs2.set_kind(Kind::Double);
        let t = var(&vs2.root(), "w", &[2, 2], Init::Normal { mean: 0.0, std: 1.0 }, &mut rng).unwrap();
        assert_eq!(t.kind(), Kind::Double);
    }

    #[test]
    fn serde_spells_initialisers_in_snake_case_with_defaults() {
        let i: Init = serde_json::from_str(r#"{"kind": "orthogonal"}"#).unwrap();
        assert_eq!(i, Init::Orthogonal { gain: 1.0 });
        let i: Init = serde_json::from_str(r#"{"kind": "kaiming_uniform"}"#).unwrap();
        assert_eq!(i, Init::KaimingUniform { gain: std::f64::consts::SQRT_2, mode: FanMode::FanIn });
        let i: Init = serde_json::from_str(r#"{"kind": "truncated_normal", "std": 0.02}"#).unwrap();
        assert_eq!(i, Init::TruncatedNormal { mean: 0.0, std: 0.02, lo: -2.0, hi: 2.0 });
        assert!(serde_json::from_str::<Init>(r#"{"kind": "orthogonal", "gian": 2}"#).is_err());
        assert_eq!(calculate_gain(Activation::Tanh), Some(5.0 / 3.0));
        assert_eq!(calculate_gain(Activation::Gelu), None);
    }
}
