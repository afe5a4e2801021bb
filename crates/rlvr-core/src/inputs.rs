//! The loss input batch: `[B, T]` log-prob tensors, advantages, the response mask and the
//! group layout.

use tch::{Device, Kind, Tensor};

use crate::error::{Result, RlvrCoreError};
use crate::groups::Groups;

/// One (micro-)batch of `B` sequences padded to `T` tokens.
///
/// Every log-prob tensor is `[B, T]`: the log-probability of the sampled token under a policy.
/// `logp` is the current policy π_θ (carries the gradient), `old_logp` the proximal policy
/// π_prox (the snapshot at the start of the step; detached), `behave_logp` the behaviour policy
/// π_b that generated the tokens (only for off-policy data: replayed groups, stale or
/// inference-engine rollouts), `ref_logp` the frozen reference policy of the KL penalty.
/// `advantages` is `[B]` (one per sequence, broadcast over tokens) or `[B, T]`. `mask` is the
/// `[B, T]` response mask (bool, integer or float 0/1; float values other than 0/1 act as token
/// weights). `entropy` is an optional `[B, T]` per-token entropy (from
/// [`crate::entropy_from_logits`], carrying its own gradient) for the entropy bonus.
/// `groups` is needed by LPO only.
///
/// Values at masked-out (padding) positions are multiplied by zero, so they must be finite
/// (pad with 0, not −inf). Gradients flow into `logp` (and `entropy`); every other tensor is
/// treated as a constant, as in verl, TRL, OpenRLHF and AReaL.
///
/// ```
/// use rlvr_core::LossInputs;
/// use tch::{Kind, Tensor};
/// let logp = Tensor::zeros([2, 3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
/// let old = Tensor::zeros([2, 3], (Kind::Float, tch::Device::Cpu));
/// let adv = Tensor::from_slice(&[1.0f32, -1.0]);
/// let mask = Tensor::ones([2, 3], (Kind::Bool, tch::Device::Cpu));
/// let inputs = LossInputs::new(&logp, &old, &adv, &mask);
/// assert_eq!(inputs.batch_shape()?, (2, 3));
/// # Ok::<(), rlvr_core::RlvrCoreError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LossInputs<'a> {
    /// Current-policy log-probs `[B, T]` (with gradient).
    pub logp: &'a Tensor,
    /// Proximal ("old") log-probs `[B, T]`.
    pub old_logp: &'a Tensor,
    /// Advantages `[B]` or `[B, T]`.
    pub advantages: &'a Tensor,
    /// Response mask `[B, T]`.
    pub mask: &'a Tensor,
    /// Behaviour-policy log-probs `[B, T]` (off-policy data only).
    pub behave_logp: Option<&'a Tensor>,
    /// Reference-policy log-probs `[B, T]` (KL penalty only).
    pub ref_logp: Option<&'a Tensor>,
    /// Per-token entropy `[B, T]` (entropy bonus and metric).
    pub entropy: Option<&'a Tensor>,
    /// Group layout of the `B` sequences (LPO only).
    pub groups: Option<&'a Groups>,
    /// Seed of this call's random choices (Clip-Cov's token draw; required there). Derive one
    /// per optimiser step and micro-batch, e.g. with `rl_core::derive_seed(run_seed, step)`.
    pub seed: Option<u64>,
}

impl<'a> LossInputs<'a> {
    /// The required inputs; the optional ones start empty.
    pub fn new(logp: &'a Tensor, old_logp: &'a Tensor, advantages: &'a Tensor, mask: &'a Tensor) -> Self {
        Self {
            logp,
            old_logp,
            advantages,
            mask,
            behave_logp: None,
            ref_logp: None,
            entropy: None,
            groups: None,
            seed: None,
        }
    }
    /// Sets the behaviour-policy log-probs.
    #[must_use]
    pub fn behaviour(mut self, behave_logp: &'a Tensor) -> Self {
        self.behave_logp = Some(behave_logp);
        self
    }
    /// Sets the reference-policy log-probs.
    #[must_use]
    pub fn reference(mut self, ref_logp: &'a Tensor) -> Self {
        self.ref_logp = Some(ref_logp);
        self
    }
    /// Sets the per-token entropy.
    #[must_use]
    pub fn entropy(mut self, entropy: &'a Tensor) -> Self {
        self.entropy = Some(entropy);
        self
    }
    /// Sets the group layout.
    #[must_use]
    pub fn groups(mut self, groups: &'a Groups) -> Self {
        self.groups = Some(groups);
        self
    }
    /// Sets the seed of this call's random choices.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// `(B, T)` of `logp`.
    ///
    /// # Errors
    /// [`RlvrCoreError::Shape`] when `logp` is not 2-D; [`RlvrCoreError::Empty`] when `B` or
    /// `T` is zero.
    pub fn batch_shape(&self) -> Result<(i64, i64)> {
        let s = self.logp.size();
        if s.len() != 2 {
            return Err(RlvrCoreError::Shape { what: "logp".into(), expected: "[B, T]".into(), got: s });
        }
        if s[0] == 0 || s[1] == 0 {
            return Err(RlvrCoreError::Empty { what: format!("batch (logp has shape {s:?})") });
        }
        Ok((s[0], s[1]))
    }

