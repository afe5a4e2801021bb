//! Loss aggregation with global normalisation counts.
//!
//! A loss is computed on a micro-batch, but it must be normalised by the counts of the *whole*
//! batch (all micro-batches on all data-parallel ranks), or the gradient depends on how the
//! batch was split (verl #5625, verl #7200, prime-rl PR #583). Every mode therefore takes a
//! [`GlobalCounts`] and the result satisfies:
//!
//! - with `dp_size = 1`, the sum of the micro-batch losses equals the full-batch loss, and so do
//!   their gradients (gradient accumulation: call `backward` on each, do not divide);
//! - with `dp_size = R` ranks, each micro-batch loss is multiplied by `R`, so that summing over
//!   a rank's micro-batches and then *averaging* over ranks (what DDP's all-reduce does) gives
//!   the full-batch loss (verl's `* dp_size`).
//!
//! | mode | micro-batch loss (ℓ per token, m the mask) |
//! |---|---|
//! | [`Aggregation::TokenMean`] | `dp · Σ_{i,t} m ℓ / N_tokens` (verl default, DAPO, TRL `dapo`) |
//! | [`Aggregation::SeqMeanTokenSum`] | `dp · Σ_i Σ_t m ℓ / N_seq` (LPO Algorithm 1) |
//! | [`Aggregation::SeqMeanTokenMean`] | `dp · Σ_i (Σ_t m ℓ / Σ_t m) / N_seq` (original GRPO) |
//! | [`Aggregation::SeqMeanTokenSumNorm`] | `dp · Σ_i Σ_t m ℓ / (N_seq · L)` (Dr.GRPO, TRL `dr_grpo`) |
//!
//! `N_tokens` counts mask-weighted tokens and `N_seq` the sequences with at least one response
//! token, both over the whole batch (`GlobalCounts::from_masks` with feature `tch`, or
//! [`GlobalCounts::from_lengths`]). Fully masked rows add nothing and are not counted. Counts are
//! taken from the response mask *before* any rejection masking of the decoupled correction, so
//! rejected tokens do not inflate the others (AReaL).
//!
//! **verl-compatible mode** ([`Compat::Verl`]). Two modes differ from verl's `agg_loss` here:
//! `seq-mean-token-sum-norm` divides by `N_seq · L` (TRL `dr_grpo`, the Dr.GRPO paper), verl by
//! `L` alone (no sequence count and no `dp`), so a verl config ported as-is gets a loss `N_seq`
//! times smaller; and `seq-mean-token-mean` divides each row by its length where verl divides
//! by `length + 1e-8` (a relative difference of `1e-8/length`). [`Compat::Verl`] gives verl's
//! numbers for both; the table:
//!
//! | mode | [`Compat::Native`] (default) | [`Compat::Verl`] |
//! |---|---|---|
//! | `token-mean`, `seq-mean-token-sum` | as above | same |
//! | `seq-mean-token-mean` | `Σ_t m ℓ / Σ_t m` per row | `Σ_t m ℓ / (Σ_t m + 1e-8)` per row |
//! | `seq-mean-token-sum-norm` | `dp · Σ m ℓ / (N_seq · L)` | `Σ m ℓ / L` |

use serde::{Deserialize, Serialize};
#[cfg(feature = "tch")]
use tch::{Kind, Tensor};

use crate::error::{invalid, Result, RlvrCoreError};

/// Which reference's arithmetic to follow where this crate's default differs (see the module
/// docs and `crate::LossParams::compat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compat {
    /// This crate's definitions (default).
    #[default]
    Native,
    /// verl's `core_algos` arithmetic, so that a ported verl config gives verl's numbers.
    Verl,
}

/// How per-token losses are reduced to a scalar (verl `loss_agg_mode`). In a config:
/// `{"mode": "token-mean"}`, `{"mode": "seq-mean-token-sum-norm", "scale": 4096}`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Aggregation {
    /// Mean over all response tokens of the batch (verl default `token-mean`).
    #[default]
    TokenMean,
    /// Token sum per sequence, mean over sequences.
    SeqMeanTokenSum,
    /// Token mean per sequence, mean over sequences.
    SeqMeanTokenMean,
    /// Token sum per sequence divided by a constant length, mean over sequences.
    SeqMeanTokenSumNorm {
        /// The constant `L` (verl `loss_scale_factor`, Dr.GRPO's maximum response length);
        /// `None` uses the micro-batch's `T`, which is split-invariant only when every
        /// micro-batch is padded to the same `T`.
        #[serde(default)]
        scale: Option<f64>,
    },
}

/// The `mode` of every variant of [`Aggregation`], in the order of the variants.
const AGGREGATION_KINDS: [&str; 4] =
    ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"];

