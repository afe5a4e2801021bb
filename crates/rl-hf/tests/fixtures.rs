//! Logits and greedy generations against transformers 5.23.0 (fixtures written by
//! `scripts/hf_fixtures.py`).

use std::collections::HashMap;
use std::path::PathBuf;

use rl_hf::{Family, HfDtype, HfModel, KvCache, Rope};
use tch::{Device, Kind, Tensor};

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn reference(name: &str) -> HashMap<String, Tensor> {
    Tensor::read_safetensors(dir(name).join("reference.safetensors")).unwrap().into_iter().collect()
}

/// Max |a - b| over the real (non-padding) positions.
fn max_diff_real(a: &Tensor, b: &Tensor, mask: &Tensor) -> f64 {
    let d = (a.to_kind(Kind::Float) - b.to_kind(Kind::Float)).abs();
    let real = mask.ne(0).unsqueeze(-1).expand_as(&d);
    d.masked_select(&real).max().double_value(&[])
}

fn check_logits(name: &str, dtype: HfDtype, tol: f64) {
    let r = reference(name);
    let model = HfModel::from_pretrained(dir(name), Device::Cpu, dtype).unwrap();
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    // Position ids as transformers' generate computes them.
    assert_eq!(HfModel::position_ids(mask).unwrap(), r["position_ids"]);
    let logits = tch::no_grad(|| model.forward(ids, Some(mask), None)).unwrap();
    assert_eq!(logits.size(), r["logits"].size());
    let diff = max_diff_real(&logits, &r["logits"], mask);
    eprintln!("{name} ({dtype:?}): max abs logit difference {diff:.3e}");
    assert!(diff <= tol, "{name} ({dtype:?}): max abs logit difference {diff} > {tol}");
}

#[test]
fn logits_match_transformers_for_every_variant() {
    for name in
        ["qwen2_tied", "qwen2_untied", "qwen2_sharded", "qwen2_v4", "qwen3", "qwen3_bf16", "llama3", "llama3_v4"]
    {
        check_logits(name, HfDtype::F32, 1e-4);
    }
}

#[test]
fn configs_are_read_as_written() {
    let m = HfModel::from_pretrained(dir("qwen2_tied"), Device::Cpu, HfDtype::F32).unwrap();
    let c = m.config();
    assert_eq!(
        (c.family, c.tie_word_embeddings, c.qkv_bias, c.o_bias, c.qk_norm),
        (Family::Qwen2, true, true, false, false)
    );
    assert_eq!((c.num_attention_heads, c.num_key_value_heads, c.head_dim), (4, 2, 8));
    let c = HfModel::from_pretrained(dir("qwen3"), Device::Cpu, HfDtype::F32).unwrap().config().clone();
    assert_eq!(
        (c.family, c.head_dim, c.qk_norm, c.qkv_bias, c.tie_word_embeddings),
        (Family::Qwen3, 16, true, false, false)
    );
    assert_eq!(c.rope_theta, 1e6);
    let v5 = HfModel::from_pretrained(dir("llama3"), Device::Cpu, HfDtype::F32).unwrap().config().clone();
    let v4 = HfModel::from_pretrained(dir("llama3_v4"), Device::Cpu, HfDtype::F32).unwrap().config().clone();
    let want = Rope::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 8.0,
        original_max_position_embeddings: 64.0,
    };
    assert_eq!((v5.rope, v5.rope_theta, v5.family), (want, 5e5, Family::Llama));
    assert_eq!((v4.rope, v4.rope_theta), (want, 5e5));
    assert_eq!(v4.dtype.as_deref(), Some("float32"));
    let q4 = HfModel::from_pretrained(dir("qwen2_v4"), Device::Cpu, HfDtype::F32).unwrap().config().clone();
    assert_eq!((q4.rope, q4.rope_theta), (Rope::Default, 1e4));
}

#[test]
fn reduced_precision_weights_stay_close() {
    // bf16/f16 compute: same logits up to the format's precision.
    check_logits("qwen2_untied", HfDtype::Bf16, 0.25);
    check_logits("qwen2_untied", HfDtype::F16, 0.05);
}

#[test]
fn padding_does_not_change_a_row() {
    let r = reference("qwen3");
    let model = HfModel::from_pretrained(dir("qwen3"), Device::Cpu, HfDtype::F32).unwrap();
    // Row 2 has 2 real tokens at the end: run it alone, unpadded.
    let alone = r["input_ids"].narrow(0, 2, 1).narrow(1, 5, 2);
    let a = tch::no_grad(|| model.forward(&alone, None, None)).unwrap();
    let batch = tch::no_grad(|| model.forward(&r["input_ids"], Some(&r["attention_mask"]), None)).unwrap();
    let b = batch.narrow(0, 2, 1).narrow(1, 5, 2);
    let d = (a - b).abs().max().double_value(&[]);
    assert!(d < 1e-5, "{d}");
}

#[test]
fn kv_cache_forward_equals_full_forward() {
    let r = reference("llama3");
    let model = HfModel::from_pretrained(dir("llama3"), Device::Cpu, HfDtype::F32).unwrap();
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    let full = tch::no_grad(|| model.forward(ids, Some(mask), None)).unwrap();
    let mut cache = KvCache::new();
    let first =
        tch::no_grad(|| model.forward(&ids.narrow(1, 0, 4), Some(&mask.narrow(1, 0, 4)), Some(&mut cache))).unwrap();
    assert_eq!(cache.len(), 4);
    let rest = tch::no_grad(|| model.forward(&ids.narrow(1, 4, 3), Some(mask), Some(&mut cache))).unwrap();
    let stepped = Tensor::cat(&[first, rest], 1);
    assert!(max_diff_real(&stepped, &full, mask) < 1e-5);
}

#[test]
fn greedy_generation_is_token_identical_for_24_tokens() {
    for name in
        ["qwen2_tied", "qwen2_untied", "qwen2_sharded", "qwen2_v4", "qwen3", "qwen3_bf16", "llama3", "llama3_v4"]
    {
        let r = reference(name);
        let margin = r["gen_margin"].double_value(&[0]);
        let model = HfModel::from_pretrained(dir(name), Device::Cpu, HfDtype::F32).unwrap();
        let out = model.generate_greedy(&r["input_ids"], &r["attention_mask"], 24).unwrap();
        assert_eq!(out, r["generated"], "{name} (smallest greedy margin in transformers: {margin})");
    }
}
