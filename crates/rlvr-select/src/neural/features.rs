//! Where the neural selectors find the feature vector (task identifier or prompt embedding) of
//! an id: the candidates' own features, an optional dense table given by the caller, or the
//! features remembered from the latest selection (so `observe` and `predict` work with the
//! feature-less outcomes and candidate lists that trainers such as [`crate::sim::run`] pass).

use crate::error::{Result, SelectError};
use crate::types::{Candidates, ItemId, Outcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Feature lookup for one selector. The table is configuration, not state: it is not saved.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct FeatureMemory {
    /// Feature dimension the model was built for.
    pub(crate) dim: usize,
    /// Features of the ids of the latest selection.
    pub(crate) recent: BTreeMap<ItemId, Vec<f32>>,
    /// Optional dense table: row `i` = id `i`.
    #[serde(skip)]
    pub(crate) table: Option<std::sync::Arc<Vec<f32>>>,
}

impl FeatureMemory {
    pub(crate) fn new(dim: usize) -> Self {
        Self { dim, recent: BTreeMap::new(), table: None }
    }

    /// Attaches a dense table (`n * dim` floats, finite).
    pub(crate) fn set_table(&mut self, table: Vec<f32>) -> Result<()> {
        if self.dim == 0 || table.len() % self.dim != 0 {
            return Err(SelectError::Features(format!(
                "a feature table must hold n * {} floats, got {}",
                self.dim,
                table.len()
            )));
        }
        if let Some(i) = table.iter().position(|x| !x.is_finite()) {
            return Err(SelectError::Features(format!("table value {i} is {}", table[i])));
        }
        self.table = Some(std::sync::Arc::new(table));
        Ok(())
    }

    fn table_row(&self, id: ItemId) -> Option<&[f32]> {
        let t = self.table.as_ref()?;
        let i = usize::try_from(id).ok()?;
        t.get(i.checked_mul(self.dim)?..(i + 1).checked_mul(self.dim)?)
    }

    fn lookup(&self, id: ItemId) -> Option<&[f32]> {
        self.recent.get(&id).map(Vec::as_slice).or_else(|| self.table_row(id))
    }

    /// Row-major features of every candidate (their own, else table, else remembered).
    pub(crate) fn gather_candidates(&self, c: &Candidates<'_>) -> Result<Vec<f32>> {
        if c.feature_dim() != 0 {
            if c.feature_dim() != self.dim {
                return Err(SelectError::Features(format!(
                    "candidates carry {} features, the model was built for {}",
                    c.feature_dim(),
                    self.dim
                )));
            }
            let mut out = Vec::with_capacity(c.len() * self.dim);
            for p in 0..c.len() {
                out.extend_from_slice(c.features_of(p).unwrap_or(&[]));
            }
            return Ok(out);
        }
        let mut out = Vec::with_capacity(c.len() * self.dim);
        for &id in c.ids() {
            let f = self.lookup(id).ok_or_else(|| missing(id))?;
            out.extend_from_slice(f);
        }
        Ok(out)
    }

    /// Row-major features of every outcome (its own, else remembered, else table).
    pub(crate) fn gather_outcomes(&self, outcomes: &[Outcome]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(outcomes.len() * self.dim);
        for o in outcomes {
            match &o.features {
                Some(f) => {
                    if f.len() != self.dim {
                        return Err(SelectError::Features(format!(
                            "outcome {} carries {} features, the model was built for {}",
                            o.id,
                            f.len(),
                            self.dim
                        )));
                    }
                    if let Some(x) = f.iter().find(|x| !x.is_finite()) {
                        return Err(SelectError::Features(format!("outcome {} has feature {x}", o.id)));
                    }
                    out.extend_from_slice(f);
                }
                None => out.extend_from_slice(self.lookup(o.id).ok_or_else(|| missing(o.id))?),
            }
        }
        Ok(out)
    }

    /// Remembers the features of the selected positions.
    pub(crate) fn remember(&mut self, ids: &[ItemId], features: &[f32], chosen: &[usize]) {
        self.recent.clear();
        for &p in chosen {
            self.recent.insert(ids[p], features[p * self.dim..(p + 1) * self.dim].to_vec());
        }
    }
}

fn missing(id: ItemId) -> SelectError {
    SelectError::Features(format!(
        "no features for id {id}: pass them with the candidates or the outcome, or attach a feature table"
    ))
}

/// The success rate of a group after checking its rewards.
pub(crate) fn success_rate(o: &Outcome) -> Result<f64> {
    if o.rewards.is_empty() {
        return Err(SelectError::EmptyGroup { id: o.id });
    }
    for (index, &value) in o.rewards.iter().enumerate() {
        if !value.is_finite() {
            return Err(SelectError::NonFiniteReward { id: o.id, index, value });
        }
        if !(0.0..=1.0).contains(&value) {
            return Err(SelectError::RewardOutOfRange { id: o.id, index, value });
        }
    }
    Ok(o.success_rate())
}
