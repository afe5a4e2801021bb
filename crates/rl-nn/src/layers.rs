//! Transformer layers shared by the crates that build sequence models: a fully connected
//! [`Linear`] layer, [`LayerNorm`] and a pre-LayerNorm causal self-attention
//! [`TransformerBlock`] (attention + MLP) with an optional key/value cache.
//!
//! Every weight is created through [`crate::init`] from the caller's generator, in the order
//! the layer's variables are listed below (so a model keeps its random stream when it moves to
//! these layers), and dropout masks come from [`crate::rand`] (never libtorch's process-wide
//! generator). Inputs are checked before any libtorch op: a wrong shape is
//! [`RlNnError::Shape`].
//!
//! ```
//! use rl_core::Params;
//! use rl_nn::layers::{BlockConfig, BlockInit, QkvLayout, TransformerBlock};
//! use tch::{nn::VarStore, Device, Kind, Tensor};
//! let mut rng = rl_core::rng_from_seed(0);
//! let vs = VarStore::new(Device::Cpu);
//! let cfg = BlockConfig::new(16, 2, 32).qkv(QkvLayout::Fused).init(BlockInit::Normal { std: 0.02, residual_std: 0.01 });
//! let block = TransformerBlock::new(&vs.root().sub("blocks").sub(0), &cfg.check()?, &mut rng)?;
//! let x = rl_nn::rand::standard_normal(&[2, 5, 16], (Kind::Float, Device::Cpu), &mut rng)?;
//! // causal additive bias [1, 1, S, S]: 0 on allowed keys, -1e9 on future ones
//! let bias = (Tensor::ones([5, 5], (Kind::Float, Device::Cpu)).tril(0) - 1.0) * 1e9;
//! let out = block.forward(&x, &bias.view([1, 1, 5, 5]), None, None)?;
//! assert_eq!(out.hidden.size(), [2, 5, 16]);
//! assert_eq!(out.keys.size(), [2, 2, 5, 8]); // [B, heads, S, head_dim], for a KV cache
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```

use rand::{Rng, RngCore};
use tch::nn::Path;
use tch::Tensor;

use crate::error::{Result, RlNnError};
use crate::init::{self, Fans, Init};

/// Errors with [`RlNnError::Shape`] unless the last dimension of `x` is `d` (rank ≥ 1).
fn check_last(what: &str, x: &Tensor, d: i64) -> Result<()> {
    let size = x.size();
    if size.last() != Some(&d) {
        return Err(RlNnError::Shape { what: what.into(), expected: format!("[..., {d}]"), got: size });
    }
    Ok(())
}

/// A fully connected layer `y = x Wᵀ + b` over the last dimension.
///
/// Variables: `{name}.weight` `[output, input]`, then `{name}.bias` `[output]` (when present),
/// drawn in that order.
#[derive(Debug)]
pub struct Linear {
    w: Tensor,
    b: Option<Tensor>,
    input: i64,
    output: i64,
}

impl Linear {
    /// A layer with PyTorch's `nn.Linear` initialisation (weight and bias `U(±1/√input)`, as
    /// [`init::linear`]).
    ///
    /// # Errors
    /// As [`init::linear`] (a bad name, non-positive sizes).
    pub fn new<R: Rng + ?Sized>(
        path: &Path<'_>,
        name: &str,
        input: i64,
        output: i64,
        bias: bool,
        rng: &mut R,
    ) -> Result<Self> {
        let (w, b) = init::linear(path, name, input, output, bias, rng)?;
        Ok(Self { w, b, input, output })
    }

    /// A layer whose weight is drawn from `weight` and whose bias (if `bias` is `Some`) from
    /// that initialiser, weight first; fans are `(input, output)` for both.
    ///
    /// # Errors
    /// As [`init::var`].
    pub fn with_init<R: Rng + ?Sized>(
        path: &Path<'_>,
        name: &str,
        input: i64,
        output: i64,
        weight: Init,
        bias: Option<Init>,
        rng: &mut R,
    ) -> Result<Self> {
        let fans = Some(Fans::new(input, output));
        let w = init::var_with_fans(path, &format!("{name}.weight"), &[output, input], weight, fans, rng)?;
        let b = match bias {
            Some(b) => Some(init::var_with_fans(path, &format!("{name}.bias"), &[output], b, fans, rng)?),
            None => None,
        };
        Ok(Self { w, b, input, output })
    }

    /// `x Wᵀ + b` for `x` `[..., input]`, giving `[..., output]`.
    ///
    /// # Errors
    /// [`RlNnError::Shape`] when the last dimension of `x` is not `input`; libtorch failures.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        check_last("linear input", x, self.input)?;
        Ok(x.f_linear(&self.w, self.b.as_ref())?)
    }

    /// The weight `[output, input]`.
    pub fn weight(&self) -> &Tensor {
        &self.w
    }
    /// The bias `[output]`, if the layer has one.
    pub fn bias(&self) -> Option<&Tensor> {
        self.b.as_ref()
    }
    /// Input width.
    pub fn input_dim(&self) -> i64 {
        self.input
    }
    /// Output width.
    pub fn output_dim(&self) -> i64 {
        self.output
    }
}

/// Layer normalisation over the last dimension with a learned scale (starts at 1) and shift
/// (starts at 0).
///
/// Variables: `{name}.weight`, then `{name}.bias`, both `[d]` (constants: nothing is drawn).
#[derive(Debug)]
pub struct LayerNorm {
    w: Tensor,
    b: Tensor,
    d: i64,
    eps: f64,
}

impl LayerNorm {
    /// A layer norm of width `d` with `eps` added to the variance (PyTorch's default is 1e-5).
    ///
    /// # Errors
    /// [`RlNnError::InvalidParameter`] for an `eps` that is not finite and positive; as
    /// [`init::var`].
    pub fn new<R: Rng + ?Sized>(path: &Path<'_>, name: &str, d: i64, eps: f64, rng: &mut R) -> Result<Self> {
        if !(eps.is_finite() && eps > 0.0) {
            return Err(RlNnError::invalid("eps", eps, "must be finite and > 0"));
        }
        let w = init::var(path, &format!("{name}.weight"), &[d], Init::Ones, rng)?;
        let b = init::var(path, &format!("{name}.bias"), &[d], Init::Zeros, rng)?;
        Ok(Self { w, b, d, eps })
    }

    /// The normalised `x` `[..., d]`.
    ///
    /// # Errors
    /// [`RlNnError::Shape`] when the last dimension of `x` is not `d`; libtorch failures.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        check_last("layer norm input", x, self.d)?;
        // The last argument (`cudnn_enable`) is deprecated and ignored by libtorch.
        Ok(x.f_layer_norm([self.d], Some(&self.w), Some(&self.b), self.eps, true)?)
    }

    /// Width.
    pub fn dim(&self) -> i64 {
        self.d
    }
    /// The ε added to the variance.
    pub fn eps(&self) -> f64 {
        self.eps
    }
}

/// How a [`TransformerBlock`] projects its input to queries, keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkvLayout {
    /// Three layers `attn.query`, `attn.key`, `attn.value` (drawn in that order), as
    /// minGPT / the decision transformer.
    Separate,
    /// One layer `attn.qkv` of width `3·d_model`, split into `q | k | v`, as GPT-2.
    Fused,
}

/// How a [`TransformerBlock`] initialises its linear layers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BlockInit {
    /// PyTorch's `nn.Linear` default for every weight and bias (`U(±1/√fan_in)`).
    TorchLinear,
    /// GPT-2: weights normal with mean 0 and `std` (`attn.proj` and `mlp.fc2`, which write into
    /// the residual stream, with `residual_std`, usually `std/√(2·n_layers)`), biases 0.
    Normal {
        /// Standard deviation of the query/key/value and `mlp.fc1` weights.
        std: f64,
        /// Standard deviation of the `attn.proj` and `mlp.fc2` weights.
        residual_std: f64,
    },
}

/// Sizes and choices of a [`TransformerBlock`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `d_model` | (given) | token width | ≥ 1, divisible by `n_heads` |
/// | `n_heads` | (given) | attention heads | ≥ 1 |
/// | `d_ff` | (given) | hidden width of the MLP | ≥ 1 |
/// | `qkv` | `Separate` | query/key/value projection layout | |
/// | `init` | `TorchLinear` | initialisation of the linear layers | stds finite, > 0 |
/// | `layer_norm_eps` | 1e-5 | ε of both layer norms | finite, > 0 |
/// | `dropout` | 0 | attention, residual and MLP dropout when training | [0, 1) |
#[derive(Debug, Clone, PartialEq)]
pub struct BlockConfig {
    /// Token width.
    pub d_model: i64,
    /// Attention heads.
    pub n_heads: i64,
    /// MLP hidden width.
    pub d_ff: i64,
    /// Query/key/value layout.
    pub qkv: QkvLayout,
    /// Initialisation.
    pub init: BlockInit,
    /// LayerNorm ε.
    pub layer_norm_eps: f64,
    /// Dropout probability (applied only when [`TransformerBlock::forward`] gets a generator).
    pub dropout: f64,
}

impl BlockConfig {
    /// A block of width `d_model` with `n_heads` heads and an MLP of width `d_ff`; the other
    /// fields at their defaults.
    pub fn new(d_model: i64, n_heads: i64, d_ff: i64) -> Self {
        Self {
            d_model,
            n_heads,
            d_ff,
            qkv: QkvLayout::Separate,
            init: BlockInit::TorchLinear,
            layer_norm_eps: 1e-5,
            dropout: 0.0,
        }
    }
    /// Sets `qkv`.
    #[must_use]
    pub fn qkv(mut self, qkv: QkvLayout) -> Self {
        self.qkv = qkv;
        self
    }
    /// Sets `init`.
    #[must_use]
    pub fn init(mut self, init: BlockInit) -> Self {
        self.init = init;
        self
    }
    /// Sets `layer_norm_eps`.
    #[must_use]
    pub fn layer_norm_eps(mut self, eps: f64) -> Self {
        self.layer_norm_eps = eps;
        self
    }
    /// Sets `dropout`.
    #[must_use]
    pub fn dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }
    /// Width of one head.
    pub fn head_dim(&self) -> i64 {
        if self.n_heads > 0 {
            self.d_model / self.n_heads
        } else {
            0
        }
    }
}

impl rl_core::Params for BlockConfig {
    type Error = RlNnError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [("d_model", self.d_model), ("n_heads", self.n_heads), ("d_ff", self.d_ff)] {
            if v < 1 {
                return Err(RlNnError::invalid(name, v, "must be >= 1"));
            }
        }
        if self.d_model % self.n_heads != 0 {
            return Err(RlNnError::invalid("d_model", self.d_model, "must be divisible by n_heads"));
        }
        if let BlockInit::Normal { std, residual_std } = self.init {
            for (name, v) in [("init.std", std), ("init.residual_std", residual_std)] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(RlNnError::invalid(name, v, "must be finite and > 0"));
                }
            }
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(RlNnError::invalid("layer_norm_eps", self.layer_norm_eps, "must be finite and > 0"));
        }
        if !(self.dropout.is_finite() && (0.0..1.0).contains(&self.dropout)) {
            return Err(RlNnError::invalid("dropout", self.dropout, "must lie in [0, 1)"));
        }
        Ok(())
    }
}

#[derive(Debug)]
enum Qkv {
    Separate { q: Linear, k: Linear, v: Linear },
    Fused(Linear),
}

/// What [`TransformerBlock::forward`] returns.
#[derive(Debug)]
pub struct BlockOutput {
    /// The block's output `[B, S, d_model]`.
    pub hidden: Tensor,
    /// Keys of the cached and the new tokens, `[B, n_heads, P + S, head_dim]`.
    pub keys: Tensor,
    /// Values of the cached and the new tokens, `[B, n_heads, P + S, head_dim]`.
    pub values: Tensor,
}

/// One pre-LayerNorm transformer block with causal (or any masked) multi-head self-attention:
///
/// ```text
/// a = LN1(x);  q, k, v = split_heads(a W_q, a W_k, a W_v)        (k, v after the cached ones)
/// x = x + drop(W_o · drop(softmax(q kᵀ / √d_h + bias)) v)
/// x = x + drop(W_2 · gelu(W_1 · LN2(x)))
/// ```
///
/// The additive `bias` (0 for an allowed key, a large negative number for a masked one) is the
/// caller's: it carries the causal structure, padding and the offset of a KV cache, so each model
/// keeps its own masking constant. `gelu` is the exact (erf) one.
///
/// Variables under the block's path, created in this order: `ln1.{weight,bias}`, then
/// `attn.query`, `attn.key`, `attn.value` ([`QkvLayout::Separate`]) or `attn.qkv`
/// ([`QkvLayout::Fused`]), `attn.proj`, `ln2.{weight,bias}`, `mlp.fc1`, `mlp.fc2` (each
/// `.weight` then `.bias`).
#[derive(Debug)]
pub struct TransformerBlock {
    ln1: LayerNorm,
    qkv: Qkv,
    proj: Linear,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    d: i64,
    heads: i64,
    dropout: f64,
}

