//! Tasks of either family, prompts with ids and levels, and seeded prompt pools.

use serde::{Deserialize, Serialize};

use crate::arithmetic::{ArithParams, ArithTask};
use crate::countdown::{CountdownParams, CountdownTask, DEFAULT_SOLVER_BUDGET};
use crate::error::{invalid, Result, TaskError};
use crate::tokenizer::CharTokenizer;
use crate::verdict::{Outcome, RewardParams, Verdict};

/// A task family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// [`CountdownTask`].
    #[default]
    Countdown,
    /// [`ArithTask`].
    Arithmetic,
}

/// A verifiable task of either family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// A Countdown task.
    Countdown(CountdownTask),
    /// An arithmetic task.
    Arithmetic(ArithTask),
}

impl Task {
    /// The family.
    pub fn family(&self) -> Family {
        match self {
            Task::Countdown(_) => Family::Countdown,
            Task::Arithmetic(_) => Family::Arithmetic,
        }
    }

    /// The prompt text.
    pub fn prompt(&self) -> String {
        match self {
            Task::Countdown(t) => t.prompt(),
            Task::Arithmetic(t) => t.prompt(),
        }
    }

    /// The outcome of a completion text.
    pub fn judge(&self, completion: &str) -> Outcome {
        match self {
            Task::Countdown(t) => t.judge(completion),
            Task::Arithmetic(t) => t.judge(completion),
        }
    }

    /// The verdict of a completion text.
    pub fn verify(&self, completion: &str, rewards: &RewardParams) -> Verdict {
        Verdict::new(self.judge(completion), rewards)
    }

    /// The verdict of generated completion tokens: the text before the first `EOS` is judged;
    /// no `EOS` (a truncated generation) or a special token before it is
    /// [`MalformedReason::MissingEos`](crate::MalformedReason::MissingEos) /
    /// [`MalformedReason::BadToken`](crate::MalformedReason::BadToken), reward 0.
    pub fn verify_tokens(&self, tokenizer: &CharTokenizer, ids: &[i64], rewards: &RewardParams) -> Verdict {
        let outcome = match tokenizer.completion_text(ids) {
            Ok(text) => self.judge(&text),
            Err(reason) => Outcome::Malformed(reason),
        };
        Verdict::new(outcome, rewards)
    }

    /// A correct completion text (Countdown: search with [`DEFAULT_SOLVER_BUDGET`]).
    ///
    /// # Errors
    /// [`TaskError::NoSolution`] / [`TaskError::SearchBudgetExceeded`] for Countdown.
    pub fn solve(&self) -> Result<String> {
        match self {
            Task::Countdown(t) => t.solve(DEFAULT_SOLVER_BUDGET),
            Task::Arithmetic(t) => Ok(t.solve()),
        }
    }
}

/// A prompt of a pool: a task with its id and difficulty level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// Stable id (position in the pool plus the pool's `first_id`).
    pub id: u64,
    /// Difficulty level (index into the family's level table).
    pub level: usize,
    /// The task.
    pub task: Task,
}

impl Prompt {
    /// The prompt text.
    pub fn text(&self) -> String {
        self.task.prompt()
    }
    /// `BOS` + the prompt text, tokenized.
    ///
    /// # Errors
    /// [`TaskError::UnknownChar`] (impossible for generated tasks).
    pub fn encode(&self, tokenizer: &CharTokenizer) -> Result<Vec<i64>> {
        tokenizer.encode_prompt(&self.text())
    }
}

/// What [`PromptPool::generate`] draws.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `family` | `countdown` | task family |
/// | `levels` | `None` (all) | levels to draw, assigned round-robin: prompt `i` gets `levels[i % len]` |
/// | `first_id` | 0 | id of the first prompt (keep pools' ids disjoint) |
/// | `seed` | 0 | master seed; prompt `id` is drawn from `derive_seed(seed, id)` |
/// | `countdown` | [`CountdownParams::default`] | Countdown generator |
/// | `arithmetic` | [`ArithParams::default`] | arithmetic generator |
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PoolParams {
    /// Task family.
    pub family: Family,
    /// Levels to draw (`None`: every level of the family).
    pub levels: Option<Vec<usize>>,
    /// Id of the first prompt.
    pub first_id: u64,
    /// Master seed.
    pub seed: u64,
    /// Countdown generator.
    pub countdown: CountdownParams,
    /// Arithmetic generator.
    pub arithmetic: ArithParams,
}

