//! DPS: dynamics-predictive sampling with a per-prompt 3-state hidden Markov model.

use crate::error::{invalid, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::types::{
    check_in_pool, check_select_args, pack_key, top_b, validate_outcomes, Candidates, ItemId, Outcome, Prediction,
    Selection,
};
use crate::Selector;
use rand::RngCore;
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// The Dirichlet prior `α0` of the transition matrix (rows = next state, columns = current
/// state; states unsolved, partial, solved). The named priors are the reference code's. In a
/// config file: `prior = "progress"`, `prior = { constant = 1.0 }`, `prior = { custom = [[...]] }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DpsPrior {
    /// Every entry equal to the value (reference: a float, default `1.0`).
    Constant(f32),
    /// `'progress'`: `[[1, .5, .5], [1, 1, .5], [1, 1, 1]]` (favours moving towards solved).
    Progress,
    /// `'stability'`: `[[1, .5, .5], [.5, 1, .5], [.5, .5, 1]]` (favours staying).
    Stability,
    /// `'local'`: `[[1, 1, 0], [1, 1, 1], [0, 1, 1]]` (no jump between unsolved and solved).
    Local,
    /// Any non-negative matrix whose columns have positive sums.
    Custom([[f32; 3]; 3]),
}

impl DpsPrior {
    /// The matrix `α0[next][current]`.
    pub fn matrix(&self) -> [[f32; 3]; 3] {
        match *self {
            Self::Constant(v) => [[v; 3]; 3],
            Self::Progress => [[1.0, 0.5, 0.5], [1.0, 1.0, 0.5], [1.0, 1.0, 1.0]],
            Self::Stability => [[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]],
            Self::Local => [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]],
            Self::Custom(m) => m,
        }
    }
}

/// The initial belief `μ0` over (unsolved, partial, solved); the reference's `hmm_prior_pi`.
/// In a config file: `initial_belief = "uniform"` or `{ custom = [0.5, 0.3, 0.2] }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialBelief {
    /// `(1/3, 1/3, 1/3)` (reference `'uniform'`, the default).
    Uniform,
    /// `(1, 0, 0)` (reference `'1'`).
    Unsolved,
    /// `(0, 1, 0)` (reference `'2'`).
    Partial,
    /// `(0, 0, 1)` (reference `'3'`).
    Solved,
    /// Any distribution (normalised on use).
    Custom([f32; 3]),
}

impl InitialBelief {
    /// The belief vector (unnormalised for `Custom`).
    pub fn vector(&self) -> [f32; 3] {
        match *self {
            Self::Uniform => [1.0 / 3.0; 3],
            Self::Unsolved => [1.0, 0.0, 0.0],
            Self::Partial => [0.0, 1.0, 0.0],
            Self::Solved => [0.0, 0.0, 1.0],
            Self::Custom(v) => v,
        }
    }
}

/// Parameters of [`Dps`] (defaults: the released code's MATH recipe). A config file may give
/// any subset (`[selector.params] decay = 0.5`); a misspelt field is an error.
///
/// | name | default | meaning | range |
/// |---|---|---|---|
/// | `decay` | 0.7 | retention `λ` of the transition counts (`hmm_transition_decay_ratio`; Countdown/Geo3k: 0.5) | `[0, 1]` |
/// | `prior` | `constant = 1.0` | Dirichlet prior `α0` (`hmm_prior_alpha`: a float, `progress`, `stability`, `local`) | entries finite `>= 0`, column sums `> 0` |
/// | `initial_belief` | `uniform` | belief `μ0` of a newly tracked prompt (`hmm_prior_pi`) | entries finite `>= 0`, positive sum |
/// | `entropy_weight` | 0.0 | `w_H` of the `topk+entropy` score `μ(2) + w_H H(μ)` (0 = plain `topk`) | finite |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DpsParams {
    /// Retention `λ ∈ [0, 1]`.
    pub decay: f32,
    /// Dirichlet prior of each column of the transition matrix.
    pub prior: DpsPrior,
    /// Initial belief of a newly tracked prompt.
    pub initial_belief: InitialBelief,
    /// Weight of the belief entropy in the score.
    pub entropy_weight: f32,
}

