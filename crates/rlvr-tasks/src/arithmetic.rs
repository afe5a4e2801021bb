//! Multi-digit arithmetic: `a + b`, `a - b`, `a * b` with a given number of digits.

use rand::Rng;
use rl_core::Params;
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result, TaskError};
use crate::rational::Rational;
use crate::tokenizer::CharTokenizer;
use crate::verdict::{InvalidReason, MalformedReason, Outcome, RewardParams, Verdict};

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArithOp {
    /// `a + b`
    Add,
    /// `a - b` (generated with `a >= b`)
    Sub,
    /// `a * b`
    Mul,
}

impl ArithOp {
    /// The operator's character.
    pub fn symbol(self) -> char {
        match self {
            ArithOp::Add => '+',
            ArithOp::Sub => '-',
            ArithOp::Mul => '*',
        }
    }
}

/// An arithmetic task `a op b`, answered with the decimal result.
///
/// Prompt text `"a+b="`; the completion is the integer, e.g. `"12+39="` → `"51"`. A leading
/// `-` is accepted; nothing else (no spaces). Rewards as Countdown: 1 for the right value,
/// [`RewardParams::format`] for another integer, 0 for anything that is not an integer.
///
/// ```
/// use rlvr_tasks::{ArithOp, ArithTask, RewardParams};
/// let t = ArithTask::new(12, 39, ArithOp::Add)?;
/// assert_eq!(t.prompt(), "12+39=");
/// assert_eq!(t.carries(), 1);
/// let r = RewardParams::default();
/// assert_eq!(t.verify("51", &r).reward, 1.0);
/// assert_eq!(t.verify("41", &r).reward, 0.1);
/// assert_eq!(t.verify("5 1", &r).reward, 0.0);
/// assert_eq!(t.solve(), "51");
/// # Ok::<(), rlvr_tasks::TaskError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArithTask {
    /// Left operand.
    pub a: i64,
    /// Right operand.
    pub b: i64,
    /// Operator.
    pub op: ArithOp,
}

/// Largest operand accepted (9 digits), so every answer fits in `i64`.
pub const MAX_OPERAND: i64 = 999_999_999;

impl ArithTask {
    /// A task; operands must be in `0..=999_999_999`.
    ///
    /// # Errors
    /// [`TaskError::InvalidParameter`] for an operand out of range.
    pub fn new(a: i64, b: i64, op: ArithOp) -> Result<Self> {
        for (name, v) in [("a", a), ("b", b)] {
            if !(0..=MAX_OPERAND).contains(&v) {
                return Err(invalid(name, v, "operands must be in 0..=999999999"));
            }
        }
        Ok(Self { a, b, op })
    }

    /// The prompt text, `"a+b="`.
    pub fn prompt(&self) -> String {
        format!("{}{}{}=", self.a, self.op.symbol(), self.b)
    }

    /// The same problem with the operands of `+` and `*` in ascending order (`"39+12="` and
    /// `"12+39="` pose one problem); `-` is left as it is.
    pub fn canonical(&self) -> Self {
        match self.op {
            ArithOp::Add | ArithOp::Mul => Self { a: self.a.min(self.b), b: self.a.max(self.b), op: self.op },
            ArithOp::Sub => self.clone(),
        }
    }

    /// The correct answer.
    pub fn answer(&self) -> i64 {
        // Operands are at most 9 digits, so none of these overflow.
        match self.op {
            ArithOp::Add => self.a + self.b,
            ArithOp::Sub => self.a - self.b,
            ArithOp::Mul => self.a * self.b,
        }
    }

    /// The correct completion text.
    pub fn solve(&self) -> String {
        self.answer().to_string()
    }