/// [`Aggregation`] externally tagged, for [`rl_core::de::internally_tagged`]: a variant without
/// fields refuses any key next to `mode`, and errors keep their paths.
#[derive(Deserialize)]
#[serde(remote = "Aggregation", rename_all = "kebab-case", deny_unknown_fields)]
#[allow(dead_code)] // read only by the derived deserializer
enum AggregationDe {
    TokenMean,
    SeqMeanTokenSum,
    SeqMeanTokenMean,
    SeqMeanTokenSumNorm {
        #[serde(default)]
        scale: Option<f64>,
    },
}

#[derive(Deserialize)]
struct AggregationTagged(#[serde(with = "AggregationDe")] Aggregation);

impl<'de> Deserialize<'de> for Aggregation {
    /// A table with `mode` and the variant's fields; any other key is an error naming it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(rl_core::de::internally_tagged::<D, AggregationTagged>(d, "mode", &AGGREGATION_KINDS)?.0)
    }
}

impl Aggregation {
    /// verl's name of the mode.
    pub fn name(&self) -> &'static str {
        match self {
            Self::TokenMean => "token-mean",
            Self::SeqMeanTokenSum => "seq-mean-token-sum",
            Self::SeqMeanTokenMean => "seq-mean-token-mean",
            Self::SeqMeanTokenSumNorm { .. } => "seq-mean-token-sum-norm",
        }
    }

    /// Checks `scale` (finite, > 0), naming it under `prefix`.
    ///
    /// # Errors
    /// [`RlvrCoreError::InvalidParameter`] for a non-positive or non-finite `scale`.
    pub fn validate_at(&self, prefix: &str) -> Result<()> {
        match self {
            Self::SeqMeanTokenSumNorm { scale: Some(s) } if !(s.is_finite() && *s > 0.0) => {
                Err(invalid(&format!("{prefix}.scale"), s, "must be finite and > 0"))
            }
            _ => Ok(()),
        }
    }

    /// The factor `c_i` of row `i` such that the aggregated loss is `Σ_{i,t} c_i m_{i,t} ℓ_{i,t}`:
    /// `row_tokens` is `Σ_t m_{i,t}`, `t` the padded length of the micro-batch. A row without
    /// response tokens gets 0.
    pub fn row_scale(&self, row_tokens: f64, t: usize, counts: &GlobalCounts, compat: Compat) -> f64 {
        let dp = counts.dp_size as f64;
        match (self, compat) {
            (Self::TokenMean, _) => dp / counts.tokens,
            (Self::SeqMeanTokenSum, _) => dp / counts.sequences,
            (Self::SeqMeanTokenMean, Compat::Native) => {
                if row_tokens > 0.0 {
                    dp / (counts.sequences * row_tokens)
                } else {
                    0.0
                }
            }
            (Self::SeqMeanTokenMean, Compat::Verl) => dp / (counts.sequences * (row_tokens + 1e-8)),
            (Self::SeqMeanTokenSumNorm { scale }, Compat::Native) => {
                dp / (counts.sequences * scale.unwrap_or(t as f64))
            }
            (Self::SeqMeanTokenSumNorm { scale }, Compat::Verl) => 1.0 / scale.unwrap_or(t as f64),
        }
    }

    /// The per-token weights `W` such that the aggregated loss is `Σ_{i,t} W_{i,t} ℓ_{i,t}`
    /// (computed without gradient, in `mask`'s float type; feature `tch`).
    ///
    /// # Errors
    /// [`RlvrCoreError::Shape`] for a mask that is not 2-D; libtorch failures.
    #[cfg(feature = "tch")]
    pub fn token_weights(&self, mask: &Tensor, counts: &GlobalCounts, compat: Compat) -> Result<Tensor> {
        let _g = tch::no_grad_guard();
        let s = mask.size();
        if s.len() != 2 {
            return Err(RlvrCoreError::Shape { what: "mask".into(), expected: "[B, T]".into(), got: s });
        }
        let m = float_mask(mask)?;
        let rows = Vec::<f64>::try_from(m.f_sum_dim_intlist(1, false, Kind::Double)?.f_to_device(tch::Device::Cpu)?)?;
        let scales: Vec<f64> = rows.iter().map(|&n| self.row_scale(n, s[1] as usize, counts, compat)).collect();
        let c = Tensor::from_slice(&scales).f_to_kind(m.kind())?.f_to_device(m.device())?.f_unsqueeze(1)?;
        Ok(m.f_mul(&c)?)
    }

    /// Aggregates a per-token loss `[B, T]` (differentiable) with these weights (feature `tch`).
    ///
    /// # Errors
    /// Shape mismatches and libtorch failures.
    #[cfg(feature = "tch")]
    pub fn aggregate(&self, loss_mat: &Tensor, mask: &Tensor, counts: &GlobalCounts, compat: Compat) -> Result<Tensor> {
        if loss_mat.size() != mask.size() {
            return Err(RlvrCoreError::Shape {
                what: "loss_mat".into(),
                expected: format!("{:?} like mask", mask.size()),
                got: loss_mat.size(),
            });
        }
        let w = self.token_weights(mask, counts, compat)?.f_to_kind(loss_mat.kind())?;
        Ok(loss_mat.f_flatten(0, -1)?.f_dot(&w.f_flatten(0, -1)?)?)
    }
}

