//! Agent-level credit for cooperative multi-agent tasks: one decoder shared by every agent, or
//! one per agent type, trained by sum regression or multi-agent RRD.
//!
//! LaRe's MPE code (`thu-rllab/LaRe:mpe/utils/util.py:make_train_step`) encodes each agent's
//! next observation, decodes a per-agent, per-step reward with one shared network, and
//! regresses the sum over agents and steps on the episode's return:
//!
//! ```text
//! r̂_{i,t} = f_ψ(φ(o^i_{t+1}))
//! L = mean_episodes ( Σ_i Σ_t r̂_{i,t} − R_target )²  [+ α · mean_t Var_t(Σ_i r̂_{i,t})]
//! R_target = R_team / N   (LaRe: the sparse reward written to every agent is the team return / N)
//! ```
//!
//! The relabelled reward of agent `i` at step `t` is `r̂_{i,t}` (agent-level credit), or
//! `mean_i r̂_{i,t}` for every agent with `agent_decomposition = false` (LaRe's
//! `--no_agent_decomp` ablation: temporal credit only).
//!
//! **Per-type decoders** ([`AgentTypes`], [`AgentCreditDecoder::with_types`]): agent `i` of
//! type `k(i)` gets `r̂_{i,t} = f_{ψ_k(i)}(φ_k(i)(o^i))`, one network per type, all of them in
//! one variable store and one Adam, with the same loss over the whole team (LaRe's
//! `hetero_tag`: predators and prey, `FactorRewardDecomposer.hetero_forward`).
//!
//! **Multi-agent RRD** (`loss = rrd | rrd_unbiased`; LaRe's
//! `mpe/models/reward_model/rrd/rrd.py`, `make_rrd_train_step`): one draw `I` of `K` distinct
//! steps of the padded horizon `H`, shared by every episode and agent of the batch, and
//!
//! ```text
//! L = mean_b ( Σ_i Σ_{t∈I, t<T_b} (H/K) r̂_{b,i,t} − R_b )²
//! unbiased: L − mean_{b,i} [ Var_{t∈I}((H/K) r̂_{b,i,t}) · (1 − K/H) / K ]   (sample variance, K − 1)
//! ```
//!
//! Steps at or past an episode's length are padding (zero factors): out of the sum, in the
//! variance. The draw is a [`CreditDraw`]: [`AgentCreditDecoder::draw`] makes it from the
//! decoder's seeded stream, [`AgentCreditDecoder::update_with`] takes the caller's.

use std::collections::VecDeque;
use std::path::Path;

use ndarray::{Array2, Array3, Axis};
use rand::Rng;
use rl_core::{Metrics, Params, SeededRng, Valid};
use rl_nn::optim::Adam;
use rl_nn::Mlp;
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::decoder::{segment_sum, DecoderParams, DecompositionLoss, RewardDecoder};
use crate::encoder::LatentEncoder;
use crate::error::{check_finite, check_len, LareError, Result};

/// One finished episode of an `N`-agent task (all agents share observation and action widths).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiEpisode {
    /// Observations `[N, T, obs_dim]`.
    pub obs: Array3<f32>,
    /// Actions `[N, T, act_dim]`.
    pub actions: Array3<f32>,
    /// Next observations `[N, T, obs_dim]`.
    pub next_obs: Array3<f32>,
    /// Hidden dense rewards `[N, T]` (diagnostics only).
    pub dense_rewards: Array2<f32>,
    /// The team's episodic return `Σ_i Σ_t r_{i,t}`.
    pub team_return: f32,
}

impl MultiEpisode {
    /// Number of agents.
    pub fn n_agents(&self) -> usize {
        self.obs.shape()[0]
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.obs.shape()[1]
    }

    /// Whether the episode has no step.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks shapes and finiteness.
    ///
    /// # Errors
    /// [`LareError::Empty`], [`LareError::Shape`], [`LareError::NonFinite`].
    pub fn validate(&self) -> Result<()> {
        let (n, t) = (self.n_agents(), self.len());
        if n == 0 || t == 0 {
            return Err(LareError::Empty { what: "multi-agent episode".into() });
        }
        let want = |what: &str, got: &[usize], exp: &[usize]| -> Result<()> {
            if got != exp {
                return Err(LareError::shape(what, format!("{exp:?}"), format!("{got:?}")));
            }
            Ok(())
        };
        want("actions", &self.actions.shape()[..2], &[n, t])?;
        want("next_obs", self.next_obs.shape(), self.obs.shape())?;
        want("dense_rewards", self.dense_rewards.shape(), &[n, t])?;
        check_finite("obs", self.obs.iter().copied())?;
        check_finite("actions", self.actions.iter().copied())?;
        check_finite("next_obs", self.next_obs.iter().copied())?;
        check_finite("dense_rewards", self.dense_rewards.iter().copied())?;
        check_finite("team_return", [self.team_return])?;
        Ok(())
    }

    /// Each agent's latent factors `[N, T, dim]` from `encoder` (which reads `o_{t+1}` or `o_t`
    /// according to its [`StateSource`](crate::encoder::StateSource)).
    ///
    /// # Errors
    /// Encoder failures.
    pub fn featurize(&self, encoder: &dyn LatentEncoder) -> Result<Array3<f32>> {
        let (n, t) = (self.n_agents(), self.len());
        let mut out = Array3::<f32>::zeros((n, t, encoder.dim()));
        for i in 0..n {
            let f = encoder.encode_batch(
                self.obs.index_axis(Axis(0), i),
                self.actions.index_axis(Axis(0), i),
                self.next_obs.index_axis(Axis(0), i),
            )?;
            out.index_axis_mut(Axis(0), i).assign(&f);
        }
        Ok(out)
    }
}

/// A buffer of the last `capacity` multi-agent episodes with their factors.
#[derive(Debug, Clone)]
pub struct MultiEpisodeBuffer {
    capacity: usize,
    feature_dim: usize,
    episodes: VecDeque<(MultiEpisode, Array3<f32>)>,
}

