//! AIGB-Pearl's trajectory evaluator (feature `tch`): a non-bootstrapped model of a whole
//! period's quality from its states and bid coefficients — a small causal transformer over tick
//! tokens with a score head, trained with a hybrid pointwise + pairwise loss, refreshed with
//! expert feedback (simulator re-evaluation of generated trajectories) under an adaptive weight,
//! and an ensemble whose disagreement is the uncertainty.
//!
//! Reference: Mou et al., "Enhancing Generative Auto-bidding with Offline Reward Evaluation and
//! Policy Search" (AIGB-Pearl, arXiv 2509.15927, ICLR 2026). No code is public; the paper fixes
//! the ingredients (LLM-style architecture, hybrid point-/pair-wise losses, adaptive integration
//! of expert feedback) but not their exact form. Everything below marked *reconstructed* is our
//! choice and a parameter ([`TrajEvalParams`]):
//!
//! ```text
//! tokens:  [ctx = W_c z(ln(B/CPA))] ++ [W_x (norm(s_t) ‖ ln(1 + α_t/CPA)) + p_t]_{t<H}
//! E_m(τ) = head_m(LN(h_last)),  h = CausalTransformer_m(tokens)      (member m = 1..M)
//! E(τ) = mean_m E_m(τ),  u(τ) = std_m E_m(τ)
//! L_m = λ_pt Σ_i w_i (E_m(τ_i) − y_i)² / Σ_i w_i
//!     + λ_pw Σ_{(i,j): g_i = g_j, y_i > y_j + δ} w_i w_j softplus(−(E_m(τ_i) − E_m(τ_j)) / T) / Σ w_i w_j
//! y = quality / max quality of the offline data,  quality = score · CPA / budget
//! expert sample τ (simulated quality y): w(τ) = clip(u(τ) / ū_offline, w_min, w_max)
//! ```
//!
//! - *reconstructed*: the token layout (state, action, a context token with the budget/CPA
//!   ratio), the pooled last token, the target (quality normalised by its largest offline value),
//!   pairs only within a group (the same advertiser slot: same budget and CPA, so scores are
//!   comparable), the logistic pairwise loss with temperature `T`, the adaptive weight from
//!   ensemble disagreement, bootstrap resampling per member.
//! - The paper's evaluator is "LLM-based" (pretrained); we train a small transformer from
//!   scratch (no pretrained model is reachable here).

use std::path::Path;

use rand::Rng;
use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::bidder::STATE_DIM;
use crate::dataset::{Trajectory, TrajectoryDataset};
use crate::error::{check_positive, check_range, AigbError, Result};
use crate::nn::{check_shape, CausalTransformer, LayerNorm, Linear, TransformerParams, Weights};
use crate::planner::quality;
use crate::policy::StateNorm;
use rl_core::Params;
use rl_nn::init::{self, Init};
use rl_nn::optim::{Adam, AdamParams};

/// Checkpoint format version of [`TrajEvaluator`].
pub const TRAJ_EVAL_FORMAT_VERSION: u32 = 1;
const TRAJ_EVAL_KIND: &str = "aigb.traj_evaluator";
const C: i64 = STATE_DIM as i64;

