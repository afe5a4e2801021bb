//! Token selection of Clip-Cov and KL-Cov (Cui et al., arXiv 2505.22617; verl `clip_cov`,
//! `kl_cov`), shared by the libtorch and the fused path so that both pick the same tokens.

use rand::Rng;

use crate::policy::ClipCovParams;

/// Host copies of one micro-batch, row-major `[B, T]` (the advantages `[B]` or `[B, T]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CovInputs<'a, T> {
    pub lp: &'a [T],
    pub old: &'a [T],
    pub adv: &'a [T],
    pub adv_per_token: bool,
    pub mask: &'a [T],
    pub t: usize,
}

impl<T: Copy + Into<f64>> CovInputs<'_, T> {
    /// Calls `f(flat index, mask, advantage, logp)` for every token in row-major order (no
    /// division per token to find the row's advantage).
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(usize, f64, f64, f64)) {
        let t = self.t.max(1);
        for (r, (lp, m)) in self.lp.chunks(t).zip(self.mask.chunks(t)).enumerate() {
            let base = r * t;
            let row_adv = if self.adv_per_token { 0.0 } else { self.adv.get(r).map_or(0.0, |&a| a.into()) };
            for (j, (&l, &mm)) in lp.iter().zip(m).enumerate() {
                let i = base + j;
                let a = if self.adv_per_token { self.adv.get(i).map_or(0.0, |&a| a.into()) } else { row_adv };
                f(i, mm.into(), a, l.into());
            }
        }
    }
}

/// Clip-Cov's cut tokens (sorted flat indices): `cov = (A − Ā)(logp − mean logp)` with
/// mask-weighted means (`Σ m x/(Σ m + 1e-8)`, verl's `masked_mean`), candidates are response
/// tokens the PPO clip has not clipped with `cov_lb < cov < cov_ub`, and
/// `max(⌊ratio · Σ m⌋, 1)` of them are drawn with `seed`.
pub(crate) fn clip_cov_selection<T: Copy + Into<f64>>(
    x: &CovInputs<'_, T>,
    p: &ClipCovParams,
    seed: u64,
) -> Vec<usize> {
    let (mut sm, mut sa, mut sl) = (0.0, 0.0, 0.0);
    x.each(|_, m, a, l| {
        sm += m;
        sa += a * m;
        sl += l * m;
    });
    let (ma, ml) = (sa / (sm + 1e-8), sl / (sm + 1e-8));
    let (hi, lo) = (1.0 + p.eps_high, 1.0 - p.eps_low);
    let mut candidates: Vec<usize> = Vec::new();
    x.each(|i, m, a, l| {
        // the cheap tests first; the ratio only for tokens inside the covariance band
        let cov = (a - ma) * (l - ml);
        if m > 0.0 && cov > p.cov_lb && cov < p.cov_ub {
            let r = (l - x.old[i].into()).exp();
            let clipped = (a > 0.0 && r > hi) || (a < 0.0 && r < lo);
            if !clipped {
                candidates.push(i);
            }
        }
    });
    let mut sel = draw(candidates, selection_size(p.ratio, sm), seed);
    sel.sort_unstable();
    sel
}

/// KL-Cov's penalised tokens (sorted flat indices): the `max(⌊ratio · N⌋, 1)` response tokens
/// (`m > 0`, `N` of them) with the largest `(A − Ā)(logp − mean logp)`, plain means over those
/// tokens (verl's `kl_cov`); ties go to the lower index.
pub(crate) fn kl_cov_selection<T: Copy + Into<f64>>(x: &CovInputs<'_, T>, ratio: f64) -> Vec<usize> {
    let (mut nv, mut sa, mut sl) = (0usize, 0.0, 0.0);
    x.each(|_, m, a, l| {
        if m > 0.0 {
            nv += 1;
            sa += a;
            sl += l;
        }
    });
    if nv == 0 {
        return Vec::new();
    }
    let nvf = nv as f64;
    let (ma, ml) = (sa / nvf, sl / nvf);
    let mut pairs: Vec<(f64, usize)> = Vec::with_capacity(nv);
    x.each(|i, m, a, l| {
        if m > 0.0 {
            pairs.push(((a - ma) * (l - ml), i));
        }
    });
    let mut sel = top_k_pairs(pairs, selection_size(ratio, nvf));
    sel.sort_unstable();
    sel
}