impl MultiEpisodeBuffer {
    /// An empty buffer of at most `capacity` episodes with `feature_dim` factors per step.
    ///
    /// # Errors
    /// `capacity == 0`.
    pub fn new(capacity: usize, feature_dim: usize) -> Result<Self> {
        if capacity == 0 {
            return Err(LareError::invalid("capacity", 0, "must be >= 1"));
        }
        Ok(Self { capacity, feature_dim, episodes: VecDeque::new() })
    }

    /// Episodes held.
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// Episode `i` (0 = oldest) and its factors.
    pub fn get(&self, i: usize) -> Option<&(MultiEpisode, Array3<f32>)> {
        self.episodes.get(i)
    }

    /// Stores an episode with its factors `[N, T, feature_dim]`, evicting the oldest beyond
    /// the capacity.
    ///
    /// # Errors
    /// An invalid episode, features of another shape, non-finite features.
    pub fn push(&mut self, episode: MultiEpisode, features: Array3<f32>) -> Result<()> {
        episode.validate()?;
        let want = [episode.n_agents(), episode.len(), self.feature_dim];
        if features.shape() != want {
            return Err(LareError::shape("features", format!("{want:?}"), format!("{:?}", features.shape())));
        }
        check_finite("features", features.iter().copied())?;
        self.episodes.push_back((episode, features));
        while self.episodes.len() > self.capacity {
            self.episodes.pop_front();
        }
        Ok(())
    }
}

/// What the summed prediction of an episode is regressed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TeamTarget {
    /// `R_team / N` (LaRe's MPE code: the sparse reward of agent 0 summed over time).
    TeamMean,
    /// `R_team`.
    TeamSum,
}

/// Which decoder each agent uses: named agent types, each with its own factor width, and the
/// type of every agent (by index, in the order of the episodes' agent axis).
///
/// LaRe's `hetero_tag` scenario has two types, predators (the first `n_advs` agents) and prey
/// (the rest), each with its own LLM-written factors and its own decoder
/// ([`AgentTypes::hetero_tag`]). A team with one type is the shared decoder of
/// [`AgentCreditDecoder::new`].
///
/// Factors of types with different widths live in one `[N, T, max_feature_dim]` array: an
/// agent of type `k` uses the first `feature_dim(k)` columns and the rest are ignored
/// ([`MultiEpisode::featurize_typed`] writes zeros there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTypes {
    names: Vec<String>,
    feature_dims: Vec<usize>,
    of_agent: Vec<usize>,
}

impl AgentTypes {
    /// Types `types` (name, factor width) and the type name of every agent.
    ///
    /// # Errors
    /// [`LareError::Empty`] for no type or no agent; [`LareError::InvalidParameter`] for a
    /// duplicate or malformed name (ASCII letters, digits, `_` and `-` only: it names the
    /// decoder's variables), a zero width, or a type no agent has;
    /// [`LareError::UnknownId`] for an agent whose type is not declared.
    pub fn new<S: AsRef<str>>(types: &[(&str, usize)], agents: &[S]) -> Result<Self> {
        if types.is_empty() {
            return Err(LareError::Empty { what: "agent types".into() });
        }
        if agents.is_empty() {
            return Err(LareError::Empty { what: "agents".into() });
        }
        let mut names: Vec<String> = Vec::with_capacity(types.len());
        for (i, &(name, dim)) in types.iter().enumerate() {
            let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return Err(LareError::invalid(
                    format!("types[{i}].name"),
                    format!("{name:?}"),
                    "must be non-empty ASCII letters, digits, `_` or `-`",
                ));
            }
            if names.iter().any(|n| n == name) {
                return Err(LareError::invalid(format!("types[{i}].name"), name, "duplicate agent type"));
            }
            if dim == 0 {
                return Err(LareError::invalid(format!("types[{i}].feature_dim"), 0, "must be >= 1"));
            }
            names.push(name.to_owned());
        }
        let of_agent = agents
            .iter()
            .map(|a| {
                names
                    .iter()
                    .position(|n| n == a.as_ref())
                    .ok_or_else(|| LareError::UnknownId { what: "agent type".into(), id: a.as_ref().to_owned() })
            })
            .collect::<Result<Vec<_>>>()?;
        if let Some(k) = (0..names.len()).find(|k| !of_agent.contains(k)) {
            return Err(LareError::invalid(
                format!("types[{k}]"),
                &names[k],
                "no agent has this type (its decoder would never train)",
            ));
        }
        Ok(Self { names, feature_dims: types.iter().map(|t| t.1).collect(), of_agent })
    }

    /// One type, `"agent"`, for `n_agents` agents with `feature_dim` factors.
    ///
    /// # Errors
    /// As [`AgentTypes::new`].
    pub fn homogeneous(n_agents: usize, feature_dim: usize) -> Result<Self> {
        Self::new(&[("agent", feature_dim)], &vec!["agent"; n_agents])
    }

    /// LaRe's `hetero_tag`: `n_predators` agents of type `"predator"` first, then `n_prey` of
    /// type `"prey"` (the reference's `n_advs` adversaries, then its prey).
    ///
    /// # Errors
    /// As [`AgentTypes::new`] (zero agents of either type included).
    pub fn hetero_tag(n_predators: usize, predator_dim: usize, n_prey: usize, prey_dim: usize) -> Result<Self> {
        let mut agents = vec!["predator"; n_predators];
        agents.extend(std::iter::repeat_n("prey", n_prey));
        Self::new(&[("predator", predator_dim), ("prey", prey_dim)], &agents)
    }

    /// Number of types (decoders).
    pub fn n_types(&self) -> usize {
        self.names.len()
    }

    /// Number of agents.
    pub fn n_agents(&self) -> usize {
        self.of_agent.len()
    }

    /// Type names, in declaration order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The type index of every agent.
    pub fn agent_types(&self) -> &[usize] {
        &self.of_agent
    }

    /// The type index of agent `agent` (`None` beyond the team).
    pub fn type_of(&self, agent: usize) -> Option<usize> {
        self.of_agent.get(agent).copied()
    }

    /// The index of the type named `name`.
    ///
    /// # Errors
    /// [`LareError::UnknownId`].
    pub fn index_of(&self, name: &str) -> Result<usize> {
        self.names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| LareError::UnknownId { what: "agent type".into(), id: name.to_owned() })
    }

    /// Factor width of type `k` (`None` for an unknown index).
    pub fn feature_dim(&self, k: usize) -> Option<usize> {
        self.feature_dims.get(k).copied()
    }

    /// The widest type's factor width (the width of the stored factors).
    pub fn max_feature_dim(&self) -> usize {
        self.feature_dims.iter().copied().max().unwrap_or(0)
    }
}

