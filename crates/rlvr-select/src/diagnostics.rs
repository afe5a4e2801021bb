//! Selection diagnostics: effective-sample ratio, rollout accounting, predicted-vs-realised
//! correlations, the DPS confusion matrix and per-prompt selection-count spread.

use crate::types::{ItemId, Outcome, Prediction, Selection};
use rl_core::stats::{pearson, spearman};
use rl_core::Metrics;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Diagnostics of one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepDiagnostics {
    /// Groups trained on.
    pub trained: usize,
    /// Of which non-degenerate (`0 < s < k`: non-zero group-relative advantage).
    pub effective: usize,
    /// Effective-sample ratio `effective / trained` (0 for an empty batch).
    pub esr: f64,
    /// Rollouts generated inside `select`.
    pub selection_rollouts: u64,
    /// Rollouts generated for training after `select` (prefetched groups excluded).
    pub training_rollouts: u64,
    /// Spearman correlation of predicted vs realised success rate over the batch.
    pub spearman: Option<f64>,
    /// Pearson correlation of predicted vs realised success rate over the batch.
    pub pearson: Option<f64>,
}

/// Accumulated diagnostics of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiagnosticsSummary {
    /// Steps recorded.
    pub steps: u64,
    /// Groups trained on.
    pub trained: u64,
    /// Non-degenerate groups trained on.
    pub effective: u64,
    /// Pooled effective-sample ratio `effective / trained`.
    pub esr: f64,
    /// Rollouts generated inside selection.
    pub selection_rollouts: u64,
    /// Rollouts generated for training.
    pub training_rollouts: u64,
    /// Mean over steps of the per-batch Spearman correlation (steps where it is defined).
    pub spearman_mean: Option<f64>,
    /// Mean over steps of the per-batch Pearson correlation.
    pub pearson_mean: Option<f64>,
    /// DPS confusion matrix `[realised][predicted]` (argmax of the predicted class
    /// probabilities; states unsolved, partial, solved).
    pub confusion: [[u64; 3]; 3],
    /// Accuracy of the predicted class (`None` without class predictions).
    pub class_accuracy: Option<f64>,
    /// Precision of the "partial" class.
    pub class2_precision: Option<f64>,
    /// Recall of the "partial" class.
    pub class2_recall: Option<f64>,
    /// Mean selections per prompt of the pool.
    pub count_mean: f64,
    /// Standard deviation of selections per prompt.
    pub count_std: f64,
    /// Fewest selections of a prompt of the pool.
    pub count_min: u64,
    /// Most selections of a prompt of the pool.
    pub count_max: u64,
}

impl DiagnosticsSummary {
    /// Total rollouts (selection + training).
    pub fn total_rollouts(&self) -> u64 {
        self.selection_rollouts + self.training_rollouts
    }

    /// As named scalars (`esr`, `rollouts/selection`, `corr/spearman`, `dps/class2_precision`, ...).
    pub fn to_metrics(&self) -> Metrics {
        let mut m = Metrics::new()
            .with("steps", self.steps as f64)
            .with("esr", self.esr)
            .with("rollouts/selection", self.selection_rollouts as f64)
            .with("rollouts/training", self.training_rollouts as f64)
            .with("rollouts/total", self.total_rollouts() as f64)
            .with("counts/mean", self.count_mean)
            .with("counts/std", self.count_std)
            .with("counts/min", self.count_min as f64)
            .with("counts/max", self.count_max as f64);
        for (name, v) in [
            ("corr/spearman", self.spearman_mean),
            ("corr/pearson", self.pearson_mean),
            ("dps/accuracy", self.class_accuracy),
            ("dps/class2_precision", self.class2_precision),
            ("dps/class2_recall", self.class2_recall),
        ] {
            if let Some(v) = v {
                m.insert(name, v);
            }
        }
        m
    }
}

/// Accumulates [`StepDiagnostics`] over a run on a pool of `n_items` prompts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Diagnostics {
    counts: Vec<u64>,
    summary: DiagnosticsSummary,
    spearman_sum: f64,
    spearman_n: u64,
    pearson_sum: f64,
    pearson_n: u64,
}

impl Diagnostics {
    /// Diagnostics for the pool `0..n_items` (ids outside it are not counted in the spread).
    pub fn new(n_items: usize) -> Self {
        Self {
            counts: vec![0; n_items],
            summary: DiagnosticsSummary::default(),
            spearman_sum: 0.0,
            spearman_n: 0,
            pearson_sum: 0.0,
            pearson_n: 0,
        }
    }

