//! A synthetic prompt pool with known difficulty dynamics, and a training-loop runner, so every
//! selector can be tested and compared without an LLM.
//!
//! Two dynamics:
//! - [`Dynamics::Skill`] (default): prompt `i` has difficulty `d_i ~ N(μ_d, σ_d²)`; the policy
//!   has a global skill `θ` and a per-prompt skill `e_i`; `p_i = σ(θ + e_i − d_i)` and a group
//!   is `s ~ Binomial(k, p_i)`. Training on a group with signal (`0 < s < k`) raises `θ` by
//!   `global_lr` and `e_i` by `local_lr`; degenerate groups teach nothing (zero GRPO
//!   advantage); `e` decays by `forgetting` per step. Prompts therefore move
//!   unsolved → partial → solved as they are trained on, which is what DPS models.
//! - [`Dynamics::Hmm`]: the ground truth *is* a 3-state HMM: each step every prompt moves with
//!   a known column-stochastic matrix (`phi_trained` for prompts trained this step,
//!   `phi_idle` otherwise); unsolved emits `s = 0`, solved `s = k`, partial `s` uniform on
//!   `1..k−1`. Used to test DPS inference.
//!
//! Every prompt also has a feature vector whose first coordinate is correlated with the
//! difficulty (`feature_correlation`), the others noise (what the feature-based selectors GPS,
//! MPTS and PDTS learn from).

use crate::diagnostics::{Diagnostics, DiagnosticsSummary};
use crate::error::{invalid, nested, Result, SelectError};
use crate::oracle::RolloutOracle;
use crate::source::CandidateSource;
use crate::types::{check_in_pool, validate_outcomes, Candidates, ItemId, Outcome, Selection, Shortfall};
use crate::Selector;
use rand::{Rng, RngCore};
use rand_distr::{Binomial, Distribution, Normal};
use rl_core::{Params, Valid};
use serde::{Deserialize, Serialize};

/// Parameters of the skill-curve dynamics.
///
/// | name | default | meaning |
/// |---|---|---|
/// | `difficulty_mean` | 0.5 | mean of `d_i` (logits) |
/// | `difficulty_std` | 3.5 | std of `d_i` |
/// | `initial_skill` | 0.0 | `θ_0` |
/// | `global_lr` | 5e-5 | `θ` gain per trained group with signal |
/// | `local_lr` | 0.15 | `e_i` gain per trained group with signal |
/// | `forgetting` | 0.002 | per-step decay of `e_i` |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillParams {
    /// Mean difficulty.
    pub difficulty_mean: f64,
    /// Difficulty spread.
    pub difficulty_std: f64,
    /// Initial global skill.
    pub initial_skill: f64,
    /// Global skill gain per effective group.
    pub global_lr: f64,
    /// Per-prompt skill gain per effective group.
    pub local_lr: f64,
    /// Per-step decay of the per-prompt skill.
    pub forgetting: f64,
}

impl Default for SkillParams {
    fn default() -> Self {
        Self {
            difficulty_mean: 0.5,
            difficulty_std: 3.5,
            initial_skill: 0.0,
            global_lr: 5e-5,
            local_lr: 0.15,
            forgetting: 0.002,
        }
    }
}

/// Parameters of the ground-truth HMM dynamics (matrices `[next][current]`, columns sum to 1).
///
/// | name | default | meaning |
/// |---|---|---|
/// | `phi_trained` | `[[.7, .1, .02], [.28, .6, .08], [.02, .3, .9]]` | transitions of prompts trained this step |
/// | `phi_idle` | `[[.8, .15, .05], [.15, .7, .15], [.05, .15, .8]]` | transitions of the other prompts |
/// | `initial` | `[.4, .3, .3]` | initial state distribution |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HmmParams {
    /// Transition matrix of prompts trained this step.
    pub phi_trained: [[f64; 3]; 3],
    /// Transition matrix of the other prompts.
    pub phi_idle: [[f64; 3]; 3],
    /// Initial state distribution.
    pub initial: [f64; 3],
}

impl Default for HmmParams {
    fn default() -> Self {
        Self {
            phi_trained: [[0.7, 0.1, 0.02], [0.28, 0.6, 0.08], [0.02, 0.3, 0.9]],
            phi_idle: [[0.8, 0.15, 0.05], [0.15, 0.7, 0.15], [0.05, 0.15, 0.8]],
            initial: [0.4, 0.3, 0.3],
        }
    }
}

