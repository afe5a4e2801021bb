//! Integration tests of the transformer policy: KV cache vs full forward, behaviour vs training
//! log-probs, padding, stop tokens, checkpoints, typed errors, and a tiny overfit.

use anyhow::Result;
use rl_lm::{LmConfig, LmError, LoadMode, LogProbOptions, SamplingParams, SequenceBatch, TransformerLm, WeightLoad};
use rl_nn::RlNnError;
use tch::{Device, Kind, Tensor};

const V: i64 = 24;

fn cfg() -> LmConfig {
    LmConfig::new(V, 48).d_model(32).n_layers(2).n_heads(4).d_ff(64)
}

fn device() -> Device {
    rl_nn::default_device().unwrap_or(Device::Cpu)
}

fn model(seed: u64) -> Result<TransformerLm> {
    // A larger init makes logits far from uniform, so the comparisons below are not trivial.
    Ok(TransformerLm::new(&cfg().init_std(0.3), device(), &mut rl_core::rng_from_seed(seed))?)
}

fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn prompts() -> Vec<Vec<i64>> {
    vec![vec![1, 5, 9, 3, 7, 11], vec![1, 4], vec![1, 20, 21, 6], vec![1, 13, 14, 15, 16, 17, 18]]
}

#[test]
fn kv_cache_matches_full_forward_at_every_position() -> Result<()> {
    let lm = model(1)?;
    // Left-padded batch of different prompts, followed by some continuation tokens.
    let conts: Vec<Vec<i64>> =
        vec![vec![3, 4, 5, 6, 7], vec![8, 9, 10, 2, 0], vec![11, 12, 13, 14, 15], vec![2, 0, 0, 0, 0]];
    let batch = SequenceBatch::pack(&prompts(), &conts, 0, lm.device())?;
    // Row 1 stops after 4 tokens and row 3 after 1: mark the rest as padding.
    let mask = batch.attention_mask.copy();
    let p = batch.prompt_width;
    let _ = mask.narrow(1, p + 4, 1).get(1).fill_(0.0);
    let _ = mask.narrow(1, p + 1, 4).get(3).fill_(0.0);
    let full = tch::no_grad(|| lm.forward(&batch.input_ids, Some(&mask)))?;
    let t = batch.input_ids.size()[1];

    // Prefill the prompt block, then one token at a time.
    let mut cache = lm.new_cache(4);
    let mut pieces = vec![tch::no_grad(|| {
        lm.forward_cached(&batch.input_ids.narrow(1, 0, p), Some(&mask.narrow(1, 0, p)), &mut cache)
    })?];
    for j in p..t {
        pieces.push(tch::no_grad(|| {
            lm.forward_cached(&batch.input_ids.narrow(1, j, 1), Some(&mask.narrow(1, j, 1)), &mut cache)
        })?);
    }
    assert_eq!(cache.len(), t);
    let inc = Tensor::cat(&pieces, 1);
    // Compare at every real (unmasked) position.
    let m = mask.unsqueeze(-1);
    let d = max_abs(&(&full * &m), &(&inc * &m));
    assert!(d < 1e-5, "cached vs full logits differ by {d}");

    // Uneven chunks give the same result too.
    let mut cache = lm.new_cache(4);
    let mut pieces = Vec::new();
    let mut j = 0;
    for w in [3, 5, 1, 2] {
        let w = w.min(t - j);
        pieces.push(tch::no_grad(|| {
            lm.forward_cached(&batch.input_ids.narrow(1, j, w), Some(&mask.narrow(1, j, w)), &mut cache)
        })?);
        j += w;
    }
    let inc = Tensor::cat(&pieces, 1);
    let d = max_abs(&(&full.narrow(1, 0, j) * m.narrow(1, 0, j)), &(&inc * m.narrow(1, 0, j)));
    assert!(d < 1e-5, "chunked cached vs full logits differ by {d}");
    Ok(())
}

