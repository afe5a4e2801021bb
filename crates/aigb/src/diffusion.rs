//! DDPM pieces of the DiffBid planner (feature `tch`): the noise schedule with its closed forms
//! ([`NoiseSchedule`]) and the 1-D temporal U-Net denoiser ([`TemporalUnet`]) of Janner et al.'s
//! Diffuser as used by the AIGB baseline (`alimama-tech/NeurIPS_Auto_Bidding_AIGB_Track_Baseline:
//! bidding_train_env/baseline/dd/DFUSER.py`).
//!
//! Forward process and posterior (Ho et al., "Denoising Diffusion Probabilistic Models", arXiv
//! 2006.11239), with `ᾱ_k = Π_{i ≤ k} (1 − β_i)` and `ᾱ_{−1} = 1`:
//!
//! ```text
//! q(x_k | x_0)          = N(√ᾱ_k x_0, (1 − ᾱ_k) I)
//! x_0 from ε            = √(1/ᾱ_k) x_k − √(1/ᾱ_k − 1) ε
//! q(x_{k−1} | x_k, x_0) = N(c1_k x_0 + c2_k x_k, σ̃²_k I)
//!   c1_k = β_k √ᾱ_{k−1} / (1 − ᾱ_k),  c2_k = (1 − ᾱ_{k−1}) √α_k / (1 − ᾱ_k),
//!   σ̃²_k = β_k (1 − ᾱ_{k−1}) / (1 − ᾱ_k)
//! ```
//!
//! Cosine schedule (Nichol & Dhariwal, arXiv 2102.09672), the reference's: `ᾱ(k) = f(k/K) /
//! f(0)`, `f(u) = cos²((u + s)/(1 + s) · π/2)`, `β_k = min(1 − ᾱ(k+1)/ᾱ(k), max_beta)`.

use serde::{Deserialize, Serialize};
use tch::{nn::Path, Kind, Tensor};

use crate::error::{check_range, AigbError, Result};
use crate::nn::Linear;
use rl_nn::init::{self, Fans, Init};

/// The β schedule of a [`NoiseSchedule`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BetaSchedule {
    /// The cosine schedule (reference: `s = 0.008`, `β ≤ 0.999`).
    Cosine {
        /// Offset `s`.
        #[serde(default = "default_s")]
        s: f64,
        /// Upper clip of β.
        #[serde(default = "default_max_beta")]
        max_beta: f64,
    },
    /// `β` linear from `start` to `end` (Ho et al.: 1e-4 to 0.02 over 1000 steps).
    Linear {
        /// First β.
        start: f64,
        /// Last β.
        end: f64,
    },
}

fn default_s() -> f64 {
    0.008
}

fn default_max_beta() -> f64 {
    0.999
}

impl Default for BetaSchedule {
    fn default() -> Self {
        BetaSchedule::Cosine { s: 0.008, max_beta: 0.999 }
    }
}

impl BetaSchedule {
    /// Checks the schedule's constants (`prefix` names the field in errors).
    ///
    /// # Errors
    /// [`AigbError::InvalidParameter`].
    pub fn validate(&self, prefix: &str) -> Result<()> {
        match *self {
            BetaSchedule::Cosine { s, max_beta } => {
                check_range(&format!("{prefix}.s"), s, 0.0, 1.0)?;
                if !(max_beta.is_finite() && max_beta > 0.0 && max_beta < 1.0) {
                    return Err(AigbError::invalid(format!("{prefix}.max_beta"), max_beta, "must lie in (0, 1)"));
                }
            }
            BetaSchedule::Linear { start, end } => {
                for (n, v) in [("start", start), ("end", end)] {
                    if !(v.is_finite() && v > 0.0 && v < 1.0) {
                        return Err(AigbError::invalid(format!("{prefix}.{n}"), v, "must lie in (0, 1)"));
                    }
                }
                if start > end {
                    return Err(AigbError::invalid(format!("{prefix}.start"), start, "must be <= end"));
                }
            }
        }
        Ok(())
    }
}

