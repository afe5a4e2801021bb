//! Countdown: combine the given numbers with `+ - * /` and parentheses to reach a target.

use std::collections::BTreeMap;

use rand::Rng;
use rl_core::Params;
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result, TaskError};
use crate::expr::{apply, DivisionRule, Expr, Op};
use crate::rational::Rational;
use crate::verdict::{InvalidReason, Outcome, RewardParams, Verdict};

/// Default node budget of [`CountdownTask::solve`]: enough for exhaustive search over 5
/// numbers.
pub const DEFAULT_SOLVER_BUDGET: u64 = 5_000_000;

/// How often each given number may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumberUse {
    /// Every given number exactly once (TinyZero's `validate_equation`, used by the DPS,
    /// MoPPS and POPO Countdown runs).
    #[default]
    ExactlyOnce,
    /// Each given number at most once (the TV game's rule).
    AtMostOnce,
}

/// The rules a Countdown answer is judged by.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `number_use` | `exactly_once` | [`NumberUse`]; TinyZero / DPS / MoPPS / POPO setups |
/// | `division` | `rational` | [`DivisionRule`]; exact fractions, as TinyZero's evaluation computes |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CountdownRules {
    /// Number-use rule.
    pub number_use: NumberUse,
    /// Division rule.
    pub division: DivisionRule,
}

/// A Countdown task: reach `target` from `numbers` under `rules`.
///
/// Prompt text `"n1,n2,...>target:"`; the completion is an expression (grammar in
/// [`crate::expr`]), e.g. `"3,5,2>16:"` → `"(3+5)*2"`.
///
/// Rewards (TinyZero, as in the DPS/MoPPS/LPO/POPO Countdown runs): 1 for a correct expression,
/// [`RewardParams::format`] (0.1) for a well-formed one that is wrong or breaks a rule (numbers
/// not given, reused, unused under exactly-once, division by zero, overflow), 0 when it does
/// not parse.
///
/// ```
/// use rlvr_tasks::{CountdownTask, CountdownRules, Outcome, RewardParams, InvalidReason};
/// let t = CountdownTask::new(vec![3, 5, 2], 16, CountdownRules::default())?;
/// assert_eq!(t.prompt(), "3,5,2>16:");
/// let r = RewardParams::default();
/// assert_eq!(t.verify("(3+5)*2", &r).reward, 1.0);
/// assert_eq!(t.verify("3+5+2", &r).reward, 0.1);             // wrong value
/// assert_eq!(t.judge("(3+3)*2"), Outcome::Invalid(InvalidReason::NumberReused { value: 3 }));
/// assert_eq!(t.verify("(3+5*2", &r).reward, 0.0);            // malformed
/// let s = t.solve(rlvr_tasks::countdown::DEFAULT_SOLVER_BUDGET)?;
/// assert!(t.verify(&s, &r).is_correct());
/// # Ok::<(), rlvr_tasks::TaskError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountdownTask {
    /// The given numbers (positive).
    pub numbers: Vec<i64>,
    /// The target.
    pub target: i64,
    /// The rules.
    pub rules: CountdownRules,
}

impl CountdownTask {
    /// A task; the numbers must be positive and there must be 1 to 8 of them.
    ///
    /// # Errors
    /// [`TaskError::InvalidParameter`] otherwise.
    pub fn new(numbers: Vec<i64>, target: i64, rules: CountdownRules) -> Result<Self> {
        if numbers.is_empty() || numbers.len() > 8 {
            return Err(invalid("numbers", format!("{numbers:?}"), "must hold 1 to 8 numbers"));
        }
        if let Some(n) = numbers.iter().find(|n| **n < 1) {
            return Err(invalid("numbers", n, "numbers must be positive"));
        }
        Ok(Self { numbers, target, rules })
    }

    /// The prompt text, `"n1,n2,...>target:"`.
    pub fn prompt(&self) -> String {
        let nums: Vec<String> = self.numbers.iter().map(i64::to_string).collect();
        format!("{}>{}:", nums.join(","), self.target)
    }

