//! One optimisation step of a tiny token policy with every `rlvr-core` loss.
//!
//! The policy is a logit table `[G, T, V]` (prompt × position × vocabulary). For each of `G`
//! prompts we sample `K` responses, reward a response with 1 when it contains the prompt's
//! "answer" token at least twice, compute GRPO advantages, and take one Adam step with each
//! loss from the same starting point, printing the loss and its metrics. Two extra rows show
//! LPO fed with a replayed (off-policy) batch and PPO with POPO's decoupled correction.
//!
//! ```text
//! cargo run --release --example rlvr_losses --features rlvr-core-tch
//! ```
use anyhow::Result;
use rand::Rng;
use rlvr_core::{
    entropy_from_logits, token_log_probs, AdvantageConfig, AdvantageParams, Aggregation, CispoParams, ClipCovParams,
    DecoupledParams, GlobalCounts, GmpoParams, Groups, GspoParams, KlCovParams, KlParams, LossConfig, LossInputs,
    LossParams, LpoParams, Params, PolicyLoss, PpoParams, Projection, SapoParams,
};
use tch::nn::{Adam, OptimizerConfig, VarStore};
use tch::{Device, Kind, Tensor};

const G: i64 = 4; // prompts
const K: i64 = 8; // responses per prompt
const T: i64 = 12; // max response length
const V: i64 = 8; // vocabulary