/// The constants of a `K`-step DDPM (`f64`, index `k = 0..K`).
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseSchedule {
    /// `β_k`.
    pub betas: Vec<f64>,
    /// `α_k = 1 − β_k`.
    pub alphas: Vec<f64>,
    /// `ᾱ_k`.
    pub alphas_cumprod: Vec<f64>,
    /// `ᾱ_{k−1}` (1 at `k = 0`).
    pub alphas_cumprod_prev: Vec<f64>,
    /// `√ᾱ_k`.
    pub sqrt_alphas_cumprod: Vec<f64>,
    /// `√(1 − ᾱ_k)`.
    pub sqrt_one_minus_alphas_cumprod: Vec<f64>,
    /// `√(1/ᾱ_k)`.
    pub sqrt_recip_alphas_cumprod: Vec<f64>,
    /// `√(1/ᾱ_k − 1)`.
    pub sqrt_recipm1_alphas_cumprod: Vec<f64>,
    /// `σ̃²_k`.
    pub posterior_variance: Vec<f64>,
    /// `ln max(σ̃²_k, 1e-20)` (the reference's clipped log-variance).
    pub posterior_log_variance_clipped: Vec<f64>,
    /// `c1_k` (coefficient of `x_0`).
    pub posterior_mean_coef1: Vec<f64>,
    /// `c2_k` (coefficient of `x_k`).
    pub posterior_mean_coef2: Vec<f64>,
}

impl NoiseSchedule {
    /// The schedule of `steps` steps.
    ///
    /// # Errors
    /// [`AigbError::InvalidParameter`] for `steps == 0` or bad constants.
    pub fn new(kind: BetaSchedule, steps: usize) -> Result<Self> {
        kind.validate("schedule")?;
        if steps == 0 {
            return Err(AigbError::invalid("steps", 0, "must be >= 1"));
        }
        let k = steps as f64;
        let betas: Vec<f64> = match kind {
            BetaSchedule::Cosine { s, max_beta } => {
                let f = |i: usize| (((i as f64 / k) + s) / (1.0 + s) * std::f64::consts::FRAC_PI_2).cos().powi(2);
                (0..steps).map(|i| (1.0 - f(i + 1) / f(i)).clamp(0.0, max_beta)).collect()
            }
            BetaSchedule::Linear { start, end } => (0..steps)
                .map(|i| if steps == 1 { start } else { start + (end - start) * i as f64 / (k - 1.0) })
                .collect(),
        };
        let alphas: Vec<f64> = betas.iter().map(|b| 1.0 - b).collect();
        let mut alphas_cumprod = Vec::with_capacity(steps);
        let mut acc = 1.0;
        for a in &alphas {
            acc *= a;
            alphas_cumprod.push(acc);
        }
        let alphas_cumprod_prev: Vec<f64> =
            std::iter::once(1.0).chain(alphas_cumprod[..steps - 1].iter().copied()).collect();
        let map = |f: &dyn Fn(usize) -> f64| -> Vec<f64> { (0..steps).map(f).collect() };
        let ac = &alphas_cumprod;
        let acp = &alphas_cumprod_prev;
        let posterior_variance = map(&|i| betas[i] * (1.0 - acp[i]) / (1.0 - ac[i]));
        Ok(Self {
            sqrt_alphas_cumprod: map(&|i| ac[i].sqrt()),
            sqrt_one_minus_alphas_cumprod: map(&|i| (1.0 - ac[i]).sqrt()),
            sqrt_recip_alphas_cumprod: map(&|i| (1.0 / ac[i]).sqrt()),
            sqrt_recipm1_alphas_cumprod: map(&|i| (1.0 / ac[i] - 1.0).sqrt()),
            posterior_log_variance_clipped: posterior_variance.iter().map(|v| v.max(1e-20).ln()).collect(),
            posterior_mean_coef1: map(&|i| betas[i] * acp[i].sqrt() / (1.0 - ac[i])),
            posterior_mean_coef2: map(&|i| (1.0 - acp[i]) * alphas[i].sqrt() / (1.0 - ac[i])),
            posterior_variance,
            betas,
            alphas,
            alphas_cumprod,
            alphas_cumprod_prev,
        })
    }

    /// Number of steps `K`.
    pub fn steps(&self) -> usize {
        self.betas.len()
    }

    /// A per-row constant `c[k_b]` as a `[B, 1, 1]` tensor of `kind`.
    pub(crate) fn gather(c: &[f64], ks: &[usize], kind: Kind, device: tch::Device) -> Result<Tensor> {
        let v: Vec<f64> = ks.iter().map(|&k| c.get(k).copied().unwrap_or(f64::NAN)).collect();
        Ok(Tensor::f_from_slice(&v)?.f_to_kind(kind)?.f_to_device(device)?.f_view([ks.len() as i64, 1, 1])?)
    }

