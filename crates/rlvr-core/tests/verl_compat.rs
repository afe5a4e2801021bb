//! The four documented differences from verl's `core_algos` and the `ppo_kl` clamp, pinned with
//! numbers: `Compat::Native` (this crate's definition) against `Compat::Verl` (verl's
//! arithmetic, checked against literal transcriptions of verl's code), on both the libtorch
//! path (f64) and the fused CPU path (f32).
#![cfg(feature = "tch")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use rlvr_core::{
    Aggregation, Compat, GlobalCounts, GmpoParams, KlCovParams, LossConfig, LossInputs, LossMetrics, LossParams,
    Params, PolicyLoss, PpoParams,
};
use tch::{Kind, Tensor};

fn t2(v: &[f64], b: i64, t: i64) -> Tensor {
    Tensor::from_slice(v).view([b, t])
}

/// (loss, metrics) on the libtorch path in f64 and on the fused path in f32.
fn both(p: LossParams, logp: &Tensor, old: &Tensor, adv: &Tensor, mask: &Tensor) -> [(f64, LossMetrics); 2] {
    let counts = GlobalCounts::local(mask).unwrap();
    let run = |k: Kind, fused: bool| {
        let cfg = LossConfig::new(p.fused_cpu(fused).check().unwrap());
        let (l, o, a, m) = (logp.to_kind(k), old.to_kind(k), adv.to_kind(k), mask.to_kind(k));
        let out = cfg.loss(&LossInputs::new(&l, &o, &a, &m), &counts).unwrap();
        (f64::try_from(&out.loss).unwrap(), out.metrics)
    };
    [run(Kind::Double, false), run(Kind::Float, true)]
}

/// Difference (a): GMPO with an empty response in the micro-batch.
#[test]
fn gmpo_empty_rows_count_in_verl_mode() {
    // 4 rows, row 2 empty; sequence-level advantages
    let logp = t2(&[-1.0, -1.2, -0.8, -1.1, -2.0, -1.5, 0.0, 0.0, 0.0, -0.7, -0.9, -1.3], 4, 3);
    let old = t2(&[-1.1, -1.0, -0.9, -1.0, -1.9, -1.6, 0.0, 0.0, 0.0, -0.8, -0.8, -1.2], 4, 3);
    let adv = Tensor::from_slice(&[1.0, -0.5, 0.7, 0.25]);
    let mask = t2(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0], 4, 3);
    // verl geo_mean, literally: sign-aware clip, ratio = exp(Σ m dmin / (len + 1e-8)),
    // Ā = Σ m A / (len + 1e-8) with A = adv · mask, loss = mean over all 4 rows
    let a = adv.unsqueeze(1) * &mask;
    let d = &logp - &old;
    let sgn = a.sign();
    let dmin = &sgn * (&sgn * &d).minimum(&(&sgn * d.clamp(-0.4, 0.4)));
    let len = mask.sum_dim_intlist(1, false, Kind::Double);
    let ratio = ((dmin * &mask).sum_dim_intlist(1, false, Kind::Double) / (&len + 1e-8)).exp();
    let abar = (&a * &mask).sum_dim_intlist(1, false, Kind::Double) / (&len + 1e-8);
    let verl = f64::try_from((-abar * ratio).mean(Kind::Double)).unwrap();
    let p = LossParams::new(PolicyLoss::Gmpo(GmpoParams::default())).aggregation(Aggregation::SeqMeanTokenMean);
    let [(native, _), (native32, _)] = both(p, &logp, &old, &adv, &mask);
    let [(v, _), (v32, _)] = both(p.compat(Compat::Verl), &logp, &old, &adv, &mask);
    assert!((v - verl).abs() < 1e-15, "{v} vs verl {verl}");
    assert!((v32 - verl).abs() < 1e-6);
    // native averages over the 3 non-empty rows: verl's value is (B − 1)/B of it, i.e. native is
    // larger by 1/(B − 1) = 1/3 relative
    assert!((native * 3.0 / 4.0 - verl).abs() < 1e-7, "{native} vs {verl}");
    assert!((native32 - native).abs() < 1e-6);
    assert!((native / verl - 4.0 / 3.0).abs() < 1e-7);
}