/// The mask as a float tensor (bool and integer masks become 0/1 `f32`; float masks keep
/// their type).
#[cfg(feature = "tch")]
pub(crate) fn float_mask(mask: &Tensor) -> Result<Tensor> {
    Ok(if mask.is_floating_point() { mask.shallow_clone() } else { mask.f_to_kind(Kind::Float)? })
}

/// Whole-batch normalisation counts, required by every aggregation mode.
///
/// Build them once per optimiser step from the masks of *all* micro-batches (all-reduce the two
/// counts across ranks yourself in a distributed trainer) and pass the same value with every
/// micro-batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GlobalCounts {
    /// Response tokens in the whole batch (mask sum over all micro-batches and ranks).
    pub tokens: f64,
    /// Sequences with at least one response token in the whole batch.
    pub sequences: f64,
    /// Number of data-parallel ranks (1 without data parallelism).
    pub dp_size: usize,
}

impl GlobalCounts {
    /// Validated counts.
    ///
    /// # Errors
    /// [`RlvrCoreError::Counts`] unless `tokens > 0`, `sequences > 0` (finite) and
    /// `dp_size ≥ 1`.
    pub fn new(tokens: f64, sequences: f64, dp_size: usize) -> Result<Self> {
        let c = Self { tokens, sequences, dp_size };
        c.check()?;
        Ok(c)
    }

    /// Checks the counts.
    ///
    /// # Errors
    /// As [`GlobalCounts::new`].
    pub fn check(&self) -> Result<()> {
        if !(self.tokens.is_finite() && self.tokens > 0.0) {
            return Err(RlvrCoreError::Counts(format!(
                "tokens = {} must be finite and > 0 (all rows masked?)",
                self.tokens
            )));
        }
        if !(self.sequences.is_finite() && self.sequences > 0.0) {
            return Err(RlvrCoreError::Counts(format!("sequences = {} must be finite and > 0", self.sequences)));
        }
        if self.dp_size == 0 {
            return Err(RlvrCoreError::Counts("dp_size must be >= 1".into()));
        }
        Ok(())
    }

    /// Counts from the number of response tokens of every sequence of the whole batch.
    ///
    /// # Errors
    /// [`RlvrCoreError::Counts`] when every row is empty, or for non-finite or negative
    /// token counts.
    pub fn from_lengths<T: Copy + Into<f64>>(row_tokens: &[T], dp_size: usize) -> Result<Self> {
        let (mut tokens, mut sequences) = (0.0, 0.0);
        for &n in row_tokens {
            let n: f64 = n.into();
            if !(n.is_finite() && n >= 0.0) {
                return Err(RlvrCoreError::Counts(format!("row token count {n} must be finite and >= 0")));
            }
            tokens += n;
            sequences += f64::from(u8::from(n > 0.0));
        }
        Self::new(tokens, sequences, dp_size)
    }

    /// Counts over the masks of all micro-batches of one rank: pass the masks of every rank
    /// (or all-reduce the result) for data-parallel training (feature `tch`).
    ///
    /// # Errors
    /// [`RlvrCoreError::Empty`] for no masks; [`RlvrCoreError::Shape`] for a mask that is not
    /// 2-D; [`RlvrCoreError::Counts`] when every row is masked.
    #[cfg(feature = "tch")]
    pub fn from_masks(masks: &[&Tensor], dp_size: usize) -> Result<Self> {
        if masks.is_empty() {
            return Err(RlvrCoreError::Empty { what: "masks".into() });
        }
        let _g = tch::no_grad_guard();
        let (mut tokens, mut sequences) = (0.0, 0.0);
        for m in masks {
            let s = m.size();
            if s.len() != 2 {
                return Err(RlvrCoreError::Shape { what: "mask".into(), expected: "[B, T]".into(), got: s });
            }
            let f = float_mask(m)?.f_to_kind(Kind::Double)?;
            let rows = f.f_sum_dim_intlist(1, false, Kind::Double)?;
            tokens += f64::try_from(rows.f_sum(Kind::Double)?)?;
            sequences += f64::try_from(rows.f_gt(0.0)?.f_sum(Kind::Double)?)?;
        }
        Self::new(tokens, sequences, dp_size)
    }

