//! A small recursive-descent parser and exact evaluator for arithmetic expressions.
//!
//! Grammar (spaces are ignored between tokens):
//!
//! ```text
//! expr   := term   (('+' | '-') term)*
//! term   := factor (('*' | '/') factor)*
//! factor := NUMBER | '(' expr ')'
//! NUMBER := [0-9]+
//! ```
//!
//! There is no unary minus (Countdown combines the given, positive numbers with binary
//! operators). Operators are left-associative; `*` and `/` bind tighter than `+` and `-`.

use serde::{Deserialize, Serialize};

use crate::rational::Rational;
use crate::verdict::{InvalidReason, MalformedReason};

/// Longest expression accepted (characters); bounds the evaluator's recursion.
pub const MAX_EXPR_CHARS: usize = 1024;
/// Deepest parenthesis nesting accepted.
pub const MAX_PAREN_DEPTH: usize = 64;

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl Op {
    /// The operator's character.
    pub fn symbol(self) -> char {
        match self {
            Op::Add => '+',
            Op::Sub => '-',
            Op::Mul => '*',
            Op::Div => '/',
        }
    }
    /// Binding strength: 1 for `+ -`, 2 for `* /`.
    pub fn precedence(self) -> u8 {
        match self {
            Op::Add | Op::Sub => 1,
            Op::Mul | Op::Div => 2,
        }
    }
    fn from_char(c: char) -> Option<Self> {
        match c {
            '+' => Some(Op::Add),
            '-' => Some(Op::Sub),
            '*' => Some(Op::Mul),
            '/' => Some(Op::Div),
            _ => None,
        }
    }
}

/// How division is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DivisionRule {
    /// Exact rational division, so intermediate fractions are allowed (`6/4*2 = 3`). This is
    /// what TinyZero's float evaluation computes (without its rounding).
    #[default]
    Rational,
    /// Every division must leave no remainder (the classic "numbers round" rule); a
    /// remainder makes the answer [`InvalidReason::InexactDivision`].
    Exact,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A literal; `None` when it does not fit in `i128`.
    Num(Option<i128>),
    /// A binary operation.
    Bin(Op, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Parses `text` with the grammar of the module docs.
    ///
    /// ```
    /// use rlvr_tasks::expr::{Expr, DivisionRule};
    /// use rlvr_tasks::Rational;
    /// let e = Expr::parse("(3 + 5) * 2")?;
    /// assert_eq!(e.eval(DivisionRule::Rational), Ok(Rational::int(16)));
    /// assert!(Expr::parse("(3+5").is_err());
    /// # Ok::<(), rlvr_tasks::MalformedReason>(())
    /// ```
    ///
    /// # Errors
    /// The [`MalformedReason`] of the first problem found.
    pub fn parse(text: &str) -> Result<Self, MalformedReason> {
        let len = text.chars().count();
        if len > MAX_EXPR_CHARS {
            return Err(MalformedReason::TooLong { len, limit: MAX_EXPR_CHARS });
        }
        let toks = lex(text)?;
        if toks.is_empty() {
            return Err(MalformedReason::Empty);
        }
        let mut p = Parser { toks, i: 0, depth: 0 };
        let e = p.expr()?;
        match p.toks.get(p.i) {
            None => Ok(e),
            Some(Tok { kind: Kind::RParen, position, .. }) => {
                Err(MalformedReason::UnmatchedCloseParen { position: *position })
            }
            Some(t) => Err(MalformedReason::TrailingInput { position: t.position }),
        }
    }

    /// Evaluates exactly.
    ///
    /// # Errors
    /// [`InvalidReason::DivisionByZero`], [`InvalidReason::InexactDivision`] (with
    /// [`DivisionRule::Exact`]), [`InvalidReason::Overflow`], [`InvalidReason::NumberTooLarge`].
    pub fn eval(&self, rule: DivisionRule) -> Result<Rational, InvalidReason> {
        match self {
            Expr::Num(Some(v)) => Ok(Rational::int(*v)),
            Expr::Num(None) => Err(InvalidReason::NumberTooLarge),
            Expr::Bin(op, l, r) => apply(*op, l.eval(rule)?, r.eval(rule)?, rule),
        }
    }

    /// The literals in left-to-right order (`None` for one too large for `i128`).
    pub fn literals(&self) -> Vec<Option<i128>> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<Option<i128>>) {
        match self {
            Expr::Num(v) => out.push(*v),
            Expr::Bin(_, l, r) => {
                l.collect(out);
                r.collect(out);
            }
        }
    }
}

