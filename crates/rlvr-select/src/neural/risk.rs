//! Pieces shared by MPTS and PDTS: the risk a group's rewards stand for, and the learner plus
//! feature memory both selectors wrap.

use super::features::FeatureMemory;
use super::learner::{RiskLearner, RiskLearnerParams, RiskLearnerState};
use crate::error::{Result, SelectError};
use crate::types::{Candidates, Outcome};
use rand::RngCore;
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

impl RiskCore {
    pub(crate) fn new(feature_dim: usize, params: RiskLearnerParams, seed: u64) -> Result<Self> {
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
