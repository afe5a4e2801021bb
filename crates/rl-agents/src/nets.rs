//! Reusable networks: deterministic and tanh-Gaussian actors, a fused critic ensemble (one
//! batched network for twin or `N` critics), action bounds, and target-network syncing.

use rand::Rng;
use rl_core::{Space, SpaceKind, Valid};
use rl_nn::{Activation, EnsembleMlp, Mlp, MlpConfig};
use tch::nn::{Path, VarStore};
use tch::{Device, Kind, Tensor};

use crate::error::{AgentError, Result};

const LOG_SQRT_2PI: f64 = 0.918_938_533_204_672_8; // 0.5 * ln(2π)
const LN_2: f64 = std::f64::consts::LN_2;

/// The affine map from `[-1, 1]^d` onto a bounded action box: `a = scale · y + bias` with
/// `scale = (high − low)/2`, `bias = (high + low)/2`.
#[derive(Debug)]
pub struct ActionBounds {
    low: Vec<f32>,
    high: Vec<f32>,
    scale: Tensor,
    bias: Tensor,
    low_t: Tensor,
    high_t: Tensor,
}

impl Clone for ActionBounds {
    fn clone(&self) -> Self {
        Self {
            low: self.low.clone(),
            high: self.high.clone(),
            scale: self.scale.shallow_clone(),
            bias: self.bias.shallow_clone(),
            low_t: self.low_t.shallow_clone(),
            high_t: self.high_t.shallow_clone(),
        }
    }
}

impl ActionBounds {
    /// The bounds of a box action space with finite bounds, as tensors on `device`.
    ///
    /// # Errors
    /// [`AgentError::UnsupportedSpace`] for a discrete space or an infinite bound; device errors.
    pub fn from_space(space: &Space, device: Device) -> Result<Self> {
        match space.kind() {
            SpaceKind::Box { low, high } => {
                if let Some(i) =
                    low.iter().zip(high.iter()).position(|(l, h)| !l.is_finite() || !h.is_finite() || l >= h)
                {
                    return Err(AgentError::UnsupportedSpace {
                        what: "action".into(),
                        reason: format!(
                            "dimension {i} has bounds [{}, {}]; a bounded box with low < high is needed",
                            low[i], high[i]
                        ),
                    });
                }
                Self::new(low.to_vec(), high.to_vec(), device)
            }
            SpaceKind::Discrete { n } => Err(AgentError::UnsupportedSpace {
                what: "action".into(),
                reason: format!("discrete space of {n} actions; this agent needs a continuous box"),
            }),
        }
    }

    fn new(low: Vec<f32>, high: Vec<f32>, device: Device) -> Result<Self> {
        rl_nn::check::available(device)?;
        let scale: Vec<f32> = low.iter().zip(&high).map(|(l, h)| (h - l) / 2.0).collect();
        let bias: Vec<f32> = low.iter().zip(&high).map(|(l, h)| (h + l) / 2.0).collect();
        let t = |v: &[f32]| -> Result<Tensor> { Ok(Tensor::f_from_slice(v)?.f_to_device(device)?) };
        Ok(Self { scale: t(&scale)?, bias: t(&bias)?, low_t: t(&low)?, high_t: t(&high)?, low, high })
    }

    /// Number of action dimensions.
    pub fn dim(&self) -> usize {
        self.low.len()
    }

    /// Lower bounds.
    pub fn low(&self) -> &[f32] {
        &self.low
    }

    /// Upper bounds.
    pub fn high(&self) -> &[f32] {
        &self.high
    }

    /// `(high − low)/2` per dimension, `[act_dim]`.
    pub fn scale(&self) -> &Tensor {
        &self.scale
    }

    /// `scale · y + bias` for `y ∈ [-1, 1]`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn from_unit(&self, y: &Tensor) -> Result<Tensor> {
        Ok(y.f_mul(&self.scale)?.f_add(&self.bias)?)
    }

    /// Clamps `a` into the box, element-wise.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn clamp(&self, a: &Tensor) -> Result<Tensor> {
        Ok(a.f_maximum(&self.low_t)?.f_minimum(&self.high_t)?)
    }

    /// The same bounds on another device.
    ///
    /// # Errors
    /// Device errors.
    pub fn to_device(&self, device: Device) -> Result<Self> {
        Self::new(self.low.clone(), self.high.clone(), device)
    }
}