    /// The same problem with its numbers in ascending order: `"3,5,2>16:"` and `"2,3,5>16:"`
    /// pose one problem, so they share this canonical form (what keeps a held-out pool free
    /// of training prompts, see [`crate::PromptKey`]).
    pub fn canonical(&self) -> Self {
        let mut numbers = self.numbers.clone();
        numbers.sort_unstable();
        Self { numbers, target: self.target, rules: self.rules }
    }

    /// The outcome of a completion (an expression), with the reason when not correct. Never
    /// panics, whatever the text.
    pub fn judge(&self, completion: &str) -> Outcome {
        let expr = match Expr::parse(completion) {
            Ok(e) => e,
            Err(reason) => return Outcome::Malformed(reason),
        };
        let mut available: BTreeMap<i64, usize> = BTreeMap::new();
        for n in &self.numbers {
            *available.entry(*n).or_default() += 1;
        }
        for lit in expr.literals() {
            let Some(value) = lit else {
                return Outcome::Invalid(InvalidReason::NumberTooLarge);
            };
            match i64::try_from(value).ok().and_then(|v| available.get_mut(&v)) {
                Some(0) => return Outcome::Invalid(InvalidReason::NumberReused { value }),
                Some(c) => *c -= 1,
                None => return Outcome::Invalid(InvalidReason::NumberNotGiven { value }),
            }
        }
        if self.rules.number_use == NumberUse::ExactlyOnce {
            let unused: Vec<i64> = available.iter().flat_map(|(v, c)| std::iter::repeat_n(*v, *c)).collect();
            if !unused.is_empty() {
                return Outcome::Invalid(InvalidReason::NumbersUnused { values: unused });
            }
        }
        match expr.eval(self.rules.division) {
            Err(reason) => Outcome::Invalid(reason),
            Ok(v) if v == Rational::from(self.target) => Outcome::Correct,
            Ok(value) => Outcome::Wrong { value },
        }
    }

    /// The verdict (outcome and reward) of a completion.
    pub fn verify(&self, completion: &str, rewards: &RewardParams) -> Verdict {
        Verdict::new(self.judge(completion), rewards)
    }

    /// A correct expression, found by exhaustive depth-first search over pairwise
    /// combinations (`+`, `*`, and both orders of `-` and `/`), with minimal parentheses.
    ///
    /// # Errors
    /// [`TaskError::NoSolution`] when none exists, [`TaskError::SearchBudgetExceeded`] after
    /// `budget` combinations.
    pub fn solve(&self, budget: u64) -> Result<String> {
        self.solve_counting(budget).map(|(s, _)| s)
    }

    /// As [`solve`](Self::solve), also returning the number of combinations tried (a measure
    /// of the search difficulty).
    ///
    /// # Errors
    /// As [`solve`](Self::solve).
    pub fn solve_counting(&self, budget: u64) -> Result<(String, u64)> {
        let mut s = Solver {
            target: Rational::from(self.target),
            rules: self.rules,
            arena: self.numbers.iter().map(|n| Node::Leaf(*n)).collect(),
            nodes: 0,
            budget,
        };
        let items: Vec<(Rational, usize)> =
            self.numbers.iter().enumerate().map(|(i, n)| (Rational::from(*n), i)).collect();
        match s.dfs(&items) {
            Ok(Some(root)) => Ok((s.render(root).0, s.nodes)),
            Ok(None) => Err(TaskError::NoSolution { task: self.prompt() }),
            Err(()) => Err(TaskError::SearchBudgetExceeded { task: self.prompt(), nodes: s.nodes }),
        }
    }
}

