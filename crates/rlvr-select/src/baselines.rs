//! Baselines without a predictive model: uniform sampling and history resampling.

use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{check_select_args, validate_outcomes, Candidates, ItemId, Outcome, Selection, SolveState};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Uniform sampling (US / ERM / "Random"): `B` candidates uniformly without replacement.
/// With the [`crate::EpochWindow`] source at ratio 1 this is the plain shuffled dataloader.
///
/// # Example
/// ```
/// use rlvr_select::{Candidates, NoRollouts, Selector, Uniform};
/// let mut rng = rl_core::rng_from_seed(0);
/// let ids: Vec<u64> = (0..10).collect();
/// let sel = Uniform::new().select(0, Candidates::new(&ids), 4, &mut NoRollouts, &mut rng)?;
/// assert_eq!(sel.ids.len(), 4);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uniform {
    #[serde(skip)]
    scratch: Vec<u64>,
}

impl Uniform {
    /// A uniform selector (stateless).
    pub fn new() -> Self {
        Self::default()
    }
}

impl Selector for Uniform {
    fn name(&self) -> &'static str {
        "uniform"
    }

    fn select(
        &mut self,
        _step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.scratch)?;
        let ids: Vec<ItemId> = rand::seq::index::sample(rng, candidates.len(), batch_size)
            .into_iter()
            .map(|p| candidates.ids()[p])
            .collect();
        Ok(Selection { scores: vec![0.0; ids.len()], ids, ..Selection::default() })
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
        validate_outcomes(outcomes, None, &mut self.scratch).map(|_| ())
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(self)?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        *self = serde_json::from_value(state.clone())?;
        Ok(())
    }
}

/// Parameters of [`HistoryResampling`].
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `epoch_steps` | none | steps per epoch; the solved set is cleared at each epoch boundary (none: call [`HistoryResampling::new_epoch`]) | `>= 1` |
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryResamplingParams {
    /// Steps per epoch (`step / epoch_steps` is the epoch index); `None` = manual epochs.
    pub epoch_steps: Option<u64>,
}

impl HistoryResamplingParams {
    /// Sets `epoch_steps`.
    #[must_use]
    pub fn epoch_steps(mut self, epoch_steps: Option<u64>) -> Self {
        self.epoch_steps = epoch_steps;
        self
    }
}

impl Params for HistoryResamplingParams {
    type Error = SelectError;

    /// # Errors
    /// `epoch_steps == Some(0)`.
    fn validate(&self) -> Result<()> {
        if self.epoch_steps == Some(0) {
            return Err(invalid("epoch_steps", 0, "an epoch must last at least one step"));
        }
        Ok(())
    }
}

/// History resampling (HR, the DPS paper's baseline): within an epoch, prompts whose group was
/// all-correct earlier in the epoch are excluded; the batch is drawn uniformly from the rest.
/// When fewer than `B` candidates remain eligible the batch is topped up uniformly from the
/// excluded ones (no rollouts are spent, so it never returns short).
#[derive(Debug, Clone)]
pub struct HistoryResampling {
    params: Valid<HistoryResamplingParams>,
    epoch: u64,
    solved: BTreeSet<ItemId>,
    scratch: Vec<u64>,
}

/// The saved state of a [`HistoryResampling`].
#[derive(Serialize)]
struct HistoryStateRef<'a> {
    params: &'a HistoryResamplingParams,
    epoch: u64,
    solved: &'a BTreeSet<ItemId>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryState {
    params: Valid<HistoryResamplingParams>,
    epoch: u64,
    solved: BTreeSet<ItemId>,
}

impl HistoryResampling {
    /// A history-resampling selector.
    ///
    /// # Errors
    /// None today (the parameters are checked); fallible like every constructor.
    pub fn new(params: Valid<HistoryResamplingParams>) -> Result<Self> {
        Ok(Self { params, epoch: 0, solved: BTreeSet::new(), scratch: Vec::new() })
    }

    /// Starts a new epoch now (clears the solved set).
    pub fn new_epoch(&mut self) {
        self.epoch += 1;
        self.solved.clear();
    }

    /// Prompts excluded in the current epoch.
    pub fn solved_this_epoch(&self) -> usize {
        self.solved.len()
    }

    fn sync_epoch(&mut self, step: u64) {
        if let Some(e) = self.params.epoch_steps {
            let epoch = step / e;
            if epoch != self.epoch {
                self.epoch = epoch;
                self.solved.clear();
            }
        }
    }
}

impl Selector for HistoryResampling {
    fn name(&self) -> &'static str {
        "history-resampling"
    }

    fn select(
        &mut self,
        step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.scratch)?;
        self.sync_epoch(step);
        let (eligible, excluded): (Vec<ItemId>, Vec<ItemId>) =
            candidates.ids().iter().partition(|id| !self.solved.contains(id));
        let mut ids: Vec<ItemId>;
        if eligible.len() >= batch_size {
            ids = rand::seq::index::sample(rng, eligible.len(), batch_size).into_iter().map(|p| eligible[p]).collect();
        } else {
            ids = eligible;
            let need = batch_size - ids.len();
            ids.extend(rand::seq::index::sample(rng, excluded.len(), need).into_iter().map(|p| excluded[p]));
        }
        Ok(Selection { scores: vec![0.0; ids.len()], ids, ..Selection::default() })
    }

    fn observe(&mut self, step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
        validate_outcomes(outcomes, None, &mut self.scratch)?;
        self.sync_epoch(step);
        for o in outcomes {
            if o.state() == SolveState::Solved {
                self.solved.insert(o.id);
            }
        }
        Ok(())
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(HistoryStateRef { params: &self.params, epoch: self.epoch, solved: &self.solved })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: HistoryState = serde_json::from_value(state.clone())?;
        *self = Self { params: s.params, epoch: s.epoch, solved: s.solved, scratch: Vec::new() };
        Ok(())
    }
}