#[test]
fn left_padding_does_not_change_a_row() -> Result<()> {
    let lm = model(2)?;
    let alone = tch::no_grad(|| lm.forward(&Tensor::from_slice(&[1i64, 4]).view([1, 2]).to(lm.device()), None))?;
    let batch = SequenceBatch::pack(&prompts(), &[[2], [2], [2], [2]], 0, lm.device())?;
    let padded = tch::no_grad(|| lm.forward(&batch.input_ids, Some(&batch.attention_mask)))?;
    let p = batch.prompt_width;
    let row = padded.get(1).narrow(0, p - 2, 2);
    assert!(max_abs(&row, &alone.get(0)) < 1e-5);

    // Greedy generation of a prompt alone equals its row in a padded batch.
    let params = SamplingParams::new(10).greedy(true);
    let mut rng = rl_core::rng_from_seed(0);
    let one = lm.generate(&[vec![1, 4]], &params, &mut rng)?;
    let many = lm.generate(&prompts(), &params, &mut rng)?;
    assert_eq!(one.responses()?[0], many.responses()?[1]);
    assert!(max_abs(&one.logprobs.get(0), &many.logprobs.get(1)) < 1e-5);
    Ok(())
}

#[test]
fn generation_with_and_without_cache_is_identical() -> Result<()> {
    let lm = model(3)?;
    for params in [
        SamplingParams::new(20).stop_token(Some(2)),
        SamplingParams::new(20).temperature(0.7).top_p(0.9).stop_token(Some(2)),
        SamplingParams::new(12).greedy(true),
    ] {
        let a = lm.generate(&prompts(), &params, &mut rl_core::rng_from_seed(5))?;
        let b = lm.generate(&prompts(), &params.clone().use_cache(false), &mut rl_core::rng_from_seed(5))?;
        assert_eq!(a.responses()?, b.responses()?, "{params:?}");
        assert_eq!(a.finished, b.finished);
        assert!(max_abs(&a.logprobs, &b.logprobs) < 1e-5);
        assert_eq!(a.batch.input_ids.size(), b.batch.input_ids.size());
    }
    // The same rng seed reproduces a sample; another seed (almost surely) does not.
    let params = SamplingParams::new(16);
    let a = lm.generate(&prompts(), &params, &mut rl_core::rng_from_seed(9))?;
    let b = lm.generate(&prompts(), &params, &mut rl_core::rng_from_seed(9))?;
    let c = lm.generate(&prompts(), &params, &mut rl_core::rng_from_seed(10))?;
    assert_eq!(a.responses()?, b.responses()?);
    assert_ne!(a.responses()?, c.responses()?);
    Ok(())
}

#[test]
fn behaviour_logprobs_match_training_forward() -> Result<()> {
    let lm = model(4)?;
    for (params, temperature) in [
        (SamplingParams::new(24).greedy(true).stop_token(Some(2)), 1.0),
        (SamplingParams::new(24).stop_token(Some(2)), 1.0),
        (SamplingParams::new(24).temperature(0.6).top_p(0.95).stop_token(Some(2)), 0.6),
    ] {
        let out = lm.generate(&prompts(), &params, &mut rl_core::rng_from_seed(1))?;
        let opts = LogProbOptions { temperature, entropy: true };
        let train = lm.response_logprobs(&out.batch, &opts)?;
        assert_eq!(train.logprobs.size(), out.logprobs.size());
        let d = max_abs(&train.logprobs, &out.logprobs);
        assert!(d < 1e-5, "{params:?}: training vs behaviour log-probs differ by {d}");
        assert!(train.logprobs.requires_grad());
        // Entropy: within [0, ln V] at real tokens, 0 elsewhere.
        let h = train.entropy.expect("entropy requested");
        assert!(h.min().double_value(&[]) >= -1e-6);
        assert!(h.max().double_value(&[]) <= (V as f64).ln() + 1e-5);
        let outside: Tensor = 1.0 - &out.batch.response_mask;
        let masked = (&h * outside).abs().max().double_value(&[]);
        assert_eq!(masked, 0.0);
    }
    Ok(())
}