impl MultiEpisode {
    /// Each agent's factors from the encoder of its type, `[N, T, types.max_feature_dim()]`,
    /// zero beyond the type's width.
    ///
    /// # Errors
    /// [`LareError::Shape`] for another number of encoders than types, an encoder whose width
    /// is not its type's, or an episode with another number of agents; encoder failures.
    pub fn featurize_typed(&self, encoders: &[&dyn LatentEncoder], types: &AgentTypes) -> Result<Array3<f32>> {
        check_len("encoders (one per agent type)", types.n_types(), encoders.len())?;
        check_len("episode agents", types.n_agents(), self.n_agents())?;
        for (k, e) in encoders.iter().enumerate() {
            check_len(&format!("encoder width of agent type `{}`", types.names[k]), types.feature_dims[k], e.dim())?;
        }
        let (n, t) = (self.n_agents(), self.len());
        let mut out = Array3::<f32>::zeros((n, t, types.max_feature_dim()));
        for i in 0..n {
            let k = types.of_agent[i];
            let f = encoders[k].encode_batch(
                self.obs.index_axis(Axis(0), i),
                self.actions.index_axis(Axis(0), i),
                self.next_obs.index_axis(Axis(0), i),
            )?;
            out.index_axis_mut(Axis(0), i).slice_axis_mut(Axis(1), (0..types.feature_dims[k]).into()).assign(&f);
        }
        Ok(out)
    }
}

/// Parameters of [`AgentCreditDecoder`]; defaults are LaRe's MPE code.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `hidden` | `[64, 64, 64, 64]` | hidden widths (5 linear layers, `Factor_Reward_Model`) | each `>= 1` |
/// | `lr` | 5e-4 | Adam learning rate | `> 0` |
/// | `weight_decay` | 1e-5 | Adam L2 weight decay | `>= 0` |
/// | `batch_episodes` | 256 | episodes per update (`rewardbatch_size`) | `>= 1` |
/// | `target` | `team_mean` | [`TeamTarget`] | |
/// | `agent_decomposition` | true | per-agent rewards (false: agent mean, `--no_agent_decomp`) | |
/// | `variance_reg` | 0 | α of the temporal variance regulariser (`--reg`; sum loss only) | `>= 0` |
/// | `loss` | `sum` | sum regression, or multi-agent RRD biased / unbiased ([`DecompositionLoss`]) | |
/// | `rrd_k` | 10 | RRD: steps drawn per update, shared by the batch (`--rrd_k`) | `>= 1`, `>= 2` unbiased |
/// | `horizon` | `None` | RRD: the padded horizon `H` the K steps are drawn from (`max_step_per_round`); `None`: the longest episode of the batch | `>= rrd_k` |
/// | `seed` | 0 | master seed | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CreditParams {
    /// Hidden widths.
    pub hidden: Vec<i64>,
    /// Learning rate.
    pub lr: f64,
    /// L2 weight decay.
    pub weight_decay: f64,
    /// Episodes per update.
    pub batch_episodes: usize,
    /// Regression target.
    pub target: TeamTarget,
    /// Agent-level credit.
    pub agent_decomposition: bool,
    /// Variance regulariser weight.
    pub variance_reg: f64,
    /// Loss: sum regression (LaRe, RD) or multi-agent RRD.
    pub loss: DecompositionLoss,
    /// RRD's K.
    pub rrd_k: usize,
    /// RRD's padded horizon.
    pub horizon: Option<usize>,
    /// Master seed.
    pub seed: u64,
}

impl Default for CreditParams {
    fn default() -> Self {
        Self {
            hidden: vec![64, 64, 64, 64],
            lr: 5e-4,
            weight_decay: 1e-5,
            batch_episodes: 256,
            target: TeamTarget::TeamMean,
            agent_decomposition: true,
            variance_reg: 0.0,
            loss: DecompositionLoss::Sum,
            rrd_k: 10,
            horizon: None,
            seed: 0,
        }
    }
}

impl CreditParams {
    /// Sets `hidden`.
    #[must_use]
    pub fn hidden(mut self, v: impl Into<Vec<i64>>) -> Self {
        self.hidden = v.into();
        self
    }
    /// Sets `lr`.
    #[must_use]
    pub fn lr(mut self, v: f64) -> Self {
        self.lr = v;
        self
    }
    /// Sets `weight_decay`.
    #[must_use]
    pub fn weight_decay(mut self, v: f64) -> Self {
        self.weight_decay = v;
        self
    }
    /// Sets `batch_episodes`.
    #[must_use]
    pub fn batch_episodes(mut self, v: usize) -> Self {
        self.batch_episodes = v;
        self
    }
    /// Sets `target`.
    #[must_use]
    pub fn target(mut self, v: TeamTarget) -> Self {
        self.target = v;
        self
    }
    /// Sets `agent_decomposition`.
    #[must_use]
    pub fn agent_decomposition(mut self, v: bool) -> Self {
        self.agent_decomposition = v;
        self
    }
    /// Sets `variance_reg`.
    #[must_use]
    pub fn variance_reg(mut self, v: f64) -> Self {
        self.variance_reg = v;
        self
    }
    /// Sets `loss`.
    #[must_use]
    pub fn loss(mut self, v: DecompositionLoss) -> Self {
        self.loss = v;
        self
    }
    /// Sets `rrd_k`.
    #[must_use]
    pub fn rrd_k(mut self, v: usize) -> Self {
        self.rrd_k = v;
        self
    }
    /// Sets `horizon`.
    #[must_use]
    pub fn horizon(mut self, v: Option<usize>) -> Self {
        self.horizon = v;
        self
    }
    /// Sets `seed`.
    #[must_use]
    pub fn seed(mut self, v: u64) -> Self {
        self.seed = v;
        self
    }

