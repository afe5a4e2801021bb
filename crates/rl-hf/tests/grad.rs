//! Token log-probs, entropies and parameter gradients against transformers 5.23.0
//! (`grad.safetensors`, written by `scripts/hf_fixtures.py`).

use std::collections::HashMap;
use std::path::PathBuf;

use rl_core::Params;
use rl_hf::{HfDtype, HfError, HfModel, LogProbParams};
use tch::{Device, Kind, Tensor};

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn read(name: &str, file: &str) -> HashMap<String, Tensor> {
    Tensor::read_safetensors(dir(name).join(file)).unwrap().into_iter().collect()
}

/// 1 where the token and the one before it are real (a log-prob is defined there).
fn valid(mask: &Tensor, start: i64) -> Tensor {
    let t = mask.size()[1];
    (mask.narrow(1, start, t - start) * mask.narrow(1, start - 1, t - start)).to_kind(Kind::Float)
}

#[test]
fn logprobs_entropy_and_gradients_match_transformers() {
    for name in ["qwen2_tied", "qwen3", "llama3"] {
        let r = read(name, "reference.safetensors");
        let g = read(name, "grad.safetensors");
        let start = g["start"].int64_value(&[0]);
        let model = HfModel::from_pretrained(dir(name), Device::Cpu, HfDtype::F32).unwrap();
        // Plain (autograd through each chunk) and deferred (recompute-in-backward) log-probs.
        for (chunk, deferred) in [(1, false), (2, false), (256, false), (1, true), (3, true), (256, true)] {
            let p = LogProbParams::default().chunk(chunk).entropy(true).check().unwrap();
            let (ids, mask) = (&r["input_ids"], Some(&r["attention_mask"]));
            let (logprobs, ent, pending) = if deferred {
                let out = model.token_logprobs_deferred(ids, mask, start, &p).unwrap();
                let (lp, ent) = (out.logprobs.shallow_clone(), out.entropy.as_ref().unwrap().shallow_clone());
                (lp, ent, Some(out))
            } else {
                let out = model.token_logprobs(ids, mask, start, &p).unwrap();
                (out.logprobs, out.entropy.unwrap(), None)
            };
            let m = valid(&r["attention_mask"], start);
            let dl = ((&logprobs - &g["logprobs"]) * &m).abs().max().double_value(&[]);
            let de = ((&ent - &g["entropy"]) * &m).abs().max().double_value(&[]);
            assert!(dl <= 1e-4 && de <= 1e-4, "{name} chunk {chunk} deferred {deferred}: logprob {dl}, entropy {de}");
            let weighted: Tensor = &g["coef"] * &logprobs * &m;
            let ent_term: Tensor = (ent * &m).sum(Kind::Float) * 0.1;
            let loss = weighted.sum(Kind::Float) + ent_term;
            for (_, mut v) in model.var_store().variables() {
                v.zero_grad();
            }
            match pending {
                Some(out) => out.backward(&model, &loss).unwrap(),
                None => loss.backward(),
            }
            let vars = model.var_store().variables();
            let mut worst = 0.0f64;
            let mut n = 0;
            for (key, want) in &g {
                let Some(pname) = key.strip_prefix("grad.") else { continue };
                let got = vars[pname].grad();
                let scale = want.abs().max().double_value(&[]).max(1e-12);
                let rel = (&got - want).abs().max().double_value(&[]) / scale;
                worst = worst.max(rel);
                assert!(
                    rel <= 1e-4,
                    "{name} chunk {chunk} deferred {deferred}: gradient of {pname}: relative error {rel}"
                );
                n += 1;
            }
            assert_eq!(n, vars.len(), "{name}: every parameter has a reference gradient");
            if chunk == 256 {
                eprintln!("{name} (deferred {deferred}): logprob {dl:.2e}, entropy {de:.2e}, worst relative gradient error {worst:.2e} over {n} tensors");
            }
        }
    }
}

#[test]
fn temperature_divides_the_logits() {
    let r = read("qwen2_tied", "reference.safetensors");
    let model = HfModel::from_pretrained(dir("qwen2_tied"), Device::Cpu, HfDtype::F32).unwrap();
    let p = LogProbParams::default().temperature(0.7).check().unwrap();
    let out = tch::no_grad(|| model.token_logprobs(&r["input_ids"], Some(&r["attention_mask"]), 3, &p)).unwrap();
    let want = (r["logits"].narrow(1, 2, 4) / 0.7)
        .log_softmax(-1, Kind::Float)
        .gather(-1, &r["input_ids"].narrow(1, 3, 4).unsqueeze(-1), false)
        .squeeze_dim(-1);
    let m = valid(&r["attention_mask"], 3);
    let d = ((out.logprobs - want) * m).abs().max().double_value(&[]);
    assert!(d < 1e-4, "{d}");
    assert!(out.entropy.is_none());
}

#[test]
fn logprob_params_and_start_are_checked() {
    assert!(
        matches!(LogProbParams::default().chunk(0).check(), Err(HfError::InvalidParameter { ref name, .. }) if name == "chunk")
    );
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            matches!(LogProbParams::default().temperature(t).check(), Err(HfError::InvalidParameter { ref name, .. }) if name == "temperature")
        );
    }
    let p: LogProbParams = serde_json::from_str("{}").unwrap();
    assert_eq!(p, LogProbParams::default());
    assert!(serde_json::from_str::<LogProbParams>(r#"{"chunks": 2}"#).is_err());
    let model = HfModel::from_pretrained(dir("qwen2_tied"), Device::Cpu, HfDtype::F32).unwrap();
    let ids = Tensor::from_slice(&[1i64, 2, 3]).view([1, 3]);
    let p = LogProbParams::default().check().unwrap();
    for start in [0, 3, 4] {
        assert!(matches!(model.token_logprobs(&ids, None, start, &p), Err(HfError::Input { .. })), "{start}");
    }
    assert_eq!(model.token_logprobs(&ids, None, 1, &p).unwrap().logprobs.size(), [1, 2]);
}

#[test]
fn deferred_logprobs_equal_plain_ones_and_refuse_bad_losses() {
    let r = read("qwen2_untied", "reference.safetensors");
    let model = HfModel::from_pretrained(dir("qwen2_untied"), Device::Cpu, HfDtype::F32).unwrap();
    let p = LogProbParams::default().chunk(4).check().unwrap();
    let (ids, mask) = (&r["input_ids"], Some(&r["attention_mask"]));
    let plain = tch::no_grad(|| model.token_logprobs(ids, mask, 2, &p)).unwrap();
    let deferred = model.token_logprobs_deferred(ids, mask, 2, &p).unwrap();
    assert!(deferred.entropy.is_none());
    assert!(deferred.logprobs.requires_grad());
    assert_eq!(
        Vec::<f32>::try_from(&plain.logprobs.flatten(0, -1)).unwrap(),
        Vec::<f32>::try_from(&deferred.logprobs.detach().flatten(0, -1)).unwrap(),
        "bit-identical values"
    );
    let constant = Tensor::from(1.0f32);
    assert!(matches!(
        model.token_logprobs_deferred(ids, mask, 2, &p).unwrap().backward(&model, &constant),
        Err(HfError::Input { .. })
    ));
    let not_scalar = &deferred.logprobs * 2.0;
    assert!(matches!(deferred.backward(&model, &not_scalar), Err(HfError::Input { .. })));
}
