//! Candidate sources: how the candidate set of each step is built. This stays outside the
//! [`crate::Selector`] trait because it depends on the benchmark (a finite prompt pool or a
//! continuous task distribution), not on the selector; the candidate ratio `r` is then a
//! run-level setting shared by every method.

use crate::error::{invalid, Result, SelectError};
use crate::types::{Candidates, ItemId};
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use rl_core::MemoryBudget;
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
///
/// Its state (permutation, position, epoch) serialises so a run can resume the same windows;
/// deserialising checks that the permutation is one of `0..n`, the position inside it and the
/// feature table of `n * dim` finite values.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "EpochWindowRepr", into = "EpochWindowRepr")]
pub struct EpochWindow {
    n: usize,
    ratio: usize,
    perm: Vec<ItemId>,
    pos: usize,
    epoch: u64,
    started: bool,
    features: Option<(Vec<f32>, usize)>,
    gathered: Vec<f32>,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EpochWindowRepr {
    n: usize,
    ratio: usize,
    perm: Vec<ItemId>,
    pos: usize,
    epoch: u64,
    started: bool,
    #[serde(default)]
    features: Option<(Vec<f32>, usize)>,
}

impl From<EpochWindow> for EpochWindowRepr {
    fn from(w: EpochWindow) -> Self {
        Self {
            n: w.n,
            ratio: w.ratio,
            perm: w.perm,
            pos: w.pos,
            epoch: w.epoch,
            started: w.started,
            features: w.features,
        }
    }
}

impl TryFrom<EpochWindowRepr> for EpochWindow {
    type Error = SelectError;
    fn try_from(r: EpochWindowRepr) -> Result<Self> {
        if r.perm.len() != r.n {
            return Err(SelectError::InvalidState(format!(
                "epoch window: `perm` has {} ids for a pool of n = {}",
                r.perm.len(),
                r.n
            )));
        }
        let mut w = EpochWindow::new(r.n, r.ratio)?;
        let mut seen = r.perm.clone();
        seen.sort_unstable();
        if seen.len() != r.n || seen.iter().enumerate().any(|(i, &id)| id != i as u64) {
            return Err(SelectError::InvalidState(format!("epoch window: `perm` is not a permutation of 0..{}", r.n)));
        }
        if r.pos > r.n {
            return Err(SelectError::InvalidState(format!(
                "epoch window: position {} beyond the pool of {}",
                r.pos, r.n
            )));
        }
        if let Some((table, dim)) = r.features {
            if table.iter().any(|x| !x.is_finite()) {
                return Err(SelectError::InvalidState("epoch window: non-finite feature".into()));
            }
            w = w.with_features(table, dim)?;
        }
        w.perm = r.perm;
        w.pos = r.pos;
        w.epoch = r.epoch;
        w.started = r.started;
        Ok(w)
    }
}

impl EpochWindow {
    /// Windows of `ratio * B` over `0..n`.
    ///
    /// # Errors
    /// `n == 0` or `ratio == 0`; [`SelectError::Core`] with [`RlCoreError::TooLarge`](rl_core::RlCoreError::TooLarge)
    /// when the permutation of `n` ids (8 bytes each) exceeds the default [`MemoryBudget`].
    pub fn new(n: usize, ratio: usize) -> Result<Self> {
        if n == 0 {
            return Err(invalid("n", n, "the pool must hold at least one prompt"));
        }
        if ratio == 0 {
            return Err(invalid("ratio", ratio, "the candidate ratio must be at least 1"));
        }
        MemoryBudget::default().check_elems("epoch window permutation (n ids)", &[n as u64], 8)?;
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
    /// A length mismatch (also when `n * dim` overflows) or `dim == 0`.
    pub fn with_features(mut self, features: Vec<f32>, dim: usize) -> Result<Self> {
        if dim == 0 || self.n.checked_mul(dim) != Some(features.len()) {
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
///
/// Serialises its box, ratio and next id; deserialising checks the box as [`FreshDraws::new`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "FreshDrawsRepr", into = "FreshDrawsRepr")]
pub struct FreshDraws {
    low: Vec<f32>,
    high: Vec<f32>,
    ratio: usize,
    next_id: ItemId,
    ids: Vec<ItemId>,
    features: Vec<f32>,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FreshDrawsRepr {
    low: Vec<f32>,
    high: Vec<f32>,
    ratio: usize,
    next_id: ItemId,
}

impl From<FreshDraws> for FreshDrawsRepr {
    fn from(f: FreshDraws) -> Self {
        Self { low: f.low, high: f.high, ratio: f.ratio, next_id: f.next_id }
    }
}

impl TryFrom<FreshDrawsRepr> for FreshDraws {
    type Error = SelectError;
    fn try_from(r: FreshDrawsRepr) -> Result<Self> {
        let mut f = FreshDraws::new(r.low, r.high, r.ratio)?;
        f.next_id = r.next_id;
        Ok(f)
    }
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
    fn source_state_roundtrips_and_is_checked() -> anyhow::Result<()> {
        let mut rng = rl_core::rng_from_seed(3);
        let mut a = EpochWindow::new(10, 2)?.with_features((0..20).map(|i| i as f32).collect(), 2)?;
        let _ = a.next_candidates(2, &mut rng)?;
        let json = serde_json::to_value(&a)?;
        let mut b: EpochWindow = serde_json::from_value(json.clone())?;
        let (mut ra, mut rb) = (rng.clone(), rng.clone());
        for _ in 0..4 {
            let ca = a.next_candidates(2, &mut ra)?;
            let (ids, f) = (ca.ids().to_vec(), ca.features_of(0).map(<[f32]>::to_vec));
            let cb = b.next_candidates(2, &mut rb)?;
            assert_eq!((ids, f), (cb.ids().to_vec(), cb.features_of(0).map(<[f32]>::to_vec)));
        }
        for (field, bad) in [
            ("perm", serde_json::json!([0, 0, 2, 3, 4, 5, 6, 7, 8, 9])),
            ("pos", serde_json::json!(11)),
            ("ratio", serde_json::json!(0)),
            ("features", serde_json::json!([[1.0], 2])),
        ] {
            let mut v = json.clone();
            v[field] = bad;
            assert!(serde_json::from_value::<EpochWindow>(v).is_err(), "{field}");
        }
        let f = FreshDraws::new(vec![0.0], vec![1.0], 2)?;
        let mut v = serde_json::to_value(&f)?;
        assert_eq!(serde_json::from_value::<FreshDraws>(v.clone())?.next_id(), 0);
        v["low"] = serde_json::json!([2.0]);
        assert!(serde_json::from_value::<FreshDraws>(v).is_err());
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
