//! Tensor side (feature `tch`): a [`FilledBatch`] as `[B, T]` tensors for `rlvr-core`'s loss.
//!
//! Rows are the `K` responses of each batch group in order (`B = groups · K`, the `[G, K]`
//! row-major layout of [`rlvr_core::Groups::uniform`]), right-padded to the longest response
//! `T`. The decoupled correction of `rlvr-core` multiplies the policy loss by the detached
//! weight `π_prox/π_b`; [`TensorBatch::behaviour_logp_for`] gives it the stored behaviour
//! log-probs on replayed rows and the proximal log-probs themselves on fresh rows, so fresh
//! rows get a weight of exactly 1 and only replayed rows are corrected (POPO).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use rlvr_core::{DecoupledParams, LossConfig, LossParams, PolicyLoss};
//! use rlvr_replay::{tensor::TensorBatch, GroupReplayBuffer, Params, ReplayParams};
//! # let (groups, version) = (Vec::new(), 0);
//! # let model_logp = |t: &tch::Tensor| t.to_kind(tch::Kind::Float);
//! let mut buffer = GroupReplayBuffer::new(ReplayParams::new(8).check()?)?;
//! let batch = buffer.fill(groups, version)?;
//! let tb = TensorBatch::new(&batch, 0, tch::Device::Cpu)?;
//! let logp = model_logp(&tb.tokens); // [B, T] log-probs of the current policy
//! let old_logp = logp.detach(); // proximal policy = the policy at the start of this step
//! let behave = tb.behaviour_logp_for(&old_logp)?;
//! let loss = LossConfig::new(LossParams::new(PolicyLoss::default()).correction(Some(DecoupledParams::default())).check()?);
//! let out = loss.loss(&tb.loss_inputs(&logp, &old_logp, &behave), &tb.counts()?)?;
//! out.loss.backward();
//! # Ok(()) }
//! ```

use rlvr_core::{GlobalCounts, Groups, LossInputs};
use tch::{Device, Kind, Tensor};

use crate::buffer::{FilledBatch, Origin};
use crate::error::{ReplayError, Result};

/// A filled batch as tensors (see the module docs for the layout).
#[derive(Debug)]
pub struct TensorBatch {
    /// Response token ids `[B, T]` (`Int64`, padded with the given pad id).
    pub tokens: Tensor,
    /// Response mask `[B, T]` (`Bool`): the stored mask, `false` on padding.
    pub mask: Tensor,
    /// Stored behaviour log-probs `[B, T]` (`Float`, 0 on padding).
    pub behave_logp: Tensor,
    /// Advantages `[B]` (`Float`): stored, recomputed, or 0 for unfilled slots.
    pub advantages: Tensor,
    /// Whether each row belongs to a replayed group `[B]` (`Bool`).
    pub replayed: Tensor,
    /// Group layout: `groups` of `K` consecutive rows.
    pub groups: Groups,
    /// Prompt id of each row.
    pub prompt_ids: Vec<u64>,
    /// Behaviour policy version of each row.
    pub policy_versions: Vec<u64>,
    /// Origin of each group.
    pub origins: Vec<Origin>,
}