/// The difficulty dynamics of a [`PromptPoolSim`]. In a config file: `dynamics = { skill = {} }`
/// or `dynamics = { hmm = { initial = [0.5, 0.3, 0.2] } }` (omitted fields take their defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dynamics {
    /// Per-prompt skill curves driven by training.
    Skill(SkillParams),
    /// A ground-truth 3-state HMM.
    Hmm(HmmParams),
}

/// Parameters of a [`PromptPoolSim`].
///
/// | name | default | meaning |
/// |---|---|---|
/// | `n_prompts` | 2000 | pool size |
/// | `group_size` | 8 | rollouts per prompt `k` |
/// | `feature_dim` | 8 | feature dimension |
/// | `feature_correlation` | 0.2 | correlation of feature 0 with difficulty (GPS reports ≈ 0.2 for real embeddings) |
/// | `dynamics` | `skill` (defaults) | see [`Dynamics`] |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimParams {
    /// Pool size.
    pub n_prompts: usize,
    /// Rollouts per prompt for training.
    pub group_size: usize,
    /// Feature dimension (≥ 1).
    pub feature_dim: usize,
    /// Correlation of feature 0 with the difficulty, in `[-1, 1]`.
    pub feature_correlation: f64,
    /// Difficulty dynamics.
    pub dynamics: Dynamics,
}

impl Default for SimParams {
    fn default() -> Self {
        Self {
            n_prompts: 2000,
            group_size: 8,
            feature_dim: 8,
            feature_correlation: 0.2,
            dynamics: Dynamics::Skill(SkillParams::default()),
        }
    }
}

impl SimParams {
    /// Sets `n_prompts`.
    #[must_use]
    pub fn n_prompts(mut self, n: usize) -> Self {
        self.n_prompts = n;
        self
    }

    /// Sets `group_size`.
    #[must_use]
    pub fn group_size(mut self, k: usize) -> Self {
        self.group_size = k;
        self
    }

    /// Sets `feature_dim`.
    #[must_use]
    pub fn feature_dim(mut self, d: usize) -> Self {
        self.feature_dim = d;
        self
    }

    /// Sets `feature_correlation`.
    #[must_use]
    pub fn feature_correlation(mut self, rho: f64) -> Self {
        self.feature_correlation = rho;
        self
    }

    /// Sets `dynamics`.
    #[must_use]
    pub fn dynamics(mut self, dynamics: Dynamics) -> Self {
        self.dynamics = dynamics;
        self
    }
}

impl Params for SkillParams {
    type Error = SelectError;

    /// # Errors
    /// A non-finite value, a negative spread or rate, `forgetting` outside `[0, 1]`.
    fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("difficulty_mean", self.difficulty_mean),
            ("difficulty_std", self.difficulty_std),
            ("initial_skill", self.initial_skill),
            ("global_lr", self.global_lr),
            ("local_lr", self.local_lr),
            ("forgetting", self.forgetting),
        ] {
            if !v.is_finite() {
                return Err(invalid(name, v, "must be finite"));
            }
        }
        for (name, v) in
            [("difficulty_std", self.difficulty_std), ("global_lr", self.global_lr), ("local_lr", self.local_lr)]
        {
            if v < 0.0 {
                return Err(invalid(name, v, "must be >= 0"));
            }
        }
        if !(0.0..=1.0).contains(&self.forgetting) {
            return Err(invalid("forgetting", self.forgetting, "must lie in [0, 1]"));
        }
        Ok(())
    }
}

impl Params for HmmParams {
    type Error = SelectError;

    /// # Errors
    /// A transition matrix that is not column-stochastic, an initial vector that is not a
    /// distribution.
    fn validate(&self) -> Result<()> {
        for (name, m) in [("phi_trained", self.phi_trained), ("phi_idle", self.phi_idle)] {
            let ok = m.iter().flatten().all(|x| x.is_finite() && *x >= 0.0)
                && (0..3).all(|c| ((m[0][c] + m[1][c] + m[2][c]) - 1.0).abs() < 1e-9);
            if !ok {
                return Err(invalid(name, format!("{m:?}"), "must be column-stochastic"));
            }
        }
        if self.initial.iter().any(|x| !(x.is_finite() && *x >= 0.0))
            || (self.initial.iter().sum::<f64>() - 1.0).abs() > 1e-9
        {
            return Err(invalid("initial", format!("{:?}", self.initial), "must be a distribution"));
        }
        Ok(())
    }
}

impl Params for SimParams {
    type Error = SelectError;

