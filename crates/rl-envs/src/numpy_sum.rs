//! NumPy 2's summation order (`np.sum`, `np.add.reduce`) for contiguous float arrays.
//!
//! Gymnasium's costs are `w * np.sum(np.square(x))`. NumPy 2.x reduces a contiguous array with
//! its pairwise sum starting from the identity (`-0.0`), with no element taken as the initial
//! value:
//!
//! - fewer than 8 elements: left to right, `((x0 + x1) + x2) + ...`;
//! - 8 to 128 elements: eight running sums `r[j] = x[j] + x[j+8] + x[j+16] + ...` over the
//!   largest multiple of 8, combined as `((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`,
//!   then the remaining `n mod 8` elements added left to right;
//! - more than 128: the two halves split at `n/2` rounded down to a multiple of 8, each summed
//!   recursively, then added.
//!
//! Every addition rounds to the array's dtype (float32 for a float32 action). This is checked
//! bit for bit against NumPy 2.4.6 on thousands of random arrays of lengths 1 to 300
//! (`tests/numpy_sum.rs`, fixture from `scripts/golden_rl_envs.py numpy_sum`).

use std::ops::Add;

/// Float types NumPy's pairwise sum runs on.
pub trait PairwiseFloat: Copy + Add<Output = Self> {
    /// `-0.0`, the identity NumPy starts from.
    const NEG_ZERO: Self;
}

impl PairwiseFloat for f32 {
    const NEG_ZERO: Self = -0.0;
}

impl PairwiseFloat for f64 {
    const NEG_ZERO: Self = -0.0;
}

/// NumPy's block size: arrays longer than this are split in two.
const BLOCK: usize = 128;

/// `np.sum(x)` for a contiguous 1-D array of `x`'s dtype, in NumPy 2's order (see the
/// [module docs](self)).
pub fn pairwise_sum<T: PairwiseFloat>(x: &[T]) -> T {
    let n = x.len();
    if n < 8 {
        x.iter().fold(T::NEG_ZERO, |acc, &v| acc + v)
    } else if n <= BLOCK {
        let mut r = [x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]];
        let whole = n - n % 8;
        for chunk in x[8..whole].chunks_exact(8) {
            for (acc, &v) in r.iter_mut().zip(chunk) {
                *acc = *acc + v;
            }
        }
        let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        x[whole..].iter().fold(res, |acc, &v| acc + v)
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum(&x[..half]) + pairwise_sum(&x[half..])
    }
}

/// `np.sum(np.square(x))` for a float32 array (NumPy 2: squares and sum in float32), without
/// allocating for `x.len() <= 32`.
pub fn sum_of_squares_f32(x: impl ExactSizeIterator<Item = f32>) -> f32 {
    let n = x.len();
    if n <= 32 {
        let mut buf = [0.0f32; 32];
        for (b, v) in buf.iter_mut().zip(x) {
            *b = v * v;
        }
        pairwise_sum(&buf[..n])
    } else {
        let sq: Vec<f32> = x.map(|v| v * v).collect();
        pairwise_sum(&sq)
    }
}

/// `np.sum(np.square(x))` for a float64 array.
pub fn sum_of_squares_f64(x: impl Iterator<Item = f64>) -> f64 {
    let sq: Vec<f64> = x.map(|v| v * v).collect();
    pairwise_sum(&sq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_differ_from_naive_where_numpy_does() {
        // 8 elements: ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), not left to right
        let x = [1.0f32, 1e8, -1e8, 1.0, 0.0, 0.0, 0.0, 0.0];
        let naive = x.iter().fold(0.0f32, |a, &v| a + v);
        assert_eq!(naive, 1.0);
        assert_eq!(pairwise_sum(&x), (1.0f32 + 1e8) + (-1e8 + 1.0));
        assert_eq!(pairwise_sum::<f32>(&[]), -0.0);
        assert_eq!(pairwise_sum(&[2.0f64, 3.0, 4.0]), 9.0);
        let long: Vec<f64> = (0..300).map(f64::from).collect();
        assert_eq!(pairwise_sum(&long), 299.0 * 300.0 / 2.0);
        assert_eq!(sum_of_squares_f32([1.0f32, 2.0, 3.0].into_iter()), 14.0);
        let many: Vec<f32> = vec![1.0; 40];
        assert_eq!(sum_of_squares_f32(many.into_iter()), 40.0);
    }
}
