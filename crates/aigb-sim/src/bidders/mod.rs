//! Rule-based bidders: [`FixedCpaBidder`], [`PidBidder`] (AuctionNet's budget pacing and a PID
//! controller), [`OnlineLpBidder`] (from a table built on past periods), and the
//! exploration-noise wrapper [`NoisyBidder`] used for logged data.

mod online_lp;

pub use online_lp::{LpHistory, LpSample, OnlineLpBidder, OnlineLpParams, OnlineLpTable};

use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::bidder::{write_linear_bids, Bidder, PeriodInfo, TickContext, TickRecord};
use crate::error::{check_positive, check_range, AigbError, Result};

/// Parameters of [`FixedCpaBidder`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `cpa_multiplier` | 1.0 | bid `multiplier · CPA · pValue` (1.0 is the truthful CPA bid) | > 0 |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FixedCpaParams {
    /// Multiplier of the CPA constraint.
    pub cpa_multiplier: f64,
}

impl Default for FixedCpaParams {
    fn default() -> Self {
        Self { cpa_multiplier: 1.0 }
    }
}

crate::traffic::setters!(FixedCpaParams { cpa_multiplier: f64 });

impl rl_core::Params for FixedCpaParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        check_positive("cpa_multiplier", self.cpa_multiplier)
    }
}

/// Bids `m · CPA · pValue` at every tick: the value of an impression at the target CPA, without
/// budget pacing (it stops when the budget runs out).
#[derive(Debug, Clone)]
pub struct FixedCpaBidder {
    params: rl_core::Valid<FixedCpaParams>,
    alpha: f64,
}

impl FixedCpaBidder {
    /// A fixed-CPA bidder.
    pub fn new(params: rl_core::Valid<FixedCpaParams>) -> Self {
        Self { params, alpha: 0.0 }
    }
}

impl Bidder for FixedCpaBidder {
    fn name(&self) -> String {
        if self.params.cpa_multiplier == 1.0 {
            "fixed-cpa".into()
        } else {
            format!("fixed-cpa×{}", self.params.cpa_multiplier)
        }
    }
    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()> {
        self.alpha = self.params.cpa_multiplier * info.cpa;
        Ok(())
    }
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        write_linear_bids(self.alpha, ctx.pvalues, out);
        Ok(())
    }
}

/// How [`PidBidder`] updates its bid coefficient α from the pacing ratio
/// `r = last tick's cost · ticks left / remaining budget` (1 = on pace).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacingRule {
    /// AuctionNet's `PidBiddingStrategy`: `r < low` ⇒ `α ·= up`, `r > high` ⇒ `α ·= down`.
    AuctionNet {
        /// Under-spending threshold (0.7).
        low: f64,
        /// Over-spending threshold (1.1).
        high: f64,
        /// Factor when under-spending (1.2).
        up: f64,
        /// Factor when over-spending (0.7).
        down: f64,
    },
    /// A PID controller on `ln α` with error `e = −ln max(r, 0.01)` (reconstructed; not in
    /// AuctionNet): `ln α_t = ln α_0 + kp·e_t + ki·Σe + kd·(e_t − e_{t−1})`.
    Pid {
        /// Proportional gain.
        kp: f64,
        /// Integral gain.
        ki: f64,
        /// Derivative gain.
        kd: f64,
    },
}

impl Default for PacingRule {
    fn default() -> Self {
        PacingRule::AuctionNet { low: 0.7, high: 1.1, up: 1.2, down: 0.7 }
    }
}

impl PacingRule {
    /// The PID rule with gains `kp = 0.4, ki = 0.1, kd = 0` (our choice).
    pub fn pid() -> Self {
        PacingRule::Pid { kp: 0.4, ki: 0.1, kd: 0.0 }
    }
}

/// Parameters of [`PidBidder`] (AuctionNet's `pid_bidding_strategy.py`).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `initial_alpha` | 15.0 | α at the first tick (AuctionNet's `base_action`) | > 0 |
/// | `initial_alpha_cpa_multiplier` | none | if set, α₀ = this · CPA instead | > 0 |
/// | `rule` | AuctionNet (0.7, 1.1, 1.2, 0.7) | update rule ([`PacingRule`]) | thresholds low < high, factors > 0 |
/// | `max_alpha` | ∞ | upper bound of α | > 0 |
/// | `max_alpha_cpa_multiplier` | none | if set, also α ≤ this · CPA (our addition: pacing alone ignores the CPA constraint) | > 0 |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PidParams {
    /// α at the first tick.
    pub initial_alpha: f64,
    /// α₀ as a multiple of the CPA (overrides `initial_alpha`).
    pub initial_alpha_cpa_multiplier: Option<f64>,
    /// Update rule.
    pub rule: PacingRule,
    /// Upper bound of α.
    pub max_alpha: f64,
    /// Upper bound of α as a CPA multiple.
    pub max_alpha_cpa_multiplier: Option<f64>,
}