impl CountdownTask {
    /// Fraction of all ways to combine **every** number (ordered pair choices, each of the six
    /// operator orders, valid under [`CountdownRules::division`]) that reach the target: the
    /// chance that a uniformly random full combination is correct. Lower is harder; the
    /// default levels are graded so that its mean falls with the level.
    ///
    /// # Errors
    /// [`TaskError::SearchBudgetExceeded`] when the enumeration would take more than `budget`
    /// combinations (4 numbers take 3 888, 5 numbers 233 280).
    pub fn solution_density(&self, budget: u64) -> Result<f64> {
        fn walk(items: &[Rational], rule: DivisionRule, target: Rational, seen: &mut (u64, u64), budget: u64) -> bool {
            if items.len() == 1 {
                seen.0 += 1;
                seen.1 += u64::from(items[0] == target);
                return true;
            }
            for i in 0..items.len() {
                for j in (i + 1)..items.len() {
                    let rest: Vec<Rational> =
                        items.iter().enumerate().filter(|(k, _)| *k != i && *k != j).map(|(_, x)| *x).collect();
                    let (a, b) = (items[i], items[j]);
                    for (op, l, r) in [
                        (Op::Add, a, b),
                        (Op::Mul, a, b),
                        (Op::Sub, a, b),
                        (Op::Sub, b, a),
                        (Op::Div, a, b),
                        (Op::Div, b, a),
                    ] {
                        if seen.0 > budget {
                            return false;
                        }
                        let Ok(v) = apply(op, l, r, rule) else { continue };
                        let mut next = rest.clone();
                        next.push(v);
                        if !walk(&next, rule, target, seen, budget) {
                            return false;
                        }
                    }
                }
            }
            true
        }
        let items: Vec<Rational> = self.numbers.iter().map(|n| Rational::from(*n)).collect();
        let mut seen = (0u64, 0u64);
        if !walk(&items, self.rules.division, Rational::from(self.target), &mut seen, budget) {
            return Err(TaskError::SearchBudgetExceeded { task: self.prompt(), nodes: seen.0 });
        }
        Ok(if seen.0 == 0 { 0.0 } else { seen.1 as f64 / seen.0 as f64 })
    }
}

#[derive(Debug, Clone, Copy)]
enum Node {
    Leaf(i64),
    Bin(Op, usize, usize),
}

struct Solver {
    target: Rational,
    rules: CountdownRules,
    arena: Vec<Node>,
    nodes: u64,
    budget: u64,
}

impl Solver {
    /// `Ok(Some(node))` on success, `Ok(None)` when this branch has no solution, `Err` when
    /// the budget is spent.
    fn dfs(&mut self, items: &[(Rational, usize)]) -> Result<Option<usize>, ()> {
        match self.rules.number_use {
            NumberUse::AtMostOnce => {
                if let Some(&(_, node)) = items.iter().find(|(v, _)| *v == self.target) {
                    return Ok(Some(node));
                }
            }
            NumberUse::ExactlyOnce => {
                if items.len() == 1 {
                    return Ok((items[0].0 == self.target).then_some(items[0].1));
                }
            }
        }
        let n = items.len();
        for i in 0..n {
            for j in (i + 1)..n {
                let (a, b) = (items[i], items[j]);
                let rest: Vec<(Rational, usize)> =
                    items.iter().enumerate().filter(|(k, _)| *k != i && *k != j).map(|(_, x)| *x).collect();
                for (op, l, r) in [
                    (Op::Add, a, b),
                    (Op::Mul, a, b),
                    (Op::Sub, a, b),
                    (Op::Sub, b, a),
                    (Op::Div, a, b),
                    (Op::Div, b, a),
                ] {
                    let Ok(value) = apply(op, l.0, r.0, self.rules.division) else {
                        continue;
                    };
                    self.nodes += 1;
                    if self.nodes > self.budget {
                        return Err(());
                    }
                    let mark = self.arena.len();
                    self.arena.push(Node::Bin(op, l.1, r.1));
                    let mut next = rest.clone();
                    next.push((value, mark));
                    if let Some(found) = self.dfs(&next)? {
                        return Ok(Some(found));
                    }
                    self.arena.truncate(mark);
                }
            }
        }
        Ok(None)
    }

