//! The environment and policy traits, and a rollout helper.

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::episode::EpisodeStats;
use crate::error::Result;
use crate::space::Space;

/// The outcome of one environment step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Observation after the step.
    pub obs: Array1<f32>,
    /// Reward of the step.
    pub reward: f32,
    /// The episode ended in a terminal state (no bootstrapping past it).
    pub terminated: bool,
    /// The episode was cut by a time limit (bootstrapping past it is correct).
    pub truncated: bool,
}

impl Step {
    /// Whether the episode is over (terminated or truncated).
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// A reinforcement-learning environment (Gymnasium semantics: `terminated` vs `truncated`).
///
/// Wrappers are `Env`s holding an inner `Env`. The trait is object safe: randomness comes in as
/// `&mut dyn RngCore`, so `Box<dyn Env>` works.
pub trait Env {
    /// The space observations live in.
    fn observation_space(&self) -> &Space;
    /// The space actions must live in.
    fn action_space(&self) -> &Space;
    /// Starts a new episode and returns its first observation.
    ///
    /// # Errors
    /// Implementation-specific (e.g. a simulator failure).
    fn reset(&mut self, rng: &mut dyn RngCore) -> Result<Array1<f32>>;
    /// Applies `action`.
    ///
    /// # Errors
    /// An action outside [`Env::action_space`], or a step after the episode ended.
    fn step(&mut self, action: ArrayView1<'_, f32>) -> Result<Step>;
}

/// Whether a policy should act greedily or sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ActMode {
    /// The mode / mean action (evaluation).
    #[default]
    Deterministic,
    /// A sample from the policy's distribution (exploration).
    Stochastic,
}

/// A policy maps an observation to an action.
pub trait Policy {
    /// Chooses an action for `obs`.
    ///
    /// # Errors
    /// A malformed observation or a failure of the underlying model.
    fn act(&self, obs: ArrayView1<'_, f32>, mode: ActMode, rng: &mut dyn RngCore) -> Result<Array1<f32>>;
}

/// A policy that samples uniformly from a space (ignores the observation and the mode).
#[derive(Debug, Clone)]
pub struct RandomPolicy {
    space: Space,
}

impl RandomPolicy {
    /// A uniform policy over `space`.
    pub fn new(space: Space) -> Self {
        Self { space }
    }
}

impl Policy for RandomPolicy {
    fn act(&self, _obs: ArrayView1<'_, f32>, _mode: ActMode, rng: &mut dyn RngCore) -> Result<Array1<f32>> {
        Ok(self.space.sample(rng))
    }
}

/// Runs one episode of `policy` in `env` for at most `max_steps` steps (the episode counts as
/// truncated when the cap is hit) and returns its statistics.
///
/// # Errors
/// Whatever the environment or the policy returns.
pub fn rollout_episode<E, P>(
    env: &mut E,
    policy: &P,
    mode: ActMode,
    max_steps: usize,
    rng: &mut dyn RngCore,
) -> Result<EpisodeStats>
where
    E: Env + ?Sized,
    P: Policy + ?Sized,
{
    let mut obs = env.reset(rng)?;
    let mut stats = EpisodeStats::default();
    for _ in 0..max_steps {
        let action = policy.act(obs.view(), mode, rng)?;
        let step = env.step(action.view())?;
        stats.record(step.reward);
        if step.done() {
            stats.terminated = step.terminated;
            return Ok(stats);
        }
        obs = step.obs;
    }
    Ok(stats)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::RlCoreError;
    use ndarray::array;
    use rand::SeedableRng;

    /// A 1-D walk: the state moves by the action in [-1, 1]; reward is -|x|; ends at |x| >= 5
    /// (terminated) or after `limit` steps (truncated).
    pub(crate) struct Walk {
        obs_space: Space,
        act_space: Space,
        x: f32,
        t: usize,
        limit: usize,
        done: bool,
    }

    impl Walk {
        pub(crate) fn new(limit: usize) -> Self {
            Self {
                obs_space: Space::symmetric(1, 10.0).unwrap(),
                act_space: Space::symmetric(1, 1.0).unwrap(),
                x: 0.0,
                t: 0,
                limit,
                done: true,
            }
        }
    }

    impl Env for Walk {
        fn observation_space(&self) -> &Space {
            &self.obs_space
        }
        fn action_space(&self) -> &Space {
            &self.act_space
        }
        fn reset(&mut self, _rng: &mut dyn RngCore) -> Result<Array1<f32>> {
            self.x = 0.0;
            self.t = 0;
            self.done = false;
            Ok(array![self.x])
        }
        fn step(&mut self, action: ArrayView1<'_, f32>) -> Result<Step> {
            if self.done {
                return Err(RlCoreError::NeedsReset);
            }
            self.act_space.check("action", action)?;
            self.x += action[0];
            self.t += 1;
            let terminated = self.x.abs() >= 5.0;
            let truncated = !terminated && self.t >= self.limit;
            self.done = terminated || truncated;
            Ok(Step { obs: array![self.x], reward: -self.x.abs(), terminated, truncated })
        }
    }

    struct AlwaysRight;
    impl Policy for AlwaysRight {
        fn act(&self, _: ArrayView1<'_, f32>, _: ActMode, _: &mut dyn RngCore) -> Result<Array1<f32>> {
            Ok(array![1.0])
        }
    }

    #[test]
    fn rollout_terminates_and_sums_rewards() {
        let mut env = Walk::new(100);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let stats = rollout_episode(&mut env, &AlwaysRight, ActMode::Deterministic, 100, &mut rng).unwrap();
        assert_eq!(stats.length, 5);
        assert!(stats.terminated);
        assert!((stats.ret - (-15.0)).abs() < 1e-6);
        assert!(matches!(env.step(array![0.0].view()), Err(RlCoreError::NeedsReset)));
    }

    #[test]
    fn random_policy_stays_in_space_and_objects_work() {
        let mut env: Box<dyn Env> = Box::new(Walk::new(7));
        let policy = RandomPolicy::new(env.action_space().clone());
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let stats = rollout_episode(env.as_mut(), &policy, ActMode::Stochastic, 100, &mut rng).unwrap();
        assert_eq!(stats.length, 7);
        assert!(!stats.terminated);
        assert!(env.step(array![2.0].view()).is_err());
    }
}
