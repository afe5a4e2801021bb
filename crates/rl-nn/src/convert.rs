//! Conversions between `tch::Tensor` and `ndarray` arrays (f32, on CPU).

use ndarray::{Array1, Array2, ArrayBase, ArrayD, Data, Dimension, IxDyn};
use tch::{Device, Kind, Tensor};

use crate::error::{Result, RlNnError};

/// Copies an array into a new CPU `f32` tensor of the same shape (any memory layout).
///
/// # Errors
/// A libtorch failure.
pub fn array_to_tensor<S, D>(a: &ArrayBase<S, D>) -> Result<Tensor>
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    let std = a.as_standard_layout();
    let shape: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
    let slice = std.as_slice().ok_or_else(|| RlNnError::Shape {
        what: "array".into(),
        expected: "a standard-layout array".into(),
        got: shape.clone(),
    })?;
    Ok(Tensor::f_from_slice(slice)?.f_reshape(shape)?)
}

/// Copies an array into a new `f32` tensor of the same shape on `device`.
///
/// # Errors
/// [`RlNnError::DeviceUnavailable`] when `device` is not present (checked before any libtorch
/// op); libtorch failures.
pub fn array_to_tensor_on<S, D>(a: &ArrayBase<S, D>, device: Device) -> Result<Tensor>
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    crate::check::available(device)?;
    Ok(array_to_tensor(a)?.f_to_device(device)?)
}

/// Moves `t` to `device`, checking first that the device exists (a plain `to_device` panics
/// inside libtorch when it does not).
///
/// # Errors
/// [`RlNnError::DeviceUnavailable`]; libtorch failures.
pub fn to_device(t: &Tensor, device: Device) -> Result<Tensor> {
    crate::check::available(device)?;
    Ok(t.f_to_device(device)?)
}

/// Copies a tensor (any kind, any device) into an `f32` array of the same shape.
///
/// # Errors
/// A libtorch failure.
pub fn tensor_to_array(t: &Tensor) -> Result<ArrayD<f32>> {
    let t = t.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
    let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
    let n = t.numel();
    let mut data = vec![0f32; n];
    t.f_copy_data(&mut data, n)?;
    ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| RlNnError::Shape {
        what: "tensor".into(),
        expected: e.to_string(),
        got: t.size(),
    })
}

/// Copies a rank-1 tensor into an [`Array1`].
///
/// # Errors
/// [`RlNnError::Shape`] if the tensor is not rank 1.
pub fn tensor_to_array1(t: &Tensor) -> Result<Array1<f32>> {
    let size = t.size();
    if size.len() != 1 {
        return Err(RlNnError::Shape { what: "tensor".into(), expected: "[N]".into(), got: size });
    }
    tensor_to_array(t)?.into_dimensionality().map_err(|e| RlNnError::Shape {
        what: "tensor".into(),
        expected: e.to_string(),
        got: size,
    })
}

/// Copies a rank-2 tensor into an [`Array2`].
///
/// # Errors
/// [`RlNnError::Shape`] if the tensor is not rank 2.
pub fn tensor_to_array2(t: &Tensor) -> Result<Array2<f32>> {
    let size = t.size();
    if size.len() != 2 {
        return Err(RlNnError::Shape { what: "tensor".into(), expected: "[N, M]".into(), got: size });
    }
    tensor_to_array(t)?.into_dimensionality().map_err(|e| RlNnError::Shape {
        what: "tensor".into(),
        expected: e.to_string(),
        got: size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array3};

    #[test]
    fn roundtrips_including_transposed_views() {
        let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let t = array_to_tensor(&a).unwrap();
        assert_eq!(t.size(), vec![2, 3]);
        assert_eq!(tensor_to_array2(&t).unwrap(), a);
        let tt = array_to_tensor(&a.t()).unwrap();
        assert_eq!(tensor_to_array2(&tt).unwrap(), a.t().to_owned());
        let v = array![1.0f32, -2.0];
        assert_eq!(tensor_to_array1(&array_to_tensor(&v).unwrap()).unwrap(), v);
        assert!(tensor_to_array1(&t).is_err());
        assert!(tensor_to_array2(&array_to_tensor(&v).unwrap()).is_err());
        let cube = Array3::<f32>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 12 + j * 4 + k) as f32);
        assert_eq!(tensor_to_array(&array_to_tensor(&cube).unwrap()).unwrap(), cube.into_dyn());
        // kinds are converted
        let d = Tensor::from_slice(&[1.5f64, 2.5]);
        assert_eq!(tensor_to_array1(&d).unwrap(), array![1.5f32, 2.5]);
        assert!(array_to_tensor_on(&v, Device::Cpu).unwrap().equal(&array_to_tensor(&v).unwrap()));
        assert!(matches!(array_to_tensor_on(&v, Device::Cuda(63)), Err(RlNnError::DeviceUnavailable(_))));
        assert!(matches!(to_device(&d, Device::Cuda(63)), Err(RlNnError::DeviceUnavailable(_))));
    }
}