impl Default for DpsParams {
    fn default() -> Self {
        Self { decay: 0.7, prior: DpsPrior::Constant(1.0), initial_belief: InitialBelief::Uniform, entropy_weight: 0.0 }
    }
}

impl DpsParams {
    /// Sets `decay`.
    #[must_use]
    pub fn decay(mut self, decay: f32) -> Self {
        self.decay = decay;
        self
    }

    /// Sets the prior.
    #[must_use]
    pub fn prior(mut self, prior: DpsPrior) -> Self {
        self.prior = prior;
        self
    }

    /// Sets the initial belief.
    #[must_use]
    pub fn initial_belief(mut self, belief: InitialBelief) -> Self {
        self.initial_belief = belief;
        self
    }

    /// Sets the entropy weight.
    #[must_use]
    pub fn entropy_weight(mut self, w: f32) -> Self {
        self.entropy_weight = w;
        self
    }
}

impl Params for DpsParams {
    type Error = SelectError;

    /// # Errors
    /// `decay` outside `[0, 1]`, a prior with a negative / non-finite entry or a zero column,
    /// an initial belief that is not a distribution, a non-finite entropy weight.
    fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.decay) {
            return Err(invalid("decay", self.decay, "the retention factor must lie in [0, 1]"));
        }
        let m = self.prior.matrix();
        if m.iter().flatten().any(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err(invalid("prior", format!("{m:?}"), "entries must be finite and >= 0"));
        }
        if (0..3).any(|c| m[0][c] + m[1][c] + m[2][c] <= 0.0) {
            return Err(invalid("prior", format!("{m:?}"), "every column needs a positive sum"));
        }
        let b = self.initial_belief.vector();
        if b.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || b.iter().sum::<f32>() <= 0.0 {
            return Err(invalid("initial_belief", format!("{b:?}"), "must be non-negative with a positive sum"));
        }
        if !self.entropy_weight.is_finite() {
            return Err(invalid("entropy_weight", self.entropy_weight, "must be finite"));
        }
        Ok(())
    }
}

const UNTRACKED: u8 = 0;
const FRESH: u8 = 1;
const PROPAGATED: u8 = 2;

