//! Network pieces shared by the learned bidders (feature `tch`): linear and layer-norm layers,
//! the GPT-style causal transformer of the decision transformer and the trajectory evaluator,
//! and [`Weights`], a plain-Rust copy of a model's variables.
//!
//! Every weight is drawn from the component's own generator through `rl_nn::init`, and dropout
//! from its own stream through `rl_nn::rand` (never libtorch's global generator).
//!
//! Models hold libtorch tensors, which are `Send` but not `Sync`; bidders are evaluated on
//! several threads, so a trained model is exported as [`Weights`] (plain `Vec<f32>`s, `Sync`)
//! and every bidder rebuilds its own copy of the network from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tch::{nn::Path, nn::VarStore, Device, Kind, Tensor};

use crate::error::{AigbError, Result};
use rl_core::Params;
use rl_nn::layers::{self, BlockConfig, BlockInit, QkvLayout, TransformerBlock};

/// A fully connected layer `y = x Wᵀ + b` with a bias and PyTorch's `nn.Linear` initialisation:
/// [`rl_nn::layers::Linear`] with this crate's error type.
#[derive(Debug)]
pub(crate) struct Linear(layers::Linear);

impl Linear {
    pub(crate) fn new(
        path: &Path<'_>,
        name: &str,
        input: i64,
        output: i64,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Self> {
        Ok(Self(layers::Linear::new(path, name, input, output, true, rng)?))
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.0.forward(x)?)
    }
}

/// Layer normalisation over the last dimension (ε = 1e-5, weight 1, bias 0 at start):
/// [`rl_nn::layers::LayerNorm`] with this crate's error type.
#[derive(Debug)]
pub(crate) struct LayerNorm(layers::LayerNorm);

impl LayerNorm {
    pub(crate) fn new(path: &Path<'_>, name: &str, d: i64, rng: &mut rl_core::SeededRng) -> Result<Self> {
        Ok(Self(layers::LayerNorm::new(path, name, d, LAYER_NORM_EPS, rng)?))
    }

    pub(crate) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.0.forward(x)?)
    }
}

/// ε of every layer norm of the crate (PyTorch's default).
const LAYER_NORM_EPS: f64 = 1e-5;

/// Sizes of the crate's causal transformer (pre-LayerNorm GPT blocks; used by `dt` and `traj_eval`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `d_model` | 64 | token width | ≥ 1, divisible by `n_heads` |
/// | `n_layers` | 3 | blocks | ≥ 1 |
/// | `n_heads` | 1 | attention heads | ≥ 1 |
/// | `d_ff` | 512 | hidden width of each block's MLP | ≥ 1 |
/// | `dropout` | 0.1 | attention, residual and MLP dropout (training only) | [0, 1) |
///
/// The defaults are AuctionNet's decision transformer (`baseline/dt/dt.py`: `n_embd` 64,
/// `n_layer` 3, `n_head` 1, `n_inner` 512, `attn_pdrop = resid_pdrop = 0.1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformerParams {
    /// Token width.
    pub d_model: i64,
    /// Blocks.
    pub n_layers: usize,
    /// Attention heads.
    pub n_heads: i64,
    /// MLP hidden width.
    pub d_ff: i64,
    /// Dropout probability.
    pub dropout: f64,
}

impl Default for TransformerParams {
    fn default() -> Self {
        Self { d_model: 64, n_layers: 3, n_heads: 1, d_ff: 512, dropout: 0.1 }
    }
}

crate::traffic::setters!(TransformerParams { d_model: i64, n_layers: usize, n_heads: i64, d_ff: i64, dropout: f64 });

impl rl_core::Params for TransformerParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        for (name, v) in [("d_model", self.d_model), ("n_heads", self.n_heads), ("d_ff", self.d_ff)] {
            if v < 1 {
                return Err(AigbError::invalid(name, v, "must be >= 1"));
            }
        }
        if self.n_layers == 0 {
            return Err(AigbError::invalid("n_layers", 0, "must be >= 1"));
        }
        if self.d_model % self.n_heads != 0 {
            return Err(AigbError::invalid("d_model", self.d_model, "must be divisible by n_heads"));
        }
        if !(self.dropout.is_finite() && (0.0..1.0).contains(&self.dropout)) {
            return Err(AigbError::invalid("dropout", self.dropout, "must lie in [0, 1)"));
        }
        Ok(())
    }
}