    /// Records one step: the selection, the groups trained on (prefetched ones included) and
    /// the predictions made for `selection.ids` (same order) before the rollouts.
    pub fn record(
        &mut self,
        selection: &Selection,
        outcomes: &[Outcome],
        predictions: Option<&[Prediction]>,
    ) -> StepDiagnostics {
        let prefetched: std::collections::HashSet<ItemId> = selection.prefetched.iter().map(|o| o.id).collect();
        let training_rollouts: u64 =
            outcomes.iter().filter(|o| !prefetched.contains(&o.id)).map(|o| o.k() as u64).sum();
        let effective = outcomes.iter().filter(|o| !o.is_degenerate()).count();
        for o in outcomes {
            if let Some(c) = self.counts.get_mut(o.id as usize) {
                *c += 1;
            }
        }
        let (mut sp, mut pe) = (None, None);
        if let Some(preds) = predictions {
            let by_id: HashMap<ItemId, &Prediction> = selection.ids.iter().copied().zip(preds.iter()).collect();
            let mut xs = Vec::with_capacity(outcomes.len());
            let mut ys = Vec::with_capacity(outcomes.len());
            for o in outcomes {
                if let Some(p) = by_id.get(&o.id) {
                    xs.push(p.mean);
                    ys.push(o.success_rate());
                    if let Some(cp) = p.class_probs {
                        let mut arg = 0;
                        for c in 1..3 {
                            if cp[c] > cp[arg] {
                                arg = c;
                            }
                        }
                        self.summary.confusion[o.state().index()][arg] += 1;
                    }
                }
            }
            sp = spearman(&xs, &ys);
            pe = pearson(&xs, &ys);
        }
        if let Some(s) = sp {
            self.spearman_sum += s;
            self.spearman_n += 1;
        }
        if let Some(p) = pe {
            self.pearson_sum += p;
            self.pearson_n += 1;
        }
        let s = &mut self.summary;
        s.steps += 1;
        s.trained += outcomes.len() as u64;
        s.effective += effective as u64;
        s.selection_rollouts += selection.selection_rollouts;
        s.training_rollouts += training_rollouts;
        StepDiagnostics {
            trained: outcomes.len(),
            effective,
            esr: if outcomes.is_empty() { 0.0 } else { effective as f64 / outcomes.len() as f64 },
            selection_rollouts: selection.selection_rollouts,
            training_rollouts,
            spearman: sp,
            pearson: pe,
        }
    }

