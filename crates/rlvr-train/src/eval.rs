//! Held-out evaluation: pass@1 and pass@k from `n` samples per prompt.

use std::collections::BTreeMap;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::config::{EvalConfig, RlConfig};
use crate::error::Result;
use crate::policy::Policy;
use crate::rollout::{rollout, sampling_params, GroupSampling, RolloutTimes};
use crate::TaskSet;

/// Held-out accuracy of the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Mean over prompts of the share of correct samples (the unbiased pass@1).
    pub pass_at_1: f64,
    /// Unbiased pass@k, `1 − C(n−c, k) / C(n, k)` averaged over prompts (Chen et al. 2021).
    pub pass_at_k: f64,
    /// The `k`.
    pub k: usize,
    /// Samples per prompt `n`.
    pub samples: usize,
    /// Mean verifier reward.
    pub mean_reward: f64,
    /// Share of malformed samples (reward 0).
    pub malformed: f64,
    /// pass@1 per family and difficulty level (`"countdown/2"`).
    pub pass_at_1_by_level: BTreeMap<String, f64>,
}

/// Unbiased pass@k of one prompt with `c` correct among `n` samples.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    if k == 0 || n == 0 {
        return 0.0;
    }
    if n - c.min(n) < k {
        return 1.0;
    }
    // 1 - prod_{i = n-c+1}^{n} (1 - k / i)
    let mut miss = 1.0;
    for i in (n - c + 1)..=n {
        miss *= 1.0 - k as f64 / i as f64;
    }
    1.0 - miss
}

/// Evaluates on every held-out prompt with `cfg.samples` samples at `cfg.temperature`.
///
/// # Errors
/// Generation errors.
pub fn evaluate(
    policy: &dyn Policy,
    tasks: &TaskSet,
    cfg: &EvalConfig,
    rl: &RlConfig,
    rng: &mut dyn RngCore,
) -> Result<EvalReport> {
    let sampling = sampling_params(rl.max_new_tokens, cfg.temperature, 1.0);
    let indices: Vec<usize> = (0..tasks.eval.len()).collect();
    let mut times = RolloutTimes::default();
    let groups = rollout(
        policy,
        tasks,
        &tasks.eval,
        &indices,
        &GroupSampling { k: cfg.samples, params: &sampling },
        rng,
        &mut times,
    )?;
    let (mut p1, mut pk, mut reward, mut malformed) = (0.0, 0.0, 0.0, 0.0);
    let mut by_level: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for g in &groups {
        let c = g.correct.iter().filter(|&&x| x).count();
        let rate = c as f64 / cfg.samples as f64;
        p1 += rate;
        pk += pass_at_k(cfg.samples, c, cfg.k);
        reward += g.rewards.iter().map(|&r| f64::from(r)).sum::<f64>() / cfg.samples as f64;
        malformed += g.malformed.iter().filter(|&&m| m).count() as f64 / cfg.samples as f64;
        let e = by_level.entry(tasks.eval.level_label(g.index).unwrap_or_default()).or_insert((0.0, 0));
        e.0 += rate;
        e.1 += 1;
    }
    let n = groups.len().max(1) as f64;
    Ok(EvalReport {
        pass_at_1: p1 / n,
        pass_at_k: pk / n,
        k: cfg.k,
        samples: cfg.samples,
        mean_reward: reward / n,
        malformed: malformed / n,
        pass_at_1_by_level: by_level.into_iter().map(|(l, (s, c))| (l, s / c.max(1) as f64)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::pass_at_k;

    #[test]
    fn pass_at_k_matches_the_combinatorial_formula() {
        // 1 - C(n-c, k)/C(n, k) by direct binomials.
        fn binom(n: usize, k: usize) -> f64 {
            if k > n {
                return 0.0;
            }
            (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
        }
        for n in 1..=10 {
            for c in 0..=n {
                for k in 1..=n {
                    let want = 1.0 - binom(n - c, k) / binom(n, k);
                    assert!((pass_at_k(n, c, k) - want).abs() < 1e-12, "n={n} c={c} k={k}");
                }
            }
        }
        assert_eq!(pass_at_k(8, 0, 8), 0.0);
        assert_eq!(pass_at_k(8, 1, 8), 1.0);
        assert!((pass_at_k(8, 2, 1) - 0.25).abs() < 1e-12);
    }
}