/// DPS (Dynamics-Predictive Sampling): each prompt's solving state `z ∈ {unsolved, partial,
/// solved}` follows a hidden Markov chain with a per-prompt, Dirichlet-distributed transition
/// matrix; a rollout reveals the state exactly. Beliefs of *every* tracked prompt are
/// propagated every step, and the batch is the top-`B` candidates by `P(partial)`.
///
/// ```text
/// P(α)(i,j) = α(i,j) / Σ_i' α(i',j)                            (expected transition)
/// observed prompt, state o:  ξ(i,j) ∝ 1[i=o] · μ_before(j) · P(α)(i,j)   (sums to 1)
///                            α ← λ α + (1 − λ) α0 + ξ ;   μ_post = e_o
/// other tracked prompts:     α ← λ α + (1 − λ) α0 ;       μ_post = μ_prior
/// all tracked:               μ_prior ← normalise(P(α) μ_post) ;  μ_before ← μ_post
/// select:                    top-B of  μ_prior(partial) + w_H · H(μ_prior)
/// ```
/// "Tracked" = every prompt that has appeared in a candidate set or an observation (the
/// reference registers prompts lazily). One `observe` call is one step (`observe(step, &[])`
/// propagates); the `step` argument itself is not used.
///
/// Implementation: structure of arrays, `f32`, 57 bytes per prompt. The unobserved decay
/// `α ← λα + (1−λ)α0` has the closed form `α_t = α0 + λ^n (α_s − α0)` after `n` steps without
/// observation, so each step writes only the belief and the factor `λ^n` (the prior `μ_prior`
/// is recomputed from `α` and `μ_before` when needed); the pass is branch-free and vectorised. If an observation has zero likelihood under the current
/// model (possible with the `local` prior or one-hot beliefs, where the reference produces
/// NaN), `ξ` falls back to `μ_before(j)` on row `o`.
///
/// See [`DpsParams`] for the parameters.
///
/// # Errors
/// Ids outside `0..n_items` ([`SelectError::UnknownId`]) and the common input errors; the state
/// is untouched on error.
///
/// # Example
/// ```
/// use rl_core::Params;
/// use rlvr_select::{Candidates, Dps, DpsParams, NoRollouts, Outcome, Selector};
/// let mut rng = rl_core::rng_from_seed(0);
/// let mut dps = Dps::new(DpsParams::default().check()?, 1000)?;
/// let ids: Vec<u64> = (0..64).collect();
/// let sel = dps.select(0, Candidates::new(&ids), 16, &mut NoRollouts, &mut rng)?;
/// let outcomes: Vec<Outcome> = sel.ids.iter().map(|&id| Outcome::from_successes(id, 4, 8)).collect::<Result<_, _>>()?;
/// dps.observe(0, &outcomes, &mut rng)?; // updates the 16, propagates the other 48
/// assert!(dps.belief(sel.ids[0])?[1] > 1.0 / 3.0);
/// # Ok::<(), rlvr_select::SelectError>(())
/// ```
///
/// ## References
/// "Dynamics-Predictive Sampling for Active RL Finetuning of Large Reasoning Models" (ICLR 2026,
/// arXiv:2603.10887); code `maoyixiu/DPS` (`recipe/dps/task_sampler.py`).
#[derive(Debug, Clone)]
pub struct Dps {
    params: Valid<DpsParams>,
    n_items: usize,
    tick: u32,
    n_tracked: usize,
    /// `α_s`, the Dirichlet parameters as of the prompt's last observation, one array per entry
    /// (`alpha[3 * next + current]`): structure of arrays so the propagation pass vectorises.
    alpha: [Vec<f32>; 9],
    /// Posterior belief of the last completed step (`μ_before`), one array per state.
    before: [Vec<f32>; 3],
    /// `λ^n`, `n` = steps since the last observation: `α_now = α0 + decay (α_s − α0)`.
    decay: Vec<f32>,
    n_sampled: Vec<u32>,
    status: Vec<u8>,
    cache: Cache,
}

/// The saved state of a [`Dps`] (what [`Selector::save_state`] writes). Restored only through
/// [`Selector::load_state`], which checks every array before building the selector.
#[derive(Serialize)]
struct DpsStateRef<'a> {
    params: &'a DpsParams,
    n_items: usize,
    tick: u32,
    n_tracked: usize,
    alpha: &'a [Vec<f32>; 9],
    before: &'a [Vec<f32>; 3],
    decay: &'a [f32],
    n_sampled: &'a [u32],
    status: &'a [u8],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DpsState {
    params: Valid<DpsParams>,
    n_items: usize,
    tick: u32,
    n_tracked: usize,
    alpha: [Vec<f32>; 9],
    before: [Vec<f32>; 3],
    decay: Vec<f32>,
    n_sampled: Vec<u32>,
    status: Vec<u8>,
}

#[derive(Debug, Clone, Default)]
struct Cache {
    a0: [f32; 9],
    mu0: [f32; 3],
    scratch: Vec<u64>,
}

impl Cache {
    fn new(params: &DpsParams) -> Self {
        let m = params.prior.matrix();
        let mut a0 = [0.0; 9];
        for r in 0..3 {
            for c in 0..3 {
                a0[r * 3 + c] = m[r][c];
            }
        }
        let v = params.initial_belief.vector();
        let s: f32 = v.iter().sum();
        let mu0 = [v[0] / s, v[1] / s, v[2] / s];
        Self { a0, mu0, scratch: Vec::new() }
    }
}

