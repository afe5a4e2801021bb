//! Data types shared by every selector: ids, candidate sets, outcomes, selections, predictions.

use crate::error::{invalid, Result, SelectError};
use serde::{Deserialize, Serialize};

/// Identifier of a prompt (or task). Selectors with per-prompt state ([`crate::Dps`],
/// [`crate::Mopps`]) are built for a pool of `n_items` prompts and accept ids `0..n_items`.
pub type ItemId = u64;

/// A borrowed candidate set: the ids the selector may choose from, with optional per-candidate
/// feature vectors (row-major, `dim` floats per candidate: the embeddings or task identifiers
/// that GPS, MPTS and PDTS read; the per-prompt selectors ignore them).
#[derive(Debug, Clone, Copy)]
pub struct Candidates<'a> {
    ids: &'a [ItemId],
    features: Option<&'a [f32]>,
    dim: usize,
}

impl<'a> Candidates<'a> {
    /// Candidates without features.
    pub fn new(ids: &'a [ItemId]) -> Self {
        Self { ids, features: None, dim: 0 }
    }

    /// Candidates with `dim` features each (`features.len() == ids.len() * dim`, all finite).
    ///
    /// # Errors
    /// [`SelectError::Features`] on a length mismatch, `dim == 0` or a non-finite feature.
    pub fn with_features(ids: &'a [ItemId], features: &'a [f32], dim: usize) -> Result<Self> {
        let want = ids.len().checked_mul(dim);
        if dim == 0 || want != Some(features.len()) {
            return Err(SelectError::Features(format!(
                "expected {} x {dim} = {} floats, got {} (dim must be >= 1)",
                ids.len(),
                want.map_or_else(|| "(overflow)".to_string(), |w| w.to_string()),
                features.len()
            )));
        }
        if let Some(i) = features.iter().position(|x| !x.is_finite()) {
            return Err(SelectError::Features(format!(
                "feature {} of candidate {} is {}",
                i % dim,
                i / dim,
                features[i]
            )));
        }
        Ok(Self { ids, features: Some(features), dim })
    }

    /// The candidate ids.
    pub fn ids(&self) -> &'a [ItemId] {
        self.ids
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are no candidates.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Feature dimension (0 without features).
    pub fn feature_dim(&self) -> usize {
        self.dim
    }

    /// The feature vector of candidate `pos` (position in [`Candidates::ids`]), if any.
    pub fn features_of(&self, pos: usize) -> Option<&'a [f32]> {
        let f = self.features?;
        f.get(pos * self.dim..(pos + 1) * self.dim)
    }
}

/// The solving state DPS models, read off one group of rollouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SolveState {
    /// Every rollout failed (success rate 0).
    Unsolved = 0,
    /// Some but not all rollouts succeeded: the GRPO advantage is non-zero.
    Partial = 1,
    /// Every rollout succeeded (success rate 1).
    Solved = 2,
}

impl SolveState {
    /// The state's index `0, 1, 2` (the paper's states 1, 2, 3).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The state of index `i` (`None` for `i > 2`).
    pub fn from_index(i: usize) -> Option<Self> {
        match i {
            0 => Some(Self::Unsolved),
            1 => Some(Self::Partial),
            2 => Some(Self::Solved),
            _ => None,
        }
    }
}

/// The rewards of one rolled-out group (the feedback of one prompt at one step).
///
/// Rewards are verifiable scores in `[0, 1]` (binary correctness for RLVR). The success rate is
/// their mean; a group is *degenerate* when all rewards are equal (zero GRPO advantage, DAPO's
/// `std == 0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The prompt id.
    pub id: ItemId,
    /// The `k` per-rollout rewards.
    pub rewards: Vec<f32>,
    /// Optional features (GPS, MPTS and PDTS learn from them; without them they use the
    /// features remembered from the selection).
    pub features: Option<Vec<f32>>,
    /// Optional scalar risk (MPTS/PDTS); `None` means `1 - success_rate`.
    pub risk: Option<f32>,
}