    /// `x_k = √ᾱ_k x_0 + √(1 − ᾱ_k) ε` for per-row steps `ks` (`x0`, `eps`: `[B, H, C]`).
    ///
    /// # Errors
    /// [`AigbError::UnknownId`] for a step `≥ K`; libtorch failures.
    pub fn q_sample(&self, x0: &Tensor, ks: &[usize], eps: &Tensor) -> Result<Tensor> {
        self.check_steps(ks)?;
        let (kind, dev) = (x0.f_kind()?, x0.device());
        let a = Self::gather(&self.sqrt_alphas_cumprod, ks, kind, dev)?;
        let b = Self::gather(&self.sqrt_one_minus_alphas_cumprod, ks, kind, dev)?;
        Ok(x0.f_mul(&a)?.f_add(&eps.f_mul(&b)?)?)
    }

    /// `x_0 = √(1/ᾱ_k) x_k − √(1/ᾱ_k − 1) ε`.
    ///
    /// # Errors
    /// As [`NoiseSchedule::q_sample`].
    pub fn predict_x0(&self, xk: &Tensor, ks: &[usize], eps: &Tensor) -> Result<Tensor> {
        self.check_steps(ks)?;
        let (kind, dev) = (xk.f_kind()?, xk.device());
        let a = Self::gather(&self.sqrt_recip_alphas_cumprod, ks, kind, dev)?;
        let b = Self::gather(&self.sqrt_recipm1_alphas_cumprod, ks, kind, dev)?;
        Ok(xk.f_mul(&a)?.f_sub(&eps.f_mul(&b)?)?)
    }

    /// The posterior mean `c1_k x_0 + c2_k x_k`.
    ///
    /// # Errors
    /// As [`NoiseSchedule::q_sample`].
    pub fn posterior_mean(&self, x0: &Tensor, xk: &Tensor, ks: &[usize]) -> Result<Tensor> {
        self.check_steps(ks)?;
        let (kind, dev) = (xk.f_kind()?, xk.device());
        let a = Self::gather(&self.posterior_mean_coef1, ks, kind, dev)?;
        let b = Self::gather(&self.posterior_mean_coef2, ks, kind, dev)?;
        Ok(x0.f_mul(&a)?.f_add(&xk.f_mul(&b)?)?)
    }

    fn check_steps(&self, ks: &[usize]) -> Result<()> {
        if let Some(&k) = ks.iter().find(|&&k| k >= self.steps()) {
            return Err(AigbError::UnknownId { what: "diffusion step".into(), id: k.to_string() });
        }
        Ok(())
    }
}

/// Sizes of the [`TemporalUnet`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `dim` | 128 | base channels (reference: 128) | ≥ 1, `dim · m` divisible by `groups` |
/// | `dim_mults` | [1, 2, 4] | channels per level (reference) | non-empty, each ≥ 1 |
/// | `kernel_size` | 5 | temporal convolution width (reference) | odd, ≥ 1 |
/// | `groups` | 8 | GroupNorm groups (reference) | ≥ 1 |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UnetParams {
    /// Base channels.
    pub dim: i64,
    /// Channel multipliers per level.
    pub dim_mults: Vec<i64>,
    /// Convolution width.
    pub kernel_size: i64,
    /// GroupNorm groups.
    pub groups: i64,
}

impl Default for UnetParams {
    fn default() -> Self {
        Self { dim: 128, dim_mults: vec![1, 2, 4], kernel_size: 5, groups: 8 }
    }
}

crate::traffic::setters!(UnetParams { dim: i64, dim_mults: Vec<i64>, kernel_size: i64, groups: i64 });