    /// Text and precedence (3 for a literal) of a node, with minimal parentheses.
    fn render(&self, node: usize) -> (String, u8) {
        match self.arena[node] {
            Node::Leaf(v) => (v.to_string(), 3),
            Node::Bin(op, l, r) => {
                let (ls, lp) = self.render(l);
                let (rs, rp) = self.render(r);
                let p = op.precedence();
                let ls = if lp < p { format!("({ls})") } else { ls };
                let non_commutative = matches!(op, Op::Sub | Op::Div);
                let rs = if rp < p || (rp == p && non_commutative) { format!("({rs})") } else { rs };
                (format!("{ls}{}{rs}", op.symbol()), p)
            }
        }
    }
}

/// One difficulty level of the Countdown generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountdownLevel {
    /// How many numbers are given.
    pub numbers: usize,
    /// Numbers are drawn uniformly from `1..=max_number`.
    pub max_number: i64,
    /// Targets lie in `1..=max_target`.
    pub max_target: i64,
}

/// Generator of Countdown tasks of graded difficulty.
///
/// A task is made by drawing the level's numbers and combining all of them at random (random
/// pairs, random operators, positive integer intermediates: subtraction larger minus smaller,
/// division only when exact) until the result lies in `1..=max_target`; every generated task is
/// therefore solvable under either [`NumberUse`] and either [`DivisionRule`].
///
/// Default levels, graded by the mean [`solution_density`](CountdownTask::solution_density)
/// (chance that a random combination of all numbers is correct; mean over 150 tasks per
/// level, seed 2, printed by the `grading_report` test), with the number of distinct prompts
/// each can produce ([`distinct_prompts`](CountdownParams::distinct_prompts); prompts are
/// counted up to the order of their numbers). Levels 3 and 5 have the shapes of TinyZero's
/// Countdown-3 and Countdown-4 (numbers up to 99, targets up to 99).
///
/// | level | numbers | range | targets | mean density | distinct prompts |
/// |---|---|---|---|---|---|
/// | 0 | 2 | 1–9 | 1–99 | 0.19 | 138 |
/// | 1 | 2 | 1–30 | 1–99 | 0.17 | 1 129 |
/// | 2 | 3 | 1–9 | 1–99 | 0.049 | 2 144 |
/// | 3 | 3 | 1–99 | 1–99 | 0.043 | 643 542 |
/// | 4 | 4 | 1–9 | 1–99 | 0.016 | 22 786 |
/// | 5 | 4 | 1–99 | 1–99 | 0.0092 | ≥ 2 000 000 |
///
/// | field | default | meaning |
/// |---|---|---|
/// | `levels` | table above | the levels |
/// | `rules` | [`CountdownRules::default`] | rules stored in each task |
/// | `max_attempts` | 10 000 | draws before [`TaskError::GenerationFailed`] |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CountdownParams {
    /// Difficulty levels, easiest first.
    pub levels: Vec<CountdownLevel>,
    /// Rules of the generated tasks.
    pub rules: CountdownRules,
    /// Attempts per task before giving up.
    pub max_attempts: usize,
}

impl Default for CountdownParams {
    fn default() -> Self {
        let l = |numbers, max_number, max_target| CountdownLevel { numbers, max_number, max_target };
        Self {
            levels: vec![l(2, 9, 99), l(2, 30, 99), l(3, 9, 99), l(3, 99, 99), l(4, 9, 99), l(4, 99, 99)],
            rules: CountdownRules::default(),
            max_attempts: 10_000,
        }
    }
}

impl CountdownParams {
    fn validate_fields(&self) -> Result<()> {
        if self.levels.is_empty() {
            return Err(invalid("levels", "[]", "at least one level is required"));
        }
        for (i, l) in self.levels.iter().enumerate() {
            if !(1..=6).contains(&l.numbers) {
                return Err(invalid(&format!("levels[{i}].numbers"), l.numbers, "must be in 1..=6"));
            }
            if !(1..=9999).contains(&l.max_number) {
                return Err(invalid(&format!("levels[{i}].max_number"), l.max_number, "must be in 1..=9999"));
            }
            if !(1..=1_000_000).contains(&l.max_target) {
                return Err(invalid(&format!("levels[{i}].max_target"), l.max_target, "must be in 1..=1000000"));
            }
        }
        if self.max_attempts == 0 {
            return Err(invalid("max_attempts", 0, "must be at least 1"));
        }
        Ok(())
    }