impl PoolParams {
    /// Default parameters for `family`, with `seed`.
    pub fn new(family: Family, seed: u64) -> Self {
        Self { family, seed, ..Self::default() }
    }
    /// Restricts the levels drawn.
    #[must_use]
    pub fn levels(mut self, levels: impl Into<Vec<usize>>) -> Self {
        self.levels = Some(levels.into());
        self
    }
    /// Sets the first id.
    #[must_use]
    pub fn first_id(mut self, id: u64) -> Self {
        self.first_id = id;
        self
    }

    /// Number of levels of the chosen family.
    pub fn num_levels(&self) -> usize {
        match self.family {
            Family::Countdown => self.countdown.levels.len(),
            Family::Arithmetic => self.arithmetic.levels.len(),
        }
    }

    /// Validates the parameters.
    ///
    /// # Errors
    /// [`TaskError::InvalidParameter`], [`TaskError::LevelOutOfRange`].
    pub fn check(&self) -> Result<()> {
        match self.family {
            Family::Countdown => self.countdown.check()?,
            Family::Arithmetic => self.arithmetic.check()?,
        }
        if let Some(levels) = &self.levels {
            if levels.is_empty() {
                return Err(invalid("levels", "[]", "give at least one level (or None for all)"));
            }
            if let Some(&level) = levels.iter().find(|&&l| l >= self.num_levels()) {
                return Err(TaskError::LevelOutOfRange { level, levels: self.num_levels() });
            }
        }
        Ok(())
    }
}

/// A reproducible set of prompts with ids and difficulty levels.
///
/// Prompt `i` has id `first_id + i`, level `levels[i % levels.len()]` and is drawn from its own
/// stream `derive_seed(seed, id)`: the same parameters give the same pool on every platform,
/// and a pool of `n` prompts is a prefix of the pool of `n + 1`.
///
/// ```
/// use rlvr_tasks::{CharTokenizer, Family, PoolParams, PromptPool, RewardParams};
/// let pool = PromptPool::generate(&PoolParams::new(Family::Countdown, 7).levels([1, 2]), 100)?;
/// assert_eq!(pool.len(), 100);
/// let p = &pool.prompts()[0];
/// assert_eq!((p.id, p.level), (0, 1));
/// let tok = CharTokenizer::new();
/// let prompt_ids = p.encode(&tok)?;                      // feed to the policy
/// let solution = p.task.solve()?;                       // supervised warm-start target
/// let completion = tok.encode_completion(&solution)?;   // what a perfect policy emits
/// let v = p.task.verify_tokens(&tok, &completion, &RewardParams::default());
/// assert_eq!(v.reward, 1.0);
/// # let _ = prompt_ids;
/// # Ok::<(), rlvr_tasks::TaskError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PromptPool {
    prompts: Vec<Prompt>,
}

impl PromptPool {
    /// Generates `n` prompts.
    ///
    /// # Errors
    /// [`PoolParams::check`] errors; [`TaskError::GenerationFailed`] when a Countdown level's
    /// constraints cannot be met.
    pub fn generate(params: &PoolParams, n: usize) -> Result<Self> {
        params.check()?;
        let all: Vec<usize> = (0..params.num_levels()).collect();
        let levels = params.levels.as_deref().unwrap_or(&all);
        let prompts = (0..n)
            .map(|i| {
                let id = params.first_id.wrapping_add(i as u64);
                let level = levels[i % levels.len()];
                let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(params.seed, id));
                let task = match params.family {
                    Family::Countdown => Task::Countdown(params.countdown.generate(level, &mut rng)?),
                    Family::Arithmetic => Task::Arithmetic(params.arithmetic.generate(level, &mut rng)?),
                };
                Ok(Prompt { id, level, task })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { prompts })
    }