impl Default for PidParams {
    fn default() -> Self {
        Self {
            initial_alpha: 15.0,
            initial_alpha_cpa_multiplier: None,
            rule: PacingRule::default(),
            max_alpha: f64::INFINITY,
            max_alpha_cpa_multiplier: None,
        }
    }
}

crate::traffic::setters!(PidParams {
    initial_alpha: f64,
    initial_alpha_cpa_multiplier: Option<f64>,
    rule: PacingRule,
    max_alpha: f64,
    max_alpha_cpa_multiplier: Option<f64>,
});

impl rl_core::Params for PidParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        check_positive("initial_alpha", self.initial_alpha)?;
        if let Some(m) = self.initial_alpha_cpa_multiplier {
            check_positive("initial_alpha_cpa_multiplier", m)?;
        }
        if self.max_alpha.is_nan() || self.max_alpha <= 0.0 {
            return Err(AigbError::invalid("max_alpha", self.max_alpha, "must be > 0"));
        }
        if let Some(m) = self.max_alpha_cpa_multiplier {
            check_positive("max_alpha_cpa_multiplier", m)?;
        }
        match self.rule {
            PacingRule::AuctionNet { low, high, up, down } => {
                check_positive("rule.low", low)?;
                check_positive("rule.high", high)?;
                if low >= high {
                    return Err(AigbError::invalid("rule.low", low, "must be < rule.high"));
                }
                check_positive("rule.up", up)?;
                check_positive("rule.down", down)?;
            }
            PacingRule::Pid { kp, ki, kd } => {
                check_range("rule.kp", kp, 0.0, f64::INFINITY)?;
                check_range("rule.ki", ki, 0.0, f64::INFINITY)?;
                check_range("rule.kd", kd, 0.0, f64::INFINITY)?;
            }
        }
        Ok(())
    }
}

/// Budget pacing: one coefficient α per tick, bids `α · pValue`, α adjusted after each tick by
/// how the last tick's spend compares with an even split of the remaining budget over the
/// remaining ticks ([`PacingRule`]). The default is AuctionNet's `PidBiddingStrategy`, the
/// bidder of the fidelity market.
#[derive(Debug, Clone)]
pub struct PidBidder {
    params: rl_core::Valid<PidParams>,
    alpha0: f64,
    alpha: f64,
    cap: f64,
    integral: f64,
    last_error: f64,
}

impl PidBidder {
    /// A pacing bidder.
    pub fn new(params: rl_core::Valid<PidParams>) -> Self {
        let a = params.initial_alpha;
        Self { params, alpha0: a, alpha: a, cap: f64::INFINITY, integral: 0.0, last_error: 0.0 }
    }

    /// The current coefficient α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl Bidder for PidBidder {
    fn name(&self) -> String {
        match self.params.rule {
            PacingRule::AuctionNet { .. } => "pid".into(),
            PacingRule::Pid { .. } => "pid-log".into(),
        }
    }

    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()> {
        self.alpha0 = self.params.initial_alpha_cpa_multiplier.map_or(self.params.initial_alpha, |m| m * info.cpa);
        self.cap =
            self.params.max_alpha.min(self.params.max_alpha_cpa_multiplier.map_or(f64::INFINITY, |m| m * info.cpa));
        self.alpha = self.alpha0.min(self.cap);
        self.integral = 0.0;
        self.last_error = 0.0;
        Ok(())
    }

    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        if ctx.tick > 0 {
            let ratio = ctx.last_cost() * ctx.ticks_left() as f64 / ctx.remaining_budget.max(1e-12);
            match self.params.rule {
                PacingRule::AuctionNet { low, high, up, down } => {
                    if ratio < low {
                        self.alpha *= up;
                    } else if ratio > high {
                        self.alpha *= down;
                    }
                }
                PacingRule::Pid { kp, ki, kd } => {
                    let e = -ratio.max(0.01).ln();
                    self.integral += e;
                    let d = e - self.last_error;
                    self.last_error = e;
                    self.alpha = self.alpha0 * (kp * e + ki * self.integral + kd * d).exp();
                }
            }
            self.alpha = self.alpha.min(self.cap);
        }
        write_linear_bids(self.alpha, ctx.pvalues, out);
        Ok(())
    }
}

/// Parameters of [`NoisyBidder`].
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `sigma` | 0.2 | bids of a tick are multiplied by `exp(sigma · ε)`, `ε ~ N(0, 1)` per tick | ≥ 0 |
/// | `seed` | 0 | master seed; the stream is derived from it, the period and the advertiser | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NoiseParams {
    /// Log-normal noise scale.
    pub sigma: f64,
    /// Master seed.
    pub seed: u64,
}

impl Default for NoiseParams {
    fn default() -> Self {
        Self { sigma: 0.2, seed: 0 }
    }
}

crate::traffic::setters!(NoiseParams { sigma: f64, seed: u64 });

impl rl_core::Params for NoiseParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        check_range("sigma", self.sigma, 0.0, f64::INFINITY)
    }
}