/// How far a loaded belief's sum may be from 1 (the propagation pass renormalises in `f32`
/// every step, so a saved belief is within a few ulps of 1).
const BELIEF_SUM_TOL: f32 = 1e-3;

/// Smallest magnitude kept by the propagation pass; see [`Dps`]'s `propagate`.
const FLUSH: f32 = 1e-30;

/// `v`, or 0 when `v < FLUSH` (flush-to-zero before values turn subnormal).
#[inline(always)]
fn flush(v: f32) -> f32 {
    if v < FLUSH {
        0.0
    } else {
        v
    }
}

/// `normalise(P(α) μ)`.
#[inline(always)]
fn predict_belief(a: &[f32; 9], mu: &[f32; 3]) -> [f32; 3] {
    let c0 = a[0] + a[3] + a[6];
    let c1 = a[1] + a[4] + a[7];
    let c2 = a[2] + a[5] + a[8];
    let (w0, w1, w2) = (mu[0] / c0, mu[1] / c1, mu[2] / c2);
    let p0 = a[0] * w0 + a[1] * w1 + a[2] * w2;
    let p1 = a[3] * w0 + a[4] * w1 + a[5] * w2;
    let p2 = a[6] * w0 + a[7] * w1 + a[8] * w2;
    let inv = 1.0 / (p0 + p1 + p2);
    [p0 * inv, p1 * inv, p2 * inv]
}

#[inline(always)]
fn entropy(mu: &[f32; 3]) -> f32 {
    -mu.iter().map(|&m| m * (m + 1e-10).ln()).sum::<f32>()
}

