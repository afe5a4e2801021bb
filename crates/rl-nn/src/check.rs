//! Checks on caller tensors, run before any libtorch op so that bad input is a typed error and
//! never a panic or an exception inside libtorch.
//!
//! Every model of frugal-rl checks its inputs with these helpers: rank and every dimension
//! ([`shape`]), element kind ([`kind`], [`floating`]), device ([`device`]) and device
//! availability ([`available`]).
//!
//! ```
//! use rl_nn::check;
//! use tch::{Device, Kind, Tensor};
//! let x = Tensor::zeros([4, 3], (Kind::Float, Device::Cpu));
//! check::shape("obs", &x, &[None, Some(3)])?;
//! check::kind("obs", &x, Kind::Float)?;
//! check::device("obs", &x, Device::Cpu)?;
//! assert!(check::shape("obs", &x, &[None, Some(5)]).is_err());
//! # Ok::<(), rl_nn::RlNnError>(())
//! ```

use tch::{Device, Kind, Tensor};

use crate::device::device_name;
use crate::error::{Result, RlNnError};

/// Errors with [`RlNnError::DeviceUnavailable`] unless `device` can hold tensors on this
/// machine (CPU always can; `cuda:N` needs a visible GPU `N`).
///
/// # Errors
/// [`RlNnError::DeviceUnavailable`].
pub fn available(device: Device) -> Result<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => {
            if tch::Cuda::is_available() && i < tch::Cuda::device_count().max(0) as usize {
                Ok(())
            } else {
                Err(RlNnError::DeviceUnavailable(device_name(device)))
            }
        }
        Device::Mps => {
            if tch::utils::has_mps() {
                Ok(())
            } else {
                Err(RlNnError::DeviceUnavailable(device_name(device)))
            }
        }
        Device::Vulkan => {
            if tch::utils::has_vulkan() {
                Ok(())
            } else {
                Err(RlNnError::DeviceUnavailable(device_name(device)))
            }
        }
    }
}

/// Checks that `t` is defined and has `dims.len()` dimensions, each equal to `dims[i]` where
/// that is `Some`.
///
/// # Errors
/// [`RlNnError::Shape`] naming `what`, the expected pattern (`[B, 3]`) and the shape passed.
pub fn shape(what: &str, t: &Tensor, dims: &[Option<i64>]) -> Result<()> {
    let got = defined(what, t)?.size();
    let ok = got.len() == dims.len() && got.iter().zip(dims).all(|(g, d)| d.is_none_or(|d| *g == d));
    if ok {
        Ok(())
    } else {
        Err(RlNnError::Shape { what: what.into(), expected: pattern(dims), got })
    }
}

/// `[B, 3]`-style description of a shape pattern (`None` prints as `_`).
pub fn pattern(dims: &[Option<i64>]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.map_or_else(|| "_".to_string(), |d| d.to_string())).collect();
    format!("[{}]", parts.join(", "))
}

/// Checks that `t` has element kind `expected`.
///
/// # Errors
/// [`RlNnError::Kind`].
pub fn kind(what: &str, t: &Tensor, expected: Kind) -> Result<()> {
    let got = defined(what, t)?.f_kind()?;
    if got == expected {
        Ok(())
    } else {
        Err(RlNnError::Kind { what: what.into(), expected: format!("{expected:?}"), got: format!("{got:?}") })
    }
}

/// Checks that `t` holds floating-point values (`f16`, `bf16`, `f32`, `f64`).
///
/// # Errors
/// [`RlNnError::Kind`].
pub fn floating(what: &str, t: &Tensor) -> Result<()> {
    let got = defined(what, t)?.f_kind()?;
    if is_float(got) {
        Ok(())
    } else {
        Err(RlNnError::Kind { what: what.into(), expected: "a floating-point kind".into(), got: format!("{got:?}") })
    }
}

/// Whether `k` is a floating-point kind this crate computes in.
pub fn is_float(k: Kind) -> bool {
    matches!(k, Kind::Half | Kind::BFloat16 | Kind::Float | Kind::Double)
}

/// Checks that `t` lives on `expected`.
///
/// # Errors
/// [`RlNnError::Device`].
pub fn device(what: &str, t: &Tensor, expected: Device) -> Result<()> {
    let got = defined(what, t)?.device();
    if got == expected {
        Ok(())
    } else {
        Err(RlNnError::Device { what: what.into(), expected: device_name(expected), got: device_name(got) })
    }
}

/// Checks that every value of `t` is finite, naming the first offending flat index. Copies
/// the tensor to the host, so keep it to small tensors or debugging.
///
/// # Errors
/// [`RlNnError::NonFinite`].
pub fn finite(what: &str, t: &Tensor) -> Result<()> {
    floating(what, t)?;
    let flat = t.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?.f_contiguous()?.f_view([-1])?;
    let v = Vec::<f64>::try_from(&flat)?;
    match v.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(RlNnError::NonFinite { what: what.into(), index, value: v[index] }),
        None => Ok(()),
    }
}

fn defined<'a>(what: &str, t: &'a Tensor) -> Result<&'a Tensor> {
    if t.defined() {
        Ok(t)
    } else {
        Err(RlNnError::Empty { what: format!("{what} (undefined tensor)") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_names_the_problem() {
        let x = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        shape("x", &x, &[Some(2), None]).unwrap();
        assert!(matches!(shape("x", &x, &[Some(2)]), Err(RlNnError::Shape { .. })));
        assert!(
            matches!(shape("x", &x, &[Some(3), Some(3)]), Err(RlNnError::Shape { ref expected, .. }) if expected == "[3, 3]")
        );
        assert!(
            matches!(shape("x", &x, &[None, Some(4)]), Err(RlNnError::Shape { ref expected, .. }) if expected == "[_, 4]")
        );
        kind("x", &x, Kind::Float).unwrap();
        assert!(matches!(kind("x", &x, Kind::Double), Err(RlNnError::Kind { .. })));
        floating("x", &x).unwrap();
        for k in [Kind::Half, Kind::BFloat16, Kind::Double] {
            floating("k", &Tensor::zeros([1], (k, Device::Cpu))).unwrap();
        }
        assert!(!is_float(Kind::Int) && is_float(Kind::BFloat16));
        assert!(floating("i", &Tensor::from_slice(&[1i64])).is_err());
        device("x", &x, Device::Cpu).unwrap();
        assert!(matches!(device("x", &x, Device::Cuda(0)), Err(RlNnError::Device { .. })));
        available(Device::Cpu).unwrap();
        assert!(matches!(available(Device::Cuda(99)), Err(RlNnError::DeviceUnavailable(_))));
        finite("x", &x).unwrap();
        let bad = Tensor::from_slice(&[1.0f32, f32::NAN, 2.0]);
        assert!(matches!(finite("b", &bad), Err(RlNnError::NonFinite { index: 1, .. })));
        let inf = Tensor::from_slice(&[1.0f64, 2.0, f64::NEG_INFINITY]);
        assert!(
            matches!(finite("b", &inf), Err(RlNnError::NonFinite { index: 2, value, .. }) if value == f64::NEG_INFINITY)
        );
        assert!(finite("i", &Tensor::from_slice(&[1i64])).is_err());
        let undefined = Tensor::new();
        assert!(matches!(shape("u", &undefined, &[]), Err(RlNnError::Empty { .. })));
    }
}