fn identity_output(what: &str, cfg: &MlpConfig) -> Result<()> {
    if cfg.output_activation != Activation::Identity {
        return Err(AgentError::invalid(
            format!("{what}.output_activation"),
            format!("{:?}", cfg.output_activation),
            "must be identity: the agent applies its own output transform",
        ));
    }
    Ok(())
}

/// A deterministic policy `μ(s) = scale · tanh(MLP(s)) + bias` (TD3, DDPG, TD3+BC).
#[derive(Debug)]
pub struct DeterministicActor {
    net: Mlp,
    bounds: ActionBounds,
}

impl DeterministicActor {
    /// Creates the MLP under `path` (`obs_dim → hidden → act_dim`), drawing its weights from
    /// `rng`. `cfg.output_activation` must be identity (the actor applies `tanh`).
    ///
    /// # Errors
    /// [`AgentError::InvalidParameter`] for a non-identity output activation; the errors of
    /// [`Mlp::new`].
    pub fn new<R: Rng + ?Sized>(
        path: &Path<'_>,
        obs_dim: usize,
        bounds: ActionBounds,
        cfg: &Valid<MlpConfig>,
        rng: &mut R,
    ) -> Result<Self> {
        identity_output("actor", cfg)?;
        let bounds = bounds.to_device(path.device())?;
        let net = Mlp::new(path, obs_dim as i64, bounds.dim() as i64, cfg, rng)?;
        Ok(Self { net, bounds })
    }

    /// `μ(obs)`: `[B, obs_dim] → [B, act_dim]`, inside the action box.
    ///
    /// # Errors
    /// The input checks of [`Mlp::f_forward`].
    pub fn forward(&self, obs: &Tensor) -> Result<Tensor> {
        self.bounds.from_unit(&self.net.f_forward(obs)?.f_tanh()?)
    }

    /// The action bounds.
    pub fn bounds(&self) -> &ActionBounds {
        &self.bounds
    }

    /// Observation width.
    pub fn obs_dim(&self) -> usize {
        self.net.input_dim() as usize
    }
}

/// Bounds of the tanh-Gaussian actor's log standard deviation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogStdBounds {
    /// Lower bound.
    pub min: f64,
    /// Upper bound.
    pub max: f64,
}

/// A squashed Gaussian policy (SAC): `u ~ N(μ(s), σ(s)²)`, `a = scale · tanh(u) + bias`, with
/// `[μ, log σ] = MLP(s)` (one output layer of width `2·act_dim`, split in two) and `log σ`
/// clamped to `[min, max]`.
///
/// Log-densities are those of the squashed action `tanh(u) ∈ [-1, 1]^d` (the convention of
/// CORL, SB3 and SpinningUp; the constant `−Σ log scale` of the affine map is left out):
///
/// ```text
/// log π(a|s) = Σ_i [ log N(u_i; μ_i, σ_i) − log(1 − tanh²(u_i)) ],
/// log(1 − tanh²(u)) = 2 (log 2 − u − softplus(−2u))        (stable form)
/// ```
#[derive(Debug)]
pub struct TanhGaussianActor {
    net: Mlp,
    bounds: ActionBounds,
    log_std: LogStdBounds,
    act_dim: i64,
}

/// A reparameterised sample of a [`TanhGaussianActor`].
#[derive(Debug)]
pub struct GaussianSample {
    /// Actions in the box, `[B, act_dim]` (differentiable in the actor's weights).
    pub action: Tensor,
    /// `log π(a|s)`, `[B]`.
    pub log_prob: Tensor,
}