/// Difference (b): GMPO's clip fractions.
#[test]
fn gmpo_clip_fractions_native_and_verl() {
    // one row, A > 0; δ = [0.5 (clipped above), −0.5 (below −ε_l: not clipped for A > 0), 0.1]
    // a second row, A < 0; δ = [−0.5 (clipped below), 0.5 (not clipped for A < 0), 0.0]
    let old = t2(&[-1.0; 6], 2, 3);
    let logp = &old + t2(&[0.5, -0.5, 0.1, -0.5, 0.5, 0.0], 2, 3);
    let adv = Tensor::from_slice(&[1.0, -1.0]);
    let mask = t2(&[1.0; 6], 2, 3);
    let p = LossParams::new(PolicyLoss::Gmpo(GmpoParams::default())).aggregation(Aggregation::SeqMeanTokenMean);
    for (_, m) in both(p, &logp, &old, &adv, &mask) {
        // native: the side actually clipped (1 upper of 6 tokens, 1 lower)
        assert_eq!(
            (m.clipfrac, m.clipfrac_upper, m.clipfrac_lower),
            (Some(2.0 / 6.0), Some(1.0 / 6.0), Some(1.0 / 6.0))
        );
    }
    for (_, m) in both(p.compat(Compat::Verl), &logp, &old, &adv, &mask) {
        // verl: δ outside [−ε_l, ε_h] on either side, split by the sign of A: pg_clipfrac = 2/6
        // (A > 0), pg_clipfrac_lower = 2/6 (A < 0)
        assert!((m.clipfrac.unwrap() - 2.0 / 6.0).abs() < 1e-12);
        assert!((m.clipfrac_upper.unwrap() - 2.0 / 6.0).abs() < 1e-12);
        assert!((m.clipfrac_lower.unwrap() - 2.0 / 6.0).abs() < 1e-12);
    }
}

fn ppo_case() -> (Tensor, Tensor, Tensor, Tensor) {
    let old = t2(&[-1.0, -1.5, -0.5, -2.0, -1.0, -0.7, -1.1, -0.9, -1.3, -1.0, -0.2, -0.4], 3, 4);
    let logp = &old + t2(&[0.1, -0.3, 0.05, 0.2, -0.1, 0.0, 0.3, -0.25, 0.15, 0.0, 0.0, 0.0], 3, 4);
    let adv = Tensor::from_slice(&[0.8, -1.2, 0.5]);
    let mask = t2(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0], 3, 4);
    (logp, old, adv, mask)
}

/// The per-token PPO loss of verl's vanilla (no dual clip hit here: |δ| small).
fn verl_vanilla_tokens(logp: &Tensor, old: &Tensor, adv: &Tensor) -> Tensor {
    let a = adv.unsqueeze(1);
    let r = (logp - old).clamp(-20.0, 20.0).exp();
    let l1 = -&a * &r;
    let l2 = -&a * r.clamp(0.8, 1.2);
    let lc = l1.maximum(&l2);
    lc.minimum(&(-&a * 3.0)).where_self(&a.lt(0.0), &lc)
}

/// Difference (c): `seq-mean-token-sum-norm` divides by `N_seq · L` here, by `L` in verl.
#[test]
fn seq_mean_token_sum_norm_native_and_verl() {
    let (logp, old, adv, mask) = ppo_case();
    let l = verl_vanilla_tokens(&logp, &old, &adv);
    // verl agg_loss: Σ_i Σ_t m ℓ / loss_scale_factor
    let verl = f64::try_from((&l * &mask).sum(Kind::Double) / 16.0).unwrap();
    let p = LossParams::default().aggregation(Aggregation::SeqMeanTokenSumNorm { scale: Some(16.0) });
    let [(native, _), (native32, _)] = both(p, &logp, &old, &adv, &mask);
    let [(v, _), (v32, _)] = both(p.compat(Compat::Verl), &logp, &old, &adv, &mask);
    assert!((v - verl).abs() < 1e-15 && (v32 - verl).abs() < 1e-6, "{v} vs verl {verl}");
    // native = verl / N_seq with N_seq = 3 non-empty rows
    assert!((native * 3.0 - verl).abs() < 1e-15, "{native} vs {verl}");
    assert!((native32 * 3.0 - verl).abs() < 1e-6);
}

