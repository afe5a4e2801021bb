//! Verifier outcomes and rewards.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::rational::Rational;

/// Why a completion is not even a well-formed answer (reward 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MalformedReason {
    /// Nothing but whitespace.
    Empty,
    /// A character outside the task's grammar.
    UnknownChar {
        /// The character.
        ch: char,
        /// Its index (in characters).
        position: usize,
    },
    /// A token where another was required (e.g. an operator where a number must come).
    UnexpectedToken {
        /// The character found.
        found: char,
        /// Its index.
        position: usize,
    },
    /// The text ended where a number or `(` was required.
    UnexpectedEnd,
    /// A `(` that is never closed.
    UnclosedParen {
        /// Index of the `(`.
        position: usize,
    },
    /// A `)` without a matching `(`.
    UnmatchedCloseParen {
        /// Index of the `)`.
        position: usize,
    },
    /// A complete answer followed by more text.
    TrailingInput {
        /// Index where the extra text starts.
        position: usize,
    },
    /// Parentheses nested deeper than the verifier's limit.
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// More characters than the verifier's limit.
    TooLong {
        /// Length of the completion (characters).
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A token sequence without the end-of-sequence token (truncated generation).
    MissingEos,
    /// A special token (BOS, PAD) or an unknown id inside a completion's tokens.
    BadToken {
        /// The id.
        id: i64,
        /// Its index.
        position: usize,
    },
}

/// Why a well-formed answer is not acceptable (reward = format reward).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InvalidReason {
    /// A number that is not among the given numbers.
    NumberNotGiven {
        /// The number used.
        value: i128,
    },
    /// A given number used more often than it was given.
    NumberReused {
        /// The number used.
        value: i128,
    },
    /// Given numbers left unused under the exactly-once rule.
    NumbersUnused {
        /// The unused numbers (with multiplicity).
        values: Vec<i64>,
    },
    /// A literal too large for 128-bit arithmetic.
    NumberTooLarge,
    /// Division by zero.
    DivisionByZero,
    /// A division with a remainder under [`DivisionRule::Exact`](crate::DivisionRule::Exact).
    InexactDivision,
    /// An intermediate value overflowed 128-bit arithmetic.
    Overflow,
}

/// What the verifier concluded about a completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The answer is correct.
    Correct,
    /// Well-formed and valid, but the value is wrong.
    Wrong {
        /// The value the completion evaluates to.
        value: Rational,
    },
    /// Well-formed but breaks a rule of the task.
    Invalid(InvalidReason),
    /// Not a well-formed answer.
    Malformed(MalformedReason),
}

impl Outcome {
    /// Whether the answer is correct.
    pub fn is_correct(&self) -> bool {
        matches!(self, Outcome::Correct)
    }
    /// Whether the answer is well-formed (correct, wrong or invalid).
    pub fn is_well_formed(&self) -> bool {
        !matches!(self, Outcome::Malformed(_))
    }
}

/// Rewards per outcome: `correct` for [`Outcome::Correct`], `format` for [`Outcome::Wrong`]
/// and [`Outcome::Invalid`], 0 for [`Outcome::Malformed`].
///
/// | field | default | source |
/// |---|---|---|
/// | `correct` | 1.0 | TinyZero Countdown `score`, used by DPS, MoPPS, LPO, POPO |
/// | `format` | 0.1 | TinyZero Countdown `format_score` ("0.1 if well-formatted but wrong") |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewardParams {
    /// Reward of a correct answer.
    pub correct: f64,
    /// Reward of a well-formed but wrong or invalid answer.
    pub format: f64,
}

impl Default for RewardParams {
    fn default() -> Self {
        Self { correct: 1.0, format: 0.1 }
    }
}

impl RewardParams {
    /// Binary rewards (the papers' "accuracy"): 1 for correct, 0 otherwise.
    pub fn binary() -> Self {
        Self { correct: 1.0, format: 0.0 }
    }

    /// Sets `correct`.
    #[must_use]
    pub fn correct(mut self, correct: f64) -> Self {
        self.correct = correct;
        self
    }

    /// Sets `format`.
    #[must_use]
    pub fn format(mut self, format: f64) -> Self {
        self.format = format;
        self
    }

    /// The reward of an outcome.
    pub fn reward(&self, outcome: &Outcome) -> f64 {
        match outcome {
            Outcome::Correct => self.correct,
            Outcome::Wrong { .. } | Outcome::Invalid(_) => self.format,
            Outcome::Malformed(_) => 0.0,
        }
    }
}

/// A verifier's verdict: the outcome with its reason and the reward it earns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The reward.
    pub reward: f64,
    /// What the verifier concluded, with the reason when not correct.
    pub outcome: Outcome,
}

impl Verdict {
    /// A verdict with the reward of `outcome` under `rewards`.
    pub fn new(outcome: Outcome, rewards: &RewardParams) -> Self {
        Self { reward: rewards.reward(&outcome), outcome }
    }
    /// Whether the answer is correct.
    pub fn is_correct(&self) -> bool {
        self.outcome.is_correct()
    }
}

impl rl_core::Params for RewardParams {
    type Error = crate::TaskError;

    /// Both rewards finite.
    fn validate(&self) -> Result<()> {
        if !self.correct.is_finite() {
            return Err(invalid("correct", self.correct, "must be finite"));
        }
        if !self.format.is_finite() {
            return Err(invalid("format", self.format, "must be finite"));
        }
        Ok(())
    }
}
