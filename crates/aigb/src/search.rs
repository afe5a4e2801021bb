//! AIGB-Pearl's policy search (feature `tch`): fine-tunes the DiffBid planner to raise the
//! trajectory evaluator's score of its plans, under a KL-to-reference bound and a shared-noise
//! ("synchronous coupling") distance to the reference sampler; and expert feedback, which runs
//! the searched planner in the simulator and hands the labelled trajectories back to the
//! evaluator.
//!
//! Reference: Mou et al., "Enhancing Generative Auto-bidding with Offline Reward Evaluation and
//! Policy Search" (arXiv 2509.15927 v3, ICLR 2026): maximise `E_{τ∼p_θ}[E_ω(τ)]` subject to
//! `KL(p_θ ‖ p_ref) ≤ δ` and a Lipschitz condition on the planner, enforced in practice with
//! synchronous coupling. The paper's practical algorithm is not public; this is our
//! reconstruction (research brief B4), every choice a parameter ([`SearchParams`]):
//!
//! ```text
//! situation: a logged trajectory's first L ticks (L ∼ U{1..max_prefix}) in-painted, y = y*
//! coupled chains: x_K = σ_init ε_K; x_{k−1} = μ(x_k, k) + σ_k z_k, the same (ε_K, z_k) for θ and ref
//! KL(θ ‖ ref) = Σ_{k ≥ 1} Σ_free ‖μ_θ(x_k) − μ_ref(x_k)‖² / (2σ_k²)   (chain rule; x_k from θ's chain)
//! W(θ, ref)  = Σ_free ‖τ_θ(ε) − τ_ref(ε)‖²                            (≥ W₂² under the coupling)
//! J(θ) = mean_b [E_ω(τ_θ,b) − κ u_ω(τ_θ,b)] − β_KL KL − β_W W,   ascended by AdamW through the
//!        last `grad_steps` denoising steps (reward back-propagation, DRaFT-style)
//! bound: after each step, if the batch KL exceeds δ, halve the step (≤ max_backtracks), else undo it;
//!        β_KL ← β_KL · exp(η (KL/δ − 1))   (dual ascent)
//! ```
//!
//! The last denoising step is deterministic (σ_0 = 0) and is left out of the KL (its
//! contribution is a point mass; the reference's sampler does the same). "Free" ticks are those
//! not in-painted. The no-constraint ablation is [`SearchParams::unconstrained`].

use std::path::Path;
use std::sync::{Arc, Mutex};

use rand::Rng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::bidder::STATE_DIM;
use crate::bidders::{OnlineLpParams, OnlineLpTable};
use crate::dataset::TrajectoryDataset;
use crate::error::{check_positive, check_range, AigbError, Result};
use crate::market::{build_lineup, BidderSpec};
pub use crate::planner::PlanLog;
use crate::planner::{ChainNoise, DiffusionPlanner, PlannerBidder, PlannerSnapshot, StateScaler};
use crate::sim::Simulator;
use crate::traj_eval::{ScoredTrajectory, TrajEvaluator};
use rl_core::Params;
use rl_nn::optim::{Adam, AdamParams};

/// Checkpoint format version of [`PolicySearch`].
pub const SEARCH_FORMAT_VERSION: u32 = 1;
const SEARCH_KIND: &str = "aigb.policy_search";
const C: i64 = STATE_DIM as i64;