impl Outcome {
    /// An outcome from per-rollout rewards.
    pub fn new(id: ItemId, rewards: Vec<f32>) -> Self {
        Self { id, rewards, features: None, risk: None }
    }

    /// A binary outcome with `successes` ones followed by `k - successes` zeros.
    ///
    /// # Errors
    /// [`SelectError::InvalidParameter`] naming `successes` when `successes > k` (a group cannot
    /// have more successes than rollouts).
    pub fn from_successes(id: ItemId, successes: usize, k: usize) -> Result<Self> {
        if successes > k {
            return Err(invalid(
                "successes",
                successes,
                format!("more successes than the k = {k} rollouts of prompt {id}"),
            ));
        }
        let mut rewards = vec![0.0; k];
        rewards[..successes].fill(1.0);
        Ok(Self::new(id, rewards))
    }

    /// Group size `k`.
    pub fn k(&self) -> usize {
        self.rewards.len()
    }

    /// Mean reward (the success rate for binary rewards); 0 for an empty group.
    pub fn success_rate(&self) -> f64 {
        if self.rewards.is_empty() {
            return 0.0;
        }
        self.rewards.iter().map(|&r| f64::from(r)).sum::<f64>() / self.rewards.len() as f64
    }

    /// Success count `k * success_rate` (an integer for binary rewards).
    pub fn successes(&self) -> f64 {
        self.rewards.iter().map(|&r| f64::from(r)).sum()
    }

    /// Whether all rewards are equal (no learning signal for group-relative advantages).
    pub fn is_degenerate(&self) -> bool {
        self.rewards.windows(2).all(|w| w[0] == w[1])
    }

    /// The DPS solving state: unsolved if every reward is 0, solved if every reward is 1,
    /// partial otherwise (as the reference maps success rate 0 / 1 / other).
    pub fn state(&self) -> SolveState {
        if self.rewards.iter().all(|&r| r == 0.0) {
            SolveState::Unsolved
        } else if self.rewards.iter().all(|&r| r == 1.0) {
            SolveState::Solved
        } else {
            SolveState::Partial
        }
    }
}

/// Why a selection holds fewer than `batch_size` prompts (rollout-based selectors only; they
/// never abort, they return what they have and say so).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shortfall {
    /// The cap on generation batches was reached (DAPO's `max_num_gen_batches`).
    GenerationCap {
        /// Generation batches rolled out.
        batches: usize,
    },
    /// Every candidate was rolled out before the batch was full.
    CandidatesExhausted,
    /// The oracle's rollout budget ran out.
    OracleDry,
}

/// What [`crate::Selector::select`] returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Selected ids, best first; at most `batch_size`, exactly `batch_size` unless `shortfall`.
    pub ids: Vec<ItemId>,
    /// Acquisition score per selected id (diagnostics): DPS `μ(2) + w_H H(μ)`, MoPPS the
    /// Thompson draw `γ̃` (ranked by `(γ̃ − target)²`, smallest first), filters the measured
    /// success rate, GPS `γ̂`, MPTS its UCB, PDTS the sampled risk, DRM the measured risk,
    /// uniform, history resampling and GDRM 0.
    pub scores: Vec<f64>,
    /// Per-item loss weights; `None` = uniform (only [`crate::Gdrm`] reweights).
    pub weights: Option<Vec<f32>>,
    /// Groups already rolled out during selection (rollout-based selectors): the trainer
    /// trains on them instead of generating again.
    pub prefetched: Vec<Outcome>,
    /// Rollouts generated inside this call (all of them, kept or filtered out).
    pub selection_rollouts: u64,
    /// Set when fewer than `batch_size` ids were returned.
    pub shortfall: Option<Shortfall>,
}

impl Selection {
    /// The prefetched outcome for `id`, if the selector generated one.
    pub fn prefetched_for(&self, id: ItemId) -> Option<&Outcome> {
        self.prefetched.iter().find(|o| o.id == id)
    }
}

/// A model prediction for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Predicted success rate in `[0, 1]`.
    pub mean: f64,
    /// Predictive standard deviation, where the model has one.
    pub std: Option<f64>,
    /// DPS: predicted probabilities of (unsolved, partial, solved).
    pub class_probs: Option<[f64; 3]>,
}