impl rl_core::Params for UnetParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        if self.dim < 1 {
            return Err(AigbError::invalid("dim", self.dim, "must be >= 1"));
        }
        if self.dim_mults.is_empty() {
            return Err(AigbError::invalid("dim_mults", "[]", "must not be empty"));
        }
        if self.groups < 1 {
            return Err(AigbError::invalid("groups", self.groups, "must be >= 1"));
        }
        for (i, m) in self.dim_mults.iter().enumerate() {
            if *m < 1 || (self.dim * m) % self.groups != 0 {
                return Err(AigbError::invalid(
                    format!("dim_mults[{i}]"),
                    m,
                    "must be >= 1 with dim · mult divisible by groups",
                ));
            }
        }
        if self.kernel_size < 1 || self.kernel_size % 2 == 0 {
            return Err(AigbError::invalid("kernel_size", self.kernel_size, "must be odd and >= 1"));
        }
        Ok(())
    }
}

/// A 1-D convolution with PyTorch's default initialisation (`U(±1/√(in·k))` for weight and
/// bias), or a transposed one.
#[derive(Debug)]
struct Conv {
    w: Tensor,
    b: Tensor,
    stride: i64,
    padding: i64,
    transposed: bool,
}

impl Conv {
    // the layer's shape arguments mirror `nn.Conv1d` / `nn.ConvTranspose1d`
    #[allow(clippy::too_many_arguments)]
    fn new(
        p: &Path<'_>,
        name: &str,
        input: i64,
        output: i64,
        k: i64,
        stride: i64,
        padding: i64,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Self> {
        let shape = [output, input, k];
        let fans = Fans::of_shape(&shape)?;
        let w = init::var_with_fans(p, &format!("{name}.weight"), &shape, Init::TorchLinear, Some(fans), rng)?;
        let b = init::var_with_fans(p, &format!("{name}.bias"), &[output], Init::TorchLinear, Some(fans), rng)?;
        Ok(Self { w, b, stride, padding, transposed: false })
    }

    /// `ConvTranspose1d(ch, ch, 4, 2, 1)`: weight `[in, out, k]`, fans from that shape (PyTorch's).
    fn transposed(p: &Path<'_>, name: &str, ch: i64, rng: &mut rl_core::SeededRng) -> Result<Self> {
        let shape = [ch, ch, 4];
        let fans = Fans::of_shape(&shape)?;
        let w = init::var_with_fans(p, &format!("{name}.weight"), &shape, Init::TorchLinear, Some(fans), rng)?;
        let b = init::var_with_fans(p, &format!("{name}.bias"), &[ch], Init::TorchLinear, Some(fans), rng)?;
        Ok(Self { w, b, stride: 2, padding: 1, transposed: true })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(if self.transposed {
            x.f_conv_transpose1d(&self.w, Some(&self.b), [self.stride], [self.padding], [0], 1, [1])?
        } else {
            x.f_conv1d(&self.w, Some(&self.b), [self.stride], [self.padding], [1], 1)?
        })
    }
}

/// Conv1d → GroupNorm → Mish.
#[derive(Debug)]
struct ConvBlock {
    conv: Conv,
    gn_w: Tensor,
    gn_b: Tensor,
    groups: i64,
}

impl ConvBlock {
    fn new(
        p: &Path<'_>,
        name: &str,
        input: i64,
        output: i64,
        k: i64,
        groups: i64,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Self> {
        let conv = Conv::new(p, &format!("{name}.block.0"), input, output, k, 1, k / 2, rng)?;
        let gn_w = init::var(p, &format!("{name}.block.2.weight"), &[output], Init::Ones, rng)?;
        let gn_b = init::var(p, &format!("{name}.block.2.bias"), &[output], Init::Zeros, rng)?;
        Ok(Self { conv, gn_w, gn_b, groups })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.conv.forward(x)?;
        Ok(h.f_group_norm(self.groups, Some(&self.gn_w), Some(&self.gn_b), 1e-5, false)?.f_mish()?)
    }
}

/// Two conv blocks with the embedding added after the first, and a residual (1×1 conv when the
/// channel count changes).
#[derive(Debug)]
struct ResBlock {
    b1: ConvBlock,
    b2: ConvBlock,
    emb: Linear,
    residual: Option<Conv>,
}

impl ResBlock {
    fn new(
        p: &Path<'_>,
        name: &str,
        input: i64,
        output: i64,
        embed: i64,
        u: &UnetParams,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Self> {
        let b1 = ConvBlock::new(p, &format!("{name}.blocks.0"), input, output, u.kernel_size, u.groups, rng)?;
        let b2 = ConvBlock::new(p, &format!("{name}.blocks.1"), output, output, u.kernel_size, u.groups, rng)?;
        let emb = Linear::new(p, &format!("{name}.time_mlp.1"), embed, output, rng)?;
        let residual = if input != output {
            Some(Conv::new(p, &format!("{name}.residual_conv"), input, output, 1, 1, 0, rng)?)
        } else {
            None
        };
        Ok(Self { b1, b2, emb, residual })
    }

    /// `x`: `[B, C, H]`, `e`: `[B, E]`.
    fn forward(&self, x: &Tensor, e: &Tensor) -> Result<Tensor> {
        let t = self.emb.forward(&e.f_mish()?)?.f_unsqueeze(-1)?;
        let h = self.b2.forward(&self.b1.forward(x)?.f_add(&t)?)?;
        let r = match &self.residual {
            Some(c) => c.forward(x)?,
            None => x.shallow_clone(),
        };
        Ok(h.f_add(&r)?)
    }
}

/// The temporal U-Net denoiser `ε_θ(x_k, k, y, use_y)` over `[B, H, C]` state sequences:
/// sinusoidal step embedding → MLP, return embedding MLP (zeroed where the condition is dropped),
/// concatenated; per level two residual blocks, then a stride-2 downsampling (not on the last
/// level); two middle blocks; per level but the first, skip concatenation, two residual
/// blocks and a transposed-convolution upsampling; a final conv block and a 1×1 convolution.
#[derive(Debug)]
pub struct TemporalUnet {
    time1: Linear,
    time2: Linear,
    ret1: Linear,
    ret2: Linear,
    ret3: Linear,
    downs: Vec<(ResBlock, ResBlock, Option<Conv>)>,
    mid1: ResBlock,
    mid2: ResBlock,
    ups: Vec<(ResBlock, ResBlock, Conv)>,
    final_block: ConvBlock,
    final_conv: Conv,
    dim: i64,
    channels: i64,
    levels: usize,
}

impl TemporalUnet {
    /// A U-Net for sequences of `channels` features whose length is divisible by
    /// `2^(levels − 1)`.
    ///
    /// # Errors
    /// Network construction errors.
    pub fn new(
        p: &Path<'_>,
        channels: i64,
        u: &rl_core::Valid<UnetParams>,
        rng: &mut rl_core::SeededRng,
    ) -> Result<Self> {
        let dim = u.dim;
        let time1 = Linear::new(p, "time_mlp.1", dim, 4 * dim, rng)?;
        let time2 = Linear::new(p, "time_mlp.3", 4 * dim, dim, rng)?;
        let ret1 = Linear::new(p, "returns_mlp.0", 1, dim, rng)?;
        let ret2 = Linear::new(p, "returns_mlp.2", dim, 4 * dim, rng)?;
        let ret3 = Linear::new(p, "returns_mlp.4", 4 * dim, dim, rng)?;
        let embed = 2 * dim;
        let mut dims = vec![channels];
        dims.extend(u.dim_mults.iter().map(|m| dim * m));
        let in_out: Vec<(i64, i64)> = dims.windows(2).map(|w| (w[0], w[1])).collect();
        let levels = in_out.len();
        let mut downs = Vec::new();
        for (i, &(a, b)) in in_out.iter().enumerate() {
            let r1 = ResBlock::new(p, &format!("downs.{i}.0"), a, b, embed, u, rng)?;
            let r2 = ResBlock::new(p, &format!("downs.{i}.1"), b, b, embed, u, rng)?;
            let down = if i + 1 < levels {
                Some(Conv::new(p, &format!("downs.{i}.2.conv"), b, b, 3, 2, 1, rng)?)
            } else {
                None
            };
            downs.push((r1, r2, down));
        }
        let mid = dims[dims.len() - 1];
        let mid1 = ResBlock::new(p, "mid_block1", mid, mid, embed, u, rng)?;
        let mid2 = ResBlock::new(p, "mid_block2", mid, mid, embed, u, rng)?;
        let mut ups = Vec::new();
        for (i, &(a, b)) in in_out[1..].iter().rev().enumerate() {
            let r1 = ResBlock::new(p, &format!("ups.{i}.0"), 2 * b, a, embed, u, rng)?;
            let r2 = ResBlock::new(p, &format!("ups.{i}.1"), a, a, embed, u, rng)?;
            let up = Conv::transposed(p, &format!("ups.{i}.2.conv"), a, rng)?;
            ups.push((r1, r2, up));
        }
        let final_block = ConvBlock::new(p, "final_conv.0", dim, dim, u.kernel_size, u.groups, rng)?;
        let final_conv = Conv::new(p, "final_conv.1", dim, channels, 1, 1, 0, rng)?;
        Ok(Self {
            time1,
            time2,
            ret1,
            ret2,
            ret3,
            downs,
            mid1,
            mid2,
            ups,
            final_block,
            final_conv,
            dim,
            channels,
            levels,
        })
    }

