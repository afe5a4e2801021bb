//! Exact rational arithmetic with overflow checks.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

/// An exact rational number `num / den` in lowest terms with `den > 0`, on `i128`.
///
/// Every operation is checked: `None` on overflow or division by zero, never a panic. The
/// verifiers use it so that `6/4*2 = 3` holds exactly (no float equality surprises).
///
/// ```
/// use rlvr_tasks::Rational;
/// let x = Rational::int(6).checked_div(Rational::int(4)).and_then(|q| q.checked_mul(Rational::int(2)));
/// assert_eq!(x, Some(Rational::int(3)));
/// assert_eq!(Rational::int(1).checked_div(Rational::int(0)), None);
/// assert_eq!(Rational::new(6, -4).map(|r| r.to_string()), Some("-3/2".to_string()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rational {
    num: i128,
    den: i128,
}

fn gcd(a: u128, b: u128) -> u128 {
    let (mut a, mut b) = (a, b);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Rational {
    /// The integer `n`.
    pub const fn int(n: i128) -> Self {
        Self { num: n, den: 1 }
    }

    /// `num / den` in lowest terms; `None` when `den == 0` or the normalisation overflows.
    pub fn new(num: i128, den: i128) -> Option<Self> {
        if den == 0 {
            return None;
        }
        let g = gcd(num.unsigned_abs(), den.unsigned_abs());
        // g >= 1 because den != 0; g divides both, so the quotients fit unless g == 1 and a
        // value is i128::MIN with a negative denominator (handled by checked_neg below).
        let g = i128::try_from(g).ok()?;
        let (mut n, mut d) = (num / g, den / g);
        if d < 0 {
            n = n.checked_neg()?;
            d = d.checked_neg()?;
        }
        Some(Self { num: n, den: d })
    }

    /// Numerator (sign carrier).
    pub const fn numer(self) -> i128 {
        self.num
    }
    /// Denominator (> 0).
    pub const fn denom(self) -> i128 {
        self.den
    }
    /// Whether the value is an integer.
    pub const fn is_integer(self) -> bool {
        self.den == 1
    }
    /// The value as an integer, if it is one.
    pub const fn to_integer(self) -> Option<i128> {
        if self.den == 1 {
            Some(self.num)
        } else {
            None
        }
    }
    /// Whether the value is zero.
    pub const fn is_zero(self) -> bool {
        self.num == 0
    }

    /// `self + rhs`, `None` on overflow.
    pub fn checked_add(self, rhs: Self) -> Option<Self> {
        let n = self.num.checked_mul(rhs.den)?.checked_add(rhs.num.checked_mul(self.den)?)?;
        Self::new(n, self.den.checked_mul(rhs.den)?)
    }
    /// `self - rhs`, `None` on overflow.
    pub fn checked_sub(self, rhs: Self) -> Option<Self> {
        self.checked_add(Self { num: rhs.num.checked_neg()?, den: rhs.den })
    }
    /// `self * rhs`, `None` on overflow.
    pub fn checked_mul(self, rhs: Self) -> Option<Self> {
        Self::new(self.num.checked_mul(rhs.num)?, self.den.checked_mul(rhs.den)?)
    }
    /// `self / rhs`, `None` on overflow or when `rhs` is zero.
    pub fn checked_div(self, rhs: Self) -> Option<Self> {
        if rhs.num == 0 {
            return None;
        }
        Self::new(self.num.checked_mul(rhs.den)?, self.den.checked_mul(rhs.num)?)
    }
}

impl PartialOrd for Rational {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Rational {
    fn cmp(&self, other: &Self) -> Ordering {
        // Compare a/b with c/d (b, d > 0) as a*d with c*b, widening through f64 only if the
        // exact products overflow (then the magnitudes differ enough for f64 to order them,
        // except in astronomically rare ties we break by numerator).
        match (self.num.checked_mul(other.den), other.num.checked_mul(self.den)) {
            (Some(l), Some(r)) => l.cmp(&r),
            _ => {
                let l = self.num as f64 / self.den as f64;
                let r = other.num as f64 / other.den as f64;
                l.partial_cmp(&r).unwrap_or(Ordering::Equal).then(self.num.cmp(&other.num))
            }
        }
    }
}

impl fmt::Display for Rational {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

impl From<i64> for Rational {
    fn from(n: i64) -> Self {
        Self::int(i128::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_checked() {
        let half = Rational::new(1, 2).unwrap();
        assert_eq!(half.checked_add(half), Some(Rational::int(1)));
        assert_eq!(Rational::new(2, 4), Some(half));
        assert_eq!(Rational::new(1, 0), None);
        assert_eq!(Rational::int(i128::MAX).checked_add(Rational::int(1)), None);
        assert_eq!(Rational::int(i128::MIN).checked_mul(Rational::int(-1)), None);
        assert_eq!(Rational::new(i128::MIN, -1), None);
        assert_eq!(Rational::int(i128::MIN).checked_sub(Rational::int(1)), None);
        assert!(Rational::new(1, 3).unwrap() < half);
        assert_eq!(Rational::new(-3, 6).unwrap().to_string(), "-1/2");
        let third = Rational::new(1, 3).unwrap();
        assert_eq!(third.checked_mul(Rational::int(3)).and_then(Rational::to_integer), Some(1));
    }
}