    /// # Errors
    /// An empty pool, `group_size < 2`, `feature_dim == 0`, a correlation outside `[-1, 1]`,
    /// invalid dynamics (named `dynamics.skill.<field>` / `dynamics.hmm.<field>`).
    fn validate(&self) -> Result<()> {
        if self.n_prompts == 0 {
            return Err(invalid("n_prompts", 0, "the pool needs at least one prompt"));
        }
        if self.group_size < 2 {
            return Err(invalid("group_size", self.group_size, "a group needs at least 2 rollouts"));
        }
        if self.feature_dim == 0 {
            return Err(invalid("feature_dim", 0, "at least one feature"));
        }
        if !(-1.0..=1.0).contains(&self.feature_correlation) {
            return Err(invalid("feature_correlation", self.feature_correlation, "must lie in [-1, 1]"));
        }
        match &self.dynamics {
            Dynamics::Skill(s) => s.validate().map_err(|e| nested("dynamics.skill", e)),
            Dynamics::Hmm(h) => h.validate().map_err(|e| nested("dynamics.hmm", e)),
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn sample_column(m: &[[f64; 3]; 3], c: usize, u: f64) -> u8 {
    if u < m[0][c] {
        0
    } else if u < m[0][c] + m[1][c] {
        1
    } else {
        2
    }
}

/// The synthetic prompt pool. It is also a [`RolloutOracle`] (rollouts against the current
/// policy, without training), and counts every rollout it generates.
#[derive(Debug, Clone)]
pub struct PromptPoolSim {
    params: Valid<SimParams>,
    difficulty: Vec<f64>,
    local: Vec<f64>,
    theta: f64,
    state: Vec<u8>,
    features: Vec<f32>,
    rollouts: u64,
    steps: u64,
}

impl PromptPoolSim {
    /// A pool drawn from `seed` (difficulties, features, initial HMM states).
    ///
    /// # Errors
    /// Only an internal distribution failure (the parameters are checked).
    pub fn new(params: Valid<SimParams>, seed: u64) -> Result<Self> {
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(seed, "prompt-pool"));
        let n = params.n_prompts;
        let std_normal = Normal::new(0.0, 1.0).map_err(|e| invalid("normal", e, "internal"))?;
        let (difficulty, theta, state) = match params.dynamics {
            Dynamics::Skill(s) => {
                let d: Vec<f64> =
                    (0..n).map(|_| s.difficulty_mean + s.difficulty_std * std_normal.sample(&mut rng)).collect();
                (d, s.initial_skill, vec![0; n])
            }
            Dynamics::Hmm(h) => {
                let st: Vec<u8> = (0..n)
                    .map(|_| {
                        let u: f64 = rng.random();
                        if u < h.initial[0] {
                            0
                        } else if u < h.initial[0] + h.initial[1] {
                            1
                        } else {
                            2
                        }
                    })
                    .collect();
                (st.iter().map(|&z| 1.0 - f64::from(z)).collect(), 0.0, st)
            }
        };
        // Standardised difficulty -> feature 0 with the requested correlation.
        let m = difficulty.iter().sum::<f64>() / n as f64;
        let sd = (difficulty.iter().map(|d| (d - m).powi(2)).sum::<f64>() / n as f64).sqrt().max(1e-12);
        let rho = params.feature_correlation;
        let mut features = Vec::with_capacity(n * params.feature_dim);
        for d in &difficulty {
            let z = (d - m) / sd;
            features.push((rho * z + (1.0 - rho * rho).sqrt() * std_normal.sample(&mut rng)) as f32);
            for _ in 1..params.feature_dim {
                features.push(std_normal.sample(&mut rng) as f32);
            }
        }
        Ok(Self { params, difficulty, local: vec![0.0; n], theta, state, features, rollouts: 0, steps: 0 })
    }

    /// The parameters.
    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// Pool size.
    pub fn n_prompts(&self) -> usize {
        self.params.n_prompts
    }

    /// Training steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The feature table (`n_prompts * feature_dim`, row-major).
    pub fn features(&self) -> &[f32] {
        &self.features
    }

    /// The difficulty of each prompt (skill mode: `d_i`; HMM mode: 1 − initial state).
    pub fn difficulties(&self) -> &[f64] {
        &self.difficulty
    }

    /// The true success probability of prompt `id` now (HMM mode: 0, 1/2, 1 by state).
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn success_prob(&self, id: ItemId) -> Result<f64> {
        check_in_pool([id], self.n_prompts())?;
        Ok(self.prob(id as usize))
    }

    fn prob(&self, i: usize) -> f64 {
        match self.params.dynamics {
            Dynamics::Skill(_) => sigmoid(self.theta + self.local[i] - self.difficulty[i]),
            Dynamics::Hmm(_) => f64::from(self.state[i]) / 2.0,
        }
    }

    /// Mean true success probability over the pool (the "accuracy" the runs target).
    pub fn mean_success(&self) -> f64 {
        (0..self.n_prompts()).map(|i| self.prob(i)).sum::<f64>() / self.n_prompts() as f64
    }

    /// The true HMM state of `id` (HMM mode), or the state most likely under `p` (skill mode:
    /// unsolved if `p^k ≥ ...` — the state whose probability `(1−p)^k`, `1−p^k−(1−p)^k`, `p^k`
    /// is largest).
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn true_state(&self, id: ItemId) -> Result<usize> {
        check_in_pool([id], self.n_prompts())?;
        Ok(match self.params.dynamics {
            Dynamics::Hmm(_) => usize::from(self.state[id as usize]),
            Dynamics::Skill(_) => {
                let d = self.state_distribution_of(id as usize);
                let mut arg = 0;
                for c in 1..3 {
                    if d[c] > d[arg] {
                        arg = c;
                    }
                }
                arg
            }
        })
    }

    /// The distribution of the next observed state of prompt `i` given the current truth
    /// (skill mode: from `p`; HMM mode: one-hot on the current state).
    fn state_distribution_of(&self, i: usize) -> [f64; 3] {
        match self.params.dynamics {
            Dynamics::Hmm(_) => {
                let mut e = [0.0; 3];
                e[usize::from(self.state[i])] = 1.0;
                e
            }
            Dynamics::Skill(_) => {
                let p = self.prob(i);
                let k = self.params.group_size as i32;
                let (u, s) = ((1.0 - p).powi(k), p.powi(k));
                [u, 1.0 - u - s, s]
            }
        }
    }

    /// Fraction of the pool in each state now (unsolved, partial, solved): the HMM's true
    /// state frequencies, or in skill mode the expected frequencies of the observed state.
    pub fn state_frequencies(&self) -> [f64; 3] {
        let mut f = [0.0; 3];
        for i in 0..self.n_prompts() {
            let d = self.state_distribution_of(i);
            for c in 0..3 {
                f[c] += d[c];
            }
        }
        f.map(|x| x / self.n_prompts() as f64)
    }

    fn group(&self, id: ItemId, k: usize, rng: &mut dyn RngCore) -> Result<Outcome> {
        let i = id as usize;
        let s = match self.params.dynamics {
            Dynamics::Skill(_) => {
                let p = self.prob(i).clamp(0.0, 1.0);
                Binomial::new(k as u64, p).map_err(|e| invalid("p", e, "internal"))?.sample(rng) as usize
            }
            Dynamics::Hmm(_) => match self.state[i] {
                0 => 0,
                2 => k,
                _ => rng.random_range(1..k.max(2)),
            },
        };
        Outcome::from_successes(id, s, k)
    }

    /// Rolls out `group_size` responses for each id, for training (counted).
    ///
    /// # Errors
    /// [`SelectError::UnknownId`].
    pub fn rollout_for_training(&mut self, ids: &[ItemId], rng: &mut dyn RngCore) -> Result<Vec<Outcome>> {
        let k = self.params.group_size;
        self.rollout(ids, k, rng)
    }

    /// One training step on the groups trained on (see the module docs for the dynamics).
    ///
    /// # Errors
    /// Invalid outcomes (as [`Selector::observe`]); the simulator is unchanged then.
    pub fn train(&mut self, outcomes: &[Outcome], rng: &mut dyn RngCore) -> Result<()> {
        let mut scratch = Vec::new();
        validate_outcomes(outcomes, Some(self.n_prompts()), &mut scratch)?;
        match self.params.dynamics {
            Dynamics::Skill(s) => {
                for l in &mut self.local {
                    *l *= 1.0 - s.forgetting;
                }
                for o in outcomes {
                    if !o.is_degenerate() {
                        self.theta += s.global_lr;
                        self.local[o.id as usize] += s.local_lr;
                    }
                }
            }
            Dynamics::Hmm(h) => {
                let mut trained = vec![false; self.n_prompts()];
                for o in outcomes {
                    trained[o.id as usize] = true;
                }
                for (z, t) in self.state.iter_mut().zip(trained) {
                    let m = if t { &h.phi_trained } else { &h.phi_idle };
                    *z = sample_column(m, usize::from(*z), rng.random());
                }
            }
        }
        self.steps += 1;
        Ok(())
    }
}

impl RolloutOracle for PromptPoolSim {
    fn rollout(&mut self, ids: &[ItemId], k: usize, rng: &mut dyn RngCore) -> Result<Vec<Outcome>> {
        check_in_pool(ids.iter().copied(), self.n_prompts())?;
        if k == 0 {
            return Err(invalid("k", 0, "a group needs at least one rollout"));
        }
        let out = ids.iter().map(|&id| self.group(id, k, rng)).collect::<Result<Vec<_>>>()?;
        self.rollouts += (ids.len() * k) as u64;
        Ok(out)
    }

    fn rollouts_spent(&self) -> u64 {
        self.rollouts
    }
}

/// Settings of [`run`].
///
/// | name | default | meaning |
/// |---|---|---|
/// | `batch_size` | 32 | prompts per step `B` |
/// | `steps` | 400 | maximum training steps |
/// | `target_success` | 0.6 | mean pool success rate that ends the race |
/// | `stop_at_target` | true | stop once the target is reached |
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Prompts per step.
    pub batch_size: usize,
    /// Maximum steps.
    pub steps: u64,
    /// Target mean success rate of the pool.
    pub target_success: f64,
    /// Stop once the target is reached.
    pub stop_at_target: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self { batch_size: 32, steps: 400, target_success: 0.6, stop_at_target: true }
    }
}