impl TanhGaussianActor {
    /// Creates the MLP under `path` (`obs_dim → hidden → 2·act_dim`).
    ///
    /// # Errors
    /// [`AgentError::InvalidParameter`] for a non-identity output activation or bad log-std
    /// bounds; the errors of [`Mlp::new`].
    pub fn new<R: Rng + ?Sized>(
        path: &Path<'_>,
        obs_dim: usize,
        bounds: ActionBounds,
        log_std: LogStdBounds,
        cfg: &Valid<MlpConfig>,
        rng: &mut R,
    ) -> Result<Self> {
        identity_output("actor", cfg)?;
        if !(log_std.min.is_finite() && log_std.max.is_finite() && log_std.min < log_std.max) {
            return Err(AgentError::invalid("log_std_min", log_std.min, format!("need min < max = {}", log_std.max)));
        }
        let bounds = bounds.to_device(path.device())?;
        let act_dim = bounds.dim() as i64;
        let net = Mlp::new(path, obs_dim as i64, 2 * act_dim, cfg, rng)?;
        Ok(Self { net, bounds, log_std, act_dim })
    }

    /// `(μ, log σ)`, each `[B, act_dim]`, `log σ` clamped.
    ///
    /// # Errors
    /// The input checks of [`Mlp::f_forward`].
    pub fn distribution(&self, obs: &Tensor) -> Result<(Tensor, Tensor)> {
        let out = self.net.f_forward(obs)?;
        let mean = out.f_narrow(-1, 0, self.act_dim)?;
        let log_std = out.f_narrow(-1, self.act_dim, self.act_dim)?.f_clamp(self.log_std.min, self.log_std.max)?;
        Ok((mean, log_std))
    }

    /// A reparameterised sample with its log-density; the noise `ε ~ N(0, I)` comes from `rng`
    /// (drawn on the host, moved to the device).
    ///
    /// # Errors
    /// As [`TanhGaussianActor::distribution`].
    pub fn sample<R: Rng + ?Sized>(&self, obs: &Tensor, rng: &mut R) -> Result<GaussianSample> {
        let (mean, log_std) = self.distribution(obs)?;
        let eps = rl_nn::rand::standard_normal(&mean.size(), (mean.f_kind()?, mean.device()), rng)?;
        let u = mean.f_add(&log_std.f_exp()?.f_mul(&eps)?)?;
        // log N(u; μ, σ) = −ε²/2 − log σ − log √(2π), with ε = (u − μ)/σ exactly the drawn noise
        let gauss = eps.f_square()?.f_mul_scalar(-0.5)?.f_sub(&log_std)?.f_sub_scalar(LOG_SQRT_2PI)?;
        let log_det = u.f_neg()?.f_sub(&u.f_mul_scalar(-2.0)?.f_softplus()?)?.f_add_scalar(LN_2)?.f_mul_scalar(2.0)?;
        let log_prob = gauss.f_sub(&log_det)?.f_sum_dim_intlist(-1, false, Kind::Float)?;
        let action = self.bounds.from_unit(&u.f_tanh()?)?;
        Ok(GaussianSample { action, log_prob })
    }

    /// The mean action `scale · tanh(μ(s)) + bias` (evaluation).
    ///
    /// # Errors
    /// As [`TanhGaussianActor::distribution`].
    pub fn mean_action(&self, obs: &Tensor) -> Result<Tensor> {
        let out = self.net.f_forward(obs)?;
        self.bounds.from_unit(&out.f_narrow(-1, 0, self.act_dim)?.f_tanh()?)
    }

    /// The action bounds.
    pub fn bounds(&self) -> &ActionBounds {
        &self.bounds
    }

    /// Observation width.
    pub fn obs_dim(&self) -> usize {
        self.net.input_dim() as usize
    }
}

/// `(weight [E, in, out], bias [E, 1, out], optional LayerNorm (gain, bias))` of one layer.
type EnsembleLayer = (Tensor, Tensor, Option<(Tensor, Tensor)>);

/// `E` critics `Q_e(s, a)` as one batched network ([`EnsembleMlp`]): every layer of all members
/// is one `baddbmm`, so twin critics (TD3, SAC) or `N` critics (SAC-N, EDAC) cost one forward.
#[derive(Debug)]
pub struct EnsembleCritic {
    net: EnsembleMlp,
    /// `(weight [E, in, out], bias [E, 1, out], layer norm)` per layer, for the frozen path.
    layers: Vec<EnsembleLayer>,
    activation: Activation,
    obs_dim: i64,
    act_dim: i64,
}