    /// Carries (addition, multiplication) or borrows (subtraction) of the schoolbook method.
    /// For multiplication: carries within each digit-times-number partial product plus carries
    /// when summing the shifted partial products.
    pub fn carries(&self) -> u32 {
        match self.op {
            ArithOp::Add => add_carries(&digits(self.a), &digits(self.b)),
            ArithOp::Sub => {
                let (x, y) = (digits(self.a.max(self.b)), digits(self.a.min(self.b)));
                let (mut borrow, mut n) = (0, 0);
                for (i, xd) in x.iter().enumerate() {
                    let d = xd - y.get(i).copied().unwrap_or(0) - borrow;
                    borrow = i64::from(d < 0);
                    n += borrow as u32;
                }
                n
            }
            ArithOp::Mul => {
                let (x, y) = (digits(self.a), digits(self.b));
                let mut n = 0;
                let mut acc: Vec<i64> = vec![0];
                for (shift, &yd) in y.iter().enumerate() {
                    let mut carry = 0;
                    let mut partial = vec![0; shift];
                    for &xd in &x {
                        let p = xd * yd + carry;
                        carry = p / 10;
                        n += u32::from(carry > 0);
                        partial.push(p % 10);
                    }
                    if carry > 0 {
                        partial.push(carry);
                    }
                    n += add_carries(&acc, &partial);
                    acc = digits(undigits(&acc) + undigits(&partial));
                }
                n
            }
        }
    }

    /// Digit-level work of the schoolbook method: digit operations (`max(digits)` for `+`/`-`,
    /// `digits(a) * digits(b)` for `*`) plus [`carries`](Self::carries). The difficulty
    /// measure the default levels are ordered by.
    pub fn work(&self) -> u32 {
        let (da, db) = (digits(self.a).len() as u32, digits(self.b).len() as u32);
        let ops = match self.op {
            ArithOp::Add | ArithOp::Sub => da.max(db),
            ArithOp::Mul => da * db,
        };
        ops + self.carries()
    }

    /// The outcome of a completion (an integer). Never panics, whatever the text.
    pub fn judge(&self, completion: &str) -> Outcome {
        let tok = CharTokenizer::new();
        let mut value: Option<i128> = Some(0);
        let mut negative = false;
        let mut any_digit = false;
        for (position, ch) in completion.chars().enumerate() {
            match ch {
                '0'..='9' => {
                    any_digit = true;
                    let d = i128::from(ch as u8 - b'0');
                    value = value.and_then(|v| v.checked_mul(10)).and_then(|v| v.checked_add(d));
                }
                '-' if position == 0 => negative = true,
                ch if tok.id_of(ch).is_some() => {
                    return Outcome::Malformed(MalformedReason::UnexpectedToken { found: ch, position })
                }
                ch => return Outcome::Malformed(MalformedReason::UnknownChar { ch, position }),
            }
        }
        if !any_digit {
            return Outcome::Malformed(if negative { MalformedReason::UnexpectedEnd } else { MalformedReason::Empty });
        }
        let Some(v) = value else {
            return Outcome::Invalid(InvalidReason::NumberTooLarge);
        };
        let v = if negative { -v } else { v };
        if v == i128::from(self.answer()) {
            Outcome::Correct
        } else {
            Outcome::Wrong { value: Rational::int(v) }
        }
    }

    /// The verdict (outcome and reward) of a completion.
    pub fn verify(&self, completion: &str, rewards: &RewardParams) -> Verdict {
        Verdict::new(self.judge(completion), rewards)
    }
}

/// Little-endian decimal digits (`[0]` for 0).
fn digits(n: i64) -> Vec<i64> {
    let mut n = n.unsigned_abs();
    let mut out = vec![(n % 10) as i64];
    n /= 10;
    while n > 0 {
        out.push((n % 10) as i64);
        n /= 10;
    }
    out
}

fn undigits(d: &[i64]) -> i64 {
    d.iter().rev().fold(0, |acc, &x| acc * 10 + x)
}

fn add_carries(x: &[i64], y: &[i64]) -> u32 {
    let (mut carry, mut n) = (0, 0);
    for i in 0..x.len().max(y.len()) {
        let s = x.get(i).copied().unwrap_or(0) + y.get(i).copied().unwrap_or(0) + carry;
        carry = s / 10;
        n += carry as u32;
    }
    n
}

/// One difficulty level of the arithmetic generator: operands with exactly `a_digits` and
/// `b_digits` digits (a 1-digit operand is any of 0–9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArithLevel {
    /// Digits of `a`.
    pub a_digits: u32,
    /// Digits of `b`.
    pub b_digits: u32,
    /// Operator.
    pub op: ArithOp,
}

