//! Toy datasets for the learners' unit tests (the learners need `tch`).

use crate::bidder::STATE_DIM;
use crate::dataset::{Step, Trajectory, TrajectoryDataset};

/// What a toy step sets; the rest is fixed (budget 1, 10 impressions, no wins).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToyStep {
    pub state: [f32; STATE_DIM],
    pub action: f64,
    pub reward: f64,
    pub reward_continuous: f64,
    pub cost: f64,
}

impl ToyStep {
    /// A step with this state and action and nothing earned or paid.
    pub(crate) fn new(state: [f32; STATE_DIM], action: f64) -> Self {
        Self { state, action, reward: 0.0, reward_continuous: 0.0, cost: 0.0 }
    }
}

/// `n` trajectories of `ticks` steps (advertiser `k` = trajectory `k`, period 0, CPA `cpa`,
/// budget 1), step `t` of trajectory `k` from `step(k, t)`; the last step is `done`.
pub(crate) fn toy_dataset(
    n: usize,
    ticks: usize,
    cpa: f64,
    step: impl Fn(usize, usize) -> ToyStep,
) -> TrajectoryDataset {
    let mut ds = TrajectoryDataset::default();
    for k in 0..n {
        let steps = (0..ticks)
            .map(|t| {
                let s = step(k, t);
                Step {
                    tick: t,
                    remaining_budget: 1.0,
                    state: s.state,
                    action: s.action,
                    reward: s.reward,
                    reward_continuous: s.reward_continuous,
                    cost: s.cost,
                    wins: 0,
                    exposures: 0,
                    num_pv: 10,
                    done: t + 1 == ticks,
                }
            })
            .collect();
        ds.trajectories.push(Trajectory {
            period: 0,
            advertiser: k,
            category: 0,
            budget: 1.0,
            cpa,
            bidder: "toy".into(),
            steps,
        });
    }
    ds
}