    /// A random task of difficulty `level`.
    ///
    /// # Errors
    /// [`TaskError::LevelOutOfRange`], [`TaskError::GenerationFailed`], and the errors of
    /// [`validate`](rl_core::Params::validate).
    pub fn generate<R: Rng + ?Sized>(&self, level: usize, rng: &mut R) -> Result<CountdownTask> {
        self.validate()?;
        let l = *self.levels.get(level).ok_or(TaskError::LevelOutOfRange { level, levels: self.levels.len() })?;
        for _ in 0..self.max_attempts {
            let numbers: Vec<i64> = (0..l.numbers).map(|_| rng.random_range(1..=l.max_number)).collect();
            if let Some(target) = random_combination(&numbers, rng) {
                if (1..=l.max_target).contains(&target) {
                    return CountdownTask::new(numbers, target, self.rules);
                }
            }
        }
        Err(TaskError::GenerationFailed { level, attempts: self.max_attempts })
    }
}

impl CountdownParams {
    /// How many distinct prompts (tasks up to the order of their numbers) the generator can
    /// produce at `level`: every multiset of `numbers` values in `1..=max_number` times every
    /// target in `1..=max_target` that some combination of all of them reaches with the
    /// generator's operators. Counting stops once `cap` is reached (then
    /// [`Capacity::exact`](crate::Capacity::exact) is `false`: "at least `cap`"), so large
    /// levels cost no more than small ones.
    ///
    /// ```
    /// use rlvr_tasks::CountdownParams;
    /// let p = CountdownParams::default();
    /// let c = p.distinct_prompts(0, u64::MAX)?;   // two numbers from 1-9
    /// assert!(c.exact && c.distinct < 400);
    /// assert!(!p.distinct_prompts(4, 1000)?.exact); // four numbers from 1-99: at least 1000
    /// # Ok::<(), rlvr_tasks::TaskError>(())
    /// ```
    ///
    /// # Errors
    /// [`TaskError::LevelOutOfRange`] and the errors of [`validate`](rl_core::Params::validate).
    pub fn distinct_prompts(&self, level: usize, cap: u64) -> Result<crate::Capacity> {
        self.validate()?;
        let l = *self.levels.get(level).ok_or(TaskError::LevelOutOfRange { level, levels: self.levels.len() })?;
        let mut count = 0u64;
        let mut numbers = Vec::with_capacity(l.numbers);
        let mut targets = std::collections::HashSet::new();
        let complete = multisets(&mut numbers, l.numbers, 1, l.max_number, &mut |ms| {
            targets.clear();
            reachable(ms, &mut targets);
            count += targets.iter().filter(|t| (1..=l.max_target).contains(*t)).count() as u64;
            count < cap
        });
        Ok(crate::Capacity { distinct: count.min(cap), exact: complete && count < cap })
    }
}

/// Calls `f` on every non-decreasing sequence of `len` values in `lo..=hi` extending `prefix`;
/// stops (returning `false`) as soon as `f` returns `false`.
fn multisets(prefix: &mut Vec<i64>, len: usize, lo: i64, hi: i64, f: &mut dyn FnMut(&[i64]) -> bool) -> bool {
    if prefix.len() == len {
        return f(prefix);
    }
    for v in lo..=hi {
        prefix.push(v);
        let go_on = multisets(prefix, len, v, hi, f);
        prefix.pop();
        if !go_on {
            return false;
        }
    }
    true
}

/// Every value [`random_combination`] can return for `numbers`.
fn reachable(numbers: &[i64], out: &mut std::collections::HashSet<i64>) {
    if let [single] = numbers {
        out.insert(*single);
        return;
    }
    for i in 0..numbers.len() {
        for j in (i + 1)..numbers.len() {
            let (a, b) = (numbers[i], numbers[j]);
            let (hi, lo) = (a.max(b), a.min(b));
            let mut next: Vec<i64> =
                numbers.iter().enumerate().filter(|(k, _)| *k != i && *k != j).map(|(_, x)| *x).collect();
            for v in [
                a.checked_add(b),
                (hi > lo).then(|| hi - lo),
                a.checked_mul(b),
                (lo > 1 && hi % lo == 0).then(|| hi / lo),
            ]
            .into_iter()
            .flatten()
            {
                next.push(v);
                reachable(&next, out);
                next.pop();
            }
        }
    }
}