/// `l op r` under `rule`.
///
/// # Errors
/// As [`Expr::eval`].
pub fn apply(op: Op, l: Rational, r: Rational, rule: DivisionRule) -> Result<Rational, InvalidReason> {
    match op {
        Op::Add => l.checked_add(r).ok_or(InvalidReason::Overflow),
        Op::Sub => l.checked_sub(r).ok_or(InvalidReason::Overflow),
        Op::Mul => l.checked_mul(r).ok_or(InvalidReason::Overflow),
        Op::Div => {
            if r.is_zero() {
                return Err(InvalidReason::DivisionByZero);
            }
            let q = l.checked_div(r).ok_or(InvalidReason::Overflow)?;
            if rule == DivisionRule::Exact && !(l.is_integer() && r.is_integer() && q.is_integer()) {
                return Err(InvalidReason::InexactDivision);
            }
            Ok(q)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Num(Option<i128>),
    Op(Op),
    LParen,
    RParen,
}

#[derive(Debug, Clone, Copy)]
struct Tok {
    kind: Kind,
    position: usize,
    /// First character of the token (for error messages).
    ch: char,
}

fn lex(text: &str) -> Result<Vec<Tok>, MalformedReason> {
    let mut toks = Vec::new();
    let mut chars = text.chars().enumerate().peekable();
    while let Some((position, c)) = chars.next() {
        let kind = match c {
            ' ' => continue,
            '0'..='9' => {
                let mut v = Some(i128::from(c as u8 - b'0'));
                while let Some(&(_, d @ '0'..='9')) = chars.peek() {
                    v = v.and_then(|v| v.checked_mul(10)).and_then(|v| v.checked_add(i128::from(d as u8 - b'0')));
                    chars.next();
                }
                Kind::Num(v)
            }
            '(' => Kind::LParen,
            ')' => Kind::RParen,
            c => match Op::from_char(c) {
                Some(op) => Kind::Op(op),
                None => return Err(MalformedReason::UnknownChar { ch: c, position }),
            },
        };
        toks.push(Tok { kind, position, ch: c });
    }
    Ok(toks)
}

struct Parser {
    toks: Vec<Tok>,
    i: usize,
    depth: usize,
}

impl Parser {
    fn peek_op(&self, ops: [Op; 2]) -> Option<Op> {
        match self.toks.get(self.i) {
            Some(Tok { kind: Kind::Op(op), .. }) if ops.contains(op) => Some(*op),
            _ => None,
        }
    }

    fn expr(&mut self) -> Result<Expr, MalformedReason> {
        let mut e = self.term()?;
        while let Some(op) = self.peek_op([Op::Add, Op::Sub]) {
            self.i += 1;
            e = Expr::Bin(op, Box::new(e), Box::new(self.term()?));
        }
        Ok(e)
    }

    fn term(&mut self) -> Result<Expr, MalformedReason> {
        let mut e = self.factor()?;
        while let Some(op) = self.peek_op([Op::Mul, Op::Div]) {
            self.i += 1;
            e = Expr::Bin(op, Box::new(e), Box::new(self.factor()?));
        }
        Ok(e)
    }

    fn factor(&mut self) -> Result<Expr, MalformedReason> {
        let Some(&tok) = self.toks.get(self.i) else {
            return Err(MalformedReason::UnexpectedEnd);
        };
        self.i += 1;
        match tok.kind {
            Kind::Num(v) => Ok(Expr::Num(v)),
            Kind::LParen => {
                if self.depth >= MAX_PAREN_DEPTH {
                    return Err(MalformedReason::TooDeep { limit: MAX_PAREN_DEPTH });
                }
                self.depth += 1;
                let e = self.expr()?;
                self.depth -= 1;
                match self.toks.get(self.i) {
                    Some(Tok { kind: Kind::RParen, .. }) => {
                        self.i += 1;
                        Ok(e)
                    }
                    None => Err(MalformedReason::UnclosedParen { position: tok.position }),
                    Some(t) => Err(unexpected(t)),
                }
            }
            Kind::RParen | Kind::Op(_) => Err(unexpected(&tok)),
        }
    }
}

fn unexpected(t: &Tok) -> MalformedReason {
    MalformedReason::UnexpectedToken { found: t.ch, position: t.position }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> Result<Rational, String> {
        Expr::parse(s).map_err(|e| format!("{e:?}"))?.eval(DivisionRule::Rational).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(ev("2+3*4"), Ok(Rational::int(14)));
        assert_eq!(ev("(2+3)*4"), Ok(Rational::int(20)));
        assert_eq!(ev("10-3-2"), Ok(Rational::int(5)));
        assert_eq!(ev("64/4/2"), Ok(Rational::int(8)));
        assert_eq!(ev("6/4*2"), Ok(Rational::int(3)));
        assert_eq!(ev(" ( ( 7 ) ) "), Ok(Rational::int(7)));
        assert_eq!(ev("1/3+1/3+1/3"), Ok(Rational::int(1)));
        assert_eq!(ev("2-5"), Ok(Rational::int(-3)));
    }

    #[test]
    fn malformed_reasons() {
        use MalformedReason::*;
        let p = Expr::parse;
        assert_eq!(p(""), Err(Empty));
        assert_eq!(p("   "), Err(Empty));
        assert_eq!(p("(3+5"), Err(UnclosedParen { position: 0 }));
        assert_eq!(p("3+5)"), Err(UnmatchedCloseParen { position: 3 }));
        assert_eq!(p("3+"), Err(UnexpectedEnd));
        assert_eq!(p("-3"), Err(UnexpectedToken { found: '-', position: 0 }));
        assert_eq!(p("3 4"), Err(TrailingInput { position: 2 }));
        assert_eq!(p("3x4"), Err(UnknownChar { ch: 'x', position: 1 }));
        assert_eq!(p("()"), Err(UnexpectedToken { found: ')', position: 1 }));
        assert_eq!(p("(3 4)"), Err(UnexpectedToken { found: '4', position: 3 }));
        assert_eq!(p("3=3"), Err(UnknownChar { ch: '=', position: 1 }));
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert_eq!(p(&deep), Err(TooDeep { limit: MAX_PAREN_DEPTH }));
        let long = "1+".repeat(600) + "1";
        assert!(matches!(p(&long), Err(TooLong { .. })));
    }

    #[test]
    fn checked_evaluation() {
        let e = |s: &str| Expr::parse(s).unwrap().eval(DivisionRule::Rational);
        assert_eq!(e("1/0"), Err(InvalidReason::DivisionByZero));
        assert_eq!(e("1/(2-2)"), Err(InvalidReason::DivisionByZero));
        assert_eq!(e("99999999999999999999999999999999999999999999"), Err(InvalidReason::NumberTooLarge));
        let huge = "99999999999999999999*".repeat(10) + "9";
        assert_eq!(e(&huge), Err(InvalidReason::Overflow));
        let x = Expr::parse("7/2*2").unwrap();
        assert_eq!(x.eval(DivisionRule::Exact), Err(InvalidReason::InexactDivision));
        assert_eq!(x.eval(DivisionRule::Rational), Ok(Rational::int(7)));
        assert_eq!(Expr::parse("8/2*2").unwrap().eval(DivisionRule::Exact), Ok(Rational::int(8)));
        assert_eq!(Expr::parse("(3+5)*2").unwrap().literals(), vec![Some(3), Some(5), Some(2)]);
    }
}