impl TensorBatch {
    /// Lays out `batch` on `device`.
    ///
    /// # Errors
    /// [`ReplayError::Empty`] for an empty batch; libtorch failures.
    pub fn new(batch: &FilledBatch, pad_id: i64, device: Device) -> Result<Self> {
        let first = batch.groups.first().ok_or(ReplayError::Empty { what: "filled batch" })?;
        let k = first.group().k();
        let rows = batch.len() * k;
        let t = batch.iter().map(|g| g.group().max_len()).max().unwrap_or(0).max(1);
        let mut tokens = vec![pad_id; rows * t];
        let mut mask = vec![false; rows * t];
        let mut behave = vec![0f32; rows * t];
        let mut advantages = Vec::with_capacity(rows);
        let mut replayed = Vec::with_capacity(rows);
        let mut prompt_ids = Vec::with_capacity(rows);
        let mut policy_versions = Vec::with_capacity(rows);
        for (gi, bg) in batch.iter().enumerate() {
            let g = bg.group();
            if g.k() != k {
                return Err(ReplayError::GroupSize { index: gi, expected: k, got: g.k() });
            }
            for (ri, (r, &a)) in g.responses().zip(bg.advantages()).enumerate() {
                let row = (gi * k + ri) * t;
                for (dst, &src) in tokens[row..].iter_mut().zip(r.tokens) {
                    *dst = i64::from(src);
                }
                behave[row..row + r.behaviour_logp.len()].copy_from_slice(r.behaviour_logp);
                if r.mask.is_empty() {
                    mask[row..row + r.tokens.len()].fill(true);
                } else {
                    mask[row..row + r.mask.len()].copy_from_slice(r.mask);
                }
                advantages.push(a);
                replayed.push(bg.is_replayed());
                prompt_ids.push(g.prompt_id());
                policy_versions.push(g.policy_version());
            }
        }
        let shape = [rows as i64, t as i64];
        let to = |x: Tensor| -> Result<Tensor> { Ok(x.f_to_device(device)?) };
        Ok(Self {
            tokens: to(Tensor::from_slice(&tokens).f_reshape(shape)?)?,
            mask: to(Tensor::from_slice(&mask).f_reshape(shape)?)?,
            behave_logp: to(Tensor::from_slice(&behave).f_reshape(shape)?)?,
            advantages: to(Tensor::from_slice(&advantages))?,
            replayed: to(Tensor::from_slice(&replayed))?,
            groups: Groups::uniform(batch.len(), k)?,
            prompt_ids,
            policy_versions,
            origins: batch.iter().map(|g| g.origin()).collect(),
        })
    }

    /// Number of rows `B`.
    pub fn rows(&self) -> i64 {
        self.tokens.size().first().copied().unwrap_or(0)
    }

    /// The behaviour log-probs to give the loss: the stored ones on replayed rows,
    /// `prox_logp` (detached) on every other row, so that the decoupled weight
    /// `exp(prox − behave)` is exactly 1 there. For asynchronous rollouts or an inference
    /// engine whose log-probs differ from the trainer's, pass [`TensorBatch::behave_logp`]
    /// instead to correct fresh rows too.
    ///
    /// # Errors
    /// [`ReplayError::Length`] when `prox_logp` is not `[B, T]`; libtorch failures.
    pub fn behaviour_logp_for(&self, prox_logp: &Tensor) -> Result<Tensor> {
        if prox_logp.size() != self.behave_logp.size() {
            return Err(ReplayError::Length {
                what: "prox_logp elements",
                expected: self.behave_logp.numel(),
                got: prox_logp.numel(),
            });
        }
        let prox = prox_logp.f_detach()?.f_to_kind(Kind::Float)?;
        let sel = self.replayed.f_unsqueeze(1)?;
        Ok(self.behave_logp.f_to_device(prox.device())?.f_where_self(&sel, &prox)?)
    }

    /// `rlvr-core`'s loss input: `logp` (current policy, with gradient), `old_logp`
    /// (proximal), the batch's advantages and mask, `behave_logp` (from
    /// [`TensorBatch::behaviour_logp_for`]) and the group layout.
    pub fn loss_inputs<'a>(
        &'a self,
        logp: &'a Tensor,
        old_logp: &'a Tensor,
        behave_logp: &'a Tensor,
    ) -> LossInputs<'a> {
        LossInputs::new(logp, old_logp, &self.advantages, &self.mask).behaviour(behave_logp).groups(&self.groups)
    }

    /// Normalisation counts of this batch taken whole (`dp_size = 1`).
    ///
    /// # Errors
    /// `rlvr-core`'s errors when every row is masked.
    pub fn counts(&self) -> Result<GlobalCounts> {
        Ok(GlobalCounts::local(&self.mask)?)
    }
}