/// Number of tokens Clip-Cov cuts / KL-Cov penalises: `max(⌊ratio · n⌋, 1)` (verl's
/// `max(int(ratio * mask.sum()), 1)`).
pub(crate) fn selection_size(ratio: f64, n_tokens: f64) -> usize {
    ((ratio * n_tokens).max(0.0) as usize).max(1)
}

/// Clip-Cov: `k` of the `candidates` (flat token indices in row-major order) drawn uniformly
/// without replacement (partial Fisher–Yates with ChaCha8 seeded by `seed`), in draw order.
pub(crate) fn draw(mut candidates: Vec<usize>, k: usize, seed: u64) -> Vec<usize> {
    let mut rng = rl_core::rng_from_seed(seed);
    let k = k.min(candidates.len());
    for i in 0..k {
        let j = rng.random_range(i..candidates.len());
        candidates.swap(i, j);
    }
    candidates.truncate(k);
    candidates
}

/// KL-Cov: the flat indices of the `k` largest `cov` values (`cov[j]` belongs to token
/// `index[j]`); ties go to the lower index. Linear time.
#[cfg(test)]
pub(crate) fn top_k(cov: &[f64], index: &[usize], k: usize) -> Vec<usize> {
    top_k_pairs(cov.iter().copied().zip(index.iter().copied()).collect(), k)
}