/// Parameters of [`TrajEvaluator`] (all reconstructed; see the module docs).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `transformer` | d 64, 2 layers, 4 heads, MLP 256, dropout 0 | each member's causal transformer | see [`TransformerParams`] |
/// | `members` | 3 | ensemble size `M` (research brief: 3–5) | ≥ 1 |
/// | `horizon` | 48 | ticks per trajectory | ≥ ticks of the data |
/// | `pointwise_weight` | 1.0 | `λ_pt` | ≥ 0 |
/// | `pairwise_weight` | 1.0 | `λ_pw` (0: the "no pairwise loss" ablation) | ≥ 0, not both 0 |
/// | `pairwise_temperature` | 0.05 | `T` of the logistic ranking loss (quality units) | > 0 |
/// | `pair_margin` | 0.0 | `δ`: pairs need `y_i > y_j + δ` | ≥ 0 |
/// | `groups_per_batch` | 8 | groups drawn per batch | ≥ 1 |
/// | `per_group` | 8 | trajectories per group in a batch | ≥ 2 |
/// | `lr` | 3e-4 | AdamW step size | > 0 |
/// | `weight_decay` | 0.01 | AdamW weight decay | ≥ 0 |
/// | `grad_clip` | 1.0 | global gradient-norm clip | > 0 |
/// | `bootstrap` | true | each member draws its own batch (bootstrap-style diversity) | |
/// | `expert_weight_min` | 0.5 | lower clip of the adaptive expert weight | > 0 |
/// | `expert_weight_max` | 4.0 | upper clip | ≥ `expert_weight_min` |
/// | `max_action` | 10 | `α / CPA` clipped to `[0, max_action]` | > 0 |
/// | `seed` | 0 | initialisation and batches | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrajEvalParams {
    /// Transformer sizes.
    pub transformer: TransformerParams,
    /// Ensemble size.
    pub members: usize,
    /// Ticks per trajectory.
    pub horizon: usize,
    /// Pointwise weight.
    pub pointwise_weight: f64,
    /// Pairwise weight.
    pub pairwise_weight: f64,
    /// Pairwise temperature.
    pub pairwise_temperature: f64,
    /// Pair margin.
    pub pair_margin: f64,
    /// Groups per batch.
    pub groups_per_batch: usize,
    /// Trajectories per group.
    pub per_group: usize,
    /// Learning rate.
    pub lr: f64,
    /// Weight decay.
    pub weight_decay: f64,
    /// Gradient clip.
    pub grad_clip: f64,
    /// Independent batches per member.
    pub bootstrap: bool,
    /// Lower expert weight.
    pub expert_weight_min: f64,
    /// Upper expert weight.
    pub expert_weight_max: f64,
    /// Action clip.
    pub max_action: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for TrajEvalParams {
    fn default() -> Self {
        Self {
            transformer: TransformerParams::default().d_model(64).n_layers(2).n_heads(4).d_ff(256).dropout(0.0),
            members: 3,
            horizon: 48,
            pointwise_weight: 1.0,
            pairwise_weight: 1.0,
            pairwise_temperature: 0.05,
            pair_margin: 0.0,
            groups_per_batch: 8,
            per_group: 8,
            lr: 3e-4,
            weight_decay: 0.01,
            grad_clip: 1.0,
            bootstrap: true,
            expert_weight_min: 0.5,
            expert_weight_max: 4.0,
            max_action: 10.0,
            seed: 0,
        }
    }
}

crate::traffic::setters!(TrajEvalParams {
    transformer: TransformerParams,
    members: usize,
    horizon: usize,
    pointwise_weight: f64,
    pairwise_weight: f64,
    pairwise_temperature: f64,
    pair_margin: f64,
    groups_per_batch: usize,
    per_group: usize,
    lr: f64,
    weight_decay: f64,
    grad_clip: f64,
    bootstrap: bool,
    expert_weight_min: f64,
    expert_weight_max: f64,
    max_action: f64,
    seed: u64,
});

impl rl_core::Params for TrajEvalParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        self.transformer.validate().map_err(|e| e.nested("transformer"))?;
        for (name, v) in
            [("members", self.members), ("horizon", self.horizon), ("groups_per_batch", self.groups_per_batch)]
        {
            if v == 0 {
                return Err(AigbError::invalid(name, 0, "must be >= 1"));
            }
        }
        if self.per_group < 2 {
            return Err(AigbError::invalid("per_group", self.per_group, "must be >= 2 (pairs)"));
        }
        check_range("pointwise_weight", self.pointwise_weight, 0.0, f64::INFINITY)?;
        check_range("pairwise_weight", self.pairwise_weight, 0.0, f64::INFINITY)?;
        if self.pointwise_weight == 0.0 && self.pairwise_weight == 0.0 {
            return Err(AigbError::invalid("pairwise_weight", 0.0, "pointwise and pairwise weights are both 0"));
        }
        check_positive("pairwise_temperature", self.pairwise_temperature)?;
        check_range("pair_margin", self.pair_margin, 0.0, f64::INFINITY)?;
        check_positive("lr", self.lr)?;
        check_range("weight_decay", self.weight_decay, 0.0, f64::INFINITY)?;
        check_positive("grad_clip", self.grad_clip)?;
        check_positive("expert_weight_min", self.expert_weight_min)?;
        check_positive("expert_weight_max", self.expert_weight_max)?;
        if self.expert_weight_max < self.expert_weight_min {
            return Err(AigbError::invalid(
                "expert_weight_max",
                self.expert_weight_max,
                "must be >= expert_weight_min",
            ));
        }
        check_positive("max_action", self.max_action)?;
        Ok(())
    }
}