    /// Counts of a single batch that is not split (`dp_size = 1`; feature `tch`).
    ///
    /// # Errors
    /// As [`GlobalCounts::from_masks`].
    #[cfg(feature = "tch")]
    pub fn local(mask: &Tensor) -> Result<Self> {
        Self::from_masks(&[mask], 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_scales_native_and_verl() {
        let c = GlobalCounts::new(10.0, 4.0, 2).unwrap();
        let n = Compat::Native;
        assert_eq!(Aggregation::TokenMean.row_scale(3.0, 8, &c, n), 0.2);
        assert_eq!(Aggregation::SeqMeanTokenSum.row_scale(3.0, 8, &c, n), 0.5);
        assert_eq!(Aggregation::SeqMeanTokenMean.row_scale(4.0, 8, &c, n), 0.125);
        assert_eq!(Aggregation::SeqMeanTokenMean.row_scale(0.0, 8, &c, n), 0.0);
        assert_eq!(Aggregation::SeqMeanTokenSumNorm { scale: None }.row_scale(3.0, 8, &c, n), 2.0 / 32.0);
        assert_eq!(Aggregation::SeqMeanTokenSumNorm { scale: Some(5.0) }.row_scale(3.0, 8, &c, n), 0.1);
        // verl: seq-mean-token-sum-norm divides by L alone; seq-mean-token-mean by len + 1e-8
        let v = Compat::Verl;
        assert_eq!(Aggregation::SeqMeanTokenSumNorm { scale: None }.row_scale(3.0, 8, &c, v), 0.125);
        assert_eq!(Aggregation::SeqMeanTokenSumNorm { scale: Some(5.0) }.row_scale(3.0, 8, &c, v), 0.2);
        assert_eq!(Aggregation::SeqMeanTokenMean.row_scale(4.0, 8, &c, v), 2.0 / (4.0 * (4.0 + 1e-8)));
        assert_eq!(Aggregation::TokenMean.row_scale(3.0, 8, &c, v), 0.2);
        assert_eq!(Aggregation::SeqMeanTokenSum.row_scale(3.0, 8, &c, v), 0.5);
    }

    #[test]
    fn counts_and_validation() {
        let c = GlobalCounts::from_lengths(&[3u32, 0, 2], 1).unwrap();
        assert_eq!((c.tokens, c.sequences, c.dp_size), (5.0, 2.0, 1));
        let c = GlobalCounts::from_lengths(&[0.5f64, 1.5], 3).unwrap();
        assert_eq!((c.tokens, c.sequences, c.dp_size), (2.0, 2.0, 3));
        assert!(matches!(GlobalCounts::from_lengths(&[0u32, 0], 1), Err(RlvrCoreError::Counts(_))));
        assert!(GlobalCounts::from_lengths(&[-1.0f64, 3.0], 1).is_err());
        assert!(GlobalCounts::from_lengths(&[f64::NAN], 1).is_err());
        assert!(GlobalCounts::new(1.0, 1.0, 0).is_err());
        assert!(GlobalCounts::new(1.0, 0.0, 1).is_err());
        assert!(GlobalCounts::new(0.0, 1.0, 1).is_err());
        assert!(GlobalCounts::new(1.0, f64::INFINITY, 1).is_err());
        assert!(GlobalCounts::new(1.0, 1.0, 1).is_ok());
        match (Aggregation::SeqMeanTokenSumNorm { scale: Some(0.0) }).validate_at("aggregation") {
            Err(RlvrCoreError::InvalidParameter { name, .. }) => assert_eq!(name, "aggregation.scale"),
            other => panic!("{other:?}"),
        }
        assert!(Aggregation::SeqMeanTokenSumNorm { scale: Some(f64::NAN) }.validate_at("a").is_err());
        assert!(Aggregation::SeqMeanTokenSumNorm { scale: None }.validate_at("a").is_ok());
        let names: Vec<_> = [
            Aggregation::TokenMean,
            Aggregation::SeqMeanTokenSum,
            Aggregation::SeqMeanTokenMean,
            Aggregation::SeqMeanTokenSumNorm { scale: None },
        ]
        .iter()
        .map(Aggregation::name)
        .collect();
        assert_eq!(names, ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]);
        let a: Aggregation = serde_json::from_str(r#"{"mode": "seq-mean-token-sum-norm"}"#).unwrap();
        assert_eq!(a, Aggregation::SeqMeanTokenSumNorm { scale: None });
        assert!(serde_json::from_str::<Aggregation>(r#"{"mode": "seq-mean-token-sum-norm", "scal": 3}"#).is_err());
    }
}
