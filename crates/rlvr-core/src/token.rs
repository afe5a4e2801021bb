//! Token-level advantages and returns (tch-free, f64): GAE with a value head, REINFORCE++ with
//! a discount γ, ReMax, and verl's `masked_whiten`.
//!
//! Every function takes row-major `[B, T]` slices (`cols = T`): token rewards, a response
//! mask (0/1 or weights) and, for GAE, the value head's predictions. An outcome reward goes on
//! the last response token of its row ([`outcome_token_rewards`]).
//!
//! | function | returns `G_t` | advantages | reference |
//! |---|---|---|---|
//! | [`gae`] | `A_t + V_t` | `δ_t = r_t + γ V_{t+1} − V_t`, `A_t = δ_t + γλ A_{t+1}` over response tokens (padding carries the next values through), then `masked_whiten` | verl `gae` (Schulman et al. 2016, arXiv 1506.02438) |
//! | [`reinforce_pp`] | `G_t = r_t + γ G_{t+1}`, reset after the last response token | `masked_whiten(G) · m` | verl `reinforce_plus_plus` (Hu 2025, arXiv 2501.03262) |
//! | [`remax`] | `Σ_{t' ≥ t} m r_{t'}` | `G_t − b · m_t` | verl `remax` (Li et al. 2023, arXiv 2310.10505) |
//!
//! `masked_whiten(x) = (x − μ)/sqrt(σ² + 1e-8)` with `μ = Σ m x/(Σ m + 1e-8)` and the
//! Bessel-corrected `σ² = Σ m (x − μ)²/(Σ m + 1e-8) · Σ m/(Σ m − 1)`, applied to every position
//! (verl `masked_whiten`); it needs `Σ m > 1`. With γ = 1 and an outcome reward,
//! [`reinforce_pp`] equals the outcome estimator `AdvantageEstimator::ReinforcePlusPlus` with
//! lengths. The clipped value loss that trains the value head is `value_loss` (feature `tch`).
//!
//! ```
//! use rlvr_core::token::{gae, outcome_token_rewards};
//! // two responses of 3 and 2 tokens (padded to 3), outcome rewards 1 and 0, values 0.5
//! let mask = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0];
//! let r = outcome_token_rewards(&[1.0, 0.0], &mask, 3)?;
//! assert_eq!(r, vec![0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
//! let out = gae(&r, &[0.5; 6], &mask, 3, 1.0, 1.0, false)?;
//! // γ = λ = 1: A_t = Σ_{t'≥t} r − V_t
//! assert_eq!(out.advantages, vec![0.5, 0.5, 0.5, -0.5, -0.5, 0.0]);
//! assert_eq!(out.returns, vec![1.0, 1.0, 1.0, 0.0, 0.0, 0.5]);
//! # Ok::<(), rlvr_core::RlvrCoreError>(())
//! ```

use crate::error::{invalid, Result, RlvrCoreError};
use crate::stats::check_finite_values;

/// Advantages and returns, `[B, T]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenAdvantages {
    /// Per-token advantages.
    pub advantages: Vec<f64>,
    /// Per-token returns (the value head's regression target for GAE).
    pub returns: Vec<f64>,
}

fn check_shape(what: &str, x: &[f64], n: usize, cols: usize) -> Result<()> {
    if cols == 0 || n == 0 || n % cols != 0 {
        return Err(RlvrCoreError::Shape {
            what: what.into(),
            expected: format!("a non-empty [B, T] row-major slice with T = {cols}"),
            got: vec![n as i64],
        });
    }
    if x.len() != n {
        return Err(RlvrCoreError::Shape {
            what: what.into(),
            expected: format!("{n} values like the mask"),
            got: vec![x.len() as i64],
        });
    }
    check_finite_values(what, x)
}

fn check_unit(name: &str, v: f64) -> Result<()> {
    if v.is_finite() && (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(invalid(name, v, "must be in [0, 1]"))
    }
}

