//! `Advantages::to_tensor` on a device that is not there is a typed error, not a panic inside
//! libtorch (issue 11, "checked APIs").
#![cfg(feature = "tch")]
use rlvr_core::{AdvantageConfig, AdvantageParams, Groups, Params, RlvrCoreError};
use tch::{Device, Kind};

#[test]
fn to_tensor_checks_the_device() -> Result<(), RlvrCoreError> {
    let groups = Groups::uniform(1, 4)?;
    let adv = AdvantageConfig::new(AdvantageParams::default().check()?).compute(&[1., 0., 0., 1.], &groups, None)?;
    let t = adv.to_tensor(Device::Cpu)?;
    assert_eq!((t.size(), t.kind()), (vec![4], Kind::Float));
    assert_eq!(
        Vec::<f32>::try_from(&t).map_err(RlvrCoreError::from)?,
        adv.values.iter().map(|&a| a as f32).collect::<Vec<_>>()
    );
    if !tch::Cuda::is_available() {
        assert!(matches!(adv.to_tensor(Device::Cuda(0)), Err(RlvrCoreError::Torch(_))));
    }
    assert!(matches!(adv.to_tensor(Device::Cuda(63)), Err(RlvrCoreError::Torch(_))));
    Ok(())
}
