//! Pieces shared by MPTS and PDTS: the risk a group's rewards stand for, the learner plus
//! feature memory both selectors wrap, their common parameters, selection skeleton and state.

use super::features::FeatureMemory;
use super::learner::{RiskLearner, RiskLearnerParams, RiskLearnerState};
use crate::error::{invalid, nested, Result, SelectError};
use crate::types::{check_select_args, Candidates, ItemId, Outcome, Selection};
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use crate::robust::RiskFromRewards;

/// Learner + feature memory.
#[derive(Debug)]
pub(crate) struct RiskCore {
    pub(crate) learner: RiskLearner,
    pub(crate) features: FeatureMemory,
    pub(crate) scratch: Vec<u64>,
}

/// Serialised [`RiskCore`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RiskCoreState {
    pub(crate) learner: RiskLearnerState,
    pub(crate) features: FeatureMemory,
}

/// The parameters MPTS and PDTS share (each has these fields under the same names).
pub(crate) trait RiskSelectorParams: Params<Error = SelectError> + Copy + Serialize + DeserializeOwned {
    fn learner(&self) -> RiskLearnerParams;
    fn random_ratio(&self) -> f64;
    fn warmup_steps(&self) -> u64;
    /// Latent draws behind `predict`.
    fn predict_samples(&self) -> usize;
}

/// Checks the shared fields: the learner (as `learner.<field>`) and `random_ratio`.
pub(crate) fn validate_common(learner: &RiskLearnerParams, random_ratio: f64) -> Result<()> {
    learner.validate().map_err(|e| nested("learner", e))?;
    if !(0.0..=1.0).contains(&random_ratio) {
        return Err(invalid("random_ratio", random_ratio, "must lie in [0, 1]"));
    }
    Ok(())
}

/// Positions of `b` uniform picks among `n`, excluding `taken`.
pub(crate) fn fill_uniform(n: usize, taken: &[usize], b: usize, rng: &mut dyn RngCore) -> Vec<usize> {
    let mut mask = vec![false; n];
    for &t in taken {
        mask[t] = true;
    }
    let rest: Vec<usize> = (0..n).filter(|&i| !mask[i]).collect();
    let b = b.min(rest.len());
    rand::seq::index::sample(rng, rest.len(), b).into_iter().map(|j| rest[j]).collect()
}

/// The saved state of MPTS / PDTS.
#[derive(Serialize)]
struct RiskSelectorStateRef<'a, P> {
    params: &'a P,
    core: RiskCoreState,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RiskSelectorState<P> {
    params: P,
    core: RiskCoreState,
}

impl RiskCore {
    pub(crate) fn new(feature_dim: usize, params: Valid<RiskLearnerParams>, seed: u64) -> Result<Self> {
        Ok(Self {
            learner: RiskLearner::new(feature_dim, params, seed)?,
            features: FeatureMemory::new(feature_dim),
            scratch: Vec::new(),
        })
    }