    /// The parameters of the network and optimiser (the loss fields are this struct's).
    fn decoder(&self) -> Result<Valid<DecoderParams>> {
        DecoderParams {
            hidden: self.hidden.clone(),
            lr: self.lr,
            weight_decay: self.weight_decay,
            loss: DecompositionLoss::Sum,
            rrd_k: 2,
            batch_size: self.batch_episodes,
            seed: self.seed,
        }
        .check()
    }

    fn is_rrd(&self) -> bool {
        self.loss != DecompositionLoss::Sum
    }
}

impl Params for CreditParams {
    type Error = LareError;
    fn validate(&self) -> Result<()> {
        self.decoder()?;
        if self.batch_episodes == 0 {
            return Err(LareError::invalid("batch_episodes", 0, "must be >= 1"));
        }
        if !(self.variance_reg >= 0.0 && self.variance_reg.is_finite()) {
            return Err(LareError::invalid("variance_reg", self.variance_reg, "must be finite and >= 0"));
        }
        if self.rrd_k == 0 {
            return Err(LareError::invalid("rrd_k", 0, "must be >= 1"));
        }
        if self.loss == DecompositionLoss::RrdUnbiased && self.rrd_k < 2 {
            return Err(LareError::invalid(
                "rrd_k",
                self.rrd_k,
                "the unbiased RRD loss needs K >= 2 (sample variance)",
            ));
        }
        if let Some(h) = self.horizon {
            if h == 0 {
                return Err(LareError::invalid("horizon", 0, "must be >= 1"));
            }
            if self.is_rrd() && self.rrd_k > h {
                return Err(LareError::invalid(
                    "rrd_k",
                    self.rrd_k,
                    format!("must be <= horizon {h} (K distinct steps of the horizon)"),
                ));
            }
        }
        if self.is_rrd() && self.variance_reg > 0.0 {
            return Err(LareError::invalid(
                "variance_reg",
                self.variance_reg,
                "the variance regulariser applies to the sum loss only (LaRe's RRD train step has none)",
            ));
        }
        Ok(())
    }
}

/// The episodes and steps of one update: `episodes` index the buffer (0 = oldest, repeats
/// allowed), `steps` are RRD's K distinct steps of the padded horizon, shared by every episode
/// and agent of the batch (empty for the sum loss).
///
/// [`AgentCreditDecoder::draw`] makes the default draw from the decoder's seeded stream; a
/// caller (or a test comparing with the reference's `np.random.choice` draw) can pass its own
/// to [`AgentCreditDecoder::update_with`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreditDraw {
    /// Buffer indices of the batch's episodes.
    pub episodes: Vec<usize>,
    /// RRD's sampled steps (empty for the sum loss).
    pub steps: Vec<usize>,
}

/// A decoder loss with its graph (for gradients) and the metrics of its terms.
#[derive(Debug)]
pub struct CreditLoss {
    /// The scalar loss (back-propagating it fills the decoders' gradients).
    pub loss: Tensor,
    /// `reward_model/variance` (regulariser), `reward_model/variance_correction` (RRD unbiased).
    pub metrics: Metrics,
}

/// One decoder per agent type in one variable store, trained by one Adam.
#[derive(Debug)]
struct TypedNets {
    device: Device,
    vs: VarStore,
    nets: Vec<Mlp>,
    opt: Adam,
    rng: SeededRng,
    updates: u64,
}

#[derive(Debug)]
enum Nets {
    /// One decoder for every agent (today's format and results).
    Shared(Box<RewardDecoder>),
    /// One decoder per type.
    PerType(Box<TypedNets>),
}

/// The serialisable state of a per-type checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TypedState {
    params: CreditParams,
    types: AgentTypes,
    rng: SeededRng,
    updates: u64,
}

const TYPED_KIND: &str = "lare.typed_credit_decoders";
const TYPED_FORMAT: u32 = 1;

/// Agent-level credit decoders (see the module docs): one shared by every agent, or one per
/// agent type ([`AgentTypes`]) with all of them in one optimiser; sum regression or
/// multi-agent RRD.
#[derive(Debug)]
pub struct AgentCreditDecoder {
    params: Valid<CreditParams>,
    types: Option<AgentTypes>,
    input_dim: usize,
    nets: Nets,
}

impl AgentCreditDecoder {
    /// One decoder shared by every agent over `feature_dim` factors.
    ///
    /// # Errors
    /// As [`RewardDecoder::new`].
    pub fn new(params: Valid<CreditParams>, feature_dim: usize, device: Device) -> Result<Self> {
        let decoder = RewardDecoder::new(params.decoder()?, feature_dim, device)?;
        Ok(Self { params, types: None, input_dim: feature_dim, nets: Nets::Shared(Box::new(decoder)) })
    }

