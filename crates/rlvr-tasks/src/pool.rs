//! Tasks of either family, prompts with ids and levels, and seeded prompt pools that never
//! share a problem with each other.

use std::collections::{HashMap, HashSet};
use std::fmt;

use rl_core::Params;
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

    /// The canonical form of the problem: two tasks with the same key pose the same problem
    /// (Countdown numbers in any order, the operands of `+` and `*` either way round).
    pub fn key(&self) -> PromptKey {
        match self {
            Task::Countdown(t) => {
                let c = t.canonical();
                let rules = match (c.rules.number_use, c.rules.division) {
                    (crate::NumberUse::ExactlyOnce, crate::DivisionRule::Rational) => "",
                    (crate::NumberUse::ExactlyOnce, crate::DivisionRule::Exact) => "|exact",
                    (crate::NumberUse::AtMostOnce, crate::DivisionRule::Rational) => "|at_most_once",
                    (crate::NumberUse::AtMostOnce, crate::DivisionRule::Exact) => "|at_most_once|exact",
                };
                PromptKey(format!("countdown:{}{rules}", c.prompt()))
            }
            Task::Arithmetic(t) => PromptKey(format!("arithmetic:{}", t.canonical().prompt())),
        }
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

/// The canonical form of a prompt ([`Task::key`]): equal keys pose the same problem. Pools
/// made by [`PromptPool::generate_disjoint`] share no key, so a held-out pool holds no training
/// problem, not even with its numbers reordered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PromptKey(String);

impl PromptKey {
    /// The key as text (`"countdown:2,3,5>16:"`, `"arithmetic:12+39="`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PromptKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How many distinct prompts a generator level can produce
/// ([`CountdownParams::distinct_prompts`], [`ArithParams::distinct_prompts`],
/// [`PoolParams::distinct_prompts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    /// Distinct prompts counted.
    pub distinct: u64,
    /// Whether `distinct` is the exact number (`false`: counting stopped at a cap, and the
    /// level holds at least `distinct`).
    pub exact: bool,
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.exact {
            write!(f, "{}", self.distinct)
        } else {
            write!(f, ">= {}", self.distinct)
        }
    }
}

/// One generator level, as a hashable value (pools with different level tables but the same
/// level definition draw from the same set of problems).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum LevelSpec {
    Countdown(crate::CountdownLevel, crate::CountdownRules),
    Arithmetic(crate::ArithLevel),
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
/// | `max_draws` | 10 000 | draws per prompt before a level counts as exhausted (every draw a problem already taken) |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Draws per prompt before giving up on finding a problem no earlier prompt has.
    pub max_draws: usize,
}

impl Default for PoolParams {
    fn default() -> Self {
        Self {
            family: Family::default(),
            levels: None,
            first_id: 0,
            seed: 0,
            countdown: CountdownParams::default(),
            arithmetic: ArithParams::default(),
            max_draws: 10_000,
        }
    }
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

    /// Sets the master seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Number of levels of the chosen family.
    pub fn num_levels(&self) -> usize {
        match self.family {
            Family::Countdown => self.countdown.levels.len(),
            Family::Arithmetic => self.arithmetic.levels.len(),
        }
    }

    /// The levels drawn, in round-robin order.
    pub fn drawn_levels(&self) -> Vec<usize> {
        self.levels.clone().unwrap_or_else(|| (0..self.num_levels()).collect())
    }

    /// How many prompts of a pool of `n` have each drawn level (prompt `i` gets
    /// `levels[i % len]`).
    pub fn level_counts(&self, n: usize) -> Vec<(usize, usize)> {
        let levels = self.drawn_levels();
        let mut counts: Vec<(usize, usize)> = Vec::new();
        for (i, &l) in levels.iter().enumerate() {
            let c = n / levels.len() + usize::from(i < n % levels.len());
            match counts.iter_mut().find(|(x, _)| *x == l) {
                Some(e) => e.1 += c,
                None => counts.push((l, c)),
            }
        }
        counts
    }

    /// How many distinct prompts `level` of the chosen family can produce, counted up to `cap`
    /// (see [`CountdownParams::distinct_prompts`]; arithmetic counts are always exact).
    ///
    /// # Errors
    /// [`TaskError::LevelOutOfRange`] and the errors of [`validate`](rl_core::Params::validate).
    pub fn distinct_prompts(&self, level: usize, cap: u64) -> Result<Capacity> {
        match self.family {
            Family::Countdown => self.countdown.distinct_prompts(level, cap),
            Family::Arithmetic => self.arithmetic.distinct_prompts(level),
        }
    }