/// A stack of causal self-attention blocks over `[B, T, d]` tokens with a key padding mask
/// (masked keys and future keys get a −10⁴ logit, as AuctionNet's `CausalSelfAttention`).
///
/// Each block is an [`rl_nn::layers::TransformerBlock`] as AuctionNet's decision transformer
/// `Block`: pre-LayerNorm, `x + Attn(LN(x))`, then `x + MLP(LN(x))` (GELU), separate
/// `attn.{query,key,value}` projections, PyTorch's `nn.Linear` initialisation, variables
/// `blocks.{i}.…` under the transformer's path.
#[derive(Debug)]
pub(crate) struct CausalTransformer {
    blocks: Vec<TransformerBlock>,
    d: i64,
}

impl CausalTransformer {
    pub(crate) fn new(path: &Path<'_>, p: &TransformerParams, rng: &mut rl_core::SeededRng) -> Result<Self> {
        let d = p.d_model;
        let cfg = BlockConfig::new(d, p.n_heads, p.d_ff)
            .qkv(QkvLayout::Separate)
            .init(BlockInit::TorchLinear)
            .layer_norm_eps(LAYER_NORM_EPS)
            .dropout(p.dropout)
            .check()?;
        let blocks_path = path.sub("blocks");
        let mut blocks = Vec::with_capacity(p.n_layers);
        for i in 0..p.n_layers {
            blocks.push(TransformerBlock::new(&blocks_path.sub(i), &cfg, rng)?);
        }
        Ok(Self { blocks, d })
    }

    /// `x`: `[B, T, d]`; `mask`: `[B, T]` (1 = real token, 0 = padding), same kind as `x`.
    /// Dropout only when `train` (drawn from `rng`).
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        mask: &Tensor,
        train: bool,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Tensor> {
        let size = x.size();
        if size.len() != 3 || size[2] != self.d {
            return Err(AigbError::Shape {
                what: "transformer input".into(),
                expected: format!("[B, T, {}]", self.d),
                got: format!("{size:?}"),
            });
        }
        let (b, t) = (size[0], size[1]);
        if mask.size() != [b, t] {
            return Err(AigbError::Shape {
                what: "transformer mask".into(),
                expected: format!("[{b}, {t}]"),
                got: format!("{:?}", mask.size()),
            });
        }
        let opts = (x.f_kind()?, x.device());
        let causal = Tensor::f_ones([t, t], opts)?.f_tril(0)?;
        // additive bias [B, 1, T, T]: −1e4 on future keys and on padded keys
        let bias = causal
            .f_view([1, 1, t, t])?
            .f_sub_scalar(1.0)?
            .f_add(&mask.f_view([b, 1, 1, t])?.f_sub_scalar(1.0)?)?
            .f_mul_scalar(1e4)?;
        let mut h = x.shallow_clone();
        for blk in &self.blocks {
            let dropout_rng: Option<&mut dyn rand::RngCore> = if train { Some(&mut *rng) } else { None };
            h = blk.forward(&h, &bias, None, dropout_rng)?.hidden;
        }
        Ok(h)
    }
}

/// A model's variables as plain-Rust arrays (`name → (shape, values)`), `Sync` and
/// serialisable: what a trained network hands to the bidders that run on evaluation threads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Weights {
    /// Variables by name.
    pub tensors: BTreeMap<String, (Vec<i64>, Vec<f32>)>,
}

impl Weights {
    /// Copies every variable of `vs` (as `f32`).
    ///
    /// # Errors
    /// libtorch failures.
    pub fn from_var_store(vs: &VarStore) -> Result<Self> {
        let mut tensors = BTreeMap::new();
        for (name, t) in vs.variables() {
            let shape = t.size();
            let v: Vec<f32> =
                Vec::<f32>::try_from(t.f_detach()?.f_to_kind(Kind::Float)?.f_contiguous()?.f_view([-1])?)?;
            tensors.insert(name, (shape, v));
        }
        Ok(Self { tensors })
    }

    /// The variables as tensors on `device`.
    ///
    /// # Errors
    /// [`AigbError::Shape`] when a value count does not match its shape; libtorch failures.
    pub fn to_tensors(&self, device: Device) -> Result<BTreeMap<String, Tensor>> {
        let mut out = BTreeMap::new();
        for (name, (shape, v)) in &self.tensors {
            let n: i64 = shape.iter().product();
            if n < 0 || n as usize != v.len() {
                return Err(AigbError::Shape {
                    what: format!("weights `{name}`"),
                    expected: format!("{shape:?} = {n} values"),
                    got: v.len().to_string(),
                });
            }
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(AigbError::NonFinite {
                    what: format!("weights `{name}`"),
                    index: i,
                    value: f64::from(v[i]),
                });
            }
            out.insert(name.clone(), Tensor::f_from_slice(v)?.f_view(shape.as_slice())?.f_to_device(device)?);
        }
        Ok(out)
    }

    /// Copies the weights into `vs`, whose variables must match them exactly (names and shapes;
    /// checked before anything is copied).
    ///
    /// # Errors
    /// `rl_nn` checkpoint errors naming the first mismatch.
    pub fn load_into(&self, vs: &VarStore) -> Result<()> {
        let map = self.to_tensors(vs.device())?;
        rl_nn::checkpoint::check_map(vs, &map, "", rl_nn::checkpoint::LoadMode::Strict, "weights")?;
        rl_nn::checkpoint::load_map(vs, &map, "", rl_nn::checkpoint::LoadMode::Strict, "weights")?;
        Ok(())
    }
}