impl TransformerBlock {
    /// A freshly initialised block under `path`, drawn from `rng` in the order of the variable
    /// list above.
    ///
    /// # Errors
    /// As [`init::var`] (e.g. a name that exists under `path`).
    pub fn new<R: Rng + ?Sized>(path: &Path<'_>, cfg: &rl_core::Valid<BlockConfig>, rng: &mut R) -> Result<Self> {
        let (d, f) = (cfg.d_model, cfg.d_ff);
        let lin = |name: &str, i: i64, o: i64, residual: bool, rng: &mut R| -> Result<Linear> {
            match cfg.init {
                BlockInit::TorchLinear => Linear::new(path, name, i, o, true, rng),
                BlockInit::Normal { std, residual_std } => {
                    let std = if residual { residual_std } else { std };
                    Linear::with_init(path, name, i, o, Init::Normal { mean: 0.0, std }, Some(Init::Zeros), rng)
                }
            }
        };
        let ln1 = LayerNorm::new(path, "ln1", d, cfg.layer_norm_eps, rng)?;
        let qkv = match cfg.qkv {
            QkvLayout::Separate => Qkv::Separate {
                q: lin("attn.query", d, d, false, rng)?,
                k: lin("attn.key", d, d, false, rng)?,
                v: lin("attn.value", d, d, false, rng)?,
            },
            QkvLayout::Fused => Qkv::Fused(lin("attn.qkv", d, 3 * d, false, rng)?),
        };
        let proj = lin("attn.proj", d, d, true, rng)?;
        let ln2 = LayerNorm::new(path, "ln2", d, cfg.layer_norm_eps, rng)?;
        let fc1 = lin("mlp.fc1", d, f, false, rng)?;
        let fc2 = lin("mlp.fc2", f, d, true, rng)?;
        Ok(Self { ln1, qkv, proj, ln2, fc1, fc2, d, heads: cfg.n_heads, dropout: cfg.dropout })
    }