/// Generator of arithmetic tasks of graded difficulty.
///
/// Default levels, ordered by the expected digit-level [`work`](ArithTask::work) (digit
/// operations plus carries), which the tests check is increasing:
///
/// | level | task | mean work | mean carries | distinct prompts ([`distinct_prompts`](ArithParams::distinct_prompts)) |
/// |---|---|---|---|---|
/// | 0 | 1-digit + 1-digit | 1.44 | 0.44 | 55 |
/// | 1 | 2-digit + 2-digit | 3.05 | 1.05 | 4 095 |
/// | 2 | 2-digit × 1-digit | 3.29 | 1.29 | 900 |
/// | 3 | 3-digit + 3-digit | 4.55 | 1.55 | 405 450 |
/// | 4 | 3-digit × 1-digit | 4.85 | 1.85 | 9 000 |
/// | 5 | 4-digit + 4-digit | 5.99 | 1.99 | 40 504 500 |
/// | 6 | 2-digit × 2-digit | 7.30 | 3.30 | 4 095 |
/// | 7 | 3-digit × 2-digit | 11.08 | 5.08 | 81 000 |
///
/// (Means over 2000 draws per level, seed 1; the `grading_report` test prints them.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArithParams {
    /// Difficulty levels, easiest first.
    pub levels: Vec<ArithLevel>,
}

impl Default for ArithParams {
    fn default() -> Self {
        use ArithOp::{Add, Mul};
        let l = |a_digits, b_digits, op| ArithLevel { a_digits, b_digits, op };
        Self {
            levels: vec![
                l(1, 1, Add),
                l(2, 2, Add),
                l(2, 1, Mul),
                l(3, 3, Add),
                l(3, 1, Mul),
                l(4, 4, Add),
                l(2, 2, Mul),
                l(3, 2, Mul),
            ],
        }
    }
}

impl ArithParams {
    fn validate_fields(&self) -> Result<()> {
        if self.levels.is_empty() {
            return Err(invalid("levels", "[]", "at least one level is required"));
        }
        for (i, l) in self.levels.iter().enumerate() {
            for (name, d) in [("a_digits", l.a_digits), ("b_digits", l.b_digits)] {
                if !(1..=9).contains(&d) {
                    return Err(invalid(&format!("levels[{i}].{name}"), d, "must be in 1..=9"));
                }
            }
            if l.op == ArithOp::Sub && l.a_digits < l.b_digits {
                return Err(invalid(
                    &format!("levels[{i}].b_digits"),
                    l.b_digits,
                    "subtraction needs a_digits >= b_digits (answers are non-negative)",
                ));
            }
        }
        Ok(())
    }

    /// How many distinct prompts (up to the order of the operands of `+` and `*`) the
    /// generator can produce at `level`; always exact. With `n_d` the count of `d`-digit
    /// operands (10 for one digit, `9·10^(d−1)` otherwise): `n(n+1)/2` when both operands have
    /// `d` digits, `n_a·n_b` otherwise.
    ///
    /// ```
    /// use rlvr_tasks::ArithParams;
    /// assert_eq!(ArithParams::default().distinct_prompts(0)?.distinct, 55); // 1-digit + 1-digit
    /// # Ok::<(), rlvr_tasks::TaskError>(())
    /// ```
    ///
    /// # Errors
    /// [`TaskError::LevelOutOfRange`] and the errors of [`validate`](rl_core::Params::validate).
    pub fn distinct_prompts(&self, level: usize) -> Result<crate::Capacity> {
        self.validate()?;
        let l = *self.levels.get(level).ok_or(TaskError::LevelOutOfRange { level, levels: self.levels.len() })?;
        let count = |d: u32| if d == 1 { 10u64 } else { 9 * 10u64.pow(d - 1) };
        let (na, nb) = (count(l.a_digits), count(l.b_digits));
        let distinct = if l.a_digits == l.b_digits { na * (na + 1) / 2 } else { na * nb };
        Ok(crate::Capacity { distinct, exact: true })
    }