/// A whole trajectory with its quality: a logged one, a simulated one (expert feedback) or a
/// generated plan labelled by the simulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredTrajectory {
    /// Raw states, one per tick.
    pub states: Vec<[f32; STATE_DIM]>,
    /// `α / CPA` per tick.
    pub actions: Vec<f32>,
    /// Budget.
    pub budget: f64,
    /// CPA constraint.
    pub cpa: f64,
    /// Advertiser slot (pairs are formed within it).
    pub advertiser: usize,
    /// Quality `score · CPA / budget`.
    pub quality: f64,
}

impl ScoredTrajectory {
    /// A logged or simulated trajectory with its realised quality.
    pub fn from_trajectory(tr: &Trajectory) -> Self {
        Self {
            states: tr.steps.iter().map(|s| s.state).collect(),
            actions: tr.steps.iter().map(|s| (s.action / tr.cpa) as f32).collect(),
            budget: tr.budget,
            cpa: tr.cpa,
            advertiser: tr.advertiser,
            quality: quality(tr),
        }
    }

    fn check(&self, what: &str, horizon: usize) -> Result<()> {
        if self.states.is_empty() || self.states.len() > horizon || self.actions.len() != self.states.len() {
            return Err(AigbError::Shape {
                what: format!("{what} ticks"),
                expected: format!("1..={horizon} states and as many actions"),
                got: format!("{} states, {} actions", self.states.len(), self.actions.len()),
            });
        }
        if let Some(i) = self.states.iter().flatten().chain(&self.actions).position(|x| !x.is_finite()) {
            return Err(AigbError::NonFinite { what: what.into(), index: i, value: f64::NAN });
        }
        if !(self.budget.is_finite() && self.budget > 0.0 && self.cpa.is_finite() && self.cpa > 0.0) {
            return Err(AigbError::invalid(
                format!("{what}.budget/cpa"),
                format!("{}/{}", self.budget, self.cpa),
                "must be finite and > 0",
            ));
        }
        if !self.quality.is_finite() {
            return Err(AigbError::NonFinite { what: format!("{what}.quality"), index: 0, value: self.quality });
        }
        Ok(())
    }
}

/// A training sample in model units.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sample {
    states: Vec<f32>,
    actions: Vec<f32>,
    mask: Vec<f32>,
    ctx: f32,
    target: f32,
    group: u64,
    weight: f32,
}

/// One member's network.
#[derive(Debug)]
struct Member {
    token: Linear,
    ctx: Linear,
    pos: Tensor,
    transformer: CausalTransformer,
    ln_f: LayerNorm,
    head: Linear,
}

impl Member {
    fn new(p: &tch::nn::Path<'_>, params: &TrajEvalParams, rng: &mut rl_core::SeededRng) -> Result<Self> {
        let d = params.transformer.d_model;
        Ok(Self {
            token: Linear::new(p, "token", C + 1, d, rng)?,
            ctx: Linear::new(p, "ctx", 1, d, rng)?,
            pos: init::var(p, "pos", &[params.horizon as i64 + 1, d], Init::Normal { mean: 0.0, std: 0.02 }, rng)?,
            transformer: CausalTransformer::new(&p.sub("transformer"), &params.transformer, rng)?,
            ln_f: LayerNorm::new(p, "ln_f", d, rng)?,
            head: Linear::new(p, "head", d, 1, rng)?,
        })
    }

    /// `x` `[B, H, 17]`, `ctx` `[B, 1]`, `mask` `[B, H]` → `[B]`.
    fn forward(&self, x: &Tensor, ctx: &Tensor, mask: &Tensor, rng: &mut rl_core::SeededRng) -> Result<Tensor> {
        let size = x.size();
        let (b, h) = (size[0], size[1]);
        let tok = Tensor::f_cat(&[self.ctx.forward(ctx)?.f_unsqueeze(1)?, self.token.forward(x)?], 1)?;
        let tok = tok.f_add(&self.pos.f_narrow(0, 0, h + 1)?.f_unsqueeze(0)?)?;
        let full = Tensor::f_cat(&[Tensor::f_ones([b, 1], (mask.f_kind()?, mask.device()))?, mask.shallow_clone()], 1)?;
        let out = self.transformer.forward(&tok, &full, false, rng)?;
        // the last real token: index = number of valid ticks (the context token is index 0)
        let last = mask.f_sum_dim_intlist([1i64].as_slice(), false, Kind::Float)?.f_to_kind(Kind::Int64)?;
        let d = out.size()[2];
        let idx = last.f_view([b, 1, 1])?.f_expand([b, 1, d], false)?;
        let pooled = out.f_gather(1, &idx, false)?.f_squeeze_dim(1)?;
        Ok(self.head.forward(&self.ln_f.forward(&pooled)?)?.f_squeeze_dim(-1)?)
    }
}

