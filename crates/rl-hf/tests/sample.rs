//! Sampling: top-k 1 / tiny top-p equal greedy decoding (itself checked against
//! transformers), behaviour log-probs equal the training log-probs, stop ids, seeds, params.

use std::collections::HashMap;
use std::path::PathBuf;

use rl_core::Params;
use rl_hf::{HfDtype, HfError, HfModel, LogProbParams, SampleParams};
use tch::{Device, Kind, Tensor};

fn fixture(name: &str) -> (HfModel, HashMap<String, Tensor>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let r = Tensor::read_safetensors(dir.join("reference.safetensors")).unwrap().into_iter().collect();
    (HfModel::from_pretrained(dir, Device::Cpu, HfDtype::F32).unwrap(), r)
}

#[test]
fn top_k_one_and_tiny_top_p_equal_greedy() {
    let (m, r) = fixture("qwen3");
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    let mut rng = rl_core::rng_from_seed(0);
    for p in
        [SampleParams::default().top_k(1), SampleParams::default().top_p(1e-6), SampleParams::default().greedy(true)]
    {
        let s = m.sample(ids, mask, &p.max_new_tokens(24).check().unwrap(), &mut rng).unwrap();
        assert_eq!(s.tokens, r["generated"]);
        assert_eq!(s.mask.sum(Kind::Int64).int64_value(&[]), 3 * 24);
        assert_eq!(s.finished, [false, false, false]);
    }
}

#[test]
fn behaviour_logprobs_equal_training_logprobs() {
    let (m, r) = fixture("llama3");
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    let p = SampleParams::default().max_new_tokens(10).temperature(0.8).check().unwrap();
    let s = m.sample(ids, mask, &p, &mut rl_core::rng_from_seed(3)).unwrap();
    let full = Tensor::cat(&[ids, &s.tokens], 1);
    let full_mask = Tensor::cat(&[mask, &s.mask], 1);
    let lp = LogProbParams::default().temperature(0.8).chunk(3).check().unwrap();
    let t = tch::no_grad(|| m.token_logprobs(&full, Some(&full_mask), 7, &lp)).unwrap();
    let d = (t.logprobs - &s.logprobs).abs().max().double_value(&[]);
    assert!(d < 1e-5, "{d}");
}

#[test]
fn same_seed_same_tokens_and_sampling_differs_from_greedy() {
    let (m, r) = fixture("qwen2_untied");
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    let p = SampleParams::default().max_new_tokens(24).check().unwrap();
    let a = m.sample(ids, mask, &p, &mut rl_core::rng_from_seed(11)).unwrap();
    let b = m.sample(ids, mask, &p, &mut rl_core::rng_from_seed(11)).unwrap();
    assert_eq!(a.tokens, b.tokens);
    assert_eq!(a.logprobs, b.logprobs);
    assert_ne!(a.tokens, r["generated"]);
    // Every sampled token has a finite, non-positive log-prob.
    let lp = a.logprobs.max().double_value(&[]);
    assert!(lp <= 0.0 && a.logprobs.isfinite().all().int64_value(&[]) == 1);
}

#[test]
fn stop_ids_end_rows_and_pad_after() {
    let (m, r) = fixture("qwen2_tied");
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    let g = &r["generated"];
    // Row 0 stops at its 3rd greedy token.
    let stop = g.int64_value(&[0, 2]);
    let p = SampleParams::default().greedy(true).max_new_tokens(24).stop_ids(vec![stop]).pad_id(5).check().unwrap();
    let s = m.sample(ids, mask, &p, &mut rl_core::rng_from_seed(0)).unwrap();
    let first = (0..24).find(|&j| g.int64_value(&[0, j]) == stop).unwrap();
    assert!(s.finished[0]);
    let row: Vec<i64> = Vec::try_from(s.tokens.get(0)).unwrap();
    let mrow: Vec<i64> = Vec::try_from(s.mask.get(0)).unwrap();
    assert!(row[first as usize + 1..].iter().all(|&t| t == 5), "{row:?}");
    assert_eq!(mrow.iter().sum::<i64>(), first + 1);
    // Sampling ends once every row has stopped (here the stop id ends all three rows).
    let len = s.tokens.size()[1];
    assert_eq!(s.finished, [true, true, true]);
    assert!(len < 24);
    assert_eq!(s.logprobs.get(0).narrow(0, first + 1, len - first - 1).abs().sum(Kind::Float).double_value(&[]), 0.0);
    // Each row is the greedy sequence up to and including its stop token, then padding.
    for row in 0..3 {
        let got: Vec<i64> = Vec::try_from(s.tokens.get(row)).unwrap();
        let want: Vec<i64> = Vec::try_from(g.get(row)).unwrap();
        let end = want.iter().position(|&t| t == stop).unwrap();
        assert_eq!(got[..=end], want[..=end], "row {row}");
        assert!(got[end + 1..].iter().all(|&t| t == 5), "row {row}: {got:?}");
    }
}