    pub(crate) fn observe(&mut self, outcomes: &[Outcome], mode: RiskFromRewards, rng: &mut dyn RngCore) -> Result<()> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let y: Vec<f32> = crate::robust::risks(outcomes, mode)?.into_iter().map(|v| v as f32).collect();
        let x = self.features.gather_outcomes(outcomes)?;
        self.learner.update(&x, &y, rng)?;
        Ok(())
    }

    /// Mean/std predictions with a generator derived from `seed` and the update count (so
    /// `predict` needs no RNG and does not change the state).
    pub(crate) fn predict(&self, c: &Candidates<'_>, m: usize, seed: u64) -> Result<Vec<crate::Prediction>> {
        let x = self.features.gather_candidates(c)?;
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(seed ^ 0x5052_4544, self.learner.updates()));
        let (mean, std) = self.learner.predict(&x, m, &mut rng)?;
        Ok(mean
            .iter()
            .zip(&std)
            .map(|(&m, &s)| crate::Prediction { mean: f64::from(m), std: Some(f64::from(s)), class_probs: None })
            .collect())
    }

    /// The selection skeleton of MPTS and PDTS: uniform picks while `step < warmup_steps`;
    /// otherwise `pick(core, features, b)` chooses `b = B − round(random_ratio · B)` positions
    /// (and scores every candidate), and the rest of the batch is drawn uniformly from the
    /// candidates not picked. The chosen candidates' features are remembered for `observe`.
    pub(crate) fn select_with<P: RiskSelectorParams>(
        &mut self,
        params: &P,
        step: u64,
        candidates: &Candidates<'_>,
        batch_size: usize,
        rng: &mut dyn RngCore,
        pick: impl FnOnce(&RiskCore, &[f32], usize, &mut dyn RngCore) -> Result<(Vec<usize>, Vec<f64>)>,
    ) -> Result<Selection> {
        check_select_args(candidates, batch_size, &mut self.scratch)?;
        let feats = self.features.gather_candidates(candidates)?;
        let n = candidates.len();
        let (chosen, scores): (Vec<usize>, Vec<f64>) = if step < params.warmup_steps() {
            (rand::seq::index::sample(rng, n, batch_size).into_vec(), vec![0.0; n])
        } else {
            let n_random = ((params.random_ratio() * batch_size as f64).round() as usize).min(batch_size);
            let (mut chosen, scores) = pick(self, &feats, batch_size - n_random, rng)?;
            let fill = fill_uniform(n, &chosen, n_random, rng);
            chosen.extend(fill);
            (chosen, scores)
        };
        let ids: Vec<ItemId> = chosen.iter().map(|&p| candidates.ids()[p]).collect();
        self.features.remember(candidates.ids(), &feats, &chosen);
        Ok(Selection { scores: chosen.iter().map(|&p| scores[p]).collect(), ids, ..Selection::default() })
    }

    /// `save_state` of MPTS / PDTS.
    pub(crate) fn save_with<P: RiskSelectorParams>(&self, params: &P) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(RiskSelectorStateRef { params, core: self.state()? })?)
    }

    /// `load_state` of MPTS / PDTS: the parameters are checked, the learner's must equal
    /// `params.learner`, and the core is rebuilt from its state (the feature table is kept).
    pub(crate) fn load_with<P: RiskSelectorParams>(
        &self,
        state: &serde_json::Value,
        who: &str,
    ) -> Result<(Valid<P>, RiskCore)> {
        let s: RiskSelectorState<P> = serde_json::from_value(state.clone())?;
        let params = s.params.check()?;
        if s.core.learner.params != params.learner() {
            return Err(SelectError::InvalidState(format!("learner parameters differ from the {who} parameters")));
        }
        Ok((params, self.restore(s.core)?))
    }

    pub(crate) fn state(&self) -> Result<RiskCoreState> {
        Ok(RiskCoreState { learner: self.learner.state()?, features: self.features.clone() })
    }

    pub(crate) fn restore(&self, s: RiskCoreState) -> Result<Self> {
        if s.features.dim != s.learner.x_dim {
            return Err(SelectError::InvalidState(format!(
                "feature dim {} does not match the learner's x_dim {}",
                s.features.dim, s.learner.x_dim
            )));
        }
        if s.features.recent.values().any(|f| f.len() != s.features.dim || f.iter().any(|x| !x.is_finite())) {
            return Err(SelectError::InvalidState(
                "remembered features have the wrong length or are not finite".into(),
            ));
        }
        let learner = RiskLearner::from_state(&s.learner)?;
        let mut features = s.features;
        features.table.clone_from(&self.features.table);
        Ok(Self { learner, features, scratch: Vec::new() })
    }
}

/// `new`, `with_feature_table`, `params`, `learner` and the [`crate::Selector`] glue of MPTS and
/// PDTS, which differ only in how they pick (`select_impl`).
macro_rules! risk_selector {
    ($ty:ident, $params:ident, $name:literal, $who:literal) => {
        impl $ty {
            /// A selector for `feature_dim`-dimensional task identifiers, initial weights drawn
            /// from the parameters' seed.
            ///
            /// # Errors
            /// `feature_dim` outside `1..=2^20`.
            pub fn new(params: Valid<$params>, feature_dim: usize) -> Result<Self> {
                let learner = params.learner.check()?;
                Ok(Self { core: RiskCore::new(feature_dim, learner, params.seed)?, params })
            }

            /// Attaches a feature table (row `i` = features of id `i`), used for ids whose
            /// features are not passed. Not part of the saved state.
            ///
            /// # Errors
            /// A table whose length is not a multiple of the feature dimension, or non-finite
            /// values.
            pub fn with_feature_table(mut self, table: Vec<f32>) -> Result<Self> {
                self.core.features.set_table(table)?;
                Ok(self)
            }

            /// The parameters.
            pub fn params(&self) -> &$params {
                &self.params
            }

            /// The risk learner.
            pub fn learner(&self) -> &RiskLearner {
                &self.core.learner
            }
        }

        impl Selector for $ty {
            fn name(&self) -> &'static str {
                $name
            }

            fn select(
                &mut self,
                step: u64,
                candidates: Candidates<'_>,
                batch_size: usize,
                _oracle: &mut dyn RolloutOracle,
                rng: &mut dyn RngCore,
            ) -> Result<Selection> {
                self.select_impl(step, &candidates, batch_size, rng)
            }

            fn observe(&mut self, _step: u64, outcomes: &[Outcome], rng: &mut dyn RngCore) -> Result<()> {
                self.core.observe(outcomes, self.params.risk_from_rewards, rng)
            }

            fn predict(&self, candidates: Candidates<'_>) -> Result<Option<Vec<Prediction>>> {
                let m = RiskSelectorParams::predict_samples(self.params.get());
                self.core.predict(&candidates, m, self.params.seed).map(Some)
            }

            fn save_state(&self) -> Result<serde_json::Value> {
                self.core.save_with(self.params.get())
            }

            fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
                let (params, core) = self.core.load_with::<$params>(state, $who)?;
                self.params = params;
                self.core = core;
                Ok(())
            }
        }
    };
}
pub(crate) use risk_selector;