/// Combines all `numbers` with random operators into a positive integer, or `None` when a
/// random choice fails (zero difference, inexact division, overflow).
fn random_combination<R: Rng + ?Sized>(numbers: &[i64], rng: &mut R) -> Option<i64> {
    let mut items = numbers.to_vec();
    while items.len() > 1 {
        let i = rng.random_range(0..items.len());
        let a = items.swap_remove(i);
        let j = rng.random_range(0..items.len());
        let b = items.swap_remove(j);
        let (hi, lo) = (a.max(b), a.min(b));
        let v = match rng.random_range(0..4) {
            0 => a.checked_add(b)?,
            1 => (hi > lo).then(|| hi - lo)?,
            2 => a.checked_mul(b)?,
            _ => (lo > 1 && hi % lo == 0).then(|| hi / lo)?,
        };
        items.push(v);
    }
    items.first().copied()
}

impl rl_core::Params for CountdownParams {
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

    fn task(numbers: &[i64], target: i64) -> CountdownTask {
        CountdownTask::new(numbers.to_vec(), target, CountdownRules::default()).unwrap()
    }

    #[test]
    fn verdicts_and_rewards() {
        let t = task(&[3, 5, 2], 16);
        let r = RewardParams::default();
        assert_eq!(t.judge("(3+5)*2"), Outcome::Correct);
        assert_eq!(t.judge("2*(5+3)"), Outcome::Correct);
        assert_eq!(t.judge(" ( 3 + 5 ) * 2 "), Outcome::Correct);
        assert_eq!(t.judge("3*5+2"), Outcome::Wrong { value: Rational::int(17) });
        assert_eq!(t.verify("3*5+2", &r).reward, 0.1);
        assert_eq!(t.judge("3*5"), Outcome::Invalid(InvalidReason::NumbersUnused { values: vec![2] }));
        assert_eq!(t.judge("3*5*2*3"), Outcome::Invalid(InvalidReason::NumberReused { value: 3 }));
        assert_eq!(t.judge("4*4"), Outcome::Invalid(InvalidReason::NumberNotGiven { value: 4 }));
        assert_eq!(t.verify("4*4", &r).reward, 0.1);
        assert_eq!(t.judge("(3+5*2"), Outcome::Malformed(MalformedReason::UnclosedParen { position: 0 }));
        assert_eq!(t.judge("3+5)*2"), Outcome::Malformed(MalformedReason::UnmatchedCloseParen { position: 3 }));
        assert_eq!(t.judge("(3+5)x2"), Outcome::Malformed(MalformedReason::UnknownChar { ch: 'x', position: 5 }));
        assert_eq!(t.judge(""), Outcome::Malformed(MalformedReason::Empty));
        assert_eq!(t.judge("(3+5)*2=16"), Outcome::Malformed(MalformedReason::UnknownChar { ch: '=', position: 7 }));
        assert_eq!(t.verify("(3+5*2", &r).reward, 0.0);
        assert_eq!(t.verify("(3+5)*2", &RewardParams::binary()).reward, 1.0);
        assert_eq!(t.verify("3*5+2", &RewardParams::binary()).reward, 0.0);
    }