    /// One decoder per agent type, all in one variable store and one Adam (LaRe's
    /// `hetero_tag`). With a single type this is [`AgentCreditDecoder::new`] (same
    /// initialisation, results and checkpoint) that also checks the number of agents.
    ///
    /// Type `k`'s network is initialised from the stream
    /// `derive_seed_named(seed, "credit-decoder-init-<name>")`; its variables are
    /// `decoder.<name>.<layer>.weight|bias`.
    ///
    /// # Errors
    /// An unavailable device; libtorch failures.
    pub fn with_types(params: Valid<CreditParams>, types: AgentTypes, device: Device) -> Result<Self> {
        if types.n_types() == 1 {
            let mut me = Self::new(params, types.feature_dims[0], device)?;
            me.types = Some(types);
            return Ok(me);
        }
        rl_nn::check::available(device)?;
        let dp = params.decoder()?;
        let vs = VarStore::new(device);
        let mut nets = Vec::with_capacity(types.n_types());
        for (name, &dim) in types.names.iter().zip(&types.feature_dims) {
            let seed = rl_core::derive_seed_named(params.seed, &format!("credit-decoder-init-{name}"));
            let mut rng = rl_core::rng_from_seed(seed);
            nets.push(Mlp::new(&vs.root().sub("decoder").sub(name.as_str()), dim as i64, 1, &dp.mlp()?, &mut rng)?);
        }
        let opt = Adam::for_var_store(dp.adam()?, &vs)?;
        let rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "reward-decoder-sampling"));
        let input_dim = types.max_feature_dim();
        let nets = Nets::PerType(Box::new(TypedNets { device, vs, nets, opt, rng, updates: 0 }));
        Ok(Self { params, types: Some(types), input_dim, nets })
    }

    /// The parameters.
    pub fn params(&self) -> &CreditParams {
        &self.params
    }

    /// The agent types (`None` for [`AgentCreditDecoder::new`]).
    pub fn types(&self) -> Option<&AgentTypes> {
        self.types.as_ref()
    }

    /// Width of the stored factors (the widest type's).
    pub fn input_dim(&self) -> usize {
        self.input_dim
    }

    /// Updates taken.
    pub fn updates(&self) -> u64 {
        match &self.nets {
            Nets::Shared(d) => d.updates(),
            Nets::PerType(t) => t.updates,
        }
    }

    /// Every decoder's variables (shared: `decoder.<layer>.weight|bias`; per type:
    /// `decoder.<type>.<layer>.weight|bias`), e.g. to read gradients after
    /// [`AgentCreditDecoder::loss`] or to copy weights in.
    pub fn var_store(&self) -> &VarStore {
        match &self.nets {
            Nets::Shared(d) => d.var_store(),
            Nets::PerType(t) => &t.vs,
        }
    }

    fn device(&self) -> Device {
        match &self.nets {
            Nets::Shared(d) => d.device(),
            Nets::PerType(t) => t.device,
        }
    }

    fn rng_mut(&mut self) -> &mut SeededRng {
        match &mut self.nets {
            Nets::Shared(d) => d.rng_mut(),
            Nets::PerType(t) => &mut t.rng,
        }
    }

    fn check_agents(&self, n: usize) -> Result<()> {
        match &self.types {
            Some(ty) => check_len("episode agents (agent types)", ty.n_agents(), n),
            None => Ok(()),
        }
    }

    /// `r̂` of every row of `feats`; row `r` belongs to agent `agent_of_row[r]`.
    fn forward_rows(&self, feats: &Array2<f32>, agent_of_row: &[usize]) -> Result<Tensor> {
        match &self.nets {
            Nets::Shared(d) => {
                let x = d.to_device(feats.view())?;
                d.forward(&x)
            }
            Nets::PerType(t) => {
                check_len("features width", self.input_dim, feats.ncols())?;
                check_finite("features", feats.iter().copied())?;
                let types = self.types.as_ref().ok_or_else(|| LareError::Empty { what: "agent types".into() })?;
                let mut out = Tensor::f_zeros([feats.nrows() as i64], (Kind::Float, t.device))?;
                for (k, net) in t.nets.iter().enumerate() {
                    let rows: Vec<i64> = agent_of_row
                        .iter()
                        .enumerate()
                        .filter(|(_, &a)| types.type_of(a) == Some(k))
                        .map(|(r, _)| r as i64)
                        .collect();
                    if rows.is_empty() {
                        continue;
                    }
                    let dim = types.feature_dims[k];
                    let mut x = Array2::<f32>::zeros((rows.len(), dim));
                    for (j, &r) in rows.iter().enumerate() {
                        x.row_mut(j).assign(&feats.row(r as usize).slice_axis(Axis(0), (0..dim).into()));
                    }
                    let x = rl_nn::convert::array_to_tensor_on(&x, t.device)?;
                    let y = net.f_forward(&x)?.f_reshape([-1])?;
                    let idx = Tensor::from_slice(&rows).f_to_device(t.device)?;
                    out = out.f_index_add(0, &idx, &y)?;
                }
                Ok(out)
            }
        }
    }

    /// Per-agent, per-step rewards `[N, T]` of an episode's factors `[N, T, dim]` (each
    /// agent through its type's decoder).
    ///
    /// # Errors
    /// A wrong feature width or number of agents, non-finite features.
    pub fn relabel(&self, features: &Array3<f32>) -> Result<Array2<f32>> {
        let (n, t, d) = features.dim();
        self.check_agents(n)?;
        let flat = features.to_shape((n * t, d)).map_err(|e| LareError::shape("features", "[N, T, dim]", e))?;
        let r = match &self.nets {
            Nets::Shared(dec) => dec.predict(flat.view())?,
            Nets::PerType(_) => {
                if n * t == 0 {
                    ndarray::Array1::zeros(0)
                } else {
                    let agents: Vec<usize> = (0..n).flat_map(|i| std::iter::repeat_n(i, t)).collect();
                    let y = tch::no_grad(|| self.forward_rows(&flat.to_owned(), &agents))?;
                    rl_nn::convert::tensor_to_array1(&y)?
                }
            }
        };
        let mut r = r.into_shape_with_order((n, t)).map_err(|e| LareError::shape("rewards", "[N, T]", e))?;
        if !self.params.agent_decomposition && n > 0 {
            let mean = r.mean_axis(Axis(0)).ok_or_else(|| LareError::Empty { what: "agents".into() })?;
            for mut row in r.rows_mut() {
                row.assign(&mean);
            }
        }
        Ok(r)
    }

    /// The padded horizon of a batch: `horizon`, or its longest episode.
    fn horizon_of(&self, buffer: &MultiEpisodeBuffer, episodes: &[usize]) -> usize {
        self.params
            .horizon
            .unwrap_or_else(|| episodes.iter().filter_map(|&i| buffer.get(i)).map(|(e, _)| e.len()).max().unwrap_or(0))
    }

    /// The default draw of one update from the decoder's seeded stream: `batch_episodes`
    /// episodes uniformly with replacement, then (RRD) `rrd_k` distinct steps of the padded
    /// horizon.
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer; [`LareError::InvalidParameter`] when `rrd_k`
    /// exceeds the batch's horizon.
    pub fn draw(&mut self, buffer: &MultiEpisodeBuffer) -> Result<CreditDraw> {
        if buffer.is_empty() {
            return Err(LareError::Empty { what: "multi-agent episode buffer".into() });
        }
        let b = self.params.batch_episodes;
        let len = buffer.len();
        let episodes: Vec<usize> = (0..b).map(|_| self.rng_mut().random_range(0..len)).collect();
        let steps = if self.params.is_rrd() {
            let (h, k) = (self.horizon_of(buffer, &episodes), self.params.rrd_k);
            if k > h {
                return Err(LareError::invalid("rrd_k", k, format!("must be <= the batch's padded horizon {h}")));
            }
            rand::seq::index::sample(self.rng_mut(), h, k).into_vec()
        } else {
            vec![]
        };
        Ok(CreditDraw { episodes, steps })
    }

    /// The loss of the parameters on the batch `draw` (with its graph; nothing is updated).
    ///
    /// ```text
    /// sum:  L = mean_b ( Σ_i Σ_{t<T_b} r̂_{b,i,t} − R_b )²  [+ α · mean_b Var_t(Σ_i r̂_{b,i,t})]
    /// RRD:  L = mean_b ( Σ_i Σ_{t∈I, t<T_b} (H/K) r̂_{b,i,t} − R_b )²        (I: K steps of 0..H)
    /// RRD unbiased: L − mean_{b,i} [ Var_{t∈I}((H/K) r̂_{b,i,t}) · (1 − K/H) / K ]
    /// ```
    ///
    /// `R_b` is the [`TeamTarget`]; steps at or past an episode's length are padding: zero
    /// factors, left out of the sum, kept in RRD's variance (as LaRe's padded batch).
    ///
    /// # Errors
    /// [`LareError::Empty`] for no episode in `draw`; [`LareError::InvalidParameter`] for an
    /// episode index out of range, steps given to the sum loss, not `rrd_k` distinct steps
    /// below the horizon, an episode longer than `horizon`; [`LareError::Shape`] for another
    /// feature width, another number of agents than the agent types (RRD: than the batch's
    /// first episode); libtorch failures.
    pub fn loss(&self, buffer: &MultiEpisodeBuffer, draw: &CreditDraw) -> Result<CreditLoss> {
        if draw.episodes.is_empty() {
            return Err(LareError::Empty { what: "draw.episodes".into() });
        }
        check_len("buffer feature width", self.input_dim, buffer.feature_dim)?;
        let mut eps = Vec::with_capacity(draw.episodes.len());
        for (j, &i) in draw.episodes.iter().enumerate() {
            let e = buffer.get(i).ok_or_else(|| {
                LareError::invalid(
                    format!("draw.episodes[{j}]"),
                    i,
                    format!("out of range for a buffer of {}", buffer.len()),
                )
            })?;
            self.check_agents(e.0.n_agents())?;
            eps.push(e);
        }
        if self.params.is_rrd() {
            self.rrd_loss(&eps, &draw.steps, self.horizon_of(buffer, &draw.episodes))
        } else {
            if !draw.steps.is_empty() {
                return Err(LareError::invalid(
                    "draw.steps",
                    format!("{:?}", draw.steps),
                    "the sum loss takes no steps",
                ));
            }
            self.sum_loss(&eps)
        }
    }

    fn target(&self, ep: &MultiEpisode) -> f32 {
        match self.params.target {
            TeamTarget::TeamMean => ep.team_return / ep.n_agents() as f32,
            TeamTarget::TeamSum => ep.team_return,
        }
    }

    fn sum_loss(&self, eps: &[&(MultiEpisode, Array3<f32>)]) -> Result<CreditLoss> {
        let p = self.params.get();
        let b = eps.len();
        let d = self.input_dim;
        let total: usize = eps.iter().map(|(e, _)| e.n_agents() * e.len()).sum();
        let mut feats = Array2::<f32>::zeros((total, d));
        let mut agent_of_row = Vec::with_capacity(total);
        let mut seg = Vec::with_capacity(total);
        let mut step_seg = Vec::with_capacity(total);
        let mut steps_per_ep = Vec::with_capacity(b);
        let mut targets = Vec::with_capacity(b);
        let (mut r, mut step_base) = (0usize, 0i64);
        for (j, (ep, f)) in eps.iter().enumerate() {
            let (n, t) = (ep.n_agents(), ep.len());
            let flat = f.to_shape((n * t, d)).map_err(|e| LareError::shape("features", "[N, T, dim]", e))?;
            feats.slice_axis_mut(Axis(0), (r..r + n * t).into()).assign(&flat);
            seg.extend(std::iter::repeat_n(j as i64, n * t));
            for agent in 0..n {
                agent_of_row.extend(std::iter::repeat_n(agent, t));
                step_seg.extend((0..t as i64).map(|k| step_base + k));
            }
            step_base += t as i64;
            steps_per_ep.push(t as i64);
            targets.push(self.target(ep));
            r += n * t;
        }
        let dev = self.device();
        let r_hat = self.forward_rows(&feats, &agent_of_row)?;
        let seg_t = Tensor::from_slice(&seg).f_to_device(dev)?;
        let pred = segment_sum(&r_hat, &seg_t, b as i64)?;
        let target = Tensor::from_slice(&targets).f_to_device(dev)?;
        let mse = pred.f_mse_loss(&target, tch::Reduction::Mean)?;
        let mut metrics = Metrics::new();
        let loss = if p.variance_reg > 0.0 {
            // temporal variance of the team's per-step reward, averaged over episodes
            let step_t = Tensor::from_slice(&step_seg).f_to_device(dev)?;
            let per_step = segment_sum(&r_hat, &step_t, step_base)?;
            let ep_of_step: Vec<i64> =
                steps_per_ep.iter().enumerate().flat_map(|(j, &t)| std::iter::repeat_n(j as i64, t as usize)).collect();
            let ep_t = Tensor::from_slice(&ep_of_step).f_to_device(dev)?;
            let lens = Tensor::from_slice(&steps_per_ep).f_to_device(dev)?.f_to_kind(Kind::Float)?;
            let mean = segment_sum(&per_step, &ep_t, b as i64)?.f_div(&lens)?;
            let dev_sq = per_step.f_sub(&mean.f_index_select(0, &ep_t)?)?.f_square()?;
            let var = segment_sum(&dev_sq, &ep_t, b as i64)?.f_div(&lens)?.f_mean(Kind::Float)?;
            metrics.insert("reward_model/variance", var.f_double_value(&[])?);
            mse.f_add(&var.f_mul_scalar(p.variance_reg)?)?
        } else {
            mse
        };
        Ok(CreditLoss { loss, metrics })
    }

    fn rrd_loss(&self, eps: &[&(MultiEpisode, Array3<f32>)], steps: &[usize], h: usize) -> Result<CreditLoss> {
        let p = self.params.get();
        let k = p.rrd_k;
        if steps.len() != k {
            return Err(LareError::invalid("draw.steps", format!("{steps:?}"), format!("RRD needs rrd_k = {k} steps")));
        }
        for (c, &s) in steps.iter().enumerate() {
            if s >= h {
                return Err(LareError::invalid(
                    format!("draw.steps[{c}]"),
                    s,
                    format!("must be < the padded horizon {h}"),
                ));
            }
            if steps[..c].contains(&s) {
                return Err(LareError::invalid(format!("draw.steps[{c}]"), s, "the K steps must be distinct"));
            }
        }
        let b = eps.len();
        let n = eps[0].0.n_agents();
        let d = self.input_dim;
        let mut feats = Array2::<f32>::zeros((b * n * k, d));
        let mut mask = Vec::with_capacity(b * k);
        let mut agent_of_row = Vec::with_capacity(b * n * k);
        let mut targets = Vec::with_capacity(b);
        for (j, (ep, f)) in eps.iter().enumerate() {
            check_len("episode agents (RRD: every episode of a batch)", n, ep.n_agents())?;
            if ep.len() > h {
                return Err(LareError::invalid(
                    "horizon",
                    h,
                    format!("shorter than a drawn episode ({} steps)", ep.len()),
                ));
            }
            for i in 0..n {
                for (c, &s) in steps.iter().enumerate() {
                    if s < ep.len() {
                        feats.row_mut((j * n + i) * k + c).assign(&f.index_axis(Axis(0), i).row(s));
                    }
                    agent_of_row.push(i);
                }
            }
            mask.extend(steps.iter().map(|&s| if s < ep.len() { 1.0f32 } else { 0.0 }));
            targets.push(self.target(ep));
        }
        let dev = self.device();
        let (bi, ni, ki) = (b as i64, n as i64, k as i64);
        let r_hat = self.forward_rows(&feats, &agent_of_row)?.f_reshape([bi, ni, ki])?;
        let scaled = r_hat.f_mul_scalar(h as f64 / k as f64)?;
        let mask = Tensor::from_slice(&mask).f_to_device(dev)?.f_reshape([bi, 1, ki])?;
        let pred = scaled.f_mul(&mask)?.f_sum_dim_intlist(&[1i64, 2][..], false, Kind::Float)?;
        let target = Tensor::from_slice(&targets).f_to_device(dev)?;
        let mse = target.f_mse_loss(&pred, tch::Reduction::Mean)?;
        let mut metrics = Metrics::new();
        let loss = if p.loss == DecompositionLoss::RrdUnbiased {
            let mean = scaled.f_mean_dim(&[-1i64][..], true, Kind::Float)?;
            let var = scaled.f_sub(&mean)?.f_square()?.f_sum_dim_intlist(&[-1i64][..], false, Kind::Float)?;
            let var = var.f_div_scalar((k - 1) as f64)?;
            let corr = var.f_mul_scalar(1.0 - k as f64 / h as f64)?.f_div_scalar(k as f64)?.f_mean(Kind::Float)?;
            metrics.insert("reward_model/variance_correction", corr.f_double_value(&[])?);
            mse.f_sub(&corr)?
        } else {
            mse
        };
        Ok(CreditLoss { loss, metrics })
    }

    /// One update on the batch `draw` (one Adam step over every decoder). Returns
    /// `reward_model/loss` and the metrics of [`AgentCreditDecoder::loss`].
    ///
    /// # Errors
    /// As [`AgentCreditDecoder::loss`].
    pub fn update_with(&mut self, buffer: &MultiEpisodeBuffer, draw: &CreditDraw) -> Result<Metrics> {
        let CreditLoss { loss, mut metrics } = self.loss(buffer, draw)?;
        match &mut self.nets {
            Nets::Shared(d) => d.step(&loss)?,
            Nets::PerType(t) => {
                t.opt.backward_step(&loss)?;
                t.updates += 1;
            }
        }
        metrics.insert("reward_model/loss", loss.f_double_value(&[])?);
        Ok(metrics)
    }

    /// One update on the default draw ([`AgentCreditDecoder::draw`]). Returns
    /// `reward_model/loss`.
    ///
    /// # Errors
    /// [`LareError::Empty`] for an empty buffer, a feature width that differs, libtorch failures.
    pub fn update(&mut self, buffer: &MultiEpisodeBuffer) -> Result<Metrics> {
        if buffer.is_empty() {
            return Err(LareError::Empty { what: "multi-agent episode buffer".into() });
        }
        check_len("buffer feature width", self.input_dim, buffer.feature_dim)?;
        let draw = self.draw(buffer)?;
        self.update_with(buffer, &draw)
    }

    /// Writes a checkpoint directory (weights, Adam moments, sampling stream, counters; per
    /// type: also the parameters and types).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        match &self.nets {
            Nets::Shared(d) => d.save(dir),
            Nets::PerType(t) => {
                let state = TypedState {
                    params: self.params.get().clone(),
                    types: self.types.clone().ok_or_else(|| LareError::Empty { what: "agent types".into() })?,
                    rng: t.rng.clone(),
                    updates: t.updates,
                };
                let mut tensors = rl_nn::checkpoint::var_store_tensors(&t.vs, "model.");
                tensors.extend(t.opt.state_tensors("optim.")?);
                rl_nn::checkpoint::save_dir(dir, TYPED_KIND, TYPED_FORMAT, &state, &tensors)?;
                Ok(())
            }
        }
    }

    /// Restores a checkpoint of a decoder with the same parameters (and agent types).
    ///
    /// # Errors
    /// As [`RewardDecoder::load`]; [`LareError::Corrupt`] for other parameters or types. The
    /// decoder is unchanged on error.
    pub fn load(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        let params = self.params.get().clone();
        let types = self.types.clone();
        match &mut self.nets {
            Nets::Shared(d) => d.load(dir),
            Nets::PerType(t) => {
                let ck = rl_nn::checkpoint::load_dir::<TypedState>(dir, TYPED_KIND, TYPED_FORMAT)?;
                let path = ck.path.clone();
                if ck.state.params != params || Some(&ck.state.types) != types.as_ref() {
                    return Err(LareError::Corrupt {
                        path,
                        reason: "the checkpoint was written by decoders with other parameters or agent types".into(),
                    });
                }
                let mode = rl_nn::LoadMode::AllowExtra;
                rl_nn::checkpoint::check_map(&t.vs, &ck.tensors, "model.", mode, &ck.path)?;
                t.opt.check_state_tensors(&ck.tensors, "optim.", mode, &ck.path)?;
                rl_nn::checkpoint::load_map(&t.vs, &ck.tensors, "model.", mode, &ck.path)?;
                t.opt.load_state_tensors(&ck.tensors, "optim.", mode, &ck.path)?;
                t.rng = ck.state.rng;
                t.updates = ck.state.updates;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::{NativeEncoder, StateSource};
    use ndarray::Array1;

    /// Agents whose hidden reward is `−|x|` of their own next position: the team return is
    /// known, the per-agent split is what the decoder must find.
    fn episodes(n_eps: usize, seed: u64) -> Vec<MultiEpisode> {
        let mut rng = rl_core::rng_from_seed(seed);
        (0..n_eps)
            .map(|_| {
                let (n, t) = (3, 5);
                let next = Array3::from_shape_fn((n, t, 1), |_| rng.random_range(-1.0f32..1.0));
                let dense = Array2::from_shape_fn((n, t), |(i, k)| -next[[i, k, 0]].abs());
                MultiEpisode {
                    obs: next.clone(),
                    actions: Array3::zeros((n, t, 1)),
                    next_obs: next,
                    team_return: dense.sum(),
                    dense_rewards: dense,
                }
            })
            .collect()
    }

    #[test]
    fn shared_decoder_learns_agent_level_credit() {
        let enc = NativeEncoder::new(1, "|x|", |o, _, _, out| out[0] = o[0].abs())
            .unwrap()
            .with_state_source(StateSource::Next);
        let mut buf = MultiEpisodeBuffer::new(1000, 1).unwrap();
        for ep in episodes(200, 0) {
            let f = ep.featurize(&enc).unwrap();
            buf.push(ep, f).unwrap();
        }
        let p = CreditParams::default().hidden([16]).lr(1e-2).batch_episodes(32).target(TeamTarget::TeamSum);
        let mut dec = AgentCreditDecoder::new(p.check().unwrap(), 1, Device::Cpu).unwrap();
        for _ in 0..400 {
            dec.update(&buf).unwrap();
        }
        let (ep, f) = buf.get(0).unwrap();
        let r = dec.relabel(f).unwrap();
        let err = (&r - &ep.dense_rewards).mapv(|e| e * e).mean().unwrap();
        assert!(err < 0.01, "per-agent reward MSE {err}");
        // without agent decomposition every agent gets the same reward at a step
        let p = CreditParams::default().hidden([16]).agent_decomposition(false).check().unwrap();
        let flat = AgentCreditDecoder::new(p, 1, Device::Cpu).unwrap().relabel(f).unwrap();
        assert!(flat.columns().into_iter().all(|c| c.iter().all(|v| (v - c[0]).abs() < 1e-6)));
    }

    #[test]
    fn variance_regulariser_and_bad_inputs() {
        let enc = NativeEncoder::new(1, "x", |o, _, _, out| out[0] = o[0]).unwrap();
        let mut buf = MultiEpisodeBuffer::new(2, 1).unwrap();
        for ep in episodes(3, 1) {
            let f = ep.featurize(&enc).unwrap();
            buf.push(ep, f).unwrap();
        }
        assert_eq!(buf.len(), 2);
        let p = CreditParams::default().hidden([4]).batch_episodes(4).variance_reg(0.5).check().unwrap();
        let mut dec = AgentCreditDecoder::new(p, 1, Device::Cpu).unwrap();
        let m = dec.update(&buf).unwrap();
        assert!(m.get("reward_model/variance").unwrap() >= 0.0);
        let mut ep = episodes(1, 2).remove(0);
        ep.dense_rewards = Array2::zeros((2, 5));
        assert!(buf.push(ep, Array3::zeros((3, 5, 1))).is_err());
        assert!(CreditParams::default().variance_reg(-1.0).check().is_err());
        assert!(MultiEpisodeBuffer::new(0, 1).is_err());
        let empty = MultiEpisodeBuffer::new(1, 1).unwrap();
        assert!(dec.update(&empty).is_err());
        let _ = Array1::<f32>::zeros(1);
    }
}