    /// The sequence length must be a multiple of this.
    pub fn length_multiple(&self) -> i64 {
        1 << (self.levels - 1)
    }

    /// `ε̂` for `x` `[B, H, C]`, steps `k` `[B]` (float), condition `y` `[B, 1]` and condition
    /// mask `use_y` `[B, 1]` (1 keeps the return embedding, 0 drops it: classifier-free
    /// guidance's unconditional model).
    ///
    /// # Errors
    /// [`AigbError::Shape`] for mismatched inputs; libtorch failures.
    pub fn forward(&self, x: &Tensor, k: &Tensor, y: &Tensor, use_y: &Tensor) -> Result<Tensor> {
        let size = x.size();
        if size.len() != 3 || size[2] != self.channels || size[1] % self.length_multiple() != 0 {
            return Err(AigbError::Shape {
                what: "U-Net input".into(),
                expected: format!("[B, H, {}] with H a multiple of {}", self.channels, self.length_multiple()),
                got: format!("{size:?}"),
            });
        }
        let b = size[0];
        for (what, t, want) in
            [("steps", k, vec![b]), ("condition", y, vec![b, 1]), ("condition mask", use_y, vec![b, 1])]
        {
            if t.size() != want {
                return Err(AigbError::Shape {
                    what: what.into(),
                    expected: format!("{want:?}"),
                    got: format!("{:?}", t.size()),
                });
            }
        }
        // sinusoidal step embedding
        let half = self.dim / 2;
        let scale = -(10_000f64).ln() / ((half - 1).max(1) as f64);
        let freqs = Tensor::f_arange(half, (x.f_kind()?, x.device()))?.f_mul_scalar(scale)?.f_exp()?;
        let arg = k.f_unsqueeze(1)?.f_mul(&freqs.f_unsqueeze(0)?)?;
        let mut pos = Tensor::f_cat(&[arg.f_sin()?, arg.f_cos()?], 1)?;
        if pos.size()[1] < self.dim {
            pos = pos.f_pad([0, self.dim - pos.size()[1]], "constant", Some(0.0))?;
        }
        let t = self.time2.forward(&self.time1.forward(&pos)?.f_mish()?)?;
        let r = self.ret3.forward(&self.ret2.forward(&self.ret1.forward(y)?.f_mish()?)?.f_mish()?)?;
        let e = Tensor::f_cat(&[t, r.f_mul(use_y)?], 1)?;
        let mut h = x.f_permute([0, 2, 1])?;
        let mut skips = Vec::with_capacity(self.downs.len());
        for (r1, r2, down) in &self.downs {
            h = r2.forward(&r1.forward(&h, &e)?, &e)?;
            skips.push(h.shallow_clone());
            if let Some(d) = down {
                h = d.forward(&h)?;
            }
        }
        h = self.mid2.forward(&self.mid1.forward(&h, &e)?, &e)?;
        for (r1, r2, up) in &self.ups {
            let s = skips.pop().ok_or_else(|| AigbError::NotReady("U-Net skip connections exhausted".into()))?;
            h = Tensor::f_cat(&[h, s], 1)?;
            h = up.forward(&r2.forward(&r1.forward(&h, &e)?, &e)?)?;
        }
        let out = self.final_conv.forward(&self.final_block.forward(&h)?)?;
        Ok(out.f_permute([0, 2, 1])?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;
    use tch::{nn::VarStore, Device};

    /// Every constant against its closed form, and the posterior against Bayes' rule computed
    /// independently (precision-weighted combination of the prior `q(x_{k−1} | x_0)` and the
    /// likelihood `q(x_k | x_{k−1})`).
    #[test]
    fn schedule_and_posterior_match_closed_forms() {
        for steps in [1usize, 10, 100] {
            let s = NoiseSchedule::new(BetaSchedule::default(), steps).unwrap();
            let f = |u: f64| ((u + 0.008) / 1.008 * std::f64::consts::FRAC_PI_2).cos().powi(2);
            for k in 0..steps {
                // ᾱ_k = f((k+1)/K) / f(0) wherever no β was clipped
                let closed = f((k + 1) as f64 / steps as f64) / f(0.0);
                if s.betas[..=k].iter().all(|&b| b < 0.999) {
                    assert!((s.alphas_cumprod[k] - closed).abs() < 1e-12, "K={steps} k={k}");
                }
                assert!(s.betas[k] > 0.0 && s.betas[k] <= 0.999);
                let ab = s.alphas_cumprod[k];
                let abp = if k == 0 { 1.0 } else { s.alphas_cumprod[k - 1] };
                assert_eq!(s.alphas_cumprod_prev[k], abp);
                // Bayes: prior N(√ᾱ_{k−1} x0, 1 − ᾱ_{k−1}), likelihood N(√α_k x_{k−1}, β_k)
                let (beta, alpha) = (s.betas[k], 1.0 - s.betas[k]);
                if k > 0 {
                    let prec = 1.0 / (1.0 - abp) + alpha / beta;
                    let var = 1.0 / prec;
                    assert!((s.posterior_variance[k] - var).abs() < 1e-9 * var.max(1e-12), "var k={k}");
                    let (x0, xk) = (0.7, -1.3);
                    let mean = var * (abp.sqrt() * x0 / (1.0 - abp) + alpha.sqrt() * xk / beta);
                    let ours = s.posterior_mean_coef1[k] * x0 + s.posterior_mean_coef2[k] * xk;
                    assert!((ours - mean).abs() < 1e-9, "mean k={k}: {ours} vs {mean}");
                } else {
                    // k = 0: the posterior is the point x_0
                    assert!(s.posterior_variance[0].abs() < 1e-15);
                    assert!((s.posterior_mean_coef1[0] - 1.0).abs() < 1e-12 && s.posterior_mean_coef2[0].abs() < 1e-12);
                }
                assert!((s.sqrt_recip_alphas_cumprod[k] * s.sqrt_alphas_cumprod[k] - 1.0).abs() < 1e-12);
                assert!((s.sqrt_recipm1_alphas_cumprod[k].powi(2) - (1.0 / ab - 1.0)).abs() < 1e-9 / ab);
            }
        }
        // the reference's K = 10 cosine schedule (DFUSER.py cosine_beta_schedule, printed with numpy)
        let s = NoiseSchedule::new(BetaSchedule::default(), 10).unwrap();
        let first = 1.0
            - f64::powi((0.108 / 1.008 * std::f64::consts::FRAC_PI_2).cos(), 2)
                / f64::powi((0.008 / 1.008 * std::f64::consts::FRAC_PI_2).cos(), 2);
        assert!((s.betas[0] - first).abs() < 1e-15);
        assert_eq!(s.betas[9], 0.999); // clipped: ᾱ(K) = 0
        let lin = NoiseSchedule::new(BetaSchedule::Linear { start: 1e-4, end: 0.02 }, 5).unwrap();
        assert!((lin.betas[4] - 0.02).abs() < 1e-12 && (lin.betas[2] - 0.01005).abs() < 1e-12);
        assert!(NoiseSchedule::new(BetaSchedule::default(), 0).is_err());
        assert!(NoiseSchedule::new(BetaSchedule::Linear { start: 0.3, end: 0.2 }, 3).is_err());
    }

    /// `q_sample` has the marginal of `k + 1` chained one-step noisings, and `predict_x0`
    /// inverts it.
    #[test]
    fn forward_process_marginal_and_inverse() {
        let s = NoiseSchedule::new(BetaSchedule::default(), 10).unwrap();
        let opts = (Kind::Double, Device::Cpu);
        let mut rng = rl_core::rng_from_seed(5);
        let n = 40_000;
        let x0 = Tensor::ones([n, 1, 1], opts) * 0.8;
        let k = 6;
        let mut x = x0.shallow_clone();
        for i in 0..=k {
            let z = rl_nn::rand::standard_normal(&[n, 1, 1], opts, &mut rng).unwrap();
            x = x * s.alphas[i].sqrt() + z * s.betas[i].sqrt();
        }
        let (m, v) = (x.mean(Kind::Double).double_value(&[]), x.var(true).double_value(&[]));
        assert!((m - 0.8 * s.sqrt_alphas_cumprod[k]).abs() < 0.02, "{m}");
        assert!((v - (1.0 - s.alphas_cumprod[k])).abs() < 0.02, "{v}");
        let eps = rl_nn::rand::standard_normal(&[3, 4, 2], opts, &mut rng).unwrap();
        let x0 = rl_nn::rand::standard_normal(&[3, 4, 2], opts, &mut rng).unwrap();
        let ks = [0, 4, 9];
        let xk = s.q_sample(&x0, &ks, &eps).unwrap();
        assert!(s.predict_x0(&xk, &ks, &eps).unwrap().allclose(&x0, 1e-9, 1e-9, false));
        assert!(s.q_sample(&x0, &[0, 1, 10], &eps).is_err());
    }

    #[test]
    fn unet_shapes_and_condition_dropout() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let u = UnetParams::default().dim(16).check().unwrap();
        let net = TemporalUnet::new(&vs.root(), 16, &u, &mut rng).unwrap();
        let opts = (Kind::Float, Device::Cpu);
        let x = rl_nn::rand::standard_normal(&[2, 48, 16], opts, &mut rng).unwrap();
        let k = Tensor::from_slice(&[3.0f32, 7.0]);
        let y = Tensor::from_slice(&[0.2f32, 0.9]).view([2, 1]);
        let on = Tensor::ones([2, 1], opts);
        let off = Tensor::zeros([2, 1], opts);
        let a = net.forward(&x, &k, &y, &on).unwrap();
        assert_eq!(a.size(), [2, 48, 16]);
        // the dropped condition does not depend on y
        let y2 = Tensor::from_slice(&[5.0f32, -3.0]).view([2, 1]);
        let u1 = net.forward(&x, &k, &y, &off).unwrap();
        let u2 = net.forward(&x, &k, &y2, &off).unwrap();
        assert!(u1.equal(&u2));
        assert!(!net.forward(&x, &k, &y2, &on).unwrap().allclose(&a, 1e-6, 1e-6, false));
        assert!(net.forward(&x.narrow(1, 0, 46), &k, &y, &on).is_err());
        assert!(UnetParams::default().dim(12).check().is_err());
        assert!(UnetParams::default().kernel_size(4).check().is_err());
    }
}

#[cfg(test)]
mod reference {
    use super::*;
    use rl_core::Params;
    use tch::{nn::VarStore, Device};