    #[test]
    fn division_rules_and_hazards() {
        let t = task(&[5, 5, 2], 0);
        assert_eq!(t.judge("2/(5-5)"), Outcome::Invalid(InvalidReason::DivisionByZero));
        let t = task(&[6, 4, 2], 3);
        assert_eq!(t.judge("6/4*2"), Outcome::Correct);
        let exact = CountdownTask::new(
            vec![6, 4, 2],
            3,
            CountdownRules { division: DivisionRule::Exact, ..Default::default() },
        )
        .unwrap();
        assert_eq!(exact.judge("6/4*2"), Outcome::Invalid(InvalidReason::InexactDivision));
        let big = "9".repeat(60);
        assert_eq!(t.judge(&format!("{big}*2")), Outcome::Invalid(InvalidReason::NumberTooLarge));
        let t = task(&[999_999_999_999, 999_999_999_999, 999_999_999_999, 999_999_999_999], 1);
        let e = "999999999999*999999999999*999999999999*999999999999";
        assert_eq!(t.judge(e), Outcome::Invalid(InvalidReason::Overflow));
        // numbers outside i64 are "not given"
        let t = task(&[3], 3);
        assert_eq!(
            t.judge("99999999999999999999"),
            Outcome::Invalid(InvalidReason::NumberNotGiven { value: 99_999_999_999_999_999_999 })
        );
    }

    #[test]
    fn at_most_once_rule() {
        let rules = CountdownRules { number_use: NumberUse::AtMostOnce, ..Default::default() };
        let t = CountdownTask::new(vec![3, 5, 2, 7], 15, rules).unwrap();
        assert_eq!(t.judge("3*5"), Outcome::Correct);
        assert_eq!(t.judge("3*5*1"), Outcome::Invalid(InvalidReason::NumberNotGiven { value: 1 }));
        let s = t.solve(DEFAULT_SOLVER_BUDGET).unwrap();
        assert!(t.judge(&s).is_correct(), "{s}");
        let t = CountdownTask::new(vec![3, 7], 7, rules).unwrap();
        assert_eq!(t.solve(100).unwrap(), "7");
    }

    #[test]
    fn solver_handles_hard_and_impossible_tasks() {
        let t = task(&[1, 1], 7);
        assert!(matches!(t.solve(DEFAULT_SOLVER_BUDGET), Err(TaskError::NoSolution { .. })));
        // needs a fraction: 8 / (3 - 8/3) = 24
        let t = task(&[8, 3, 8, 3], 24);
        let s = t.solve(DEFAULT_SOLVER_BUDGET).unwrap();
        assert_eq!(t.judge(&s), Outcome::Correct, "{s}");
        let t = task(&[1, 2, 3, 4, 5, 6], 999_983);
        assert!(matches!(t.solve(1000), Err(TaskError::SearchBudgetExceeded { nodes: 1001, .. })));
        // minimal parentheses, still correct: a - (b - c), a / (b * c)
        let t = task(&[10, 7, 2], 5);
        assert!(t.judge(&t.solve(DEFAULT_SOLVER_BUDGET).unwrap()).is_correct());
        let t = task(&[100, 5, 2], 10);
        assert!(t.judge(&t.solve(DEFAULT_SOLVER_BUDGET).unwrap()).is_correct());
    }

    #[test]
    fn params_check() {
        assert!(CountdownParams::default().check().is_ok());
        let mut p = CountdownParams::default();
        p.levels[1].numbers = 7;
        assert!(matches!(p.check(), Err(TaskError::InvalidParameter { ref name, .. }) if name == "levels[1].numbers"));
        let mut rng = rl_core::rng_from_seed(0);
        assert_eq!(
            CountdownParams::default().generate(9, &mut rng),
            Err(TaskError::LevelOutOfRange { level: 9, levels: 6 })
        );
        let p = CountdownParams {
            levels: vec![CountdownLevel { numbers: 3, max_number: 1, max_target: 99 }],
            max_attempts: 50,
            ..Default::default()
        };
        // 1,1,1 combine to at most 3 with the generator's operators... but target 3 works: check
        // an impossible range instead.
        let p2 =
            CountdownParams { levels: vec![CountdownLevel { numbers: 1, max_number: 5, max_target: 99 }], ..p.clone() };
        assert!(p2.generate(0, &mut rng).is_ok());
        let p3 = CountdownParams { levels: vec![CountdownLevel { numbers: 2, max_number: 1, max_target: 1 }], ..p };
        // 1+1 = 2, 1*1 = 1: reachable
        assert_eq!(p3.generate(0, &mut rng).map(|t| t.target), Ok(1));
    }
}