/// Checks a float32 tensor's shape against a pattern (`None` = any), naming it in errors.
pub(crate) fn check_shape(what: &str, t: &Tensor, dims: &[Option<i64>]) -> Result<()> {
    let size = t.size();
    let ok = size.len() == dims.len() && size.iter().zip(dims).all(|(s, d)| d.is_none_or(|d| d == *s));
    if !ok {
        return Err(AigbError::Shape {
            what: what.into(),
            expected: rl_nn::check::pattern(dims),
            got: format!("{size:?}"),
        });
    }
    Ok(())
}

/// Fisher–Yates choice of `k` distinct indices out of `n` from `rng`.
pub(crate) fn choose(n: usize, k: usize, rng: &mut rl_core::SeededRng) -> Vec<usize> {
    use rand::Rng;
    let mut idx: Vec<usize> = (0..n).collect();
    let k = k.min(n);
    for i in 0..k {
        let j = rng.random_range(i..n);
        idx.swap(i, j);
    }
    idx.truncate(k);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    #[test]
    fn causal_transformer_ignores_the_future_and_padding() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let p = TransformerParams::default().d_model(8).n_heads(2).d_ff(16).n_layers(2).check().unwrap();
        let tr = CausalTransformer::new(&vs.root(), &p, &mut rng).unwrap();
        let x = rl_nn::rand::standard_normal(&[2, 5, 8], (Kind::Float, Device::Cpu), &mut rng).unwrap();
        let ones = Tensor::ones([2, 5], (Kind::Float, Device::Cpu));
        let y = tr.forward(&x, &ones, false, &mut rng).unwrap();
        // change the last token: earlier outputs stay
        let x2 = x.copy();
        let _ = x2.narrow(1, 4, 1).fill_(3.0);
        let y2 = tr.forward(&x2, &ones, false, &mut rng).unwrap();
        assert!(y.narrow(1, 0, 4).allclose(&y2.narrow(1, 0, 4), 1e-6, 1e-6, false));
        assert!(!y.narrow(1, 4, 1).allclose(&y2.narrow(1, 4, 1), 1e-3, 1e-3, false));
        // a padded first token does not affect later outputs, whatever its value
        let mask = Tensor::from_slice(&[0.0f32, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]).view([2, 5]);
        let a = tr.forward(&x, &mask, false, &mut rng).unwrap();
        let x3 = x.copy();
        let _ = x3.narrow(1, 0, 1).fill_(-7.0);
        let b = tr.forward(&x3, &mask, false, &mut rng).unwrap();
        assert!(a.get(0).narrow(0, 1, 4).allclose(&b.get(0).narrow(0, 1, 4), 1e-5, 1e-5, false));
        assert!(tr.forward(&x.narrow(2, 0, 4), &ones, false, &mut rng).is_err());
        assert!(TransformerParams::default().d_model(6).n_heads(4).check().is_err());
    }

    #[test]
    fn weights_round_trip_and_check_shapes() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(1);
        let _ = Linear::new(&vs.root(), "a", 3, 2, &mut rng).unwrap();
        let w = Weights::from_var_store(&vs).unwrap();
        let vs2 = VarStore::new(Device::Cpu);
        let _ = Linear::new(&vs2.root(), "a", 3, 2, &mut rl_core::rng_from_seed(9)).unwrap();
        w.load_into(&vs2).unwrap();
        assert_eq!(Weights::from_var_store(&vs2).unwrap(), w);
        let vs3 = VarStore::new(Device::Cpu);
        let _ = Linear::new(&vs3.root(), "a", 4, 2, &mut rng).unwrap();
        assert!(w.load_into(&vs3).is_err());
        let mut bad = w.clone();
        bad.tensors.get_mut("a.weight").unwrap().1.pop();
        assert!(bad.load_into(&vs2).is_err());
    }
}
