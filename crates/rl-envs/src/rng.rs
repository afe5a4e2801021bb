//! Random draws as gymnasium makes them, and a NumPy-compatible generator.
//!
//! Every environment of this crate draws its reset randomness through the functions of this
//! module ([`uniform`], [`integers`]) from whatever generator the caller passes to
//! [`rl_core::Env::reset`]. The functions use NumPy's `Generator` algorithms (the double from
//! the top 53 bits of one 64-bit draw; Lemire's bounded integers on 32-bit draws), so with
//! [`NumpyRng`], a bit-exact port of `numpy.random.PCG64(SeedSequence(seed))`, an
//! environment reset with `NumpyRng::new(seed)` starts exactly where gymnasium's
//! `env.reset(seed=seed)` starts. With any other generator (e.g. [`rl_core::SeededRng`]) the
//! draws have the same distribution.
//!
//! The exception is [`standard_normal`] (HalfCheetah's and Ant's velocity noise): NumPy's
//! ziggurat tables are not reproduced, so those resets match gymnasium in distribution only.
//!
//! ```
//! use rand::RngCore;
//! use rl_envs::rng::{uniform, NumpyRng};
//! // numpy: np.random.default_rng(0).uniform(-1, 1) == 0.2739233746429086
//! let mut rng = NumpyRng::new(0);
//! assert_eq!(uniform(&mut rng, -1.0, 1.0), 0.2739233746429086);
//! ```

use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

/// A double in `[0, 1)` from the top 53 bits of one 64-bit draw (NumPy's `next_double`).
pub fn next_double<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// `low + (high - low) * next_double()`: NumPy's `Generator.uniform(low, high)`.
pub fn uniform<R: RngCore + ?Sized>(rng: &mut R, low: f64, high: f64) -> f64 {
    low + (high - low) * next_double(rng)
}

/// A uniform integer in `0..n` (`n >= 1`): NumPy's `Generator.integers(0, n)` for `n <= 2^32`
/// (Lemire's method on 32-bit draws); larger `n` use 64-bit draws.
pub fn integers<R: RngCore + ?Sized>(rng: &mut R, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    let rng_max = (n - 1) as u64;
    if rng_max <= u64::from(u32::MAX) {
        if rng_max == u64::from(u32::MAX) {
            return rng.next_u32() as usize;
        }
        let excl = (rng_max + 1) as u32;
        let mut m = u64::from(rng.next_u32()) * u64::from(excl);
        let mut leftover = m as u32;
        if leftover < excl {
            let threshold = (u32::MAX - rng_max as u32) % excl;
            while leftover < threshold {
                m = u64::from(rng.next_u32()) * u64::from(excl);
                leftover = m as u32;
            }
        }
        (m >> 32) as usize
    } else {
        // Lemire on 64-bit draws (NumPy's `bounded_lemire_uint64`).
        let excl = rng_max.wrapping_add(1);
        let mut m = u128::from(rng.next_u64()) * u128::from(excl);
        let mut leftover = m as u64;
        if leftover < excl {
            let threshold = (u64::MAX - rng_max) % excl;
            while leftover < threshold {
                m = u128::from(rng.next_u64()) * u128::from(excl);
                leftover = m as u64;
            }
        }
        (m >> 64) as usize
    }
}

/// A standard normal draw. Not NumPy's ziggurat: the same distribution, other numbers.
pub fn standard_normal<R: RngCore + ?Sized>(rng: &mut R) -> f64 {
    let mut adapter = DynRng(rng);
    StandardNormal.sample(&mut adapter)
}

/// Adapts `&mut R` (possibly unsized) to a sized `RngCore` for `rand_distr`.
struct DynRng<'a, R: RngCore + ?Sized>(&'a mut R);

impl<R: RngCore + ?Sized> RngCore for DynRng<'_, R> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill_bytes(dst);
    }
}