/// The `k` largest of `(cov, flat index)` pairs (ties to the lower index), in any order.
fn top_k_pairs(mut pairs: Vec<(f64, usize)>, k: usize) -> Vec<usize> {
    let k = k.min(pairs.len());
    if k == 0 {
        return Vec::new();
    }
    let order = |a: &(f64, usize), b: &(f64, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if k < pairs.len() {
        pairs.select_nth_unstable_by(k - 1, order);
        pairs.truncate(k);
    }
    pairs.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_verl() {
        assert_eq!(selection_size(2e-4, 100.0), 1); // max(int(0.02), 1)
        assert_eq!(selection_size(2e-4, 20_000.0), 4);
        assert_eq!(selection_size(0.5, 7.0), 3);
        assert_eq!(selection_size(1.0, 0.0), 1);
    }

    #[test]
    fn draws_are_seeded_subsets() {
        let c: Vec<usize> = (10..30).collect();
        let a = draw(c.clone(), 5, 7);
        assert_eq!(a, draw(c.clone(), 5, 7));
        assert_ne!(a, draw(c.clone(), 5, 8));
        assert_eq!(a.len(), 5);
        assert!(a.iter().all(|i| c.contains(i)));
        let mut s = a.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 5);
        assert_eq!(draw(vec![3, 4], 5, 0).len(), 2);
        assert!(draw(Vec::new(), 1, 0).is_empty());
        // every candidate is drawn sometimes (uniformity, coarse)
        let mut hits = [0u32; 4];
        for seed in 0..400 {
            hits[draw(vec![0, 1, 2, 3], 1, seed)[0]] += 1;
        }
        assert!(hits.iter().all(|&h| h > 60), "{hits:?}");
    }

    /// Two rows of three tokens, per-token advantages, the last token padding. Over the 5
    /// response tokens `Ā = 0.5/5 = 0.1` and `mean logp = −5.2/5 = −1.04`, so the covariances
    /// are `[0.036, 1.056, 1.026, −0.184, −1.764]`; token 0 has ratio `e^0.5 > 1.2` with `A > 0`.
    fn case() -> ([f64; 6], [f64; 6], [f64; 6], [f64; 6]) {
        let lp = [-1.0, -2.0, -0.5, -1.5, -0.2, -9.0];
        let mut old = lp;
        old[0] = -1.5;
        let adv = [1.0, -1.0, 2.0, 0.5, -2.0, 5.0];
        let mask = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0];
        (lp, old, adv, mask)
    }

    #[test]
    fn clip_cov_selects_unclipped_tokens_inside_the_bounds() {
        let (lp, old, adv, mask) = case();
        let x = CovInputs { lp: &lp[..], old: &old[..], adv: &adv[..], adv_per_token: true, mask: &mask[..], t: 3 };
        // bounds (1, 5): tokens 1 and 2 (token 0 is clipped, and its covariance is below 1
        // anyway); ratio 1 draws all candidates
        let p = ClipCovParams { ratio: 1.0, ..ClipCovParams::default() };
        assert_eq!(clip_cov_selection(&x, &p, 3), vec![1, 2]);
        // bounds (0, 5): token 0 is a candidate by covariance but clipped
        let p = ClipCovParams { ratio: 1.0, cov_lb: 0.0, ..ClipCovParams::default() };
        assert_eq!(clip_cov_selection(&x, &p, 3), vec![1, 2]);
        let p = ClipCovParams { ratio: 1.0, cov_lb: 0.0, eps_high: 1.0, ..ClipCovParams::default() };
        assert_eq!(clip_cov_selection(&x, &p, 3), vec![0, 1, 2]);
        // ratio 0.2 of 5 tokens: one of the two candidates
        let p = ClipCovParams { ratio: 0.2, ..ClipCovParams::default() };
        let one = clip_cov_selection(&x, &p, 3);
        assert!(one == vec![1] || one == vec![2], "{one:?}");
    }

    #[test]
    fn clip_cov_bounds_are_exclusive() {
        // ratio exactly 1 on every token, clip bounds [1, 1]: nothing is clipped (the clip is
        // strict); Ā = 0 exactly, so the tokens with A = 0 have covariance exactly 0, which
        // the exclusive lower bound 0 leaves out
        let lp = [-1.0, -3.0, -2.0, -2.0];
        let adv = [1.0, -1.0, 0.0, 0.0];
        let mask = [1.0; 4];
        let x = CovInputs { lp: &lp[..], old: &lp[..], adv: &adv[..], adv_per_token: true, mask: &mask[..], t: 2 };
        let p = ClipCovParams { eps_low: 0.0, eps_high: 0.0, ratio: 1.0, cov_lb: 0.0, cov_ub: 10.0 };
        assert_eq!(clip_cov_selection(&x, &p, 0), vec![0, 1]);
        // and the exclusive upper bound: covariances are 1 and 1
        let p = ClipCovParams { cov_ub: 1.0 - 1e-6, ..p };
        assert!(clip_cov_selection(&x, &p, 0).is_empty());
    }

    #[test]
    fn kl_cov_takes_the_largest_covariances_over_response_tokens() {
        let (lp, old, adv, mask) = case();
        let x = CovInputs { lp: &lp[..], old: &old[..], adv: &adv[..], adv_per_token: true, mask: &mask[..], t: 3 };
        assert_eq!(kl_cov_selection(&x, 0.4), vec![1, 2]); // ⌊0.4 · 5⌋ = 2
        assert_eq!(kl_cov_selection(&x, 0.6), vec![0, 1, 2]);
        assert_eq!(kl_cov_selection(&x, 1e-9), vec![1]);
        // per-row advantages [1, −1]: Ā = (3 − 2)/5 = 0.2, covariances 0.8·[0.04, −0.96, 0.54]
        // and −1.2·[−0.46, 0.84]: the largest two are tokens 2 and 3
        let rows = [1.0, -1.0];
        let x = CovInputs { adv: &rows[..], adv_per_token: false, ..x };
        assert_eq!(kl_cov_selection(&x, 0.4), vec![2, 3]);
        let none = [0.0; 6];
        assert!(kl_cov_selection(&CovInputs { mask: &none[..], ..x }, 0.5).is_empty());
    }

    #[test]
    fn top_k_breaks_ties_by_index() {
        let cov = [0.5, 2.0, 2.0, -1.0, 3.0];
        let idx = [10, 11, 12, 13, 14];
        let mut t = top_k(&cov, &idx, 2);
        t.sort_unstable();
        assert_eq!(t, vec![11, 14]);
        let mut t = top_k(&cov, &idx, 3);
        t.sort_unstable();
        assert_eq!(t, vec![11, 12, 14]);
        assert_eq!(top_k(&cov, &idx, 9).len(), 5);
        assert!(top_k(&[], &[], 1).is_empty());
    }
}
