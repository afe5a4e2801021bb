//! Episode statistics.

use serde::{Deserialize, Serialize};

use crate::stats::{mean, std_dev};

/// Return and length of one episode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeStats {
    /// Undiscounted sum of rewards.
    pub ret: f64,
    /// Number of steps.
    pub length: usize,
    /// Whether the episode ended in a terminal state (rather than by truncation).
    pub terminated: bool,
}

impl EpisodeStats {
    /// Adds one step's reward.
    pub fn record(&mut self, reward: f32) {
        self.ret += f64::from(reward);
        self.length += 1;
    }
}

/// Summary over many episodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSummary {
    /// Number of episodes.
    pub episodes: usize,
    /// Mean return.
    pub mean_return: f64,
    /// Population standard deviation of the return.
    pub std_return: f64,
    /// Smallest return.
    pub min_return: f64,
    /// Largest return.
    pub max_return: f64,
    /// Mean episode length.
    pub mean_length: f64,
}

impl EpisodeSummary {
    /// Summarises `episodes`; all fields are 0 for an empty slice.
    pub fn from_episodes(episodes: &[EpisodeStats]) -> Self {
        if episodes.is_empty() {
            return Self::default();
        }
        let rets: Vec<f64> = episodes.iter().map(|e| e.ret).collect();
        let lens: Vec<f64> = episodes.iter().map(|e| e.length as f64).collect();
        Self {
            episodes: episodes.len(),
            mean_return: mean(&rets),
            std_return: std_dev(&rets, 0),
            min_return: rets.iter().copied().fold(f64::INFINITY, f64::min),
            max_return: rets.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean_length: mean(&lens),
        }
    }

    /// D4RL-style normalised score: `100 * (ret - random) / (expert - random)`.
    pub fn normalized_score(ret: f64, random_score: f64, expert_score: f64) -> f64 {
        100.0 * (ret - random_score) / (expert_score - random_score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_values() {
        let eps = [
            EpisodeStats { ret: 1.0, length: 2, terminated: true },
            EpisodeStats { ret: 3.0, length: 4, terminated: false },
        ];
        let s = EpisodeSummary::from_episodes(&eps);
        assert_eq!(s.episodes, 2);
        assert!((s.mean_return - 2.0).abs() < 1e-12);
        assert!((s.std_return - 1.0).abs() < 1e-12);
        assert_eq!(s.min_return, 1.0);
        assert_eq!(s.max_return, 3.0);
        assert!((s.mean_length - 3.0).abs() < 1e-12);
        assert_eq!(EpisodeSummary::from_episodes(&[]).episodes, 0);
        assert!((EpisodeSummary::normalized_score(50.0, 0.0, 100.0) - 50.0).abs() < 1e-12);
    }
}