#[derive(Serialize)]
struct EvalStateRef<'a> {
    params: &'a TrajEvalParams,
    norm: &'a StateNorm,
    ctx_mean: f64,
    ctx_std: f64,
    quality_scale: f64,
    samples: &'a [Sample],
    offline: usize,
    steps: u64,
    rng: &'a rl_core::SeededRng,
}

#[derive(Deserialize)]
struct EvalState {
    params: rl_core::Valid<TrajEvalParams>,
    norm: StateNorm,
    ctx_mean: f64,
    ctx_std: f64,
    quality_scale: f64,
    samples: Vec<Sample>,
    offline: usize,
    steps: u64,
    rng: rl_core::SeededRng,
}

/// One training step's losses (means over members).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrajEvalLosses {
    /// Pointwise (weighted squared error).
    pub pointwise: f64,
    /// Pairwise (logistic ranking).
    pub pairwise: f64,
    /// Pairs in the batch.
    pub pairs: usize,
}

/// The trajectory evaluator: an ensemble of causal transformers and its trainer (CPU).
#[derive(Debug)]
pub struct TrajEvaluator {
    params: rl_core::Valid<TrajEvalParams>,
    vs: VarStore,
    members: Vec<Member>,
    opt: Adam,
    norm: StateNorm,
    ctx_mean: f64,
    ctx_std: f64,
    quality_scale: f64,
    samples: Vec<Sample>,
    offline: usize,
    rng: rl_core::SeededRng,
    steps: u64,
}

fn group_key(t: &ScoredTrajectory) -> u64 {
    rl_core::seed::splitmix64(rl_core::seed::splitmix64(t.advertiser as u64 ^ t.budget.to_bits()) ^ t.cpa.to_bits())
}