    /// Our U-Net with the reference's weights gives the reference's outputs
    /// (`scripts/aigb_unet_fixture.py` runs `DFUSER.py`'s `TemporalUnet`, dim 8, mults (1, 2),
    /// horizon 16, on three inputs, with the condition kept and dropped).
    #[test]
    fn unet_matches_the_reference_module() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dfuser_unet.safetensors");
        let t = rl_nn::checkpoint::read_tensors(path).unwrap();
        let vs = VarStore::new(Device::Cpu);
        let u = UnetParams::default().dim(8).dim_mults(vec![1, 2]).check().unwrap();
        let net = TemporalUnet::new(&vs.root().sub("unet"), 16, &u, &mut rl_core::rng_from_seed(0)).unwrap();
        let weights: std::collections::BTreeMap<String, Tensor> =
            t.iter().filter(|(k, _)| k.starts_with("unet.")).map(|(k, v)| (k.clone(), v.shallow_clone())).collect();
        use rl_nn::checkpoint::LoadMode::Strict;
        rl_nn::checkpoint::check_map(&vs, &weights, "", Strict, path).unwrap();
        rl_nn::checkpoint::load_map(&vs, &weights, "", Strict, path).unwrap();
        let x = &t["io.x"];
        let on = Tensor::ones([3, 1], (Kind::Float, Device::Cpu));
        let cond = net.forward(x, &t["io.t"], &t["io.returns"], &on).unwrap();
        let unc = net.forward(x, &t["io.t"], &t["io.returns"], &on.zeros_like()).unwrap();
        let err = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]);
        assert!(err(&cond, &t["io.cond"]) < 1e-5, "{}", err(&cond, &t["io.cond"]));
        assert!(err(&unc, &t["io.uncond"]) < 1e-5, "{}", err(&unc, &t["io.uncond"]));
    }
}
