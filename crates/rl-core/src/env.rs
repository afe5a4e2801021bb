//! The environment and policy traits, and a rollout helper.

use std::borrow::Cow;

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
    /// Diagnostics of the step, Gymnasium's `info` dict (empty where the environment has none).
    #[serde(default)]
    pub info: Info,
}

impl Step {
    /// A step without diagnostics.
    pub fn new(obs: Array1<f32>, reward: f32, terminated: bool, truncated: bool) -> Self {
        Self { obs, reward, terminated, truncated, info: Info::default() }
    }

    /// The same step carrying `info`.
    #[must_use]
    pub fn with_info(mut self, info: Info) -> Self {
        self.info = info;
        self
    }

    /// Whether the episode is over (terminated or truncated).
    pub fn done(&self) -> bool {
        self.terminated || self.truncated
    }
}

/// One value of an [`Info`] entry: the kinds Gymnasium's environments put in their `info` dicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InfoValue {
    /// A real number (`x_velocity`, `reward_ctrl`, ...).
    Float(f64),
    /// An integer (a count, an index).
    Int(i64),
    /// A flag (`success`, `is_success`).
    Bool(bool),
    /// An array, flattened (`tendon_length`, a goal position).
    Array(Vec<f64>),
}

impl From<f64> for InfoValue {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}

impl From<f32> for InfoValue {
    fn from(v: f32) -> Self {
        Self::Float(f64::from(v))
    }
}

impl From<i64> for InfoValue {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl From<bool> for InfoValue {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}

impl From<Vec<f64>> for InfoValue {
    fn from(v: Vec<f64>) -> Self {
        Self::Array(v)
    }
}

/// A step's diagnostics: named values in the order the environment wrote them, like the `info`
/// dict Gymnasium returns from `step` (`x_velocity`, `reward_ctrl`, `success`, ...).
///
/// Names are `&'static str` for the built-in environments (no allocation per step); an
/// environment of yours may use owned names. Inserting a name twice replaces the value.
///
/// ```
/// use rl_core::env::{Info, InfoValue};
/// let info = Info::new().with("x_velocity", 1.5).with("success", false);
/// assert_eq!(info.get_f64("x_velocity"), Some(1.5));
/// assert_eq!(info.get("success"), Some(&InfoValue::Bool(false)));
/// assert_eq!(info.get_f64("missing"), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Info {
    entries: Vec<(Cow<'static, str>, InfoValue)>,
}

impl Info {
    /// An empty info (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty info with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self { entries: Vec::with_capacity(n) }
    }

    /// Sets `name` to `value` (replacing an earlier value of the same name, keeping its place).
    pub fn insert(&mut self, name: impl Into<Cow<'static, str>>, value: impl Into<InfoValue>) {
        let name = name.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((name, value)),
        }
    }

    /// [`Info::insert`] by value, for chaining.
    #[must_use]
    pub fn with(mut self, name: impl Into<Cow<'static, str>>, value: impl Into<InfoValue>) -> Self {
        self.insert(name, value);
        self
    }

    /// The value named `name`.
    pub fn get(&self, name: &str) -> Option<&InfoValue> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The number named `name` (a [`InfoValue::Float`], or an [`InfoValue::Int`] as `f64`).
    pub fn get_f64(&self, name: &str) -> Option<f64> {
        match self.get(name)? {
            InfoValue::Float(v) => Some(*v),
            #[allow(clippy::cast_precision_loss)]
            InfoValue::Int(v) => Some(*v as f64),
            InfoValue::Bool(_) | InfoValue::Array(_) => None,
        }
    }

    /// The flag named `name`.
    pub fn get_bool(&self, name: &str) -> Option<bool> {
        match self.get(name)? {
            InfoValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &InfoValue)> {
        self.entries.iter().map(|(n, v)| (n.as_ref(), v))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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

    #[test]
    fn info_replaces_in_place_and_reads_by_kind() {
        let mut info = Info::new().with("a", 1.0).with("b", true).with("c", 3_i64);
        info.insert("a", 2.0_f32);
        info.insert(String::from("d"), vec![1.0, 2.0]);
        let names: Vec<&str> = info.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(info.len(), 4);
        assert_eq!(info.get_f64("a"), Some(2.0));
        assert_eq!(info.get_f64("c"), Some(3.0));
        assert_eq!(info.get_f64("b"), None);
        assert_eq!(info.get_bool("b"), Some(true));
        assert_eq!(info.get_bool("a"), None);
        assert_eq!(info.get("d"), Some(&InfoValue::Array(vec![1.0, 2.0])));
        assert!(Info::new().is_empty());
    }

    #[test]
    fn steps_round_trip_with_and_without_info() {
        let step = Step::new(array![1.0], 0.5, false, true).with_info(Info::new().with("x_velocity", -0.25));
        let json = serde_json::to_string(&step).unwrap();
        assert!(json.contains("x_velocity"), "{json}");
        let back: Step = serde_json::from_str(&json).unwrap();
        assert_eq!(back, step);
        // A step serialised before `info` existed still reads, with an empty info.
        let old: Step = serde_json::from_str(
            r#"{"obs":{"v":1,"dim":[1],"data":[1.0]},"reward":0.5,"terminated":false,"truncated":true}"#,
        )
        .unwrap();
        assert!(old.info.is_empty());
        assert!(old.done());
    }

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
            Ok(Step::new(array![self.x], -self.x.abs(), terminated, truncated))
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