#[test]
fn stop_token_and_response_mask() -> Result<()> {
    let lm = model(5)?;
    let stop = 2;
    let params = SamplingParams::new(30).stop_token(Some(stop)).pad_token(0);
    let out = lm.generate(&prompts(), &params, &mut rl_core::rng_from_seed(3))?;
    let r = out.batch.response_width();
    assert!(r <= 30);
    let ids: Vec<Vec<i64>> =
        (0..4).map(|i| Vec::<i64>::try_from(out.batch.input_ids.get(i))).collect::<Result<_, _>>()?;
    let mask: Vec<Vec<f32>> =
        (0..4).map(|i| Vec::<f32>::try_from(out.batch.response_mask.get(i))).collect::<Result<_, _>>()?;
    let lps: Vec<Vec<f32>> = (0..4).map(|i| Vec::<f32>::try_from(out.logprobs.get(i))).collect::<Result<_, _>>()?;
    let p = out.batch.prompt_width as usize;
    for row in 0..4 {
        let resp = &ids[row][p..];
        match resp.iter().position(|&t| t == stop) {
            Some(k) => {
                assert!(out.finished[row]);
                assert!(mask[row][..=k].iter().all(|&m| m == 1.0));
                assert!(mask[row][k + 1..].iter().all(|&m| m == 0.0));
                assert!(resp[k + 1..].iter().all(|&t| t == 0));
                assert!(lps[row][k + 1..].iter().all(|&l| l == 0.0));
                assert!(lps[row][..=k].iter().all(|&l| l < 0.0));
            }
            None => {
                assert!(!out.finished[row]);
                assert_eq!(r, 30);
                assert!(mask[row].iter().all(|&m| m == 1.0));
            }
        }
    }
    // The init is far from uniform, but with 30 tokens over 24 ids some row stops.
    assert!(out.finished.iter().any(|&f| f), "no row emitted the stop token");
    Ok(())
}