    /// Checks shapes, element types and devices of every given tensor and, when `finite`,
    /// that all values are finite.
    ///
    /// # Errors
    /// [`RlvrCoreError::Shape`], [`RlvrCoreError::Kind`], [`RlvrCoreError::Empty`],
    /// [`RlvrCoreError::Groups`] or [`RlvrCoreError::NonFinite`], naming the tensor.
    pub fn validate(&self, finite: bool) -> Result<()> {
        let (b, t) = self.batch_shape()?;
        let dev = self.logp.device();
        let check = |what: &str, x: &Tensor, float: bool| -> Result<()> {
            let s = x.size();
            if s != [b, t] {
                return Err(RlvrCoreError::Shape {
                    what: what.into(),
                    expected: format!("[{b}, {t}] like logp"),
                    got: s,
                });
            }
            check_device(what, x, dev)?;
            if float {
                check_float(what, x)?;
            }
            if finite {
                check_finite(what, x)?;
            }
            Ok(())
        };
        check_float("logp", self.logp)?;
        if finite {
            check_finite("logp", self.logp)?;
        }
        check("old_logp", self.old_logp, true)?;
        check("mask", self.mask, false)?;
        if let Some(x) = self.behave_logp {
            check("behave_logp", x, true)?;
        }
        if let Some(x) = self.ref_logp {
            check("ref_logp", x, true)?;
        }
        if let Some(x) = self.entropy {
            check("entropy", x, true)?;
        }
        let a = self.advantages.size();
        if a != [b] && a != [b, t] {
            return Err(RlvrCoreError::Shape {
                what: "advantages".into(),
                expected: format!("[{b}] or [{b}, {t}]"),
                got: a,
            });
        }
        check_device("advantages", self.advantages, dev)?;
        check_float("advantages", self.advantages)?;
        if finite {
            check_finite("advantages", self.advantages)?;
        }
        if let Some(g) = self.groups {
            g.check_len(b as usize, "logp rows")?;
        }
        Ok(())
    }
}

fn check_device(what: &str, x: &Tensor, dev: Device) -> Result<()> {
    if x.device() == dev {
        Ok(())
    } else {
        Err(RlvrCoreError::Kind {
            what: what.into(),
            expected: format!("a tensor on {dev:?} like logp"),
            got: format!("a tensor on {:?}", x.device()),
        })
    }
}

fn check_float(what: &str, x: &Tensor) -> Result<()> {
    match x.kind() {
        Kind::Float | Kind::Double | Kind::Half | Kind::BFloat16 => Ok(()),
        k => Err(RlvrCoreError::Kind {
            what: what.into(),
            expected: "a floating-point type".into(),
            got: format!("{k:?}"),
        }),
    }
}

/// Returns [`RlvrCoreError::NonFinite`] naming the first NaN/inf of `x` (row-major), if any.
///
/// Fast path: one reduction (the sum is finite when every element is); only when it is not is
/// the tensor scanned element-wise to name the first offending index.
///
/// # Errors
/// As described; libtorch failures as [`RlvrCoreError::Torch`].
pub fn check_finite(what: &str, x: &Tensor) -> Result<()> {
    if !x.is_floating_point() {
        return Ok(());
    }
    if f64::try_from(x.f_sum(x.kind())?)?.is_finite() {
        return Ok(());
    }
    let flat = x.f_flatten(0, -1)?;
    let bad = flat.f_isfinite()?.f_logical_not()?.f_nonzero()?;
    if bad.size()[0] == 0 {
        return Ok(()); // the sum overflowed on finite values
    }
    let index = i64::try_from(bad.f_get(0)?.f_get(0)?)?;
    let value = f64::try_from(flat.f_get(index)?)?;
    Err(RlvrCoreError::NonFinite { what: what.into(), index: index as usize, value })
}
