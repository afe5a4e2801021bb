//! A state → bid-coefficient policy evaluated in plain Rust ([`MlpPolicy`]), and the bidder
//! that runs it ([`PolicyBidder`]). Learned bidders (behaviour cloning, `aigb::learned` in the
//! `aigb` crate) train with libtorch and export to this form, so a trained bidder runs and
//! evaluates without libtorch, on any thread.

use serde::{Deserialize, Serialize};

use crate::bidder::{write_linear_bids, Bidder, PeriodInfo, TickContext, STATE_DIM};
use crate::error::{AigbError, Result};

/// Per-feature standardisation `(x − mean) / std` of the 16 state features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateNorm {
    /// Means.
    pub mean: Vec<f32>,
    /// Standard deviations (a zero spread is stored as 1).
    pub std: Vec<f32>,
}

impl StateNorm {
    /// Fits mean and standard deviation to `states` (rows of 16).
    ///
    /// # Errors
    /// [`AigbError::Empty`] without rows; [`AigbError::NonFinite`] for a NaN or infinity.
    pub fn fit(states: &[[f32; STATE_DIM]]) -> Result<Self> {
        if states.is_empty() {
            return Err(AigbError::Empty { what: "states".into() });
        }
        let n = states.len() as f64;
        let mut mean = [0.0f64; STATE_DIM];
        for (i, s) in states.iter().enumerate() {
            for (d, x) in s.iter().enumerate() {
                if !x.is_finite() {
                    return Err(AigbError::NonFinite {
                        what: "states".into(),
                        index: i * STATE_DIM + d,
                        value: f64::from(*x),
                    });
                }
                mean[d] += f64::from(*x) / n;
            }
        }
        let mut var = [0.0f64; STATE_DIM];
        for s in states {
            for (d, x) in s.iter().enumerate() {
                var[d] += (f64::from(*x) - mean[d]).powi(2) / n;
            }
        }
        Ok(Self {
            mean: mean.iter().map(|m| *m as f32).collect(),
            std: var.iter().map(|v| if v.sqrt() > 1e-12 { v.sqrt() as f32 } else { 1.0 }).collect(),
        })
    }

    /// Standardises one state.
    pub fn apply(&self, s: &[f32; STATE_DIM]) -> [f32; STATE_DIM] {
        let mut o = [0.0; STATE_DIM];
        for d in 0..STATE_DIM {
            o[d] = (s[d] - self.mean.get(d).copied().unwrap_or(0.0)) / self.std.get(d).copied().unwrap_or(1.0);
        }
        o
    }
}

/// One dense layer: `y = W x + b`, `W` row-major `[out, in]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dense {
    /// Inputs.
    pub input: usize,
    /// Outputs.
    pub output: usize,
    /// Weights, `output · input`.
    pub weight: Vec<f32>,
    /// Biases, `output`.
    pub bias: Vec<f32>,
}

/// An MLP with ReLU hidden layers mapping the standardised state to the bid coefficient, in
/// plain Rust.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpPolicy {
    /// State standardisation.
    pub norm: StateNorm,
    /// Layers, input first.
    pub layers: Vec<Dense>,
    /// The output is `α / CPA` (multiply by the advertiser's CPA) instead of `α`.
    pub cpa_relative: bool,
    /// A name for tables.
    pub name: String,
}

impl MlpPolicy {
    /// Checks the layer shapes and values.
    ///
    /// # Errors
    /// [`AigbError::Shape`] / [`AigbError::NonFinite`] naming the layer.
    pub fn validate(&self) -> Result<()> {
        let mut width = STATE_DIM;
        if self.norm.mean.len() != STATE_DIM || self.norm.std.len() != STATE_DIM {
            return Err(AigbError::Shape {
                what: "norm".into(),
                expected: STATE_DIM.to_string(),
                got: self.norm.mean.len().to_string(),
            });
        }
        for (i, l) in self.layers.iter().enumerate() {
            if l.input != width || l.input.checked_mul(l.output) != Some(l.weight.len()) || l.bias.len() != l.output {
                return Err(AigbError::Shape {
                    what: format!("layers[{i}]"),
                    expected: format!("input {width}, weight {}x{}, bias {}", l.output, l.input, l.output),
                    got: format!("input {}, weight {}, bias {}", l.input, l.weight.len(), l.bias.len()),
                });
            }
            if let Some(j) = l.weight.iter().chain(&l.bias).position(|x| !x.is_finite()) {
                return Err(AigbError::NonFinite { what: format!("layers[{i}]"), index: j, value: f64::NAN });
            }
            width = l.output;
        }
        if width != 1 {
            return Err(AigbError::Shape {
                what: "policy output".into(),
                expected: "1".into(),
                got: width.to_string(),
            });
        }
        Ok(())
    }

    /// The coefficient α for `state` and CPA constraint `cpa` (not clipped).
    pub fn alpha(&self, state: &[f32; STATE_DIM], cpa: f64) -> f64 {
        let mut x: Vec<f32> = self.norm.apply(state).to_vec();
        let n = self.layers.len();
        for (k, l) in self.layers.iter().enumerate() {
            let mut y = l.bias.clone();
            for (o, yo) in y.iter_mut().enumerate() {
                let row = &l.weight[o * l.input..(o + 1) * l.input];
                *yo += row.iter().zip(&x).map(|(w, v)| w * v).sum::<f32>();
                if k + 1 < n {
                    *yo = yo.max(0.0);
                }
            }
            x = y;
        }
        let out = f64::from(x.first().copied().unwrap_or(0.0));
        if self.cpa_relative {
            out * cpa
        } else {
            out
        }
    }
}

/// Bids `max(α(state), 0) · pValue` with an [`MlpPolicy`].
#[derive(Debug, Clone)]
pub struct PolicyBidder {
    policy: std::sync::Arc<MlpPolicy>,
}

impl PolicyBidder {
    /// A bidder running `policy`.
    ///
    /// # Errors
    /// As [`MlpPolicy::validate`].
    pub fn new(policy: std::sync::Arc<MlpPolicy>) -> Result<Self> {
        policy.validate()?;
        Ok(Self { policy })
    }
}

impl Bidder for PolicyBidder {
    fn name(&self) -> String {
        self.policy.name.clone()
    }
    fn begin_period(&mut self, _info: &PeriodInfo) -> Result<()> {
        Ok(())
    }
    fn bid(&mut self, ctx: &TickContext<'_>, out: &mut [f32]) -> Result<()> {
        let a = self.policy.alpha(&ctx.state(), ctx.info.cpa);
        write_linear_bids(a.max(0.0), ctx.pvalues, out);
        Ok(())
    }
}