    /// A pool of given prompts.
    pub fn from_prompts(prompts: Vec<Prompt>) -> Self {
        Self { prompts }
    }
    /// The prompts, in id order for generated pools.
    pub fn prompts(&self) -> &[Prompt] {
        &self.prompts
    }
    /// The prompts, by value.
    pub fn into_prompts(self) -> Vec<Prompt> {
        self.prompts
    }
    /// Number of prompts.
    pub fn len(&self) -> usize {
        self.prompts.len()
    }
    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
    }
    /// The prompt with id `id`.
    pub fn get(&self, id: u64) -> Option<&Prompt> {
        // Generated pools are contiguous: try the direct index first.
        let first = self.prompts.first()?.id;
        let guess = id.checked_sub(first).and_then(|i| usize::try_from(i).ok()).and_then(|i| self.prompts.get(i));
        match guess {
            Some(p) if p.id == id => Some(p),
            _ => self.prompts.iter().find(|p| p.id == id),
        }
    }
    /// Iterates over the prompts.
    pub fn iter(&self) -> std::slice::Iter<'_, Prompt> {
        self.prompts.iter()
    }
}

impl<'a> IntoIterator for &'a PromptPool {
    type Item = &'a Prompt;
    type IntoIter = std::slice::Iter<'a, Prompt>;
    fn into_iter(self) -> Self::IntoIter {
        self.prompts.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::MalformedReason;

    #[test]
    fn reproducible_prefix_stable_round_robin() {
        let p = PoolParams::new(Family::Arithmetic, 11).levels([0, 3, 5]).first_id(1000);
        let a = PromptPool::generate(&p, 30).unwrap();
        let b = PromptPool::generate(&p, 31).unwrap();
        assert_eq!(a.prompts(), &b.prompts()[..30]);
        assert_eq!(a.prompts()[4].level, 3);
        assert_eq!(a.prompts()[4].id, 1004);
        assert_eq!(a.get(1004).map(|p| p.level), Some(3));
        assert_eq!(a.get(5), None);
        let c = PromptPool::generate(&PoolParams::new(Family::Arithmetic, 12).levels([0, 3, 5]).first_id(1000), 30)
            .unwrap();
        assert_ne!(a, c);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<PromptPool>(&json).unwrap(), a);
    }

    #[test]
    fn bad_params() {
        let p = PoolParams::new(Family::Countdown, 0).levels([7]);
        assert_eq!(PromptPool::generate(&p, 3), Err(TaskError::LevelOutOfRange { level: 7, levels: 5 }));
        let p = PoolParams::new(Family::Countdown, 0).levels([]);
        assert!(matches!(PromptPool::generate(&p, 3), Err(TaskError::InvalidParameter { .. })));
        assert!(PromptPool::generate(&PoolParams::default(), 0).unwrap().is_empty());
    }

    #[test]
    fn verify_tokens_never_fails() {
        let tok = CharTokenizer::new();
        let task = Task::Arithmetic(ArithTask::new(2, 3, crate::ArithOp::Add).unwrap());
        let r = RewardParams::default();
        assert_eq!(task.verify_tokens(&tok, &[8, 2], &r).reward, 1.0);
        assert_eq!(task.verify_tokens(&tok, &[8], &r).outcome, Outcome::Malformed(MalformedReason::MissingEos));
        assert_eq!(
            task.verify_tokens(&tok, &[8, 1, 2], &r).outcome,
            Outcome::Malformed(MalformedReason::BadToken { id: 1, position: 1 })
        );
        assert_eq!(task.verify_tokens(&tok, &[-7, 2], &r).reward, 0.0);
        assert_eq!(task.verify_tokens(&tok, &[], &r).reward, 0.0);
    }
}