impl Dps {
    /// DPS over the pool `0..n_items`, nothing tracked yet.
    ///
    /// # Errors
    /// None today (the parameters are checked); kept fallible for pool-size limits.
    pub fn new(params: Valid<DpsParams>, n_items: usize) -> Result<Self> {
        let cache = Cache::new(&params);
        Ok(Self {
            params,
            n_items,
            tick: 0,
            n_tracked: 0,
            alpha: std::array::from_fn(|r| vec![cache.a0[r]; n_items]),
            before: std::array::from_fn(|c| vec![cache.mu0[c]; n_items]),
            decay: vec![1.0; n_items],
            n_sampled: vec![0; n_items],
            status: vec![UNTRACKED; n_items],
            cache,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &DpsParams {
        &self.params
    }

    /// Pool size.
    pub fn n_items(&self) -> usize {
        self.n_items
    }

    /// Prompts tracked (ever a candidate or observed).
    pub fn n_tracked(&self) -> usize {
        self.n_tracked
    }

    /// Steps (observe calls) so far.
    pub fn steps(&self) -> u32 {
        self.tick
    }

    /// Bytes of per-prompt state (α: 36, μ_before: 12, decay factor: 4, sample count: 4,
    /// status: 1).
    pub const fn bytes_per_prompt() -> usize {
        9 * 4 + 3 * 4 + 4 + 4 + 1
    }

    /// Marks every prompt of the pool as tracked (as if each had been a candidate): from now
    /// on all of them are propagated each step.
    pub fn track_all(&mut self) {
        for s in &mut self.status {
            if *s == UNTRACKED {
                *s = FRESH;
            }
        }
        self.n_tracked = self.n_items;
    }

    #[inline(always)]
    fn alpha_now(&self, i: usize) -> [f32; 9] {
        let a0 = &self.cache.a0;
        if self.status[i] != PROPAGATED {
            return *a0;
        }
        let f = self.decay[i];
        std::array::from_fn(|r| a0[r] + f * (self.alpha[r][i] - a0[r]))
    }

    #[inline(always)]
    fn before_of(&self, i: usize) -> [f32; 3] {
        [self.before[0][i], self.before[1][i], self.before[2][i]]
    }

    #[inline(always)]
    fn prior_of(&self, i: usize) -> [f32; 3] {
        if self.status[i] != PROPAGATED {
            return self.cache.mu0;
        }
        predict_belief(&self.alpha_now(i), &self.before_of(i))
    }

    /// The predictive belief `μ_prior` of `id` for the coming step (unsolved, partial, solved).
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn belief(&self, id: ItemId) -> Result<[f32; 3]> {
        check_in_pool([id], self.n_items)?;
        Ok(self.prior_of(id as usize))
    }

    /// The Dirichlet parameters `α[next][current]` of `id` now.
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn alpha(&self, id: ItemId) -> Result<[[f32; 3]; 3]> {
        check_in_pool([id], self.n_items)?;
        let a = self.alpha_now(id as usize);
        Ok([[a[0], a[1], a[2]], [a[3], a[4], a[5]], [a[6], a[7], a[8]]])
    }

    /// The expected transition matrix `P(α)[next][current]` of `id` now.
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn transition_matrix(&self, id: ItemId) -> Result<[[f32; 3]; 3]> {
        let mut a = self.alpha(id)?;
        for c in 0..3 {
            let s = a[0][c] + a[1][c] + a[2][c];
            for row in a.iter_mut() {
                row[c] /= s;
            }
        }
        Ok(a)
    }

    /// Times `id` was observed.
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn times_sampled(&self, id: ItemId) -> Result<u32> {
        check_in_pool([id], self.n_items)?;
        Ok(self.n_sampled[id as usize])
    }

    /// The acquisition score of prompt `i`.
    #[inline(always)]
    fn score(&self, i: usize) -> f32 {
        let mu = self.prior_of(i);
        if self.params.entropy_weight == 0.0 {
            mu[1]
        } else {
            mu[1] + self.params.entropy_weight * entropy(&mu)
        }
    }

    /// Belief propagation for the unobserved prompts of `lo..hi`: a branch-free,
    /// structure-of-arrays pass that the compiler vectorises. Propagated prompts get
    /// `μ_before ← normalise(P(α) μ_before)` and `decay ← λ decay`; fresh ones (prior still
    /// `μ0`, `α = α0`) keep `μ_before = μ0` and become propagated; untracked ones are unchanged.
    fn propagate(&mut self, lo: usize, hi: usize) {
        let lam = self.params.decay;
        let a0 = self.cache.a0;
        let n = hi - lo;
        let [s0, s1, s2, s3, s4, s5, s6, s7, s8] = &self.alpha;
        let (s0, s1, s2, s3, s4, s5, s6, s7, s8) = (
            &s0[lo..hi],
            &s1[lo..hi],
            &s2[lo..hi],
            &s3[lo..hi],
            &s4[lo..hi],
            &s5[lo..hi],
            &s6[lo..hi],
            &s7[lo..hi],
            &s8[lo..hi],
        );
        let [b0, b1, b2] = &mut self.before;
        let (b0, b1, b2) = (&mut b0[lo..hi], &mut b1[lo..hi], &mut b2[lo..hi]);
        let f = &mut self.decay[lo..hi];
        let st = &mut self.status[lo..hi];
        let (s0, s1, s2, s3, s4, s5, s6, s7, s8) =
            (&s0[..n], &s1[..n], &s2[..n], &s3[..n], &s4[..n], &s5[..n], &s6[..n], &s7[..n], &s8[..n]);
        let (b0, b1, b2, f, st) = (&mut b0[..n], &mut b1[..n], &mut b2[..n], &mut f[..n], &mut st[..n]);
        for j in 0..n {
            let fj = f[j];
            let x0 = a0[0] + fj * (s0[j] - a0[0]);
            let x1 = a0[1] + fj * (s1[j] - a0[1]);
            let x2 = a0[2] + fj * (s2[j] - a0[2]);
            let x3 = a0[3] + fj * (s3[j] - a0[3]);
            let x4 = a0[4] + fj * (s4[j] - a0[4]);
            let x5 = a0[5] + fj * (s5[j] - a0[5]);
            let x6 = a0[6] + fj * (s6[j] - a0[6]);
            let x7 = a0[7] + fj * (s7[j] - a0[7]);
            let x8 = a0[8] + fj * (s8[j] - a0[8]);
            let (m0, m1, m2) = (b0[j], b1[j], b2[j]);
            let w0 = m0 / (x0 + x3 + x6);
            let w1 = m1 / (x1 + x4 + x7);
            let w2 = m2 / (x2 + x5 + x8);
            let p0 = x0 * w0 + x1 * w1 + x2 * w2;
            let p1 = x3 * w0 + x4 * w1 + x5 * w2;
            let p2 = x6 * w0 + x7 * w1 + x8 * w2;
            let inv = 1.0 / (p0 + p1 + p2);
            let s = st[j];
            let prop = s == PROPAGATED;
            // Values below FLUSH are set to 0: `λ^n` and vanishing belief components would
            // otherwise become subnormal after a few hundred unobserved steps, and subnormal
            // arithmetic is ~100x slower on x86 (the change is below 1e-30 in absolute terms).
            b0[j] = if prop { flush(p0 * inv) } else { m0 };
            b1[j] = if prop { flush(p1 * inv) } else { m1 };
            b2[j] = if prop { flush(p2 * inv) } else { m2 };
            f[j] = if prop { flush(fj * lam) } else { fj };
            st[j] = if s == UNTRACKED { UNTRACKED } else { PROPAGATED };
        }
    }

    /// The HMM update of one observed prompt.
    fn update_observed(&mut self, i: usize, o: usize) {
        let lam = self.params.decay;
        let a_old = self.alpha_now(i);
        let b = if self.status[i] == PROPAGATED { self.before_of(i) } else { self.cache.mu0 };
        let mut num = [0.0f32; 3];
        for (c, n) in num.iter_mut().enumerate() {
            let col = a_old[c] + a_old[3 + c] + a_old[6 + c];
            *n = b[c] * a_old[o * 3 + c] / col;
        }
        let den: f32 = num.iter().sum();
        let xi = if den > 0.0 && den.is_finite() { [num[0] / den, num[1] / den, num[2] / den] } else { b };
        let a0 = self.cache.a0;
        for r in 0..9 {
            let mut v = lam * a_old[r] + (1.0 - lam) * a0[r];
            if r / 3 == o {
                v += xi[r % 3];
            }
            self.alpha[r][i] = v;
        }
        if self.status[i] == UNTRACKED {
            self.n_tracked += 1;
        }
        self.decay[i] = 1.0;
        for c in 0..3 {
            self.before[c][i] = if c == o { 1.0 } else { 0.0 };
        }
        self.status[i] = PROPAGATED;
        self.n_sampled[i] = self.n_sampled[i].saturating_add(1);
    }
}

impl Selector for Dps {
    fn name(&self) -> &'static str {
        "dps"
    }

    fn select(
        &mut self,
        _step: u64,
        candidates: Candidates<'_>,
        batch_size: usize,
        _oracle: &mut dyn RolloutOracle,
        rng: &mut dyn RngCore,
    ) -> Result<Selection> {
        check_select_args(&candidates, batch_size, &mut self.cache.scratch)?;
        let ids = candidates.ids();
        check_in_pool(ids.iter().copied(), self.n_items)?;
        for &id in ids {
            let s = &mut self.status[id as usize];
            if *s == UNTRACKED {
                *s = FRESH;
                self.n_tracked += 1;
            }
        }
        let salt = rng.next_u64();
        let best = top_b(ids.len(), batch_size, |p| pack_key(self.score(ids[p] as usize), ids[p], salt));
        Ok(Selection {
            ids: best.iter().map(|&p| ids[p]).collect(),
            scores: best.iter().map(|&p| f64::from(self.score(ids[p] as usize))).collect(),
            ..Selection::default()
        })
    }

    fn observe(&mut self, _step: u64, outcomes: &[Outcome], _rng: &mut dyn RngCore) -> Result<()> {
        validate_outcomes(outcomes, Some(self.n_items), &mut self.cache.scratch)?;
        let next =
            self.tick.checked_add(1).ok_or_else(|| SelectError::InvalidState("DPS step counter overflow".into()))?;
        let mut observed: Vec<(usize, usize)> = outcomes.iter().map(|o| (o.id as usize, o.state().index())).collect();
        observed.sort_unstable();
        let mut lo = 0;
        for &(i, o) in &observed {
            if self.n_tracked > 0 {
                self.propagate(lo, i);
            }
            self.update_observed(i, o);
            lo = i + 1;
        }
        if self.n_tracked > 0 {
            self.propagate(lo, self.n_items);
        }
        self.tick = next;
        Ok(())
    }

    fn predict(&self, candidates: Candidates<'_>) -> Result<Option<Vec<Prediction>>> {
        check_in_pool(candidates.ids().iter().copied(), self.n_items)?;
        Ok(Some(
            candidates
                .ids()
                .iter()
                .map(|&id| {
                    let mu = self.prior_of(id as usize).map(f64::from);
                    // [ours] a scalar success-rate prediction: partial counts as 1/2.
                    Prediction { mean: 0.5 * mu[1] + mu[2], std: None, class_probs: Some(mu) }
                })
                .collect(),
        ))
    }

    fn save_state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(DpsStateRef {
            params: &self.params,
            n_items: self.n_items,
            tick: self.tick,
            n_tracked: self.n_tracked,
            alpha: &self.alpha,
            before: &self.before,
            decay: &self.decay,
            n_sampled: &self.n_sampled,
            status: &self.status,
        })?)
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let s: DpsState = serde_json::from_value(state.clone())?;
        let new = Dps {
            cache: Cache::new(&s.params),
            params: s.params,
            n_items: s.n_items,
            tick: s.tick,
            n_tracked: s.n_tracked,
            alpha: s.alpha,
            before: s.before,
            decay: s.decay,
            n_sampled: s.n_sampled,
            status: s.status,
        };
        let n = new.n_items;
        let lens = new.alpha.iter().chain(&new.before).map(Vec::len);
        if lens.chain([new.decay.len(), new.n_sampled.len(), new.status.len()]).any(|l| l != n) {
            return Err(SelectError::InvalidState(format!("DPS arrays must have n_items = {n} entries")));
        }
        if new.alpha.iter().chain(&new.before).flatten().any(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err(SelectError::InvalidState("DPS alpha/beliefs must be finite and >= 0".into()));
        }
        // Each prompt's belief is a distribution over (unsolved, partial, solved): an all-zero
        // one would make every prediction NaN, ranked silently by `select`.
        let [b0, b1, b2] = &new.before;
        let sums_to_one = |s: f32| (s - 1.0).abs() <= BELIEF_SUM_TOL;
        if let Some(i) = (0..n).find(|&i| !sums_to_one(b0[i] + b1[i] + b2[i])) {
            return Err(SelectError::InvalidState(format!(
                "DPS belief of prompt {i} is [{}, {}, {}], which does not sum to 1",
                b0[i], b1[i], b2[i]
            )));
        }
        if (0..3).any(|c| (0..n).any(|i| new.alpha[c][i] + new.alpha[3 + c][i] + new.alpha[6 + c][i] <= 0.0)) {
            return Err(SelectError::InvalidState("DPS alpha columns must have positive sums".into()));
        }
        if new.status.iter().any(|&s| s > PROPAGATED) || new.decay.iter().any(|&f| !(0.0..=1.0).contains(&f)) {
            return Err(SelectError::InvalidState("DPS status/tick entries out of range".into()));
        }
        if new.status.iter().filter(|&&s| s != UNTRACKED).count() != new.n_tracked {
            return Err(SelectError::InvalidState("DPS tracked count does not match the status array".into()));
        }
        *self = new;
        Ok(())
    }
}