/// verl's `masked_whiten` in place (see the module docs).
///
/// # Errors
/// [`RlvrCoreError::Shape`] for mismatched lengths; [`RlvrCoreError::NonFinite`];
/// [`RlvrCoreError::Empty`] when `Σ m ≤ 1` (verl raises there too).
pub fn masked_whiten(x: &mut [f64], mask: &[f64]) -> Result<()> {
    check_shape("mask", mask, mask.len(), mask.len().max(1))?;
    check_shape("values", x, mask.len(), mask.len().max(1))?;
    let n: f64 = mask.iter().sum();
    if n <= 1.0 {
        return Err(RlvrCoreError::Empty { what: format!("response tokens to whiten (mask sum {n}, need > 1)") });
    }
    let mean = x.iter().zip(mask).map(|(v, m)| v * m).sum::<f64>() / (n + 1e-8);
    let var = x.iter().zip(mask).map(|(v, m)| (v - mean) * (v - mean) * m).sum::<f64>() / (n + 1e-8);
    let var = var * n / (n - 1.0);
    let inv = 1.0 / (var + 1e-8).sqrt();
    for v in x.iter_mut() {
        *v = (*v - mean) * inv;
    }
    Ok(())
}

/// Token rewards `[B, T]` with `rewards[i]` on the last response token of row `i` (the last
/// position where `mask > 0`); rows without response tokens get nothing.
///
/// # Errors
/// [`RlvrCoreError::Shape`] when `mask` is not `rewards.len() × cols`;
/// [`RlvrCoreError::NonFinite`].
pub fn outcome_token_rewards(rewards: &[f64], mask: &[f64], cols: usize) -> Result<Vec<f64>> {
    check_shape("mask", mask, rewards.len() * cols, cols)?;
    check_finite_values("rewards", rewards)?;
    let mut out = vec![0.0; mask.len()];
    for (i, (row, &r)) in mask.chunks(cols).zip(rewards).enumerate() {
        if let Some(t) = row.iter().rposition(|&m| m > 0.0) {
            out[i * cols + t] = r;
        }
    }
    Ok(out)
}

/// Generalised advantage estimation with a value head (verl `compute_gae_advantage_return`),
/// `whiten` = verl's final `masked_whiten` of the advantages (verl always whitens).
///
/// # Errors
/// Shapes, non-finite inputs, `gamma`/`lam` outside `[0, 1]`, and [`masked_whiten`]'s.
pub fn gae(
    token_rewards: &[f64],
    values: &[f64],
    mask: &[f64],
    cols: usize,
    gamma: f64,
    lam: f64,
    whiten: bool,
) -> Result<TokenAdvantages> {
    check_shape("mask", mask, mask.len(), cols)?;
    check_shape("token_rewards", token_rewards, mask.len(), cols)?;
    check_shape("values", values, mask.len(), cols)?;
    check_unit("gamma", gamma)?;
    check_unit("lam", lam)?;
    let mut adv = vec![0.0; mask.len()];
    for (row, out) in adv.chunks_mut(cols).enumerate() {
        let base = row * cols;
        let (mut next_value, mut last) = (0.0, 0.0);
        for t in (0..cols).rev() {
            let (r, v, m) = (token_rewards[base + t], values[base + t], mask[base + t]);
            let delta = r + gamma * next_value - v;
            let candidate = delta + gamma * lam * last;
            // padding (and observation) tokens carry the next value and advantage through
            next_value = v * m + (1.0 - m) * next_value;
            last = candidate * m + (1.0 - m) * last;
            out[t] = last;
        }
    }
    let returns: Vec<f64> = adv.iter().zip(values).map(|(a, v)| a + v).collect();
    if whiten {
        masked_whiten(&mut adv, mask)?;
    }
    Ok(TokenAdvantages { advantages: adv, returns })
}

