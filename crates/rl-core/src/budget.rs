//! A memory budget for readers of untrusted input.
//!
//! A dataset file, a checkpoint or a parameter set can declare sizes (a column of shape
//! `[200, 2^32]`, ten billion impressions) that would make an allocation abort the process.
//! Every reader of the workspace checks the bytes a declared size needs against a
//! [`MemoryBudget`] *before* allocating and returns [`RlCoreError::TooLarge`] naming the input.
//!
//! ```
//! use rl_core::MemoryBudget;
//! let budget = MemoryBudget::bytes(1 << 20);
//! assert_eq!(budget.check_elems("observations", &[1000, 17], 4)?, 17_000);
//! assert!(budget.check_elems("observations", &[200, 1 << 32], 4).is_err());
//! # Ok::<(), rl_core::RlCoreError>(())
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{Result, RlCoreError};

/// The most bytes one reader may allocate for what an input declares.
///
/// The default, [`MemoryBudget::DEFAULT_BYTES`] (16 GiB), admits every D4RL and Minari dataset
/// and every AuctionNet-sized period while refusing sizes no real input has; set it lower on a
/// small machine or higher for a larger dataset. The check is arithmetic on declared sizes
/// only (overflow counts as too large) and costs nothing measurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MemoryBudget(u64);

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget(Self::DEFAULT_BYTES)
    }
}

impl MemoryBudget {
    /// The default budget: 16 GiB.
    pub const DEFAULT_BYTES: u64 = 16 << 30;

    /// A budget of `limit` bytes.
    #[must_use]
    pub const fn bytes(limit: u64) -> Self {
        MemoryBudget(limit)
    }

    /// No limit (every size that fits in `usize` passes; overflow is still an error).
    #[must_use]
    pub const fn unlimited() -> Self {
        MemoryBudget(u64::MAX)
    }

    /// The budget in bytes.
    #[must_use]
    pub const fn limit(self) -> u64 {
        self.0
    }

    /// Checks that `bytes` fit the budget.
    ///
    /// # Errors
    /// [`RlCoreError::TooLarge`] naming `what` when `bytes` exceeds the budget.
    pub fn check_bytes(self, what: &str, bytes: u64) -> Result<()> {
        if bytes > self.0 {
            return Err(RlCoreError::TooLarge { what: what.to_owned(), bytes, limit: self.0 });
        }
        Ok(())
    }

    /// Checks an array of `shape` with elements of `elem_bytes` bytes and returns its element
    /// count.
    ///
    /// # Errors
    /// [`RlCoreError::TooLarge`] naming `what` when the product overflows or its bytes exceed the
    /// budget (or do not fit in `usize` on this platform).
    pub fn check_elems(self, what: &str, shape: &[u64], elem_bytes: u64) -> Result<usize> {
        let too_large = || RlCoreError::TooLarge { what: what.to_owned(), bytes: u64::MAX, limit: self.0 };
        let elems = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(too_large)?;
        let bytes = elems.checked_mul(elem_bytes.max(1)).ok_or_else(too_large)?;
        self.check_bytes(what, bytes)?;
        usize::try_from(elems).map_err(|_| too_large())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_overflow_and_sizes_above_the_budget() {
        let b = MemoryBudget::bytes(100);
        assert_eq!(b.check_elems("x", &[5, 5], 4).unwrap(), 25);
        assert!(matches!(b.check_elems("x", &[5, 6], 4), Err(RlCoreError::TooLarge { bytes: 120, limit: 100, .. })));
        assert!(matches!(
            MemoryBudget::unlimited().check_elems("x", &[u64::MAX, 2], 1),
            Err(RlCoreError::TooLarge { bytes: u64::MAX, .. })
        ));
        assert_eq!(b.check_elems("empty", &[], 4).unwrap(), 1);
        assert_eq!(b.check_elems("zero", &[0, u64::MAX], 4).unwrap(), 0);
        let msg = b.check_bytes("observations", 101).unwrap_err().to_string();
        assert!(msg.contains("observations") && msg.contains("101") && msg.contains("100"), "{msg}");
        assert_eq!(MemoryBudget::default().limit(), 16 << 30);
    }
}