/// Parameters of [`PolicySearch`] (reconstructed; see the module docs).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `batch_size` | 16 | coupled chains per step | ≥ 1 |
/// | `lr` | 1e-5 | AdamW step size on the U-Net | > 0 |
/// | `grad_clip` | 1.0 | global gradient-norm clip | > 0 |
/// | `kl_bound` | 1.0 | `δ`: KL(θ ‖ ref) per plan, nats | > 0 |
/// | `kl_weight` | 0.1 | initial `β_KL` | ≥ 0 |
/// | `adapt_kl_weight` | true | dual ascent on `β_KL` | |
/// | `kl_weight_rate` | 0.5 | `η` of the dual ascent | > 0 |
/// | `w2_weight` | 1.0 | `β_W` on the shared-noise distance (scaled units) | ≥ 0 |
/// | `enforce_bound` | true | backtrack steps whose batch KL exceeds `δ` | |
/// | `max_backtracks` | 6 | halvings before a step is undone | ≥ 0 |
/// | `pessimism` | 0.0 | `κ`: score minus `κ ·` ensemble disagreement | ≥ 0 |
/// | `grad_steps` | 10 | denoising steps back-propagated through (the last ones) | ≥ 1 |
/// | `train_inverse` | false | also fine-tune the inverse-dynamics model | |
/// | `max_prefix` | 24 | in-painted ticks `L ∼ U{1..max_prefix}` | 1..horizon |
/// | `seed` | 0 | situations and noise | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchParams {
    /// Chains per step.
    pub batch_size: usize,
    /// Learning rate.
    pub lr: f64,
    /// Gradient clip.
    pub grad_clip: f64,
    /// KL bound δ.
    pub kl_bound: f64,
    /// Initial KL weight.
    pub kl_weight: f64,
    /// Dual ascent on the KL weight.
    pub adapt_kl_weight: bool,
    /// Dual ascent rate.
    pub kl_weight_rate: f64,
    /// Shared-noise distance weight.
    pub w2_weight: f64,
    /// Backtrack to the KL bound.
    pub enforce_bound: bool,
    /// Backtracking halvings.
    pub max_backtracks: usize,
    /// Pessimism κ.
    pub pessimism: f64,
    /// Back-propagated denoising steps.
    pub grad_steps: usize,
    /// Fine-tune the inverse model.
    pub train_inverse: bool,
    /// Largest in-painted prefix.
    pub max_prefix: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self {
            batch_size: 16,
            lr: 1e-5,
            grad_clip: 1.0,
            kl_bound: 1.0,
            kl_weight: 0.1,
            adapt_kl_weight: true,
            kl_weight_rate: 0.5,
            w2_weight: 1.0,
            enforce_bound: true,
            max_backtracks: 6,
            pessimism: 0.0,
            grad_steps: 10,
            train_inverse: false,
            max_prefix: 24,
            seed: 0,
        }
    }
}

impl SearchParams {
    /// The no-constraint ablation: no KL term, no shared-noise term, no bound.
    pub fn unconstrained(self) -> Self {
        Self { kl_weight: 0.0, adapt_kl_weight: false, w2_weight: 0.0, enforce_bound: false, ..self }
    }
}

crate::traffic::setters!(SearchParams {
    batch_size: usize,
    lr: f64,
    grad_clip: f64,
    kl_bound: f64,
    kl_weight: f64,
    adapt_kl_weight: bool,
    kl_weight_rate: f64,
    w2_weight: f64,
    enforce_bound: bool,
    max_backtracks: usize,
    pessimism: f64,
    grad_steps: usize,
    train_inverse: bool,
    max_prefix: usize,
    seed: u64,
});

impl rl_core::Params for SearchParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        for (name, v) in
            [("batch_size", self.batch_size), ("grad_steps", self.grad_steps), ("max_prefix", self.max_prefix)]
        {
            if v == 0 {
                return Err(AigbError::invalid(name, 0, "must be >= 1"));
            }
        }
        check_positive("lr", self.lr)?;
        check_positive("grad_clip", self.grad_clip)?;
        check_positive("kl_bound", self.kl_bound)?;
        check_range("kl_weight", self.kl_weight, 0.0, f64::INFINITY)?;
        check_positive("kl_weight_rate", self.kl_weight_rate)?;
        check_range("w2_weight", self.w2_weight, 0.0, f64::INFINITY)?;
        check_range("pessimism", self.pessimism, 0.0, f64::INFINITY)?;
        Ok(())
    }
}

/// One search step's measurements (batch means).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchStats {
    /// Evaluator score (normalised) of θ's plans before the step.
    pub score: f64,
    /// Ensemble disagreement on them.
    pub uncertainty: f64,
    /// KL(θ ‖ ref) per plan before the step.
    pub kl: f64,
    /// Shared-noise distance before the step.
    pub w2: f64,
    /// KL per plan after the accepted step (same batch and noise).
    pub kl_after: f64,
    /// Halvings taken (`max_backtracks + 1`: the step was undone).
    pub backtracks: usize,
    /// β_KL after the step.
    pub kl_weight: f64,
}

/// A logged situation: scaled states and the advertiser's budget / CPA ratio.
#[derive(Debug, Clone)]
struct Situation {
    states: Vec<f32>,
    len: usize,
    ratio: f64,
}

