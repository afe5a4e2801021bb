//! LoRA adapters against PEFT 0.21.2 (`tests/fixtures/lora_*`, written by
//! `scripts/hf_lora_fixture.py`): logits, gradients of every adapter matrix, merged weights,
//! the PEFT file layout both ways, and bad adapters.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rl_core::Params;
use rl_hf::{HfDtype, HfError, HfModel, LogProbParams, LoraParams, LoraTarget, SaveParams};
use tch::{Device, Kind, Tensor};

const CASES: [(&str, &str); 2] = [("lora_qwen2", "qwen2_untied"), ("lora_qwen3_rslora", "qwen3")];

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read(path: &Path) -> HashMap<String, Tensor> {
    Tensor::read_safetensors(path).unwrap().into_iter().collect()
}

fn base(name: &str) -> HfModel {
    HfModel::from_pretrained(dir(name), Device::Cpu, HfDtype::F32).unwrap()
}

/// The fixture batch (input ids, attention mask) the references were computed on.
fn batch(base_name: &str) -> (Tensor, Tensor) {
    let r = read(&dir(base_name).join("reference.safetensors"));
    (r["input_ids"].shallow_clone(), r["attention_mask"].shallow_clone())
}

fn logits(model: &HfModel, ids: &Tensor, mask: &Tensor) -> Tensor {
    tch::no_grad(|| model.forward(ids, Some(mask), None)).unwrap()
}

fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

/// Max |a - b| of logits over the real (non-padding) positions (what a padding query attends
/// to differs by design: transformers lets it see the padding, rl-hf masks it).
fn max_real(a: &Tensor, b: &Tensor, mask: &Tensor) -> f64 {
    let d = (a - b).abs();
    let real = mask.ne(0).unsqueeze(-1).expand_as(&d);
    d.masked_select(&real).max().double_value(&[])
}

/// Copies the fixture adapter into a temporary directory, lets `edit` change it, and returns
/// what loading it onto the base gives.
fn load_edited(edit: impl FnOnce(&Path)) -> Result<(), HfError> {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["adapter_config.json", "adapter_model.safetensors"] {
        std::fs::copy(dir("lora_qwen2").join(f), tmp.path().join(f)).unwrap();
    }
    edit(tmp.path());
    base("qwen2_untied").load_adapter(tmp.path())
}