// ------------------------------------------------------------------------------------------
// Validation helpers.

/// Checks that `ids` holds no duplicate; `scratch` is a reusable bitset.
pub(crate) fn ensure_unique(ids: &[ItemId], context: &'static str, scratch: &mut Vec<u64>) -> Result<()> {
    let Some(&max) = ids.iter().max() else { return Ok(()) };
    if max < (ids.len() as u64).saturating_mul(64).saturating_add(1 << 16) {
        let words = (max / 64 + 1) as usize;
        if scratch.len() < words {
            scratch.resize(words, 0);
        }
        let mut dup = None;
        for &id in ids {
            let (w, b) = ((id / 64) as usize, 1u64 << (id % 64));
            if scratch[w] & b != 0 {
                dup = Some(id);
                break;
            }
            scratch[w] |= b;
        }
        for &id in ids {
            scratch[(id / 64) as usize] = 0;
        }
        return match dup {
            Some(id) => Err(SelectError::DuplicateId { id, context }),
            None => Ok(()),
        };
    }
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    match sorted.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(SelectError::DuplicateId { id: w[0], context }),
        None => Ok(()),
    }
}

/// Common checks of `select` arguments.
pub(crate) fn check_select_args(candidates: &Candidates<'_>, batch_size: usize, scratch: &mut Vec<u64>) -> Result<()> {
    if batch_size == 0 {
        return Err(SelectError::ZeroBatch);
    }
    if batch_size > candidates.len() {
        return Err(SelectError::BatchTooLarge { batch_size, candidates: candidates.len() });
    }
    ensure_unique(candidates.ids(), "candidates", scratch)
}

/// Checks every id is below `n_items`.
pub(crate) fn check_in_pool(ids: impl IntoIterator<Item = ItemId>, n_items: usize) -> Result<()> {
    for id in ids {
        if id >= n_items as u64 {
            return Err(SelectError::UnknownId { id, n_items });
        }
    }
    Ok(())
}

/// Validates a batch of outcomes: unique ids, non-empty groups of one common size, finite
/// rewards in `[0, 1]`, and (when `n_items` is given) ids inside the pool. Returns the group size
/// (0 for an empty batch).
pub(crate) fn validate_outcomes(outcomes: &[Outcome], n_items: Option<usize>, scratch: &mut Vec<u64>) -> Result<usize> {
    let Some(first) = outcomes.first() else { return Ok(0) };
    let k = first.k();
    for o in outcomes {
        if o.rewards.is_empty() {
            return Err(SelectError::EmptyGroup { id: o.id });
        }
        if o.k() != k {
            return Err(SelectError::GroupSizeMismatch { id: o.id, expected: k, got: o.k() });
        }
        for (index, &value) in o.rewards.iter().enumerate() {
            if !value.is_finite() {
                return Err(SelectError::NonFiniteReward { id: o.id, index, value });
            }
            if !(0.0..=1.0).contains(&value) {
                return Err(SelectError::RewardOutOfRange { id: o.id, index, value });
            }
        }
    }
    if let Some(n) = n_items {
        check_in_pool(outcomes.iter().map(|o| o.id), n)?;
    }
    let ids: Vec<ItemId> = outcomes.iter().map(|o| o.id).collect();
    ensure_unique(&ids, "outcomes", scratch)?;
    Ok(k)
}

// ------------------------------------------------------------------------------------------
// Top-B selection on packed keys.

/// Maps an `f32` to a `u32` whose unsigned order is the float's total order.
#[inline]
pub(crate) fn ordered_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// A sort key: the score in the high 32 bits, a random tie-breaker (a hash of the id and a
/// per-call salt) in the low 32 bits. Larger keys win.
#[inline]
pub(crate) fn pack_key(score: f32, id: ItemId, salt: u64) -> u64 {
    (u64::from(ordered_bits(score)) << 32) | (rl_core::seed::splitmix64(id ^ salt) >> 32)
}