#[test]
fn sample_params_are_checked() {
    let cases = [
        (SampleParams::default().max_new_tokens(0), "max_new_tokens"),
        (SampleParams::default().temperature(0.0), "temperature"),
        (SampleParams::default().temperature(f64::NAN), "temperature"),
        (SampleParams::default().top_p(0.0), "top_p"),
        (SampleParams::default().top_p(1.5), "top_p"),
        (SampleParams::default().top_k(-1), "top_k"),
        (SampleParams::default().stop_ids(vec![-2]), "stop_ids"),
        (SampleParams::default().pad_id(-1), "pad_id"),
    ];
    for (p, field) in cases {
        assert!(matches!(p.check(), Err(HfError::InvalidParameter { ref name, .. }) if name == field), "{field}");
    }
    assert!(SampleParams::default().top_p(1.0).top_k(0).max_new_tokens(1).check().is_ok());
    assert_eq!(serde_json::from_str::<SampleParams>("{}").unwrap(), SampleParams::default());
    assert!(serde_json::from_str::<SampleParams>(r#"{"top": 1}"#).is_err());
    let (m, r) = fixture("qwen2_tied");
    let p = SampleParams::default().stop_ids(vec![96]).check().unwrap();
    let e = m.sample(&r["input_ids"], &r["attention_mask"], &p, &mut rl_core::rng_from_seed(0));
    assert!(matches!(e, Err(HfError::InvalidParameter { ref name, .. }) if name == "stop_ids"));
    let p = SampleParams::default().pad_id(96).check().unwrap();
    let e = m.sample(&r["input_ids"], &r["attention_mask"], &p, &mut rl_core::rng_from_seed(0));
    assert!(matches!(e, Err(HfError::InvalidParameter { ref name, .. }) if name == "pad_id"));
}

#[test]
fn top_k_and_top_p_only_draw_inside_the_kept_set() {
    let (m, r) = fixture("qwen2_untied");
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    for (k, p) in [(3, 1.0), (0, 0.5), (5, 0.7)] {
        let params = SampleParams::default().max_new_tokens(16).top_k(k).top_p(p).check().unwrap();
        let s = m.sample(ids, mask, &params, &mut rl_core::rng_from_seed(5)).unwrap();
        let full = Tensor::cat(&[ids, &s.tokens], 1);
        let logits = tch::no_grad(|| m.forward(&full, Some(&Tensor::cat(&[mask, &s.mask], 1)), None)).unwrap();
        let logp = logits.narrow(1, 6, 16).log_softmax(-1, Kind::Float);
        let chosen = logp.gather(-1, &s.tokens.unsqueeze(-1), false);
        // Rank of the chosen token (tokens strictly more likely) and the mass above it.
        let above = logp.gt_tensor(&(&chosen + 1e-6));
        let rank = above.sum_dim_intlist(-1, false, Kind::Int64).max().int64_value(&[]);
        let mass =
            (logp.exp() * above.to_kind(Kind::Float)).sum_dim_intlist(-1, false, Kind::Float).max().double_value(&[]);
        if k > 0 {
            assert!(rank < k, "top_k {k}: a token of rank {rank} was drawn");
        }
        assert!(mass < p + 1e-5, "top_p {p}: mass above a drawn token {mass}");
        assert!((chosen.squeeze_dim(-1) - &s.logprobs).abs().max().double_value(&[]) < 1e-5);
    }
}

#[test]
fn frozen_copy_is_independent_and_has_no_gradient() {
    let (m, r) = fixture("qwen3_bf16");
    let (ids, mask) = (&r["input_ids"], &r["attention_mask"]);
    let frozen = m.frozen_copy().unwrap();
    let before = tch::no_grad(|| frozen.forward(ids, Some(mask), None)).unwrap();
    assert_eq!(before, tch::no_grad(|| m.forward(ids, Some(mask), None)).unwrap());
    assert!(frozen.var_store().variables().values().all(|v| !v.requires_grad()));
    assert!(m.var_store().variables().values().all(|v| v.requires_grad()));
    tch::no_grad(|| {
        for (_, mut v) in m.var_store().variables() {
            let _ = v.g_mul_scalar_(1.5);
        }
    });
    assert_ne!(tch::no_grad(|| m.forward(ids, Some(mask), None)).unwrap(), before);
    assert_eq!(tch::no_grad(|| frozen.forward(ids, Some(mask), None)).unwrap(), before);
}

#[test]
fn sampling_is_the_same_in_two_threads() {
    let run = || {
        let (m, r) = fixture("llama3");
        let p = SampleParams::default().max_new_tokens(12).top_p(0.9).check().unwrap();
        let s = m.sample(&r["input_ids"], &r["attention_mask"], &p, &mut rl_core::rng_from_seed(42)).unwrap();
        (
            Vec::<i64>::try_from(s.tokens.flatten(0, -1)).unwrap(),
            Vec::<f32>::try_from(s.logprobs.flatten(0, -1)).unwrap(),
        )
    };
    let a = std::thread::spawn(run);
    let b = std::thread::spawn(run);
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_eq!(a.0, b.0);
    assert_eq!(
        a.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        b.1.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}