impl TrajEvaluator {
    /// An evaluator trained on the logged trajectories of `data` (normalisers and the quality
    /// scale fitted on them).
    ///
    /// # Errors
    /// [`AigbError::Empty`] without trajectories; shape errors for trajectories longer than the
    /// horizon; network construction errors.
    pub fn new(params: rl_core::Valid<TrajEvalParams>, data: &TrajectoryDataset) -> Result<Self> {
        if data.trajectories.is_empty() {
            return Err(AigbError::Empty { what: "trajectories".into() });
        }
        let scored: Vec<ScoredTrajectory> = data.trajectories.iter().map(ScoredTrajectory::from_trajectory).collect();
        for (i, s) in scored.iter().enumerate() {
            s.check(&format!("trajectories[{i}]"), params.horizon)?;
        }
        let raw: Vec<[f32; STATE_DIM]> = scored.iter().flat_map(|s| s.states.iter().copied()).collect();
        let norm = StateNorm::fit(&raw)?;
        let ctx: Vec<f64> = scored.iter().map(|s| (s.budget / s.cpa).ln()).collect();
        let ctx_mean = rl_core::stats::mean(&ctx);
        let sd = rl_core::stats::std_dev(&ctx, 0);
        let ctx_std = if sd > 1e-9 { sd } else { 1.0 };
        let q = scored.iter().map(|s| s.quality.max(0.0)).fold(0.0, f64::max);
        let quality_scale = if q > 0.0 { q } else { 1.0 };
        let mut init_rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "traj-eval-init"));
        let vs = VarStore::new(Device::Cpu);
        let members = (0..params.members)
            .map(|m| Member::new(&vs.root().sub(format!("m{m}")), &params, &mut init_rng))
            .collect::<Result<Vec<_>>>()?;
        let opt = Adam::for_var_store(
            AdamParams::adamw()
                .lr(params.lr)
                .weight_decay(params.weight_decay)
                .max_grad_norm(Some(params.grad_clip))
                .check()?,
            &vs,
        )?;
        let rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "traj-eval-train"));
        let mut ev = Self {
            params,
            vs,
            members,
            opt,
            norm,
            ctx_mean,
            ctx_std,
            quality_scale,
            samples: Vec::new(),
            offline: 0,
            rng,
            steps: 0,
        };
        ev.samples = scored.iter().map(|s| ev.sample(s, 1.0)).collect();
        ev.offline = ev.samples.len();
        Ok(ev)
    }

    /// The parameters.
    pub fn params(&self) -> &TrajEvalParams {
        &self.params
    }

    /// The quality that maps to a normalised score of 1 (largest offline quality).
    pub fn quality_scale(&self) -> f64 {
        self.quality_scale
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Training samples (offline, then expert).
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there is no sample (never after `new`).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Expert samples added so far.
    pub fn expert_len(&self) -> usize {
        self.samples.len() - self.offline
    }

    /// The variable store (members under `m{i}.`).
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    fn sample(&self, s: &ScoredTrajectory, weight: f32) -> Sample {
        let h = self.params.horizon;
        let mut states = vec![0.0f32; h * STATE_DIM];
        let mut actions = vec![0.0f32; h];
        let mut mask = vec![0.0f32; h];
        for (t, (st, a)) in s.states.iter().zip(&s.actions).enumerate() {
            states[t * STATE_DIM..(t + 1) * STATE_DIM].copy_from_slice(&self.norm.apply(st));
            actions[t] = (f64::from(*a).clamp(0.0, self.params.max_action)).ln_1p() as f32;
            mask[t] = 1.0;
        }
        Sample {
            states,
            actions,
            mask,
            ctx: (((s.budget / s.cpa).ln() - self.ctx_mean) / self.ctx_std) as f32,
            target: (s.quality / self.quality_scale) as f32,
            group: group_key(s),
            weight,
        }
    }

    fn tensors(&self, idx: &[usize]) -> Result<(Tensor, Tensor, Tensor, Tensor, Tensor)> {
        let (h, b) = (self.params.horizon, idx.len());
        let mut x = Vec::with_capacity(b * h * (STATE_DIM + 1));
        let mut m = Vec::with_capacity(b * h);
        let mut c = Vec::with_capacity(b);
        let mut y = Vec::with_capacity(b);
        let mut w = Vec::with_capacity(b);
        for &i in idx {
            let s = &self.samples[i];
            for t in 0..h {
                x.extend_from_slice(&s.states[t * STATE_DIM..(t + 1) * STATE_DIM]);
                x.push(s.actions[t]);
            }
            m.extend_from_slice(&s.mask);
            c.push(s.ctx);
            y.push(s.target);
            w.push(s.weight);
        }
        let (bb, hh) = (b as i64, h as i64);
        Ok((
            Tensor::f_from_slice(&x)?.f_view([bb, hh, C + 1])?,
            Tensor::f_from_slice(&c)?.f_view([bb, 1])?,
            Tensor::f_from_slice(&m)?.f_view([bb, hh])?,
            Tensor::f_from_slice(&y)?,
            Tensor::f_from_slice(&w)?,
        ))
    }

    /// Member predictions `[M, B]` for model-unit inputs.
    fn predict_units(&mut self, x: &Tensor, ctx: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let outs = self.members.iter().map(|m| m.forward(x, ctx, mask, &mut self.rng)).collect::<Result<Vec<_>>>()?;
        Ok(Tensor::f_stack(&outs, 0)?)
    }

    /// Draws a batch: `groups_per_batch` groups, `per_group` samples from each (with
    /// replacement within a group when it is small).
    fn draw_batch(&mut self) -> Vec<usize> {
        let mut by_group: std::collections::BTreeMap<u64, Vec<usize>> = std::collections::BTreeMap::new();
        for (i, s) in self.samples.iter().enumerate() {
            by_group.entry(s.group).or_default().push(i);
        }
        let groups: Vec<&Vec<usize>> = by_group.values().collect();
        let mut idx = Vec::new();
        for _ in 0..self.params.groups_per_batch {
            let g = groups[self.rng.random_range(0..groups.len())];
            for _ in 0..self.params.per_group {
                idx.push(g[self.rng.random_range(0..g.len())]);
            }
        }
        idx
    }

    /// The hybrid loss of one member's predictions `e` `[B]`.
    fn member_loss(
        &self,
        e: &Tensor,
        y: &Tensor,
        w: &Tensor,
        groups: &[u64],
        targets: &[f32],
        weights: &[f32],
    ) -> Result<(Tensor, Tensor, usize)> {
        let pt =
            e.f_sub(y)?.f_square()?.f_mul(w)?.f_sum(Kind::Float)?.f_div(&w.f_sum(Kind::Float)?.f_clamp_min(1e-12)?)?;
        let mut hi = Vec::new();
        let mut lo = Vec::new();
        let mut pw = Vec::new();
        for i in 0..groups.len() {
            for j in 0..groups.len() {
                if i != j
                    && groups[i] == groups[j]
                    && f64::from(targets[i]) > f64::from(targets[j]) + self.params.pair_margin
                {
                    hi.push(i as i64);
                    lo.push(j as i64);
                    pw.push(weights[i] * weights[j]);
                }
            }
        }
        let n = hi.len();
        let pairwise = if n == 0 {
            Tensor::f_zeros([], (Kind::Float, Device::Cpu))?
        } else {
            let d = e
                .f_index_select(0, &Tensor::f_from_slice(&hi)?)?
                .f_sub(&e.f_index_select(0, &Tensor::f_from_slice(&lo)?)?)?
                .f_div_scalar(self.params.pairwise_temperature)?;
            let pwt = Tensor::f_from_slice(&pw)?;
            // softplus(−d) = −log σ(d)
            d.f_neg()?.f_softplus()?.f_mul(&pwt)?.f_sum(Kind::Float)?.f_div(&pwt.f_sum(Kind::Float)?)?
        };
        Ok((pt, pairwise, n))
    }

    /// Runs `steps` AdamW steps of the hybrid loss (every member; with `bootstrap`, each on its
    /// own batch); `on_step(step, losses)` sees each.
    ///
    /// # Errors
    /// libtorch failures; a non-finite gradient norm.
    pub fn train(&mut self, steps: usize, on_step: &mut dyn FnMut(u64, TrajEvalLosses)) -> Result<TrajEvalLosses> {
        let mut last = TrajEvalLosses { pointwise: f64::NAN, pairwise: f64::NAN, pairs: 0 };
        for _ in 0..steps {
            let shared = self.draw_batch();
            let mut total = Tensor::f_zeros([], (Kind::Float, Device::Cpu))?;
            let (mut pt_sum, mut pw_sum, mut pairs) = (0.0, 0.0, 0);
            for m in 0..self.members.len() {
                let idx = if self.params.bootstrap && m > 0 { self.draw_batch() } else { shared.clone() };
                let (x, c, mk, y, w) = self.tensors(&idx)?;
                let e = self.members[m].forward(&x, &c, &mk, &mut self.rng)?;
                let groups: Vec<u64> = idx.iter().map(|&i| self.samples[i].group).collect();
                let targets: Vec<f32> = idx.iter().map(|&i| self.samples[i].target).collect();
                let weights: Vec<f32> = idx.iter().map(|&i| self.samples[i].weight).collect();
                let (pt, pw, n) = self.member_loss(&e, &y, &w, &groups, &targets, &weights)?;
                pt_sum += pt.f_double_value(&[])?;
                pw_sum += pw.f_double_value(&[])?;
                pairs += n;
                let l = pt
                    .f_mul_scalar(self.params.pointwise_weight)?
                    .f_add(&pw.f_mul_scalar(self.params.pairwise_weight)?)?;
                total = total.f_add(&l)?;
            }
            self.opt.backward_step(&total)?;
            let k = self.members.len() as f64;
            last = TrajEvalLosses { pointwise: pt_sum / k, pairwise: pw_sum / k, pairs };
            self.steps += 1;
            on_step(self.steps, last);
        }
        Ok(last)
    }

    /// Normalised scores of trajectories (ensemble mean and standard deviation, no gradient).
    ///
    /// # Errors
    /// Shape or non-finite inputs; libtorch failures.
    pub fn predict(&mut self, trajs: &[ScoredTrajectory]) -> Result<Vec<(f64, f64)>> {
        let mut out = Vec::with_capacity(trajs.len());
        for chunk in trajs.chunks(256) {
            let mut samples = Vec::with_capacity(chunk.len());
            for (i, t) in chunk.iter().enumerate() {
                t.check(&format!("trajectories[{i}]"), self.params.horizon)?;
                samples.push(self.sample(t, 1.0));
            }
            let saved = std::mem::replace(&mut self.samples, samples);
            let idx: Vec<usize> = (0..chunk.len()).collect();
            let r = self.tensors(&idx).and_then(|(x, c, m, _, _)| tch::no_grad(|| self.predict_units(&x, &c, &m)));
            self.samples = saved;
            let e = r?;
            let mean: Vec<f32> = Vec::<f32>::try_from(e.f_mean_dim([0i64].as_slice(), false, Kind::Float)?)?;
            let sd: Vec<f32> = if self.members.len() > 1 {
                Vec::<f32>::try_from(e.f_std_dim([0i64].as_slice(), false, false)?)?
            } else {
                vec![0.0; chunk.len()]
            };
            out.extend(mean.iter().zip(&sd).map(|(m, s)| (f64::from(*m), f64::from(*s))));
        }
        Ok(out)
    }

    /// Differentiable scores of `[B, H, 16]` raw states and `[B, H]` actions (`α / CPA`) with
    /// budget-to-CPA ratios `ratio` `[B]` (all ticks valid): ensemble mean and standard deviation
    /// `[B]` of the normalised score. Used by policy search.
    ///
    /// # Errors
    /// [`AigbError::Shape`]; libtorch failures.
    pub fn score_tensors(&mut self, states: &Tensor, actions: &Tensor, ratio: &[f64]) -> Result<(Tensor, Tensor)> {
        let h = self.params.horizon as i64;
        check_shape("states", states, &[None, Some(h), Some(C)])?;
        let b = states.size()[0];
        check_shape("actions", actions, &[Some(b), Some(h)])?;
        if ratio.len() as i64 != b {
            return Err(AigbError::Shape {
                what: "budget/CPA ratios".into(),
                expected: b.to_string(),
                got: ratio.len().to_string(),
            });
        }
        let mean = Tensor::f_from_slice(&self.norm.mean)?;
        let std = Tensor::f_from_slice(&self.norm.std)?;
        let s = states.f_sub(&mean)?.f_div(&std)?;
        let a = actions.f_clamp(0.0, self.params.max_action)?.f_log1p()?.f_unsqueeze(-1)?;
        let x = Tensor::f_cat(&[s, a], 2)?;
        let c: Vec<f32> = ratio.iter().map(|r| ((r.ln() - self.ctx_mean) / self.ctx_std) as f32).collect();
        let c = Tensor::f_from_slice(&c)?.f_view([b, 1])?;
        let m = Tensor::f_ones([b, h], (Kind::Float, Device::Cpu))?;
        let e = self.predict_units(&x, &c, &m)?;
        let sd = if self.members.len() > 1 {
            e.f_std_dim([0i64].as_slice(), false, false)?
        } else {
            e.f_zeros_like()?.f_select(0, 0)?
        };
        Ok((e.f_mean_dim([0i64].as_slice(), false, Kind::Float)?, sd))
    }

    /// Adds simulator-labelled trajectories (expert feedback) with the adaptive weight
    /// `clip(u(τ) / ū_offline, w_min, w_max)`, `u` the ensemble's disagreement on τ and
    /// `ū_offline` its mean disagreement on (up to 512) offline samples; returns the weights.
    ///
    /// # Errors
    /// Bad trajectories (nothing is added then); libtorch failures.
    pub fn add_expert(&mut self, trajs: &[ScoredTrajectory]) -> Result<Vec<f64>> {
        for (i, t) in trajs.iter().enumerate() {
            t.check(&format!("expert[{i}]"), self.params.horizon)?;
        }
        let u = self.predict(trajs)?;
        let n_off = self.offline.min(512);
        let offline_idx: Vec<usize> = (0..n_off).map(|i| i * self.offline / n_off.max(1)).collect();
        let ubar = if self.members.len() > 1 && n_off > 0 {
            let (x, c, m, _, _) = self.tensors(&offline_idx)?;
            let e = tch::no_grad(|| self.predict_units(&x, &c, &m))?;
            e.f_std_dim([0i64].as_slice(), false, false)?.f_mean(Kind::Float)?.f_double_value(&[])?
        } else {
            0.0
        };
        let p = &*self.params;
        let weights: Vec<f64> = u
            .iter()
            .map(|(_, sd)| if ubar > 0.0 { (sd / ubar).clamp(p.expert_weight_min, p.expert_weight_max) } else { 1.0 })
            .collect();
        for (t, w) in trajs.iter().zip(&weights) {
            let s = self.sample(t, *w as f32);
            self.samples.push(s);
        }
        Ok(weights)
    }

    /// Share of correctly ordered pairs (same advertiser, quality differing by more than
    /// `margin`, in quality units) of `data` under the ensemble mean, and the number of pairs.
    ///
    /// # Errors
    /// As [`TrajEvaluator::predict`].
    pub fn ranking_accuracy(&mut self, data: &[ScoredTrajectory], margin: f64) -> Result<(f64, usize)> {
        let pred = self.predict(data)?;
        let (mut right, mut n) = (0usize, 0usize);
        for i in 0..data.len() {
            for j in 0..data.len() {
                if group_key(&data[i]) == group_key(&data[j]) && data[i].quality > data[j].quality + margin {
                    n += 1;
                    if pred[i].0 > pred[j].0 {
                        right += 1;
                    }
                }
            }
        }
        Ok((if n > 0 { right as f64 / n as f64 } else { f64::NAN }, n))
    }

    /// The evaluator's weights and normalisers (for a frozen copy).
    ///
    /// # Errors
    /// libtorch failures.
    pub fn weights(&self) -> Result<Weights> {
        Weights::from_var_store(&self.vs)
    }

    /// Writes a checkpoint directory (parameters, normalisers, samples including expert ones,
    /// counters, generator; weights and AdamW moments).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let state = EvalStateRef {
            params: &self.params,
            norm: &self.norm,
            ctx_mean: self.ctx_mean,
            ctx_std: self.ctx_std,
            quality_scale: self.quality_scale,
            samples: &self.samples,
            offline: self.offline,
            steps: self.steps,
            rng: &self.rng,
        };
        let mut tensors = rl_nn::checkpoint::var_store_tensors(&self.vs, "model.");
        tensors.extend(self.opt.state_tensors("optim.")?);
        rl_nn::checkpoint::save_dir(dir, TRAJ_EVAL_KIND, TRAJ_EVAL_FORMAT_VERSION, &state, &tensors)?;
        Ok(())
    }

    /// Restores a checkpoint of [`TrajEvaluator::save`] with the same parameters; everything is
    /// checked before anything changes.
    ///
    /// # Errors
    /// `rl_nn` checkpoint errors; [`AigbError::Corrupt`] for other parameters or bad samples.
    pub fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<EvalState>(dir, TRAJ_EVAL_KIND, TRAJ_EVAL_FORMAT_VERSION)?;
        let corrupt = |reason: String| AigbError::Corrupt { path: dir.to_owned(), reason };
        let st = ck.state;
        if *st.params != *self.params {
            return Err(corrupt("the checkpoint's parameters differ from this evaluator's".into()));
        }
        let h = self.params.horizon;
        if st.norm.mean.len() != STATE_DIM || st.norm.std.len() != STATE_DIM {
            return Err(corrupt("state normaliser has the wrong size".into()));
        }
        if st.offline > st.samples.len() || st.samples.is_empty() {
            return Err(corrupt(format!("{} offline of {} samples", st.offline, st.samples.len())));
        }
        if let Some(i) = st.samples.iter().position(|s| {
            s.states.len() != h * STATE_DIM
                || s.actions.len() != h
                || s.mask.len() != h
                || !(s.weight.is_finite() && s.weight > 0.0 && s.target.is_finite() && s.ctx.is_finite())
        }) {
            return Err(corrupt(format!("sample {i} is malformed")));
        }
        if !(st.quality_scale.is_finite() && st.quality_scale > 0.0 && st.ctx_std.is_finite() && st.ctx_std > 0.0) {
            return Err(corrupt("bad quality scale or context scale".into()));
        }
        use rl_nn::checkpoint::LoadMode::Strict;
        rl_nn::checkpoint::check_map(&self.vs, &ck.tensors, "model.", Strict, &ck.path)?;
        self.opt.check_state_tensors(&ck.tensors, "optim.", Strict, &ck.path)?;
        rl_nn::checkpoint::load_map(&self.vs, &ck.tensors, "model.", Strict, &ck.path)?;
        self.opt.load_state_tensors(&ck.tensors, "optim.", Strict, &ck.path)?;
        self.norm = st.norm;
        self.ctx_mean = st.ctx_mean;
        self.ctx_std = st.ctx_std;
        self.quality_scale = st.quality_scale;
        self.samples = st.samples;
        self.offline = st.offline;
        self.steps = st.steps;
        self.rng = st.rng;
        Ok(())
    }
}