    fn level_spec(&self, level: usize) -> Result<LevelSpec> {
        let out = || TaskError::LevelOutOfRange { level, levels: self.num_levels() };
        Ok(match self.family {
            Family::Countdown => {
                LevelSpec::Countdown(*self.countdown.levels.get(level).ok_or_else(out)?, self.countdown.rules)
            }
            Family::Arithmetic => LevelSpec::Arithmetic(*self.arithmetic.levels.get(level).ok_or_else(out)?),
        })
    }

    fn validate_fields(&self) -> Result<()> {
        match self.family {
            Family::Countdown => self.countdown.validate()?,
            Family::Arithmetic => self.arithmetic.validate()?,
        }
        if let Some(levels) = &self.levels {
            if levels.is_empty() {
                return Err(invalid("levels", "[]", "give at least one level (or None for all)"));
            }
            if let Some(&level) = levels.iter().find(|&&l| l >= self.num_levels()) {
                return Err(TaskError::LevelOutOfRange { level, levels: self.num_levels() });
            }
        }
        if self.max_draws == 0 {
            return Err(invalid("max_draws", 0, "must be at least 1"));
        }
        Ok(())
    }
}

/// One pool of [`PromptPool::generate_disjoint`]: a name (for errors), its parameters and size.
#[derive(Debug, Clone, Copy)]
pub struct PoolRequest<'a> {
    /// Name used in errors (`"held-out"`, `"train"`).
    pub name: &'a str,
    /// Generator parameters (family, levels, seed, first id).
    pub params: &'a PoolParams,
    /// Number of prompts.
    pub n: usize,
}