#[test]
fn invalid_inputs_give_typed_errors() -> Result<()> {
    let lm = model(6)?;
    let mut rng = rl_core::rng_from_seed(0);
    let params = SamplingParams::new(4);
    let empty: Vec<Vec<i64>> = vec![];
    assert!(matches!(lm.generate(&empty, &params, &mut rng), Err(LmError::EmptyBatch)));
    assert!(matches!(lm.generate(&[vec![1], vec![]], &params, &mut rng), Err(LmError::EmptySequence { row: 1 })));
    match lm.generate(&[vec![1, 2], vec![1, V]], &params, &mut rng) {
        Err(LmError::TokenOutOfRange { row: 1, position: 1, id, vocab_size }) => {
            assert_eq!((id, vocab_size), (V, V));
        }
        other => panic!("expected TokenOutOfRange, got {other:?}"),
    }
    assert!(matches!(lm.generate(&[vec![-1]], &params, &mut rng), Err(LmError::TokenOutOfRange { id: -1, .. })));
    assert!(matches!(
        lm.generate(&[vec![1; 40]], &SamplingParams::new(9), &mut rng),
        Err(LmError::SequenceTooLong { len: 49, max_len: 48 })
    ));
    assert!(matches!(
        lm.generate(&[vec![1]], &SamplingParams::new(4).temperature(-1.0), &mut rng),
        Err(LmError::InvalidParameter { .. })
    ));
    // Tensor inputs.
    let ids = Tensor::from_slice(&[1i64, 2, 3, 99]).view([2, 2]);
    assert!(matches!(lm.forward(&ids, None), Err(LmError::TokenOutOfRange { row: 1, position: 1, id: 99, .. })));
    assert!(matches!(lm.forward(&Tensor::zeros([2, 3], (Kind::Float, Device::Cpu)), None), Err(LmError::Shape { .. })));
    assert!(matches!(lm.forward(&Tensor::zeros([3], (Kind::Int64, Device::Cpu)), None), Err(LmError::Shape { .. })));
    assert!(matches!(lm.forward(&Tensor::zeros([0, 3], (Kind::Int64, Device::Cpu)), None), Err(LmError::EmptyBatch)));
    assert!(matches!(
        lm.forward(&Tensor::zeros([1, 49], (Kind::Int64, Device::Cpu)), None),
        Err(LmError::SequenceTooLong { len: 49, .. })
    ));
    let ok = Tensor::zeros([2, 3], (Kind::Int64, Device::Cpu));
    assert!(matches!(
        lm.forward(&ok, Some(&Tensor::ones([2, 4], (Kind::Float, Device::Cpu)))),
        Err(LmError::Shape { .. })
    ));
    // Cache: batch mismatch and overflow leave the cache untouched.
    let mut cache = lm.new_cache(2);
    let _ = lm.forward_cached(&ok, None, &mut cache)?;
    assert!(matches!(
        lm.forward_cached(&Tensor::zeros([3, 1], (Kind::Int64, Device::Cpu)), None, &mut cache),
        Err(LmError::Shape { .. })
    ));
    assert!(matches!(
        lm.forward_cached(&Tensor::zeros([2, 46], (Kind::Int64, Device::Cpu)), None, &mut cache),
        Err(LmError::SequenceTooLong { len: 49, .. })
    ));
    assert_eq!(cache.len(), 3);
    // Batches.
    assert!(matches!(SequenceBatch::pack(&[vec![1]], &[vec![1], vec![2]], 0, Device::Cpu), Err(LmError::Shape { .. })));
    assert!(matches!(
        SequenceBatch::pack(&[vec![1]], &[Vec::<i64>::new()], 0, Device::Cpu),
        Err(LmError::Shape { .. })
    ));
    let mut b = SequenceBatch::pack(&[vec![1]], &[vec![3]], 0, Device::Cpu)?;
    b.prompt_width = 2;
    assert!(matches!(lm.response_logprobs(&b, &LogProbOptions::default()), Err(LmError::InvalidParameter { .. })));
    Ok(())
}

#[test]
fn checkpoint_round_trips() -> Result<()> {
    let dir = tempfile::tempdir()?;
    for tie in [true, false] {
        let c = cfg().tie_embeddings(tie);
        let a = TransformerLm::new(&c, device(), &mut rl_core::rng_from_seed(7))?;
        let mut b = TransformerLm::new(&c, device(), &mut rl_core::rng_from_seed(8))?;
        let ids = Tensor::from_slice(&[1i64, 5, 6, 7]).view([1, 4]).to(a.device());
        let la = tch::no_grad(|| a.forward(&ids, None))?;
        assert!(max_abs(&la, &tch::no_grad(|| b.forward(&ids, None))?) > 1e-3);
        let file = dir.path().join(format!("m{tie}.safetensors"));
        a.save(&file)?;
        b.load(&file)?;
        assert_eq!(max_abs(&la, &tch::no_grad(|| b.forward(&ids, None))?), 0.0);
        assert_eq!(a.num_parameters(), c.num_parameters());

        let sub = dir.path().join(format!("pretrained{tie}"));
        a.save_pretrained(&sub)?;
        let back = TransformerLm::from_pretrained(&sub, device())?;
        assert_eq!(back.config(), a.config());
        assert_eq!(max_abs(&la, &tch::no_grad(|| back.forward(&ids, None))?), 0.0);
    }
    Ok(())
}