impl EnsembleCritic {
    /// Creates `members` critics `[obs, action] → 1` under `path`.
    ///
    /// # Errors
    /// [`AgentError::InvalidParameter`] for a non-identity output activation; the errors of
    /// [`EnsembleMlp::new`].
    pub fn new<R: Rng + ?Sized>(
        path: &Path<'_>,
        members: usize,
        obs_dim: usize,
        act_dim: usize,
        cfg: &Valid<MlpConfig>,
        rng: &mut R,
    ) -> Result<Self> {
        identity_output("critic", cfg)?;
        let net = EnsembleMlp::new(path, members as i64, (obs_dim + act_dim) as i64, 1, cfg, rng)?;
        let n_layers = cfg.hidden.len() + 1;
        let mut layers = Vec::with_capacity(n_layers);
        for i in 0..n_layers {
            let p = path.sub(i.to_string());
            let missing = || AgentError::Protocol(format!("ensemble layer {i} has no weight/bias variable"));
            let w = p.get("weight").ok_or_else(missing)?;
            let b = p.get("bias").ok_or_else(missing)?;
            let ln = match (p.sub("ln").get("weight"), p.sub("ln").get("bias")) {
                (Some(g), Some(bb)) => Some((g, bb)),
                _ => None,
            };
            layers.push((w, b, ln));
        }
        Ok(Self { net, layers, activation: cfg.activation, obs_dim: obs_dim as i64, act_dim: act_dim as i64 })
    }

    /// Number of critics `E`.
    pub fn members(&self) -> usize {
        self.net.members() as usize
    }

    fn input(&self, obs: &Tensor, action: &Tensor) -> Result<Tensor> {
        rl_nn::check::shape("critic obs", obs, &[None, Some(self.obs_dim)])?;
        rl_nn::check::shape("critic action", action, &[Some(obs.size()[0]), Some(self.act_dim)])?;
        Ok(Tensor::f_cat(&[obs, action], 1)?)
    }

    /// `Q_e(s, a)` for every member: `[B, obs_dim]`, `[B, act_dim]` → `[E, B]`.
    ///
    /// # Errors
    /// [`AgentError::Nn`] for shapes, kinds or devices that do not fit.
    pub fn forward(&self, obs: &Tensor, action: &Tensor) -> Result<Tensor> {
        Ok(self.net.f_forward(&self.input(obs, action)?)?.f_squeeze_dim(-1)?)
    }

    /// `Q_e(s, a)` with the weights detached: gradients flow to `action` (and `obs`) only,
    /// and no weight gradient is computed (the actor loss of SAC/TD3).
    ///
    /// # Errors
    /// As [`EnsembleCritic::forward`].
    pub fn forward_frozen(&self, obs: &Tensor, action: &Tensor) -> Result<Tensor> {
        let x = self.input(obs, action)?;
        let e = self.members() as i64;
        let mut h = x.f_unsqueeze(0)?.f_expand([e, -1, -1], false)?;
        let last = self.layers.len() - 1;
        for (i, (w, b, ln)) in self.layers.iter().enumerate() {
            h = b.f_detach()?.f_baddbmm(&h, &w.f_detach()?, 1.0, 1.0)?;
            if let Some((g, beta)) = ln {
                let width = g.size()[2];
                h = h
                    .f_layer_norm([width], None::<&Tensor>, None::<&Tensor>, 1e-5, false)?
                    .f_mul(&g.f_detach()?)?
                    .f_add(&beta.f_detach()?)?;
            }
            if i < last {
                h = self.activation.f_apply(&h)?;
            }
        }
        Ok(h.f_squeeze_dim(-1)?)
    }

    /// `Q_member(s, a)` alone with the weights detached, `[B]` (TD3's actor loss on `Q_1`):
    /// only that member's slices are multiplied.
    ///
    /// # Errors
    /// As [`EnsembleCritic::forward`]; [`AgentError::InvalidParameter`] for a member index out
    /// of range.
    pub fn forward_member_frozen(&self, obs: &Tensor, action: &Tensor, member: usize) -> Result<Tensor> {
        if member >= self.members() {
            return Err(AgentError::invalid("member", member, format!("must be < {}", self.members())));
        }
        let m = member as i64;
        let mut h = self.input(obs, action)?;
        let last = self.layers.len() - 1;
        for (i, (w, b, ln)) in self.layers.iter().enumerate() {
            let (w, b) = (w.f_detach()?.f_select(0, m)?, b.f_detach()?.f_select(0, m)?);
            h = b.f_addmm(&h, &w)?;
            if let Some((g, beta)) = ln {
                let width = g.size()[2];
                h = h
                    .f_layer_norm([width], None::<&Tensor>, None::<&Tensor>, 1e-5, false)?
                    .f_mul(&g.f_detach()?.f_select(0, m)?)?
                    .f_add(&beta.f_detach()?.f_select(0, m)?)?;
            }
            if i < last {
                h = self.activation.f_apply(&h)?;
            }
        }
        Ok(h.f_squeeze_dim(-1)?)
    }
}