/// A reproducible set of prompts with ids and difficulty levels.
///
/// Prompt `i` has id `first_id + i`, level `levels[i % levels.len()]` and is drawn from its own
/// stream `derive_seed(seed, id)` (drawn again from the same stream while its problem repeats
/// an earlier prompt's, by [`PromptKey`]): the same parameters give the same pool on every
/// platform, no two prompts pose the same problem, and a pool of `n` prompts is a prefix of the
/// pool of `n + 1`. [`generate_disjoint`](Self::generate_disjoint) makes several pools
/// (training, held-out, validation) that share no problem.
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
    /// Generates `n` distinct prompts (no two share a [`PromptKey`]).
    ///
    /// # Errors
    /// As [`generate_disjoint`](Self::generate_disjoint).
    pub fn generate(params: &PoolParams, n: usize) -> Result<Self> {
        let mut pools = Self::generate_disjoint(&[PoolRequest { name: "pool", params, n }])?;
        Ok(pools.pop().unwrap_or_default())
    }

    /// Generates several pools, in order, that share no problem: each prompt's [`PromptKey`]
    /// differs from every key of the pools before it and of the prompts before it in its own
    /// pool. A prompt whose draw repeats a key is drawn again from its own stream (so pool `k`
    /// of `n` prompts is still a prefix of the same pool of `n + 1`). Generate the held-out
    /// pool first: it is then an unbiased sample of the generator, and the training pool is
    /// what remains.
    ///
    /// ```
    /// use rlvr_tasks::{Family, PoolParams, PoolRequest, PromptPool};
    /// let held_out = PoolParams::new(Family::Countdown, 1).levels([1, 2]);
    /// let train = PoolParams::new(Family::Countdown, 0).levels([1, 2]);
    /// let pools = PromptPool::generate_disjoint(&[
    ///     PoolRequest { name: "held-out", params: &held_out, n: 100 },
    ///     PoolRequest { name: "train", params: &train, n: 400 },
    /// ])?;
    /// assert_eq!(pools[1].overlap(&pools[0]), 0);
    /// // Level 0 (two numbers from 1-9) has 138 distinct prompts: asking for 400 is a typed error.
    /// let too_many = PoolParams::new(Family::Countdown, 0).levels([0]);
    /// assert!(PromptPool::generate(&too_many, 400).is_err());
    /// # Ok::<(), rlvr_tasks::TaskError>(())
    /// ```
    ///
    /// # Errors
    /// [`Params::validate`] errors; [`TaskError::NotEnoughPrompts`] when the pools together
    /// ask a level for more prompts than it can produce; [`TaskError::LevelExhausted`] when
    /// `max_draws` draws in a row repeat taken problems (ask for fewer than the level's
    /// [`distinct_prompts`](PoolParams::distinct_prompts)); [`TaskError::GenerationFailed`]
    /// when a Countdown level's constraints cannot be met.
    pub fn generate_disjoint(requests: &[PoolRequest<'_>]) -> Result<Vec<Self>> {
        // Capacity first: the pools together must not ask a level for more than it holds.
        let mut wanted: HashMap<LevelSpec, (usize, &PoolParams, usize)> = HashMap::new();
        for r in requests {
            r.params.validate()?;
            for (level, count) in r.params.level_counts(r.n) {
                let e = wanted.entry(r.params.level_spec(level)?).or_insert((0, r.params, level));
                e.0 += count;
            }
        }
        let mut specs: Vec<_> = wanted.into_values().collect();
        specs.sort_by_key(|(_, p, level)| (p.family == Family::Arithmetic, *level));
        for (requested, params, level) in specs {
            let cap = params.distinct_prompts(level, requested as u64)?;
            if cap.exact && cap.distinct < requested as u64 {
                return Err(TaskError::NotEnoughPrompts { level, requested, available: cap.distinct });
            }
        }
        let mut taken: HashSet<PromptKey> = HashSet::new();
        let mut pools = Vec::with_capacity(requests.len());
        for r in requests {
            let params = r.params;
            let levels = params.drawn_levels();
            let mut prompts = Vec::with_capacity(r.n);
            for i in 0..r.n {
                let id = params.first_id.wrapping_add(i as u64);
                let level = levels[i % levels.len()];
                let mut rng = rl_core::rng_from_seed(rl_core::derive_seed(params.seed, id));
                let mut found = None;
                for _ in 0..params.max_draws {
                    let task = match params.family {
                        Family::Countdown => Task::Countdown(params.countdown.generate(level, &mut rng)?),
                        Family::Arithmetic => Task::Arithmetic(params.arithmetic.generate(level, &mut rng)?),
                    };
                    if taken.insert(task.key()) {
                        found = Some(task);
                        break;
                    }
                }
                let task = found.ok_or_else(|| TaskError::LevelExhausted {
                    pool: r.name.to_owned(),
                    level,
                    draws: params.max_draws,
                })?;
                prompts.push(Prompt { id, level, task });
            }
            pools.push(Self { prompts });
        }
        Ok(pools)
    }

    /// How many of this pool's problems also appear in `other` (by [`PromptKey`]).
    pub fn overlap(&self, other: &PromptPool) -> usize {
        let keys: HashSet<PromptKey> = other.iter().map(|p| p.task.key()).collect();
        self.iter().filter(|p| keys.contains(&p.task.key())).count()
    }

    /// Prompts whose problem appears earlier in the same pool (0 for generated pools).
    pub fn duplicates(&self) -> usize {
        let mut seen = HashSet::new();
        self.iter().filter(|p| !seen.insert(p.task.key())).count()
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

impl rl_core::Params for PoolParams {
    type Error = TaskError;

    /// Every field in range; the error names the first bad one.
    fn validate(&self) -> Result<()> {
        self.validate_fields()
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
        assert_eq!(PromptPool::generate(&p, 3), Err(TaskError::LevelOutOfRange { level: 7, levels: 6 }));
        let p = PoolParams::new(Family::Countdown, 0).levels([]);
        assert!(matches!(PromptPool::generate(&p, 3), Err(TaskError::InvalidParameter { .. })));
        assert!(PromptPool::generate(&PoolParams::default(), 0).unwrap().is_empty());
    }

    #[test]
    fn capacity_is_what_the_generator_can_reach() {
        // Exact counts agree with brute force: enough draws find every prompt, and no more.
        let cd = PoolParams::new(Family::Countdown, 0);
        let cap = cd.distinct_prompts(0, u64::MAX).unwrap();
        assert_eq!(cap, Capacity { distinct: 138, exact: true });
        let mut rng = rl_core::rng_from_seed(4);
        let keys: HashSet<PromptKey> =
            (0..20_000).map(|_| Task::Countdown(cd.countdown.generate(0, &mut rng).unwrap()).key()).collect();
        assert_eq!(keys.len(), 138);
        let ar = PoolParams::new(Family::Arithmetic, 0);
        assert_eq!(ar.distinct_prompts(0, 1).unwrap(), Capacity { distinct: 55, exact: true });
        let keys: HashSet<PromptKey> =
            (0..5_000).map(|_| Task::Arithmetic(ar.arithmetic.generate(0, &mut rng).unwrap()).key()).collect();
        assert_eq!(keys.len(), 55);
        // 3-digit x 1-digit: 900 * 10 ordered pairs, all distinct.
        assert_eq!(ar.distinct_prompts(4, 1).unwrap().distinct, 9000);
        // A cap stops the count: "at least".
        assert_eq!(cd.distinct_prompts(5, 500).unwrap(), Capacity { distinct: 500, exact: false });
        assert_eq!(cd.distinct_prompts(5, 500).unwrap().to_string(), ">= 500");
    }

    #[test]
    fn canonical_keys_ignore_order() {
        let rules = crate::CountdownRules::default();
        let a = Task::Countdown(crate::CountdownTask::new(vec![3, 5, 2], 16, rules).unwrap());
        let b = Task::Countdown(crate::CountdownTask::new(vec![2, 3, 5], 16, rules).unwrap());
        let c = Task::Countdown(crate::CountdownTask::new(vec![2, 3, 5], 17, rules).unwrap());
        assert_eq!(a.key(), b.key());
        assert_ne!(a.key(), c.key());
        assert_eq!(a.key().as_str(), "countdown:2,3,5>16:");
        let exact = crate::CountdownRules { division: crate::DivisionRule::Exact, ..rules };
        let d = Task::Countdown(crate::CountdownTask::new(vec![2, 3, 5], 16, exact).unwrap());
        assert_ne!(a.key(), d.key());
        let x = Task::Arithmetic(ArithTask::new(39, 12, crate::ArithOp::Add).unwrap());
        let y = Task::Arithmetic(ArithTask::new(12, 39, crate::ArithOp::Add).unwrap());
        let z = Task::Arithmetic(ArithTask::new(39, 12, crate::ArithOp::Sub).unwrap());
        assert_eq!(x.key(), y.key());
        assert_ne!(x.key(), z.key());
    }

    #[test]
    fn disjoint_pools_share_no_problem_and_stay_prefix_stable() {
        let held = PoolParams::new(Family::Countdown, 1).levels([0, 1]);
        let train = PoolParams::new(Family::Countdown, 0).levels([0, 1]);
        let pools = PromptPool::generate_disjoint(&[
            PoolRequest { name: "held-out", params: &held, n: 60 },
            PoolRequest { name: "train", params: &train, n: 160 },
        ])
        .unwrap();
        assert_eq!((pools[0].len(), pools[1].len()), (60, 160));
        assert_eq!(pools[1].overlap(&pools[0]), 0);
        assert_eq!(pools[0].overlap(&pools[1]), 0);
        assert_eq!(pools[0].duplicates() + pools[1].duplicates(), 0);
        // Without the exclusion the same seeds collide on level 0 (138 problems).
        let alone = PromptPool::generate(&train, 160).unwrap();
        assert!(alone.overlap(&pools[0]) > 0);
        assert_eq!(alone.duplicates(), 0);
        let longer = PromptPool::generate(&train, 161).unwrap();
        assert_eq!(alone.prompts(), &longer.prompts()[..160]);
        // 80 level-0 prompts of the held-out pool + 80 of the training pool > 138.
        let err = PromptPool::generate_disjoint(&[
            PoolRequest { name: "held-out", params: &held, n: 160 },
            PoolRequest { name: "train", params: &train, n: 160 },
        ]);
        assert_eq!(err, Err(TaskError::NotEnoughPrompts { level: 0, requested: 160, available: 138 }));
        // A level nearly used up with a single draw per prompt: a typed error, not a loop.
        let mut greedy = PoolParams::new(Family::Countdown, 0).levels([0]);
        greedy.max_draws = 1;
        assert!(matches!(
            PromptPool::generate(&greedy, 130),
            Err(TaskError::LevelExhausted { level: 0, draws: 1, ref pool }) if pool == "pool"
        ));
        greedy.max_draws = 0;
        assert!(matches!(PromptPool::generate(&greedy, 1), Err(TaskError::InvalidParameter { .. })));
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
