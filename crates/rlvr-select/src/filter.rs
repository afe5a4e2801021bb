//! Rollout-based filters: DAPO dynamic sampling and online difficulty filtering. Both roll out
//! candidates through the [`RolloutOracle`] in generation batches, keep the groups that pass
//! their filter, and hand the kept groups to the trainer as [`Selection::prefetched`].

use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{check_select_args, validate_outcomes, Candidates, Outcome, Selection, Shortfall};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// Parameters shared by [`DynamicSampling`] and [`OnlineDifficultyFilter`]. `Default` is DAPO
/// dynamic sampling's ([`FilterParams::dynamic_sampling`]); online difficulty filtering starts
/// from [`FilterParams::online_difficulty`]. A config file may give any subset of the fields
/// (the others take the defaults below); a misspelt field is an error.
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `group_size` | 8 | rollouts per prompt `k` (all papers) | `>= 2` |
/// | `gen_batch` | none (= `B`) | prompts rolled out per generation batch (`B_gen = B` in the recipes) | `>= 1` |
/// | `max_gen_batches` | 10 | cap on generation batches per step (DAPO/verl; the MATH recipes use 4); 0 = no cap | |
/// | `p_lo`, `p_hi` | 0, 1 (ODF: 0.25, 0.75) | keep groups whose success rate lies in the band | `0 <= p_lo <= p_hi <= 1` |
/// | `strict` | true (ODF: false) | band is open (`p_lo < p < p_hi`) instead of closed | |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterParams {
    /// Rollouts per prompt.
    pub group_size: usize,
    /// Prompts per generation batch; `None` = the training batch size.
    pub gen_batch: Option<usize>,
    /// Generation batches per step before giving up and returning what was kept; 0 = no cap.
    pub max_gen_batches: usize,
    /// Lower end of the success-rate band.
    pub p_lo: f64,
    /// Upper end of the success-rate band.
    pub p_hi: f64,
    /// Open band (`p_lo < p < p_hi`) when true, closed otherwise.
    pub strict: bool,
}

impl FilterParams {
    /// DAPO dynamic sampling's defaults: keep `0 < p < 1` (reward std > 0), `k = 8`,
    /// `B_gen = B`, at most 10 generation batches.
    pub fn dynamic_sampling() -> Self {
        Self { group_size: 8, gen_batch: None, max_gen_batches: 10, p_lo: 0.0, p_hi: 1.0, strict: true }
    }

    /// Online difficulty filtering's defaults: keep `0.25 <= p <= 0.75` (our choice of band; the
    /// paper's values were not retrieved), otherwise as dynamic sampling.
    pub fn online_difficulty() -> Self {
        Self { p_lo: 0.25, p_hi: 0.75, strict: false, ..Self::dynamic_sampling() }
    }

    /// Sets `group_size`.
    #[must_use]
    pub fn group_size(mut self, k: usize) -> Self {
        self.group_size = k;
        self
    }

    /// Sets `gen_batch`.
    #[must_use]
    pub fn gen_batch(mut self, gen_batch: Option<usize>) -> Self {
        self.gen_batch = gen_batch;
        self
    }

    /// Sets `max_gen_batches`.
    #[must_use]
    pub fn max_gen_batches(mut self, max_gen_batches: usize) -> Self {
        self.max_gen_batches = max_gen_batches;
        self
    }

    /// Sets the band `[p_lo, p_hi]` (open when `strict`).
    #[must_use]
    pub fn band(mut self, p_lo: f64, p_hi: f64, strict: bool) -> Self {
        self.p_lo = p_lo;
        self.p_hi = p_hi;
        self.strict = strict;
        self
    }

    pub(crate) fn keeps(&self, o: &Outcome) -> bool {
        let p = o.success_rate();
        if self.strict {
            // DAPO keeps std > 0; for rewards in [0, 1] with band (0, 1) that is "not all equal".
            if self.p_lo <= 0.0 && self.p_hi >= 1.0 {
                return !o.is_degenerate();
            }
            p > self.p_lo && p < self.p_hi
        } else {
            p >= self.p_lo && p <= self.p_hi
        }
    }
}

impl Default for FilterParams {
    /// [`FilterParams::dynamic_sampling`].
    fn default() -> Self {
        Self::dynamic_sampling()
    }
}

impl Params for FilterParams {
    type Error = SelectError;