#[derive(Serialize)]
struct SearchStateRef<'a> {
    params: &'a SearchParams,
    reference: u64,
    data: u64,
    kl_weight: f64,
    steps: u64,
    rng: &'a rl_core::SeededRng,
}

#[derive(Deserialize)]
struct SearchState {
    params: rl_core::Valid<SearchParams>,
    reference: u64,
    data: u64,
    kl_weight: f64,
    steps: u64,
    rng: rl_core::SeededRng,
}

/// Policy search on a planner against a [`TrajEvaluator`] (CPU).
#[derive(Debug)]
pub struct PolicySearch {
    params: rl_core::Valid<SearchParams>,
    theta: DiffusionPlanner,
    reference: DiffusionPlanner,
    opt: Adam,
    trained: Vec<(String, Tensor)>,
    situations: Vec<Situation>,
    ref_fingerprint: u64,
    data_fingerprint: u64,
    kl_weight: f64,
    rng: rl_core::SeededRng,
    steps: u64,
}

fn weights_fingerprint(s: &PlannerSnapshot) -> u64 {
    let mut h = rl_core::seed::splitmix64(s.weights.tensors.len() as u64);
    for (name, (shape, v)) in &s.weights.tensors {
        for b in name.bytes() {
            h = rl_core::seed::splitmix64(h ^ u64::from(b));
        }
        for d in shape {
            h = rl_core::seed::splitmix64(h ^ *d as u64);
        }
        for x in v {
            h = rl_core::seed::splitmix64(h ^ u64::from(x.to_bits()));
        }
    }
    h
}

/// Sets `requires_grad` of every variable of `vs` whose name starts with `prefix`.
fn set_trainable(vs: &tch::nn::VarStore, prefix: &str, on: bool) -> Result<()> {
    for (n, t) in vs.variables() {
        if n.starts_with(prefix) {
            let _ = t.f_set_requires_grad(on)?;
        }
    }
    Ok(())
}