#[test]
fn load_by_name_errors_are_typed_and_harmless() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = model(9)?;
    let mut b = model(10)?;
    let before = b.var_store().variables()["tok_emb.weight"].copy();
    let unchanged = |b: &TransformerLm| max_abs(&b.var_store().variables()["tok_emb.weight"], &before) == 0.0;
    let vars: Vec<(String, Tensor)> = a.var_store().variables().into_iter().collect();

    // Missing tensor.
    let f = dir.path().join("missing.safetensors");
    let some: Vec<(String, Tensor)> =
        vars.iter().filter(|(n, _)| n != "ln_f.bias").map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
    rl_nn::checkpoint::save_tensors(&some, &f)?;
    match b.load_weights(&f, &WeightLoad::default()) {
        Err(LmError::Nn(RlNnError::MissingTensor { name, .. })) => assert_eq!(name, "ln_f.bias"),
        other => panic!("expected MissingTensor, got {other:?}"),
    }
    assert!(unchanged(&b));
    assert!(matches!(b.load(&f), Err(LmError::Nn(RlNnError::MissingTensor { .. }))));

    // Wrong shape.
    let f = dir.path().join("shape.safetensors");
    let mut wrong: Vec<(String, Tensor)> = vars.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
    for (n, t) in &mut wrong {
        if n == "blocks.1.mlp.fc1.weight" {
            *t = Tensor::zeros([65, 32], (Kind::Float, Device::Cpu));
        }
    }
    rl_nn::checkpoint::save_tensors(&wrong, &f)?;
    match b.load_weights(&f, &WeightLoad::default()) {
        Err(LmError::Nn(RlNnError::TensorShape { name, expected, got, .. })) => {
            assert_eq!(name, "blocks.1.mlp.fc1.weight");
            assert_eq!((expected, got), (vec![64, 32], vec![65, 32]));
        }
        other => panic!("expected TensorShape, got {other:?}"),
    }
    assert!(unchanged(&b));

    // Unexpected tensors (strict), accepted with AllowExtra.
    let f = dir.path().join("extra.safetensors");
    let mut extra: Vec<(String, Tensor)> = vars.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
    extra.push(("value_head.weight".into(), Tensor::zeros([1, 32], (Kind::Float, Device::Cpu))));
    rl_nn::checkpoint::save_tensors(&extra, &f)?;
    match b.load_weights(&f, &WeightLoad::default()) {
        Err(LmError::Nn(RlNnError::UnexpectedTensors { names, .. })) => assert_eq!(names, ["value_head.weight"]),
        other => panic!("expected UnexpectedTensors, got {other:?}"),
    }
    assert!(unchanged(&b));
    b.load_weights(&f, &WeightLoad { prefix: String::new(), mode: LoadMode::AllowExtra })?;
    assert!(!unchanged(&b));

    // Prefixed names (e.g. a policy saved inside a larger model), with a dtype conversion.
    let f = dir.path().join("prefixed.safetensors");
    let prefixed: Vec<(String, Tensor)> =
        vars.iter().map(|(n, t)| (format!("policy.{n}"), t.to_kind(Kind::Double))).collect();
    rl_nn::checkpoint::save_tensors(&prefixed, &f)?;
    let mut c = model(11)?;
    match c.load_weights(&f, &WeightLoad::default()) {
        Err(LmError::Nn(RlNnError::MissingTensor { name, .. })) => assert_eq!(name, "blocks.0.attn.proj.bias"),
        other => panic!("expected MissingTensor, got {other:?}"),
    }
    c.load_weights(&f, &WeightLoad { prefix: "policy.".into(), mode: LoadMode::Strict })?;
    let ids = Tensor::from_slice(&[1i64, 2, 3]).view([1, 3]).to(a.device());
    assert!(max_abs(&tch::no_grad(|| a.forward(&ids, None))?, &tch::no_grad(|| c.forward(&ids, None))?) < 1e-6);

    // Corrupt and absent files.
    let f = dir.path().join("corrupt.safetensors");
    std::fs::write(&f, b"not a checkpoint")?;
    assert!(matches!(
        c.load_weights(&f, &WeightLoad::default()),
        Err(LmError::Nn(RlNnError::CorruptCheckpoint { .. }))
    ));
    assert!(matches!(c.load(dir.path().join("absent")), Err(LmError::Nn(RlNnError::MissingFile { .. }))));
    Ok(())
}

