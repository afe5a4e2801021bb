//! Runtime noise drawn from the component's own generator, then moved to the device.
//!
//! Exploration noise, reparameterised samples, dropout masks and token sampling all draw here
//! from a caller's `&mut impl Rng` (never from libtorch's process-wide generator, see
//! `docs/conventions.md` §3), so a run is reproducible from its seed in any thread and a
//! checkpointed generator resumes the same stream.
//!
//! The values are drawn on the host and copied to the device: exact and portable, and fast
//! enough for the sizes of RL noise (a `[256, 6]` action batch, a `[B, 1]` uniform per token).
//! Uniform draws use the top 53 bits of one `u64` per value; normal draws use
//! `rand_distr::StandardNormal`.
//!
//! ```
//! use rl_nn::rand;
//! use tch::{Device, Kind, Tensor};
//! let mut rng = rl_core::rng_from_seed(0);
//! let opts = (Kind::Float, Device::Cpu);
//! let eps = rand::standard_normal(&[4, 2], opts, &mut rng)?; // reparameterisation noise
//! let mask = rand::bernoulli(&[4, 2], 0.9, opts, &mut rng)?;
//! let logits = Tensor::from_slice(&[0.0f32, 1.0, f32::NEG_INFINITY]).view([1, 3]);
//! let token = rand::categorical(&logits, &mut rng)?; // never index 2
//! assert_eq!(token.size(), [1]);
//! # let _ = (eps, mask);
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```

use ::rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use tch::{Device, Kind, Tensor};

use crate::check;
use crate::error::{Result, RlNnError};
use crate::init::{check_opts, from_values, uniform_value, unit};

fn count(shape: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| RlNnError::Shape {
            what: "random tensor".into(),
            expected: "non-negative dimensions".into(),
            got: shape.to_vec(),
        })?;
        n = n.saturating_mul(d);
    }
    Ok(n)
}

/// Checks kind and device before anything is drawn, so a failed call consumes no randomness.
fn precheck(shape: &[i64], opts: (Kind, Device)) -> Result<usize> {
    check_opts(opts)?;
    count(shape)
}

fn prob(name: &str, p: f64, hi_inclusive: bool) -> Result<()> {
    let ok = p.is_finite() && p >= 0.0 && if hi_inclusive { p <= 1.0 } else { p < 1.0 };
    if ok {
        Ok(())
    } else {
        let range = if hi_inclusive { "[0, 1]" } else { "[0, 1)" };
        Err(RlNnError::invalid(name, p, format!("must lie in {range}")))
    }
}

/// `N(0, 1)` values of `shape`.
///
/// # Errors
/// [`RlNnError::Kind`] for a non-floating kind, [`RlNnError::DeviceUnavailable`],
/// [`RlNnError::Shape`] for a negative dimension.
pub fn standard_normal<R: Rng + ?Sized>(shape: &[i64], opts: (Kind, Device), rng: &mut R) -> Result<Tensor> {
    normal(shape, 0.0, 1.0, opts, rng)
}

/// `N(mean, std²)` values of `shape`.
///
/// # Errors
/// As [`standard_normal`]; [`RlNnError::InvalidParameter`] for a non-finite mean or a negative
/// or non-finite `std`.
pub fn normal<R: Rng + ?Sized>(
    shape: &[i64],
    mean: f64,
    std: f64,
    opts: (Kind, Device),
    rng: &mut R,
) -> Result<Tensor> {
    if !mean.is_finite() {
        return Err(RlNnError::invalid("mean", mean, "must be finite"));
    }
    if !(std.is_finite() && std >= 0.0) {
        return Err(RlNnError::invalid("std", std, "must be finite and >= 0"));
    }
    let n = precheck(shape, opts)?;
    let v: Vec<f64> = (0..n)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            mean + std * z
        })
        .collect();
    from_values(&v, shape, opts)
}

/// `U(lo, hi)` values of `shape` (`lo <= hi`).
///
/// # Errors
/// As [`standard_normal`]; [`RlNnError::InvalidParameter`] for non-finite bounds or `lo > hi`.
pub fn uniform<R: Rng + ?Sized>(shape: &[i64], lo: f64, hi: f64, opts: (Kind, Device), rng: &mut R) -> Result<Tensor> {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return Err(RlNnError::invalid("hi", hi, format!("bounds must be finite with lo = {lo} <= hi")));
    }
    let n = precheck(shape, opts)?;
    let v: Vec<f64> = (0..n).map(|_| uniform_value(lo, hi, rng)).collect();
    from_values(&v, shape, opts)
}

/// `1` with probability `p`, else `0`, as floating values of `shape`.
///
/// # Errors
/// As [`standard_normal`]; [`RlNnError::InvalidParameter`] for `p` outside `[0, 1]`.
pub fn bernoulli<R: Rng + ?Sized>(shape: &[i64], p: f64, opts: (Kind, Device), rng: &mut R) -> Result<Tensor> {
    prob("p", p, true)?;
    let n = precheck(shape, opts)?;
    let v: Vec<f64> = (0..n).map(|_| if unit(rng) < p { 1.0 } else { 0.0 }).collect();
    from_values(&v, shape, opts)
}

/// An inverted-dropout mask: `1/(1−p)` with probability `1−p`, else `0` (PyTorch's
/// `nn.Dropout` scaling, so the expectation is 1).
///
/// # Errors
/// As [`standard_normal`]; [`RlNnError::InvalidParameter`] for `p` outside `[0, 1)`.
pub fn dropout_mask<R: Rng + ?Sized>(shape: &[i64], p: f64, opts: (Kind, Device), rng: &mut R) -> Result<Tensor> {
    prob("p", p, false)?;
    let n = precheck(shape, opts)?;
    let keep = 1.0 / (1.0 - p);
    let v: Vec<f64> = (0..n).map(|_| if unit(rng) < p { 0.0 } else { keep }).collect();
    from_values(&v, shape, opts)
}

/// Inverted dropout of `x` (any floating kind, any device) with drop probability `p`; the
/// identity when `!train` or `p == 0` (nothing is drawn then).
///
/// # Errors
/// [`RlNnError::InvalidParameter`] for `p` outside `[0, 1)`, [`RlNnError::Kind`] for a
/// non-floating `x`.
pub fn dropout<R: Rng + ?Sized>(x: &Tensor, p: f64, train: bool, rng: &mut R) -> Result<Tensor> {
    prob("p", p, false)?;
    check::floating("dropout input", x)?;
    if !train || p == 0.0 {
        return Ok(x.shallow_clone());
    }
    let mask = dropout_mask(&x.size(), p, (x.f_kind()?, x.device()), rng)?;
    Ok(x.f_mul(&mask)?)
}

/// One draw per row from the categorical distribution `softmax(logits)` over the last
/// dimension: `logits` `[..., K]` gives int64 indices `[...]` on the same device.
///
/// Inverse CDF on the device with one uniform per row from `rng`: the index is the first whose
/// cumulative probability reaches `u·total`, `u ∈ (0, 1]`, so a category with zero probability
/// (logit `-inf`) is never drawn.
///
/// # Errors
/// [`RlNnError::Shape`] for a rank-0 tensor or `K == 0`, [`RlNnError::Kind`] for non-floating
/// logits, [`RlNnError::NonFinite`] for a NaN or `+inf` logit or a row whose logits are all
/// `-inf`.
pub fn categorical<R: Rng + ?Sized>(logits: &Tensor, rng: &mut R) -> Result<Tensor> {
    check::floating("logits", logits)?;
    let size = logits.size();
    let k = match size.last() {
        Some(&k) if k > 0 => k,
        _ => {
            return Err(RlNnError::Shape { what: "logits".into(), expected: "[..., K] with K >= 1".into(), got: size })
        }
    };
    let rows = count(&size[..size.len() - 1])?;
    let flat = logits.f_detach()?.f_to_kind(Kind::Double)?.f_reshape([rows as i64, k])?;
    if rows == 0 {
        return Ok(Tensor::f_zeros(&size[..size.len() - 1], (Kind::Int64, logits.device()))?);
    }
    let nan_or_pos_inf = flat.f_isnan()?.f_logical_or(&flat.f_isposinf()?)?;
    let bad_row_all_neg_inf = flat.f_isneginf()?.f_all_dim(1, false)?;
    let any_bad = nan_or_pos_inf.f_any()?.f_logical_or(&bad_row_all_neg_inf.f_any()?)?;
    if bool::try_from(&any_bad)? {
        // locate the first bad value for the message (host copy only on this error path)
        let v = Vec::<f64>::try_from(&flat.f_to_device(Device::Cpu)?.f_contiguous()?.f_view([-1])?)?;
        let index = v
            .iter()
            .position(|x| x.is_nan() || *x == f64::INFINITY)
            .or_else(|| {
                v.chunks(k as usize).position(|r| r.iter().all(|x| *x == f64::NEG_INFINITY)).map(|r| r * k as usize)
            })
            .unwrap_or(0);
        return Err(RlNnError::NonFinite {
            what: "logits".into(),
            index,
            value: v.get(index).copied().unwrap_or(f64::NAN),
        });
    }
    let probs = flat.f_softmax(-1, Kind::Double)?;
    let cdf = probs.f_cumsum(-1, Kind::Double)?;
    let total = cdf.f_narrow(1, k - 1, 1)?;
    let u: Vec<f64> = (0..rows).map(|_| 1.0 - unit(rng)).collect();
    let u = Tensor::f_from_slice(&u)?.f_to_device(logits.device())?.f_view([rows as i64, 1])?;
    let idx = cdf.f_lt_tensor(&u.f_mul(&total)?)?.f_sum_dim_intlist(-1, false, Kind::Int64)?.f_clamp_max(k - 1)?;
    Ok(idx.f_reshape(&size[..size.len() - 1])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPU: (Kind, Device) = (Kind::Float, Device::Cpu);

    #[test]
    fn same_seed_same_noise_and_moments() {
        let a = standard_normal(&[3, 4], CPU, &mut rl_core::rng_from_seed(5)).unwrap();
        let b = standard_normal(&[3, 4], CPU, &mut rl_core::rng_from_seed(5)).unwrap();
        let c = standard_normal(&[3, 4], CPU, &mut rl_core::rng_from_seed(6)).unwrap();
        assert!(a.equal(&b) && !a.equal(&c));
        let mut rng = rl_core::rng_from_seed(1);
        let x = normal(&[20_000], 2.0, 3.0, (Kind::Double, Device::Cpu), &mut rng).unwrap();
        assert!((x.mean(Kind::Double).double_value(&[]) - 2.0).abs() < 0.06);
        assert!((x.std(true).double_value(&[]) - 3.0).abs() < 0.06);
        let u = uniform(&[1000], -1.0, 3.0, CPU, &mut rng).unwrap();
        assert!(u.min().double_value(&[]) >= -1.0 && u.max().double_value(&[]) < 3.0);
        let m = bernoulli(&[10_000], 0.3, CPU, &mut rng).unwrap();
        assert!((m.mean(Kind::Double).double_value(&[]) - 0.3).abs() < 0.02);
        let d = dropout_mask(&[10_000], 0.25, CPU, &mut rng).unwrap();
        assert!((d.mean(Kind::Double).double_value(&[]) - 1.0).abs() < 0.03);
        let vals = Vec::<f32>::try_from(&d).unwrap();
        assert!(vals.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
    }

    #[test]
    fn probability_edges() {
        let mut rng = rl_core::rng_from_seed(9);
        let ones = bernoulli(&[50], 1.0, CPU, &mut rng).unwrap();
        assert_eq!(ones.sum(Kind::Double).double_value(&[]), 50.0);
        let zeros = bernoulli(&[50], 0.0, CPU, &mut rng).unwrap();
        assert_eq!(zeros.sum(Kind::Double).double_value(&[]), 0.0);
        let keep = dropout_mask(&[50], 0.0, CPU, &mut rng).unwrap();
        assert_eq!(keep.sum(Kind::Double).double_value(&[]), 50.0);
        assert!(dropout_mask(&[5], -0.1, CPU, &mut rng).is_err());
        assert!(bernoulli(&[5], f64::NAN, CPU, &mut rng).is_err());
        let same = uniform(&[4], 2.0, 2.0, CPU, &mut rng).unwrap();
        assert_eq!(Vec::<f32>::try_from(&same).unwrap(), vec![2.0; 4]);
        let c = normal(&[3], 5.0, 0.0, (Kind::Double, Device::Cpu), &mut rng).unwrap();
        assert_eq!(Vec::<f64>::try_from(&c).unwrap(), vec![5.0; 3]);
        assert!(
            matches!(normal(&[2], f64::NAN, 1.0, CPU, &mut rng), Err(RlNnError::InvalidParameter { ref name, .. }) if name == "mean")
        );
        assert!(
            matches!(normal(&[2], 0.0, f64::INFINITY, CPU, &mut rng), Err(RlNnError::InvalidParameter { ref name, .. }) if name == "std")
        );
        assert!(uniform(&[2], f64::NEG_INFINITY, 0.0, CPU, &mut rng).is_err());
        assert!(uniform(&[2], 0.0, f64::NAN, CPU, &mut rng).is_err());
        // with p = 0 dropout draws nothing and returns the input
        let before = rng.clone();
        let x = Tensor::ones([2, 2], CPU);
        assert!(dropout(&x, 0.0, true, &mut rng).unwrap().equal(&x));
        assert_eq!(before, rng);
        // a one-hot row always yields its index; rank-1 logits give a rank-0 draw
        let one_hot = Tensor::from_slice(&[f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0]);
        for _ in 0..20 {
            let t = categorical(&one_hot, &mut rng).unwrap();
            assert_eq!((t.size(), t.int64_value(&[])), (vec![], 2));
        }
        let first = Tensor::from_slice(&[0.0f32, f32::NEG_INFINITY]).view([1, 2]);
        for _ in 0..20 {
            assert_eq!(categorical(&first, &mut rng).unwrap().int64_value(&[0]), 0);
        }
        let pos_inf = Tensor::from_slice(&[0.0f32, 1.0, 2.0, f32::INFINITY]).view([2, 2]);
        assert!(matches!(categorical(&pos_inf, &mut rng), Err(RlNnError::NonFinite { index: 3, .. })));
        assert!(matches!(categorical(&Tensor::from_slice(&[1i64, 2]), &mut rng), Err(RlNnError::Kind { .. })));
    }

    #[test]
    fn dropout_is_identity_in_eval_and_scales_in_train() {
        let mut rng = rl_core::rng_from_seed(2);
        let x = Tensor::ones([4, 5], CPU);
        let before = rng.clone();
        assert!(dropout(&x, 0.5, false, &mut rng).unwrap().equal(&x));
        assert_eq!(before, rng, "eval mode draws nothing");
        let y = dropout(&x, 0.5, true, &mut rng).unwrap();
        let v = Vec::<f32>::try_from(&y.view([-1])).unwrap();
        assert!(v.iter().all(|&a| a == 0.0 || a == 2.0) && v.contains(&0.0) && v.contains(&2.0));
        assert!(dropout(&x, 1.0, true, &mut rng).is_err());
        assert!(dropout(&Tensor::from_slice(&[1i64]), 0.1, true, &mut rng).is_err());
    }

    #[test]
    fn categorical_follows_the_probabilities_and_never_draws_masked() {
        let mut rng = rl_core::rng_from_seed(3);
        let logits = Tensor::from_slice(&[0.5f32.ln(), 0.3f32.ln(), f32::NEG_INFINITY, 0.2f32.ln()]).view([1, 4]);
        let logits = logits.expand([20_000, 4], false);
        let draws = Vec::<i64>::try_from(&categorical(&logits, &mut rng).unwrap()).unwrap();
        let freq = |c: i64| draws.iter().filter(|&&d| d == c).count() as f64 / draws.len() as f64;
        assert_eq!(freq(2), 0.0);
        assert!((freq(0) - 0.5).abs() < 0.015 && (freq(1) - 0.3).abs() < 0.015 && (freq(3) - 0.2).abs() < 0.015);
        // shapes: [2, 3, K] -> [2, 3]
        let l = Tensor::zeros([2, 3, 5], CPU);
        assert_eq!(categorical(&l, &mut rng).unwrap().size(), [2, 3]);
        assert_eq!(categorical(&Tensor::zeros([0, 5], CPU), &mut rng).unwrap().size(), [0]);
    }

    #[test]
    fn bad_input_is_a_typed_error_and_draws_nothing() {
        let mut rng = rl_core::rng_from_seed(4);
        let before = rng.clone();
        assert!(matches!(normal(&[2], 0.0, -1.0, CPU, &mut rng), Err(RlNnError::InvalidParameter { .. })));
        assert!(matches!(uniform(&[2], 1.0, 0.0, CPU, &mut rng), Err(RlNnError::InvalidParameter { .. })));
        assert!(matches!(bernoulli(&[2], 1.5, CPU, &mut rng), Err(RlNnError::InvalidParameter { .. })));
        assert!(matches!(standard_normal(&[2], (Kind::Int64, Device::Cpu), &mut rng), Err(RlNnError::Kind { .. })));
        assert!(matches!(
            standard_normal(&[2], (Kind::Float, Device::Cuda(63)), &mut rng),
            Err(RlNnError::DeviceUnavailable(_))
        ));
        assert!(matches!(standard_normal(&[-2], CPU, &mut rng), Err(RlNnError::Shape { .. })));
        let nan = Tensor::from_slice(&[0.0f32, f32::NAN]).view([1, 2]);
        assert!(matches!(categorical(&nan, &mut rng), Err(RlNnError::NonFinite { index: 1, .. })));
        let masked = Tensor::from_slice(&[0.0f32, 1.0, f32::NEG_INFINITY, f32::NEG_INFINITY]).view([2, 2]);
        assert!(matches!(categorical(&masked, &mut rng), Err(RlNnError::NonFinite { index: 2, .. })));
        assert!(matches!(categorical(&Tensor::zeros([3, 0], CPU), &mut rng), Err(RlNnError::Shape { .. })));
        assert!(matches!(categorical(&Tensor::from(1.0f32), &mut rng), Err(RlNnError::Shape { .. })));
        assert_eq!(before, rng);
    }
}