impl PolicySearch {
    /// A search starting from (and regularised towards) the planner `reference`, on the
    /// situations of `data` (logged trajectories, scaled with the planner's scaler).
    ///
    /// # Errors
    /// [`AigbError::Empty`] without trajectories; [`AigbError::InvalidParameter`] for
    /// `max_prefix ≥ horizon`; trajectories longer than the horizon; network errors.
    pub fn new(
        params: rl_core::Valid<SearchParams>,
        reference: &PlannerSnapshot,
        data: &TrajectoryDataset,
    ) -> Result<Self> {
        let theta = DiffusionPlanner::from_snapshot(reference)?;
        let refp = DiffusionPlanner::from_snapshot(reference)?;
        let h = refp.params().horizon;
        if params.max_prefix >= h {
            return Err(AigbError::invalid("max_prefix", params.max_prefix, format!("must be < the horizon {h}")));
        }
        if data.trajectories.is_empty() {
            return Err(AigbError::Empty { what: "trajectories".into() });
        }
        let sc: &StateScaler = refp.scaler();
        let mut situations = Vec::with_capacity(data.trajectories.len());
        let mut fp = rl_core::seed::splitmix64(data.trajectories.len() as u64);
        for (j, tr) in data.trajectories.iter().enumerate() {
            if tr.steps.len() > h || tr.steps.is_empty() {
                return Err(AigbError::Shape {
                    what: format!("trajectory {j} length"),
                    expected: format!("1..={h}"),
                    got: tr.steps.len().to_string(),
                });
            }
            let mut states = vec![0.0f32; h * STATE_DIM];
            for (t, s) in tr.steps.iter().enumerate() {
                let x = sc.apply(&s.state);
                states[t * STATE_DIM..(t + 1) * STATE_DIM].copy_from_slice(&x);
                for v in x {
                    fp = rl_core::seed::splitmix64(fp ^ u64::from(v.to_bits()));
                }
            }
            situations.push(Situation { states, len: tr.steps.len(), ratio: tr.budget / tr.cpa });
        }
        set_trainable(refp.var_store(), "", false)?;
        set_trainable(theta.var_store(), "inv.", params.train_inverse)?;
        let mut trained: Vec<(String, Tensor)> = theta
            .var_store()
            .variables()
            .into_iter()
            .filter(|(n, _)| n.starts_with("unet.") || (params.train_inverse && n.starts_with("inv.")))
            .collect();
        trained.sort_by(|a, b| a.0.cmp(&b.0));
        let opt = Adam::new(
            AdamParams::adamw().lr(params.lr).weight_decay(0.0).max_grad_norm(Some(params.grad_clip)).check()?,
            trained.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect(),
        )?;
        let rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "policy-search"));
        let kl_weight = params.kl_weight;
        Ok(Self {
            params,
            theta,
            reference: refp,
            opt,
            trained,
            situations,
            ref_fingerprint: weights_fingerprint(reference),
            data_fingerprint: fp,
            kl_weight,
            rng,
            steps: 0,
        })
    }

    /// The planner being searched.
    pub fn planner(&self) -> &DiffusionPlanner {
        &self.theta
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Current `β_KL`.
    pub fn kl_weight(&self) -> f64 {
        self.kl_weight
    }

    /// Draws a batch of situations and chain noise from `rng`.
    fn draw(&self, b: usize, rng: &mut rl_core::SeededRng) -> Result<(Tensor, Tensor, Vec<f64>, ChainNoise)> {
        let h = self.theta.params().horizon;
        let mut pre = vec![0.0f32; b * h * STATE_DIM];
        let mut mk = vec![0.0f32; b * h];
        let mut ratio = Vec::with_capacity(b);
        for j in 0..b {
            let s = &self.situations[rng.random_range(0..self.situations.len())];
            let l = rng.random_range(1..=self.params.max_prefix).min(s.len);
            pre[j * h * STATE_DIM..(j * h + l) * STATE_DIM].copy_from_slice(&s.states[..l * STATE_DIM]);
            for t in 0..l {
                mk[j * h + t] = 1.0;
            }
            ratio.push(s.ratio);
        }
        let (bb, hh) = (b as i64, h as i64);
        let noise = ChainNoise::draw(bb, hh, self.theta.params().steps, rng)?;
        Ok((
            Tensor::f_from_slice(&pre)?.f_view([bb, hh, C])?,
            Tensor::f_from_slice(&mk)?.f_view([bb, hh, 1])?,
            ratio,
            noise,
        ))
    }

    /// θ's coupled chain: the plan and the KL to the reference along it (`[B]`), with gradient
    /// through the last `grad_steps` steps when `grad`.
    fn theta_chain(&self, prefix: &Tensor, m: &Tensor, noise: &ChainNoise, grad: bool) -> Result<(Tensor, Tensor)> {
        let p = self.theta.params();
        let b = prefix.size()[0];
        let y = self.theta.target(b)?;
        let free = m.f_neg()?.f_add_scalar(1.0)?;
        let mut x = DiffusionPlanner::inpaint(&noise.init.f_mul_scalar(p.init_noise_scale)?, prefix, m)?;
        let mut kl = Tensor::f_zeros([b], (Kind::Float, Device::Cpu))?;
        for k in (0..p.steps).rev() {
            let with_grad = grad && k < self.params.grad_steps;
            let step = |x: &Tensor| -> Result<(Tensor, Tensor)> {
                let mu = self.theta.p_mean(x, k, &y)?;
                let mu_ref = self.reference.p_mean(x, k, &y)?;
                Ok((mu, mu_ref))
            };
            let (mu, mu_ref) = if with_grad { step(&x)? } else { tch::no_grad(|| step(&x))? };
            let sd = self.theta.step_std(k);
            if k > 0 && sd > 0.0 {
                let d = mu.f_sub(&mu_ref)?.f_square()?.f_mul(&free)?;
                kl = kl.f_add(
                    &d.f_sum_dim_intlist([1i64, 2].as_slice(), false, Kind::Float)?.f_div_scalar(2.0 * sd * sd)?,
                )?;
            }
            let next = if k > 0 { mu.f_add(&noise.steps[k].f_mul_scalar(sd)?)? } else { mu };
            x = DiffusionPlanner::inpaint(&next, prefix, m)?;
            if !with_grad {
                x = x.f_detach()?;
            }
        }
        Ok((x, kl))
    }

    /// The reference's coupled plan (no gradient).
    fn reference_chain(&self, prefix: &Tensor, m: &Tensor, noise: &ChainNoise) -> Result<Tensor> {
        let b = prefix.size()[0];
        let y = self.reference.target(b)?;
        tch::no_grad(|| self.reference.sample_chain(prefix, m, &y, noise, &mut |_, _, _| Ok(())))
    }

    /// Evaluator score (mean, disagreement) `[B]` of θ's scaled plans.
    fn score(&self, evaluator: &mut TrajEvaluator, plans: &Tensor, ratio: &[f64]) -> Result<(Tensor, Tensor)> {
        let raw = self.theta.scaler().invert_tensor(plans)?;
        let act = self.theta.plan_actions(plans)?.f_clamp_min(0.0)?;
        evaluator.score_tensors(&raw, &act, ratio)
    }

    /// Measures θ on `n` fresh situations drawn from `seed` (no update): evaluator score,
    /// disagreement, KL to the reference and shared-noise distance (means per plan).
    ///
    /// # Errors
    /// libtorch failures.
    pub fn measure(&self, evaluator: &mut TrajEvaluator, n: usize, seed: u64) -> Result<SearchStats> {
        let mut rng = rl_core::rng_from_seed(seed);
        let (prefix, m, ratio, noise) = self.draw(n, &mut rng)?;
        let plan_ref = self.reference_chain(&prefix, &m, &noise)?;
        let free = m.f_neg()?.f_add_scalar(1.0)?;
        tch::no_grad(|| -> Result<SearchStats> {
            let (plan, kl) = self.theta_chain(&prefix, &m, &noise, false)?;
            let (s, u) = self.score(evaluator, &plan, &ratio)?;
            let w2 =
                plan.f_sub(&plan_ref)?.f_square()?.f_mul(&free)?.f_sum(Kind::Float)?.f_double_value(&[])? / n as f64;
            let kl = kl.f_mean(Kind::Float)?.f_double_value(&[])?;
            Ok(SearchStats {
                score: s.f_mean(Kind::Float)?.f_double_value(&[])?,
                uncertainty: u.f_mean(Kind::Float)?.f_double_value(&[])?,
                kl,
                w2,
                kl_after: kl,
                backtracks: 0,
                kl_weight: self.kl_weight,
            })
        })
    }

    fn copy_trained(&self) -> Result<Vec<Tensor>> {
        tch::no_grad(|| {
            self.trained.iter().map(|(_, t)| Ok(t.f_detach()?.f_contiguous()?.f_mul_scalar(1.0)?)).collect()
        })
    }

    /// `θ ← old + f (θ − old)`.
    fn blend(&self, old: &[Tensor], f: f64) -> Result<()> {
        tch::no_grad(|| -> Result<()> {
            for ((_, t), o) in self.trained.iter().zip(old) {
                let v = o.f_add(&t.f_sub(o)?.f_mul_scalar(f)?)?;
                t.shallow_clone().f_copy_(&v)?;
            }
            Ok(())
        })
    }

    /// Runs `steps` search steps against `evaluator` (frozen meanwhile); `on_step(step, stats)`
    /// sees each.
    ///
    /// # Errors
    /// libtorch failures; a non-finite gradient norm.
    pub fn train(
        &mut self,
        evaluator: &mut TrajEvaluator,
        steps: usize,
        on_step: &mut dyn FnMut(u64, SearchStats),
    ) -> Result<SearchStats> {
        set_trainable(evaluator.var_store(), "", false)?;
        let out = self.train_inner(evaluator, steps, on_step);
        set_trainable(evaluator.var_store(), "", true)?;
        out
    }

    fn train_inner(
        &mut self,
        evaluator: &mut TrajEvaluator,
        steps: usize,
        on_step: &mut dyn FnMut(u64, SearchStats),
    ) -> Result<SearchStats> {
        let mut last = None;
        for _ in 0..steps {
            let p = self.params.clone();
            let mut rng = self.rng.clone();
            let (prefix, m, ratio, noise) = self.draw(p.batch_size, &mut rng)?;
            self.rng = rng;
            let free = m.f_neg()?.f_add_scalar(1.0)?;
            let plan_ref = self.reference_chain(&prefix, &m, &noise)?;
            let (plan, kl) = self.theta_chain(&prefix, &m, &noise, true)?;
            let (s, u) = self.score(evaluator, &plan, &ratio)?;
            let w2 = plan.f_sub(&plan_ref)?.f_square()?.f_mul(&free)?.f_sum_dim_intlist(
                [1i64, 2].as_slice(),
                false,
                Kind::Float,
            )?;
            let objective = s.f_sub(&u.f_mul_scalar(p.pessimism)?)?.f_mean(Kind::Float)?;
            let kl_mean = kl.f_mean(Kind::Float)?;
            let w2_mean = w2.f_mean(Kind::Float)?;
            let loss = objective
                .f_neg()?
                .f_add(&kl_mean.f_mul_scalar(self.kl_weight)?)?
                .f_add(&w2_mean.f_mul_scalar(p.w2_weight)?)?;
            let old = self.copy_trained()?;
            self.opt.backward_step(&loss)?;
            let kl_before = kl_mean.f_double_value(&[])?;
            let mut kl_after = tch::no_grad(|| self.theta_chain(&prefix, &m, &noise, false))?
                .1
                .f_mean(Kind::Float)?
                .f_double_value(&[])?;
            let mut backtracks = 0;
            if p.enforce_bound {
                while kl_after > p.kl_bound && backtracks < p.max_backtracks {
                    self.blend(&old, 0.5)?;
                    backtracks += 1;
                    kl_after = tch::no_grad(|| self.theta_chain(&prefix, &m, &noise, false))?
                        .1
                        .f_mean(Kind::Float)?
                        .f_double_value(&[])?;
                }
                if kl_after > p.kl_bound {
                    self.blend(&old, 0.0)?;
                    backtracks += 1;
                    kl_after = tch::no_grad(|| self.theta_chain(&prefix, &m, &noise, false))?
                        .1
                        .f_mean(Kind::Float)?
                        .f_double_value(&[])?;
                }
            }
            if p.adapt_kl_weight {
                self.kl_weight =
                    (self.kl_weight * (p.kl_weight_rate * (kl_after / p.kl_bound - 1.0)).exp()).clamp(1e-4, 1e4);
            }
            let stats = SearchStats {
                score: s.f_mean(Kind::Float)?.f_double_value(&[])?,
                uncertainty: u.f_mean(Kind::Float)?.f_double_value(&[])?,
                kl: kl_before,
                w2: w2_mean.f_double_value(&[])?,
                kl_after,
                backtracks,
                kl_weight: self.kl_weight,
            };
            self.steps += 1;
            on_step(self.steps, stats);
            last = Some(stats);
        }
        last.ok_or_else(|| AigbError::Empty { what: "search steps".into() })
    }

    /// The searched planner as a snapshot named `name`.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn snapshot(&self, name: &str) -> Result<PlannerSnapshot> {
        self.theta.snapshot(name)
    }

    /// Writes a checkpoint directory (parameters, β_KL, counters, generator, fingerprints of the
    /// reference and the data; θ's weights and AdamW moments).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let state = SearchStateRef {
            params: &self.params,
            reference: self.ref_fingerprint,
            data: self.data_fingerprint,
            kl_weight: self.kl_weight,
            steps: self.steps,
            rng: &self.rng,
        };
        let mut tensors = rl_nn::checkpoint::var_store_tensors(self.theta.var_store(), "theta.");
        tensors.extend(self.opt.state_tensors("optim.")?);
        rl_nn::checkpoint::save_dir(dir, SEARCH_KIND, SEARCH_FORMAT_VERSION, &state, &tensors)?;
        Ok(())
    }

    /// Restores a checkpoint of [`PolicySearch::save`] made with the same parameters, reference
    /// and data; everything is checked before anything changes.
    ///
    /// # Errors
    /// `rl_nn` checkpoint errors; [`AigbError::Corrupt`] for another reference, data or
    /// parameters.
    pub fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<SearchState>(dir, SEARCH_KIND, SEARCH_FORMAT_VERSION)?;
        let corrupt = |reason: String| AigbError::Corrupt { path: dir.to_owned(), reason };
        if *ck.state.params != *self.params {
            return Err(corrupt("the checkpoint's parameters differ from this search's".into()));
        }
        if ck.state.reference != self.ref_fingerprint || ck.state.data != self.data_fingerprint {
            return Err(corrupt("the checkpoint was made with another reference planner or data".into()));
        }
        if !(ck.state.kl_weight.is_finite() && ck.state.kl_weight >= 0.0) {
            return Err(corrupt(format!("KL weight {}", ck.state.kl_weight)));
        }
        use rl_nn::checkpoint::LoadMode::Strict;
        rl_nn::checkpoint::check_map(self.theta.var_store(), &ck.tensors, "theta.", Strict, &ck.path)?;
        self.opt.check_state_tensors(&ck.tensors, "optim.", Strict, &ck.path)?;
        rl_nn::checkpoint::load_map(self.theta.var_store(), &ck.tensors, "theta.", Strict, &ck.path)?;
        self.opt.load_state_tensors(&ck.tensors, "optim.", Strict, &ck.path)?;
        self.kl_weight = ck.state.kl_weight;
        self.steps = ck.state.steps;
        self.rng = ck.state.rng;
        Ok(())
    }
}