/// Exploration noise around any bidder: all of a tick's bids are multiplied by one log-normal
/// factor `exp(σ·ε_t)`, so the logged action `Σbid/ΣpValue` explores around the inner policy
/// (the behaviour diversity that offline and generative bidders need).
#[derive(Debug)]
pub struct NoisyBidder<B> {
    inner: B,
    params: rl_core::Valid<NoiseParams>,
    rng: rl_core::SeededRng,
}

impl<B: Bidder> NoisyBidder<B> {
    /// Wraps `inner`.
    pub fn new(inner: B, params: rl_core::Valid<NoiseParams>) -> Self {
        let rng = rl_core::rng_from_seed(params.seed);
        Self { inner, params, rng }
    }

    /// The wrapped bidder.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Bidder> Bidder for NoisyBidder<B> {
    fn name(&self) -> String {
        format!("{}+noise{}", self.inner.name(), self.params.sigma)
    }
    fn begin_period(&mut self, info: &PeriodInfo) -> Result<()> {
        let s = rl_core::derive_seed(
            rl_core::derive_seed(rl_core::derive_seed_named(self.params.seed, "noisy-bidder"), info.period),
            info.advertiser as u64,
        );
        self.rng = rl_core::rng_from_seed(s);
        self.inner.begin_period(info)
    }
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        self.inner.bid(ctx, out)?;
        let eps: f64 = StandardNormal.sample(&mut self.rng);
        let f = (self.params.sigma * eps).exp() as f32;
        for b in out.iter_mut() {
            *b *= f;
        }
        Ok(())
    }
    fn end_tick(&mut self, record: &TickRecord) {
        self.inner.end_tick(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_core::Params;

    fn info() -> PeriodInfo {
        PeriodInfo { period: 0, advertiser: 0, budget: 100.0, cpa: 50.0, category: 0, num_ticks: 48 }
    }

    fn rec(cost: f64) -> TickRecord {
        TickRecord { cost, ..TickRecord::default() }
    }

    #[test]
    fn auctionnet_pid_follows_its_thresholds() {
        let mut b = PidBidder::new(PidParams::default().check().unwrap());
        let inf = info();
        b.begin_period(&inf).unwrap();
        let pv = [0.5f32, 1.0];
        let mut out = [0.0f32; 2];
        let ctx = |t, rem, h: &'static [TickRecord]| TickContext {
            info: Box::leak(Box::new(inf)),
            tick: t,
            remaining_budget: rem,
            pvalues: &pv,
            sigmas: &pv,
            history: h,
        };
        b.bid(&ctx(0, 100.0, &[]), &mut out).unwrap();
        assert_eq!(out, [7.5, 15.0]);
        // tick 1: spent 1, 47 ticks left, 99 remaining: ratio 0.47 < 0.7 → ×1.2
        let h1: &'static [TickRecord] = Box::leak(Box::new([rec(1.0)]));
        b.bid(&ctx(1, 99.0, h1), &mut out).unwrap();
        assert!((b.alpha() - 18.0).abs() < 1e-12);
        // tick 2: spent 5, 46 left, 94 remaining: ratio 2.45 > 1.1 → ×0.7
        let h2: &'static [TickRecord] = Box::leak(Box::new([rec(1.0), rec(5.0)]));
        b.bid(&ctx(2, 94.0, h2), &mut out).unwrap();
        assert!((b.alpha() - 12.6).abs() < 1e-12);
        // on pace: unchanged
        let h3: &'static [TickRecord] = Box::leak(Box::new([rec(1.0), rec(5.0), rec(2.0)]));
        b.bid(&ctx(3, 90.0, h3), &mut out).unwrap();
        assert!((b.alpha() - 12.6).abs() < 1e-12);
        assert!(PidParams::default()
            .rule(PacingRule::AuctionNet { low: 1.2, high: 1.1, up: 1.2, down: 0.7 })
            .check()
            .is_err());
        assert!(PidParams::default().initial_alpha(-1.0).check().is_err());
    }

    #[test]
    fn fixed_cpa_and_noise() {
        let mut f = FixedCpaBidder::new(FixedCpaParams::default().check().unwrap());
        let inf = info();
        f.begin_period(&inf).unwrap();
        let pv = [0.01f32, 0.02];
        let ctx = TickContext { info: &inf, tick: 0, remaining_budget: 100.0, pvalues: &pv, sigmas: &pv, history: &[] };
        let mut out = [0.0f32; 2];
        f.bid(&ctx, &mut out).unwrap();
        assert_eq!(out, [0.5, 1.0]);
        let mut nz = NoisyBidder::new(f, NoiseParams::default().sigma(0.5).check().unwrap());
        nz.begin_period(&inf).unwrap();
        nz.bid(&ctx, &mut out).unwrap();
        let r = out[0] / 0.5;
        assert!(r > 0.0 && (r - 1.0).abs() > 1e-6);
        assert!((out[1] / out[0] - 2.0).abs() < 1e-5); // one factor per tick
        let mut again = [0.0f32; 2];
        nz.begin_period(&inf).unwrap();
        nz.bid(&ctx, &mut again).unwrap();
        assert_eq!(out, again); // reseeded per period and advertiser
        assert!(NoiseParams::default().sigma(-1.0).check().is_err());
    }
}