/// Difference (d): `seq-mean-token-mean` divides rows by `len` here, by `len + 1e-8` in verl.
#[test]
fn seq_mean_token_mean_native_and_verl() {
    let (logp, old, adv, mask) = ppo_case();
    let l = verl_vanilla_tokens(&logp, &old, &adv);
    let len = mask.sum_dim_intlist(1, false, Kind::Double);
    let rows = (&l * &mask).sum_dim_intlist(1, false, Kind::Double);
    let verl = f64::try_from((&rows / (&len + 1e-8)).sum(Kind::Double) / 3.0).unwrap();
    let exact = f64::try_from((&rows / &len).sum(Kind::Double) / 3.0).unwrap();
    let p = LossParams::default().aggregation(Aggregation::SeqMeanTokenMean);
    let [(native, _), (native32, _)] = both(p, &logp, &old, &adv, &mask);
    let [(v, _), _] = both(p.compat(Compat::Verl), &logp, &old, &adv, &mask);
    assert!((v - verl).abs() < 1e-16, "{v} vs verl {verl}");
    assert!((native - exact).abs() < 1e-16 && (native32 - exact).abs() < 1e-6);
    // the size of the difference: each row's term shrinks by about 1e-8/len (len = 4, 3, 2)
    let rel = (native - v) / native.abs();
    assert!(rel.abs() > 1e-10 && rel.abs() < 1e-8, "relative difference {rel}");
}

/// The `ppo_kl` metric: verl clamps the log-ratio to ±20 for vanilla/CISPO/SAPO and reports
/// `mean |δ|` for KL-Cov; this crate reports `mean(old − logp)` unclamped.
#[test]
fn ppo_kl_clamp_native_and_verl() {
    let old = t2(&[-1.0, -30.0, -2.0, -1.0], 2, 2);
    let logp = t2(&[-1.5, -1.0, -2.5, -0.5], 2, 2); // δ = [−0.5, 29, −0.5, 0.5]
    let adv = Tensor::from_slice(&[1.0, -1.0]);
    let mask = t2(&[1.0; 4], 2, 2);
    let p = LossParams::new(PolicyLoss::Ppo(PpoParams::default()));
    for (_, m) in both(p, &logp, &old, &adv, &mask) {
        assert!((m.ppo_kl - (0.5 - 29.0 + 0.5 - 0.5) / 4.0).abs() < 1e-6, "{}", m.ppo_kl);
    }
    for (_, m) in both(p.compat(Compat::Verl), &logp, &old, &adv, &mask) {
        assert!((m.ppo_kl - (0.5 - 20.0 + 0.5 - 0.5) / 4.0).abs() < 1e-6, "{}", m.ppo_kl);
    }
    let old = t2(&[-1.0, -1.2, -2.0, -1.0], 2, 2);
    let p = LossParams::new(PolicyLoss::KlCov(KlCovParams::default()));
    let [(_, n), _] = both(p, &logp, &old, &adv, &mask);
    assert!((n.ppo_kl - (0.5 - 0.2 + 0.5 - 0.5) / 4.0).abs() < 1e-12);
    for (_, m) in both(p.compat(Compat::Verl), &logp, &old, &adv, &mask) {
        assert!((m.ppo_kl - (0.5 + 0.2 + 0.5 + 0.5) / 4.0).abs() < 1e-6, "{}", m.ppo_kl);
    }
}