/// What one expert-feedback run returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRun {
    /// Period simulated.
    pub period: u64,
    /// Advertiser slot taken.
    pub slot: usize,
    /// The realised trajectory with its simulated quality.
    pub realised: ScoredTrajectory,
    /// The planner's first plan (tick 0: raw states and its actions), labelled with the
    /// realised quality.
    pub plan: ScoredTrajectory,
    /// Competition score of the run.
    pub score: f64,
}

/// Expert feedback: runs the planner `snapshot` in `sim` on each `(period, slot)` against the
/// rule-based `lineup` (the OnlineLP table `table`), and returns each run's realised trajectory
/// and first plan, both labelled with the realised quality (the simulator as the expert).
/// Use training periods only: these labels train the evaluator.
///
/// # Errors
/// Simulation errors; [`AigbError::UnknownId`] for a slot outside the market.
pub fn expert_feedback(
    snapshot: &Arc<PlannerSnapshot>,
    sim: &Simulator,
    lineup: &[BidderSpec],
    table: &Arc<OnlineLpTable>,
    lp: &rl_core::Valid<OnlineLpParams>,
    runs: &[(u64, usize)],
    threads: usize,
) -> Result<Vec<FeedbackRun>> {
    let n_a = sim.advertisers().len();
    if let Some(&(_, s)) = runs.iter().find(|(_, s)| *s >= n_a) {
        return Err(AigbError::UnknownId { what: "advertiser slot".into(), id: s.to_string() });
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let one = |period: u64, slot: usize| -> Result<FeedbackRun> {
        let log: PlanLog = Arc::new(Mutex::new(Vec::new()));
        let mut bidders = build_lineup(lineup, n_a, Some(table), lp)?;
        bidders[slot] = Box::new(PlannerBidder::new(Arc::clone(snapshot))?.with_plan_log(Arc::clone(&log)));
        let res = sim.run_period(period, &mut bidders, None)?;
        let mut ds = TrajectoryDataset::default();
        ds.push_period(&res, sim.params().min_remaining_budget);
        let tr = ds
            .trajectories
            .iter()
            .find(|t| t.advertiser == slot)
            .ok_or_else(|| AigbError::UnknownId { what: "advertiser slot".into(), id: slot.to_string() })?;
        let realised = ScoredTrajectory::from_trajectory(tr);
        let plans = log.lock().map_err(|_| AigbError::NotReady("plan log poisoned".into()))?;
        let (states, actions) = plans
            .iter()
            .find(|p| p.2 == 0)
            .map(|p| (p.3.clone(), p.4.iter().map(|a| a.max(0.0) as f32).collect()))
            .ok_or_else(|| AigbError::NotReady(format!("no plan at tick 0 (period {period}, slot {slot})")))?;
        let plan = ScoredTrajectory { states, actions, ..realised.clone() };
        let score = res.advertisers[slot].score();
        Ok(FeedbackRun { period, slot, realised, plan, score })
    };
    let threads = threads.clamp(1, runs.len().max(1));
    let outs: Vec<Vec<(usize, Result<FeedbackRun>)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(period, slot)) = runs.get(j) else { break };
                        out.push((j, one(period, slot)));
                    }
                    out
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let mut res: Vec<Option<FeedbackRun>> = vec![None; runs.len()];
    for (j, r) in outs.into_iter().flatten() {
        res[j] = Some(r?);
    }
    res.into_iter()
        .enumerate()
        .map(|(j, r)| r.ok_or_else(|| AigbError::NotReady(format!("feedback run {j} did not finish"))))
        .collect()
}