fn edit_config(path: &Path, f: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let p = path.join("adapter_config.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(v.as_object_mut().unwrap());
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
}

#[test]
fn peft_adapters_give_peft_logits_and_gradients() {
    for (case, base_name) in CASES {
        let r = read(&dir(case).join("reference.safetensors"));
        let mut model = base(base_name);
        let (ids, mask) = batch(base_name);
        let before = logits(&model, &ids, &mask);
        model.load_adapter(dir(case)).unwrap();
        let got = logits(&model, &ids, &mask);
        let d = max_real(&got, &r["logits"], &mask);
        assert!(d <= 1e-4, "{case}: logits differ from PEFT's by {d}");
        assert!(max_real(&before, &r["logits"], &mask) > 1e-2, "{case}: the adapter must change the logits");

        // The loss of the fixture, through the deferred (recompute-in-backward) log-probs.
        let start = r["start"].int64_value(&[0]);
        let p = LogProbParams::default().chunk(2).entropy(true).check().unwrap();
        let out = model.token_logprobs_deferred(&ids, Some(&mask), start, &p).unwrap();
        let t = mask.size()[1];
        let m = (mask.narrow(1, start, t - start) * mask.narrow(1, start - 1, t - start)).to_kind(Kind::Float);
        let ent = out.entropy.as_ref().unwrap().shallow_clone();
        let loss = (&r["coef"] * &out.logprobs * &m).sum(Kind::Float) + (ent * &m).sum(Kind::Float) * 0.1;
        out.backward(&model, &loss).unwrap();
        let vars = model.trainable_var_store().variables();
        let mut n = 0;
        for (key, want) in &r {
            let Some(peft_name) = key.strip_prefix("grad.") else { continue };
            let name = peft_name.strip_prefix("base_model.model.").unwrap();
            let got = vars[name].grad();
            let rel = max_abs(&got, want) / want.abs().max().double_value(&[]).max(1e-12);
            assert!(rel <= 1e-4, "{case}: gradient of {name}: relative error {rel}");
            n += 1;
        }
        assert_eq!(n, vars.len(), "{case}: every adapter matrix has a reference gradient");
        // The base is frozen: no gradient reaches it.
        for (name, v) in model.var_store().variables() {
            assert!(!v.requires_grad(), "{case}: base weight {name} is trainable");
            assert!(!v.grad().defined(), "{case}: base weight {name} received a gradient");
        }
    }
}

#[test]
fn merging_gives_peft_merged_logits_and_saves_a_plain_model() {
    for (case, base_name) in CASES {
        let r = read(&dir(case).join("reference.safetensors"));
        let (ids, mask) = batch(base_name);
        let mut model = base(base_name);
        model.load_adapter(dir(case)).unwrap();
        // save_pretrained writes the merged weights: transformers' layout, no adapter needed.
        let tmp = tempfile::tempdir().unwrap();
        model.save_pretrained(tmp.path(), &SaveParams::default().check().unwrap()).unwrap();
        let saved = HfModel::from_pretrained(tmp.path(), Device::Cpu, HfDtype::F32).unwrap();
        assert!(saved.lora().is_none());
        let d = max_real(&logits(&saved, &ids, &mask), &r["merged_logits"], &mask);
        assert!(d <= 1e-4, "{case}: saved merged model vs PEFT merge_and_unload: {d}");
        // The frozen reference copy computes what the adapted model computes.
        let copy = model.frozen_copy().unwrap();
        assert!(max_real(&logits(&copy, &ids, &mask), &r["logits"], &mask) <= 1e-4);
        // merge_lora folds the adapter in and makes the base trainable again.
        model.merge_lora().unwrap();
        assert!(model.lora().is_none());
        let d = max_real(&logits(&model, &ids, &mask), &r["merged_logits"], &mask);
        assert!(d <= 1e-4, "{case}: merge_lora vs PEFT merge_and_unload: {d}");
        assert!(model.var_store().trainable_variables().len() == model.var_store().variables().len());
        assert!(matches!(model.merge_lora(), Err(HfError::InvalidParameter { .. })));
    }
}

#[test]
fn saved_adapters_load_back_exactly_in_peft_layout() {
    let (ids, mask) = batch("qwen3");
    let mut model = base("qwen3");
    model.load_adapter(dir("lora_qwen3_rslora")).unwrap();
    let want = logits(&model, &ids, &mask);
    let tmp = tempfile::tempdir().unwrap();
    model.save_adapter(tmp.path(), Some("../qwen3")).unwrap();
    let names: Vec<String> = read(&tmp.path().join("adapter_model.safetensors")).into_keys().collect();
    let fixture: Vec<String> = read(&dir("lora_qwen3_rslora").join("adapter_model.safetensors")).into_keys().collect();
    let (mut a, mut b) = (names.clone(), fixture);
    a.sort();
    b.sort();
    assert_eq!(a, b, "the same tensor names as PEFT writes");
    let cfg = LoraParams::from_peft_file(tmp.path().join("adapter_config.json")).unwrap();
    assert_eq!(cfg, LoraParams::default().r(2).alpha(3.0).rslora(true).targets([LoraTarget::QProj, LoraTarget::VProj]));
    let mut back = base("qwen3");
    back.load_adapter(tmp.path()).unwrap();
    assert_eq!(max_abs(&logits(&back, &ids, &mask), &want), 0.0);
}

#[test]
fn a_fresh_adapter_starts_as_the_base_and_trains_alone() {
    let (ids, mask) = batch("qwen2_untied");
    let mut model = base("qwen2_untied");
    let before = logits(&model, &ids, &mask);
    let base_weights: Vec<(String, Tensor)> =
        model.var_store().variables().into_iter().map(|(n, t)| (n, t.detach().copy())).collect();
    let params = LoraParams::default().r(4).targets(LoraTarget::ALL).check().unwrap();
    model.add_lora(&params, 3).unwrap();
    assert_eq!(max_abs(&logits(&model, &ids, &mask), &before), 0.0, "B = 0: the base's logits exactly");
    let vs = model.trainable_var_store();
    assert_eq!(vs.variables().len(), 2 * 2 * 7, "A and B for 7 projections of 2 layers");
    let mut opt =
        rl_nn::optim::Adam::for_var_store(rl_nn::optim::AdamParams::default().lr(1e-2).check().unwrap(), vs).unwrap();
    let p = LogProbParams::default().check().unwrap();
    let out = model.token_logprobs(&ids, Some(&mask), 4, &p).unwrap();
    let loss = out.logprobs.sum(Kind::Float).neg();
    opt.zero_grad().unwrap();
    loss.backward();
    opt.step().unwrap();
    let after = logits(&model, &ids, &mask);
    assert!(max_abs(&after, &before) > 1e-4, "one step moves the adapted model");
    // `RL_HF_KEEP_SAVED_LORA=DIR` keeps this trained adapter and its logits for
    // `scripts/hf_lora_fixture.py --check-saved DIR` (PEFT loads it onto the base and compares).
    if let Some(keep) = std::env::var_os("RL_HF_KEEP_SAVED_LORA") {
        let out = PathBuf::from(keep).join("qwen2_untied");
        model.save_adapter(&out, Some("qwen2_untied")).unwrap();
        Tensor::write_safetensors(
            &[("logits", &after), ("input_ids", &ids), ("attention_mask", &mask)],
            out.join("rl_hf_logits.safetensors"),
        )
        .unwrap();
    }
    for (name, w) in &base_weights {
        assert_eq!(max_abs(&model.var_store().variables()[name], w), 0.0, "base weight {name} changed");
    }
    // Same seed, same adapter.
    let mut again = base("qwen2_untied");
    again.add_lora(&params, 3).unwrap();
    let mut other = base("qwen2_untied");
    other.add_lora(&params, 4).unwrap();
    let a = &again.trainable_var_store().variables()["model.layers.0.self_attn.q_proj.lora_A.weight"];
    let b = &other.trainable_var_store().variables()["model.layers.0.self_attn.q_proj.lora_A.weight"];
    assert!(max_abs(a, b) > 0.0);
    let bound = 1.0 / 32f64.sqrt();
    assert!(a.abs().max().double_value(&[]) <= bound, "A within ±1/sqrt(in)");
    assert!(matches!(again.add_lora(&params, 3), Err(HfError::InvalidParameter { .. })), "one adapter at a time");
}

#[test]
fn bad_adapters_are_typed_errors() {
    use serde_json::json;
    let unsupported = |field: &str, value: serde_json::Value| {
        let f = field.to_owned();
        let err = load_edited(|p| edit_config(p, |m| drop(m.insert(f, value)))).unwrap_err();
        match err {
            HfError::UnsupportedField { field: got, .. } => assert_eq!(got, field),
            other => panic!("{field}: {other}"),
        }
    };
    unsupported("use_dora", json!(true));
    unsupported("lora_dropout", json!(0.05));
    unsupported("bias", json!("all"));
    unsupported("modules_to_save", json!(["lm_head"]));
    unsupported("rank_pattern", json!({"q_proj": 8}));
    unsupported("layers_to_transform", json!([0]));
    unsupported("peft_type", json!("IA3"));
    unsupported("target_modules", json!(["lm_head"]));
    unsupported("target_modules", json!(".*proj"));
    unsupported("some_future_option", json!(3));
    // Metadata and off values are read past.
    load_edited(|p| {
        edit_config(p, |m| {
            m.insert("peft_version".into(), json!("9.9"));
            m.insert("some_future_option".into(), json!(null));
        })
    })
    .unwrap();
    assert!(matches!(
        load_edited(|p| edit_config(p, |m| drop(m.remove("r")))),
        Err(HfError::MissingField { field, .. }) if field == "r"
    ));
    assert!(matches!(
        load_edited(|p| edit_config(p, |m| drop(m.insert("r".into(), json!(0))))),
        Err(HfError::InvalidField { field, .. }) if field == "r"
    ));
    assert!(matches!(
        load_edited(|p| edit_config(p, |m| drop(m.insert("target_modules".into(), json!(["q_proj", "q_proj"]))))),
        Err(HfError::InvalidField { .. })
    ));
    // A rank the weights do not have.
    assert!(matches!(
        load_edited(|p| edit_config(p, |m| drop(m.insert("r".into(), json!(8))))),
        Err(HfError::TensorShape { .. })
    ));
    // A target whose matrices are not in the file.
    assert!(matches!(
        load_edited(|p| edit_config(p, |m| drop(m.insert("target_modules".into(), json!(["q_proj"]))))),
        Err(HfError::UnexpectedTensors { .. })
    ));
    // Weights: a missing matrix, a corrupt header, no file at all, no config.
    let weights = read(&dir("lora_qwen2").join("adapter_model.safetensors"));
    let err = load_edited(|p| {
        let kept: Vec<(String, Tensor)> = weights
            .iter()
            .filter(|(n, _)| !n.contains("layers.1.mlp.up_proj.lora_B"))
            .map(|(n, t)| (n.clone(), t.shallow_clone()))
            .collect();
        Tensor::write_safetensors(&kept, p.join("adapter_model.safetensors")).unwrap();
    })
    .unwrap_err();
    assert!(
        matches!(&err, HfError::MissingTensor { name, .. } if name.contains("layers.1.mlp.up_proj.lora_B")),
        "{err}"
    );
    let err = load_edited(|p| {
        std::fs::write(p.join("adapter_model.safetensors"), b"\xff\xff\xff\xff\xff\xff\xff\x7f{").unwrap()
    })
    .unwrap_err();
    assert!(matches!(err, HfError::Corrupt { .. }), "{err}");
    let err = load_edited(|p| std::fs::remove_file(p.join("adapter_model.safetensors")).unwrap()).unwrap_err();
    assert!(matches!(err, HfError::MissingFile { .. }), "{err}");
    let err = load_edited(|p| std::fs::write(p.join("adapter_config.json"), "{not json").unwrap()).unwrap_err();
    assert!(matches!(err, HfError::Corrupt { .. }), "{err}");
    let err = load_edited(|p| std::fs::remove_file(p.join("adapter_config.json")).unwrap()).unwrap_err();
    assert!(matches!(err, HfError::MissingFile { .. }), "{err}");
    // An integer-valued dtype.
    let err = load_edited(|p| {
        let mut bad: Vec<(String, Tensor)> = weights.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
        bad[0].1 = bad[0].1.to_kind(Kind::Int);
        Tensor::write_safetensors(&bad, p.join("adapter_model.safetensors")).unwrap();
    })
    .unwrap_err();
    assert!(matches!(err, HfError::TensorDtype { .. }), "{err}");
    // Nothing to save or merge without an adapter; parameters checked on the way in.
    let model = base("qwen2_untied");
    assert!(matches!(
        model.save_adapter(tempfile::tempdir().unwrap().path(), None),
        Err(HfError::InvalidParameter { .. })
    ));
    for bad in [
        LoraParams::default().r(0),
        LoraParams::default().alpha(f64::NAN),
        LoraParams::default().alpha(0.0),
        LoraParams::default().targets(Vec::new()),
        LoraParams::default().targets([LoraTarget::UpProj, LoraTarget::UpProj]),
    ] {
        assert!(matches!(bad.clone().check(), Err(HfError::InvalidParameter { .. })), "{bad:?}");
    }
}

#[test]
fn bf16_models_keep_f32_adapters() {
    let (ids, mask) = batch("qwen2_untied");
    let r = read(&dir("lora_qwen2").join("reference.safetensors"));
    let mut model = HfModel::from_pretrained(dir("qwen2_untied"), Device::Cpu, HfDtype::Bf16).unwrap();
    model.load_adapter(dir("lora_qwen2")).unwrap();
    for (name, v) in model.trainable_var_store().variables() {
        assert_eq!(v.kind(), Kind::Float, "{name}");
    }
    let got = logits(&model, &ids, &mask).to_kind(Kind::Float);
    assert_eq!(got.kind(), Kind::Float);
    // bf16 arithmetic: a loose bound, but far below the adapter's effect on the logits.
    let d = max_real(&got, &r["logits"], &mask);
    assert!(d.is_finite() && d < 0.5 * r["logits"].abs().max().double_value(&[]), "bf16 adapted logits off by {d}");
}