// ------------------------------------------------------------------------------------------
// SeedSequence (NumPy's `numpy.random.SeedSequence`, entropy = one non-negative integer).

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut value = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    value = value.wrapping_mul(*hash_const);
    value ^ (value >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

/// The entropy pool of `SeedSequence(seed)`.
fn seed_sequence_pool(seed: u64) -> [u32; POOL_SIZE] {
    // The integer as little-endian 32-bit words (`[0]` for zero).
    let entropy: Vec<u32> = if seed == 0 {
        vec![0]
    } else if seed >> 32 == 0 {
        vec![seed as u32]
    } else {
        vec![seed as u32, (seed >> 32) as u32]
    };
    let mut pool = [0u32; POOL_SIZE];
    let mut hash_const = INIT_A;
    for (i, slot) in pool.iter_mut().enumerate() {
        let v = entropy.get(i).copied().unwrap_or(0);
        *slot = hashmix(v, &mut hash_const);
    }
    for i_src in 0..POOL_SIZE {
        for i_dst in 0..POOL_SIZE {
            if i_src != i_dst {
                let h = hashmix(pool[i_src], &mut hash_const);
                pool[i_dst] = mix(pool[i_dst], h);
            }
        }
    }
    // Entropy longer than the pool (never for a u64 seed) would be mixed in here.
    pool
}

/// `SeedSequence(seed).generate_state(n_words, uint32)`.
fn generate_state(pool: &[u32; POOL_SIZE], n_words: usize) -> Vec<u32> {
    let mut hash_const = INIT_B;
    (0..n_words)
        .map(|i| {
            let mut v = pool[i % POOL_SIZE];
            v ^= hash_const;
            hash_const = hash_const.wrapping_mul(MULT_B);
            v = v.wrapping_mul(hash_const);
            v ^ (v >> XSHIFT)
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// PCG64 (XSL-RR 128/64), as `numpy.random.PCG64`.

const PCG_MULT: u128 = (2_549_297_995_355_413_924u128 << 64) | 4_865_540_595_714_422_341u128;

/// A bit-exact port of NumPy's default generator `PCG64(SeedSequence(seed))`, i.e. what
/// gymnasium's `env.reset(seed=seed)` seeds (`gymnasium.utils.seeding.np_random`).
///
/// [`RngCore::next_u64`] is NumPy's `next_uint64`, [`RngCore::next_u32`] its buffered
/// `next_uint32` (two 32-bit halves per 64-bit draw, low half first). The state serialises, so
/// it can be part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumpyRng {
    state_hi: u64,
    state_lo: u64,
    inc_hi: u64,
    inc_lo: u64,
    has_uint32: bool,
    uinteger: u32,
}

impl NumpyRng {
    /// `PCG64(SeedSequence(seed))`.
    pub fn new(seed: u64) -> Self {
        let pool = seed_sequence_pool(seed);
        let words = generate_state(&pool, 8);
        // generate_state(4, uint64): pairs of 32-bit words, little-endian.
        let w = |k: usize| u64::from(words[2 * k]) | (u64::from(words[2 * k + 1]) << 32);
        let (s0, s1, i0, i1) = (w(0), w(1), w(2), w(3));
        let initstate = (u128::from(s0) << 64) | u128::from(s1);
        let initseq = (u128::from(i0) << 64) | u128::from(i1);
        let inc = (initseq << 1) | 1;
        let mut state: u128 = 0;
        state = state.wrapping_mul(PCG_MULT).wrapping_add(inc);
        state = state.wrapping_add(initstate);
        state = state.wrapping_mul(PCG_MULT).wrapping_add(inc);
        Self {
            state_hi: (state >> 64) as u64,
            state_lo: state as u64,
            inc_hi: (inc >> 64) as u64,
            inc_lo: inc as u64,
            has_uint32: false,
            uinteger: 0,
        }
    }

    fn step(&mut self) -> u64 {
        let inc = (u128::from(self.inc_hi) << 64) | u128::from(self.inc_lo);
        let mut state = (u128::from(self.state_hi) << 64) | u128::from(self.state_lo);
        state = state.wrapping_mul(PCG_MULT).wrapping_add(inc);
        self.state_hi = (state >> 64) as u64;
        self.state_lo = state as u64;
        let rot = (state >> 122) as u32;
        (self.state_hi ^ self.state_lo).rotate_right(rot)
    }
}

impl RngCore for NumpyRng {
    fn next_u32(&mut self) -> u32 {
        if self.has_uint32 {
            self.has_uint32 = false;
            return self.uinteger;
        }
        let next = self.step();
        self.has_uint32 = true;
        self.uinteger = (next >> 32) as u32;
        next as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.step()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.step().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values printed by NumPy 2.4:
    //   np.random.PCG64(np.random.SeedSequence(s)).random_raw(3)
    #[test]
    fn pcg64_matches_numpy_raw_draws() {
        let mut r = NumpyRng::new(0);
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(got, [11_749_869_230_777_074_271, 4_976_686_463_289_251_617, 755_828_109_848_996_024]);
        let mut r = NumpyRng::new(42);
        let got: Vec<u64> = (0..2).map(|_| r.next_u64()).collect();
        assert_eq!(got, [14_276_969_152_011_380_360, 8_095_878_257_575_067_585]);
        // a seed above 2^32 (two entropy words)
        let mut r = NumpyRng::new((1 << 40) + 5);
        let got: Vec<u64> = (0..2).map(|_| r.next_u64()).collect();
        assert_eq!(got, [87_427_594_128_977_387, 6_872_972_437_549_564_694]);
    }

    #[test]
    fn integers_and_uniform_match_numpy() {
        // rng = np.random.default_rng(7); [rng.integers(0, 5) for _ in range(6)]
        let mut r = NumpyRng::new(7);
        let got: Vec<usize> = (0..6).map(|_| integers(&mut r, 5)).collect();
        assert_eq!(got, [4, 3, 3, 4, 2, 3]);
        // rng = np.random.default_rng(1); rng.uniform(-0.05, 0.05, size=2)
        let mut r = NumpyRng::new(1);
        assert_eq!(uniform(&mut r, -0.05, 0.05), 0.0011821624700256717);
        assert_eq!(uniform(&mut r, -0.05, 0.05), 0.045046369632593536);
    }

    #[test]
    fn integers_in_range_for_any_generator() {
        let mut r = rl_core::rng_from_seed(3);
        for n in [1usize, 2, 3, 7, 1 << 33] {
            for _ in 0..200 {
                assert!(integers(&mut r, n) < n);
            }
        }
        assert_eq!(integers(&mut r, 0), 0);
        let x = standard_normal(&mut r);
        assert!(x.is_finite());
    }

    #[test]
    fn state_roundtrips() {
        let mut r = NumpyRng::new(5);
        let _ = r.next_u32();
        let saved = serde_json::to_string(&r).unwrap();
        let mut back: NumpyRng = serde_json::from_str(&saved).unwrap();
        assert_eq!(back.next_u32(), r.next_u32());
        assert_eq!(back.next_u64(), r.next_u64());
    }
}