    /// The summary so far.
    pub fn summary(&self) -> DiagnosticsSummary {
        let mut s = self.summary.clone();
        s.esr = if s.trained == 0 { 0.0 } else { s.effective as f64 / s.trained as f64 };
        s.spearman_mean = (self.spearman_n > 0).then(|| self.spearman_sum / self.spearman_n as f64);
        s.pearson_mean = (self.pearson_n > 0).then(|| self.pearson_sum / self.pearson_n as f64);
        let c = &s.confusion;
        let total: u64 = c.iter().flatten().sum();
        if total > 0 {
            s.class_accuracy = Some((c[0][0] + c[1][1] + c[2][2]) as f64 / total as f64);
            let pred2: u64 = (0..3).map(|r| c[r][1]).sum();
            let real2: u64 = c[1].iter().sum();
            s.class2_precision = (pred2 > 0).then(|| c[1][1] as f64 / pred2 as f64);
            s.class2_recall = (real2 > 0).then(|| c[1][1] as f64 / real2 as f64);
        }
        if !self.counts.is_empty() {
            let n = self.counts.len() as f64;
            let mean = self.counts.iter().sum::<u64>() as f64 / n;
            let var = self.counts.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
            s.count_mean = mean;
            s.count_std = var.sqrt();
            s.count_min = self.counts.iter().copied().min().unwrap_or(0);
            s.count_max = self.counts.iter().copied().max().unwrap_or(0);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esr_rollouts_and_confusion() {
        let mut d = Diagnostics::new(4);
        let outcomes = vec![
            Outcome::from_successes(0, 0, 4).unwrap(),
            Outcome::from_successes(1, 2, 4).unwrap(),
            Outcome::from_successes(2, 4, 4).unwrap(),
            Outcome::from_successes(3, 1, 4).unwrap(),
        ];
        let sel = Selection {
            ids: vec![0, 1, 2, 3],
            prefetched: vec![outcomes[1].clone()],
            selection_rollouts: 12,
            ..Selection::default()
        };
        let cp = |c: [f64; 3]| Prediction { mean: 0.5 * c[1] + c[2], std: None, class_probs: Some(c) };
        let preds = [cp([0.8, 0.1, 0.1]), cp([0.1, 0.8, 0.1]), cp([0.1, 0.8, 0.1]), cp([0.6, 0.3, 0.1])];
        let step = d.record(&sel, &outcomes, Some(&preds));
        assert_eq!(step.effective, 2);
        assert_eq!(step.esr, 0.5);
        assert_eq!(step.training_rollouts, 12);
        let s = d.summary();
        assert_eq!(s.total_rollouts(), 24);
        // realised: U, P, S, P ; predicted: U, P, P, U
        assert_eq!(s.confusion, [[1, 0, 0], [1, 1, 0], [0, 1, 0]]);
        assert_eq!(s.class2_precision, Some(0.5));
        assert_eq!(s.class2_recall, Some(0.5));
        assert_eq!(s.count_min, 1);
        assert_eq!(s.count_std, 0.0);
    }

    #[test]
    fn sums_over_steps_means_and_metrics() {
        let mut d = Diagnostics::new(3);
        let o = |id, s| Outcome::from_successes(id, s, 4).unwrap();
        // step 1: ids 0 (partial) and 1 (solved); tie in class probs picks the first maximum
        let sel1 = Selection { ids: vec![0, 1], selection_rollouts: 5, ..Selection::default() };
        let tie = Prediction { mean: 0.2, std: None, class_probs: Some([0.4, 0.4, 0.2]) };
        let solved = Prediction { mean: 0.9, std: None, class_probs: Some([0.0, 0.1, 0.9]) };
        let st1 = d.record(&sel1, &[o(0, 2), o(1, 4)], Some(&[tie, solved]));
        assert_eq!((st1.trained, st1.effective, st1.training_rollouts, st1.selection_rollouts), (2, 1, 8, 5));
        assert!((st1.pearson.unwrap_or(0.0) - 1.0).abs() < 1e-12);
        // step 2: id 0 again (unsolved) and id 2 (partial), 3 rollouts each... groups of 4
        let sel2 = Selection { ids: vec![0, 2], selection_rollouts: 7, ..Selection::default() };
        let p = |m| Prediction { mean: m, std: None, class_probs: None };
        let st2 = d.record(&sel2, &[o(0, 0), o(2, 1)], Some(&[p(0.1), p(0.9)]));
        assert!((st2.spearman.unwrap_or(0.0) - 1.0).abs() < 1e-12);
        // an empty step counts, with esr 0
        let st3 = d.record(&Selection::default(), &[], None);
        assert_eq!((st3.esr, st3.spearman), (0.0, None));
        let s = d.summary();
        assert_eq!((s.steps, s.trained, s.effective), (3, 4, 2));
        assert_eq!((s.selection_rollouts, s.training_rollouts, s.total_rollouts()), (12, 16, 28));
        assert_eq!(s.esr, 0.5);
        // correlations averaged over the steps where they are defined (both +1 here; the
        // empty step has none)
        assert!((s.spearman_mean.unwrap_or(0.0) - 1.0).abs() < 1e-12);
        assert!((s.pearson_mean.unwrap_or(0.0) - 1.0).abs() < 1e-12);
        // selections per prompt: 2, 1, 1
        assert_eq!((s.count_min, s.count_max), (1, 2));
        assert!((s.count_mean - 4.0 / 3.0).abs() < 1e-12);
        assert!((s.count_std - (2.0f64 / 9.0).sqrt()).abs() < 1e-12);
        // realised partial predicted unsolved (tie -> first), solved predicted solved
        assert_eq!(s.confusion, [[0, 0, 0], [1, 0, 0], [0, 0, 1]]);
        assert_eq!((s.class_accuracy, s.class2_precision, s.class2_recall), (Some(0.5), None, Some(0.0)));
        let m = s.to_metrics();
        for (name, v) in [
            ("steps", 3.0),
            ("esr", 0.5),
            ("rollouts/selection", 12.0),
            ("rollouts/training", 16.0),
            ("rollouts/total", 28.0),
            ("counts/min", 1.0),
            ("counts/max", 2.0),
            ("dps/accuracy", 0.5),
            ("dps/class2_recall", 0.0),
        ] {
            assert_eq!(m.get(name), Some(v), "{name}");
        }
        assert!(m.get("dps/class2_precision").is_none());
        assert!((m.get("counts/mean").unwrap_or(0.0) - 4.0 / 3.0).abs() < 1e-12);
        assert!(m.get("counts/std").is_some() && m.get("corr/spearman").is_some() && m.get("corr/pearson").is_some());
        let empty = Diagnostics::new(0).summary();
        assert_eq!((empty.esr, empty.count_max, empty.class_accuracy), (0.0, 0, None));
    }
}
