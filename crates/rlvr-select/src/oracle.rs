//! Rollout oracles: how rollout-based selectors (dynamic sampling, difficulty filtering) pay for
//! the rollouts they generate while selecting, and how those rollouts are counted.

use crate::error::{Result, SelectError};
use crate::types::{ItemId, Outcome};
use rand::RngCore;

/// Generates groups of `k` rollouts and counts every rollout it generates.
///
/// An oracle may *run dry* (a rollout budget): it then returns outcomes for a prefix of the ids
/// asked for, possibly none. Predictive selectors (DPS, MoPPS, uniform, history resampling)
/// never call it.
pub trait RolloutOracle {
    /// Rolls out `k` responses for each id, in order. Returns one outcome per id for a prefix
    /// of `ids` (shorter than `ids` only when the oracle ran dry).
    ///
    /// # Errors
    /// Implementation-defined (an unknown id, an oracle that cannot roll out).
    fn rollout(&mut self, ids: &[ItemId], k: usize, rng: &mut dyn RngCore) -> Result<Vec<Outcome>>;

    /// Rollouts generated so far (every response counts, kept or not).
    fn rollouts_spent(&self) -> u64;
}

/// An oracle that cannot roll out: for predictive selectors, which never call it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRollouts;

impl RolloutOracle for NoRollouts {
    fn rollout(&mut self, _ids: &[ItemId], _k: usize, _rng: &mut dyn RngCore) -> Result<Vec<Outcome>> {
        Err(SelectError::OracleUnavailable { selector: "(unknown)" })
    }

    fn rollouts_spent(&self) -> u64 {
        0
    }
}

/// An oracle backed by a closure `f(id, k, rng) -> rewards`, with rollout counting.
pub struct FnOracle<F> {
    f: F,
    spent: u64,
}

impl<F> std::fmt::Debug for FnOracle<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnOracle").field("spent", &self.spent).finish_non_exhaustive()
    }
}

impl<F> FnOracle<F>
where
    F: FnMut(ItemId, usize, &mut dyn RngCore) -> Result<Vec<f32>>,
{
    /// Wraps `f`, which returns the `k` rewards of one prompt.
    pub fn new(f: F) -> Self {
        Self { f, spent: 0 }
    }
}

impl<F> RolloutOracle for FnOracle<F>
where
    F: FnMut(ItemId, usize, &mut dyn RngCore) -> Result<Vec<f32>>,
{
    fn rollout(&mut self, ids: &[ItemId], k: usize, rng: &mut dyn RngCore) -> Result<Vec<Outcome>> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let rewards = (self.f)(id, k, rng)?;
            self.spent += rewards.len() as u64;
            out.push(Outcome::new(id, rewards));
        }
        Ok(out)
    }

    fn rollouts_spent(&self) -> u64 {
        self.spent
    }
}

/// Wraps an oracle with a total rollout budget; once a whole group no longer fits, it runs dry.
#[derive(Debug)]
pub struct BudgetedOracle<O> {
    inner: O,
    budget: u64,
}

impl<O: RolloutOracle> BudgetedOracle<O> {
    /// `inner` limited to `budget` rollouts in total (counting what `inner` already spent).
    pub fn new(inner: O, budget: u64) -> Self {
        Self { inner, budget }
    }

    /// Rollouts still available.
    pub fn remaining(&self) -> u64 {
        self.budget.saturating_sub(self.inner.rollouts_spent())
    }

    /// The wrapped oracle.
    pub fn into_inner(self) -> O {
        self.inner
    }
}

impl<O: RolloutOracle> RolloutOracle for BudgetedOracle<O> {
    fn rollout(&mut self, ids: &[ItemId], k: usize, rng: &mut dyn RngCore) -> Result<Vec<Outcome>> {
        let fit = if k == 0 { ids.len() } else { (self.remaining() / k as u64).min(ids.len() as u64) as usize };
        self.inner.rollout(&ids[..fit], k, rng)
    }

    fn rollouts_spent(&self) -> u64 {
        self.inner.rollouts_spent()
    }
}
