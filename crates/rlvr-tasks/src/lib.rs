//! # rlvr-tasks
//!
//! Embedded verifiable tasks for RLVR (reinforcement learning with verifiable rewards), with no
//! libtorch dependency:
//!
//! - [`CountdownTask`]: reach a target from given numbers with `+ - * /` and parentheses
//!   (TinyZero's Countdown, as used by the DPS, MoPPS, LPO and POPO papers), with configurable
//!   [`CountdownRules`] (each number exactly once by default, or at most once; rational or
//!   exact-integer division) and a depth-first [solver](CountdownTask::solve).
//! - [`ArithTask`]: multi-digit `a + b`, `a - b`, `a * b`; difficulty by digits and
//!   [carries](ArithTask::carries).
//! - Deterministic verifiers returning a [`Verdict`]: reward 1 when correct, 0.1 when
//!   well-formed but wrong ([`RewardParams`]), 0 when malformed, always with the reason
//!   ([`Outcome`], [`InvalidReason`], [`MalformedReason`]). Expressions are parsed by a small
//!   recursive-descent parser ([`expr`]) and evaluated in exact, overflow-checked
//!   [`Rational`] arithmetic: no input makes a verifier panic.
//! - Graded generators ([`CountdownParams`], [`ArithParams`]: tables of levels) and seeded,
//!   reproducible pools of prompts with ids and levels ([`PromptPool`], [`PoolParams`]).
//! - [`CharTokenizer`]: a fixed 24-token character vocabulary (digits, operators, parentheses,
//!   `=`, separators, `<pad>`/`<bos>`/`<eos>`) with exact round trips.
//!
//! ```
//! use rlvr_tasks::{CharTokenizer, Family, PoolParams, PromptPool, RewardParams};
//! let pool = PromptPool::generate(&PoolParams::new(Family::Countdown, 0), 10)?;
//! let tok = CharTokenizer::new();
//! for p in &pool {
//!     let prompt_ids = tok.encode_prompt(&p.text())?;     // <bos>3,5,2>16:
//!     let answer = p.task.solve()?;                         // (3+5)*2
//!     let completion = tok.encode_completion(&answer)?;     // ... <eos>
//!     let verdict = p.task.verify_tokens(&tok, &completion, &RewardParams::default());
//!     assert_eq!(verdict.reward, 1.0);
//!     # let _ = prompt_ids;
//! }
//! # Ok::<(), rlvr_tasks::TaskError>(())
//! ```
//!
//! Prompt formats: Countdown `"n1,n2,...>target:"` → an expression such as `"(3+5)*2"`;
//! arithmetic `"a+b="` → the integer. Completions end with `<eos>`; a truncated one (no
//! `<eos>`) is malformed.
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod arithmetic;
pub mod countdown;
pub mod error;
pub mod expr;
pub mod pool;
pub mod rational;
pub mod tokenizer;
pub mod verdict;

pub use arithmetic::{ArithLevel, ArithOp, ArithParams, ArithTask};
pub use countdown::{CountdownLevel, CountdownParams, CountdownRules, CountdownTask, NumberUse};
pub use error::{Result, TaskError};
pub use expr::DivisionRule;
pub use pool::{Capacity, Family, PoolParams, PoolRequest, Prompt, PromptKey, PromptPool, Task};
pub use rational::Rational;
pub use tokenizer::CharTokenizer;
pub use verdict::{InvalidReason, MalformedReason, Outcome, RewardParams, Verdict};

#[cfg(test)]
mod autotraits {
    fn has_autotraits<T: Send + Sync + Sized + Unpin>() {}

    #[test]
    fn public_types_are_send_sync() {
        has_autotraits::<super::PromptPool>();
        has_autotraits::<super::Task>();
        has_autotraits::<super::Verdict>();
        has_autotraits::<super::TaskError>();
        has_autotraits::<super::CharTokenizer>();
        has_autotraits::<super::PoolParams>();
    }
}