#[test]
fn overfits_a_fixed_sequence() -> Result<()> {
    use tch::nn::OptimizerConfig;
    let lm = TransformerLm::new(&cfg(), device(), &mut rl_core::rng_from_seed(12))?;
    let batch = SequenceBatch::pack(
        &[vec![1, 5, 6], vec![1, 9]],
        &[vec![7, 8, 9, 10, 11, 2], vec![12, 13, 2]],
        0,
        lm.device(),
    )?;
    let mut opt = tch::nn::Adam::default().build(lm.var_store(), 3e-3)?;
    let loss_of = |lm: &TransformerLm| -> Result<Tensor> {
        let lp = lm.response_logprobs(&batch, &LogProbOptions::default())?;
        Ok(-(lp.logprobs.sum(Kind::Float) / batch.response_mask.sum(Kind::Float)))
    };
    let first = loss_of(&lm)?.double_value(&[]);
    for _ in 0..40 {
        let loss = loss_of(&lm)?;
        opt.backward_step(&loss);
    }
    let last = loss_of(&lm)?.double_value(&[]);
    assert!(first > 2.5, "initial loss {first} should be near ln 24");
    assert!(last < 0.2 * first, "loss {first} -> {last}");
    // Greedy decoding now reproduces the training responses.
    let out = lm.generate(
        &[vec![1, 5, 6], vec![1, 9]],
        &SamplingParams::new(8).greedy(true).stop_token(Some(2)),
        &mut rl_core::rng_from_seed(0),
    )?;
    assert_eq!(out.responses()?, vec![vec![7, 8, 9, 10, 11, 2], vec![12, 13, 2]]);
    Ok(())
}

#[test]
fn non_finite_weights_are_refused_naming_the_tensor() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = model(9)?;
    let mut b = model(10)?;
    let before = b.var_store().variables()["blocks.0.attn.proj.weight"].copy();
    let mut vars: Vec<(String, Tensor)> =
        a.var_store().variables().into_iter().map(|(n, t)| (n, t.to_device(Device::Cpu).copy())).collect();
    for (n, t) in &mut vars {
        if n == "blocks.0.attn.proj.weight" {
            let _ = t.view([-1]).get(7).fill_(f64::INFINITY);
        }
    }
    let f = dir.path().join("inf.safetensors");
    rl_nn::checkpoint::save_tensors(&vars, &f)?;
    for mode in [LoadMode::Strict, LoadMode::AllowExtra] {
        match b.load_weights(&f, &WeightLoad { prefix: String::new(), mode }) {
            Err(LmError::Nn(RlNnError::NonFiniteTensor { name, index, value, .. })) => {
                assert_eq!((name.as_str(), index, value), ("blocks.0.attn.proj.weight", 7, f64::INFINITY));
            }
            other => panic!("expected NonFiniteTensor, got {other:?}"),
        }
    }
    assert!(matches!(b.load(&f), Err(LmError::Nn(RlNnError::NonFiniteTensor { .. }))));
    assert_eq!(max_abs(&b.var_store().variables()["blocks.0.attn.proj.weight"], &before), 0.0);
    // through save_pretrained / from_pretrained too
    let pre = dir.path().join("pre");
    a.save_pretrained(&pre)?;
    rl_nn::checkpoint::save_tensors(&vars, pre.join(rl_lm::checkpoint::WEIGHTS_FILE))?;
    assert!(matches!(
        TransformerLm::from_pretrained(&pre, Device::Cpu),
        Err(LmError::Nn(RlNnError::NonFiniteTensor { .. }))
    ));
    Ok(())
}