    /// Dropout of `t` with the block's probability when training (`rng` given), else `t`.
    fn drop(&self, t: Tensor, rng: Option<&mut (dyn RngCore + '_)>) -> Result<Tensor> {
        match rng {
            Some(rng) => crate::rand::dropout(&t, self.dropout, true, rng),
            None => Ok(t),
        }
    }

    /// Token width.
    pub fn d_model(&self) -> i64 {
        self.d
    }
    /// Attention heads.
    pub fn n_heads(&self) -> i64 {
        self.heads
    }

    /// The block on `x` `[B, S, d_model]`.
    ///
    /// `bias` is the additive attention bias, broadcastable to `[B, n_heads, S, P + S]`
    /// (`[B or 1, n_heads or 1, S, P + S]`), where `P` is the number of cached positions in
    /// `past` (`(keys, values)`, each `[B, n_heads, P, head_dim]`, e.g. the previous call's
    /// [`BlockOutput::keys`] / [`BlockOutput::values`]). Dropout (with the configured
    /// probability) only when `dropout_rng` is `Some`, drawn from it; `None` is evaluation.
    ///
    /// # Errors
    /// [`RlNnError::Shape`] for an `x`, `bias` or `past` of the wrong shape; libtorch failures.
    pub fn forward(
        &self,
        x: &Tensor,
        bias: &Tensor,
        past: Option<(&Tensor, &Tensor)>,
        mut dropout_rng: Option<&mut dyn RngCore>,
    ) -> Result<BlockOutput> {
        let (d, h) = (self.d, self.heads);
        let hd = d / h;
        let size = x.size();
        if size.len() != 3 || size[2] != d {
            return Err(RlNnError::Shape { what: "block input".into(), expected: format!("[B, S, {d}]"), got: size });
        }
        let (b, s) = (size[0], size[1]);
        let p = match past {
            None => 0,
            Some((pk, pv)) => {
                let ks = pk.size();
                let ok = ks.len() == 4 && ks[0] == b && ks[1] == h && ks[3] == hd;
                if !ok || pv.size() != ks {
                    return Err(RlNnError::Shape {
                        what: "block past keys/values".into(),
                        expected: format!("[{b}, {h}, P, {hd}] (both)"),
                        got: if ok { pv.size() } else { ks },
                    });
                }
                ks[2]
            }
        };
        let bs = bias.size();
        let bias_ok =
            bs.len() == 4 && (bs[0] == 1 || bs[0] == b) && (bs[1] == 1 || bs[1] == h) && bs[2] == s && bs[3] == p + s;
        if !bias_ok {
            return Err(RlNnError::Shape {
                what: "attention bias".into(),
                expected: format!("[{b} or 1, {h} or 1, {s}, {}]", p + s),
                got: bs,
            });
        }
        let heads = |t: &Tensor| -> Result<Tensor> { Ok(t.f_view([b, s, h, hd])?.f_transpose(1, 2)?) };
        let a = self.ln1.forward(x)?;
        let (q, mut k, mut v) = match &self.qkv {
            Qkv::Separate { q, k, v } => (heads(&q.forward(&a)?)?, heads(&k.forward(&a)?)?, heads(&v.forward(&a)?)?),
            Qkv::Fused(qkv) => {
                let parts = qkv.forward(&a)?.f_chunk(3, -1)?;
                (heads(&parts[0])?, heads(&parts[1])?, heads(&parts[2])?)
            }
        };
        if let Some((pk, pv)) = past {
            k = Tensor::f_cat(&[pk, &k], 2)?;
            v = Tensor::f_cat(&[pv, &v], 2)?;
        }
        let scale = 1.0 / (hd as f64).sqrt();
        let att = q.f_matmul(&k.f_transpose(-2, -1)?)?.f_mul_scalar(scale)?.f_add(bias)?;
        let att = att.f_softmax(-1, att.kind())?;
        let att = self.drop(att, dropout_rng.as_deref_mut())?;
        let y = att.f_matmul(&v)?.f_transpose(1, 2)?.f_contiguous()?.f_view([b, s, d])?;
        let y = self.drop(self.proj.forward(&y)?, dropout_rng.as_deref_mut())?;
        // Not in place: autograd may have saved `x` for the backward pass.
        let x = x.f_add(&y)?;
        let m = self.fc2.forward(&self.fc1.forward(&self.ln2.forward(&x)?)?.f_gelu("none")?)?;
        let m = self.drop(m, dropout_rng)?;
        Ok(BlockOutput { hidden: x.f_add(&m)?, keys: k, values: v })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    const OPTS: (Kind, Device) = (Kind::Float, Device::Cpu);

    fn causal(s: i64, k: i64) -> Tensor {
        ((Tensor::ones([s, k], OPTS).tril(k - s) - 1.0) * 1e9).view([1, 1, s, k])
    }

    fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    #[test]
    fn linear_matches_torch_and_draws_weight_then_bias() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(3);
        let l = Linear::new(&vs.root(), "a.b", 3, 2, true, &mut rng).unwrap();
        let vars = vs.variables();
        assert_eq!(vars["a.b.weight"].size(), [2, 3]);
        assert_eq!(vars["a.b.bias"].size(), [2]);
        // the same draws as init::linear
        let vs2 = VarStore::new(Device::Cpu);
        let (w, b) = init::linear(&vs2.root(), "a.b", 3, 2, true, &mut rl_core::rng_from_seed(3)).unwrap();
        assert!(l.weight().equal(&w) && l.bias().unwrap().equal(&b.unwrap()));
        let x = randn(&[4, 3]);
        let y = l.forward(&x).unwrap();
        assert!(max_abs(&y, &(x.matmul(&w.tr()) + l.bias().unwrap())) < 1e-6);
        assert_eq!((l.input_dim(), l.output_dim()), (3, 2));
        assert!(matches!(l.forward(&randn(&[4, 2])), Err(RlNnError::Shape { .. })));
        assert!(matches!(l.forward(&Tensor::zeros([0i64; 0], OPTS)), Err(RlNnError::Shape { .. })));
        let nb = Linear::new(&vs.root(), "c", 3, 5, false, &mut rng).unwrap();
        assert!(nb.bias().is_none());
        assert_eq!(nb.forward(&x).unwrap().size(), [4, 5]);
        // a name that exists is an error
        assert!(Linear::new(&vs.root(), "a.b", 3, 2, true, &mut rng).is_err());
    }

    fn randn(shape: &[i64]) -> Tensor {
        crate::rand::standard_normal(shape, OPTS, &mut rl_core::rng_from_seed(11)).unwrap()
    }

    #[test]
    fn linear_with_init_draws_from_the_given_initialisers() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(5);
        let l =
            Linear::with_init(&vs.root(), "l", 4, 3, Init::Normal { mean: 0.0, std: 0.5 }, Some(Init::Zeros), &mut rng)
                .unwrap();
        let want =
            init::tensor(Init::Normal { mean: 0.0, std: 0.5 }, &[3, 4], OPTS, &mut rl_core::rng_from_seed(5)).unwrap();
        assert!(l.weight().equal(&want));
        assert_eq!(l.bias().unwrap().abs().sum(Kind::Float).double_value(&[]), 0.0);
        let nb = Linear::with_init(&vs.root(), "m", 4, 3, Init::Ones, None, &mut rng).unwrap();
        assert!(nb.bias().is_none());
        assert_eq!(nb.forward(&Tensor::ones([2, 4], OPTS)).unwrap().double_value(&[1, 2]), 4.0);
    }