/// Pairs of (target, source) variables of two stores built with the same layout, for Polyak
/// averaging without looking the variables up again at every update.
#[derive(Debug)]
pub struct TargetSync {
    pairs: Vec<(Tensor, Tensor)>,
}

impl TargetSync {
    /// Pairs every variable of `target` with the same-named variable of `source` (checked:
    /// same names and shapes), copies the source into the target, and freezes the target
    /// (no gradients).
    ///
    /// # Errors
    /// [`AgentError::Nn`] with [`rl_nn::RlNnError::StoreMismatch`] /
    /// [`rl_nn::RlNnError::TensorShape`] when the stores differ.
    pub fn new(target: &mut VarStore, source: &VarStore) -> Result<Self> {
        rl_nn::hard_update(target, source)?;
        target.freeze();
        let t = target.variables();
        let s = source.variables();
        let mut names: Vec<&String> = t.keys().collect();
        names.sort();
        let mut pairs = Vec::with_capacity(names.len());
        for name in names {
            let sv = s.get(name).ok_or_else(|| rl_nn::RlNnError::StoreMismatch(format!("source lacks `{name}`")))?;
            pairs.push((t[name].shallow_clone(), sv.shallow_clone()));
        }
        Ok(Self { pairs })
    }

    /// `θ' ← θ' + τ (θ − θ')` for every pair (one `lerp_` per tensor).
    ///
    /// # Errors
    /// [`AgentError::InvalidParameter`] for `tau` outside `[0, 1]`; libtorch failures.
    pub fn soft_update(&self, tau: f64) -> Result<()> {
        if !(0.0..=1.0).contains(&tau) {
            return Err(AgentError::invalid("tau", tau, "must lie in [0, 1]"));
        }
        tch::no_grad(|| -> Result<()> {
            for (t, s) in &self.pairs {
                let mut t = t.shallow_clone();
                let _ = t.f_lerp_(s, tau)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    fn cpu() -> (Kind, Device) {
        (Kind::Float, Device::Cpu)
    }

    #[test]
    fn bounds_map_and_clamp() {
        let space = Space::boxed(ndarray::array![-2.0, 0.0], ndarray::array![2.0, 1.0]).unwrap();
        let b = ActionBounds::from_space(&space, Device::Cpu).unwrap();
        let y = Tensor::from_slice(&[-1.0f32, 1.0, 0.0, 0.0]).view([2, 2]);
        let a = Vec::<f32>::try_from(&b.from_unit(&y).unwrap().view([-1])).unwrap();
        assert_eq!(a, vec![-2.0, 1.0, 0.0, 0.5]);
        let c = Vec::<f32>::try_from(&b.clamp(&Tensor::from_slice(&[5.0f32, -5.0]).view([1, 2])).unwrap().view([-1]))
            .unwrap();
        assert_eq!(c, vec![2.0, 0.0]);
        assert!(ActionBounds::from_space(&Space::discrete(2).unwrap(), Device::Cpu).is_err());
        let inf = Space::boxed(ndarray::array![f32::NEG_INFINITY], ndarray::array![0.0]).unwrap();
        assert!(matches!(ActionBounds::from_space(&inf, Device::Cpu), Err(AgentError::UnsupportedSpace { .. })));
    }

    #[test]
    fn tanh_gaussian_log_prob_matches_change_of_variables() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(0);
        let space = Space::symmetric(2, 1.0).unwrap();
        let bounds = ActionBounds::from_space(&space, Device::Cpu).unwrap();
        let cfg = MlpConfig::new([16]).check().unwrap();
        let actor = TanhGaussianActor::new(&vs.root(), 3, bounds, LogStdBounds { min: -5.0, max: 2.0 }, &cfg, &mut rng)
            .unwrap();
        let obs = rl_nn::rand::standard_normal(&[64, 3], cpu(), &mut rng).unwrap();
        let mut r1 = rl_core::rng_from_seed(9);
        let s = actor.sample(&obs, &mut r1).unwrap();
        // recompute with the naive formula from the same noise
        let mut r2 = rl_core::rng_from_seed(9);
        let (mean, log_std) = actor.distribution(&obs).unwrap();
        let eps = rl_nn::rand::standard_normal(&[64, 2], cpu(), &mut r2).unwrap();
        let u = &mean + log_std.exp() * &eps;
        let std = log_std.exp();
        let gauss = -((&u - &mean) / &std).square() * 0.5 - &log_std - LOG_SQRT_2PI;
        let naive = (gauss - (u.tanh().square().neg() + 1.0).log()).sum_dim_intlist(-1, false, Kind::Float);
        let diff = (&s.log_prob - naive).abs().max().double_value(&[]);
        assert!(diff < 1e-3, "{diff}");
        assert!(s.action.abs().max().double_value(&[]) <= 1.0);
        assert_eq!(s.log_prob.size(), [64]);
        // gradients reach the actor
        s.log_prob.sum(Kind::Float).backward();
        assert!(vs.trainable_variables().iter().all(|v| v.grad().defined()));
    }

    #[test]
    fn frozen_critic_paths_match_and_skip_weight_grads() {
        let vs = VarStore::new(Device::Cpu);
        let mut rng = rl_core::rng_from_seed(1);
        let cfg = MlpConfig::new([32, 32]).layer_norm(true).check().unwrap();
        let q = EnsembleCritic::new(&vs.root(), 3, 4, 2, &cfg, &mut rng).unwrap();
        let obs = rl_nn::rand::standard_normal(&[8, 4], cpu(), &mut rng).unwrap();
        let act = rl_nn::rand::standard_normal(&[8, 2], cpu(), &mut rng).unwrap().set_requires_grad(true);
        let full = q.forward(&obs, &act).unwrap();
        assert_eq!(full.size(), [3, 8]);
        let frozen = q.forward_frozen(&obs, &act).unwrap();
        assert!((&full - &frozen).abs().max().double_value(&[]) < 1e-6);
        for m in 0..3 {
            let one = q.forward_member_frozen(&obs, &act, m).unwrap();
            assert!((full.get(m as i64) - one).abs().max().double_value(&[]) < 1e-5);
        }
        frozen.sum(Kind::Float).backward();
        assert!(act.grad().defined());
        assert!(vs.trainable_variables().iter().all(|v| !v.grad().defined()));
        assert!(q.forward_member_frozen(&obs, &act, 3).is_err());
        assert!(q.forward(&obs, &Tensor::zeros([8, 3], cpu())).is_err());
    }

    #[test]
    fn target_sync_copies_freezes_and_averages() {
        let mut rng = rl_core::rng_from_seed(2);
        let cfg = MlpConfig::new([8]).check().unwrap();
        let src = VarStore::new(Device::Cpu);
        let _a = EnsembleCritic::new(&src.root(), 2, 3, 1, &cfg, &mut rng).unwrap();
        let mut tgt = VarStore::new(Device::Cpu);
        let _b = EnsembleCritic::new(&tgt.root(), 2, 3, 1, &cfg, &mut rng).unwrap();
        let sync = TargetSync::new(&mut tgt, &src).unwrap();
        let (t, s) = (tgt.variables(), src.variables());
        assert!(t["0.weight"].equal(&s["0.weight"]));
        assert!(!t["0.weight"].requires_grad());
        tch::no_grad(|| {
            let _ = s["0.weight"].shallow_clone().fill_(1.0);
        });
        let before = t["0.weight"].copy();
        sync.soft_update(0.25).unwrap();
        let want = &before * 0.75 + 0.25;
        assert!((&t["0.weight"] - want).abs().max().double_value(&[]) < 1e-6);
        assert!(sync.soft_update(2.0).is_err());
    }
}