    /// # Errors
    /// `group_size < 2`, `gen_batch == Some(0)`, or a band outside `[0, 1]` / empty.
    fn validate(&self) -> Result<()> {
        if self.group_size < 2 {
            return Err(invalid("group_size", self.group_size, "a group needs at least 2 rollouts to have variance"));
        }
        if self.gen_batch == Some(0) {
            return Err(invalid("gen_batch", 0, "a generation batch needs at least one prompt"));
        }
        if !(0.0..=1.0).contains(&self.p_lo) {
            return Err(invalid("p_lo", self.p_lo, "must lie in [0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.p_hi) || self.p_lo > self.p_hi {
            return Err(invalid("p_hi", self.p_hi, "need p_lo <= p_hi <= 1"));
        }
        Ok(())
    }
}

/// The shared generate-and-filter loop.
fn generate_and_filter(
    who: &'static str,
    params: &FilterParams,
    candidates: Candidates<'_>,
    batch_size: usize,
    oracle: &mut dyn RolloutOracle,
    rng: &mut dyn RngCore,
    scratch: &mut Vec<u64>,
) -> Result<Selection> {
    let start = oracle.rollouts_spent();
    let gen = params.gen_batch.unwrap_or(batch_size);
    let mut kept: Vec<Outcome> = Vec::with_capacity(batch_size);
    let mut batches = 0usize;
    let mut pos = 0usize;
    let mut shortfall = None;
    while kept.len() < batch_size {
        if params.max_gen_batches > 0 && batches >= params.max_gen_batches {
            shortfall = Some(Shortfall::GenerationCap { batches });
            break;
        }
        if pos >= candidates.len() {
            shortfall = Some(Shortfall::CandidatesExhausted);
            break;
        }
        let end = (pos + gen).min(candidates.len());
        let ids = &candidates.ids()[pos..end];
        let got = match oracle.rollout(ids, params.group_size, rng) {
            Err(SelectError::OracleUnavailable { .. }) => return Err(SelectError::OracleUnavailable { selector: who }),
            other => other?,
        };
        for (o, &id) in got.iter().zip(ids) {
            if o.id != id {
                return Err(SelectError::OracleMismatch { expected: id, got: o.id });
            }
        }
        if got.len() > ids.len() {
            return Err(SelectError::InvalidState(format!(
                "oracle returned {} groups for {} ids",
                got.len(),
                ids.len()
            )));
        }
        validate_outcomes(&got, None, scratch)?;
        if let Some(o) = got.iter().find(|o| o.k() != params.group_size) {
            return Err(SelectError::GroupSizeMismatch { id: o.id, expected: params.group_size, got: o.k() });
        }
        let dry = got.len() < ids.len();
        batches += 1;
        pos = end;
        kept.extend(got.into_iter().filter(|o| params.keeps(o)));
        if dry {
            if kept.len() < batch_size {
                shortfall = Some(Shortfall::OracleDry);
            }
            break;
        }
    }
    kept.truncate(batch_size);
    let ids = kept.iter().map(|o| o.id).collect();
    let scores = kept.iter().map(Outcome::success_rate).collect();
    Ok(Selection {
        ids,
        scores,
        weights: None,
        prefetched: kept,
        selection_rollouts: oracle.rollouts_spent().saturating_sub(start),
        shortfall,
    })
}

/// The saved state of a filter selector (its parameters; the filters keep nothing else).
#[derive(Serialize)]
struct FilterState {
    params: FilterParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckedFilterState {
    params: Valid<FilterParams>,
}

macro_rules! filter_selector {
    ($(#[$doc:meta])* $name:ident, $label:literal, $default:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            params: Valid<FilterParams>,
            scratch: Vec<u64>,
        }

        impl $name {
            /// A selector with `params` (see [`FilterParams`]; presets
            #[doc = concat!("[`FilterParams::", stringify!($default), "`]).")]
            ///
            /// # Errors
            /// None today (the parameters are checked); fallible like every constructor.
            pub fn new(params: Valid<FilterParams>) -> Result<Self> {
                Ok(Self { params, scratch: Vec::new() })
            }

            /// The parameters.
            pub fn params(&self) -> &FilterParams {
                &self.params
            }
        }

        impl Selector for $name {
            fn name(&self) -> &'static str {
                $label
            }

            fn select(
                &mut self,
                _step: u64,
                candidates: Candidates<'_>,
                batch_size: usize,
                oracle: &mut dyn RolloutOracle,
                rng: &mut dyn RngCore,
            ) -> Result<Selection> {
                check_select_args(&candidates, batch_size, &mut self.scratch)?;
                generate_and_filter($label, &self.params, candidates, batch_size, oracle, rng, &mut self.scratch)
            }

            fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
                validate_outcomes(outcomes, None, &mut self.scratch).map(|_| ())
            }

            fn save_state(&self) -> Result<serde_json::Value> {
                Ok(serde_json::to_value(FilterState { params: *self.params })?)
            }

            fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
                let s: CheckedFilterState = serde_json::from_value(state.clone())?;
                self.params = s.params;
                Ok(())
            }
        }
    };
}

filter_selector!(
    /// DAPO dynamic sampling (DS): roll out generation batches of candidates (in the order
    /// given), keep the groups with non-zero reward variance (`0 < p < 1`), stop when `B` are
    /// kept or at `max_gen_batches`, and truncate to `B`. The filtering rollouts *are* the
    /// training rollouts ([`Selection::prefetched`]). It never aborts: at its cap, when the
    /// candidates run out or the oracle runs dry it returns what it kept and sets
    /// [`Selection::shortfall`]. Give it `max_gen_batches · B` candidates.
    ///
    /// Reference: Yu et al., "DAPO" (2025), as used by the DPS/MoPPS recipes
    /// (`our_ray_trainer.py`).
    DynamicSampling,
    "dynamic-sampling",
    dynamic_sampling
);

filter_selector!(
    /// Online difficulty filtering (ODF, Bae et al. 2025, "balanced filtering"): as
    /// [`DynamicSampling`] with the band `p_lo <= p <= p_hi` on the measured pass rate
    /// (default `[0.25, 0.75]`, configurable).
    OnlineDifficultyFilter,
    "online-difficulty-filter",
    online_difficulty
);