    #[test]
    fn layer_norm_normalises_the_last_dimension() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let ln = LayerNorm::new(&vs.root(), "ln", 6, 1e-5, &mut rng).unwrap();
        let x = randn(&[3, 6]) * 4.0 + 2.0;
        let y = ln.forward(&x).unwrap();
        let mean = y.mean_dim(-1, false, Kind::Float);
        let var = y.var_dim(-1, false, false);
        assert!(mean.abs().max().double_value(&[]) < 1e-5);
        assert!((var - 1.0).abs().max().double_value(&[]) < 1e-3);
        assert_eq!((ln.dim(), ln.eps()), (6, 1e-5));
        assert!(matches!(ln.forward(&randn(&[3, 5])), Err(RlNnError::Shape { .. })));
        assert!(LayerNorm::new(&vs.root(), "bad", 6, 0.0, &mut rng).is_err());
        assert!(LayerNorm::new(&vs.root(), "bad2", 6, f64::NAN, &mut rng).is_err());
        let names: Vec<String> = vs.variables().into_keys().collect();
        assert!(names.contains(&"ln.weight".to_string()) && names.contains(&"ln.bias".to_string()));
    }

    fn block(layout: QkvLayout, init: BlockInit, seed: u64) -> (VarStore, TransformerBlock) {
        let vs = VarStore::new(Device::Cpu);
        let cfg = BlockConfig::new(8, 2, 16).qkv(layout).init(init).dropout(0.2).check().unwrap();
        let b =
            TransformerBlock::new(&vs.root().sub("blocks").sub(0), &cfg, &mut rl_core::rng_from_seed(seed)).unwrap();
        (vs, b)
    }

    #[test]
    fn block_variables_have_the_documented_names() {
        let (vs, _) = block(QkvLayout::Separate, BlockInit::TorchLinear, 0);
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        let want = ["attn.key", "attn.proj", "attn.query", "attn.value", "ln1", "ln2", "mlp.fc1", "mlp.fc2"]
            .iter()
            .flat_map(|n| [format!("blocks.0.{n}.bias"), format!("blocks.0.{n}.weight")])
            .collect::<Vec<_>>();
        assert_eq!(names, want);
        let (vs, _) = block(QkvLayout::Fused, BlockInit::Normal { std: 0.02, residual_std: 0.01 }, 0);
        let vars = vs.variables();
        assert_eq!(vars["blocks.0.attn.qkv.weight"].size(), [24, 8]);
        assert_eq!(vars["blocks.0.mlp.fc1.weight"].size(), [16, 8]);
        assert_eq!(vars["blocks.0.attn.qkv.bias"].abs().sum(Kind::Float).double_value(&[]), 0.0);
        // residual projections use the residual std
        let sd = |n: &str| vars[n].std(false).double_value(&[]);
        assert!(sd("blocks.0.mlp.fc1.weight") > 0.015 && sd("blocks.0.mlp.fc1.weight") < 0.025);
        assert!(sd("blocks.0.mlp.fc2.weight") > 0.007 && sd("blocks.0.mlp.fc2.weight") < 0.013);
    }

    #[test]
    fn block_is_causal_and_the_cache_matches_the_full_pass() {
        for layout in [QkvLayout::Separate, QkvLayout::Fused] {
            let (_vs, blk) = block(layout, BlockInit::Normal { std: 0.3, residual_std: 0.2 }, 1);
            let x = randn(&[2, 5, 8]);
            let full = blk.forward(&x, &causal(5, 5), None, None).unwrap();
            assert_eq!(full.hidden.size(), [2, 5, 8]);
            // a change of the last token leaves earlier outputs alone
            let x2 = x.copy();
            let _ = x2.narrow(1, 4, 1).fill_(3.0);
            let y2 = blk.forward(&x2, &causal(5, 5), None, None).unwrap().hidden;
            assert!(max_abs(&full.hidden.narrow(1, 0, 4), &y2.narrow(1, 0, 4)) < 1e-6);
            assert!(max_abs(&full.hidden.narrow(1, 4, 1), &y2.narrow(1, 4, 1)) > 1e-3);
            // three tokens, then two with the cache: the same outputs
            let first = blk.forward(&x.narrow(1, 0, 3), &causal(3, 3), None, None).unwrap();
            let rest =
                blk.forward(&x.narrow(1, 3, 2), &causal(2, 5), Some((&first.keys, &first.values)), None).unwrap();
            assert_eq!(rest.keys.size(), [2, 2, 5, 4]);
            assert!(max_abs(&Tensor::cat(&[&first.hidden, &rest.hidden], 1), &full.hidden) < 1e-5);
            assert!(max_abs(&rest.keys, &full.keys) < 1e-6);
        }
    }

    #[test]
    fn block_dropout_draws_only_when_training_and_is_seeded() {
        let (_vs, blk) = block(QkvLayout::Separate, BlockInit::TorchLinear, 2);
        let x = randn(&[2, 4, 8]);
        let bias = causal(4, 4);
        let eval = blk.forward(&x, &bias, None, None).unwrap().hidden;
        let mut r1 = rl_core::rng_from_seed(9);
        let mut r2 = rl_core::rng_from_seed(9);
        let a = blk.forward(&x, &bias, None, Some(&mut r1)).unwrap().hidden;
        let b = blk.forward(&x, &bias, None, Some(&mut r2)).unwrap().hidden;
        assert!(a.equal(&b));
        assert!(max_abs(&a, &eval) > 1e-4);
        assert_eq!(r1.random::<u64>(), r2.random::<u64>());
    }

    #[test]
    fn block_checks_its_inputs_and_config() {
        let (_vs, blk) = block(QkvLayout::Fused, BlockInit::TorchLinear, 0);
        let x = randn(&[2, 3, 8]);
        let shape_err = |r: Result<BlockOutput>| matches!(r, Err(RlNnError::Shape { .. }));
        assert!(shape_err(blk.forward(&randn(&[2, 3, 6]), &causal(3, 3), None, None)));
        assert!(shape_err(blk.forward(&randn(&[6, 8]), &causal(3, 3), None, None)));
        assert!(shape_err(blk.forward(&x, &causal(3, 4), None, None)));
        assert!(shape_err(blk.forward(&x, &causal(3, 3).view([1, 3, 3]), None, None)));
        assert!(shape_err(blk.forward(&x, &Tensor::zeros([3, 1, 3, 3], OPTS), None, None)));
        assert!(blk.forward(&x, &Tensor::zeros([2, 2, 3, 3], OPTS), None, None).is_ok());
        let pk = Tensor::zeros([2, 2, 4, 4], OPTS);
        assert!(blk.forward(&x, &causal(3, 7), Some((&pk, &pk)), None).is_ok());
        assert!(shape_err(blk.forward(&x, &causal(3, 3), Some((&pk, &pk)), None)));
        let bad = Tensor::zeros([2, 2, 4, 3], OPTS);
        assert!(shape_err(blk.forward(&x, &causal(3, 7), Some((&bad, &bad)), None)));
        assert!(shape_err(blk.forward(&x, &causal(3, 7), Some((&pk, &bad)), None)));
        assert!(shape_err(blk.forward(&x, &causal(3, 7), Some((&Tensor::zeros([1, 2, 4, 4], OPTS), &pk)), None)));
        assert_eq!((blk.d_model(), blk.n_heads()), (8, 2));

        assert!(BlockConfig::new(8, 2, 16).check().is_ok());
        assert_eq!(BlockConfig::new(8, 2, 16).head_dim(), 4);
        for (bad, field) in [
            (BlockConfig::new(0, 1, 4), "d_model"),
            (BlockConfig::new(8, 0, 4), "n_heads"),
            (BlockConfig::new(8, 2, 0), "d_ff"),
            (BlockConfig::new(6, 4, 4), "d_model"),
            (BlockConfig::new(8, 2, 4).layer_norm_eps(0.0), "layer_norm_eps"),
            (BlockConfig::new(8, 2, 4).dropout(1.0), "dropout"),
            (BlockConfig::new(8, 2, 4).dropout(-0.1), "dropout"),
            (BlockConfig::new(8, 2, 4).init(BlockInit::Normal { std: 0.0, residual_std: 1.0 }), "init.std"),
            (
                BlockConfig::new(8, 2, 4).init(BlockInit::Normal { std: 1.0, residual_std: f64::NAN }),
                "init.residual_std",
            ),
        ] {
            match bad.check() {
                Err(RlNnError::InvalidParameter { name, .. }) => assert_eq!(name, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        assert!(BlockConfig::new(8, 2, 4).dropout(0.0).check().is_ok());
    }
}
