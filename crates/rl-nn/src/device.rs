//! Device choice: CUDA when available, overridable by the `FRUGAL_DEVICE` environment variable.

use tch::Device;

use crate::error::{Result, RlNnError};

/// The environment variable read by [`default_device`]: `auto` (default), `cpu`, `cuda`, `cuda:N`.
pub const DEVICE_ENV: &str = "FRUGAL_DEVICE";

/// Parses a device name: `auto` (CUDA if available, else CPU), `cpu`, `cuda` (= `cuda:0`), `cuda:N`.
///
/// # Errors
/// [`RlNnError::BadDeviceName`] for an unknown name, [`RlNnError::DeviceUnavailable`] when a CUDA
/// device is named and this machine has no such device.
pub fn parse_device(name: &str) -> Result<Device> {
    let n = name.trim().to_ascii_lowercase();
    let dev = match n.as_str() {
        "" | "auto" => return Ok(Device::cuda_if_available()),
        "cpu" => Device::Cpu,
        "cuda" | "gpu" => Device::Cuda(0),
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(i)) => Device::Cuda(i),
            _ => return Err(RlNnError::BadDeviceName(name.to_owned())),
        },
    };
    if let Device::Cuda(i) = dev {
        if !tch::Cuda::is_available() || i >= tch::Cuda::device_count().max(0) as usize {
            return Err(RlNnError::DeviceUnavailable(name.to_owned()));
        }
    }
    Ok(dev)
}

/// The device named by `FRUGAL_DEVICE`, or CUDA when available, else CPU.
///
/// # Errors
/// As [`parse_device`] when `FRUGAL_DEVICE` is set to something unusable: an explicit request is
/// never silently downgraded.
pub fn default_device() -> Result<Device> {
    match std::env::var(DEVICE_ENV) {
        Ok(v) => parse_device(&v),
        Err(_) => Ok(Device::cuda_if_available()),
    }
}

/// A short human-readable name (`cpu`, `cuda:0`).
pub fn device_name(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Mps => "mps".into(),
        Device::Vulkan => "vulkan".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names() {
        assert_eq!(parse_device("cpu").unwrap(), Device::Cpu);
        assert_eq!(parse_device("CPU").unwrap(), Device::Cpu);
        assert!(matches!(parse_device("tpu"), Err(RlNnError::BadDeviceName(_))));
        assert!(matches!(parse_device("cuda:x"), Err(RlNnError::BadDeviceName(_))));
        let auto = parse_device("auto").unwrap();
        if tch::Cuda::is_available() {
            assert!(auto.is_cuda());
        } else {
            assert_eq!(auto, Device::Cpu);
            assert!(matches!(parse_device("cuda"), Err(RlNnError::DeviceUnavailable(_))));
        }
        assert_eq!(device_name(Device::Cuda(1)), "cuda:1");
    }
}
