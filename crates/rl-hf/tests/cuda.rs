//! CUDA test: `cargo test -p rl-hf --features cuda-tests` on a GPU machine. It fails (on
//! purpose) where CUDA is not usable, so it is off by default. Not yet run: no GPU was lent to
//! the session that wrote it.
#![cfg(feature = "cuda-tests")]

use std::collections::HashMap;
use std::path::PathBuf;

use rl_hf::{HfDtype, HfModel};
use tch::{Device, Kind, Tensor};

#[test]
fn fixtures_on_cuda_in_every_dtype() {
    assert!(tch::Cuda::is_available(), "no usable CUDA device");
    let dev = Device::Cuda(0);
    for name in ["qwen2_untied", "qwen3_bf16", "llama3"] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        let r: HashMap<String, Tensor> =
            Tensor::read_safetensors(dir.join("reference.safetensors")).unwrap().into_iter().collect();
        let mask = r["attention_mask"].ne(0).unsqueeze(-1).to_device(dev);
        for (dtype, tol) in [(HfDtype::F32, 1e-4), (HfDtype::Bf16, 0.25), (HfDtype::F16, 0.05)] {
            let m = HfModel::from_pretrained(&dir, dev, dtype).unwrap();
            let (ids, am) = (r["input_ids"].to_device(dev), r["attention_mask"].to_device(dev));
            let logits = tch::no_grad(|| m.forward(&ids, Some(&am), None)).unwrap().to_kind(Kind::Float);
            let d = (logits - r["logits"].to_device(dev)).abs();
            let diff = d.masked_select(&mask.expand_as(&d)).max().double_value(&[]);
            assert!(diff <= tol, "{name} {dtype:?}: {diff}");
            if dtype == HfDtype::F32 {
                let out = m.generate_greedy(&ids, &am, 24).unwrap().to_device(Device::Cpu);
                assert_eq!(out, r["generated"], "{name}");
            }
        }
    }
}
