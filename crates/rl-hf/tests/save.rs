//! `save_pretrained` round trips: single file, shards with an index, reduced precision.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rl_core::Params;
use rl_hf::{HfDtype, HfError, HfModel, Rope, SaveParams, INDEX_FILE, WEIGHTS_FILE};
use tch::{Device, Tensor};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn logits(m: &HfModel, name: &str) -> Tensor {
    let r: BTreeMap<String, Tensor> =
        Tensor::read_safetensors(fixture(name).join("reference.safetensors")).unwrap().into_iter().collect();
    tch::no_grad(|| m.forward(&r["input_ids"], Some(&r["attention_mask"]), None)).unwrap()
}

#[test]
fn save_then_load_gives_identical_logits() {
    for name in ["qwen2_tied", "qwen3", "llama3_v4"] {
        let m = HfModel::from_pretrained(fixture(name), Device::Cpu, HfDtype::F32).unwrap();
        let out = tempfile::tempdir().unwrap();
        let files = m.save_pretrained(out.path(), &SaveParams::default().check().unwrap()).unwrap();
        assert_eq!(files, [out.path().join(WEIGHTS_FILE)]);
        // `RL_HF_KEEP_SAVED=DIR` keeps a copy for `scripts/hf_fixtures.py --check-saved DIR`
        // (transformers loads what we wrote and compares its logits to the reference).
        if let Some(keep) = std::env::var_os("RL_HF_KEEP_SAVED") {
            let sharded = PathBuf::from(&keep).join(format!("{name}_sharded"));
            m.save_pretrained(&sharded, &SaveParams::default().max_shard_bytes(30_000).check().unwrap()).unwrap();
            m.save_pretrained(PathBuf::from(keep).join(name), &SaveParams::default().check().unwrap()).unwrap();
        }
        let back = HfModel::from_pretrained(out.path(), Device::Cpu, HfDtype::F32).unwrap();
        assert_eq!(back.config(), m.config(), "{name}");
        assert_eq!(logits(&back, name), logits(&m, name), "{name}");
    }
}

#[test]
fn tied_head_is_not_written_and_untied_is() {
    let out = tempfile::tempdir().unwrap();
    let m = HfModel::from_pretrained(fixture("qwen2_tied"), Device::Cpu, HfDtype::F32).unwrap();
    m.save_pretrained(out.path(), &SaveParams::default().check().unwrap()).unwrap();
    let names: Vec<String> =
        Tensor::read_safetensors(out.path().join(WEIGHTS_FILE)).unwrap().into_iter().map(|(n, _)| n).collect();
    assert!(!names.iter().any(|n| n == "lm_head.weight"));
    assert_eq!(names.len(), 2 + 2 * 12);
    let m = HfModel::from_pretrained(fixture("qwen2_untied"), Device::Cpu, HfDtype::F32).unwrap();
    m.save_pretrained(out.path(), &SaveParams::default().check().unwrap()).unwrap();
    let names: Vec<String> =
        Tensor::read_safetensors(out.path().join(WEIGHTS_FILE)).unwrap().into_iter().map(|(n, _)| n).collect();
    assert!(names.iter().any(|n| n == "lm_head.weight"));
}

#[test]
fn sharded_save_writes_an_index_and_loads_back() {
    let m = HfModel::from_pretrained(fixture("qwen2_untied"), Device::Cpu, HfDtype::F32).unwrap();
    let out = tempfile::tempdir().unwrap();
    // A single file first, then shards into the same directory: the stale file is removed.
    m.save_pretrained(out.path(), &SaveParams::default().check().unwrap()).unwrap();
    let files = m.save_pretrained(out.path(), &SaveParams::default().max_shard_bytes(30_000).check().unwrap()).unwrap();
    assert!(files.len() >= 4, "{files:?}");
    assert!(!out.path().join(WEIGHTS_FILE).exists());
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join(INDEX_FILE)).unwrap()).unwrap();
    let total = index["metadata"]["total_size"].as_u64().unwrap();
    assert_eq!(total as i64, m.config().num_parameters() * 4);
    for f in &files[..files.len() - 1] {
        // Each shard stays under the limit (no single tensor here is larger).
        let bytes = std::fs::metadata(f).unwrap().len();
        assert!(bytes < 30_000 + 4_000, "{f:?}: {bytes}");
    }
    let back = HfModel::from_pretrained(out.path(), Device::Cpu, HfDtype::F32).unwrap();
    assert_eq!(logits(&back, "qwen2_untied"), logits(&m, "qwen2_untied"));
    // And back to one file: the index goes.
    m.save_pretrained(out.path(), &SaveParams::default().check().unwrap()).unwrap();
    assert!(!out.path().join(INDEX_FILE).exists());
    HfModel::from_pretrained(out.path(), Device::Cpu, HfDtype::F32).unwrap();
}

#[test]
fn reduced_precision_save_round_trips_exactly() {
    let m = HfModel::from_pretrained(fixture("qwen3_bf16"), Device::Cpu, HfDtype::Bf16).unwrap();
    for d in [HfDtype::Bf16, HfDtype::F16] {
        let out = tempfile::tempdir().unwrap();
        m.save_pretrained(out.path(), &SaveParams::default().dtype(Some(d)).check().unwrap()).unwrap();
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("config.json")).unwrap()).unwrap();
        assert_eq!(cfg["dtype"], d.hf_name());
        let back = HfModel::from_pretrained(out.path(), Device::Cpu, HfDtype::F32).unwrap();
        // bf16 -> bf16 is exact; the fixture's bf16 weights also fit f16 at this scale.
        let a = logits(&back, "qwen3_bf16");
        let b =
            logits(&HfModel::from_pretrained(fixture("qwen3_bf16"), Device::Cpu, HfDtype::F32).unwrap(), "qwen3_bf16");
        let diff = (a - b).abs().max().double_value(&[]);
        assert!(diff < if d == HfDtype::Bf16 { 1e-6 } else { 1e-2 }, "{d:?}: {diff}");
    }
}

#[test]
fn save_params_are_checked() {
    assert!(
        matches!(SaveParams::default().max_shard_bytes(0).check(), Err(HfError::InvalidParameter { ref name, .. }) if name == "max_shard_bytes")
    );
    let p: SaveParams = serde_json::from_str("{}").unwrap();
    assert_eq!(p, SaveParams::default());
    let p: SaveParams = serde_json::from_str(r#"{"dtype": "bf16"}"#).unwrap();
    assert_eq!(p.dtype, Some(HfDtype::Bf16));
    assert!(serde_json::from_str::<SaveParams>(r#"{"shard": 1}"#).is_err());
}

#[test]
fn llama3_rope_scaling_is_exercised_by_the_fixture() {
    // The same weights with plain RoPE must give other logits, or the fixture would not test
    // the scaling at all.
    let m = HfModel::from_pretrained(fixture("llama3"), Device::Cpu, HfDtype::F32).unwrap();
    assert!(matches!(m.config().rope, Rope::Llama3 { .. }));
    let mut cfg = m.config().clone();
    cfg.rope = Rope::Default;
    let tensors: BTreeMap<String, Tensor> = m.var_store().variables().into_iter().collect();
    let plain = HfModel::from_tensors(cfg, &tensors, Device::Cpu, HfDtype::F32).unwrap();
    let d = (logits(&plain, "llama3") - logits(&m, "llama3")).abs().max().double_value(&[]);
    assert!(d > 1e-2, "{d}");
}