    /// A random task of difficulty `level`.
    ///
    /// # Errors
    /// [`TaskError::LevelOutOfRange`] and the errors of [`validate`](rl_core::Params::validate).
    pub fn generate<R: Rng + ?Sized>(&self, level: usize, rng: &mut R) -> Result<ArithTask> {
        self.validate()?;
        let l = *self.levels.get(level).ok_or(TaskError::LevelOutOfRange { level, levels: self.levels.len() })?;
        let draw = |d: u32, rng: &mut R| {
            let lo = if d == 1 { 0 } else { 10i64.pow(d - 1) };
            rng.random_range(lo..10i64.pow(d))
        };
        let mut a = draw(l.a_digits, rng);
        let mut b = draw(l.b_digits, rng);
        if l.op == ArithOp::Sub && a < b {
            std::mem::swap(&mut a, &mut b);
        }
        ArithTask::new(a, b, l.op)
    }
}

impl rl_core::Params for ArithParams {
    type Error = TaskError;

    /// Every field in range; the error names the first bad one.
    fn validate(&self) -> Result<()> {
        self.validate_fields()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let t = ArithTask::new(7, 9, ArithOp::Sub).unwrap();
        assert_eq!(t.judge("-2"), Outcome::Correct);
        assert_eq!(t.judge("2"), Outcome::Wrong { value: Rational::int(2) });
        assert_eq!(t.judge(""), Outcome::Malformed(MalformedReason::Empty));
        assert_eq!(t.judge("-"), Outcome::Malformed(MalformedReason::UnexpectedEnd));
        assert_eq!(t.judge("2-"), Outcome::Malformed(MalformedReason::UnexpectedToken { found: '-', position: 1 }));
        assert_eq!(t.judge("1+1"), Outcome::Malformed(MalformedReason::UnexpectedToken { found: '+', position: 1 }));
        assert_eq!(t.judge("1a"), Outcome::Malformed(MalformedReason::UnknownChar { ch: 'a', position: 1 }));
        assert_eq!(t.judge(&"9".repeat(50)), Outcome::Invalid(InvalidReason::NumberTooLarge));
        assert_eq!(t.judge("-0002"), Outcome::Correct);
        let big = ArithTask::new(MAX_OPERAND, MAX_OPERAND, ArithOp::Mul).unwrap();
        assert_eq!(big.judge(&big.solve()), Outcome::Correct);
        assert!(ArithTask::new(-1, 2, ArithOp::Add).is_err());
        assert!(ArithTask::new(1, MAX_OPERAND + 1, ArithOp::Add).is_err());
    }

    #[test]
    fn carries_by_hand() {
        let c = |a, b, op| ArithTask::new(a, b, op).unwrap().carries();
        assert_eq!(c(12, 34, ArithOp::Add), 0);
        assert_eq!(c(99, 1, ArithOp::Add), 2);
        assert_eq!(c(999, 1, ArithOp::Add), 3);
        assert_eq!(c(100, 1, ArithOp::Sub), 2);
        assert_eq!(c(55, 23, ArithOp::Sub), 0);
        // 12 * 3: 2*3 = 6, 1*3 = 3: no carries
        assert_eq!(c(12, 3, ArithOp::Mul), 0);
        // 25 * 4: 5*4 = 20 (carry), 2*4+2 = 10 (carry) -> 2
        assert_eq!(c(25, 4, ArithOp::Mul), 2);
        // 0 * x: nothing
        assert_eq!(c(0, 7, ArithOp::Mul), 0);
    }

    #[test]
    fn params_check() {
        assert!(ArithParams::default().check().is_ok());
        let p = ArithParams { levels: vec![ArithLevel { a_digits: 10, b_digits: 1, op: ArithOp::Add }] };
        assert!(p.check().is_err());
        let p = ArithParams { levels: vec![ArithLevel { a_digits: 1, b_digits: 2, op: ArithOp::Sub }] };
        assert!(p.check().is_err());
        let mut rng = rl_core::rng_from_seed(3);
        let p = ArithParams { levels: vec![ArithLevel { a_digits: 3, b_digits: 3, op: ArithOp::Sub }] };
        for _ in 0..200 {
            let t = p.generate(0, &mut rng).unwrap();
            assert!(t.a >= t.b && (100..1000).contains(&t.a) && (100..1000).contains(&t.b));
        }
    }
}