fn main() -> Result<()> {
    // every random number from one seeded stream (never libtorch's global generator)
    let mut rng = rl_core::rng_from_seed(0);
    let dev = Device::Cpu;
    let f32s = (Kind::Float, dev);
    let init = rl_nn::rand::standard_normal(&[G, T, V], f32s, &mut rng)? * 0.5;

    // --- rollout with the initial policy -------------------------------------------------
    let logits = init.unsqueeze(1).expand([G, K, T, V], false).reshape([G * K * T, V]);
    let tokens = rl_nn::rand::categorical(&logits, &mut rng)?.view([G * K, T]);
    let answer = Tensor::arange(G, (Kind::Int64, dev)).remainder(V).repeat_interleave_self_int(K, 0, None).unsqueeze(1);
    let lens: Vec<i64> = (0..G * K).map(|_| rng.random_range(6..=T)).collect();
    let lengths = Tensor::from_slice(&lens).view([G * K, 1]);
    let mask = Tensor::arange(T, (Kind::Int64, dev)).unsqueeze(0).lt_tensor(&lengths);
    let hits = tokens.eq_tensor(&answer).logical_and(&mask).sum_dim_intlist(1, false, Kind::Int64);
    let rewards: Vec<f64> = Vec::<i64>::try_from(hits)?.into_iter().map(|h| if h >= 2 { 1.0 } else { 0.0 }).collect();
    let groups = Groups::uniform(G as usize, K as usize)?;
    let adv = AdvantageConfig::new(AdvantageParams::default().check()?).compute(&rewards, &groups, None)?;
    println!("rewards per group: {:?}", rewards.chunks(K as usize).map(|c| c.iter().sum::<f64>()).collect::<Vec<_>>());
    println!("advantage metrics: {:?}\n", adv.metrics().0);
    let adv_t = adv.to_tensor(dev)?;
    let logp_of = |table: &Tensor| -> Result<(Tensor, Tensor)> {
        let logits = table.unsqueeze(1).expand([G, K, T, V], false).reshape([G * K, T, V]);
        Ok((token_log_probs(&logits, &tokens)?, entropy_from_logits(&logits)?))
    };
    let (old_logp, _) = logp_of(&init)?;
    let old_logp = old_logp.detach();
    let ref_logp = old_logp.copy();
    // a "replayed" batch: pretend the tokens came from a slightly older behaviour policy
    let behave_logp = &old_logp - rl_nn::rand::standard_normal(&[G * K, T], f32s, &mut rng)?.abs() * 0.05;
    let counts = GlobalCounts::local(&mask)?;

    let cases: Vec<(&str, LossParams, bool)> = vec![
        ("ppo (verl vanilla, dual clip)", LossParams::new(PolicyLoss::Ppo(PpoParams::default())), false),
        (
            "ppo dapo clip-higher + k3 kl",
            LossParams::new(PolicyLoss::Ppo(PpoParams::dapo())).kl(Some(KlParams::default())),
            false,
        ),
        (
            "gspo",
            LossParams::new(PolicyLoss::Gspo(GspoParams::default())).aggregation(Aggregation::SeqMeanTokenMean),
            false,
        ),
        ("cispo", LossParams::new(PolicyLoss::Cispo(CispoParams::default())), false),
        (
            "sapo",
            LossParams::new(PolicyLoss::Sapo(SapoParams::default())).aggregation(Aggregation::SeqMeanTokenMean),
            false,
        ),
        ("reinforce / gpg", LossParams::new(PolicyLoss::Reinforce), false),
        ("clip-cov", LossParams::new(PolicyLoss::ClipCov(ClipCovParams::default())), false),
        ("kl-cov", LossParams::new(PolicyLoss::KlCov(KlCovParams::default())), false),
        (
            "gmpo",
            LossParams::new(PolicyLoss::Gmpo(GmpoParams::default())).aggregation(Aggregation::SeqMeanTokenMean),
            false,
        ),
        (
            "lpo forward",
            LossParams::new(PolicyLoss::Lpo(LpoParams::new(Projection::Forward)))
                .aggregation(Aggregation::SeqMeanTokenSum),
            false,
        ),
        (
            "lpo reverse",
            LossParams::new(PolicyLoss::Lpo(LpoParams::new(Projection::Reverse)))
                .aggregation(Aggregation::SeqMeanTokenSum),
            false,
        ),
        (
            "lpo pointwise",
            LossParams::new(PolicyLoss::Lpo(LpoParams::new(Projection::Pointwise)))
                .aggregation(Aggregation::SeqMeanTokenSum),
            false,
        ),
        (
            "lpo forward, replayed",
            LossParams::new(PolicyLoss::Lpo(LpoParams::new(Projection::Forward)))
                .aggregation(Aggregation::SeqMeanTokenSum),
            true,
        ),
        ("ppo + decoupled IS, replayed", LossParams::default().correction(Some(DecoupledParams::default())), true),
    ];

    for (name, params, replayed) in cases {
        let cfg = LossConfig::new(params.entropy_coef(1e-3).check()?);
        let mut vs = VarStore::new(dev);
        let table = vs.root().var_copy("logits", &init);
        let mut opt = Adam::default().build(&vs, 0.05)?;
        let (logp, entropy) = logp_of(&table)?;
        let mut inputs = LossInputs::new(&logp, &old_logp, &adv_t, &mask)
            .reference(&ref_logp)
            .entropy(&entropy)
            .groups(&groups)
            .seed(1);
        if replayed {
            inputs = inputs.behaviour(&behave_logp);
        }
        let out = cfg.loss(&inputs, &counts)?;
        opt.zero_grad();
        out.loss.backward();
        opt.step();
        // the same loss after the step (the ratio now moves away from 1)
        let (logp2, entropy2) = logp_of(&table)?;
        let mut inputs2 = LossInputs::new(&logp2, &old_logp, &adv_t, &mask)
            .reference(&ref_logp)
            .entropy(&entropy2)
            .groups(&groups)
            .seed(2);
        if replayed {
            inputs2 = inputs2.behaviour(&behave_logp);
        }
        let after = tch::no_grad(|| cfg.loss(&inputs2, &counts))?;
        println!("{name:<32} loss {:+.5} -> {:+.5}", out.metrics.loss, after.metrics.loss);
        let m = after.metrics.to_metrics();
        let shown: Vec<String> =
            m.iter().filter(|(k, _)| !matches!(*k, "loss" | "tokens")).map(|(k, v)| format!("{k}={v:.4}")).collect();
        println!("    after step: {}", shown.join(" "));
        vs.freeze();
    }
    Ok(())
}