/// One step of a [`run`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step index.
    pub step: u64,
    /// Groups trained on.
    pub trained: usize,
    /// Effective-sample ratio of the batch.
    pub esr: f64,
    /// Cumulative rollouts (selection + training).
    pub rollouts: u64,
    /// Mean pool success rate after the step.
    pub mean_success: f64,
    /// Set when the selector returned a short batch.
    pub shortfall: Option<Shortfall>,
}

/// The result of a [`run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Selector name.
    pub method: String,
    /// Per-step records.
    pub records: Vec<StepRecord>,
    /// Cumulative rollouts when the target was first reached.
    pub rollouts_to_target: Option<u64>,
    /// Steps when the target was first reached.
    pub steps_to_target: Option<u64>,
    /// Mean pool success rate at the end.
    pub final_success: f64,
    /// Steps with a short batch.
    pub short_steps: u64,
    /// Accumulated diagnostics.
    pub diagnostics: DiagnosticsSummary,
}

/// Trains the simulated policy with `selector` choosing the batches: each step builds
/// candidates from `source`, selects, rolls out the selected prompts that were not prefetched,
/// trains, and observes. Rollouts are counted by the simulator (selection + training).
///
/// # Errors
/// Selector, source or simulator errors.
pub fn run(
    selector: &mut dyn Selector,
    sim: &mut PromptPoolSim,
    source: &mut dyn CandidateSource,
    config: &RunConfig,
    rng: &mut dyn RngCore,
) -> Result<RunReport> {
    if config.batch_size == 0 {
        return Err(SelectError::ZeroBatch);
    }
    let mut diag = Diagnostics::new(sim.n_prompts());
    let mut records = Vec::new();
    let (mut rollouts_to_target, mut steps_to_target) = (None, None);
    let mut short_steps = 0;
    for step in 0..config.steps {
        let candidates = source.next_candidates(config.batch_size, rng)?;
        let selection: Selection = selector.select(step, candidates, config.batch_size, sim, rng)?;
        let predictions = selector.predict(Candidates::new(&selection.ids))?;
        let missing: Vec<ItemId> =
            selection.ids.iter().copied().filter(|&id| selection.prefetched_for(id).is_none()).collect();
        let mut rolled = sim.rollout_for_training(&missing, rng)?.into_iter();
        let outcomes: Vec<Outcome> = selection
            .ids
            .iter()
            .filter_map(|&id| selection.prefetched_for(id).cloned().or_else(|| rolled.next()))
            .collect();
        sim.train(&outcomes, rng)?;
        selector.observe(step, &outcomes, rng)?;
        let d = diag.record(&selection, &outcomes, predictions.as_deref());
        if selection.shortfall.is_some() {
            short_steps += 1;
        }
        let mean_success = sim.mean_success();
        records.push(StepRecord {
            step,
            trained: outcomes.len(),
            esr: d.esr,
            rollouts: sim.rollouts_spent(),
            mean_success,
            shortfall: selection.shortfall,
        });
        if rollouts_to_target.is_none() && mean_success >= config.target_success {
            rollouts_to_target = Some(sim.rollouts_spent());
            steps_to_target = Some(step + 1);
            if config.stop_at_target {
                break;
            }
        }
    }
    Ok(RunReport {
        method: selector.name().to_string(),
        records,
        rollouts_to_target,
        steps_to_target,
        final_success: sim.mean_success(),
        short_steps,
        diagnostics: diag.summary(),
    })
}
