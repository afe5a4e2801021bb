//! Bad checkpoints and bad inputs: typed errors naming the problem, never a panic.

use std::path::{Path, PathBuf};

use rl_hf::{HfConfig, HfDtype, HfError, HfModel, Result};
use tch::{Device, Kind, Tensor};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A copy of a fixture directory that a test may damage.
fn copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    tmp
}

fn load(dir: &Path) -> Result<HfModel> {
    HfModel::from_pretrained(dir, Device::Cpu, HfDtype::F32)
}

/// Rewrites model.safetensors with `edit` applied to its tensor list.
fn edit_weights(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Tensor)>)) {
    let path = dir.join("model.safetensors");
    let mut t = Tensor::read_safetensors(&path).unwrap();
    edit(&mut t);
    Tensor::write_safetensors(&t, &path).unwrap();
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let path = dir.join("config.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(v.as_object_mut().unwrap());
    std::fs::write(&path, v.to_string()).unwrap();
}

#[test]
fn missing_tensor_is_named() {
    let d = copy("qwen2_untied");
    edit_weights(d.path(), |t| t.retain(|(n, _)| n != "lm_head.weight"));
    match load(d.path()) {
        Err(HfError::MissingTensor { name, .. }) => assert_eq!(name, "lm_head.weight"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn extra_tensors_are_listed() {
    let d = copy("qwen2_tied");
    edit_weights(d.path(), |t| {
        t.push(("lm_head.weight".into(), Tensor::zeros([96, 32], (Kind::Float, Device::Cpu))));
        t.push(("model.extra".into(), Tensor::zeros([2], (Kind::Float, Device::Cpu))));
    });
    match load(d.path()) {
        Err(HfError::UnexpectedTensors { names, .. }) => assert_eq!(names, ["lm_head.weight", "model.extra"]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn misshaped_tensor_is_named_with_both_shapes() {
    let d = copy("qwen3");
    edit_weights(d.path(), |t| {
        for (n, x) in t.iter_mut() {
            if n == "model.layers.1.self_attn.k_norm.weight" {
                *x = Tensor::ones([8], (Kind::Float, Device::Cpu));
            }
        }
    });
    match load(d.path()) {
        Err(HfError::TensorShape { name, expected, got, .. }) => {
            assert_eq!((name.as_str(), expected, got), ("model.layers.1.self_attn.k_norm.weight", vec![16], vec![8]));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_dtype_is_named() {
    for kind in [Kind::Double, Kind::Int64] {
        let d = copy("qwen2_tied");
        edit_weights(d.path(), |t| {
            for (n, x) in t.iter_mut() {
                if n == "model.norm.weight" {
                    *x = x.to_kind(kind);
                }
            }
        });
        match load(d.path()) {
            Err(HfError::TensorDtype { name, dtype, .. }) => {
                assert_eq!(name, "model.norm.weight");
                assert!(dtype == "F64" || dtype == "I64", "{dtype}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn corrupt_safetensors_header_is_an_error() {
    let d = copy("qwen2_tied");
    let path = d.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    // Truncated data, a header length past the end, garbage JSON.
    let mut garbage = bytes.clone();
    garbage[8..16].copy_from_slice(b"{{{{{{{{");
    let huge = [u64::MAX.to_le_bytes().to_vec(), bytes[8..].to_vec()].concat();
    for bad in [bytes[..bytes.len() - 10].to_vec(), huge, garbage, vec![1, 2, 3]] {
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(load(d.path()), Err(HfError::Corrupt { .. })), "{:?}", load(d.path()));
    }
}

#[test]
fn shard_index_problems_are_errors() {
    // A shard the index names is absent.
    let d = copy("qwen2_sharded");
    std::fs::remove_file(d.path().join("model-00002-of-00003.safetensors")).unwrap();
    assert!(matches!(load(d.path()), Err(HfError::MissingFile { .. })));
    // The index points outside the directory.
    let d = copy("qwen2_sharded");
    let idx = d.path().join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&idx).unwrap().replace("model-00001-of-00003", "../model-00001-of-00003");
    std::fs::write(&idx, text).unwrap();
    assert!(matches!(load(d.path()), Err(HfError::Corrupt { .. })));
    // The index is not JSON.
    std::fs::write(&idx, "{").unwrap();
    assert!(matches!(load(d.path()), Err(HfError::Corrupt { .. })));
    // No weights at all.
    let d = copy("qwen2_tied");
    std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
    assert!(matches!(load(d.path()), Err(HfError::MissingFile { .. })));
    std::fs::remove_file(d.path().join("config.json")).unwrap();
    assert!(matches!(load(d.path()), Err(HfError::MissingFile { .. })));
}

#[test]
fn unknown_model_type_is_refused() {
    let d = copy("qwen2_tied");
    edit_config(d.path(), |c| {
        c.insert("model_type".into(), "mistral".into());
    });
    match load(d.path()) {
        Err(HfError::UnknownModelType { model_type, .. }) => assert_eq!(model_type, "mistral"),
        other => panic!("{other:?}"),
    }
}

fn config_err(edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>), base: &str) -> HfError {
    let text = std::fs::read_to_string(fixture(base).join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(v.as_object_mut().unwrap());
    HfConfig::from_json_str(&v.to_string(), "config.json").unwrap_err()
}

fn unsupported_field(err: HfError) -> String {
    match err {
        HfError::UnsupportedField { field, .. } => field,
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_fields_are_named_not_ignored() {
    use serde_json::json;
    let cases: Vec<(&str, serde_json::Value, &str, &str)> = vec![
        ("use_sliding_window", json!(true), "use_sliding_window", "qwen2_tied"),
        ("sliding_window", json!(4096), "sliding_window", "llama3"),
        ("layer_types", json!(["full_attention", "sliding_attention"]), "layer_types", "qwen3"),
        ("num_experts", json!(8), "num_experts", "qwen3"),
        ("quantization_config", json!({"quant_method": "gptq"}), "quantization_config", "llama3"),
        ("hidden_act", json!("gelu"), "hidden_act", "qwen2_tied"),
        ("attention_dropout", json!(0.1), "attention_dropout", "qwen2_tied"),
        (
            "rope_parameters",
            json!({"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}),
            "rope_parameters.rope_type",
            "qwen2_tied",
        ),
        (
            "rope_parameters",
            json!({"rope_type": "default", "rope_theta": 1e4, "mrope_section": [1]}),
            "rope_parameters.mrope_section",
            "qwen2_tied",
        ),
        (
            "rope_parameters",
            json!({"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}),
            "rope_parameters.partial_rotary_factor",
            "qwen3",
        ),
        ("some_new_field", json!(1), "some_new_field", "qwen3"),
        ("attention_bias", json!(true), "attention_bias", "qwen2_tied"),
    ];
    for (key, value, field, base) in cases {
        let err = config_err(
            |c| {
                c.insert(key.into(), value.clone());
            },
            base,
        );
        assert_eq!(unsupported_field(err), field, "{key} = {value}");
    }
    // v4 rope_scaling with another type, and both layouts at once.
    let err = config_err(
        |c| {
            c.insert("rope_scaling".into(), json!({"type": "linear", "factor": 2.0}));
        },
        "qwen2_v4",
    );
    assert_eq!(unsupported_field(err), "rope_scaling.type");
    let err = config_err(
        |c| {
            c.insert("rope_scaling".into(), json!({"rope_type": "llama3"}));
        },
        "llama3",
    );
    assert_eq!(unsupported_field(err), "rope_scaling");
}

#[test]
fn invalid_and_missing_fields_are_named() {
    use serde_json::json;
    let err = config_err(
        |c| {
            c.remove("hidden_size");
        },
        "qwen2_tied",
    );
    assert!(matches!(err, HfError::MissingField { ref field, .. } if field == "hidden_size"), "{err:?}");
    let err = config_err(
        |c| {
            c.insert("num_key_value_heads".into(), json!(3));
        },
        "qwen2_tied",
    );
    assert!(matches!(err, HfError::InvalidField { ref field, .. } if field == "num_key_value_heads"), "{err:?}");
    let err = config_err(
        |c| {
            c.insert("vocab_size".into(), json!("many"));
        },
        "qwen2_tied",
    );
    assert!(matches!(err, HfError::InvalidField { ref field, .. } if field == "vocab_size"), "{err:?}");
    let err = config_err(
        |c| {
            c.insert("rope_theta".into(), json!(5.0));
        },
        "llama3",
    );
    assert!(matches!(err, HfError::InvalidField { ref field, .. } if field == "rope_theta"), "{err:?}");
    let err = config_err(
        |c| {
            c.insert("rope_parameters".into(), json!({"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}));
        },
        "llama3",
    );
    assert!(
        matches!(err, HfError::MissingField { ref field, .. } if field == "rope_parameters.original_max_position_embeddings"),
        "{err:?}"
    );
    assert!(matches!(HfConfig::from_json_str("[1]", "c.json"), Err(HfError::Corrupt { .. })));
    assert!(matches!(HfConfig::from_json_str("{", "c.json"), Err(HfError::Corrupt { .. })));
}

#[test]
fn bad_forward_inputs_are_typed_errors() {
    let m = load(&fixture("qwen2_tied")).unwrap();
    let ids = Tensor::from_slice(&[1i64, 2, 96]).view([1, 3]);
    match m.forward(&ids, None, None) {
        Err(HfError::TokenOutOfRange { row: 0, position: 2, id: 96, vocab_size: 96 }) => {}
        other => panic!("{other:?}"),
    }
    let neg = Tensor::from_slice(&[1i64, -1]).view([2, 1]);
    assert!(matches!(m.forward(&neg, None, None), Err(HfError::TokenOutOfRange { row: 1, position: 0, .. })));
    let ok = Tensor::from_slice(&[1i64, 2, 3]).view([1, 3]);
    assert!(matches!(m.forward(&ok.view([3]), None, None), Err(HfError::Input { .. })));
    assert!(matches!(m.forward(&ok.to_kind(Kind::Int), None, None), Err(HfError::Input { .. })));
    let short = Tensor::from_slice(&[1i64, 1]).view([1, 2]);
    assert!(matches!(m.forward(&ok, Some(&short), None), Err(HfError::Input { .. })));
    let two = Tensor::from_slice(&[1i64, 2, 1]).view([1, 3]);
    assert!(matches!(m.forward(&ok, Some(&two), None), Err(HfError::Input { .. })));
    assert!(matches!(m.generate_greedy(&ok, &ok.ones_like(), 0), Err(HfError::InvalidParameter { .. })));
    assert!(rl_hf::left_pad(&[], 0, Device::Cpu).is_err());
    assert!(rl_hf::left_pad(&[vec![1], vec![]], 0, Device::Cpu).is_err());
}
