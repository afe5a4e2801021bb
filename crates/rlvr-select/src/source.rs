//! Candidate sources: how the candidate set of each step is built. This stays outside the
//! [`crate::Selector`] trait because it depends on the benchmark (a finite prompt pool or a
//! continuous task distribution), not on the selector; the candidate ratio `r` is then a
//! run-level setting shared by every method.

use crate::error::{invalid, Result};
use crate::types::{Candidates, ItemId};
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

/// Produces the candidate set of each training step.
pub trait CandidateSource: std::fmt::Debug {
    /// The candidates for the next step when the trainer needs `batch_size` prompts.
    ///
    /// # Errors
    /// Implementation-defined (e.g. features of the wrong shape).
    fn next_candidates(&mut self, batch_size: usize, rng: &mut dyn RngCore) -> Result<Candidates<'_>>;
}

/// Epoch-shuffled windows of `ratio * batch_size` prompts of the pool `0..n` (a dataloader
/// with `batch = r·B`, `shuffle = True`, `drop_last = True`: the reference setting of MoPPS
/// and DPS). The window is capped at `n`; a window never straddles two epochs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpochWindow {
    n: usize,
    ratio: usize,
    perm: Vec<ItemId>,
    pos: usize,
    epoch: u64,
    started: bool,
    #[serde(default)]
    features: Option<(Vec<f32>, usize)>,
    #[serde(skip)]
    gathered: Vec<f32>,
}

impl EpochWindow {
    /// Windows of `ratio * B` over `0..n`.
    ///
    /// # Errors
    /// `n == 0` or `ratio == 0`.
    pub fn new(n: usize, ratio: usize) -> Result<Self> {
        if n == 0 {
            return Err(invalid("n", n, "the pool must hold at least one prompt"));
        }
        if ratio == 0 {
            return Err(invalid("ratio", ratio, "the candidate ratio must be at least 1"));
        }
        Ok(Self {
            n,
            ratio,
            perm: (0..n as u64).collect(),
            pos: 0,
            epoch: 0,
            started: false,
            features: None,
            gathered: Vec::new(),
        })
    }

    /// Attaches a feature table (`n * dim` floats, row `i` = prompt `i`) gathered into each window.
    ///
    /// # Errors
    /// A length mismatch or `dim == 0`.
    pub fn with_features(mut self, features: Vec<f32>, dim: usize) -> Result<Self> {
        if dim == 0 || features.len() != self.n * dim {
            return Err(invalid("features", features.len(), "the feature table must hold n * dim floats"));
        }
        self.features = Some((features, dim));
        Ok(self)
    }

    /// Epochs started so far (0 before the first call).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl CandidateSource for EpochWindow {
    fn next_candidates(&mut self, batch_size: usize, rng: &mut dyn RngCore) -> Result<Candidates<'_>> {
        let w = batch_size.saturating_mul(self.ratio).min(self.n);
        if !self.started || self.pos + w > self.n {
            self.perm.shuffle(rng);
            self.pos = 0;
            self.epoch += 1;
            self.started = true;
        }
        let ids = &self.perm[self.pos..self.pos + w];
        self.pos += w;
        match &self.features {
            None => Ok(Candidates::new(ids)),
            Some((table, dim)) => {
                self.gathered.clear();
                for &id in ids {
                    let i = id as usize;
                    self.gathered.extend_from_slice(&table[i * dim..(i + 1) * dim]);
                }
                Candidates::with_features(ids, &self.gathered, *dim)
            }
        }
    }
}

/// The whole pool every step (the DPS paper's formulation, and its MATH setting where
/// `32 × 256 ≥ 7500`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WholePool {
    ids: Vec<ItemId>,
}

impl WholePool {
    /// The pool `0..n`.
    pub fn new(n: usize) -> Self {
        Self { ids: (0..n as u64).collect() }
    }
}

impl CandidateSource for WholePool {
    fn next_candidates(&mut self, _batch_size: usize, _rng: &mut dyn RngCore) -> Result<Candidates<'_>> {
        Ok(Candidates::new(&self.ids))
    }
}

/// Fresh tasks drawn from a continuous task distribution every step (meta-RL / domain
/// randomisation): `ratio * B` new ids, each with an identifier drawn uniformly from the box
/// `[low, high]^dim`, passed as the candidate's features.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FreshDraws {
    low: Vec<f32>,
    high: Vec<f32>,
    ratio: usize,
    next_id: ItemId,
    ids: Vec<ItemId>,
    features: Vec<f32>,
}

impl FreshDraws {
    /// Draws from the box `[low, high]` (`low.len() == high.len() >= 1`, `low <= high`, finite).
    ///
    /// # Errors
    /// Mismatched or invalid bounds, `ratio == 0`.
    pub fn new(low: Vec<f32>, high: Vec<f32>, ratio: usize) -> Result<Self> {
        if low.is_empty() || low.len() != high.len() {
            return Err(invalid("low/high", low.len(), "bounds must have the same, non-zero length"));
        }
        if low.iter().zip(&high).any(|(l, h)| !l.is_finite() || !h.is_finite() || l > h) {
            return Err(invalid("low/high", format!("{low:?}/{high:?}"), "bounds must be finite with low <= high"));
        }
        if ratio == 0 {
            return Err(invalid("ratio", ratio, "the candidate ratio must be at least 1"));
        }
        Ok(Self { low, high, ratio, next_id: 0, ids: Vec::new(), features: Vec::new() })
    }

    /// The id the next drawn task will get.
    pub fn next_id(&self) -> ItemId {
        self.next_id
    }
}

impl CandidateSource for FreshDraws {
    fn next_candidates(&mut self, batch_size: usize, rng: &mut dyn RngCore) -> Result<Candidates<'_>> {
        let w = batch_size.saturating_mul(self.ratio);
        let dim = self.low.len();
        self.ids.clear();
        self.features.clear();
        for _ in 0..w {
            self.ids.push(self.next_id);
            self.next_id += 1;
            for d in 0..dim {
                let u: f32 = rng.random();
                self.features.push(self.low[d] + u * (self.high[d] - self.low[d]));
            }
        }
        Candidates::with_features(&self.ids, &self.features, dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_window_covers_the_pool_once_per_epoch() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(1);
        let mut src = EpochWindow::new(20, 2)?;
        let mut seen = Vec::new();
        for _ in 0..5 {
            let c = src.next_candidates(2, &mut rng)?;
            seen.extend_from_slice(c.ids());
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..20).collect::<Vec<_>>());
        assert_eq!(src.epoch(), 1);
        let _ = src.next_candidates(2, &mut rng)?;
        assert_eq!(src.epoch(), 2);
        Ok(())
    }

    #[test]
    fn fresh_draws_stay_in_the_box() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(2);
        let mut src = FreshDraws::new(vec![0.0, -1.0], vec![1.0, 1.0], 3)?;
        let c = src.next_candidates(4, &mut rng)?;
        assert_eq!(c.len(), 12);
        assert_eq!(c.ids()[11], 11);
        for p in 0..c.len() {
            let f = c.features_of(p).ok_or_else(|| anyhow::anyhow!("no features"))?;
            assert!((0.0..=1.0).contains(&f[0]) && (-1.0..=1.0).contains(&f[1]));
        }
        Ok(())
    }
}