/// Positions of the `b` largest of `n` keys, largest first (ties by position). Uses
/// `select_nth_unstable` when the candidate set is a small multiple of `b`, and a bounded
/// min-heap (O(n) expected, no `n`-sized buffer) otherwise.
pub(crate) fn top_b(n: usize, b: usize, mut key: impl FnMut(usize) -> u64) -> Vec<usize> {
    let b = b.min(n);
    if b == 0 {
        return Vec::new();
    }
    // Order: larger key first, then smaller position first. Encode as (key, !pos) so that
    // "larger tuple" = better.
    let mut best: Vec<(u64, u32)> = if n <= 8 * b {
        let mut all: Vec<(u64, u32)> = (0..n).map(|p| (key(p), !(p as u32))).collect();
        if b < n {
            all.select_nth_unstable_by(b - 1, |x, y| y.cmp(x));
            all.truncate(b);
        }
        all
    } else {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(b + 1);
        for p in 0..n {
            let item = (key(p), !(p as u32));
            if heap.len() < b {
                heap.push(Reverse(item));
            } else if let Some(mut top) = heap.peek_mut() {
                if item > top.0 {
                    *top = Reverse(item);
                }
            }
        }
        heap.into_iter().map(|r| r.0).collect()
    };
    best.sort_unstable_by(|x, y| y.cmp(x));
    best.into_iter().map(|(_, p)| !p as usize).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_bits_is_monotone() {
        let xs = [-3.0f32, -1.0, -0.5, 0.0, 1e-30, 0.25, 1.0, 7.0];
        for w in xs.windows(2) {
            assert!(ordered_bits(w[0]) < ordered_bits(w[1]), "{w:?}");
        }
    }

    #[test]
    fn top_b_both_paths_match_a_full_sort() {
        for &(n, b) in &[(10usize, 3usize), (100, 3), (1000, 17), (5, 5), (64, 8)] {
            let keys: Vec<u64> = (0..n as u64).map(|i| rl_core::seed::splitmix64(i) % 50).collect();
            let got = top_b(n, b, |p| keys[p]);
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by(|&x, &y| keys[y].cmp(&keys[x]).then(x.cmp(&y)));
            assert_eq!(got, idx[..b].to_vec(), "n={n} b={b}");
        }
    }

    #[test]
    fn outcome_states() -> Result<()> {
        assert_eq!(Outcome::from_successes(0, 0, 4)?.state(), SolveState::Unsolved);
        assert_eq!(Outcome::from_successes(0, 4, 4)?.state(), SolveState::Solved);
        assert_eq!(Outcome::from_successes(0, 2, 4)?.state(), SolveState::Partial);
        assert!(Outcome::from_successes(0, 4, 4)?.is_degenerate());
        assert!(!Outcome::from_successes(0, 1, 4)?.is_degenerate());
        Ok(())
    }

    #[test]
    fn more_successes_than_rollouts_is_an_error() -> Result<()> {
        match Outcome::from_successes(7, 9, 8) {
            Err(SelectError::InvalidParameter { name, value, .. }) => {
                assert_eq!((name.as_str(), value.as_str()), ("successes", "9"));
            }
            other => panic!("expected InvalidParameter, got {other:?}"),
        }
        assert_eq!(Outcome::from_successes(7, 8, 8)?.rewards, vec![1.0; 8]);
        assert_eq!(Outcome::from_successes(7, 0, 0)?.rewards, Vec::<f32>::new());
        Ok(())
    }

    #[test]
    fn unique_check_uses_both_paths() {
        let mut s = Vec::new();
        assert!(ensure_unique(&[1, 2, 3], "c", &mut s).is_ok());
        assert!(matches!(ensure_unique(&[1, 2, 1], "c", &mut s), Err(SelectError::DuplicateId { id: 1, .. })));
        assert!(s.iter().all(|&w| w == 0));
        let big = [u64::MAX, 5, u64::MAX - 1];
        assert!(ensure_unique(&big, "c", &mut s).is_ok());
        assert!(ensure_unique(&[u64::MAX, 5, u64::MAX], "c", &mut s).is_err());
    }
}