/// REINFORCE++ with a discount (verl `compute_reinforce_plus_plus_outcome_advantage`):
/// discounted returns reset after the last response token, batch-whitened, times the mask.
///
/// # Errors
/// Shapes, non-finite inputs, `gamma` outside `[0, 1]`, and [`masked_whiten`]'s.
pub fn reinforce_pp(token_rewards: &[f64], mask: &[f64], cols: usize, gamma: f64) -> Result<TokenAdvantages> {
    check_shape("mask", mask, mask.len(), cols)?;
    check_shape("token_rewards", token_rewards, mask.len(), cols)?;
    check_unit("gamma", gamma)?;
    let mut returns = vec![0.0; mask.len()];
    for (row, out) in returns.chunks_mut(cols).enumerate() {
        let base = row * cols;
        let mut running = 0.0;
        for t in (0..cols).rev() {
            running = token_rewards[base + t] + gamma * running;
            out[t] = running;
            running *= mask[base + t];
        }
    }
    let mut adv = returns.clone();
    masked_whiten(&mut adv, mask)?;
    for (a, m) in adv.iter_mut().zip(mask) {
        *a *= m;
    }
    Ok(TokenAdvantages { advantages: adv, returns })
}

/// ReMax (verl `compute_remax_outcome_advantage`): returns are the reverse cumulative sums of
/// the masked token rewards, advantages subtract the greedy baseline `b_i` of each row on its
/// response tokens.
///
/// # Errors
/// Shapes (one baseline per row) and non-finite inputs.
pub fn remax(token_rewards: &[f64], baselines: &[f64], mask: &[f64], cols: usize) -> Result<TokenAdvantages> {
    check_shape("mask", mask, baselines.len() * cols, cols)?;
    check_shape("token_rewards", token_rewards, mask.len(), cols)?;
    check_finite_values("baselines", baselines)?;
    let mut returns = vec![0.0; mask.len()];
    let mut adv = vec![0.0; mask.len()];
    for (row, &b) in baselines.iter().enumerate() {
        let base = row * cols;
        let mut acc = 0.0;
        for t in (0..cols).rev() {
            acc += token_rewards[base + t] * mask[base + t];
            returns[base + t] = acc;
            adv[base + t] = acc - b * mask[base + t];
        }
    }
    Ok(TokenAdvantages { advantages: adv, returns })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol, "{i}: {x} vs {y}\n{a:?}\n{b:?}");
        }
    }

    #[test]
    fn gae_matches_a_hand_recursion() {
        // one row of 3 response tokens + 1 padding, γ = 0.9, λ = 0.8
        let r = [0.0, 0.5, 1.0, 0.0];
        let v = [0.2, 0.4, 0.6, 9.0];
        let m = [1.0, 1.0, 1.0, 0.0];
        let out = gae(&r, &v, &m, 4, 0.9, 0.8, false).unwrap();
        // t=3 (padding): δ = 0 + 0 − 9 = −9, candidate −9, carried: next_value 0, last 0 → A_3 = 0
        // t=2: δ = 1 + 0.9·0 − 0.6 = 0.4, A_2 = 0.4
        // t=1: δ = 0.5 + 0.9·0.6 − 0.4 = 0.64, A_1 = 0.64 + 0.72·0.4 = 0.928
        // t=0: δ = 0 + 0.9·0.4 − 0.2 = 0.16, A_0 = 0.16 + 0.72·0.928 = 0.82816
        close(&out.advantages, &[0.82816, 0.928, 0.4, 0.0], 1e-12);
        close(&out.returns, &[1.02816, 1.328, 1.0, 9.0], 1e-12);
        // whitened over the three response tokens
        let w = gae(&r, &v, &m, 4, 0.9, 0.8, true).unwrap();
        let mut x = out.advantages.clone();
        masked_whiten(&mut x, &m).unwrap();
        assert_eq!(w.advantages, x);
        assert!(gae(&r, &v, &m, 4, 1.5, 0.8, false).is_err());
        assert!(gae(&r, &v[..3], &m, 4, 0.9, 0.8, false).is_err());
    }

    #[test]
    fn gae_skips_observation_tokens_inside_a_row() {
        // a masked-out token in the middle (a tool observation) passes value and advantage through
        let r = [0.0, 0.0, 1.0];
        let v = [0.5, 7.0, 0.25];
        let m = [1.0, 0.0, 1.0];
        let out = gae(&r, &v, &m, 3, 1.0, 1.0, false).unwrap();
        // t=2: A = 1 − 0.25 = 0.75; t=1 (masked): carries next_value 0.25, A 0.75;
        // t=0: δ = 0 + 0.25 − 0.5 = −0.25, A = −0.25 + 0.75 = 0.5
        close(&out.advantages, &[0.5, 0.75, 0.75], 1e-15);
    }

    #[test]
    fn reinforce_pp_discounts_and_resets_after_eos() {
        let m = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
        let r = outcome_token_rewards(&[1.0, 2.0], &m, 4).unwrap();
        let out = reinforce_pp(&r, &m, 4, 0.5).unwrap();
        close(&out.returns, &[0.25, 0.5, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0], 1e-15);
        let g = [0.25, 0.5, 1.0, 1.0, 2.0];
        let mean = g.iter().sum::<f64>() / (5.0 + 1e-8);
        let var = g.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (5.0 + 1e-8) * 5.0 / 4.0;
        let w = |x: f64| (x - mean) / (var + 1e-8).sqrt();
        close(&out.advantages, &[w(0.25), w(0.5), w(1.0), 0.0, w(1.0), w(2.0), 0.0, 0.0], 1e-12);
        // γ = 1 equals the outcome estimator with lengths (verl's reinforce_plus_plus)
        let one = reinforce_pp(&r, &m, 4, 1.0).unwrap();
        let groups = crate::Groups::uniform(2, 1).unwrap();
        let cfg = crate::AdvantageConfig::new(
            rl_core::Params::check(crate::AdvantageParams::new(crate::AdvantageEstimator::reinforce_pp())).unwrap(),
        );
        let a = cfg.compute(&[1.0, 2.0], &groups, Some(&[3, 2])).unwrap().values;
        close(&one.advantages, &[a[0], a[0], a[0], 0.0, a[1], a[1], 0.0, 0.0], 1e-7);
        assert!(reinforce_pp(&r, &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 4, 1.0).is_err());
        // Σm = 1
    }

    #[test]
    fn remax_subtracts_the_baseline_on_response_tokens() {
        let m = [1.0, 1.0, 0.0, 1.0, 1.0, 1.0];
        let r = [0.0, 1.0, 5.0, 0.5, 0.0, 0.5];
        let out = remax(&r, &[0.25, 1.0], &m, 3).unwrap();
        close(&out.returns, &[1.0, 1.0, 0.0, 1.0, 0.5, 0.5], 0.0);
        close(&out.advantages, &[0.75, 0.75, 0.0, 0.0, -0.5, -0.5], 0.0);
        assert!(remax(&r, &[0.25], &m, 3).is_err());
        assert!(remax(&r, &[0.25, f64::NAN], &m, 3).is_err());
    }

    #[test]
    fn shapes_and_values_are_checked() {
        assert!(outcome_token_rewards(&[1.0], &[1.0, 0.0, 1.0], 2).is_err());
        assert_eq!(outcome_token_rewards(&[3.0], &[0.0, 0.0], 2).unwrap(), vec![0.0, 0.0]);
        let mut x = [1.0, f64::NAN];
        assert!(matches!(masked_whiten(&mut x, &[1.0, 1.0]), Err(RlvrCoreError::NonFinite { index: 1, .. })));
        assert!(masked_whiten(&mut [1.0, 2.0], &[1.0]).is_err());
        assert!(gae(&[], &[], &[], 3, 1.0, 1.0, false).is_err());
        assert!(matches!(reinforce_pp(&[0.0; 4], &[1.0; 4], 0, 1.0), Err(RlvrCoreError::Shape { .. })));
    }
}
