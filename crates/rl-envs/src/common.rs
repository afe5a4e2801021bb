//! Helpers shared by the environments: the episode clock and action checks.

use ndarray::ArrayView1;
use rl_core::{check_finite, RlCoreError, Space};
use serde::{Deserialize, Serialize};

/// Step counter and episode flags of one environment (part of every snapshot).
///
/// `max_steps == 0` means no time limit. Truncation follows gymnasium's `TimeLimit`:
/// `truncated = steps >= max_steps`, also on a step that terminates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeClock {
    /// Steps taken in this episode.
    pub steps: usize,
    /// Whether the episode is over (or no episode was started): `step` needs `reset`.
    pub needs_reset: bool,
}

impl Default for EpisodeClock {
    fn default() -> Self {
        Self { steps: 0, needs_reset: true }
    }
}

impl EpisodeClock {
    /// Starts an episode.
    pub(crate) fn start(&mut self) {
        self.steps = 0;
        self.needs_reset = false;
    }

    /// Errors with [`RlCoreError::NeedsReset`] outside an episode.
    pub(crate) fn guard(&self) -> Result<(), RlCoreError> {
        if self.needs_reset {
            Err(RlCoreError::NeedsReset)
        } else {
            Ok(())
        }
    }

    /// Counts a step; returns `truncated` and ends the episode when it is over.
    pub(crate) fn tick(&mut self, terminated: bool, max_steps: usize) -> bool {
        self.steps += 1;
        let truncated = max_steps > 0 && self.steps >= max_steps;
        if terminated || truncated {
            self.needs_reset = true;
        }
        truncated
    }
}

/// Checks a continuous action: the right length and finite. Values outside the box are left
/// to the environment, which treats them as gymnasium does (clipped by the dynamics).
pub(crate) fn check_box_action(space: &Space, action: ArrayView1<'_, f32>) -> Result<(), RlCoreError> {
    if action.len() != space.dim() {
        return Err(RlCoreError::ShapeMismatch {
            what: "action".into(),
            expected: format!("[{}]", space.dim()),
            got: format!("[{}]", action.len()),
        });
    }
    check_finite("action", action.iter())
}

/// Checks that every `f64` of a snapshot is finite.
pub(crate) fn snapshot_finite(what: &str, values: &[f64]) -> crate::Result<()> {
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(crate::EnvError::snapshot(format!("{what}[{i}] = {v} is not finite")));
    }
    Ok(())
}

/// `Space::symmetric` / `Space::boxed` for constant spaces built by the library itself.
pub(crate) fn boxed(low: Vec<f32>, high: Vec<f32>) -> crate::Result<Space> {
    Ok(Space::boxed(low.into(), high.into())?)
}

pub(crate) use rl_core::check::{non_negative, positive};

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn clock_truncates_and_guards() {
        let mut c = EpisodeClock::default();
        assert!(c.guard().is_err());
        c.start();
        assert!(!c.tick(false, 2));
        assert!(c.guard().is_ok());
        assert!(c.tick(false, 2));
        assert!(c.guard().is_err());
        c.start();
        assert!(!c.tick(true, 0));
        assert!(c.needs_reset);
    }

    #[test]
    fn action_checks() {
        let s = Space::symmetric(2, 1.0).unwrap();
        assert!(check_box_action(&s, array![5.0, -3.0].view()).is_ok());
        assert!(matches!(check_box_action(&s, array![0.0].view()), Err(RlCoreError::ShapeMismatch { .. })));
        assert!(matches!(
            check_box_action(&s, array![0.0, f32::NAN].view()),
            Err(RlCoreError::NonFinite { index: 1, .. })
        ));
    }
}
